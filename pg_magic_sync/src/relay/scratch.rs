//! The pass's scratch tables: temporary tables of the pass's transaction
//! (`ON COMMIT DROP`), each filled by one step and read by those after it.
//! Every one is listed here with what it holds, and `drop_all` drops them
//! as a pass ends, so two passes may share a transaction (as tests do).
//!
//! Each step creates its tables with the query that fills them (a table
//! made by `CREATE TABLE ... AS` is planned for its real size); a test
//! below holds every `sync_pass_*` name the relay's code uses to this list.

use crate::spi;

/// Every scratch table of a pass, in the order the steps make them.
pub const TABLES: &[(&str, &str)] = &[
    (
        "sync_pass_live",
        "observe: the replicas live now, by the declared condition",
    ),
    (
        "sync_pass_notes",
        "plan: the notes this pass plans, up to a batch",
    ),
    (
        "sync_pass_group_notes",
        "plan: the group notes this pass plans",
    ),
    (
        "sync_pass_changed",
        "plan: each row the notes name, with its newest note",
    ),
    (
        "sync_pass_touched",
        "plan: the rows touched, for every replica or for one",
    ),
    (
        "sync_pass_old_pointers",
        "plan: what touched rows pointed at before the change",
    ),
    (
        "sync_pass_replicas",
        "plan: the live replicas, and whether each is provisioned",
    ),
    (
        "sync_pass_blocked",
        "plan: rows set aside and every row that points at one",
    ),
    (
        "sync_pass_provisioning",
        "plan/snapshot: the replicas provisioned from scratch",
    ),
    (
        "sync_pass_whole",
        "plan/snapshot: whole tables sent without listing their rows",
    ),
    (
        "sync_pass_plan",
        "plan: what each replica is sent: (replica, table, key, op, note)",
    ),
    (
        "sync_pass_current",
        "plan/incremental: the replicas kept up to date",
    ),
    (
        "sync_pass_question",
        "plan/incremental: the rows in question",
    ),
    ("sync_pass_want", "plan/incremental: the rows kept"),
    (
        "sync_pass_candidates",
        "plan/incremental: rows a round may keep",
    ),
    ("sync_pass_frontier", "plan: the rows a round starts from"),
    ("sync_pass_reached", "plan: the rows a round reaches"),
    ("sync_pass_cohorts", "cohorts: each replica's cohort"),
    (
        "sync_pass_representatives",
        "cohorts: the replica each cohort's plan is read from",
    ),
    (
        "sync_pass_rows",
        "load: rows sent to several cohorts, encoded once",
    ),
];

const MADE_BY_THIS_PASS: &str = "\
    SELECT string_agg(quote_ident(relname), ', ') FROM pg_class \
    WHERE relnamespace = pg_my_temp_schema() AND relname = ANY($1)";

/// Drops the scratch tables this pass made (only those: `DROP ... IF
/// EXISTS` would write a notice of each of the rest).
pub fn drop_all() {
    let names: Vec<String> = TABLES.iter().map(|(name, _)| name.to_string()).collect();
    let made: Option<String> = spi::one(MADE_BY_THIS_PASS, &[names.into()]);
    if let Some(made) = made {
        spi::run(&format!("DROP TABLE {made}"));
    }
}

#[cfg(test)]
mod tests {
    use super::TABLES;

    /// The relay's sources, as the crate is built from them.
    const SOURCES: &[&str] = &[
        include_str!("mod.rs"),
        include_str!("observe.rs"),
        include_str!("plan/mod.rs"),
        include_str!("plan/snapshot.rs"),
        include_str!("plan/incremental.rs"),
        include_str!("plan/reach.rs"),
        include_str!("cohorts.rs"),
        include_str!("load.rs"),
        include_str!("record.rs"),
    ];

    #[test]
    fn every_scratch_table_the_relay_names_is_listed_and_so_dropped() {
        for source in SOURCES {
            for (at, _) in source.match_indices("sync_pass_") {
                let name: String = source[at..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                assert!(
                    TABLES.iter().any(|(listed, _)| *listed == name),
                    "{name} is not in relay/scratch.rs"
                );
            }
        }
    }
}

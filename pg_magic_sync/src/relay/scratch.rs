//! The pass's scratch tables: temporary tables that live as long as the
//! session, each filled by one step of a pass and read by those after it.
//! Every one is listed here with its columns, and made here the first time
//! a pass of the session needs it: making and dropping a table costs about
//! a millisecond (its catalog rows, its files, its TOAST table), emptying a
//! small one a few microseconds.
//!
//! `begin` empties them all as a pass starts, so that nothing is left over
//! from a pass that failed or was undone, or from an earlier pass of the
//! same transaction (as tests run). A small table is emptied by DELETE (its
//! few dead rows are pruned as later passes read its pages); a large one by
//! TRUNCATE, which gives its space back: `end` does that as a pass ends.
//!
//! A table's statistics are taken (`analyze`) when it is large, so the
//! planner plans a big pass for its real sizes, and the first time it
//! holds anything; a small pass pays nothing for them, and a statement
//! that reads only small ones runs the plan kept from the last time they
//! were small (spi.rs), rather than being planned again. A test below holds
//! every `sync_pass_*` name the relay's code uses to this list.

use crate::declare::catalog_changes;
use crate::spi;
use crate::temp_tables::{relations_of, sizes, Sizes, SMALL_PAGES};

/// Every scratch table of a pass, in the order the steps fill them, with
/// its columns: those the query that fills it answers (a key or a name
/// compares byte for byte, as in the engine's own tables).
pub const TABLES: &[(&str, &str)] = &[
    // observe: the replicas live now, by the declared condition.
    ("sync_pass_live", "id uuid, partition text"),
    // plan: the notes this pass plans, up to a batch.
    (
        "sync_pass_notes",
        "at tid, id bigint, table_name text COLLATE \"C\", key text COLLATE \"C\"",
    ),
    // plan: the group notes this pass plans.
    (
        "sync_pass_group_notes",
        "id bigint, table_name text, group_key text, key text, replica uuid",
    ),
    // plan: each row the notes name, with its newest note.
    (
        "sync_pass_changed",
        "table_name text COLLATE \"C\", key text COLLATE \"C\", note bigint",
    ),
    // plan: the rows touched, for every replica or for one.
    ("sync_pass_touched", ROWS),
    // observe (relay/redeclared.rs): the tables whose rows a replica holds
    // and keeps are sent again, their bytes changed by a declaration; for
    // every replica (replica NULL) or for one whose build gained a column
    // (relay/columns_gained.rs).
    (
        "sync_pass_resent",
        "replica uuid, table_name text COLLATE \"C\"",
    ),
    // plan: what touched rows pointed at before the change.
    (
        "sync_pass_old_pointers",
        "table_name text COLLATE \"C\", key text COLLATE \"C\", reference int, \
         parent text COLLATE \"C\", parent_key text COLLATE \"C\"",
    ),
    // plan: the live replicas, and whether each is provisioned.
    (
        "sync_pass_replicas",
        "id uuid, provision boolean, partition text",
    ),
    // plan/behind: the replicas far behind, planned nothing this pass;
    // whether each follows a stand-in, and the stand-in's last message.
    (
        "sync_pass_behind",
        "id uuid, follows boolean, stand_in_last bigint",
    ),
    // plan/behind: the replicas planned what they are owed.
    ("sync_pass_released", "id uuid"),
    // plan: rows set aside and every row that points at one.
    ("sync_pass_blocked", ROWS),
    // plan/snapshot: the replicas provisioned from scratch.
    ("sync_pass_provisioning", "id uuid, partition text"),
    // plan/snapshot, journal.rs: those a journaled table is planned for
    // (the stand-ins too), and those another table is (all but them).
    (
        "sync_pass_provisioning_journaled",
        "id uuid, partition text",
    ),
    ("sync_pass_provisioning_own", "id uuid, partition text"),
    // plan/snapshot: whole tables sent without listing their rows.
    (
        "sync_pass_whole",
        "replica uuid, table_name text COLLATE \"C\"",
    ),
    // plan: what each replica is sent: (replica, table, key, op, note).
    (
        "sync_pass_plan",
        "replica uuid NOT NULL, table_name text COLLATE \"C\" NOT NULL, \
         key text COLLATE \"C\" NOT NULL, op text NOT NULL, note bigint NOT NULL",
    ),
    // plan/incremental: the replicas kept up to date.
    ("sync_pass_current", "id uuid, partition text"),
    // plan/incremental, journal.rs: those a journaled table is planned for
    // (all but the followers), and those another table is (all but the
    // stand-ins).
    ("sync_pass_current_journaled", "id uuid, partition text"),
    ("sync_pass_current_own", "id uuid, partition text"),
    // plan/incremental: what the replicas hold of the rows touched.
    (
        "sync_pass_touched_held",
        "replica uuid, table_name text COLLATE \"C\", key text COLLATE \"C\", \
         note bigint, leaving bigint, refused boolean",
    ),
    // plan/incremental: the rows in question.
    ("sync_pass_question", ROWS),
    // plan/incremental: the rows kept.
    ("sync_pass_want", ROWS),
    // plan/incremental: rows a round may keep.
    ("sync_pass_candidates", ROWS),
    // plan: the rows a round starts from.
    ("sync_pass_frontier", ROWS),
    // plan: the rows a round reaches, as the queries that reach them write
    // names and keys (in the database's collation).
    (
        "sync_pass_reached",
        "replica uuid, table_name text, key text",
    ),
    // cohorts: each replica's cohort.
    (
        "sync_pass_cohorts",
        "replica uuid, provision boolean, cohort int",
    ),
    // cohorts: the replica each cohort's plan is read from.
    ("sync_pass_representatives", "cohort int, replica uuid"),
    // load: rows sent to several cohorts, encoded once.
    (
        "sync_pass_rows",
        "table_name text COLLATE \"C\" NOT NULL, key text COLLATE \"C\" NOT NULL, \
         bytes bytea NOT NULL",
    ),
];

/// Rows of a table for a replica, or for every replica (NULL).
const ROWS: &str = "replica uuid, table_name text COLLATE \"C\", key text COLLATE \"C\"";

/// Whether the planner needs fresh statistics of the table. Emptying it
/// (TRUNCATE) forgets its statistics' size, so a large table filled again
/// is analyzed again, but not twice for the same rows.
fn stale(table: &Sizes) -> bool {
    let never = table.analyzed_pages == 0;
    let large_and_changed = table.pages > SMALL_PAGES && table.pages != table.analyzed_pages;
    table.pages > 0 && (never || large_and_changed)
}

/// Makes the scratch tables this session lacks and empties the others.
pub fn begin() {
    let mut statements = Vec::new();
    let mut large = Vec::new();
    for (name, columns) in TABLES {
        match sizes(name).map(|f| f.pages) {
            None => statements.push(format!("CREATE TEMP TABLE {name} ({columns})")),
            Some(0) => {}
            Some(pages) if pages <= SMALL_PAGES => statements.push(format!("DELETE FROM {name}")),
            Some(_) => large.push(*name),
        }
    }
    if !large.is_empty() {
        statements.push(format!("TRUNCATE {}", large.join(", ")));
    }
    let made = statements.iter().any(|s| s.starts_with("CREATE"));
    if !statements.is_empty() {
        spi::run(&statements.join("; "));
    }
    if made {
        not_counted_as_catalog_changes();
    }
}

/// Emptying a scratch table by TRUNCATE, or taking its statistics,
/// changes its catalog row: none of them is what the check of the
/// declarations reads (declare/drift.rs), which would otherwise run again
/// at the next pass.
fn not_counted_as_catalog_changes() {
    let relations = TABLES
        .iter()
        .flat_map(|(name, _)| relations_of(name))
        .collect();
    catalog_changes::not_counting(relations);
}

/// Gives back the space of the large tables as a pass ends; the small ones
/// are emptied by the next pass.
pub fn end() {
    let large: Vec<&str> = TABLES
        .iter()
        .map(|(name, _)| *name)
        .filter(|name| sizes(name).is_some_and(|f| f.pages > SMALL_PAGES))
        .collect();
    if !large.is_empty() {
        spi::run(&format!("TRUNCATE {}", large.join(", ")));
    }
}

/// Empties one scratch table within a pass (a round's frontier, what it
/// reached).
pub fn empty(name: &str) {
    let pages = sizes(name).map_or(0, |f| f.pages);
    if pages > SMALL_PAGES {
        spi::run(&format!("TRUNCATE {name}"));
    } else if pages > 0 {
        spi::run(&format!("DELETE FROM {name}"));
    }
}

/// Takes the statistics of those of `names` the planner would otherwise
/// misjudge: large ones whose size changed since their statistics were
/// taken, and those that never had any. Without any, it takes a table of a
/// few rows for thousands.
pub fn analyze(names: &[&str]) {
    let stale: Vec<&str> = names
        .iter()
        .copied()
        .filter(|name| sizes(name).is_some_and(|f| stale(&f)))
        .collect();
    if !stale.is_empty() {
        spi::run(&format!("ANALYZE {}", stale.join(", ")));
    }
}

#[cfg(test)]
mod tests {
    use super::TABLES;
    use crate::temp_tables::scratch_names;

    /// The relay's sources, as the crate is built from them, and its fixed
    /// statements.
    const SOURCES: &[&str] = &[
        include_str!("mod.rs"),
        include_str!("observe.rs"),
        include_str!("plan/mod.rs"),
        include_str!("plan/snapshot.rs"),
        include_str!("plan/incremental.rs"),
        include_str!("../catalog/reach.rs"),
        include_str!("cohorts.rs"),
        include_str!("journal.rs"),
        include_str!("redeclared.rs"),
        include_str!("columns_gained.rs"),
        include_str!("load.rs"),
        include_str!("record/mod.rs"),
        include_str!("record/members.rs"),
        include_str!("record/packing.rs"),
        include_str!("record/rows.rs"),
        include_str!("record/writer.rs"),
        include_str!("record/written.rs"),
        include_str!("../../../sql/statements/relay.sql"),
        include_str!("../../../sql/statements/relay/cohorts.sql"),
        include_str!("../../../sql/statements/relay/columns_gained.sql"),
        include_str!("../../../sql/statements/relay/journal.sql"),
        include_str!("../../../sql/statements/relay/observe.sql"),
        include_str!("../../../sql/statements/relay/plan.sql"),
        include_str!("../../../sql/statements/relay/plan/incremental.sql"),
        include_str!("../../../sql/statements/relay/plan/snapshot.sql"),
        include_str!("../../../sql/statements/relay/record.sql"),
    ];

    #[test]
    fn every_scratch_table_the_relay_names_is_listed_and_so_made_and_emptied() {
        for source in SOURCES {
            for name in scratch_names(source) {
                assert!(
                    TABLES.iter().any(|(listed, _)| *listed == name),
                    "{name} is not in relay/scratch.rs"
                );
            }
        }
    }
}

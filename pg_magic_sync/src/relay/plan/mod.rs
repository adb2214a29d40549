//! A step of a pass, after observing the replicas: what each replica should be sent.
//!
//! Set-based, in the pass's scratch tables (relay/scratch.rs), all in its
//! one REPEATABLE READ snapshot:
//! - `sync_pass_notes`: the notes to plan (every note there is, up to a
//!   batch; never "after the last one read": a note with a lower id can
//!   commit later);
//! - `sync_pass_changed`: the rows they name, with the newest note of each
//!   the snapshot sees (a replica recorded at that version lacks none of its
//!   changes);
//! - `sync_pass_touched`: the rows whose reasons to be held may have
//!   changed, for every replica or for one;
//! - `sync_pass_old_pointers`: what pending notes say rows pointed at before
//!   their changes;
//! - `sync_pass_behind`, `sync_pass_released`: the replicas far
//!   behind, planned nothing, and those that caught up, planned what they
//!   are owed (behind.rs);
//! - `sync_pass_plan`: per replica, the rows to send ('u') and to take back
//!   ('d'), worked out from scratch for a replica being provisioned
//!   (snapshot.rs), and around what changed for the others
//!   (incremental.rs).

pub mod behind;
pub(crate) mod incremental;
mod snapshot;

use crate::catalog::table_sql::{key_text_of, quote_literal};
use crate::catalog::{Declared, Rule};
use crate::relay::journal::{self, Journaled};
use crate::relay::scratch;
use crate::settings;
use crate::spi;
use crate::statements::relay::plan::{
    BLOCKED, CHANGED_ROWS, CHANGED_ROWS_OF_WHOLE_BATCH, DEFER_PROVISIONING, READ_GROUP_NOTES,
    READ_NOTES, REFUSED_DUE, RELEASE_CHANGED, RELEASE_DUE, REPLICAS, RESEND_HELD, TAKE_BACK_LET_GO,
    TOUCHED,
};

/// What planning found.
pub struct Planned {
    /// How many notes and group notes it read.
    pub notes: i64,
    /// Whether any replica is sent anything: one being provisioned is sent
    /// its snapshot's end at least.
    pub anything: bool,
    /// What it found of the replicas far behind, for after recording.
    pub behind: behind::Behind,
}

/// Reads the pending notes and works out what every live replica is sent.
/// `let_go` names the tables no longer mirrored (relay/redeclared.rs):
/// every row of them a replica kept up to date holds is taken back.
/// `resent_as_held` names the tables whose columns changed, and nothing
/// else of them: every row of them a replica kept up to date holds is sent
/// again, as it is held.
/// `stopped` names the tables not planned while the database differs from
/// their declarations (declare/drift.rs): their notes, rows set aside and
/// refusals wait where they are, and no replica is provisioned meanwhile
/// (a snapshot without them would take their rows back).
/// `may_pass_over`: whether a replica far behind may be planned nothing
/// this pass (behind.rs): not in a pass that takes back or sends again
/// what a declaration changed.
#[allow(clippy::too_many_arguments)]
pub fn plan(
    tables: &[Declared],
    journaled: &Journaled,
    notes_per_pass: i64,
    retry_all: bool,
    stopped_tables: &[String],
    let_go: &[String],
    resent_as_held: &[String],
    may_pass_over: bool,
) -> Planned {
    let stopped = || stopped_tables.to_vec().into();
    let notes = spi::run_counting(READ_NOTES, &[notes_per_pass.into(), stopped()]);
    let group_notes = spi::run_counting(READ_GROUP_NOTES, &[notes_per_pass.into(), stopped()]);
    // What the notes touch; with none read, sync.notes is empty too.
    if notes > 0 && (notes as i64) < notes_per_pass {
        spi::run(CHANGED_ROWS_OF_WHOLE_BATCH);
    } else if notes > 0 {
        spi::run_without_nested_loops(CHANGED_ROWS);
    }
    if notes + group_notes > 0 {
        spi::run(TOUCHED);
    }
    if group_notes > 0 {
        touch_groups_given_or_taken(tables);
    }
    if retry_all {
        spi::run("UPDATE sync.quarantine SET retry_at = now()");
    }
    if notes > 0 {
        spi::run(RELEASE_CHANGED);
    }
    spi::run_with(RELEASE_DUE, &[stopped()]);
    spi::run_with(REFUSED_DUE, &[retry_all.into(), stopped()]);
    block(tables);
    if notes > 0 {
        read_old_pointers(tables);
    }
    // Temporary tables have no statistics until analyzed: without them the
    // planner takes a few rows for thousands.
    scratch::analyze(&[
        "sync_pass_changed",
        "sync_pass_touched",
        "sync_pass_old_pointers",
    ]);
    spi::run(REPLICAS);
    journal::stand_ins_of_replicas(journaled);
    if !stopped_tables.is_empty() {
        spi::run(DEFER_PROVISIONING);
    }
    let mut behind = behind::pass_over_and_release(
        journaled,
        (settings::MESSAGES_AHEAD.get(), settings::BEHIND_AFTER.get()),
        may_pass_over,
        stopped_tables,
    );
    scratch::analyze(&["sync_pass_replicas"]);
    let provisioning = snapshot::plan_snapshots(tables, journaled);
    let changes = incremental::plan_changes(tables, journaled)
        + behind::catch_up_followers(&mut behind, journaled, stopped_tables);
    let taken_back = match let_go.is_empty() {
        true => 0,
        false => spi::run_counting(TAKE_BACK_LET_GO, &[let_go.to_vec().into()]),
    };
    let resent = match resent_as_held.is_empty() {
        true => 0,
        false => spi::run_counting(RESEND_HELD, &[resent_as_held.to_vec().into()]),
    };
    scratch::analyze(&["sync_pass_plan"]);
    Planned {
        notes: (notes + group_notes) as i64,
        anything: provisioning || changes + taken_back + resent > 0,
        behind,
    }
}

/// A group given to or taken from a replica touches, for that replica, the
/// rows that are members of the group.
fn touch_groups_given_or_taken(tables: &[Declared]) {
    for table in tables.iter().filter(|t| t.mirror.goes_down()) {
        let Rule::Grouped { members, .. } = &table.rule else {
            continue;
        };
        spi::run(&format!(
            "INSERT INTO sync_pass_touched \
             SELECT DISTINCT g.replica, g.table_name, {member} \
             FROM sync_pass_group_notes g JOIN {relation} AS m ON {group} = g.group_key \
             WHERE g.table_name = {name} AND g.replica IS NOT NULL AND {member} IS NOT NULL",
            member = key_text_of("m", &members.row),
            group = key_text_of("m", &members.group),
            relation = members.relation,
            name = quote_literal(&table.name),
        ));
    }
}

/// The rows that cannot go (`sync_pass_blocked`), which are also touched:
/// a replica holding an older version of one has it taken back.
fn block(tables: &[Declared]) {
    if spi::run_counting(BLOCKED, &[]) == 0 {
        return;
    }
    spi::run("INSERT INTO sync_pass_frontier SELECT * FROM sync_pass_blocked");
    loop {
        let mut pointing = Vec::new();
        for table in tables.iter().filter(|t| t.mirror.goes_down()) {
            for reference in &table.references {
                pointing.push(crate::catalog::reach::children(
                    table,
                    reference,
                    "sync_pass_frontier",
                ));
            }
        }
        if pointing.is_empty() {
            break;
        }
        spi::run(&format!(
            "INSERT INTO sync_pass_reached (replica, table_name, key) \
             SELECT DISTINCT NULL::uuid, table_name, key \
             FROM ({}) AS c(replica, table_name, key) \
             WHERE NOT EXISTS (SELECT 1 FROM sync_pass_blocked b \
                               WHERE b.table_name = c.table_name AND b.key = c.key)",
            pointing.join(" UNION ")
        ));
        spi::run("INSERT INTO sync_pass_blocked SELECT * FROM sync_pass_reached");
        scratch::empty("sync_pass_frontier");
        spi::run("INSERT INTO sync_pass_frontier SELECT * FROM sync_pass_reached");
        scratch::empty("sync_pass_reached");
        if spi::one::<bool>("SELECT NOT EXISTS (SELECT 1 FROM sync_pass_frontier)", &[])
            .unwrap_or(true)
        {
            break;
        }
    }
    scratch::empty("sync_pass_frontier");
    spi::run("INSERT INTO sync_pass_touched SELECT * FROM sync_pass_blocked");
}

/// What every pending note says its row pointed at before the change, per
/// reference (`parents_before` is in the order of the table's references).
fn read_old_pointers(tables: &[Declared]) {
    for table in tables.iter().filter(|t| t.mirror.goes_down()) {
        for (index, reference) in table.references.iter().enumerate() {
            spi::run(&format!(
                "INSERT INTO sync_pass_old_pointers \
                 SELECT DISTINCT n.table_name, n.key, {index}, {parent}, n.parents_before[{at}] \
                 FROM sync.notes n \
                 WHERE n.table_name = {name} AND n.parents_before[{at}] IS NOT NULL",
                parent = quote_literal(&reference.parent),
                name = quote_literal(&table.name),
                at = index + 1,
            ));
        }
    }
}

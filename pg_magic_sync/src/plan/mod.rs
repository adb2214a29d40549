//! Step 1 of a pass: what each replica should be sent.
//!
//! Set-based, in temporary tables of the relay's transaction, all in its one
//! REPEATABLE READ snapshot:
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
//! - `sync_pass_plan`: per replica, the rows to send ('u') and to take back
//!   ('d'), worked out from scratch for a replica being provisioned
//!   (snapshot.rs), and around what changed for the others
//!   (incremental.rs).

mod incremental;
mod model;
mod reach;
mod snapshot;

pub use model::{Assignments, Members, PlanTable, Reference, Rule};

use crate::db;
use crate::table_sql::quote_literal;

const READ_NOTES: &str = "\
    CREATE TEMP TABLE sync_pass_notes ON COMMIT DROP AS \
    SELECT id, table_name, key FROM sync.notes ORDER BY id LIMIT $1";

const CHANGED_ROWS: &str = "\
    CREATE TEMP TABLE sync_pass_changed ON COMMIT DROP AS \
    SELECT c.table_name, c.key, \
           (SELECT max(n.id) FROM sync.notes n WHERE n.table_name = c.table_name AND n.key = c.key) AS note \
    FROM (SELECT DISTINCT table_name, key FROM sync_pass_notes) AS c";

const TOUCHED: &str = "\
    CREATE TEMP TABLE sync_pass_touched ON COMMIT DROP AS \
    SELECT NULL::uuid AS replica, table_name, key FROM sync_pass_changed";

const OLD_POINTERS: &str = "\
    CREATE TEMP TABLE sync_pass_old_pointers ( \
        table_name text COLLATE \"C\", key text COLLATE \"C\", reference int, parent text COLLATE \"C\", parent_key text COLLATE \"C\") ON COMMIT DROP";

const REPLICAS: &str = "\
    CREATE TEMP TABLE sync_pass_replicas ON COMMIT DROP AS \
    SELECT id, provision, partition FROM sync.replicas WHERE live";

const PLAN: &str = "\
    CREATE TEMP TABLE sync_pass_plan ( \
        replica uuid NOT NULL, table_name text COLLATE \"C\" NOT NULL, key text COLLATE \"C\" NOT NULL, \
        op text NOT NULL, note bigint NOT NULL) ON COMMIT DROP";

/// The scratch tables planning leaves for the rest of the pass.
pub const PASS_TABLES: &[&str] = &[
    "sync_pass_notes",
    "sync_pass_changed",
    "sync_pass_touched",
    "sync_pass_old_pointers",
    "sync_pass_replicas",
    "sync_pass_provisioning",
    "sync_pass_plan",
];

/// Reads the pending notes and works out what every live replica is sent.
/// Answers how many notes it read.
pub fn plan(tables: &[PlanTable], notes_per_pass: i64) -> i64 {
    db::run_with(READ_NOTES, &[notes_per_pass.into()]);
    db::run(CHANGED_ROWS);
    db::run(TOUCHED);
    read_old_pointers(tables);
    // Temporary tables have no statistics until analyzed: without them the
    // planner takes a million rows for a few.
    db::run("ANALYZE sync_pass_changed, sync_pass_touched, sync_pass_old_pointers");
    db::run(REPLICAS);
    db::run("ANALYZE sync_pass_replicas");
    db::run(PLAN);
    snapshot::plan_snapshots(tables);
    incremental::plan_changes(tables);
    db::run("ANALYZE sync_pass_plan");
    db::one::<i64>("SELECT count(*) FROM sync_pass_notes", &[]).unwrap_or(0)
}

/// What every pending note says its row pointed at before the change, per
/// reference (`parents_before` is in the order of the table's references).
fn read_old_pointers(tables: &[PlanTable]) {
    db::run(OLD_POINTERS);
    for table in tables.iter().filter(|t| t.goes_down) {
        for (index, reference) in table.references.iter().enumerate() {
            db::run(&format!(
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

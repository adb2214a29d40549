//! Step 1 of a pass: what each replica should be sent.
//!
//! Set-based, in temporary tables of the relay's transaction, all in its one
//! REPEATABLE READ snapshot:
//! - `sync_pass_notes`: the notes not done yet (never "after the last one
//!   read": a note with a lower id can commit later);
//! - `sync_pass_changed`: the rows they name, with the newest note of each
//!   the snapshot sees, and whether the row is there now;
//! - `sync_pass_plan`: per replica, the rows to send ('u') and to take back
//!   ('d'). A replica kept up to date gets the changes its recorded versions
//!   lack; one being provisioned gets everything its rules send it.

use crate::catalog::Declared;
use crate::db;
use crate::table_sql::{key_matches, key_text, quote_literal};

const READ_NOTES: &str = "\
    CREATE TEMP TABLE sync_pass_notes ON COMMIT DROP AS \
    SELECT id, table_name, key FROM sync.notes WHERE NOT done ORDER BY id LIMIT $1";

/// A row's version is the newest note of it the snapshot sees, in the batch
/// or beyond it: a replica recorded at that version lacks no change of it.
const CHANGED_ROWS: &str = "\
    CREATE TEMP TABLE sync_pass_changed ON COMMIT DROP AS \
    SELECT c.table_name, c.key, \
           (SELECT max(n.id) FROM sync.notes n WHERE n.table_name = c.table_name AND n.key = c.key) AS note, \
           false AS present \
    FROM (SELECT DISTINCT table_name, key FROM sync_pass_notes) AS c \
    WHERE c.table_name IN (SELECT name FROM sync.tables)";

const REPLICAS: &str = "\
    CREATE TEMP TABLE sync_pass_replicas ON COMMIT DROP AS \
    SELECT id, provision FROM sync.replicas WHERE live";

const PLAN: &str = "\
    CREATE TEMP TABLE sync_pass_plan ( \
        replica uuid NOT NULL, table_name text NOT NULL, key text NOT NULL, \
        op text NOT NULL, note bigint NOT NULL) ON COMMIT DROP";

/// Changed rows a replica kept up to date lacks: not held, held at an older
/// version, or being taken back.
const PLAN_UPSERTS: &str = "\
    INSERT INTO sync_pass_plan \
    SELECT r.id, c.table_name, c.key, 'u', c.note \
    FROM sync_pass_changed c CROSS JOIN sync_pass_replicas r \
    LEFT JOIN sync.held h ON h.replica = r.id AND h.table_name = c.table_name AND h.key = c.key \
    WHERE NOT r.provision AND c.present \
      AND (h.key IS NULL OR h.note < c.note OR h.leaving IS NOT NULL)";

/// Changed rows that are gone, from every replica that holds them.
const PLAN_DELETES: &str = "\
    INSERT INTO sync_pass_plan \
    SELECT h.replica, h.table_name, h.key, 'd', c.note \
    FROM sync_pass_changed c \
    JOIN sync.held h ON h.table_name = c.table_name AND h.key = c.key \
    JOIN sync_pass_replicas r ON r.id = h.replica \
    WHERE NOT r.provision AND NOT c.present AND h.leaving IS NULL";

/// Reads the pending notes and works out what every live replica is sent.
/// Answers how many notes it read.
pub fn plan(tables: &[Declared], notes_per_pass: i64) -> i64 {
    db::run_with(READ_NOTES, &[notes_per_pass.into()]);
    db::run(CHANGED_ROWS);
    for table in tables {
        mark_present(table);
    }
    db::run(REPLICAS);
    db::run(PLAN);
    db::run(PLAN_UPSERTS);
    db::run(PLAN_DELETES);
    for table in tables {
        plan_snapshots(table);
    }
    db::one::<i64>("SELECT count(*) FROM sync_pass_notes", &[]).unwrap_or(0)
}

/// Marks the changed rows of a table that are there now.
fn mark_present(table: &Declared) {
    db::run(&format!(
        "UPDATE sync_pass_changed c SET present = true \
         WHERE c.table_name = {name} \
           AND EXISTS (SELECT 1 FROM {rel} AS t WHERE {matches})",
        name = quote_literal(&table.name),
        rel = table.relation,
        matches = key_matches(table, "t", "c.key"),
    ));
}

/// Every row of a broadcast table, for every replica being provisioned,
/// at the version of its newest note.
fn plan_snapshots(table: &Declared) {
    db::run(&format!(
        "INSERT INTO sync_pass_plan \
         SELECT r.id, {name}, k.key, 'u', coalesce(n.note, 0) \
         FROM (SELECT {key} AS key FROM {rel} AS t) AS k \
         LEFT JOIN (SELECT key, max(id) AS note FROM sync.notes WHERE table_name = {name} \
                    GROUP BY key) AS n ON n.key = k.key \
         CROSS JOIN (SELECT id FROM sync_pass_replicas WHERE provision) AS r",
        name = quote_literal(&table.name),
        key = key_text(table, "t"),
        rel = table.relation,
    ));
}

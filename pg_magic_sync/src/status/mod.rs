//! The status reads of rows (docs/src/status-rows.md): how far along each
//! replica is (progress.rs), where one row is (row_progress.rs), and why a
//! row is or is not on a replica (explain.rs).
//!
//! Each answers jsonb with `contract` and `now`, reads with SPI's read-only
//! SELECTs (the SQL functions are STABLE: one snapshot, nothing written),
//! and counts only the live replicas of its scope
//! (`sync_internal.scope_replicas`, sql/status.sql). What a replica should
//! hold is worked out by should.rs (one row) or rounds.rs (a replica's
//! every row); a row's state is named by `sync_internal.row_state`
//! (sql/status_rows.sql), or by row_state.rs where progress counts them.

pub mod explain;
pub mod progress;
pub mod rounds;
pub mod row_progress;
pub mod row_state;
pub mod should;

use magic_sync_proto::key;
use pgrx::datum::DatumWithOid;
use serde_json::Value;

use crate::catalog::{declared_tables, Declared};
use crate::error::Error;
use crate::spi;
use crate::statements::status::SCOPE_IDS;
pub use crate::statements::status::{NOW, SCOPE};

/// The version of these reads' JSON: a field renamed or a meaning changed
/// raises it.
pub const CONTRACT: i32 = 1;

/// The ids of the live replicas of `scope`, read in the statement's
/// snapshot, as the reads that follow.
pub fn scope_ids(scope: Option<Value>) -> Vec<pgrx::Uuid> {
    let args: [DatumWithOid; 1] = [scope.map(pgrx::JsonB).into()];
    spi::select(SCOPE_IDS, Some(1), &args, |mut rows| {
        rows.next()
            .map(|row| spi::column::<Vec<pgrx::Uuid>>(&row, 1, "a scope's replicas"))
            .unwrap_or_default()
    })
}

/// Every row the scope's replicas hold or should hold, with its state on
/// each (`states`), after should.rs's expressions. A blocked row a replica
/// holds is set aside there, whether or not its rules still reach it: the
/// planner takes it back because it is set aside. `{row_*}` narrows each
/// relation to one row where a read asks of one (`$2` its table, `$3` its
/// key). Held rows of tables that no longer go down are left to the read.
const STATES: &str = "\
    should AS (SELECT DISTINCT replica, table_name, key, blocked FROM reach r WHERE true{row_r}), \
    replicas AS MATERIALIZED ( \
        SELECT r.id, r.partition, r.epoch, r.applied_epoch, r.applied_sequence, \
               r.provision OR (r.snapshot_sequence IS NOT NULL AND NOT sync_internal.confirmed( \
                   r.snapshot_sequence, r.epoch, r.applied_epoch, r.applied_sequence)) \
                   AS snapshot_on_its_way \
        FROM sync.replicas r JOIN scope s ON s.id = r.id), \
    held AS (SELECT h.* FROM sync.held h JOIN scope s ON s.id = h.replica WHERE true{row_h}), \
    pending AS (SELECT n.table_name, n.key, max(n.id) AS newest FROM sync.notes n \
                WHERE true{row_n} GROUP BY n.table_name, n.key), \
    states AS ( \
        SELECT r.id AS replica, coalesce(s.table_name, h.table_name) AS table_name, \
               coalesce(s.key, h.key) AS key, \
               coalesce(s.key IS NOT NULL AND NOT s.blocked, false) AS should, \
               h.note, n.newest, h.sent, h.leaving, h.refused, \
               sync_internal.confirmed(h.sent, r.epoch, r.applied_epoch, r.applied_sequence) \
                   AS confirmed, \
               sync_internal.row_state(s.key IS NOT NULL AND NOT s.blocked, \
                   coalesce(s.blocked, false) OR (h.key IS NOT NULL AND EXISTS ( \
                       SELECT 1 FROM blocked b WHERE b.table_name = h.table_name AND b.key = h.key)), \
                   h.key IS NOT NULL, h.refused, h.sent, h.leaving, h.note, n.newest, \
                   r.epoch, r.applied_epoch, r.applied_sequence) AS state \
        FROM should s FULL JOIN held h \
             ON h.replica = s.replica AND h.table_name = s.table_name AND h.key = s.key \
        JOIN replicas r ON r.id = coalesce(s.replica, h.replica) \
        LEFT JOIN pending n \
             ON n.table_name = coalesce(s.table_name, h.table_name) AND n.key = coalesce(s.key, h.key))";

/// should.rs's expressions over `scope` for the row of `$2` (of table
/// `asked`) and `$3`, then `STATES` narrowed to that row.
pub fn states_sql(tables: &[Declared], scope: &str, asked: &Declared) -> String {
    let ctes = should::one_row_ctes(tables, asked, scope, should::Ways::Whether);
    let row = |alias: &str| format!(" AND {alias}.table_name = $2 AND {alias}.key = $3");
    let states = STATES
        .replace("{row_r}", &row("r"))
        .replace("{row_h}", &row("h"))
        .replace("{row_n}", &row("n"));
    format!("WITH RECURSIVE {ctes}, {states}")
}

/// The declared table `name`, which must go down to replicas: any other is
/// refused, naming it.
pub fn table_going_down(tables: &[Declared], name: &str) -> Result<Declared, Error> {
    match tables.iter().find(|t| t.name == name) {
        Some(table) if table.mirror.goes_down() => Ok(table.clone()),
        Some(_) => Err(Error::bad_input(
            format!("magic_sync: table {name:?} does not go down to replicas"),
            "Only a catalog or a two-way table is sent to replicas; a record or a setting only comes up.",
        )),
        None => Err(Error::bad_input(
            format!("magic_sync: no table {name:?} is declared"),
            "Name a table as replicas know it: SELECT name FROM sync.tables.",
        )),
    }
}

/// `text` as a key of `table`, in the one form keys are compared in; a key
/// that does not parse is refused, naming it and the table.
pub fn key_of(table: &Declared, text: &str) -> Result<String, Error> {
    key::canonical(text, &table.key_types).map_err(|e| {
        let types: Vec<&str> = table.key_types.iter().map(|t| t.name()).collect();
        Error::bad_input(
            format!(
                "magic_sync: {text:?} is no key of table {:?}: {e}",
                table.name
            ),
            format!(
                "A key of {:?} is its parts ({}) joined by '|'.",
                table.name,
                types.join("|")
            ),
        )
    })
}

/// The declared tables, parents first.
pub fn tables() -> Vec<Declared> {
    declared_tables()
}

/// The one jsonb a read's query answers.
pub fn answer(sql: &str, args: &[DatumWithOid]) -> Value {
    spi::select(sql, Some(1), args, |mut rows| {
        rows.next()
            .map(|row| spi::column::<pgrx::JsonB>(&row, 1, "a status read's answer").0)
            .unwrap_or(Value::Null)
    })
}

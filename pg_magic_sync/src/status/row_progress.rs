//! `sync.row_progress(scope, table, key)`: where one row is, per live
//! replica of the scope that holds it, should hold it, or has it set aside.
//! The states are those sync.progress() counts, so the two always agree.

use pgrx::datum::DatumWithOid;
use pgrx::pg_sys;
use serde_json::Value;

use super::{key_of, states_sql, table_going_down, tables, CONTRACT, SCOPE};
use crate::error::Error;
use crate::spi;
use crate::statements::status::row_progress::ROW_PROGRESS;

/// The row `key` of `table_name` on every live replica of `scope`, as the
/// jsonb datum the query built: with a place per replica it is large, and
/// it is handed back as it is. A table that does not go down, or a key
/// that does not parse, is refused.
pub fn row_progress(
    scope: Option<Value>,
    table_name: &str,
    key: &str,
) -> Result<pg_sys::Datum, Error> {
    let tables = tables();
    let table = table_going_down(&tables, table_name)?;
    let key = key_of(&table, key)?;
    let sql = format!("{} {ROW_PROGRESS}", states_sql(&tables, SCOPE, &table));
    let args: [DatumWithOid; 4] = [
        scope.map(pgrx::JsonB).into(),
        table.name.as_str().into(),
        key.as_str().into(),
        CONTRACT.into(),
    ];
    spi::select_datum(&sql, &args).ok_or_else(|| {
        Error::engine(
            "magic_sync: sync.row_progress's query answered nothing",
            "It builds one document whatever the row; this is a bug.",
        )
    })
}

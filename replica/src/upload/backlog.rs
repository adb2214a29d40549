//! The backlog (protocol §7): per table, what the replica wrote that the
//! server has not filed — not sent yet, sent and not filed, set aside.

use magic_sync_proto::wire::{Backlog, BacklogTable};
use rusqlite::Connection;

/// What one table's writes wait on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TableBacklog {
    pub table: String,
    /// Rows noted and not sent yet.
    pub unsent: u64,
    /// Rows sent and not filed yet.
    pub unfiled: u64,
    /// Rows this build can never send.
    pub set_aside: u64,
}

/// The backlog of every table with notes, by table name.
pub(crate) fn read(conn: &Connection) -> rusqlite::Result<Vec<TableBacklog>> {
    let mut statement = conn.prepare_cached(
        "SELECT table_name,
                sum(set_aside IS NULL AND pending = 1),
                sum(set_aside IS NULL AND pending = 0),
                sum(set_aside IS NOT NULL)
         FROM sync_notes GROUP BY table_name ORDER BY table_name",
    )?;
    let rows = statement.query_map([], |row| {
        Ok(TableBacklog {
            table: row.get(0)?,
            unsent: row.get::<_, i64>(1)? as u64,
            unfiled: row.get::<_, i64>(2)? as u64,
            set_aside: row.get::<_, i64>(3)? as u64,
        })
    })?;
    rows.collect()
}

pub(crate) fn to_wire(backlog: &[TableBacklog]) -> Backlog {
    Backlog {
        tables: backlog
            .iter()
            .map(|t| BacklogTable {
                table: t.table.clone(),
                unsent: t.unsent,
                unfiled: t.unfiled,
                set_aside: t.set_aside,
            })
            .collect(),
    }
}

/// The backlog as the text it is compared by, to tell when it changed.
pub(crate) fn fingerprint(backlog: &[TableBacklog]) -> String {
    backlog
        .iter()
        .map(|t| format!("{}:{}:{}:{}", t.table, t.unsent, t.unfiled, t.set_aside))
        .collect::<Vec<_>>()
        .join(";")
}

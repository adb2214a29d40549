//! The backlog a replica says (protocol A.3, section 7): per table, rows
//! not sent yet, sent and not filed, and set aside. The server keeps the
//! last one it was told, with when (`sync.backlogs`); an Up without one
//! leaves it standing. A replica is catching up while it is not empty.

use magic_sync_proto::wire::Backlog;
use serde_json::{json, Value};
use uuid::Uuid;

use crate::spi::{self, to_pg};

/// The backlog as it is kept: one object per table.
pub fn as_json(backlog: &Backlog) -> Value {
    backlog
        .tables
        .iter()
        .map(|t| {
            json!({"table": t.table, "unsent": t.unsent, "unfiled": t.unfiled, "set_aside": t.set_aside})
        })
        .collect()
}

pub fn is_empty(backlog: &Backlog) -> bool {
    backlog
        .tables
        .iter()
        .all(|t| t.unsent == 0 && t.unfiled == 0 && t.set_aside == 0)
}

/// Keeps what the replica said of its backlog; answers the verdict.
pub fn keep(replica: Uuid, backlog: &Backlog) -> Value {
    let empty = is_empty(backlog);
    spi::run_with(
        "INSERT INTO sync.backlogs (replica, tables, empty) VALUES ($1, $2, $3) \
         ON CONFLICT (replica) DO UPDATE SET tables = excluded.tables, empty = excluded.empty, said_at = now()",
        &[to_pg(replica).into(), pgrx::JsonB(as_json(backlog)).into(), empty.into()],
    );
    json!(if empty { "kept: empty" } else { "kept" })
}

#[cfg(test)]
mod tests {
    use super::*;
    use magic_sync_proto::wire::BacklogTable;

    #[test]
    fn a_backlog_of_zeros_is_empty() {
        let mut backlog = Backlog {
            tables: vec![BacklogTable {
                table: "receipts".into(),
                ..BacklogTable::default()
            }],
        };
        assert!(is_empty(&backlog));
        backlog.tables[0].unfiled = 3;
        assert!(!is_empty(&backlog));
        assert_eq!(as_json(&backlog)[0]["unfiled"], 3);
    }
}

//! The columns this build of the replica holds of each table the server
//! sends it (the Up's `columns`), said once per open beside where the
//! replica stands. A new build that added a column to a table says so the
//! first time it runs, and a server that sends that column sends the rows
//! of the table the replica holds again, once, so the column is filled
//! (docs/src/protocol.md, "A column added").

use magic_sync_proto::wire::TableColumns;

use crate::model::declare::Mirror;
use crate::model::shape::Shape;

/// Per table the server sends (a catalog, or a table written on both
/// sides; not the engine's table of wishes), its columns as the database
/// names them, but the one the replica retires rows by, which is its own.
pub(crate) fn held(shapes: &[Shape]) -> Vec<TableColumns> {
    shapes
        .iter()
        .filter(|s| matches!(s.mirror, Mirror::Catalog | Mirror::Both) && !s.wishes)
        .map(|s| TableColumns {
            table: s.name.clone(),
            columns: s
                .columns
                .iter()
                .enumerate()
                .filter(|(i, _)| Some(*i) != s.retired)
                .map(|(_, c)| c.name.clone())
                .collect(),
        })
        .collect()
}

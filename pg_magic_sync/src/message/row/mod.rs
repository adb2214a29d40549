//! A row's bytes as they travel, in one room: how a table's rows travel
//! (`Travel`), the SQL a pass loads a row's bytes with (`sql`), the C
//! function that writes a row as JSON bytes (`encode`,
//! `sync_internal.row_bytes`), and a wish's bytes (`wish`). The JSON
//! conventions both halves keep (a 64-bit integer as text, an instant in
//! UTC) are the proto crate's (`magic_sync_proto::json`).

pub mod encode;
pub mod sql;
pub mod wish;

use crate::catalog::wishes::is_wishes;
use crate::catalog::Declared;

/// How a table's rows travel: a JSON object of its columns, or, for the
/// engine's table of wishes, the Wish message (protocol A.6). Filing what
/// comes up, a digest of what a replica holds, and loading what goes down
/// each read it here, not the table's name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Travel {
    AsJson,
    AsWish,
}

impl Travel {
    pub fn of(table: &Declared) -> Travel {
        if is_wishes(table) {
            Travel::AsWish
        } else {
            Travel::AsJson
        }
    }
}

//! Wishing (docs/src/wishes.md): `sync.desire` and `sync.withdraw`, in the
//! caller's transaction, and the engine's `sync_internal.wish_bytes`, which
//! a pass encodes each wish it sends with. `sync.wishes`, the read, is
//! sql/wishes.sql.

use pgrx::prelude::*;

use crate::message::row::wish;
use crate::spi::{from_pg, to_pg};
use crate::version;
use crate::wishes::desire;

/// `sync.desire(table_name, wanted, note)`: wishes the row of the setting
/// `table_name` (as replicas know it) that `wanted` names by its key the
/// desired columns `wanted` gives (and, under if_unchanged, based on the
/// version it gives). Answers the wish's id; a row wished again has its
/// wish replaced.
#[pg_extern(volatile, name = "desire")]
fn desire_wish(
    table_name: &str,
    wanted: pgrx::JsonB,
    note: default!(Option<&str>, "NULL"),
) -> pgrx::Uuid {
    version::check();
    to_pg(desire::desire(table_name, &wanted.0, note))
}

/// `sync.withdraw(table_name, key)`: takes back the wish of the setting
/// row `key` (section 3's text form). Answers whether there was one.
#[pg_extern(volatile, name = "withdraw")]
fn withdraw_wish(table_name: &str, key: &str) -> bool {
    version::check();
    desire::withdraw(table_name, key)
}

/// `sync_internal.wish_bytes(...)`: a wish as it travels, the Wish message.
#[pg_extern(immutable, parallel_safe, schema = "sync_internal")]
fn wish_bytes(
    id: pgrx::Uuid,
    table_name: &str,
    key: &str,
    wanted: Option<Vec<u8>>,
    version: i64,
    note: Option<&str>,
) -> Vec<u8> {
    wish::wish_bytes(
        from_pg(id),
        table_name,
        key,
        wanted.unwrap_or_default(),
        version,
        note,
    )
}

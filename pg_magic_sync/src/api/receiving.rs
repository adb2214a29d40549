//! What replicas send up (docs/src/filing.md): an Up filed under the
//! replica the transport names, and the inbox filed again.

use pgrx::prelude::*;

use crate::file::{self, acting, inbox};
use crate::spi::from_pg;
use crate::version;

/// `sync.receive(replica, bytes)`: takes an `Up` from the replica the
/// transport names, and answers what the server made of it. It runs as the
/// extension's owner; the host's tables see the caller (file/acting.rs).
#[pg_extern(volatile)]
fn receive(replica: pgrx::Uuid, bytes: &[u8]) -> pgrx::JsonB {
    version::check();
    pgrx::JsonB(acting::as_owner(|caller| {
        file::file_up(from_pg(replica), bytes, caller)
    }))
}

/// `sync_internal.file_as(...)`: a filing statement run as `runs_as`
/// (sql/filing.sql's savepoints call it). The engine's own: it runs SQL
/// as another role.
#[pg_extern(schema = "sync_internal", volatile)]
fn file_as(
    runs_as: pg_sys::Oid,
    search_path: &str,
    statement: &str,
    rows: pgrx::JsonB,
    replica: pgrx::Uuid,
    known: pgrx::JsonB,
    table_name: &str,
) -> i64 {
    acting::file_as(
        runs_as,
        search_path,
        statement,
        rows,
        replica,
        known,
        table_name,
    )
}

/// `sync_internal.place_as(...)`: the host's place function on one row,
/// run as `runs_as`. The engine's own, as file_as.
#[pg_extern(schema = "sync_internal", volatile)]
fn place_as(
    runs_as: pg_sys::Oid,
    search_path: &str,
    place: &str,
    replica: pgrx::Uuid,
    known: pgrx::JsonB,
    table_name: &str,
    row: pgrx::JsonB,
) -> Option<pgrx::JsonB> {
    acting::place_as(runs_as, search_path, place, replica, known, table_name, row)
}

/// `sync.refile(everything)`: files again what the inbox keeps: what is
/// due (and what waits for a provisioning), or everything, as after a
/// deploy. A relay runs it as it starts, and before its passes; run it in a
/// transaction of its own: the senders' filing hooks run in it.
#[pg_extern(volatile)]
fn refile(everything: default!(bool, false)) -> pgrx::JsonB {
    version::check();
    pgrx::JsonB(inbox::refile(everything))
}

//! Relaying (docs/src/server.md, "Relaying"): the Rust half of `CALL
//! sync.relay()`, which sql/relay.sql runs in the pass's transaction.

use pgrx::prelude::*;

use crate::relay;

/// `sync_internal.relay_starts()`: whether the next pass in this session is
/// the first, a relay starting, when whatever was set aside is tried again.
#[pg_extern(volatile, schema = "sync_internal")]
fn relay_starts() -> bool {
    relay::relay_starts()
}

/// `sync_internal.record_pass()`: the recording half of a pass. Called by
/// `sync.relay()`, which gives it its transaction; answers what it did.
#[pg_extern(volatile, schema = "sync_internal")]
fn record_pass() -> pgrx::JsonB {
    pgrx::JsonB(relay::record_pass())
}

//! What replicas send up (docs/src/filing.md): an Up filed under the
//! replica the transport names, and the inbox filed again.

use pgrx::prelude::*;

use crate::receive::{self, inbox};
use crate::spi::from_pg;

/// `sync.receive(replica, bytes)`: takes an `Up` from the replica the
/// transport names, and answers what the server made of it.
#[pg_extern(volatile)]
fn receive(replica: pgrx::Uuid, bytes: &[u8]) -> pgrx::JsonB {
    pgrx::JsonB(receive::file_up(from_pg(replica), bytes))
}

/// `sync.refile(everything)`: files again what the inbox keeps: what is
/// due (and what waits for a provisioning), or everything, as after a
/// deploy. A relay runs it as it starts, and before its passes; run it in a
/// transaction of its own: the senders' filing hooks run in it.
#[pg_extern(volatile)]
fn refile(everything: default!(bool, false)) -> pgrx::JsonB {
    pgrx::JsonB(inbox::refile(everything))
}

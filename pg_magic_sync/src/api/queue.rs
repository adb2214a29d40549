//! The default transport (docs/src/server.md, "The default transport"): a
//! device, or a gateway before many, takes its next message and
//! acknowledges it.

use pgrx::prelude::*;

use crate::publish::queue;

/// `sync.next(replica)`: the replica's next message and its id, or no row
/// when none waits.
#[pg_extern(stable)]
fn next(
    replica: pgrx::Uuid,
) -> TableIterator<'static, (name!(id, String), name!(message, Vec<u8>))> {
    TableIterator::new(queue::next(replica))
}

/// `sync.ack(replica, id)`: the replica applied the message `id` and
/// committed it. Answers whether that took a message out of its queue.
#[pg_extern(volatile)]
fn ack(replica: pgrx::Uuid, id: &str) -> bool {
    queue::ack(replica, id)
}

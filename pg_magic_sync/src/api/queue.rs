//! The default transport (docs/src/server.md, "The default transport"): a
//! device, or a gateway before many, takes its next message and
//! acknowledges it (and, in the same call, takes the one after).

use pgrx::prelude::*;

use crate::publish::queue;
use crate::version;

/// `sync.next(replica)`: the replica's next message and its id, or no row
/// when none waits.
#[pg_extern(stable)]
fn next(
    replica: pgrx::Uuid,
) -> TableIterator<'static, (name!(id, String), name!(message, Vec<u8>))> {
    version::check();
    TableIterator::new(queue::next(replica))
}

/// `sync.ack(replica, id)`: the replica applied the message `id` and
/// committed it. Answers whether that took a message out of its queue.
#[pg_extern(volatile)]
fn ack(replica: pgrx::Uuid, id: &str) -> bool {
    version::check();
    queue::ack(replica, id)
}

/// `sync.ack_next(replica, id)`: `sync.ack` of message `id`, then what
/// `sync.next` would answer, in one call: a device taking its messages one
/// after another calls once a message instead of three times (next, ack,
/// and the next that finds nothing).
#[pg_extern(volatile)]
fn ack_next(
    replica: pgrx::Uuid,
    id: &str,
) -> TableIterator<'static, (name!(id, String), name!(message, Vec<u8>))> {
    version::check();
    queue::ack(replica, id);
    TableIterator::new(queue::next(replica))
}

//! The default transport: a queue per replica inside PostgreSQL, which is
//! the outbox itself. A device (or a gateway before many) takes its next
//! message with `sync.next(replica)`, applies it, and acknowledges it with
//! `sync.ack(replica, id)`; the message stays at the head of its queue until
//! then, and an acknowledgement names its message, so one that comes twice,
//! or late, takes nothing else out.

use crate::error::Error;
use crate::message::envelope::{self, Kind};
use crate::spi;
use crate::statements::publish::queue::{ACK, HEAD_OF_QUEUE};
use crate::wake;

/// The replica's next message and its id, or None when none waits. It
/// stays at the head of the queue until acknowledged.
pub fn next(replica: pgrx::Uuid) -> Option<(String, Vec<u8>)> {
    next_and_more(replica).0
}

/// The replica's next message and its id, as `next`, and whether another
/// waits behind it: a device told none does not ask again after applying
/// it, but waits for the notification of the next pass (sync.take).
pub fn next_and_more(replica: pgrx::Uuid) -> (Option<(String, Vec<u8>)>, bool) {
    spi::select(HEAD_OF_QUEUE, Some(2), &[replica.into()], |mut rows| {
        let head = rows.next().map(|row| {
            let id: String = spi::column(&row, 1, "sync.outbox.id");
            let kind: String = spi::column(&row, 2, "sync.outbox.kind");
            let head: Vec<u8> = spi::column(&row, 3, "sync.outbox.head");
            // A message of no body ('filed' carries its head only) joins none.
            let body: Vec<u8> = spi::nullable(&row, 4, "sync.bodies.bytes").unwrap_or_default();
            let kind = Kind::from_name(&kind)
                .unwrap_or_else(|| Error::unknown("sync.outbox.kind", &kind).raise());
            (id, envelope::to_replica(kind, &head, &body))
        });
        (head, rows.next().is_some())
    })
}

/// The replica applied the message `id` and committed it. Answers whether
/// that took a message out of its queue. One passed over while it was far
/// behind wakes the relay worker as this transaction commits: the pass
/// that sends it what it missed may be due (relay/plan/behind.rs).
pub fn ack(replica: pgrx::Uuid, id: &str) -> bool {
    let taken = spi::one::<i32>(ACK, &[replica.into(), id.into()]).unwrap_or(0);
    if taken == 2 {
        wake::noted();
    }
    taken > 0
}

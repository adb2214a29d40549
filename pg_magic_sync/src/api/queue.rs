//! The default transport (docs/src/server.md, "The default transport"): a
//! device, or a gateway before many, takes its next message and
//! acknowledges it (and, in the same call, takes the one after); or, in
//! one call a delivery, acknowledges what it applied, files its report of
//! it, and takes the next (`sync.take`).

use pgrx::prelude::*;

use crate::file::{self, acting};
use crate::publish::queue;
use crate::spi::from_pg;
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

/// `sync.take(replica, ack, report)`: a device's delivery in one call. It
/// files `report` (an Up; NULL: none), acknowledges the message `ack`
/// (NULL: none), and answers the message then at the head of the queue and
/// its id (both NULL when none waits), whether it filed the report, and
/// whether another message waits behind the one it answers (a device told
/// none waits for the notification of the next pass before it asks again).
///
/// The report is filed as `sync.receive` files it, as the caller, in a
/// subtransaction of its own: a report it could not file, for whatever
/// reason, is answered `reported` false and is the device's to send with
/// `sync.receive`, while the acknowledgement and the take stand. While a
/// relay pass runs, the report waits for it as `sync.receive`'s would, and
/// the take then answers the message the pass wrote: refused instead, the
/// report went again with `sync.receive`, which waited all the same, one
/// call and one Up built more a report (issue 37: a hundred registers
/// reporting while the next change's pass ran had two in five refused).
// pgrx reads the columns' names and types from the signature itself: the
// row's type cannot be named apart.
#[allow(clippy::type_complexity)]
#[pg_extern(volatile)]
fn take(
    replica: pgrx::Uuid,
    ack: Option<&str>,
    report: Option<&[u8]>,
) -> TableIterator<
    'static,
    (
        name!(id, Option<String>),
        name!(message, Option<Vec<u8>>),
        name!(reported, bool),
        name!(more, bool),
    ),
> {
    version::check();
    let (head, reported) = acting::as_owner(|caller| {
        let reported = report.is_some_and(|bytes| {
            acting::in_subtransaction(|| file::file_up(from_pg(replica), bytes, caller)).is_ok()
        });
        if let Some(id) = ack {
            queue::ack(replica, id);
        }
        (queue::next_and_more(replica), reported)
    });
    let ((head, more), reported) = (head, reported);
    let (id, message) = head.map_or((None, None), |(id, message)| (Some(id), Some(message)));
    TableIterator::once((id, message, reported, more))
}

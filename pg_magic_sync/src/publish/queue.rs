//! The default transport: a queue per replica inside PostgreSQL, which is
//! the outbox itself. A device (or a gateway before many) takes its next
//! message with `sync.next(replica)`, applies it, and acknowledges it with
//! `sync.ack(replica, id)`; the message stays at the head of its queue until
//! then, and an acknowledgement names its message, so one that comes twice,
//! or late, takes nothing else out.

use pgrx::prelude::*;

use crate::message::envelope::{self, Kind};

const HEAD_OF_QUEUE: &str = "\
    SELECT o.id, o.kind, o.head, b.bytes FROM sync.outbox o \
    LEFT JOIN sync.bodies b ON b.id = o.body \
    WHERE o.replica = $1 ORDER BY o.position LIMIT 1";

/// `sync.next(replica)`: the replica's next message and its id, or no row
/// when none waits.
pub fn next(replica: pgrx::Uuid) -> Option<(String, Vec<u8>)> {
    Spi::connect(|client| {
        let mut rows = client
            .select(HEAD_OF_QUEUE, Some(1), &[replica.into()])
            .expect("reads the outbox");
        rows.next().map(|row| {
            let id: String = row.get(1).ok().flatten().unwrap_or_default();
            let kind: String = row.get(2).ok().flatten().unwrap_or_default();
            let head: Vec<u8> = row.get(3).ok().flatten().unwrap_or_default();
            let body: Vec<u8> = row.get(4).ok().flatten().unwrap_or_default();
            let kind = Kind::from_name(&kind).expect("the outbox holds known kinds");
            (id, envelope::to_replica(kind, &head, &body))
        })
    })
}

/// `sync.ack(replica, id)`: the replica applied the message `id` and
/// committed it. Answers whether that took a message out of its queue.
pub fn ack(replica: pgrx::Uuid, id: &str) -> bool {
    Spi::get_one_with_args::<bool>(
        "WITH taken AS (DELETE FROM sync.outbox WHERE replica = $1 AND id = $2 RETURNING 1) \
         SELECT count(*) > 0 FROM taken",
        &[replica.into(), id.into()],
    )
    .expect("acknowledges")
    .unwrap_or(false)
}

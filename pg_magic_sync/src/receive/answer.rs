//! Answering an upload: a `Filed` naming its upload numbers, which goes to
//! the replica through the transport only once the filing transaction
//! committed.
//!
//! With the default transport the queue is `sync.outbox`, read by
//! `sync.next`: the `Filed` is an outbox row written in the filing
//! transaction itself. `sync.next` sees only committed rows, so the answer
//! becomes visible to the replica exactly when the filing commits, and
//! never if it rolls back (the replica then sends the upload again). Its
//! position is drawn from the message numbers, so it never takes the place
//! of a message of a chain; a snapshot that drops what a replica was owed
//! leaves it (relay/observe.rs keeps the outbox's 'filed' rows).

use uuid::Uuid;

use crate::message::envelope;
use crate::spi::{self, to_pg};

/// Writes the answer to these uploads to the replica's queue; answers the
/// numbers it names (each from 1 to 2^63 - 1: an Up with another is
/// malformed, receive/mod.rs).
pub fn answer(replica: Uuid, uploads: &[u64]) -> Vec<u64> {
    let numbers = uploads.to_vec();
    if numbers.is_empty() {
        return numbers;
    }
    spi::run_with(
        "WITH n AS (SELECT nextval('sync.message_numbers') AS position) \
         INSERT INTO sync.outbox (replica, position, id, kind, head) \
         SELECT $1, n.position, 'filed-' || n.position, 'filed', $2 FROM n",
        &[
            to_pg(replica).into(),
            envelope::filed(numbers.clone()).into(),
        ],
    );
    numbers
}

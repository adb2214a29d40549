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
use crate::statements::file::answer::{ANSWERED_ALREADY, FORGET_OLD, REMEMBER};

/// Writes the answer to these uploads to the replica's queue; answers the
/// numbers it names (each from 1 to 2^63 - 1: an Up with another is
/// malformed, file/mod.rs).
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
    remember(replica, &numbers);
    numbers
}

/// Keeps the numbers answered, so that the same Up handed over again is
/// known for what it is (`redelivered`). The numbers are random: about one
/// answer in 64 forgets the old ones, which keeps the cost off most.
fn remember(replica: Uuid, numbers: &[u64]) {
    let as_stored: Vec<i64> = numbers.iter().map(|n| *n as i64).collect();
    spi::run_with(REMEMBER, &[to_pg(replica).into(), as_stored.into()]);
    if numbers.iter().any(|n| n % 64 == 0) {
        spi::run_with(FORGET_OLD, &[to_pg(replica).into()]);
    }
}

/// Whether an Up carrying these numbers was filed and answered already: an
/// at-least-once transport handed it over again.
pub fn redelivered(replica: Uuid, uploads: &[u64]) -> bool {
    if uploads.is_empty() {
        return false;
    }
    let as_stored: Vec<i64> = uploads.iter().map(|n| *n as i64).collect();
    spi::one::<bool>(ANSWERED_ALREADY, &[to_pg(replica).into(), as_stored.into()]).unwrap_or(false)
}

//! A client of the server's default transport, a queue in its database
//! (feature `pg-queue`): `sync.next(replica)` answers the next message and
//! its id (it stays until acknowledged), `sync.ack(replica, id)` releases
//! it, and `sync.receive(replica, bytes)` files an Up.
//!
//! A message is acknowledged only after `receive` returned `Ok`: then it is
//! committed, or changed nothing. One of a later protocol is left
//! unacknowledged, and delivering stops there until the replica is updated.

use postgres::Client;

use crate::{Error, Received, Replica};

/// What went wrong talking to the queue.
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    /// The server's database (or the way to it) failed: ask again later.
    #[error("the queue: {0}")]
    Postgres(#[from] postgres::Error),
    /// The replica could not take a message (its storage failed, or the
    /// message speaks a later protocol): it stays in the queue.
    #[error("the replica: {0}")]
    Replica(#[from] Error),
}

/// The next message for the replica, and its id in the queue.
pub fn next(pg: &mut Client, replica: &Replica) -> Result<Option<(String, Vec<u8>)>, QueueError> {
    Ok(pg
        .query_opt("SELECT id, message FROM sync.next($1)", &[&replica.me()])?
        .map(|row| (row.get(0), row.get(1))))
}

/// Releases the message `id`: answers whether the queue held it.
pub fn ack(pg: &mut Client, replica: &Replica, id: &str) -> Result<bool, QueueError> {
    Ok(pg
        .query_one("SELECT sync.ack($1, $2)", &[&replica.me(), &id])?
        .get(0))
}

/// Takes, applies and acknowledges every message waiting for the replica,
/// in order, and answers what the replica made of each. Stops without
/// acknowledging at a message of a later protocol (an error) or when the
/// replica's storage fails (an error: the message comes again).
pub fn deliver(pg: &mut Client, replica: &mut Replica) -> Result<Vec<Received>, QueueError> {
    let mut received = Vec::new();
    while let Some((id, message)) = next(pg, replica)? {
        let answer = replica.receive(&message)?;
        // Lost, the acknowledgement is harmless: the message comes again,
        // and changes nothing the second time.
        ack(pg, replica, &id)?;
        received.push(answer);
    }
    Ok(received)
}

/// Sends up everything the replica has to say, each Up filed by
/// `sync.receive`, and answers what the server made of each. An Up the
/// server's function refuses stays unsent and is built again next time.
pub fn report(
    pg: &mut Client,
    replica: &mut Replica,
) -> Result<Vec<serde_json::Value>, QueueError> {
    let mut verdicts = Vec::new();
    while let Some(up) = replica.next_up()? {
        let verdict = pg.query_one(
            "SELECT sync.receive($1, $2)::text",
            &[&replica.me(), &up.bytes],
        );
        let verdict: String = match verdict {
            Ok(row) => row.get(0),
            Err(e) => {
                replica.refused(&up, crate::Refusal::Transient)?;
                return Err(e.into());
            }
        };
        replica.sent(&up)?;
        verdicts.push(serde_json::from_str(&verdict).unwrap_or(serde_json::Value::String(verdict)));
    }
    Ok(verdicts)
}

/// One turn of a device's loop: take and apply what waits, then say what
/// there is to say.
pub fn run_once(
    pg: &mut Client,
    replica: &mut Replica,
) -> Result<(Vec<Received>, Vec<serde_json::Value>), QueueError> {
    let received = deliver(pg, replica)?;
    let verdicts = report(pg, replica)?;
    Ok((received, verdicts))
}

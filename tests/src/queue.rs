//! The client side of the default transport, a queue in the server's
//! database: take the next message with `sync.next`, apply it, acknowledge
//! it with `sync.ack` (only once it is committed), and hand what the replica
//! says to `sync.receive`.

use magic_sync_replica::{Received, Replica};
use postgres::Client;
use uuid::Uuid;

/// What one delivery did.
#[derive(Debug, Default)]
pub struct Delivered {
    pub received: Vec<Received>,
}

/// The replica's next message and its transport id, if one waits.
pub fn next(pg: &mut Client, replica: Uuid) -> Option<(String, Vec<u8>)> {
    pg.query_opt("SELECT id, message FROM sync.next($1)", &[&replica])
        .expect("sync.next")
        .map(|row| (row.get(0), row.get(1)))
}

pub fn ack(pg: &mut Client, replica: Uuid, id: &str) -> bool {
    pg.query_one("SELECT sync.ack($1, $2)", &[&replica, &id])
        .expect("sync.ack")
        .get(0)
}

/// Applies every message waiting for the replica, in order, acknowledging
/// each once applied.
pub fn deliver(pg: &mut Client, replica: &mut Replica) -> Delivered {
    let me = replica.me();
    let mut delivered = Delivered::default();
    while let Some((id, message)) = next(pg, me) {
        let received = replica
            .receive(&message)
            .unwrap_or_else(|e| panic!("{me} could not apply {id}: {e}"));
        ack(pg, me, &id);
        delivered.received.push(received);
    }
    delivered
}

/// Sends up what the replica has to say, and answers what the server made
/// of each `Up`.
pub fn report(pg: &mut Client, replica: &mut Replica) -> Vec<serde_json::Value> {
    let me = replica.me();
    let mut verdicts = Vec::new();
    while let Some(up) = replica.next_up().expect("builds an Up") {
        let verdict: serde_json::Value = pg
            .query_one("SELECT sync.receive($1, $2)::text", &[&me, &up.bytes])
            .map(|row| serde_json::from_str(row.get::<_, &str>(0)).expect("json"))
            .expect("sync.receive");
        replica.sent(&up).expect("records the Up as sent");
        verdicts.push(verdict);
    }
    verdicts
}

//! The outbox as a transport the relay worker pushes to reads it: what is
//! due to go, per replica in order, and what became of each send
//! (sql/publish.sql). Runs inside the worker's transactions; the sending
//! itself happens between them, with no transaction open.

use uuid::Uuid;

use crate::error::Error;
use crate::message::envelope::{self, Kind};
use crate::settings;
use crate::spi::{self, from_pg, to_pg};
use crate::statements::publish::outbox::{DUE, FAILED, NEXT_SEND_AT, SENT};

/// Messages of one replica read at most per round: the rest go next round.
const MESSAGES_PER_REPLICA: i32 = 64;

/// Bytes read from the outbox at most per round (at least one message).
const BYTES_PER_ROUND: i64 = 64 << 20;

/// One replica's messages, in the order they must go.
pub struct Due {
    pub replica: Uuid,
    pub messages: Vec<Outgoing>,
}

/// A message as the transport carries it.
pub struct Outgoing {
    /// The transport's name for it: the same message always has the same.
    pub id: String,
    pub bytes: Vec<u8>,
    /// It begins a provisioning: what the transport still holds for the
    /// replica from before it is superseded.
    pub begins_snapshot: bool,
}

/// What one replica's sends came to.
pub struct Outcome {
    pub replica: Uuid,
    /// The ids the transport took, a prefix of what was due, in order.
    pub taken: Vec<String>,
    /// The send that failed, if one did: the rest wait for the next try.
    pub failed: Option<SendFailure>,
}

pub struct SendFailure {
    pub message: String,
    /// What the transport said (`Error::Transport`).
    pub error: Error,
}

impl SendFailure {
    /// The transport will never take it (not the network).
    pub fn for_good(&self) -> bool {
        !self.error.is_transient()
    }
}

/// What is due to go, for up to `replicas` replicas not waiting out a backoff.
pub fn due(replicas: usize) -> Vec<Due> {
    let args = [
        (replicas.min(i32::MAX as usize) as i32).into(),
        MESSAGES_PER_REPLICA.into(),
        BYTES_PER_ROUND.into(),
    ];
    spi::select(DUE, None, &args, |rows| {
        let mut due: Vec<Due> = Vec::new();
        for row in rows {
            let replica = from_pg(spi::column(&row, 1, "sync.outbox.replica"));
            let message = outgoing(&row);
            match due.last_mut() {
                Some(last) if last.replica == replica => last.messages.push(message),
                _ => due.push(Due {
                    replica,
                    messages: vec![message],
                }),
            }
        }
        due
    })
}

fn outgoing(row: &pgrx::spi::SpiHeapTupleData) -> Outgoing {
    let id: String = spi::column(row, 2, "sync.outbox.id");
    let kind: String = spi::column(row, 3, "sync.outbox.kind");
    let head: Vec<u8> = spi::column(row, 4, "sync.outbox.head");
    // A message of no body ('filed' carries its head only) joins none.
    let body: Vec<u8> = spi::nullable(row, 5, "sync.bodies.bytes").unwrap_or_default();
    let kind =
        Kind::from_name(&kind).unwrap_or_else(|| Error::unknown("sync.outbox.kind", &kind).raise());
    Outgoing {
        id,
        bytes: envelope::to_replica(kind, &head, &body),
        begins_snapshot: spi::column(row, 6, "begins_snapshot"),
    }
}

/// Records what the sends came to: what the transport took leaves the
/// outbox; a replica a send failed to waits out its backoff. Answers how
/// many replicas were provisioned again for refusals.
pub fn record(outcomes: &[Outcome]) -> usize {
    let mut replicas = Vec::new();
    let mut ids = Vec::new();
    for outcome in outcomes {
        for id in &outcome.taken {
            replicas.push(to_pg(outcome.replica));
            ids.push(id.clone());
        }
    }
    if !replicas.is_empty() {
        spi::run_with(SENT, &[replicas.into(), ids.into()]);
    }
    let retry_every = f64::from(settings::RETRY_EVERY.get());
    outcomes
        .iter()
        .filter_map(|outcome| outcome.failed.as_ref().map(|f| (outcome.replica, f)))
        .filter(|(replica, failure)| {
            spi::one::<bool>(
                FAILED,
                &[
                    to_pg(*replica).into(),
                    failure.message.as_str().into(),
                    failure.for_good().into(),
                    failure.error.to_string().into(),
                    retry_every.into(),
                ],
            )
            .unwrap_or(false)
        })
        .count()
}

/// Seconds until a send waiting out its backoff is due, if one waits.
pub fn next_send_in() -> Option<f64> {
    spi::one::<f64>(NEXT_SEND_AT, &[])
}

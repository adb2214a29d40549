//! Moving the bytes: the clients of the server's transports, and the small
//! blocking loop a device program runs in a thread of its own.
//!
//! - `device_loop`: the loop — take the next message, apply it, acknowledge
//!   it after the commit, send the Ups of every lane, wait for news,
//!   reconnect with a backoff, stop when asked — and what it reports;
//! - `control`: how another thread stops the loop or pokes it (rows were
//!   written); `backoff`: the pauses after a failure;
//! - `queue` (feature `pg-queue`): the server's queue in its database, and
//!   a client of it that LISTENs for news;
//! - `nats_subjects`: the NATS JetStream conventions both halves keep
//!   (subjects, streams, the consumer, message ids); `nats` (feature
//!   `nats`): the JetStream client.
//!
//! A transport is anything that implements [`Transport`]: the loop asks
//! nothing else of it.

mod backoff;
pub mod control;
pub mod device_loop;
#[cfg(feature = "nats")]
pub mod nats;
pub use magic_sync_proto::nats_subjects;
#[cfg(feature = "pg-queue")]
pub mod queue;
#[cfg(feature = "ws")]
pub mod ws;

use std::time::Duration;

pub use control::{Control, Waker};
pub use device_loop::{run, Options, Status};

use crate::error::Error;
use crate::upload::Upload;

/// One message the transport delivered: its bytes, and what acknowledges
/// it.
pub struct Delivery<H> {
    pub handle: H,
    pub bytes: Vec<u8>,
}

/// What a take answered: the message, if one waits, and whether the
/// transport took the report handed to it on the way.
pub struct Taken<H> {
    pub delivery: Option<Delivery<H>>,
    pub reported: bool,
}

/// A client of one transport, as the device loop uses it (protocol §2):
/// messages down, one at a time, each acknowledged by its own handle; Ups
/// on each lane, in order.
///
/// Every error says whose fault it is: [`Error::TransportDown`] (the
/// network, or the transport's server away: asked again after a pause) or
/// [`Error::TransportRefused`] (for good: an Up so refused is narrowed to
/// the row at fault).
pub trait Transport {
    /// What acknowledges one delivered message, and no other.
    type Handle;

    /// Connects, or connects again after an error: the loop calls it
    /// before anything else, and after every failure.
    fn connect(&mut self) -> Result<(), Error>;

    /// The next message for the replica, if one waits now. It stays the
    /// transport's until acknowledged.
    fn next(&mut self) -> Result<Option<Delivery<Self::Handle>>, Error>;

    /// The replica committed the message (or it changed nothing): release
    /// it, so the next one comes.
    fn ack(&mut self, handle: Self::Handle) -> Result<(), Error>;

    /// The replica could not take the message (a later protocol, its
    /// storage failed): leave it unacknowledged, to come again — not before
    /// `retry_in`, where the transport can say so.
    fn hold(&mut self, handle: Self::Handle, retry_in: Duration) -> Result<(), Error> {
        let _ = (handle, retry_in);
        Ok(())
    }

    /// Hands an Up to the transport, on its lane (`up.lane`). `Ok` once the
    /// transport took it for good (stored, or filed).
    fn send(&mut self, up: &Upload) -> Result<(), Error>;

    /// Whether [`take`](Transport::take) can carry a report of what was
    /// applied in the round trip that takes the next message (the queue
    /// can). Then the loop hands the report over as it takes, rather than
    /// in an Up of its own.
    fn carries_reports(&self) -> bool {
        false
    }

    /// The next message, as [`next`](Transport::next), handing over
    /// `report` (an Up of the first lane that carries no rows) on the way
    /// where the transport can. Answers the message, if one waits, and
    /// whether the transport took the report; one it did not take is the
    /// loop's to [`send`](Transport::send).
    fn take(&mut self, report: Option<&Upload>) -> Result<Taken<Self::Handle>, Error> {
        let _ = report;
        Ok(Taken {
            delivery: self.next()?,
            reported: false,
        })
    }

    /// Sends what the transport put off (an acknowledgement it meant to
    /// carry with the next take): the loop calls it before it waits with
    /// nothing due, and as it stops.
    fn settle(&mut self) -> Result<(), Error> {
        Ok(())
    }

    /// Waits up to `timeout` for news: answers `true` when a message may
    /// wait, `false` when the time ran out (or the wait was cut short).
    fn wait(&mut self, timeout: Duration) -> Result<bool, Error>;

    /// What cuts a wait short from another thread, if the transport can:
    /// the loop then waits in one go. Without one, it waits in short
    /// slices, looking between them whether it was stopped or poked.
    fn waker(&self) -> Option<Waker> {
        None
    }
}

//! Every failure of the nats transport, told apart as transient (the
//! network, a server busy or restarting: a retry may get through) or for
//! good (the transport will not take it: a setting or a message is wrong),
//! by the error's kind and JetStream's error code, never by its text.

use std::fmt::Display;

use async_nats::jetstream::context::PublishErrorKind;
use async_nats::jetstream::context::{CreateStreamError, CreateStreamErrorKind, PublishError};
use async_nats::jetstream::stream::{ConsumerError, ConsumerErrorKind, PurgeError, PurgeErrorKind};
use async_nats::jetstream::ErrorCode;
use async_nats::{ConnectError, ConnectErrorKind};

#[derive(Debug, thiserror::Error)]
#[error("{what}")]
pub struct TransportError {
    /// A retry may help.
    pub transient: bool,
    /// No stream took a publish: the streams are to be made again.
    pub stream_missing: bool,
    what: String,
}

/// JetStream's answers that a retry may cure: a cluster electing a leader,
/// storage or resources short for now.
const TRANSIENT_CODES: [ErrorCode; 10] = [
    ErrorCode::CLUSTER_NOT_AVAILABLE,
    ErrorCode::CLUSTER_NOT_ACTIVE,
    ErrorCode::CLUSTER_NOT_LEADER,
    ErrorCode::CLUSTER_NO_PEERS,
    ErrorCode::CLUSTER_INCOMPLETE,
    ErrorCode::INSUFFICIENT_RESOURCES,
    ErrorCode::STORAGE_RESOURCES_EXCEEDED,
    ErrorCode::MEMORY_RESOURCES_EXCEEDED,
    ErrorCode::STREAM_STORE_FAILED,
    ErrorCode::RAFT_GENERAL,
];

fn transient_code(code: ErrorCode) -> bool {
    TRANSIENT_CODES.contains(&code)
}

impl TransportError {
    fn new(transient: bool, what: String) -> TransportError {
        TransportError {
            transient,
            stream_missing: false,
            what,
        }
    }

    /// Something of this machine failed (a thread, a socket): try again.
    pub fn local(e: impl Display) -> TransportError {
        TransportError::new(true, format!("nats transport: {e}"))
    }

    pub fn timed_out(what: &str) -> TransportError {
        TransportError::new(true, format!("nats: no answer in time, {what}"))
    }

    pub fn of_connect(urls: &[String], e: ConnectError) -> TransportError {
        let transient = match e.kind() {
            ConnectErrorKind::Dns
            | ConnectErrorKind::TimedOut
            | ConnectErrorKind::Io
            | ConnectErrorKind::MaxReconnects => true,
            ConnectErrorKind::ServerParse
            | ConnectErrorKind::Authentication
            | ConnectErrorKind::AuthorizationViolation
            | ConnectErrorKind::Tls => false,
        };
        TransportError::new(
            transient,
            format!(
                "nats: cannot connect to {} (magic_sync.nats_url): {e}",
                urls.join(",")
            ),
        )
    }

    pub fn of_credentials(path: &str, e: std::io::Error) -> TransportError {
        TransportError::new(
            false,
            format!("nats: cannot read {path} (magic_sync.nats_credentials): {e}"),
        )
    }

    pub fn of_stream(name: &str, e: CreateStreamError) -> TransportError {
        let transient = match e.kind() {
            CreateStreamErrorKind::TimedOut
            | CreateStreamErrorKind::JetStreamUnavailable
            | CreateStreamErrorKind::Response => true,
            CreateStreamErrorKind::JetStream(js) => transient_code(js.error_code()),
            _ => false,
        };
        TransportError::new(transient, format!("nats: stream {name}: {e}"))
    }

    pub fn of_consumer(name: &str, e: ConsumerError) -> TransportError {
        let transient = match e.kind() {
            ConsumerErrorKind::TimedOut | ConsumerErrorKind::Request => true,
            ConsumerErrorKind::JetStream(js) => transient_code(js.error_code()),
            _ => false,
        };
        TransportError::new(transient, format!("nats: consumer {name}: {e}"))
    }

    pub fn of_purge(subject: &str, e: PurgeError) -> TransportError {
        let transient = match e.kind() {
            PurgeErrorKind::Request | PurgeErrorKind::TimedOut => true,
            PurgeErrorKind::JetStream(js) => transient_code(js.error_code()),
        };
        TransportError::new(transient, format!("nats: purging {subject}: {e}"))
    }

    pub fn of_publish(e: PublishError) -> TransportError {
        let transient = match e.kind() {
            // No stream took it: the stream is being made again, or the
            // server restarts.
            PublishErrorKind::StreamNotFound
            | PublishErrorKind::TimedOut
            | PublishErrorKind::BrokenPipe
            | PublishErrorKind::MaxAckPending => true,
            PublishErrorKind::MaxPayloadExceeded
            | PublishErrorKind::WrongLastMessageId
            | PublishErrorKind::WrongLastSequence => false,
            // JetStream answered with an error of its own, or the client
            // could not send: a code says which.
            PublishErrorKind::Other => match jetstream_code(&e) {
                Some(code) => transient_code(code),
                None => true,
            },
        };
        let stream_missing = e.kind() == PublishErrorKind::StreamNotFound;
        TransportError {
            stream_missing,
            ..TransportError::new(transient, format!("nats: publish: {e}"))
        }
    }

    pub fn of_ack(e: impl Display) -> TransportError {
        TransportError::new(true, format!("nats: acknowledging an Up: {e}"))
    }
}

/// The JetStream error code a publish's failure carries, if it carries one.
fn jetstream_code(e: &PublishError) -> Option<ErrorCode> {
    let source = std::error::Error::source(e)?;
    source
        .downcast_ref::<async_nats::jetstream::Error>()
        .map(|js| js.error_code())
}

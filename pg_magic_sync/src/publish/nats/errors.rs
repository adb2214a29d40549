//! Every failure of the nats transport, as the crate's one error type
//! (`Error::Transport`), told apart as transient (the network, a server
//! busy or restarting: a retry may get through) or for good (the transport
//! will not take it: a setting or a message is wrong), by the error's kind
//! and JetStream's error code, never by its text.

use std::fmt::Display;

use async_nats::jetstream::context::PublishErrorKind;
use async_nats::jetstream::context::{
    CreateStreamError, CreateStreamErrorKind, GetStreamError, GetStreamErrorKind, PublishError,
};
use async_nats::jetstream::stream::{ConsumerError, ConsumerErrorKind, PurgeError, PurgeErrorKind};
use async_nats::jetstream::ErrorCode;
use async_nats::{ConnectError, ConnectErrorKind};

use crate::error::Error;

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

/// The nats transport's failures, as the crate's one error type
/// (`Error::Transport`).
impl Error {
    fn nats(transient: bool, what: String) -> Error {
        Error::Transport {
            transient,
            stream_missing: false,
            what,
        }
    }

    /// Something of this machine failed (a thread, a socket): try again.
    pub fn local(e: impl Display) -> Error {
        Error::nats(true, format!("nats transport: {e}"))
    }

    pub fn timed_out(what: &str) -> Error {
        Error::nats(true, format!("nats: no answer in time, {what}"))
    }

    pub fn of_connect(urls: &[String], e: ConnectError) -> Error {
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
        Error::nats(
            transient,
            format!(
                "nats: cannot connect to {} (magic_sync.nats_url): {e}",
                urls.join(",")
            ),
        )
    }

    pub fn of_credentials(path: &str, e: std::io::Error) -> Error {
        Error::nats(
            false,
            format!("nats: cannot read {path} (magic_sync.nats_credentials): {e}"),
        )
    }

    pub fn of_password_file(path: &str, e: std::io::Error) -> Error {
        Error::nats(
            false,
            format!("nats: cannot read {path} (magic_sync.nats_password_file): {e}"),
        )
    }

    pub fn no_password_file() -> Error {
        Error::nats(
            false,
            "nats: magic_sync.nats_user is set but magic_sync.nats_password_file is not".to_owned(),
        )
    }

    pub fn two_ways_to_log_in() -> Error {
        Error::nats(
            false,
            "nats: set magic_sync.nats_credentials or magic_sync.nats_user, not both".to_owned(),
        )
    }

    pub fn of_stream(name: &str, e: CreateStreamError) -> Error {
        let transient = match e.kind() {
            CreateStreamErrorKind::TimedOut
            | CreateStreamErrorKind::JetStreamUnavailable
            | CreateStreamErrorKind::Response => true,
            CreateStreamErrorKind::JetStream(js) => transient_code(js.error_code()),
            _ => false,
        };
        Error::nats(transient, format!("nats: stream {name}: {e}"))
    }

    pub fn of_getting_stream(name: &str, e: GetStreamError) -> Error {
        let transient = match e.kind() {
            GetStreamErrorKind::Request => true,
            GetStreamErrorKind::JetStream(js) => transient_code(js.error_code()),
            _ => false,
        };
        Error::nats(transient, format!("nats: stream {name}: {e}"))
    }

    pub fn of_consumer(name: &str, e: ConsumerError) -> Error {
        let transient = match e.kind() {
            ConsumerErrorKind::TimedOut | ConsumerErrorKind::Request => true,
            ConsumerErrorKind::JetStream(js) => transient_code(js.error_code()),
            _ => false,
        };
        Error::nats(transient, format!("nats: consumer {name}: {e}"))
    }

    /// Whether JetStream answered that the consumer does not exist.
    pub fn is_no_consumer(e: &ConsumerError) -> bool {
        matches!(e.kind(), ConsumerErrorKind::JetStream(js)
            if js.error_code() == ErrorCode::CONSUMER_NOT_FOUND)
    }

    pub fn of_purge(subject: &str, e: PurgeError) -> Error {
        let transient = match e.kind() {
            PurgeErrorKind::Request | PurgeErrorKind::TimedOut => true,
            PurgeErrorKind::JetStream(js) => transient_code(js.error_code()),
        };
        Error::nats(transient, format!("nats: purging {subject}: {e}"))
    }

    pub fn of_publish(e: PublishError) -> Error {
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
            // JetStream answered with an error of its own (its code says
            // which), or the client failed before sending (its cause says).
            PublishErrorKind::Other => other_publish_failure_is_transient(&e),
        };
        let stream_missing = e.kind() == PublishErrorKind::StreamNotFound;
        Error::Transport {
            transient,
            stream_missing,
            what: format!("nats: publish: {e}"),
        }
    }

    /// An acknowledgement of an Up that failed. Harmless whatever it was
    /// (the Up comes again and is answered as filed already), but told
    /// apart all the same: the connection or no answer in time may pass.
    pub fn of_ack(e: async_nats::Error) -> Error {
        let transient = match e.downcast_ref::<std::io::Error>() {
            Some(io) => io.kind() == std::io::ErrorKind::TimedOut,
            None => {
                e.is::<async_nats::SubscribeError>() || e.is::<async_nats::client::PublishError>()
            }
        };
        Error::nats(transient, format!("nats: acknowledging an Up: {e}"))
    }
}

/// A publish that failed for a reason the client files under "other":
/// JetStream's own answer (by its code), the client's semaphore of
/// acknowledgements closed under it (the connection is being dropped: a
/// retry connects again), or anything else, which nobody classified and
/// so is taken as permanent (an unreadable answer, a subject refused).
fn other_publish_failure_is_transient(e: &PublishError) -> bool {
    let Some(source) = std::error::Error::source(e) else {
        return false;
    };
    if let Some(js) = source.downcast_ref::<async_nats::jetstream::Error>() {
        return transient_code(js.error_code());
    }
    source.is::<tokio::sync::AcquireError>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_nats::jetstream::context::PublishError;

    fn publish(kind: PublishErrorKind) -> Error {
        Error::of_publish(PublishError::new(kind))
    }

    #[test]
    fn a_publish_that_found_no_stream_or_no_answer_may_get_through_later() {
        for kind in [
            PublishErrorKind::StreamNotFound,
            PublishErrorKind::TimedOut,
            PublishErrorKind::BrokenPipe,
            PublishErrorKind::MaxAckPending,
        ] {
            assert!(publish(kind).is_transient(), "{kind:?}");
        }
        assert!(publish(PublishErrorKind::StreamNotFound).stream_missing());
        assert!(!publish(PublishErrorKind::TimedOut).stream_missing());
    }

    #[test]
    fn a_publish_the_stream_will_never_take_is_refused_for_good() {
        for kind in [
            PublishErrorKind::MaxPayloadExceeded,
            PublishErrorKind::WrongLastMessageId,
            PublishErrorKind::WrongLastSequence,
        ] {
            assert!(!publish(kind).is_transient(), "{kind:?}");
        }
    }

    #[test]
    fn a_failure_nobody_classified_is_permanent() {
        assert!(!publish(PublishErrorKind::Other).is_transient());
        let unreadable = serde_json::from_str::<u8>("not a number").unwrap_err();
        let e = PublishError::with_source(PublishErrorKind::Other, unreadable);
        assert!(!Error::of_publish(e).is_transient());
        let strange: async_nats::Error = Box::new(std::fmt::Error);
        assert!(!Error::of_ack(strange).is_transient());
    }

    #[test]
    fn jetstream_answers_are_told_apart_by_their_code() {
        let answer = |code: u64| {
            let js: async_nats::jetstream::Error = serde_json::from_value(serde_json::json!(
                {"code": 503, "err_code": code, "description": "said by the server"}
            ))
            .unwrap();
            Error::of_publish(PublishError::with_source(PublishErrorKind::Other, js))
        };
        assert!(answer(ErrorCode::CLUSTER_NOT_AVAILABLE.0).is_transient());
        assert!(answer(ErrorCode::STORAGE_RESOURCES_EXCEEDED.0).is_transient());
        assert!(!answer(ErrorCode::STREAM_NAME_EXIST.0).is_transient());
    }

    #[test]
    fn an_acknowledgement_lost_to_the_network_may_get_through_later() {
        let late: async_nats::Error = Box::new(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "no answer",
        ));
        assert!(Error::of_ack(late).is_transient());
        let dropped: async_nats::Error = Box::new(std::io::Error::other("dropped"));
        assert!(!Error::of_ack(dropped).is_transient());
    }
}

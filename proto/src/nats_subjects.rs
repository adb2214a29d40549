//! The NATS JetStream conventions, fixed and shared: the server half
//! (pg_magic_sync/src/publish/nats/) publishes and reads by the very names
//! the replica's client (replica/src/transport/nats.rs) uses.
//!
//! - **Down.** The server publishes each `ToReplica` to
//!   `{prefix}.down.{replica}` — the replica's UUID, lowercase and
//!   hyphenated — in the stream `MAGIC_SYNC_DOWN` (file storage, workqueue
//!   retention, subjects `{prefix}.down.*`), with the header `Nats-Msg-Id`
//!   set to the message's outbox id. Per replica it creates a durable pull
//!   consumer on that stream named as the replica's UUID: filter subject
//!   the replica's down subject, explicit acknowledgements, at most one
//!   unacknowledged (`max_ack_pending` 1), delivering all, `ack_wait` 30 s.
//!   The device never creates it: until it exists the server has sent the
//!   replica nothing. The device fetches one message at a time, applies
//!   it, then acknowledges it with a double ack (the server confirms it),
//!   so an acknowledgement lost is known.
//! - **Up.** The device publishes each Up with a JetStream publish (the
//!   stream's acknowledgement awaited) to `{prefix}.up.{replica}.{lane
//!   token}`, in the stream `MAGIC_SYNC_UP` (created by the server,
//!   subjects `{prefix}.up.>`), with `Nats-Msg-Id` set to
//!   `{replica}.{lane token}.{upload number}` when the Up carries rows (an
//!   upload number), none otherwise. The server files each Up under the
//!   replica its subject names, and its answer (`Filed`) comes back down.
//! - **Lane tokens.** A lane's name when it is made of `A-Z a-z 0-9 _ -`
//!   only; otherwise `x` followed by the name's UTF-8 bytes in lowercase
//!   hex (`till rolls` → `x74696c6c20726f6c6c73`).
//! - **Inboxes.** The device takes the replies to its requests on
//!   `_INBOX.{replica}.…`, so an account can let each device hear its own
//!   replies and nobody else's.
//!
//! `prefix` is `magic_sync` unless the installation says otherwise.

use std::time::Duration;

use uuid::Uuid;

pub const DEFAULT_PREFIX: &str = "magic_sync";
/// The stream of every replica's messages down.
pub const DOWN_STREAM: &str = "MAGIC_SYNC_DOWN";
/// The stream of every replica's Ups.
pub const UP_STREAM: &str = "MAGIC_SYNC_UP";
/// The header JetStream deduplicates by.
pub const MSG_ID: &str = "Nats-Msg-Id";
/// How long the replica's consumer waits for an acknowledgement before it
/// delivers the message again.
pub const ACK_WAIT: Duration = Duration::from_secs(30);
/// One message down at a time (protocol §2).
pub const MAX_ACK_PENDING: i64 = 1;

fn id(replica: Uuid) -> String {
    replica.hyphenated().to_string()
}

/// The subject of one replica's messages down.
pub fn down_subject(prefix: &str, replica: Uuid) -> String {
    format!("{prefix}.down.{}", id(replica))
}

/// The subjects of the down stream: every replica's.
pub fn down_stream_subjects(prefix: &str) -> String {
    format!("{prefix}.down.*")
}

/// The durable consumer of one replica's messages, on the down stream.
pub fn consumer_name(replica: Uuid) -> String {
    id(replica)
}

/// The subject of one replica's Ups on one lane.
pub fn up_subject(prefix: &str, replica: Uuid, lane: &str) -> String {
    format!("{prefix}.up.{}.{}", id(replica), lane_token(lane))
}

/// The subjects of the up stream: every replica's, every lane's.
pub fn up_stream_subjects(prefix: &str) -> String {
    format!("{prefix}.up.>")
}

/// The message id of an Up that carries upload `number`: a resend carries
/// a fresh number, so only a publish repeated by the transport itself is
/// taken as a duplicate.
pub fn up_msg_id(replica: Uuid, lane: &str, number: u64) -> String {
    format!("{}.{}.{number}", id(replica), lane_token(lane))
}

/// Where the device hears the replies to its requests.
pub fn inbox_prefix(replica: Uuid) -> String {
    format!("_INBOX.{}", id(replica))
}

fn is_plain(lane: &str) -> bool {
    !lane.is_empty()
        && lane
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// A lane's name as one subject token.
pub fn lane_token(lane: &str) -> String {
    if is_plain(lane) {
        return lane.to_owned();
    }
    let mut token = String::with_capacity(1 + 2 * lane.len());
    token.push('x');
    for byte in lane.bytes() {
        token.push_str(&format!("{byte:02x}"));
    }
    token
}

/// The lane a token names. A token of `x` and hex that spells a name which
/// is not plain is that name; any other token is the name itself. (So a
/// plain name of `x` and hex, such as `x20`, or `x` alone, reads as the
/// lane it spells — ` `, or the empty name: give a lane such a name and
/// its token is taken for another's. The NATS client refuses lanes whose
/// tokens meet.)
pub fn lane_of_token(token: &str) -> String {
    decode_hex_lane(token).unwrap_or_else(|| token.to_owned())
}

fn decode_hex_lane(token: &str) -> Option<String> {
    let hex = token.strip_prefix('x')?;
    if hex.len() % 2 != 0 || !hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    let bytes: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16))
        .collect::<Result<_, _>>()
        .ok()?;
    let name = String::from_utf8(bytes).ok()?;
    (!is_plain(&name)).then_some(name)
}

/// The replica and the lane an up subject names, as the server reads them;
/// `None` for a subject that is no replica's up subject.
pub fn parse_up_subject(prefix: &str, subject: &str) -> Option<(Uuid, String)> {
    let rest = subject.strip_prefix(prefix)?.strip_prefix(".up.")?;
    let (replica, token) = rest.split_once('.')?;
    if token.contains('.') || token.is_empty() {
        return None;
    }
    // Only the one spelling: the server files under the replica it names.
    let parsed = Uuid::try_parse(replica).ok()?;
    (id(parsed) == replica).then(|| (parsed, lane_of_token(token)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replica() -> Uuid {
        Uuid::parse_str("01960000-0000-7000-8000-0000000000AA").unwrap()
    }

    #[test]
    fn subjects_name_the_replica_lowercase_and_hyphenated() {
        assert_eq!(
            down_subject(DEFAULT_PREFIX, replica()),
            "magic_sync.down.01960000-0000-7000-8000-0000000000aa"
        );
        assert_eq!(
            up_subject("shop", replica(), "main"),
            "shop.up.01960000-0000-7000-8000-0000000000aa.main"
        );
        assert_eq!(
            consumer_name(replica()),
            "01960000-0000-7000-8000-0000000000aa"
        );
        assert_eq!(
            up_msg_id(replica(), "main", 42),
            "01960000-0000-7000-8000-0000000000aa.main.42"
        );
    }

    #[test]
    fn a_plain_lane_is_its_own_token_and_any_other_is_x_and_its_bytes_in_hex() {
        assert_eq!(lane_token("main"), "main");
        assert_eq!(lane_token("Big_tables-2"), "Big_tables-2");
        assert_eq!(lane_token("till rolls"), "x74696c6c20726f6c6c73");
        assert_eq!(lane_token("a.b"), "x612e62");
        assert_eq!(lane_token("reçus"), "x7265c3a77573");
        assert_eq!(lane_token(""), "x");
    }

    #[test]
    fn a_token_reads_back_as_its_lane() {
        for lane in [
            "main",
            "till rolls",
            "a.b",
            "reçus",
            "xyz",
            "x2",
            "",
            ">",
            "*",
        ] {
            assert_eq!(lane_of_token(&lane_token(lane)), lane, "{lane:?}");
        }
    }

    #[test]
    fn a_plain_name_of_x_and_hex_reads_as_the_lane_its_hex_spells() {
        // The one ambiguity of the convention: `x20` is both the plain
        // lane `x20` and the token of ` `; the token reads as ` `.
        assert_eq!(lane_token("x20"), lane_token(" "));
        assert_eq!(lane_of_token("x20"), " ");
        assert_eq!(lane_token("x"), lane_token(""));
    }

    #[test]
    fn an_up_subject_reads_back_as_its_replica_and_lane() {
        let subject = up_subject(DEFAULT_PREFIX, replica(), "till rolls");
        assert_eq!(
            parse_up_subject(DEFAULT_PREFIX, &subject),
            Some((replica(), "till rolls".to_owned()))
        );
        for not_one in [
            "magic_sync.up.01960000-0000-7000-8000-0000000000aa",
            "magic_sync.up.01960000-0000-7000-8000-0000000000aa.main.more",
            "magic_sync.up.0196000000007000800000000000000aa.main",
            "magic_sync.up.01960000-0000-7000-8000-0000000000AA.main",
            "magic_sync.down.01960000-0000-7000-8000-0000000000aa.main",
            "other.up.01960000-0000-7000-8000-0000000000aa.main",
        ] {
            assert_eq!(parse_up_subject(DEFAULT_PREFIX, not_one), None, "{not_one}");
        }
    }
}

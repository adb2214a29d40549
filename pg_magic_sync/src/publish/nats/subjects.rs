//! How the nats transport names things, fixed between the server and the
//! devices (docs/transports.md):
//!
//! - `{prefix}.down.{replica}`: the replica's messages, in stream
//!   `magic_sync.nats_down_stream`, each under `Nats-Msg-Id` = its outbox id;
//!   a durable pull consumer named as the replica reads them.
//! - `{prefix}.up.{replica}.{lane}`: its Ups, in `magic_sync.nats_up_stream`,
//!   read by the relay's consumer. The lane token is for order only: the
//!   server files an Up under the replica the subject names.

use uuid::Uuid;

/// The relay's durable consumer of every replica's Ups.
pub const UP_CONSUMER: &str = "magic_sync_relay";

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subjects {
    pub prefix: String,
}

impl Subjects {
    pub fn down(&self, replica: Uuid) -> String {
        format!("{}.down.{}", self.prefix, replica.hyphenated())
    }

    /// Every replica's messages: the down stream's subjects.
    pub fn every_down(&self) -> String {
        format!("{}.down.*", self.prefix)
    }

    /// Every replica's Ups, on every lane: the up stream's subjects.
    pub fn every_up(&self) -> String {
        format!("{}.up.>", self.prefix)
    }

    /// The replica an Up's subject names, if it is one of ours and names one.
    pub fn up_sender(&self, subject: &str) -> Option<Uuid> {
        let rest = subject.strip_prefix(&self.prefix)?.strip_prefix(".up.")?;
        let (replica, lane) = rest.split_once('.')?;
        if lane.is_empty() {
            return None;
        }
        // Only the canonical form: the subject the device's rights allow.
        let parsed = Uuid::parse_str(replica).ok()?;
        (parsed.hyphenated().to_string() == replica).then_some(parsed)
    }
}

/// A replica's consumer is named as the replica.
pub fn consumer_name(replica: Uuid) -> String {
    replica.hyphenated().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subjects() -> Subjects {
        Subjects {
            prefix: "magic_sync".into(),
        }
    }

    #[test]
    fn an_up_is_filed_under_the_replica_its_subject_names() {
        let replica = Uuid::parse_str("0196a0b2-0000-7000-8000-000000000001").unwrap();
        assert_eq!(
            subjects().up_sender(&format!("magic_sync.up.{replica}.records")),
            Some(replica)
        );
    }

    #[test]
    fn a_subject_that_names_no_replica_files_nothing() {
        let s = subjects();
        assert_eq!(s.up_sender("magic_sync.up.not-a-uuid.records"), None);
        assert_eq!(
            s.up_sender("magic_sync.up.0196A0B2-0000-7000-8000-000000000001.records"),
            None
        );
        assert_eq!(
            s.up_sender("magic_sync.up.0196a0b2-0000-7000-8000-000000000001"),
            None
        );
        assert_eq!(
            s.up_sender("other.up.0196a0b2-0000-7000-8000-000000000001.records"),
            None
        );
    }

    #[test]
    fn a_replica_s_messages_go_to_a_subject_of_its_own() {
        let replica = Uuid::parse_str("0196a0b2-0000-7000-8000-000000000001").unwrap();
        assert_eq!(
            subjects().down(replica),
            "magic_sync.down.0196a0b2-0000-7000-8000-000000000001"
        );
        assert_eq!(consumer_name(replica), replica.to_string());
    }
}

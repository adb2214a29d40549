//! The bytes of a message, assembled from a replica's head and a shared body.
//!
//! A protobuf message is its fields one after the other, so a `Down` whose
//! head fields (sequence to mac) are encoded apart from its tables is still
//! one `Down` when the two are written back to back. The server stores each
//! body once, however many replicas' messages carry it, and each replica's
//! head beside it; the transport gets whole `ToReplica` bytes.

use prost::Message;
use uuid::Uuid;

use magic_sync_proto::wire::{Down, DownTable, EndSnapshot, Filed};
use magic_sync_proto::PROTOCOL;

/// Which body a `ToReplica` carries: its field number there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Down,
    End,
    Filed,
}

impl Kind {
    fn field(self) -> u32 {
        match self {
            Kind::Down => 2,
            Kind::End => 3,
            Kind::Filed => 4,
        }
    }

    /// The name the outbox stores.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Down => "down",
            Kind::End => "end",
            Kind::Filed => "filed",
        }
    }

    pub fn from_name(name: &str) -> Option<Kind> {
        match name {
            "down" => Some(Kind::Down),
            "end" => Some(Kind::End),
            "filed" => Some(Kind::Filed),
            _ => None,
        }
    }
}

/// A message's head: the fields that are one replica's own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Head {
    pub sequence: u64,
    pub nonce: u64,
    pub previous: u64,
    pub previous_nonce: u64,
    pub epoch: Uuid,
    pub snapshot_id: Option<Uuid>,
    pub mac: Vec<u8>,
}

impl Head {
    /// The transport's name for the message: `{epoch}-{sequence}-{nonce}`.
    pub fn transport_id(&self) -> String {
        format!("{}-{}-{}", self.epoch, self.sequence, self.nonce)
    }

    /// The head's fields, encoded. A `Down` and an `EndSnapshot` number them
    /// alike, so one encoding serves both.
    pub fn encode(&self) -> Vec<u8> {
        Down {
            sequence: self.sequence,
            nonce: self.nonce,
            previous: self.previous,
            previous_nonce: self.previous_nonce,
            epoch: self.epoch.to_string(),
            snapshot_id: self.snapshot_id.map(|s| s.to_string()).unwrap_or_default(),
            mac: self.mac.clone(),
            tables: Vec::new(),
        }
        .encode_to_vec()
    }
}

/// The body of a `Down`: its parts, encoded.
pub fn down_body(tables: Vec<DownTable>) -> Vec<u8> {
    Down {
        tables,
        ..Default::default()
    }
    .encode_to_vec()
}

/// The body of an `EndSnapshot`: the tables it covered, encoded.
pub fn end_body(tables: Vec<String>) -> Vec<u8> {
    EndSnapshot {
        tables,
        ..Default::default()
    }
    .encode_to_vec()
}

/// A `Filed`, encoded whole (it has no head of its own). Sent once uploads
/// are filed.
#[allow(dead_code)]
pub fn filed(uploads: Vec<u64>) -> Vec<u8> {
    Filed { uploads }.encode_to_vec()
}

/// The `ToReplica` bytes of a message: the protocol, then the body's field
/// holding the head and the body back to back.
pub fn to_replica(kind: Kind, head: &[u8], body: &[u8]) -> Vec<u8> {
    let inner = head.len() + body.len();
    let mut bytes = Vec::with_capacity(inner + 16);
    prost::encoding::uint32::encode(1, &PROTOCOL, &mut bytes);
    prost::encoding::encode_key(
        kind.field(),
        prost::encoding::WireType::LengthDelimited,
        &mut bytes,
    );
    prost::encoding::encode_varint(inner as u64, &mut bytes);
    bytes.extend_from_slice(head);
    bytes.extend_from_slice(body);
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;
    use magic_sync_proto::wire::{to_replica::Body, ToReplica};

    fn head() -> Head {
        Head {
            sequence: 12,
            nonce: 345,
            previous: 11,
            previous_nonce: 678,
            epoch: Uuid::from_u128(0xabc),
            snapshot_id: Some(Uuid::from_u128(0xdef)),
            mac: vec![7; 16],
        }
    }

    fn part() -> DownTable {
        DownTable {
            table: "products".into(),
            deletes: vec!["1".into()],
            upserts: vec![b"{\"id\":2}".to_vec()],
            keys: vec!["2".into()],
            recorded: vec![],
        }
    }

    #[test]
    fn a_head_and_a_body_back_to_back_are_one_down() {
        let bytes = to_replica(Kind::Down, &head().encode(), &down_body(vec![part()]));
        let decoded = ToReplica::decode(bytes.as_slice()).unwrap();
        assert_eq!(decoded.protocol, PROTOCOL);
        let Some(Body::Down(down)) = decoded.body else {
            panic!("not a Down: {decoded:?}")
        };
        assert_eq!(down.sequence, 12);
        assert_eq!(down.nonce, 345);
        assert_eq!(down.previous, 11);
        assert_eq!(down.previous_nonce, 678);
        assert_eq!(down.epoch, Uuid::from_u128(0xabc).to_string());
        assert_eq!(down.snapshot_id, Uuid::from_u128(0xdef).to_string());
        assert_eq!(down.mac, vec![7; 16]);
        assert_eq!(down.tables, vec![part()]);
    }

    #[test]
    fn an_end_of_snapshot_shares_the_head() {
        let tables = vec!["products".to_owned(), "orders".to_owned()];
        let bytes = to_replica(Kind::End, &head().encode(), &end_body(tables.clone()));
        let Some(Body::EndSnapshot(end)) = ToReplica::decode(bytes.as_slice()).unwrap().body else {
            panic!("not an EndSnapshot")
        };
        assert_eq!(end.sequence, 12);
        assert_eq!(end.snapshot_id, Uuid::from_u128(0xdef).to_string());
        assert_eq!(end.tables, tables);
    }

    #[test]
    fn a_filed_is_its_own_body() {
        let bytes = to_replica(Kind::Filed, &filed(vec![57, 58]), &[]);
        let Some(Body::Filed(f)) = ToReplica::decode(bytes.as_slice()).unwrap().body else {
            panic!("not a Filed")
        };
        assert_eq!(f.uploads, vec![57, 58]);
    }

    #[test]
    fn a_message_of_no_snapshot_has_an_empty_snapshot_id() {
        let plain = Head {
            snapshot_id: None,
            ..head()
        };
        let bytes = to_replica(Kind::Down, &plain.encode(), &[]);
        let Some(Body::Down(down)) = ToReplica::decode(bytes.as_slice()).unwrap().body else {
            panic!("not a Down")
        };
        assert_eq!(down.snapshot_id, "");
    }

    #[test]
    fn the_transport_id_names_epoch_sequence_and_nonce() {
        assert_eq!(
            head().transport_id(),
            format!("{}-12-345", Uuid::from_u128(0xabc))
        );
    }
}

//! Whether a message is one a server could have sent (protocol §4.0, §4.1).
//!
//! Pure functions over the decoded message and the replica's limits: no
//! database. A message that fails one is malformed: the replica applies
//! none of it and still acknowledges it, so it does not hold back the queue.
//! Each failure is named by its case, as in the corpus of malformed
//! messages. Only a message of a later protocol is an error (the crate's
//! `Error::LaterProtocol`): it is not acknowledged, and waits for a build
//! that reads it.

use std::fmt;

use magic_sync_proto::limits::Limits;
use magic_sync_proto::wire::{to_replica::Body, Down, EndSnapshot, Filed, ToReplica};
use magic_sync_proto::{LARGEST_NUMBER, PROTOCOL};
use prost::Message;
use uuid::Uuid;

use crate::error::Error;

/// A message no server sends: the protocol's case it breaks, by name, and
/// what it carried. Not an error: such a message is acknowledged and
/// applies nothing, so it comes back in an `Ok` (`Received::Malformed`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Malformed {
    /// The case's name (`sequence_zero`, `no_mac`, ...).
    pub case: &'static str,
    /// What the message carried, for the log.
    pub detail: String,
}

impl Malformed {
    pub(crate) fn new(case: &'static str, detail: impl Into<String>) -> Malformed {
        Malformed {
            case,
            detail: detail.into(),
        }
    }
}

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "malformed ({}): {}", self.case, self.detail)
    }
}

/// The numbers a chained message (a `Down` or an `EndSnapshot`) carries in
/// front of its body.
#[derive(Clone, Copy, Debug)]
pub struct Head<'m> {
    pub sequence: u64,
    pub nonce: u64,
    pub previous: u64,
    pub previous_nonce: u64,
    pub epoch: &'m str,
    pub snapshot_id: &'m str,
    pub mac: &'m [u8],
}

impl<'m> Head<'m> {
    pub fn of_down(down: &'m Down) -> Head<'m> {
        Head {
            sequence: down.sequence,
            nonce: down.nonce,
            previous: down.previous,
            previous_nonce: down.previous_nonce,
            epoch: &down.epoch,
            snapshot_id: &down.snapshot_id,
            mac: &down.mac,
        }
    }

    pub fn of_end_snapshot(end: &'m EndSnapshot) -> Head<'m> {
        Head {
            sequence: end.sequence,
            nonce: end.nonce,
            previous: end.previous,
            previous_nonce: end.previous_nonce,
            epoch: &end.epoch,
            snapshot_id: &end.snapshot_id,
            mac: &end.mac,
        }
    }

    /// A message that follows nothing begins a snapshot.
    pub fn begins_a_snapshot(&self) -> bool {
        self.previous == 0
    }
}

/// The bytes as a `ToReplica`.
pub fn decode(bytes: &[u8]) -> Result<ToReplica, Malformed> {
    // A Down in the plain encoding is read in one pass; prost reads the
    // rest, and decides what does not decode.
    if let Some(message) = crate::message::wire::down(bytes) {
        return Ok(message);
    }
    ToReplica::decode(bytes).map_err(|e| Malformed::new("does_not_decode", e.to_string()))
}

/// The message's body, once its protocol and every number in it are ones a
/// server sends; or the case it breaks (`Ok(Err(..))`: acknowledge it and
/// apply nothing). `Err`: a later protocol, not to be acknowledged.
pub fn message<'m>(
    message: &'m ToReplica,
    limits: &Limits,
) -> Result<Result<&'m Body, Malformed>, Error> {
    if let Err(malformed) = protocol(message.protocol)? {
        return Ok(Err(malformed));
    }
    Ok(body(message, limits))
}

/// The body of a message of a protocol this build reads, once every number
/// in it is one a server sends.
fn body<'m>(message: &'m ToReplica, limits: &Limits) -> Result<&'m Body, Malformed> {
    let body = message.body.as_ref().ok_or_else(|| {
        Malformed::new(
            "no_body",
            "the message carries no Down, EndSnapshot or Filed",
        )
    })?;
    match body {
        Body::Down(down) => self::down(down, limits)?,
        Body::EndSnapshot(end) => end_snapshot(end, limits)?,
        Body::Filed(filed) => self::filed(filed, limits)?,
    }
    Ok(body)
}

/// 1 to this build's own: 0 is malformed, a later one an error.
pub fn protocol(protocol: u32) -> Result<Result<(), Malformed>, Error> {
    match protocol {
        0 => Ok(Err(Malformed::new("no_protocol", "protocol 0"))),
        p if p > PROTOCOL => Err(Error::LaterProtocol {
            theirs: p,
            ours: PROTOCOL,
        }),
        _ => Ok(Ok(())),
    }
}

/// The numbers every chained message carries.
pub fn head(head: &Head<'_>) -> Result<(), Malformed> {
    let h = head;
    let fail = |case, detail: String| Err(Malformed::new(case, detail));
    if h.sequence == 0 {
        return fail("sequence_zero", "sequence 0".into());
    }
    if h.sequence > LARGEST_NUMBER {
        return fail("sequence_too_large", format!("sequence {}", h.sequence));
    }
    if h.nonce == 0 {
        return fail("no_nonce", "nonce 0".into());
    }
    if h.nonce > LARGEST_NUMBER {
        return fail("nonce_too_large", format!("nonce {}", h.nonce));
    }
    if h.previous == h.sequence {
        return fail(
            "follows_itself",
            format!("sequence {} follows {}", h.sequence, h.previous),
        );
    }
    if h.previous > h.sequence {
        return fail(
            "follows_a_later_one",
            format!("sequence {} follows {}", h.sequence, h.previous),
        );
    }
    if h.previous != 0 && h.previous_nonce == 0 {
        return fail(
            "follows_without_its_nonce",
            format!("follows {} with previous_nonce 0", h.previous),
        );
    }
    if h.previous == 0 && h.previous_nonce != 0 {
        return fail(
            "follows_nothing_with_a_nonce",
            format!("previous 0 with previous_nonce {}", h.previous_nonce),
        );
    }
    if h.previous_nonce > LARGEST_NUMBER {
        return fail(
            "follows_a_nonce_too_large",
            format!("previous_nonce {}", h.previous_nonce),
        );
    }
    if Uuid::try_parse(h.epoch).is_err() {
        return fail("epoch_no_uuid", format!("epoch {:?}", h.epoch));
    }
    if !h.snapshot_id.is_empty() && Uuid::try_parse(h.snapshot_id).is_err() {
        return fail(
            "snapshot_no_uuid",
            format!("snapshot_id {:?}", h.snapshot_id),
        );
    }
    match h.mac.len() {
        0 => fail("no_mac", "no mac".into()),
        n if n < 16 => fail("mac_too_short", format!("a mac of {n} bytes")),
        n if n > 16 => fail("mac_too_long", format!("a mac of {n} bytes")),
        _ => Ok(()),
    }
}

pub fn down(down: &Down, limits: &Limits) -> Result<(), Malformed> {
    let h = Head::of_down(down);
    head(&h)?;
    if h.begins_a_snapshot() && h.snapshot_id.is_empty() {
        return Err(Malformed::new(
            "begins_no_snapshot",
            format!(
                "sequence {} follows nothing and names no snapshot",
                h.sequence
            ),
        ));
    }
    if down.tables.len() > limits.tables {
        return Err(Malformed::new(
            "more_tables_than_a_message_carries",
            format!(
                "{} tables, and a message carries {}",
                down.tables.len(),
                limits.tables
            ),
        ));
    }
    if let Some(part) = down.tables.iter().find(|p| p.keys.len() != p.upserts.len()) {
        return Err(Malformed::new(
            "keys_not_one_per_row",
            format!(
                "table `{}`: {} keys beside {} upserts",
                part.table,
                part.keys.len(),
                part.upserts.len()
            ),
        ));
    }
    let rows: usize = down
        .tables
        .iter()
        .map(|p| p.upserts.len() + p.deletes.len())
        .sum();
    if rows > limits.rows {
        return Err(Malformed::new(
            "more_rows_than_a_message_carries",
            format!("{rows} rows, and a message carries {}", limits.rows),
        ));
    }
    Ok(())
}

pub fn end_snapshot(end: &EndSnapshot, limits: &Limits) -> Result<(), Malformed> {
    let h = Head::of_end_snapshot(end);
    head(&h)?;
    if h.snapshot_id.is_empty() {
        return Err(Malformed::new(
            "ends_a_snapshot_of_no_id",
            format!("EndSnapshot {} names no snapshot", h.sequence),
        ));
    }
    if end.tables.len() > limits.tables {
        return Err(Malformed::new(
            "ends_more_tables_than_a_message_carries",
            format!(
                "{} tables, and a message carries {}",
                end.tables.len(),
                limits.tables
            ),
        ));
    }
    Ok(())
}

pub fn filed(filed: &Filed, limits: &Limits) -> Result<(), Malformed> {
    if filed.uploads.len() > limits.uploads {
        return Err(Malformed::new(
            "files_more_uploads_than_a_message_carries",
            format!(
                "{} uploads, and a message carries {}",
                filed.uploads.len(),
                limits.uploads
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const E: &str = "0196a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b";

    fn good() -> Down {
        Down {
            sequence: 5,
            nonce: 9,
            previous: 4,
            previous_nonce: 8,
            epoch: E.into(),
            snapshot_id: String::new(),
            mac: vec![7; 16],
            tables: vec![],
        }
    }

    fn case_of(down: Down) -> &'static str {
        self::down(&down, &Limits::DEFAULT)
            .map(|_| "fine")
            .unwrap_or_else(|m| m.case)
    }

    #[test]
    fn a_message_a_server_sends_passes() {
        assert_eq!(case_of(good()), "fine");
    }

    #[test]
    fn each_number_out_of_range_is_named() {
        type Spoil = fn(&mut Down);
        let cases: Vec<(&str, Spoil)> = vec![
            ("sequence_zero", |d| d.sequence = 0),
            ("sequence_too_large", |d| d.sequence = LARGEST_NUMBER + 1),
            ("no_nonce", |d| d.nonce = 0),
            ("nonce_too_large", |d| d.nonce = u64::MAX),
            ("follows_itself", |d| d.previous = 5),
            ("follows_a_later_one", |d| d.previous = 6),
            ("follows_without_its_nonce", |d| d.previous_nonce = 0),
            ("follows_nothing_with_a_nonce", |d| d.previous = 0),
            ("follows_a_nonce_too_large", |d| {
                d.previous_nonce = LARGEST_NUMBER + 1
            }),
            ("epoch_no_uuid", |d| d.epoch = "e".into()),
            ("snapshot_no_uuid", |d| d.snapshot_id = "s".into()),
            ("no_mac", |d| d.mac.clear()),
            ("mac_too_short", |d| d.mac.truncate(15)),
            ("mac_too_long", |d| d.mac.push(0)),
            ("begins_no_snapshot", |d| {
                d.previous = 0;
                d.previous_nonce = 0
            }),
        ];
        for (case, spoil) in cases {
            let mut down = good();
            spoil(&mut down);
            assert_eq!(case_of(down), case);
        }
    }

    #[test]
    fn protocol_zero_is_malformed_and_a_later_one_waits() {
        assert!(matches!(protocol(0), Ok(Err(m)) if m.case == "no_protocol"));
        assert_eq!(
            protocol(PROTOCOL + 1),
            Err(Error::LaterProtocol {
                theirs: PROTOCOL + 1,
                ours: PROTOCOL
            })
        );
        assert_eq!(protocol(PROTOCOL), Ok(Ok(())));
    }
}

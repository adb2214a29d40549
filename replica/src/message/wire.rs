//! Reading a `ToReplica` that carries a `Down` in one pass over its bytes,
//! each row's bytes and key copied once: decoding it with prost costs more
//! than applying a row takes.
//!
//! Only the plain encoding is read so — each field of its type, a field
//! that is not repeated at most once, no field this build does not know;
//! anything else is `None`, and prost reads it (`check::decode`). Where it
//! reads a message, it reads what prost reads (a test holds the two to it).

use magic_sync_proto::wire::{to_replica::Body, Down, DownTable, ToReplica};

const VARINT: u64 = 0;
const LEN: u64 = 2;

struct Reader<'b> {
    bytes: &'b [u8],
}

impl<'b> Reader<'b> {
    fn done(&self) -> bool {
        self.bytes.is_empty()
    }

    /// A varint as prost reads one: at most ten bytes, the tenth at most 1.
    fn varint(&mut self) -> Option<u64> {
        let mut value = 0u64;
        for (i, &byte) in self.bytes.iter().enumerate().take(10) {
            if i == 9 && byte > 1 {
                return None;
            }
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                self.bytes = &self.bytes[i + 1..];
                return Some(value);
            }
        }
        None
    }

    /// A field's number and wire type.
    fn key(&mut self) -> Option<(u64, u64)> {
        let key = self.varint()?;
        let number = key >> 3;
        (number > 0 && number <= u64::from(u32::MAX >> 3)).then_some((number, key & 7))
    }

    fn len(&mut self) -> Option<&'b [u8]> {
        let n = usize::try_from(self.varint()?).ok()?;
        if n > self.bytes.len() {
            return None;
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Some(head)
    }

    fn string(&mut self) -> Option<String> {
        std::str::from_utf8(self.len()?).ok().map(str::to_owned)
    }
}

/// A field not repeated, seen at most once.
fn once<T>(slot: &mut Option<T>, value: T) -> Option<()> {
    match slot {
        Some(_) => None,
        None => {
            *slot = Some(value);
            Some(())
        }
    }
}

/// The message, when it is a `Down` in the plain encoding.
pub(crate) fn down(bytes: &[u8]) -> Option<ToReplica> {
    let mut r = Reader { bytes };
    let (mut protocol, mut body) = (None, None);
    while !r.done() {
        match r.key()? {
            (1, VARINT) => once(&mut protocol, u32::try_from(r.varint()?).ok()?)?,
            (2, LEN) => once(&mut body, read_down(r.len()?)?)?,
            _ => return None,
        }
    }
    Some(ToReplica {
        protocol: protocol.unwrap_or(0),
        body: Some(Body::Down(body?)),
    })
}

fn read_down(bytes: &[u8]) -> Option<Down> {
    let mut r = Reader { bytes };
    let mut numbers: [Option<u64>; 4] = [None; 4];
    let (mut epoch, mut snapshot_id, mut mac) = (None, None, None);
    let mut tables = Vec::new();
    while !r.done() {
        match r.key()? {
            (n @ 1..=4, VARINT) => once(&mut numbers[n as usize - 1], r.varint()?)?,
            (5, LEN) => once(&mut epoch, r.string()?)?,
            (6, LEN) => once(&mut snapshot_id, r.string()?)?,
            (7, LEN) => once(&mut mac, r.len()?.to_vec())?,
            (8, LEN) => tables.push(read_table(r.len()?)?),
            _ => return None,
        }
    }
    let [sequence, nonce, previous, previous_nonce] = numbers.map(Option::unwrap_or_default);
    Some(Down {
        sequence,
        nonce,
        previous,
        previous_nonce,
        epoch: epoch.unwrap_or_default(),
        snapshot_id: snapshot_id.unwrap_or_default(),
        mac: mac.unwrap_or_default(),
        tables,
    })
}

fn read_table(bytes: &[u8]) -> Option<DownTable> {
    let mut r = Reader { bytes };
    let mut table = None;
    let mut part = DownTable::default();
    while !r.done() {
        match r.key()? {
            (1, LEN) => once(&mut table, r.string()?)?,
            (2, LEN) => part.deletes.push(r.string()?),
            (3, LEN) => part.upserts.push(r.len()?.to_vec()),
            (4, LEN) => part.keys.push(r.string()?),
            (5, LEN) => part.recorded.push(r.string()?),
            _ => return None,
        }
    }
    part.table = table.unwrap_or_default();
    Some(part)
}

#[cfg(test)]
mod tests {
    use super::*;
    use magic_sync_proto::wire::{EndSnapshot, Filed};
    use proptest::prelude::*;
    use prost::Message;

    fn table() -> impl Strategy<Value = DownTable> {
        let text = "[a-z0-9|é-]{0,6}";
        (
            text,
            proptest::collection::vec(text, 0..3),
            proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..20), 0..4),
            proptest::collection::vec(text, 0..4),
            proptest::collection::vec(text, 0..2),
        )
            .prop_map(|(table, deletes, upserts, keys, recorded)| DownTable {
                table,
                deletes,
                upserts,
                keys,
                recorded,
            })
    }

    fn message() -> impl Strategy<Value = ToReplica> {
        let down = (
            any::<[u64; 4]>(),
            "[a-f0-9-]{0,8}",
            "[a-f0-9-]{0,8}",
            proptest::collection::vec(any::<u8>(), 0..17),
            proptest::collection::vec(table(), 0..3),
        )
            .prop_map(|(n, epoch, snapshot_id, mac, tables)| {
                Body::Down(Down {
                    sequence: n[0],
                    nonce: n[1],
                    previous: n[2] >> (n[3] % 64),
                    previous_nonce: n[3],
                    epoch,
                    snapshot_id,
                    mac,
                    tables,
                })
            });
        let other = prop_oneof![
            Just(Body::EndSnapshot(EndSnapshot::default())),
            proptest::collection::vec(any::<u64>(), 0..3)
                .prop_map(|uploads| Body::Filed(Filed { uploads })),
        ];
        (
            any::<u32>(),
            prop_oneof![4 => down.prop_map(Some), 1 => other.prop_map(Some), 1 => Just(None)],
        )
            .prop_map(|(protocol, body)| ToReplica { protocol, body })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// A message prost wrote: read the same, or left to prost.
        #[test]
        fn a_message_is_read_as_prost_reads_it(message in message()) {
            let bytes = message.encode_to_vec();
            if let Some(read) = down(&bytes) {
                prop_assert_eq!(read, message);
            } else {
                prop_assert!(!matches!(message.body, Some(Body::Down(_))));
            }
        }

        /// Bytes changed, cut, or repeated: whatever is read, prost reads.
        #[test]
        fn any_bytes_read_are_read_as_prost_reads_them(
            message in message(),
            at in any::<prop::sample::Index>(),
            byte in any::<u8>(),
            how in 0..4u8,
        ) {
            let mut bytes = message.encode_to_vec();
            if !bytes.is_empty() {
                let i = at.index(bytes.len());
                match how {
                    0 => bytes[i] = byte,
                    1 => bytes.truncate(i),
                    2 => bytes.insert(i, byte),
                    _ => {
                        let tail = bytes[i..].to_vec();
                        bytes.extend(tail);
                    }
                }
            }
            if let Some(read) = down(&bytes) {
                prop_assert_eq!(Some(read), ToReplica::decode(bytes.as_slice()).ok());
            }
        }
    }

    #[test]
    fn long_and_overlong_varints_are_read_as_prost_reads_them() {
        // A Down whose sequence is a varint of `n` bytes.
        let with = |varint: &[u8]| {
            let mut down = vec![0x08];
            down.extend_from_slice(varint);
            let mut bytes = vec![0x08, 0x01, 0x12, down.len() as u8];
            bytes.extend(down);
            bytes
        };
        for varint in [
            &[0x80, 0x00][..],
            &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
            &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02],
            &[0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00],
            &[
                0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00,
            ],
            &[0x80],
        ] {
            let bytes = with(varint);
            let prost = ToReplica::decode(bytes.as_slice()).ok();
            match down(&bytes) {
                Some(read) => assert_eq!(Some(read), prost, "{varint:?}"),
                None => assert!(prost.is_none(), "{varint:?}: {prost:?}"),
            }
        }
    }

    #[test]
    fn a_number_past_protocols_32_bits_is_left_to_prost() {
        let bytes = ToReplica {
            protocol: 1,
            body: Some(Body::Down(Down::default())),
        }
        .encode_to_vec();
        assert!(down(&bytes).is_some());
        // Field 1 as 2^32: prost keeps the low 32 bits; this reader leaves it.
        let mut wide = vec![0x08, 0x80, 0x80, 0x80, 0x80, 0x10];
        wide.extend_from_slice(&bytes[2..]);
        assert!(down(&wide).is_none());
    }
}

//! Packing planned rows into message bodies under the transport's limits.
//!
//! Rows come in the order they must be applied: upserts parents first, then
//! deletes children first. Consecutive rows of one table share a part (and
//! a table's upserts join a part that holds its deletes, whose keys the
//! replica lets go of first).

use prost::encoding::encoded_len_varint;

use magic_sync_proto::limits::Limits;
use magic_sync_proto::wire::DownTable;

/// Room kept in every message for its head and the `ToReplica` around it.
pub const HEAD_ROOM: usize = 256;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Op {
    Delete,
    Upsert,
}

impl Op {
    /// The op of a code of `sync_pass_plan.op`: 'u' and 'w' (a whole
    /// table) are upserts, 'd' deletes.
    pub fn from_code(code: &str) -> Option<Op> {
        match code {
            "u" | "w" => Some(Op::Upsert),
            "d" => Some(Op::Delete),
            _ => None,
        }
    }
}

/// A row too large for any message, even alone.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the row {key} of {table} takes {bytes} bytes, more than a message carries")]
pub struct TooLarge {
    pub table: String,
    pub key: String,
    pub bytes: usize,
}

/// Bodies being filled, one at a time.
pub struct Packer {
    limits: Limits,
    parts: Vec<DownTable>,
    /// Encoded length of the parts before the last one, framing included.
    closed_bytes: usize,
    /// Encoded length of the last part's fields, its own framing excluded.
    open_len: usize,
    rows: usize,
}

/// What one length-delimited field of `len` bytes takes, framing included
/// (every field here has a one-byte tag).
fn framed(len: usize) -> usize {
    1 + encoded_len_varint(len as u64) + len
}

impl Packer {
    pub fn new(limits: Limits) -> Self {
        Packer {
            limits,
            parts: Vec::new(),
            closed_bytes: 0,
            open_len: 0,
            rows: 0,
        }
    }

    fn body_budget(&self) -> usize {
        self.limits.bytes.saturating_sub(HEAD_ROOM)
    }

    /// The body's length if this row joined it, and whether it would start
    /// a part.
    fn len_with(&self, table: &str, op: Op, key: &str, bytes: Option<&[u8]>) -> (usize, bool) {
        let row = row_len(key, bytes);
        match self.parts.last() {
            Some(last) if joins(last, table, op) => {
                (self.closed_bytes + framed(self.open_len + row), false)
            }
            last => {
                let closed = self.closed_bytes + last.map_or(0, |_| framed(self.open_len));
                (closed + framed(framed(table.len()) + row), true)
            }
        }
    }

    /// Adds a row, and answers the body it did not fit in, which is then
    /// complete. A row no message could carry, even alone, is refused, and
    /// nothing changes.
    pub fn push(
        &mut self,
        table: &str,
        op: Op,
        key: String,
        bytes: Option<Vec<u8>>,
    ) -> Result<Option<Vec<DownTable>>, TooLarge> {
        let alone = framed(framed(table.len()) + row_len(&key, bytes.as_deref()));
        if alone > self.body_budget() {
            return Err(TooLarge {
                table: table.to_owned(),
                key,
                bytes: alone,
            });
        }
        let (len, new_part) = self.len_with(table, op, &key, bytes.as_deref());
        let fits = self.rows < self.limits.rows
            && len <= self.body_budget()
            && (!new_part || self.parts.len() < self.limits.tables);
        let full = if fits { None } else { self.take() };
        self.add(table, op, key, bytes);
        Ok(full)
    }

    fn add(&mut self, table: &str, op: Op, key: String, bytes: Option<Vec<u8>>) {
        if !self.parts.last().is_some_and(|last| joins(last, table, op)) {
            if !self.parts.is_empty() {
                self.closed_bytes += framed(self.open_len);
            }
            self.open_len = framed(table.len());
            self.parts.push(DownTable {
                table: table.to_owned(),
                ..Default::default()
            });
        }
        self.open_len += row_len(&key, bytes.as_deref());
        let part = self.parts.last_mut().expect("a part was just made");
        match op {
            Op::Delete => part.deletes.push(key),
            Op::Upsert => {
                part.keys.push(key);
                part.upserts.push(bytes.unwrap_or_default());
            }
        }
        self.rows += 1;
    }

    fn take(&mut self) -> Option<Vec<DownTable>> {
        self.closed_bytes = 0;
        self.open_len = 0;
        self.rows = 0;
        let parts = std::mem::take(&mut self.parts);
        (!parts.is_empty()).then_some(parts)
    }

    /// The last body, if it holds anything.
    pub fn finish(mut self) -> Option<Vec<DownTable>> {
        self.take()
    }
}

/// Whether a row of `table` joins the part `last`: the same table, and not a
/// delete after upserts (deletes come first within a part).
fn joins(last: &DownTable, table: &str, op: Op) -> bool {
    last.table == table && (op != Op::Delete || last.upserts.is_empty())
}

/// What one row adds to its part: its key, and its bytes for an upsert.
fn row_len(key: &str, bytes: Option<&[u8]>) -> usize {
    framed(key.len()) + bytes.map_or(0, |b| framed(b.len()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::envelope;

    fn rows_in(part: &DownTable) -> usize {
        part.deletes.len() + part.upserts.len()
    }

    fn limits(rows: usize, bytes: usize) -> Limits {
        Limits {
            rows,
            bytes,
            ..Limits::DEFAULT
        }
    }

    fn upsert(p: &mut Packer, table: &str, key: &str, len: usize) -> Option<Vec<DownTable>> {
        p.push(table, Op::Upsert, key.into(), Some(vec![b'x'; len]))
            .unwrap()
    }

    #[test]
    fn a_tables_deletes_and_upserts_share_a_part() {
        let mut p = Packer::new(Limits::DEFAULT);
        assert!(p
            .push("products", Op::Delete, "1".into(), None)
            .unwrap()
            .is_none());
        assert!(upsert(&mut p, "products", "2", 10).is_none());
        let body = p.finish().unwrap();
        assert_eq!(body.len(), 1);
        assert_eq!(body[0].deletes, vec!["1"]);
        assert_eq!(body[0].keys, vec!["2"]);
    }

    #[test]
    fn a_delete_after_upserts_starts_a_part() {
        let mut p = Packer::new(Limits::DEFAULT);
        upsert(&mut p, "products", "2", 10);
        p.push("products", Op::Delete, "1".into(), None).unwrap();
        assert_eq!(p.finish().unwrap().len(), 2);
    }

    #[test]
    fn a_body_holds_no_more_rows_than_the_limit() {
        let mut p = Packer::new(limits(3, 1 << 20));
        let mut bodies = Vec::new();
        for i in 0..7 {
            bodies.extend(upsert(&mut p, "t", &i.to_string(), 5));
        }
        bodies.extend(p.finish());
        let sizes: Vec<usize> = bodies.iter().map(|b| b.iter().map(rows_in).sum()).collect();
        assert_eq!(sizes, vec![3, 3, 1]);
    }

    #[test]
    fn a_body_stays_within_the_byte_limit_with_its_head() {
        let limit = 4096;
        let mut p = Packer::new(limits(500, limit));
        let mut bodies = Vec::new();
        for i in 0..100 {
            bodies.extend(upsert(
                &mut p,
                if i % 3 == 0 { "a" } else { "b" },
                &i.to_string(),
                97,
            ));
        }
        bodies.extend(p.finish());
        assert!(bodies.len() > 1);
        let mut rows = 0;
        for body in &bodies {
            let encoded = envelope::down_body(body.clone());
            assert!(
                encoded.len() + HEAD_ROOM <= limit,
                "{} bytes",
                encoded.len()
            );
            rows += body.iter().map(rows_in).sum::<usize>();
        }
        assert_eq!(rows, 100);
    }

    #[test]
    fn the_estimate_is_the_encoded_length() {
        let mut p = Packer::new(Limits::DEFAULT);
        p.push("t", Op::Delete, "9".into(), None).unwrap();
        upsert(&mut p, "t", "1", 300);
        upsert(&mut p, "u", "2", 20);
        let (estimate, _) = p.len_with("u", Op::Upsert, "3", Some(&[0; 40]));
        upsert(&mut p, "u", "3", 40);
        let body = p.finish().unwrap();
        assert_eq!(envelope::down_body(body).len(), estimate);
    }

    #[test]
    fn a_row_no_message_could_carry_is_refused_and_the_body_kept() {
        let mut p = Packer::new(limits(500, 1024));
        upsert(&mut p, "t", "1", 10);
        let refused = p.push("t", Op::Upsert, "2".into(), Some(vec![0; 2000]));
        assert!(matches!(refused, Err(TooLarge { .. })));
        upsert(&mut p, "t", "3", 10);
        let body = p.finish().unwrap();
        assert_eq!(body[0].keys, vec!["1", "3"]);
    }
}

//! Packing planned rows into message bodies under the transport's limits.
//!
//! Rows come in the order they must be applied: upserts parents first, then
//! deletes children first. Consecutive rows of one table share a part (and
//! a table's upserts join a part that holds its deletes, whose keys the
//! replica lets go of first).
//!
//! A table's rows from its first upsert to its last delete (its span, with
//! whatever comes between) go in one body whenever they fit one on their
//! own (protocol 4.1): a unique value one row lets go of is then there, in
//! the same message, for another row to take. A body that fills up inside
//! such a span ends where the span began instead, and the span goes on in
//! the next.

use crate::error::Error;
use std::collections::{BTreeMap, BTreeSet};

use prost::encoding::encoded_len_varint;

use magic_sync_proto::limits::Limits;
use magic_sync_proto::wire::DownTable;

/// Room kept in every message for its head and the `ToReplica` around it.
pub const HEAD_ROOM: usize = 256;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Op {
    Delete,
    Upsert,
    /// In a snapshot, a key of a setting the server records the replica
    /// holding (`DownTable.recorded`): in a part of its own.
    Recorded,
}

impl Op {
    /// The op of a code of `sync_pass_plan.op`: 'u' and 'w' (a whole
    /// table) are upserts, 'd' deletes, 'r' keys recorded.
    pub fn from_code(code: &str) -> Option<Op> {
        match code {
            "u" | "w" => Some(Op::Upsert),
            "d" => Some(Op::Delete),
            "r" => Some(Op::Recorded),
            _ => None,
        }
    }

    /// Its code in `sync_pass_plan.op` (a whole table's is 'u').
    pub fn code(self) -> &'static str {
        match self {
            Op::Upsert => "u",
            Op::Delete => "d",
            Op::Recorded => "r",
        }
    }
}

/// A body that is complete: its parts, and how many rows it holds (the
/// first that many rows pushed since the last body).
#[derive(Debug)]
pub struct Full {
    pub parts: Vec<DownTable>,
    pub rows: usize,
}

/// A table's span open in the body being filled.
#[derive(Clone, Copy, Debug)]
struct Span {
    /// The row of the body its first upsert is; None when that is in an
    /// earlier body (the span did not fit one).
    start: Option<usize>,
    /// Whether its deletes have begun: the next row of another table ends it.
    deleting: bool,
}

/// One row as a part holds it.
struct Row {
    table: String,
    op: Op,
    key: String,
    bytes: Option<Vec<u8>>,
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
    /// The tables whose deletes follow their upserts in this run.
    spanning: BTreeSet<String>,
    spans: BTreeMap<String, Span>,
}

/// What one length-delimited field of `len` bytes takes, framing included
/// (every field here has a one-byte tag).
fn framed(len: usize) -> usize {
    1 + encoded_len_varint(len as u64) + len
}

impl Packer {
    #[cfg(test)]
    pub fn new(limits: Limits) -> Self {
        Packer::spanning(limits, BTreeSet::new())
    }

    /// A packer for rows where the tables of `spanning` have upserts and,
    /// later, deletes.
    pub fn spanning(limits: Limits, spanning: BTreeSet<String>) -> Self {
        Packer {
            limits,
            parts: Vec::new(),
            closed_bytes: 0,
            open_len: 0,
            rows: 0,
            spanning,
            spans: BTreeMap::new(),
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

    fn fits(&self, table: &str, op: Op, key: &str, bytes: Option<&[u8]>) -> bool {
        let (len, new_part) = self.len_with(table, op, key, bytes);
        self.rows < self.limits.rows
            && len <= self.body_budget()
            && (!new_part || self.parts.len() < self.limits.tables)
    }

    /// Adds a row, and answers the bodies it did not fit in, which are then
    /// complete (more than one when a span is carried to the next body and
    /// the row still does not fit). A row no message could carry, even
    /// alone, is refused, and nothing changes.
    pub fn push(
        &mut self,
        table: &str,
        op: Op,
        key: String,
        bytes: Option<Vec<u8>>,
    ) -> Result<Vec<Full>, Error> {
        let alone = framed(framed(table.len()) + row_len(&key, bytes.as_deref()));
        if alone > self.body_budget() {
            return Err(Error::RowTooLarge {
                table: table.to_owned(),
                key,
                bytes: alone,
            });
        }
        self.close_spans_before(table);
        let mut full = Vec::new();
        while !self.fits(table, op, &key, bytes.as_deref()) {
            match self.earliest_span_after_the_first_row() {
                Some(start) => full.push(self.cut_at(start)),
                None => {
                    full.extend(self.take());
                    break;
                }
            }
        }
        self.open_span(table, op);
        self.add(table, op, key, bytes);
        Ok(full)
    }

    /// A span whose deletes have begun ends at the first row of another
    /// table.
    fn close_spans_before(&mut self, table: &str) {
        self.spans
            .retain(|name, span| !(span.deleting && name != table));
    }

    fn open_span(&mut self, table: &str, op: Op) {
        match op {
            Op::Upsert if self.spanning.contains(table) => {
                let start = Some(self.rows);
                self.spans.entry(table.to_owned()).or_insert(Span {
                    start,
                    deleting: false,
                });
            }
            Op::Delete => {
                if let Some(span) = self.spans.get_mut(table) {
                    span.deleting = true;
                }
            }
            Op::Upsert | Op::Recorded => {}
        }
    }

    /// Where the body may end to keep an open span whole: the earliest
    /// start of one, but its first row (a span that began a body and fills
    /// it does not fit one).
    fn earliest_span_after_the_first_row(&self) -> Option<usize> {
        self.spans
            .values()
            .filter_map(|span| span.start)
            .filter(|start| *start > 0)
            .min()
    }

    /// Ends the body before its row `at`: the rows from there on begin the
    /// next one.
    fn cut_at(&mut self, at: usize) -> Full {
        let mut rows = flatten(std::mem::take(&mut self.parts));
        let carried = rows.split_off(at);
        self.closed_bytes = 0;
        self.open_len = 0;
        self.rows = 0;
        for row in rows {
            self.add(&row.table, row.op, row.key, row.bytes);
        }
        let done = self
            .take()
            .expect("a body cut after its first row holds rows");
        for span in self.spans.values_mut() {
            span.start = span.start.and_then(|s| s.checked_sub(at));
        }
        for row in carried {
            self.add(&row.table, row.op, row.key, row.bytes);
        }
        done
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
            Op::Recorded => part.recorded.push(key),
        }
        self.rows += 1;
    }

    /// The body so far, complete; the spans open in it began in an earlier
    /// body now.
    fn take(&mut self) -> Option<Full> {
        let rows = self.rows;
        self.closed_bytes = 0;
        self.open_len = 0;
        self.rows = 0;
        for span in self.spans.values_mut() {
            span.start = None;
        }
        let parts = std::mem::take(&mut self.parts);
        (!parts.is_empty()).then_some(Full { parts, rows })
    }

    /// The last body, if it holds anything.
    pub fn finish(mut self) -> Option<Vec<DownTable>> {
        self.take().map(|full| full.parts)
    }
}

/// The rows of parts, in the order they were added (a part's deletes come
/// before its upserts).
fn flatten(parts: Vec<DownTable>) -> Vec<Row> {
    let mut rows = Vec::new();
    for part in parts {
        for key in part.deletes {
            rows.push(Row {
                table: part.table.clone(),
                op: Op::Delete,
                key,
                bytes: None,
            });
        }
        for (key, bytes) in part.keys.into_iter().zip(part.upserts) {
            rows.push(Row {
                table: part.table.clone(),
                op: Op::Upsert,
                key,
                bytes: Some(bytes),
            });
        }
        for key in part.recorded {
            rows.push(Row {
                table: part.table.clone(),
                op: Op::Recorded,
                key,
                bytes: None,
            });
        }
    }
    rows
}

/// Whether a row of `table` joins the part `last`: the same table, and not a
/// delete after upserts (deletes come first within a part); keys recorded
/// go in a part of their own, which no other field concerns.
fn joins(last: &DownTable, table: &str, op: Op) -> bool {
    last.table == table
        && match op {
            Op::Delete => last.upserts.is_empty() && last.recorded.is_empty(),
            Op::Upsert => last.recorded.is_empty(),
            Op::Recorded => last.upserts.is_empty() && last.deletes.is_empty(),
        }
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

    fn upsert(p: &mut Packer, table: &str, key: &str, len: usize) -> Vec<Vec<DownTable>> {
        p.push(table, Op::Upsert, key.into(), Some(vec![b'x'; len]))
            .unwrap()
            .into_iter()
            .map(|full| full.parts)
            .collect()
    }

    #[test]
    fn a_tables_deletes_and_upserts_share_a_part() {
        let mut p = Packer::new(Limits::DEFAULT);
        assert!(p
            .push("products", Op::Delete, "1".into(), None)
            .unwrap()
            .is_empty());
        assert!(upsert(&mut p, "products", "2", 10).is_empty());
        let body = p.finish().unwrap();
        assert_eq!(body.len(), 1);
        assert_eq!(body[0].deletes, vec!["1"]);
        assert_eq!(body[0].keys, vec!["2"]);
    }

    #[test]
    fn keys_recorded_of_a_setting_go_in_a_part_of_their_own_and_count_as_rows() {
        let mut p = Packer::new(limits(3, 1 << 20));
        for key in ["a", "b"] {
            assert!(p
                .push("footers", Op::Recorded, key.into(), None)
                .unwrap()
                .is_empty());
        }
        // Nothing else of the table joins the part of its recorded keys.
        upsert(&mut p, "footers", "c", 10);
        let full = p.push("footers", Op::Recorded, "d".into(), None).unwrap();
        assert_eq!(full.len(), 1, "three rows fill a body");
        let first = &full[0].parts;
        assert_eq!(first.len(), 2);
        assert_eq!(first[0].recorded, vec!["a", "b"]);
        assert!(first[0].upserts.is_empty() && first[0].deletes.is_empty());
        assert_eq!(first[1].keys, vec!["c"]);
        assert!(first[1].recorded.is_empty());
        let last = p.finish().unwrap();
        assert_eq!(last[0].recorded, vec!["d"]);
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
        assert!(matches!(refused, Err(Error::RowTooLarge { .. })));
        upsert(&mut p, "t", "3", 10);
        let body = p.finish().unwrap();
        assert_eq!(body[0].keys, vec!["1", "3"]);
    }

    fn delete(p: &mut Packer, table: &str, key: &str) -> Vec<Vec<DownTable>> {
        p.push(table, Op::Delete, key.into(), None)
            .unwrap()
            .into_iter()
            .map(|full| full.parts)
            .collect()
    }

    /// Each body as (table, deletes, upserts) per part.
    fn shapes(bodies: &[Vec<DownTable>]) -> Vec<Vec<(String, usize, usize)>> {
        bodies
            .iter()
            .map(|body| {
                body.iter()
                    .map(|part| (part.table.clone(), part.deletes.len(), part.upserts.len()))
                    .collect()
            })
            .collect()
    }

    fn spanning(rows: usize, tables: &[&str]) -> Packer {
        Packer::spanning(
            limits(rows, 1 << 20),
            tables.iter().map(|t| t.to_string()).collect(),
        )
    }

    #[test]
    fn a_tables_deletes_go_in_the_body_of_its_upserts_when_they_fit_one() {
        let mut p = spanning(3, &["products"]);
        let mut bodies = Vec::new();
        bodies.extend(upsert(&mut p, "categories", "1", 5));
        bodies.extend(upsert(&mut p, "categories", "2", 5));
        bodies.extend(upsert(&mut p, "products", "b", 5));
        bodies.extend(delete(&mut p, "products", "a"));
        bodies.extend(p.finish());
        assert_eq!(
            shapes(&bodies),
            vec![
                vec![("categories".to_owned(), 0, 2)],
                vec![("products".to_owned(), 0, 1), ("products".to_owned(), 1, 0)],
            ]
        );
    }

    #[test]
    fn a_span_carried_to_the_next_body_ends_it_where_it_began() {
        let mut p = spanning(3, &["products"]);
        upsert(&mut p, "categories", "1", 5);
        upsert(&mut p, "products", "b", 5);
        upsert(&mut p, "products", "c", 5);
        let full = p.push("products", Op::Delete, "a".into(), None).unwrap();
        assert_eq!(full.len(), 1);
        assert_eq!(full[0].rows, 1, "the body holds the category only");
        assert_eq!(
            shapes(&[full[0].parts.clone()]),
            vec![vec![("categories".to_owned(), 0, 1)]]
        );
        let rest = p.finish().unwrap();
        assert_eq!(rest[0].keys, vec!["b", "c"]);
        assert_eq!(rest[1].deletes, vec!["a"]);
    }

    #[test]
    fn a_span_too_large_for_one_body_is_split_where_it_fills_one() {
        let mut p = spanning(2, &["products"]);
        let mut bodies = Vec::new();
        for key in ["b", "c", "d"] {
            bodies.extend(upsert(&mut p, "products", key, 5));
        }
        bodies.extend(delete(&mut p, "products", "a"));
        bodies.extend(p.finish());
        let rows: Vec<usize> = bodies.iter().map(|b| b.iter().map(rows_in).sum()).collect();
        assert_eq!(rows, vec![2, 2]);
    }

    #[test]
    fn an_inner_span_is_kept_whole_when_the_outer_one_does_not_fit() {
        // orders' span holds lines' whole: orders' does not fit three rows,
        // lines' does.
        let mut p = spanning(3, &["orders", "lines"]);
        let mut bodies = Vec::new();
        bodies.extend(upsert(&mut p, "orders", "o2", 5));
        bodies.extend(upsert(&mut p, "orders", "o3", 5));
        bodies.extend(upsert(&mut p, "lines", "l2", 5));
        bodies.extend(delete(&mut p, "lines", "l1"));
        bodies.extend(delete(&mut p, "orders", "o1"));
        bodies.extend(p.finish());
        assert_eq!(
            shapes(&bodies),
            vec![
                vec![("orders".to_owned(), 0, 2)],
                vec![
                    ("lines".to_owned(), 0, 1),
                    ("lines".to_owned(), 1, 0),
                    ("orders".to_owned(), 1, 0)
                ],
            ]
        );
    }

    #[test]
    fn a_table_without_deletes_to_come_fills_bodies_as_before() {
        let mut p = spanning(3, &[]);
        let mut bodies = Vec::new();
        bodies.extend(upsert(&mut p, "categories", "1", 5));
        bodies.extend(upsert(&mut p, "categories", "2", 5));
        bodies.extend(upsert(&mut p, "products", "b", 5));
        bodies.extend(delete(&mut p, "products", "a"));
        bodies.extend(p.finish());
        let rows: Vec<usize> = bodies.iter().map(|b| b.iter().map(rows_in).sum()).collect();
        assert_eq!(rows, vec![3, 1]);
    }
}

//! One row the server sent, as the upsert that writes it: the columns it
//! writes and the values bound to them (protocol §3, §4.1).
//!
//! The key columns are bound from the key beside the row, in the form the
//! replica stores (a UUID spelt the same way every time, so rows are found
//! by it); then every other column the row carries but the replica's own;
//! then the retired column, which an upsert always clears: a retired row
//! sent again is live.
//!
//! A row of JSON is read in one pass, straight into the values bound, text
//! borrowed from the row's bytes where it has no escapes. Whatever that
//! pass does not take as plainly right — a value of another JSON type than
//! its column's usual one, an array or object, a member named twice, a key
//! that differs, a row that does not decode — is read again the general
//! way (through `serde_json::Value` and `row_json`), which decides the
//! row, its values and the reason it is refused. So both ways take exactly
//! the same rows with the same values (a test reads rows both ways).

use std::borrow::Cow;
use std::cell::RefCell;
use std::sync::Arc;

use magic_sync_proto::key::{KeyPart, KeyType};
use rusqlite::types::{ToSql, ToSqlOutput, Value as SqlValue, ValueRef};
use uuid::Uuid;

use crate::error::Error;
use crate::model::codec::Codec;
use crate::model::row_json::{cell_to_sql, key_of_sql};
use crate::model::shape::{ColumnKind, Shape};
use crate::sql::quote;

/// A value bound to an upsert's parameter.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Bound<'r> {
    /// A null, a number, or text borrowed from the row's bytes.
    Value(ValueRef<'r>),
    /// A UUID in a BLOB column: its 16 bytes.
    Uuid([u8; 16]),
    Owned(SqlValue),
}

impl Bound<'_> {
    pub(crate) fn to_value(&self) -> SqlValue {
        match self {
            Bound::Value(v) => SqlValue::from(*v),
            Bound::Uuid(b) => SqlValue::Blob(b.to_vec()),
            Bound::Owned(v) => v.clone(),
        }
    }
}

impl ToSql for Bound<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(match self {
            Bound::Value(v) => *v,
            Bound::Uuid(b) => ValueRef::Blob(b),
            Bound::Owned(v) => ValueRef::from(v),
        }))
    }
}

/// The columns an upsert writes, and the values bound to them, in order.
#[derive(Default)]
pub(crate) struct Row<'r> {
    pub columns: Vec<usize>,
    pub values: Vec<Bound<'r>>,
}

/// What reading rows needs between rows: one slot per column.
#[derive(Default)]
pub(crate) struct Reader<'r> {
    slots: Vec<Option<Bound<'r>>>,
}

impl<'r> Reader<'r> {
    /// Reads the row `bytes` of `shape`, whose key beside it is `parts`
    /// (`key` in the key text form), into `row`; or says why the row cannot
    /// be taken as it came.
    pub(crate) fn read(
        &mut self,
        shape: &Shape,
        bytes: &'r [u8],
        parts: &[KeyPart],
        key: &str,
        row: &mut Row<'r>,
    ) -> Result<(), Error> {
        row.columns.clear();
        row.values.clear();
        if shape.codec == Codec::Json && self.read_json(shape, bytes, parts, row) {
            return Ok(());
        }
        row.columns.clear();
        row.values.clear();
        read_generally(shape, bytes, parts, key, row)
    }

    /// The one pass over a row of JSON: `false` when the row is to be read
    /// the general way.
    fn read_json(
        &mut self,
        shape: &Shape,
        bytes: &'r [u8],
        parts: &[KeyPart],
        row: &mut Row<'r>,
    ) -> bool {
        if self.slots.len() == shape.columns.len() {
            self.slots.fill(None);
        } else {
            self.slots.clear();
            self.slots.resize(shape.columns.len(), None);
        }
        if scan_row(shape, bytes, &mut self.slots).is_none() {
            return false;
        }
        // The row's own key, as the key beside it.
        for ((&index, part), ty) in shape.key.iter().zip(parts).zip(&shape.key_types) {
            let own = match (&self.slots[index], ty) {
                (Some(Bound::Value(ValueRef::Integer(i))), KeyType::Integer) => {
                    KeyPart::Integer(*i)
                }
                (Some(Bound::Uuid(b)), KeyType::Uuid) => KeyPart::Uuid(Uuid::from_bytes(*b)),
                (Some(Bound::Value(ValueRef::Text(t))), KeyType::Uuid) => {
                    match Uuid::try_parse_ascii(t) {
                        Ok(u) => KeyPart::Uuid(u),
                        Err(_) => return false,
                    }
                }
                (Some(Bound::Owned(SqlValue::Text(t))), KeyType::Uuid) => {
                    match Uuid::try_parse(t) {
                        Ok(u) => KeyPart::Uuid(u),
                        Err(_) => return false,
                    }
                }
                _ => return false,
            };
            if own != *part {
                return false;
            }
        }
        bind_key(shape, parts, row);
        for (index, slot) in self.slots.iter_mut().enumerate() {
            if let Some(value) = slot.take() {
                if !shape.is_key(index) {
                    row.columns.push(index);
                    row.values.push(value);
                }
            }
        }
        bind_retired(shape, row);
        true
    }
}

/// The key beside the row, as the replica stores it.
fn bind_key<'r>(shape: &Shape, parts: &[KeyPart], row: &mut Row<'r>) {
    for (&index, part) in shape.key.iter().zip(parts) {
        row.columns.push(index);
        row.values.push(match part {
            KeyPart::Integer(i) => Bound::Value(ValueRef::Integer(*i)),
            KeyPart::Uuid(u) if shape.columns[index].kind == ColumnKind::Blob => {
                Bound::Uuid(*u.as_bytes())
            }
            KeyPart::Uuid(u) => Bound::Owned(SqlValue::Text(u.hyphenated().to_string())),
        });
    }
}

fn bind_retired(shape: &Shape, row: &mut Row<'_>) {
    if let Some(retired) = shape.retired {
        row.columns.push(retired);
        row.values.push(Bound::Value(ValueRef::Null));
    }
}

/// The general way: the codec's cells, each converted by `row_json`.
fn read_generally<'r>(
    shape: &Shape,
    bytes: &[u8],
    parts: &[KeyPart],
    key: &str,
    row: &mut Row<'r>,
) -> Result<(), Error> {
    let cells = shape.codec.decode(bytes)?;
    let mut own_key: Vec<Option<SqlValue>> = vec![None; shape.key.len()];
    let mut rest: Vec<(usize, SqlValue)> = Vec::with_capacity(cells.len());
    for (name, cell) in &cells {
        let Some(index) = shape.column(name) else {
            continue; // a column the replica does not have
        };
        let column = &shape.columns[index];
        if let Some(at) = shape.key.iter().position(|&k| k == index) {
            own_key[at] = Some(cell_to_sql(column.kind, cell).map_err(|e| {
                e.within(&format!(
                    "the row's own key cannot be read: column `{}`",
                    column.name
                ))
            })?);
            continue;
        }
        if Some(index) == shape.retired || shape.owned.contains(&index) {
            continue;
        }
        let value = cell_to_sql(column.kind, cell)
            .map_err(|e| e.within(&format!("column `{}`", column.name)))?;
        rest.push((index, value));
    }
    let mut refs = Vec::with_capacity(shape.key.len());
    for (value, column) in own_key.iter().zip(shape.key_columns()) {
        match value {
            Some(v) => refs.push(ValueRef::from(v)),
            None => {
                return Err(Error::Row(format!(
                    "the row's own key cannot be read: the row has no key column `{}`",
                    column.name
                )))
            }
        }
    }
    let own = key_of_sql(shape, &refs)
        .ok_or_else(|| Error::row("the row's own key cannot be read as its table's key"))?;
    if own != key {
        return Err(Error::Row(format!(
            "a_row_beside_another_key: the row's own key is {own}, not the key beside it"
        )));
    }
    rest.sort_by_key(|(i, _)| *i);
    bind_key(shape, parts, row);
    for (index, value) in rest {
        row.columns.push(index);
        row.values.push(Bound::Owned(value));
    }
    bind_retired(shape, row);
    Ok(())
}

/// The text of the upsert statements made so far, by table, columns and
/// rows: made once, not for every message.
#[derive(Debug, Default)]
pub(crate) struct Texts(RefCell<Vec<Text>>);

#[derive(Debug)]
struct Text {
    table: String,
    columns: Vec<usize>,
    rows: usize,
    sql: Arc<str>,
}

impl Texts {
    /// `sql_together(shape, columns, rows)`.
    pub(crate) fn get(&self, shape: &Shape, columns: &[usize], rows: usize) -> Arc<str> {
        let mut texts = self.0.borrow_mut();
        let found = texts
            .iter()
            .find(|t| t.rows == rows && t.columns == columns && t.table == shape.name);
        if let Some(text) = found {
            return text.sql.clone();
        }
        // Rows that carry ever other columns would make ever more.
        if texts.len() >= 64 {
            texts.clear();
        }
        let sql: Arc<str> = sql_together(shape, columns, rows).into();
        texts.push(Text {
            table: shape.name.clone(),
            columns: columns.to_vec(),
            rows,
            sql: sql.clone(),
        });
        sql
    }
}

/// Inserts the row, or overwrites the columns it carries of the stored row
/// with the same key; columns it does not carry are left as they are.
pub(crate) fn sql(shape: &Shape, columns: &[usize]) -> String {
    sql_together(shape, columns, 1)
}

/// The same, for `rows` rows in one statement, each as the one before it
/// left the table (SQLite writes them in order, each an upsert of its own).
pub(crate) fn sql_together(shape: &Shape, columns: &[usize], rows: usize) -> String {
    let names: Vec<String> = columns
        .iter()
        .map(|&i| quote(&shape.columns[i].name))
        .collect();
    let width = columns.len();
    let marks: Vec<String> = (0..rows)
        .map(|row| {
            let marks: Vec<String> = (1..=width)
                .map(|i| format!("?{}", row * width + i))
                .collect();
            format!("({})", marks.join(", "))
        })
        .collect();
    let sets: Vec<String> = columns
        .iter()
        .filter(|&&i| !shape.is_key(i))
        .map(|&i| {
            let name = quote(&shape.columns[i].name);
            format!("{name} = excluded.{name}")
        })
        .collect();
    let on_conflict = if sets.is_empty() {
        "DO NOTHING".to_owned()
    } else {
        format!("DO UPDATE SET {}", sets.join(", "))
    };
    format!(
        "INSERT INTO {} ({}) VALUES {} ON CONFLICT ({}) {on_conflict}",
        quote(&shape.name),
        names.join(", "),
        marks.join(", "),
        shape.key_list()
    )
}

// ---------------------------------------------------------------------------
// The one pass over a row of JSON
// ---------------------------------------------------------------------------

/// A row of JSON read in one pass: a strict reading of the common forms
/// (an object of strings, integers, `true`, `false` and `null`), which
/// gives up — `None` — on anything else, so the general way decides.
/// Where it does not give up, `serde_json` reads the same values (numbers
/// and escaped text are handed to it).
fn scan_row<'r>(shape: &Shape, bytes: &'r [u8], slots: &mut [Option<Bound<'r>>]) -> Option<()> {
    let mut at = Scanner { bytes, at: 0 };
    at.space();
    at.expect(b'{')?;
    at.space();
    if at.peek()? == b'}' {
        at.at += 1;
    } else {
        loop {
            let name = at.string()?;
            at.space();
            at.expect(b':')?;
            at.space();
            let value = at.value()?;
            let index = column(shape, &name)
                .filter(|&i| Some(i) != shape.retired && !shape.owned.contains(&i));
            if let Some(index) = index {
                if slots[index].is_some() {
                    return None; // a column named twice
                }
                slots[index] = Some(value.bound(shape.columns[index].kind)?);
            } else {
                value.check()?;
            }
            at.space();
            match at.next()? {
                b',' => at.space(),
                b'}' => break,
                _ => return None,
            }
        }
    }
    at.space();
    (at.at == bytes.len()).then_some(())
}

/// The column a member names (its name is UTF-8, checked).
fn column(shape: &Shape, name: &[u8]) -> Option<usize> {
    match shape.columns.iter().position(|c| c.name.as_bytes() == name) {
        Some(i) => Some(i),
        None => shape.column(std::str::from_utf8(name).ok()?),
    }
}

struct Scanner<'r> {
    bytes: &'r [u8],
    at: usize,
}

/// One member's value as it came.
enum Scanned<'r> {
    /// A string's text: UTF-8, checked.
    Text(Cow<'r, [u8]>),
    /// A number's text.
    Number(&'r [u8]),
    Bool(bool),
    Null,
}

impl<'r> Scanner<'r> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let b = self.peek()?;
        self.at += 1;
        Some(b)
    }

    fn expect(&mut self, b: u8) -> Option<()> {
        (self.next()? == b).then_some(())
    }

    /// JSON's whitespace, as `serde_json` skips it.
    fn space(&mut self) {
        while let Some(b' ' | b'\n' | b'\t' | b'\r') = self.peek() {
            self.at += 1;
        }
    }

    /// A string's text, UTF-8 (checked where it is not ASCII).
    #[inline(always)]
    fn string(&mut self) -> Option<Cow<'r, [u8]>> {
        let start = self.at;
        self.expect(b'"')?;
        let rest = &self.bytes[self.at..];
        // Most strings have no escape: their text is borrowed.
        let end = rest
            .iter()
            .position(|&b| b == b'"' || b == b'\\' || b < 0x20)?;
        match rest[end] {
            b'"' => {
                let text = &rest[..end];
                self.at += end + 1;
                (text.is_ascii() || std::str::from_utf8(text).is_ok())
                    .then_some(Cow::Borrowed(text))
            }
            b'\\' => {
                self.at += end;
                loop {
                    match self.next()? {
                        b'"' => break,
                        b'\\' => {
                            self.next()?;
                        }
                        // A control character: `serde_json` refuses it.
                        b if b < 0x20 => return None,
                        _ => {}
                    }
                }
                serde_json::from_slice::<String>(&self.bytes[start..self.at])
                    .ok()
                    .map(|s| Cow::Owned(s.into_bytes()))
            }
            _ => None, // a control character: `serde_json` refuses it
        }
    }

    fn value(&mut self) -> Option<Scanned<'r>> {
        let rest = &self.bytes[self.at..];
        let literal = |word: &[u8]| rest.starts_with(word);
        match self.peek()? {
            b'"' => self.string().map(Scanned::Text),
            b'-' | b'0'..=b'9' => {
                let start = self.at;
                while let Some(b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E') = self.peek() {
                    self.at += 1;
                }
                Some(Scanned::Number(&self.bytes[start..self.at]))
            }
            b't' if literal(b"true") => {
                self.at += 4;
                Some(Scanned::Bool(true))
            }
            b'f' if literal(b"false") => {
                self.at += 5;
                Some(Scanned::Bool(false))
            }
            b'n' if literal(b"null") => {
                self.at += 4;
                Some(Scanned::Null)
            }
            _ => None, // an array or an object, or no JSON
        }
    }
}

/// Digits, negated or not, within 64 bits: `None` for anything else.
fn digits(negative: bool, digits: &[u8]) -> Option<i64> {
    if digits.is_empty() || digits.len() > 19 {
        return None;
    }
    // Negative throughout, so that i64::MIN fits.
    let mut n: i64 = 0;
    for &b in digits {
        if !b.is_ascii_digit() {
            return None;
        }
        n = n.checked_mul(10)?.checked_sub(i64::from(b - b'0'))?;
    }
    if negative {
        Some(n)
    } else {
        n.checked_neg()
    }
}

/// The text after an optional minus sign, and whether there was one.
fn sign(text: &[u8]) -> (bool, &[u8]) {
    match text.strip_prefix(b"-") {
        Some(rest) => (true, rest),
        None => (false, text),
    }
}

/// An integer in its one decimal form: an optional minus sign and digits,
/// no leading zero, not `-0`, within 64 bits — the key text form of an
/// integer (protocol §3), and exactly the JSON numbers `serde_json` reads
/// as integers that `Number::as_i64` takes.
pub(crate) fn canonical_integer(text: &[u8]) -> Option<i64> {
    let (negative, unsigned) = sign(text);
    if unsigned.len() > 1 && unsigned[0] == b'0' || text == b"-0" {
        return None;
    }
    digits(negative, unsigned)
}

/// Decimal text, as `magic_sync_proto::json::read_int64` reads it: an
/// optional minus sign and digits (leading zeros and all), within 64 bits.
fn decimal_text(text: &[u8]) -> Option<i64> {
    let (negative, unsigned) = sign(text);
    // Leading zeros do not count against the 19 digits; one stays.
    let zeros = unsigned.iter().take_while(|&&b| b == b'0').count();
    digits(
        negative,
        &unsigned[zeros.min(unsigned.len().saturating_sub(1))..],
    )
}

impl<'r> Scanned<'r> {
    /// As a column of this kind stores it, where `row_json::to_sql` takes
    /// it so: `None` where the general way decides.
    fn bound(self, kind: ColumnKind) -> Option<Bound<'r>> {
        let integer = |i: i64| Bound::Value(ValueRef::Integer(i));
        match (self, kind) {
            (Scanned::Null, _) => Some(Bound::Value(ValueRef::Null)),
            (Scanned::Bool(b), ColumnKind::Bool) => Some(integer(b as i64)),
            (Scanned::Bool(_), _) => None,
            (Scanned::Number(n), ColumnKind::Integer) => canonical_integer(n).map(integer),
            (Scanned::Number(n), ColumnKind::Bool) => match canonical_integer(n) {
                Some(i @ (0 | 1)) => Some(integer(i)),
                _ => None,
            },
            (Scanned::Number(n), ColumnKind::Real) => serde_json::from_slice::<f64>(n)
                .ok()
                .map(|x| Bound::Value(ValueRef::Real(x))),
            (Scanned::Number(_), _) => None,
            (Scanned::Text(s), ColumnKind::Integer) => decimal_text(&s).map(integer),
            (Scanned::Text(s), ColumnKind::Real) => std::str::from_utf8(&s)
                .ok()?
                .parse::<f64>()
                .ok()
                .map(|x| Bound::Value(ValueRef::Real(x))),
            (Scanned::Text(_), ColumnKind::Bool) => None,
            (Scanned::Text(s), ColumnKind::Blob) => Some(match Uuid::try_parse_ascii(&s) {
                Ok(uuid) => Bound::Uuid(*uuid.as_bytes()),
                Err(_) => text(s)?,
            }),
            (Scanned::Text(s), ColumnKind::Text) => text(s),
            // A JSON column holds a string as its JSON text, quotes and all.
            (Scanned::Text(_), ColumnKind::Json) => None,
        }
    }

    /// A member the replica does not write: only that it reads.
    fn check(self) -> Option<()> {
        match self {
            Scanned::Number(n) => serde_json::from_slice::<serde_json::Value>(n)
                .ok()
                .map(|_| ()),
            _ => Some(()),
        }
    }
}

fn text(s: Cow<'_, [u8]>) -> Option<Bound<'_>> {
    Some(match s {
        Cow::Borrowed(b) => Bound::Value(ValueRef::Text(b)),
        Cow::Owned(o) => Bound::Owned(SqlValue::Text(String::from_utf8(o).ok()?)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::declare::Table;
    use magic_sync_proto::key;
    use rusqlite::Connection;

    fn shape(sql: &str, table: Table) -> Shape {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(sql).unwrap();
        crate::model::shape::read_all(&conn, &crate::model::declare::Tables::new(vec![table]))
            .unwrap()
            .remove(0)
    }

    /// Reads a row both ways: they must agree, on the values and on the
    /// reason a row is refused.
    fn both_ways(
        shape: &Shape,
        key: &str,
        json: &str,
    ) -> Result<(Vec<usize>, Vec<SqlValue>), String> {
        let parts = key::parse(key, &shape.key_types).unwrap();
        let key = key::join(&parts);
        let mut reader = Reader::default();
        let mut row = Row::default();
        let fast = reader
            .read(shape, json.as_bytes(), &parts, &key, &mut row)
            .map(|()| {
                (
                    row.columns.clone(),
                    row.values.iter().map(Bound::to_value).collect::<Vec<_>>(),
                )
            });
        let mut general_row = Row::default();
        let general =
            read_generally(shape, json.as_bytes(), &parts, &key, &mut general_row).map(|()| {
                (
                    general_row.columns.clone(),
                    general_row
                        .values
                        .iter()
                        .map(Bound::to_value)
                        .collect::<Vec<_>>(),
                )
            });
        assert_eq!(fast, general, "{json}");
        fast.map_err(|e| e.to_string())
    }

    const U: &str = "0196a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b";

    #[test]
    fn the_one_pass_and_the_general_way_agree_on_every_kind_of_value() {
        let items = shape(
            "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT, qty INTEGER, price REAL,
                                 ok BOOLEAN, tag BLOB, note NUMERIC, retired_at TEXT)",
            Table::catalog("items").retired("retired_at"),
        );
        let cases = [
            r#"{"id":"1","name":"tea","qty":"3"}"#,
            r#"{"id":1,"name":"t\u00e9a \"x\"","qty":3}"#,
            r#"{"id":"1","qty":null,"name":null}"#,
            r#"{"id":"1","price":2.5,"ok":true,"tag":"not a uuid"}"#,
            r#"{"id":"1","price":"2.5","ok":1,"tag":"0196A1B2C3D47E5F8A9B0C1D2E3F4A5B"}"#,
            r#"{"id":"1","price":7,"ok":0,"note":"12.50"}"#,
            r#"{"id":"1","price":18446744073709551615,"qty":-4}"#,
            r#"{"id":"1","qty":18446744073709551615}"#,
            r#"{"id":"1","qty":"+4"}"#,
            r#"{"id":"1","qty":"9223372036854775808"}"#,
            r#"{"id":"1","qty":1.0}"#,
            r#"{"id":"1","qty":-0}"#,
            r#"{"id":"1","ok":2}"#,
            r#"{"id":"1","ok":"true"}"#,
            r#"{"id":"1","name":5}"#,
            r#"{"id":"1","name":{"a":[1,2]}}"#,
            r#"{"id":"1","tag":5}"#,
            r#"{"id":"1","note":12.5}"#,
            r#"{"id":"1","price":"inf"}"#,
            r#"{"id":"1","price":true}"#,
            r#"{"id":"1","retired_at":"2026-01-01T00:00:00Z","unknown":[1,{"b":null}]}"#,
            r#"{"id":"1","NAME":"upper"}"#,
            r#"{"id":"1","name":"a","name":"b"}"#,
            r#"{"id":"1","name":"a","Name":"b"}"#,
            r#"{"Id":"1","nAmE":"case"}"#,
            r#" { "id" : "1" , "qty" : 12 , "price" : -1.5e3 } "#,
            r#"{"id":"1","qty":"0009223372036854775807"}"#,
            r#"{"id":"1","qty":12,}"#,
            r#"{"id":"1","qty":1-2}"#,
            r#"{"id":"1","price":1.5.3}"#,
            r#"{"id":"1","qty":truex}"#,
            r#"{"id":"1","name":"café ☕"}"#,
            "{\"id\":\"1\",\"name\":\"é\"}",
            r#"{"id":"2","name":"beside another key"}"#,
            r#"{"id":"01","name":"leading zero"}"#,
            r#"{"name":"no key"}"#,
            r#"{"id":null}"#,
            r#"{"id":"x"}"#,
            r#"[1,2]"#,
            r#""a row""#,
            r#"{"id":"1"} trailing"#,
            r#"{"id":"1","name":"cut"#,
            "{\"id\":\"1\",\"unknown\":\"\u{7f}\"}",
            "{\"id\":\"1\",\"name\":\"tab\there\"}",
        ];
        for json in cases {
            both_ways(&items, "1", json).ok();
        }
        assert!(both_ways(&items, "1", cases[0]).is_ok());
        assert!(both_ways(&items, "1", r#"{"id":"2"}"#)
            .unwrap_err()
            .starts_with("a_row_beside_another_key"));
        // Bytes that are no UTF-8, in a member the replica does not write.
        let mut bad = br#"{"id":"1","unknown":""#.to_vec();
        bad.extend_from_slice(&[0xff, b'"', b'}']);
        let parts = key::parse("1", &items.key_types).unwrap();
        let mut row = Row::default();
        let refused = Reader::default().read(&items, &bad, &parts, "1", &mut row);
        assert!(refused
            .unwrap_err()
            .to_string()
            .starts_with("the row does not decode as JSON"));
    }

    fn fragment() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        prop_oneof![
            Just("null".to_owned()),
            Just("true".to_owned()),
            Just("false".to_owned()),
            Just("\"1\"".to_owned()),
            Just("1".to_owned()),
            Just("[1,\"a\"]".to_owned()),
            Just("{\"a\":{}}".to_owned()),
            any::<i64>().prop_map(|i| i.to_string()),
            any::<i64>().prop_map(|i| format!("\"{i}\"")),
            any::<u64>().prop_map(|i| i.to_string()),
            "-?[0-9]{1,22}(\\.[0-9]{0,3})?([eE][+-]?[0-9]{1,3})?",
            "\"-?[0-9]{1,22}\"",
            any::<f64>().prop_map(|x| format!("{x}")),
            "\"[a-zA-Z0-9 é☕\\\\\"/bntu-]{0,12}\"",
            Just(format!("\"{U}\"")),
            Just(format!("\"{}\"", U.to_uppercase())),
            Just(format!("\"{}\"", U.replace('-', ""))),
            "[ -~]{0,6}",
        ]
    }

    fn member() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let name = prop_oneof![
            Just("id"),
            Just("id"),
            Just("name"),
            Just("qty"),
            Just("price"),
            Just("ok"),
            Just("tag"),
            Just("note"),
            Just("retired_at"),
            Just("NAME"),
            Just("Id"),
            Just("other"),
            Just("na\\u006de"),
        ];
        let space = prop_oneof![Just(""), Just(" "), Just("\n\t"), Just("\r ")];
        (name, fragment(), space.clone(), space)
            .prop_map(|(name, value, a, b)| format!("{a}\"{name}\"{b}:{a}{value}{b}"))
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        /// Whatever a row holds, the one pass takes it as the general way
        /// does, or leaves it to the general way.
        #[test]
        fn any_row_is_read_the_same_both_ways(
            members in proptest::collection::vec(member(), 0..7),
            id in proptest::prop_oneof![
                proptest::strategy::Just("\"1\"".to_owned()),
                proptest::strategy::Just("1".to_owned()),
                fragment()
            ],
            trailing in proptest::prop_oneof![
                proptest::strategy::Just(""),
                proptest::strategy::Just(" \n"),
                proptest::strategy::Just(","),
                proptest::strategy::Just("x"),
            ],
        ) {
            let items = shape(
                "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT, qty INTEGER, price REAL,
                                     ok BOOLEAN, tag BLOB, note NUMERIC, retired_at TEXT)",
                Table::catalog("items").retired("retired_at"),
            );
            let mut all = vec![format!("\"id\":{id}")];
            all.extend(members);
            let json = format!("{{{}}}{trailing}", all.join(","));
            let _ = both_ways(&items, "1", &json);
        }
    }

    #[test]
    fn integers_are_read_as_serde_json_and_read_int64_read_them() {
        let cases = [
            "0",
            "-0",
            "7",
            "-7",
            "007",
            "-007",
            "000",
            "+5",
            "",
            "-",
            "--1",
            "1-",
            "12a",
            "0x1",
            "1.0",
            "1e5",
            "1E+5",
            "-1.5e-3",
            "9223372036854775807",
            "9223372036854775808",
            "-9223372036854775808",
            "-9223372036854775809",
            "18446744073709551615",
            "18446744073709551616",
            "00000000000000000000000000001",
            "-0009223372036854775808",
            "0009223372036854775807",
            "0009223372036854775808",
            "99999999999999999999",
        ];
        for case in cases {
            let as_text = serde_json::Value::String(case.to_owned());
            assert_eq!(
                decimal_text(case.as_bytes()),
                magic_sync_proto::json::read_int64(&as_text).ok(),
                "{case:?} as text"
            );
            if let Ok(number) = serde_json::from_str::<serde_json::Value>(case) {
                if number.is_number() {
                    assert_eq!(
                        canonical_integer(case.as_bytes()),
                        number.as_i64(),
                        "{case} as a number"
                    );
                }
            } else {
                assert_eq!(
                    canonical_integer(case.as_bytes()),
                    None,
                    "{case} is no JSON"
                );
            }
        }
    }

    #[test]
    fn uuid_keys_in_a_blob_and_in_text_are_read_the_same_both_ways() {
        let blob = shape(
            "CREATE TABLE t (id BLOB PRIMARY KEY, name TEXT)",
            Table::catalog("t"),
        );
        let text = shape(
            "CREATE TABLE t (id TEXT PRIMARY KEY, name TEXT, battery INTEGER)",
            Table::both("t").replica_owned(&["battery"]),
        );
        for shape in [&blob, &text] {
            let upper = U.to_uppercase();
            for json in [
                format!(r#"{{"id":"{U}","name":"a"}}"#),
                format!(r#"{{"id":"{upper}","name":"a","battery":3}}"#),
                format!(r#"{{"id":"{}","name":"a"}}"#, U.replace('-', "")),
                r#"{"id":"0196a1b2-0000-7e5f-8a9b-0c1d2e3f4a5b"}"#.to_owned(),
                r#"{"id":7}"#.to_owned(),
            ] {
                both_ways(shape, U, &json).ok();
            }
            let (columns, values) =
                both_ways(shape, &upper, &format!(r#"{{"id":"{upper}"}}"#)).unwrap();
            assert_eq!(columns, [0]);
            let uuid: Uuid = U.parse().unwrap();
            let expected = if shape.columns[0].kind == ColumnKind::Blob {
                SqlValue::Blob(uuid.as_bytes().to_vec())
            } else {
                SqlValue::Text(U.to_owned())
            };
            assert_eq!(values, [expected]);
        }
    }
}

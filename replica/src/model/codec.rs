//! How a table's rows travel (protocol §3): as a JSON object of its
//! columns, or as a protobuf message whose fields the declaration maps to
//! columns.
//!
//! A codec turns bytes into cells (`value::Cell`: a JSON value, or raw
//! bytes for a protobuf `bytes` field) named by column, and back;
//! `row_json` turns cells into the SQLite values a column stores, the same
//! way for both.

use std::collections::HashSet;

use serde_json::{json, Map, Value as JsonValue};

use crate::error::Error;
use crate::model::value::Cell;

/// What a protobuf field holds, as `.proto` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `string`: text, a UUID (in a BLOB or text column), a decimal, an
    /// instant, or an integer as its decimal text.
    String,
    /// `bytes`: a BLOB as it is.
    Bytes,
    /// `int64`.
    Int64,
    /// `sint64` (zigzag).
    Sint64,
    /// `uint64`, up to 2^63 - 1.
    Uint64,
    /// `int32`.
    Int32,
    /// `bool`.
    Bool,
    /// `double`.
    Double,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::String => "string",
            Kind::Bytes => "bytes",
            Kind::Int64 => "int64",
            Kind::Sint64 => "sint64",
            Kind::Uint64 => "uint64",
            Kind::Int32 => "int32",
            Kind::Bool => "bool",
            Kind::Double => "double",
        }
    }

    /// The kind `.proto` names so (`name` gives it back).
    pub fn from_name(name: &str) -> Option<Kind> {
        [
            Kind::String,
            Kind::Bytes,
            Kind::Int64,
            Kind::Sint64,
            Kind::Uint64,
            Kind::Int32,
            Kind::Bool,
            Kind::Double,
        ]
        .into_iter()
        .find(|k| k.name() == name)
    }

    fn wire_type(self) -> u8 {
        match self {
            Kind::String | Kind::Bytes => LEN,
            Kind::Double => FIXED64,
            _ => VARINT,
        }
    }
}

/// One field of a protobuf row: the column it carries, its number and
/// kind. An `optional` field (proto3 `optional`) that is absent is NULL;
/// any other absent field is its kind's default (0, "", false), as proto3
/// reads it, and a NULL goes as that default.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    pub column: String,
    pub number: u32,
    pub kind: Kind,
    pub optional: bool,
}

impl Field {
    pub fn new(column: impl Into<String>, number: u32, kind: Kind) -> Field {
        Field {
            column: column.into(),
            number,
            kind,
            optional: false,
        }
    }

    /// Absent is NULL (proto3 `optional`).
    pub fn optional(mut self) -> Field {
        self.optional = true;
        self
    }
}

impl<S: Into<String>> From<(S, u32, Kind)> for Field {
    fn from((column, number, kind): (S, u32, Kind)) -> Field {
        Field::new(column, number, kind)
    }
}

/// How a table's rows are bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Codec {
    /// A JSON object of the columns (the default).
    #[default]
    Json,
    /// A protobuf message of these fields. Columns no field names do not
    /// travel; fields the mapping does not name are skipped on reading.
    Protobuf(Vec<Field>),
}

impl Codec {
    /// A protobuf message mapping each field to a column, e.g.
    /// `Codec::protobuf(vec![("id", 1, Kind::String), ("price", 2, Kind::Int64)])`.
    pub fn protobuf<F: Into<Field>>(fields: impl IntoIterator<Item = F>) -> Codec {
        Codec::Protobuf(fields.into_iter().map(Into::into).collect())
    }

    pub(crate) fn problems(&self, table: &str) -> Vec<String> {
        let Codec::Protobuf(fields) = self else {
            return Vec::new();
        };
        let mut problems = Vec::new();
        let mut numbers = HashSet::new();
        let mut columns = HashSet::new();
        if fields.is_empty() {
            problems.push(format!("table `{table}`: a protobuf codec with no fields"));
        }
        for f in fields {
            if f.number == 0 || f.number > 536_870_911 || (19_000..=19_999).contains(&f.number) {
                problems.push(format!(
                    "table `{table}`: field number {} of `{}` is no protobuf field number",
                    f.number, f.column
                ));
            }
            if !numbers.insert(f.number) {
                problems.push(format!("table `{table}`: field number {} twice", f.number));
            }
            if !columns.insert(f.column.to_ascii_lowercase()) {
                problems.push(format!(
                    "table `{table}`: column `{}` in two fields",
                    f.column
                ));
            }
        }
        problems
    }

    /// The columns the codec carries, or `None` for every column (JSON).
    pub(crate) fn columns(&self) -> Option<Vec<&str>> {
        match self {
            Codec::Json => None,
            Codec::Protobuf(fields) => Some(fields.iter().map(|f| f.column.as_str()).collect()),
        }
    }

    /// Reads a row: its cells by column name, in no particular order.
    pub(crate) fn decode(&self, bytes: &[u8]) -> Result<Vec<(String, Cell)>, Error> {
        match self {
            Codec::Json => decode_json(bytes),
            Codec::Protobuf(fields) => decode_protobuf(fields, bytes),
        }
    }

    /// Writes a row from its cells, named by column (those the codec does
    /// not carry are left out).
    pub(crate) fn encode(&self, cells: &[(&str, Cell)]) -> Result<Vec<u8>, Error> {
        match self {
            Codec::Json => {
                let object: Map<String, JsonValue> = cells
                    .iter()
                    .map(|(name, cell)| ((*name).to_owned(), cell.to_json()))
                    .collect();
                serde_json::to_vec(&object).map_err(|e| Error::row(e.to_string()))
            }
            Codec::Protobuf(fields) => encode_protobuf(fields, cells),
        }
    }

    pub(crate) fn to_json(&self) -> JsonValue {
        match self {
            Codec::Json => json!("json"),
            Codec::Protobuf(fields) => json!({"protobuf": fields
                .iter()
                .map(|f| json!([f.column, f.number, f.kind.name(), f.optional]))
                .collect::<Vec<_>>()}),
        }
    }

    /// A codec as the engine's tables recorded it (`to_json`).
    pub(crate) fn from_json(value: &JsonValue) -> Result<Codec, Error> {
        if value.is_null() || value == "json" {
            return Ok(Codec::Json);
        }
        let fields = value
            .get("protobuf")
            .and_then(JsonValue::as_array)
            .ok_or_else(|| Error::Schema("a codec this build does not know".to_owned()))?;
        let field = |f: &JsonValue| -> Option<Field> {
            let column = f.get(0)?.as_str()?;
            let number = u32::try_from(f.get(1)?.as_u64()?).ok()?;
            let kind = Kind::from_name(f.get(2)?.as_str()?)?;
            let optional = f.get(3).and_then(JsonValue::as_bool).unwrap_or(false);
            let field = Field::new(column, number, kind);
            Some(if optional { field.optional() } else { field })
        };
        fields
            .iter()
            .map(|f| {
                field(f).ok_or_else(|| {
                    Error::Schema(format!("a protobuf field this build cannot read: {f}"))
                })
            })
            .collect::<Result<_, _>>()
            .map(Codec::Protobuf)
    }
}

fn decode_json(bytes: &[u8]) -> Result<Vec<(String, Cell)>, Error> {
    let value: JsonValue = serde_json::from_slice(bytes)
        .map_err(|e| Error::row(format!("the row does not decode as JSON: {e}")))?;
    match value {
        JsonValue::Object(members) => Ok(members
            .into_iter()
            .map(|(name, value)| (name, Cell::Json(value)))
            .collect()),
        _ => Err(Error::row("the row is not a JSON object")),
    }
}

// Protobuf's wire types this codec reads and writes.
const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const LEN: u8 = 2;
const FIXED32: u8 = 5;

fn decode_protobuf(fields: &[Field], mut bytes: &[u8]) -> Result<Vec<(String, Cell)>, Error> {
    let mut found: Vec<Option<Cell>> = vec![None; fields.len()];
    while !bytes.is_empty() {
        let key = varint(&mut bytes)?;
        let number = u32::try_from(key >> 3).map_err(|_| Error::row("a field number too large"))?;
        let wire = (key & 7) as u8;
        let payload = take_payload(&mut bytes, wire)?;
        let Some(at) = fields.iter().position(|f| f.number == number) else {
            continue; // a field this declaration does not name
        };
        let field = &fields[at];
        if wire != field.kind.wire_type() {
            return Err(Error::Row(format!(
                "field {number} (`{}`) came as wire type {wire}, and a {} is {}",
                field.column,
                field.kind.name(),
                field.kind.wire_type()
            )));
        }
        // A field that comes twice is its last value, as protobuf reads it.
        found[at] = Some(read_cell(field, payload)?);
    }
    Ok(fields
        .iter()
        .zip(found)
        .map(|(field, cell)| {
            let cell = cell.unwrap_or_else(|| absent(field));
            (field.column.clone(), cell)
        })
        .collect())
}

/// A field the message does not carry: NULL when optional, else its
/// kind's default.
fn absent(field: &Field) -> Cell {
    if field.optional {
        return Cell::Json(JsonValue::Null);
    }
    match field.kind {
        Kind::String => Cell::Json(json!("")),
        Kind::Bytes => Cell::Bytes(Vec::new()),
        Kind::Bool => Cell::Json(json!(false)),
        Kind::Double => Cell::Json(json!(0.0)),
        _ => Cell::Json(json!(0)),
    }
}

enum Payload<'b> {
    Number(u64),
    Bytes(&'b [u8]),
}

fn take<'b>(bytes: &mut &'b [u8], n: usize) -> Result<&'b [u8], Error> {
    if bytes.len() < n {
        return Err(Error::row("the message ends inside a field"));
    }
    let (head, rest) = bytes.split_at(n);
    *bytes = rest;
    Ok(head)
}

fn take_payload<'b>(bytes: &mut &'b [u8], wire: u8) -> Result<Payload<'b>, Error> {
    match wire {
        VARINT => varint(bytes).map(Payload::Number),
        FIXED64 => Ok(Payload::Number(u64::from_le_bytes(
            take(bytes, 8)?.try_into().expect("8 bytes"),
        ))),
        FIXED32 => Ok(Payload::Number(u64::from(u32::from_le_bytes(
            take(bytes, 4)?.try_into().expect("4 bytes"),
        )))),
        LEN => {
            let n = varint(bytes)?;
            let n = usize::try_from(n).map_err(|_| Error::row("a length too large"))?;
            take(bytes, n).map(Payload::Bytes)
        }
        other => Err(Error::Row(format!(
            "wire type {other}, which no row field has"
        ))),
    }
}

fn read_cell(field: &Field, payload: Payload<'_>) -> Result<Cell, Error> {
    let out_of_range = || Error::Row(format!("field `{}`: a value out of range", field.column));
    Ok(match (field.kind, payload) {
        (Kind::String, Payload::Bytes(b)) => Cell::Json(JsonValue::String(
            std::str::from_utf8(b)
                .map_err(|_| Error::Row(format!("field `{}` is no UTF-8 text", field.column)))?
                .to_owned(),
        )),
        (Kind::Bytes, Payload::Bytes(b)) => Cell::Bytes(b.to_vec()),
        (Kind::Int64, Payload::Number(n)) => Cell::Json(json!(n as i64)),
        (Kind::Int32, Payload::Number(n)) => Cell::Json(json!(n as i64 as i32)),
        (Kind::Sint64, Payload::Number(n)) => {
            Cell::Json(json!(((n >> 1) as i64) ^ -((n & 1) as i64)))
        }
        (Kind::Uint64, Payload::Number(n)) => {
            Cell::Json(json!(i64::try_from(n).map_err(|_| out_of_range())?))
        }
        (Kind::Bool, Payload::Number(n)) => Cell::Json(json!(n != 0)),
        (Kind::Double, Payload::Number(n)) => {
            let x = f64::from_bits(n);
            Cell::Json(JsonValue::Number(
                serde_json::Number::from_f64(x).ok_or_else(out_of_range)?,
            ))
        }
        _ => {
            return Err(Error::Row(format!(
                "field `{}` is not a {}",
                field.column,
                field.kind.name()
            )))
        }
    })
}

fn varint(bytes: &mut &[u8]) -> Result<u64, Error> {
    let mut value = 0u64;
    for (i, &byte) in bytes.iter().enumerate().take(10) {
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            *bytes = &bytes[i + 1..];
            return Ok(value);
        }
    }
    Err(Error::row("a varint that does not end"))
}

fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn encode_protobuf(fields: &[Field], cells: &[(&str, Cell)]) -> Result<Vec<u8>, Error> {
    let mut out = Vec::new();
    for field in fields {
        let Some((_, cell)) = cells
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(&field.column))
        else {
            continue;
        };
        let value = match cell {
            Cell::Json(JsonValue::Null) => continue,
            other => other,
        };
        let mut payload = Vec::new();
        let wire = field.kind.wire_type();
        let is_default = write_payload(field, value, &mut payload)?;
        if is_default && !field.optional {
            continue; // proto3 leaves a default value out
        }
        put_varint(&mut out, (u64::from(field.number) << 3) | u64::from(wire));
        out.extend_from_slice(&payload);
    }
    Ok(out)
}

/// Writes one field's payload; answers whether it is its kind's default.
fn write_payload(field: &Field, cell: &Cell, out: &mut Vec<u8>) -> Result<bool, Error> {
    let not_a = |what: &str| Error::Row(format!("column `{}` holds no {what}", field.column));
    let integer = || -> Result<i64, Error> {
        match cell {
            Cell::Json(JsonValue::Number(n)) => n.as_i64(),
            Cell::Json(JsonValue::String(s)) => s.parse().ok(),
            Cell::Json(JsonValue::Bool(b)) => Some(i64::from(*b)),
            _ => None,
        }
        .ok_or_else(|| not_a("integer"))
    };
    match field.kind {
        Kind::String | Kind::Bytes => {
            let bytes: Vec<u8> = match cell {
                Cell::Bytes(b) => b.clone(),
                Cell::Json(JsonValue::String(s)) => s.clone().into_bytes(),
                Cell::Json(other) => other.to_string().into_bytes(),
            };
            put_varint(out, bytes.len() as u64);
            out.extend_from_slice(&bytes);
            Ok(bytes.is_empty())
        }
        Kind::Int64 | Kind::Int32 => {
            let n = integer()?;
            if field.kind == Kind::Int32 && i32::try_from(n).is_err() {
                return Err(not_a("32-bit integer"));
            }
            put_varint(out, n as u64);
            Ok(n == 0)
        }
        Kind::Sint64 => {
            let n = integer()?;
            put_varint(out, ((n << 1) ^ (n >> 63)) as u64);
            Ok(n == 0)
        }
        Kind::Uint64 => {
            let n = integer()?;
            let n = u64::try_from(n).map_err(|_| not_a("unsigned integer"))?;
            put_varint(out, n);
            Ok(n == 0)
        }
        Kind::Bool => {
            let b = match cell {
                Cell::Json(JsonValue::Bool(b)) => *b,
                _ => integer()? != 0,
            };
            put_varint(out, u64::from(b));
            Ok(!b)
        }
        Kind::Double => {
            let x = match cell {
                Cell::Json(JsonValue::Number(n)) => n.as_f64(),
                Cell::Json(JsonValue::String(s)) => s.parse().ok(),
                _ => None,
            }
            .ok_or_else(|| not_a("number"))?;
            out.extend_from_slice(&x.to_bits().to_le_bytes());
            Ok(x == 0.0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields() -> Codec {
        Codec::protobuf(vec![
            Field::new("id", 1, Kind::String),
            Field::new("qty", 2, Kind::Int64),
            Field::new("delta", 3, Kind::Sint64),
            Field::new("ok", 4, Kind::Bool),
            Field::new("weight", 5, Kind::Double),
            Field::new("blob", 6, Kind::Bytes),
            Field::new("note", 7, Kind::String).optional(),
        ])
    }

    fn cell(cells: &[(String, Cell)], name: &str) -> Cell {
        cells.iter().find(|(n, _)| n == name).unwrap().1.clone()
    }

    #[test]
    fn a_protobuf_row_goes_and_comes_back() {
        let codec = fields();
        let row = [
            ("id", Cell::Json(json!("a"))),
            ("qty", Cell::Json(json!(-3))),
            ("delta", Cell::Json(json!(-9))),
            ("ok", Cell::Json(json!(true))),
            ("weight", Cell::Json(json!(0.5))),
            ("blob", Cell::Bytes(vec![1, 2])),
            ("note", Cell::Json(json!("n"))),
        ];
        let bytes = codec.encode(&row).unwrap();
        let back = codec.decode(&bytes).unwrap();
        for (name, value) in row {
            assert_eq!(cell(&back, name), value, "{name}");
        }
    }

    #[test]
    fn an_absent_field_is_its_default_or_null_when_optional() {
        let back = fields().decode(&[]).unwrap();
        assert_eq!(cell(&back, "qty"), Cell::Json(json!(0)));
        assert_eq!(cell(&back, "id"), Cell::Json(json!("")));
        assert_eq!(cell(&back, "note"), Cell::Json(JsonValue::Null));
    }

    #[test]
    fn an_unknown_field_is_skipped_and_a_wrong_wire_type_refused() {
        // Field 9 (varint 1), then field 2 (qty) as a varint 5.
        let back = fields().decode(&[9 << 3, 1, 2 << 3, 5]).unwrap();
        assert_eq!(cell(&back, "qty"), Cell::Json(json!(5)));
        // Field 2 as a length-delimited payload.
        assert!(fields().decode(&[(2 << 3) | 2, 1, 0]).is_err());
        assert!(fields().decode(&[0x80]).is_err(), "a varint cut short");
    }

    #[test]
    fn a_codec_with_a_field_number_twice_is_refused() {
        let codec = Codec::protobuf(vec![("a", 1, Kind::String), ("b", 1, Kind::Int64)]);
        assert!(codec.problems("t")[0].contains("field number 1 twice"));
    }
}

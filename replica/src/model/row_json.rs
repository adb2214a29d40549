//! Rows that travel as JSON, to and from SQLite values (protocol §3).
//!
//! The column's declared SQLite type decides how a value is written:
//!
//! | declared type            | JSON                        | SQLite            |
//! |--------------------------|-----------------------------|-------------------|
//! | contains INT             | decimal text, or a number   | integer           |
//! | REAL, FLOAT, DOUBLE      | number (or numeric text)    | real              |
//! | BOOL                     | true / false                | 0 / 1             |
//! | BLOB                     | a UUID's text               | its 16 bytes      |
//! | contains JSON            | any                         | its JSON text     |
//! | TEXT, UUID, anything else| a string                    | the string        |
//! | any                      | null                        | NULL              |
//!
//! A BLOB column given a string that is no UUID stores the string as it is;
//! a text column given another JSON value stores that value's JSON text.
//! A JSON column (a server's json, jsonb or array) stores every value as
//! its JSON text, a string too, so it goes up as the same JSON: a text
//! there that is no JSON (the device wrote it) goes up as a string.
//! Going up, a 16-byte blob is written as a UUID, any other blob as
//! lowercase hex, and an integer as its decimal text.

use magic_sync_proto::json::{self as wire_json, ValueError};
use magic_sync_proto::key::{self, KeyPart, KeyType};
use rusqlite::types::{Value as SqlValue, ValueRef};
use serde_json::Value as JsonValue;
use uuid::Uuid;

use crate::error::Error;
use crate::model::shape::{ColumnKind, Shape};
use crate::model::value::{hex, Cell};

/// One JSON value as the SQLite value a column of this kind stores.
pub(crate) fn to_sql(kind: ColumnKind, value: &JsonValue) -> Result<SqlValue, ValueError> {
    if value.is_null() {
        return Ok(SqlValue::Null);
    }
    Ok(match kind {
        ColumnKind::Integer => SqlValue::Integer(wire_json::read_int64(value)?),
        ColumnKind::Real => SqlValue::Real(read_real(value)?),
        ColumnKind::Bool => SqlValue::Integer(read_bool(value)? as i64),
        ColumnKind::Blob => match value.as_str().map(Uuid::try_parse) {
            Some(Ok(uuid)) => SqlValue::Blob(uuid.as_bytes().to_vec()),
            Some(Err(_)) => SqlValue::Text(value.as_str().unwrap_or_default().to_owned()),
            None => SqlValue::Text(value.to_string()),
        },
        ColumnKind::Json => SqlValue::Text(value.to_string()),
        ColumnKind::Text => match value {
            JsonValue::String(s) => SqlValue::Text(s.clone()),
            other => SqlValue::Text(other.to_string()),
        },
    })
}

/// One SQLite value as JSON, for a column of this kind (rows going up).
pub(crate) fn to_json(kind: ColumnKind, value: ValueRef<'_>) -> JsonValue {
    match value {
        ValueRef::Null => JsonValue::Null,
        ValueRef::Integer(i) if kind == ColumnKind::Bool => JsonValue::Bool(i != 0),
        ValueRef::Integer(i) => wire_json::int64(i),
        ValueRef::Real(r) => serde_json::Number::from_f64(r)
            .map(JsonValue::Number)
            .unwrap_or(JsonValue::Null),
        ValueRef::Text(t) if kind == ColumnKind::Json => serde_json::from_slice(t)
            .unwrap_or_else(|_| JsonValue::String(String::from_utf8_lossy(t).into_owned())),
        ValueRef::Text(t) => JsonValue::String(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Blob(b) => match Uuid::from_slice(b) {
            Ok(uuid) => wire_json::uuid(&uuid),
            Err(_) => JsonValue::String(hex(b)),
        },
    }
}

/// A codec's cell as the SQLite value a column of this kind stores.
pub(crate) fn cell_to_sql(kind: ColumnKind, cell: &Cell) -> Result<SqlValue, Error> {
    match cell {
        Cell::Json(value) => to_sql(kind, value).map_err(|e| Error::Row(e.to_string())),
        Cell::Bytes(bytes) => Ok(SqlValue::Blob(bytes.clone())),
    }
}

/// A stored value as the cell a codec writes for this column: raw bytes
/// for a protobuf `bytes` field, JSON otherwise.
pub(crate) fn cell_of_sql(kind: ColumnKind, raw_bytes: bool, value: ValueRef<'_>) -> Cell {
    match value {
        ValueRef::Blob(b) if raw_bytes => Cell::Bytes(b.to_vec()),
        ValueRef::Text(t) if raw_bytes => Cell::Bytes(t.to_vec()),
        other => Cell::Json(to_json(kind, other)),
    }
}

/// A version as text (protocol §4.5): an integer in decimal; an instant in
/// UTC, RFC 3339, truncated to the microsecond with six digits and `Z`.
pub(crate) fn version_text(
    kind: Option<ColumnKind>,
    value: rusqlite::types::ValueRef<'_>,
) -> String {
    use rusqlite::types::ValueRef;
    match value {
        ValueRef::Null => String::new(),
        ValueRef::Integer(i) => i.to_string(),
        ValueRef::Real(r) if kind == Some(ColumnKind::Integer) => (r as i64).to_string(),
        ValueRef::Real(r) => r.to_string(),
        ValueRef::Text(t) => {
            let text = String::from_utf8_lossy(t);
            match chrono::DateTime::parse_from_rfc3339(&text) {
                Ok(instant) => {
                    magic_sync_proto::json::instant_text(&instant.with_timezone(&chrono::Utc))
                }
                Err(_) => text.into_owned(),
            }
        }
        ValueRef::Blob(b) => hex(b),
    }
}

fn read_real(value: &JsonValue) -> Result<f64, ValueError> {
    match value {
        JsonValue::Number(n) => n.as_f64(),
        JsonValue::String(s) => s.parse().ok(),
        _ => None,
    }
    .ok_or_else(|| not_a(value, "number"))
}

fn read_bool(value: &JsonValue) -> Result<bool, ValueError> {
    match value {
        JsonValue::Bool(b) => Some(*b),
        JsonValue::Number(n) => match n.as_i64() {
            Some(0) => Some(false),
            Some(1) => Some(true),
            _ => None,
        },
        _ => None,
    }
    .ok_or_else(|| not_a(value, "boolean"))
}

fn not_a(value: &JsonValue, expected: &'static str) -> ValueError {
    ValueError {
        value: value.to_string(),
        expected,
    }
}

// ---------------------------------------------------------------------------
// Keys
// ---------------------------------------------------------------------------

/// A stored row's key, in the key text form, from its key columns' values;
/// `None` when they are not a key of the table's types (a row the server
/// never sent).
pub(crate) fn key_of_sql(shape: &Shape, values: &[ValueRef<'_>]) -> Option<String> {
    let parts = shape
        .key_types
        .iter()
        .zip(values)
        .map(|(ty, value)| key_part_of_sql(*ty, *value))
        .collect::<Option<Vec<_>>>()?;
    Some(key::join(&parts))
}

fn key_part_of_sql(ty: KeyType, value: ValueRef<'_>) -> Option<KeyPart> {
    match (ty, value) {
        (KeyType::Integer, ValueRef::Integer(i)) => Some(KeyPart::Integer(i)),
        (KeyType::Uuid, ValueRef::Blob(b)) => Uuid::from_slice(b).ok().map(KeyPart::Uuid),
        (KeyType::Uuid, ValueRef::Text(t)) => std::str::from_utf8(t)
            .ok()
            .and_then(|s| Uuid::try_parse(s).ok())
            .map(KeyPart::Uuid),
        _ => None,
    }
}

/// The SQLite values a parsed key matches a stored row by: a UUID as 16
/// bytes in a BLOB column and as its canonical text in any other.
pub(crate) fn key_to_sql(shape: &Shape, parts: &[KeyPart]) -> Vec<SqlValue> {
    shape
        .key_columns()
        .zip(parts)
        .map(|(column, part)| match part {
            KeyPart::Integer(i) => SqlValue::Integer(*i),
            KeyPart::Uuid(u) if column.kind == ColumnKind::Blob => {
                SqlValue::Blob(u.as_bytes().to_vec())
            }
            KeyPart::Uuid(u) => SqlValue::Text(u.hyphenated().to_string()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_version_is_text_as_the_protocol_compares_it() {
        assert_eq!(
            version_text(Some(ColumnKind::Integer), ValueRef::Integer(7)),
            "7"
        );
        assert_eq!(
            version_text(
                Some(ColumnKind::Text),
                ValueRef::Text(b"2026-10-12T12:00:00.1234567+02:00")
            ),
            "2026-10-12T10:00:00.123456Z"
        );
    }

    const U: &str = "0196a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b";

    #[test]
    fn an_integer_column_takes_decimal_text_or_a_number() {
        assert_eq!(
            to_sql(ColumnKind::Integer, &json!("9007199254740993")),
            Ok(SqlValue::Integer(9_007_199_254_740_993))
        );
        assert_eq!(
            to_sql(ColumnKind::Integer, &json!(7)),
            Ok(SqlValue::Integer(7))
        );
        assert!(to_sql(ColumnKind::Integer, &json!("seven")).is_err());
    }

    #[test]
    fn a_blob_column_stores_a_uuid_as_its_16_bytes() {
        let stored = to_sql(ColumnKind::Blob, &json!(U.to_uppercase())).unwrap();
        let uuid: Uuid = U.parse().unwrap();
        assert_eq!(stored, SqlValue::Blob(uuid.as_bytes().to_vec()));
        let back = to_json(ColumnKind::Blob, ValueRef::Blob(uuid.as_bytes()));
        assert_eq!(back, json!(U));
    }

    #[test]
    fn a_json_column_holds_json_text_and_sends_the_json_it_holds() {
        for value in [
            json!(["a", null, "b\\"]),
            json!({"ü": 1}),
            json!("text"),
            json!(1.5),
        ] {
            let stored = to_sql(ColumnKind::Json, &value).unwrap();
            let SqlValue::Text(text) = &stored else {
                panic!("JSON is held as text: {stored:?}");
            };
            assert_eq!(text, &value.to_string());
            assert_eq!(
                to_json(ColumnKind::Json, ValueRef::Text(text.as_bytes())),
                value
            );
        }
        assert_eq!(
            to_json(ColumnKind::Json, ValueRef::Text(b"not json")),
            json!("not json")
        );
    }

    #[test]
    fn a_real_a_bool_and_a_null() {
        assert_eq!(
            to_sql(ColumnKind::Real, &json!(2.5)),
            Ok(SqlValue::Real(2.5))
        );
        assert_eq!(
            to_sql(ColumnKind::Real, &json!("2.5")),
            Ok(SqlValue::Real(2.5))
        );
        assert_eq!(
            to_sql(ColumnKind::Bool, &json!(true)),
            Ok(SqlValue::Integer(1))
        );
        assert_eq!(
            to_sql(ColumnKind::Bool, &json!(false)),
            Ok(SqlValue::Integer(0))
        );
        assert!(to_sql(ColumnKind::Bool, &json!("yes")).is_err());
        assert_eq!(
            to_sql(ColumnKind::Integer, &JsonValue::Null),
            Ok(SqlValue::Null)
        );
        assert_eq!(to_json(ColumnKind::Bool, ValueRef::Integer(1)), json!(true));
    }

    #[test]
    fn a_text_column_stores_other_json_as_its_text() {
        assert_eq!(
            to_sql(ColumnKind::Text, &json!("12.50")),
            Ok(SqlValue::Text("12.50".into()))
        );
        assert_eq!(
            to_sql(ColumnKind::Text, &json!({"a": 1})),
            Ok(SqlValue::Text("{\"a\":1}".into()))
        );
    }

    #[test]
    fn an_integer_goes_up_as_decimal_text() {
        assert_eq!(
            to_json(
                ColumnKind::Integer,
                ValueRef::Integer(9_007_199_254_740_993)
            ),
            json!("9007199254740993")
        );
    }

    #[test]
    fn other_blobs_go_up_as_hex() {
        assert_eq!(
            to_json(ColumnKind::Blob, ValueRef::Blob(&[1, 0xab])),
            json!("01ab")
        );
    }

    #[test]
    fn a_stored_key_is_read_in_the_key_text_form() {
        let uuid: Uuid = U.parse().unwrap();
        assert_eq!(
            key_part_of_sql(KeyType::Uuid, ValueRef::Blob(uuid.as_bytes())),
            Some(KeyPart::Uuid(uuid))
        );
        let upper = U.to_uppercase();
        assert_eq!(
            key_part_of_sql(KeyType::Uuid, ValueRef::Text(upper.as_bytes())),
            Some(KeyPart::Uuid(uuid))
        );
        assert_eq!(
            key_part_of_sql(KeyType::Integer, ValueRef::Integer(3)),
            Some(KeyPart::Integer(3))
        );
        assert_eq!(
            key_part_of_sql(KeyType::Integer, ValueRef::Text(b"3")),
            None
        );
    }
}

//! A column's value as a codec carries it (`Cell`), and bytes written as
//! text (`hex`): what `codec` and `row_json` both speak.

use serde_json::Value as JsonValue;

/// One column's value as a codec carries it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Cell {
    Json(JsonValue),
    Bytes(Vec<u8>),
}

impl Cell {
    pub(crate) fn to_json(&self) -> JsonValue {
        match self {
            Cell::Json(v) => v.clone(),
            Cell::Bytes(b) => JsonValue::String(hex(b)),
        }
    }
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

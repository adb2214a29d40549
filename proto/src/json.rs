//! How a row that travels as JSON writes its values (protocol §3).
//!
//! A row is a JSON object with one member per column, named as the column.
//! Each value is written as its type writes it in JSON, except:
//! - a 64-bit integer is its decimal text (`"9007199254740993"`), since a
//!   reader that holds numbers as doubles would round a JSON number;
//! - a decimal is its text;
//! - a UUID is its canonical form (lowercase, hyphenated);
//! - an instant is RFC 3339; this engine writes it in UTC with six
//!   fractional digits and `Z` (`2026-10-12T10:00:00.123456Z`).
//!
//! Readers are lenient where that loses nothing: an integer may come as a
//! JSON number or as decimal text, a UUID in any spelling `uuid` parses, an
//! instant with any offset.

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::Value;
use uuid::Uuid;

/// A value that is not what its column holds.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{value} is no {expected}")]
pub struct ValueError {
    pub value: String,
    pub expected: &'static str,
}

fn not_a(value: &Value, expected: &'static str) -> ValueError {
    ValueError {
        value: value.to_string(),
        expected,
    }
}

/// A 64-bit integer, as its decimal text.
pub fn int64(value: i64) -> Value {
    Value::String(value.to_string())
}

/// A 64-bit integer, from decimal text or an integral JSON number.
pub fn read_int64(value: &Value) -> Result<i64, ValueError> {
    match value {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.parse().ok().filter(|_| is_decimal(s)),
        _ => None,
    }
    .ok_or_else(|| not_a(value, "64-bit integer"))
}

fn is_decimal(text: &str) -> bool {
    let digits = text.strip_prefix('-').unwrap_or(text);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// A UUID, in its canonical form.
pub fn uuid(value: &Uuid) -> Value {
    Value::String(value.hyphenated().to_string())
}

/// A UUID, from any spelling of it.
pub fn read_uuid(value: &Value) -> Result<Uuid, ValueError> {
    value
        .as_str()
        .and_then(|s| Uuid::try_parse(s).ok())
        .ok_or_else(|| not_a(value, "UUID"))
}

/// An instant's canonical text: UTC, microseconds, `Z`.
pub fn instant_text(value: &DateTime<Utc>) -> String {
    value.to_rfc3339_opts(SecondsFormat::Micros, true)
}

/// An instant, as RFC 3339 in its canonical form.
pub fn instant(value: &DateTime<Utc>) -> Value {
    Value::String(instant_text(value))
}

/// An instant, from RFC 3339 with any offset.
pub fn read_instant(value: &Value) -> Result<DateTime<Utc>, ValueError> {
    value
        .as_str()
        .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
        .map(|t| t.with_timezone(&Utc))
        .ok_or_else(|| not_a(value, "RFC 3339 instant"))
}

/// A decimal, as its text.
pub fn decimal(text: &str) -> Value {
    Value::String(text.to_owned())
}

/// A decimal's text, from text or a JSON number.
pub fn read_decimal(value: &Value) -> Result<String, ValueError> {
    match value {
        Value::Number(n) => Some(n.to_string()),
        Value::String(s) if looks_decimal(s) => Some(s.clone()),
        _ => None,
    }
    .ok_or_else(|| not_a(value, "decimal"))
}

fn looks_decimal(text: &str) -> bool {
    let unsigned = text.strip_prefix(['-', '+']).unwrap_or(text);
    let mut halves = unsigned.splitn(2, '.');
    let whole = halves.next().unwrap_or("");
    let fraction = halves.next().unwrap_or("");
    (!whole.is_empty() || !fraction.is_empty())
        && whole.bytes().all(|b| b.is_ascii_digit())
        && fraction.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_64_bit_integer_is_its_decimal_text() {
        // 2^53 + 1: a double would round it.
        assert_eq!(int64(9_007_199_254_740_993), json!("9007199254740993"));
        assert_eq!(int64(i64::MIN), json!("-9223372036854775808"));
    }

    #[test]
    fn a_64_bit_integer_reads_from_text_or_a_number() {
        assert_eq!(
            read_int64(&json!("9007199254740993")),
            Ok(9_007_199_254_740_993)
        );
        assert_eq!(read_int64(&json!(12)), Ok(12));
        assert_eq!(read_int64(&json!("-3")), Ok(-3));
        for bad in [
            json!("1.5"),
            json!(1.5),
            json!("+1"),
            json!(""),
            json!(null),
            json!(true),
        ] {
            assert!(read_int64(&bad).is_err(), "{bad} read as an integer");
        }
    }

    #[test]
    fn a_uuid_is_canonical() {
        let u: Uuid = "0196A1B2C3D47E5F8A9B0C1D2E3F4A5B".parse().unwrap();
        assert_eq!(uuid(&u), json!("0196a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"));
        assert_eq!(read_uuid(&json!("0196A1B2C3D47E5F8A9B0C1D2E3F4A5B")), Ok(u));
        assert!(read_uuid(&json!("0196")).is_err());
        assert!(read_uuid(&json!(5)).is_err());
    }

    #[test]
    fn an_instant_is_rfc_3339_in_utc_to_the_microsecond() {
        let t = read_instant(&json!("2026-10-12T12:00:00.1234567+02:00")).unwrap();
        assert_eq!(instant(&t), json!("2026-10-12T10:00:00.123456Z"));
        let whole = read_instant(&json!("2026-10-12T10:00:00Z")).unwrap();
        assert_eq!(instant_text(&whole), "2026-10-12T10:00:00.000000Z");
        assert!(read_instant(&json!("2026-10-12 10:00")).is_err());
    }

    #[test]
    fn a_decimal_is_its_text() {
        assert_eq!(decimal("12.50"), json!("12.50"));
        assert_eq!(read_decimal(&json!("12.50")), Ok("12.50".to_owned()));
        assert_eq!(read_decimal(&json!(3)), Ok("3".to_owned()));
        assert!(read_decimal(&json!("twelve")).is_err());
        assert!(read_decimal(&json!(".")).is_err());
    }
}

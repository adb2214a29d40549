//! A replica's answers to wishes, as they come up: rows of `sync_wishes`,
//! each a Wish message, of which the server takes only what the replica
//! owns (protocol A.6): the version answered, the outcome, the reason and
//! when. file/rows.rs files them as edits of a two-way row: only while
//! the server records the replica holding the wish.
//!
//! Here: reading one (`read_answer`), and the statement that files them
//! (`FILE_ANSWERS`): a final answer (applied, refused, superseded) of the
//! wish's own version stands against a later upload of another answer,
//! which the transport may have kept back, but for one re-stated.

use crate::error::Error;
pub use crate::statements::wishes::answers::FILE_ANSWERS;
use magic_sync_proto::wire::Wish;
use prost::Message;
use serde_json::{json, Map, Value};
use uuid::Uuid;

/// The outcomes a replica answers.
pub const OUTCOMES: [&str; 4] = ["applied", "refused", "superseded", "waiting"];

/// The longest reason kept: a replica cuts its own there (protocol 6).
const REASON_BYTES: usize = 512;

/// Reads one answer: the Wish message beside its key. Answers it as the
/// row filed (`{id, answered, outcome, reason, answered_at}`), or why it is
/// malformed.
pub fn read_answer(key: &str, bytes: &[u8]) -> Result<Map<String, Value>, Error> {
    let wish = Wish::decode(bytes).map_err(|e| {
        Error::bad_message(format!("a row that does not decode as a Wish: {e}"), "")
    })?;
    let id: Uuid = key.parse().map_err(|_| {
        Error::bad_message(
            format!("a key that is not the table's: {key} is no uuid"),
            "",
        )
    })?;
    if !wish.id.is_empty() && wish.id.parse::<Uuid>().ok() != Some(id) {
        return Err(Error::bad_message(
            format!("its own key is not the one beside it (id is {})", wish.id),
            "",
        ));
    }
    if wish.answered == 0 || wish.answered > magic_sync_proto::LARGEST_NUMBER {
        return Err(Error::bad_message(
            format!("an answer of no version a server draws ({})", wish.answered),
            "",
        ));
    }
    if !OUTCOMES.contains(&wish.outcome.as_str()) {
        return Err(Error::bad_message(
            format!(
                "an answer whose outcome is none of {}: {:?}",
                OUTCOMES.join(", "),
                wish.outcome
            ),
            "",
        ));
    }
    let answered_at = match wish.answered_at.as_str() {
        "" => Value::Null,
        text if is_instant(text) => json!(text),
        text => {
            return Err(Error::bad_message(
                format!("an answer given at no RFC 3339 instant: {text:?}"),
                "",
            ))
        }
    };
    if wish.reason.contains('\0') {
        return Err(Error::bad_message(
            "a reason holding a NUL character, which no PostgreSQL text holds",
            "",
        ));
    }
    let mut row = Map::new();
    row.insert("id".into(), json!(id.hyphenated().to_string()));
    row.insert("answered".into(), json!(wish.answered.to_string()));
    row.insert("outcome".into(), json!(wish.outcome));
    let reason = cut(&wish.reason, REASON_BYTES);
    row.insert(
        "reason".into(),
        if reason.is_empty() {
            Value::Null
        } else {
            json!(reason)
        },
    );
    row.insert("answered_at".into(), answered_at);
    Ok(row)
}

/// `text` cut to at most `bytes` bytes, at a character's boundary.
fn cut(text: &str, bytes: usize) -> &str {
    if text.len() <= bytes {
        return text;
    }
    let mut end = bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Whether `text` is an RFC 3339 instant PostgreSQL reads as one:
/// `YYYY-MM-DDTHH:MM:SS`, a fraction, then `Z` or an offset.
fn is_instant(text: &str) -> bool {
    let b = text.as_bytes();
    let digits = |from: usize, to: usize| -> Option<u32> {
        let part = text.get(from..to)?;
        part.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| part.parse().ok())?
    };
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't')
        || b[13] != b':'
        || b[16] != b':'
    {
        return false;
    }
    let (Some(year), Some(month), Some(day), Some(hour), Some(minute), Some(second)) = (
        digits(0, 4),
        digits(5, 7),
        digits(8, 10),
        digits(11, 13),
        digits(14, 16),
        digits(17, 19),
    ) else {
        return false;
    };
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    if year == 0 || day == 0 || day > days || hour > 23 || minute > 59 || second > 59 {
        return false;
    }
    let mut rest = &text[19..];
    if let Some(fraction) = rest.strip_prefix('.') {
        let n = fraction.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return false;
        }
        rest = &fraction[n..];
    }
    match rest.as_bytes() {
        [b'Z' | b'z'] => true,
        [b'+' | b'-', ..] if rest.len() == 6 => {
            rest.as_bytes()[3] == b':'
                && digits_in(&rest[1..3]).is_some_and(|h| h <= 23)
                && digits_in(&rest[4..6]).is_some_and(|m| m <= 59)
        }
        _ => false,
    }
}

fn digits_in(text: &str) -> Option<u32> {
    text.bytes()
        .all(|c| c.is_ascii_digit())
        .then(|| text.parse().ok())?
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "01960000-0000-7000-8000-00000000f001";

    fn answer(answered: u64, outcome: &str, at: &str) -> Vec<u8> {
        Wish {
            id: ID.into(),
            table: "footers".into(),
            key: "k".into(),
            version: answered,
            answered,
            outcome: outcome.into(),
            reason: "why".into(),
            answered_at: at.into(),
            ..Wish::default()
        }
        .encode_to_vec()
    }

    #[test]
    fn an_answer_is_read_as_what_the_replica_owns_of_the_wish() {
        let row = read_answer(ID, &answer(7, "applied", "2026-10-12T10:00:00.123456Z")).unwrap();
        let mut unexplained = Wish::decode(answer(7, "applied", "").as_slice()).unwrap();
        unexplained.reason.clear();
        let read = read_answer(ID, &unexplained.encode_to_vec()).unwrap();
        assert_eq!(
            (&read["reason"], &read["answered_at"]),
            (&Value::Null, &Value::Null)
        );
        assert_eq!(
            Value::Object(row),
            json!({"id": ID, "answered": "7", "outcome": "applied", "reason": "why",
                   "answered_at": "2026-10-12T10:00:00.123456Z"})
        );
    }

    #[test]
    fn an_answer_of_no_version_or_of_an_outcome_no_replica_gives_is_malformed() {
        assert!(read_answer(ID, &answer(0, "applied", "")).is_err());
        assert!(read_answer(ID, &answer(7, "done", "")).is_err());
        assert!(read_answer("nope", &answer(7, "applied", "")).is_err());
        assert!(read_answer(
            "01960000-0000-7000-8000-00000000f002",
            &answer(7, "applied", "")
        )
        .is_err());
        assert!(read_answer(ID, b"\xff\xff").is_err());
    }

    #[test]
    fn only_an_rfc_3339_instant_is_taken_as_when_it_was_answered() {
        for good in [
            "2026-10-12T10:00:00Z",
            "2024-02-29T23:59:59.5+01:00",
            "2026-10-12T10:00:00.123456Z",
        ] {
            assert!(is_instant(good), "{good}");
        }
        for bad in [
            "2026-02-29T10:00:00Z",
            "2026-10-12 10:00:00Z",
            "2026-13-01T00:00:00Z",
            "yesterday",
            "2026-10-12T10:00:00",
        ] {
            assert!(!is_instant(bad), "{bad}");
        }
    }

    #[test]
    fn a_reason_is_cut_at_a_character_s_boundary() {
        assert_eq!(cut("ééé", 3), "é");
        assert_eq!(cut("abc", 512), "abc");
    }
}

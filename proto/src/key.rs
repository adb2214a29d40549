//! The one text form a row's key is compared in (protocol §3).
//!
//! A key is its primary key's parts in key order: a UUID lowercase and
//! hyphenated, an integer in decimal, joined by `|`. A side reading a key
//! parses each part as its column types it and writes it back in this form,
//! so `0196A…` and `0196a…` are the same key; a key that does not parse is
//! malformed.

use std::fmt;

use uuid::Uuid;

/// What a key column holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeyType {
    Uuid,
    Integer,
}

impl KeyType {
    /// The name a declaration uses for this type (`uuid`, `integer`).
    pub fn name(self) -> &'static str {
        match self {
            KeyType::Uuid => "uuid",
            KeyType::Integer => "integer",
        }
    }
}

/// One part of a key, parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum KeyPart {
    Uuid(Uuid),
    Integer(i64),
}

impl fmt::Display for KeyPart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // `Uuid`'s Display is the lowercase hyphenated form.
            KeyPart::Uuid(u) => write!(f, "{}", u.hyphenated()),
            KeyPart::Integer(i) => write!(f, "{i}"),
        }
    }
}

/// A key that does not parse as its columns type it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("the key `{key}` has {found} parts, and its table's key has {expected}")]
    Parts {
        key: String,
        found: usize,
        expected: usize,
    },
    #[error("part {index} of the key `{key}` is no {expected}: `{part}`")]
    Part {
        key: String,
        index: usize,
        part: String,
        expected: &'static str,
    },
}

/// Parses a key's text as parts of these types.
pub fn parse(text: &str, types: &[KeyType]) -> Result<Vec<KeyPart>, KeyError> {
    let pieces: Vec<&str> = text.split('|').collect();
    if pieces.len() != types.len() {
        return Err(KeyError::Parts {
            key: text.to_owned(),
            found: pieces.len(),
            expected: types.len(),
        });
    }
    pieces
        .iter()
        .zip(types)
        .enumerate()
        .map(|(index, (piece, ty))| {
            parse_part(piece, *ty).ok_or_else(|| KeyError::Part {
                key: text.to_owned(),
                index: index + 1,
                part: (*piece).to_owned(),
                expected: ty.name(),
            })
        })
        .collect()
}

/// The lengths of the two spellings of a UUID the key rules name:
/// hyphenated, and its 32 hex digits alone (either case). The uuid crate
/// also reads `{…}` and `urn:uuid:…`; a key in those does not parse, on
/// either half.
const UUID_SPELLINGS: [usize; 2] = [36, 32];

fn parse_part(piece: &str, ty: KeyType) -> Option<KeyPart> {
    match ty {
        KeyType::Uuid if !UUID_SPELLINGS.contains(&piece.len()) => None,
        KeyType::Uuid => Uuid::try_parse(piece).ok().map(KeyPart::Uuid),
        KeyType::Integer => parse_decimal(piece).map(KeyPart::Integer),
    }
}

/// A decimal integer: an optional minus sign and digits, nothing else.
fn parse_decimal(piece: &str) -> Option<i64> {
    let digits = piece.strip_prefix('-').unwrap_or(piece);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    piece.parse().ok()
}

/// Writes parts in the one form keys are compared in.
pub fn join(parts: &[KeyPart]) -> String {
    let mut text = String::new();
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            text.push('|');
        }
        text.push_str(&part.to_string());
    }
    text
}

/// A key as it came, written back in the one form keys are compared in.
pub fn canonical(text: &str, types: &[KeyType]) -> Result<String, KeyError> {
    parse(text, types).map(|parts| join(&parts))
}

#[cfg(test)]
mod tests {
    use super::*;

    const U: &str = "0196a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b";

    #[test]
    fn a_uuid_is_lowercase_and_hyphenated() {
        assert_eq!(canonical(U, &[KeyType::Uuid]).unwrap(), U);
    }

    #[test]
    fn a_uuid_that_came_uppercase_is_the_same_key() {
        let upper = U.to_uppercase();
        assert_eq!(canonical(&upper, &[KeyType::Uuid]).unwrap(), U);
    }

    #[test]
    fn a_uuid_that_came_without_hyphens_is_the_same_key() {
        let simple = U.replace('-', "");
        assert_eq!(canonical(&simple, &[KeyType::Uuid]).unwrap(), U);
        let shouting = simple.to_uppercase();
        assert_eq!(canonical(&shouting, &[KeyType::Uuid]).unwrap(), U);
    }

    #[test]
    fn an_integer_is_decimal() {
        assert_eq!(canonical("42", &[KeyType::Integer]).unwrap(), "42");
        assert_eq!(canonical("-7", &[KeyType::Integer]).unwrap(), "-7");
        assert_eq!(canonical("007", &[KeyType::Integer]).unwrap(), "7");
        assert_eq!(
            canonical("9223372036854775807", &[KeyType::Integer]).unwrap(),
            "9223372036854775807"
        );
    }

    #[test]
    fn parts_are_joined_by_a_bar_in_key_order() {
        let key = format!("{}|3", U.to_uppercase());
        assert_eq!(
            canonical(&key, &[KeyType::Uuid, KeyType::Integer]).unwrap(),
            format!("{U}|3")
        );
        assert_eq!(
            join(&[KeyPart::Integer(3), KeyPart::Uuid(U.parse().unwrap())]),
            format!("3|{U}")
        );
    }

    #[test]
    fn a_key_that_does_not_parse_is_malformed() {
        for (text, types) in [
            ("not-a-uuid", &[KeyType::Uuid][..]),
            ("", &[KeyType::Uuid][..]),
            ("12a", &[KeyType::Integer][..]),
            ("+1", &[KeyType::Integer][..]),
            (" 1", &[KeyType::Integer][..]),
            ("1.5", &[KeyType::Integer][..]),
            ("9223372036854775808", &[KeyType::Integer][..]),
            ("-", &[KeyType::Integer][..]),
        ] {
            assert!(
                matches!(parse(text, types), Err(KeyError::Part { .. })),
                "{text:?} parsed"
            );
        }
    }

    #[test]
    fn a_key_of_more_or_fewer_parts_than_its_table_is_malformed() {
        assert!(matches!(
            parse("1|2", &[KeyType::Integer]),
            Err(KeyError::Parts {
                found: 2,
                expected: 1,
                ..
            })
        ));
        assert!(matches!(
            parse("1", &[KeyType::Integer, KeyType::Integer]),
            Err(KeyError::Parts { .. })
        ));
    }

    #[test]
    fn the_error_names_the_part_that_does_not_parse() {
        let error = parse("1|x", &[KeyType::Integer, KeyType::Uuid]).unwrap_err();
        assert_eq!(error.to_string(), "part 2 of the key `1|x` is no uuid: `x`");
    }

    #[test]
    fn a_uuid_key_is_hyphenated_or_bare_hex_in_either_case() {
        let bare = U.replace('-', "");
        for spelling in [
            U.to_owned(),
            U.to_uppercase(),
            bare.clone(),
            bare.to_uppercase(),
        ] {
            assert_eq!(canonical(&spelling, &[KeyType::Uuid]).unwrap(), U);
        }
    }

    #[test]
    fn a_uuid_key_in_braces_or_as_a_urn_does_not_parse() {
        for spelling in [format!("{{{U}}}"), format!("urn:uuid:{U}")] {
            let error = parse(&spelling, &[KeyType::Uuid]).unwrap_err();
            assert!(matches!(error, KeyError::Part { index: 1, .. }), "{error}");
        }
    }

    #[test]
    fn the_error_names_the_part_spelt_otherwise() {
        let key = format!("3|{{{U}}}");
        let error = parse(&key, &[KeyType::Integer, KeyType::Uuid]).unwrap_err();
        assert_eq!(
            error.to_string(),
            format!("part 2 of the key `{key}` is no uuid: `{{{U}}}`")
        );
    }

    #[test]
    fn a_key_of_another_count_of_parts_is_said_so_first() {
        let key = format!("{{{U}}}|3");
        assert!(matches!(
            parse(&key, &[KeyType::Uuid]),
            Err(KeyError::Parts { .. })
        ));
    }
}

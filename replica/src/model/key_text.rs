//! Reading a key the server sent, by the key rules (protocol §3).
//!
//! The rules name two spellings of a UUID part: hyphenated, or its 32 hex
//! digits, in either case. The parser both halves share
//! (`magic_sync_proto::key`) also reads the other forms the uuid crate
//! knows, `{…}` and `urn:uuid:…`; the replica takes a key in those as one
//! that does not parse, as the rules say of any key they do not describe.

use magic_sync_proto::key::{self, KeyError, KeyPart, KeyType};

/// The lengths of the two spellings the key rules name: hyphenated, and
/// the hex digits alone.
const UUID_SPELLINGS: [usize; 2] = [36, 32];

/// Parses a key's text as parts of these types, taking only the spellings
/// the key rules describe.
pub(crate) fn parse(text: &str, types: &[KeyType]) -> Result<Vec<KeyPart>, KeyError> {
    let parts = key::parse(text, types)?;
    match uuid_spelt_otherwise(text, types) {
        Some(error) => Err(error),
        None => Ok(parts),
    }
}

/// A key as it came, written back in the one form keys are compared in.
pub(crate) fn canonical(text: &str, types: &[KeyType]) -> Result<String, KeyError> {
    parse(text, types).map(|parts| key::join(&parts))
}

/// The first UUID part of a key that parsed, spelt in a form the key rules
/// do not name.
fn uuid_spelt_otherwise(text: &str, types: &[KeyType]) -> Option<KeyError> {
    text.split('|')
        .zip(types)
        .enumerate()
        .find(|(_, (piece, ty))| **ty == KeyType::Uuid && !UUID_SPELLINGS.contains(&piece.len()))
        .map(|(at, (piece, _))| KeyError::Part {
            key: text.to_owned(),
            index: at + 1,
            part: piece.to_owned(),
            expected: KeyType::Uuid.name(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    const U: &str = "0196a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b";

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

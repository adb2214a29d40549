//! A wish as it travels down: the Wish message (proto/sync.proto), with the
//! server's fields only. The server never sends an answer down: `answered`
//! is 0, and `outcome`, `reason` and `answered_at` are empty.

use magic_sync_proto::wire::Wish;
use prost::Message;
use uuid::Uuid;

/// The Wish message of a wish, its `wanted` the setting row as that
/// setting's rows are encoded.
pub fn wish_bytes(
    id: Uuid,
    table: &str,
    key: &str,
    wanted: Vec<u8>,
    version: i64,
    note: Option<&str>,
) -> Vec<u8> {
    Wish {
        id: id.hyphenated().to_string(),
        table: table.to_owned(),
        key: key.to_owned(),
        wanted,
        version: version as u64,
        note: note.unwrap_or_default().to_owned(),
        ..Wish::default()
    }
    .encode_to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wish_goes_down_without_an_answer() {
        let id: Uuid = "01960000-0000-7000-8000-00000000f001".parse().unwrap();
        let bytes = wish_bytes(id, "footers", "k", b"{}".to_vec(), 7, Some("who"));
        let wish = Wish::decode(bytes.as_slice()).unwrap();
        assert_eq!(wish.id, "01960000-0000-7000-8000-00000000f001");
        assert_eq!((wish.table.as_str(), wish.key.as_str()), ("footers", "k"));
        assert_eq!((wish.version, wish.note.as_str()), (7, "who"));
        assert_eq!(wish.wanted, b"{}");
        assert_eq!(wish.answered, 0);
        assert!(wish.outcome.is_empty() && wish.reason.is_empty() && wish.answered_at.is_empty());
    }
}

//! A wish's bytes as it travels down: the Wish message (proto/sync.proto),
//! with the server's fields only, its `wanted` the setting row encoded as
//! that setting's rows are. The server never sends an answer down:
//! `answered` is 0, and `outcome`, `reason` and `answered_at` are empty.
//! `wish_bytes` writes it (`sync_internal.wish_bytes`, api/wishing.rs);
//! `wish_sql` is the expression a pass loads a row of sync.sync_wishes
//! with.

use magic_sync_proto::wire::Wish;
use prost::Message;
use uuid::Uuid;

use super::sql::row_bytes;
use crate::catalog::table_sql::{key_matches, quote_literal};
use crate::catalog::Declared;

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

/// The bytes of the wish `alias` (a row of sync.sync_wishes) as they
/// travel: the Wish message (`sync_internal.wish_bytes`), its `wanted` the
/// setting row encoded as the setting's rows are.
pub fn wish_sql(table: &Declared, alias: &str) -> String {
    let wanted = if table.wishes_of.is_empty() {
        "NULL::bytea".to_owned()
    } else {
        let cases: Vec<String> = table
            .wishes_of
            .iter()
            .map(|setting| {
                format!(
                    "WHEN {} THEN {}",
                    quote_literal(&setting.name),
                    wanted_bytes(setting, alias)
                )
            })
            .collect();
        format!(
            "CASE {alias}.\"table_name\" {} ELSE NULL::bytea END",
            cases.join(" ")
        )
    };
    format!(
        "sync_internal.wish_bytes({alias}.\"id\", {alias}.\"table_name\", {alias}.\"key\", {wanted}, \
         {alias}.\"version\", {alias}.\"note\")"
    )
}

/// The row a wish of `setting` wants, encoded: the setting row the server
/// holds, or the one wished when it holds none, with the wished columns and
/// the version the wish is based on laid over it (protocol A.6).
fn wanted_bytes(setting: &Declared, alias: &str) -> String {
    let held = format!(
        "(SELECT h FROM {rel} AS h WHERE {matches})",
        rel = setting.relation,
        matches = key_matches(setting, "h", &format!("{alias}.\"key\"")),
    );
    format!(
        "(SELECT {bytes} FROM jsonb_populate_record(coalesce({held}, NULL::{rel}), {over}) AS r)",
        bytes = row_bytes(setting, "r"),
        rel = setting.relation,
        over = laid_over(setting, alias),
    )
}

/// What a wish lays over the setting row: its key and origin (for a row the
/// server no longer holds), the wished columns, and, under if_unchanged,
/// the version the wish is based on.
fn laid_over(setting: &Declared, alias: &str) -> String {
    let mut members: Vec<String> = Vec::new();
    let single = setting.key_columns.len() == 1;
    for (i, column) in setting.key_columns.iter().enumerate() {
        let part = if single {
            format!("{alias}.\"key\"")
        } else {
            format!("split_part({alias}.\"key\", '|', {})", i + 1)
        };
        members.push(format!("{}, {part}", quote_literal(column)));
    }
    if let Some(origin) = setting
        .origin
        .as_ref()
        .filter(|o| !setting.key_columns.contains(o))
    {
        members.push(format!("{}, {alias}.\"replica\"", quote_literal(origin)));
    }
    let mut over = format!(
        "jsonb_build_object({}) || {alias}.\"wanted\"",
        members.join(", ")
    );
    if let Some(version) = &setting.version {
        over = format!(
            "{over} || CASE WHEN {alias}.\"based_on\" IS NULL THEN '{{}}'::jsonb \
             ELSE jsonb_build_object({}, {alias}.\"based_on\") END",
            quote_literal(version)
        );
    }
    over
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::fixtures::footers;
    use crate::catalog::wishes::wishes_table;

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

    #[test]
    fn a_wish_is_encoded_with_its_setting_row_and_the_wished_columns_laid_over() {
        let wishes = wishes_table(vec![footers()], 3);
        let sql = wish_sql(&wishes, "t");
        assert!(sql.starts_with("sync_internal.wish_bytes(t.\"id\", t.\"table_name\", t.\"key\", CASE t.\"table_name\" WHEN 'footers' THEN"), "{sql}");
        assert!(sql.contains("jsonb_populate_record(coalesce((SELECT h FROM \"shop\".\"footers\" AS h WHERE h.\"register_id\" = (t.\"key\")::uuid), NULL::\"shop\".\"footers\")"), "{sql}");
        assert!(
            sql.contains("jsonb_build_object('register_id', t.\"key\") || t.\"wanted\""),
            "{sql}"
        );
        assert!(
            sql.contains("jsonb_build_object('changed_at', t.\"based_on\")"),
            "{sql}"
        );
    }
}

//! The engine's table of wishes, `sync.sync_wishes` (sql/schema.sql), as
//! the relay and filing see it: a table written on both sides, which
//! replicas know as `sync_wishes`. The server owns each wish, the replica
//! its answer; its rows are assigned to the replica the setting row belongs
//! to, so a wish travels, is recorded, confirmed, taken back and
//! provisioned again as every row does (protocol A.6).
//!
//! It is no declaration of the user's: it joins the declared tables,
//! last, whenever a setting is declared, and carries the settings it
//! encodes wishes of (`Declared::wishes_of`).

use magic_sync_proto::key::KeyType;

use crate::catalog::table_sql::{key_matches, quote_literal, row_bytes};
use crate::catalog::{Declared, Mirror, Rule};

/// The name replicas know the table by.
pub const WISHES: &str = "sync_wishes";

/// The table, schema-qualified and quoted.
pub const RELATION: &str = "\"sync\".\"sync_wishes\"";

/// The columns a wish travels with (the row itself is encoded as the Wish
/// message: `wish_bytes`), and their types.
const COLUMNS: [(&str, &str); 13] = [
    ("id", "uuid"),
    ("replica", "uuid"),
    ("table_name", "text"),
    ("key", "text"),
    ("wanted", "jsonb"),
    ("based_on", "jsonb"),
    ("version", "bigint"),
    ("note", "text"),
    ("wished_at", "timestamp with time zone"),
    ("answered", "bigint"),
    ("outcome", "text"),
    ("reason", "text"),
    ("answered_at", "timestamp with time zone"),
];

/// The replica's answer: what it owns of a wish.
pub const ANSWER: [&str; 4] = ["answered", "outcome", "reason", "answered_at"];

/// Whether a declared table is the engine's table of wishes. No host table
/// takes a name beginning `sync_` (declare/resolve.rs refuses one).
pub fn is_wishes(table: &Declared) -> bool {
    table.name == WISHES
}

/// The declared tables, with the table of wishes last when any setting is
/// declared: its parts then come after every setting's in a message.
pub fn with_wishes(mut tables: Vec<Declared>) -> Vec<Declared> {
    let settings: Vec<Declared> = tables
        .iter()
        .filter(|t| t.mirror == Mirror::Setting)
        .cloned()
        .collect();
    if settings.is_empty() {
        return tables;
    }
    let position = tables.iter().map(|t| t.position).max().unwrap_or(0) + 1;
    tables.push(wishes_table(settings, position));
    tables
}

/// The declared tables with the table of wishes, whether or not a setting
/// is declared: what the note triggers are held against. Its triggers are
/// the extension's own (sql/wishes.sql), so a dump restored keeps them.
pub fn noted(mut tables: Vec<Declared>) -> Vec<Declared> {
    if !tables.iter().any(is_wishes) {
        let position = tables.iter().map(|t| t.position).max().unwrap_or(0) + 1;
        tables.push(wishes_table(Vec::new(), position));
    }
    tables
}

/// The table of wishes as a declared table of the settings `settings`.
pub fn wishes_table(settings: Vec<Declared>, position: i32) -> Declared {
    Declared {
        name: WISHES.to_owned(),
        relation: RELATION.to_owned(),
        mirror: Mirror::Both,
        rule: Rule::Assigned {
            column: "replica".to_owned(),
        },
        key_columns: vec!["id".to_owned()],
        key_types: vec![KeyType::Uuid],
        columns: COLUMNS.iter().map(|(c, _)| (*c).to_owned()).collect(),
        column_types: COLUMNS.iter().map(|(_, t)| (*t).to_owned()).collect(),
        replica_owned: ANSWER.iter().map(|c| (*c).to_owned()).collect(),
        // When the server filed an answer is its own, and no reason to send
        // the wish again.
        unmirrored: vec!["filed_at".to_owned()],
        install: true,
        indexes: true,
        position,
        wishes_of: settings,
        ..Declared::default()
    }
}

/// The bytes of the wish `alias` (a row of sync.sync_wishes) as they
/// travel: the Wish message (`sync_internal.wish_bytes`), its `wanted` the
/// setting row encoded as the setting's rows are.
pub fn wish_bytes(table: &Declared, alias: &str) -> String {
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
    use crate::catalog::table_sql::qualified;
    use crate::catalog::Apply;

    fn footers() -> Declared {
        Declared {
            name: "footers".into(),
            relation: qualified("shop", "footers"),
            mirror: Mirror::Setting,
            key_columns: vec!["register_id".into()],
            key_types: vec![KeyType::Uuid],
            columns: vec!["register_id".into(), "text".into(), "changed_at".into()],
            column_types: vec![
                "uuid".into(),
                "text".into(),
                "timestamp with time zone".into(),
            ],
            origin: Some("register_id".into()),
            version: Some("changed_at".into()),
            desired: vec!["text".into()],
            apply: Some(Apply::IfUnchanged),
            position: 2,
            ..Declared::default()
        }
    }

    #[test]
    fn the_table_of_wishes_joins_the_declared_tables_last_only_with_a_setting() {
        let catalog = Declared {
            name: "products".into(),
            mirror: Mirror::Catalog,
            position: 1,
            ..footers()
        };
        assert_eq!(with_wishes(vec![catalog.clone()]).len(), 1);
        let tables = with_wishes(vec![catalog, footers()]);
        let wishes = tables.last().unwrap();
        assert!(is_wishes(wishes));
        assert_eq!(wishes.position, 3);
        assert_eq!(wishes.mirror, Mirror::Both);
        assert_eq!(wishes.wishes_of, vec![footers()]);
        assert_eq!(wishes.replica_owned, ANSWER);
        // Its triggers are held against the database whether or not.
        assert_eq!(noted(vec![]).len(), 1);
        assert_eq!(noted(tables).len(), 3);
    }

    #[test]
    fn a_wish_is_encoded_with_its_setting_row_and_the_wished_columns_laid_over() {
        let wishes = wishes_table(vec![footers()], 3);
        let sql = wish_bytes(&wishes, "t");
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

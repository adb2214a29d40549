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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::fixtures::footers;

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
}

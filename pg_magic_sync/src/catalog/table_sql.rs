//! The SQL a declared table needs, written from its declaration: its
//! identifiers quoted, its key as text and the match of a key text against
//! its rows. Its rows as the bytes that travel are message/row/'s.
//!
//! Every identifier is quoted here, whatever it is: nothing a user named
//! reaches SQL unquoted.

use magic_sync_proto::key::KeyType;

use crate::catalog::Declared;

/// An identifier, quoted. Always quoted, so it is never read as a keyword or
/// folded to lower case.
pub fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// A string literal.
pub fn quote_literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// A relation, schema-qualified and quoted.
pub fn qualified(schema: &str, table: &str) -> String {
    format!("{}.{}", quote_ident(schema), quote_ident(table))
}

/// The key text of `columns` of `alias`, in the key text form: NULL when
/// any of them is NULL (a reference that points at nothing).
pub fn key_text_of(alias: &str, columns: &[String]) -> String {
    let parts: Vec<String> = columns
        .iter()
        .map(|c| format!("({alias}.{})::text", quote_ident(c)))
        .collect();
    match parts.as_slice() {
        [one] => one.clone(),
        _ => {
            let nulls: Vec<String> = columns
                .iter()
                .map(|c| format!("{alias}.{} IS NULL", quote_ident(c)))
                .collect();
            format!(
                "CASE WHEN {} THEN NULL ELSE concat_ws('|', {}) END",
                nulls.join(" OR "),
                parts.join(", ")
            )
        }
    }
}

/// A condition true when `columns` of `alias` hold the key text `key`,
/// written so an index on the columns serves it.
pub fn key_is(alias: &str, columns: &[String], types: &[KeyType], key: &str) -> String {
    let single = columns.len() == 1;
    columns
        .iter()
        .zip(types)
        .enumerate()
        .map(|(i, (column, ty))| {
            let part = if single {
                key.to_owned()
            } else {
                format!("split_part({key}, '|', {})", i + 1)
            };
            let cast = match ty {
                KeyType::Uuid => "uuid",
                KeyType::Integer => "bigint",
            };
            format!("{alias}.{} = ({part})::{cast}", quote_ident(column))
        })
        .collect::<Vec<_>>()
        .join(" AND ")
}

/// The key text of a declared table's rows.
pub fn key_of(table: &Declared, alias: &str) -> String {
    key_text_of(alias, &table.key_columns)
}

/// A condition true of the row of `alias` whose key text is `key`, written
/// so the table's primary key index serves it.
pub fn key_matches(table: &Declared, alias: &str, key: &str) -> String {
    key_is(alias, &table.key_columns, &table.key_types, key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::fixtures::{lines, products};

    #[test]
    fn identifiers_are_always_quoted() {
        assert_eq!(quote_ident("id"), "\"id\"");
        assert_eq!(quote_ident("we\"ird"), "\"we\"\"ird\"");
        assert_eq!(qualified("My Shop", "t"), "\"My Shop\".\"t\"");
        assert_eq!(quote_literal("it's"), "'it''s'");
    }

    #[test]
    fn a_key_of_one_column_matches_its_text() {
        assert_eq!(
            key_matches(&products(), "t", "k.key"),
            "t.\"id\" = (k.key)::uuid"
        );
    }

    #[test]
    fn a_key_of_several_columns_matches_its_parts() {
        assert_eq!(
            key_matches(&lines(), "t", "k.key"),
            "t.\"order_id\" = (split_part(k.key, '|', 1))::uuid AND \
             t.\"line\" = (split_part(k.key, '|', 2))::bigint"
        );
    }
}

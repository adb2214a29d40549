//! The SQL a declared table needs, written from its declaration: its key as
//! text, the match of a key text against its rows, and its rows as JSON.
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

/// One column's value as the JSON row conventions write it: a 64-bit
/// integer and a decimal as text, an instant in UTC to the microsecond.
fn json_value(alias: &str, column: &str, ty: &str) -> String {
    let col = format!("{alias}.{}", quote_ident(column));
    if ty == "bigint" || ty.starts_with("numeric") {
        format!("({col})::text")
    } else if ty == "timestamp with time zone" {
        instant_json(&col)
    } else {
        col
    }
}

/// A timestamptz as the JSON row conventions write it: RFC 3339 in UTC to
/// the microsecond; a year before Christ followed by ` BC`, and an
/// infinite one as `infinity` or `-infinity`, as PostgreSQL writes them, so
/// neither comes back as another value (to_char answers no era, and NULL
/// for an infinity).
fn instant_json(col: &str) -> String {
    format!(
        "CASE WHEN isfinite({col}) THEN \
         to_char({col} AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') \
         || CASE WHEN {col} < '0001-01-01 00:00:00+00' THEN ' BC' ELSE '' END \
         ELSE ({col})::text END"
    )
}

/// The row of `alias` as a JSON object of its columns (`json`).
pub fn row_json(table: &Declared, alias: &str) -> String {
    // json_build_object takes at most 100 arguments: 50 columns at a time.
    let chunks: Vec<String> = table
        .columns
        .iter()
        .zip(&table.column_types)
        .collect::<Vec<_>>()
        .chunks(50)
        .map(|chunk| {
            let args: Vec<String> = chunk
                .iter()
                .map(|(c, ty)| format!("{}, {}", quote_literal(c), json_value(alias, c, ty)))
                .collect();
            format!("json_build_object({})", args.join(", "))
        })
        .collect();
    match chunks.as_slice() {
        [] => "'{}'::json".to_owned(),
        [one] => one.clone(),
        many => many
            .iter()
            .map(|c| format!("({c})::jsonb"))
            .collect::<Vec<_>>()
            .join(" || "),
    }
}

/// The most values sync_internal.row_bytes takes: a function takes at most 100
/// arguments, and the names are one.
const ROW_BYTES_MOST: usize = 99;

/// The row of `alias` as the bytes that travel (`bytea`, UTF-8 JSON), as
/// `convert_to(row_json::text, 'UTF8')` writes it, by sync_internal.row_bytes
/// (relay/encode.rs), which writes most types itself: a
/// decimal is handed to it as text, any other column as `to_json` makes it.
pub fn row_bytes(table: &Declared, alias: &str) -> String {
    // A wish travels as the Wish message, not as a JSON row.
    if crate::catalog::wishes::is_wishes(table) {
        return crate::catalog::wishes::wish_bytes(table, alias);
    }
    if table.columns.len() > ROW_BYTES_MOST {
        return format!("convert_to(({})::text, 'UTF8')", row_json(table, alias));
    }
    let names: Vec<String> = table.columns.iter().map(|c| quote_literal(c)).collect();
    let values: Vec<String> = table
        .columns
        .iter()
        .zip(&table.column_types)
        .map(|(c, ty)| {
            let column = format!("{alias}.{}", quote_ident(c));
            if written_by_row_bytes(ty) {
                column
            } else if ty.starts_with("numeric") {
                json_value(alias, c, ty)
            } else {
                format!("to_json({column})")
            }
        })
        .collect();
    format!(
        "sync_internal.row_bytes(ARRAY[{}]::text[], {})",
        names.join(", "),
        values.join(", ")
    )
}

/// Whether sync_internal.row_bytes writes a column of this type (as `format_type`
/// names it) itself, as json_build_object would.
fn written_by_row_bytes(ty: &str) -> bool {
    matches!(
        ty,
        "text"
            | "uuid"
            | "smallint"
            | "integer"
            | "bigint"
            | "boolean"
            | "json"
            | "timestamp with time zone"
            | "character varying"
    ) || (ty.starts_with("character varying(") && ty.ends_with(')'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Mirror;

    fn products() -> Declared {
        Declared {
            name: "products".into(),
            relation: qualified("shop", "products"),
            mirror: Mirror::Catalog,
            key_columns: vec!["id".into()],
            key_types: vec![KeyType::Uuid],
            columns: vec!["id".into(), "price_cents".into(), "updated_at".into()],
            column_types: vec![
                "uuid".into(),
                "bigint".into(),
                "timestamp with time zone".into(),
            ],
            ..Declared::default()
        }
    }

    fn lines() -> Declared {
        Declared {
            key_columns: vec!["order_id".into(), "line".into()],
            key_types: vec![KeyType::Uuid, KeyType::Integer],
            ..products()
        }
    }

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

    #[test]
    fn a_row_is_json_with_64_bit_integers_as_text_and_instants_in_utc() {
        assert_eq!(
            row_json(&products(), "t"),
            "json_build_object('id', t.\"id\", 'price_cents', (t.\"price_cents\")::text, \
             'updated_at', CASE WHEN isfinite(t.\"updated_at\") THEN \
             to_char(t.\"updated_at\" AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') \
             || CASE WHEN t.\"updated_at\" < '0001-01-01 00:00:00+00' THEN ' BC' ELSE '' END \
             ELSE (t.\"updated_at\")::text END)"
        );
    }

    #[test]
    fn a_row_s_bytes_hand_row_bytes_only_the_types_it_writes() {
        let table = Declared {
            columns: vec![
                "id".into(),
                "price_cents".into(),
                "updated_at".into(),
                "tags".into(),
            ],
            column_types: vec![
                "uuid".into(),
                "bigint".into(),
                "timestamp with time zone".into(),
                "text[]".into(),
            ],
            ..products()
        };
        assert_eq!(
            row_bytes(&table, "t"),
            "sync_internal.row_bytes(ARRAY['id', 'price_cents', 'updated_at', 'tags']::text[], t.\"id\", \
             t.\"price_cents\", t.\"updated_at\", to_json(t.\"tags\"))"
        );
    }

    #[test]
    fn a_wide_row_is_built_fifty_columns_at_a_time() {
        let wide = Declared {
            columns: (0..120).map(|i| format!("c{i}")).collect(),
            column_types: vec!["text".into(); 120],
            ..products()
        };
        assert_eq!(
            row_json(&wide, "t").matches("json_build_object(").count(),
            3
        );
    }
}

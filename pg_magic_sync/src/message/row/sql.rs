//! A row's bytes as SQL writes them, from its table's declaration: the
//! expression a pass loads each row with (`row_bytes`), and the row as a
//! JSON object (`row_json`), which `row_bytes` writes the same bytes as.

use super::wish;
use super::Travel;
use crate::catalog::table_sql::{quote_ident, quote_literal};
use crate::catalog::Declared;

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
/// (encode.rs), which writes most types itself: a
/// decimal is handed to it as text, any other column as `to_json` makes it.
pub fn row_bytes(table: &Declared, alias: &str) -> String {
    if Travel::of(table) == Travel::AsWish {
        return wish::wish_sql(table, alias);
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
    use crate::catalog::fixtures::products;

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

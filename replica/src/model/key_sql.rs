//! A row's key in the key text form (protocol §3), written as SQL over its
//! stored columns: what the note triggers record, what a sweep compares
//! with the keys a snapshot named, and what a digest fingerprints.
//!
//! A UUID stored as 16 bytes reads as its lowercase hyphenated text; every
//! other value reads as its own text, so a key the engine stored reads back
//! exactly as it was sent, and one stored otherwise reads as text that does
//! not parse (which keeps it from ever going up under a wrong key).

use crate::model::shape::{ColumnKind, Shape};
use crate::sql::quote;

/// One key part's text, from a column reference such as `NEW."id"`.
pub(crate) fn part(kind: ColumnKind, column: &str) -> String {
    match kind {
        ColumnKind::Integer => format!("CAST({column} AS TEXT)"),
        _ => {
            let hex = format!("hex({column})");
            format!(
                "CASE WHEN typeof({column}) = 'blob' AND length({column}) = 16 THEN \
                 lower(substr({hex}, 1, 8) || '-' || substr({hex}, 9, 4) || '-' || \
                 substr({hex}, 13, 4) || '-' || substr({hex}, 17, 4) || '-' || \
                 substr({hex}, 21, 12)) ELSE CAST({column} AS TEXT) END"
            )
        }
    }
}

/// The whole key's text, its parts joined by `|`; `alias` qualifies the
/// columns (`NEW`, `OLD`, a table alias) or is empty.
pub(crate) fn key(shape: &Shape, alias: &str) -> String {
    shape
        .key
        .iter()
        .map(|&i| column_text(shape, i, alias))
        .collect::<Vec<_>>()
        .join(" || '|' || ")
}

/// One column's text as a key part (NULL reads as the empty text).
pub(crate) fn column_text(shape: &Shape, index: usize, alias: &str) -> String {
    let column = &shape.columns[index];
    let reference = if alias.is_empty() {
        quote(&column.name)
    } else {
        format!("{alias}.{}", quote(&column.name))
    };
    format!("coalesce({}, '')", part(column.kind, &reference))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::Connection;

    #[test]
    fn a_uuid_of_16_bytes_reads_lowercase_and_hyphenated() {
        let conn = Connection::open_in_memory().unwrap();
        let sql = format!(
            "SELECT {}, {}",
            part(ColumnKind::Blob, "x'0196A1B2C3D47E5F8A9B0C1D2E3F4A5B'"),
            part(ColumnKind::Integer, "42")
        );
        let (uuid, int): (String, String) = conn
            .query_row(&sql, [], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap();
        assert_eq!(uuid, "0196a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b");
        assert_eq!(int, "42");
    }
}

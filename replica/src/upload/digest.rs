//! Digests (protocol §8): what the replica holds of every table the server
//! sends it, and of its settings, as a count and an FNV-1a fingerprint.
//!
//! A table the replica wrote rows of that the server has not filed (it has
//! notes) is left out: what the server records of it is about to change.
//! Digests are read inside the transaction that builds the Up, which holds
//! the write lock, so no write can land between reading them and the rows
//! the same Up carries.

use magic_sync_proto::digest::{setting_line, Fingerprint};
use magic_sync_proto::wire::Digest;
use rusqlite::Connection;

use crate::model::key_sql;
use crate::model::shape::{ColumnKind, Shape};
use crate::sql::quote;
use crate::Mirror;

/// The digests of every table the server sends and every setting, but
/// those with unfiled writes.
pub(crate) fn read(conn: &Connection, shapes: &[Shape]) -> rusqlite::Result<Vec<Digest>> {
    let mut digests = Vec::new();
    for shape in shapes {
        let counted = shape.mirror.goes_down() || shape.mirror == Mirror::Setting;
        if !counted || has_unfiled_writes(conn, &shape.name)? {
            continue;
        }
        let mut lines = lines(conn, shape)?;
        lines.sort_unstable_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
        let mut fingerprint = Fingerprint::new();
        for line in &lines {
            fingerprint.add_line(line);
        }
        digests.push(Digest {
            table: shape.name.clone(),
            count: lines.len() as u64,
            fingerprint: fingerprint.value(),
        });
    }
    Ok(digests)
}

fn has_unfiled_writes(conn: &Connection, table: &str) -> rusqlite::Result<bool> {
    conn.prepare_cached("SELECT EXISTS (SELECT 1 FROM sync_notes WHERE table_name = ?1)")?
        .query_row([table], |row| row.get(0))
}

/// One line per row held: its key (leaving out rows retired and rows
/// rejected); a setting's, its key, a tab and its version.
fn lines(conn: &Connection, shape: &Shape) -> rusqlite::Result<Vec<String>> {
    let key = key_sql::key(shape, "t");
    let mut filters = vec![format!(
        "{key} NOT IN (SELECT key FROM sync_rejections WHERE table_name = ?1 AND holds_copy = 1)"
    )];
    if let Some(r) = shape.retired {
        filters.push(format!("t.{} IS NULL", quote(&shape.columns[r].name)));
    }
    let version = match (shape.mirror, shape.version) {
        (Mirror::Setting, Some(v)) => format!("t.{}", quote(&shape.columns[v].name)),
        _ => "NULL".to_owned(),
    };
    let sql = format!(
        "SELECT {key}, {version} FROM {} t WHERE {}",
        quote(&shape.name),
        filters.join(" AND ")
    );
    let kind = shape.version.map(|v| shape.columns[v].kind);
    let mut statement = conn.prepare(&sql)?;
    let mut rows = statement.query([&shape.name])?;
    let mut lines = Vec::new();
    while let Some(row) = rows.next()? {
        let key: String = row.get(0)?;
        lines.push(match shape.mirror {
            Mirror::Setting => setting_line(&key, &version_text(kind, row.get_ref(1)?)),
            _ => key,
        });
    }
    Ok(lines)
}

/// A version as text (protocol §4.5): an integer in decimal; an instant in
/// UTC, RFC 3339, truncated to the microsecond with six digits and `Z`.
pub(crate) fn version_text(
    kind: Option<ColumnKind>,
    value: rusqlite::types::ValueRef<'_>,
) -> String {
    use rusqlite::types::ValueRef;
    match value {
        ValueRef::Null => String::new(),
        ValueRef::Integer(i) => i.to_string(),
        ValueRef::Real(r) if kind == Some(ColumnKind::Integer) => (r as i64).to_string(),
        ValueRef::Real(r) => r.to_string(),
        ValueRef::Text(t) => {
            let text = String::from_utf8_lossy(t);
            match chrono::DateTime::parse_from_rfc3339(&text) {
                Ok(instant) => {
                    magic_sync_proto::json::instant_text(&instant.with_timezone(&chrono::Utc))
                }
                Err(_) => text.into_owned(),
            }
        }
        ValueRef::Blob(b) => crate::model::value::hex(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::types::ValueRef;

    #[test]
    fn a_version_is_text_as_the_protocol_compares_it() {
        assert_eq!(
            version_text(Some(ColumnKind::Integer), ValueRef::Integer(7)),
            "7"
        );
        assert_eq!(
            version_text(
                Some(ColumnKind::Text),
                ValueRef::Text(b"2026-10-12T12:00:00.1234567+02:00")
            ),
            "2026-10-12T10:00:00.123456Z"
        );
    }
}

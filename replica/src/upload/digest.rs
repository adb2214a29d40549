//! Digests (protocol §8): what the replica holds of every table the server
//! sends it, and of its settings, as a count and an FNV-1a fingerprint.
//!
//! A table the replica wrote rows of that the server has not filed (it has
//! notes) is left out: what the server records of it is about to change.
//! Digests are read inside the transaction that builds the Up, which holds
//! the write lock, so no write can land between reading them and the rows
//! the same Up carries.

use magic_sync_proto::digest::{setting_line, wish_line, Fingerprint};
use magic_sync_proto::wire::Digest;
use rusqlite::Connection;

use crate::model::declare::Mirror;
use crate::model::key_sql;
use crate::model::row_json::version_text;
use crate::model::shape::Shape;
use crate::sql::quote;

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
/// rejected); a setting's, its key, a tab and its version; a wish's, its
/// key, a tab, the version it answered and its outcome, a tab each.
fn lines(conn: &Connection, shape: &Shape) -> rusqlite::Result<Vec<String>> {
    if shape.wishes {
        return wish_lines(conn);
    }
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

/// Each wish held, not retired nor rejected: answered (its answer is of
/// the version it holds) or not.
fn wish_lines(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    let mut statement = conn.prepare_cached(
        "SELECT id, answered = version AND outcome <> '', answered, outcome FROM sync_wishes
         WHERE retired_at IS NULL AND id NOT IN
             (SELECT key FROM sync_rejections WHERE table_name = 'sync_wishes' AND holds_copy = 1)",
    )?;
    let mut rows = statement.query([])?;
    let mut lines = Vec::new();
    while let Some(row) = rows.next()? {
        let id: String = row.get(0)?;
        let answered: bool = row.get(1)?;
        let version: i64 = row.get(2)?;
        let outcome: String = row.get(3)?;
        let version = version.to_string();
        lines.push(wish_line(
            &id,
            answered.then_some((version.as_str(), outcome.as_str())),
        ));
    }
    Ok(lines)
}

//! The notes of the replica's own writes (protocol §7), kept in
//! `sync_notes`: the triggers write most of them; the engine writes those
//! a snapshot asks for (settings noted again as it begins, and recorded
//! keys of settings the replica no longer holds, noted as its deletes), and
//! forgets the ones an upload carried once the server filed it (§4.4).

use rusqlite::{params, Connection};

use crate::engine::triggers::literal;
use crate::model::declare::Mirror;
use crate::model::key_sql;
use crate::model::shape::Shape;
use crate::sql::quote;

/// Notes one row, as a trigger does; `restated` marks it to go up
/// re-stated until filed.
pub(crate) fn note(
    conn: &Connection,
    table: &str,
    key: &str,
    restated: bool,
) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT INTO sync_notes (table_name, key, restated) VALUES (?1, ?2, ?3)
         ON CONFLICT (table_name, key) DO UPDATE
         SET writes = writes + 1, pending = 1, restated = max(restated, excluded.restated)",
    )?
    .execute(params![table, key, restated])?;
    Ok(())
}

/// Whether the replica wrote this row and the server has not filed it.
pub(crate) fn noted(conn: &Connection, table: &str, key: &str) -> rusqlite::Result<bool> {
    conn.prepare_cached(
        "SELECT EXISTS (SELECT 1 FROM sync_notes WHERE table_name = ?1 AND key = ?2)",
    )?
    .query_row(params![table, key], |row| row.get(0))
}

/// As a snapshot begins: every row of every setting, and every answer to
/// a wish held, is noted again, to go up re-stated, so that what the
/// server records of them is set straight by what the replica holds now.
pub(crate) fn restate_settings(conn: &Connection, shapes: &[Shape]) -> rusqlite::Result<()> {
    if shapes.iter().any(|s| s.wishes) {
        conn.execute(
            "INSERT INTO sync_notes (table_name, key, restated)
             SELECT 'sync_wishes', id, 1 FROM sync_wishes WHERE answered <> 0
             ON CONFLICT (table_name, key) DO UPDATE
             SET writes = writes + 1, pending = 1, restated = 1",
            [],
        )?;
    }
    for shape in shapes.iter().filter(|s| s.mirror == Mirror::Setting) {
        conn.execute(
            &format!(
                "INSERT INTO sync_notes (table_name, key, restated)
                 SELECT {}, {}, 1 FROM {} WHERE true
                 ON CONFLICT (table_name, key) DO UPDATE
                 SET writes = writes + 1, pending = 1, restated = 1",
                literal(&shape.name),
                key_sql::key(shape, ""),
                quote(&shape.name)
            ),
            [],
        )?;
    }
    Ok(())
}

/// The server filed these uploads: the notes whose latest send carried one
/// of them are forgotten — but a row written since that send still goes
/// up (as a plain write: its re-statement was filed).
pub(crate) fn filed(conn: &Connection, uploads: &[u64]) -> rusqlite::Result<usize> {
    let mut forget =
        conn.prepare_cached("DELETE FROM sync_notes WHERE upload = ?1 AND writes = sent_writes")?;
    let mut written_since =
        conn.prepare_cached("UPDATE sync_notes SET upload = NULL, restated = 0 WHERE upload = ?1")?;
    let mut done = conn.prepare_cached("DELETE FROM sync_uploads WHERE number = ?1")?;
    let mut forgotten = 0;
    for &upload in uploads {
        // Numbers above 2^63 - 1 are none the replica draws.
        let Ok(number) = i64::try_from(upload) else {
            continue;
        };
        forgotten += forget.execute([number])?;
        written_since.execute([number])?;
        done.execute([number])?;
    }
    Ok(forgotten)
}

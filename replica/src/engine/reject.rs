//! Rows the replica could not take or let go of (protocol §6), kept in
//! `sync_rejections` until the replica takes the row or lets go of it, and
//! reported to the server in an Up.

use magic_sync_proto::wire;
use rusqlite::{params, Connection};

use crate::engine::state::epoch_spelt;

/// The most of a reason kept and sent.
pub(crate) const REASON_BYTES: usize = 512;

/// A reason cut to 512 bytes, at a character boundary.
pub(crate) fn cut(reason: &str) -> String {
    if reason.len() <= REASON_BYTES {
        return reason.to_owned();
    }
    let mut end = REASON_BYTES;
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    reason[..end].to_owned()
}

/// One rejection to keep, recorded in the transaction that left the row out.
pub(crate) struct NewRejection<'a> {
    pub table: &'a str,
    pub key: &'a str,
    pub reason: &'a str,
    pub epoch: &'a str,
    pub sequence: u64,
    pub holds_copy: bool,
    /// A row of the replica's own it holds back: nothing is at fault.
    pub held_back: bool,
}

/// Keeps a rejection; it replaces one of the same row, under a new id, so
/// that it is reported again. Its epoch is kept in one spelling, so that a
/// message of the same epoch spelt otherwise finds it (every comparison
/// below spells the epoch so too).
pub(crate) fn record(conn: &Connection, r: &NewRejection<'_>) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT OR REPLACE INTO sync_rejections
             (table_name, key, reason, epoch, sequence, holds_copy, held_back)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?
    .execute(params![
        r.table,
        r.key,
        cut(r.reason),
        epoch_spelt(r.epoch),
        r.sequence as i64,
        r.holds_copy,
        r.held_back
    ])?;
    Ok(())
}

/// The replica took the row, or let go of it: its rejection no longer holds.
pub(crate) fn forget(conn: &Connection, table: &str, key: &str) -> rusqlite::Result<()> {
    conn.prepare_cached("DELETE FROM sync_rejections WHERE table_name = ?1 AND key = ?2")?
        .execute(params![table, key])?;
    Ok(())
}

/// At a snapshot's end: the rejections of these tables recorded before the
/// snapshot began are forgotten, because the snapshot sent again all the
/// replica should hold of them.
pub(crate) fn forget_before_snapshot(
    conn: &Connection,
    table: &str,
    epoch: &str,
    began: u64,
) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "DELETE FROM sync_rejections
         WHERE table_name = ?1 AND (epoch <> ?2 OR sequence < ?3)",
    )?
    .execute(params![table, epoch_spelt(epoch), began as i64])?;
    Ok(())
}

/// At a snapshot's end: the rejections of tables the replica does not hold
/// from the server, recorded under another epoch. No snapshot names such a
/// table, and only the rejections of the epoch the replica follows are
/// reported.
pub(crate) fn forget_other_epochs(
    conn: &Connection,
    epoch: &str,
    held: impl Fn(&str) -> bool,
) -> rusqlite::Result<()> {
    let epoch = epoch_spelt(epoch);
    let tables: Vec<String> = conn
        .prepare("SELECT DISTINCT table_name FROM sync_rejections WHERE epoch <> ?1")?
        .query_map([&epoch], |row| row.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    for table in tables.iter().filter(|t| !held(t)) {
        conn.execute(
            "DELETE FROM sync_rejections WHERE table_name = ?1 AND epoch <> ?2",
            params![table, epoch],
        )?;
    }
    Ok(())
}

/// Rejections of this epoch no Up has carried yet, oldest first.
pub(crate) fn unreported(
    conn: &Connection,
    epoch: &str,
) -> rusqlite::Result<Vec<(i64, wire::Rejection)>> {
    let mut statement = conn.prepare_cached(
        "SELECT id, table_name, key, reason, epoch, sequence, held_back
         FROM sync_rejections WHERE reported = 0 AND epoch = ?1 ORDER BY id",
    )?;
    let rows = statement.query_map([epoch_spelt(epoch)], |row| {
        Ok((
            row.get(0)?,
            wire::Rejection {
                table: row.get(1)?,
                key: row.get(2)?,
                reason: row.get(3)?,
                epoch: row.get(4)?,
                sequence: row.get::<_, i64>(5)? as u64,
                held_back: row.get(6)?,
            },
        ))
    })?;
    rows.collect()
}

/// An Up carrying these rejections was taken by the transport. Those of
/// rows the replica holds no copy of are forgotten then: they leave nothing
/// out of a digest, so what is kept stays bounded by what is held.
pub(crate) fn reported(conn: &Connection, ids: &[i64]) -> rusqlite::Result<()> {
    let mut mark = conn.prepare_cached("UPDATE sync_rejections SET reported = 1 WHERE id = ?1")?;
    for id in ids {
        mark.execute([id])?;
    }
    conn.prepare_cached("DELETE FROM sync_rejections WHERE reported = 1 AND holds_copy = 0")?
        .execute([])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reason_is_cut_to_512_bytes_at_a_character() {
        let long = "é".repeat(300); // 600 bytes
        let cut = cut(&long);
        assert!(cut.len() <= REASON_BYTES);
        assert_eq!(cut.len(), 512);
        assert_eq!(super::cut("short"), "short");
    }
}

//! The replica's place in the server's chain of messages, kept in
//! `sync_state` so that it survives the program stopping.

use rusqlite::Connection;
use uuid::Uuid;

use crate::message::check::Head;

/// An epoch in the one spelling the engine keeps and compares it in where
/// it compares text (SQL): the UUID, lowercase and hyphenated. Epochs are
/// compared as UUIDs, so `0196A…` and `0196a…` are one epoch; text that is
/// no UUID is left as it is.
pub(crate) fn epoch_spelt(epoch: &str) -> String {
    match Uuid::try_parse(epoch) {
        Ok(uuid) => uuid.hyphenated().to_string(),
        Err(_) => epoch.to_owned(),
    }
}

/// One read of `sync_state`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct State {
    /// The last message applied, as it carried these.
    pub epoch: String,
    pub sequence: u64,
    pub nonce: u64,
    pub mac: Vec<u8>,
    /// The snapshot in progress: empty for none.
    pub snapshot: String,
    /// The sequence of the message that began it.
    pub snapshot_began: u64,
    /// The newest message the replica could not follow: 0 for no gap.
    pub gap: u64,
    /// Something new to tell the server while `news > said`.
    pub news: i64,
    pub said: i64,
    /// Whether any rejection is kept.
    pub rejections: bool,
}

impl State {
    pub(crate) fn has_gap(&self) -> bool {
        self.gap > 0
    }

    pub(crate) fn in_snapshot(&self) -> bool {
        !self.snapshot.is_empty()
    }
}

// Sequences and nonces are at most 2^63 - 1 (checked before any is kept),
// so they fit SQLite's signed integers.
fn stored(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

pub(crate) fn read(conn: &Connection) -> rusqlite::Result<State> {
    conn.prepare_cached(
        "SELECT epoch, sequence, nonce, mac, snapshot, snapshot_began, gap, news, said,
                EXISTS (SELECT 1 FROM sync_rejections)
         FROM sync_state WHERE id = 1",
    )?
    .query_row([], state)
}

fn state(row: &rusqlite::Row<'_>) -> rusqlite::Result<State> {
    Ok(State {
        epoch: row.get(0)?,
        sequence: row.get::<_, i64>(1)? as u64,
        nonce: row.get::<_, i64>(2)? as u64,
        mac: row.get(3)?,
        snapshot: row.get(4)?,
        snapshot_began: row.get::<_, i64>(5)? as u64,
        gap: row.get::<_, i64>(6)? as u64,
        news: row.get(7)?,
        said: row.get(8)?,
        rejections: row.get(9)?,
    })
}

/// The database's `schema_version`: it changes with any change of its
/// tables or triggers.
pub(crate) fn schema_version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.prepare_cached("PRAGMA schema_version")?
        .query_row([], |row| row.get(0))
}

/// Something new to say: the next Up says where the replica stands.
pub(crate) fn note_news(conn: &Connection) -> rusqlite::Result<()> {
    conn.prepare_cached("UPDATE sync_state SET news = news + 1 WHERE id = 1")?
        .execute([])?;
    Ok(())
}

/// A message that begins a snapshot: whatever snapshot was in progress is
/// forgotten, and so is the gap.
pub(crate) fn begin_snapshot(conn: &Connection, head: &Head<'_>) -> rusqlite::Result<()> {
    conn.execute("DELETE FROM sync_snapshot_keys", [])?;
    conn.execute(
        "UPDATE sync_state SET snapshot = ?1, snapshot_began = ?2, gap = 0 WHERE id = 1",
        rusqlite::params![head.snapshot_id, stored(head.sequence)],
    )?;
    Ok(())
}

/// The snapshot ended: nothing is in progress.
pub(crate) fn end_snapshot(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute("DELETE FROM sync_snapshot_keys", [])?;
    conn.execute(
        "UPDATE sync_state SET snapshot = '', snapshot_began = 0 WHERE id = 1",
        [],
    )?;
    Ok(())
}

/// The message was applied: keep its numbers exactly as it carried them.
/// The engine's writing is over (as `engine_writing(false)`).
pub(crate) fn applied(conn: &Connection, head: &Head<'_>) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "UPDATE sync_state SET epoch = ?1, sequence = ?2, nonce = ?3, mac = ?4, news = news + 1,
             writing = 0
         WHERE id = 1",
    )?
    .execute(rusqlite::params![
        head.epoch,
        stored(head.sequence),
        stored(head.nonce),
        head.mac
    ])?;
    Ok(())
}

/// A message the replica could not follow: keep the newest such sequence.
/// Returns whether the gap grew (then the server must hear of it at once).
pub(crate) fn widen_gap(conn: &Connection, sequence: u64) -> rusqlite::Result<bool> {
    let grew = conn
        .prepare_cached(
            "UPDATE sync_state SET gap = ?1, news = news + 1 WHERE id = 1 AND gap < ?1",
        )?
        .execute([stored(sequence)])?;
    Ok(grew > 0)
}

/// An Up carrying `news` was taken by the transport.
pub(crate) fn said(conn: &Connection, news: i64) -> rusqlite::Result<()> {
    conn.prepare_cached("UPDATE sync_state SET said = max(said, ?1) WHERE id = 1")?
        .execute([news])?;
    Ok(())
}

/// Marks the transaction as the engine's own (`true`) or not: the triggers
/// neither note nor refuse what the engine writes.
pub(crate) fn engine_writing(conn: &Connection, writing: bool) -> rusqlite::Result<()> {
    conn.prepare_cached("UPDATE sync_state SET writing = ?1 WHERE id = 1")?
        .execute([writing])?;
    Ok(())
}

/// The replica's own id as the database keeps it ('' until set).
pub(crate) fn me(conn: &Connection) -> rusqlite::Result<String> {
    conn.query_row("SELECT me FROM sync_state WHERE id = 1", [], |row| {
        row.get(0)
    })
}

/// Keeps the replica's id: from now on the triggers refuse what the
/// replica must not write.
pub(crate) fn set_me(conn: &Connection, me: &str) -> rusqlite::Result<()> {
    conn.execute("UPDATE sync_state SET me = ?1 WHERE id = 1", [me])?;
    Ok(())
}

/// Whether a retired row may be held somewhere.
pub(crate) fn retired_rows(conn: &Connection) -> rusqlite::Result<bool> {
    conn.prepare_cached("SELECT retired_rows FROM sync_state WHERE id = 1")?
        .query_row([], |row| row.get(0))
}

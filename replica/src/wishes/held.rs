//! The wishes the replica holds, as rows of `sync_wishes`: read one, list
//! those due, and write an answer.

use rusqlite::{params, Connection, OptionalExtension};

/// Wishes not retired that are not answered (their answer, if any, is of
/// another version), or answered waiting; in the order they came.
const DUE: &str = "SELECT id FROM sync_wishes
    WHERE retired_at IS NULL AND (answered <> version OR outcome IN ('', 'waiting'))
    ORDER BY rowid";

const ONE: &str = "SELECT id, table_name, key, wanted, version, note, answered, outcome, reason,
           retired_at IS NOT NULL
    FROM sync_wishes WHERE id = ?1";

const ANSWER: &str = "UPDATE sync_wishes
    SET answered = ?2, outcome = ?3, reason = ?4, answered_at = ?5 WHERE id = ?1";

/// One wish as the replica holds it.
#[derive(Clone, Debug)]
pub(crate) struct Held {
    pub id: String,
    pub table: String,
    pub key: String,
    pub wanted: Vec<u8>,
    pub version: u64,
    pub note: String,
    pub answered: u64,
    pub outcome: String,
    pub reason: String,
    pub retired: bool,
}

impl Held {
    /// Whether the answer held is of this wish.
    pub(crate) fn is_answered(&self) -> bool {
        self.answered == self.version && !self.outcome.is_empty()
    }

    /// Whether it is to be carried out: held, and not answered but
    /// waiting.
    pub(crate) fn is_due(&self) -> bool {
        !self.retired && (!self.is_answered() || self.outcome == "waiting")
    }

    /// Whether `other` is this very wish, still held: an answer to it is
    /// recorded only then.
    pub(crate) fn is_still(&self, other: &Held) -> bool {
        !other.retired && other.version == self.version
    }
}

/// The ids of the wishes due.
pub(crate) fn due(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    conn.prepare_cached(DUE)?
        .query_map([], |row| row.get(0))?
        .collect()
}

/// The wish with this id, as held now.
pub(crate) fn read(conn: &Connection, id: &str) -> rusqlite::Result<Option<Held>> {
    conn.prepare_cached(ONE)?
        .query_row([id], |row| {
            Ok(Held {
                id: row.get(0)?,
                table: row.get(1)?,
                key: row.get(2)?,
                wanted: row.get(3)?,
                version: row.get::<_, i64>(4)? as u64,
                note: row.get(5)?,
                answered: row.get::<_, i64>(6)? as u64,
                outcome: row.get(7)?,
                reason: row.get(8)?,
                retired: row.get(9)?,
            })
        })
        .optional()
}

/// Records an answer: the version answered, the outcome, why, and when.
/// Written as the replica's own edit of the columns it owns, which the
/// triggers note to go up.
pub(crate) fn write_answer(
    conn: &Connection,
    wish: &Held,
    outcome: &str,
    reason: &str,
    at: &str,
) -> rusqlite::Result<()> {
    conn.prepare_cached(ANSWER)?.execute(params![
        wish.id,
        wish.version as i64,
        outcome,
        reason,
        at
    ])?;
    Ok(())
}

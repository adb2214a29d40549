//! Small SQLite helpers: quoting names, transactions and savepoints, and
//! telling a row the database refuses from a database that fails.

use rusqlite::{Connection, ErrorCode};

/// A name quoted for SQL: `"name"`, with inner quotes doubled.
pub(crate) fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Whether an error is the database failing (unavailable, full, damaged,
/// locked), as opposed to the database refusing what it was asked to write.
/// Only the first fails a message; the second refuses one row.
pub(crate) fn is_storage_failure(error: &rusqlite::Error) -> bool {
    match error {
        rusqlite::Error::SqliteFailure(e, _) => matches!(
            e.code,
            ErrorCode::InternalMalfunction
                | ErrorCode::PermissionDenied
                | ErrorCode::DatabaseBusy
                | ErrorCode::DatabaseLocked
                | ErrorCode::OutOfMemory
                | ErrorCode::ReadOnly
                | ErrorCode::OperationInterrupted
                | ErrorCode::SystemIoFailure
                | ErrorCode::DatabaseCorrupt
                | ErrorCode::DiskFull
                | ErrorCode::CannotOpen
                | ErrorCode::FileLockingProtocolFailed
                | ErrorCode::NoLargeFileSupport
                | ErrorCode::NotADatabase
        ),
        // Anything that is not SQLite answering is this library misusing
        // rusqlite: never the row's fault.
        _ => true,
    }
}

/// What became of one write tried inside a savepoint.
pub(crate) enum Attempt<T> {
    Done(T),
    /// The database refused it; the savepoint undid whatever it had done.
    Refused(String),
}

/// Why a write could not even be refused cleanly.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The database failed: the message fails, unacknowledged.
    Storage(rusqlite::Error),
    /// The write ended the whole transaction (a trigger's RAISE(ROLLBACK)):
    /// the message must be applied again without that write.
    TransactionLost(String),
    /// A write with no savepoint of its own was refused: what it belongs
    /// to is applied again carefully.
    Careful,
}

impl From<rusqlite::Error> for Failure {
    fn from(error: rusqlite::Error) -> Failure {
        Failure::Storage(error)
    }
}

/// Runs `write` inside a savepoint, so that a refusal leaves everything as
/// it was before it.
pub(crate) fn attempt<T>(
    conn: &Connection,
    write: impl FnOnce() -> rusqlite::Result<T>,
) -> Result<Attempt<T>, Failure> {
    conn.execute_batch("SAVEPOINT sync_attempt")?;
    match write() {
        Ok(done) => {
            conn.execute_batch("RELEASE sync_attempt")?;
            Ok(Attempt::Done(done))
        }
        Err(error) if is_storage_failure(&error) => Err(Failure::Storage(error)),
        Err(error) if conn.is_autocommit() => Err(Failure::TransactionLost(error.to_string())),
        Err(error) => {
            conn.execute_batch("ROLLBACK TO sync_attempt; RELEASE sync_attempt")?;
            Ok(Attempt::Refused(error.to_string()))
        }
    }
}

/// A write transaction that rolls back unless committed.
pub(crate) struct Transaction<'c> {
    conn: &'c Connection,
}

impl<'c> Transaction<'c> {
    /// Takes the write lock at once, so that nothing read at the start
    /// changes before the commit.
    pub(crate) fn begin(conn: &'c Connection) -> rusqlite::Result<Transaction<'c>> {
        conn.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
        Ok(Transaction { conn })
    }

    /// Whether the transaction is still open (a trigger's RAISE(ROLLBACK)
    /// ends it from inside).
    pub(crate) fn is_open(&self) -> bool {
        !self.conn.is_autocommit()
    }

    /// Commits; on failure the transaction is rolled back by `drop`.
    pub(crate) fn commit(self) -> rusqlite::Result<()> {
        self.conn.prepare_cached("COMMIT")?.execute([])?;
        Ok(())
    }
}

impl Drop for Transaction<'_> {
    fn drop(&mut self) {
        if self.is_open() {
            if let Err(error) = self.conn.execute_batch("ROLLBACK") {
                log::warn!("rolling back failed: {error}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quoted_name_doubles_its_quotes() {
        assert_eq!(quote("a\"b"), "\"a\"\"b\"");
    }

    #[test]
    fn a_refused_write_is_undone_and_the_transaction_goes_on() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t (x INTEGER CHECK (x > 0))")
            .unwrap();
        let tx = Transaction::begin(&conn).unwrap();
        let first = attempt(&conn, || conn.execute("INSERT INTO t VALUES (1)", [])).unwrap();
        assert!(matches!(first, Attempt::Done(1)));
        let refused = attempt(&conn, || {
            conn.execute("INSERT INTO t VALUES (2)", [])?;
            conn.execute("INSERT INTO t VALUES (-1)", [])
        })
        .unwrap();
        assert!(matches!(refused, Attempt::Refused(_)));
        tx.commit().unwrap();
        let n: i64 = conn
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 1);
    }
}

//! The connection settings a replica cannot keep its word without: a
//! message it acknowledged must survive a power cut, a refused row must be
//! undone, and the note triggers must see what other triggers write.

use rusqlite::Connection;

use crate::error::Error;

pub(crate) fn check(conn: &Connection) -> Result<(), Error> {
    synchronous(conn)?;
    journal(conn)?;
    recursive_triggers(conn)
}

/// FULL (2) or EXTRA (3): below it, a commit the transport was told of may
/// be lost when the power goes.
fn synchronous(conn: &Connection) -> Result<(), Error> {
    let level: i64 = conn.query_row("PRAGMA synchronous", [], |row| row.get(0))?;
    if level >= 2 {
        return Ok(());
    }
    let name = match level {
        0 => "OFF",
        1 => "NORMAL",
        _ => "unknown",
    };
    Err(Error::Connection(format!(
        "PRAGMA synchronous is {name} ({level}); a replica needs FULL (2) or EXTRA (3), \
         so that a message it acknowledged is on disk"
    )))
}

/// A journal that can roll back: without one, a refused row cannot be
/// undone, nor a message half applied when the power goes.
fn journal(conn: &Connection) -> Result<(), Error> {
    let mode: String = conn.query_row("PRAGMA journal_mode", [], |row| row.get(0))?;
    let mode = mode.to_ascii_lowercase();
    let has_file: bool = conn.query_row(
        "SELECT coalesce(file, '') <> '' FROM pragma_database_list WHERE name = 'main'",
        [],
        |row| row.get(0),
    )?;
    let refused = match mode.as_str() {
        "off" => true,
        // A database in memory has nothing to lose on a crash.
        "memory" => has_file,
        _ => false,
    };
    if refused {
        return Err(Error::Connection(format!(
            "PRAGMA journal_mode is {}; a replica needs a journal that rolls back \
             on a crash (DELETE, TRUNCATE, PERSIST or WAL)",
            mode.to_ascii_uppercase()
        )));
    }
    Ok(())
}

/// The engine's triggers must fire for writes made by other triggers.
fn recursive_triggers(conn: &Connection) -> Result<(), Error> {
    let on: bool = conn.query_row("PRAGMA recursive_triggers", [], |row| row.get(0))?;
    if on {
        Ok(())
    } else {
        Err(Error::Connection(
            "PRAGMA recursive_triggers is OFF; a replica needs it ON".to_owned(),
        ))
    }
}

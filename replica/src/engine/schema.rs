//! The engine's own tables (every name begins `sync_`), created by
//! numbered steps: a database records the last step it took, and a later
//! build adds steps rather than editing one.

use rusqlite::{Connection, OptionalExtension};

use crate::engine::triggers;
use crate::error::Error;
use crate::model::declare::{Table, Tables};
use crate::model::shape;
use crate::sql::Transaction;

/// Each step brings the engine's tables from the version before it to its
/// own (the first, from nothing to 1).
const STEPS: &[&str] = &[
    include_str!("schema/001_skeleton.sql"),
    include_str!("schema/002_complete.sql"),
    include_str!("schema/003_snapshot_keys.sql"),
    WISHES_STEP,
];

/// The step that makes `sync_wishes`: also what the table's shape is read
/// from where a database lacks it (printing the triggers of a database
/// its program's migrations made).
pub(crate) const WISHES_STEP: &str = include_str!("schema/004_wishes.sql");

/// The version of the engine's tables this build works with.
pub const SCHEMA_VERSION: i64 = STEPS.len() as i64;

const VERSION_TABLE: &str = "CREATE TABLE IF NOT EXISTS sync_schema (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    version INTEGER NOT NULL
)";

/// Creates the engine's tables, or brings them up to this build's version,
/// and the triggers the declared tables need, in one transaction. Safe to
/// call on every start: what is there already is left as it is, and the
/// triggers are written again as this build needs them. The declared
/// tables are checked first, so a declaration that does not match the
/// database installs nothing.
pub fn install(conn: &mut Connection, tables: &Tables) -> Result<(), Error> {
    shape::read_declared(conn, tables)?;
    let tx = Transaction::begin(conn)?;
    conn.execute_batch(VERSION_TABLE)?;
    let found = installed_version(conn)?.unwrap_or(0);
    if found > SCHEMA_VERSION {
        return Err(later_build(found));
    }
    for (taken, step) in STEPS.iter().enumerate().skip(found as usize) {
        conn.execute_batch(step)?;
        log::info!("installed the engine's tables at version {}", taken + 1);
    }
    conn.execute(
        "INSERT INTO sync_schema (id, version) VALUES (1, ?1)
         ON CONFLICT (id) DO UPDATE SET version = excluded.version",
        [SCHEMA_VERSION],
    )?;
    // With the engine's tables in place, `sync_wishes` among them.
    let shapes = shape::read_all(conn, tables)?;
    triggers::replace(conn, &shapes)?;
    record_declarations(conn, tables, &[])?;
    tx.commit()?;
    Ok(())
}

/// Step `n` of the engine's tables as a migration of the host's own runs
/// it, for a program that keeps its database's schema in migrations rather
/// than calling `install`: the step (from version `n - 1` to `n`), then the
/// version recorded. Run the steps in order, each once; a later release
/// adds steps, never edits one (the changelog names each). Print the
/// triggers again (`triggers`) in the same migration: a release may write
/// them otherwise, and `Replica::open` refuses triggers that differ.
pub fn migration(n: i64) -> Result<String, Error> {
    let step = usize::try_from(n)
        .ok()
        .and_then(|n| n.checked_sub(1))
        .and_then(|i| STEPS.get(i))
        .ok_or_else(|| {
            Error::Schema(format!(
                "there is no step {n}: this build's steps are 1 to {SCHEMA_VERSION}"
            ))
        })?;
    Ok(format!(
        "{VERSION_TABLE};\n{step}\nINSERT INTO sync_schema (id, version) VALUES (1, {n}) \
         ON CONFLICT (id) DO UPDATE SET version = excluded.version;\n"
    ))
}

/// Keeps the declarations (and each table's lane) in the database, so a
/// tool can open the replica without the device program's code.
pub(crate) fn record_declarations(
    conn: &Connection,
    tables: &Tables,
    lanes: &[(String, String)],
) -> rusqlite::Result<()> {
    conn.execute("DELETE FROM sync_declarations", [])?;
    let mut insert = conn.prepare(
        "INSERT INTO sync_declarations (position, name, declaration, lane) VALUES (?1, ?2, ?3, ?4)",
    )?;
    for (position, table) in tables.iter().enumerate() {
        let lane = lanes
            .iter()
            .find(|(t, _)| t == &table.name)
            .map(|(_, lane)| lane.as_str())
            .unwrap_or("");
        insert.execute(rusqlite::params![
            position as i64,
            table.name,
            table.to_json().to_string(),
            lane
        ])?;
    }
    Ok(())
}

/// The declarations (and lanes) kept in the database, as the program that
/// installed or last opened it gave them.
pub(crate) fn recorded_declarations(
    conn: &Connection,
) -> Result<(Tables, Vec<(String, String)>), Error> {
    let mut statement =
        conn.prepare("SELECT declaration, name, lane FROM sync_declarations ORDER BY position")?;
    let rows: Vec<(String, String, String)> = statement
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))?
        .collect::<rusqlite::Result<_>>()?;
    let mut list = Vec::new();
    let mut lanes = Vec::new();
    for (json, name, lane) in rows {
        let value: serde_json::Value = serde_json::from_str(&json).map_err(|e| {
            Error::Schema(format!("the declaration of `{name}` does not read: {e}"))
        })?;
        list.push(Table::from_json(&value)?);
        if !lane.is_empty() {
            lanes.push((name, lane));
        }
    }
    Ok((Tables::new(list), lanes))
}

/// Refuses a database whose engine tables are not this build's.
pub(crate) fn check_installed(conn: &Connection) -> Result<(), Error> {
    let exists: bool = conn.query_row(
        "SELECT count(*) > 0 FROM sqlite_schema WHERE type = 'table' AND name = 'sync_schema'",
        [],
        |row| row.get(0),
    )?;
    let found = if exists {
        installed_version(conn)?
    } else {
        None
    };
    match found {
        Some(v) if v == SCHEMA_VERSION => Ok(()),
        Some(v) if v > SCHEMA_VERSION => Err(later_build(v)),
        Some(v) => Err(Error::Schema(format!(
            "they are at version {v} and this build needs {SCHEMA_VERSION}: call install first"
        ))),
        None => Err(Error::Schema(
            "they are not installed: call install first".to_owned(),
        )),
    }
}

fn installed_version(conn: &Connection) -> rusqlite::Result<Option<i64>> {
    conn.query_row("SELECT version FROM sync_schema WHERE id = 1", [], |row| {
        row.get(0)
    })
    .optional()
}

fn later_build(found: i64) -> Error {
    Error::Schema(format!(
        "they are at version {found}, made by a later build than this one \
         (version {SCHEMA_VERSION})"
    ))
}

//! The engine's triggers on the declared tables (protocol §7): they note
//! every write of a table that goes up, in the writing transaction, and
//! refuse the writes the replica must not make.
//!
//! Every trigger reads `sync_state`: `writing` is 1 only inside the
//! engine's own transactions (its writes are the server's, never noted nor
//! refused), and `me` is empty until a program opened the replica knowing
//! its id — until then nothing is refused (the device is being set up).
//!
//! So while the engine writes, every trigger of its own does nothing; when
//! the database's triggers are exactly the engine's, the engine sets them
//! aside on its own connection while only it writes through it (`Quiet`).

use std::cell::Cell;

use rusqlite::config::DbConfig;
use rusqlite::Connection;

use crate::error::Error;
use crate::model::declare::{Mirror, Tables};
use crate::model::key_sql;
use crate::model::shape::{self, Shape};
use crate::sql::quote;

/// One trigger: its name and the statement that creates it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Trigger {
    pub table: String,
    pub name: String,
    pub sql: String,
}

const ENGINE_IDLE: &str = "(SELECT writing = 0 FROM sync_state WHERE id = 1)";
const REFUSING: &str = "(SELECT writing = 0 AND me <> '' FROM sync_state WHERE id = 1)";

/// Every trigger the declared tables need, table by table.
pub(crate) fn expected(shapes: &[Shape]) -> Vec<Trigger> {
    shapes.iter().flat_map(for_table).collect()
}

fn for_table(shape: &Shape) -> Vec<Trigger> {
    let t = &shape.name;
    let mut triggers = Vec::new();
    let mut add = |what: &str, timing: &str, when: String, body: String| {
        let name = format!("sync_{t}_{what}");
        let sql = format!(
            "CREATE TRIGGER {} {timing} ON {}\nWHEN {when}\nBEGIN\n{body}\nEND",
            quote(&name),
            quote(t)
        );
        triggers.push(Trigger {
            table: t.clone(),
            name,
            sql,
        });
    };
    let refuse = |why: &str| {
        format!(
            "    SELECT RAISE(ABORT, {});",
            literal(&format!("magic_sync: {why}"))
        )
    };
    match shape.mirror {
        Mirror::Catalog => {
            for event in ["INSERT", "UPDATE", "DELETE"] {
                add(
                    &format!("refuse_{}", event.to_ascii_lowercase()),
                    &format!("BEFORE {event}"),
                    REFUSING.into(),
                    refuse(&format!(
                        "{t} is written by the server; the replica only holds a copy"
                    )),
                );
            }
        }
        Mirror::Both => {
            add(
                "refuse_insert",
                "BEFORE INSERT",
                REFUSING.into(),
                refuse(&format!("a row of {t} begins on the server")),
            );
            let not_owned: Vec<String> = (0..shape.columns.len())
                .filter(|i| !shape.owned.contains(i))
                .map(|i| changed(shape, i))
                .collect();
            if !not_owned.is_empty() {
                add(
                    "refuse_update",
                    "BEFORE UPDATE",
                    format!("{REFUSING} AND ({})", not_owned.join(" OR ")),
                    refuse(&format!(
                        "the replica writes only {} of {t}",
                        owned_names(shape)
                    )),
                );
            }
            let own_row = match shape.origin {
                Some(origin) => format!(
                    " AND {} <> (SELECT me FROM sync_state WHERE id = 1)",
                    key_sql::column_text(shape, origin, "OLD")
                ),
                None => String::new(),
            };
            add(
                "refuse_delete",
                "BEFORE DELETE",
                format!("{REFUSING}{own_row}"),
                refuse(&format!("the replica deletes no row of {t} but its own")),
            );
            let owned_changed: Vec<String> =
                shape.owned.iter().map(|&i| changed(shape, i)).collect();
            add(
                "note_update",
                "AFTER UPDATE",
                format!("{REFUSING} AND ({})", owned_changed.join(" OR ")),
                note(shape, "NEW"),
            );
            add(
                "note_delete",
                "AFTER DELETE",
                REFUSING.into(),
                note(shape, "OLD"),
            );
        }
        Mirror::Record | Mirror::Setting => {
            if shape.history {
                add(
                    "refuse_update",
                    "BEFORE UPDATE",
                    REFUSING.into(),
                    refuse(&format!("{t} is history: a row is written once")),
                );
            } else if let Some(created) = shape.created {
                let column = &shape.columns[created].name;
                add(
                    "refuse_update",
                    "BEFORE UPDATE",
                    format!("{REFUSING} AND {}", changed(shape, created)),
                    refuse(&format!("{column} of {t} is written once")),
                );
            }
            add(
                "note_insert",
                "AFTER INSERT",
                ENGINE_IDLE.into(),
                note(shape, "NEW"),
            );
            let old_key = key_sql::key(shape, "OLD");
            let new_key = key_sql::key(shape, "NEW");
            add(
                "note_update",
                "AFTER UPDATE",
                ENGINE_IDLE.into(),
                format!(
                    "{}\n{}",
                    note(shape, "NEW"),
                    note_where(shape, &old_key, &format!("{old_key} <> {new_key}"))
                ),
            );
            add(
                "note_delete",
                "AFTER DELETE",
                ENGINE_IDLE.into(),
                note(shape, "OLD"),
            );
        }
    }
    triggers
}

fn changed(shape: &Shape, column: usize) -> String {
    let name = quote(&shape.columns[column].name);
    format!("NEW.{name} IS NOT OLD.{name}")
}

fn owned_names(shape: &Shape) -> String {
    shape
        .owned
        .iter()
        .map(|&i| shape.columns[i].name.clone())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Notes the row `NEW` or `OLD` names: one note per row, counting writes.
fn note(shape: &Shape, row: &str) -> String {
    let key = key_sql::key(shape, row);
    format!(
        "    INSERT INTO sync_notes (table_name, key) VALUES ({}, {key})\n    \
         ON CONFLICT (table_name, key) DO UPDATE SET writes = writes + 1, pending = 1;",
        literal(&shape.name)
    )
}

fn note_where(shape: &Shape, key: &str, condition: &str) -> String {
    format!(
        "    INSERT INTO sync_notes (table_name, key) SELECT {}, {key} WHERE {condition}\n    \
         ON CONFLICT (table_name, key) DO UPDATE SET writes = writes + 1, pending = 1;",
        literal(&shape.name)
    )
}

/// A text literal for SQL.
pub(crate) fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// Every trigger the declared tables need, as a script to paste into the
/// device's own migrations (after the tables are created). The triggers
/// depend on each table's columns and key types, read from `conn`: a
/// database the same migrations built.
pub fn triggers(conn: &Connection, tables: &Tables) -> Result<String, Error> {
    let mut shapes = shape::read_declared(conn, tables)?;
    if tables.has_settings() {
        shapes.push(wishes_shape(conn)?);
    }
    Ok(script(&expected(&shapes)))
}

/// The shape of `sync_wishes`: as the database has it, or, in one the
/// engine did not install yet, as the step that makes it makes it.
fn wishes_shape(conn: &Connection) -> Result<Shape, Error> {
    let exists: bool = conn.query_row(
        "SELECT count(*) > 0 FROM sqlite_schema WHERE type = 'table' AND name = ?1",
        [crate::model::declare::WISHES],
        |row| row.get(0),
    )?;
    if exists {
        return shape::read_wishes(conn);
    }
    let made = Connection::open_in_memory()?;
    made.execute_batch(crate::engine::schema::WISHES_STEP)?;
    shape::read_wishes(&made)
}

fn script(triggers: &[Trigger]) -> String {
    triggers
        .iter()
        .map(|t| format!("{};\n", t.sql))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Refuses a database whose engine triggers (every trigger named `sync_…`)
/// are not exactly the ones the declared tables need: a missing one, one
/// written otherwise, or one the declarations do not call for. The error
/// names each table and prints the trigger it needs.
pub fn check(conn: &Connection, tables: &Tables) -> Result<(), Error> {
    let shapes = shape::read_all(conn, tables)?;
    check_shapes(conn, &shapes)
}

pub(crate) fn check_shapes(conn: &Connection, shapes: &[Shape]) -> Result<(), Error> {
    let found = installed(conn)?;
    let expected = expected(shapes);
    let mut problems = Vec::new();
    for trigger in &expected {
        match found.iter().find(|(name, _, _)| name == &trigger.name) {
            None => problems.push(format!(
                "table `{}` lacks the trigger {}; it needs:\n{};",
                trigger.table, trigger.name, trigger.sql
            )),
            Some((_, _, sql)) if squeeze(sql) != squeeze(&trigger.sql) => problems.push(format!(
                "table `{}` has the trigger {} written otherwise; it needs:\n{};",
                trigger.table, trigger.name, trigger.sql
            )),
            Some(_) => {}
        }
    }
    for (name, table, _) in &found {
        if !expected.iter().any(|t| &t.name == name) {
            problems.push(format!(
                "table `{table}` has the trigger {name}, which its declaration does not call for: \
                 DROP TRIGGER {};",
                quote(name)
            ));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(Error::Triggers(problems.join("\n\n")))
    }
}

/// Replaces the engine's triggers with the ones the declarations need
/// (inside `install`'s transaction).
pub(crate) fn replace(conn: &Connection, shapes: &[Shape]) -> rusqlite::Result<()> {
    for (name, _, _) in installed(conn)? {
        conn.execute_batch(&format!("DROP TRIGGER {}", quote(&name)))?;
    }
    for trigger in expected(shapes) {
        conn.execute_batch(&trigger.sql)?;
    }
    Ok(())
}

/// The engine's triggers in the database: name, table, statement.
fn installed(conn: &Connection) -> rusqlite::Result<Vec<(String, String, String)>> {
    conn.prepare(
        "SELECT name, tbl_name, coalesce(sql, '') FROM sqlite_schema
         WHERE type = 'trigger' AND name LIKE 'sync\\_%' ESCAPE '\\' ORDER BY name",
    )?
    .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))?
    .collect()
}

/// The database's triggers, set aside on the engine's own connection while
/// only the engine writes through it.
///
/// Every trigger of the engine's reads `writing = 0` in its WHEN: none does
/// anything while the engine writes. SQLite would still run each one for
/// every row to find that out. So, when every trigger of the database is
/// the engine's, written as it needs it (TEMP triggers, which SQLite runs
/// all the same, aside), the engine sets them aside on its connection
/// (`SQLITE_DBCONFIG_ENABLE_TRIGGER`) for its own transactions: nothing
/// changes but the time taken. They stay aside from one message to the next
/// — setting them aside or back makes SQLite prepare every statement of the
/// connection again — and run again before the program can write through
/// the connection (`Replica::connection`, `into_connection`): the program
/// reaches it no other way. Every other connection runs them all, always.
#[derive(Debug, Default)]
pub(crate) struct Quiet {
    /// At which `schema_version` the database's triggers were last read,
    /// and whether they were all the engine's then.
    found: Cell<Option<(i64, bool)>>,
    /// Whether the engine set them aside, and has not run them again yet.
    aside: Cell<bool>,
}

impl Quiet {
    /// Inside one of the engine's transactions, once `writing` is set:
    /// sets the triggers aside when `wanted` (or leaves them aside) while
    /// every trigger of the database is one of the engine's; otherwise
    /// runs them. Answers whether they are aside. A program that set
    /// triggers aside on the connection itself is left to it.
    pub(crate) fn settle(
        &self,
        conn: &Connection,
        shapes: &[Shape],
        wanted: bool,
    ) -> rusqlite::Result<bool> {
        if !self.aside.get()
            && (!wanted || !conn.db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_TRIGGER)?)
        {
            return Ok(false);
        }
        // Any change of a table or trigger, by any connection, changes it.
        let version = crate::engine::state::schema_version(conn)?;
        let only_the_engines = match self.found.get() {
            Some((at, verdict)) if at == version => verdict,
            _ => {
                let verdict = only_the_engines(conn, shapes)?;
                self.found.set(Some((version, verdict)));
                verdict
            }
        };
        if !only_the_engines {
            self.run(conn)?;
            return Ok(false);
        }
        if !self.aside.get() {
            conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_TRIGGER, false)?;
            self.aside.set(true);
        }
        Ok(true)
    }

    /// Runs the triggers again, if the engine set them aside: before the
    /// program may write through the connection.
    pub(crate) fn run(&self, conn: &Connection) -> rusqlite::Result<()> {
        if self.aside.get() {
            conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_TRIGGER, true)?;
            self.aside.set(false);
        }
        Ok(())
    }
}

/// Whether every trigger of the database (but TEMP ones) is one the
/// declared tables need, written as they need it: each does nothing while
/// the engine writes (each one's WHEN reads `writing = 0`).
fn only_the_engines(conn: &Connection, shapes: &[Shape]) -> rusqlite::Result<bool> {
    let expected = expected(shapes);
    let mut statement =
        conn.prepare("SELECT name, coalesce(sql, '') FROM sqlite_schema WHERE type = 'trigger'")?;
    let mut rows = statement.query([])?;
    while let Some(row) = rows.next()? {
        let name: String = row.get(0)?;
        let sql: String = row.get(1)?;
        let the_engines = expected
            .iter()
            .any(|t| t.name == name && squeeze(&t.sql) == squeeze(&sql));
        if !the_engines {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Whitespace runs as one space: a trigger pasted with other indentation
/// is the same trigger.
fn squeeze(sql: &str) -> String {
    sql.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::declare::Table;

    /// What lets the engine set the triggers aside while it writes: each
    /// one of every kind of table does nothing while `writing` is set.
    #[test]
    fn every_trigger_of_the_engines_does_nothing_while_it_writes() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE TABLE c (id INTEGER PRIMARY KEY, v TEXT, retired_at TEXT);
             CREATE TABLE b (id BLOB PRIMARY KEY, register_id BLOB, v TEXT, mine INTEGER);
             CREATE TABLE h (id INTEGER PRIMARY KEY, register_id BLOB, v TEXT);
             CREATE TABLE r (id INTEGER PRIMARY KEY, register_id BLOB, v INTEGER, made TEXT);
             CREATE TABLE s (id INTEGER PRIMARY KEY, register_id BLOB, v INTEGER, text TEXT);",
        )
        .unwrap();
        // A setting's wishes are held in the engine's sync_wishes.
        conn.execute_batch(crate::engine::schema::WISHES_STEP)
            .unwrap();
        let tables = Tables::new(vec![
            Table::catalog("c").retired("retired_at"),
            Table::both("b")
                .replica_owned(&["mine"])
                .origin("register_id"),
            Table::record("h").origin("register_id"),
            Table::record("r")
                .origin("register_id")
                .version("v")
                .created("made"),
            Table::setting("s")
                .origin("register_id")
                .version("v")
                .desired(&["text"]),
        ]);
        let shapes = shape::read_all(&conn, &tables).unwrap();
        let all = expected(&shapes);
        assert!(all.len() > 15, "{}", all.len());
        assert!(all.iter().any(|t| t.table == "sync_wishes"));
        for trigger in all {
            let when = trigger
                .sql
                .split_once("\nWHEN ")
                .and_then(|(_, rest)| rest.split_once("\nBEGIN"))
                .map(|(when, _)| when)
                .unwrap_or_else(|| panic!("no WHEN: {}", trigger.sql));
            let rest = when
                .strip_prefix(ENGINE_IDLE)
                .or_else(|| when.strip_prefix(REFUSING))
                .unwrap_or_else(|| panic!("{} runs while the engine writes", trigger.name));
            // Only more conditions, each within its own: nothing that could
            // hold however `writing` is.
            let more = rest.strip_prefix(" AND ").unwrap_or(rest);
            assert!(
                rest.is_empty()
                    || (rest.starts_with(" AND ")
                        && (!more.contains(" OR ")
                            || (more.starts_with('(') && more.ends_with(')')))),
                "{}: {when}",
                trigger.name
            );
        }
        assert!(ENGINE_IDLE.contains("writing = 0") && REFUSING.contains("writing = 0"));
    }
}

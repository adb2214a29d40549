//! Letting go of rows: a part's deletes, and a snapshot's sweep (protocol
//! §4.1, §4.3).
//!
//! A row that a row staying for the replica points at — a row of its own
//! (any table the server does not write), or a retired row — is retired
//! instead of deleted, and so, in turn, are the doomed rows a retired one
//! points at. So is a row of a two-way table whose edit the server has not
//! filed. Every other row is deleted together, in one statement, so rows
//! that point only at one another go whatever the order of their keys;
//! when the database refuses that, one at a time, again while that lets one
//! more go, and those still refused are kept and rejected.

use rusqlite::types::Value as SqlValue;
use rusqlite::{params_from_iter, Connection};

use crate::engine::triggers::literal;
use crate::model::links::Link;
use crate::model::shape::Shape;
use crate::sql::{attempt, quote, Attempt, Failure};

/// A row to let go of: its key text, and the values its key columns match.
#[derive(Clone, Debug)]
pub(crate) struct Doomed {
    pub key: String,
    pub values: Vec<SqlValue>,
}

/// What became of one doomed row.
#[derive(Debug)]
pub(crate) enum Fate {
    Gone,
    /// Kept, marked retired: something of the replica's still points at it.
    Retired,
    /// Retired because the replica's edit of it is not filed yet.
    RetiredForEdit,
    Kept(String),
}

/// Why letting go stopped short.
pub(crate) enum Stop {
    Storage(rusqlite::Error),
    /// Letting go ended the transaction (a trigger's RAISE(ROLLBACK)):
    /// together (`None`), or of this one row.
    TransactionLost(Option<usize>, String),
}

impl From<rusqlite::Error> for Stop {
    fn from(e: rusqlite::Error) -> Stop {
        Stop::Storage(e)
    }
}

fn lost(row: Option<usize>, failure: Failure) -> Stop {
    match failure {
        Failure::Storage(e) => Stop::Storage(e),
        Failure::TransactionLost(why) => Stop::TransactionLost(row, why),
        Failure::Careful => unreachable!("every write here has a savepoint of its own"),
    }
}

/// What letting go needs to know of the database.
pub(crate) struct World<'a> {
    pub conn: &'a Connection,
    pub shapes: &'a [Shape],
    pub links: &'a [Link],
}

impl World<'_> {
    fn shape(&self, table: &str) -> Option<&Shape> {
        self.shapes
            .iter()
            .find(|s| s.name.eq_ignore_ascii_case(table))
    }
}

/// Lets go of these rows of one table: retired where something keeps
/// them, deleted together otherwise (one at a time if `one_at_a_time`).
pub(crate) fn let_go(
    world: &World<'_>,
    shape: &Shape,
    doomed: &[Doomed],
    one_at_a_time: bool,
) -> Result<Vec<Fate>, Stop> {
    if doomed.is_empty() {
        return Ok(Vec::new());
    }
    load(world.conn, shape, doomed)?;
    mark_held(world, shape)?;
    let held = read_held(world.conn, doomed.len())?;
    let mut fates: Vec<Option<Fate>> = held
        .iter()
        .map(|h| match h {
            0 => None,
            1 => Some(Fate::Retired),
            _ => Some(Fate::RetiredForEdit),
        })
        .collect();
    if held.iter().any(|&h| h > 0) {
        retire(world.conn, shape, doomed, &held, &mut fates)?;
    }
    let free: Vec<usize> = (0..doomed.len()).filter(|&i| fates[i].is_none()).collect();
    if !free.is_empty() {
        let together = !one_at_a_time
            && match attempt(world.conn, || delete_free(world.conn, shape))
                .map_err(|f| lost(None, f))?
            {
                Attempt::Done(()) => true,
                Attempt::Refused(why) => {
                    log::debug!(
                        "letting go of {} rows of {} together was refused ({why}): one at a time",
                        free.len(),
                        shape.name
                    );
                    false
                }
            };
        if together {
            for &i in &free {
                fates[i] = Some(Fate::Gone);
            }
        } else {
            let one_by_one = one_by_one(world.conn, shape, doomed, &free)?;
            for (i, fate) in free.into_iter().zip(one_by_one) {
                fates[i] = Some(fate);
            }
        }
    }
    world
        .conn
        .execute_batch("DROP TABLE IF EXISTS temp.sync_doomed")?;
    Ok(fates
        .into_iter()
        .map(|f| f.expect("every row decided"))
        .collect())
}

fn key_names(shape: &Shape) -> Vec<String> {
    (0..shape.key.len()).map(|i| format!("k{i}")).collect()
}

/// `("a", "b")` against `(d.k0, d.k1)`: a row of the table matched with a
/// doomed one.
fn matches_doomed(shape: &Shape, row: &str, doomed: &str) -> String {
    shape
        .key_columns()
        .zip(key_names(shape))
        .map(|(c, k)| format!("{row}.{} = {doomed}.{k}", quote(&c.name)))
        .collect::<Vec<_>>()
        .join(" AND ")
}

/// The doomed rows in a temporary table: their place, key values, key
/// text, and whether something holds them (0 no, 1 a row, 2 an edit).
fn load(conn: &Connection, shape: &Shape, doomed: &[Doomed]) -> rusqlite::Result<()> {
    let names = key_names(shape);
    conn.execute_batch(&format!(
        "DROP TABLE IF EXISTS temp.sync_doomed;
         CREATE TEMP TABLE sync_doomed (i INTEGER PRIMARY KEY, key TEXT, held INTEGER NOT NULL DEFAULT 0, {})",
        names.join(", ")
    ))?;
    let marks: Vec<String> = (3..3 + names.len()).map(|i| format!("?{i}")).collect();
    let mut insert = conn.prepare(&format!(
        "INSERT INTO temp.sync_doomed (i, key, {}) VALUES (?1, ?2, {})",
        names.join(", "),
        marks.join(", ")
    ))?;
    for (i, row) in doomed.iter().enumerate() {
        let mut values = vec![SqlValue::Integer(i as i64), SqlValue::Text(row.key.clone())];
        values.extend(row.values.iter().cloned());
        insert.execute(params_from_iter(values))?;
    }
    Ok(())
}

/// Marks the doomed rows something keeps: a row of the replica's own or a
/// retired row pointing at them (through any foreign key), in turn the
/// doomed rows a kept one points at, and two-way rows with unfiled edits.
fn mark_held(world: &World<'_>, shape: &Shape) -> rusqlite::Result<()> {
    let conn = world.conn;
    let table = quote(&shape.name);
    if shape.mirror == crate::model::declare::Mirror::Both {
        conn.execute(
            &format!(
                "UPDATE temp.sync_doomed AS d SET held = 2 WHERE EXISTS (
                     SELECT 1 FROM sync_notes n WHERE n.table_name = {} AND n.key = d.key)
                 AND EXISTS (SELECT 1 FROM {table} t WHERE {})",
                literal(&shape.name),
                matches_doomed(shape, "t", "d")
            ),
            [],
        )?;
    }
    let mut statements = Vec::new();
    for link in world
        .links
        .iter()
        .filter(|l| l.parent.eq_ignore_ascii_case(&shape.name))
    {
        let child = world.shape(&link.child);
        let same = link.child.eq_ignore_ascii_case(&shape.name);
        let keeper = match child {
            // Any table the server does not write is the replica's own.
            Some(c) if !c.mirror.goes_down() => "1".to_owned(),
            None => "1".to_owned(),
            Some(c) => {
                let retired = c
                    .retired
                    .map(|r| format!("c.{} IS NOT NULL", quote(&c.columns[r].name)));
                if same {
                    let in_doomed = |held: &str| {
                        format!(
                            "EXISTS (SELECT 1 FROM temp.sync_doomed e WHERE e.held {held} AND {})",
                            matches_doomed(shape, "c", "e")
                        )
                    };
                    match retired {
                        Some(r) => format!(
                            "(({r} AND NOT {}) OR {})",
                            in_doomed("= 0"),
                            in_doomed("> 0")
                        ),
                        None => in_doomed("> 0"),
                    }
                } else {
                    match retired {
                        Some(r) => r,
                        None => continue, // a live server row: the database decides
                    }
                }
            }
        };
        statements.push(format!(
            "UPDATE temp.sync_doomed AS d SET held = 1 WHERE held = 0 AND EXISTS (
                 SELECT 1 FROM {table} p JOIN {} c ON {}
                 WHERE {} AND {keeper})",
            quote(&link.child),
            link.joins("c", "p"),
            matches_doomed(shape, "p", "d"),
        ));
    }
    // Until no round holds one more: a kept row keeps the doomed rows it
    // points at.
    loop {
        let mut more = 0;
        for statement in &statements {
            more += conn.execute(statement, [])?;
        }
        if more == 0 {
            return Ok(());
        }
    }
}

fn read_held(conn: &Connection, n: usize) -> rusqlite::Result<Vec<i64>> {
    let mut held = vec![0; n];
    let mut statement = conn.prepare("SELECT i, held FROM temp.sync_doomed WHERE held > 0")?;
    let mut rows = statement.query([])?;
    while let Some(row) = rows.next()? {
        held[row.get::<_, i64>(0)? as usize] = row.get(1)?;
    }
    Ok(held)
}

/// Retires the held rows (those already retired keep their time); where
/// the table has nothing to retire by, they are kept and rejected.
fn retire(
    conn: &Connection,
    shape: &Shape,
    doomed: &[Doomed],
    held: &[i64],
    fates: &mut [Option<Fate>],
) -> Result<(), Stop> {
    let Some(retired) = shape.retired else {
        for (i, &h) in held.iter().enumerate() {
            if h > 0 {
                fates[i] = Some(Fate::Kept(if h == 1 {
                    format!(
                        "a row of the replica's own points at it, and {} has no retired column to keep it by",
                        shape.name
                    )
                } else {
                    format!(
                        "the replica's edit of it is not filed yet, and {} has no retired column to keep it by",
                        shape.name
                    )
                }));
            }
        }
        return Ok(());
    };
    let column = quote(&shape.columns[retired].name);
    let now = retired_value(shape.columns[retired].kind);
    let sql = format!(
        "UPDATE {} SET {column} = ?{} WHERE {} AND {column} IS NULL",
        quote(&shape.name),
        shape.key.len() + 1,
        shape.key_match()
    );
    for (i, &h) in held.iter().enumerate() {
        if h == 0 {
            continue;
        }
        let mut values = doomed[i].values.clone();
        values.push(now.clone());
        let done = attempt(conn, || {
            conn.prepare_cached(&sql)?
                .execute(params_from_iter(&values))
        })
        .map_err(|f| lost(Some(i), f))?;
        if let Attempt::Refused(why) = done {
            fates[i] = Some(Fate::Kept(format!(
                "the database refused to retire the row: {why}"
            )));
        }
    }
    conn.execute("UPDATE sync_state SET retired_rows = 1 WHERE id = 1", [])?;
    Ok(())
}

/// When a row was retired: an instant's text, or Unix seconds in an
/// integer column.
fn retired_value(kind: crate::model::shape::ColumnKind) -> SqlValue {
    let now = chrono::Utc::now();
    match kind {
        crate::model::shape::ColumnKind::Integer => SqlValue::Integer(now.timestamp()),
        crate::model::shape::ColumnKind::Real => SqlValue::Real(now.timestamp() as f64),
        _ => SqlValue::Text(magic_sync_proto::json::instant_text(&now)),
    }
}

fn delete_free(conn: &Connection, shape: &Shape) -> rusqlite::Result<()> {
    let names = key_names(shape);
    let target = if names.len() == 1 {
        shape.key_list()
    } else {
        format!("({})", shape.key_list())
    };
    conn.execute(
        &format!(
            "DELETE FROM {} WHERE {target} IN (SELECT {} FROM temp.sync_doomed WHERE held = 0)",
            quote(&shape.name),
            names.join(", ")
        ),
        [],
    )?;
    Ok(())
}

fn one_by_one(
    conn: &Connection,
    shape: &Shape,
    doomed: &[Doomed],
    which: &[usize],
) -> Result<Vec<Fate>, Stop> {
    let sql = format!(
        "DELETE FROM {} WHERE {}",
        quote(&shape.name),
        shape.key_match()
    );
    // Some(reason): still there. Try again while a pass lets one more go:
    // a row may be held only by another doomed row after it.
    let mut left: Vec<Option<String>> = vec![Some(String::new()); which.len()];
    let mut progress = true;
    while progress {
        progress = false;
        for (n, &i) in which.iter().enumerate() {
            if left[n].is_none() {
                continue;
            }
            let done = attempt(conn, || {
                conn.prepare_cached(&sql)?
                    .execute(params_from_iter(&doomed[i].values))
            })
            .map_err(|f| lost(Some(i), f))?;
            match done {
                Attempt::Done(_) => {
                    left[n] = None;
                    progress = true;
                }
                Attempt::Refused(why) => left[n] = Some(why),
            }
        }
    }
    Ok(left
        .into_iter()
        .map(|f| match f {
            None => Fate::Gone,
            Some(why) => Fate::Kept(why),
        })
        .collect())
}

/// After a message: lets go of the retired rows nothing points at any more
/// (no row of any table, live or retired) and whose edits are filed,
/// children first, again while that lets one more go. A row the database
/// refuses to let go of stays retired, and is said nothing of — but one
/// retired for its edit, which is rejected under the message that let go
/// of it.
pub(crate) fn release(world: &World<'_>) -> rusqlite::Result<()> {
    let conn = world.conn;
    let retired_rows: bool = conn.query_row(
        "SELECT retired_rows FROM sync_state WHERE id = 1",
        [],
        |r| r.get(0),
    )?;
    if !retired_rows {
        return Ok(());
    }
    loop {
        let mut gone = 0;
        for shape in world.shapes.iter().rev() {
            if shape.retired.is_some() {
                gone += release_table(world, shape)?;
            }
        }
        if gone == 0 {
            break;
        }
    }
    let mut left = false;
    for shape in world.shapes {
        if let Some(r) = shape.retired {
            left |= conn.query_row(
                &format!(
                    "SELECT EXISTS (SELECT 1 FROM {} WHERE {} IS NOT NULL)",
                    quote(&shape.name),
                    quote(&shape.columns[r].name)
                ),
                [],
                |row| row.get::<_, bool>(0),
            )?;
        }
    }
    if !left {
        conn.execute("UPDATE sync_state SET retired_rows = 0 WHERE id = 1", [])?;
    }
    Ok(())
}

/// The retired rows of one table nothing keeps, let go of: together, or
/// one at a time when that is refused. Answers how many went.
fn release_table(world: &World<'_>, shape: &Shape) -> rusqlite::Result<usize> {
    let conn = world.conn;
    let table = quote(&shape.name);
    let retired = quote(&shape.columns[shape.retired.expect("checked")].name);
    let mut free = vec![format!("t.{retired} IS NOT NULL")];
    for link in world
        .links
        .iter()
        .filter(|l| l.parent.eq_ignore_ascii_case(&shape.name))
    {
        free.push(format!(
            "NOT EXISTS (SELECT 1 FROM {} c WHERE {})",
            quote(&link.child),
            link.joins("c", "t")
        ));
    }
    free.push(format!(
        "NOT EXISTS (SELECT 1 FROM sync_notes n WHERE n.table_name = {} AND n.key = {})",
        literal(&shape.name),
        crate::model::key_sql::key(shape, "t")
    ));
    let candidates = format!(
        "SELECT {}, {} FROM {table} t WHERE {}",
        crate::model::key_sql::key(shape, "t"),
        shape
            .key_columns()
            .map(|c| format!("t.{}", quote(&c.name)))
            .collect::<Vec<_>>()
            .join(", "),
        free.join(" AND ")
    );
    let rows: Vec<Doomed> = {
        let mut statement = conn.prepare(&candidates)?;
        let mut rows = statement.query([])?;
        let mut found = Vec::new();
        while let Some(row) = rows.next()? {
            let key: String = row.get(0)?;
            let values = (0..shape.key.len())
                .map(|i| row.get::<_, SqlValue>(i + 1))
                .collect::<rusqlite::Result<_>>()?;
            found.push(Doomed { key, values });
        }
        found
    };
    if rows.is_empty() {
        return Ok(0);
    }
    let sql = format!("DELETE FROM {table} WHERE {}", shape.key_match());
    let mut gone = 0;
    for row in &rows {
        let done = attempt(conn, || {
            conn.prepare_cached(&sql)?
                .execute(params_from_iter(&row.values))
        });
        match done {
            Ok(Attempt::Done(_)) => {
                gone += 1;
                forget_edit_retirement(conn, &shape.name, &row.key)?;
            }
            Ok(Attempt::Refused(why)) => {
                log::info!("kept retired {} {}: {why}", shape.name, row.key);
                reject_edit_retirement(conn, &shape.name, &row.key, &why)?;
            }
            Err(Failure::Storage(e)) => return Err(e),
            Err(Failure::Careful) => unreachable!("every write here has a savepoint of its own"),
            Err(Failure::TransactionLost(why)) => {
                return Err(rusqlite::Error::SqliteFailure(
                    rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_ABORT),
                    Some(why),
                ))
            }
        }
    }
    Ok(gone)
}

fn forget_edit_retirement(conn: &Connection, table: &str, key: &str) -> rusqlite::Result<()> {
    conn.prepare_cached("DELETE FROM sync_retired_for_edits WHERE table_name = ?1 AND key = ?2")?
        .execute([table, key])?;
    Ok(())
}

/// A row kept retired for its edit that the database will not let go of
/// once the edit is filed: rejected under the message that let go of it.
fn reject_edit_retirement(
    conn: &Connection,
    table: &str,
    key: &str,
    why: &str,
) -> rusqlite::Result<()> {
    let found: Option<(String, i64)> = conn
        .query_row(
            "SELECT epoch, sequence FROM sync_retired_for_edits WHERE table_name = ?1 AND key = ?2",
            [table, key],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .ok();
    if let Some((epoch, sequence)) = found {
        crate::engine::reject::record(
            conn,
            &crate::engine::reject::NewRejection {
                table,
                key,
                reason: &format!("the database refused to let go of the row: {why}"),
                epoch: &epoch,
                sequence: sequence as u64,
                holds_copy: true,
                held_back: false,
            },
        )?;
        forget_edit_retirement(conn, table, key)?;
    }
    Ok(())
}

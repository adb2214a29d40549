//! Letting go of rows: a part's deletes, and a snapshot's sweep.
//!
//! Rows are let go of together, in one statement, so rows that point only
//! at one another (a tree, a row that points at itself) go whatever the
//! order of their keys. When the database refuses that, they are let go of
//! one at a time, again while that lets one more go, and those still
//! refused are kept and rejected.
//!
//! Still to come (protocol §4.3): a row that one of the replica's own rows
//! points at is retired instead of deleted, where the table declares a
//! retired column. It fits here, before the rows are let go of together.

use rusqlite::types::Value as SqlValue;
use rusqlite::{params_from_iter, Connection};

use crate::shape::Shape;
use crate::sql::{attempt, quote, Attempt, Failure};

/// A row to let go of: its key text, and the values its key columns match.
pub(crate) struct Doomed {
    pub key: String,
    pub values: Vec<SqlValue>,
}

/// What became of one doomed row.
pub(crate) enum Fate {
    Gone,
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
    }
}

/// Lets go of these rows of one table, together unless `one_at_a_time`.
pub(crate) fn let_go(
    conn: &Connection,
    shape: &Shape,
    doomed: &[Doomed],
    one_at_a_time: bool,
) -> Result<Vec<Fate>, Stop> {
    if doomed.is_empty() {
        return Ok(Vec::new());
    }
    if !one_at_a_time {
        match attempt(conn, || delete_together(conn, shape, doomed)).map_err(|f| lost(None, f))? {
            Attempt::Done(()) => return Ok(doomed.iter().map(|_| Fate::Gone).collect()),
            Attempt::Refused(why) => log::debug!(
                "letting go of {} rows of {} together was refused ({why}): one at a time",
                doomed.len(),
                shape.name
            ),
        }
    }
    one_by_one(conn, shape, doomed)
}

fn delete_together(conn: &Connection, shape: &Shape, doomed: &[Doomed]) -> rusqlite::Result<()> {
    let width = shape.key.len();
    let names: Vec<String> = (0..width).map(|i| format!("k{i}")).collect();
    conn.execute_batch(&format!(
        "DROP TABLE IF EXISTS temp.sync_doomed; CREATE TEMP TABLE sync_doomed ({})",
        names.join(", ")
    ))?;
    {
        let marks: Vec<String> = (1..=width).map(|i| format!("?{i}")).collect();
        let mut insert = conn.prepare(&format!(
            "INSERT INTO temp.sync_doomed VALUES ({})",
            marks.join(", ")
        ))?;
        for row in doomed {
            insert.execute(params_from_iter(&row.values))?;
        }
    }
    let target = if width == 1 {
        shape.key_list()
    } else {
        format!("({})", shape.key_list())
    };
    conn.execute(
        &format!(
            "DELETE FROM {} WHERE {target} IN (SELECT {} FROM temp.sync_doomed)",
            quote(&shape.name),
            names.join(", ")
        ),
        [],
    )?;
    conn.execute_batch("DROP TABLE temp.sync_doomed")
}

fn one_by_one(conn: &Connection, shape: &Shape, doomed: &[Doomed]) -> Result<Vec<Fate>, Stop> {
    let sql = format!(
        "DELETE FROM {} WHERE {}",
        quote(&shape.name),
        shape.key_match()
    );
    let mut fates: Vec<Option<String>> = vec![Some(String::new()); doomed.len()];
    // Some(reason): still there. Try again while a pass lets one more go:
    // a row may be held only by another doomed row after it.
    let mut progress = true;
    while progress {
        progress = false;
        for (i, row) in doomed.iter().enumerate() {
            if fates[i].is_none() {
                continue;
            }
            let done = attempt(conn, || {
                conn.prepare_cached(&sql)?
                    .execute(params_from_iter(&row.values))
            })
            .map_err(|f| lost(Some(i), f))?;
            match done {
                Attempt::Done(_) => {
                    fates[i] = None;
                    progress = true;
                }
                Attempt::Refused(why) => fates[i] = Some(why),
            }
        }
    }
    Ok(fates
        .into_iter()
        .map(|f| match f {
            None => Fate::Gone,
            Some(why) => Fate::Kept(why),
        })
        .collect())
}

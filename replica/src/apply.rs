//! Applying a `Down` (protocol §4.1): its parts in the order given, each
//! one's deletes first, together, then its upserts, one savepoint per row so
//! that a row the database refuses is left as it was and the rest applies.
//!
//! A row the database refuses is tried again once the rest of its part is
//! in, and again once the whole message is, while that takes one more: it
//! may point at a row that comes after it. A later row with the same key,
//! or a later delete of it, replaces it: the server changed its mind.

use std::collections::{HashMap, HashSet};

use magic_sync_proto::key::{self, KeyPart};
use magic_sync_proto::wire::{Down, DownTable};
use rusqlite::types::Value as SqlValue;
use rusqlite::{params_from_iter, Connection};
use serde_json::Value as JsonValue;

use crate::check::Head;
use crate::let_go::{self, Doomed};
use crate::outcome::Outcome;
use crate::row_json::{key_of_json, key_to_sql, to_sql};
use crate::shape::Shape;
use crate::snapshot;
use crate::sql::{attempt, quote, Attempt, Failure};

/// A place in a message: a row, or a group of rows let go of together.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Spot {
    Upsert {
        part: usize,
        row: usize,
    },
    Delete {
        part: usize,
        row: usize,
    },
    /// A part's deletes, let go of together.
    Deletes {
        part: usize,
    },
    /// A row a snapshot's end lets go of.
    Swept {
        table: String,
        key: String,
    },
    /// A table a snapshot's end sweeps, together.
    Sweep {
        table: String,
    },
}

/// What earlier tries of the same message taught: applying it again, these
/// are done differently.
#[derive(Default, Debug)]
pub(crate) struct Plan {
    /// Rows rejected before they are tried: trying them ended the whole
    /// transaction (a trigger's RAISE(ROLLBACK)).
    pub skip: HashMap<Spot, String>,
    /// Groups let go of one row at a time, for the same reason.
    pub one_at_a_time: HashSet<Spot>,
    /// The database refused to commit the message for what no single row
    /// explained: every row of it is rejected, so the rest of what it says
    /// (its numbers, its snapshot) stands.
    //
    // Still to come (protocol §4.1): finding the rows at fault by the
    // database's own check of their keys, and rejecting only those.
    pub reject_all: Option<String>,
}

impl Plan {
    pub(crate) fn verdict(&self, spot: &Spot) -> Option<&str> {
        self.reject_all
            .as_deref()
            .or_else(|| self.skip.get(spot).map(String::as_str))
    }
}

/// Why applying stopped before the end.
#[derive(Debug)]
pub(crate) enum Stop {
    Storage(rusqlite::Error),
    /// The transaction was lost at this spot: apply the message again with
    /// the spot done differently.
    TransactionLost(Spot, String),
}

impl From<rusqlite::Error> for Stop {
    fn from(e: rusqlite::Error) -> Stop {
        Stop::Storage(e)
    }
}

/// What applying needs to know besides the message.
pub(crate) struct Context<'a> {
    pub conn: &'a Connection,
    pub shapes: &'a [Shape],
    pub head: Head<'a>,
    /// Whether the message belongs to the snapshot in progress: then the
    /// keys of its rows are remembered for the sweep at its end.
    pub in_snapshot: bool,
    /// The sequence of the message that began the snapshot in progress.
    pub snapshot_began: u64,
    pub plan: &'a Plan,
}

impl Context<'_> {
    pub(crate) fn shape(&self, table: &str) -> Option<&Shape> {
        self.shapes.iter().find(|s| s.name == table)
    }
}

/// An upsert the database refused, to try again.
struct Pending {
    part: usize,
    row: usize,
    table: String,
    key: String,
    parts: Vec<KeyPart>,
    write: Write,
    reason: String,
}

/// An upsert, ready to run.
struct Write {
    sql: String,
    values: Vec<SqlValue>,
}

pub(crate) fn down(ctx: &Context<'_>, down: &Down) -> Result<Outcome, Stop> {
    let mut applying = Applying {
        ctx,
        outcome: Outcome::default(),
        pending: Vec::new(),
    };
    for (index, part) in down.tables.iter().enumerate() {
        match ctx.shape(&part.table) {
            Some(shape) if shape.mirror.written_by_server() => {
                applying.held_part(index, shape, part)?
            }
            shape => applying.part_not_held(shape, part),
        }
    }
    applying.retry(|_| true)?;
    for refused in std::mem::take(&mut applying.pending) {
        applying.outcome.rejected(
            &refused.table,
            &refused.key,
            Some(refused.parts),
            format!("the database refused the row: {}", refused.reason),
        );
    }
    Ok(applying.outcome)
}

struct Applying<'a> {
    ctx: &'a Context<'a>,
    outcome: Outcome,
    pending: Vec<Pending>,
}

impl Applying<'_> {
    /// A part of a table the server writes on the replica.
    fn held_part(&mut self, index: usize, shape: &Shape, part: &DownTable) -> Result<(), Stop> {
        self.deletes(index, shape, part)?;
        self.upserts(index, shape, part)?;
        self.retry(|p| p.part == index)
    }

    /// A part of a table the replica does not hold from the server (one it
    /// does not know, or a record of its own): its rows are rejected and its
    /// deletes ignored.
    fn part_not_held(&mut self, shape: Option<&Shape>, part: &DownTable) {
        let reason = match shape {
            Some(_) => format!(
                "table `{}` is the replica's own: the server does not write it",
                part.table
            ),
            None => format!("the replica does not hold table `{}`", part.table),
        };
        if !part.deletes.is_empty() {
            log::warn!("ignored {} deletes: {reason}", part.deletes.len());
        }
        for beside in &part.keys {
            let key = match shape {
                Some(shape) => match key::canonical(beside, &shape.key_types) {
                    Ok(key) => key,
                    Err(e) => {
                        log::warn!("a row of {} whose key cannot be told: {e}", part.table);
                        continue;
                    }
                },
                None => beside.clone(),
            };
            // No server sends such a table: a name or key this long is
            // logged, not kept, so every rejection fits an Up.
            if part.table.len() > crate::reject::REASON_BYTES
                || key.len() > crate::reject::REASON_BYTES
            {
                log::warn!(
                    "a row of a table the replica does not hold, too long to keep: {reason}"
                );
                continue;
            }
            self.outcome
                .rejected(&part.table, &key, None, reason.clone());
        }
    }

    fn deletes(&mut self, index: usize, shape: &Shape, part: &DownTable) -> Result<(), Stop> {
        let mut doomed = Vec::new();
        let mut doomed_parts = Vec::new();
        for (row, text) in part.deletes.iter().enumerate() {
            let parts = match key::parse(text, &shape.key_types) {
                Ok(parts) => parts,
                Err(e) => {
                    log::warn!(
                        "a_delete_of_a_key_that_does_not_parse: table {}: {e}",
                        shape.name
                    );
                    continue;
                }
            };
            let key = key::join(&parts);
            // The server let go of it: an earlier refused row is not tried again.
            self.pending
                .retain(|p| !(p.table == shape.name && p.key == key));
            if let Some(why) = self.ctx.plan.verdict(&Spot::Delete { part: index, row }) {
                self.outcome.rejected(&shape.name, &key, Some(parts), why);
                continue;
            }
            doomed.push(Doomed {
                key,
                values: key_to_sql(shape, &parts),
            });
            doomed_parts.push((row, parts));
        }
        let one_at_a_time = self
            .ctx
            .plan
            .one_at_a_time
            .contains(&Spot::Deletes { part: index });
        let fates = let_go::let_go(self.ctx.conn, shape, &doomed, one_at_a_time).map_err(
            |stop| match stop {
                let_go::Stop::Storage(e) => Stop::Storage(e),
                let_go::Stop::TransactionLost(None, why) => {
                    Stop::TransactionLost(Spot::Deletes { part: index }, why)
                }
                let_go::Stop::TransactionLost(Some(i), why) => Stop::TransactionLost(
                    Spot::Delete {
                        part: index,
                        row: doomed_parts[i].0,
                    },
                    why,
                ),
            },
        )?;
        for ((row, (_, parts)), fate) in doomed.iter().zip(doomed_parts).zip(fates) {
            match fate {
                let_go::Fate::Gone => self.outcome.let_go(&shape.name, &row.key),
                let_go::Fate::Kept(why) => self.outcome.rejected(
                    &shape.name,
                    &row.key,
                    Some(parts),
                    format!("the database refused to let go of the row: {why}"),
                ),
            }
        }
        Ok(())
    }

    fn upserts(&mut self, index: usize, shape: &Shape, part: &DownTable) -> Result<(), Stop> {
        for (row, (bytes, beside)) in part.upserts.iter().zip(&part.keys).enumerate() {
            let parts = match key::parse(beside, &shape.key_types) {
                Ok(parts) => parts,
                Err(e) => {
                    // A rejection needs a key in the key text form.
                    log::warn!("a row of {} whose key cannot be told: {e}", shape.name);
                    continue;
                }
            };
            let key = key::join(&parts);
            if self.ctx.in_snapshot {
                // Refused rows too: a refused row keeps what the replica had.
                snapshot::remember(self.ctx.conn, &shape.name, &key)?;
            }
            // A later row is the one: an earlier refused one is dropped.
            self.pending
                .retain(|p| !(p.table == shape.name && p.key == key));
            if let Some(why) = self.ctx.plan.verdict(&Spot::Upsert { part: index, row }) {
                self.outcome.rejected(&shape.name, &key, Some(parts), why);
                continue;
            }
            let write = match prepare(shape, bytes, &parts, &key) {
                Ok(write) => write,
                Err(why) => {
                    self.outcome.rejected(&shape.name, &key, Some(parts), why);
                    continue;
                }
            };
            match try_write(self.ctx.conn, &write)
                .map_err(|f| stop(f, Spot::Upsert { part: index, row }))?
            {
                Attempt::Done(()) => self.outcome.taken(&shape.name, &key),
                Attempt::Refused(reason) => self.pending.push(Pending {
                    part: index,
                    row,
                    table: shape.name.clone(),
                    key,
                    parts,
                    write,
                    reason,
                }),
            }
        }
        Ok(())
    }

    /// Tries the refused rows `which` selects again, while a pass takes one
    /// more.
    fn retry(&mut self, which: impl Fn(&Pending) -> bool) -> Result<(), Stop> {
        let mut progress = true;
        while progress {
            progress = false;
            let mut still = Vec::new();
            for mut refused in std::mem::take(&mut self.pending) {
                if !which(&refused) {
                    still.push(refused);
                    continue;
                }
                let spot = Spot::Upsert {
                    part: refused.part,
                    row: refused.row,
                };
                match try_write(self.ctx.conn, &refused.write).map_err(|f| stop(f, spot))? {
                    Attempt::Done(()) => {
                        self.outcome.taken(&refused.table, &refused.key);
                        progress = true;
                    }
                    Attempt::Refused(reason) => {
                        refused.reason = reason;
                        still.push(refused);
                    }
                }
            }
            self.pending = still;
        }
        Ok(())
    }
}

fn stop(failure: Failure, spot: Spot) -> Stop {
    match failure {
        Failure::Storage(e) => Stop::Storage(e),
        Failure::TransactionLost(why) => Stop::TransactionLost(spot, why),
    }
}

fn try_write(conn: &Connection, write: &Write) -> Result<Attempt<()>, Failure> {
    attempt(conn, || {
        conn.prepare_cached(&write.sql)?
            .execute(params_from_iter(&write.values))
            .map(|_| ())
    })
}

/// The upsert of one row, or why the row cannot be taken as it came.
fn prepare(shape: &Shape, bytes: &[u8], parts: &[KeyPart], key: &str) -> Result<Write, String> {
    let json: JsonValue = serde_json::from_slice(bytes)
        .map_err(|e| format!("the row does not decode as JSON: {e}"))?;
    let row = json
        .as_object()
        .ok_or_else(|| "the row is not a JSON object".to_owned())?;
    let own =
        key_of_json(shape, row).map_err(|e| format!("the row's own key cannot be read: {e}"))?;
    if own != key {
        return Err(format!(
            "a_row_beside_another_key: the row's own key is {own}, not the key beside it"
        ));
    }

    // The key as the replica stores it (a UUID in the same spelling every
    // time, so rows are found by it), then every other column the row
    // carries, then the retired column, which an upsert always clears: a
    // retired row the server sends again becomes live.
    let mut columns: Vec<usize> = shape.key.clone();
    let mut values = key_to_sql(shape, parts);
    for (name, value) in row {
        let Some(index) = shape.column(name) else {
            continue; // a column the replica does not have
        };
        if columns.contains(&index) || Some(index) == shape.retired {
            continue;
        }
        let column = &shape.columns[index];
        let value =
            to_sql(column.kind, value).map_err(|e| format!("column `{}`: {e}", column.name))?;
        columns.push(index);
        values.push(value);
    }
    if let Some(retired) = shape.retired {
        columns.push(retired);
        values.push(SqlValue::Null);
    }
    Ok(Write {
        sql: upsert_sql(shape, &columns),
        values,
    })
}

/// Inserts the row, or overwrites the columns it carries of the stored row
/// with the same key; columns it does not carry are left as they are.
fn upsert_sql(shape: &Shape, columns: &[usize]) -> String {
    let names: Vec<String> = columns
        .iter()
        .map(|&i| quote(&shape.columns[i].name))
        .collect();
    let marks: Vec<String> = (1..=columns.len()).map(|i| format!("?{i}")).collect();
    let sets: Vec<String> = columns
        .iter()
        .filter(|&&i| !shape.is_key(i))
        .map(|&i| {
            let name = quote(&shape.columns[i].name);
            format!("{name} = excluded.{name}")
        })
        .collect();
    let on_conflict = if sets.is_empty() {
        "DO NOTHING".to_owned()
    } else {
        format!("DO UPDATE SET {}", sets.join(", "))
    };
    format!(
        "INSERT INTO {} ({}) VALUES ({}) ON CONFLICT ({}) {on_conflict}",
        quote(&shape.name),
        names.join(", "),
        marks.join(", "),
        shape.key_list()
    )
}

//! Applying a `Down` (protocol §4.1): its parts in the order given, each
//! one's deletes first, together, then its upserts.
//!
//! A part is first applied straight through, with no savepoint per row:
//! nearly every row is taken, and a savepoint per row is most of the cost.
//! When a statement of it fails, the part is undone and applied again
//! carefully, each row in a savepoint of its own, so that a row the
//! database refuses is left as it was and the rest applies.
//!
//! A refused row is tried again once the rest of its part is in, and again
//! once the whole message is, while that takes one more: it may point at a
//! row that comes after it. A later row with the same key, or a later
//! delete of it, replaces it: the server changed its mind.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};

use magic_sync_proto::key::{self, KeyPart};
use magic_sync_proto::wire::{Down, DownTable};
use rusqlite::types::{Value as SqlValue, ValueRef};
use rusqlite::{params_from_iter, Connection};

use crate::check::Head;
use crate::faults::Tracker;
use crate::let_go::{self, Doomed, World};
use crate::links::Link;
use crate::outcome::{holds, Outcome};
use crate::row_json::{cell_to_sql, key_of_sql, key_to_sql};
use crate::shape::Shape;
use crate::sql::{attempt, is_storage_failure, quote, Attempt, Failure};
use crate::{notes, snapshot, Mirror};

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
    /// transaction (a trigger's RAISE(ROLLBACK)), or the database's check
    /// of its keys found them at fault when it refused the commit.
    pub skip: HashMap<Spot, String>,
    /// Groups let go of one row at a time, for the same reason.
    pub one_at_a_time: HashSet<Spot>,
    /// Every row in a savepoint of its own from the start.
    pub careful: bool,
    /// Tracks what each row wrote, to find the rows at fault when the
    /// database refused the commit.
    pub find_faults: bool,
    /// The database refused to commit the message for what no single row
    /// explained: every row of it is rejected, so the rest of what it says
    /// (its numbers, its snapshot) stands.
    pub reject_all: Option<String>,
}

impl Plan {
    pub(crate) fn verdict(&self, spot: &Spot) -> Option<&str> {
        self.reject_all
            .as_deref()
            .or_else(|| self.skip.get(spot).map(String::as_str))
    }

    fn straight_through(&self) -> bool {
        !self.careful && !self.find_faults && self.reject_all.is_none()
    }
}

/// Why applying stopped before the end.
#[derive(Debug)]
pub(crate) enum Stop {
    Storage(rusqlite::Error),
    /// The transaction was lost at this spot: apply the message again with
    /// the spot done differently.
    TransactionLost(Spot, String),
    /// A statement failed while a part went straight through: undo the
    /// part and apply it carefully.
    Careful,
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
    pub links: &'a [Link],
    pub head: Head<'a>,
    /// Whether the message belongs to the snapshot in progress: then the
    /// keys of its rows are remembered for the sweep at its end.
    pub in_snapshot: bool,
    /// The sequence of the message that began the snapshot in progress.
    pub snapshot_began: u64,
    pub plan: &'a Plan,
    pub tracker: &'a RefCell<Tracker>,
}

impl Context<'_> {
    pub(crate) fn shape(&self, table: &str) -> Option<&Shape> {
        self.shapes.iter().find(|s| s.name == table)
    }

    pub(crate) fn world(&self) -> World<'_> {
        World {
            conn: self.conn,
            shapes: self.shapes,
            links: self.links,
        }
    }
}

/// An upsert the database refused, to try again.
#[derive(Clone)]
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
#[derive(Clone)]
struct Write {
    sql: String,
    values: Vec<SqlValue>,
}

pub(crate) fn down(ctx: &Context<'_>, down: &Down) -> Result<Outcome, Stop> {
    let mut applying = Applying {
        ctx,
        outcome: Outcome::default(),
        pending: Vec::new(),
        statements: HashMap::new(),
    };
    for (index, part) in down.tables.iter().enumerate() {
        match ctx.shape(&part.table) {
            Some(shape) if shape.mirror.written_by_server() => {
                applying.held_part(index, shape, part)?
            }
            shape => applying.part_not_held(shape, part)?,
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
    /// Upsert statements by table and the columns they write.
    statements: HashMap<(String, Vec<usize>), String>,
}

impl Applying<'_> {
    /// A part of a table the server writes on the replica.
    fn held_part(&mut self, index: usize, shape: &Shape, part: &DownTable) -> Result<(), Stop> {
        if self.ctx.plan.straight_through() {
            let (outcome, pending) = (self.outcome.clone(), self.pending.clone());
            self.ctx
                .conn
                .prepare_cached("SAVEPOINT sync_part")?
                .execute([])?;
            match self.part(index, shape, part, false) {
                Ok(()) => {
                    self.ctx
                        .conn
                        .prepare_cached("RELEASE sync_part")?
                        .execute([])?;
                    return Ok(());
                }
                Err(Stop::Careful) => {
                    self.ctx
                        .conn
                        .execute_batch("ROLLBACK TO sync_part; RELEASE sync_part")?;
                    self.outcome = outcome;
                    self.pending = pending;
                }
                Err(other) => return Err(other),
            }
        }
        self.part(index, shape, part, true)
    }

    fn part(
        &mut self,
        index: usize,
        shape: &Shape,
        part: &DownTable,
        careful: bool,
    ) -> Result<(), Stop> {
        self.deletes(index, shape, part)?;
        self.upserts(index, shape, part, careful)?;
        self.retry(|p| p.part == index)
    }

    /// A part of a table the replica does not hold from the server (one it
    /// does not know, or one of its own): its rows are rejected and its
    /// deletes ignored. A setting's recorded keys are noted as deletes.
    fn part_not_held(&mut self, shape: Option<&Shape>, part: &DownTable) -> Result<(), Stop> {
        if let Some(shape) = shape.filter(|s| s.mirror == Mirror::Setting) {
            self.recorded(shape, part)?;
        } else if !part.recorded.is_empty() {
            log::warn!(
                "ignored recorded keys of `{}`, which is no setting",
                part.table
            );
        }
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
        Ok(())
    }

    /// Keys of a setting the server records the replica holding: each one
    /// it does not hold is noted as its own delete, so the server lets go
    /// of it as it files the delete.
    fn recorded(&mut self, shape: &Shape, part: &DownTable) -> Result<(), Stop> {
        for text in &part.recorded {
            let Ok(parts) = key::parse(text, &shape.key_types) else {
                log::warn!(
                    "a recorded key of {} that does not parse: {text}",
                    shape.name
                );
                continue;
            };
            if !holds(self.ctx.conn, shape, &parts)? {
                notes::note(self.ctx.conn, &shape.name, &key::join(&parts), false)?;
            }
        }
        Ok(())
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
            // The server let go of it: an earlier refused row is not tried
            // again, and the snapshot no longer names it.
            self.pending
                .retain(|p| !(p.table == shape.name && p.key == key));
            if self.ctx.in_snapshot {
                snapshot::forget(self.ctx.conn, &shape.name, &key)?;
            }
            if let Some(why) = self.ctx.plan.verdict(&Spot::Delete { part: index, row }) {
                self.outcome.rejected(&shape.name, &key, Some(parts), why);
                continue;
            }
            let values = key_to_sql(shape, &parts);
            if self.ctx.plan.find_faults {
                self.ctx.tracker.borrow_mut().before(
                    self.ctx.conn,
                    self.ctx.links,
                    shape,
                    &values,
                    Spot::Delete { part: index, row },
                )?;
            }
            doomed.push(Doomed { key, values });
            doomed_parts.push((row, parts));
        }
        let one_at_a_time = self
            .ctx
            .plan
            .one_at_a_time
            .contains(&Spot::Deletes { part: index });
        let fates =
            let_go::let_go(&self.ctx.world(), shape, &doomed, one_at_a_time).map_err(|stop| {
                match stop {
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
                }
            })?;
        for ((row, (_, parts)), fate) in doomed.iter().zip(doomed_parts).zip(fates) {
            self.settle(shape, row, Some(parts), fate)?;
        }
        Ok(())
    }

    /// What became of one row let go of.
    fn settle(
        &mut self,
        shape: &Shape,
        row: &Doomed,
        parts: Option<Vec<KeyPart>>,
        fate: let_go::Fate,
    ) -> Result<(), Stop> {
        settle(self.ctx, &mut self.outcome, shape, row, parts, fate)
    }

    fn upserts(
        &mut self,
        index: usize,
        shape: &Shape,
        part: &DownTable,
        careful: bool,
    ) -> Result<(), Stop> {
        let holds_back = shape.mirror == Mirror::Both && shape.origin.is_some();
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
            if !self.pending.is_empty() {
                self.pending
                    .retain(|p| !(p.table == shape.name && p.key == key));
            }
            let spot = Spot::Upsert { part: index, row };
            if let Some(why) = self.ctx.plan.verdict(&spot) {
                self.outcome.rejected(&shape.name, &key, Some(parts), why);
                continue;
            }
            if holds_back
                && notes::noted(self.ctx.conn, &shape.name, &key)?
                && !holds(self.ctx.conn, shape, &parts)?
            {
                self.outcome.held_back(&shape.name, &key);
                continue;
            }
            let write = match self.prepare(shape, bytes, &parts, &key) {
                Ok(write) => write,
                Err(why) => {
                    self.outcome.rejected(&shape.name, &key, Some(parts), why);
                    continue;
                }
            };
            if self.ctx.plan.find_faults {
                self.ctx.tracker.borrow_mut().before(
                    self.ctx.conn,
                    self.ctx.links,
                    shape,
                    &key_to_sql(shape, &parts),
                    spot.clone(),
                )?;
            }
            let done = if careful {
                try_write(self.ctx.conn, &write).map_err(|f| stop(f, spot.clone()))?
            } else {
                write_straight(self.ctx.conn, &write).map_err(|f| stop(f, spot.clone()))?
            };
            match done {
                Attempt::Done(()) => {
                    self.taken(shape, &key, &parts, spot)?;
                }
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

    fn taken(
        &mut self,
        shape: &Shape,
        key: &str,
        parts: &[KeyPart],
        spot: Spot,
    ) -> Result<(), Stop> {
        self.outcome.taken(&shape.name, key);
        if self.ctx.plan.find_faults {
            self.ctx.tracker.borrow_mut().written(
                self.ctx.conn,
                shape,
                &key_to_sql(shape, parts),
                spot,
            )?;
        }
        Ok(())
    }

    /// Tries the refused rows `which` selects again, while a pass takes one
    /// more.
    fn retry(&mut self, which: impl Fn(&Pending) -> bool) -> Result<(), Stop> {
        let mut progress = true;
        while progress && !self.pending.is_empty() {
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
                match try_write(self.ctx.conn, &refused.write).map_err(|f| stop(f, spot.clone()))? {
                    Attempt::Done(()) => {
                        let shape = self.ctx.shape(&refused.table).expect("a held table");
                        self.taken(shape, &refused.key, &refused.parts, spot)?;
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

    /// The upsert of one row, or why the row cannot be taken as it came.
    fn prepare(
        &mut self,
        shape: &Shape,
        bytes: &[u8],
        parts: &[KeyPart],
        key: &str,
    ) -> Result<Write, String> {
        let cells = shape.codec.decode(bytes)?;
        // The key as the replica stores it (a UUID in the same spelling
        // every time, so rows are found by it), then every other column
        // the row carries but the replica's own, then the retired column,
        // which an upsert always clears: a retired row sent again is live.
        let mut own_key: Vec<Option<SqlValue>> = vec![None; shape.key.len()];
        let mut rest: Vec<(usize, SqlValue)> = Vec::with_capacity(cells.len());
        for (name, cell) in &cells {
            let Some(index) = shape.column(name) else {
                continue; // a column the replica does not have
            };
            let column = &shape.columns[index];
            if let Some(at) = shape.key.iter().position(|&k| k == index) {
                own_key[at] = Some(cell_to_sql(column.kind, cell).map_err(|e| {
                    format!(
                        "the row's own key cannot be read: column `{}`: {e}",
                        column.name
                    )
                })?);
                continue;
            }
            if Some(index) == shape.retired || shape.owned.contains(&index) {
                continue;
            }
            let value = cell_to_sql(column.kind, cell)
                .map_err(|e| format!("column `{}`: {e}", column.name))?;
            rest.push((index, value));
        }
        let mut refs = Vec::with_capacity(shape.key.len());
        for (value, column) in own_key.iter().zip(shape.key_columns()) {
            match value {
                Some(v) => refs.push(ValueRef::from(v)),
                None => {
                    return Err(format!(
                        "the row's own key cannot be read: the row has no key column `{}`",
                        column.name
                    ))
                }
            }
        }
        let own = key_of_sql(shape, &refs)
            .ok_or_else(|| "the row's own key cannot be read as its table's key".to_owned())?;
        if own != key {
            return Err(format!(
                "a_row_beside_another_key: the row's own key is {own}, not the key beside it"
            ));
        }
        rest.sort_by_key(|(i, _)| *i);
        let mut columns: Vec<usize> = shape.key.clone();
        let mut values = key_to_sql(shape, parts);
        for (index, value) in rest {
            columns.push(index);
            values.push(value);
        }
        if let Some(retired) = shape.retired {
            columns.push(retired);
            values.push(SqlValue::Null);
        }
        let sql = self
            .statements
            .entry((shape.name.clone(), columns))
            .or_insert_with_key(|(_, columns)| upsert_sql(shape, columns))
            .clone();
        Ok(Write { sql, values })
    }
}

/// What became of one row let go of, in the outcome (shared with the
/// sweep at a snapshot's end).
pub(crate) fn settle(
    ctx: &Context<'_>,
    outcome: &mut Outcome,
    shape: &Shape,
    row: &Doomed,
    parts: Option<Vec<KeyPart>>,
    fate: let_go::Fate,
) -> Result<(), Stop> {
    match fate {
        let_go::Fate::Gone | let_go::Fate::Retired => outcome.let_go(&shape.name, &row.key),
        let_go::Fate::RetiredForEdit => {
            outcome.let_go(&shape.name, &row.key);
            ctx.conn
                .prepare_cached(
                    "INSERT OR REPLACE INTO sync_retired_for_edits (table_name, key, epoch, sequence)
                     VALUES (?1, ?2, ?3, ?4)",
                )?
                .execute(rusqlite::params![
                    shape.name,
                    row.key,
                    ctx.head.epoch,
                    ctx.head.sequence as i64
                ])?;
        }
        let_go::Fate::Kept(why) => outcome.rejected(
            &shape.name,
            &row.key,
            parts,
            format!("the database refused to let go of the row: {why}"),
        ),
    }
    Ok(())
}

fn stop(failure: Failure, spot: Spot) -> Stop {
    match failure {
        Failure::Storage(e) => Stop::Storage(e),
        Failure::TransactionLost(why) => Stop::TransactionLost(spot, why),
        Failure::Careful => Stop::Careful,
    }
}

fn try_write(conn: &Connection, write: &Write) -> Result<Attempt<()>, Failure> {
    attempt(conn, || {
        conn.prepare_cached(&write.sql)?
            .execute(params_from_iter(&write.values))
            .map(|_| ())
    })
}

/// A write with no savepoint of its own: any refusal sends the whole part
/// back to be applied carefully.
fn write_straight(conn: &Connection, write: &Write) -> Result<Attempt<()>, Failure> {
    let result = conn
        .prepare_cached(&write.sql)
        .and_then(|mut s| s.execute(params_from_iter(&write.values)));
    match result {
        Ok(_) => Ok(Attempt::Done(())),
        Err(e) if is_storage_failure(&e) => Err(Failure::Storage(e)),
        Err(e) if conn.is_autocommit() => Err(Failure::TransactionLost(e.to_string())),
        Err(_) => Err(Failure::Careful),
    }
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

//! Applying a `Down` (protocol §4.1): its parts in the order given, each
//! one's deletes first, together, then its upserts.
//!
//! A part is first applied straight through, with no savepoint per row:
//! nearly every row is taken, and a savepoint per row is most of the cost.
//! When a statement of it fails, the part is undone and applied again
//! carefully, each row in a savepoint of its own, so that a row the
//! database refuses is left as it was and the rest applies. (The only part
//! of a message the server writes goes straight through with no savepoint
//! at all: when a statement of it fails, the message is applied again,
//! carefully.)
//!
//! Straight through, with the database's triggers (all the engine's) set
//! aside, the rows of a table no foreign key points to or from are written
//! `TOGETHER` to a statement: SQLite writes them in order, each an upsert of
//! its own, so what is taken is what one at a time takes; a refusal sends
//! the part back to be applied carefully, which finds the row at fault.
//!
//! A refused row is tried again once the rest of its part is in, and again
//! once the whole message is, while that takes one more: it may point at a
//! row that comes after it. A later row with the same key, or a later
//! delete of it, replaces it: the server changed its mind.

use std::sync::Arc;

use magic_sync_proto::key::{self, KeyError, KeyPart, KeyType};
use magic_sync_proto::wire::{Down, DownTable};
use rusqlite::types::Value as SqlValue;
use rusqlite::{params_from_iter, CachedStatement, Connection};

use crate::apply::context::{settle, Context, Stop};
use crate::apply::let_go::{self, Doomed};
use crate::apply::outcome::{holds, Outcome};
use crate::apply::snapshot;
use crate::apply::snapshot::PartKeys;
use crate::apply::spot::Spot;
use crate::apply::upsert::{self, Bound, Reader, Row};
use crate::engine::notes;
use crate::model::declare::Mirror;
use crate::model::row_json::key_to_sql;
use crate::model::shape::Shape;
use crate::sql::{attempt, is_storage_failure, Attempt, Failure};

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

pub(crate) fn apply(ctx: &Context<'_>, down: &Down) -> Result<Outcome, Stop> {
    let held = down
        .tables
        .iter()
        .filter(|part| ctx.shape(&part.table).is_some_and(|s| s.mirror.goes_down()))
        .count();
    let mut applying = Applying {
        ctx,
        outcome: Outcome::default(),
        pending: Vec::new(),
        snapshot_keys: Vec::new(),
        alone: held == 1,
    };
    for (index, part) in down.tables.iter().enumerate() {
        match ctx.shape(&part.table) {
            Some(shape) if shape.mirror.goes_down() => applying.held_part(index, shape, part)?,
            shape => applying.part_not_held(shape, part)?,
        }
    }
    applying.retry(|_| true)?;
    for refused in std::mem::take(&mut applying.pending) {
        applying.outcome.rejected(
            &refused.table,
            refused.key,
            Some(refused.parts),
            format!("the database refused the row: {}", refused.reason),
        );
    }
    snapshot::keep(ctx.conn, &mut applying.snapshot_keys)?;
    Ok(applying.outcome)
}

struct Applying<'a> {
    ctx: &'a Context<'a>,
    outcome: Outcome,
    pending: Vec<Pending>,
    /// What each part named, while the message belongs to a snapshot.
    snapshot_keys: Vec<PartKeys>,
    /// Whether the message has one part the server writes: it goes
    /// straight through in the message's transaction, with no savepoint of
    /// its own, and a refusal applies the whole message again carefully.
    alone: bool,
}

/// Rows written together, in one statement, while a part goes straight
/// through: rows that carry the same columns, in the order they came.
#[derive(Default)]
struct Batch<'r> {
    columns: Vec<usize>,
    values: Vec<Bound<'r>>,
    /// Each row's key and place in its part.
    rows: Vec<(String, usize)>,
}

/// How many rows are written together.
const TOGETHER: usize = 32;

/// An upsert statement, for rows that carry these columns.
struct Statement<'c> {
    columns: Vec<usize>,
    sql: Arc<str>,
    statement: CachedStatement<'c>,
    /// The same for `TOGETHER` rows, once prepared.
    together: Option<CachedStatement<'c>>,
}

/// Runs an upsert with these values bound.
fn execute(statement: &mut rusqlite::Statement<'_>, values: &[Bound<'_>]) -> rusqlite::Result<()> {
    for (i, value) in values.iter().enumerate() {
        statement.raw_bind_parameter(i + 1, value)?;
    }
    statement.raw_execute().map(|_| ())
}

/// The same error again: a statement that did not prepare fails each row
/// that needs it. (Only SQLite's own answers get here: any other error is
/// a failure of storage, and fails the message at once.)
fn clone_error(e: &rusqlite::Error) -> rusqlite::Error {
    match e {
        rusqlite::Error::SqliteFailure(code, message) => {
            rusqlite::Error::SqliteFailure(*code, message.clone())
        }
        other => rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_ERROR),
            Some(other.to_string()),
        ),
    }
}

/// A key as it came beside a row, parsed as its table types it into
/// `parts` (in the spellings the key rules name), and
/// written back in the key text form.
fn read_key(text: &str, types: &[KeyType], parts: &mut Vec<KeyPart>) -> Result<String, KeyError> {
    parts.clear();
    // Most keys come as one integer in its one decimal form.
    if let [KeyType::Integer] = types {
        if let Some(i) = upsert::canonical_integer(text.as_bytes()) {
            parts.push(KeyPart::Integer(i));
            return Ok(text.to_owned());
        }
    }
    parts.extend(key::parse(text, types)?);
    Ok(key::join(parts))
}

impl<'a> Applying<'a> {
    /// A part of a table the server writes on the replica.
    fn held_part(&mut self, index: usize, shape: &Shape, part: &DownTable) -> Result<(), Stop> {
        if self.ctx.plan.straight_through() && self.alone {
            return self.part(index, shape, part, false);
        }
        if self.ctx.plan.straight_through() {
            let (outcome, pending, keys) = (
                self.outcome.mark(),
                self.pending.clone(),
                self.snapshot_keys.len(),
            );
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
                    self.outcome.undo(outcome);
                    self.pending = pending;
                    self.snapshot_keys.truncate(keys);
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
        if self.ctx.in_snapshot {
            self.snapshot_keys.push(PartKeys::new(&shape.name));
        }
        self.deletes(index, shape, part)?;
        self.upserts(index, shape, part, careful)?;
        self.retry(|p| p.part == index)
    }

    /// What this part names, while the message belongs to a snapshot.
    fn named(&mut self) -> Option<&mut PartKeys> {
        match self.ctx.in_snapshot {
            true => self.snapshot_keys.last_mut(),
            false => None,
        }
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
            if part.table.len() > crate::engine::reject::REASON_BYTES
                || key.len() > crate::engine::reject::REASON_BYTES
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
            if let Some(named) = self.named() {
                named.let_go(&key);
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
        let conn = self.ctx.conn;
        let holds_back = shape.mirror == Mirror::Both && shape.origin.is_some();
        let mut statements: Vec<Statement<'a>> = Vec::new();
        let mut reader = Reader::default();
        let mut row = Row::default();
        let mut parts = Vec::with_capacity(shape.key.len());
        // Rows are written together only where that cannot differ from one
        // at a time: straight through (any refusal undoes them all), no
        // trigger but the engine's own, set aside (the database's others
        // would run for each row all the same, but one that ends the
        // transaction would not say which row did), and no foreign key to
        // or from the table (SQLite checks those once per statement).
        let together = !careful
            && self.ctx.quiet
            && !holds_back
            && !self.ctx.plan.find_faults
            && !self.ctx.links.iter().any(|l| {
                l.parent.eq_ignore_ascii_case(&shape.name)
                    || l.child.eq_ignore_ascii_case(&shape.name)
            });
        let mut batch = Batch::default();
        for (at, (bytes, beside)) in part.upserts.iter().zip(&part.keys).enumerate() {
            let key = match read_key(beside, &shape.key_types, &mut parts) {
                Ok(key) => key,
                Err(e) => {
                    // A rejection needs a key in the key text form.
                    log::warn!("a row of {} whose key cannot be told: {e}", shape.name);
                    continue;
                }
            };
            // Refused rows too: a refused row keeps what the replica had.
            if let Some(named) = self.named() {
                named.named(&key);
            }
            // A later row is the one: an earlier refused one is dropped.
            if !self.pending.is_empty() {
                self.pending
                    .retain(|p| !(p.table == shape.name && p.key == key));
            }
            let spot = Spot::Upsert {
                part: index,
                row: at,
            };
            if let Some(why) = self.ctx.plan.verdict(&spot) {
                self.flush(shape, index, &mut batch, &mut statements)?;
                self.outcome
                    .rejected(&shape.name, key, Some(parts.clone()), why);
                continue;
            }
            if holds_back && notes::noted(conn, &shape.name, &key)? && !holds(conn, shape, &parts)?
            {
                self.outcome.held_back(&shape.name, key);
                continue;
            }
            if let Err(why) = reader.read(shape, bytes, &parts, &key, &mut row) {
                self.flush(shape, index, &mut batch, &mut statements)?;
                self.outcome
                    .rejected(&shape.name, key, Some(parts.clone()), why.to_string());
                continue;
            }
            if together {
                if batch.columns != row.columns {
                    self.flush(shape, index, &mut batch, &mut statements)?;
                    batch.columns.clone_from(&row.columns);
                }
                batch.values.append(&mut row.values);
                batch.rows.push((key, at));
                if batch.rows.len() == TOGETHER {
                    self.flush(shape, index, &mut batch, &mut statements)?;
                }
                continue;
            }
            if self.ctx.plan.find_faults {
                self.ctx.tracker.borrow_mut().before(
                    conn,
                    self.ctx.links,
                    shape,
                    &key_to_sql(shape, &parts),
                    spot.clone(),
                )?;
            }
            let which = match statements.iter().position(|s| s.columns == row.columns) {
                Some(which) => Ok(which),
                None => {
                    let sql = self.ctx.texts.get(shape, &row.columns, 1);
                    conn.prepare_cached(&sql).map(|statement| {
                        statements.push(Statement {
                            columns: row.columns.clone(),
                            sql,
                            statement,
                            together: None,
                        });
                        statements.len() - 1
                    })
                }
            };
            // A statement that does not prepare (the table changed since the
            // replica opened) refuses the row as a failing write does.
            let which = match which {
                Err(e) if is_storage_failure(&e) => return Err(Stop::Storage(e)),
                which => which,
            };
            let write = |statements: &mut Vec<Statement<'_>>| match &which {
                Ok(which) => execute(&mut statements[*which].statement, &row.values),
                Err(e) => Err(clone_error(e)),
            };
            let done = if careful {
                attempt(conn, || write(&mut statements))
            } else {
                straight(conn, write(&mut statements))
            }
            .map_err(|f| stop(f, spot.clone()))?;
            match done {
                Attempt::Done(()) => {
                    self.taken(shape, key, &parts, spot)?;
                }
                Attempt::Refused(reason) => self.pending.push(Pending {
                    part: index,
                    row: at,
                    table: shape.name.clone(),
                    key,
                    parts: parts.clone(),
                    write: Write {
                        sql: match which {
                            Ok(which) => statements[which].sql.to_string(),
                            Err(_) => upsert::sql(shape, &row.columns),
                        },
                        values: row.values.iter().map(Bound::to_value).collect(),
                    },
                    reason,
                }),
            }
        }
        self.flush(shape, index, &mut batch, &mut statements)
    }

    /// Writes the rows gathered: `TOGETHER` of them in one statement, fewer
    /// one at a time. Any refusal sends the part back to be applied
    /// carefully (one that ends the transaction, the message).
    fn flush(
        &mut self,
        shape: &Shape,
        index: usize,
        batch: &mut Batch<'_>,
        statements: &mut Vec<Statement<'a>>,
    ) -> Result<(), Stop> {
        if batch.rows.is_empty() {
            return Ok(());
        }
        let conn = self.ctx.conn;
        let width = batch.columns.len();
        let which = match statements.iter().position(|s| s.columns == batch.columns) {
            Some(which) => which,
            None => {
                let sql = self.ctx.texts.get(shape, &batch.columns, 1);
                match conn.prepare_cached(&sql) {
                    Ok(statement) => statements.push(Statement {
                        columns: batch.columns.clone(),
                        sql,
                        statement,
                        together: None,
                    }),
                    Err(e) if is_storage_failure(&e) => return Err(Stop::Storage(e)),
                    Err(_) => return Err(Stop::Careful),
                }
                statements.len() - 1
            }
        };
        let statement = &mut statements[which];
        if batch.rows.len() == TOGETHER {
            if statement.together.is_none() {
                let sql = self.ctx.texts.get(shape, &batch.columns, TOGETHER);
                match conn.prepare_cached(&sql) {
                    Ok(together) => statement.together = Some(together),
                    Err(e) if is_storage_failure(&e) => return Err(Stop::Storage(e)),
                    Err(_) => return Err(Stop::Careful),
                }
            }
            let together = statement.together.as_mut().expect("prepared");
            match execute(together, &batch.values) {
                Ok(()) => {}
                Err(e) if is_storage_failure(&e) => return Err(Stop::Storage(e)),
                Err(_) if conn.is_autocommit() => return Err(Stop::LostTogether),
                Err(_) => return Err(Stop::Careful),
            }
        } else {
            for (n, (_, at)) in batch.rows.iter().enumerate() {
                let values = &batch.values[n * width..(n + 1) * width];
                let result = execute(&mut statement.statement, values);
                straight(conn, result).map_err(|f| {
                    stop(
                        f,
                        Spot::Upsert {
                            part: index,
                            row: *at,
                        },
                    )
                })?;
            }
        }
        for (key, _) in batch.rows.drain(..) {
            self.outcome.taken(&shape.name, key);
        }
        batch.values.clear();
        Ok(())
    }

    fn taken(
        &mut self,
        shape: &Shape,
        key: String,
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
                        self.taken(shape, refused.key, &refused.parts, spot)?;
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

/// What became of a write with no savepoint of its own: any refusal sends
/// the whole part back to be applied carefully.
fn straight(conn: &Connection, result: rusqlite::Result<()>) -> Result<Attempt<()>, Failure> {
    match result {
        Ok(()) => Ok(Attempt::Done(())),
        Err(e) if is_storage_failure(&e) => Err(Failure::Storage(e)),
        Err(e) if conn.is_autocommit() => Err(Failure::TransactionLost(e.to_string())),
        Err(_) => Err(Failure::Careful),
    }
}

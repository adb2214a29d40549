//! Carrying out the server's wishes of the replica's settings (protocol
//! 4.5): the handlers a program gives (`Wishes`), and one offering of every
//! wish due, after a message committed and with no transaction open.
//!
//! `held`: the wishes as rows of `sync_wishes`; `due`: which are due, and
//! what 4.5's first three steps answer of each; `handler`: a wish offered
//! to its handler on a thread of its own, within `wishes_timeout`;
//! `answer`: the answer recorded, with the row an applied wish writes, in
//! one transaction.

mod answer;
mod due;
mod handler;
mod held;

use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use rusqlite::Connection;
use serde_json::{Map, Value as JsonValue};
use uuid::Uuid;

use crate::engine::state;
use crate::engine::triggers::Quiet;
use crate::model::declare::{Mirror, Tables};
use crate::model::shape::Shape;

pub(crate) use handler::Running;

/// What a handler answers of a wish.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Carried out: the engine writes the wished columns onto the row, its
    /// version moved on, and records the answer, in one transaction.
    Applied,
    /// Not carried out, and never will be: final for this wish.
    Refused(String),
    /// Not now: the wish waits, and is offered again later.
    Later(String),
}

/// A wish, as its handler is offered it.
#[derive(Clone, Debug, PartialEq)]
pub struct Wish {
    pub id: Uuid,
    /// The setting's table, and the row's key in it (key text form).
    pub table: String,
    pub key: String,
    /// The wished columns only, as JSON.
    pub wanted: Map<String, JsonValue>,
    /// The setting row as the replica holds it now, as JSON.
    pub row: Map<String, JsonValue>,
    /// The wish's version: only whether an answer is of it matters.
    pub version: u64,
    /// The server's note: who asked, or why.
    pub note: String,
}

/// Carries a wish out, however the setting takes it (hardware, a module,
/// nothing at all). Called on a thread of its own; it may take up to
/// `Settings::wishes_timeout`. Carrying the same wish out twice must leave
/// the setting as once does: a replica that stopped after the handler ran
/// and before it recorded the answer offers the wish again.
pub trait CarryOut: Send + Sync + 'static {
    fn carry_out(&self, wish: &Wish) -> Outcome;
}

/// A setting that lives only in the database: every wish is applied, and
/// the engine writes it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Direct;

impl CarryOut for Direct {
    fn carry_out(&self, _wish: &Wish) -> Outcome {
        Outcome::Applied
    }
}

/// The handler of each setting table. Every setting needs one
/// (`Replica::open` refuses one without).
#[derive(Clone, Default)]
pub struct Wishes {
    handlers: Vec<(String, Arc<dyn CarryOut>)>,
    /// Held and shown, never carried out: a tool's, not the program's.
    none_carried_out: bool,
}

impl Wishes {
    pub fn new() -> Wishes {
        Wishes::default()
    }

    /// The handler of one setting table's wishes (replacing any given it
    /// before).
    pub fn on(mut self, table: impl Into<String>, handler: impl CarryOut) -> Wishes {
        let table = table.into();
        self.handlers.retain(|(t, _)| t != &table);
        self.handlers.push((table, Arc::new(handler)));
        self
    }

    /// Wishes held and carried through snapshots, and never carried out:
    /// for a tool that looks after a replica without its program (the
    /// command line), leaving them to the program's handlers.
    pub fn none_carried_out() -> Wishes {
        Wishes {
            handlers: Vec::new(),
            none_carried_out: true,
        }
    }

    /// The tables given a handler.
    pub fn tables(&self) -> impl Iterator<Item = &str> {
        self.handlers.iter().map(|(t, _)| t.as_str())
    }

    fn handler(&self, table: &str) -> Option<Arc<dyn CarryOut>> {
        self.handlers
            .iter()
            .find(|(t, _)| t == table)
            .map(|(_, h)| h.clone())
    }

    /// What is wrong with these handlers for these tables: a setting
    /// without one, or one for a table that is no setting.
    pub(crate) fn problems(&self, tables: &Tables) -> Vec<String> {
        let mut problems = Vec::new();
        for table in tables.iter().filter(|t| t.mirror() == Mirror::Setting) {
            if !self.none_carried_out && self.handler(table.name()).is_none() {
                problems.push(format!(
                    "table `{}` is a setting, and no handler carries out its wishes: \
                     give one in Settings::wishes (Direct for a setting that lives only in the database)",
                    table.name()
                ));
            }
        }
        for (name, _) in &self.handlers {
            if !tables
                .iter()
                .any(|t| t.name() == name && t.mirror() == Mirror::Setting)
            {
                problems.push(format!(
                    "a handler of wishes is given for `{name}`, which is no setting declared"
                ));
            }
        }
        problems
    }
}

impl fmt::Debug for Wishes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Wishes")
            .field("tables", &self.tables().collect::<Vec<_>>())
            .field("none_carried_out", &self.none_carried_out)
            .finish()
    }
}

/// The same tables, each with the very same handler.
impl PartialEq for Wishes {
    fn eq(&self, other: &Wishes) -> bool {
        self.none_carried_out == other.none_carried_out
            && self.handlers.len() == other.handlers.len()
            && self
                .handlers
                .iter()
                .zip(&other.handlers)
                .all(|((a, x), (b, y))| a == b && Arc::ptr_eq(x, y))
    }
}

impl Eq for Wishes {}

/// An answer the replica gave a wish.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answered {
    pub id: Uuid,
    pub table: String,
    pub key: String,
    /// `applied`, `refused`, `superseded` or `waiting`.
    pub outcome: String,
    pub reason: String,
}

/// What one offering needs of the replica.
pub(crate) struct Offering<'a> {
    pub conn: &'a Connection,
    pub shapes: &'a [Shape],
    pub me: Uuid,
    pub wishes: &'a Wishes,
    pub timeout: Duration,
    /// The database's triggers run while a wish is recorded: the answer and
    /// the row it wrote are noted as the replica's own writes.
    pub quiet: &'a Quiet,
}

impl Offering<'_> {
    /// Whether this replica carries wishes out at all.
    fn carries_out(&self) -> bool {
        !self.wishes.none_carried_out && self.shapes.iter().any(|s| s.wishes)
    }
}

/// How many times one offering carries out a wish replaced while it was
/// being carried out.
const REPLACED_AGAIN: usize = 3;

/// Carries out every wish due, one at a time, each read again just
/// before; answers what it answered. Nothing while a snapshot is in
/// progress: its end may let go of a wish.
pub(crate) fn offer(o: &Offering<'_>, running: &mut Running) -> rusqlite::Result<Vec<Answered>> {
    if !o.carries_out() || state::read(o.conn)?.in_snapshot() {
        return Ok(Vec::new());
    }
    running.forget_finished();
    let mut answered = Vec::new();
    let mut queue: VecDeque<(String, usize)> =
        held::due(o.conn)?.into_iter().map(|id| (id, 0)).collect();
    while let Some((id, replaced)) = queue.pop_front() {
        // Replaced, withdrawn or answered since the list was read.
        let Some(wish) = held::read(o.conn, &id)?.filter(held::Held::is_due) else {
            continue;
        };
        // A handler that did not answer in time is still at it: the wish
        // waits (it said so) until it is done.
        if running.is_busy(&wish.id) {
            continue;
        }
        let given = match due::judge(o, &wish)? {
            due::Judged::Given(given) => given,
            due::Judged::Offer(offered, carry) => {
                let outcome = match o.wishes.handler(&carry.table) {
                    Some(h) => handler::offer(h, offered, o.timeout, running),
                    None => Outcome::Later(format!("no handler of `{}`", carry.table)),
                };
                answer::Given::from_outcome(outcome, carry)
            }
        };
        let Some(a) = answer::record(o, &wish, given)? else {
            // Replaced while it was carried out: the new one is carried
            // out next (a few times at most, should it keep changing).
            if replaced < REPLACED_AGAIN {
                queue.push_back((id, replaced + 1));
            }
            continue;
        };
        log::info!(
            "the wish {} of {} {}: {} {}",
            a.id,
            a.table,
            a.key,
            a.outcome,
            a.reason
        );
        answered.push(a);
    }
    Ok(answered)
}

/// How many wishes wait to be carried out: not answered, or answered
/// waiting (0 where the replica carries none out).
pub(crate) fn due_count(o: &Offering<'_>) -> rusqlite::Result<usize> {
    if !o.carries_out() {
        return Ok(0);
    }
    Ok(held::due(o.conn)?.len())
}

//! Applying one message from the server: check it, place it in the chain,
//! apply it in one transaction, and say what became of it.

mod chain;
mod context;
mod down;
mod faults;
mod let_go;
pub(crate) mod outcome;
mod snapshot;
mod spot;
pub(crate) mod upsert;

use magic_sync_proto::limits::Limits;
use magic_sync_proto::wire::{to_replica::Body, Down, EndSnapshot};
use rusqlite::Connection;

use std::cell::RefCell;

use crate::apply::chain::Step;
use crate::apply::context::{Context, Plan, Stop};
use crate::apply::faults::Tracker;
use crate::apply::let_go::World;
use crate::apply::outcome::{AppliedTable, Outcome, Rejected};
use crate::apply::spot::Spot;
use crate::engine::triggers::Quiet;
use crate::engine::{notes, state};
use crate::error::Error;
use crate::message::check::{self, Head, Malformed};
use crate::model::links::Link;
use crate::model::shape::Shape;
use crate::sql::{is_storage_failure, Transaction};
use crate::wishes::Answered;

/// What the replica made of a message. Every one of these has been
/// committed (or changed nothing): acknowledge the message to the
/// transport.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Received {
    /// A `Down` was applied: the rows written or let go of per table, and
    /// the rows the replica could not take or let go of. `wishes`: what the
    /// wishes offered once it committed were answered, when it changed one.
    Applied {
        tables: Vec<AppliedTable>,
        rejected: Vec<Rejected>,
        wishes: Vec<Answered>,
    },
    /// An `EndSnapshot` was applied: the tables it covered, the rows it let
    /// go of because the snapshot did not name them, and those it could not.
    /// `wishes`: what the wishes offered once it committed were answered.
    Ended {
        tables: Vec<String>,
        swept: Vec<AppliedTable>,
        rejected: Vec<Rejected>,
        wishes: Vec<Answered>,
    },
    /// The server filed these uploads.
    Filed { uploads: Vec<u64> },
    /// A message at or below the last applied, of the same epoch (its
    /// sequence): a redelivery. Nothing changed; the next Up says the last
    /// applied again.
    Already { sequence: u64 },
    /// The message does not follow the last applied, or the replica has a
    /// gap already: nothing applied until a snapshot begins. `newest` is the
    /// newest message it could not follow, which the next Up says.
    Gap { newest: u64 },
    /// No server sends such a message: nothing applied.
    Malformed(Malformed),
}

fn malformed(m: Malformed) -> Received {
    log::warn!("{m}");
    Received::Malformed(m)
}

/// What applying needs of the replica.
pub(crate) struct Replicating<'a> {
    pub conn: &'a Connection,
    pub shapes: &'a [Shape],
    pub links: &'a [Link],
    pub limits: &'a Limits,
    /// The database's triggers, set aside while only the engine writes.
    pub quiet: &'a Quiet,
    pub texts: &'a crate::apply::upsert::Texts,
}

impl Replicating<'_> {
    fn world(&self) -> World<'_> {
        World {
            conn: self.conn,
            shapes: self.shapes,
            links: self.links,
        }
    }
}

/// Applies the message `bytes`, or says why it did not: `Ok` for whatever
/// is to be acknowledged, `Err` for what is not (see `Replica::receive`).
pub(crate) fn message(r: &Replicating<'_>, bytes: &[u8]) -> Result<Received, Error> {
    let message = match check::decode(bytes) {
        Ok(message) => message,
        Err(m) => return Ok(malformed(m)),
    };
    // A later protocol is an `Err`: the message is not acknowledged.
    let body = match check::message(&message, r.limits)? {
        Ok(body) => body,
        Err(m) => return Ok(malformed(m)),
    };
    let (received, retired) = match body {
        Body::Filed(filed) => {
            let tx = Transaction::begin(r.conn)?;
            let forgotten = notes::filed(r.conn, &filed.uploads)?;
            let retired = state::retired_rows(r.conn)?;
            tx.commit()?;
            log::debug!("filed {:?}: {forgotten} notes forgotten", filed.uploads);
            let received = Received::Filed {
                uploads: filed.uploads.clone(),
            };
            (received, retired)
        }
        Body::Down(down) => chained(r, Chained::Down(down))?,
        Body::EndSnapshot(end) => chained(r, Chained::End(end))?,
    };
    if retired {
        release_retired(r);
    }
    Ok(received)
}

/// Whether retired rows may be held, as the message's transaction left it
/// (read inside it: a read of its own after the commit cost each message
/// a transaction more).
type Retired = bool;

/// After a message that leaves retired rows held, apart from it: those
/// nothing keeps are let go of. A failure here holds back no message; it
/// is tried after the next.
fn release_retired(r: &Replicating<'_>) {
    let released = (|| -> rusqlite::Result<()> {
        let tx = Transaction::begin(r.conn)?;
        state::engine_writing(r.conn, true)?;
        // Set aside by a message, they may stay so only as long as they are
        // all the engine's.
        r.quiet.settle(r.conn, r.shapes, false)?;
        let_go::release(&r.world())?;
        state::engine_writing(r.conn, false)?;
        tx.commit()
    })();
    if let Err(e) = released {
        log::warn!("letting go of retired rows failed, and is tried after the next message: {e}");
    }
}

/// A message with a place in the chain.
#[derive(Clone, Copy)]
enum Chained<'m> {
    Down(&'m Down),
    End(&'m EndSnapshot),
}

impl<'m> Chained<'m> {
    fn head(self) -> Head<'m> {
        match self {
            Chained::Down(down) => Head::of_down(down),
            Chained::End(end) => Head::of_end_snapshot(end),
        }
    }
}

/// Applies a chained message in one transaction. Applying starts over when
/// a row ends the transaction from inside (a trigger's RAISE(ROLLBACK)), or
/// the database refuses the commit: each time with what it learnt, so a
/// message always applies in the end unless the database itself fails.
/// Answers, beside what became of it, whether retired rows may be held.
fn chained(r: &Replicating<'_>, message: Chained<'_>) -> Result<(Received, Retired), Error> {
    let conn = r.conn;
    let head = message.head();
    let mut plan = Plan::default();
    let mut searched = false;
    loop {
        let tx = Transaction::begin(conn)?;
        let state = state::read(conn)?;
        let begins = match chain::step(&state, &head) {
            Step::Already => {
                state::note_news(conn)?;
                tx.commit()?;
                log::info!("message {} again: already applied", head.sequence);
                let received = Received::Already {
                    sequence: head.sequence,
                };
                return Ok((received, false));
            }
            Step::Gap => {
                state::widen_gap(conn, head.sequence)?;
                tx.commit()?;
                let newest = state.gap.max(head.sequence);
                log::warn!(
                    "message {} does not follow the last applied: a gap",
                    head.sequence
                );
                return Ok((Received::Gap { newest }, false));
            }
            Step::Malformed(m) => return Ok((malformed(m), false)),
            Step::Begins => {
                state::begin_snapshot(conn, &head)?;
                notes::restate_settings(conn, r.shapes)?;
                true
            }
            Step::Follows => false,
        };
        state::engine_writing(conn, true)?;
        let quiet = r.quiet.settle(conn, r.shapes, worth_quieting(message))?;
        let tracker = RefCell::new(Tracker::default());
        let ctx = Context {
            conn,
            shapes: r.shapes,
            links: r.links,
            head,
            in_snapshot: if begins {
                !head.snapshot_id.is_empty()
            } else {
                state.in_snapshot()
            },
            snapshot_began: if begins {
                head.sequence
            } else {
                state.snapshot_began
            },
            plan: &plan,
            tracker: &tracker,
            quiet,
            texts: r.texts,
        };
        let mut outcome = match apply_body(&ctx, message) {
            Ok(outcome) => outcome,
            Err(Stop::Storage(e)) => return Err(Error::Storage(e)),
            Err(Stop::TransactionLost(spot, why)) => {
                drop(tx);
                learn(&mut plan, spot, why)?;
                continue;
            }
            Err(Stop::Careful | Stop::LostTogether) => {
                // A row the database refused while the message's only part
                // went straight through, or one that ended the transaction
                // while rows were written together: the message, carefully.
                drop(tx);
                plan.careful = true;
                continue;
            }
        };
        if plan.find_faults {
            let faults = tracker.borrow().faults(conn, r.links)?;
            if !faults.is_empty() {
                drop(tx);
                log::warn!(
                    "message {}: {} rows at fault for the refused commit, rejected before they are tried",
                    head.sequence,
                    faults.len()
                );
                plan.find_faults = false;
                plan.skip.extend(faults);
                continue;
            }
        }
        // Only the message's own rows wrote rejections since `state` was
        // read: in `write`, each row once.
        outcome.write(conn, r.shapes, &head, state.rejections)?;
        // The engine's writing ends here too.
        state::applied(conn, &head)?;
        let retired = state::retired_rows(conn)?;
        match tx.commit() {
            Ok(()) => return Ok((report(message, outcome), retired)),
            Err(e) if is_storage_failure(&e) || plan.reject_all.is_some() => {
                return Err(Error::Storage(e))
            }
            Err(e) => {
                log::warn!(
                    "the database refused to commit message {}: {e}",
                    head.sequence
                );
                if searched {
                    // Found rows rejected, and still refused: nothing a row
                    // explains. Every row is rejected, so the rest stands.
                    plan.find_faults = false;
                    plan.reject_all =
                        Some(format!("the database refused the message as a whole: {e}"));
                } else {
                    searched = true;
                    plan.find_faults = true;
                    plan.careful = true;
                }
            }
        }
    }
}

/// The rows of a message from which setting the triggers aside saves more
/// than it costs (SQLite prepares the connection's statements again each
/// time they are set aside or run again).
const QUIET_FROM: usize = 16;

/// Whether the triggers are to be set aside for this message (when the
/// database's triggers are all the engine's: see `Quiet`). Once aside, they
/// stay so for every message until the program takes the connection.
fn worth_quieting(message: Chained<'_>) -> bool {
    match message {
        Chained::Down(down) => {
            down.tables
                .iter()
                .map(|t| t.upserts.len() + t.deletes.len())
                .sum::<usize>()
                >= QUIET_FROM
        }
        // A sweep may let go of many rows.
        Chained::End(_) => true,
    }
}

fn apply_body(ctx: &Context<'_>, message: Chained<'_>) -> Result<Outcome, Stop> {
    match message {
        Chained::Down(down) => down::apply(ctx, down),
        Chained::End(end) => {
            let outcome = snapshot::end(ctx, end)?;
            state::end_snapshot(ctx.conn)?;
            Ok(outcome)
        }
    }
}

/// Remembers what ended the transaction, so the next try does it otherwise.
fn learn(plan: &mut Plan, spot: Spot, why: String) -> Result<(), Error> {
    log::warn!("{spot:?} ended the transaction ({why}): applying the message again without it");
    plan.careful = true;
    let known = match spot {
        Spot::Deletes { .. } | Spot::Sweep { .. } => !plan.one_at_a_time.insert(spot),
        row => plan
            .skip
            .insert(row, format!("the row ended the transaction: {why}"))
            .is_some(),
    };
    if known {
        // The same place twice: nothing a row explains. Reject them all.
        if plan.reject_all.is_some() {
            return Err(Error::Storage(rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_ABORT),
                Some(why),
            )));
        }
        plan.reject_all = Some(format!(
            "the database refused the message as a whole: {why}"
        ));
    }
    Ok(())
}

fn report(message: Chained<'_>, outcome: Outcome) -> Received {
    let (tables, rejected) = outcome.report();
    match message {
        Chained::Down(_) => Received::Applied {
            tables,
            rejected,
            wishes: Vec::new(),
        },
        Chained::End(end) => Received::Ended {
            tables: end.tables.clone(),
            swept: tables,
            rejected,
            wishes: Vec::new(),
        },
    }
}

//! What applying a message shares with the sweep at a snapshot's end: what
//! it needs to know besides the message (`Context`, with the `Plan` earlier
//! tries taught), why it stops before the end (`Stop`), and what became of
//! a row let go of (`settle`).

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};

use magic_sync_proto::key::KeyPart;
use rusqlite::Connection;

use crate::apply::faults::Tracker;
use crate::apply::let_go::{self, Doomed, World};
use crate::apply::outcome::Outcome;
use crate::apply::spot::Spot;
use crate::apply::upsert;
use crate::message::check::Head;
use crate::model::links::Link;
use crate::model::shape::Shape;

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

    pub(crate) fn straight_through(&self) -> bool {
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
    /// part and apply it carefully (the message's only part: the message).
    Careful,
    /// The transaction ended while rows were written together: apply the
    /// message again carefully, which finds the row that ends it.
    LostTogether,
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
    /// Whether the database's triggers, all the engine's, are set aside
    /// while the message applies (`triggers::Quiet`).
    pub quiet: bool,
    pub texts: &'a upsert::Texts,
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

//! The last step of a pass: the plan packed into messages, numbered, sealed and
//! written to each replica's outbox, with what they carry recorded as held
//! (or leaving), all in the pass's transaction.
//!
//! Replicas whose plans are the same (every replica, for a change to a
//! broadcast table) form a cohort: the cohort's rows are packed once into
//! bodies stored once, and each replica's messages are its own heads in
//! front of those bodies. Rows are read a chunk at a time and written a few
//! bodies at a time, so memory holds a chunk and the bodies being written,
//! never the plan.
//!
//! The files: `members.rs` (who is numbered, in which cohorts),
//! `rows.rs` (the rows of a part), `packing.rs` (rows into bodies),
//! `writer.rs` (bodies and messages written), `written.rs` (what is
//! recorded of them).

mod members;
mod packing;
mod rows;
mod writer;
mod written;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use uuid::Uuid;

use magic_sync_proto::limits::Limits;

use crate::catalog::Declared;
use crate::epochs::Epoch;
use crate::error::Error;
use crate::message::pack::Op;
use crate::relay::journal::Journaled;
use crate::relay::steps::Steps;
use crate::spi::{self, from_pg, to_pg};
use crate::statements::relay::record::{FORGET_PROVISIONED, PARTS};
use members::members;
use packing::Packing;
use rows::{rows_of_part, rows_of_whole, Planned};
use writer::{end_of_snapshot, Writer};

/// What recording wrote.
#[derive(Debug, Default)]
pub struct Recorded {
    pub messages: i64,
    pub bodies: i64,
    pub provisioned: i64,
    /// Rows no message can carry, even alone: when there are any, what was
    /// written is undone, and the pass is planned again around them.
    pub unsendable: Vec<Unsendable>,
}

/// A row no message can carry, even alone: it must be set aside, and the
/// pass planned again around it.
#[derive(Debug)]
pub struct Unsendable {
    pub table: String,
    pub key: String,
    pub note: i64,
    pub reason: String,
}

/// Write what waits once it holds this many rows or bytes.
const FLUSH_ROWS: usize = 20_000;

const FLUSH_BYTES: usize = 8 << 20;

/// Packs, numbers, seals and records every cohort's messages. When a row no
/// message can carry turns up, the pass goes on to find every such row, and
/// answers them all (sql/relay.sql undoes the pass, sets them aside and
/// plans again).
pub fn record(
    tables: &[Declared],
    let_go: &[String],
    journaled: &Journaled,
    epoch: &Epoch,
    limits: Limits,
    steps: &mut Steps,
) -> Recorded {
    let mut members = members();
    if members.members.values().any(|m| m.provision) {
        spi::run_with(FORGET_PROVISIONED, &[journaled.names().into()]);
    }
    members.journaled = journaled.names();
    let mut writer = Writer::new(epoch, members, end_of_snapshot(tables), steps);
    let mut too_large = Vec::new();
    let gone: Vec<Declared> = let_go
        .iter()
        .map(|name| Declared {
            name: name.clone(),
            ..Declared::default()
        })
        .collect();
    let cohorts = parts_by_cohort();
    // Only a whole table's rows are read by partition.
    let sends_whole = cohorts
        .values()
        .flat_map(|parts| parts.values())
        .any(|part| matches!(part, Part::Whole(_)));
    let partitions = match sends_whole {
        true => partitions(),
        false => BTreeMap::new(),
    };
    for (cohort, parts) in cohorts {
        let spanning: BTreeSet<String> = parts
            .keys()
            .filter(|(table, op)| {
                *op == Op::Upsert && parts.contains_key(&(table.clone(), Op::Delete))
            })
            .map(|(table, _)| table.clone())
            .collect();
        let mut packing = Packing::new(cohort, limits, spanning);
        // Parents' rows first, then deletes, children first: a row that
        // moves to another parent points at the new one before the old one
        // goes. (A unique value a delete frees for an upsert is taken when
        // the replica tries the upsert again after the whole message, which
        // is why a table's deletes go in the message of its upserts when
        // they fit one: message/pack.rs.)
        // A snapshot's keys recorded of a setting come at the setting's
        // place among the tables: before the wishes of it, which are last.
        let upserts = tables
            .iter()
            .flat_map(|t| [(t, Op::Recorded), (t, Op::Upsert)]);
        // The tables no longer mirrored (relay/redeclared.rs) have only
        // deletes, first: no declared row points at theirs any more.
        let deletes = gone
            .iter()
            .chain(tables.iter().rev())
            .map(|t| (t, Op::Delete));
        for (table, op) in upserts.chain(deletes) {
            let Some(part) = parts.get(&(table.name.clone(), op)) else {
                continue;
            };
            let mut reading = Instant::now();
            let mut each = |rows: Vec<Planned>| {
                writer.steps.add("record.read", reading.elapsed());
                let packing_started = Instant::now();
                for row in rows {
                    if let Err(refused) = packing.push(row, &mut writer) {
                        too_large.push(refused);
                    }
                }
                writer.steps.add("record.pack", packing_started.elapsed());
                writer.flush_if_full();
                reading = Instant::now();
            };
            let read = |row: &pgrx::spi::SpiHeapTupleData| Planned::read(&table.name, op, row);
            match part {
                // A whole table is read in key order from its own pages,
                // sorted: through its key's index the heap is read a row at
                // a time in random order, several times slower.
                Part::Whole(replica) => spi::for_each_chunk_scanning_pages(
                    &rows_of_whole(table, partitions.get(replica)),
                    2_000,
                    read,
                    &mut each,
                ),
                // A part's rows are read from its cohort's representative's
                // plan.
                Part::Listed(replica) => spi::for_each_chunk_with(
                    &rows_of_part(table, op),
                    &[to_pg(*replica).into()],
                    2_000,
                    read,
                    &mut each,
                ),
            }
        }
        packing.finish(&mut writer);
    }
    let mut recorded = writer.finish();
    recorded.unsendable = too_large;
    recorded
}

impl Unsendable {
    /// As `sync_internal.set_aside` takes it.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({"table": self.table, "key": self.key, "note": self.note, "reason": self.reason})
    }
}

/// Where a part's rows come from: the plan of a replica, or the whole table.
#[derive(Clone, Copy)]
enum Part {
    Listed(Uuid),
    Whole(Uuid),
}

/// Per cohort, the (table, op) parts it has rows of, and the replica whose
/// plan they are read from.
fn parts_by_cohort() -> BTreeMap<i32, BTreeMap<(String, Op), Part>> {
    let mut cohorts: BTreeMap<i32, BTreeMap<(String, Op), Part>> = BTreeMap::new();
    spi::for_each_chunk(
        PARTS,
        10_000,
        |row| {
            let cohort: i32 = spi::column(row, 1, "sync_pass_representatives.cohort");
            let replica = from_pg(spi::column(row, 2, "sync_pass_representatives.replica"));
            let table: String = spi::column(row, 3, "sync_pass_plan.table_name");
            let code: String = spi::column(row, 4, "sync_pass_plan.op");
            let part = if code == "w" {
                Part::Whole(replica)
            } else {
                Part::Listed(replica)
            };
            let op = Op::from_code(&code)
                .unwrap_or_else(|| Error::unknown("sync_pass_plan.op", &code).raise());
            (cohort, table, op, part)
        },
        |rows| {
            for (cohort, table, op, part) in rows {
                cohorts.entry(cohort).or_default().insert((table, op), part);
            }
        },
    );
    cohorts
}

/// The partition of every replica of this pass.
fn partitions() -> BTreeMap<Uuid, Option<String>> {
    let mut partitions = BTreeMap::new();
    spi::for_each_chunk(
        "SELECT id, partition FROM sync_pass_replicas",
        10_000,
        |row| {
            (
                from_pg(spi::column(row, 1, "sync_pass_replicas.id")),
                spi::nullable::<String>(row, 2, "sync_pass_replicas.partition"),
            )
        },
        |rows| partitions.extend(rows),
    );
    partitions
}

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

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use pgrx::prelude::*;
use uuid::Uuid;

use magic_sync_proto::limits::Limits;

use crate::catalog::table_sql::{key_matches, key_of, quote_ident, quote_literal, row_bytes};
use crate::catalog::Declared;
use crate::error::Error;
use crate::message::envelope::{self, Head, Kind};
use crate::message::pack::{Op, Packer};
use crate::message::seal::{self, Sealed};
use crate::relay::epochs::Epoch;
use crate::relay::journal::Journaled;
use crate::relay::steps::Steps;
use crate::spi::{self, from_pg, to_pg};
use magic_sync_proto::key::KeyType;

/// What recording wrote.
#[derive(Debug, Default)]
pub struct Recorded {
    pub messages: i64,
    pub bodies: i64,
    pub provisioned: i64,
    /// Rows no message can carry, even alone: when there are any, what was
    /// written is undone, and the pass is planned again around them.
    pub unsendable: Vec<TooLarge>,
}

/// A row no message can carry, even alone: it must be set aside, and the
/// pass planned again around it.
#[derive(Debug)]
pub struct TooLarge {
    pub table: String,
    pub key: String,
    pub note: i64,
    pub reason: String,
}

/// Which tables each cohort has rows of, to delete and to upsert ('w': the
/// whole table).
const PARTS: &str = "\
    SELECT DISTINCT r.cohort, r.replica, p.table_name, p.op \
    FROM sync_pass_representatives r JOIN sync_pass_plan p ON p.replica = r.replica \
    UNION SELECT r.cohort, r.replica, w.table_name, 'w' \
    FROM sync_pass_representatives r JOIN sync_pass_whole w ON w.replica = r.replica \
    ORDER BY 1";

/// The replicas of each cohort, stand-ins first: a follower is sent the
/// stand-in's messages, which it numbers first.
const MEMBERS: &str = "\
    SELECT c.cohort, c.replica, c.provision, s.last_sequence, s.last_nonce, false, r.partition \
    FROM sync_pass_cohorts c JOIN sync.replicas s ON s.id = c.replica \
    JOIN sync_pass_replicas r ON r.id = c.replica \
    UNION ALL \
    SELECT c.cohort, c.replica, c.provision, s.last_sequence, s.last_nonce, true, s.partition \
    FROM sync_pass_cohorts c JOIN sync.stand_ins s ON s.id = c.replica \
    ORDER BY 1, 6 DESC, 2";

/// Every stand-in of the pass (one with nothing to send has no cohort, and
/// is up to date all the same).
const STAND_INS_OF_PASS: &str = "\
    SELECT s.id, s.partition, s.last_sequence FROM sync.stand_ins s \
    JOIN sync_pass_replicas r ON r.id = s.id";

/// The followers kept up to date this pass, each with its stand-in: each
/// is sent its stand-in's messages, in its stand-in's cohort.
const FOLLOWERS: &str = "\
    SELECT f.replica, f.stand_in, s.last_sequence, s.last_nonce \
    FROM sync.followers f JOIN sync_pass_current c ON c.id = f.replica \
    JOIN sync.replicas s ON s.id = f.replica ORDER BY f.replica";

/// A replica provisioned again holds nothing the server knows of until its
/// snapshot's rows are recorded. (It stopped following as the pass began:
/// `journal::prepare`.)
const FORGET_PROVISIONED: &str = "\
    DELETE FROM sync.held_recorded h USING sync_pass_cohorts c WHERE c.provision AND h.replica = c.replica";

/// A replica provisioned with its snapshot while its stand-in is kept up to
/// date holds the stand-in's rows of journaled tables after this pass: it
/// follows it from its last message of the pass.
const BEGIN_FOLLOWING: &str = "\
    INSERT INTO sync.followers (replica, stand_in, since, since_sequence) \
    SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::bigint[], $4::bigint[])";

const FOLLOWER_MESSAGES: &str = "\
    INSERT INTO sync.follower_messages (replica, stand_in_sequence, sequence) \
    SELECT * FROM unnest($1::uuid[], $2::bigint[], $3::bigint[])";

const ADVANCE_STAND_INS: &str = "\
    UPDATE sync.stand_ins s SET epoch = $1, last_sequence = u.last_sequence, \
        last_nonce = u.last_nonce, provision = false \
    FROM unnest($2::uuid[], $3::bigint[], $4::bigint[]) AS u(id, last_sequence, last_nonce) \
    WHERE s.id = u.id";

const STORE_BODIES: &str = "\
    INSERT INTO sync.bodies (bytes) \
    SELECT b FROM unnest($1::bytea[]) WITH ORDINALITY AS u(b, n) ORDER BY n RETURNING id";

const WRITE_OUTBOX: &str = "\
    INSERT INTO sync.outbox (replica, position, id, kind, head, body) \
    SELECT * FROM unnest($1::uuid[], $2::bigint[], $3::text[], $4::text[], $5::bytea[], $6::bigint[])";

/// Which message carried each row, for every replica that was sent it.
/// A replica that begins following records no rows of journaled tables
/// (`$11`) of its own (`m.follows`).
const CARRIED: &str = "\
    SELECT m.replica, r.table_name, r.key, r.note, m.sequence, r.op, m.fresh \
    FROM unnest($1::int[], $2::uuid[], $3::bigint[], $9::bool[], $10::bool[]) \
         AS m(body, replica, sequence, fresh, follows) \
    JOIN unnest($4::int[], $5::text[], $6::text[], $7::bigint[], $8::text[]) \
         AS r(body, table_name, key, note, op) ON r.body = m.body \
    WHERE NOT (m.follows AND r.table_name = ANY($11::text[]))";

const ADVANCE_CHAINS: &str = "\
    UPDATE sync.replicas s SET epoch = $1, last_sequence = u.last_sequence, \
        last_nonce = u.last_nonce, provision = false, written_at = now(), \
        snapshot_id = coalesce(u.snapshot_id, s.snapshot_id), \
        snapshot_sequence = coalesce(u.snapshot_sequence, s.snapshot_sequence) \
    FROM unnest($2::uuid[], $3::bigint[], $4::bigint[], $5::uuid[], $6::bigint[]) \
         AS u(id, last_sequence, last_nonce, snapshot_id, snapshot_sequence) \
    WHERE s.id = u.id";

/// Write what waits once it holds this many rows or bytes.
const FLUSH_ROWS: usize = 20_000;
const FLUSH_BYTES: usize = 8 << 20;

/// Packs, numbers, seals and records every cohort's messages. When a row no
/// message can carry turns up, the pass goes on to find every such row, and
/// answers them all (sql/relay.sql undoes the pass, sets them aside and
/// plans again).
pub fn record(
    tables: &[Declared],
    journaled: &Journaled,
    epoch: &Epoch,
    limits: Limits,
    steps: &mut Steps,
) -> Recorded {
    let mut members = members();
    if members.members.values().any(|m| m.provision) {
        spi::run(FORGET_PROVISIONED);
    }
    members.journaled = journaled.names();
    let mut writer = Writer::new(epoch, members, end_of_snapshot(tables), steps);
    let mut too_large = Vec::new();
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
        let deletes = tables.iter().rev().map(|t| (t, Op::Delete));
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

impl TooLarge {
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

/// Every row of a table sent whole (of the replica's partition), in key
/// order, at version 0: a note still pending sends it again later, which
/// only ever repeats a row, never misses one.
///
/// The table's own columns are sorted, and each row encoded after: sorting
/// the encoded rows, several times wider, costs more than encoding them.
/// The order is what makes recording cheap (what is held is written in the
/// order of its index), not what makes it right.
fn rows_of_whole(table: &Declared, partition: Option<&Option<String>>) -> String {
    let within = match (&table.partition, partition.cloned().flatten()) {
        (Some(column), Some(value)) => format!(
            " WHERE (t.{})::text = {}",
            quote_ident(column),
            quote_literal(&value)
        ),
        (Some(column), None) => format!(" WHERE t.{} IS NULL", quote_ident(column)),
        (None, _) => String::new(),
    };
    let order = match table.key_types.as_slice() {
        // A UUID's text sorts as the UUID does, and the UUID sorts faster.
        [KeyType::Uuid] => format!("t.{}", quote_ident(&table.key_columns[0])),
        _ => format!("({}) COLLATE \"C\"", key_of(table, "t")),
    };
    let columns: Vec<String> = table
        .columns
        .iter()
        .chain(
            table
                .key_columns
                .iter()
                .filter(|k| !table.columns.contains(k)),
        )
        .map(|c| format!("t.{}", quote_ident(c)))
        .collect();
    format!(
        "SELECT {key}, 0::bigint, \
                CASE WHEN w.bytes IS NOT NULL THEN w.bytes \
                     ELSE {bytes} END \
         FROM (SELECT {columns} FROM {rel} AS t{within} ORDER BY {order} OFFSET 0) AS t \
         LEFT JOIN sync_pass_rows w ON w.table_name = {name} AND w.key = {key}",
        key = key_of(table, "t"),
        bytes = row_bytes(table, "t"),
        columns = columns.join(", "),
        rel = table.relation,
        name = quote_literal(&table.name),
    )
}

/// The rows of one part of a cohort's plan, as the plan of its
/// representative (`$1`) has them: keys to delete, or keys, notes and bytes
/// to upsert (encoded here, unless loaded already because more than one
/// cohort is sent them). In key order: what is recorded of them is then
/// written in the order of the index that holds it, which is much the
/// cheapest.
fn rows_of_part(table: &Declared, op: Op) -> String {
    let name = quote_literal(&table.name);
    match op {
        Op::Delete | Op::Recorded => format!(
            "SELECT p.key, p.note, NULL::bytea FROM sync_pass_plan p \
             WHERE p.replica = $1 AND p.table_name = {name} AND p.op = {code} \
             ORDER BY p.key",
            code = quote_literal(op.code()),
        ),
        Op::Upsert => format!(
            "SELECT p.key, p.note, \
                    CASE WHEN w.bytes IS NOT NULL THEN w.bytes \
                         ELSE {bytes} END \
             FROM sync_pass_plan p \
             JOIN {rel} AS t ON {matches} \
             LEFT JOIN sync_pass_rows w ON w.table_name = {name} AND w.key = p.key \
             WHERE p.replica = $1 AND p.table_name = {name} AND p.op = 'u' \
             ORDER BY p.key",
            bytes = row_bytes(table, "t"),
            rel = table.relation,
            matches = key_matches(table, "t", "p.key"),
        ),
    }
}

/// A planned row, as the cursor reads it.
struct Planned {
    table: String,
    op: Op,
    key: String,
    note: i64,
    bytes: Option<Vec<u8>>,
}

impl Planned {
    fn read(table: &str, op: Op, row: &pgrx::spi::SpiHeapTupleData) -> Planned {
        Planned {
            table: table.to_owned(),
            op,
            key: spi::column(row, 1, "a planned row's key"),
            note: spi::column(row, 2, "a planned row's note"),
            bytes: spi::nullable(row, 3, "a planned row's bytes"),
        }
    }
}

/// What is recorded of a row a body carries.
struct Carried {
    table: String,
    key: String,
    note: i64,
    op: Op,
}

/// One cohort's rows being packed into bodies.
struct Packing {
    cohort: i32,
    packer: Packer,
    /// The rows of the body being filled.
    open: Vec<Carried>,
}

impl Packing {
    /// `spanning`: the tables the cohort is sent upserts and deletes of.
    fn new(cohort: i32, limits: Limits, spanning: BTreeSet<String>) -> Packing {
        Packing {
            cohort,
            packer: Packer::spanning(limits, spanning),
            open: Vec::new(),
        }
    }

    fn push(&mut self, row: Planned, writer: &mut Writer) -> Result<(), TooLarge> {
        if row.op == Op::Upsert && row.bytes.is_none() {
            // Gone since the plan read it: nothing to send.
            return Ok(());
        }
        let carried = Carried {
            table: row.table.clone(),
            key: row.key.clone(),
            note: row.note,
            op: row.op,
        };
        match self.packer.push(&row.table, row.op, row.key, row.bytes) {
            Ok(full) => {
                for body in full {
                    let rest = self.open.split_off(body.rows);
                    let rows = std::mem::replace(&mut self.open, rest);
                    writer.body(
                        self.cohort,
                        Kind::Down,
                        envelope::down_body(body.parts),
                        rows,
                    );
                }
                self.open.push(carried);
                Ok(())
            }
            Err(too_large) => Err(TooLarge {
                reason: too_large.to_string(),
                table: too_large.table,
                key: too_large.key,
                note: carried.note,
            }),
        }
    }

    fn finish(self, writer: &mut Writer) {
        if let Some(parts) = self.packer.finish() {
            writer.body(
                self.cohort,
                Kind::Down,
                envelope::down_body(parts),
                self.open,
            );
        }
        writer.end_cohort(self.cohort);
    }
}

/// One replica of a pass, and where its chain stands: shared by every
/// cohort it is in (a follower is in its stand-in's and its own).
struct Member {
    replica: Uuid,
    /// What it is to the journal of broadcast tables.
    role: Role,
    provision: bool,
    snapshot: Option<Uuid>,
    previous: u64,
    previous_nonce: u64,
    first_sequence: Option<u64>,
    ended: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    /// A replica with rows of its own only.
    Own,
    /// A stand-in: its rows are the journal, it has no outbox.
    StandIn,
    /// A replica provisioned in this pass that follows this stand-in from
    /// its last message of the pass.
    BeginsFollowing(Uuid),
}

/// The pass's replicas, and the cohorts each is in, in the order its
/// messages are numbered.
#[derive(Default)]
struct Members {
    members: BTreeMap<Uuid, Member>,
    cohorts: BTreeMap<i32, Vec<Uuid>>,
    /// The followers in their stand-in's cohort: sent its messages, with no
    /// rows of their own. (A replica in that cohort by the plan it has, as
    /// one that parted may be, records its rows as its own.)
    following: BTreeSet<(i32, Uuid)>,
    /// Every stand-in of the pass, sent anything or not: its partition, and
    /// its last message before the pass.
    stand_ins: BTreeMap<Uuid, (Option<String>, u64)>,
    journaled: Vec<String>,
}

fn members() -> Members {
    let mut read: Vec<(i32, Member, Option<String>)> = Vec::new();
    spi::for_each_chunk(
        MEMBERS,
        10_000,
        |row| {
            let provision: bool = spi::column(row, 3, "sync_pass_cohorts.provision");
            let (previous, previous_nonce) = if provision {
                (0, 0)
            } else {
                (
                    spi::column::<i64>(row, 4, "sync.replicas.last_sequence") as u64,
                    spi::column::<i64>(row, 5, "sync.replicas.last_nonce") as u64,
                )
            };
            let cohort: i32 = spi::column(row, 1, "sync_pass_cohorts.cohort");
            let stand_in: bool = spi::column(row, 6, "whether it is a stand-in");
            let partition = spi::nullable::<String>(row, 7, "its partition");
            let member = Member {
                replica: from_pg(spi::column(row, 2, "sync_pass_cohorts.replica")),
                role: if stand_in { Role::StandIn } else { Role::Own },
                provision,
                snapshot: provision.then(Uuid::new_v4),
                previous,
                previous_nonce,
                first_sequence: None,
                ended: false,
            };
            (cohort, member, partition)
        },
        |rows| read.extend(rows),
    );
    let mut all = Members::default();
    spi::for_each_chunk(
        STAND_INS_OF_PASS,
        100,
        |row| {
            (
                from_pg(spi::column(row, 1, "sync.stand_ins.id")),
                spi::nullable::<String>(row, 2, "sync.stand_ins.partition"),
                spi::column::<i64>(row, 3, "sync.stand_ins.last_sequence") as u64,
            )
        },
        |rows| {
            for (id, partition, last) in rows {
                all.stand_ins.insert(id, (partition, last));
            }
        },
    );
    // Replicas provisioned beside the stand-in of their partition begin
    // following it.
    let of_partition: BTreeMap<Option<String>, Uuid> = all
        .stand_ins
        .iter()
        .map(|(id, (partition, _))| (partition.clone(), *id))
        .collect();
    // The stand-ins sent something this pass, and their cohorts.
    let by_id: BTreeMap<Uuid, i32> = read
        .iter()
        .filter(|(_, m, _)| m.role == Role::StandIn)
        .map(|(cohort, m, _)| (m.replica, *cohort))
        .collect();
    for (cohort, mut member, partition) in read {
        if member.role == Role::Own && member.provision {
            if let Some(stand_in) = of_partition.get(&partition) {
                member.role = Role::BeginsFollowing(*stand_in);
            }
        }
        all.cohorts.entry(cohort).or_default().push(member.replica);
        all.members.insert(member.replica, member);
    }
    spi::for_each_chunk(
        FOLLOWERS,
        10_000,
        |row| {
            (
                from_pg(spi::column(row, 1, "sync.followers.replica")),
                from_pg(spi::column(row, 2, "sync.followers.stand_in")),
                spi::column::<i64>(row, 3, "sync.replicas.last_sequence") as u64,
                spi::column::<i64>(row, 4, "sync.replicas.last_nonce") as u64,
            )
        },
        |rows| {
            for (replica, stand_in, previous, previous_nonce) in rows {
                // A stand-in with nothing to send this pass has no cohort.
                let Some(cohort) = by_id.get(&stand_in) else {
                    continue;
                };
                all.cohorts.entry(*cohort).or_default().push(replica);
                all.following.insert((*cohort, replica));
                all.members.entry(replica).or_insert(Member {
                    replica,
                    role: Role::Own,
                    provision: false,
                    snapshot: None,
                    previous,
                    previous_nonce,
                    first_sequence: None,
                    ended: false,
                });
            }
        },
    );
    all
}

/// The EndSnapshot body every snapshot of this pass ends with: every table
/// the server sends, parents first.
fn end_of_snapshot(tables: &[Declared]) -> Vec<u8> {
    envelope::end_body(tables.iter().map(|t| t.name.clone()).collect())
}

/// A body waiting to be written, with the cohort that is sent it.
struct Pending {
    cohort: i32,
    kind: Kind,
    bytes: Vec<u8>,
    rows: Vec<Carried>,
}

/// Writes bodies, the messages that carry them and what they carry, a few
/// bodies at a time.
struct Writer<'e> {
    epoch: &'e Epoch,
    steps: &'e mut Steps,
    members: Members,
    end_body: Vec<u8>,
    pending: Vec<Pending>,
    pending_rows: usize,
    pending_bytes: usize,
    recorded: Recorded,
}

impl<'e> Writer<'e> {
    fn new(epoch: &'e Epoch, members: Members, end_body: Vec<u8>, steps: &'e mut Steps) -> Self {
        Writer {
            epoch,
            steps,
            members,
            end_body,
            pending: Vec::new(),
            pending_rows: 0,
            pending_bytes: 0,
            recorded: Recorded::default(),
        }
    }

    fn body(&mut self, cohort: i32, kind: Kind, bytes: Vec<u8>, rows: Vec<Carried>) {
        self.pending_rows += rows.len();
        self.pending_bytes += bytes.len();
        self.pending.push(Pending {
            cohort,
            kind,
            bytes,
            rows,
        });
    }

    /// The end of a cohort's snapshot, for those of its members being
    /// provisioned.
    fn end_cohort(&mut self, cohort: i32) {
        let ids = self
            .members
            .cohorts
            .get(&cohort)
            .cloned()
            .unwrap_or_default();
        let provisioned = ids.iter().any(|id| self.members.members[id].provision);
        if provisioned {
            let bytes = self.end_body.clone();
            self.body(cohort, Kind::End, bytes, Vec::new());
        }
        for id in &ids {
            if let Some(member) = self.members.members.get_mut(id) {
                member.ended = true;
            }
        }
    }

    fn flush_if_full(&mut self) {
        if self.pending_rows >= FLUSH_ROWS || self.pending_bytes >= FLUSH_BYTES {
            self.flush();
        }
    }

    /// Stores the waiting bodies, and writes every member's message for
    /// each, and what each carries.
    fn flush(&mut self) {
        let pending = std::mem::take(&mut self.pending);
        self.pending_rows = 0;
        self.pending_bytes = 0;
        if pending.is_empty() {
            return;
        }
        spi::in_scratch(|| self.write(pending));
    }

    fn write(&mut self, pending: Vec<Pending>) {
        let started = Instant::now();
        // A body only stand-ins are sent goes to no outbox: not stored.
        let sent: Vec<bool> = pending
            .iter()
            .map(|p| self.members_sent(p).any(|m| m.role != Role::StandIn))
            .collect();
        let ids = store_bodies(&pending, &sent);
        self.steps.add("record.bodies", started.elapsed());
        let count: usize = pending.iter().map(|p| self.members_sent(p).count()).sum();
        let mut numbers = draw_numbers(count).into_iter();
        let mut outbox = Outbox::default();
        let mut carried = CarriedBy::default();
        let mut followed = FollowerMessages::default();
        for (index, (body, id)) in pending.iter().zip(ids).enumerate() {
            let epoch = self.epoch;
            let ids = self
                .members
                .cohorts
                .get(&body.cohort)
                .cloned()
                .unwrap_or_default();
            // The stand-in's number for this body, which its followers'
            // messages carry (it comes first in its cohort).
            let mut stand_in_sequence = None;
            for replica in ids {
                let Some(member) = self.members.members.get_mut(&replica) else {
                    continue;
                };
                if body.kind == Kind::End && !member.provision {
                    continue;
                }
                let sequence = numbers.next().expect("a number for every message") as u64;
                let head = next_head(epoch, member, sequence);
                let down = body.kind == Kind::Down;
                let follows = self.members.following.contains(&(body.cohort, replica));
                match (member.role, stand_in_sequence) {
                    (Role::StandIn, _) => {
                        stand_in_sequence = Some(sequence);
                        if down {
                            carried.message(
                                index as i32,
                                replica,
                                sequence,
                                member.provision,
                                false,
                            );
                        }
                        continue;
                    }
                    (_, Some(carrying)) if follows => {
                        followed.push(replica, carrying, sequence);
                    }
                    (role, _) if down => {
                        let begins = matches!(role, Role::BeginsFollowing(_));
                        carried.message(index as i32, replica, sequence, member.provision, begins);
                    }
                    _ => {}
                }
                outbox.push(replica, body.kind, &head, id);
            }
            self.recorded.bodies += i64::from(sent[index]);
            for row in &body.rows {
                carried.row(index as i32, row);
            }
        }
        self.recorded.messages += outbox.replica.len() as i64;
        let started = Instant::now();
        outbox.write();
        self.steps.add("record.outbox", started.elapsed());
        let started = Instant::now();
        carried.write(&self.members.journaled);
        followed.write();
        self.steps.add("record.held", started.elapsed());
    }

    /// The members a body is sent to.
    fn members_sent<'a>(&'a self, body: &'a Pending) -> impl Iterator<Item = &'a Member> + 'a {
        self.members
            .cohorts
            .get(&body.cohort)
            .into_iter()
            .flatten()
            .filter_map(|id| self.members.members.get(id))
            .filter(move |m| body.kind != Kind::End || m.provision)
    }

    /// Writes what waits, ends the snapshot of every member whose cohort had
    /// nothing to send, and moves every member's chain forward.
    fn finish(mut self) -> Recorded {
        let unended: Vec<i32> = self
            .members
            .cohorts
            .iter()
            .filter(|(_, ids)| ids.iter().any(|id| !self.members.members[id].ended))
            .map(|(cohort, _)| *cohort)
            .collect();
        for cohort in unended {
            self.end_cohort(cohort);
        }
        self.flush();
        let members = &self.members.members;
        write_chains(
            self.epoch,
            members.values().filter(|m| m.role != Role::StandIn),
        );
        write_stand_ins(
            self.epoch,
            members.values().filter(|m| m.role == Role::StandIn),
        );
        begin_following(members, &self.members.stand_ins);
        self.recorded.provisioned = members
            .values()
            .filter(|m| m.provision && m.role != Role::StandIn)
            .count() as i64;
        self.recorded
    }
}

/// The next message's head for a member: numbered, chained to its previous
/// message, with a nonce of its own, sealed.
fn next_head(epoch: &Epoch, member: &mut Member, sequence: u64) -> Head {
    let nonce = seal::draw_nonce();
    let mac = seal::seal(
        &epoch.secret,
        &Sealed {
            replica: member.replica,
            epoch: epoch.id,
            sequence,
            nonce,
        },
    );
    let head = Head {
        sequence,
        nonce,
        previous: member.previous,
        previous_nonce: member.previous_nonce,
        epoch: epoch.id,
        snapshot_id: member.snapshot,
        mac: mac.to_vec(),
    };
    member.first_sequence.get_or_insert(sequence);
    member.previous = sequence;
    member.previous_nonce = nonce;
    head
}

/// Stores the bodies `sent` says go to an outbox; answers each body's id (0
/// for one not stored).
fn store_bodies(pending: &[Pending], sent: &[bool]) -> Vec<i64> {
    let bytes: Vec<Vec<u8>> = pending
        .iter()
        .zip(sent)
        .filter(|(_, sent)| **sent)
        .map(|(p, _)| p.bytes.clone())
        .collect();
    let mut stored_ids = Vec::with_capacity(bytes.len());
    if !bytes.is_empty() {
        Spi::connect_mut(|client| {
            let stored = client
                .update(STORE_BODIES, None, &[bytes.into()])
                .unwrap_or_else(|e| Error::spi(STORE_BODIES, e).raise());
            stored_ids.extend(stored.map(|row| spi::column::<i64>(&row, 1, "sync.bodies.id")));
        });
    }
    let mut stored = stored_ids.into_iter();
    sent.iter()
        .map(|sent| match sent {
            true => stored.next().expect("an id for every body stored"),
            false => 0,
        })
        .collect()
}

/// Message numbers drawn from the sequence, in the order they are given.
fn draw_numbers(count: usize) -> Vec<i64> {
    let mut numbers = Vec::with_capacity(count);
    spi::for_each_chunk_with(
        "SELECT nextval('sync.message_numbers') FROM generate_series(1, $1)",
        &[(count as i64).into()],
        10_000,
        |row| spi::column::<i64>(row, 1, "a message number"),
        |chunk| numbers.extend(chunk),
    );
    numbers.sort_unstable();
    numbers
}

/// Messages for the outbox, written in one statement.
#[derive(Default)]
struct Outbox {
    replica: Vec<pgrx::Uuid>,
    position: Vec<i64>,
    id: Vec<String>,
    kind: Vec<String>,
    head: Vec<Vec<u8>>,
    body: Vec<i64>,
}

impl Outbox {
    fn push(&mut self, replica: Uuid, kind: Kind, head: &Head, body: i64) {
        self.replica.push(to_pg(replica));
        self.position.push(head.sequence as i64);
        self.id.push(head.transport_id());
        self.kind.push(kind.name().to_owned());
        self.head.push(head.encode());
        self.body.push(body);
    }

    fn write(self) {
        if self.replica.is_empty() {
            return;
        }
        spi::run_with(
            WRITE_OUTBOX,
            &[
                self.replica.into(),
                self.position.into(),
                self.id.into(),
                self.kind.into(),
                self.head.into(),
                self.body.into(),
            ],
        );
    }
}

/// The rows some bodies carry, and the messages that carry each body:
/// recorded as held, or leaving, in two statements.
#[derive(Default)]
struct CarriedBy {
    m_body: Vec<i32>,
    m_replica: Vec<pgrx::Uuid>,
    m_sequence: Vec<i64>,
    /// Whether the replica is being provisioned: it holds nothing yet.
    m_fresh: Vec<bool>,
    /// Whether it begins following its stand-in: it records no rows of
    /// journaled tables.
    m_follows: Vec<bool>,
    r_body: Vec<i32>,
    r_table: Vec<String>,
    r_key: Vec<String>,
    r_note: Vec<i64>,
    r_op: Vec<String>,
}

impl CarriedBy {
    fn message(&mut self, body: i32, replica: Uuid, sequence: u64, fresh: bool, follows: bool) {
        self.m_body.push(body);
        self.m_replica.push(to_pg(replica));
        self.m_sequence.push(sequence as i64);
        self.m_fresh.push(fresh);
        self.m_follows.push(follows);
    }

    fn row(&mut self, body: i32, row: &Carried) {
        self.r_body.push(body);
        self.r_table.push(row.table.clone());
        self.r_key.push(row.key.clone());
        self.r_note.push(row.note);
        // Keys recorded ('r') are no row sent: nothing is recorded of them.
        self.r_op.push(row.op.code().to_owned());
    }

    fn write(self, journaled: &[String]) {
        if self.r_body.is_empty() || self.m_body.is_empty() {
            return;
        }
        // Each statement reads every message and row given: run only those
        // that have something to do (provisioning has only fresh upserts).
        let fresh = self.m_fresh.iter().any(|f| *f);
        let known = self.m_fresh.iter().any(|f| !*f);
        let upserts = self.r_op.iter().any(|op| op == "u");
        let deletes = self.r_op.iter().any(|op| op == "d");
        let args = [
            self.m_body.into(),
            self.m_replica.into(),
            self.m_sequence.into(),
            self.r_body.into(),
            self.r_table.into(),
            self.r_key.into(),
            self.r_note.into(),
            self.r_op.into(),
            self.m_fresh.into(),
            self.m_follows.into(),
            journaled.to_vec().into(),
        ];
        // A replica being provisioned holds nothing yet: nothing to update.
        if upserts && fresh {
            spi::run_with(
                &format!(
                    "INSERT INTO sync.held_recorded (replica, table_name, key, note, sent) \
                     SELECT replica, table_name, key, note, sequence FROM ({CARRIED}) AS c \
                     WHERE op = 'u' AND fresh ORDER BY replica, table_name, key"
                ),
                &args,
            );
        }
        if upserts && known {
            spi::run_with(
                &format!(
                    "INSERT INTO sync.held_recorded (replica, table_name, key, note, sent) \
                     SELECT replica, table_name, key, note, sequence FROM ({CARRIED}) AS c \
                     WHERE op = 'u' AND NOT fresh ORDER BY replica, table_name, key \
                     ON CONFLICT (replica, table_name, key) DO UPDATE \
                     SET note = excluded.note, sent = excluded.sent, leaving = NULL"
                ),
                &args,
            );
        }
        if deletes && known {
            spi::run_with(
                &format!(
                    "UPDATE sync.held_recorded h SET leaving = c.sequence, note = c.note \
                     FROM ({CARRIED}) AS c \
                     WHERE c.op = 'd' AND h.replica = c.replica \
                       AND h.table_name = c.table_name AND h.key = c.key"
                ),
                &args,
            );
        }
    }
}

fn write_chains<'a>(epoch: &Epoch, members: impl Iterator<Item = &'a Member>) {
    let mut id = Vec::new();
    let mut last_sequence = Vec::new();
    let mut last_nonce = Vec::new();
    let mut snapshot_id = Vec::new();
    let mut snapshot_sequence = Vec::new();
    for member in members {
        id.push(to_pg(member.replica));
        last_sequence.push(member.previous as i64);
        last_nonce.push(member.previous_nonce as i64);
        snapshot_id.push(member.snapshot.map(to_pg));
        snapshot_sequence.push(member.snapshot.and(member.first_sequence).map(|s| s as i64));
    }
    if id.is_empty() {
        return;
    }
    spi::run_with(
        ADVANCE_CHAINS,
        &[
            to_pg(epoch.id).into(),
            id.into(),
            last_sequence.into(),
            last_nonce.into(),
            snapshot_id.into(),
            snapshot_sequence.into(),
        ],
    );
}

/// Which of its messages carried each stand-in message, for every follower
/// sent one.
#[derive(Default)]
struct FollowerMessages {
    replica: Vec<pgrx::Uuid>,
    stand_in_sequence: Vec<i64>,
    sequence: Vec<i64>,
}

impl FollowerMessages {
    fn push(&mut self, replica: Uuid, stand_in_sequence: u64, sequence: u64) {
        self.replica.push(to_pg(replica));
        self.stand_in_sequence.push(stand_in_sequence as i64);
        self.sequence.push(sequence as i64);
    }

    fn write(self) {
        if self.replica.is_empty() {
            return;
        }
        spi::run_with(
            FOLLOWER_MESSAGES,
            &[
                self.replica.into(),
                self.stand_in_sequence.into(),
                self.sequence.into(),
            ],
        );
    }
}

fn write_stand_ins<'a>(epoch: &Epoch, stand_ins: impl Iterator<Item = &'a Member>) {
    let mut id = Vec::new();
    let mut last_sequence = Vec::new();
    let mut last_nonce = Vec::new();
    for member in stand_ins {
        id.push(to_pg(member.replica));
        last_sequence.push(member.previous as i64);
        last_nonce.push(member.previous_nonce as i64);
    }
    if id.is_empty() {
        return;
    }
    spi::run_with(
        ADVANCE_STAND_INS,
        &[
            to_pg(epoch.id).into(),
            id.into(),
            last_sequence.into(),
            last_nonce.into(),
        ],
    );
}

/// The replicas provisioned beside their stand-in follow it from now.
fn begin_following(
    members: &BTreeMap<Uuid, Member>,
    stand_ins: &BTreeMap<Uuid, (Option<String>, u64)>,
) {
    let mut replica = Vec::new();
    let mut stand_in = Vec::new();
    let mut since = Vec::new();
    let mut since_sequence = Vec::new();
    for member in members.values() {
        let Role::BeginsFollowing(followed) = member.role else {
            continue;
        };
        // Its last message after the pass: the pass's, if it was sent any.
        let Some(last) = members
            .get(&followed)
            .map(|stand| stand.previous)
            .or_else(|| stand_ins.get(&followed).map(|(_, last)| *last))
        else {
            continue;
        };
        replica.push(to_pg(member.replica));
        stand_in.push(to_pg(followed));
        since.push(last as i64);
        since_sequence.push(member.previous as i64);
    }
    if replica.is_empty() {
        return;
    }
    spi::run_with(
        BEGIN_FOLLOWING,
        &[
            replica.into(),
            stand_in.into(),
            since.into(),
            since_sequence.into(),
        ],
    );
}

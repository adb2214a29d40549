//! Step 3 of a pass: the plan packed into messages, numbered, sealed and
//! written to each replica's outbox, with what they carry recorded as held
//! (or leaving), all in the pass's transaction.
//!
//! Replicas whose plans are the same (every replica, for a change to a
//! broadcast table) form a cohort: the cohort's rows are packed once into
//! bodies stored once, and each replica's messages are its own heads in
//! front of those bodies.

use pgrx::prelude::*;
use uuid::Uuid;

use magic_sync_proto::limits::Limits;

use crate::catalog::Declared;
use crate::db::{self, from_pg, to_pg};
use crate::envelope::{self, Head, Kind};
use crate::pack::{Op, Packer};
use crate::seal::{self, Sealed};

/// The epoch messages are numbered and sealed in.
pub struct Epoch {
    pub id: Uuid,
    pub secret: Vec<u8>,
}

/// What recording wrote.
#[derive(Debug, Default)]
pub struct Recorded {
    pub messages: i64,
    pub bodies: i64,
    pub provisioned: i64,
    pub too_large: Vec<String>,
}

/// Replicas with the same plan share a cohort.
const COHORTS: &str = "\
    CREATE TEMP TABLE sync_pass_cohorts ON COMMIT DROP AS \
    SELECT r.id AS replica, r.provision, \
           (dense_rank() OVER (ORDER BY r.provision, coalesce(s.n, 0), s.h1, s.h2))::int AS cohort \
    FROM sync_pass_replicas r \
    LEFT JOIN (SELECT replica, count(*) AS n, \
                      sum(hashtextextended(table_name || '/' || op || '/' || key, 0)::numeric) AS h1, \
                      bit_xor(hashtextextended(table_name || '/' || op || '/' || key, 1)) AS h2 \
               FROM sync_pass_plan GROUP BY replica) AS s ON s.replica = r.id \
    WHERE r.provision OR s.n > 0";

/// Each cohort's rows in the order they are applied: deletes children
/// first, then upserts parents first.
const COHORT_ROWS: &str = "\
    CREATE TEMP TABLE sync_pass_cohort_rows ON COMMIT DROP AS \
    SELECT c.cohort, \
           row_number() OVER (PARTITION BY c.cohort ORDER BY p.op, \
               CASE WHEN p.op = 'd' THEN -t.position ELSE t.position END, p.key) AS ord, \
           p.table_name, p.op, p.key, p.note \
    FROM (SELECT cohort, (array_agg(replica ORDER BY replica))[1] AS replica \
          FROM sync_pass_cohorts GROUP BY cohort) AS c \
    JOIN sync_pass_plan p ON p.replica = c.replica \
    JOIN sync.tables t ON t.name = p.table_name";

const ROWS_TO_PACK: &str = "\
    SELECT r.cohort, r.ord, r.table_name, r.op, r.key, w.bytes \
    FROM sync_pass_cohort_rows r \
    LEFT JOIN sync_pass_rows w ON w.table_name = r.table_name AND w.key = r.key \
    ORDER BY r.cohort, r.ord";

const PASS_TABLES: &str = "\
    CREATE TEMP TABLE sync_pass_bodies ( \
        cohort int NOT NULL, body_index int NOT NULL, first_ord bigint NOT NULL, \
        PRIMARY KEY (cohort, first_ord)) ON COMMIT DROP; \
    CREATE TEMP TABLE sync_pass_messages ( \
        cohort int NOT NULL, replica uuid NOT NULL, body_index int NOT NULL, \
        sequence bigint NOT NULL) ON COMMIT DROP; \
    CREATE TEMP TABLE sync_pass_refused (cohort int NOT NULL, ord bigint NOT NULL) ON COMMIT DROP";

/// Which message carried each planned row, for every replica of its cohort.
const CARRIED: &str = "\
    CREATE TEMP TABLE sync_pass_carried ON COMMIT DROP AS \
    SELECT m.replica, r.table_name, r.key, r.op, r.note, m.sequence \
    FROM sync_pass_cohort_rows r \
    CROSS JOIN LATERAL (SELECT b.body_index FROM sync_pass_bodies b \
                        WHERE b.cohort = r.cohort AND b.first_ord <= r.ord \
                        ORDER BY b.first_ord DESC LIMIT 1) AS b \
    JOIN sync_pass_messages m ON m.cohort = r.cohort AND m.body_index = b.body_index \
    WHERE NOT EXISTS (SELECT 1 FROM sync_pass_refused x WHERE x.cohort = r.cohort AND x.ord = r.ord)";

/// A replica provisioned again holds nothing the server knows of until its
/// snapshot's rows are recorded.
const FORGET_PROVISIONED: &str = "\
    DELETE FROM sync.held h USING sync_pass_cohorts c WHERE c.provision AND h.replica = c.replica";

const RECORD_UPSERTS: &str = "\
    INSERT INTO sync.held (replica, table_name, key, note, sent) \
    SELECT replica, table_name, key, note, sequence FROM sync_pass_carried WHERE op = 'u' \
    ON CONFLICT (replica, table_name, key) DO UPDATE \
    SET note = excluded.note, sent = excluded.sent, leaving = NULL";

const RECORD_DELETES: &str = "\
    UPDATE sync.held h SET leaving = c.sequence, note = c.note \
    FROM sync_pass_carried c \
    WHERE c.op = 'd' AND h.replica = c.replica AND h.table_name = c.table_name AND h.key = c.key";

const WRITE_OUTBOX: &str = "\
    INSERT INTO sync.outbox (replica, position, id, kind, head, body) \
    SELECT * FROM unnest($1::uuid[], $2::bigint[], $3::text[], $4::text[], $5::bytea[], $6::bigint[])";

const WRITE_MESSAGES: &str = "\
    INSERT INTO sync_pass_messages (cohort, replica, body_index, sequence) \
    SELECT * FROM unnest($1::int[], $2::uuid[], $3::int[], $4::bigint[])";

const WRITE_BODIES: &str = "\
    INSERT INTO sync_pass_bodies (cohort, body_index, first_ord) \
    SELECT * FROM unnest($1::int[], $2::int[], $3::bigint[])";

const ADVANCE_CHAINS: &str = "\
    UPDATE sync.replicas s SET epoch = $1, last_sequence = u.last_sequence, \
        last_nonce = u.last_nonce, provision = false, \
        snapshot_id = coalesce(u.snapshot_id, s.snapshot_id), \
        snapshot_sequence = coalesce(u.snapshot_sequence, s.snapshot_sequence) \
    FROM unnest($2::uuid[], $3::bigint[], $4::bigint[], $5::uuid[], $6::bigint[]) \
         AS u(id, last_sequence, last_nonce, snapshot_id, snapshot_sequence) \
    WHERE s.id = u.id";

/// A body written to sync.bodies, and where its rows begin in its cohort.
struct Body {
    cohort: i32,
    index: i32,
    first_ord: i64,
    id: i64,
}

/// One replica of a cohort, and where its chain stands.
struct Member {
    cohort: i32,
    replica: Uuid,
    provision: bool,
    last_sequence: i64,
    last_nonce: i64,
}

/// Packs, numbers, seals and records every cohort's messages.
pub fn record(tables: &[Declared], epoch: &Epoch, limits: Limits) -> Recorded {
    db::run(COHORTS);
    db::run(COHORT_ROWS);
    db::run(PASS_TABLES);
    let mut recorded = Recorded::default();
    let bodies = pack_bodies(limits, &mut recorded);
    write_bodies(&bodies);
    let end = end_of_snapshot_body(tables);
    let members = members();
    recorded.provisioned = members.iter().filter(|m| m.provision).count() as i64;
    recorded.bodies = bodies.len() as i64 + i64::from(recorded.provisioned > 0);
    recorded.messages = write_messages(&members, &bodies, end, epoch);
    db::run(CARRIED);
    db::run(FORGET_PROVISIONED);
    db::run(RECORD_UPSERTS);
    db::run(RECORD_DELETES);
    recorded
}

/// A planned row, read from the cursor.
struct Planned {
    cohort: i32,
    ord: i64,
    table: String,
    op: Op,
    key: String,
    bytes: Option<Vec<u8>>,
}

/// Reads every cohort's rows a chunk at a time and packs them into bodies,
/// stored once each.
fn pack_bodies(limits: Limits, recorded: &mut Recorded) -> Vec<Body> {
    let mut bodies = Vec::new();
    let mut refused: Vec<(i32, i64)> = Vec::new();
    Spi::connect_mut(|client| {
        let mut cursor = client.open_cursor(ROWS_TO_PACK, &[]);
        let mut current: Option<(i32, Packer, i64)> = None;
        loop {
            let chunk: Vec<Planned> = cursor
                .fetch(1000)
                .expect("reads the planned rows")
                .map(|row| Planned {
                    cohort: row.get(1).ok().flatten().unwrap_or_default(),
                    ord: row.get(2).ok().flatten().unwrap_or_default(),
                    table: row.get(3).ok().flatten().unwrap_or_default(),
                    op: match row.get::<String>(4).ok().flatten().as_deref() {
                        Some("d") => Op::Delete,
                        _ => Op::Upsert,
                    },
                    key: row.get(5).ok().flatten().unwrap_or_default(),
                    bytes: row.get(6).ok().flatten(),
                })
                .collect();
            if chunk.is_empty() {
                break;
            }
            for row in chunk {
                if current
                    .as_ref()
                    .is_none_or(|(cohort, _, _)| *cohort != row.cohort)
                {
                    if let Some((cohort, packer, first)) = current.take() {
                        finish_cohort(client, &mut bodies, cohort, packer, first);
                    }
                    current = Some((row.cohort, Packer::new(limits), row.ord));
                }
                let (cohort, packer, first) = current.as_mut().expect("a cohort being packed");
                if row.op == Op::Upsert && row.bytes.is_none() {
                    // Gone since the plan read it: nothing to send.
                    refused.push((row.cohort, row.ord));
                    continue;
                }
                match packer.push(&row.table, row.op, row.key, row.bytes) {
                    Ok(Some(full)) => {
                        let id = store_body(client, envelope::down_body(full));
                        bodies.push(Body {
                            cohort: *cohort,
                            index: next_index(&bodies, *cohort),
                            first_ord: *first,
                            id,
                        });
                        *first = row.ord;
                    }
                    Ok(None) => {}
                    Err(too_large) => {
                        pgrx::warning!("magic_sync: {too_large}; it is not sent");
                        recorded.too_large.push(too_large.to_string());
                        refused.push((row.cohort, row.ord));
                    }
                }
            }
        }
        if let Some((cohort, packer, first)) = current.take() {
            finish_cohort(client, &mut bodies, cohort, packer, first);
        }
    });
    write_refused(&refused);
    bodies
}

fn finish_cohort(
    client: &mut pgrx::spi::SpiClient<'_>,
    bodies: &mut Vec<Body>,
    cohort: i32,
    packer: Packer,
    first_ord: i64,
) {
    if let Some(last) = packer.finish() {
        let id = store_body(client, envelope::down_body(last));
        let index = next_index(bodies, cohort);
        bodies.push(Body {
            cohort,
            index,
            first_ord,
            id,
        });
    }
}

fn next_index(bodies: &[Body], cohort: i32) -> i32 {
    bodies.iter().filter(|b| b.cohort == cohort).count() as i32
}

fn store_body(client: &mut pgrx::spi::SpiClient<'_>, bytes: Vec<u8>) -> i64 {
    client
        .update(
            "INSERT INTO sync.bodies (bytes) VALUES ($1) RETURNING id",
            Some(1),
            &[bytes.into()],
        )
        .and_then(|t| t.first().get_one::<i64>())
        .expect("stores a body")
        .expect("a body's id")
}

fn write_refused(refused: &[(i32, i64)]) {
    if refused.is_empty() {
        return;
    }
    let cohorts: Vec<i32> = refused.iter().map(|r| r.0).collect();
    let ords: Vec<i64> = refused.iter().map(|r| r.1).collect();
    db::run_with(
        "INSERT INTO sync_pass_refused SELECT * FROM unnest($1::int[], $2::bigint[])",
        &[cohorts.into(), ords.into()],
    );
}

fn write_bodies(bodies: &[Body]) {
    if bodies.is_empty() {
        return;
    }
    db::run_with(
        WRITE_BODIES,
        &[
            bodies.iter().map(|b| b.cohort).collect::<Vec<_>>().into(),
            bodies.iter().map(|b| b.index).collect::<Vec<_>>().into(),
            bodies
                .iter()
                .map(|b| b.first_ord)
                .collect::<Vec<_>>()
                .into(),
        ],
    );
}

/// The EndSnapshot body every snapshot of this pass ends with: every table
/// the server sends, parents first. Stored only when a snapshot needs it.
fn end_of_snapshot_body(tables: &[Declared]) -> impl FnOnce() -> i64 + '_ {
    move || {
        let names = tables.iter().map(|t| t.name.clone()).collect();
        db::one::<i64>(
            "INSERT INTO sync.bodies (bytes) VALUES ($1) RETURNING id",
            &[envelope::end_body(names).into()],
        )
        .expect("stores the end of a snapshot")
    }
}

fn members() -> Vec<Member> {
    Spi::connect(|client| {
        client
            .select(
                "SELECT c.cohort, c.replica, c.provision, s.last_sequence, s.last_nonce \
                 FROM sync_pass_cohorts c JOIN sync.replicas s ON s.id = c.replica \
                 ORDER BY c.cohort, c.replica",
                None,
                &[],
            )
            .expect("reads the cohorts")
            .map(|row| Member {
                cohort: row.get(1).ok().flatten().unwrap_or_default(),
                replica: from_pg(row.get(2).ok().flatten().expect("a replica id")),
                provision: row.get(3).ok().flatten().unwrap_or_default(),
                last_sequence: row.get(4).ok().flatten().unwrap_or_default(),
                last_nonce: row.get(5).ok().flatten().unwrap_or_default(),
            })
            .collect()
    })
}

/// Message numbers drawn from the sequence, in the order they are given.
fn draw_numbers(count: usize) -> Vec<i64> {
    let mut numbers: Vec<i64> = Spi::connect(|client| {
        client
            .select(
                "SELECT nextval('sync.message_numbers') FROM generate_series(1, $1)",
                None,
                &[(count as i64).into()],
            )
            .expect("draws message numbers")
            .map(|row| row.get::<i64>(1).ok().flatten().expect("a number"))
            .collect()
    });
    numbers.sort_unstable();
    numbers
}

/// The outbox rows and chain updates of every member, written in batches.
#[derive(Default)]
struct Writes {
    replica: Vec<pgrx::Uuid>,
    position: Vec<i64>,
    id: Vec<String>,
    kind: Vec<String>,
    head: Vec<Vec<u8>>,
    body: Vec<i64>,
    m_cohort: Vec<i32>,
    m_replica: Vec<pgrx::Uuid>,
    m_index: Vec<i32>,
    m_sequence: Vec<i64>,
}

impl Writes {
    fn message(&mut self, member: &Member, kind: Kind, head: &Head, body: i64, index: Option<i32>) {
        self.replica.push(to_pg(member.replica));
        self.position.push(head.sequence as i64);
        self.id.push(head.transport_id());
        self.kind.push(kind.name().to_owned());
        self.head.push(head.encode());
        self.body.push(body);
        if let Some(index) = index {
            self.m_cohort.push(member.cohort);
            self.m_replica.push(to_pg(member.replica));
            self.m_index.push(index);
            self.m_sequence.push(head.sequence as i64);
        }
    }

    fn flush(&mut self) {
        let w = std::mem::take(self);
        if !w.replica.is_empty() {
            db::run_with(
                WRITE_OUTBOX,
                &[
                    w.replica.into(),
                    w.position.into(),
                    w.id.into(),
                    w.kind.into(),
                    w.head.into(),
                    w.body.into(),
                ],
            );
        }
        if !w.m_replica.is_empty() {
            db::run_with(
                WRITE_MESSAGES,
                &[
                    w.m_cohort.into(),
                    w.m_replica.into(),
                    w.m_index.into(),
                    w.m_sequence.into(),
                ],
            );
        }
    }
}

/// Numbers, chains and seals each member's messages and writes them to its
/// outbox. Answers how many it wrote.
fn write_messages(
    members: &[Member],
    bodies: &[Body],
    end: impl FnOnce() -> i64,
    epoch: &Epoch,
) -> i64 {
    let per_member = |m: &Member| {
        bodies.iter().filter(|b| b.cohort == m.cohort).count() + usize::from(m.provision)
    };
    let total: usize = members.iter().map(per_member).sum();
    if total == 0 {
        return 0;
    }
    let mut numbers = draw_numbers(total).into_iter();
    let mut end = Some(end);
    let mut end_body = None;
    let mut writes = Writes::default();
    let mut chains = Chains::default();
    for member in members {
        let snapshot = member.provision.then(Uuid::new_v4);
        let (mut previous, mut previous_nonce) = match snapshot {
            Some(_) => (0, 0),
            None => (member.last_sequence as u64, member.last_nonce as u64),
        };
        let mut first_sequence = None;
        let mut next_head = |numbers: &mut dyn Iterator<Item = i64>| {
            let sequence = numbers.next().expect("a number for every message") as u64;
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
                previous,
                previous_nonce,
                epoch: epoch.id,
                snapshot_id: snapshot,
                mac: mac.to_vec(),
            };
            first_sequence.get_or_insert(sequence);
            previous = sequence;
            previous_nonce = nonce;
            head
        };
        for body in bodies.iter().filter(|b| b.cohort == member.cohort) {
            let head = next_head(&mut numbers);
            writes.message(member, Kind::Down, &head, body.id, Some(body.index));
        }
        if member.provision {
            let body = *end_body.get_or_insert_with(|| (end.take().expect("stored once"))());
            let head = next_head(&mut numbers);
            writes.message(member, Kind::End, &head, body, None);
        }
        chains.push(member, previous, previous_nonce, snapshot, first_sequence);
        if writes.replica.len() >= 1000 {
            writes.flush();
        }
    }
    writes.flush();
    chains.write(epoch);
    total as i64
}

/// Where each member's chain stands after this pass.
#[derive(Default)]
struct Chains {
    id: Vec<pgrx::Uuid>,
    last_sequence: Vec<i64>,
    last_nonce: Vec<i64>,
    snapshot_id: Vec<Option<pgrx::Uuid>>,
    snapshot_sequence: Vec<Option<i64>>,
}

impl Chains {
    fn push(
        &mut self,
        member: &Member,
        last: u64,
        nonce: u64,
        snapshot: Option<Uuid>,
        first: Option<u64>,
    ) {
        self.id.push(to_pg(member.replica));
        self.last_sequence.push(last as i64);
        self.last_nonce.push(nonce as i64);
        self.snapshot_id.push(snapshot.map(to_pg));
        self.snapshot_sequence
            .push(snapshot.and(first).map(|s| s as i64));
    }

    fn write(self, epoch: &Epoch) {
        if self.id.is_empty() {
            return;
        }
        db::run_with(
            ADVANCE_CHAINS,
            &[
                to_pg(epoch.id).into(),
                self.id.into(),
                self.last_sequence.into(),
                self.last_nonce.into(),
                self.snapshot_id.into(),
                self.snapshot_sequence.into(),
            ],
        );
    }
}

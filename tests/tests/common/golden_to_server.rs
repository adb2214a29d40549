//! The server's side of the golden vectors of what replicas send up
//! (tests/golden/to_server.txt and to_server_verdicts.txt): the scene they
//! are played on, how a line is read, and how the server records a message
//! it sent. Shared by the program that writes them
//! (tests/examples/golden_to_server.rs) and the test that replays them
//! (tests/to_server_golden.rs), so both play the very same scene.
#![allow(dead_code)]

use magic_sync_proto::wire::{to_replica::Body, DownTable, ToReplica, Wish};
use postgres::Client;
use prost::Message;
use uuid::Uuid;

/// The server's epoch, and its secret (32 bytes, hex).
pub const EPOCH: &str = "01960000-0000-7000-8000-0000000000e1";
pub const SECRET: &str = "676f6c64656e20766563746f7273206f66207768617420676f6573207570212e";

/// The server's tables, as the header of each file says them.
pub const SERVER_SCHEMA: &str = "
    CREATE SCHEMA shop;
    CREATE TABLE shop.registers (id uuid PRIMARY KEY, active boolean NOT NULL DEFAULT true);
    CREATE TABLE shop.products (id uuid PRIMARY KEY, name text NOT NULL, price bigint NOT NULL,
                                updated_at timestamptz);
    CREATE TABLE shop.shelves (id uuid PRIMARY KEY, name text NOT NULL);
    CREATE TABLE shop.receipts (id uuid PRIMARY KEY, register_id uuid NOT NULL, product_id uuid,
                                shelf_id uuid, total bigint NOT NULL);
    CREATE TABLE shop.register_state (id uuid PRIMARY KEY, register_id uuid NOT NULL,
                                      note text NOT NULL DEFAULT '', battery integer);
    CREATE TABLE shop.footers (register_id uuid NOT NULL, id uuid NOT NULL, text text NOT NULL,
                               changed_at timestamptz NOT NULL, PRIMARY KEY (register_id, id));
    SELECT sync.declare_replicas('shop.registers', live => 'active');
    SELECT sync.declare_table('shop.products', sync => 'broadcast');
    SELECT sync.declare_table('shop.shelves', sync => 'broadcast');
    SELECT sync.declare_table('shop.receipts', mirror => 'record', origin => 'register_id');
    SELECT sync.declare_table('shop.register_state', mirror => 'both', sync => 'assigned(register_id)',
                              origin => 'register_id', replica_owned => '{battery}');
    SELECT sync.declare_table('shop.footers', mirror => 'setting', origin => 'register_id',
                              version => 'changed_at', desired => '{text}');
";

/// One line of a file: a name, what the other side makes of it, the
/// message in hex (empty for a line that carries none).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    pub name: String,
    pub verdict: String,
    pub hex: String,
}

impl Line {
    pub fn to_text(&self) -> String {
        format!("{}\t{}\t{}", self.name, self.verdict, self.hex)
    }
}

/// The lines of a file, its header left out.
pub fn read(text: &str) -> Vec<Line> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let mut fields = l.splitn(3, '\t');
            Line {
                name: fields.next().unwrap_or_default().to_owned(),
                verdict: fields.next().unwrap_or_default().to_owned(),
                hex: fields.next().unwrap_or_default().to_owned(),
            }
        })
        .collect()
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn unhex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex"))
        .collect()
}

/// What kind of line it is.
pub enum Kind {
    /// The lines after it are to and from this replica.
    Replica(Uuid),
    /// The server sent this message to the replica, and recorded it (or
    /// did not: its database has no record of it).
    Sent { recorded: bool, message: ToReplica },
    /// The replica sent this Up; the verdict is what the server made of it.
    Up {
        verdict: serde_json::Value,
        bytes: Vec<u8>,
    },
}

pub fn kind(line: &Line) -> Kind {
    if line.name == "replica" {
        return Kind::Replica(line.verdict.parse().expect("a replica's id"));
    }
    if line.verdict.starts_with("sent") {
        let message = ToReplica::decode(unhex(&line.hex).as_slice()).expect("a ToReplica");
        return Kind::Sent {
            recorded: !line.verdict.contains("not recorded"),
            message,
        };
    }
    Kind::Up {
        verdict: serde_json::from_str(&line.verdict).expect("a verdict in JSON"),
        bytes: unhex(&line.hex),
    }
}

/// A fresh database with the scene: the extension, the shop, the epoch and
/// its secret, and the replicas, live and known to the relay, with nothing
/// sent them yet.
pub fn set_the_scene(pg: &mut Client, replicas: &[Uuid]) {
    pg.batch_execute(SERVER_SCHEMA).expect("the shop");
    pg.batch_execute(&format!(
        "INSERT INTO sync.epochs (id, secret) VALUES ('{EPOCH}', '\\x{SECRET}')"
    ))
    .unwrap();
    for id in replicas {
        pg.execute("INSERT INTO shop.registers (id) VALUES ($1)", &[id])
            .unwrap();
        pg.execute(
            "INSERT INTO sync.replicas (id, live, provision) VALUES ($1, true, false)",
            &[id],
        )
        .unwrap();
    }
}

/// Records a message sent to a replica as the relay does (record.rs): the
/// rows it carries held as of it, what it lets go of leaving, its chain
/// moved on; a message that begins a snapshot forgets what the replica
/// held before. The rows it sends are the server's rows, and what it lets
/// go of the server deleted.
pub fn record_sent(pg: &mut Client, replica: Uuid, message: &ToReplica) {
    let (sequence, nonce, previous, snapshot, epoch) = match &message.body {
        Some(Body::Down(d)) => (
            d.sequence,
            d.nonce,
            d.previous,
            d.snapshot_id.clone(),
            d.epoch.clone(),
        ),
        Some(Body::EndSnapshot(e)) => (
            e.sequence,
            e.nonce,
            e.previous,
            e.snapshot_id.clone(),
            e.epoch.clone(),
        ),
        _ => return,
    };
    let (sequence, nonce) = (sequence as i64, nonce as i64);
    let epoch: Uuid = epoch.parse().unwrap();
    if previous == 0 {
        let snapshot: Uuid = snapshot.parse().unwrap();
        pg.execute(
            "DELETE FROM sync.held_recorded WHERE replica = $1",
            &[&replica],
        )
        .unwrap();
        pg.execute(
            "UPDATE sync.replicas SET snapshot_id = $2, snapshot_sequence = $3 WHERE id = $1",
            &[&replica, &snapshot, &sequence],
        )
        .unwrap();
    }
    if let Some(Body::Down(down)) = &message.body {
        for part in &down.tables {
            if part.table == "sync_wishes" {
                record_wishes_sent(pg, replica, part, sequence);
                continue;
            }
            let relation = format!("shop.{}", part.table);
            for key in &part.deletes {
                pg.execute(
                    "UPDATE sync.held_recorded SET leaving = $4 WHERE replica = $1 AND table_name = $2 AND key = $3",
                    &[&replica, &part.table, key, &sequence],
                )
                .unwrap();
                pg.execute(
                    &format!("DELETE FROM {relation} WHERE id = $1::text::uuid"),
                    &[key],
                )
                .unwrap();
            }
            for (key, row) in part.keys.iter().zip(&part.upserts) {
                let row: serde_json::Value = serde_json::from_slice(row).unwrap();
                pg.execute(
                    &format!("DELETE FROM {relation} WHERE id = $1::text::uuid"),
                    &[key],
                )
                .unwrap();
                pg.execute(
                    &format!("INSERT INTO {relation} SELECT * FROM jsonb_populate_record(NULL::{relation}, $1)"),
                    &[&row],
                )
                .unwrap();
                pg.execute(
                    "INSERT INTO sync.held_recorded (replica, table_name, key, note, sent) VALUES ($1, $2, $3, 0, $4) \
                     ON CONFLICT (replica, table_name, key) DO UPDATE SET sent = excluded.sent, leaving = NULL",
                    &[&replica, &part.table, key, &sequence],
                )
                .unwrap();
            }
        }
    }
    pg.execute(
        "UPDATE sync.replicas SET epoch = $2, last_sequence = $3, last_nonce = $4, provision = false WHERE id = $1",
        &[&replica, &epoch, &sequence, &nonce],
    )
    .unwrap();
}

/// Records a part of wishes sent to a replica: the wishes it sends are the
/// server's (written into sync.sync_wishes from the Wish each is, the
/// setting row it wants kept as its wished columns), held as of the
/// message; those it lets go of withdrawn, and leaving.
fn record_wishes_sent(pg: &mut Client, replica: Uuid, part: &DownTable, sequence: i64) {
    for key in &part.deletes {
        pg.execute(
            "UPDATE sync.held_recorded SET leaving = $4 WHERE replica = $1 AND table_name = $2 AND key = $3",
            &[&replica, &part.table, key, &sequence],
        )
        .unwrap();
        pg.execute(
            "DELETE FROM sync.sync_wishes WHERE id = $1::text::uuid",
            &[key],
        )
        .unwrap();
    }
    for (key, bytes) in part.keys.iter().zip(&part.upserts) {
        let wish = Wish::decode(bytes.as_slice()).expect("a Wish");
        let wanted: serde_json::Value = serde_json::from_slice(&wish.wanted).unwrap();
        pg.execute(
            "INSERT INTO sync.sync_wishes (id, replica, table_name, key, wanted, version, note) \
             VALUES ($1::text::uuid, $2, $3, $4, $5, $6, $7) \
             ON CONFLICT (id) DO UPDATE SET wanted = excluded.wanted, version = excluded.version, \
                 note = excluded.note",
            &[
                key,
                &replica,
                &wish.table,
                &wish.key,
                &wanted,
                &(wish.version as i64),
                &wish.note,
            ],
        )
        .unwrap();
        pg.execute(
            "INSERT INTO sync.held_recorded (replica, table_name, key, note, sent) VALUES ($1, $2, $3, 0, $4) \
             ON CONFLICT (replica, table_name, key) DO UPDATE SET sent = excluded.sent, leaving = NULL",
            &[&replica, &part.table, key, &sequence],
        )
        .unwrap();
    }
}

/// Files an Up from a replica; answers the verdict.
pub fn receive(pg: &mut Client, replica: Uuid, bytes: &[u8]) -> serde_json::Value {
    let text: String = pg
        .query_one("SELECT sync.receive($1, $2)::text", &[&replica, &bytes])
        .unwrap()
        .get(0);
    serde_json::from_str(&text).unwrap()
}

/// The replicas a file's lines name, in order.
pub fn replicas_of(lines: &[Line]) -> Vec<Uuid> {
    lines
        .iter()
        .filter_map(|l| match kind(l) {
            Kind::Replica(id) => Some(id),
            _ => None,
        })
        .collect()
}

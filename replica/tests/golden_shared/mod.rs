//! What the program writing the golden files and the test replaying them
//! share: the replica they run, how a verdict and a holding are written,
//! and the files' headers.
#![allow(dead_code)] // each side uses part of it

use magic_sync_replica::proto::wire::ToReplica;
use magic_sync_replica::{
    install, Apply, Direct, Error, Received, Replica, Settings, Table, Tables, Wishes,
};
use prost::Message;
use rusqlite::Connection;
use serde_json::{json, Value};
use tempfile::TempDir;

/// The replica's id in the golden runs.
pub const ME: &str = "01960000-0000-7000-8000-0000000000aa";
/// A message the server sent that never reached the replica.
pub const LOST: &str = "lost on the way";
/// Not a message: the replica writes a row of its own (the hex is its JSON).
pub const WRITES: &str = "writes";
/// The name replicas know the server's wishes by.
pub const WISHES: &str = "sync_wishes";

pub const SCHEMA: &str = "
    CREATE TABLE products (
        id         BLOB PRIMARY KEY,
        name       TEXT NOT NULL,
        price      INTEGER CHECK (price >= 0),
        updated_at TEXT,
        retired_at TEXT
    );
    CREATE TABLE receipts (
        id          TEXT PRIMARY KEY,
        register_id BLOB,
        product_id  BLOB REFERENCES products (id),
        total       INTEGER
    );
    CREATE TABLE footers (
        register_id BLOB PRIMARY KEY,
        text        TEXT NOT NULL,
        changed     INTEGER NOT NULL
    );
";

pub const TO_REPLICA_HEADER: &str = "\
# What the server sends one replica, step by step (the replica protocol,
# section 10), and what the replica makes of each message.
#
# Each line is: name TAB verdict TAB message, the message a ToReplica in hex.
# A line named `holds` follows every step: what the replica then holds, as
# JSON, table by table, rows by key; a retired row shows `\"retired\": true`
# in place of when it was retired.
#
# Verdicts: applied (a Down, committed), ended (an EndSnapshot, committed),
# filed (a Filed), already (at or below the last applied: nothing changes),
# gap (does not follow the last applied: nothing applied until a snapshot
# begins), lost on the way (the server sent it and the replica never got
# it: do not deliver it). `writes` is no message: the replica writes a row
# of its own, the hex being that row as JSON: a receipt, or (a row with a
# `text`) its footer.
#
# The replica holds (SQLite, foreign keys on):
#   products (id BLOB PRIMARY KEY, name TEXT NOT NULL,
#             price INTEGER CHECK (price >= 0), updated_at TEXT, retired_at TEXT)
#     declared a catalog, retired by retired_at, rows as JSON;
#   receipts (id TEXT PRIMARY KEY, register_id BLOB,
#             product_id BLOB REFERENCES products (id), total INTEGER)
#     declared a record of its own, origin register_id;
#   footers (register_id BLOB PRIMARY KEY, text TEXT NOT NULL,
#            changed INTEGER NOT NULL)
#     declared a setting, origin register_id, version changed, desired
#     text, apply always, rows as JSON; every wish of it is applied (a
#     handler that only writes the database);
#   sync_wishes, the engine's: the server's wishes (rows the Wish message,
#     keyed by id), each shown with the replica's answer (answered,
#     outcome, reason; when it answered is left out).
# Its id is 01960000-0000-7000-8000-0000000000aa.
#
# A wish is carried out once the message that brought it committed and no
# snapshot is in progress: its footer then shows the wished text, its
# version one more, and the wish its answer. The replica sends up nothing
# here, so an answer is never filed: a wish withdrawn is retired.
";

pub const MALFORMED_HEADER: &str = "\
# Messages no server sends, and the few that set the scene between them
# (the replica protocol, sections 4.0 and 10), each with what a replica
# makes of it.
#
# Each line is: name TAB verdict TAB message, the message in hex. Deliver
# the lines in order to one replica. A malformed line is named after its
# case; the replica applies none of it, changes nothing, and acknowledges
# it. `unacknowledged` (a later protocol) is not acted on nor acknowledged.
# Scene setters and the row-level cases are applied (a row's own faults are
# the row's, not the message's): applied, ended.
#
# The replica holds the tables of to_replica.txt (products, a catalog;
# receipts, its own; footers, a setting) and takes up to 500 rows, tables
# or uploads a message.
";

/// A replica in a fresh directory, as the golden runs hold it.
pub struct Run {
    _dir: TempDir,
    pub replica: Replica,
}

pub fn tables() -> Tables {
    Tables::new(vec![
        Table::catalog("products").retired("retired_at"),
        Table::record("receipts").origin("register_id"),
        Table::setting("footers")
            .origin("register_id")
            .version("changed")
            .desired(&["text"])
            .apply(Apply::Always),
    ])
}

/// How the golden runs open the replica: every wish of a footer applied.
pub fn settings() -> Settings {
    Settings {
        wishes: Wishes::new().on("footers", Direct),
        ..Settings::default()
    }
}

impl Run {
    pub fn new() -> Run {
        let dir = tempfile::tempdir().unwrap();
        let mut conn = Connection::open(dir.path().join("golden.db")).unwrap();
        conn.execute_batch("PRAGMA recursive_triggers = ON; PRAGMA foreign_keys = ON;")
            .unwrap();
        conn.execute_batch(SCHEMA).unwrap();
        install(&mut conn, &tables()).unwrap();
        let me = uuid::Uuid::parse_str(ME).unwrap();
        let replica = Replica::open(conn, tables(), me, settings()).unwrap();
        Run { _dir: dir, replica }
    }

    /// Delivers a message: what the replica made of it.
    pub fn deliver(&mut self, bytes: &[u8]) -> String {
        verdict(self.replica.receive(bytes))
    }

    /// The replica writes a receipt, or its footer (a row with a `text`),
    /// given as JSON.
    pub fn write(&mut self, json: &[u8]) {
        let row: Value = serde_json::from_slice(json).unwrap();
        let uuid = |v: &Value| {
            uuid::Uuid::parse_str(v.as_str().unwrap())
                .unwrap()
                .as_bytes()
                .to_vec()
        };
        if let Some(text) = row.get("text") {
            self.replica
                .connection()
                .execute(
                    "INSERT INTO footers (register_id, text, changed) VALUES (?1, ?2, ?3)
                     ON CONFLICT (register_id) DO UPDATE
                     SET text = excluded.text, changed = excluded.changed",
                    rusqlite::params![
                        uuid(&row["register_id"]),
                        text.as_str().unwrap(),
                        row["changed"].as_str().unwrap().parse::<i64>().unwrap()
                    ],
                )
                .unwrap();
            return;
        }
        self.replica
            .connection()
            .execute(
                "INSERT INTO receipts (id, register_id, product_id, total) VALUES (?1, ?2, ?3, ?4)",
                rusqlite::params![
                    row["id"].as_str().unwrap(),
                    uuid(&row["register_id"]),
                    uuid(&row["product_id"]),
                    row["total"].as_str().unwrap().parse::<i64>().unwrap()
                ],
            )
            .unwrap();
    }

    /// What the replica holds, as one line of JSON.
    pub fn holds(&self) -> String {
        let conn = self.replica.connection();
        let products = rows(
            conn,
            "SELECT lower(hex(id)), name, price, updated_at, retired_at IS NOT NULL FROM products ORDER BY id",
            |r| {
                let mut row = json!({
                    "id": hyphenate(&r.get::<_, String>(0)?),
                    "name": r.get::<_, String>(1)?,
                    "price": r.get::<_, i64>(2)?.to_string(),
                    "updated_at": r.get::<_, Option<String>>(3)?,
                });
                if r.get::<_, bool>(4)? {
                    row["retired"] = json!(true);
                }
                Ok(row)
            },
        );
        let receipts = rows(
            conn,
            "SELECT id, lower(hex(register_id)), lower(hex(product_id)), total FROM receipts ORDER BY id",
            |r| {
                Ok(json!({
                    "id": r.get::<_, String>(0)?,
                    "register_id": hyphenate(&r.get::<_, String>(1)?),
                    "product_id": hyphenate(&r.get::<_, String>(2)?),
                    "total": r.get::<_, i64>(3)?.to_string(),
                }))
            },
        );
        let footers = rows(
            conn,
            "SELECT lower(hex(register_id)), text, changed FROM footers ORDER BY register_id",
            |r| {
                Ok(json!({
                    "register_id": hyphenate(&r.get::<_, String>(0)?),
                    "text": r.get::<_, String>(1)?,
                    "changed": r.get::<_, i64>(2)?.to_string(),
                }))
            },
        );
        let wishes = rows(
            conn,
            "SELECT id, table_name, key, version, answered, outcome, reason, retired_at IS NOT NULL
             FROM sync_wishes ORDER BY id",
            |r| {
                let mut row = json!({
                    "id": r.get::<_, String>(0)?,
                    "table": r.get::<_, String>(1)?,
                    "key": r.get::<_, String>(2)?,
                    "version": r.get::<_, i64>(3)?.to_string(),
                    "answered": r.get::<_, i64>(4)?.to_string(),
                    "outcome": r.get::<_, String>(5)?,
                    "reason": r.get::<_, String>(6)?,
                });
                if r.get::<_, bool>(7)? {
                    row["retired"] = json!(true);
                }
                Ok(row)
            },
        );
        json!({"products": products, "receipts": receipts, "footers": footers, WISHES: wishes})
            .to_string()
    }
}

fn rows(
    conn: &Connection,
    sql: &str,
    row: impl Fn(&rusqlite::Row<'_>) -> rusqlite::Result<Value>,
) -> Vec<Value> {
    let mut statement = conn.prepare(sql).unwrap();
    let found = statement
        .query_map([], |r| row(r))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    found
}

fn hyphenate(hex: &str) -> String {
    uuid::Uuid::parse_str(hex).unwrap().hyphenated().to_string()
}

/// What the replica made of a message, as a golden file says it.
pub fn verdict(received: Result<Received, Error>) -> String {
    match received {
        Ok(Received::Applied { .. }) => "applied".into(),
        Ok(Received::Ended { .. }) => "ended".into(),
        Ok(Received::Filed { .. }) => "filed".into(),
        Ok(Received::Already { .. }) => "already".into(),
        Ok(Received::Gap { .. }) => "gap".into(),
        Ok(Received::Malformed(m)) => format!("malformed ({})", m.case),
        Err(Error::LaterProtocol { .. }) => "unacknowledged".into(),
        Err(e) => format!("failed: {e}"),
    }
}

/// A UUID for the golden runs: the same every time for the same `n`.
pub fn id(n: u128) -> String {
    uuid::Uuid::from_u128(0x0196_0000_0000_7000_8000_0000_0000_0000 + n)
        .hyphenated()
        .to_string()
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn unhex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
        .collect()
}

/// Whether the bytes are a ToReplica at all (for the replay's sanity).
pub fn decodes(bytes: &[u8]) -> bool {
    ToReplica::decode(bytes).is_ok_and(|m| m.body.is_some())
}

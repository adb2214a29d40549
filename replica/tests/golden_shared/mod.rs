//! What the program writing the golden files and the test replaying them
//! share: the replica they run, how a verdict and a holding are written,
//! and the files' headers.
#![allow(dead_code)] // each side uses part of it

use magic_sync_replica::proto::wire::ToReplica;
use magic_sync_replica::{install, Error, Received, Replica, Settings, Table, Tables};
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
# of its own, the hex being that receipt as JSON.
#
# The replica holds (SQLite, foreign keys on):
#   products (id BLOB PRIMARY KEY, name TEXT NOT NULL,
#             price INTEGER CHECK (price >= 0), updated_at TEXT, retired_at TEXT)
#     declared a catalog, retired by retired_at, rows as JSON;
#   receipts (id TEXT PRIMARY KEY, register_id BLOB,
#             product_id BLOB REFERENCES products (id), total INTEGER)
#     declared a record of its own, origin register_id.
# Its id is 01960000-0000-7000-8000-0000000000aa.
#
# The steps of a wish of a setting and its withdrawal are not here yet:
# wishes come with settings in a later build.
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
# receipts, its own) and takes up to 500 rows, tables or uploads a message.
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
    ])
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
        let replica = Replica::open(conn, tables(), me, Settings::default()).unwrap();
        Run { _dir: dir, replica }
    }

    /// Delivers a message: what the replica made of it.
    pub fn deliver(&mut self, bytes: &[u8]) -> String {
        verdict(self.replica.receive(bytes))
    }

    /// The replica writes a receipt given as JSON.
    pub fn write(&mut self, json: &[u8]) {
        let row: Value = serde_json::from_slice(json).unwrap();
        let uuid = |v: &Value| {
            uuid::Uuid::parse_str(v.as_str().unwrap())
                .unwrap()
                .as_bytes()
                .to_vec()
        };
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
        json!({"products": products, "receipts": receipts}).to_string()
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

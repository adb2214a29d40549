//! The replica's figures, measured side by side in one run (the machines
//! are shared and noisy: read the ratios):
//!
//!     cargo run --release -p magic_sync_replica --example bench
//!
//! 1. A snapshot of 1,000,000 small JSON rows applied to a file-backed
//!    database with synchronous FULL, in messages of 500 rows, against a
//!    plain rusqlite loop inserting the same rows with one prepared
//!    statement in one transaction.
//! 2. 10,000 messages of one row each.
//! 3. Building, sending and filing uploads of 100,000 noted rows.

use std::path::Path;
use std::time::Instant;

#[allow(unused_imports)]
use magic_sync_replica::proto::wire::{
    to_replica::Body, Down, DownTable, EndSnapshot, Filed, ToReplica,
};
use magic_sync_replica::proto::PROTOCOL;
use magic_sync_replica::{install, Received, Replica, Settings, Table, Tables};
use prost::Message;
use rusqlite::Connection;

/// Rows of the snapshot (`BENCH_ROWS` to try fewer).
fn rows_wanted() -> usize {
    std::env::var("BENCH_ROWS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1_000_000)
}

const PER_MESSAGE: usize = 500;
const SMALL_MESSAGES: usize = 10_000;
const NOTED: usize = 100_000;
const EPOCH: &str = "0196a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b";
const SNAPSHOT: &str = "0196a1b2-c3d4-7e5f-8a9b-000000000001";

const SCHEMA: &str = "
    CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL, qty INTEGER NOT NULL);
    CREATE TABLE counts (id INTEGER PRIMARY KEY, register_id BLOB, qty INTEGER NOT NULL);
";

fn tables() -> Tables {
    Tables::new(vec![
        Table::catalog("items"),
        Table::record("counts").origin("register_id"),
    ])
}

fn connect(path: &Path) -> Connection {
    let conn = Connection::open(path).unwrap();
    conn.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA recursive_triggers = ON; PRAGMA foreign_keys = ON;",
    )
    .unwrap();
    conn
}

fn open(path: &Path) -> Replica {
    let mut conn = connect(path);
    conn.execute_batch(SCHEMA).unwrap();
    install(&mut conn, &tables()).unwrap();
    Replica::open(
        conn,
        tables(),
        uuid::Uuid::from_u128(0xaa),
        Settings::default(),
    )
    .unwrap()
}

fn row(i: usize) -> (String, Vec<u8>) {
    let key = i.to_string();
    let json = format!(r#"{{"id":"{i}","name":"item {i}","qty":"{}"}}"#, i % 97);
    (key, json.into_bytes())
}

/// A chain of messages: `Down`s of `per` rows each, the first beginning a
/// snapshot when `snapshot`, then its end.
struct Chain {
    sequence: u64,
    snapshot: bool,
}

impl Chain {
    fn message(&mut self, rows: std::ops::Range<usize>) -> Vec<u8> {
        let sequence = self.sequence + 1;
        let mut part = DownTable {
            table: "items".into(),
            ..DownTable::default()
        };
        for i in rows {
            let (key, bytes) = row(i);
            part.keys.push(key);
            part.upserts.push(bytes);
        }
        let down = Down {
            sequence,
            nonce: sequence * 7,
            previous: self.sequence,
            previous_nonce: self.sequence * 7,
            epoch: EPOCH.into(),
            snapshot_id: if self.snapshot {
                SNAPSHOT.into()
            } else {
                String::new()
            },
            mac: vec![1; 16],
            tables: vec![part],
        };
        self.sequence = sequence;
        ToReplica {
            protocol: PROTOCOL,
            body: Some(Body::Down(down)),
        }
        .encode_to_vec()
    }

    fn end(&mut self) -> Vec<u8> {
        let sequence = self.sequence + 1;
        let end = EndSnapshot {
            sequence,
            nonce: sequence * 7,
            previous: self.sequence,
            previous_nonce: self.sequence * 7,
            epoch: EPOCH.into(),
            snapshot_id: SNAPSHOT.into(),
            mac: vec![1; 16],
            tables: vec!["items".into()],
        };
        self.sequence = sequence;
        self.snapshot = false;
        ToReplica {
            protocol: PROTOCOL,
            body: Some(Body::EndSnapshot(end)),
        }
        .encode_to_vec()
    }
}

fn rate(n: usize, seconds: f64) -> f64 {
    n as f64 / seconds
}

#[allow(non_snake_case, unused)]
fn main() {
    let dir = tempfile::tempdir().unwrap();
    let ROWS = rows_wanted();
    let mut chain = Chain {
        sequence: 0,
        snapshot: true,
    };
    let messages: Vec<Vec<u8>> = (0..ROWS)
        .step_by(PER_MESSAGE)
        .map(|start| chain.message(start..(start + PER_MESSAGE).min(ROWS)))
        .collect();
    let end = chain.end();
    let mut replica = open(&dir.path().join("replica.db"));
    if let Ok(n) = std::env::var("CKPT") {
        replica
            .connection()
            .execute_batch(&format!("PRAGMA wal_autocheckpoint = {n}"))
            .unwrap();
    }
    if let Ok(n) = std::env::var("CACHE") {
        replica
            .connection()
            .execute_batch(&format!("PRAGMA cache_size = {n}"))
            .unwrap();
    }
    if std::env::var("NOSYNC").is_ok() {
        replica
            .connection()
            .execute_batch("PRAGMA synchronous = NORMAL")
            .unwrap();
    }
    let cpu0 = cpu();
    let started = Instant::now();
    for message in &messages {
        let received = replica.receive(message).unwrap();
        assert!(matches!(received, Received::Applied { .. }), "{received:?}");
    }
    let downs = started.elapsed().as_secs_f64();
    let received = replica.receive(&end).unwrap();
    assert!(matches!(received, Received::Ended { .. }));
    let snapshot = started.elapsed().as_secs_f64();

    if std::env::var("FRAMES").is_ok() {
        let (b, l, c): (i64, i64, i64) = replica
            .connection()
            .query_row("PRAGMA wal_checkpoint", [], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .unwrap();
        println!(
            "wal frames: busy {b} log {l} checkpointed {c} per message {:.1}",
            l as f64 / messages.len() as f64
        );
    }
    println!("cpu {:.3}", cpu() - cpu0);
    println!(
        "downs {downs:.3} total {snapshot:.3} rate {:.0}",
        rate(ROWS, snapshot)
    );
    let _ = (
        SMALL_MESSAGES,
        NOTED,
        Filed::default(),
        Path::new(""),
        rusqlite::params![1],
    );
}

fn cpu() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    let utime: f64 = fields[11].parse().unwrap();
    let stime: f64 = fields[12].parse().unwrap();
    if std::env::var("SYS").is_ok() {
        return stime / 100.0;
    }
    (utime + stime) / 100.0
}

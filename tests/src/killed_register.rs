//! The register of the tests that kill it (tests/tests/crash_loops.rs over
//! the queue, tests/tests/nats_fault_loop.rs over NATS): its SQLite file's
//! schema, opened as its program opens it, and a receipt written. Its
//! device programs are tests/src/bin/crash_register.rs and
//! nats_register.rs; the server's half of the shop is `SERVER_SCHEMA`.

use std::path::Path;

use magic_sync_replica::{install, Replica, Settings, Table, Tables};
use rusqlite::Connection;
use uuid::Uuid;

/// The head office's half: registers, products sent to every live one,
/// receipts each register writes.
pub const SERVER_SCHEMA: &str = "
    CREATE SCHEMA shop;
    CREATE TABLE shop.registers (id uuid PRIMARY KEY, active boolean NOT NULL DEFAULT true);
    CREATE TABLE shop.products (id uuid PRIMARY KEY, name text NOT NULL, price_cents bigint NOT NULL);
    CREATE TABLE shop.receipts (id uuid PRIMARY KEY, register_id uuid NOT NULL, total_cents bigint NOT NULL);
    SELECT sync.declare_replicas('shop.registers', live => 'active');
    SELECT sync.declare_table('shop.products', sync => 'broadcast');
    SELECT sync.declare_table('shop.receipts', mirror => 'record', origin => 'register_id');
";

/// The register's half: products from the head office, receipts of its own.
pub const SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS products (
        id BLOB PRIMARY KEY NOT NULL, name TEXT NOT NULL, price_cents INTEGER NOT NULL);
    CREATE TABLE IF NOT EXISTS receipts (
        id BLOB PRIMARY KEY NOT NULL, register_id BLOB NOT NULL, total_cents INTEGER NOT NULL);
";

pub fn tables() -> Tables {
    Tables::new(vec![
        Table::catalog("products"),
        Table::record("receipts").origin("register_id"),
    ])
}

/// The register's file, opened as its program opens it: WAL, every commit
/// synced, the engine's tables installed.
pub fn connect(file: &Path) -> Connection {
    let mut conn = Connection::open(file).expect("opens the register's file");
    conn.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; \
         PRAGMA foreign_keys = ON; PRAGMA recursive_triggers = ON; \
         PRAGMA busy_timeout = 10000;",
    )
    .expect("sets the pragmas");
    conn.execute_batch(SCHEMA).expect("the register's schema");
    install(&mut conn, &tables()).expect("installs the engine's tables");
    conn
}

pub fn open(file: &Path, me: Uuid) -> Replica {
    open_with(file, me, Settings::default())
}

pub fn open_with(file: &Path, me: Uuid, settings: Settings) -> Replica {
    Replica::open(connect(file), tables(), me, settings).expect("opens the replica")
}

/// A receipt of a random total, written through `conn`.
pub fn write_receipt(conn: &Connection, me: Uuid) {
    conn.execute(
        "INSERT INTO receipts (id, register_id, total_cents) VALUES (?1, ?2, ?3)",
        rusqlite::params![
            Uuid::new_v4().as_bytes().to_vec(),
            me.as_bytes().to_vec(),
            rand::random::<u16>() as i64
        ],
    )
    .expect("writes a receipt");
}

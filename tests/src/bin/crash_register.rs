//! A register that runs until it is killed: the device program of the crash
//! loops (tests/tests/crash_loops.rs). It opens its replica on a SQLite file
//! and loops: a receipt written, what waits taken and applied, what it has
//! to say sent up, over the queue transport.
//!
//! `crash_register CONNINFO FILE REGISTER_ID [--until-idle]`: with
//! `--until-idle` it writes nothing and stops once a turn takes and sends
//! nothing.

use std::path::Path;

use magic_sync_replica::queue;
use magic_sync_replica::{install, Replica, Settings, Table, Tables};
use postgres::{Client, NoTls};
use rusqlite::Connection;
use uuid::Uuid;

/// The register's half of the crash loops' shop (the server's is in the
/// test): products from the head office, receipts of its own.
pub const SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS products (
        id BLOB PRIMARY KEY NOT NULL, name TEXT NOT NULL, price_cents INTEGER NOT NULL);
    CREATE TABLE IF NOT EXISTS receipts (
        id BLOB PRIMARY KEY NOT NULL, register_id BLOB NOT NULL, total_cents INTEGER NOT NULL);
";

fn tables() -> Tables {
    Tables::new(vec![
        Table::catalog("products"),
        Table::record("receipts").origin("register_id"),
    ])
}

fn open(file: &Path, me: Uuid) -> Replica {
    let mut conn = Connection::open(file).expect("opens the register's file");
    conn.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; \
         PRAGMA foreign_keys = ON; PRAGMA recursive_triggers = ON;",
    )
    .expect("sets the pragmas");
    conn.execute_batch(SCHEMA).expect("the register's schema");
    install(&mut conn, &tables()).expect("installs the engine's tables");
    Replica::open(conn, tables(), me, Settings::default()).expect("opens the replica")
}

fn write_receipt(replica: &Replica, me: Uuid) {
    replica
        .connection()
        .execute(
            "INSERT INTO receipts (id, register_id, total_cents) VALUES (?1, ?2, ?3)",
            rusqlite::params![
                Uuid::new_v4().as_bytes().to_vec(),
                me.as_bytes().to_vec(),
                rand::random::<u16>() as i64
            ],
        )
        .expect("writes a receipt");
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, conninfo, file, id, rest @ ..] = args.as_slice() else {
        eprintln!("usage: crash_register CONNINFO FILE REGISTER_ID [--until-idle]");
        std::process::exit(2);
    };
    let until_idle = rest.iter().any(|a| a == "--until-idle");
    let me: Uuid = id.parse().expect("a register id");
    let mut pg = Client::connect(conninfo, NoTls).expect("connects to the server");
    let mut replica = open(Path::new(file), me);
    loop {
        if !until_idle {
            write_receipt(&replica, me);
        }
        // A server that went away for a moment is tried again next turn.
        match queue::run_once(&mut pg, &mut replica) {
            Ok((received, sent)) if until_idle && received.is_empty() && sent.is_empty() => return,
            Ok(_) => {}
            // The server restarted (after a crash): this connection is
            // gone; whoever runs the register starts it again.
            Err(_) if pg.is_closed() => std::process::exit(1),
            Err(e) => eprintln!("crash_register: {e}"),
        }
    }
}

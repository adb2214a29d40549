//! The relay worker and the register's backend filing its uploads, killed
//! with SIGKILL in turns (each a crash the server recovers from), lose
//! nothing either: once left to run, the register holds the server's
//! products and every receipt it wrote is filed once.
//!
//! A register killed with SIGKILL at random points while it applies and
//! uploads, a couple of hundred times in a row on one file (the device
//! program is tests/src/bin/crash_register.rs), while the head office
//! changes every product's price at once and relays: the file is never
//! corrupt, never half-applied (every product it holds has the same price,
//! as every change gave them), and once left to run the register holds
//! exactly the server's products, and every receipt it wrote is filed,
//! once.

use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use magic_sync_tests::killed_register::SERVER_SCHEMA;
use magic_sync_tests::Cluster;
use rand::{Rng, SeedableRng};
use rusqlite::{Connection, OpenFlags};
use uuid::Uuid;

/// The catalog the head office starts with.
const TWENTY_PRODUCTS: &str =
    "INSERT INTO shop.products SELECT gen_random_uuid(), 'Item ' || i, 0 FROM generate_series(1, 20) AS i";

/// How many times the register is killed: a couple of hundred in CI, more
/// with `MAGIC_SYNC_CRASHES`.
fn crashes() -> usize {
    std::env::var("MAGIC_SYNC_CRASHES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(200)
}

fn register(url: &str, file: &std::path::Path, id: Uuid, until_idle: bool) -> Child {
    let mut command = Command::new(env!("CARGO_BIN_EXE_crash_register"));
    command.arg(url).arg(file).arg(id.to_string());
    if until_idle {
        command.arg("--until-idle");
    }
    command.spawn().expect("starts the register")
}

/// The head office, until told to stop: every product's price changed in
/// one transaction, then a relay pass, again and again.
fn head_office(cluster: &Cluster, stop: Arc<AtomicBool>) -> thread::JoinHandle<u64> {
    let mut pg = cluster.connect("shop");
    thread::spawn(move || {
        let mut changes = 0;
        while !stop.load(Ordering::Relaxed) {
            changes += 1;
            pg.batch_execute(&format!("UPDATE shop.products SET price_cents = {changes}"))
                .unwrap();
            pg.batch_execute("CALL sync.relay()").unwrap();
            thread::sleep(Duration::from_millis(5));
        }
        changes
    })
}

/// What a killed register's file holds, checked: never corrupt, and every
/// product at one price (a message applied whole, or not at all). A
/// register killed before it made its file has none to check.
fn assert_whole(file: &std::path::Path, round: usize) {
    if !file.exists() {
        return;
    }
    let conn = Connection::open_with_flags(file, OpenFlags::SQLITE_OPEN_READ_WRITE).unwrap();
    let integrity: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(integrity, "ok", "round {round}");
    let dangling: i64 = conn
        .query_row("SELECT count(*) FROM pragma_foreign_key_check", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(dangling, 0, "round {round}");
    let prices: i64 = conn
        .query_row(
            "SELECT count(DISTINCT price_cents) FROM products",
            [],
            |r| r.get(0),
        )
        .unwrap_or(0);
    assert!(
        prices <= 1,
        "round {round}: {prices} prices, a message half applied"
    );
}

/// The products a register holds: (id, price), by id.
fn prices_held(conn: &Connection) -> Vec<(Vec<u8>, i64)> {
    conn.prepare("SELECT id, price_cents FROM products ORDER BY id")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// The server's products as a register holds them: (id, price), by id.
fn prices_on_server(pg: &mut postgres::Client) -> Vec<(Vec<u8>, i64)> {
    let mut rows: Vec<(Vec<u8>, i64)> = pg
        .query("SELECT id, price_cents FROM shop.products", &[])
        .unwrap()
        .iter()
        .map(|r| (r.get::<_, Uuid>(0).as_bytes().to_vec(), r.get(1)))
        .collect();
    rows.sort();
    rows
}

/// The receipts a register wrote, sorted.
fn receipts_written(conn: &Connection) -> Vec<Uuid> {
    let mut ids: Vec<Uuid> = conn
        .prepare("SELECT id FROM receipts")
        .unwrap()
        .query_map([], |r| r.get::<_, Vec<u8>>(0))
        .unwrap()
        .map(|b| Uuid::from_slice(&b.unwrap()).unwrap())
        .collect();
    ids.sort();
    ids
}

/// The receipts the server filed of a register, sorted.
fn receipts_filed(pg: &mut postgres::Client, register: Uuid) -> Vec<Uuid> {
    let mut ids: Vec<Uuid> = pg
        .query(
            "SELECT id FROM shop.receipts WHERE register_id = $1",
            &[&register],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    ids.sort();
    ids
}

#[test]
fn a_register_killed_again_and_again_is_never_corrupt_nor_half_applied_and_converges() {
    let cluster = Cluster::start();
    let mut pg = cluster.database_with_extension("shop");
    pg.batch_execute(SERVER_SCHEMA).unwrap();
    pg.batch_execute(TWENTY_PRODUCTS).unwrap();
    let id = Uuid::new_v4();
    pg.execute("INSERT INTO shop.registers (id) VALUES ($1)", &[&id])
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("register.db");
    let url = cluster.url("shop");

    let stop = Arc::new(AtomicBool::new(false));
    let office = head_office(&cluster, stop.clone());
    let seed: u64 = rand::random();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    for round in 0..crashes() {
        let mut child = register(&url, &file, id, false);
        thread::sleep(Duration::from_millis(rng.random_range(5..60)));
        child.kill().expect("kills the register (SIGKILL)");
        child.wait().unwrap();
        assert_whole(&file, round);
    }
    stop.store(true, Ordering::Relaxed);
    let changes = office.join().unwrap();
    eprintln!(
        "seed {seed}: {} kills while the head office made {changes} changes",
        crashes()
    );

    // Left to run, it catches up.
    pg.batch_execute("CALL sync.relay()").unwrap();
    for _ in 0..3 {
        let status = register(&url, &file, id, true).wait().unwrap();
        assert!(status.success());
        pg.batch_execute("CALL sync.relay()").unwrap();
    }
    let conn = Connection::open(&file).unwrap();
    assert_eq!(
        prices_held(&conn),
        prices_on_server(&mut pg),
        "seed {seed}: the register holds the server's products"
    );
    let written = receipts_written(&conn);
    assert!(!written.is_empty());
    assert_eq!(
        receipts_filed(&mut pg, id),
        written,
        "seed {seed}: every receipt filed, once"
    );
    let waiting: i64 = conn
        .query_row("SELECT count(*) FROM sync_notes", [], |r| r.get(0))
        .unwrap_or(0);
    assert_eq!(waiting, 0, "nothing left to send");
}

/// Connects to the shop, waiting while the server restarts after a crash.
fn connect_when_up(cluster: &Cluster) -> postgres::Client {
    for _ in 0..600 {
        if let Ok(client) = postgres::Client::connect(&cluster.url("shop"), postgres::NoTls) {
            return client;
        }
        thread::sleep(Duration::from_millis(50));
    }
    panic!("the server did not come back within 30 s");
}

/// The head office of a server that crashes: it connects again after each
/// crash and carries on changing every price at once.
fn head_office_through_crashes(
    cluster: &Cluster,
    stop: Arc<AtomicBool>,
) -> thread::JoinHandle<u64> {
    let url = cluster.url("shop");
    thread::spawn(move || {
        let mut changes = 0;
        while !stop.load(Ordering::Relaxed) {
            let Ok(mut pg) = postgres::Client::connect(&url, postgres::NoTls) else {
                thread::sleep(Duration::from_millis(50));
                continue;
            };
            while !stop.load(Ordering::Relaxed) {
                let sql = format!("UPDATE shop.products SET price_cents = {}", changes + 1);
                if pg.batch_execute(&sql).is_err() {
                    break;
                }
                changes += 1;
                thread::sleep(Duration::from_millis(10));
            }
        }
        changes
    })
}

/// The pid of a backend of the shop this query finds, within a second.
fn backend(pg: &mut postgres::Client, query: &str) -> Option<i32> {
    for _ in 0..100 {
        if let Some(row) = pg.query_opt(query, &[]).ok().flatten() {
            return Some(row.get(0));
        }
        thread::sleep(Duration::from_millis(10));
    }
    None
}

const RELAY_WORKER: &str = "SELECT pid FROM pg_stat_activity \
    WHERE backend_type = 'magic_sync relay' AND datname = 'shop'";
/// The register's backend, running sync.receive if it is just then.
const FILING_BACKEND: &str = "SELECT pid FROM pg_stat_activity \
    WHERE datname = 'shop' AND query LIKE 'SELECT sync.receive%' \
    ORDER BY state = 'active' DESC LIMIT 1";

#[test]
fn the_relay_worker_and_a_backend_filing_killed_again_and_again_lose_nothing() {
    let cluster = Cluster::start_with(&[
        "shared_preload_libraries=magic_sync",
        "magic_sync.database=shop",
    ]);
    let mut pg = cluster.database_with_extension("shop");
    pg.batch_execute(SERVER_SCHEMA).unwrap();
    pg.batch_execute(TWENTY_PRODUCTS).unwrap();
    let id = Uuid::new_v4();
    pg.execute("INSERT INTO shop.registers (id) VALUES ($1)", &[&id])
        .unwrap();
    drop(pg);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("register.db");
    let url = cluster.url("shop");

    let stop = Arc::new(AtomicBool::new(false));
    let office = head_office_through_crashes(&cluster, stop.clone());
    let mut child = register(&url, &file, id, false);
    let seed: u64 = rand::random();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut killed = Vec::new();
    for round in 0..6 {
        thread::sleep(Duration::from_millis(rng.random_range(300..900)));
        if child.try_wait().unwrap().is_some() {
            child = register(&url, &file, id, false);
        }
        let mut pg = connect_when_up(&cluster);
        let (what, query) = if round % 2 == 0 {
            ("the relay worker", RELAY_WORKER)
        } else {
            ("a backend filing", FILING_BACKEND)
        };
        let Some(pid) = backend(&mut pg, query) else {
            continue;
        };
        drop(pg);
        Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status()
            .unwrap();
        killed.push(what);
        // The register's connection went with the crash: it exits, and is
        // started again, as its device would start it.
        connect_when_up(&cluster);
        thread::sleep(Duration::from_millis(200));
        if child.try_wait().unwrap().is_some() {
            child = register(&url, &file, id, false);
        }
    }
    stop.store(true, Ordering::Relaxed);
    let changes = office.join().unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        killed.contains(&"the relay worker"),
        "seed {seed}: {killed:?}"
    );
    eprintln!("seed {seed}: killed {killed:?} while the head office made {changes} changes");
    assert_whole(&file, 0);

    // Left to run (the worker relaying again), it catches up: every price
    // as the server has it, every receipt filed once.
    let mut pg = connect_when_up(&cluster);
    let mut converged = false;
    for _ in 0..60 {
        let status = register(&url, &file, id, true).wait().unwrap();
        let conn = Connection::open(&file).unwrap();
        let held = prices_held(&conn);
        let written = receipts_written(&conn);
        let filed = receipts_filed(&mut pg, id);
        let theirs = prices_on_server(&mut pg);
        if status.success() && held == theirs && filed == written {
            converged = true;
            break;
        }
        eprintln!(
            "not yet: status {status:?}, {} products (same prices: {}), {} receipts written, {} filed",
            held.len(),
            held == theirs,
            written.len(),
            filed.len()
        );
        thread::sleep(Duration::from_millis(500));
    }
    assert!(
        converged,
        "seed {seed}: the register caught up, every receipt filed once"
    );
}

//! The NATS fault loop (issue 29): four registers over NATS JetStream, each
//! a process of its own on its SQLite file (tests/src/bin/nats_register.rs),
//! the relay worker running, the head office changing products and the
//! registers writing receipts, while nats-server, the worker, the registers
//! and PostgreSQL are killed at random and started again. Then everything
//! is left to settle: every register holds exactly the server's products,
//! column for column, every receipt it wrote is on the server once, and it
//! has been told so.
//!
//! Every other fault kills nats-server (SIGKILL, started again on the same
//! store), so a run of the default 90 seconds kills it well over ten times;
//! `MAGIC_SYNC_FAULT_SECONDS` runs it longer. The seed is printed.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use magic_sync_tests::killed_register::{self, SERVER_SCHEMA};
use magic_sync_tests::nats::{self as nats_server};
use magic_sync_tests::Cluster;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rusqlite::Connection;
use uuid::Uuid;

/// How long the faults go on.
fn fault_seconds() -> u64 {
    std::env::var("MAGIC_SYNC_FAULT_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(90)
}

/// How long everything may take to settle once the faults stop: stalls
/// heal within magic_sync.stalled_after (5 s here) and the worker's next
/// check; the rest is catching up on a busy machine.
const SETTLE_WITHIN: Duration = Duration::from_secs(240);

const REGISTERS: usize = 4;

/// A register's device program, killed and started again by the test.
struct Register {
    id: Uuid,
    file: PathBuf,
    log: PathBuf,
    child: Option<Child>,
    starts: u32,
}

impl Register {
    fn start(&mut self, nats_url: &str, sell_every_ms: u64) {
        let log = File::options()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_nats_register"))
            .arg(nats_url)
            .arg(&self.file)
            .arg(self.id.to_string())
            .arg(sell_every_ms.to_string())
            .stderr(log)
            .spawn()
            .expect("starts the register");
        self.child = Some(child);
        self.starts += 1;
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(15)..].join("\n")
    }
}

impl Drop for Register {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A connection to the head office, made again until it answers (the
/// server may be restarting).
fn connect(cluster: &Cluster) -> postgres::Client {
    let began = Instant::now();
    loop {
        match postgres::Client::connect(&cluster.url("shop"), postgres::NoTls) {
            Ok(client) => return client,
            Err(e) => {
                assert!(began.elapsed() < Duration::from_secs(60), "{e}");
                thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

/// The head office, until told to stop: a product's price and name
/// changed, a product added or deleted, every few milliseconds; through
/// restarts of the server. Answers how many changes committed.
fn head_office(cluster: Arc<Cluster>, stop: Arc<AtomicBool>, seed: u64) -> thread::JoinHandle<u64> {
    thread::spawn(move || {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut pg = connect(&cluster);
        let mut changes = 0;
        while !stop.load(Ordering::Relaxed) {
            let change = match rng.random_range(0..10) {
                0..=6 => format!(
                    "UPDATE shop.products SET price_cents = {}, name = 'Item ' || {} \
                     WHERE id = (SELECT id FROM shop.products ORDER BY random() LIMIT 1)",
                    rng.random_range(1..100_000),
                    rng.random_range(0..1000)
                ),
                7 | 8 => "INSERT INTO shop.products \
                          SELECT gen_random_uuid(), 'New ' || n, n FROM random() AS r, \
                          LATERAL (SELECT (r * 1000)::int AS n) AS x \
                          WHERE (SELECT count(*) FROM shop.products) < 60"
                    .to_owned(),
                _ => "DELETE FROM shop.products \
                      WHERE id = (SELECT id FROM shop.products ORDER BY random() LIMIT 1) \
                        AND (SELECT count(*) FROM shop.products) > 10"
                    .to_owned(),
            };
            match pg.batch_execute(&change) {
                Ok(()) => changes += 1,
                Err(_) => {
                    thread::sleep(Duration::from_millis(200));
                    pg = connect(&cluster);
                }
            }
            thread::sleep(Duration::from_millis(rng.random_range(5..40)));
        }
        changes
    })
}

/// The relay worker's process, if it runs.
fn worker_pid(pg: &mut postgres::Client) -> Option<i32> {
    pg.query_opt(
        "SELECT pid FROM pg_stat_activity WHERE backend_type = 'magic_sync relay'",
        &[],
    )
    .ok()
    .flatten()
    .map(|row| row.get(0))
}

type Product = (Vec<u8>, String, i64);

fn products_on_server(pg: &mut postgres::Client) -> Vec<Product> {
    let mut rows: Vec<Product> = pg
        .query("SELECT id, name, price_cents FROM shop.products", &[])
        .unwrap()
        .iter()
        .map(|r| (r.get::<_, Uuid>(0).as_bytes().to_vec(), r.get(1), r.get(2)))
        .collect();
    rows.sort();
    rows
}

fn products_in(file: &Path) -> Vec<Product> {
    let conn = Connection::open(file).unwrap();
    let mut rows: Vec<Product> = conn
        .prepare("SELECT id, name, price_cents FROM products")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    rows.sort();
    rows
}

/// The receipts a register's file holds: id and total, sorted.
fn receipts_in(file: &Path) -> Vec<(Uuid, i64)> {
    let conn = Connection::open(file).unwrap();
    let mut rows: Vec<(Uuid, i64)> = conn
        .prepare("SELECT id, total_cents FROM receipts")
        .unwrap()
        .query_map([], |r| {
            let id: Vec<u8> = r.get(0)?;
            Ok((Uuid::from_slice(&id).unwrap(), r.get(1)?))
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    rows.sort();
    rows
}

/// The receipts the server filed, per register: id and total, sorted.
fn receipts_on_server(pg: &mut postgres::Client) -> BTreeMap<Uuid, Vec<(Uuid, i64)>> {
    let mut filed: BTreeMap<Uuid, Vec<(Uuid, i64)>> = BTreeMap::new();
    for row in pg
        .query(
            "SELECT register_id, id, total_cents FROM shop.receipts ORDER BY 1, 2",
            &[],
        )
        .unwrap()
    {
        filed
            .entry(row.get(0))
            .or_default()
            .push((row.get(1), row.get(2)));
    }
    filed
}

/// Rows a register wrote that it has not been told are filed.
fn unfiled(file: &Path) -> i64 {
    Connection::open(file)
        .unwrap()
        .query_row("SELECT count(*) FROM sync_notes", [], |r| r.get(0))
        .unwrap()
}

/// What still differs between the registers and the server, in a line
/// each; empty once everything settled.
fn differences(pg: &mut postgres::Client, registers: &[Register]) -> Vec<String> {
    let products = products_on_server(pg);
    let filed = receipts_on_server(pg);
    let mut differ = Vec::new();
    for register in registers {
        let held = products_in(&register.file);
        if held != products {
            let missing = products.iter().filter(|p| !held.contains(p)).count();
            let extra = held.iter().filter(|p| !products.contains(p)).count();
            differ.push(format!(
                "{}: {missing} of the server's products missing or different, {extra} extra",
                register.id
            ));
        }
        let written = receipts_in(&register.file);
        let on_server = filed.get(&register.id).cloned().unwrap_or_default();
        if written != on_server {
            differ.push(format!(
                "{}: wrote {} receipts, the server filed {}",
                register.id,
                written.len(),
                on_server.len()
            ));
        }
        let waiting = unfiled(&register.file);
        if waiting > 0 {
            differ.push(format!("{}: {waiting} rows not told filed", register.id));
        }
    }
    differ
}

#[test]
fn registers_over_nats_converge_and_every_receipt_is_filed_once_through_random_kills_of_every_part()
{
    let seed: u64 = std::env::var("MAGIC_SYNC_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    eprintln!("seed {seed} (MAGIC_SYNC_SEED runs it again)");
    let mut rng = StdRng::seed_from_u64(seed);
    let mut nats = nats_server::start();
    let url = nats.url();
    let nats_setting = format!("magic_sync.nats_url={url}");
    let cluster = Arc::new(Cluster::start_with(&[
        "shared_preload_libraries=magic_sync",
        "magic_sync.database=shop",
        "magic_sync.transport=nats",
        "magic_sync.idle=1",
        "magic_sync.send_timeout=2000",
        "magic_sync.stalled_after=5",
        &nats_setting,
    ]));
    let mut pg = cluster.database_with_extension("shop");
    pg.batch_execute(SERVER_SCHEMA).unwrap();
    pg.batch_execute(
        "INSERT INTO shop.products \
         SELECT gen_random_uuid(), 'Item ' || i, i FROM generate_series(1, 30) AS i",
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut registers: Vec<Register> = (0..REGISTERS)
        .map(|i| Register {
            id: Uuid::new_v4(),
            file: dir.path().join(format!("register-{i}.db")),
            log: dir.path().join(format!("register-{i}.log")),
            child: None,
            starts: 0,
        })
        .collect();
    for register in &mut registers {
        pg.execute(
            "INSERT INTO shop.registers (id) VALUES ($1)",
            &[&register.id],
        )
        .unwrap();
        // Its file made before its first kill can come.
        drop(killed_register::connect(&register.file));
        register.start(&url, 300);
    }

    let stop = Arc::new(AtomicBool::new(false));
    let office = head_office(cluster.clone(), stop.clone(), seed);
    let mut kills: BTreeMap<&str, u32> = BTreeMap::new();
    let began = Instant::now();
    let mut fault = 0;
    while began.elapsed() < Duration::from_secs(fault_seconds()) {
        thread::sleep(Duration::from_millis(rng.random_range(1_000..3_500)));
        fault += 1;
        let what = if fault % 2 == 1 {
            "nats-server"
        } else {
            ["relay worker", "register", "register", "PostgreSQL"][rng.random_range(0..4)]
        };
        match what {
            "nats-server" => {
                nats.kill();
                thread::sleep(Duration::from_millis(rng.random_range(0..1_500)));
                nats.start_again();
            }
            "relay worker" => {
                pg = connect(&cluster);
                let Some(pid) = worker_pid(&mut pg) else {
                    continue;
                };
                // A backend killed: PostgreSQL restarts every process.
                let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            }
            "register" => {
                let register = &mut registers[rng.random_range(0..REGISTERS)];
                register.kill();
                thread::sleep(Duration::from_millis(rng.random_range(0..1_000)));
                register.start(&url, 300);
            }
            _ => cluster.restart_immediately(),
        }
        *kills.entry(what).or_default() += 1;
    }
    stop.store(true, Ordering::Relaxed);
    let changes = office.join().unwrap();
    eprintln!(
        "seed {seed}: {fault} faults in {:?} while the head office made {changes} changes: {kills:?}",
        began.elapsed()
    );
    assert!(
        kills.get("nats-server").copied().unwrap_or(0) >= 10,
        "nats-server killed at least ten times: {kills:?}"
    );

    // The registers stop selling (each started once more), and everything
    // is left to settle.
    for register in &mut registers {
        register.kill();
        register.start(&url, 0);
    }
    let settling = Instant::now();
    let mut pg = connect(&cluster);
    loop {
        let differ = differences(&mut pg, &registers);
        if differ.is_empty() {
            break;
        }
        if settling.elapsed() > SETTLE_WITHIN {
            for register in &registers {
                eprintln!("--- register {} ---\n{}", register.id, register.log_tail());
            }
            let log = cluster.log();
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            eprintln!("--- PostgreSQL's log ---");
            for line in tail.iter().rev() {
                eprintln!("{line}");
            }
            panic!(
                "seed {seed}: not settled after {SETTLE_WITHIN:?}:\n{}",
                differ.join("\n")
            );
        }
        thread::sleep(Duration::from_millis(250));
    }
    let alarms: Vec<String> = pg
        .query("SELECT what FROM sync.alarms ORDER BY id", &[])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let receipts: usize = registers.iter().map(|r| receipts_in(&r.file).len()).sum();
    eprintln!(
        "seed {seed}: settled in {:?}; {receipts} receipts filed once; register starts {:?}; \
         {} alarm(s): {alarms:#?}",
        settling.elapsed(),
        registers.iter().map(|r| r.starts).collect::<Vec<_>>(),
        alarms.len()
    );
    assert!(receipts > 0, "the registers sold");
}

//! The relay worker's figures, measured side by side in one run:
//!
//! - the fixed cost of a pass, which a worker pays at every wake-up: a
//!   `CALL sync.relay()` in a warm session with nothing to do, and with one
//!   note for one replica; beside them, what a worker woken with nothing
//!   to do runs instead of a pass (its look at whether work waits);
//! - commit to applied with the queue transport: a single-row UPDATE on the
//!   server, until each register's SQLite transaction that applies it has
//!   committed, with the worker relaying and each register LISTENing on its
//!   channel; p50 and p99 over many changes, with 1 and with 100 registers;
//!   and the worker's private memory after 100 changes (so 100 passes or
//!   so) against after all of them.
//!
//! Run on a release build: `cargo pgrx install --release -p magic_sync`, then
//! `cargo run --release -p magic_sync_tests --bin bench_worker`. Options:
//! `--passes N` (calls timed per figure of the first part), `--changes N`,
//! `--registers N` (the larger count of the second part).

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use magic_sync_replica::{install, queue, Replica, Settings, Table, Tables};
use magic_sync_tests::args::arg;
use magic_sync_tests::relaying::{drain, relay};
use magic_sync_tests::{Cluster, BROADCAST_SHOP};
use postgres::fallible_iterator::FallibleIterator;
use postgres::Client;
use rusqlite::Connection;
use uuid::Uuid;

/// A hundred products to change one of.
const PRODUCTS: &str = "
    INSERT INTO shop.products (id, name, price_cents)
    SELECT gen_random_uuid(), 'Product ' || i, i FROM generate_series(1, 100) AS i;
";

const REGISTER_SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS products (
        id BLOB PRIMARY KEY NOT NULL, name TEXT NOT NULL,
        price_cents INTEGER NOT NULL, updated_at TEXT NOT NULL);
";

/// What the worker runs, woken with nothing to do, instead of a pass.
const WORK_WAITS: &str = "SELECT sync_internal.work_waits()";

fn main() {
    // A register's thread that fails must end the run, not leave the rest
    // waiting for it.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        default_hook(info);
        std::process::exit(1);
    }));
    let passes = arg::<usize>("--passes", 200);
    let changes = arg::<usize>("--changes", 1000);
    let many = arg::<usize>("--registers", 100);

    println!("The fixed cost of a pass, in a warm session ({passes} each)");
    fixed_cost(passes);

    println!();
    println!("Commit to applied, the queue transport, the worker relaying ({changes} changes)");
    let mut counts = vec![1];
    if many > 1 {
        counts.push(many);
    }
    for registers in counts {
        commit_to_applied(registers, changes);
    }
}

fn median_and_p99(mut samples: Vec<f64>) -> (f64, f64) {
    samples.sort_by(|a, b| a.total_cmp(b));
    let at = |q: f64| samples[((samples.len() as f64 - 1.0) * q).round() as usize];
    (at(0.5), at(0.99))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn fixed_cost(passes: usize) {
    let cluster = Cluster::start();
    let mut pg = cluster.database_with_extension("fixed");
    pg.batch_execute(BROADCAST_SHOP).unwrap();
    pg.batch_execute(PRODUCTS).unwrap();
    pg.batch_execute("INSERT INTO shop.registers (id) VALUES (gen_random_uuid())")
        .unwrap();
    drain(&mut pg);
    // The register takes its snapshot, so it is kept up to date from here.
    let register: Uuid = pg
        .query_one("SELECT id FROM shop.registers", &[])
        .unwrap()
        .get(0);
    pg.execute("DELETE FROM sync.outbox WHERE replica = $1", &[&register])
        .unwrap();
    for _ in 0..10 {
        relay(&mut pg);
    }

    let idle: Vec<f64> = (0..passes)
        .map(|_| {
            let began = Instant::now();
            relay(&mut pg);
            ms(began.elapsed())
        })
        .collect();
    let check: Vec<f64> = (0..passes)
        .map(|_| {
            let began = Instant::now();
            let waits: bool = pg.query_one(WORK_WAITS, &[]).unwrap().get(0);
            assert!(!waits);
            ms(began.elapsed())
        })
        .collect();
    pg.batch_execute("SET magic_sync.pass_timings = on")
        .unwrap();
    let mut last_steps = serde_json::Value::Null;
    let one_note: Vec<f64> = (0..passes)
        .map(|i| {
            pg.execute(
                "UPDATE shop.products SET price_cents = $1 WHERE name = 'Product 1'",
                &[&(i as i64 + 1000)],
            )
            .unwrap();
            let began = Instant::now();
            let summary = relay(&mut pg);
            let took = ms(began.elapsed());
            assert_eq!(summary["notes"], 1, "{summary}");
            pg.execute("DELETE FROM sync.outbox WHERE replica = $1", &[&register])
                .unwrap();
            last_steps = summary["took_ms"].clone();
            took
        })
        .collect();
    let (idle_p50, idle_p99) = median_and_p99(idle);
    let (check_p50, check_p99) = median_and_p99(check);
    let (note_p50, note_p99) = median_and_p99(one_note);
    println!(
        "  a pass with nothing to do:         median {idle_p50:7.2} ms, p99 {idle_p99:7.2} ms"
    );
    println!(
        "  what a woken worker runs instead:  median {check_p50:7.2} ms, p99 {check_p99:7.2} ms (target: at most 1 ms)"
    );
    println!(
        "  a pass with one note, one replica: median {note_p50:7.2} ms, p99 {note_p99:7.2} ms (target: at most 5 ms)"
    );
    println!("    its steps, the last time (ms): {last_steps}");
}

/// One register's side: its replica, its connection, LISTENing.
struct Register {
    replica: Replica,
    pg: Client,
}

fn open_register(dir: &Path, cluster: &Cluster, me: Uuid) -> Register {
    let tables = Tables::new(vec![Table::catalog("products")]);
    let mut conn = Connection::open(dir.join(format!("{me}.db"))).unwrap();
    conn.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON; PRAGMA recursive_triggers = ON;",
    )
    .unwrap();
    conn.execute_batch(REGISTER_SCHEMA).unwrap();
    install(&mut conn, &tables).unwrap();
    let replica = Replica::open(conn, tables, me, Settings::default()).unwrap();
    let mut pg = cluster.connect("shop");
    pg.batch_execute(&format!("LISTEN \"magic_sync:{me}\""))
        .unwrap();
    Register { replica, pg }
}

impl Register {
    fn price(&self) -> i64 {
        self.replica
            .connection()
            .query_row(
                "SELECT price_cents FROM products WHERE name = 'Product 1'",
                [],
                |r| r.get(0),
            )
            .unwrap_or(-1)
    }

    /// Takes what waits, says what it applied.
    fn take(&mut self) {
        queue::deliver(&mut self.pg, &mut self.replica).unwrap();
        queue::report(&mut self.pg, &mut self.replica).unwrap();
    }

    /// Waits for a notification, at most `wait`.
    fn wait(&mut self, wait: Duration) {
        let mut notifications = self.pg.notifications();
        // One is enough: what else came waits in the same queue.
        let _ = notifications.timeout_iter(wait).next();
    }
}

fn commit_to_applied(registers: usize, changes: usize) {
    let cluster = Cluster::start_with(&[
        "shared_preload_libraries=magic_sync",
        "magic_sync.database=shop",
        "magic_sync.idle=1",
        "max_connections=250",
    ]);
    let mut pg = cluster.database_with_extension("shop");
    pg.batch_execute(BROADCAST_SHOP).unwrap();
    pg.batch_execute(PRODUCTS).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ids: Vec<Uuid> = (0..registers).map(|_| Uuid::new_v4()).collect();
    for id in &ids {
        pg.execute("INSERT INTO shop.registers (id) VALUES ($1)", &[id])
            .unwrap();
    }
    // Each register records when it applied each change.
    let stop = Arc::new(AtomicBool::new(false));
    let applied_at: Arc<Mutex<Vec<Vec<Option<Instant>>>>> =
        Arc::new(Mutex::new(vec![vec![None; registers]; changes]));
    let ready = Arc::new(Barrier::new(registers + 1));
    let cluster = Arc::new(cluster);
    let threads: Vec<_> = ids
        .iter()
        .enumerate()
        .map(|(at, id)| {
            let (stop, applied_at, ready, cluster) = (
                stop.clone(),
                applied_at.clone(),
                ready.clone(),
                cluster.clone(),
            );
            let (id, dir) = (*id, dir.path().to_owned());
            std::thread::spawn(move || {
                let mut register = open_register(&dir, &cluster, id);
                // Provisioned once the worker sees it live.
                while register.price() < 0 {
                    register.wait(Duration::from_millis(50));
                    register.take();
                }
                ready.wait();
                while !stop.load(Ordering::Relaxed) {
                    register.wait(Duration::from_millis(100));
                    register.take();
                    let price = register.price();
                    let now = Instant::now();
                    let change = price - 10_000;
                    if change >= 0 && (change as usize) < changes {
                        let mut applied = applied_at.lock().unwrap();
                        let slot = &mut applied[change as usize][at];
                        if slot.is_none() {
                            *slot = Some(now);
                        }
                    }
                }
            })
        })
        .collect();
    ready.wait();

    let worker: i32 = pg
        .query_one(
            "SELECT pid FROM pg_stat_activity WHERE backend_type = 'magic_sync relay'",
            &[],
        )
        .unwrap()
        .get(0);
    let mut memory_after_100 = None;
    let mut committed_at = Vec::with_capacity(changes);
    let began = Instant::now();
    for change in 0..changes {
        if change == 100 {
            memory_after_100 = private_mib(worker);
        }
        let price = 10_000 + change as i64;
        pg.execute(
            "UPDATE shop.products SET price_cents = $1 WHERE name = 'Product 1'",
            &[&price],
        )
        .unwrap();
        committed_at.push(Instant::now());
        // The next change once every register applied this one (or a
        // second passed: it is then counted late, not lost).
        let waiting = Instant::now();
        loop {
            let done = applied_at.lock().unwrap()[change]
                .iter()
                .all(Option::is_some);
            if done || waiting.elapsed() > Duration::from_secs(1) {
                break;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    // Stragglers get a little longer.
    std::thread::sleep(Duration::from_millis(500));
    let took = began.elapsed();
    stop.store(true, Ordering::Relaxed);
    for thread in threads {
        thread.join().unwrap();
    }
    let applied = applied_at.lock().unwrap();
    let mut latencies = Vec::new();
    let mut missed = 0;
    for (change, per_register) in applied.iter().enumerate() {
        for at in per_register {
            match at {
                Some(at) => latencies.push(ms(at.duration_since(committed_at[change]))),
                None => missed += 1,
            }
        }
    }
    let (p50, p99) = median_and_p99(latencies);
    let memory_at_end = private_mib(worker);
    println!(
        "  {registers:3} register(s): p50 {p50:6.2} ms, p99 {p99:6.2} ms (targets: 10 ms, 50 ms); \
         {missed} of {} not seen applied (a later change overtook them); {:.1} s",
        changes * registers,
        took.as_secs_f64()
    );
    if let (Some(early), Some(late)) = (memory_after_100, memory_at_end) {
        println!(
            "      the worker's private memory: {early:.1} MiB after 100 changes, {late:.1} MiB after \
             {changes}: {:.2}x (target: at most 1.2x)",
            late / early
        );
    }
}

/// A process's private resident memory now, in MiB (RssAnon).
fn private_mib(pid: i32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with("RssAnon:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map(|kb| kb / 1024.0)
}

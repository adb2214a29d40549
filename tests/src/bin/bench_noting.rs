//! What noting costs a writer, measured side by side in one run on a
//! throwaway cluster: two identical product tables, one declared (so its
//! note trigger writes a note of every change) and one not.
//!
//! - Single-row UPDATEs through one connection, with a prepared statement,
//!   each in its own transaction, alternating between the two tables
//!   statement by statement (so a neighbour's load falls on both alike).
//!   The notes table is first brought to its working size (see `updates`).
//!   It prints each table's rate, and the ratio of the declared table's
//!   cost to the plain one's: of the median statement as the client sees it
//!   (wall time), of the median statement as the backend spent it (its time
//!   on a CPU, from /proc/PID/schedstat, which other processes on the
//!   machine inflate less), and of the totals.
//! - A bulk INSERT of many rows into each table, one statement.
//!
//! Run `cargo pgrx install --release -p magic_sync`, then
//! `cargo run --release -p magic_sync_tests --no-default-features --bin bench_noting`. Options: `--rows N` (table size),
//! `--updates N` (per table), `--bulk N` (0 skips it), `--setup SQL`
//! (run before measuring, to try a variant), `--growing` (measure with the
//! notes table growing, as on a fresh install, instead of at the size the
//! relay keeps it).

use std::time::{Duration, Instant};

use magic_sync_tests::args::{arg, text_arg};
use magic_sync_tests::relaying::drain;
use magic_sync_tests::Cluster;
use postgres::{Client, Statement};

/// The same table twice: one declared, one not.
fn tables(rows: i64) -> String {
    let table = |name: &str| {
        format!(
            "CREATE TABLE shop.{name} (
                id uuid PRIMARY KEY, name text NOT NULL, price_cents bigint NOT NULL,
                updated_at timestamptz NOT NULL DEFAULT now());
             INSERT INTO shop.{name} (id, name, price_cents)
                SELECT ('00000000-0000-0000-0000-' || lpad(to_hex(i), 12, '0'))::uuid,
                       'Product ' || i, i
                FROM generate_series(1, {rows}) AS i;"
        )
    };
    format!(
        "CREATE SCHEMA shop;
         {}
         {}
         SELECT sync.declare_table('shop.declared', sync => 'broadcast');",
        table("plain"),
        table("declared")
    )
}

fn key(i: i64) -> uuid::Uuid {
    format!("00000000-0000-0000-0000-{i:012x}").parse().unwrap()
}

/// The backend's time on a CPU so far.
fn backend_cpu(pid: i32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/schedstat")).unwrap_or_default();
    let ns = stat
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    Duration::from_nanos(ns)
}

/// Wall and backend CPU time of one statement.
#[derive(Default, Clone, Copy)]
struct Spent {
    wall: Duration,
    cpu: Duration,
}

fn update(pg: &mut Client, update: &Statement, pid: i32, id: &uuid::Uuid) -> Spent {
    let cpu = backend_cpu(pid);
    let started = Instant::now();
    pg.execute(update, &[id]).unwrap();
    let wall = started.elapsed();
    Spent {
        wall,
        cpu: backend_cpu(pid) - cpu,
    }
}

fn median(values: &mut [Duration]) -> Duration {
    values.sort();
    values[values.len() / 2]
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// What one table's updates cost.
#[derive(Default)]
struct Costs {
    wall: Vec<Duration>,
    cpu: Vec<Duration>,
}

impl Costs {
    fn add(&mut self, spent: Spent) {
        self.wall.push(spent.wall);
        self.cpu.push(spent.cpu);
    }

    fn total_wall(&self) -> Duration {
        self.wall.iter().sum()
    }

    fn report(&mut self, what: &str) -> (Duration, Duration) {
        let count = self.wall.len() as f64;
        let (wall, cpu) = (median(&mut self.wall), median(&mut self.cpu));
        println!(
            "  {what:<11} {:>8.0} updates/s   median {:>6.1} us/update, backend CPU median {:>6.1} us",
            count / self.total_wall().as_secs_f64(),
            micros(wall),
            micros(cpu)
        );
        (wall, cpu)
    }
}

/// Single-row updates, alternating between the tables statement by
/// statement so that whatever else the machine does falls on both alike.
fn updates(pg: &mut Client, rows: i64, count: i64, growing: bool) {
    let pid: i32 = pg.query_one("SELECT pg_backend_pid()", &[]).unwrap().get(0);
    let statement = |pg: &mut Client, table: &str| {
        pg.prepare(&format!(
            "UPDATE shop.{table} SET price_cents = price_cents + 1, updated_at = now() WHERE id = $1"
        ))
        .unwrap()
    };
    let plain_update = statement(pg, "plain");
    let declared_update = statement(pg, "declared");
    let (mut plain, mut declared) = (Costs::default(), Costs::default());
    // A first round warms caches and plans and writes as many notes as the
    // measured one; unless `--growing`, a relay pass then plans them and
    // VACUUM empties their pages, as autovacuum would after a pass, so that
    // the measured notes fill pages already there, as they do on a server
    // whose relay keeps up.
    for i in -count..0 {
        let id = key(i.rem_euclid(rows) + 1);
        update(pg, &plain_update, pid, &id);
        update(pg, &declared_update, pid, &id);
    }
    if !growing {
        drain(pg);
        pg.batch_execute("VACUUM sync.notes").unwrap();
    }
    for i in 0..count {
        let id = key(i.rem_euclid(rows) + 1);
        let (p, d) = if i % 2 == 0 {
            let p = update(pg, &plain_update, pid, &id);
            (p, update(pg, &declared_update, pid, &id))
        } else {
            let d = update(pg, &declared_update, pid, &id);
            (update(pg, &plain_update, pid, &id), d)
        };
        plain.add(p);
        declared.add(d);
    }
    let notes: i64 = pg
        .query_one(
            "SELECT count(*) FROM sync.notes WHERE table_name = 'declared'",
            &[],
        )
        .unwrap()
        .get(0);
    let notes_table = if growing {
        "the notes table growing"
    } else {
        "the notes table at its working size"
    };
    println!("single-row UPDATEs, {count} per table, tables of {rows} rows, {notes_table}:");
    let (plain_wall, plain_cpu) = plain.report("undeclared:");
    let (declared_wall, declared_cpu) = declared.report("declared:");
    println!(
        "  declared / undeclared: {:.3}x (median wall), {:.3}x (median backend CPU), {:.3}x (total wall); target <= 1.15x",
        declared_wall.as_secs_f64() / plain_wall.as_secs_f64(),
        declared_cpu.as_secs_f64() / plain_cpu.as_secs_f64(),
        declared.total_wall().as_secs_f64() / plain.total_wall().as_secs_f64(),
    );
    println!("  notes written: {notes}");
}

fn per_second(count: i64, spent: Duration) -> f64 {
    count as f64 / spent.as_secs_f64()
}

fn bulk(pg: &mut Client, rows: i64) {
    let insert = |pg: &mut Client, table: &str| {
        let started = Instant::now();
        pg.execute(
            &format!(
                "INSERT INTO shop.{table} (id, name, price_cents) \
                 SELECT gen_random_uuid(), 'Bulk ' || i, i FROM generate_series(1, $1::bigint) AS i"
            ),
            &[&rows],
        )
        .unwrap();
        started.elapsed()
    };
    let plain = insert(pg, "plain");
    let declared = insert(pg, "declared");
    println!("one INSERT of {rows} rows:");
    println!("  undeclared: {:>7.2} s", plain.as_secs_f64());
    println!(
        "  declared:   {:>7.2} s   ({:.2}x, {:.0} rows/s)",
        declared.as_secs_f64(),
        declared.as_secs_f64() / plain.as_secs_f64(),
        per_second(rows, declared)
    );
}

fn main() {
    let rows = arg::<i64>("--rows", 100_000);
    let per_table = arg::<i64>("--updates", 50_000);
    let bulk_rows = arg::<i64>("--bulk", 1_000_000);
    let cluster = Cluster::start();
    let mut pg = cluster.database_with_extension("noting");
    pg.batch_execute(&tables(rows)).unwrap();
    if let Some(sql) = text_arg("--setup") {
        // To try a variant of the engine's tables, say.
        pg.batch_execute(&sql).unwrap();
    }
    pg.batch_execute("VACUUM ANALYZE").unwrap();
    updates(
        &mut pg,
        rows,
        per_table,
        std::env::args().any(|a| a == "--growing"),
    );
    if bulk_rows > 0 {
        bulk(&mut pg, bulk_rows);
    }
}

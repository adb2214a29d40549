//! The relay's figures, measured side by side in one run:
//!
//! - provisioning one replica with N product rows, server side (one relay
//!   pass: plan, load, encode, record): rows per second, and the backend's
//!   peak memory at 100,000 rows against 1,000,000;
//! - one product changed, broadcast to 1,000 live replicas: the pass's time,
//!   and how many bodies it stored;
//! - a burst: 10,000 products changed while 10 live replicas hold all
//!   100,000, planned and recorded by one pass: the changes a second the
//!   relay's one core keeps up with, what the sustained rate's target asks
//!   of the engine before the registers and the writers take their share
//!   (`--burst`, `--burst-replicas`, `--burst-products`).
//!
//! Run with `bash scripts/bench.sh` (a release build of the extension).
//! Sizes can be made smaller for a quick look: `--large 200000`.

use std::time::Instant;

use magic_sync_tests::args::arg;
use magic_sync_tests::relaying::{drain, relay};
use magic_sync_tests::{add_products, Cluster, BROADCAST_SHOP};
use postgres::Client;

/// A process's private resident memory now, in MiB (RssAnon: what it
/// allocated itself, leaving out the shared buffers every backend maps).
fn private_mib(pid: i32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with("RssAnon:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map(|kb| kb / 1024.0)
}

/// Samples a backend's private memory every few milliseconds until told to
/// stop; answers the peak.
struct PeakMemory {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    sampler: std::thread::JoinHandle<f64>,
}

impl PeakMemory {
    fn watch(pid: i32) -> PeakMemory {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopping = stop.clone();
        let sampler = std::thread::spawn(move || {
            let mut peak: f64 = 0.0;
            while !stopping.load(std::sync::atomic::Ordering::Relaxed) {
                peak = peak.max(private_mib(pid).unwrap_or(0.0));
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            peak
        });
        PeakMemory { stop, sampler }
    }

    fn peak(self) -> f64 {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.sampler.join().unwrap_or(f64::NAN)
    }
}

/// Writes out what setting up left dirty, in the server and in the
/// kernel, so that the pass measured does not pay for the fill before it.
fn settle(pg: &mut Client) {
    pg.batch_execute("CHECKPOINT").unwrap();
    let _ = std::process::Command::new("sync").status();
}

/// Provisions one replica with `rows` products in a database of its own;
/// answers (seconds, rows per second, peak MiB of the relaying backend).
fn provision_one(cluster: &Cluster, rows: i64) -> (f64, f64, f64) {
    let db = format!("provision_{rows}");
    let mut setup = cluster.database_with_extension(&db);
    setup.batch_execute(BROADCAST_SHOP).unwrap();
    add_products(&mut setup, rows as usize);
    drain(&mut setup); // the notes of the fill, with no replica yet
    setup
        .batch_execute("INSERT INTO shop.registers (id) VALUES (gen_random_uuid())")
        .unwrap();
    setup.batch_execute("VACUUM ANALYZE").unwrap();
    settle(&mut setup);
    let mut pg = cluster.connect(&db);
    pg.batch_execute("SET magic_sync.pass_timings = on")
        .unwrap();
    let pid: i32 = pg.query_one("SELECT pg_backend_pid()", &[]).unwrap().get(0);
    let memory = PeakMemory::watch(pid);
    let started = Instant::now();
    let summary = relay(&mut pg);
    let seconds = started.elapsed().as_secs_f64();
    let peak = memory.peak();
    assert_eq!(summary["provisioned"], 1, "{summary}");
    println!("    steps (ms): {}", summary["took_ms"]);
    (seconds, rows as f64 / seconds, peak)
}

/// A database of its own with `products` products and `replicas` live
/// replicas provisioned with all of them, each having taken and confirmed
/// what it was sent, analyzed: answers it, and the seconds the
/// provisioning pass took.
fn replicas_holding_every_product(
    cluster: &Cluster,
    db: &str,
    replicas: i64,
    products: i64,
) -> (Client, f64) {
    let mut pg = cluster.database_with_extension(db);
    pg.batch_execute(BROADCAST_SHOP).unwrap();
    add_products(&mut pg, products as usize);
    drain(&mut pg);
    pg.execute(
        "INSERT INTO shop.registers (id) SELECT gen_random_uuid() FROM generate_series(1, $1::bigint)",
        &[&replicas],
    )
    .unwrap();
    let started = Instant::now();
    relay(&mut pg);
    let provisioning = started.elapsed().as_secs_f64();
    pg.batch_execute(
        "DELETE FROM sync.outbox; \
         UPDATE sync.replicas SET applied_sequence = last_sequence, applied_epoch = epoch",
    )
    .unwrap();
    pg.batch_execute("VACUUM ANALYZE").unwrap();
    (pg, provisioning)
}

/// One product changed with `replicas` live replicas holding `products`:
/// answers (milliseconds of the pass, bodies stored).
fn broadcast_one_change(cluster: &Cluster, replicas: i64, products: i64) -> (f64, i64, f64) {
    let (mut pg, provisioning) =
        replicas_holding_every_product(cluster, "broadcast", replicas, products);
    pg.batch_execute("SET magic_sync.pass_timings = on")
        .unwrap();
    pg.batch_execute(
        "UPDATE shop.products SET price_cents = price_cents + 1 WHERE name = 'Product 1'",
    )
    .unwrap();
    let started = Instant::now();
    let summary = relay(&mut pg);
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    assert_eq!(summary["messages"], replicas, "{summary}");
    println!("    steps (ms): {}", summary["took_ms"]);
    let bodies: i64 = pg
        .query_one("SELECT count(DISTINCT body) FROM sync.outbox", &[])
        .unwrap()
        .get(0);
    (ms, bodies, provisioning)
}

/// `changes` of `products` changed while `replicas` live replicas, kept up
/// to date, hold them all: answers (milliseconds of the one pass that
/// plans and records them, changes a second).
fn relay_a_burst(cluster: &Cluster, replicas: i64, products: i64, changes: i64) -> (f64, f64) {
    let (mut pg, _) = replicas_holding_every_product(cluster, "burst", replicas, products);
    pg.execute(
        "UPDATE shop.products SET price_cents = price_cents + 1, updated_at = now() \
         WHERE id IN (SELECT id FROM shop.products ORDER BY random() LIMIT $1::bigint)",
        &[&changes],
    )
    .unwrap();
    settle(&mut pg);
    pg.batch_execute("SET magic_sync.pass_timings = on")
        .unwrap();
    let started = Instant::now();
    let summary = relay(&mut pg);
    let seconds = started.elapsed().as_secs_f64();
    assert_eq!(summary["notes"], changes, "{summary}");
    println!("    steps (ms): {}", summary["took_ms"]);
    (seconds * 1000.0, changes as f64 / seconds)
}

const LISTS: &str = "
    CREATE SCHEMA shop;
    CREATE TABLE shop.registers (id uuid PRIMARY KEY, active boolean NOT NULL DEFAULT true);
    CREATE TABLE shop.customers (id uuid PRIMARY KEY, name text NOT NULL);
    CREATE TABLE shop.lists (id uuid PRIMARY KEY);
    CREATE TABLE shop.list_members (
        list_id uuid REFERENCES shop.lists (id), customer_id uuid REFERENCES shop.customers (id),
        PRIMARY KEY (list_id, customer_id));
    CREATE TABLE shop.register_lists (
        list_id uuid REFERENCES shop.lists (id), register_id uuid REFERENCES shop.registers (id),
        PRIMARY KEY (list_id, register_id));
    SELECT sync.declare_replicas('shop.registers', live => 'active');
    SELECT sync.declare_table('shop.customers',
        sync => 'grouped(members => shop.list_members, assigned => shop.register_lists)');
";

/// A list of `customers` given to a register (one row in the assignment
/// table): answers (milliseconds of the pass that sends them, rows sent).
fn give_a_list(cluster: &Cluster, customers: i64) -> (f64, i64) {
    let mut pg = cluster.database_with_extension("lists");
    pg.batch_execute(LISTS).unwrap();
    pg.execute(
        "INSERT INTO shop.customers SELECT gen_random_uuid(), 'Customer ' || i \
         FROM generate_series(1, $1::bigint) AS i",
        &[&customers],
    )
    .unwrap();
    pg.batch_execute(
        "INSERT INTO shop.lists VALUES ('00000000-0000-0000-0000-00000000000a'); \
         INSERT INTO shop.list_members SELECT '00000000-0000-0000-0000-00000000000a', id FROM shop.customers; \
         INSERT INTO shop.registers VALUES ('00000000-0000-0000-0000-0000000000f1')",
    )
    .unwrap();
    drain(&mut pg);
    pg.batch_execute("DELETE FROM sync.outbox").unwrap();
    pg.batch_execute("VACUUM ANALYZE").unwrap();
    pg.batch_execute("SET magic_sync.pass_timings = on")
        .unwrap();
    pg.batch_execute(
        "INSERT INTO shop.register_lists VALUES \
         ('00000000-0000-0000-0000-00000000000a', '00000000-0000-0000-0000-0000000000f1')",
    )
    .unwrap();
    let started = Instant::now();
    let summary = relay(&mut pg);
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    println!("    steps (ms): {}", summary["took_ms"]);
    let sent: i64 = pg
        .query_one(
            "SELECT count(*) FROM sync.held WHERE table_name = 'customers'",
            &[],
        )
        .unwrap()
        .get(0);
    (ms, sent)
}

fn main() {
    let large = arg::<i64>("--large", 1_000_000);
    let small = arg::<i64>("--small", large / 10);
    let replicas = arg::<i64>("--replicas", 1_000);
    let products = arg::<i64>("--products", 1_000);
    // A server sized for the work: a million rows and what is recorded of
    // them fit in its buffers, as they would on a head office's server.
    let cluster = Cluster::start_with(&["shared_buffers=1GB"]);
    println!("(a throwaway PostgreSQL 15 with shared_buffers = 1GB, fsync off)\n");

    println!("Provisioning one replica (server side: one relay pass)");
    let (s_small, rate_small, mem_small) = provision_one(&cluster, small);
    println!("  {small:>9} rows: {s_small:>7.2} s  {rate_small:>10.0} rows/s  peak private memory of the backend {mem_small:>7.1} MiB");
    let (s_large, rate_large, mem_large) = provision_one(&cluster, large);
    println!("  {large:>9} rows: {s_large:>7.2} s  {rate_large:>10.0} rows/s  peak private memory of the backend {mem_large:>7.1} MiB");
    println!(
        "  peak memory at {large} rows is {:.2}x its peak at {small} (target: at most 1.5x); rate {:.0} rows/s (target: at least 100,000)",
        mem_large / mem_small,
        rate_large
    );

    println!("\nOne product changed, broadcast to {replicas} live replicas holding {products} products each");
    let (ms, bodies, provisioning) = broadcast_one_change(&cluster, replicas, products);
    println!("  provisioning them all took {provisioning:.2} s");
    println!("  the pass planned and recorded in {ms:.1} ms (target: at most 200 ms), storing {bodies} body (target: 1)");

    let burst = arg::<i64>("--burst", 10_000);
    let burst_replicas = arg::<i64>("--burst-replicas", 10);
    let burst_products = arg::<i64>("--burst-products", 100_000);
    println!(
        "\nA burst: {burst} of {burst_products} products changed, {burst_replicas} live replicas holding them all"
    );
    let (ms, rate) = relay_a_burst(&cluster, burst_replicas, burst_products, burst);
    println!(
        "  one pass planned and recorded them in {ms:.0} ms: {rate:.0} changes/s on the relay's one core \
         (the sustained rate's target: at least 20,000/s, the registers and writers besides)"
    );

    let customers = arg::<i64>("--customers", 10_000);
    println!(
        "\nA list of {customers} customers given to a register (one row in the assignment table)"
    );
    let (ms, sent) = give_a_list(&cluster, customers);
    println!("  the pass that sends them took {ms:.1} ms (target: at most 1,000 ms), sending {sent} customers");
}

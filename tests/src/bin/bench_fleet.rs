//! How far one head office goes (issue 38): the relay worker over NATS
//! JetStream with a fleet of registers (1,000 by default), each a SQLite
//! file of its own running the real device loop over its own durable
//! consumer, all of them threads of this one process. It measures what a
//! head office pays per register, per change and per row, so that what
//! 10,000 or 100,000 registers cost is arithmetic on measured figures:
//!
//! - the fleet provisioned: how long, and what the registers cost
//!   nats-server in memory (its private memory before and after, per
//!   register: a connection and a durable consumer each);
//! - changes apart: a product changed, each once every register applied
//!   the last: the relay worker's CPU per change per register (publishing
//!   each register's message, filing its report that it applied it), the
//!   rest of PostgreSQL's, nats-server's, the bytes through nats-server
//!   and the WAL PostgreSQL wrote, each per message delivered; and how
//!   long until the last register applied each change;
//! - changes at a steady rate: the same per change when passes carry
//!   several changes to each register at once;
//! - a receipt from every register: the worker's CPU per Up filed (and
//!   its answer sent down);
//! - PostgreSQL's storage per held row (`sync.held_recorded` with its
//!   indexes, one row per register for each row of its own, one for the
//!   whole fleet for each broadcast row), and the engine's other tables
//!   per register;
//! - registers away: what waits for them, per message, in the NATS
//!   stream (its own count of bytes, and its files on disk) and in
//!   PostgreSQL's outbox; and a consumer's files.
//!
//! Run on release builds: `cargo pgrx install --release -p magic_sync`,
//! then `cargo run --release -p magic_sync_tests --bin bench_fleet`. The
//! cluster is made with `$PG_CONFIG`'s PostgreSQL, so a copy of the
//! installation (its `lib` and `share` trees, which PostgreSQL finds
//! beside its programs) holding a release package of the extension
//! (`cargo pgrx package`) serves as well, and is left alone by a
//! reinstall of the machine's meanwhile.
//! Options: `--registers N` (1000), `--products N` (1000), `--labels N`
//! (10 rows of each register's own), `--apart N` (10 changes),
//! `--steady-rate N` (5 changes a second) and `--steady-seconds N` (30),
//! `--away N` (100 registers) and `--away-changes N` (20),
//! `--concurrency N` (`magic_sync.concurrency`, 16).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use magic_sync_replica::transport::nats::{Nats, NatsSettings};
use magic_sync_replica::transport::{run, Control, Options, Status};
use magic_sync_replica::{install, Received, Replica, Settings, Table, Tables};
use magic_sync_tests::add_products;
use magic_sync_tests::args::arg;
use magic_sync_tests::figures::quantile;
use magic_sync_tests::nats::{self, NatsServer};
use magic_sync_tests::worker_shop::private_mib;
use magic_sync_tests::Cluster;
use postgres::Client;
use rusqlite::hooks::Action;
use rusqlite::Connection;
use uuid::Uuid;

const SERVER_SCHEMA: &str = "
    CREATE SCHEMA shop;
    CREATE TABLE shop.registers (id uuid PRIMARY KEY, active boolean NOT NULL DEFAULT true);
    CREATE TABLE shop.products (
        id uuid PRIMARY KEY, name text NOT NULL, price_cents bigint NOT NULL,
        updated_at timestamptz NOT NULL DEFAULT now());
    CREATE TABLE shop.labels (
        id uuid PRIMARY KEY, register_id uuid NOT NULL, text text NOT NULL);
    CREATE TABLE shop.receipts (
        id uuid PRIMARY KEY, register_id uuid NOT NULL, total_cents bigint NOT NULL,
        sold_at timestamptz NOT NULL);
    SELECT sync.declare_replicas('shop.registers', live => 'active');
    SELECT sync.declare_table('shop.products', sync => 'broadcast');
    SELECT sync.declare_table('shop.labels', sync => 'assigned(register_id)');
    SELECT sync.declare_table('shop.receipts', mirror => 'record', origin => 'register_id');
";

const REGISTER_SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS products (
        id BLOB PRIMARY KEY NOT NULL, name TEXT NOT NULL,
        price_cents INTEGER NOT NULL, updated_at TEXT NOT NULL);
    CREATE TABLE IF NOT EXISTS labels (
        id BLOB PRIMARY KEY NOT NULL, register_id BLOB NOT NULL, text TEXT NOT NULL);
    CREATE TABLE IF NOT EXISTS receipts (
        id BLOB PRIMARY KEY NOT NULL, register_id BLOB NOT NULL,
        total_cents INTEGER NOT NULL, sold_at TEXT NOT NULL);
";

fn tables() -> Tables {
    Tables::new(vec![
        Table::catalog("products"),
        Table::catalog("labels"),
        Table::record("receipts").origin("register_id"),
    ])
}

/// The prices the changes write: above every product's own.
const BASE_PRICE: i64 = 1_000_000_000;

/// How long the fleet gets to be provisioned, and each step to settle.
const PATIENCE: Duration = Duration::from_secs(1800);

fn main() {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        default_hook(info);
        std::process::exit(1);
    }));
    let registers = arg::<usize>("--registers", 1000);
    let products = arg::<usize>("--products", 1000);
    let labels = arg::<usize>("--labels", 10);
    let apart = arg::<usize>("--apart", 10);
    let steady_rate = arg::<f64>("--steady-rate", 5.0);
    let steady_seconds = arg::<u64>("--steady-seconds", 30);
    let away = arg::<usize>("--away", 100).min(registers);
    let away_changes = arg::<usize>("--away-changes", 20);
    let concurrency = arg::<u32>("--concurrency", 16);

    println!(
        "bench_fleet: {registers} registers over NATS, {products} products each, {labels} \
         rows of its own each; {} build, {} cores, load average at start {}",
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        },
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    let mut head = HeadOffice::start(products, concurrency);
    let before = head.storage();
    let nats_before = head.nats_private_mib();

    // The fleet: its registers, their own rows, their files and loops.
    let began = Instant::now();
    let ids = head.add_registers(registers, labels);
    let fleet = Fleet::start(&head.nats.url(), &ids);
    let provisioned = fleet.wait(PATIENCE, |r| {
        r.products_inserted.load(Ordering::Relaxed) >= products as u64
            && r.labels_inserted.load(Ordering::Relaxed) >= labels as u64
    });
    assert!(provisioned, "the fleet was not provisioned in {PATIENCE:?}");
    fleet.wait(PATIENCE, |r| r.idle.load(Ordering::Relaxed));
    let provisioning = began.elapsed();
    head.settle();
    let after = head.storage();
    let nats_after = head.nats_private_mib();
    println!();
    println!(
        "The fleet provisioned: {registers} registers in {:.1} s; the loops reported {} \
         trouble(s) (reconnections) meanwhile",
        provisioning.as_secs_f64(),
        fleet.troubles()
    );
    println!(
        "  nats-server's private memory {nats_before:.1} MiB with no register, \
         {nats_after:.1} MiB with {registers} connected (each a connection and a durable \
         consumer): {:.1} kB a register",
        (nats_after - nats_before) * 1024.0 / registers as f64
    );
    println!(
        "  this process (every register's thread, SQLite and NATS client): {:.0} MiB private",
        private_mib(std::process::id() as i32).unwrap_or(0.0)
    );
    println!(
        "  the relay worker's private memory: {:.1} MiB",
        head.worker_private_mib()
    );
    let held_rows = after.held_rows;
    println!(
        "  sync.held_recorded: {} rows, {} with its indexes ({} heap, {} indexes): {:.0} bytes \
         a held row ({products} products recorded once for the fleet, {} rows of the \
         registers' own)",
        held_rows,
        mib(after.held_bytes),
        mib(after.held_heap),
        mib(after.held_bytes - after.held_heap),
        after.held_bytes as f64 / held_rows as f64,
        registers * labels
    );
    let others =
        (after.engine_bytes - after.held_bytes) - (before.engine_bytes - before.held_bytes);
    println!(
        "  the engine's other tables and indexes grew by {} for the fleet: {:.0} bytes a \
         register (its row in sync.replicas, its follower's row, its chain, what it was last \
         sent and told...)",
        mib(others),
        others as f64 / registers as f64
    );
    let largest: Vec<String> = head
        .tables()
        .iter()
        .take(8)
        .map(|(name, rows, bytes)| {
            format!(
                "{name} {rows} rows {:.0} kB ({:.0} bytes a register)",
                *bytes as f64 / 1024.0,
                *bytes as f64 / registers as f64
            )
        })
        .collect();
    println!("  the engine's largest tables now: {}", largest.join("; "));
    let stream = head.stream();
    println!(
        "  the down stream: {} consumers; their files {} on disk: {:.1} kB a consumer",
        stream.consumers,
        mib(head.consumer_files()),
        head.consumer_files() as f64 / 1024.0 / stream.consumers.max(1) as f64
    );

    // The fleet connected, nothing to do: what waiting costs.
    let mark = Mark::now(&mut head);
    std::thread::sleep(Duration::from_secs(20));
    let idle = mark.since(&mut head);
    println!(
        "  the fleet connected and nothing to do, over {:.0} s: the relay worker {:.1} ms of CPU \
         a second, the rest of PostgreSQL {:.1}, nats-server {:.1} ({:.2} ms a second a \
         register: each register's pull waits 5 s at the server and is made again); \
         nats-server took in {:.0} and sent {:.0} bytes a second",
        idle.seconds,
        idle.relay_ms / idle.seconds,
        idle.rest_ms / idle.seconds,
        idle.nats_ms / idle.seconds,
        idle.nats_ms / idle.seconds / registers as f64,
        idle.in_bytes / idle.seconds,
        idle.out_bytes / idle.seconds,
    );

    // Changes apart: each once every register applied the one before.
    println!();
    println!("Changes apart ({apart}), each once every register applied the one before:");
    let product_ids = head.product_ids();
    let mut next_product = 0;
    let mark = Mark::now(&mut head);
    let mut last_applied = Vec::new();
    for _ in 0..apart {
        let target: Vec<u64> = fleet.each(|r| r.products_updated.load(Ordering::Relaxed) + 1);
        let changed = Instant::now();
        head.change(product_ids[next_product], next_product);
        next_product += 1;
        let done = fleet.wait_indexed(PATIENCE, |i, r| {
            r.products_updated.load(Ordering::Relaxed) >= target[i]
        });
        assert!(done, "a change reached every register");
        last_applied.push(changed.elapsed().as_secs_f64() * 1000.0);
    }
    fleet.wait(PATIENCE, |r| r.idle.load(Ordering::Relaxed));
    let spent = mark.since_the_last_reports(&mut head);
    head.settle();
    last_applied.sort_by(|a, b| a.total_cmp(b));
    println!(
        "  until the last register applied a change: median {:.0} ms, max {:.0} ms",
        quantile(&last_applied, 0.5),
        last_applied[last_applied.len() - 1]
    );
    spent.print(apart, registers, "change", &idle);

    // Changes at a steady rate: passes carry what came meanwhile.
    let steady = (steady_rate * steady_seconds as f64).round() as usize;
    assert!(
        next_product + steady + away_changes <= product_ids.len(),
        "--products must be at least the changes made, each of its own product"
    );
    println!();
    println!(
        "Changes at a steady rate ({steady_rate} a second for {steady_seconds} s, {steady} \
         changes, each of its own product):"
    );
    let target: Vec<u64> =
        fleet.each(|r| r.products_updated.load(Ordering::Relaxed) + steady as u64);
    let messages_before: u64 = fleet
        .each(|r| r.messages.load(Ordering::Relaxed))
        .iter()
        .sum();
    let passes_before = head.passes();
    let mark = Mark::now(&mut head);
    let began = Instant::now();
    for i in 0..steady {
        let due = Duration::from_secs_f64(i as f64 / steady_rate);
        if let Some(wait) = due.checked_sub(began.elapsed()) {
            std::thread::sleep(wait);
        }
        head.change(product_ids[next_product], next_product);
        next_product += 1;
    }
    let written = began.elapsed();
    let done = fleet.wait_indexed(PATIENCE, |i, r| {
        r.products_updated.load(Ordering::Relaxed) >= target[i]
    });
    assert!(done, "the steady changes reached every register");
    let caught_up = began.elapsed();
    fleet.wait(PATIENCE, |r| r.idle.load(Ordering::Relaxed));
    let spent = mark.since_the_last_reports(&mut head);
    head.settle();
    let messages_after: u64 = fleet
        .each(|r| r.messages.load(Ordering::Relaxed))
        .iter()
        .sum();
    println!(
        "  written in {:.1} s, every register caught up {:.1} s after the first; {} passes, \
         {:.1} messages a register ({:.1} changes a message)",
        written.as_secs_f64(),
        caught_up.as_secs_f64(),
        head.passes() - passes_before,
        (messages_after - messages_before) as f64 / registers as f64,
        steady as f64 * registers as f64 / (messages_after - messages_before).max(1) as f64
    );
    spent.print(steady, registers, "change", &idle);

    // A receipt from every register.
    println!();
    println!("A receipt from every register ({registers} Ups with rows, each answered):");
    let mark = Mark::now(&mut head);
    for register in &fleet.registers {
        register.sell();
    }
    let began = Instant::now();
    while head.receipts() < registers as i64 {
        assert!(began.elapsed() < PATIENCE, "every receipt filed");
        std::thread::sleep(Duration::from_millis(50));
    }
    let filed = began.elapsed();
    fleet.wait(PATIENCE, |r| r.idle.load(Ordering::Relaxed));
    let spent = mark.since_the_last_reports(&mut head);
    head.settle();
    println!(
        "  every receipt filed {:.1} s after the first was sold",
        filed.as_secs_f64()
    );
    spent.print(registers, 1, "receipt", &idle);

    // Registers away: what waits for them.
    println!();
    println!(
        "{away} registers away while {away_changes} changes are made (each waits for them in \
         the stream and the outbox):"
    );
    let (gone, staying) = fleet.registers.split_at(away);
    for register in gone {
        register.control.stop();
    }
    for register in gone {
        register.join();
    }
    head.settle();
    let stream_before = head.stream();
    let files_before = head.stream_files();
    let away_ids: Vec<Uuid> = gone.iter().map(|r| r.id).collect();
    let waiting_before = head.waiting_for(&away_ids);
    // Each change its own message: the next once the registers there
    // applied it.
    for _ in 0..away_changes {
        let targets: Vec<u64> = staying
            .iter()
            .map(|r| r.products_updated.load(Ordering::Relaxed) + 1)
            .collect();
        head.change(product_ids[next_product], next_product);
        next_product += 1;
        let began = Instant::now();
        while !staying
            .iter()
            .zip(&targets)
            .all(|(r, t)| r.products_updated.load(Ordering::Relaxed) >= *t)
        {
            assert!(began.elapsed() < PATIENCE, "the registers not away took it");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    head.settle();
    let stream_after = head.stream();
    let files_after = head.stream_files();
    let waiting_after = head.waiting_for(&away_ids);
    let held = stream_after.messages - stream_before.messages;
    println!(
        "  the down stream holds {held} more messages: {} by its own count ({:.0} bytes a \
         message), its files {} more on disk ({:.0} bytes a message)",
        mib(stream_after.bytes - stream_before.bytes),
        (stream_after.bytes - stream_before.bytes) as f64 / held.max(1) as f64,
        mib(files_after.saturating_sub(files_before)),
        files_after.saturating_sub(files_before) as f64 / held.max(1) as f64
    );
    let (rows, outbox_bytes, follower_bytes, bodies, body_bytes) = head.outbox();
    println!(
        "  the outbox holds {} more messages for them ({} in all), {:.0} bytes a message with \
         its indexes; each follows the stand-in's, a row of sync.follower_messages ({:.0} bytes \
         with its indexes), whose bodies are stored once for every register ({bodies} bodies, \
         {:.0} bytes each)",
        waiting_after - waiting_before,
        rows,
        outbox_bytes as f64 / rows.max(1) as f64,
        follower_bytes,
        body_bytes as f64 / bodies.max(1) as f64
    );

    // Publishing alone, then the fleet back: the two halves of what a
    // message costs the worker.
    println!();
    println!(
        "Every register away while {away_changes} more changes are made; then the whole fleet \
         back, taking what it missed:"
    );
    for register in staying {
        register.control.stop();
    }
    for register in staying {
        register.join();
    }
    let troubles = fleet.troubles();
    head.settle();
    let mark = Mark::now(&mut head);
    // Each change its own message: the next once the last was published.
    for _ in 0..away_changes {
        head.change(product_ids[next_product], next_product);
        next_product += 1;
        let began = Instant::now();
        while head.notes() > 0 || head.unpublished() > 0 {
            assert!(began.elapsed() < PATIENCE, "everything published");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    let spent = mark.since_the_last_reports(&mut head);
    println!(
        "  publishing alone, a message a change to every register (no register there to take \
         or report):"
    );
    spent.print(away_changes, registers, "change", &idle);
    head.settle();
    let mark = Mark::now(&mut head);
    let began = Instant::now();
    let back = Fleet::start_in(fleet.dir(), &head.nats.url(), &ids);
    // Each missed the last changes, and the first `away` the ones before.
    let caught = back.wait_indexed(PATIENCE, |i, r| {
        let missed = if i < away {
            2 * away_changes
        } else {
            away_changes
        };
        r.products_updated.load(Ordering::Relaxed) >= missed as u64
    });
    assert!(caught, "the fleet caught up");
    let caught_up = began.elapsed();
    back.wait(PATIENCE, |r| r.idle.load(Ordering::Relaxed));
    let spent = mark.since_the_last_reports(&mut head);
    let taken: u64 = back
        .each(|r| r.messages.load(Ordering::Relaxed))
        .iter()
        .sum();
    let sent: u64 = back.each(|r| r.sent.load(Ordering::Relaxed)).iter().sum();
    println!(
        "  the fleet back: caught up in {:.1} s, {taken} messages taken and {sent} Ups sent \
         (what each applied, where it stands), each register's loop started afresh:",
        caught_up.as_secs_f64()
    );
    spent.print(sent as usize, 1, "Up", &idle);
    println!(
        "\nThe loops reported {} trouble(s) over the run ({troubles} before the fleet came \
         back, {} since); the worker raised {} alarm(s) (a register provisioned again, a \
         stalled one healed).",
        troubles + back.troubles(),
        back.troubles(),
        head.alarms()
    );
}

fn mib(bytes: i64) -> String {
    format!("{:.1} MiB", bytes as f64 / 1024.0 / 1024.0)
}

/// PostgreSQL with the extension, its relay worker publishing to a
/// nats-server with monitoring, and the shop.
struct HeadOffice {
    pg: Client,
    // Dropped in this order: the server, then NATS.
    _cluster: Cluster,
    nats: NatsServer,
}

/// What the engine stores.
struct Storage {
    held_rows: i64,
    held_bytes: i64,
    held_heap: i64,
    /// Every table of schema sync, with its indexes and TOAST.
    engine_bytes: i64,
}

/// What the down stream says of itself.
struct Stream {
    messages: i64,
    bytes: i64,
    consumers: i64,
}

impl HeadOffice {
    fn start(products: usize, concurrency: u32) -> HeadOffice {
        let nats = nats::start_monitored();
        let url = format!("magic_sync.nats_url={}", nats.url());
        let concurrency = format!("magic_sync.concurrency={concurrency}");
        let cluster = Cluster::start_with(&[
            "shared_preload_libraries=magic_sync",
            "magic_sync.database=shop",
            "magic_sync.transport=nats",
            &url,
            &concurrency,
            "shared_buffers=512MB",
        ]);
        let mut pg = cluster.database_with_extension("shop");
        pg.batch_execute(SERVER_SCHEMA).unwrap();
        add_products(&mut pg, products);
        HeadOffice {
            pg,
            _cluster: cluster,
            nats,
        }
    }

    fn add_registers(&mut self, count: usize, labels: usize) -> Vec<Uuid> {
        let ids: Vec<Uuid> = (0..count).map(|_| Uuid::new_v4()).collect();
        self.pg
            .execute(
                "INSERT INTO shop.registers (id) SELECT unnest($1::uuid[])",
                &[&ids],
            )
            .unwrap();
        self.pg
            .execute(
                "INSERT INTO shop.labels (id, register_id, text) \
                 SELECT gen_random_uuid(), r, 'Label ' || i \
                 FROM unnest($1::uuid[]) AS r, generate_series(1, $2::int) AS i",
                &[&ids, &(labels as i32)],
            )
            .unwrap();
        ids
    }

    fn product_ids(&mut self) -> Vec<Uuid> {
        self.pg
            .query("SELECT id FROM shop.products ORDER BY price_cents", &[])
            .unwrap()
            .iter()
            .map(|row| row.get(0))
            .collect()
    }

    /// A product's price changed, to one no product had.
    fn change(&mut self, product: Uuid, n: usize) {
        self.pg
            .execute(
                "UPDATE shop.products SET price_cents = $2, updated_at = now() WHERE id = $1",
                &[&product, &(BASE_PRICE + n as i64)],
            )
            .unwrap();
    }

    fn receipts(&mut self) -> i64 {
        self.pg
            .query_one("SELECT count(*) FROM shop.receipts", &[])
            .unwrap()
            .get(0)
    }

    fn passes(&mut self) -> i64 {
        self.pg
            .query_opt("SELECT passes FROM sync.relay_state", &[])
            .unwrap()
            .map_or(0, |row| row.get(0))
    }

    /// Lets the worker's checks let go of what the registers applied, and
    /// the statistics catch up: storage is measured as it settles.
    fn settle(&mut self) {
        std::thread::sleep(Duration::from_secs(15));
        // Rewritten whole, so that what a table takes is what it holds,
        // not the room a burst left it (provisioning fills the outbox).
        let tables: Vec<String> = self
            .pg
            .query(
                "SELECT format('%I.%I', schemaname, tablename) FROM pg_tables \
                 WHERE schemaname = 'sync'",
                &[],
            )
            .unwrap()
            .iter()
            .map(|row| row.get(0))
            .collect();
        for table in tables {
            self.pg
                .batch_execute(&format!("VACUUM FULL {table}"))
                .unwrap();
        }
        self.pg.batch_execute("CHECKPOINT").unwrap();
    }

    /// The engine's tables, largest first: name, rows, bytes with their
    /// indexes and TOAST.
    fn tables(&mut self) -> Vec<(String, i64, i64)> {
        self.pg
            .query(
                "SELECT c.relname::text, c.reltuples::bigint, pg_total_relation_size(c.oid) \
                   FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
                  WHERE n.nspname = 'sync' AND c.relkind = 'r' \
                  ORDER BY 3 DESC",
                &[],
            )
            .unwrap()
            .iter()
            .map(|row| (row.get(0), row.get(1), row.get(2)))
            .collect()
    }

    fn storage(&mut self) -> Storage {
        let row = self
            .pg
            .query_one(
                "SELECT (SELECT count(*) FROM sync.held_recorded),
                        pg_total_relation_size('sync.held_recorded'),
                        pg_relation_size('sync.held_recorded'),
                        (SELECT sum(pg_total_relation_size(c.oid))::bigint
                           FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                          WHERE n.nspname = 'sync' AND c.relkind = 'r')",
                &[],
            )
            .unwrap();
        Storage {
            held_rows: row.get(0),
            held_bytes: row.get(1),
            held_heap: row.get(2),
            engine_bytes: row.get(3),
        }
    }

    /// The outbox: its rows, and its bytes with its indexes a row; the
    /// followers' messages: bytes a row; the bodies: how many, and their
    /// bytes with their TOAST and indexes.
    fn outbox(&mut self) -> (i64, i64, f64, i64, i64) {
        let row = self
            .pg
            .query_one(
                "SELECT (SELECT count(*) FROM sync.outbox),
                        pg_total_relation_size('sync.outbox'),
                        pg_total_relation_size('sync.follower_messages')::float8
                          / greatest((SELECT count(*) FROM sync.follower_messages), 1),
                        (SELECT count(*) FROM sync.bodies),
                        pg_total_relation_size('sync.bodies')",
                &[],
            )
            .unwrap();
        (row.get(0), row.get(1), row.get(2), row.get(3), row.get(4))
    }

    fn alarms(&mut self) -> i64 {
        self.pg
            .query_one("SELECT count(*) FROM sync.alarms", &[])
            .unwrap()
            .get(0)
    }

    /// Notes no pass has planned yet.
    fn notes(&mut self) -> i64 {
        self.pg
            .query_one("SELECT count(*) FROM sync.notes", &[])
            .unwrap()
            .get(0)
    }

    /// Messages in the outbox not yet published.
    fn unpublished(&mut self) -> i64 {
        self.pg
            .query_one("SELECT count(*) FROM sync.outbox WHERE NOT published", &[])
            .unwrap()
            .get(0)
    }

    /// Messages in the outbox for these replicas (answers left out).
    fn waiting_for(&mut self, replicas: &[Uuid]) -> i64 {
        self.pg
            .query_one(
                "SELECT count(*) FROM sync.outbox WHERE replica = ANY($1) AND kind <> 'filed'",
                &[&replicas],
            )
            .unwrap()
            .get(0)
    }

    fn worker_pid(&mut self) -> i32 {
        self.pg
            .query_one(
                "SELECT pid FROM pg_stat_activity WHERE backend_type = 'magic_sync relay'",
                &[],
            )
            .unwrap()
            .get(0)
    }

    /// The postmaster's process id (the first line of postmaster.pid).
    fn postmaster(&mut self) -> u32 {
        let dir: String = self
            .pg
            .query_one("SHOW data_directory", &[])
            .unwrap()
            .get(0);
        let pid = std::fs::read_to_string(Path::new(&dir).join("postmaster.pid"))
            .ok()
            .and_then(|text| text.lines().next().and_then(|l| l.trim().parse().ok()));
        pid.unwrap_or_else(|| {
            // Not readable as this user: the parent of the relay worker.
            let worker = self.worker_pid() as u32;
            stat_fields(worker).map_or(0, |f| field(&f, 1) as u32)
        })
    }

    fn worker_private_mib(&mut self) -> f64 {
        let pid = self.worker_pid();
        private_mib(pid).unwrap_or(0.0)
    }

    fn nats_private_mib(&self) -> f64 {
        private_mib(self.nats.pid().expect("nats-server runs") as i32).unwrap_or(0.0)
    }

    fn stream(&self) -> Stream {
        let stream = self
            .nats
            .stream("MAGIC_SYNC_DOWN")
            .expect("the down stream");
        let state = &stream["state"];
        Stream {
            messages: state["messages"].as_i64().unwrap_or(0),
            bytes: state["bytes"].as_i64().unwrap_or(0),
            consumers: state["consumer_count"].as_i64().unwrap_or(0),
        }
    }

    fn stream_dir(&self) -> PathBuf {
        self.nats
            .store_dir()
            .join("jetstream/$G/streams/MAGIC_SYNC_DOWN")
    }

    /// The down stream's message files, in bytes on disk.
    fn stream_files(&self) -> i64 {
        disk_usage(&self.stream_dir().join("msgs"))
    }

    /// The down stream's consumers' files, in bytes on disk.
    fn consumer_files(&self) -> i64 {
        disk_usage(&self.stream_dir().join("obs"))
    }
}

/// Bytes a directory's files take on disk (blocks allocated), all the
/// way down.
fn disk_usage(dir: &Path) -> i64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|entry| match entry.metadata() {
            Ok(meta) if meta.is_dir() => disk_usage(&entry.path()),
            Ok(meta) => meta.blocks() as i64 * 512,
            Err(_) => 0,
        })
        .sum()
}

/// A process's /proc stat fields after its name: state, ppid, ...
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.split_once(" (")?.1.rsplit_once(") ")?;
    Some(rest.split_whitespace().map(str::to_owned).collect())
}

/// Linux counts CPU time in hundredths of a second (USER_HZ).
const MS_A_TICK: f64 = 10.0;

/// A field of a stat line, in ticks.
fn field(fields: &[String], i: usize) -> f64 {
    fields.get(i).and_then(|f| f.parse().ok()).unwrap_or(0.0)
}

/// CPU time (user and system), in ms, of a process.
fn cpu_of(pid: u32) -> f64 {
    stat_fields(pid).map_or(0.0, |f| (field(&f, 11) + field(&f, 12)) * MS_A_TICK)
}

/// The CPU time, in ms, of PostgreSQL: the postmaster, its children that
/// ended (which it waited for), and those that run now. Backends come and
/// go; this sum only grows.
fn server_cpu(postmaster: u32) -> f64 {
    let Some(own) = stat_fields(postmaster) else {
        return 0.0;
    };
    let mut total =
        (field(&own, 11) + field(&own, 12) + field(&own, 13) + field(&own, 14)) * MS_A_TICK;
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if let Some(fields) = stat_fields(pid) {
            if field(&fields, 1) as u32 == postmaster {
                total += (field(&fields, 11) + field(&fields, 12)) * MS_A_TICK;
            }
        }
    }
    total
}

/// What the head office had spent so far.
struct Mark {
    worker: i32,
    relay_ms: f64,
    server_ms: f64,
    nats_ms: f64,
    here_ms: f64,
    wal: String,
    varz: serde_json::Value,
    at: Instant,
}

impl Mark {
    fn now(head: &mut HeadOffice) -> Mark {
        let worker = head.worker_pid();
        Mark {
            worker,
            relay_ms: cpu_of(worker as u32),
            server_ms: server_cpu(head.postmaster()),
            nats_ms: cpu_of(head.nats.pid().expect("nats-server runs")),
            here_ms: cpu_of(std::process::id()),
            wal: head
                .pg
                .query_one("SELECT pg_current_wal_lsn()::text", &[])
                .unwrap()
                .get(0),
            varz: head.nats.monitoring("/varz"),
            at: Instant::now(),
        }
    }

    /// What was spent since, once the worker had a moment to file the
    /// reports the registers just sent.
    fn since_the_last_reports(&self, head: &mut HeadOffice) -> Spent {
        std::thread::sleep(Duration::from_secs(2));
        self.since(head)
    }

    fn since(&self, head: &mut HeadOffice) -> Spent {
        let now = Mark::now(head);
        assert_eq!(
            now.worker, self.worker,
            "the relay worker was started again"
        );
        let wal: i64 = head
            .pg
            .query_one(
                "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::text::pg_lsn)::bigint",
                &[&self.wal],
            )
            .unwrap()
            .get(0);
        let delta = |key: &str| {
            now.varz[key].as_f64().unwrap_or(0.0) - self.varz[key].as_f64().unwrap_or(0.0)
        };
        Spent {
            relay_ms: now.relay_ms - self.relay_ms,
            rest_ms: (now.server_ms - self.server_ms) - (now.relay_ms - self.relay_ms),
            nats_ms: now.nats_ms - self.nats_ms,
            here_ms: now.here_ms - self.here_ms,
            wal_bytes: wal as f64,
            in_bytes: delta("in_bytes"),
            out_bytes: delta("out_bytes"),
            in_msgs: delta("in_msgs"),
            out_msgs: delta("out_msgs"),
            seconds: self.at.elapsed().as_secs_f64(),
        }
    }
}

/// What the head office spent over a step.
struct Spent {
    relay_ms: f64,
    rest_ms: f64,
    nats_ms: f64,
    here_ms: f64,
    wal_bytes: f64,
    in_bytes: f64,
    out_bytes: f64,
    in_msgs: f64,
    out_msgs: f64,
    seconds: f64,
}

impl Spent {
    /// Per thing done (`count` of `what`, each reaching `fanout`
    /// registers), the CPU net of what the same time costs idle.
    fn print(&self, count: usize, fanout: usize, what: &str, idle: &Spent) {
        let each = (count * fanout) as f64;
        let per = if fanout > 1 {
            format!("a {what} a register")
        } else {
            format!("a {what}")
        };
        let net = |spent: f64, idle_spent: f64| spent - idle_spent / idle.seconds * self.seconds;
        let (relay, rest, nats) = (
            net(self.relay_ms, idle.relay_ms),
            net(self.rest_ms, idle.rest_ms),
            net(self.nats_ms, idle.nats_ms),
        );
        println!(
            "  over {:.1} s, net of what as long idle costs: the relay worker {:.0} ms of CPU \
             ({:.1} µs {per}; {:.0} ms before netting), the rest of PostgreSQL {:.0} ms ({:.1} \
             µs), nats-server {:.0} ms ({:.1} µs); the registers {:.0} ms ({:.1} µs)",
            self.seconds,
            relay,
            relay * 1000.0 / each,
            self.relay_ms,
            rest,
            rest * 1000.0 / each,
            nats,
            nats * 1000.0 / each,
            self.here_ms,
            self.here_ms * 1000.0 / each,
        );
        let net_bytes =
            |spent: f64, idle_spent: f64| spent - idle_spent / idle.seconds * self.seconds;
        println!(
            "  nats-server took in {:.0} messages ({:.0} bytes) and sent {:.0} ({:.0} bytes), \
             net of idle {:.0} and {:.0} bytes {per}; PostgreSQL wrote {:.0} bytes of WAL {per}",
            self.in_msgs,
            self.in_bytes,
            self.out_msgs,
            self.out_bytes,
            net_bytes(self.in_bytes, idle.in_bytes) / each,
            net_bytes(self.out_bytes, idle.out_bytes) / each,
            self.wal_bytes / each,
        );
    }
}

/// A register: its loop in a thread of its own, and what it applied.
struct Register {
    id: Uuid,
    file: PathBuf,
    control: Control,
    products_inserted: Arc<AtomicU64>,
    products_updated: Arc<AtomicU64>,
    labels_inserted: Arc<AtomicU64>,
    /// Messages applied (a Down or a snapshot's end; not a Filed).
    messages: Arc<AtomicU64>,
    /// Ups the transport took.
    sent: Arc<AtomicU64>,
    idle: Arc<AtomicBool>,
    troubles: Arc<AtomicU64>,
    thread: std::sync::Mutex<Option<JoinHandle<()>>>,
}

struct Fleet {
    registers: Vec<Register>,
    dir: Option<tempfile::TempDir>,
    path: PathBuf,
}

impl Fleet {
    fn start(url: &str, ids: &[Uuid]) -> Fleet {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let mut fleet = Fleet::start_in(dir.path(), url, ids);
        fleet.dir = Some(dir);
        fleet
    }

    /// Registers on the files of `dir`, as they were left.
    fn start_in(dir: &Path, url: &str, ids: &[Uuid]) -> Fleet {
        let registers = ids
            .iter()
            .map(|id| Register::start(url, dir, *id))
            .collect();
        Fleet {
            registers,
            dir: None,
            path: dir.to_owned(),
        }
    }

    fn dir(&self) -> &Path {
        &self.path
    }

    fn each<T>(&self, f: impl Fn(&Register) -> T) -> Vec<T> {
        self.registers.iter().map(f).collect()
    }

    /// Waits until every register satisfies `done`; answers whether they
    /// did within `patience`.
    fn wait(&self, patience: Duration, done: impl Fn(&Register) -> bool) -> bool {
        self.wait_indexed(patience, |_, r| done(r))
    }

    fn wait_indexed(&self, patience: Duration, done: impl Fn(usize, &Register) -> bool) -> bool {
        let began = Instant::now();
        loop {
            if self.registers.iter().enumerate().all(|(i, r)| done(i, r)) {
                return true;
            }
            if began.elapsed() > patience {
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn troubles(&self) -> u64 {
        self.each(|r| r.troubles.load(Ordering::Relaxed))
            .iter()
            .sum()
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for register in &self.registers {
            register.control.stop();
        }
        for register in &self.registers {
            register.join();
        }
    }
}

impl Register {
    fn start(url: &str, dir: &Path, id: Uuid) -> Register {
        let register = Register {
            id,
            file: dir.join(format!("{id}.db")),
            control: Control::new(),
            products_inserted: Arc::default(),
            products_updated: Arc::default(),
            labels_inserted: Arc::default(),
            messages: Arc::default(),
            sent: Arc::default(),
            idle: Arc::default(),
            troubles: Arc::default(),
            thread: std::sync::Mutex::new(None),
        };
        let (file, control, url) = (
            register.file.clone(),
            register.control.clone(),
            url.to_owned(),
        );
        let (inserted, updated, labels) = (
            register.products_inserted.clone(),
            register.products_updated.clone(),
            register.labels_inserted.clone(),
        );
        let (messages, sent, idle, troubles) = (
            register.messages.clone(),
            register.sent.clone(),
            register.idle.clone(),
            register.troubles.clone(),
        );
        let thread = std::thread::Builder::new()
            .stack_size(512 * 1024)
            .spawn(move || {
                let mut conn = Connection::open(&file).unwrap();
                conn.execute_batch(
                    "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; \
                     PRAGMA foreign_keys = ON; PRAGMA recursive_triggers = ON;",
                )
                .unwrap();
                conn.execute_batch(REGISTER_SCHEMA).unwrap();
                install(&mut conn, &tables()).unwrap();
                conn.update_hook(Some(
                    move |action: Action, _: &str, table: &str, _: i64| match (table, action) {
                        ("products", Action::SQLITE_INSERT) => {
                            inserted.fetch_add(1, Ordering::Relaxed);
                        }
                        ("products", Action::SQLITE_UPDATE) => {
                            updated.fetch_add(1, Ordering::Relaxed);
                        }
                        ("labels", Action::SQLITE_INSERT) => {
                            labels.fetch_add(1, Ordering::Relaxed);
                        }
                        _ => {}
                    },
                ));
                let mut replica = Replica::open(conn, tables(), id, Settings::default()).unwrap();
                let mut nats =
                    Nats::new(NatsSettings::new(url.as_str()), &replica).expect("a NATS client");
                run(
                    &mut replica,
                    &mut nats,
                    &Options::default(),
                    &control,
                    |status| match status {
                        Status::Waiting { .. } => idle.store(true, Ordering::Relaxed),
                        Status::Applied(Received::Applied { .. } | Received::Ended { .. }) => {
                            messages.fetch_add(1, Ordering::Relaxed);
                            idle.store(false, Ordering::Relaxed);
                        }
                        Status::Sent { .. } => {
                            sent.fetch_add(1, Ordering::Relaxed);
                            idle.store(false, Ordering::Relaxed);
                        }
                        Status::Applied(_) => idle.store(false, Ordering::Relaxed),
                        Status::Disconnected { .. }
                        | Status::Failed { .. }
                        | Status::Unapplied { .. }
                        | Status::UpRefused { .. } => {
                            troubles.fetch_add(1, Ordering::Relaxed);
                        }
                        _ => {}
                    },
                );
            })
            .expect("a register's thread");
        *register.thread.lock().unwrap() = Some(thread);
        register
    }

    /// The register's till writes a receipt, through a connection of its
    /// own, and pokes the loop.
    fn sell(&self) {
        let conn = Connection::open(&self.file).unwrap();
        conn.execute_batch("PRAGMA recursive_triggers = ON")
            .unwrap();
        conn.execute(
            "INSERT INTO receipts (id, register_id, total_cents, sold_at) \
             VALUES (?1, ?2, 995, '2026-12-04T10:00:00.000000Z')",
            rusqlite::params![
                Uuid::new_v4().as_bytes().to_vec(),
                self.id.as_bytes().to_vec()
            ],
        )
        .unwrap();
        self.control.poke();
    }

    fn join(&self) {
        if let Some(thread) = self.thread.lock().unwrap().take() {
            let _ = thread.join();
        }
    }
}

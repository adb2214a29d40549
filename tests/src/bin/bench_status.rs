//! The status reads' figures, measured side by side in one run, against
//! the targets of issue 11: 200 live replicas holding 3,000,000 rows
//! between them (15,000 each), read while every row is still on its way
//! (sent, nothing confirmed: the worst the overview meets) and while every
//! replica is caught up.
//!
//! The state is built by the real engine: a shop is declared (brands and
//! products sent to every register, each product's nutrition following it,
//! orders assigned to one register each and pointing at a product), filled,
//! its notes relayed, then the registers made live and provisioned by relay
//! passes (`CALL sync.relay()`), which record every row sent in sync.held
//! and every message in sync.outbox. "Caught up" is then recorded the way
//! the server records it: the transport took every message (sync.ack
//! deletes it from the queue), and each replica said it applied its last
//! one, with an empty backlog (what filing an Up writes:
//! receive/applied.rs's count(), sync.backlogs).
//!
//! Each read is timed as a client sees it (a prepared statement, one round
//! trip over the local socket), many times in one session after a warm-up:
//! the median and the 95th percentile, beside the target and their ratio.
//!
//! Run it with a release build of the extension installed (`cargo pgrx
//! install --release -p magic_sync --pg-config ...`), then
//! `cargo build --release -p magic_sync_tests --bins &&
//! ./target/release/bench_status`. Options: `--replicas N` (200),
//! `--rows N` (held by each replica, 15,000), `--runs N` (runs of each
//! read, 50; fewer where a read takes long), `--pause` (wait for a line on
//! stdin after each state, printing how to connect, to look at the plans).

use std::io::BufRead;
use std::time::{Duration, Instant};

use magic_sync_tests::args::{arg, flag};
use magic_sync_tests::bench_shop::{BRANDS, NUTRITION, ORDERS, PRODUCTS, REGISTERS, SHOP};
use magic_sync_tests::figures::{median_and_p95, ms};
use magic_sync_tests::relaying::{drain, relay};
use magic_sync_tests::Cluster;
use postgres::types::ToSql;
use postgres::Client;

/// The registers made live: the next pass provisions every one.
const GO_LIVE: &str = "UPDATE shop.registers SET active = true";

/// What the server records once the transport took every message (sync.ack
/// deletes it from the queue) and every replica said it applied its last
/// one with nothing waiting on its side: receive/applied.rs's count(), and
/// the backlog its Up carried.
const CONFIRM_EVERYTHING: &str = "
    DELETE FROM sync.outbox;
    UPDATE sync.replicas SET applied_epoch = epoch, applied_sequence = last_sequence,
        applied_nonce = last_nonce, applied_at = now(), heard_at = now();
    DELETE FROM sync.held_recorded h USING sync.replicas r
        WHERE h.replica = r.id AND h.leaving IS NOT NULL AND h.leaving <= r.applied_sequence;
    INSERT INTO sync.backlogs (replica, tables, empty)
        SELECT id, '[]', true FROM sync.replicas
        ON CONFLICT (replica) DO UPDATE SET tables = '[]', empty = true, said_at = now();
";

/// How many rows of each table one replica holds.
struct Layout {
    brands: i64,
    products: i64,
    orders: i64,
}

impl Layout {
    /// `rows` per replica: a few brands, two fifths products (half of them
    /// with nutrition), the rest its own orders.
    fn of(rows: i64) -> Layout {
        let brands = (rows / 300).clamp(1, 50);
        let products = (rows * 2 / 5).max(2);
        let orders = (rows - brands - products - products / 2).max(1);
        Layout {
            brands,
            products,
            orders,
        }
    }

    fn per_replica(&self) -> i64 {
        self.brands + self.products + self.products / 2 + self.orders
    }
}

/// Fills the shop, relays the fill's notes (no register is live yet), and
/// gives the emptied notes' pages back as the docs say to after a burst.
fn fill(pg: &mut Client, layout: &Layout, replicas: i64) {
    let l = layout;
    pg.execute(BRANDS, &[&l.brands]).unwrap();
    pg.execute(PRODUCTS, &[&l.brands, &l.products]).unwrap();
    pg.execute(NUTRITION, &[&l.products]).unwrap();
    pg.execute(ORDERS, &[&l.products, &l.orders, &replicas])
        .unwrap();
    pg.execute(REGISTERS, &[&replicas]).unwrap();
    drain(pg);
    vacuum(pg, "VACUUM (TRUNCATE) sync.notes");
    vacuum(pg, "VACUUM ANALYZE");
}

/// Makes every register live and relays until a pass sends nothing more:
/// answers (seconds, passes).
fn provision(pg: &mut Client) -> (f64, usize) {
    pg.batch_execute(GO_LIVE).unwrap();
    let started = Instant::now();
    let mut passes = 0;
    loop {
        let summary = relay(pg);
        passes += 1;
        if summary["messages"] == 0 && summary["notes"] == 0 {
            break;
        }
    }
    (started.elapsed().as_secs_f64(), passes)
}

/// A VACUUM, which runs outside any transaction: one statement alone.
fn vacuum(pg: &mut Client, sql: &str) {
    pg.execute(sql, &[]).unwrap();
}

fn count(pg: &mut Client, sql: &str) -> i64 {
    pg.query_one(sql, &[]).unwrap().get(0)
}

/// One read, its arguments, and its target in ms (None: the issue sets none).
struct Read {
    name: &'static str,
    sql: &'static str,
    args: Vec<Box<dyn ToSql + Sync>>,
    target: Option<f64>,
}

/// Samples of one read: after one run to warm it, up to `runs` runs, fewer
/// once they took `budget` (at least five).
fn sample(pg: &mut Client, read: &Read, runs: usize, budget: Duration) -> Vec<f64> {
    let statement = pg.prepare(read.sql).unwrap();
    let args: Vec<&(dyn ToSql + Sync)> = read.args.iter().map(|a| a.as_ref()).collect();
    pg.query(&statement, &args).unwrap();
    let begun = Instant::now();
    let mut samples = Vec::new();
    while samples.len() < runs && (samples.len() < 5 || begun.elapsed() < budget) {
        let started = Instant::now();
        pg.query(&statement, &args).unwrap();
        samples.push(ms(started.elapsed()));
    }
    samples
}

fn print_header(state: &str) {
    println!("\n{state}");
    println!(
        "  {:<44} {:>5} {:>10} {:>10} {:>8} {:>12}",
        "read", "runs", "median ms", "p95 ms", "target", "median/target"
    );
}

fn print_figures(read: &Read, samples: Vec<f64>) {
    let runs = samples.len();
    let (median, p95) = median_and_p95(samples);
    let (target, ratio) = match read.target {
        Some(t) => (format!("{t} ms"), format!("{:.2}", median / t)),
        None => ("-".to_owned(), "-".to_owned()),
    };
    println!(
        "  {:<44} {runs:>5} {median:>10.2} {p95:>10.2} {target:>8} {ratio:>12}",
        read.name
    );
}

/// Ids the row reads are asked of: a product (on every replica), an order
/// and the replica it is assigned to.
struct Named {
    product: String,
    order: String,
    register: uuid::Uuid,
}

fn named(pg: &mut Client) -> Named {
    let row = pg
        .query_one(
            "SELECT md5('product1')::uuid::text, md5('order1-1')::uuid::text, md5('register1')::uuid",
            &[],
        )
        .unwrap();
    Named {
        product: row.get(0),
        order: row.get(1),
        register: row.get(2),
    }
}

/// The reads, with the targets where it sets one.
fn reads(n: &Named, caught_up: bool) -> Vec<Read> {
    let one = serde_json::json!({"replicas": [n.register.to_string()]});
    let overview_target = if caught_up { 5.0 } else { 200.0 };
    vec![
        Read {
            name: "sync.overview()",
            sql: "SELECT sync.overview()",
            args: vec![],
            target: Some(overview_target),
        },
        Read {
            name: "sync.listing(offset 20, lim 20)",
            sql: "SELECT sync.listing(NULL, NULL, 20, 20)",
            args: vec![],
            target: None,
        },
        Read {
            name: "sync.health()",
            sql: "SELECT sync.health()",
            args: vec![],
            target: None,
        },
        Read {
            name: "sync.metrics()",
            sql: "SELECT sync.metrics()",
            args: vec![],
            target: None,
        },
        Read {
            name: "sync.progress(one replica)",
            sql: "SELECT sync.progress($1)",
            args: vec![Box::new(one)],
            target: Some(50.0),
        },
        Read {
            name: "sync.row_progress(all, a product)",
            sql: "SELECT sync.row_progress(NULL, 'products', $1)",
            args: vec![Box::new(n.product.clone())],
            target: Some(5.0),
        },
        Read {
            name: "sync.row_progress(all, an order)",
            sql: "SELECT sync.row_progress(NULL, 'orders', $1)",
            args: vec![Box::new(n.order.clone())],
            target: Some(5.0),
        },
        Read {
            name: "sync.explain(its register, a product)",
            sql: "SELECT sync.explain($1, 'products', $2)",
            args: vec![Box::new(n.register), Box::new(n.product.clone())],
            target: Some(20.0),
        },
        Read {
            name: "sync.explain(its register, an order)",
            sql: "SELECT sync.explain($1, 'orders', $2)",
            args: vec![Box::new(n.register), Box::new(n.order.clone())],
            target: Some(20.0),
        },
    ]
}

/// The overview's count of replicas in `state`.
fn replicas_in(pg: &mut Client, state: &str) -> i64 {
    let overview: serde_json::Value = pg.query_one("SELECT sync.overview()", &[]).unwrap().get(0);
    overview["states"][state].as_i64().unwrap_or(-1)
}

fn measure_all(pg: &mut Client, n: &Named, caught_up: bool, runs: usize) {
    for read in reads(n, caught_up) {
        let samples = sample(pg, &read, runs, Duration::from_secs(20));
        print_figures(&read, samples);
    }
}

fn pause_if_asked(cluster: &Cluster) {
    if flag("--pause") {
        println!(
            "  (paused: psql \"{}\"; press Enter to go on)",
            cluster.url("bench")
        );
        let _ = std::io::stdin().lock().lines().next();
    }
}

fn main() {
    let replicas = arg::<i64>("--replicas", 200);
    let rows = arg::<i64>("--rows", 15_000);
    let runs = arg::<usize>("--runs", 50);
    let layout = Layout::of(rows);
    let cluster = Cluster::start_with(&["shared_buffers=1GB"]);
    println!("(a throwaway PostgreSQL 15 with shared_buffers = 1GB, fsync off)");
    let mut pg = cluster.database_with_extension("bench");
    pg.batch_execute(SHOP).unwrap();

    let started = Instant::now();
    fill(&mut pg, &layout, replicas);
    println!(
        "\nThe shop: {} brands, {} products, {} with nutrition, {} orders for each of {replicas} registers: filled and relayed in {:.1} s",
        layout.brands,
        layout.products,
        layout.products / 2,
        layout.orders,
        started.elapsed().as_secs_f64()
    );
    let (seconds, passes) = provision(&mut pg);
    vacuum(&mut pg, "VACUUM ANALYZE");
    let held = count(&mut pg, "SELECT count(*) FROM sync.held");
    println!(
        "Provisioned by the real engine ({passes} relay passes, {seconds:.1} s): {held} rows of sync.held ({} per replica), {} messages in the outbox",
        layout.per_replica(),
        count(&mut pg, "SELECT count(*) FROM sync.outbox")
    );
    let n = named(&mut pg);

    print_header(&format!(
        "Every row on its way (sent, nothing confirmed): {} of {replicas} replicas catching up",
        replicas_in(&mut pg, "catching_up")
    ));
    measure_all(&mut pg, &n, false, runs);
    pause_if_asked(&cluster);

    pg.batch_execute(CONFIRM_EVERYTHING).unwrap();
    vacuum(&mut pg, "VACUUM ANALYZE");
    print_header(&format!(
        "Every replica caught up: {} of {replicas} replicas synced",
        replicas_in(&mut pg, "synced")
    ));
    measure_all(&mut pg, &n, true, runs);
    pause_if_asked(&cluster);
}

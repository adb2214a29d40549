//! What a declaration change sends (issue 36), measured side by side in one
//! run: the `bench_status` shop (brands and products for every register,
//! each product's nutrition following it, orders assigned to one register
//! each), 200 live registers holding 15,000 rows each, each a real replica
//! on a SQLite file taking its messages through the queue. Three changes,
//! each deployed and relayed, then every register takes what it was sent
//! and says what it applied:
//!
//! - a rule: the orders' active view leaves out a tenth of them (the
//!   products they point at stay: broadcast);
//! - a column added to the orders (each register's own rows);
//! - a new broadcast table of 1,000 rows.
//!
//! For each: the rows sent (written or let go of, as the registers applied
//! them), the bytes sent (heads and bodies of the messages written), the
//! time from the deploy until every register applied it, and the rows that
//! actually moved (what the server records each register holding, before
//! and after, compared: rows in or out, and rows held whose bytes
//! changed); then the same against provisioning every register again
//! (`sync.resync` of each), today's behaviour before issue 36, in the same
//! run. Targets: rows sent within 1.1x the rows that move; at least 10x
//! fewer bytes than provisioning again for the rule change.
//!
//! Run it with a release build of the extension installed (`cargo pgrx
//! install --release -p magic_sync --pg-config ...`), then
//! `cargo build --release -p magic_sync_tests --bins &&
//! ./target/release/bench_redeclare`. Options: `--replicas N` (200),
//! `--rows N` (held by each replica, 15,000), `--timings` (each pass's
//! steps), `--explain MS` (the plans of the statements, nested ones too,
//! that took longer, by auto_explain, into `bench_redeclare.log`).

use std::path::Path;
use std::time::Instant;

use magic_sync_replica::{install, queue, Received, Replica, Settings, Table, Tables};
use magic_sync_tests::args::{arg, flag};
use magic_sync_tests::bench_shop::{BRANDS, NUTRITION, ORDERS, PRODUCTS, REGISTERS, SHOP};
use magic_sync_tests::relaying::{drain, relay};
use magic_sync_tests::Cluster;
use postgres::Client;
use rusqlite::Connection;
use uuid::Uuid;

/// The three changes, each a migration as a deploy runs it.
const RULE: &str = "
    CREATE VIEW shop.open_orders AS SELECT * FROM shop.orders WHERE get_byte(uuid_send(id), 0) % 10 <> 0;
    SELECT sync.declare_table('shop.orders', sync => 'assigned(register_id)', active => 'shop.open_orders');";
const COLUMN: &str = "
    ALTER TABLE shop.orders ADD COLUMN note text NOT NULL DEFAULT 'as ordered';
    CREATE OR REPLACE VIEW shop.open_orders AS
        SELECT * FROM shop.orders WHERE get_byte(uuid_send(id), 0) % 10 <> 0;
    SELECT sync.declare_table('shop.orders', sync => 'assigned(register_id)',
                              active => 'shop.open_orders');";
const NEW_TABLE: &str = "
    CREATE TABLE shop.shelves (id uuid PRIMARY KEY, label text NOT NULL);
    INSERT INTO shop.shelves SELECT md5('shelf' || i)::uuid, 'Shelf ' || i
        FROM generate_series(1, 1000) AS i;
    SELECT sync.declare_table('shop.shelves', sync => 'broadcast');";

/// A register's build: every table, the orders' new column and the
/// shelves already there (a register updated before the server).
const REGISTER: &str = "
    CREATE TABLE brands (id BLOB PRIMARY KEY NOT NULL, name TEXT NOT NULL);
    CREATE TABLE products (id BLOB PRIMARY KEY NOT NULL, name TEXT NOT NULL, brand_id BLOB,
                           price_cents INTEGER NOT NULL, updated_at TEXT NOT NULL);
    CREATE TABLE nutrition (product_id BLOB PRIMARY KEY NOT NULL, calories INTEGER NOT NULL);
    CREATE TABLE orders (id BLOB PRIMARY KEY NOT NULL, register_id BLOB NOT NULL,
                         product_id BLOB NOT NULL, quantity INTEGER NOT NULL,
                         ordered_at TEXT NOT NULL, note TEXT);
    CREATE TABLE shelves (id BLOB PRIMARY KEY NOT NULL, label TEXT NOT NULL);
";

fn tables() -> Tables {
    Tables::new(
        ["brands", "products", "nutrition", "orders", "shelves"]
            .into_iter()
            .map(Table::catalog)
            .collect(),
    )
}

fn open(file: &Path, me: Uuid) -> Replica {
    let mut conn = Connection::open(file).unwrap();
    conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON; PRAGMA recursive_triggers = ON;")
        .unwrap();
    conn.execute_batch(REGISTER).unwrap();
    install(&mut conn, &tables()).unwrap();
    Replica::open(conn, tables(), me, Settings::default()).unwrap()
}

fn count(pg: &mut Client, sql: &str) -> i64 {
    pg.query_one(sql, &[]).unwrap().get(0)
}

/// What one change (or a provisioning) cost.
#[derive(Default)]
struct Sent {
    rows: i64,
    bytes: i64,
    seconds: f64,
    relay_seconds: f64,
    moved: i64,
}

/// The bytes of every message waiting in the outbox: heads and bodies,
/// each body counted for each message that carries it.
const OUTBOX_BYTES: &str =
    "SELECT coalesce(sum(octet_length(o.head) + coalesce(octet_length(b.bytes), 0)), 0)::bigint \
     FROM sync.outbox o LEFT JOIN sync.bodies b ON b.id = o.body WHERE o.kind <> 'filed'";

/// What the server records each register holding: (replica, table, key,
/// sent), as a table to compare after.
const HELD_BEFORE: &str = "DROP TABLE IF EXISTS bench_held; \
     CREATE TABLE bench_held AS SELECT replica, table_name, key, sent FROM sync.held WHERE leaving IS NULL";
/// The rows that moved: held before and not after, or after and not
/// before, and (`$1`, a column change) rows of that table held both times.
const MOVED: &str = "SELECT ( \
       (SELECT count(*) FROM sync.held a WHERE a.leaving IS NULL AND NOT EXISTS \
          (SELECT 1 FROM bench_held b WHERE b.replica = a.replica AND b.table_name = a.table_name AND b.key = a.key)) \
     + (SELECT count(*) FROM bench_held b WHERE NOT EXISTS \
          (SELECT 1 FROM sync.held a WHERE a.leaving IS NULL AND a.replica = b.replica \
           AND a.table_name = b.table_name AND a.key = b.key)) \
     + (SELECT count(*) FROM bench_held b WHERE b.table_name = $1 AND EXISTS \
          (SELECT 1 FROM sync.held a WHERE a.leaving IS NULL AND a.replica = b.replica \
           AND a.table_name = b.table_name AND a.key = b.key)))::bigint";

/// Runs `change` (a migration, or the resyncs of every register), relays
/// until a pass writes nothing, every register taking and confirming what
/// each pass wrote; answers what it cost. `resent` names the table whose
/// held rows change bytes (a column added), counted as moving.
fn measure(pg: &mut Client, registers: &mut [Replica], change: &str, resent: &str) -> Sent {
    pg.batch_execute(HELD_BEFORE).unwrap();
    let started = Instant::now();
    pg.batch_execute(change).unwrap();
    let mut sent = Sent::default();
    loop {
        let relaying = Instant::now();
        let summary = relay(pg);
        sent.relay_seconds += relaying.elapsed().as_secs_f64();
        if flag("--timings") {
            println!("    pass: {summary}");
        }
        if summary["messages"] == 0 {
            break;
        }
        sent.bytes += count(pg, OUTBOX_BYTES);
        for register in registers.iter_mut() {
            for received in queue::deliver(pg, register).unwrap() {
                let tables = match &received {
                    Received::Applied { tables, .. } => tables,
                    Received::Ended { swept, .. } => swept,
                    _ => continue,
                };
                sent.rows += tables.iter().map(|t| t.keys.len() as i64).sum::<i64>();
            }
            queue::report(pg, register).unwrap();
        }
    }
    sent.seconds = started.elapsed().as_secs_f64();
    sent.moved = pg.query_one(MOVED, &[&resent]).unwrap().get(0);
    sent
}

fn main() {
    let replicas: i64 = arg("--replicas", 200);
    let rows: i64 = arg("--rows", 15_000);
    let brands = (rows / 300).clamp(1, 50);
    let products = (rows * 2 / 5).max(2);
    let orders = (rows - brands - products - products / 2).max(1);

    let cluster = Cluster::start();
    let mut pg = cluster.database_with_extension("shop");
    pg.batch_execute(SHOP).unwrap();
    if flag("--timings") {
        pg.batch_execute("SET magic_sync.pass_timings = on")
            .unwrap();
    }
    let explain: i64 = arg("--explain", 0);
    if explain > 0 {
        pg.batch_execute(&format!(
            "LOAD 'auto_explain'; SET auto_explain.log_min_duration = {explain}; \
             SET auto_explain.log_nested_statements = on; SET auto_explain.log_analyze = on; \
             SET auto_explain.log_buffers = on"
        ))
        .unwrap();
    }
    pg.execute(BRANDS, &[&brands]).unwrap();
    pg.execute(PRODUCTS, &[&brands, &products]).unwrap();
    pg.execute(NUTRITION, &[&products]).unwrap();
    pg.execute(ORDERS, &[&products, &orders, &replicas])
        .unwrap();
    pg.execute(REGISTERS, &[&replicas]).unwrap();
    drain(&mut pg);
    pg.execute("VACUUM ANALYZE", &[]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ids: Vec<Uuid> = pg
        .query("SELECT id FROM shop.registers ORDER BY id", &[])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let mut registers: Vec<Replica> = ids
        .iter()
        .map(|id| open(&dir.path().join(format!("{id}.db")), *id))
        .collect();
    println!(
        "{replicas} live registers, each holding {} rows ({brands} brands, {products} products, {} nutrition, {orders} orders of its own): provisioning them",
        brands + products + products / 2 + orders,
        products / 2
    );
    let first = measure(
        &mut pg,
        &mut registers,
        "UPDATE shop.registers SET active = true",
        "",
    );
    println!(
        "  provisioned: {} rows applied in {:.1} s",
        first.rows, first.seconds
    );
    pg.execute("VACUUM ANALYZE", &[]).unwrap();

    let changes = [
        (
            "a rule: a tenth of the orders leave the active view",
            RULE,
            "",
        ),
        ("a column added to the orders", COLUMN, "orders"),
        ("a new broadcast table of 1,000 rows", NEW_TABLE, ""),
    ];
    let mut figures = Vec::new();
    for (name, sql, resent) in changes {
        let sent = measure(&mut pg, &mut registers, sql, resent);
        println!("  {name}: done in {:.1} s", sent.seconds);
        figures.push((name, sent));
    }
    let resync = "SELECT count(sync.resync(id)) FROM sync.replicas";
    let again = measure(&mut pg, &mut registers, resync, "");
    println!(
        "  every register provisioned again: done in {:.1} s",
        again.seconds
    );

    println!(
        "\n{:<56} {:>10} {:>10} {:>9} {:>12} {:>10} {:>9} {:>9}",
        "change", "rows sent", "moved", "sent/mvd", "bytes", "bytes/prov", "applied s", "relay s"
    );
    let line = |name: &str, s: &Sent| {
        let ratio = match s.moved {
            0 => "-".to_owned(),
            moved => format!("{:.3}", s.rows as f64 / moved as f64),
        };
        println!(
            "{:<56} {:>10} {:>10} {:>9} {:>12} {:>10.4} {:>9.1} {:>9.1}",
            name,
            s.rows,
            s.moved,
            ratio,
            s.bytes,
            s.bytes as f64 / again.bytes.max(1) as f64,
            s.seconds,
            s.relay_seconds
        );
    };
    for (name, sent) in &figures {
        line(name, sent);
    }
    line("every register provisioned again (before issue 36)", &again);
    if explain > 0 {
        std::fs::write("bench_redeclare.log", cluster.log()).unwrap();
        println!("\nthe plans of statements over {explain} ms: bench_redeclare.log");
    }
    println!(
        "\ntargets: rows sent at most 1.1x the rows that move (sent/mvd); the rule change at least 10x fewer bytes than provisioning again (bytes/prov at most 0.1)"
    );
}

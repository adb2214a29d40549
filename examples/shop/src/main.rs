//! The shop, run end to end: a head office on a throwaway PostgreSQL with
//! the magic_sync extension, and two registers on SQLite files, which take
//! what the head office sends through the default transport (a queue in
//! the head office's database). It prints what each register holds after
//! every step, and fails if a register holds anything else than the head
//! office's products.

use std::path::{Path, PathBuf};
use std::time::Instant;

use magic_sync_replica::queue::{deliver, report};
use magic_sync_replica::{install, Replica, Settings, Table, Tables};
use magic_sync_tests::Cluster;
use postgres::Client;
use rusqlite::Connection;
use uuid::Uuid;

/// The head office's tables, and what travels.
const HEAD_OFFICE: &str = "
    CREATE SCHEMA shop;
    CREATE TABLE shop.registers (
        id     uuid PRIMARY KEY,
        name   text NOT NULL,
        active boolean NOT NULL DEFAULT true);
    CREATE TABLE shop.products (
        id          uuid PRIMARY KEY,
        name        text NOT NULL,
        price_cents bigint NOT NULL,
        updated_at  timestamptz NOT NULL DEFAULT now());
    SELECT sync.declare_replicas('shop.registers', live => 'active');
    SELECT sync.declare_table('shop.products', sync => 'broadcast');
";

/// A register's own copy of the catalog.
const REGISTER: &str = "
    PRAGMA journal_mode = WAL;
    PRAGMA synchronous = FULL;
    PRAGMA recursive_triggers = ON;
    CREATE TABLE IF NOT EXISTS products (
        id          BLOB PRIMARY KEY NOT NULL,
        name        TEXT NOT NULL,
        price_cents INTEGER NOT NULL,
        updated_at  TEXT NOT NULL);
";

type Product = (Uuid, String, i64);

struct Register {
    name: String,
    file: PathBuf,
    replica: Replica,
}

fn open_register(name: &str, file: &Path, id: Uuid) -> Register {
    let mut conn = Connection::open(file).expect("opens the register's file");
    conn.execute_batch(REGISTER).expect("the register's schema");
    let tables = Tables::new(vec![Table::catalog("products")]);
    install(&mut conn, &tables).expect("installs the engine's tables");
    let replica = Replica::open(conn, tables, id, Settings::default()).expect("opens the replica");
    Register {
        name: name.to_owned(),
        file: file.to_owned(),
        replica,
    }
}

fn head_office_products(pg: &mut Client) -> Vec<Product> {
    pg.query(
        "SELECT id, name, price_cents FROM shop.products ORDER BY name",
        &[],
    )
    .expect("reads the products")
    .iter()
    .map(|r| (r.get(0), r.get(1), r.get(2)))
    .collect()
}

fn register_products(register: &Register) -> Vec<Product> {
    let conn = register.replica.connection();
    let mut statement = conn
        .prepare("SELECT id, name, price_cents FROM products ORDER BY name")
        .expect("reads the register's products");
    statement
        .query_map([], |r| {
            let id: Vec<u8> = r.get(0)?;
            Ok((
                Uuid::from_slice(&id).unwrap_or_default(),
                r.get(1)?,
                r.get(2)?,
            ))
        })
        .expect("reads the register's products")
        .collect::<Result<_, _>>()
        .expect("reads the register's products")
}

/// One relay pass, then each register takes what waits for it.
fn sync(pg: &mut Client, registers: &mut [Register]) {
    let summary: serde_json::Value = pg.query_one("CALL sync.relay()", &[]).unwrap().get(0);
    println!(
        "   relay pass: {} notes read, {} messages written over {} bodies, {} registers provisioned",
        summary["notes"], summary["messages"], summary["bodies"], summary["provisioned"]
    );
    for register in registers.iter_mut() {
        let delivered = deliver(pg, &mut register.replica).expect("takes its messages");
        report(pg, &mut register.replica).expect("says what it applied");
        println!("   {} took {} message(s)", register.name, delivered.len());
    }
}

fn show(pg: &mut Client, registers: &[Register]) -> bool {
    let expected = head_office_products(pg);
    let mut all_match = true;
    for register in registers {
        let held = register_products(register);
        let matches = held == expected;
        all_match &= matches;
        println!(
            "   {} holds {} products{}",
            register.name,
            held.len(),
            if matches {
                ", exactly the head office's:"
            } else {
                ", NOT the head office's:"
            }
        );
        for (_, name, price) in &held {
            println!("       {name:<24} {:>4}.{:02}", price / 100, price % 100);
        }
    }
    all_match
}

fn main() {
    let started = Instant::now();
    println!("magic_sync: the shop\n");
    let cluster = Cluster::start();
    let mut pg = cluster.database_with_extension("shop");
    pg.batch_execute(HEAD_OFFICE)
        .expect("the head office's schema");
    println!(
        "head office: PostgreSQL with magic_sync, database shop (throwaway, at {})",
        cluster.socket_dir().display()
    );

    let dir = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("target/shop-demo"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a directory for the registers");

    let mut ok = true;
    println!("\n1. The catalog, and two registers that become live");
    pg.batch_execute(
        "INSERT INTO shop.products (id, name, price_cents) VALUES \
         (gen_random_uuid(), 'Tea', 250), (gen_random_uuid(), 'Coffee', 300), \
         (gen_random_uuid(), 'Croissant', 180)",
    )
    .unwrap();
    let mut registers = Vec::new();
    for name in ["Register 1", "Register 2"] {
        let id = Uuid::new_v4();
        pg.execute(
            "INSERT INTO shop.registers (id, name) VALUES ($1, $2)",
            &[&id, &name],
        )
        .unwrap();
        let file = dir.join(format!("{}.db", name.to_lowercase().replace(' ', "-")));
        registers.push(open_register(name, &file, id));
    }
    sync(&mut pg, &mut registers);
    ok &= show(&mut pg, &registers);

    println!("\n2. Tea costs more, cake arrives, croissants are gone");
    pg.batch_execute(
        "UPDATE shop.products SET price_cents = 275, updated_at = now() WHERE name = 'Tea'; \
         INSERT INTO shop.products (id, name, price_cents) VALUES (gen_random_uuid(), 'Cake', 420); \
         DELETE FROM shop.products WHERE name = 'Croissant'",
    )
    .unwrap();
    sync(&mut pg, &mut registers);
    ok &= show(&mut pg, &registers);

    println!("\n3. Register 2 stops; the catalog changes; it starts again on its file");
    let stopped = registers.pop().expect("two registers");
    let (name, file, id) = (
        stopped.name.clone(),
        stopped.file.clone(),
        stopped.replica.me(),
    );
    drop(stopped);
    pg.batch_execute(
        "INSERT INTO shop.products (id, name, price_cents) VALUES (gen_random_uuid(), 'Muffin', 210); \
         UPDATE shop.products SET name = 'Espresso' WHERE name = 'Coffee'",
    )
    .unwrap();
    sync(&mut pg, &mut registers);
    registers.push(open_register(&name, &file, id));
    sync(&mut pg, &mut registers);
    ok &= show(&mut pg, &registers);

    println!("\nThe registers' files: {}", dir.display());
    println!("Done in {:.1} s.", started.elapsed().as_secs_f64());
    if !ok {
        eprintln!("A register does not hold what the head office has.");
        std::process::exit(1);
    }
}

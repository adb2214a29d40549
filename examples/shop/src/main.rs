//! The shop, run end to end: a head office on a throwaway PostgreSQL with
//! the magic_sync extension preloaded, whose relay worker relays each
//! change as it commits, and two registers on SQLite files, each running
//! the device loop over the default transport (a queue in the head
//! office's database, LISTENed on). Nobody calls a relay: the demo changes
//! the catalog and waits for the registers to hold it. It prints what each
//! register holds after every step, and fails if a register does not come
//! to hold exactly the head office's products.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use magic_sync_replica::transport::queue::Queue;
use magic_sync_replica::transport::{run, Control, Options, Status};
use magic_sync_replica::{install, Replica, Settings, Table, Tables};
use magic_sync_tests::Cluster;
use postgres::Client;
use rusqlite::Connection;
use uuid::Uuid;

/// How long the demo waits for the registers to catch up, at most.
const PATIENCE: Duration = Duration::from_secs(30);

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

/// A register: its file, and its device loop while it runs.
struct Register {
    name: String,
    id: Uuid,
    file: PathBuf,
    running: Option<Running>,
}

/// A device loop in a thread of its own.
struct Running {
    control: Control,
    thread: JoinHandle<()>,
}

impl Register {
    fn new(name: &str, file: &Path, id: Uuid) -> Register {
        Register {
            name: name.to_owned(),
            id,
            file: file.to_owned(),
            running: None,
        }
    }

    /// Starts the register's program: its replica opened on its file, and
    /// its loop over the queue, counting the messages it applies.
    fn start(&mut self, head_office: &str, applied: Arc<AtomicUsize>) {
        let mut replica = open_replica(&self.file, self.id);
        let config: postgres::Config = head_office.parse().expect("the head office's address");
        let control = Control::new();
        let steering = control.clone();
        let thread = std::thread::spawn(move || {
            let mut queue = Queue::new(config, replica.me());
            run(
                &mut replica,
                &mut queue,
                &Options::default(),
                &steering,
                |status| {
                    if matches!(status, Status::Applied(_)) {
                        applied.fetch_add(1, Ordering::Relaxed);
                    }
                },
            );
        });
        self.running = Some(Running { control, thread });
    }

    /// Stops its program, as switching the register off would.
    fn stop(&mut self) {
        if let Some(running) = self.running.take() {
            running.control.stop();
            running
                .thread
                .join()
                .expect("the register's loop ends cleanly");
        }
    }
}

fn open_replica(file: &Path, id: Uuid) -> Replica {
    let mut conn = Connection::open(file).expect("opens the register's file");
    conn.execute_batch(REGISTER).expect("the register's schema");
    let tables = Tables::new(vec![Table::catalog("products")]);
    install(&mut conn, &tables).expect("installs the engine's tables");
    Replica::open(conn, tables, id, Settings::default()).expect("opens the replica")
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

/// What a register's file holds, read beside its running program.
fn register_products(register: &Register) -> Vec<Product> {
    let conn = Connection::open(&register.file).expect("opens the register's file");
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

/// Waits until every running register holds the head office's products,
/// and says how long that took and how many messages they applied.
fn wait_for_registers(pg: &mut Client, registers: &[Register], applied: &AtomicUsize) {
    let began = Instant::now();
    let before = applied.load(Ordering::Relaxed);
    while began.elapsed() < PATIENCE {
        let expected = head_office_products(pg);
        let mut running = registers.iter().filter(|r| r.running.is_some());
        if running.all(|r| register_products(r) == expected) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    println!(
        "   the registers caught up in {} ms, applying {} message(s); no relay called",
        began.elapsed().as_millis(),
        applied.load(Ordering::Relaxed) - before
    );
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
    let cluster = Cluster::start_with(&[
        "shared_preload_libraries=magic_sync",
        "magic_sync.database=shop",
    ]);
    let mut pg = cluster.database_with_extension("shop");
    pg.batch_execute(HEAD_OFFICE)
        .expect("the head office's schema");
    println!(
        "head office: PostgreSQL with magic_sync, database shop (throwaway, at {})",
        cluster.socket_dir().display()
    );
    wait_for_the_relay_worker(&mut pg);

    let dir = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("target/shop-demo"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a directory for the registers");
    let head_office = cluster.url("shop");
    let applied = Arc::new(AtomicUsize::new(0));

    let mut ok = true;
    println!("\n1. Two registers become live, and the catalog is filled");
    let mut registers = Vec::new();
    for name in ["Register 1", "Register 2"] {
        let id = Uuid::new_v4();
        pg.execute(
            "INSERT INTO shop.registers (id, name) VALUES ($1, $2)",
            &[&id, &name],
        )
        .unwrap();
        let file = dir.join(format!("{}.db", name.to_lowercase().replace(' ', "-")));
        let mut register = Register::new(name, &file, id);
        register.start(&head_office, applied.clone());
        registers.push(register);
    }
    // A register becoming live writes no note: the catalog's commit wakes
    // the worker, whose pass finds them and provisions them.
    pg.batch_execute(
        "INSERT INTO shop.products (id, name, price_cents) VALUES \
         (gen_random_uuid(), 'Tea', 250), (gen_random_uuid(), 'Coffee', 300), \
         (gen_random_uuid(), 'Croissant', 180)",
    )
    .unwrap();
    wait_for_registers(&mut pg, &registers, &applied);
    ok &= show(&mut pg, &registers);

    println!("\n2. Tea costs more, cake arrives, croissants are gone");
    pg.batch_execute(
        "UPDATE shop.products SET price_cents = 275, updated_at = now() WHERE name = 'Tea'; \
         INSERT INTO shop.products (id, name, price_cents) VALUES (gen_random_uuid(), 'Cake', 420); \
         DELETE FROM shop.products WHERE name = 'Croissant'",
    )
    .unwrap();
    wait_for_registers(&mut pg, &registers, &applied);
    ok &= show(&mut pg, &registers);

    println!("\n3. Register 2 stops; the catalog changes; it starts again on its file");
    registers[1].stop();
    pg.batch_execute(
        "INSERT INTO shop.products (id, name, price_cents) VALUES (gen_random_uuid(), 'Muffin', 210); \
         UPDATE shop.products SET name = 'Espresso' WHERE name = 'Coffee'",
    )
    .unwrap();
    wait_for_registers(&mut pg, &registers, &applied);
    registers[1].start(&head_office, applied.clone());
    wait_for_registers(&mut pg, &registers, &applied);
    ok &= show(&mut pg, &registers);

    for register in &mut registers {
        register.stop();
    }
    println!("\nThe registers' files: {}", dir.display());
    println!("Done in {:.1} s.", started.elapsed().as_secs_f64());
    if !ok {
        eprintln!("A register does not hold what the head office has.");
        std::process::exit(1);
    }
}

/// The worker starts once database shop exists: the postmaster tries again
/// every few seconds.
fn wait_for_the_relay_worker(pg: &mut Client) {
    print!("waiting for the relay worker ...");
    let began = Instant::now();
    while pg
        .query_opt(
            "SELECT 1 FROM pg_stat_activity WHERE backend_type = 'magic_sync relay'",
            &[],
        )
        .expect("asks for the worker")
        .is_none()
    {
        assert!(began.elapsed() < PATIENCE, "no relay worker came");
        std::thread::sleep(Duration::from_millis(100));
    }
    println!(" there ({:.1} s)", began.elapsed().as_secs_f64());
}

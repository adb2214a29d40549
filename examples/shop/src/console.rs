//! The shop in a terminal, both ways: a head office on a throwaway
//! PostgreSQL with the magic_sync extension preloaded, whose relay worker
//! relays each change as it commits, and two registers on SQLite files,
//! each a till that writes receipts into its file and a device loop over
//! the default transport (a queue in the head office's database,
//! LISTENed on) that takes the catalog down and sends the receipts up.
//!
//! Nobody calls a relay: each step writes (at the head office, or at a
//! till) and waits for the other side. One register sells while it is
//! offline, and its receipts are filed once it is back. After each step it
//! prints what each register holds and a summary of `sync.overview()`. It
//! exits non-zero if a register does not come to hold the head office's
//! products, or a receipt is not filed exactly once.
//!
//! Kept whole in this file, so that the console demo stays a command of
//! its own whatever else the shop becomes.

use std::path::{Path, PathBuf};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use magic_sync_replica::transport::queue::Queue;
use magic_sync_replica::transport::{run, Control, Options, Status};
use magic_sync_replica::{install, Replica, Settings, Table, Tables};
use magic_sync_tests::Cluster;
use postgres::Client;
use rusqlite::Connection;
use serde_json::Value;
use uuid::Uuid;

/// How long the demo waits for the two sides to meet, at most.
const PATIENCE: Duration = Duration::from_secs(30);

/// The head office's tables, and what travels: products down to every
/// live register, receipts up from the register that wrote them.
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
    CREATE TABLE shop.receipts (
        id          uuid PRIMARY KEY,
        register_id uuid NOT NULL REFERENCES shop.registers,
        product     text NOT NULL,
        total_cents bigint NOT NULL,
        sold_at     timestamptz NOT NULL);
    SELECT sync.declare_replicas('shop.registers', live => 'active');
    SELECT sync.declare_table('shop.products', sync => 'broadcast');
    SELECT sync.declare_table('shop.receipts', mirror => 'record', origin => 'register_id');

    -- The registers connect as a role that may take, acknowledge and file,
    -- and write receipts: nothing else of the engine's.
    CREATE ROLE register LOGIN;
    SELECT sync.allow_gateway('register');
    GRANT USAGE ON SCHEMA shop TO register;
    GRANT SELECT, INSERT ON shop.receipts TO register;
";

/// A register's own file: its copy of the catalog, and its receipts.
const REGISTER: &str = "
    PRAGMA journal_mode = WAL;
    PRAGMA synchronous = FULL;
    PRAGMA recursive_triggers = ON;
    CREATE TABLE IF NOT EXISTS products (
        id          BLOB PRIMARY KEY NOT NULL,
        name        TEXT NOT NULL,
        price_cents INTEGER NOT NULL,
        updated_at  TEXT NOT NULL);
    CREATE TABLE IF NOT EXISTS receipts (
        id          BLOB PRIMARY KEY NOT NULL,
        register_id BLOB NOT NULL,
        product     TEXT NOT NULL,
        total_cents INTEGER NOT NULL,
        sold_at     TEXT NOT NULL);
";

fn tables() -> Tables {
    Tables::new(vec![
        Table::catalog("products"),
        Table::record("receipts").origin("register_id"),
    ])
}

type Product = (Uuid, String, i64);

/// A register: its file, its till, and its device loop while it is online.
struct Register {
    name: String,
    id: Uuid,
    file: PathBuf,
    online: Option<Online>,
    /// The receipts its till wrote, in order.
    sold: Vec<Uuid>,
}

/// A device loop in a thread of its own.
struct Online {
    control: Control,
    thread: JoinHandle<()>,
}

impl Register {
    fn new(name: &str, file: &Path, id: Uuid) -> Register {
        Register {
            name: name.to_owned(),
            id,
            file: file.to_owned(),
            online: None,
            sold: Vec::new(),
        }
    }

    /// Connects the register: its replica opened on its file, and its
    /// loop over the queue.
    fn go_online(&mut self, head_office: &str) {
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
                |_: Status| {},
            );
        });
        self.online = Some(Online { control, thread });
    }

    /// Its connection lost: the loop ends, the till goes on.
    fn go_offline(&mut self) {
        if let Some(online) = self.online.take() {
            online.control.stop();
            online
                .thread
                .join()
                .expect("the register's loop ends cleanly");
        }
    }

    /// The till sells at the price its own catalog says: a receipt
    /// written into the register's file, as any program on the device
    /// would write it (the engine's triggers note it). An online
    /// register's loop is poked to send it at once.
    fn sell(&mut self, product: &str) {
        let id = Uuid::new_v4();
        let till = Connection::open(&self.file).expect("opens the register's file");
        till.execute_batch("PRAGMA recursive_triggers = ON")
            .expect("the till's connection");
        let price: i64 = till
            .query_row(
                "SELECT price_cents FROM products WHERE name = ?1",
                [product],
                |r| r.get(0),
            )
            .expect("the product's price");
        till.execute(
            "INSERT INTO receipts (id, register_id, product, total_cents, sold_at) \
             VALUES (?1, ?2, ?3, ?4, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))",
            rusqlite::params![id.as_bytes(), self.id.as_bytes(), product, price],
        )
        .expect("writes a receipt");
        self.sold.push(id);
        if let Some(online) = &self.online {
            online.control.poke();
        }
        println!(
            "   {} sells {product} ({}){}",
            self.name,
            money(price),
            if self.online.is_some() {
                ""
            } else {
                ", offline"
            }
        );
    }
}

fn open_replica(file: &Path, id: Uuid) -> Replica {
    let mut conn = Connection::open(file).expect("opens the register's file");
    conn.execute_batch(REGISTER).expect("the register's schema");
    let tables = tables();
    install(&mut conn, &tables).expect("installs the engine's tables");
    Replica::open(conn, tables, id, Settings::default()).expect("opens the replica")
}

fn money(cents: i64) -> String {
    format!("{}.{:02}", cents / 100, cents % 100)
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

/// The receipts filed at the head office: (id, register), oldest first.
fn head_office_receipts(pg: &mut Client) -> Vec<(Uuid, Uuid)> {
    pg.query(
        "SELECT id, register_id FROM shop.receipts ORDER BY sold_at, id",
        &[],
    )
    .expect("reads the receipts")
    .iter()
    .map(|r| (r.get(0), r.get(1)))
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

/// Rows the register's file has noted and not yet heard filed: what its
/// backlog says, read from the engine's table of notes.
fn register_unfiled(register: &Register) -> i64 {
    Connection::open(&register.file)
        .and_then(|c| c.query_row("SELECT count(*) FROM sync_notes", [], |r| r.get(0)))
        .expect("reads the register's notes")
}

/// Whether every online register holds the head office's products, every
/// receipt of theirs is filed and they heard so.
fn met(pg: &mut Client, registers: &[Register]) -> bool {
    let expected = head_office_products(pg);
    let filed: Vec<Uuid> = head_office_receipts(pg).iter().map(|r| r.0).collect();
    registers.iter().filter(|r| r.online.is_some()).all(|r| {
        register_products(r) == expected
            && r.sold.iter().all(|s| filed.contains(s))
            && register_unfiled(r) == 0
    })
}

/// Waits until the online registers and the head office meet, and says
/// how long that took.
fn wait_for_registers(pg: &mut Client, registers: &[Register]) {
    let began = Instant::now();
    while !met(pg, registers) && began.elapsed() < PATIENCE {
        std::thread::sleep(Duration::from_millis(20));
    }
    println!(
        "   the registers and the head office met in {} ms; no relay called",
        began.elapsed().as_millis()
    );
}

/// Waits until the overview calls every online register synced: it has
/// heard what each applied, and that each has nothing left to send.
fn wait_for_synced(pg: &mut Client, registers: &[Register]) {
    let began = Instant::now();
    while began.elapsed() < PATIENCE {
        let overview = overview(pg);
        let all = registers
            .iter()
            .filter(|r| r.online.is_some())
            .all(|r| state_of(&overview, r.id).0 == "synced");
        if all {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn overview(pg: &mut Client) -> Value {
    pg.query_one("SELECT sync.overview()", &[])
        .expect("sync.overview()")
        .get(0)
}

/// A register's entry in the overview: its state, and the entry itself.
fn state_of(overview: &Value, id: Uuid) -> (String, Value) {
    let id = id.to_string();
    overview["replicas"]["first"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["id"] == id.as_str())
        .map(|r| (r["state"].as_str().unwrap_or("?").to_owned(), r.clone()))
        .unwrap_or_else(|| ("not seen yet".to_owned(), Value::Null))
}

/// What is on its way to or from a register, from its overview entry.
fn on_its_way(entry: &Value) -> String {
    let why = &entry["why"];
    let count = |v: &Value| v.as_i64().unwrap_or(0);
    let mut said = Vec::new();
    if count(&entry["owed"]) > 0 {
        said.push(format!("{} message(s) waiting for it", entry["owed"]));
    }
    if why["unconfirmed"] == true {
        said.push("its last message not confirmed yet".to_owned());
    }
    if count(&why["pending"]) > 0 {
        said.push(format!("{} change(s) not yet relayed", why["pending"]));
    }
    if why["provisioning"] == true {
        said.push("to be sent everything again".to_owned());
    }
    let backlog: i64 = entry["backlog"]["tables"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| count(&t["unsent"]) + count(&t["unfiled"]))
        .sum();
    if backlog > 0 {
        said.push(format!("{backlog} row(s) of its own not yet heard filed"));
    }
    said.join(", ")
}

/// A few lines of `sync.overview()`: the state of each register, and what
/// is on its way.
fn show_overview(pg: &mut Client, registers: &[Register]) {
    let overview = overview(pg);
    let states = &overview["states"];
    let counted: Vec<String> = [
        "synced",
        "catching_up",
        "stalled",
        "unreachable",
        "awaiting_fix",
    ]
    .iter()
    .filter(|s| states[**s].as_i64().unwrap_or(0) > 0)
    .map(|s| format!("{} {s}", states[*s]))
    .collect();
    println!(
        "   sync.overview(): {}; {}",
        if overview["healthy"] == true {
            "healthy"
        } else {
            "NOT healthy"
        },
        counted.join(", ")
    );
    for register in registers {
        let (state, entry) = state_of(&overview, register.id);
        let way = on_its_way(&entry);
        let offline = if register.online.is_some() {
            ""
        } else {
            " (offline)"
        };
        match way.is_empty() {
            true => println!("       {}{offline}: {state}", register.name),
            false => println!("       {}{offline}: {state}: {way}", register.name),
        }
    }
    let tables: Vec<String> = overview["tables"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| t["synced"] != true)
        .map(|t| {
            format!(
                "{} ({} row(s) in flight, {} unfiled, {} not yet relayed)",
                t["table"].as_str().unwrap_or("?"),
                t["in_flight"],
                t["unfiled"],
                t["pending"]
            )
        })
        .collect();
    if !tables.is_empty() {
        println!("       on its way: {}", tables.join("; "));
    }
}

/// What each register holds; answers whether each holds exactly the head
/// office's products.
fn show_registers(pg: &mut Client, registers: &[Register]) -> bool {
    let expected = head_office_products(pg);
    let mut all_match = true;
    for register in registers {
        let held = register_products(register);
        let matches = held == expected;
        if register.online.is_some() {
            all_match &= matches;
        }
        let products: Vec<String> = held
            .iter()
            .map(|(_, name, price)| format!("{name} {}", money(*price)))
            .collect();
        println!(
            "   {} holds {}{}",
            register.name,
            products.join(", "),
            match (matches, register.online.is_some()) {
                (true, _) => "",
                (false, true) => "  (NOT the head office's)",
                (false, false) => "  (not the head office's: it is offline)",
            }
        );
    }
    all_match
}

/// The receipts filed at the head office, per register; answers whether
/// every receipt sold by a register that is online is filed exactly once,
/// and nothing else is.
fn show_receipts(pg: &mut Client, registers: &[Register]) -> bool {
    let filed = head_office_receipts(pg);
    let mut right = true;
    for register in registers {
        let of_it: Vec<Uuid> = filed
            .iter()
            .filter(|(_, by)| *by == register.id)
            .map(|(id, _)| *id)
            .collect();
        let waiting = register.sold.iter().filter(|s| !of_it.contains(s)).count();
        let once = register
            .sold
            .iter()
            .all(|s| of_it.iter().filter(|f| *f == s).count() <= 1)
            && of_it.iter().all(|f| register.sold.contains(f));
        right &= once && (register.online.is_none() || waiting == 0);
        println!(
            "   head office: {} receipt(s) of {} filed{}",
            of_it.len(),
            register.name,
            match (waiting, once) {
                (_, false) => ", NOT each once".to_owned(),
                (0, true) => String::new(),
                (n, true) => format!(", {n} waiting in its file"),
            }
        );
    }
    right
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
    let head_office = format!("{} user=register", cluster.url("shop"));

    let mut ok = true;
    println!("\n1. Two registers come online, and the catalog is filled");
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
        register.go_online(&head_office);
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
    wait_for_registers(&mut pg, &registers);
    ok &= show_registers(&mut pg, &registers);
    wait_for_synced(&mut pg, &registers);
    show_overview(&mut pg, &registers);

    println!("\n2. Tea costs more, cake arrives, croissants are gone; Register 1 sells");
    pg.batch_execute(
        "UPDATE shop.products SET price_cents = 275, updated_at = now() WHERE name = 'Tea'; \
         INSERT INTO shop.products (id, name, price_cents) VALUES (gen_random_uuid(), 'Cake', 420); \
         DELETE FROM shop.products WHERE name = 'Croissant'",
    )
    .unwrap();
    wait_for_registers(&mut pg, &registers);
    registers[0].sell("Tea");
    wait_for_registers(&mut pg, &registers);
    ok &= show_registers(&mut pg, &registers);
    ok &= show_receipts(&mut pg, &registers);
    wait_for_synced(&mut pg, &registers);
    show_overview(&mut pg, &registers);

    println!("\n3. Register 2 goes offline and sells; the head office changes the catalog");
    registers[1].go_offline();
    registers[1].sell("Coffee");
    registers[1].sell("Cake");
    pg.batch_execute(
        "INSERT INTO shop.products (id, name, price_cents) VALUES (gen_random_uuid(), 'Muffin', 210); \
         UPDATE shop.products SET name = 'Espresso', updated_at = now() WHERE name = 'Coffee'",
    )
    .unwrap();
    wait_for_registers(&mut pg, &registers);
    registers[0].sell("Muffin");
    wait_for_registers(&mut pg, &registers);
    ok &= show_registers(&mut pg, &registers);
    ok &= show_receipts(&mut pg, &registers);
    wait_for_synced(&mut pg, &registers);
    show_overview(&mut pg, &registers);

    println!("\n4. Register 2 is back online");
    registers[1].go_online(&head_office);
    wait_for_registers(&mut pg, &registers);
    ok &= show_registers(&mut pg, &registers);
    ok &= show_receipts(&mut pg, &registers);
    wait_for_synced(&mut pg, &registers);
    show_overview(&mut pg, &registers);

    for register in &mut registers {
        register.go_offline();
    }
    println!("\nThe registers' files: {}", dir.display());
    println!("Done in {:.1} s.", started.elapsed().as_secs_f64());
    if !ok {
        eprintln!(
            "A register does not hold what the head office has, or a receipt is not filed exactly once."
        );
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

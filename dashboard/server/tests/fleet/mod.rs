//! A shop whose registers the dashboard shows: a throwaway cluster with the
//! extension, registers on SQLite files taking their messages through the
//! queue, and steps that put each register in one state. Used by the
//! browser test and by the fixtures the package's types are held to.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::Path;

use magic_sync_replica::queue;
use magic_sync_replica::{install, Apply, CarryOut, Outcome, Replica, Settings, Table, Tables};
use magic_sync_replica::{Wish, Wishes};
use magic_sync_tests::Cluster;
use postgres::Client;
use serde_json::Value;
use tempfile::TempDir;
use uuid::Uuid;

const SERVER_SCHEMA: &str = "
    CREATE SCHEMA shop;
    CREATE TABLE shop.registers (
        id     uuid PRIMARY KEY,
        name   text NOT NULL,
        active boolean NOT NULL DEFAULT true);
    CREATE TABLE shop.products (
        id          uuid PRIMARY KEY,
        name        text NOT NULL,
        price_cents bigint NOT NULL);
    CREATE TABLE shop.receipts (
        id          uuid PRIMARY KEY,
        register_id uuid NOT NULL,
        total_cents bigint NOT NULL CHECK (total_cents >= 0));
    CREATE TABLE shop.footers (
        register_id uuid NOT NULL,
        id          uuid NOT NULL,
        text        text NOT NULL,
        changed_at  timestamptz NOT NULL,
        PRIMARY KEY (register_id, id));
    SELECT sync.declare_replicas('shop.registers', live => 'active');
    SELECT sync.declare_table('shop.products', sync => 'broadcast');
    SELECT sync.declare_table('shop.receipts', mirror => 'record', origin => 'register_id');
    SELECT sync.declare_table('shop.footers', mirror => 'setting', origin => 'register_id',
                              version => 'changed_at', desired => '{text}', apply => 'always');
    INSERT INTO shop.products VALUES
        ('00000000-0000-0000-0000-0000000000a1', 'Tea', 250),
        ('00000000-0000-0000-0000-0000000000a2', 'Coffee', 300);
";

/// A register's tables. The bar's products refuse a price of 1,000.00 or
/// more (PRICE_CHECK): a row the server sends that it cannot take.
const REGISTER_SCHEMA: &str = "
    CREATE TABLE products (
        id          BLOB PRIMARY KEY NOT NULL,
        name        TEXT NOT NULL,
        price_cents INTEGER NOT NULL PRICE_CHECK);
    CREATE TABLE receipts (
        id          BLOB PRIMARY KEY NOT NULL,
        register_id BLOB NOT NULL,
        total_cents INTEGER NOT NULL);
    CREATE TABLE footers (
        register_id BLOB NOT NULL,
        id          BLOB NOT NULL,
        text        TEXT NOT NULL,
        changed_at  TEXT NOT NULL,
        PRIMARY KEY (register_id, id));
";

fn tables() -> Tables {
    Tables::new(vec![
        Table::catalog("products"),
        Table::record("receipts").origin("register_id"),
        Table::setting("footers")
            .version("changed_at")
            .origin("register_id")
            .desired(&["text"])
            .apply(Apply::Always),
    ])
}

/// The receipt printer: a footer of more than 20 characters does not fit
/// and is refused; while a footer says "later", the printer is off.
struct Printer;

impl CarryOut for Printer {
    fn carry_out(&self, wish: &Wish) -> Outcome {
        let text = wish.wanted["text"].as_str().unwrap_or_default();
        if text.chars().count() > 20 {
            Outcome::Refused(format!(
                "\"{text}\" is longer than the printer's 20 characters"
            ))
        } else if text.contains("later") {
            Outcome::Later("the printer is off".to_owned())
        } else {
            Outcome::Applied
        }
    }
}

/// The registers, by name, in the order their ids sort.
pub const NAMES: [&str; 6] = ["Front", "Back", "Terrace", "Kiosk", "Bar", "Patio"];

pub struct Register {
    pub name: &'static str,
    pub id: Uuid,
    pub footer: Uuid,
    pub replica: Replica,
}

pub struct Fleet {
    pub cluster: Cluster,
    pub pg: Client,
    pub registers: Vec<Register>,
    /// The registers that take nothing any more.
    away: Vec<&'static str>,
    _dir: TempDir,
}

impl Fleet {
    /// The shop with its registers, every one provisioned and in sync,
    /// each with its footer filed. A replica that applies nothing for a
    /// second while messages wait for it, and is heard, is stalled.
    pub fn open() -> Fleet {
        let cluster = Cluster::start_with(&["magic_sync.stalled_after=1"]);
        let mut pg = cluster.database_with_extension("shop");
        pg.batch_execute(SERVER_SCHEMA).expect("the shop's schema");
        let dir = tempfile::tempdir().expect("a directory for the registers");
        let mut registers = Vec::new();
        for (i, name) in NAMES.iter().enumerate() {
            let id = Uuid::from_u128(i as u128 + 1);
            pg.execute(
                "INSERT INTO shop.registers (id, name) VALUES ($1, $2)",
                &[&id, name],
            )
            .unwrap();
            let replica = open_replica(&dir.path().join(format!("{name}.db")), id, name);
            let footer = Uuid::from_u128(0xf0 + i as u128);
            replica
                .connection()
                .execute(
                    "INSERT INTO footers VALUES (?1, ?2, 'Thank you', '2026-10-01T10:00:00.000000Z')",
                    rusqlite_params(id, footer),
                )
                .unwrap();
            registers.push(Register {
                name,
                id,
                footer,
                replica,
            });
        }
        let mut fleet = Fleet {
            cluster,
            pg,
            registers,
            away: Vec::new(),
            _dir: dir,
        };
        fleet.settle();
        fleet
    }

    /// A role that may read the status and nothing else, as the dashboard
    /// connects: its connection string.
    pub fn reader_url(&mut self) -> String {
        self.pg
            .batch_execute("CREATE ROLE dashboard LOGIN; SELECT sync.allow_reading('dashboard');")
            .unwrap();
        self.cluster
            .url("shop")
            .replace("user=postgres", "user=dashboard")
    }

    pub fn relay(&mut self) {
        self.pg.query_one("SELECT sync.refile()", &[]).unwrap();
        self.pg.query_one("CALL sync.relay()", &[]).unwrap();
    }

    /// Relays, and every register but those away takes what waits for it
    /// and says what it did, until nothing more moves.
    pub fn settle(&mut self) {
        for _ in 0..3 {
            self.relay();
            for r in self.registers.iter_mut() {
                if self.away.contains(&r.name) {
                    continue;
                }
                queue::deliver(&mut self.pg, &mut r.replica).expect("delivers");
                queue::report(&mut self.pg, &mut r.replica).expect("reports");
            }
        }
    }

    pub fn id(&self, name: &str) -> Uuid {
        self.register(name).id
    }

    fn register(&self, name: &str) -> &Register {
        self.registers.iter().find(|r| r.name == name).unwrap()
    }

    /// The engine's id of each register, and its name.
    pub fn names(&self) -> BTreeMap<String, String> {
        self.registers
            .iter()
            .map(|r| (r.id.to_string(), r.name.to_owned()))
            .collect()
    }

    /// The state the listing gives a register.
    pub fn state_of(&mut self, name: &str) -> String {
        let id = self.id(name).to_string();
        let listing: Value = self
            .pg
            .query_one("SELECT sync.listing(NULL, NULL, 0, 100)", &[])
            .unwrap()
            .get(0);
        listing["replicas"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["id"] == id.as_str())
            .map(|r| r["state"].as_str().unwrap().to_owned())
            .unwrap_or_else(|| "unseen".to_owned())
    }

    /// `name` takes nothing from now on; the head office changes a price,
    /// which every other register takes.
    pub fn catching_up(&mut self, name: &'static str) {
        self.away.push(name);
        self.pg
            .batch_execute(
                "UPDATE shop.products SET price_cents = price_cents + 10 WHERE name = 'Tea'",
            )
            .unwrap();
        self.settle();
    }

    /// `name` takes nothing from now on, but is heard from: once its
    /// messages have waited longer than `magic_sync.stalled_after`, it is
    /// stalled.
    pub fn stalled(&mut self, name: &'static str) {
        self.catching_up(name);
        std::thread::sleep(std::time::Duration::from_millis(1500));
        // Receipts sold are something to say: it is heard. Its Ups carry
        // two rows each, and only the first is sent, so what it says of
        // its backlog counts the rest unsent.
        let r = self.registers.iter_mut().find(|r| r.name == name).unwrap();
        for n in 0..5u128 {
            r.replica
                .connection()
                .execute(
                    "INSERT INTO receipts VALUES (?1, ?2, 420)",
                    rusqlite_params(Uuid::from_u128(0xe2 + n), r.id),
                )
                .unwrap();
        }
        let up = r.replica.next_up().unwrap().expect("an Up");
        self.pg
            .query_one("SELECT sync.receive($1, $2)::text", &[&r.id, &up.bytes])
            .unwrap();
        r.replica.sent(&up).unwrap();
    }

    /// Sends to `name` keep failing, as the nats transport records them.
    pub fn unreachable(&mut self, name: &str) {
        let id = self.id(name);
        self.pg
            .execute(
                "INSERT INTO sync.sends (replica, failures, message, last_error, retry_at) \
                 VALUES ($1, 4, 'the message', 'no responders available for request', now())",
                &[&id],
            )
            .unwrap();
    }

    /// `name` sells a receipt of a negative total, which the database
    /// refuses: kept in the inbox, its own, waiting for a fix.
    pub fn awaiting_fix(&mut self, name: &str) {
        let r = self.registers.iter_mut().find(|r| r.name == name).unwrap();
        r.replica
            .connection()
            .execute(
                "INSERT INTO receipts VALUES (?1, ?2, -5)",
                rusqlite_params(Uuid::from_u128(0xe1), r.id),
            )
            .unwrap();
        queue::report(&mut self.pg, &mut r.replica).expect("reports");
        queue::deliver(&mut self.pg, &mut r.replica).expect("delivers");
    }

    /// The head office wishes `name`'s footer `text`.
    pub fn wish(&mut self, name: &str, text: &str) {
        let (id, footer) = {
            let r = self.register(name);
            (r.id, r.footer)
        };
        self.pg
            .query_one(
                "SELECT sync.desire('footers', jsonb_build_object('register_id', $1::uuid, \
                 'id', $2::uuid, 'text', $3::text, 'changed_at', '2026-10-01T10:00:00Z'), 'asked by ana')",
                &[&id, &footer, &text],
            )
            .expect("sync.desire");
    }

    /// A product every register is sent that the bar's database refuses
    /// (its price is too high for it): set aside for the bar.
    pub fn bar_refuses_a_row(&mut self) {
        self.pg
            .batch_execute(
                "INSERT INTO shop.products VALUES \
                 ('00000000-0000-0000-0000-0000000000a3', 'Gold leaf', 250000)",
            )
            .unwrap();
        self.settle();
    }

    /// A product too large for any message: set aside on the server.
    pub fn a_row_too_large(&mut self) {
        self.pg
            .batch_execute("ALTER DATABASE shop SET magic_sync.message_bytes = 4096")
            .unwrap();
        self.pg = self.cluster.connect("shop");
        self.pg
            .execute(
                "INSERT INTO shop.products VALUES ('00000000-0000-0000-0000-0000000000a4', $1, 1)",
                &[&"x".repeat(6000)],
            )
            .unwrap();
        self.relay();
    }

    /// A column added to the products and not declared: the relay's
    /// check (`sync.check()`, as the worker's refused pass would) records
    /// the drift for the reads.
    pub fn drift(&mut self) {
        self.pg
            .batch_execute("ALTER TABLE shop.products ADD COLUMN vat_rate int")
            .unwrap();
        self.pg.query("SELECT * FROM sync.check()", &[]).unwrap();
    }

    /// A read's answer, as the dashboard's role would get it.
    pub fn read(&mut self, sql: &str) -> Value {
        self.pg.query_one(sql, &[]).unwrap().get(0)
    }
}

fn rusqlite_params(a: Uuid, b: Uuid) -> [Vec<u8>; 2] {
    [a.as_bytes().to_vec(), b.as_bytes().to_vec()]
}

fn open_replica(file: &Path, me: Uuid, name: &str) -> Replica {
    let mut conn = rusqlite::Connection::open(file).unwrap();
    conn.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA foreign_keys = ON; PRAGMA recursive_triggers = ON;",
    )
    .unwrap();
    let check = if name == "Bar" {
        "CHECK (price_cents < 100000)"
    } else {
        ""
    };
    conn.execute_batch(&REGISTER_SCHEMA.replace("PRICE_CHECK", check))
        .unwrap();
    let tables = tables();
    install(&mut conn, &tables).unwrap();
    let mut settings = Settings {
        wishes: Wishes::new().on("footers", Printer),
        ..Settings::default()
    };
    if name == "Patio" {
        settings.limits.rows = 3;
        settings.backlog_every = std::time::Duration::ZERO;
    }
    Replica::open(conn, tables, me, settings).unwrap()
}

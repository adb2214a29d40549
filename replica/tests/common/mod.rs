//! What the integration tests share: a pretend server that numbers its
//! messages as a real one does, and a shop database on disk.
#![allow(dead_code)] // each test file uses part of it

use std::path::{Path, PathBuf};

use magic_sync_replica::proto::wire::{
    to_replica::Body, Down, DownTable, EndSnapshot, Filed, ToReplica, Up,
};
use magic_sync_replica::proto::PROTOCOL;
use magic_sync_replica::{install, Direct, Mirror, Received, Replica, Settings, Table, Tables};
use prost::Message;
use rusqlite::Connection;
use serde_json::Value;
use tempfile::TempDir;
use uuid::Uuid;

pub const SHOP: &str = "
    CREATE TABLE products (
        id         BLOB PRIMARY KEY,
        name       TEXT NOT NULL,
        price      INTEGER CHECK (price >= 0),
        weight     REAL,
        active     BOOLEAN,
        note       TEXT,
        retired_at TEXT
    );
    CREATE TABLE orders (
        id         INTEGER PRIMARY KEY,
        product_id BLOB REFERENCES products (id),
        qty        INTEGER
    );
    CREATE TABLE receipts (
        id          TEXT PRIMARY KEY,
        register_id BLOB,
        product_id  BLOB REFERENCES products (id),
        total       INTEGER
    );
";

pub fn tables() -> Tables {
    Tables::new(vec![
        Table::catalog("products").retired("retired_at"),
        Table::catalog("orders"),
        Table::record("receipts").origin("register_id"),
    ])
}

/// The replica's id in every test.
pub fn me() -> Uuid {
    Uuid::from_u128(0x0196_0000_0000_7000_8000_0000_0000_00aa)
}

/// A shop database in a fresh directory.
pub struct Shop {
    pub dir: TempDir,
}

impl Shop {
    pub fn new() -> Shop {
        Shop::with_schema(SHOP)
    }

    pub fn with_schema(schema: &str) -> Shop {
        let dir = tempfile::tempdir().unwrap();
        let shop = Shop { dir };
        let conn = shop.connect();
        conn.execute_batch(schema).unwrap();
        shop
    }

    pub fn path(&self) -> PathBuf {
        self.dir.path().join("register.db")
    }

    /// A connection set up as a replica needs it.
    pub fn connect(&self) -> Connection {
        connect(&self.path())
    }

    /// Installs the engine's tables and opens the replica.
    pub fn open(&self) -> Replica {
        self.open_with(tables())
    }

    pub fn open_with(&self, tables: Tables) -> Replica {
        let settings = handled(&tables, Settings::default());
        self.open_with_settings(tables, settings)
    }

    pub fn open_with_settings(&self, tables: Tables, settings: Settings) -> Replica {
        let mut conn = self.connect();
        install(&mut conn, &tables).unwrap();
        Replica::open(conn, tables, me(), settings).unwrap()
    }
}

/// The settings, with every setting declared that has no handler given
/// one that only writes the database (`Direct`).
pub fn handled(tables: &Tables, mut settings: Settings) -> Settings {
    for table in tables.iter().filter(|t| t.mirror() == Mirror::Setting) {
        if !settings.wishes.tables().any(|t| t == table.name()) {
            settings.wishes = settings.wishes.on(table.name(), Direct);
        }
    }
    settings
}

pub fn connect(path: &Path) -> Connection {
    let conn = Connection::open(path).unwrap();
    conn.execute_batch("PRAGMA recursive_triggers = ON; PRAGMA foreign_keys = ON")
        .unwrap();
    conn
}

pub fn uuid(n: u128) -> String {
    Uuid::from_u128(0x0196_0000_0000_7000_8000_0000_0000_0000 + n)
        .hyphenated()
        .to_string()
}

/// A product's row as the server sends it.
pub fn product(n: u128, name: &str, price: i64) -> (String, Value) {
    let id = uuid(n);
    let row = serde_json::json!({"id": id, "name": name, "price": price.to_string()});
    (id, row)
}

/// One part of a Down, built row by row.
pub struct Part(pub DownTable);

pub fn part(table: &str) -> Part {
    Part(DownTable {
        table: table.to_owned(),
        ..DownTable::default()
    })
}

impl Part {
    pub fn row(mut self, key: &str, row: Value) -> Part {
        self.0.keys.push(key.to_owned());
        self.0.upserts.push(serde_json::to_vec(&row).unwrap());
        self
    }

    pub fn product(self, n: u128, name: &str, price: i64) -> Part {
        let (id, row) = product(n, name, price);
        self.row(&id, row)
    }

    pub fn delete(mut self, key: &str) -> Part {
        self.0.deletes.push(key.to_owned());
        self
    }
}

/// A pretend server: numbers each message after the one before, as a real
/// server does, with a fresh nonce and mac each time.
pub struct Server {
    pub epoch: String,
    pub sequence: u64,
    pub nonce: u64,
    pub snapshot: String,
    draws: u64,
}

impl Server {
    pub fn new() -> Server {
        Server {
            epoch: Uuid::new_v4().to_string(),
            sequence: 100,
            nonce: 0,
            snapshot: String::new(),
            draws: 0,
        }
    }

    fn draw(&mut self) -> u64 {
        self.draws += 1;
        // Any number from 1 to 2^63 - 1 will do; distinct ones are easy to tell.
        7_000 + self.draws * 13
    }

    fn mac_for(sequence: u64, nonce: u64) -> Vec<u8> {
        let mut mac = sequence.to_be_bytes().to_vec();
        mac.extend_from_slice(&nonce.to_be_bytes());
        mac
    }

    /// The next Down after the last one, without sending it.
    pub fn peek(&mut self, parts: Vec<Part>) -> Down {
        let sequence = self.sequence + 1;
        let nonce = self.draws + 1;
        let nonce = 7_000 + nonce * 13;
        Down {
            sequence,
            nonce,
            previous: self.sequence,
            previous_nonce: self.nonce,
            epoch: self.epoch.clone(),
            snapshot_id: self.snapshot.clone(),
            mac: Self::mac_for(sequence, nonce),
            tables: parts.into_iter().map(|p| p.0).collect(),
        }
    }

    /// The next EndSnapshot after the last message, without sending it.
    pub fn peek_end(&mut self, tables: &[&str]) -> EndSnapshot {
        let down = self.peek(Vec::new());
        EndSnapshot {
            sequence: down.sequence,
            nonce: down.nonce,
            previous: down.previous,
            previous_nonce: down.previous_nonce,
            epoch: down.epoch,
            snapshot_id: down.snapshot_id,
            mac: down.mac,
            tables: tables.iter().map(|t| (*t).to_owned()).collect(),
        }
    }

    fn take(&mut self, sequence: u64) {
        self.sequence = sequence;
        self.nonce = self.draw();
    }

    /// A Down that follows the last message.
    pub fn down(&mut self, parts: Vec<Part>) -> Vec<u8> {
        let down = self.peek(parts);
        self.take(down.sequence);
        encode_down(down)
    }

    /// A Down that begins a new snapshot.
    pub fn begin(&mut self, parts: Vec<Part>) -> Vec<u8> {
        self.snapshot = Uuid::new_v4().to_string();
        let mut down = self.peek(parts);
        down.previous = 0;
        down.previous_nonce = 0;
        self.take(down.sequence);
        encode_down(down)
    }

    /// The EndSnapshot of the snapshot in progress.
    pub fn end(&mut self, tables: &[&str]) -> Vec<u8> {
        let end = self.peek_end(tables);
        self.take(end.sequence);
        self.snapshot.clear();
        encode_end(end)
    }

    /// A snapshot of nothing: an EndSnapshot that follows nothing.
    pub fn nothing(&mut self, tables: &[&str]) -> Vec<u8> {
        self.snapshot = Uuid::new_v4().to_string();
        let mut end = self.peek_end(tables);
        end.previous = 0;
        end.previous_nonce = 0;
        self.take(end.sequence);
        self.snapshot.clear();
        encode_end(end)
    }

    /// A message that is lost on the way: the server numbers it, the
    /// replica never sees it.
    pub fn lose(&mut self) {
        let _ = self.down(Vec::new());
    }

    /// The server is installed again: a new epoch, numbering from scratch.
    pub fn new_epoch(&mut self) {
        self.epoch = Uuid::new_v4().to_string();
        self.sequence = 1;
        self.snapshot.clear();
    }
}

pub fn encode(protocol: u32, body: Option<Body>) -> Vec<u8> {
    ToReplica { protocol, body }.encode_to_vec()
}

pub fn encode_down(down: Down) -> Vec<u8> {
    encode(PROTOCOL, Some(Body::Down(down)))
}

pub fn encode_end(end: EndSnapshot) -> Vec<u8> {
    encode(PROTOCOL, Some(Body::EndSnapshot(end)))
}

pub fn encode_filed(uploads: Vec<u64>) -> Vec<u8> {
    encode(PROTOCOL, Some(Body::Filed(Filed { uploads })))
}

/// Applies a message and insists it applied.
pub fn apply(replica: &mut magic_sync_replica::Replica, bytes: &[u8]) -> Received {
    let received = replica.receive(bytes).unwrap();
    assert!(
        matches!(received, Received::Applied { .. } | Received::Ended { .. }),
        "{received:?}"
    );
    received
}

/// The names of the products held, by key order.
pub fn names(conn: &Connection) -> Vec<String> {
    strings(conn, "SELECT name FROM products ORDER BY id")
}

pub fn strings(conn: &Connection, sql: &str) -> Vec<String> {
    let mut statement = conn.prepare(sql).unwrap();
    statement
        .query_map([], |row| row.get::<_, String>(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// Writes as the engine does (its writes are neither refused nor noted):
/// sets a scene a server could have made.
pub fn as_the_engine(conn: &Connection, sql: &str) {
    conn.execute_batch(&format!(
        "BEGIN; UPDATE sync_state SET writing = 1; {sql}; UPDATE sync_state SET writing = 0; COMMIT;"
    ))
    .unwrap();
}

/// The key of the replica's receipt `n`.
pub fn receipt(n: u128) -> String {
    uuid(0x1000 + n)
}

/// A receipt the replica writes, pointing at product `n`.
pub fn write_receipt(conn: &Connection, id: &str, product: u128, total: i64) {
    conn.execute(
        "INSERT INTO receipts (id, register_id, product_id, total) VALUES (?1, ?2, ?3, ?4)",
        rusqlite::params![
            id,
            me().as_bytes().to_vec(),
            Uuid::parse_str(&uuid(product)).unwrap().as_bytes().to_vec(),
            total
        ],
    )
    .unwrap();
}

pub fn count(conn: &Connection, sql: &str) -> i64 {
    conn.query_row(sql, [], |row| row.get(0)).unwrap()
}

/// The next Up, decoded, after which it counts as sent.
pub fn say(replica: &mut Replica) -> Option<Up> {
    let upload = replica.next_up().unwrap()?;
    replica.sent(&upload).unwrap();
    Some(upload.message())
}

/// A replica provisioned with products 1 ("tea", 3) and 2 ("jam", 5).
pub fn provisioned() -> (Shop, Replica, Server) {
    let shop = Shop::new();
    let mut replica = shop.open();
    let mut server = Server::new();
    apply(
        &mut replica,
        &server.begin(vec![part("products")
            .product(1, "tea", 3)
            .product(2, "jam", 5)]),
    );
    apply(&mut replica, &server.end(&["products", "orders"]));
    (shop, replica, server)
}

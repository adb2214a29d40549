//! What the end-to-end tests share: the shop's schema on both sides, a
//! throwaway cluster with it, registers on SQLite files, and the default
//! transport's client.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use magic_sync_replica::queue;
use magic_sync_replica::{
    install, Direct, Mirror, Received, Replica, Settings, Table, Tables, Wishes,
};
use magic_sync_tests::Cluster;
use postgres::Client;
use rusqlite::Connection;
use tempfile::TempDir;
use uuid::Uuid;

pub use magic_sync_tests::shop::{HEAD_OFFICE as SERVER_SCHEMA, REGISTER as REGISTER_SCHEMA};

/// A product as both sides hold it: id, name, price, instant as text.
pub type Product = (Uuid, String, i64, String);

pub struct Shop {
    _cluster: Cluster,
    pub pg: Client,
    dir: TempDir,
}

impl Shop {
    pub fn open() -> Shop {
        Shop::open_with(&[])
    }

    /// The shop on a cluster started with these settings (`name=value`).
    pub fn open_with(settings: &[&str]) -> Shop {
        let cluster = Cluster::start_with(settings);
        let mut pg = cluster.database_with_extension("shop");
        pg.batch_execute(SERVER_SCHEMA).expect("the shop's schema");
        Shop {
            _cluster: cluster,
            pg,
            dir: tempfile::tempdir().expect("a directory for the registers"),
        }
    }

    pub fn cluster(&self) -> &Cluster {
        &self._cluster
    }

    /// Connects again, taking the database's settings afresh.
    pub fn reconnect(&mut self) {
        self.pg = self._cluster.connect("shop");
    }

    pub fn add_register(&mut self, name: &str) -> Uuid {
        let id = Uuid::new_v4();
        self.pg
            .execute(
                "INSERT INTO shop.registers (id, name) VALUES ($1, $2)",
                &[&id, &name],
            )
            .unwrap();
        id
    }

    pub fn file_of(&self, register: Uuid) -> PathBuf {
        self.dir.path().join(format!("{register}.db"))
    }

    pub fn run(&mut self, sql: &str) {
        self.pg.batch_execute(sql).unwrap();
    }

    pub fn relay(&mut self) -> serde_json::Value {
        let row = self.pg.query_one("CALL sync.relay()", &[]).unwrap();
        row.get(0)
    }

    pub fn products(&mut self) -> Vec<Product> {
        products_of(&mut self.pg)
    }
}

/// The products a server holds, sorted, their instants as the registers
/// write them.
pub fn products_of(pg: &mut Client) -> Vec<Product> {
    let mut rows: Vec<Product> = pg
        .query(
            "SELECT id, name, price_cents, \
             to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') \
             FROM shop.products",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
        .collect();
    rows.sort();
    rows
}

pub fn tables() -> Tables {
    Tables::new(vec![Table::catalog("products")])
}

/// Opens a register's replica on its SQLite file, as its program does at
/// start: the schema, the engine's tables, then the replica.
pub fn open_register(file: &Path, me: Uuid) -> Replica {
    open_replica(file, REGISTER_SCHEMA, tables(), me, Settings::default())
}

/// Opens a replica of `tables` on a SQLite file holding `schema`, with the
/// settings the engine asks of a connection. A setting given no handler
/// of its wishes has them written as they come (`Direct`).
pub fn open_replica(
    file: &Path,
    schema: &str,
    tables: Tables,
    me: Uuid,
    mut settings: Settings,
) -> Replica {
    settings.wishes = handling_every_setting(std::mem::take(&mut settings.wishes), &tables);
    let mut conn = Connection::open(file).unwrap();
    conn.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; \
         PRAGMA foreign_keys = ON; PRAGMA recursive_triggers = ON;",
    )
    .unwrap();
    conn.execute_batch(schema).unwrap();
    install(&mut conn, &tables).unwrap();
    Replica::open(conn, tables, me, settings).unwrap()
}

/// Wishes of every setting of `tables` written as they come: the settings
/// of these tests live only in the database.
pub fn carried_out_directly(tables: &Tables) -> Wishes {
    handling_every_setting(Wishes::new(), tables)
}

/// `wishes`, with `Direct` for every setting of `tables` it gives no
/// handler.
fn handling_every_setting(wishes: Wishes, tables: &Tables) -> Wishes {
    let handled: Vec<String> = wishes.tables().map(str::to_owned).collect();
    tables
        .iter()
        .filter(|t| t.mirror() == Mirror::Setting && !handled.iter().any(|h| h == t.name()))
        .fold(wishes, |wishes, t| wishes.on(t.name(), Direct))
}

/// The products a register holds, sorted, as its replica reads them.
pub fn held_by(replica: &Replica) -> Vec<Product> {
    products_held_in(replica.connection())
}

/// Every product a register's SQLite database holds, sorted, through any
/// connection to it: the replica's own, or one a program opened beside it.
pub fn products_held_in(conn: &Connection) -> Vec<Product> {
    let mut rows: Vec<Product> = conn
        .prepare("SELECT id, name, price_cents, updated_at FROM products")
        .unwrap()
        .query_map([], |r| {
            let id: Vec<u8> = r.get(0)?;
            Ok((
                Uuid::from_slice(&id).expect("a 16-byte id"),
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
            ))
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    rows.sort();
    rows
}

/// Has a register's SQLite file log every price it applies, in order (a
/// trigger on its products), for `prices_applied`.
pub fn log_prices_applied(register: &Replica) {
    register
        .connection()
        .execute_batch(
            "CREATE TABLE applied (id BLOB NOT NULL, price INTEGER NOT NULL);
             CREATE TRIGGER applied_insert AFTER INSERT ON products
               BEGIN INSERT INTO applied VALUES (new.id, new.price_cents); END;
             CREATE TRIGGER applied_update AFTER UPDATE ON products
               BEGIN INSERT INTO applied VALUES (new.id, new.price_cents); END;",
        )
        .unwrap();
}

/// Every price a register logging them applied, per product id, in the
/// order applied.
pub fn prices_applied(register: &Replica) -> std::collections::HashMap<Vec<u8>, Vec<i64>> {
    let conn = register.connection();
    let mut statement = conn
        .prepare("SELECT id, price FROM applied ORDER BY rowid")
        .unwrap();
    let mut per_product: std::collections::HashMap<Vec<u8>, Vec<i64>> = Default::default();
    for row in statement
        .query_map([], |r| Ok((r.get::<_, Vec<u8>>(0)?, r.get::<_, i64>(1)?)))
        .unwrap()
    {
        let (id, price) = row.unwrap();
        per_product.entry(id).or_default().push(price);
    }
    per_product
}

/// Takes, applies and acknowledges every message waiting for a register.
pub fn deliver(pg: &mut Client, register: &mut Replica) -> Vec<Received> {
    queue::deliver(pg, register).expect("delivers")
}

/// Sends up what a register has to say; answers what the server made of it.
pub fn report(pg: &mut Client, register: &mut Replica) -> Vec<serde_json::Value> {
    queue::report(pg, register).expect("reports")
}

pub fn next(pg: &mut Client, register: &Replica) -> Option<(String, Vec<u8>)> {
    queue::next(pg, register).expect("sync.next")
}

pub fn ack(pg: &mut Client, register: &Replica, id: &str) -> bool {
    queue::ack(pg, register, id).expect("sync.ack")
}

/// One relay pass, then every register takes what waits for it and says
/// what it applied.
pub fn sync_all(shop: &mut Shop, registers: &mut [Replica]) {
    shop.relay();
    for register in registers.iter_mut() {
        deliver(&mut shop.pg, register);
        report(&mut shop.pg, register);
    }
}

pub fn assert_each_holds_the_servers_products(shop: &mut Shop, registers: &[Replica]) {
    let expected = shop.products();
    for register in registers {
        assert_eq!(
            held_by(register),
            expected,
            "register {} differs from the server",
            register.me()
        );
    }
}

/// The rows (upserts and deletes) a `ToReplica` message carries, when it is
/// a `Down`; None for any other message.
pub fn rows_of_down(bytes: &[u8]) -> Option<usize> {
    use magic_sync_proto::wire::to_replica::Body;
    use magic_sync_proto::wire::ToReplica;
    use prost::Message;
    match ToReplica::decode(bytes).expect("a ToReplica").body {
        Some(Body::Down(down)) => Some(
            down.tables
                .iter()
                .map(|t| t.upserts.len() + t.deletes.len())
                .sum(),
        ),
        _ => None,
    }
}

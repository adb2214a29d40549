//! The shop that files what registers send up: a catalog of products, the
//! receipts registers write (records of their own), the state of each
//! register (a two-way row: the head office writes the note, the register
//! its battery) and each register's footers (settings). Used by the
//! end-to-end tests of filing (tests/filing*.rs), with the default
//! transport's client.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use magic_sync_replica::{Apply, Replica, Settings, Table, Tables};
use magic_sync_tests::Cluster;
use postgres::Client;
use tempfile::TempDir;
use uuid::Uuid;

/// The end-to-end tests' shop (`magic_sync_tests::shop`), and what is
/// filed: receipts, each register's state and its footers.
pub const SERVER_SCHEMA: &str = concat!(
    magic_sync_tests::head_office!(),
    "
    CREATE TABLE shop.receipts (
        id          uuid PRIMARY KEY,
        register_id uuid NOT NULL,
        total_cents bigint NOT NULL CHECK (total_cents >= 0),
        sold_at     timestamptz NOT NULL,
        received_at timestamptz NOT NULL DEFAULT now());
    CREATE TABLE shop.register_state (
        id          uuid PRIMARY KEY,
        register_id uuid NOT NULL,
        note        text NOT NULL DEFAULT '',
        battery     integer);
    CREATE TABLE shop.footers (
        register_id uuid NOT NULL,
        id          uuid NOT NULL,
        text        text NOT NULL,
        changed_at  timestamptz NOT NULL,
        PRIMARY KEY (register_id, id));
    SELECT sync.declare_table('shop.receipts', mirror => 'record', origin => 'register_id',
                              unmirrored => '{received_at}');
    SELECT sync.declare_table('shop.register_state', mirror => 'both',
                              sync => 'assigned(register_id)', origin => 'register_id',
                              replica_owned => '{battery}');
    SELECT sync.declare_table('shop.footers', mirror => 'setting', origin => 'register_id',
                              version => 'changed_at', desired => '{text}');
"
);

/// A register of this shop. Its products are not quite the tests' shop's:
/// they are declared with a retired column (`retired_at`).
pub const REGISTER_SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS products (
        id          BLOB PRIMARY KEY NOT NULL,
        name        TEXT NOT NULL,
        price_cents INTEGER NOT NULL,
        updated_at  TEXT NOT NULL,
        retired_at  TEXT);
    CREATE TABLE IF NOT EXISTS receipts (
        id          BLOB PRIMARY KEY NOT NULL,
        register_id BLOB NOT NULL,
        total_cents INTEGER NOT NULL,
        sold_at     TEXT NOT NULL);
    CREATE TABLE IF NOT EXISTS register_state (
        id          BLOB PRIMARY KEY NOT NULL,
        register_id BLOB NOT NULL,
        note        TEXT NOT NULL DEFAULT '',
        battery     INTEGER,
        retired_at  TEXT);
    CREATE TABLE IF NOT EXISTS footers (
        register_id BLOB NOT NULL,
        id          BLOB NOT NULL,
        text        TEXT NOT NULL,
        changed_at  TEXT NOT NULL,
        PRIMARY KEY (register_id, id));
";

pub fn tables() -> Tables {
    tables_and(Vec::new())
}

/// The shop's tables, then `more`: a test's own tables after them.
pub fn tables_and(more: Vec<Table>) -> Tables {
    let shop = vec![
        Table::catalog("products").retired("retired_at"),
        Table::record("receipts").origin("register_id"),
        Table::both("register_state")
            .replica_owned(&["battery"])
            .origin("register_id")
            .retired("retired_at"),
        Table::setting("footers")
            .version("changed_at")
            .origin("register_id")
            .desired(&["text"])
            .apply(Apply::Always),
    ];
    Tables::new(shop.into_iter().chain(more).collect())
}

pub struct Shop {
    pub cluster: Cluster,
    pub pg: Client,
    dir: TempDir,
}

impl Shop {
    pub fn open() -> Shop {
        Shop::open_with(&[])
    }

    /// The shop on a cluster started with these settings (`name=value`).
    pub fn open_with(settings: &[&str]) -> Shop {
        Shop::over(Cluster::start_with(settings))
    }

    /// The shop on a cluster already started.
    pub fn over(cluster: Cluster) -> Shop {
        let mut pg = cluster.database_with_extension("shop");
        pg.batch_execute(SERVER_SCHEMA).expect("the shop's schema");
        Shop {
            cluster,
            pg,
            dir: tempfile::tempdir().expect("a directory for the registers"),
        }
    }

    pub fn reconnect(&mut self) {
        self.pg = self.cluster.connect("shop");
    }

    /// `count` registers named R0, R1, ..., each with its replica opened
    /// on its file.
    pub fn add_registers(&mut self, count: usize) -> (Vec<Uuid>, Vec<Replica>) {
        let ids: Vec<Uuid> = (0..count)
            .map(|i| self.add_register(&format!("R{i}")))
            .collect();
        let registers = ids
            .iter()
            .map(|id| open_register(&self.file_of(*id), *id))
            .collect();
        (ids, registers)
    }

    /// A register and its state row, assigned to it.
    pub fn add_register(&mut self, name: &str) -> Uuid {
        let id = Uuid::new_v4();
        self.pg
            .execute(
                "INSERT INTO shop.registers (id, name) VALUES ($1, $2)",
                &[&id, &name],
            )
            .unwrap();
        self.pg
            .execute(
                "INSERT INTO shop.register_state (id, register_id, note) VALUES ($1, $1, 'new')",
                &[&id],
            )
            .unwrap();
        id
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn file_of(&self, register: Uuid) -> PathBuf {
        self.dir.path().join(format!("{register}.db"))
    }

    pub fn run(&mut self, sql: &str) {
        self.pg.batch_execute(sql).unwrap();
    }

    pub fn count(&mut self, sql: &str) -> i64 {
        self.pg.query_one(sql, &[]).unwrap().get(0)
    }

    pub fn relay(&mut self) -> serde_json::Value {
        // What the inbox keeps is filed again before a pass, as a relay
        // does (sync.refile), in a transaction of its own.
        self.pg.query_one("SELECT sync.refile()", &[]).unwrap();
        self.pg
            .query_one("SELECT sync_internal.provision_due()", &[])
            .unwrap();
        let row = self.pg.query_one("CALL sync.relay()", &[]).unwrap();
        row.get(0)
    }

    /// The receipts the server filed: (id, register, total), sorted.
    pub fn receipts(&mut self) -> Vec<(Uuid, Uuid, i64)> {
        receipts_filed_on(&mut self.pg)
    }

    /// The products the server holds: (id, name, price), sorted.
    pub fn products(&mut self) -> Vec<(Uuid, String, i64)> {
        products_on(&mut self.pg)
    }

    /// A product the head office adds to the catalog, at this price.
    pub fn add_product(&mut self, name: &str, price: i64) {
        self.pg
            .execute(
                "INSERT INTO shop.products (id, name, price_cents) VALUES (gen_random_uuid(), $1, $2)",
                &[&name, &price],
            )
            .unwrap();
    }
}

/// The receipts a server filed: (id, register, total), sorted. A free
/// function as well as `Shop::receipts`, for a server the shop does not
/// hold a connection to (a standby, promoted).
pub fn receipts_filed_on(pg: &mut Client) -> Vec<(Uuid, Uuid, i64)> {
    let mut rows: Vec<(Uuid, Uuid, i64)> = pg
        .query(
            "SELECT id, register_id, total_cents FROM shop.receipts",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    rows.sort();
    rows
}

/// The products a server holds: (id, name, price), sorted. A free
/// function as well as `Shop::products`, for a server the shop does not
/// hold a connection to.
pub fn products_on(pg: &mut Client) -> Vec<(Uuid, String, i64)> {
    let mut rows: Vec<(Uuid, String, i64)> = pg
        .query("SELECT id, name, price_cents FROM shop.products", &[])
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    rows.sort();
    rows
}

/// Opens a register's replica on its SQLite file, as its program does.
pub fn open_register(file: &Path, me: Uuid) -> Replica {
    open_register_with(file, me, Settings::default())
}

pub fn open_register_with(file: &Path, me: Uuid, settings: Settings) -> Replica {
    crate::common::open_replica(file, REGISTER_SCHEMA, tables(), me, settings)
}

/// A register writes receipts (total in cents each), in one transaction.
pub fn sell(register: &Replica, totals: &[i64]) -> Vec<Uuid> {
    let conn = register.connection();
    conn.execute_batch("BEGIN").unwrap();
    let ids = totals
        .iter()
        .map(|total| write_receipt(conn, register.me(), *total))
        .collect();
    conn.execute_batch("COMMIT").unwrap();
    ids
}

/// Register `me` writes a receipt of `total` cents on a connection to its
/// file, its replica's or one of its program's own; answers its id.
pub fn write_receipt(conn: &rusqlite::Connection, me: Uuid, total: i64) -> Uuid {
    let id = Uuid::new_v4();
    conn.execute(
        "INSERT INTO receipts (id, register_id, total_cents, sold_at) \
         VALUES (?1, ?2, ?3, '2026-10-01T10:00:00.000000Z')",
        rusqlite::params![id.as_bytes().to_vec(), me.as_bytes().to_vec(), total],
    )
    .unwrap();
    id
}

/// The rows a register answers to `sql`, an id and a value each, sorted.
pub fn values_by_id<T: rusqlite::types::FromSql + Ord>(
    register: &Replica,
    sql: &str,
) -> Vec<(Uuid, T)> {
    let mut rows: Vec<(Uuid, T)> = register
        .connection()
        .prepare(sql)
        .unwrap()
        .query_map([], |r| {
            let id: Vec<u8> = r.get(0)?;
            Ok((Uuid::from_slice(&id).unwrap(), r.get(1)?))
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    rows.sort();
    rows
}

/// The rows a SQLite connection answers to `sql`: an id, the register
/// it belongs to, and a value, sorted.
pub fn rows_by_register<T: rusqlite::types::FromSql + Ord>(
    conn: &rusqlite::Connection,
    sql: &str,
) -> Vec<(Uuid, Uuid, T)> {
    let mut rows: Vec<(Uuid, Uuid, T)> = conn
        .prepare(sql)
        .unwrap()
        .query_map([], |r| {
            let id: Vec<u8> = r.get(0)?;
            let register: Vec<u8> = r.get(1)?;
            Ok((
                Uuid::from_slice(&id).unwrap(),
                Uuid::from_slice(&register).unwrap(),
                r.get(2)?,
            ))
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    rows.sort();
    rows
}

/// The receipts a register holds: (id, total), sorted.
pub fn receipts_of(register: &Replica) -> Vec<(Uuid, i64)> {
    values_by_id(register, "SELECT id, total_cents FROM receipts")
}

/// The products a register holds and has not retired: (id, name, price).
pub fn products_of(register: &Replica) -> Vec<(Uuid, String, i64)> {
    products_where(register, "retired_at IS NULL")
}

/// The products a register holds that meet `condition`: (id, name, price),
/// sorted.
pub fn products_where(register: &Replica, condition: &str) -> Vec<(Uuid, String, i64)> {
    let mut rows: Vec<(Uuid, String, i64)> = register
        .connection()
        .prepare(&format!(
            "SELECT id, name, price_cents FROM products WHERE {condition}"
        ))
        .unwrap()
        .query_map([], |r| {
            let id: Vec<u8> = r.get(0)?;
            Ok((Uuid::from_slice(&id).unwrap(), r.get(1)?, r.get(2)?))
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    rows.sort();
    rows
}

/// The names of the products a register's file holds, sorted, read
/// through a connection of its own (beside a device loop that holds the
/// replica's).
pub fn names_held(file: &Path) -> Vec<String> {
    magic_sync_tests::shop::product_names_where(file, "true")
}

/// How many notes a register still waits to have filed.
pub fn unfiled(register: &Replica) -> i64 {
    register
        .connection()
        .query_row("SELECT count(*) FROM sync_notes", [], |r| r.get(0))
        .unwrap()
}

pub use crate::common::{deliver, report};

/// One relay pass, then every register takes what waits and says what it
/// has to say, twice (the second round takes the answers to the first).
pub fn sync_all(shop: &mut Shop, registers: &mut [Replica]) {
    shop.relay();
    for _ in 0..2 {
        for register in registers.iter_mut() {
            deliver(&mut shop.pg, register);
            report(&mut shop.pg, register);
        }
    }
}

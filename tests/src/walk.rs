//! The planner's walk, shared by the tests that take it (planner_walk.rs
//! by `CALL sync.relay()`, storm.rs through the relay worker): a schema
//! that uses every rule — broadcast, assigned, follows, grouped, and a
//! table with no rule that travels as a parent — the registers' side of
//! it, the reference query of what a register should hold, and one random
//! write at a time.

use std::collections::BTreeSet;
use std::path::Path;

use magic_sync_replica::{install, Replica, Settings, Table, Tables};
use postgres::Client;
use rusqlite::Connection;
use uuid::Uuid;

pub const SERVER: &str = "
    CREATE SCHEMA shop;
    CREATE TABLE shop.registers (id uuid PRIMARY KEY, active boolean NOT NULL DEFAULT true);
    CREATE TABLE shop.categories (id uuid PRIMARY KEY, name text NOT NULL);
    CREATE TABLE shop.products (
        id uuid PRIMARY KEY, name text NOT NULL,
        category_id uuid REFERENCES shop.categories (id));
    CREATE TABLE shop.orders (
        id uuid PRIMARY KEY, register_id uuid,
        product_id uuid NOT NULL REFERENCES shop.products (id));
    CREATE TABLE shop.order_notes (
        order_id uuid PRIMARY KEY REFERENCES shop.orders (id) ON DELETE CASCADE,
        text text NOT NULL);
    CREATE TABLE shop.customers (id uuid PRIMARY KEY, name text NOT NULL);
    CREATE TABLE shop.lists (id uuid PRIMARY KEY);
    CREATE TABLE shop.list_members (
        list_id uuid REFERENCES shop.lists (id),
        customer_id uuid REFERENCES shop.customers (id),
        PRIMARY KEY (list_id, customer_id));
    CREATE TABLE shop.register_lists (
        list_id uuid REFERENCES shop.lists (id),
        register_id uuid REFERENCES shop.registers (id),
        PRIMARY KEY (list_id, register_id));
    SELECT sync.declare_replicas('shop.registers', live => 'active');
    SELECT sync.declare_table('shop.categories', sync => 'none');
    SELECT sync.declare_table('shop.products', sync => 'broadcast');
    SELECT sync.declare_table('shop.orders', sync => 'assigned(register_id)');
    SELECT sync.declare_table('shop.order_notes', sync => 'follows(order_id)');
    SELECT sync.declare_table('shop.customers',
        sync => 'grouped(members => shop.list_members, assigned => shop.register_lists)');
";

/// What a register should hold: the rows its rules send it, closed over
/// what they point at and what follows them.
pub const REFERENCE: &str = "
    WITH RECURSIVE want(table_name, id) AS (
        SELECT 'products', id FROM shop.products
        UNION SELECT 'orders', id FROM shop.orders WHERE register_id = $1
        UNION SELECT 'customers', m.customer_id FROM shop.list_members m
              JOIN shop.register_lists a ON a.list_id = m.list_id WHERE a.register_id = $1
        UNION
        SELECT x.table_name, x.id FROM want w CROSS JOIN LATERAL (
            SELECT 'categories', p.category_id FROM shop.products p
             WHERE w.table_name = 'products' AND p.id = w.id AND p.category_id IS NOT NULL
            UNION ALL SELECT 'products', o.product_id FROM shop.orders o
             WHERE w.table_name = 'orders' AND o.id = w.id
            UNION ALL SELECT 'order_notes', n.order_id FROM shop.order_notes n
             WHERE w.table_name = 'orders' AND n.order_id = w.id
            UNION ALL SELECT 'orders', n.order_id FROM shop.order_notes n
             WHERE w.table_name = 'order_notes' AND n.order_id = w.id
        ) AS x(table_name, id)
    )
    SELECT table_name, id::text FROM want";

pub const REGISTER: &str = "
    PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;
    PRAGMA foreign_keys = ON; PRAGMA recursive_triggers = ON;
    CREATE TABLE IF NOT EXISTS categories (id BLOB PRIMARY KEY NOT NULL, name TEXT NOT NULL);
    CREATE TABLE IF NOT EXISTS products (
        id BLOB PRIMARY KEY NOT NULL, name TEXT NOT NULL,
        category_id BLOB REFERENCES categories (id));
    CREATE TABLE IF NOT EXISTS orders (
        id BLOB PRIMARY KEY NOT NULL, register_id BLOB,
        product_id BLOB NOT NULL REFERENCES products (id));
    CREATE TABLE IF NOT EXISTS order_notes (
        order_id BLOB PRIMARY KEY NOT NULL REFERENCES orders (id), text TEXT NOT NULL);
    CREATE TABLE IF NOT EXISTS customers (id BLOB PRIMARY KEY NOT NULL, name TEXT NOT NULL);
";

pub const TABLES: [&str; 5] = [
    "categories",
    "products",
    "orders",
    "order_notes",
    "customers",
];

pub fn tables() -> Tables {
    Tables::new(TABLES.iter().map(|t| Table::catalog(*t)).collect())
}

pub fn open_register(dir: &Path, id: Uuid) -> Replica {
    let mut conn = Connection::open(dir.join(format!("{id}.db"))).unwrap();
    conn.execute_batch(REGISTER).unwrap();
    install(&mut conn, &tables()).unwrap();
    Replica::open(conn, tables(), id, Settings::default()).unwrap()
}

pub fn held(replica: &Replica) -> BTreeSet<(String, String)> {
    let conn = replica.connection();
    let mut rows = BTreeSet::new();
    for table in TABLES {
        let column = if table == "order_notes" {
            "order_id"
        } else {
            "id"
        };
        let mut statement = conn
            .prepare(&format!("SELECT {column} FROM {table}"))
            .unwrap();
        let keys = statement
            .query_map([], |r| r.get::<_, Vec<u8>>(0))
            .unwrap()
            .map(|k| Uuid::from_slice(&k.unwrap()).unwrap().to_string());
        rows.extend(keys.map(|k| (table.to_owned(), k)));
    }
    rows
}

pub fn should_hold(pg: &mut Client, register: Uuid) -> BTreeSet<(String, String)> {
    pg.query(REFERENCE, &[&register])
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect()
}

/// A small deterministic generator: the walk is the same for a seed.
pub struct Dice(pub u64);

impl Dice {
    pub fn roll(&mut self, sides: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % sides.max(1)
    }

    pub fn pick(&mut self, pg: &mut Client, sql: &str) -> Option<Uuid> {
        let ids: Vec<Uuid> = pg
            .query(sql, &[])
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        (!ids.is_empty()).then(|| ids[self.roll(ids.len() as u64) as usize])
    }
}

/// One random write, run: a row made, changed, re-parented or deleted, a
/// group changed, or a register coming or going.
pub fn step(pg: &mut Client, dice: &mut Dice) {
    if let Some(sql) = write(pg, dice) {
        pg.batch_execute(&sql)
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
}

/// One random write, as the SQL that makes it (None when the dice picked
/// one with nothing to write on).
pub fn write(pg: &mut Client, dice: &mut Dice) -> Option<String> {
    let id = Uuid::new_v4();
    let sql = match dice.roll(14) {
        0 => format!("INSERT INTO shop.categories VALUES ('{id}', 'c')"),
        1 | 2 => {
            let category = dice
                .pick(pg, "SELECT id FROM shop.categories")
                .map_or("NULL".to_owned(), |c| format!("'{c}'"));
            format!("INSERT INTO shop.products VALUES ('{id}', 'p', {category})")
        }
        3 => match (dice.pick(pg, "SELECT id FROM shop.products"), dice.pick(pg, "SELECT id FROM shop.categories")) {
            (Some(p), Some(c)) => format!("UPDATE shop.products SET category_id = '{c}' WHERE id = '{p}'"),
            _ => return None,
        },
        4 => match dice.pick(pg, "SELECT id FROM shop.products p WHERE NOT EXISTS (SELECT 1 FROM shop.orders o WHERE o.product_id = p.id)") {
            Some(p) => format!("DELETE FROM shop.products WHERE id = '{p}'"),
            None => return None,
        },
        5 | 6 => match (dice.pick(pg, "SELECT id FROM shop.registers"), dice.pick(pg, "SELECT id FROM shop.products")) {
            (Some(r), Some(p)) => format!("INSERT INTO shop.orders VALUES ('{id}', '{r}', '{p}')"),
            _ => return None,
        },
        7 => match (dice.pick(pg, "SELECT id FROM shop.orders"), dice.pick(pg, "SELECT id FROM shop.registers")) {
            (Some(o), Some(r)) => format!("UPDATE shop.orders SET register_id = '{r}' WHERE id = '{o}'"),
            _ => return None,
        },
        8 => match dice.pick(pg, "SELECT id FROM shop.orders") {
            Some(o) => format!(
                "INSERT INTO shop.order_notes VALUES ('{o}', 'n') \
                 ON CONFLICT (order_id) DO UPDATE SET text = shop.order_notes.text || '+'"
            ),
            None => return None,
        },
        9 => match dice.pick(pg, "SELECT id FROM shop.orders") {
            Some(o) => format!("DELETE FROM shop.orders WHERE id = '{o}'"),
            None => return None,
        },
        10 => format!(
            "INSERT INTO shop.customers VALUES ('{id}', 'c'); \
             INSERT INTO shop.lists VALUES (gen_random_uuid()) ON CONFLICT DO NOTHING"
        ),
        11 => match (dice.pick(pg, "SELECT id FROM shop.lists"), dice.pick(pg, "SELECT id FROM shop.customers")) {
            (Some(l), Some(c)) => format!(
                "DELETE FROM shop.list_members WHERE list_id = '{l}' AND customer_id = '{c}'; \
                 INSERT INTO shop.list_members SELECT '{l}', '{c}' WHERE {} = 0",
                dice.roll(2)
            ),
            _ => return None,
        },
        12 => match (dice.pick(pg, "SELECT id FROM shop.lists"), dice.pick(pg, "SELECT id FROM shop.registers")) {
            (Some(l), Some(r)) => format!(
                "DELETE FROM shop.register_lists WHERE list_id = '{l}' AND register_id = '{r}'; \
                 INSERT INTO shop.register_lists SELECT '{l}', '{r}' WHERE {} = 0",
                dice.roll(2)
            ),
            _ => return None,
        },
        _ => match dice.pick(pg, "SELECT id FROM shop.registers") {
            Some(r) => format!("UPDATE shop.registers SET active = NOT active WHERE id = '{r}'"),
            None => return None,
        },
    };
    Some(sql)
}

//! The book's recipes end to end: each a PostgreSQL schema declared as the
//! recipe says, registers on SQLite files, and after every step each
//! register's rows compared to a reference — a plain SQL query, written
//! here, of what that register should hold.
//!
//! (Follows, assigned and grouped rules, and a table with no rule that
//! travels as a parent, are walked at random in planner_walk.rs.)

mod common;

use std::collections::BTreeSet;

use magic_sync_replica::queue::{deliver, report};
use magic_sync_replica::{Replica, Settings, Table, Tables};
use magic_sync_tests::Cluster;
use postgres::Client;
use uuid::Uuid;

type Rows = BTreeSet<(String, String)>;

struct Recipe {
    _cluster: Cluster,
    pg: Client,
    dir: tempfile::TempDir,
}

impl Recipe {
    fn open(schema: &str) -> Recipe {
        let cluster = Cluster::start();
        let mut pg = cluster.database_with_extension("recipe");
        pg.batch_execute(schema).expect("the recipe's schema");
        Recipe {
            _cluster: cluster,
            pg,
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn register(&self, id: Uuid, schema: &str, tables: Tables) -> Replica {
        let file = self.dir.path().join(format!("{id}.db"));
        common::open_replica(&file, schema, tables, id, Settings::default())
    }

    fn sync(&mut self, registers: &mut [&mut Replica]) {
        self.pg.query_one("CALL sync.relay()", &[]).unwrap();
        for register in registers.iter_mut() {
            deliver(&mut self.pg, register).unwrap();
            report(&mut self.pg, register).unwrap();
        }
    }

    /// Runs a step, syncs, and holds each register's rows of `tables` to
    /// what the `reference` query says it should hold.
    fn step(
        &mut self,
        step: &str,
        registers: &mut [&mut Replica],
        reference: &str,
        tables: &[&str],
    ) {
        self.pg.batch_execute(step).unwrap();
        self.sync(registers);
        for register in registers.iter() {
            let expected = self.rows(reference, register.me());
            assert_eq!(
                held(register, tables, &[]),
                expected,
                "after {step}: {}",
                register.me()
            );
        }
    }

    fn rows(&mut self, sql: &str, register: Uuid) -> Rows {
        self.pg
            .query(sql, &[&register])
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect()
    }
}

/// What a register holds of these tables: (table, id) of every row.
fn held(replica: &Replica, tables: &[&str], live_only: &[(&str, &str)]) -> Rows {
    let mut rows = Rows::new();
    for table in tables {
        let filter = live_only
            .iter()
            .find(|(t, _)| t == table)
            .map_or(String::new(), |(_, column)| {
                format!(" WHERE {column} IS NULL")
            });
        let mut statement = replica
            .connection()
            .prepare(&format!("SELECT id FROM {table}{filter}"))
            .unwrap();
        let keys = statement
            .query_map([], |r| r.get::<_, Vec<u8>>(0))
            .unwrap()
            .map(|k| Uuid::from_slice(&k.unwrap()).unwrap().to_string());
        rows.extend(keys.map(|k| ((*table).to_owned(), k)));
    }
    rows
}

#[test]
fn archived_rows_replicas_should_not_hold() {
    // A view of the rows that travel for their own sake: an archived product
    // leaves every register, but one an order still points at goes there as
    // the order's parent.
    let mut recipe = Recipe::open(
        "CREATE SCHEMA shop;
         CREATE TABLE shop.registers (id uuid PRIMARY KEY);
         CREATE TABLE shop.products (id uuid PRIMARY KEY, name text NOT NULL, archived_at timestamptz);
         CREATE TABLE shop.orders (id uuid PRIMARY KEY, register_id uuid,
             product_id uuid NOT NULL REFERENCES shop.products (id));
         CREATE VIEW shop.live_products AS SELECT * FROM shop.products WHERE archived_at IS NULL;
         SELECT sync.declare_replicas('shop.registers');
         SELECT sync.declare_table('shop.products', sync => 'broadcast',
             active => 'shop.live_products', unmirrored => '{archived_at}');
         SELECT sync.declare_table('shop.orders', sync => 'assigned(register_id)');",
    );
    let reference = "
        SELECT 'products', id::text FROM shop.products WHERE archived_at IS NULL
        UNION SELECT 'products', product_id::text FROM shop.orders WHERE register_id = $1
        UNION SELECT 'orders', id::text FROM shop.orders WHERE register_id = $1";
    let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
    let schema = "CREATE TABLE products (id BLOB PRIMARY KEY NOT NULL, name TEXT NOT NULL);
                  CREATE TABLE orders (id BLOB PRIMARY KEY NOT NULL, register_id BLOB,
                      product_id BLOB NOT NULL REFERENCES products (id));";
    let tables = || Tables::new(vec![Table::catalog("products"), Table::catalog("orders")]);
    let mut ra = recipe.register(a, schema, tables());
    let mut rb = recipe.register(b, schema, tables());
    recipe
        .pg
        .batch_execute(&format!(
            "INSERT INTO shop.registers VALUES ('{a}'), ('{b}');
             INSERT INTO shop.products VALUES
                 ('00000000-0000-0000-0000-000000000001', 'Tea', NULL),
                 ('00000000-0000-0000-0000-000000000002', 'Cake', NULL);
             INSERT INTO shop.orders VALUES
                 ('00000000-0000-0000-0000-0000000000a1', '{a}', '00000000-0000-0000-0000-000000000002');"
        ))
        .unwrap();
    let tables_held = ["products", "orders"];
    for step in [
        "SELECT 1",
        "UPDATE shop.products SET archived_at = now() WHERE name = 'Cake'",
        "UPDATE shop.products SET archived_at = now() WHERE name = 'Tea'",
        "DELETE FROM shop.orders",
        "UPDATE shop.products SET archived_at = NULL WHERE name = 'Tea'",
    ] {
        recipe.step(step, &mut [&mut ra, &mut rb], reference, &tables_held);
    }
}

#[test]
fn several_companies_on_one_server() {
    // Rows and replicas carry a partition: no row crosses from one company
    // to another, a parent pointed at by (company, id) included.
    let mut recipe = Recipe::open(
        "CREATE SCHEMA shop;
         CREATE TABLE shop.registers (id uuid PRIMARY KEY, company_id uuid NOT NULL);
         CREATE TABLE shop.regions (id uuid PRIMARY KEY, company_id uuid NOT NULL, name text NOT NULL,
             UNIQUE (company_id, id));
         CREATE TABLE shop.stores (id uuid PRIMARY KEY, company_id uuid NOT NULL, region_id uuid NOT NULL,
             FOREIGN KEY (company_id, region_id) REFERENCES shop.regions (company_id, id));
         SELECT sync.declare_replicas('shop.registers', partitioned_by => 'company_id');
         SELECT sync.declare_table('shop.regions');
         SELECT sync.declare_table('shop.stores', sync => 'broadcast');",
    );
    let reference = "
        SELECT 'stores', s.id::text FROM shop.stores s
          JOIN shop.registers r ON r.company_id = s.company_id WHERE r.id = $1
        UNION SELECT 'regions', s.region_id::text FROM shop.stores s
          JOIN shop.registers r ON r.company_id = s.company_id WHERE r.id = $1";
    let (one, two) = (Uuid::new_v4(), Uuid::new_v4());
    let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
    let schema = "CREATE TABLE regions (id BLOB PRIMARY KEY NOT NULL, company_id BLOB NOT NULL, name TEXT NOT NULL);
                  CREATE TABLE stores (id BLOB PRIMARY KEY NOT NULL, company_id BLOB NOT NULL,
                      region_id BLOB NOT NULL REFERENCES regions (id));";
    let tables = || Tables::new(vec![Table::catalog("regions"), Table::catalog("stores")]);
    let mut ra = recipe.register(a, schema, tables());
    let mut rb = recipe.register(b, schema, tables());
    recipe
        .pg
        .batch_execute(&format!(
            "INSERT INTO shop.registers VALUES ('{a}', '{one}'), ('{b}', '{two}');
             INSERT INTO shop.regions VALUES
                 ('00000000-0000-0000-0000-0000000000e1', '{one}', 'North'),
                 ('00000000-0000-0000-0000-0000000000e2', '{one}', 'South'),
                 ('00000000-0000-0000-0000-0000000000f1', '{two}', 'East');
             INSERT INTO shop.stores VALUES
                 ('00000000-0000-0000-0000-000000000011', '{one}', '00000000-0000-0000-0000-0000000000e1'),
                 ('00000000-0000-0000-0000-000000000021', '{two}', '00000000-0000-0000-0000-0000000000f1');"
        ))
        .unwrap();
    let tables_held = ["regions", "stores"];
    for step in [
        "SELECT 1".to_owned(),
        "UPDATE shop.stores SET region_id = '00000000-0000-0000-0000-0000000000e2' \
         WHERE id = '00000000-0000-0000-0000-000000000011'"
            .to_owned(),
        format!(
            "INSERT INTO shop.stores VALUES ('00000000-0000-0000-0000-000000000012', '{one}', \
             '00000000-0000-0000-0000-0000000000e1')"
        ),
        // A register moves to the other company: provisioned again there.
        format!("UPDATE shop.registers SET company_id = '{two}' WHERE id = '{a}'"),
    ] {
        recipe.step(&step, &mut [&mut ra, &mut rb], reference, &tables_held);
    }
}

#[test]
fn a_table_both_sides_write_comes_down_but_for_the_registers_columns() {
    // The head office owns the label; a register owns its battery. A
    // change to the battery alone is not sent down.
    let mut recipe = Recipe::open(
        "CREATE SCHEMA shop;
         CREATE TABLE shop.registers (id uuid PRIMARY KEY);
         CREATE TABLE shop.register_state (id uuid PRIMARY KEY, label text NOT NULL, battery integer);
         SELECT sync.declare_replicas('shop.registers');
         SELECT sync.declare_table('shop.register_state', mirror => 'both',
             sync => 'assigned(id)', replica_owned => '{battery}');",
    );
    let a = Uuid::new_v4();
    let schema = "CREATE TABLE register_state (id BLOB PRIMARY KEY NOT NULL, label TEXT NOT NULL, battery INTEGER);";
    let tables = || {
        Tables::new(vec![
            Table::both("register_state").replica_owned(&["battery"])
        ])
    };
    let mut ra = recipe.register(a, schema, tables());
    recipe
        .pg
        .batch_execute(&format!(
            "INSERT INTO shop.registers VALUES ('{a}');
             INSERT INTO shop.register_state VALUES ('{a}', 'Front desk', NULL);"
        ))
        .unwrap();
    recipe.sync(&mut [&mut ra]);
    let label = |r: &Replica| -> String {
        r.connection()
            .query_row("SELECT label FROM register_state", [], |row| row.get(0))
            .unwrap()
    };
    assert_eq!(label(&ra), "Front desk");

    let notes_before: i64 = recipe
        .pg
        .query_one("SELECT count(*) FROM sync.notes", &[])
        .unwrap()
        .get(0);
    recipe
        .pg
        .batch_execute("UPDATE shop.register_state SET battery = 80")
        .unwrap();
    let notes_after: i64 = recipe
        .pg
        .query_one("SELECT count(*) FROM sync.notes", &[])
        .unwrap()
        .get(0);
    assert_eq!(
        notes_after, notes_before,
        "a change to the register's columns alone is not noted"
    );

    recipe
        .pg
        .batch_execute("UPDATE shop.register_state SET label = 'Back office'")
        .unwrap();
    recipe.sync(&mut [&mut ra]);
    assert_eq!(label(&ra), "Back office");
}

//! The walking skeleton end to end: a PostgreSQL cluster with the extension,
//! a products table sent to every live register, and registers on SQLite
//! files that take what the server sends through the default transport.

use std::path::{Path, PathBuf};

use magic_sync_replica::queue;
use magic_sync_replica::{install, Received, Replica, Settings, Table, Tables};
use magic_sync_tests::Cluster;
use postgres::Client;
use rusqlite::Connection;
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
        price_cents bigint NOT NULL,
        updated_at  timestamptz NOT NULL DEFAULT now());
    SELECT sync.declare_replicas('shop.registers', live => 'active');
    SELECT sync.declare_table('shop.products', sync => 'broadcast');
";

const REGISTER_SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS products (
        id          BLOB PRIMARY KEY NOT NULL,
        name        TEXT NOT NULL,
        price_cents INTEGER NOT NULL,
        updated_at  TEXT NOT NULL);
";

/// A product as both sides hold it: id, name, price, instant as text.
type Product = (Uuid, String, i64, String);

struct Shop {
    _cluster: Cluster,
    pg: Client,
    dir: TempDir,
}

impl Shop {
    fn open() -> Shop {
        let cluster = Cluster::start();
        let mut pg = cluster.database_with_extension("shop");
        pg.batch_execute(SERVER_SCHEMA).expect("the shop's schema");
        Shop {
            _cluster: cluster,
            pg,
            dir: tempfile::tempdir().expect("a directory for the registers"),
        }
    }

    fn add_register(&mut self, name: &str) -> Uuid {
        let id = Uuid::new_v4();
        self.pg
            .execute(
                "INSERT INTO shop.registers (id, name) VALUES ($1, $2)",
                &[&id, &name],
            )
            .unwrap();
        id
    }

    fn file_of(&self, register: Uuid) -> PathBuf {
        self.dir.path().join(format!("{register}.db"))
    }

    fn run(&mut self, sql: &str) {
        self.pg.batch_execute(sql).unwrap();
    }

    fn relay(&mut self) -> serde_json::Value {
        let row = self.pg.query_one("CALL sync.relay()", &[]).unwrap();
        row.get(0)
    }

    fn products(&mut self) -> Vec<Product> {
        let mut rows: Vec<Product> = self
            .pg
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
}

fn tables() -> Tables {
    Tables::new(vec![Table::catalog("products")])
}

/// Opens a register's replica on its SQLite file, as its program does at
/// start: the schema, the engine's tables, then the replica.
fn open_register(file: &Path, me: Uuid) -> Replica {
    let mut conn = Connection::open(file).unwrap();
    conn.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; \
         PRAGMA foreign_keys = ON; PRAGMA recursive_triggers = ON;",
    )
    .unwrap();
    conn.execute_batch(REGISTER_SCHEMA).unwrap();
    install(&mut conn, &tables()).unwrap();
    Replica::open(conn, tables(), me, Settings::default()).unwrap()
}

fn held_by(replica: &Replica) -> Vec<Product> {
    let mut rows: Vec<Product> = replica
        .connection()
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

/// Takes, applies and acknowledges every message waiting for a register.
fn deliver(pg: &mut Client, register: &mut Replica) -> Vec<Received> {
    queue::deliver(pg, register).expect("delivers")
}

/// Sends up what a register has to say; answers what the server made of it.
fn report(pg: &mut Client, register: &mut Replica) -> Vec<serde_json::Value> {
    queue::report(pg, register).expect("reports")
}

fn next(pg: &mut Client, register: &Replica) -> Option<(String, Vec<u8>)> {
    queue::next(pg, register).expect("sync.next")
}

fn ack(pg: &mut Client, register: &Replica, id: &str) -> bool {
    queue::ack(pg, register, id).expect("sync.ack")
}

/// One relay pass, then every register takes what waits for it and says
/// what it applied.
fn sync_all(shop: &mut Shop, registers: &mut [Replica]) {
    shop.relay();
    for register in registers.iter_mut() {
        deliver(&mut shop.pg, register);
        report(&mut shop.pg, register);
    }
}

fn assert_each_holds_the_servers_products(shop: &mut Shop, registers: &[Replica]) {
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

#[test]
fn two_registers_hold_exactly_the_servers_products_after_every_change() {
    let mut shop = Shop::open();
    shop.run(
        "INSERT INTO shop.products (id, name, price_cents) VALUES \
         (gen_random_uuid(), 'Tea', 250), (gen_random_uuid(), 'Coffee', 300)",
    );
    let (a, b) = (
        shop.add_register("Register 1"),
        shop.add_register("Register 2"),
    );
    let mut registers = vec![
        open_register(&shop.file_of(a), a),
        open_register(&shop.file_of(b), b),
    ];

    // Both are provisioned: a snapshot, then its end.
    let summary = shop.relay();
    assert_eq!(summary["provisioned"], 2, "{summary}");
    for register in registers.iter_mut() {
        let delivered = deliver(&mut shop.pg, register);
        assert!(matches!(delivered.last(), Some(Received::Ended { .. })));
        report(&mut shop.pg, register);
    }
    assert_each_holds_the_servers_products(&mut shop, &registers);
    assert_eq!(shop.products().len(), 2);

    shop.run(
        "INSERT INTO shop.products (id, name, price_cents) VALUES (gen_random_uuid(), 'Cake', 400)",
    );
    sync_all(&mut shop, &mut registers);
    assert_each_holds_the_servers_products(&mut shop, &registers);

    shop.run("UPDATE shop.products SET price_cents = price_cents + 25, updated_at = now() WHERE name = 'Tea'");
    sync_all(&mut shop, &mut registers);
    assert_each_holds_the_servers_products(&mut shop, &registers);

    shop.run("DELETE FROM shop.products WHERE name = 'Coffee'");
    sync_all(&mut shop, &mut registers);
    assert_each_holds_the_servers_products(&mut shop, &registers);
    assert_eq!(shop.products().len(), 2);

    // Many changes at once, over several messages.
    shop.run("SET magic_sync.message_rows = 7");
    shop.run(
        "INSERT INTO shop.products (id, name, price_cents) \
         SELECT gen_random_uuid(), 'Item ' || i, i FROM generate_series(1, 40) AS i; \
         DELETE FROM shop.products WHERE name = 'Cake'; \
         UPDATE shop.products SET name = name || ' (new)' WHERE price_cents % 3 = 0",
    );
    sync_all(&mut shop, &mut registers);
    assert_each_holds_the_servers_products(&mut shop, &registers);
    assert_eq!(shop.products().len(), 41);
}

#[test]
fn one_change_for_every_register_is_stored_once() {
    let mut shop = Shop::open();
    let ids: Vec<Uuid> = (0..3)
        .map(|i| shop.add_register(&format!("R{i}")))
        .collect();
    let mut registers: Vec<Replica> = ids
        .iter()
        .map(|id| open_register(&shop.file_of(*id), *id))
        .collect();
    sync_all(&mut shop, &mut registers);
    shop.run(
        "INSERT INTO shop.products (id, name, price_cents) VALUES (gen_random_uuid(), 'Tea', 250)",
    );
    let summary = shop.relay();
    assert_eq!(summary["messages"], 3, "{summary}");
    assert_eq!(summary["bodies"], 1, "{summary}");
    let stored: i64 = shop
        .pg
        .query_one("SELECT count(DISTINCT body) FROM sync.outbox", &[])
        .unwrap()
        .get(0);
    assert_eq!(stored, 1);
}

#[test]
fn a_message_delivered_twice_changes_nothing() {
    let mut shop = Shop::open();
    shop.run(
        "INSERT INTO shop.products (id, name, price_cents) VALUES (gen_random_uuid(), 'Tea', 250)",
    );
    let a = shop.add_register("Register 1");
    let mut register = open_register(&shop.file_of(a), a);
    sync_all(&mut shop, std::slice::from_mut(&mut register));

    shop.run("UPDATE shop.products SET price_cents = 999");
    shop.relay();
    let (id, message) = next(&mut shop.pg, &register).expect("a message waits");
    let first = register.receive(&message).unwrap();
    assert!(matches!(first, Received::Applied { .. }), "{first:?}");
    let before = held_by(&register);
    // The acknowledgement was lost: the transport delivers it again.
    let again = register.receive(&message).unwrap();
    assert!(matches!(again, Received::Already { .. }), "{again:?}");
    assert_eq!(held_by(&register), before);
    assert!(ack(&mut shop.pg, &register, &id));
    // An acknowledgement that comes twice takes nothing else out.
    assert!(!ack(&mut shop.pg, &register, &id));
    assert_each_holds_the_servers_products(&mut shop, std::slice::from_ref(&register));
}

#[test]
fn a_register_started_again_on_its_file_carries_on() {
    let mut shop = Shop::open();
    shop.run(
        "INSERT INTO shop.products (id, name, price_cents) VALUES (gen_random_uuid(), 'Tea', 250)",
    );
    let a = shop.add_register("Register 1");
    let file = shop.file_of(a);
    let mut register = open_register(&file, a);
    sync_all(&mut shop, std::slice::from_mut(&mut register));
    let applied = register.last_applied().unwrap();

    // The program stops with a message applied but not acknowledged.
    shop.run(
        "INSERT INTO shop.products (id, name, price_cents) VALUES (gen_random_uuid(), 'Cake', 400)",
    );
    shop.relay();
    let (_, message) = next(&mut shop.pg, &register).expect("a message waits");
    register.receive(&message).unwrap();
    drop(register);

    let mut register = open_register(&file, a);
    assert!(register.last_applied().unwrap().sequence > applied.sequence);
    shop.run("UPDATE shop.products SET name = 'Green tea' WHERE name = 'Tea'");
    shop.relay();
    let delivered = deliver(&mut shop.pg, &mut register);
    assert!(matches!(delivered.first(), Some(Received::Already { .. })));
    assert!(matches!(delivered.last(), Some(Received::Applied { .. })));
    report(&mut shop.pg, &mut register);
    assert_each_holds_the_servers_products(&mut shop, std::slice::from_ref(&register));
}

#[test]
fn a_row_counts_as_held_only_once_the_register_says_it_applied_it() {
    let mut shop = Shop::open();
    let a = shop.add_register("Register 1");
    let mut register = open_register(&shop.file_of(a), a);
    sync_all(&mut shop, std::slice::from_mut(&mut register));
    shop.run(
        "INSERT INTO shop.products (id, name, price_cents) VALUES (gen_random_uuid(), 'Tea', 250)",
    );
    shop.relay();
    deliver(&mut shop.pg, &mut register);
    let confirmed = |pg: &mut Client| -> i64 {
        pg.query_one(
            "SELECT count(*) FROM sync.held h JOIN sync.replicas r ON r.id = h.replica \
             WHERE h.sent <= r.applied_sequence",
            &[],
        )
        .unwrap()
        .get(0)
    };
    assert_eq!(
        confirmed(&mut shop.pg),
        0,
        "held before the register said so"
    );
    let verdicts = report(&mut shop.pg, &mut register);
    assert_eq!(
        verdicts.last().unwrap()["applied"],
        "counted",
        "{verdicts:?}"
    );
    assert_eq!(confirmed(&mut shop.pg), 1);
}

#[test]
fn an_up_with_a_seal_the_server_never_made_counts_nothing() {
    let mut shop = Shop::open();
    let a = shop.add_register("Register 1");
    let mut register = open_register(&shop.file_of(a), a);
    shop.run(
        "INSERT INTO shop.products (id, name, price_cents) VALUES (gen_random_uuid(), 'Tea', 250)",
    );
    shop.relay();
    deliver(&mut shop.pg, &mut register);
    let up = register.next_up().unwrap().expect("something to say");
    let mut forged = up.message();
    forged.mac = vec![0; 16];
    let bytes = prost::Message::encode_to_vec(&forged);
    let verdict: serde_json::Value = shop
        .pg
        .query_one("SELECT sync.receive($1, $2)", &[&a, &bytes])
        .unwrap()
        .get(0);
    assert_eq!(verdict["applied"], "a seal the server never made");
    let applied: i64 = shop
        .pg
        .query_one(
            "SELECT applied_sequence FROM sync.replicas WHERE id = $1",
            &[&a],
        )
        .unwrap()
        .get(0);
    assert_eq!(applied, 0);
}

#[test]
fn bytes_that_are_no_up_are_refused_and_change_nothing() {
    let mut shop = Shop::open();
    let a = shop.add_register("Register 1");
    shop.relay();
    let error = shop
        .pg
        .query_one("SELECT sync.receive($1, '\\xdeadbeef'::bytea)", &[&a])
        .unwrap_err();
    assert!(
        error.to_string().contains("are not an Up message")
            || format!("{error:?}").contains("are not an Up message"),
        "{error:?}"
    );
}

#[test]
fn a_register_no_longer_live_is_forgotten_and_provisioned_when_back() {
    let mut shop = Shop::open();
    shop.run(
        "INSERT INTO shop.products (id, name, price_cents) VALUES (gen_random_uuid(), 'Tea', 250)",
    );
    let a = shop.add_register("Register 1");
    let mut register = open_register(&shop.file_of(a), a);
    sync_all(&mut shop, std::slice::from_mut(&mut register));

    shop.pg
        .execute(
            "UPDATE shop.registers SET active = false WHERE id = $1",
            &[&a],
        )
        .unwrap();
    shop.run(
        "INSERT INTO shop.products (id, name, price_cents) VALUES (gen_random_uuid(), 'Cake', 400)",
    );
    let summary = shop.relay();
    assert_eq!(summary["forgotten"], 1, "{summary}");
    let held: i64 = shop
        .pg
        .query_one("SELECT count(*) FROM sync.held", &[])
        .unwrap()
        .get(0);
    assert_eq!(held, 0);
    assert!(
        next(&mut shop.pg, &register).is_none(),
        "nothing is sent a replica that is not live"
    );

    shop.pg
        .execute(
            "UPDATE shop.registers SET active = true WHERE id = $1",
            &[&a],
        )
        .unwrap();
    shop.run("DELETE FROM shop.products WHERE name = 'Tea'");
    let summary = shop.relay();
    assert_eq!(summary["provisioned"], 1, "{summary}");
    deliver(&mut shop.pg, &mut register);
    report(&mut shop.pg, &mut register);
    assert_each_holds_the_servers_products(&mut shop, std::slice::from_ref(&register));
}

#[test]
fn a_register_that_missed_a_message_says_so_and_is_provisioned_again() {
    let mut shop = Shop::open();
    shop.run(
        "INSERT INTO shop.products (id, name, price_cents) VALUES (gen_random_uuid(), 'Tea', 250)",
    );
    let a = shop.add_register("Register 1");
    let mut register = open_register(&shop.file_of(a), a);
    sync_all(&mut shop, std::slice::from_mut(&mut register));

    // A message lost on the way: taken out of the queue, never applied.
    shop.run(
        "INSERT INTO shop.products (id, name, price_cents) VALUES (gen_random_uuid(), 'Cake', 400)",
    );
    shop.relay();
    let (lost, _) = next(&mut shop.pg, &register).unwrap();
    ack(&mut shop.pg, &register, &lost);
    shop.run("UPDATE shop.products SET price_cents = 1 WHERE name = 'Tea'");
    shop.relay();
    let delivered = deliver(&mut shop.pg, &mut register);
    assert!(
        matches!(delivered.last(), Some(Received::Gap { .. })),
        "{delivered:?}"
    );
    let verdicts = report(&mut shop.pg, &mut register);
    assert_eq!(
        verdicts.last().unwrap()["gap"],
        "provisioned again",
        "{verdicts:?}"
    );

    let summary = shop.relay();
    assert_eq!(summary["provisioned"], 1, "{summary}");
    deliver(&mut shop.pg, &mut register);
    report(&mut shop.pg, &mut register);
    assert_each_holds_the_servers_products(&mut shop, std::slice::from_ref(&register));
}

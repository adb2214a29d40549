//! The journal of broadcast tables (docs/src/decisions.md, "The journal for
//! broadcast tables"): a broadcast table's rows recorded once, for a
//! stand-in, with the registers following it; every register still holds
//! exactly what the server has, says so in its digests, and is counted and
//! shown as holding it. Real PostgreSQL, registers on SQLite files.

mod common;

use std::time::Duration;

use common::*;
use magic_sync_replica::{Replica, Settings};
use magic_sync_tests::add_products;
use uuid::Uuid;

/// Register 2 refuses a product named 'Forbidden'.
const REFUSING: &str = "
    CREATE TRIGGER IF NOT EXISTS no_forbidden BEFORE INSERT ON products
    WHEN NEW.name = 'Forbidden' BEGIN SELECT RAISE(ABORT, 'forbidden here'); END;
";

fn count(shop: &mut Shop, sql: &str) -> i64 {
    shop.pg.query_one(sql, &[]).unwrap().get(0)
}

/// Registers whose reports carry digests a second apart, which the server
/// compares whenever it may (ten minutes apart: `compare_digests_again`
/// forgets when).
fn registers(shop: &mut Shop, schemas: &[&str]) -> Vec<Replica> {
    let settings = || Settings {
        digests_every: DIGESTS_EVERY,
        ..Settings::default()
    };
    schemas
        .iter()
        .enumerate()
        .map(|(n, schema)| {
            let id = shop.add_register(&format!("Register {}", n + 1));
            open_replica(&shop.file_of(id), schema, tables(), id, settings())
        })
        .collect()
}

const DIGESTS_EVERY: Duration = Duration::from_secs(1);

/// Lets the registers' digests fall due, and the server compare them.
fn compare_digests_again(shop: &mut Shop) {
    std::thread::sleep(DIGESTS_EVERY + Duration::from_millis(100));
    shop.run("UPDATE sync.replicas SET digests_at = NULL");
}

/// What the server made of each register's digests of products, as it
/// answered their reports.
fn digest_verdicts(shop: &mut Shop, registers: &mut [Replica]) -> Vec<String> {
    compare_digests_again(shop);
    registers
        .iter_mut()
        .map(|register| {
            let verdicts = report(&mut shop.pg, register);
            let text = serde_json::to_string(&verdicts).unwrap();
            if text.contains(r#""products":"matches""#) {
                "matches".to_owned()
            } else {
                text
            }
        })
        .collect()
}

fn followers(shop: &mut Shop) -> i64 {
    count(shop, "SELECT count(*) FROM sync.followers")
}

fn recorded_products(shop: &mut Shop) -> i64 {
    count(
        shop,
        "SELECT count(*) FROM sync.held_recorded WHERE table_name = 'products'",
    )
}

fn held_by_each(shop: &mut Shop, register: Uuid) -> i64 {
    shop.pg
        .query_one(
            "SELECT count(*) FROM sync.held WHERE replica = $1 AND table_name = 'products' \
             AND leaving IS NULL",
            &[&register],
        )
        .unwrap()
        .get(0)
}

/// A shop of `products` products and a register for each of `schemas`,
/// each provisioned (so following its stand-in) and holding them.
fn shop_in_sync(products: usize, schemas: &[&str]) -> (Shop, Vec<Replica>) {
    let mut shop = Shop::open();
    add_products(&mut shop.pg, products);
    let mut registers = registers(&mut shop, schemas);
    sync_all(&mut shop, &mut registers);
    (shop, registers)
}

#[test]
fn a_broadcast_table_is_recorded_once_and_every_register_holds_it_and_says_so() {
    let (mut shop, mut registers) = shop_in_sync(20, &[REGISTER_SCHEMA; 3]);
    assert_each_holds_the_servers_products(&mut shop, &registers);
    assert_eq!(followers(&mut shop), 3, "each register provisioned follows");
    assert_eq!(
        recorded_products(&mut shop),
        20,
        "the rows are recorded once, not once per register"
    );
    for register in &registers {
        assert_eq!(held_by_each(&mut shop, register.me()), 20);
    }
    assert_eq!(
        digest_verdicts(&mut shop, &mut registers),
        vec!["matches"; 3]
    );

    // Changes, inserts and deletes travel as the stand-in's messages.
    shop.run(
        "UPDATE shop.products SET price_cents = price_cents + 1, updated_at = now() \
         WHERE name IN ('Product 1', 'Product 2'); \
         DELETE FROM shop.products WHERE name = 'Product 3'",
    );
    add_products(&mut shop.pg, 2);
    sync_all(&mut shop, &mut registers);
    assert_each_holds_the_servers_products(&mut shop, &registers);
    assert_eq!(
        digest_verdicts(&mut shop, &mut registers),
        vec!["matches"; 3]
    );
    shop.relay();
    assert_eq!(
        recorded_products(&mut shop),
        21,
        "a row taken back and applied by every follower is gone"
    );
    assert_eq!(followers(&mut shop), 3);
    assert_eq!(
        count(&mut shop, "SELECT count(*) FROM sync.follower_messages"),
        0,
        "every follower applied what it was sent"
    );
    assert_eq!(
        count(
            &mut shop,
            "SELECT count(*) FROM sync.replicas WHERE provision"
        ),
        0,
        "no digest asked for a provisioning"
    );
}

#[test]
fn a_row_taken_back_stays_in_the_journal_until_every_follower_applied_the_take_back() {
    let (mut shop, mut registers) = shop_in_sync(3, &[REGISTER_SCHEMA; 2]);
    shop.run("DELETE FROM shop.products WHERE name = 'Product 1'");
    shop.relay();
    deliver(&mut shop.pg, &mut registers[0]);
    report(&mut shop.pg, &mut registers[0]);
    shop.relay();
    let leaving = "SELECT count(*) FROM sync.held_recorded WHERE leaving IS NOT NULL";
    assert_eq!(
        count(&mut shop, leaving),
        1,
        "register 2 has not applied it"
    );
    let first = registers[0].me();
    let second = registers[1].me();
    assert_eq!(held_by_each(&mut shop, first), 2, "register 1 let go of it");
    assert_eq!(
        count(
            &mut shop,
            &format!(
                "SELECT count(*) FROM sync.held WHERE replica = '{second}' AND leaving IS NOT NULL"
            )
        ),
        1,
        "register 2 is shown letting go of it"
    );
    deliver(&mut shop.pg, &mut registers[1]);
    report(&mut shop.pg, &mut registers[1]);
    shop.relay();
    assert_eq!(count(&mut shop, leaving), 0);
    assert_each_holds_the_servers_products(&mut shop, &registers);
}

#[test]
fn a_follower_that_refuses_a_row_keeps_what_it_holds_as_its_own_and_is_sent_it_again() {
    let refusing = format!("{REGISTER_SCHEMA}{REFUSING}");
    let (mut shop, mut registers) = shop_in_sync(5, &[REGISTER_SCHEMA, &refusing]);
    let second = registers[1].me();
    let held_before = held_by_each(&mut shop, second);

    shop.run(
        "INSERT INTO shop.products (id, name, price_cents) VALUES (gen_random_uuid(), 'Forbidden', 1)",
    );
    sync_all(&mut shop, &mut registers);
    assert_eq!(followers(&mut shop), 1, "register 2 stopped following");
    assert_eq!(
        count(
            &mut shop,
            &format!(
                "SELECT count(*) FROM sync.held_recorded WHERE replica = '{second}' \
                 AND table_name = 'products' AND refused IS NULL"
            )
        ),
        held_before,
        "what it held is recorded as its own"
    );
    assert_eq!(
        count(
            &mut shop,
            &format!(
                "SELECT count(*) FROM sync.held WHERE replica = '{second}' AND refused IS NOT NULL"
            )
        ),
        1,
        "the row it refused is set aside for it alone"
    );

    // Later changes reach both, the one that parted by rows of its own.
    shop.run(
        "UPDATE shop.products SET price_cents = 99, updated_at = now() WHERE name = 'Product 1'",
    );
    sync_all(&mut shop, &mut registers);
    let without_forbidden: Vec<Product> = shop
        .products()
        .into_iter()
        .filter(|p| p.1 != "Forbidden")
        .collect();
    assert_eq!(held_by(&registers[0]), shop.products());
    assert_eq!(held_by(&registers[1]), without_forbidden);

    // Sent again once the register can take it.
    registers[1]
        .connection()
        .execute_batch("DROP TRIGGER no_forbidden")
        .unwrap();
    shop.run("SELECT sync.retry()");
    sync_all(&mut shop, &mut registers);
    assert_each_holds_the_servers_products(&mut shop, &registers);
    assert_eq!(
        count(
            &mut shop,
            "SELECT count(*) FROM sync.held WHERE refused IS NOT NULL"
        ),
        0
    );
    assert_eq!(
        digest_verdicts(&mut shop, &mut registers),
        vec!["matches"; 2]
    );
}

#[test]
fn a_register_provisioned_again_follows_again_and_one_forgotten_follows_no_more() {
    let (mut shop, mut registers) = shop_in_sync(4, &[REGISTER_SCHEMA; 2]);
    let first = registers[0].me();
    let second = registers[1].me();
    shop.run(&format!("SELECT sync.resync('{first}')"));
    sync_all(&mut shop, &mut registers);
    assert_each_holds_the_servers_products(&mut shop, &registers);
    assert_eq!(followers(&mut shop), 2);
    shop.run(&format!(
        "UPDATE shop.registers SET active = false WHERE id = '{second}'"
    ));
    shop.relay();
    assert_eq!(
        count(
            &mut shop,
            &format!("SELECT count(*) FROM sync.followers WHERE replica = '{second}'")
        ),
        0
    );
    assert_eq!(held_by_each(&mut shop, second), 0, "nothing is held by it");
}

/// A migration that makes another declared table point at the products
/// takes them out of the journal: the registers part, keeping the products
/// as rows of their own (nothing is sent again), and no stand-in, follower
/// or stand-in's row is left behind.
#[test]
fn a_table_no_longer_journaled_leaves_nothing_of_its_journal_behind() {
    let (mut shop, mut registers) = shop_in_sync(6, &[REGISTER_SCHEMA; 2]);
    assert_eq!(followers(&mut shop), 2);

    shop.run(
        "CREATE TABLE shop.receipt_lines (
             id uuid PRIMARY KEY,
             register_id uuid NOT NULL,
             product_id uuid NOT NULL REFERENCES shop.products (id));
         SELECT sync.declare_table('shop.receipt_lines', mirror => 'record',
                                   origin => 'register_id')",
    );
    sync_all(&mut shop, &mut registers);
    assert_each_holds_the_servers_products(&mut shop, &registers);
    assert_eq!(count(&mut shop, "SELECT count(*) FROM sync.stand_ins"), 0);
    assert_eq!(followers(&mut shop), 0);
    assert_eq!(
        count(&mut shop, "SELECT count(*) FROM sync.follower_messages"),
        0
    );
    assert_eq!(
        count(
            &mut shop,
            "SELECT count(*) FROM sync.held_recorded h \
             WHERE NOT EXISTS (SELECT 1 FROM sync.replicas r WHERE r.id = h.replica)"
        ),
        0,
        "no row of a stand-in is left"
    );
    for register in &registers {
        assert_eq!(
            count(
                &mut shop,
                &format!(
                    "SELECT count(*) FROM sync.held_recorded WHERE replica = '{}' \
                     AND table_name = 'products'",
                    register.me()
                )
            ),
            6,
            "each register's products are recorded as its own"
        );
    }

    // Changes still reach them, now planned for each register.
    shop.run(
        "UPDATE shop.products SET price_cents = 7, updated_at = now() WHERE name = 'Product 1'",
    );
    sync_all(&mut shop, &mut registers);
    assert_each_holds_the_servers_products(&mut shop, &registers);
    assert_eq!(
        digest_verdicts(&mut shop, &mut registers),
        vec!["matches"; 2]
    );
}

/// Two companies' registers provisioned in one pass: each is sent its own
/// company's rows (they were one cohort once, and the second company's
/// register was sent the first's).
#[test]
fn registers_of_two_partitions_provisioned_in_one_pass_each_hold_their_own_rows() {
    let cluster = magic_sync_tests::Cluster::start();
    let mut pg = cluster.database_with_extension("shop");
    pg.batch_execute(
        "CREATE SCHEMA shop;
         CREATE TABLE shop.registers (id uuid PRIMARY KEY, company text NOT NULL);
         CREATE TABLE shop.products (id uuid PRIMARY KEY, company text NOT NULL,
             name text NOT NULL, price_cents bigint NOT NULL,
             updated_at timestamptz NOT NULL DEFAULT now());
         SELECT sync.declare_replicas('shop.registers', partitioned_by => 'company');
         SELECT sync.declare_table('shop.products', sync => 'broadcast');
         INSERT INTO shop.products (id, company, name, price_cents)
         SELECT gen_random_uuid(), c, c || ' ' || i, i
         FROM unnest(ARRAY['acme', 'globex']) AS c, generate_series(1, 3) AS i;",
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let schema = "CREATE TABLE IF NOT EXISTS products (id BLOB PRIMARY KEY NOT NULL, \
                  company TEXT NOT NULL, name TEXT NOT NULL, price_cents INTEGER NOT NULL, \
                  updated_at TEXT NOT NULL);";
    let mut companies = Vec::new();
    for company in ["acme", "globex"] {
        let id = Uuid::new_v4();
        pg.execute(
            "INSERT INTO shop.registers VALUES ($1, $2)",
            &[&id, &company],
        )
        .unwrap();
        let file = dir.path().join(format!("{id}.db"));
        let register = open_replica(&file, schema, tables(), id, Settings::default());
        companies.push((company, register));
    }
    pg.query_one("CALL sync.relay()", &[]).unwrap();
    for (company, register) in companies.iter_mut() {
        deliver(&mut pg, register);
        let names: Vec<String> = register
            .connection()
            .prepare("SELECT company FROM products ORDER BY name")
            .unwrap()
            .query_map([], |row| row.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(names, vec![company.to_string(); 3], "{company}'s register");
    }
}

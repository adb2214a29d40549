//! What is tried again, and when: a row a register refused, on the retry
//! timer and when a relay starts, until a fix lets it in; a row set aside
//! on the quarantine's timer; and every register provisioned again when the
//! declarations change, with an alarm, letting go of what it held of a
//! table no longer declared.

mod common;

use std::thread::sleep;
use std::time::Duration;

use common::*;
use magic_sync_replica::{Received, Replica};

/// The register's products refuse a product named 'Forbidden', until the
/// trigger that refuses it is dropped (the fix a deploy brings).
const REFUSING: &str = "
    CREATE TRIGGER IF NOT EXISTS no_forbidden BEFORE INSERT ON products
    WHEN NEW.name = 'Forbidden' BEGIN SELECT RAISE(ABORT, 'forbidden here'); END;
";

fn refused_on_server(shop: &mut Shop) -> i64 {
    shop.pg
        .query_one(
            "SELECT count(*) FROM sync.held WHERE refused IS NOT NULL",
            &[],
        )
        .unwrap()
        .get(0)
}

/// One pass, and the register takes what waits and says what it applied.
fn relay_and_deliver(shop: &mut Shop, register: &mut Replica) -> serde_json::Value {
    let summary = shop.relay();
    deliver(&mut shop.pg, register);
    report(&mut shop.pg, register);
    summary
}

fn holds_forbidden(register: &Replica) -> bool {
    held_by(register).iter().any(|p| p.1 == "Forbidden")
}

#[test]
fn a_row_a_register_refused_goes_again_on_the_timer_and_when_a_relay_starts_and_is_taken_after_a_fix(
) {
    let mut shop = Shop::open();
    shop.run("ALTER DATABASE shop SET magic_sync.retry_every = 1");
    shop.reconnect();
    let id = shop.add_register("Register 1");
    let schema = format!("{REGISTER_SCHEMA}{REFUSING}");
    let mut register = open_replica(&shop.file_of(id), &schema, tables(), id, Default::default());
    relay_and_deliver(&mut shop, &mut register);
    shop.run(
        "INSERT INTO shop.products (id, name, price_cents) VALUES (gen_random_uuid(), 'Forbidden', 1)",
    );
    relay_and_deliver(&mut shop, &mut register);
    assert_eq!(refused_on_server(&mut shop), 1, "the refusal is recorded");

    // The retry timer (a second here) sends it again: refused again.
    sleep(Duration::from_millis(1100));
    let summary = relay_and_deliver(&mut shop, &mut register);
    assert_eq!(summary["messages"], 1, "sent again: {summary}");
    assert!(!holds_forbidden(&register));
    assert_eq!(refused_on_server(&mut shop), 1);

    // Not due yet: nothing goes.
    shop.run("ALTER DATABASE shop SET magic_sync.retry_every = 3600");
    shop.reconnect();
    sleep(Duration::from_millis(1100));
    let summary = relay_and_deliver(&mut shop, &mut register);
    assert_eq!(
        summary["messages"], 1,
        "once more as the timer was due: {summary}"
    );
    let summary = relay_and_deliver(&mut shop, &mut register);
    assert_eq!(
        summary["messages"], 0,
        "then not before its hour: {summary}"
    );

    // A deploy fixes the register; a relay that starts (sync.retry) sends
    // the row again at once, and the refusal is taken.
    register
        .connection()
        .execute_batch("DROP TRIGGER no_forbidden")
        .unwrap();
    shop.run("SELECT sync.retry()");
    let summary = relay_and_deliver(&mut shop, &mut register);
    assert_eq!(summary["messages"], 1, "{summary}");
    assert!(holds_forbidden(&register));
    assert_eq!(refused_on_server(&mut shop), 0, "the refusal is taken");
    assert_each_holds_the_servers_products(&mut shop, std::slice::from_ref(&register));
}

#[test]
fn a_row_set_aside_is_tried_again_on_the_quarantines_timer() {
    let mut shop = Shop::open();
    shop.run(
        "ALTER DATABASE shop SET magic_sync.message_bytes = 4096; \
         ALTER DATABASE shop SET magic_sync.retry_every = 3",
    );
    shop.reconnect();
    let id = shop.add_register("Register 1");
    let mut register = open_register(&shop.file_of(id), id);
    relay_and_deliver(&mut shop, &mut register);
    shop.pg
        .execute(
            "INSERT INTO shop.products (id, name, price_cents) VALUES (gen_random_uuid(), $1, 1)",
            &[&"x".repeat(6000)],
        )
        .unwrap();
    let summary = relay_and_deliver(&mut shop, &mut register);
    assert_eq!(summary["set_aside"], 1, "{summary}");

    // The limit is raised (the transport took larger messages): the row,
    // unchanged, goes once its retry is due.
    shop.run("ALTER DATABASE shop SET magic_sync.message_bytes = 65536");
    shop.reconnect();
    let summary = relay_and_deliver(&mut shop, &mut register);
    assert_eq!(summary["set_aside"], 1, "not due yet: {summary}");
    sleep(Duration::from_millis(3100));
    let summary = relay_and_deliver(&mut shop, &mut register);
    assert_eq!(summary["set_aside"], 0, "{summary}");
    assert_each_holds_the_servers_products(&mut shop, std::slice::from_ref(&register));
}

#[test]
fn a_table_no_longer_declared_is_let_go_of_by_every_register_with_an_alarm_and_nothing_else_is_sent(
) {
    let mut shop = Shop::open();
    shop.run(
        "CREATE TABLE shop.shelves (id uuid PRIMARY KEY, label text NOT NULL); \
         SELECT sync.declare_table('shop.shelves', sync => 'broadcast'); \
         INSERT INTO shop.shelves VALUES (gen_random_uuid(), 'Top'); \
         INSERT INTO shop.products (id, name, price_cents) VALUES (gen_random_uuid(), 'Tea', 250)",
    );
    let schema = format!(
        "{REGISTER_SCHEMA} CREATE TABLE shelves (id BLOB PRIMARY KEY NOT NULL, label TEXT NOT NULL);"
    );
    let both = || {
        magic_sync_replica::Tables::new(vec![
            magic_sync_replica::Table::catalog("products"),
            magic_sync_replica::Table::catalog("shelves"),
        ])
    };
    let mut registers: Vec<Replica> = (1..=2)
        .map(|i| {
            let id = shop.add_register(&format!("Register {i}"));
            open_replica(&shop.file_of(id), &schema, both(), id, Default::default())
        })
        .collect();
    sync_all(&mut shop, &mut registers);
    let held_shelves = "SELECT count(*) FROM sync.held WHERE table_name = 'shelves'";
    let count = |shop: &mut Shop, sql: &str| -> i64 { shop.pg.query_one(sql, &[]).unwrap().get(0) };
    assert_eq!(count(&mut shop, held_shelves), 2);

    shop.run("SELECT sync.undeclare_table('shop.shelves')");
    let summary = shop.relay();
    assert_eq!(summary["redeclared"], true, "{summary}");
    assert_eq!(summary["provisioned"], 0, "{summary}");
    let alarm: String = shop
        .pg
        .query_one("SELECT what FROM sync.alarms", &[])
        .unwrap()
        .get(0);
    assert!(
        alarm.contains("shelves (no longer mirrored): 2 rows let go of by 2 replicas"),
        "{alarm}"
    );
    for register in registers.iter_mut() {
        let received = deliver(&mut shop.pg, register);
        assert!(
            received.iter().all(|r| match r {
                Received::Applied { tables, .. } => tables.iter().all(|t| t.table == "shelves"),
                _ => true,
            }),
            "only the shelves' deletes: {received:?}"
        );
        report(&mut shop.pg, register);
        let shelves: i64 = register
            .connection()
            .query_row("SELECT count(*) FROM shelves", [], |r| r.get(0))
            .unwrap();
        assert_eq!(shelves, 0, "the register let go of the shelves");
    }
    assert_eq!(
        count(&mut shop, held_shelves),
        0,
        "what was held of shelves is let go"
    );
    assert_each_holds_the_servers_products(&mut shop, &registers);
    let summary = shop.relay();
    assert_eq!(summary["provisioned"], 0, "once: {summary}");
}

fn quarantined(shop: &mut Shop) -> Vec<(String, String)> {
    shop.pg
        .query("SELECT key, reason FROM sync.quarantine ORDER BY key", &[])
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect()
}

#[test]
fn a_note_the_planner_cannot_read_is_set_aside_and_the_rest_of_the_pass_goes() {
    let mut shop = Shop::open();
    let id = shop.add_register("Register 1");
    let mut register = open_register(&shop.file_of(id), id);
    relay_and_deliver(&mut shop, &mut register);
    shop.run(
        "BEGIN; \
         INSERT INTO sync.notes (table_name, key) VALUES ('products', 'not-a-uuid'); \
         INSERT INTO shop.products (id, name, price_cents) VALUES (gen_random_uuid(), 'Tea', 250); \
         COMMIT",
    );
    let summary = relay_and_deliver(&mut shop, &mut register);
    assert_eq!(summary["set_aside"], 1, "{summary}");
    let aside = quarantined(&mut shop);
    assert_eq!(aside[0].0, "not-a-uuid");
    assert!(
        aside[0].1.starts_with("a pass failed on it: "),
        "{}",
        aside[0].1
    );
    assert_each_holds_the_servers_products(&mut shop, std::slice::from_ref(&register));
    assert_eq!(held_by(&register).len(), 1, "Tea went");
}

#[test]
fn a_row_a_users_function_fails_on_is_set_aside_until_a_deploy_fixes_it_and_then_reaches_every_register(
) {
    let mut shop = Shop::open();
    // Whether a product sells, asked of a function that fails on 'Boom'
    // (costly, so the planner asks it only of the rows a pass is about).
    shop.run(
        "CREATE FUNCTION shop.sellable(p shop.products) RETURNS boolean LANGUAGE plpgsql COST 100000 AS $$ \
         BEGIN IF p.name = 'Boom' THEN RAISE EXCEPTION 'cannot tell whether Boom sells'; END IF; \
         RETURN true; END $$; \
         CREATE VIEW shop.sellable_products AS SELECT * FROM shop.products p WHERE shop.sellable(p); \
         SELECT sync.declare_table('shop.products', sync => 'broadcast', active => 'shop.sellable_products'); \
         INSERT INTO shop.products (id, name, price_cents) \
         SELECT gen_random_uuid(), 'Item ' || i, i FROM generate_series(1, 200) AS i; \
         ANALYZE shop.products",
    );
    let mut registers: Vec<Replica> = (1..=2)
        .map(|i| {
            let id = shop.add_register(&format!("Register {i}"));
            open_register(&shop.file_of(id), id)
        })
        .collect();
    sync_all(&mut shop, &mut registers);
    shop.run(
        "BEGIN; \
         INSERT INTO shop.products (id, name, price_cents) VALUES (gen_random_uuid(), 'Boom', 1); \
         INSERT INTO shop.products (id, name, price_cents) VALUES (gen_random_uuid(), 'Cake', 400); \
         COMMIT",
    );
    let summary = shop.relay();
    assert_eq!(summary["set_aside"], 1, "{summary}");
    let aside = quarantined(&mut shop);
    assert!(
        aside[0].1.contains("cannot tell whether Boom sells"),
        "{}",
        aside[0].1
    );
    for register in registers.iter_mut() {
        deliver(&mut shop.pg, register);
        report(&mut shop.pg, register);
        let names: Vec<String> = held_by(register).into_iter().map(|p| p.1).collect();
        assert!(
            names.contains(&"Cake".to_owned()),
            "the rest of the pass went"
        );
        assert!(!names.contains(&"Boom".to_owned()));
    }

    // The deploy: the function answers for every row. A relay that starts
    // tries what was set aside again.
    shop.run(
        "CREATE OR REPLACE FUNCTION shop.sellable(p shop.products) RETURNS boolean \
         LANGUAGE sql COST 100000 AS $$ SELECT true $$; \
         SELECT sync.retry()",
    );
    let summary = shop.relay();
    assert_eq!(summary["set_aside"], 0, "{summary}");
    for register in registers.iter_mut() {
        deliver(&mut shop.pg, register);
        report(&mut shop.pg, register);
    }
    assert_each_holds_the_servers_products(&mut shop, &registers);
}

#[test]
fn a_relay_starting_with_a_row_still_too_large_sets_it_aside_again_and_relays_the_rest() {
    let mut shop = Shop::open();
    shop.run("ALTER DATABASE shop SET magic_sync.message_bytes = 4096");
    shop.reconnect();
    let id = shop.add_register("Register 1");
    let mut register = open_register(&shop.file_of(id), id);
    relay_and_deliver(&mut shop, &mut register);
    shop.pg
        .execute(
            "INSERT INTO shop.products (id, name, price_cents) VALUES (gen_random_uuid(), $1, 1)",
            &[&"x".repeat(6000)],
        )
        .unwrap();
    let summary = relay_and_deliver(&mut shop, &mut register);
    assert_eq!(summary["set_aside"], 1, "{summary}");
    shop.run(
        "INSERT INTO shop.products (id, name, price_cents) VALUES (gen_random_uuid(), 'Tea', 250)",
    );

    // The pass a relay runs when it starts (the worker's first): it tries
    // what was set aside at once, sets the row, still too large, aside
    // again, and relays the rest.
    let mut pass = shop
        .pg
        .build_transaction()
        .isolation_level(postgres::IsolationLevel::RepeatableRead)
        .start()
        .unwrap();
    let summary: serde_json::Value = pass
        .query_one("SELECT sync_internal.pass(true)", &[])
        .expect("a starting relay's pass goes through")
        .get(0);
    pass.commit().unwrap();
    assert_eq!(summary["set_aside"], 1, "{summary}");
    deliver(&mut shop.pg, &mut register);
    assert!(
        held_by(&register).iter().any(|p| p.1 == "Tea"),
        "the rest relayed"
    );
    assert_eq!(
        shop.pg
            .query_one("SELECT count(*) FROM sync.quarantine", &[])
            .unwrap()
            .get::<_, i64>(0),
        1,
        "the row still set aside"
    );
}

#[test]
fn a_row_a_register_refuses_in_its_first_provisioning_is_recorded_refused_and_goes_again_after_a_fix(
) {
    let mut shop = Shop::open();
    shop.run("ALTER DATABASE shop SET magic_sync.retry_every = 1");
    shop.reconnect();
    shop.run(
        "INSERT INTO shop.products (id, name, price_cents) VALUES (gen_random_uuid(), 'Forbidden', 1), \
         (gen_random_uuid(), 'Tea', 250)",
    );
    let id = shop.add_register("Register 1");
    let schema = format!("{REGISTER_SCHEMA}{REFUSING}");
    let mut register = open_replica(&shop.file_of(id), &schema, tables(), id, Default::default());
    relay_and_deliver(&mut shop, &mut register);
    assert!(!holds_forbidden(&register));
    assert!(held_by(&register).iter().any(|p| p.1 == "Tea"));
    assert_eq!(refused_on_server(&mut shop), 1, "the refusal is recorded");

    // The fix: the product goes again and is taken.
    register
        .connection()
        .execute_batch("DROP TRIGGER no_forbidden")
        .unwrap();
    sleep(Duration::from_millis(1100));
    relay_and_deliver(&mut shop, &mut register);
    assert!(holds_forbidden(&register));
    assert_each_holds_the_servers_products(&mut shop, std::slice::from_ref(&register));
}

/// A register that refuses 'Forbidden' is provisioned again, by
/// `provision`, once the product is added: the refusal in that snapshot is
/// recorded, the register is not provisioned again for it, and the product
/// goes again and is taken after the fix.
fn refused_when_provisioned_again(
    setup: &str,
    register_schema: &str,
    tables: magic_sync_replica::Tables,
    provision: &str,
) {
    let mut shop = Shop::open();
    shop.run("ALTER DATABASE shop SET magic_sync.retry_every = 1");
    shop.reconnect();
    shop.run(setup);
    shop.run(
        "INSERT INTO shop.products (id, name, price_cents) VALUES (gen_random_uuid(), 'Tea', 250)",
    );
    let id = shop.add_register("Register 1");
    let schema = format!("{register_schema}{REFUSING}");
    let mut register = open_replica(&shop.file_of(id), &schema, tables, id, Default::default());
    relay_and_deliver(&mut shop, &mut register);
    assert!(held_by(&register).iter().any(|p| p.1 == "Tea"));

    // Provisioned again, with a product it refuses in that snapshot.
    shop.run(
        "INSERT INTO shop.products (id, name, price_cents) VALUES (gen_random_uuid(), 'Forbidden', 1)",
    );
    shop.run(&provision.replace("{id}", &id.to_string()));
    let summary = relay_and_deliver(&mut shop, &mut register);
    assert_eq!(summary["provisioned"], 1, "{summary}");
    assert!(!holds_forbidden(&register));
    assert!(held_by(&register).iter().any(|p| p.1 == "Tea"));
    assert_eq!(refused_on_server(&mut shop), 1, "the refusal is recorded");
    let summary = relay_and_deliver(&mut shop, &mut register);
    assert_eq!(
        summary["provisioned"], 0,
        "not provisioned again: {summary}"
    );

    // The fix: the product goes again and is taken.
    register
        .connection()
        .execute_batch("DROP TRIGGER no_forbidden")
        .unwrap();
    sleep(Duration::from_millis(1100));
    relay_and_deliver(&mut shop, &mut register);
    assert!(holds_forbidden(&register));
    assert_eq!(refused_on_server(&mut shop), 0, "the refusal is taken");
    assert_each_holds_the_servers_products(&mut shop, std::slice::from_ref(&register));
}

#[test]
fn a_row_a_register_refuses_when_provisioned_again_is_recorded_refused_and_goes_again_after_a_fix()
{
    refused_when_provisioned_again(
        "SELECT 1",
        REGISTER_SCHEMA,
        tables(),
        "SELECT sync.resync('{id}')",
    );
}

#[test]
fn a_row_a_register_refuses_when_a_declaration_change_provisions_it_again_is_recorded_refused() {
    refused_when_provisioned_again(
        "CREATE TABLE shop.shelves (id uuid PRIMARY KEY, label text NOT NULL); \
         SELECT sync.declare_table('shop.shelves', sync => 'broadcast'); \
         INSERT INTO shop.shelves VALUES (gen_random_uuid(), 'Top')",
        &format!(
            "{REGISTER_SCHEMA} CREATE TABLE shelves (id BLOB PRIMARY KEY NOT NULL, label TEXT NOT NULL);"
        ),
        magic_sync_replica::Tables::new(vec![
            magic_sync_replica::Table::catalog("products"),
            magic_sync_replica::Table::catalog("shelves"),
        ]),
        // The shelves moved to another table under the same name: a change
        // no difference can say, which provisions again the registers
        // holding them.
        "CREATE TABLE shop.shelves_v2 (LIKE shop.shelves INCLUDING ALL); \
         INSERT INTO shop.shelves_v2 SELECT * FROM shop.shelves; \
         SELECT sync.undeclare_table('shop.shelves'); \
         SELECT sync.declare_table('shop.shelves_v2', name => 'shelves', sync => 'broadcast')",
    );
}

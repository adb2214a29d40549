//! The walking skeleton end to end: a PostgreSQL cluster with the extension,
//! a products table sent to every live register, and registers on SQLite
//! files that take what the server sends through the default transport.

mod common;

use common::*;
use magic_sync_replica::{Received, Replica, Settings, Table, Tables};
use postgres::Client;
use uuid::Uuid;

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

#[test]
fn a_register_asked_for_is_provisioned_again_from_scratch() {
    let mut shop = Shop::open();
    shop.run(
        "INSERT INTO shop.products (id, name, price_cents) VALUES (gen_random_uuid(), 'Tea', 250)",
    );
    let a = shop.add_register("Register 1");
    let mut register = open_register(&shop.file_of(a), a);
    sync_all(&mut shop, std::slice::from_mut(&mut register));
    let asked: bool = shop
        .pg
        .query_one("SELECT sync.resync($1)", &[&a])
        .unwrap()
        .get(0);
    assert!(asked);
    let summary = shop.relay();
    assert_eq!(summary["provisioned"], 1, "{summary}");
    deliver(&mut shop.pg, &mut register);
    assert_each_holds_the_servers_products(&mut shop, std::slice::from_ref(&register));
    let unknown: bool = shop
        .pg
        .query_one("SELECT sync.resync(gen_random_uuid())", &[])
        .unwrap()
        .get(0);
    assert!(!unknown);
}

/// Protocol 4.1: a table's deletes go in the message of its upserts when
/// they fit one, so a unique value one row lets go of is there for another
/// row to take. Two rows a message: the product goes alone, the till's
/// upsert and delete together (tables go in the order of their names
/// when none points at another, so nothing of products comes between).
#[test]
fn a_unique_value_handed_from_one_row_to_another_in_one_change_is_taken_at_once() {
    let mut shop = Shop::open();
    shop.run(
        "CREATE TABLE shop.tills (id uuid PRIMARY KEY, code text NOT NULL UNIQUE); \
         SELECT sync.declare_table('shop.tills', sync => 'broadcast'); \
         INSERT INTO shop.tills VALUES ('00000000-0000-0000-0000-00000000000a', 'X')",
    );
    let id = shop.add_register("Register 1");
    let schema = format!(
        "{REGISTER_SCHEMA} CREATE TABLE tills (id BLOB PRIMARY KEY NOT NULL, code TEXT NOT NULL UNIQUE);"
    );
    let tables = Tables::new(vec![Table::catalog("products"), Table::catalog("tills")]);
    let mut register = open_replica(&shop.file_of(id), &schema, tables, id, Settings::default());
    sync_all(&mut shop, std::slice::from_mut(&mut register));

    shop.run("SET magic_sync.message_rows = 2");
    shop.run(
        "BEGIN; \
         INSERT INTO shop.products (id, name, price_cents) VALUES (gen_random_uuid(), 'Tea', 250); \
         DELETE FROM shop.tills WHERE code = 'X'; \
         INSERT INTO shop.tills VALUES ('00000000-0000-0000-0000-00000000000b', 'X'); \
         COMMIT",
    );
    let summary = shop.relay();
    assert_eq!(summary["messages"], 2, "{summary}");
    deliver(&mut shop.pg, &mut register);
    report(&mut shop.pg, &mut register);

    let tills: Vec<(Vec<u8>, String)> = register
        .connection()
        .prepare("SELECT id, code FROM tills")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let b = Uuid::parse_str("00000000-0000-0000-0000-00000000000b").unwrap();
    assert_eq!(tills, vec![(b.as_bytes().to_vec(), "X".to_owned())]);
    let refused: i64 = shop
        .pg
        .query_one(
            "SELECT count(*) FROM sync.held WHERE refused IS NOT NULL",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(refused, 0, "nothing waits for a retry");
    assert_each_holds_the_servers_products(&mut shop, std::slice::from_ref(&register));
}

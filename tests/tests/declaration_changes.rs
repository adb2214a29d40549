//! A declaration change sends each register only the difference (issue
//! 36), end to end: registers on SQLite files hold the shop's rows, a
//! migration changes a declaration, and one relay pass plans it. For each
//! kind of change: what each register holds afterwards is what its rules
//! give it, column for column with the server; what it applied is only the
//! rows that moved (counted from the messages it applied); and
//! `sync.what_if`, asked beforehand, said so.

mod common;
#[path = "common/filing_shop.rs"]
mod shop;

use std::collections::BTreeMap;

use magic_sync_replica::{Received, Replica, Settings, Table};
use serde_json::Value;
use shop::*;
use uuid::Uuid;

/// Per table, the rows applied: written or let go of.
type Moved = BTreeMap<String, i64>;

/// The register's build: the shop's tables, a column the server does not
/// send yet (`products.sku`: a register updated before the server) and the
/// head office's notices.
fn open(shop: &Shop, me: Uuid) -> Replica {
    let tables = tables_and(vec![Table::catalog("notices")]);
    let schema = format!(
        "CREATE TABLE IF NOT EXISTS products (
            id          BLOB PRIMARY KEY NOT NULL,
            name        TEXT NOT NULL,
            price_cents INTEGER NOT NULL,
            updated_at  TEXT NOT NULL,
            retired_at  TEXT,
            sku         TEXT);
         CREATE TABLE IF NOT EXISTS notices (
            id          BLOB PRIMARY KEY NOT NULL,
            register_id BLOB NOT NULL,
            text        TEXT NOT NULL);
         {REGISTER_SCHEMA}"
    );
    crate::common::open_replica(&shop.file_of(me), &schema, tables, me, Settings::default())
}

/// The shop with three products, the cheap ones active (under 350), two
/// registers each with a notice of its own, every register up to date.
fn shop_with_registers() -> (Shop, Vec<Uuid>, Vec<Replica>) {
    let mut shop = Shop::open();
    shop.run(
        "CREATE VIEW shop.cheap AS SELECT * FROM shop.products WHERE price_cents < 350;
         SELECT sync.declare_table('shop.products', sync => 'broadcast', active => 'shop.cheap');
         CREATE TABLE shop.notices (id uuid PRIMARY KEY, register_id uuid NOT NULL, text text NOT NULL);
         CREATE INDEX ON shop.notices (register_id);
         SELECT sync.declare_table('shop.notices', sync => 'assigned(register_id)');",
    );
    shop.add_product("Tea", 250);
    shop.add_product("Coffee", 300);
    shop.add_product("Cake", 400);
    let ids = vec![shop.add_register("R0"), shop.add_register("R1")];
    shop.run(
        "INSERT INTO shop.notices SELECT gen_random_uuid(), id, 'Inventory for ' || name FROM shop.registers",
    );
    let mut registers: Vec<Replica> = ids.iter().map(|id| open(&shop, *id)).collect();
    sync_all(&mut shop, &mut registers);
    sync_all(&mut shop, &mut registers);
    (shop, ids, registers)
}

/// What a register applied, per table: rows written or let go of by the
/// messages it applied, and those a snapshot's end let go of.
fn applied(received: &[Received]) -> Moved {
    let mut moved = Moved::new();
    for r in received {
        let tables = match r {
            Received::Applied { tables, .. } => tables,
            Received::Ended { swept, .. } => swept,
            _ => continue,
        };
        for t in tables {
            *moved.entry(t.table.clone()).or_default() += t.keys.len() as i64;
        }
    }
    moved.retain(|_, n| *n != 0);
    moved
}

/// What `sync.what_if` said of one register, per table: rows sent and let
/// go of.
fn answered(answer: &Value, register: Uuid) -> Moved {
    answer["replicas"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["replica"] == register.to_string())
        .flat_map(|r| r["tables"].as_array().unwrap().clone())
        .map(|t| {
            (
                t["table"].as_str().unwrap().to_owned(),
                t["sent"].as_i64().unwrap() + t["let_go"].as_i64().unwrap(),
            )
        })
        .filter(|(_, n)| *n != 0)
        .collect()
}

fn what_if(shop: &mut Shop, migration: &str) -> Value {
    shop.pg
        .query_one("CALL sync.what_if($1)", &[&migration])
        .unwrap()
        .get(0)
}

/// Deploys the migration, plans it, and has every register take what it
/// was sent: answers the pass's summary and what each applied.
fn deploy(shop: &mut Shop, registers: &mut [Replica], migration: &str) -> (Value, Vec<Moved>) {
    shop.run(migration);
    let summary = shop.relay();
    let moved = take_each(shop, registers)
        .iter()
        .map(|received| applied(received))
        .collect();
    (summary, moved)
}

/// Every register takes what waits for it and says what it applied:
/// answers what each received.
fn take_each(shop: &mut Shop, registers: &mut [Replica]) -> Vec<Vec<Received>> {
    registers
        .iter_mut()
        .map(|register| {
            let received = deliver(&mut shop.pg, register);
            report(&mut shop.pg, register);
            received
        })
        .collect()
}

fn moved(pairs: &[(&str, i64)]) -> Moved {
    pairs.iter().map(|(t, n)| (t.to_string(), *n)).collect()
}

/// The products a register holds and has not retired, with their sku:
/// (id, name, price, sku), sorted.
fn products_with_sku(register: &Replica) -> Vec<(Uuid, String, i64, Option<String>)> {
    let mut rows: Vec<_> = register
        .connection()
        .prepare("SELECT id, name, price_cents, sku FROM products WHERE retired_at IS NULL")
        .unwrap()
        .query_map([], |r| {
            let id: Vec<u8> = r.get(0)?;
            Ok((
                Uuid::from_slice(&id).unwrap(),
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

/// The products the server's rules give every register, with their sku
/// (NULL where the server has no such column).
fn server_products(
    shop: &mut Shop,
    view: &str,
    sku: bool,
) -> Vec<(Uuid, String, i64, Option<String>)> {
    let sku = if sku { "sku" } else { "NULL::text" };
    let mut rows: Vec<_> = shop
        .pg
        .query(
            &format!(
                "SELECT id, name, price_cents, {sku} FROM shop.products \
                 WHERE id IN (SELECT id FROM {view})"
            ),
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
        .collect();
    rows.sort();
    rows
}

/// The notices a register holds: (id, register, text), sorted.
fn notices_of(register: &Replica) -> Vec<(Uuid, Uuid, String)> {
    rows_by_register(
        register.connection(),
        "SELECT id, register_id, text FROM notices",
    )
}

fn server_notices(shop: &mut Shop, condition: &str) -> Vec<(Uuid, Uuid, String)> {
    let mut rows: Vec<_> = shop
        .pg
        .query(
            &format!("SELECT id, register_id, text FROM shop.notices WHERE {condition}"),
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    rows.sort();
    rows
}

fn last_alarm(shop: &mut Shop) -> String {
    shop.pg
        .query_one("SELECT what FROM sync.alarms ORDER BY id DESC LIMIT 1", &[])
        .unwrap()
        .get(0)
}

const CHEAPER: &str = "
    CREATE VIEW shop.cheaper AS SELECT * FROM shop.products WHERE price_cents < 280;
    SELECT sync.declare_table('shop.products', sync => 'broadcast', active => 'shop.cheaper');
";

#[test]
fn an_active_view_changed_lets_go_of_the_rows_no_longer_in_it_and_sends_nothing_else() {
    let (mut shop, ids, mut registers) = shop_with_registers();
    let answer = what_if(&mut shop, CHEAPER);
    let (summary, moved_on) = deploy(&mut shop, &mut registers, CHEAPER);
    assert_eq!(summary["provisioned"], 0, "nothing provisioned: {summary}");
    assert_eq!(summary["redeclared"], true, "{summary}");
    for (id, moved_here) in ids.iter().zip(&moved_on) {
        // Coffee leaves; Tea, held and kept, is not sent again.
        assert_eq!(moved_here, &moved(&[("products", 1)]), "register {id}");
        assert_eq!(
            &answered(&answer, *id),
            moved_here,
            "what_if said so: {answer:#}"
        );
    }
    let alarm = last_alarm(&mut shop);
    assert!(
        alarm.contains("products (its rule changed): 2 rows let go of by 2 replicas"),
        "{alarm}"
    );
    let expected = server_products(&mut shop, "shop.cheaper", false);
    for register in &registers {
        assert_eq!(products_with_sku(register), expected);
    }
}

#[test]
fn two_changes_in_a_row_before_a_pass_send_only_their_sum() {
    let (mut shop, ids, mut registers) = shop_with_registers();
    // Cheaper first (Coffee would leave), then everything under 450 (Cake
    // comes, Coffee stays): planned together, only Cake moves.
    shop.run(CHEAPER);
    let both = "
        CREATE VIEW shop.most AS SELECT * FROM shop.products WHERE price_cents < 450;
        SELECT sync.declare_table('shop.products', sync => 'broadcast', active => 'shop.most');
    ";
    let answer = what_if(&mut shop, both);
    let (summary, moved_on) = deploy(&mut shop, &mut registers, both);
    assert_eq!(summary["provisioned"], 0, "{summary}");
    for (id, moved_here) in ids.iter().zip(&moved_on) {
        assert_eq!(moved_here, &moved(&[("products", 1)]), "register {id}");
        assert_eq!(&answered(&answer, *id), moved_here, "{answer:#}");
    }
    let expected = server_products(&mut shop, "shop.most", false);
    for register in &registers {
        assert_eq!(products_with_sku(register), expected);
    }
}

#[test]
fn an_assigned_table_made_broadcast_sends_each_register_the_rows_it_lacked_and_nothing_else() {
    let (mut shop, ids, mut registers) = shop_with_registers();
    // The notices become journaled (broadcast, pointing at nothing): the
    // journal is made again, and the products, held by every register
    // through it, are not sent again.
    let migration = "SELECT sync.declare_table('shop.notices', sync => 'broadcast');";
    let answer = what_if(&mut shop, migration);
    let (summary, moved_on) = deploy(&mut shop, &mut registers, migration);
    assert_eq!(summary["provisioned"], 0, "{summary}");
    for (id, moved_here) in ids.iter().zip(&moved_on) {
        assert_eq!(moved_here, &moved(&[("notices", 1)]), "register {id}");
        assert_eq!(&answered(&answer, *id), moved_here, "{answer:#}");
    }
    let all = server_notices(&mut shop, "true");
    for register in &registers {
        assert_eq!(notices_of(register), all);
    }
    // And back: each lets go of the other's notice, and later changes flow.
    let back = "SELECT sync.declare_table('shop.notices', sync => 'assigned(register_id)');";
    let (summary, moved_on) = deploy(&mut shop, &mut registers, back);
    assert_eq!(summary["provisioned"], 0, "{summary}");
    for moved_here in &moved_on {
        assert_eq!(moved_here, &moved(&[("notices", 1)]));
    }
    shop.run("UPDATE shop.products SET price_cents = 260 WHERE name = 'Tea'");
    sync_all(&mut shop, &mut registers);
    let expected = server_products(&mut shop, "shop.cheap", false);
    for (id, register) in ids.iter().zip(&registers) {
        assert_eq!(
            notices_of(register),
            server_notices(&mut shop, &format!("register_id = '{id}'"))
        );
        assert_eq!(products_with_sku(register), expected);
    }
}

#[test]
fn a_column_added_sends_again_the_rows_each_register_holds_of_that_table_only() {
    let (mut shop, ids, mut registers) = shop_with_registers();
    let migration = "
        ALTER TABLE shop.products ADD COLUMN sku text;
        UPDATE shop.products SET sku = 'S-' || name;
        SELECT sync.declare_table('shop.products', sync => 'broadcast', active => 'shop.cheap');
    ";
    let answer = what_if(&mut shop, migration);
    let (summary, moved_on) = deploy(&mut shop, &mut registers, migration);
    assert_eq!(summary["provisioned"], 0, "{summary}");
    for (id, moved_here) in ids.iter().zip(&moved_on) {
        // Tea and Coffee, held, with their sku; not Cake, nor any notice.
        assert_eq!(moved_here, &moved(&[("products", 2)]), "register {id}");
        assert_eq!(&answered(&answer, *id), moved_here, "{answer:#}");
    }
    let alarm = last_alarm(&mut shop);
    assert!(
        alarm.contains("products (its columns changed): 4 rows sent to 2 replicas"),
        "{alarm}"
    );
    let expected = server_products(&mut shop, "shop.cheap", true);
    assert!(expected.iter().all(|p| p.3.is_some()));
    for register in &registers {
        assert_eq!(products_with_sku(register), expected);
    }
}

#[test]
fn a_table_no_longer_mirrored_is_let_go_of_by_each_register_and_by_the_engine() {
    let (mut shop, ids, mut registers) = shop_with_registers();
    let migration = "SELECT sync.undeclare_table('shop.notices');";
    let answer = what_if(&mut shop, migration);
    let (summary, moved_on) = deploy(&mut shop, &mut registers, migration);
    assert_eq!(summary["provisioned"], 0, "{summary}");
    for (id, moved_here) in ids.iter().zip(&moved_on) {
        assert_eq!(moved_here, &moved(&[("notices", 1)]), "register {id}");
        assert_eq!(&answered(&answer, *id), moved_here, "{answer:#}");
    }
    for register in &registers {
        assert_eq!(notices_of(register), vec![]);
    }
    sync_all(&mut shop, &mut registers);
    assert_eq!(
        shop.count("SELECT count(*) FROM sync.held_recorded WHERE table_name = 'notices'"),
        0,
        "the engine keeps nothing of the table"
    );
    let expected = server_products(&mut shop, "shop.cheap", false);
    for register in &registers {
        assert_eq!(products_with_sku(register), expected);
    }
}

#[test]
fn a_table_whose_relation_changed_is_sent_again_alone_to_the_registers_holding_it() {
    let (mut shop, ids, mut registers) = shop_with_registers();
    // R1's notice goes first: only R0 holds the table when it is replaced.
    shop.run(&format!(
        "DELETE FROM shop.notices WHERE register_id = '{}'",
        ids[1]
    ));
    shop.run(&format!(
        "INSERT INTO shop.notices VALUES (gen_random_uuid(), '{}', 'Count the till')",
        ids[0]
    ));
    sync_all(&mut shop, &mut registers);
    // Tea's price changes in the same deploy: it reaches R0, which is
    // provisioned again for the notices only, as it reaches R1.
    let migration = "
        CREATE TABLE shop.notices_v2 (LIKE shop.notices INCLUDING ALL);
        INSERT INTO shop.notices_v2 SELECT * FROM shop.notices;
        SELECT sync.undeclare_table('shop.notices');
        SELECT sync.declare_table('shop.notices_v2', name => 'notices',
                                  sync => 'assigned(register_id)');
        UPDATE shop.products SET price_cents = price_cents + 1 WHERE name = 'Tea';
    ";
    shop.run(migration);
    let summary = shop.relay();
    assert_eq!(summary["provisioned"], 1, "R0 alone: {summary}");
    let alarm = last_alarm(&mut shop);
    assert!(
        alarm.contains("notices (its key changed)")
            && alarm.contains("1 replicas provisioned again"),
        "{alarm}"
    );
    // The health says why R0 is being provisioned, until it confirms.
    let health = |shop: &mut Shop| -> Value {
        shop.pg
            .query_one("SELECT sync.health()", &[])
            .unwrap()
            .get::<_, Value>(0)["redeclared"]
            .clone()
    };
    let said = health(&mut shop);
    assert_eq!(said["total"], 1, "{said}");
    assert_eq!(said["first"][0]["provisioning"], 1, "{said}");
    assert_eq!(said["first"][0]["remedy"], "wait", "{said}");
    assert!(
        said["first"][0]["what"]
            .as_str()
            .unwrap()
            .contains("provisions again the replicas holding notices"),
        "{said}"
    );
    let received = take_each(&mut shop, &mut registers);
    // R0's snapshot names the notices alone: it is sent its two notices
    // and Tea, and lets go of nothing else it holds.
    let ended: Vec<&Vec<String>> = received[0]
        .iter()
        .filter_map(|r| match r {
            Received::Ended { tables, .. } => Some(tables),
            _ => None,
        })
        .collect();
    assert_eq!(ended, vec![&vec!["notices".to_owned()]]);
    assert_eq!(
        applied(&received[0]),
        moved(&[("notices", 2), ("products", 1)])
    );
    assert_eq!(applied(&received[1]), moved(&[("products", 1)]));
    sync_all(&mut shop, &mut registers);
    assert!(
        health(&mut shop).is_null(),
        "R0 confirmed its snapshot: the health says nothing of it"
    );
    assert_eq!(notices_of(&registers[0]), server_notices(&mut shop, "true"),);
    let expected = server_products(&mut shop, "shop.cheap", false);
    for register in &registers {
        assert_eq!(products_with_sku(register), expected);
    }
    // What the engine records each holding is what each holds, once: R0
    // follows its stand-in again, and a product added reaches both.
    shop.add_product("Scone", 200);
    sync_all(&mut shop, &mut registers);
    let expected = server_products(&mut shop, "shop.cheap", false);
    for (id, register) in ids.iter().zip(&registers) {
        assert_eq!(products_with_sku(register), expected);
        let held: i64 = shop
            .pg
            .query_one(
                "SELECT count(*) FROM sync.held WHERE replica = $1 AND table_name = 'products'",
                &[id],
            )
            .unwrap()
            .get(0);
        assert_eq!(held, expected.len() as i64, "{id}");
    }
}

#[test]
fn a_holder_with_a_message_still_on_its_way_at_a_relation_change_is_provisioned_whole() {
    let (mut shop, ids, mut registers) = shop_with_registers();
    // A message written for R0 that it has not applied when the relation
    // changes: had it been lost, a snapshot of the notices alone would
    // hide the loss (a snapshot begins anew whatever gap a replica has).
    shop.run("UPDATE shop.products SET price_cents = price_cents + 1 WHERE name = 'Coffee'");
    shop.relay();
    shop.run(
        "CREATE TABLE shop.notices_v2 (LIKE shop.notices INCLUDING ALL);
         INSERT INTO shop.notices_v2 SELECT * FROM shop.notices;
         SELECT sync.undeclare_table('shop.notices');
         SELECT sync.declare_table('shop.notices_v2', name => 'notices',
                                   sync => 'assigned(register_id)');",
    );
    // R1 applied everything sent it (the price's message is taken now,
    // before the relation's pass): a snapshot of the notices only.
    deliver(&mut shop.pg, &mut registers[1]);
    report(&mut shop.pg, &mut registers[1]);
    shop.relay();
    let ended_tables = |received: &[Received]| -> Vec<Vec<String>> {
        received
            .iter()
            .filter_map(|r| match r {
                Received::Ended { tables, .. } => Some(tables.clone()),
                _ => None,
            })
            .collect()
    };
    let [r0, r1]: [Vec<Received>; 2] = take_each(&mut shop, &mut registers).try_into().unwrap();
    let r0_ended = ended_tables(&r0);
    assert_eq!(r0_ended.len(), 1, "{}: one snapshot", ids[0]);
    assert!(
        r0_ended[0].len() > 1 && r0_ended[0].iter().any(|t| t == "products"),
        "{}: provisioned whole, the snapshot names every table it holds: {r0_ended:?}",
        ids[0]
    );
    assert_eq!(
        ended_tables(&r1),
        vec![vec!["notices".to_owned()]],
        "{}",
        ids[1]
    );
    sync_all(&mut shop, &mut registers);
    let expected = server_products(&mut shop, "shop.cheap", false);
    for (id, register) in ids.iter().zip(&registers) {
        assert_eq!(products_with_sku(register), expected, "{id}");
        assert_eq!(
            notices_of(register),
            server_notices(&mut shop, &format!("register_id = '{id}'")),
            "{id}"
        );
    }
}

#[test]
fn a_register_offline_through_a_change_gets_only_the_difference_when_it_is_back() {
    let (mut shop, ids, mut registers) = shop_with_registers();
    let mut offline = registers.pop().unwrap();
    shop.run(CHEAPER);
    sync_all(&mut shop, &mut registers);
    shop.run("UPDATE shop.products SET name = 'Green tea' WHERE name = 'Tea'");
    sync_all(&mut shop, &mut registers);
    // Back: Coffee let go of, Tea's new name; nothing else.
    let received = deliver(&mut shop.pg, &mut offline);
    report(&mut shop.pg, &mut offline);
    assert_eq!(applied(&received), moved(&[("products", 2)]), "{}", ids[1]);
    let expected = server_products(&mut shop, "shop.cheaper", false);
    assert_eq!(products_with_sku(&offline), expected);
    assert_eq!(products_with_sku(&registers[0]), expected);
}

#[test]
fn a_snapshot_on_its_way_through_a_change_is_taken_whole_then_only_the_difference() {
    let (mut shop, _, mut registers) = shop_with_registers();
    // More cheap products, and two rows a message: the new register's
    // snapshot spans several messages.
    shop.add_product("Scone", 270);
    shop.add_product("Muffin", 320);
    shop.add_product("Bun", 330);
    shop.add_product("Pie", 420);
    sync_all(&mut shop, &mut registers);
    shop.run("SET magic_sync.message_rows = 2");
    let id = shop.add_register("R2");
    shop.run(&format!(
        "INSERT INTO shop.notices VALUES (gen_random_uuid(), '{id}', 'Inventory for R2')"
    ));
    let mut new = open(&shop, id);
    let summary = shop.relay();
    assert_eq!(summary["provisioned"], 1, "R2 alone: {summary}");
    let snapshot = |shop: &mut Shop| -> Option<Uuid> {
        shop.pg
            .query_one(
                "SELECT snapshot_id FROM sync.replicas WHERE id = $1",
                &[&id],
            )
            .unwrap()
            .get(0)
    };
    let begun = snapshot(&mut shop).expect("a snapshot begun");

    // Two of its messages applied and acknowledged, and said so; the rest
    // wait in the queue.
    let mut received = Vec::new();
    for _ in 0..2 {
        let (message, bytes) = common::next(&mut shop.pg, &new).expect("a message waits");
        received.push(new.receive(&bytes).unwrap());
        assert!(common::ack(&mut shop.pg, &new, &message));
    }
    report(&mut shop.pg, &mut new);
    assert!(
        received
            .iter()
            .all(|r| matches!(r, Received::Applied { .. })),
        "{received:?}"
    );
    assert!(
        shop.count(&format!(
            "SELECT count(*) FROM sync.outbox WHERE replica = '{id}' AND kind = 'down'"
        )) > 0,
        "some of the snapshot still waits"
    );

    // The products from 280 to 450: Tea and Scone leave, Cake and Pie
    // come, and Coffee, Muffin and Bun stay. Planned while the snapshot (of the
    // rule before) is on its way to R2: its difference follows the
    // snapshot's end, and R2 is not provisioned again.
    let middle = "
        CREATE VIEW shop.middle AS SELECT * FROM shop.products
            WHERE price_cents >= 280 AND price_cents < 450;
        SELECT sync.declare_table('shop.products', sync => 'broadcast', active => 'shop.middle');
    ";
    let (summary, moved_on) = deploy(&mut shop, &mut registers, middle);
    assert_eq!(summary["provisioned"], 0, "{summary}");
    for moved_here in &moved_on {
        assert_eq!(moved_here, &moved(&[("products", 4)]));
    }
    received.extend(deliver(&mut shop.pg, &mut new));
    report(&mut shop.pg, &mut new);
    sync_all(&mut shop, std::slice::from_mut(&mut new));
    received.extend(deliver(&mut shop.pg, &mut new));

    assert_eq!(snapshot(&mut shop), Some(begun), "the same snapshot");
    let ended = received
        .iter()
        .filter(|r| matches!(r, Received::Ended { .. }))
        .count();
    assert_eq!(ended, 1, "one snapshot ended: {received:?}");
    let end = received
        .iter()
        .position(|r| matches!(r, Received::Ended { .. }))
        .unwrap();
    assert!(
        received[end + 1..]
            .iter()
            .any(|r| applied(std::slice::from_ref(r)).contains_key("products")),
        "the difference follows the snapshot's end: {received:?}"
    );
    // Every row the snapshot sent, once (the five cheap products, R2's
    // notice and its state), then the difference: Tea and Scone let go
    // of, Cake and Pie sent.
    assert_eq!(
        applied(&received),
        moved(&[("notices", 1), ("products", 9), ("register_state", 1)]),
        "{received:?}"
    );
    let mut products: BTreeMap<String, i64> = BTreeMap::new();
    for r in &received {
        if let Received::Applied { tables, .. } | Received::Ended { swept: tables, .. } = r {
            for key in tables
                .iter()
                .filter(|t| t.table == "products")
                .flat_map(|t| &t.keys)
            {
                *products.entry(key.clone()).or_default() += 1;
            }
        }
    }
    let twice = products.values().filter(|n| **n == 2).count();
    assert_eq!(
        (products.len(), twice),
        (7, 2),
        "seven products, of which only Tea and Scone twice (sent, let go of): {products:?}"
    );

    let expected = server_products(&mut shop, "shop.middle", false);
    assert_eq!(expected.len(), 5);
    assert_eq!(products_with_sku(&new), expected);
    assert_eq!(
        notices_of(&new),
        server_notices(&mut shop, &format!("register_id = '{id}'"))
    );
    for register in &registers {
        assert_eq!(products_with_sku(register), expected);
    }
}

/// The shop with orders: each register's order (assigned to it), its
/// lines (which follow their order) and its supplier (a parent, with no
/// rule of its own), as `shop_with_registers` otherwise.
fn shop_with_orders() -> (Shop, Vec<Uuid>, Vec<Replica>) {
    let mut shop = Shop::open();
    shop.run(
        "CREATE TABLE shop.suppliers (id uuid PRIMARY KEY, name text NOT NULL);
         CREATE TABLE shop.orders (id uuid PRIMARY KEY, register_id uuid NOT NULL,
                                   supplier_id uuid NOT NULL REFERENCES shop.suppliers (id));
         CREATE INDEX ON shop.orders (register_id);
         CREATE INDEX ON shop.orders (supplier_id);
         CREATE TABLE shop.order_lines (id uuid PRIMARY KEY,
                                        order_id uuid NOT NULL REFERENCES shop.orders (id),
                                        qty integer NOT NULL);
         CREATE INDEX ON shop.order_lines (order_id);
         SELECT sync.declare_table('shop.suppliers');
         SELECT sync.declare_table('shop.orders', sync => 'assigned(register_id)');
         SELECT sync.declare_table('shop.order_lines', sync => 'follows(order_id)');",
    );
    shop.add_product("Tea", 250);
    let ids = vec![shop.add_register("R0"), shop.add_register("R1")];
    shop.run(
        "INSERT INTO shop.suppliers SELECT gen_random_uuid(), 'Supplier of ' || name FROM shop.registers;
         INSERT INTO shop.suppliers VALUES (gen_random_uuid(), 'Nobody''s');
         INSERT INTO shop.orders SELECT gen_random_uuid(), r.id, s.id
             FROM shop.registers r JOIN shop.suppliers s ON s.name = 'Supplier of ' || r.name;
         INSERT INTO shop.order_lines SELECT gen_random_uuid(), o.id, q
             FROM shop.orders o, generate_series(1, 2) AS q;",
    );
    let tables = || {
        tables_and(vec![
            Table::catalog("suppliers"),
            Table::catalog("orders"),
            Table::catalog("order_lines"),
        ])
    };
    let schema = format!(
        "CREATE TABLE IF NOT EXISTS suppliers (id BLOB PRIMARY KEY NOT NULL, name TEXT NOT NULL);
         CREATE TABLE IF NOT EXISTS orders (id BLOB PRIMARY KEY NOT NULL, register_id BLOB NOT NULL,
                                            supplier_id BLOB NOT NULL);
         CREATE TABLE IF NOT EXISTS order_lines (id BLOB PRIMARY KEY NOT NULL,
                                                 order_id BLOB NOT NULL, qty INTEGER NOT NULL);
         {REGISTER_SCHEMA}"
    );
    let mut registers: Vec<Replica> = ids
        .iter()
        .map(|id| {
            crate::common::open_replica(
                &shop.file_of(*id),
                &schema,
                tables(),
                *id,
                Settings::default(),
            )
        })
        .collect();
    sync_all(&mut shop, &mut registers);
    sync_all(&mut shop, &mut registers);
    (shop, ids, registers)
}

/// The ids a register holds of a table, sorted.
fn ids_of(register: &Replica, table: &str) -> Vec<Uuid> {
    let mut ids: Vec<Uuid> = register
        .connection()
        .prepare(&format!("SELECT id FROM {table}"))
        .unwrap()
        .query_map([], |r| {
            let id: Vec<u8> = r.get(0)?;
            Ok(Uuid::from_slice(&id).unwrap())
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    ids.sort();
    ids
}

fn server_ids(shop: &mut Shop, sql: &str) -> Vec<Uuid> {
    let mut ids: Vec<Uuid> = shop
        .pg
        .query(sql, &[])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    ids.sort();
    ids
}

#[test]
fn a_rule_changed_moves_the_rows_with_their_parents_and_followers_and_nothing_else() {
    let (mut shop, ids, mut registers) = shop_with_orders();
    for (id, register) in ids.iter().zip(&registers) {
        assert_eq!(ids_of(register, "orders").len(), 1, "{id}");
        assert_eq!(ids_of(register, "order_lines").len(), 2, "{id}");
        assert_eq!(ids_of(register, "suppliers").len(), 1, "{id}");
    }
    // Every order to every register: each is sent the other's order, its
    // two lines (they follow it) and its supplier (it points at it); what
    // it holds is not sent again, and the supplier of no order stays away.
    let broadcast = "SELECT sync.declare_table('shop.orders', sync => 'broadcast');";
    let answer = what_if(&mut shop, broadcast);
    let (summary, moved_on) = deploy(&mut shop, &mut registers, broadcast);
    assert_eq!(summary["provisioned"], 0, "{summary}");
    let each = moved(&[("order_lines", 2), ("orders", 1), ("suppliers", 1)]);
    for (id, moved_here) in ids.iter().zip(&moved_on) {
        assert_eq!(moved_here, &each, "register {id}");
        assert_eq!(&answered(&answer, *id), moved_here, "{answer:#}");
    }
    let orders = server_ids(&mut shop, "SELECT id FROM shop.orders");
    let lines = server_ids(&mut shop, "SELECT id FROM shop.order_lines");
    let suppliers = server_ids(
        &mut shop,
        "SELECT id FROM shop.suppliers WHERE id IN (SELECT supplier_id FROM shop.orders)",
    );
    for register in &registers {
        assert_eq!(ids_of(register, "orders"), orders);
        assert_eq!(ids_of(register, "order_lines"), lines);
        assert_eq!(ids_of(register, "suppliers"), suppliers);
    }
    let alarm = last_alarm(&mut shop);
    assert!(
        alarm.contains("orders (its rule changed): 2 rows sent to 2 replicas"),
        "{alarm}"
    );

    // Back to each its own: each lets go of the other's order, its lines
    // and its supplier, and keeps its own without their being sent.
    let assigned = "SELECT sync.declare_table('shop.orders', sync => 'assigned(register_id)');";
    let answer = what_if(&mut shop, assigned);
    let (summary, moved_on) = deploy(&mut shop, &mut registers, assigned);
    assert_eq!(summary["provisioned"], 0, "{summary}");
    for (id, moved_here) in ids.iter().zip(&moved_on) {
        assert_eq!(moved_here, &each, "register {id}");
        assert_eq!(&answered(&answer, *id), moved_here, "{answer:#}");
    }
    for (id, register) in ids.iter().zip(&registers) {
        let own = format!("register_id = '{id}'");
        assert_eq!(
            ids_of(register, "orders"),
            server_ids(
                &mut shop,
                &format!("SELECT id FROM shop.orders WHERE {own}")
            )
        );
        assert_eq!(
            ids_of(register, "order_lines"),
            server_ids(
                &mut shop,
                &format!(
                    "SELECT l.id FROM shop.order_lines l JOIN shop.orders o ON o.id = l.order_id WHERE o.{own}"
                )
            )
        );
        assert_eq!(
            ids_of(register, "suppliers"),
            server_ids(
                &mut shop,
                &format!("SELECT supplier_id FROM shop.orders WHERE {own}")
            )
        );
    }
}

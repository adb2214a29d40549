//! A table declared for the first time sends only that table's rows
//! (issue 36), end to end: registers on SQLite files hold the shop's rows;
//! a migration declares two tables new to the engine, a broadcast one and
//! one assigned to a register. No register is provisioned again: each is
//! sent the new tables' rows its rules give it, nothing else, as
//! `sync.what_if` said beforehand and as each register's applied messages
//! show.

mod common;
#[path = "common/filing_shop.rs"]
mod shop;

use std::collections::BTreeMap;

use magic_sync_replica::{Apply, Received, Replica, Settings, Table, Tables};
use serde_json::Value;
use shop::*;
use uuid::Uuid;

/// Per table: (rows sent, rows let go of).
type Figures = BTreeMap<String, (i64, i64)>;

const NEW_TABLES: &str = "
    CREATE TABLE IF NOT EXISTS shelves (
        id    BLOB PRIMARY KEY NOT NULL,
        label TEXT NOT NULL);
    CREATE TABLE IF NOT EXISTS notices (
        id          BLOB PRIMARY KEY NOT NULL,
        register_id BLOB NOT NULL,
        text        TEXT NOT NULL);
";

/// A register whose build already has the new tables (a register updated
/// before the server declares them).
fn open(shop: &Shop, me: Uuid) -> Replica {
    let tables = Tables::new(vec![
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
        Table::catalog("shelves"),
        Table::catalog("notices"),
    ]);
    let schema = format!("{REGISTER_SCHEMA}{NEW_TABLES}");
    crate::common::open_replica(&shop.file_of(me), &schema, tables, me, Settings::default())
}

const MIGRATION: &str = "
    CREATE TABLE shop.shelves (id uuid PRIMARY KEY, label text NOT NULL);
    INSERT INTO shop.shelves VALUES (gen_random_uuid(), 'Top'), (gen_random_uuid(), 'Bottom');
    CREATE TABLE shop.notices (id uuid PRIMARY KEY, register_id uuid NOT NULL, text text NOT NULL);
    CREATE INDEX ON shop.notices (register_id);
    INSERT INTO shop.notices
        SELECT gen_random_uuid(), id, 'Inventory on Monday' FROM shop.registers WHERE name = 'R0';
    SELECT sync.declare_table('shop.shelves', sync => 'broadcast');
    SELECT sync.declare_table('shop.notices', sync => 'assigned(register_id)');
";

fn applied(received: &[Received]) -> Figures {
    let mut figures = Figures::new();
    for r in received {
        match r {
            Received::Applied { tables, .. } => {
                for t in tables {
                    figures.entry(t.table.clone()).or_default().0 += t.keys.len() as i64;
                }
            }
            Received::Ended { swept, .. } => {
                for t in swept {
                    figures.entry(t.table.clone()).or_default().1 += t.keys.len() as i64;
                }
            }
            _ => {}
        }
    }
    figures.retain(|_, f| *f != (0, 0));
    figures
}

fn answered(answer: &Value, register: Uuid) -> Figures {
    answer["replicas"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["replica"] == register.to_string())
        .flat_map(|r| r["tables"].as_array().unwrap().clone())
        .map(|t| {
            (
                t["table"].as_str().unwrap().to_owned(),
                (t["sent"].as_i64().unwrap(), t["let_go"].as_i64().unwrap()),
            )
        })
        .filter(|(_, f)| *f != (0, 0))
        .collect()
}

#[test]
fn tables_declared_for_the_first_time_send_each_register_their_rows_and_nothing_else() {
    let mut shop = Shop::open();
    shop.add_product("Tea", 250);
    shop.add_product("Coffee", 300);
    let ids = [shop.add_register("R0"), shop.add_register("R1")];
    let mut registers: Vec<Replica> = ids.iter().map(|id| open(&shop, *id)).collect();
    sync_all(&mut shop, &mut registers);
    sync_all(&mut shop, &mut registers);

    // Asked first: the shelves to both, R0's notice to R0; nothing else.
    let answer: Value = shop
        .pg
        .query_one("CALL sync.what_if($1)", &[&MIGRATION])
        .unwrap()
        .get(0);
    let expected = |notices: i64| -> Figures {
        let mut f = Figures::from([("shelves".to_owned(), (2, 0))]);
        if notices > 0 {
            f.insert("notices".to_owned(), (notices, 0));
        }
        f
    };
    assert_eq!(answered(&answer, ids[0]), expected(1), "{answer:#}");
    assert_eq!(answered(&answer, ids[1]), expected(0), "{answer:#}");
    assert_eq!(answer["total"]["sent"], 5, "{answer:#}");

    shop.run(MIGRATION);
    let summary = shop.relay();
    assert_eq!(summary["redeclared"], true, "{summary}");
    assert_eq!(
        summary["declared_first"],
        serde_json::json!(["notices", "shelves"]),
        "{summary}"
    );
    assert_eq!(
        summary["provisioned"], 0,
        "no register provisioned: {summary}"
    );
    for (id, register) in ids.iter().zip(registers.iter_mut()) {
        let received = deliver(&mut shop.pg, register);
        assert_eq!(
            applied(&received),
            answered(&answer, *id),
            "register {id} applied the new tables' rows alone, as what_if said"
        );
        report(&mut shop.pg, register);
    }
    let alarm: String = shop
        .pg
        .query_one("SELECT what FROM sync.alarms ORDER BY id DESC LIMIT 1", &[])
        .unwrap()
        .get(0);
    assert!(
        alarm.contains("notices (declared for the first time): 1 rows sent to 1 replicas")
            && alarm.contains("shelves (declared for the first time): 4 rows sent to 2 replicas"),
        "the alarm says what was sent: {alarm}"
    );

    // What each register holds is what its rules give it.
    let labels = |r: &Replica| -> Vec<String> {
        let mut v: Vec<String> = values_by_id::<String>(r, "SELECT id, label FROM shelves")
            .into_iter()
            .map(|(_, l)| l)
            .collect();
        v.sort();
        v
    };
    for register in &registers {
        assert_eq!(
            labels(register),
            vec!["Bottom".to_owned(), "Top".to_owned()]
        );
        assert_eq!(products_of(register), shop.products());
    }
    assert_eq!(
        values_by_id::<String>(&registers[0], "SELECT id, text FROM notices").len(),
        1
    );
    assert_eq!(
        values_by_id::<String>(&registers[1], "SELECT id, text FROM notices").len(),
        0
    );

    // They go on as any declared table: a change reaches the registers.
    shop.run("UPDATE shop.shelves SET label = 'Middle' WHERE label = 'Top'");
    sync_all(&mut shop, &mut registers);
    for register in &registers {
        assert_eq!(
            labels(register),
            vec!["Bottom".to_owned(), "Middle".to_owned()]
        );
    }
    assert_eq!(shop.count("SELECT count(*) FROM sync.notes"), 0);
}

#[test]
fn a_rule_changed_beside_a_table_declared_first_sends_both_differences_and_provisions_nothing() {
    let mut shop = Shop::open();
    shop.add_product("Tea", 250);
    let ids = [shop.add_register("R0")];
    let mut registers: Vec<Replica> = ids.iter().map(|id| open(&shop, *id)).collect();
    sync_all(&mut shop, &mut registers);

    shop.run(&format!(
        "{MIGRATION} \
         CREATE VIEW shop.cheap AS SELECT * FROM shop.products WHERE price_cents < 100; \
         SELECT sync.declare_table('shop.products', sync => 'broadcast', active => 'shop.cheap');"
    ));
    let summary = shop.relay();
    assert_eq!(
        summary["declared_first"],
        serde_json::json!(["notices", "shelves"]),
        "{summary}"
    );
    assert_eq!(summary["provisioned"], 0, "{summary}");
    sync_all(&mut shop, &mut registers);
    assert_eq!(products_of(&registers[0]), vec![]);
    assert_eq!(
        values_by_id::<String>(&registers[0], "SELECT id, label FROM shelves").len(),
        2
    );
}

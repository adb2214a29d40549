//! `sync.what_if(migration)` (issue 36), end to end: registers on SQLite
//! files hold the shop's rows; a migration is tried before it is deployed.
//! (tests/tests/declaration_changes.rs asks it of every kind of change.)
//! The answer changes nothing (the migration, the pass and its messages
//! undone), and its figures, per register and table, are what the deploy
//! then sends: counted on the registers, from what each applied.

mod common;
#[path = "common/filing_shop.rs"]
mod shop;

use std::collections::BTreeMap;

use magic_sync_replica::Received;
use postgres::Client;
use serde_json::Value;
use shop::*;
use uuid::Uuid;

/// Per table: (rows sent, rows let go of).
type Figures = BTreeMap<String, (i64, i64)>;

/// What a register applied, per table: the rows written by the messages
/// it applied, and the rows a snapshot's end let go of.
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

/// What the answer says of one register, per table.
fn answered(answer: &Value, register: Uuid) -> Figures {
    let Some(replica) = answer["replicas"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["replica"] == register.to_string())
    else {
        return Figures::new();
    };
    replica["tables"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["table"].as_str().unwrap().to_owned(),
                (t["sent"].as_i64().unwrap(), t["let_go"].as_i64().unwrap()),
            )
        })
        .filter(|(_, f)| *f != (0, 0))
        .collect()
}

/// What the engine holds that a migration or a pass would change.
fn state(pg: &mut Client) -> Vec<String> {
    [
        "SELECT declared FROM sync.relay_state",
        "SELECT count(*)::text FROM sync.outbox",
        "SELECT string_agg(replica::text || table_name || key || sent::text, ',' \
         ORDER BY replica, table_name, key) FROM sync.held",
        "SELECT string_agg(name || request::text, ',' ORDER BY name) FROM sync.tables",
        "SELECT coalesce(to_regclass('shop.cheap_products')::text, 'no view')",
        "SELECT string_agg(last_sequence::text, ',' ORDER BY id) FROM sync.replicas",
    ]
    .iter()
    .map(|sql| {
        pg.query_one(*sql, &[])
            .unwrap()
            .get::<_, Option<String>>(0)
            .unwrap_or_default()
    })
    .collect()
}

const MIGRATION: &str = "
    CREATE VIEW shop.cheap_products AS SELECT * FROM shop.products WHERE price_cents < 350;
    SELECT sync.declare_table('shop.products', sync => 'broadcast',
                              active => 'shop.cheap_products');
";

#[test]
fn what_if_changes_nothing_and_its_figures_are_what_the_deploy_then_sends_each_register() {
    let mut shop = Shop::open();
    shop.add_product("Tea", 250);
    shop.add_product("Coffee", 300);
    shop.add_product("Cake", 400);
    let (ids, mut registers) = shop.add_registers(2);
    sync_all(&mut shop, &mut registers);
    sync_all(&mut shop, &mut registers);
    let before = state(&mut shop.pg);

    let answer: Value = shop
        .pg
        .query_one("CALL sync.what_if($1)", &[&MIGRATION])
        .unwrap()
        .get(0);
    assert_eq!(state(&mut shop.pg), before, "what_if changed nothing");
    assert_eq!(answer["redeclared"], true, "{answer:#}");
    // Only the difference: each register lets go of the product no longer
    // in the view, and is sent nothing (the two it keeps it holds).
    for id in &ids {
        let figures = answered(&answer, *id);
        assert_eq!(
            figures,
            Figures::from([("products".to_owned(), (0, 1))]),
            "{answer:#}"
        );
    }
    let total_sent: i64 = answer["replicas"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["sent"].as_i64().unwrap())
        .sum();
    assert_eq!(answer["total"]["sent"], total_sent, "{answer:#}");
    assert_eq!(answer["total"]["let_go"], 2, "{answer:#}");
    assert_eq!(answer["total"]["replicas"], 2, "{answer:#}");

    // The deploy, for real: each register applies exactly what was said.
    shop.run(MIGRATION);
    let summary = shop.relay();
    assert_eq!(summary["redeclared"], true, "{summary}");
    for (id, register) in ids.iter().zip(registers.iter_mut()) {
        let received = deliver(&mut shop.pg, register);
        // A register's applied rows are those written or let go of.
        let said: Figures = answered(&answer, *id)
            .into_iter()
            .map(|(t, (sent, let_go))| (t, (sent + let_go, 0)))
            .collect();
        assert_eq!(
            applied(&received),
            said,
            "register {id}: what it applied is what what_if said"
        );
    }
    for register in &registers {
        let mut kept: Vec<String> = products_of(register).into_iter().map(|p| p.1).collect();
        kept.sort();
        assert_eq!(kept, sorted(&["Coffee", "Tea"]), "{}", register.me());
    }
}

#[test]
fn what_if_a_migration_that_declares_nothing_answers_nothing_sent_and_refuses_a_broken_one() {
    let mut shop = Shop::open();
    shop.add_product("Tea", 250);
    let (_, mut registers) = shop.add_registers(1);
    sync_all(&mut shop, &mut registers);
    sync_all(&mut shop, &mut registers);
    let before = state(&mut shop.pg);

    let answer: Value = shop
        .pg
        .query_one(
            "CALL sync.what_if('CREATE INDEX ON shop.products (name)')",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(answer["redeclared"], false, "{answer:#}");
    assert_eq!(answer["total"]["sent"], 0, "{answer:#}");
    assert_eq!(answer["total"]["let_go"], 0, "{answer:#}");
    assert_eq!(answer["replicas"], serde_json::json!([]), "{answer:#}");

    let refused = shop
        .pg
        .query_one(
            "CALL sync.what_if('ALTER TABLE shop.nowhere ADD COLUMN x int')",
            &[],
        )
        .expect_err("a migration that fails fails what_if");
    assert!(
        refused.to_string().contains("nowhere") || format!("{refused:?}").contains("nowhere"),
        "{refused:?}"
    );
    assert_eq!(state(&mut shop.pg), before, "what_if changed nothing");
}

#[test]
fn what_if_a_migration_mends_drift_says_what_would_flow_and_leaves_the_table_stopped() {
    let mut shop = Shop::open();
    shop.add_product("Tea", 250);
    let (ids, mut registers) = shop.add_registers(1);
    sync_all(&mut shop, &mut registers);
    shop.run("ALTER TABLE shop.products ADD COLUMN vat_rate integer");
    shop.run("UPDATE shop.products SET price_cents = 275");
    assert_eq!(shop.relay()["stopped"], serde_json::json!(["products"]));

    // In the same session as the passes: what the check found is kept
    // for its next pass only while nothing it reads changed.
    let answer: Value = shop
        .pg
        .query_one(
            "CALL sync.what_if('ALTER TABLE shop.products DROP COLUMN vat_rate')",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(
        answered(&answer, ids[0]),
        Figures::from([("products".to_owned(), (1, 0))]),
        "{answer:#}"
    );
    assert_eq!(
        answer["pass"]["stopped"],
        serde_json::json!([]),
        "{answer:#}"
    );
    // Undone: products are still stopped, the change still waits.
    assert_eq!(shop.relay()["stopped"], serde_json::json!(["products"]));
    assert_eq!(
        shop.count("SELECT count(*) FROM sync.notes WHERE table_name = 'products'"),
        1
    );
}

fn sorted(names: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = names.iter().map(|s| (*s).to_owned()).collect();
    v.sort();
    v
}

//! Drift stops only what it concerns (issue 36), end to end: a PostgreSQL
//! cluster with the extension, registers on SQLite files, the default
//! transport. While a declared table differs from its declaration (a
//! column added and not declared, its note trigger disabled), the relay
//! stops planning that table alone: every other table keeps reaching the
//! registers, `sync.health()` lists the table with the statement that
//! mends it, and the registers holding it are awaiting a fix in the
//! overview. Once mended, the table flows again and nothing written
//! meanwhile is lost.

mod common;
#[path = "common/filing_shop.rs"]
mod shop;

use postgres::Client;
use serde_json::Value;
use shop::*;
use uuid::Uuid;

fn health_of(pg: &mut Client) -> Value {
    pg.query_one("SELECT sync.health()", &[]).unwrap().get(0)
}

fn overview(pg: &mut Client) -> Value {
    pg.query_one("SELECT sync.overview()", &[]).unwrap().get(0)
}

/// Each register's state and why.drift, as the overview says them.
fn states(pg: &mut Client, registers: &[Uuid]) -> Vec<(String, bool)> {
    let overview = overview(pg);
    let listed = overview["replicas"]["first"].as_array().unwrap();
    registers
        .iter()
        .map(|id| {
            let r = listed
                .iter()
                .find(|r| r["id"] == id.to_string())
                .unwrap_or_else(|| panic!("{id} in {overview}"));
            (
                r["state"].as_str().unwrap().to_owned(),
                r["why"]["drift"].as_bool().unwrap(),
            )
        })
        .collect()
}

/// The notes of each register's state row, as the register holds them.
fn state_notes(register: &magic_sync_replica::Replica) -> Vec<(Uuid, String)> {
    values_by_id(register, "SELECT id, note FROM register_state")
}

fn set_note(shop: &mut Shop, register: Uuid, note: &str) {
    shop.pg
        .execute(
            "UPDATE shop.register_state SET note = $2 WHERE id = $1",
            &[&register, &note],
        )
        .unwrap();
}

/// The statement a drift entry's fix names: after its first line of words
/// when it has one ("Declare it again ...:"), up to its first `;` when it
/// is one line followed by words ("...; (or ENABLE ALWAYS TRIGGER, ...)").
fn statement_of(fix: &str) -> String {
    match fix.split_once('\n') {
        Some((_, sql)) => sql.to_owned(),
        None => match fix.split_once(';') {
            Some((sql, _)) => format!("{sql};"),
            None => fix.to_owned(),
        },
    }
}

#[test]
fn a_column_added_and_not_declared_stops_products_alone_while_register_states_and_receipts_keep_flowing_and_the_fix_loses_nothing(
) {
    let mut shop = Shop::open();
    shop.add_product("Tea", 250);
    shop.add_product("Coffee", 300);
    let (ids, mut registers) = shop.add_registers(2);
    sync_all(&mut shop, &mut registers);
    let products_before = shop.products();
    for register in &registers {
        assert_eq!(products_of(register), products_before);
    }
    assert_eq!(
        states(&mut shop.pg, &ids),
        vec![("synced".into(), false); 2]
    );

    // The migration adds a column and does not declare it again.
    shop.run("ALTER TABLE shop.products ADD COLUMN vat_rate integer");
    // Meanwhile the head office changes a price, adds a product, writes a
    // note for the first register; the registers sell.
    shop.run("UPDATE shop.products SET price_cents = 275 WHERE name = 'Tea'");
    shop.add_product("Cake", 400);
    set_note(&mut shop, ids[0], "open till 8");
    let sold: Vec<Uuid> = registers.iter().flat_map(|r| sell(r, &[120, 80])).collect();

    let summary = shop.relay();
    assert_eq!(
        summary["stopped"],
        serde_json::json!(["products"]),
        "the pass runs, stopping products alone: {summary}"
    );
    for _ in 0..2 {
        for register in registers.iter_mut() {
            deliver(&mut shop.pg, register);
            report(&mut shop.pg, register);
        }
    }
    // Register states reach their registers; receipts are filed.
    assert_eq!(
        state_notes(&registers[0]),
        vec![(ids[0], "open till 8".to_owned())]
    );
    assert_eq!(state_notes(&registers[1]), vec![(ids[1], "new".to_owned())]);
    let mut filed: Vec<Uuid> = shop.receipts().iter().map(|r| r.0).collect();
    let mut sold_sorted = sold.clone();
    filed.sort();
    sold_sorted.sort();
    assert_eq!(filed, sold_sorted, "every receipt sold is filed");
    // Products are not planned: the registers hold them as before.
    for register in &registers {
        assert_eq!(products_of(register), products_before);
    }
    assert!(
        shop.count("SELECT count(*) FROM sync.notes WHERE table_name = 'products'") > 0,
        "the products' notes wait for the fix"
    );

    // Health lists the drifted table with the statement that mends it.
    let health = health_of(&mut shop.pg);
    assert_eq!(health["healthy"], false, "{health}");
    assert_eq!(health["drift"]["total"], 1, "{health}");
    let drift = &health["drift"]["first"][0];
    assert_eq!(drift["tables"], serde_json::json!(["products"]), "{health}");
    let problem = drift["problem"].as_str().unwrap();
    assert!(problem.contains("vat_rate"), "{problem}");
    let fix = drift["fix"].as_str().unwrap().to_owned();
    assert!(
        fix.contains(r#"sync.declare_table('"shop"."products"'"#),
        "the fix declares products again: {fix}"
    );
    // Both registers hold products: both await the fix.
    assert_eq!(
        states(&mut shop.pg, &ids),
        vec![("awaiting_fix".into(), true); 2]
    );

    // The fix, as health states it.
    shop.run(&statement_of(&fix));
    sync_all(&mut shop, &mut registers);
    sync_all(&mut shop, &mut registers);
    let products_now = shop.products();
    assert!(products_now.iter().any(|p| p.1 == "Cake" && p.2 == 400));
    for register in &registers {
        assert_eq!(
            products_of(register),
            products_now,
            "{} holds every product as the server does",
            register.me()
        );
    }
    assert_eq!(
        state_notes(&registers[0]),
        vec![(ids[0], "open till 8".to_owned())]
    );
    assert_eq!(
        shop.count("SELECT count(*) FROM sync.notes"),
        0,
        "every note is planned"
    );
    assert_eq!(health_of(&mut shop.pg)["drift"]["total"], 0);
    assert_eq!(
        states(&mut shop.pg, &ids),
        vec![("synced".into(), false); 2]
    );
}

#[test]
fn a_disabled_trigger_stops_its_table_and_only_the_registers_holding_it_await_the_fix() {
    let mut shop = Shop::open();
    shop.add_product("Tea", 250);
    let (ids, mut registers) = shop.add_registers(2);
    // A third register with no state row of its own: it holds products
    // alone.
    let bare = Uuid::new_v4();
    shop.pg
        .execute(
            "INSERT INTO shop.registers (id, name) VALUES ($1, 'Bare')",
            &[&bare],
        )
        .unwrap();
    registers.push(open_register(&shop.file_of(bare), bare));
    let all = [ids[0], ids[1], bare];
    sync_all(&mut shop, &mut registers);
    assert_eq!(state_notes(&registers[2]), vec![]);

    // A maintenance script turns the note trigger off and forgets it.
    shop.run("ALTER TABLE shop.register_state DISABLE TRIGGER sync_note_row");
    shop.add_product("Cake", 400);
    let summary = shop.relay();
    assert_eq!(
        summary["stopped"],
        serde_json::json!(["register_state"]),
        "{summary}"
    );
    for _ in 0..2 {
        for register in registers.iter_mut() {
            deliver(&mut shop.pg, register);
            report(&mut shop.pg, register);
        }
    }
    // Products keep flowing to every register.
    let products = shop.products();
    for register in &registers {
        assert_eq!(products_of(register), products);
    }
    let health = health_of(&mut shop.pg);
    let drift = &health["drift"]["first"][0];
    assert_eq!(
        drift["tables"],
        serde_json::json!(["register_state"]),
        "{health}"
    );
    let fix = drift["fix"].as_str().unwrap().to_owned();
    assert!(fix.contains("ENABLE TRIGGER"), "{fix}");
    assert_eq!(
        states(&mut shop.pg, &all),
        vec![
            ("awaiting_fix".into(), true),
            ("awaiting_fix".into(), true),
            ("synced".into(), false)
        ],
        "the registers holding a state row await the fix; the bare one is synced"
    );

    shop.run(&statement_of(&fix));
    set_note(&mut shop, ids[1], "closed on Sunday");
    sync_all(&mut shop, &mut registers);
    sync_all(&mut shop, &mut registers);
    assert_eq!(
        state_notes(&registers[1]),
        vec![(ids[1], "closed on Sunday".to_owned())]
    );
    assert_eq!(health_of(&mut shop.pg)["drift"]["total"], 0);
    assert_eq!(
        states(&mut shop.pg, &all),
        vec![("synced".into(), false); 3]
    );
}

#[test]
fn what_products_wait_for_while_stopped_reaches_every_register_once_the_column_goes_and_a_register_added_meanwhile_is_provisioned_then(
) {
    let mut shop = Shop::open();
    shop.add_product("Tea", 250);
    let (ids, mut registers) = shop.add_registers(1);
    sync_all(&mut shop, &mut registers);

    shop.run("ALTER TABLE shop.products ADD COLUMN vat_rate integer");
    shop.run("UPDATE shop.products SET price_cents = 275 WHERE name = 'Tea'");
    shop.add_product("Cake", 400);
    shop.run("DELETE FROM shop.products WHERE name = 'Tea'");
    // A register opened while products are stopped: its provisioning
    // waits, since a snapshot without products would lack them.
    let late = shop.add_register("Late");
    registers.push(open_register(&shop.file_of(late), late));
    let summary = shop.relay();
    assert_eq!(
        summary["stopped"],
        serde_json::json!(["products"]),
        "{summary}"
    );
    assert_eq!(summary["provisioned"], 0, "{summary}");
    for register in registers.iter_mut() {
        deliver(&mut shop.pg, register);
        report(&mut shop.pg, register);
    }
    assert_eq!(products_of(&registers[1]), vec![]);
    assert_eq!(state_notes(&registers[1]), vec![]);
    assert_eq!(
        states(&mut shop.pg, &[ids[0], late]),
        vec![("awaiting_fix".into(), true); 2],
        "the register holding products and the one to provision await the fix"
    );

    // Mended without declaring again: the column dropped. The declarations
    // are as they were, so nothing is provisioned again but the late
    // register; the first is sent what its notes waited for.
    shop.run("ALTER TABLE shop.products DROP COLUMN vat_rate");
    let summary = shop.relay();
    assert_eq!(summary["stopped"], serde_json::json!([]), "{summary}");
    assert_eq!(summary["redeclared"], false, "{summary}");
    assert_eq!(
        summary["provisioned"], 1,
        "the late register alone: {summary}"
    );
    for _ in 0..2 {
        for register in registers.iter_mut() {
            deliver(&mut shop.pg, register);
            report(&mut shop.pg, register);
        }
    }
    sync_all(&mut shop, &mut registers);
    let products = shop.products();
    assert_eq!(products.len(), 1, "Cake alone: {products:?}");
    for register in &registers {
        assert_eq!(products_of(register), products, "{}", register.me());
    }
    assert_eq!(state_notes(&registers[1]), vec![(late, "new".to_owned())]);
    assert_eq!(shop.count("SELECT count(*) FROM sync.notes"), 0);
    assert_eq!(
        states(&mut shop.pg, &[ids[0], late]),
        vec![("synced".into(), false); 2]
    );
}

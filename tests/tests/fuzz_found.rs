//! What fuzzing `sync.receive` found (tests/fuzz_server.rs), each as a test
//! of its own: Ups a replica could send, or a transport could hand over,
//! that `sync.receive` failed on instead of answering.

mod common;
#[path = "common/filing_shop.rs"]
mod shop;

use magic_sync_replica::proto::wire::{Rejection, Up};
use magic_sync_replica::Replica;
use prost::Message;
use serde_json::Value;
use shop::*;
use uuid::Uuid;

/// A provisioned register that sold receipts of these totals, and the Up
/// that carries them, not sent yet.
fn a_register_with_receipts(shop: &mut Shop, totals: &[i64]) -> (Uuid, Replica, Up) {
    let a = shop.add_register("A");
    let mut register = open_register(&shop.file_of(a), a);
    sync_all(shop, std::slice::from_mut(&mut register));
    sell(&register, totals);
    let up = register
        .next_up()
        .unwrap()
        .expect("an Up with the receipts");
    (a, register, up.message())
}

fn receive(shop: &mut Shop, a: Uuid, up: &Up) -> Result<Value, postgres::Error> {
    let row = shop.pg.query_one(
        "SELECT sync.receive($1, $2)::text",
        &[&a, &up.encode_to_vec()],
    )?;
    Ok(serde_json::from_str(&row.get::<_, String>(0)).unwrap())
}

/// The receipts part's row `i`, its total set to `total`.
fn with_total(up: &mut Up, part: usize, total: i64) {
    let row = &mut up.tables[part].upserts[0];
    let mut json: Value = serde_json::from_slice(row).unwrap();
    json["total_cents"] = Value::String(total.to_string());
    *row = serde_json::to_vec(&json).unwrap();
}

#[test]
fn an_up_naming_a_kept_row_in_two_parts_is_filed_and_keeps_the_row_once() {
    let mut shop = Shop::open();
    // The server's check refuses a total below 0: the row is kept.
    let (a, _register, mut up) = a_register_with_receipts(&mut shop, &[-5]);
    let part = up
        .tables
        .iter()
        .position(|t| t.table == "receipts")
        .unwrap();
    up.tables.push(up.tables[part].clone());

    let verdict = receive(&mut shop, a, &up).expect("answered, not an error");
    assert_eq!(verdict["verdict"], "filed", "{verdict}");
    assert_eq!(shop.count("SELECT count(*) FROM sync.inbox"), 1);
    assert!(shop.receipts().is_empty());
}

#[test]
fn a_row_kept_in_one_part_and_filed_in_a_later_one_is_no_longer_kept() {
    let mut shop = Shop::open();
    let (a, _register, mut up) = a_register_with_receipts(&mut shop, &[-5]);
    let part = up
        .tables
        .iter()
        .position(|t| t.table == "receipts")
        .unwrap();
    up.tables.push(up.tables[part].clone());
    let later = up.tables.len() - 1;
    with_total(&mut up, later, 5);

    let verdict = receive(&mut shop, a, &up).expect("answered, not an error");
    assert_eq!(verdict["verdict"], "filed", "{verdict}");
    // The later row stands: nothing kept of the earlier one comes back
    // over it once the inbox is filed again after a deploy.
    assert_eq!(shop.count("SELECT count(*) FROM sync.inbox"), 0);
    shop.run("ALTER TABLE shop.receipts DROP CONSTRAINT receipts_total_cents_check");
    shop.run("SELECT sync.refile(true)");
    let totals: Vec<i64> = shop.receipts().iter().map(|r| r.2).collect();
    assert_eq!(totals, [5]);
}

#[test]
fn a_key_holding_a_nul_is_left_out_and_the_rest_of_its_up_filed() {
    let mut shop = Shop::open();
    let (a, _register, mut up) = a_register_with_receipts(&mut shop, &[7, 8]);
    let part = up
        .tables
        .iter()
        .position(|t| t.table == "receipts")
        .unwrap();
    up.tables[part].keys[0].push('\0');

    let verdict = receive(&mut shop, a, &up).expect("answered, not an error");
    assert_eq!(verdict["verdict"], "filed", "{verdict}");
    let outcome = &verdict["rows"][part];
    assert_eq!(
        outcome["left_out"].as_array().map(Vec::len),
        Some(1),
        "{verdict}"
    );
    assert_eq!(outcome["filed"], 1, "{verdict}");
    assert_eq!(shop.receipts().len(), 1);
    assert!(verdict["answered"].is_array(), "answered: {verdict}");
}

#[test]
fn an_up_whose_rejection_holds_a_nul_is_dropped_as_malformed_and_changes_nothing() {
    let mut shop = Shop::open();
    let (a, _register, mut up) = a_register_with_receipts(&mut shop, &[7]);
    up.rejected.push(Rejection {
        table: "products".to_owned(),
        key: Uuid::new_v4().to_string(),
        reason: "refused\0".to_owned(),
        epoch: up.epoch.clone(),
        sequence: up.sequence,
        held_back: false,
    });
    let inbox = shop.count("SELECT count(*) FROM sync.inbox");
    let outbox = shop.count("SELECT count(*) FROM sync.outbox");

    let verdict = receive(&mut shop, a, &up).expect("answered, not an error");
    assert_eq!(verdict["verdict"], "malformed", "{verdict}");
    assert!(shop.receipts().is_empty());
    assert_eq!(shop.count("SELECT count(*) FROM sync.inbox"), inbox);
    assert_eq!(
        shop.count("SELECT count(*) FROM sync.outbox"),
        outbox,
        "unanswered"
    );
}

#[test]
fn a_row_holding_a_nul_is_left_out_and_the_rest_of_its_up_filed() {
    let mut shop = Shop::open();
    let (a, _register, mut up) = a_register_with_receipts(&mut shop, &[7, 8]);
    let part = up
        .tables
        .iter()
        .position(|t| t.table == "receipts")
        .unwrap();
    let row = &mut up.tables[part].upserts[0];
    let mut json: Value = serde_json::from_slice(row).unwrap();
    json["sold_at"] = Value::String("2026-10-01\u{0}".to_owned());
    *row = serde_json::to_vec(&json).unwrap();

    let verdict = receive(&mut shop, a, &up).expect("answered, not an error");
    assert_eq!(verdict["verdict"], "filed", "{verdict}");
    let outcome = &verdict["rows"][part];
    assert_eq!(
        outcome["left_out"].as_array().map(Vec::len),
        Some(1),
        "{verdict}"
    );
    assert_eq!(outcome["filed"], 1, "{verdict}");
    assert_eq!(shop.receipts().len(), 1);
}

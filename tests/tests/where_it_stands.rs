//! A register says where it stands as soon as it opens, even with nothing
//! to upload, and the server sets it straight within one round — open, its
//! first Up filed, one relay pass, deliver: a register whose SQLite file
//! is put back to an older copy, and one set up again under its id with an
//! empty file. A register opened again with nothing changed is not
//! provisioned again.

mod common;
#[path = "common/filing_shop.rs"]
mod shop;

use std::path::Path;

use magic_sync_replica::Replica;
use shop::*;
use uuid::Uuid;

/// A product as a register holds it, retired or not: (id, name, price).
type Held = (Uuid, String, i64);

/// Every product row the register holds, retired ones included: what it
/// holds is exactly the server's only when there is nothing else.
fn every_product_of(register: &Replica) -> Vec<Held> {
    products_where(register, "true")
}

/// The register's state rows it holds: (id, note).
fn states_of(register: &Replica) -> Vec<(Uuid, String)> {
    values_by_id(
        register,
        "SELECT id, note FROM register_state WHERE retired_at IS NULL",
    )
}

fn server_states_of(shop: &mut Shop, register: Uuid) -> Vec<(Uuid, String)> {
    let mut rows: Vec<(Uuid, String)> = shop
        .pg
        .query(
            "SELECT id, note FROM shop.register_state WHERE register_id = $1",
            &[&register],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    rows.sort();
    rows
}

/// The register holds exactly what the server says it should.
fn assert_holds_what_it_should(shop: &mut Shop, register: &Replica) {
    assert_eq!(every_product_of(register), shop.products(), "its products");
    let states = server_states_of(shop, register.me());
    assert_eq!(states_of(register), states, "its state rows");
}

/// The server's record of the register: whether a provisioning is pending,
/// and the last message it heard it apply.
fn record_of(shop: &mut Shop, register: Uuid) -> (bool, i64) {
    let row = shop
        .pg
        .query_one(
            "SELECT provision, applied_sequence FROM sync.replicas WHERE id = $1",
            &[&register],
        )
        .unwrap();
    (row.get(0), row.get(1))
}

/// Once the register says what it applied, the server counts it holding
/// everything, with no provisioning pending.
fn assert_counted_holding_everything(shop: &mut Shop, register: &mut Replica) {
    report(&mut shop.pg, register);
    let (provision, applied) = record_of(shop, register.me());
    assert!(!provision);
    assert_eq!(applied as u64, register.last_applied().unwrap().sequence);
}

fn change_the_catalog(shop: &mut Shop, round: i32) {
    shop.run(&format!(
        "INSERT INTO shop.products (id, name, price_cents) \
         SELECT gen_random_uuid(), 'Item {round}.' || i, i FROM generate_series(1, 4) AS i; \
         UPDATE shop.products SET price_cents = price_cents + 100, updated_at = now() \
         WHERE name LIKE 'Item%' AND price_cents % 2 = 0; \
         DELETE FROM shop.products WHERE price_cents = 3"
    ));
}

/// Changes only values: the same keys, so the register's digests could
/// not tell.
fn change_the_prices(shop: &mut Shop) {
    shop.run("UPDATE shop.products SET price_cents = price_cents * 10, updated_at = now()");
}

/// The register's program stops, and its file is put back as `copy` is
/// (or emptied, for none).
fn put_back(register: Replica, file: &Path, copy: Option<&Path>) {
    drop(register);
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", file.display()));
    }
    if let Some(copy) = copy {
        std::fs::copy(copy, file).unwrap();
    }
}

/// A register provisioned and caught up, having applied some changes.
fn a_register_caught_up(shop: &mut Shop) -> (Uuid, Replica) {
    change_the_catalog(shop, 0);
    let a = shop.add_register("Register 1");
    let mut register = open_register(&shop.file_of(a), a);
    sync_all(shop, std::slice::from_mut(&mut register));
    change_the_catalog(shop, 1);
    sync_all(shop, std::slice::from_mut(&mut register));
    assert_holds_what_it_should(shop, &register);
    (a, register)
}

/// One round: its first Up filed, one relay pass, then it takes what
/// waits. Answers what the server made of the Ups it said, and the pass.
fn one_round(
    shop: &mut Shop,
    register: &mut Replica,
) -> (Vec<serde_json::Value>, serde_json::Value) {
    let verdicts = report(&mut shop.pg, register);
    let pass = shop.relay();
    deliver(&mut shop.pg, register);
    (verdicts, pass)
}

#[test]
fn a_register_put_back_to_an_older_copy_is_provisioned_again_within_one_round() {
    let mut shop = Shop::open();
    let (a, register) = a_register_caught_up(&mut shop);
    let file = shop.file_of(a);
    let copy = shop.dir().join("older.db");
    register
        .connection()
        .execute("VACUUM INTO ?1", [copy.to_str().unwrap()])
        .unwrap();
    let older = register.last_applied().unwrap().sequence;

    // Life goes on past the copy: new rows, and values changed.
    let mut register = register;
    change_the_catalog(&mut shop, 2);
    sync_all(&mut shop, std::slice::from_mut(&mut register));
    change_the_prices(&mut shop);
    shop.pg
        .execute(
            "UPDATE shop.register_state SET note = 'moved' WHERE register_id = $1",
            &[&a],
        )
        .unwrap();
    sync_all(&mut shop, std::slice::from_mut(&mut register));
    assert_holds_what_it_should(&mut shop, &register);
    let (_, applied) = record_of(&mut shop, a);
    assert!(applied as u64 > older);

    // Its file is put back as the copy was; it has nothing to upload.
    put_back(register, &file, Some(&copy));
    let mut register = open_register(&file, a);
    assert_eq!(register.last_applied().unwrap().sequence, older);
    assert_ne!(
        every_product_of(&register),
        shop.products(),
        "it holds less"
    );

    let (verdicts, pass) = one_round(&mut shop, &mut register);
    let first = verdicts.first().expect("it says where it stands at once");
    assert_eq!(
        first["applied"], "older than the last applied: provisioned again",
        "{verdicts:?}"
    );
    assert_eq!(pass["provisioned"], 1, "{pass}");
    assert_holds_what_it_should(&mut shop, &register);

    // It says so, and the server counts it holding everything again.
    assert_counted_holding_everything(&mut shop, &mut register);
}

#[test]
fn a_register_set_up_again_under_its_id_is_provisioned_again_within_one_round() {
    let mut shop = Shop::open();
    let (a, register) = a_register_caught_up(&mut shop);
    let file = shop.file_of(a);

    // The device is set up again: an empty file, the same id.
    put_back(register, &file, None);
    let mut register = open_register(&file, a);
    assert_eq!(register.last_applied().unwrap().sequence, 0);
    assert!(every_product_of(&register).is_empty());

    let (verdicts, pass) = one_round(&mut shop, &mut register);
    assert_eq!(pass["provisioned"], 1, "{verdicts:?} {pass}");
    assert_holds_what_it_should(&mut shop, &register);

    assert_counted_holding_everything(&mut shop, &mut register);
}

#[test]
fn a_register_opened_again_with_nothing_changed_is_not_provisioned_again() {
    let mut shop = Shop::open();
    let (a, register) = a_register_caught_up(&mut shop);
    let file = shop.file_of(a);
    let before = record_of(&mut shop, a);

    // Its program stops and starts again on the same file.
    drop(register);
    let mut register = open_register(&file, a);
    let (verdicts, pass) = one_round(&mut shop, &mut register);
    assert_eq!(verdicts.len(), 1, "one Up: where it stands; {verdicts:?}");
    assert_eq!(verdicts[0]["applied"], "already counted", "{verdicts:?}");
    assert!(
        pass["provisioned"].as_i64().unwrap_or(0) == 0,
        "not provisioned again: {pass}"
    );
    assert_eq!(record_of(&mut shop, a), before);
    assert_holds_what_it_should(&mut shop, &register);
    assert!(
        report(&mut shop.pg, &mut register).is_empty(),
        "nothing more to say"
    );
}

//! Rows no message can carry are set aside and planned around, and come
//! back by themselves once they can go.

mod common;

use common::*;

/// A name longer than a message of the smallest size takes.
fn long_name() -> String {
    "x".repeat(6000)
}

#[test]
fn a_row_no_message_can_carry_is_set_aside_and_the_rest_goes() {
    let mut shop = Shop::open();
    shop.run("ALTER DATABASE shop SET magic_sync.message_bytes = 4096");
    shop.reconnect();
    shop.run(
        "INSERT INTO shop.products (id, name, price_cents) VALUES (gen_random_uuid(), 'Tea', 250)",
    );
    shop.pg
        .execute(
            "INSERT INTO shop.products (id, name, price_cents) VALUES (gen_random_uuid(), $1, 1)",
            &[&long_name()],
        )
        .unwrap();
    let a = shop.add_register("Register 1");
    let mut register = open_register(&shop.file_of(a), a);

    let summary = shop.relay();
    assert_eq!(summary["set_aside"], 1, "{summary}");
    deliver(&mut shop.pg, &mut register);
    let held = held_by(&register);
    assert_eq!(held.len(), 1, "only the row that fits goes");
    assert_eq!(held[0].1, "Tea");
    let reason: String = shop
        .pg
        .query_one("SELECT reason FROM sync.quarantine", &[])
        .unwrap()
        .get(0);
    assert!(reason.contains("more than a message carries"), "{reason}");

    // Tried again after a deploy: still too large, set aside again.
    shop.run("SELECT sync.retry()");
    let summary = shop.relay();
    assert_eq!(summary["set_aside"], 1, "{summary}");

    // Fixed: it changes, and goes.
    shop.run("UPDATE shop.products SET name = 'Cake' WHERE price_cents = 1");
    let summary = shop.relay();
    assert_eq!(summary["set_aside"], 0, "{summary}");
    deliver(&mut shop.pg, &mut register);
    assert_each_holds_the_servers_products(&mut shop, std::slice::from_ref(&register));
}

#[test]
fn a_row_held_that_grows_too_large_is_taken_back() {
    let mut shop = Shop::open();
    shop.run("ALTER DATABASE shop SET magic_sync.message_bytes = 4096");
    shop.reconnect();
    shop.run(
        "INSERT INTO shop.products (id, name, price_cents) VALUES (gen_random_uuid(), 'Tea', 250)",
    );
    let a = shop.add_register("Register 1");
    let mut register = open_register(&shop.file_of(a), a);
    sync_all(&mut shop, std::slice::from_mut(&mut register));
    assert_eq!(held_by(&register).len(), 1);

    shop.pg
        .execute("UPDATE shop.products SET name = $1", &[&long_name()])
        .unwrap();
    let summary = shop.relay();
    assert_eq!(summary["set_aside"], 1, "{summary}");
    deliver(&mut shop.pg, &mut register);
    assert!(
        held_by(&register).is_empty(),
        "an older version it can no longer be sent is taken back"
    );
}

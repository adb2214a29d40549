//! Provisioning: a snapshot's messages, and the sweep at its end.

mod common;

use common::*;
use magic_sync_replica::{AppliedTable, Received};

#[test]
fn a_snapshot_of_two_messages_then_its_end_sweeps_rows_it_did_not_name() {
    let shop = Shop::new();
    // Rows the device had before, as it was set up: one the snapshot names,
    // one it does not.
    shop.connect()
        .execute_batch(&format!(
            "INSERT INTO products (id, name) VALUES (X'{}', 'old tea'), (X'{}', 'stale');",
            uuid(1).replace('-', ""),
            uuid(9).replace('-', "")
        ))
        .unwrap();
    let mut replica = shop.open();
    let mut server = Server::new();

    apply(
        &mut replica,
        &server.begin(vec![part("products").product(1, "tea", 3)]),
    );
    assert!(replica.last_applied().unwrap().snapshot.is_some());
    apply(
        &mut replica,
        &server.down(vec![part("products").product(2, "jam", 5)]),
    );
    let ended = apply(&mut replica, &server.end(&["products", "orders"]));

    assert_eq!(
        ended,
        Received::Ended {
            tables: vec!["products".into(), "orders".into()],
            swept: vec![AppliedTable {
                table: "products".into(),
                keys: vec![uuid(9)],
            }],
            rejected: vec![],
            wishes: vec![],
        }
    );
    assert_eq!(names(replica.connection()), ["tea", "jam"]);
    let applied = replica.last_applied().unwrap();
    assert_eq!(applied.snapshot, None);
    assert_eq!(applied.sequence, server.sequence);
    assert_eq!(
        count(
            replica.connection(),
            "SELECT count(*) FROM sync_snapshot_keys"
        ),
        0
    );
}

#[test]
fn the_sweep_leaves_tables_the_snapshot_did_not_cover() {
    let (_shop, mut replica, mut server) = provisioned();
    apply(&mut replica, &server.begin(vec![]));
    apply(&mut replica, &server.end(&["orders"]));
    assert_eq!(names(replica.connection()), ["tea", "jam"]);
}

#[test]
fn a_snapshot_of_nothing_is_its_end_alone_and_empties_the_tables() {
    let (_shop, mut replica, mut server) = provisioned();
    let ended = apply(&mut replica, &server.nothing(&["products"]));
    assert!(matches!(ended, Received::Ended { ref swept, .. } if swept[0].keys.len() == 2));
    assert!(names(replica.connection()).is_empty());
    assert_eq!(replica.last_applied().unwrap().sequence, server.sequence);
}

#[test]
fn a_new_snapshot_supersedes_the_one_in_progress() {
    let shop = Shop::new();
    let mut replica = shop.open();
    let mut server = Server::new();
    apply(
        &mut replica,
        &server.begin(vec![part("products").product(1, "tea", 3)]),
    );
    // The first snapshot is cut short; the next one names only product 2.
    apply(
        &mut replica,
        &server.begin(vec![part("products").product(2, "jam", 5)]),
    );
    apply(&mut replica, &server.end(&["products"]));
    assert_eq!(names(replica.connection()), ["jam"]);
}

#[test]
fn a_snapshot_of_a_new_epoch_is_taken_whatever_came_before() {
    let (_shop, mut replica, mut server) = provisioned();
    server.new_epoch();
    apply(
        &mut replica,
        &server.begin(vec![part("products").product(3, "rye", 2)]),
    );
    apply(&mut replica, &server.end(&["products"]));
    assert_eq!(names(replica.connection()), ["rye"]);
    assert_eq!(replica.last_applied().unwrap().epoch, server.epoch);
}

#[test]
fn a_row_the_snapshot_refused_is_named_and_not_swept() {
    let (_shop, mut replica, mut server) = provisioned();
    // Product 1 comes again with a price its check refuses: it keeps what it had.
    apply(
        &mut replica,
        &server.begin(vec![part("products")
            .product(1, "tea", -1)
            .product(2, "jam", 5)]),
    );
    apply(&mut replica, &server.end(&["products"]));
    assert_eq!(names(replica.connection()), ["tea", "jam"]);
}

#[test]
fn rejections_recorded_before_the_snapshot_began_are_dropped_at_its_end() {
    let (_shop, mut replica, mut server) = provisioned();
    apply(
        &mut replica,
        &server.down(vec![part("products").product(1, "tea", -1)]),
    );
    assert_eq!(
        count(replica.connection(), "SELECT count(*) FROM sync_rejections"),
        1
    );
    apply(
        &mut replica,
        &server.begin(vec![part("products").product(2, "jam", -2)]),
    );
    apply(&mut replica, &server.end(&["products"]));
    let kept = strings(replica.connection(), "SELECT key FROM sync_rejections");
    assert_eq!(
        kept,
        [uuid(2)],
        "only the rejection made during the snapshot stands"
    );
}

#[test]
fn a_snapshot_of_a_new_epoch_forgets_the_old_epochs_rejections_of_tables_not_held() {
    let (_shop, mut replica, mut server) = provisioned();
    apply(
        &mut replica,
        &server.down(vec![
            part("suppliers").row("1", serde_json::json!({"id": 1}))
        ]),
    );
    assert_eq!(
        count(replica.connection(), "SELECT count(*) FROM sync_rejections"),
        1
    );
    server.new_epoch();
    apply(&mut replica, &server.nothing(&["products"]));
    assert_eq!(
        count(replica.connection(), "SELECT count(*) FROM sync_rejections"),
        0
    );
}

/// A database a build of version 2 of the engine's tables left in the
/// middle of a snapshot (its keys one row per key) is brought up by
/// `install`, and the snapshot's end keeps every row those keys named.
#[test]
fn a_snapshot_in_progress_survives_the_engines_tables_brought_up() {
    let shop = Shop::new();
    let mut replica = shop.open();
    let mut server = Server::new();
    apply(
        &mut replica,
        &server.begin(vec![part("products")
            .product(1, "tea", 3)
            .product(2, "jam", 5)
            .product(3, "rye", 2)]),
    );
    apply(&mut replica, &server.end(&["products"]));
    apply(
        &mut replica,
        &server.begin(vec![part("products").product(1, "tea", 3)]),
    );
    drop(replica);
    // As version 2 kept it: a row per key.
    let conn = shop.connect();
    conn.execute_batch(&format!(
        "DROP TABLE sync_snapshot_keys;
         CREATE TABLE sync_snapshot_keys (
             table_name TEXT NOT NULL,
             key        TEXT NOT NULL,
             PRIMARY KEY (table_name, key)
         ) WITHOUT ROWID;
         INSERT INTO sync_snapshot_keys VALUES ('products', '{}'), ('products', '{}');
         UPDATE sync_schema SET version = 2;",
        uuid(1),
        uuid(2)
    ))
    .unwrap();
    drop(conn);
    let mut replica = shop.open();
    apply(
        &mut replica,
        &server.down(vec![part("products").product(4, "oat", 1)]),
    );
    let ended = apply(&mut replica, &server.end(&["products"]));
    assert!(
        matches!(&ended, Received::Ended { swept, .. } if swept[0].keys == [uuid(3)]),
        "{ended:?}"
    );
    assert_eq!(names(replica.connection()), ["tea", "jam", "oat"]);
}

#[test]
fn an_end_naming_tables_the_replica_does_not_hold_from_the_server_sweeps_none_of_them() {
    let (_shop, mut replica, mut server) = provisioned();
    write_receipt(replica.connection(), &receipt(1), 1, 3);
    apply(
        &mut replica,
        &server.begin(vec![part("products").product(1, "tea", 3)]),
    );
    // Its own receipts, and a table it has never heard of.
    let ended = apply(
        &mut replica,
        &server.end(&["products", "receipts", "ghosts"]),
    );
    assert_eq!(
        ended,
        Received::Ended {
            tables: vec!["products".into(), "receipts".into(), "ghosts".into()],
            swept: vec![AppliedTable {
                table: "products".into(),
                keys: vec![uuid(2)],
            }],
            rejected: vec![],
            wishes: vec![],
        }
    );
    assert_eq!(
        count(replica.connection(), "SELECT count(*) FROM receipts"),
        1
    );
    let applied = replica.last_applied().unwrap();
    assert_eq!(
        (applied.snapshot, applied.sequence),
        (None, server.sequence)
    );
}

//! Retired rows (protocol §4.3): kept for what of the replica's own points
//! at them, let go of once nothing does.

mod common;

use common::*;
use magic_sync_replica::{Received, Table, Tables};
use serde_json::json;

const RETIRED: &str = "SELECT count(*) FROM products WHERE retired_at IS NOT NULL";

#[test]
fn a_row_a_row_of_its_own_points_at_is_retired_not_deleted() {
    let (_shop, mut replica, mut server) = provisioned();
    write_receipt(replica.connection(), &receipt(1), 1, 3);
    let received = apply(
        &mut replica,
        &server.down(vec![part("products").delete(&uuid(1)).delete(&uuid(2))]),
    );
    assert!(
        matches!(received, Received::Applied { ref tables, ref rejected, .. } if tables[0].keys.len() == 2 && rejected.is_empty()),
        "{received:?}"
    );
    assert_eq!(names(replica.connection()), ["tea"]);
    assert_eq!(count(replica.connection(), RETIRED), 1);
    assert_eq!(
        count(replica.connection(), "SELECT count(*) FROM receipts"),
        1,
        "the receipt keeps its product"
    );
}

#[test]
fn a_retired_row_nothing_points_at_any_more_is_let_go_after_the_next_message() {
    let (_shop, mut replica, mut server) = provisioned();
    write_receipt(replica.connection(), &receipt(1), 1, 3);
    apply(
        &mut replica,
        &server.down(vec![part("products").delete(&uuid(1))]),
    );
    replica
        .connection()
        .execute("DELETE FROM receipts", [])
        .unwrap();
    assert_eq!(count(replica.connection(), RETIRED), 1);
    apply(
        &mut replica,
        &server.down(vec![part("products").product(2, "plum jam", 6)]),
    );
    assert_eq!(names(replica.connection()), ["plum jam"]);
}

#[test]
fn a_retired_row_holds_the_doomed_rows_it_points_at() {
    let shop = Shop::with_schema(
        "CREATE TABLE nodes (id INTEGER PRIMARY KEY, parent INTEGER REFERENCES nodes (id), gone TEXT);
         CREATE TABLE marks (id INTEGER PRIMARY KEY, node INTEGER REFERENCES nodes (id));",
    );
    let tables = Tables::new(vec![
        Table::catalog("nodes").retired("gone"),
        Table::record("marks"),
    ]);
    let mut replica = shop.open_with(tables);
    let mut server = Server::new();
    apply(
        &mut replica,
        &server.begin(vec![part("nodes")
            .row("1", json!({"id": 1, "parent": null}))
            .row("2", json!({"id": 2, "parent": 1}))
            .row("3", json!({"id": 3, "parent": null}))]),
    );
    apply(&mut replica, &server.end(&["nodes"]));
    replica
        .connection()
        .execute("INSERT INTO marks VALUES (1, 2)", [])
        .unwrap();
    apply(
        &mut replica,
        &server.down(vec![part("nodes").delete("1").delete("2").delete("3")]),
    );
    let kept = strings(
        replica.connection(),
        "SELECT id || ':' || (gone IS NOT NULL) FROM nodes ORDER BY id",
    );
    assert_eq!(kept, ["1:1", "2:1"], "2 is marked, and holds its parent 1");
}

#[test]
fn with_nothing_to_retire_it_by_the_row_is_kept_and_rejected() {
    let shop = Shop::with_schema(
        "CREATE TABLE shelves (id INTEGER PRIMARY KEY);
         CREATE TABLE labels (id INTEGER PRIMARY KEY, shelf INTEGER REFERENCES shelves (id));",
    );
    let tables = Tables::new(vec![Table::catalog("shelves"), Table::record("labels")]);
    let mut replica = shop.open_with(tables);
    let mut server = Server::new();
    apply(
        &mut replica,
        &server.begin(vec![part("shelves").row("1", json!({"id": 1}))]),
    );
    apply(&mut replica, &server.end(&["shelves"]));
    replica
        .connection()
        .execute("INSERT INTO labels VALUES (1, 1)", [])
        .unwrap();
    let received = apply(
        &mut replica,
        &server.down(vec![part("shelves").delete("1")]),
    );
    let Received::Applied { rejected, .. } = received else {
        unreachable!()
    };
    assert!(
        rejected[0].reason.contains("no retired column"),
        "{}",
        rejected[0].reason
    );
    assert_eq!(
        count(replica.connection(), "SELECT count(*) FROM shelves"),
        1
    );
}

#[test]
fn a_sweep_retires_too() {
    let (_shop, mut replica, mut server) = provisioned();
    write_receipt(replica.connection(), &receipt(1), 2, 5);
    apply(&mut replica, &server.nothing(&["products"]));
    assert_eq!(names(replica.connection()), ["jam"]);
    assert_eq!(count(replica.connection(), RETIRED), 1);
}

#[test]
fn a_unique_index_holding_retired_rows_is_refused() {
    let shop = Shop::with_schema(
        "CREATE TABLE items (id INTEGER PRIMARY KEY, code TEXT UNIQUE, gone TEXT);",
    );
    let mut conn = shop.connect();
    let error = magic_sync_replica::install(
        &mut conn,
        &Tables::new(vec![Table::catalog("items").retired("gone")]),
    )
    .unwrap_err()
    .to_string();
    assert!(
        error.contains("holds the values of retired rows"),
        "{error}"
    );
}

//! A column added travels in two steps at different times: the server's
//! migration, and each register's new build (issue 36). A build that lacks
//! a column the server sends keeps applying the table's rows, the column
//! ignored (protocol 4.0: a side ignores fields it does not know; section
//! 3: each table travels in its own encoding). A build says, once per open
//! and beside where it stands, the columns it holds of each table the
//! server sends it, so the server can tell a column it sends that the
//! build holds now and did not before (docs/src/protocol.md).

mod common;

use common::*;
use magic_sync_replica::proto::wire::TableColumns;
use magic_sync_replica::{Received, Table, Tables};
use serde_json::json;

/// The same shop, in a build whose products have one more column.
const SHOP_WITH_VAT: &str = "
    ALTER TABLE products ADD COLUMN vat_rate INTEGER;
";

fn columns_of(up: &magic_sync_replica::proto::wire::Up, table: &str) -> Option<Vec<String>> {
    up.columns
        .iter()
        .find(|c| c.table == table)
        .map(|c| c.columns.clone())
}

#[test]
fn a_replica_that_opens_says_the_columns_it_holds_of_each_table_the_server_sends_it() {
    let shop = Shop::new();
    let mut replica = shop.open();
    let up = say(&mut replica).expect("where it stands, at once");
    assert_eq!(
        up.columns,
        vec![
            TableColumns {
                table: "products".into(),
                // Not retired_at: the replica's own, which no server sends.
                columns: ["id", "name", "price", "weight", "active", "note"]
                    .map(String::from)
                    .to_vec(),
            },
            TableColumns {
                table: "orders".into(),
                columns: ["id", "product_id", "qty"].map(String::from).to_vec(),
            },
        ],
        "the tables the server sends, not the records that go up"
    );
    assert!(
        say(&mut replica).is_none(),
        "said once per open, not on every Up"
    );
}

#[test]
fn a_build_that_added_a_column_says_it_the_next_time_it_opens() {
    let shop = Shop::new();
    let mut replica = shop.open();
    say(&mut replica).unwrap();
    let conn = replica.into_connection();
    conn.execute_batch(SHOP_WITH_VAT).unwrap();
    drop(conn);

    let mut replica = shop.open();
    let up = say(&mut replica).expect("where it stands, at once");
    let products = columns_of(&up, "products").unwrap();
    assert!(products.iter().any(|c| c == "vat_rate"), "{products:?}");
    assert!(
        replica.next_up().unwrap().is_none(),
        "and nothing more once said"
    );
}

#[test]
fn a_row_with_a_column_this_build_does_not_hold_is_applied_without_it() {
    let (shop, mut replica, mut server) = provisioned();
    let id = uuid(1);
    let row = json!({"id": id, "name": "green tea", "price": "4", "vat_rate": 7});
    let received = apply(
        &mut replica,
        &server.down(vec![part("products").row(&id, row)]),
    );
    let Received::Applied { rejected, .. } = &received else {
        panic!("{received:?}");
    };
    assert!(rejected.is_empty(), "nothing refused: {received:?}");
    let conn = shop.connect();
    assert_eq!(names(&conn), vec!["green tea", "jam"]);
    assert_eq!(
        count(&conn, "SELECT price FROM products WHERE name = 'green tea'"),
        4
    );
    let up = say(&mut replica).expect("it says what it applied");
    assert!(up.rejected.is_empty(), "{up:?}");
}

#[test]
fn a_build_holding_the_column_takes_its_values_and_before_that_holds_it_empty() {
    let shop = Shop::with_schema(&format!("{SHOP}{SHOP_WITH_VAT}"));
    let tables = Tables::new(vec![
        Table::catalog("products").retired("retired_at"),
        Table::catalog("orders"),
        Table::record("receipts").origin("register_id"),
    ]);
    let mut replica = shop.open_with(tables);
    let mut server = Server::new();
    // A server that does not send the column yet.
    apply(
        &mut replica,
        &server.begin(vec![part("products").product(1, "tea", 3)]),
    );
    apply(&mut replica, &server.end(&["products", "orders"]));
    let conn = shop.connect();
    assert_eq!(
        count(
            &conn,
            "SELECT count(*) FROM products WHERE vat_rate IS NULL"
        ),
        1
    );
    // Then one that does.
    let id = uuid(1);
    let row = json!({"id": id, "name": "tea", "price": "3", "vat_rate": 7});
    apply(
        &mut replica,
        &server.down(vec![part("products").row(&id, row)]),
    );
    assert_eq!(count(&conn, "SELECT vat_rate FROM products"), 7);
}

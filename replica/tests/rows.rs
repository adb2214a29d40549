//! Applying a Down's rows: upserts, deletes, and the rows the replica
//! cannot take.

mod common;

use common::*;
use magic_sync_replica::{AppliedTable, Received, Rejected, Table, Tables};
use rusqlite::types::Value as SqlValue;
use serde_json::json;

#[test]
fn an_upsert_overwrites_the_stored_row() {
    let (_shop, mut replica, mut server) = provisioned();
    let received = apply(
        &mut replica,
        &server.down(vec![part("products").product(1, "green tea", 4)]),
    );
    assert_eq!(
        received,
        Received::Applied {
            tables: vec![AppliedTable {
                table: "products".into(),
                keys: vec![uuid(1)],
            }],
            rejected: vec![],
            wishes: vec![],
        }
    );
    assert_eq!(names(replica.connection()), ["green tea", "jam"]);
    let price = count(
        replica.connection(),
        "SELECT price FROM products WHERE name = 'green tea'",
    );
    assert_eq!(price, 4);
}

#[test]
fn columns_the_row_does_not_carry_are_left_alone() {
    let (_shop, mut replica, mut server) = provisioned();
    let id = uuid(1);
    apply(
        &mut replica,
        &server.down(vec![
            part("products").row(&id, json!({"id": id, "name": "tea", "note": "shelf 3"}))
        ]),
    );
    apply(
        &mut replica,
        &server.down(vec![part("products").product(1, "green tea", 4)]),
    );
    let notes = strings(
        replica.connection(),
        "SELECT note FROM products WHERE name = 'green tea'",
    );
    assert_eq!(notes, ["shelf 3"]);
}

#[test]
fn an_upsert_makes_a_retired_row_live_again() {
    let (_shop, mut replica, mut server) = provisioned();
    write_receipt(replica.connection(), &receipt(1), 1, 3);
    write_receipt(replica.connection(), &receipt(2), 2, 5);
    apply(
        &mut replica,
        &server.down(vec![part("products").delete(&uuid(1)).delete(&uuid(2))]),
    );
    let retired = "SELECT count(*) FROM products WHERE retired_at IS NOT NULL";
    assert_eq!(count(replica.connection(), retired), 2);
    apply(
        &mut replica,
        &server.down(vec![part("products").product(1, "tea", 3)]),
    );
    assert_eq!(
        count(replica.connection(), retired),
        1,
        "only the row sent again became live"
    );
}

#[test]
fn a_delete_deletes() {
    let (_shop, mut replica, mut server) = provisioned();
    apply(
        &mut replica,
        &server.down(vec![part("products").delete(&uuid(1))]),
    );
    assert_eq!(names(replica.connection()), ["jam"]);
}

#[test]
fn a_delete_spelt_otherwise_is_the_same_key() {
    let (_shop, mut replica, mut server) = provisioned();
    let shouting = uuid(1).to_uppercase().replace('-', "");
    apply(
        &mut replica,
        &server.down(vec![part("products").delete(&shouting)]),
    );
    assert_eq!(names(replica.connection()), ["jam"]);
}

#[test]
fn deletes_come_before_upserts_in_a_part() {
    let (_shop, mut replica, mut server) = provisioned();
    apply(
        &mut replica,
        &server.down(vec![part("products")
            .product(1, "new tea", 3)
            .delete(&uuid(1))]),
    );
    assert_eq!(names(replica.connection()), ["new tea", "jam"]);
}

#[test]
fn rows_that_point_at_one_another_are_let_go_of_together() {
    let shop = Shop::with_schema(
        "CREATE TABLE nodes (id INTEGER PRIMARY KEY, parent INTEGER REFERENCES nodes (id));",
    );
    let tables = || Tables::new(vec![Table::catalog("nodes")]);
    let mut replica = shop.open_with(tables());
    let mut server = Server::new();
    apply(
        &mut replica,
        &server.begin(vec![part("nodes")
            .row("1", json!({"id": 1, "parent": null}))
            .row("2", json!({"id": 2, "parent": 1}))
            .row("3", json!({"id": 3, "parent": 3}))]),
    );
    apply(&mut replica, &server.end(&["nodes"]));
    // The parent's key comes first: one at a time, its child would hold it.
    apply(
        &mut replica,
        &server.down(vec![part("nodes").delete("1").delete("2").delete("3")]),
    );
    assert_eq!(count(replica.connection(), "SELECT count(*) FROM nodes"), 0);
    assert_eq!(
        count(replica.connection(), "SELECT count(*) FROM sync_rejections"),
        0
    );
}

#[test]
fn a_delete_of_a_key_that_does_not_parse_is_ignored_and_the_rest_applies() {
    let (_shop, mut replica, mut server) = provisioned();
    apply(
        &mut replica,
        &server.down(vec![part("products").delete("not-a-uuid").delete(&uuid(2))]),
    );
    assert_eq!(names(replica.connection()), ["tea"]);
    assert_eq!(
        count(replica.connection(), "SELECT count(*) FROM sync_rejections"),
        0
    );
}

/// The key rules spell a UUID part hyphenated or as bare hex digits, in
/// either case; these spellings they do not name.
fn uuid_spelt_otherwise(n: u128) -> [String; 2] {
    [format!("{{{}}}", uuid(n)), format!("urn:uuid:{}", uuid(n))]
}

#[test]
fn a_uuid_key_in_braces_does_not_parse_so_its_row_is_left_out_unreported() {
    for key in uuid_spelt_otherwise(5) {
        let (_shop, mut replica, mut server) = provisioned();
        let (_, row) = product(5, "oats", 2);
        let received = apply(
            &mut replica,
            &server.down(vec![part("products").row(&key, row).product(6, "rye", 4)]),
        );
        assert_eq!(
            received,
            Received::Applied {
                tables: vec![AppliedTable {
                    table: "products".into(),
                    keys: vec![uuid(6)],
                }],
                rejected: vec![],
                wishes: vec![],
            },
            "{key}: a key that cannot be told is logged, not reported"
        );
        assert_eq!(names(replica.connection()), ["tea", "jam", "rye"], "{key}");
    }
}

#[test]
fn a_delete_of_a_uuid_key_in_braces_does_not_parse_so_it_is_ignored() {
    for key in uuid_spelt_otherwise(1) {
        let (_shop, mut replica, mut server) = provisioned();
        apply(
            &mut replica,
            &server.down(vec![part("products").delete(&key).delete(&uuid(2))]),
        );
        assert_eq!(names(replica.connection()), ["tea"], "{key}");
        assert_eq!(
            count(replica.connection(), "SELECT count(*) FROM sync_rejections"),
            0
        );
    }
}

#[test]
fn json_values_are_stored_by_the_declared_sqlite_type() {
    let (_shop, mut replica, mut server) = provisioned();
    let id = uuid(5);
    apply(
        &mut replica,
        &server.down(vec![part("products").row(
            &id,
            json!({"id": id, "name": "oats", "price": "9007199254740993", "weight": 0.5,
                   "active": true, "note": {"shelf": 3}, "no_such_column": 1}),
        )]),
    );
    let row: Vec<SqlValue> = replica
        .connection()
        .query_row(
            "SELECT id, price, weight, active, note FROM products WHERE name = 'oats'",
            [],
            |r| (0..5).map(|i| r.get(i)).collect(),
        )
        .unwrap();
    let bytes = uuid::Uuid::parse_str(&id).unwrap().as_bytes().to_vec();
    assert_eq!(
        row,
        [
            SqlValue::Blob(bytes),
            SqlValue::Integer(9_007_199_254_740_993),
            SqlValue::Real(0.5),
            SqlValue::Integer(1),
            SqlValue::Text("{\"shelf\":3}".into()),
        ]
    );
}

#[test]
fn an_integer_key_is_decimal() {
    let (_shop, mut replica, mut server) = provisioned();
    let received = apply(
        &mut replica,
        &server.down(vec![
            part("orders").row("0042", json!({"id": 42, "qty": "3"}))
        ]),
    );
    assert!(matches!(received, Received::Applied { ref tables, .. } if tables[0].keys == ["42"]));
    assert_eq!(
        count(replica.connection(), "SELECT qty FROM orders WHERE id = 42"),
        3
    );
}

#[test]
fn a_row_the_database_refuses_is_rejected_and_the_rest_applies() {
    let (_shop, mut replica, mut server) = provisioned();
    let received = apply(
        &mut replica,
        &server.down(vec![part("products")
            .product(1, "tea", -5)
            .product(2, "plum jam", 6)]),
    );
    let Received::Applied {
        tables, rejected, ..
    } = received
    else {
        unreachable!()
    };
    assert_eq!(tables[0].keys, [uuid(2)]);
    assert_eq!(rejected.len(), 1);
    assert_eq!(rejected[0].key, uuid(1));
    assert!(
        rejected[0].reason.contains("CHECK"),
        "{}",
        rejected[0].reason
    );
    assert_eq!(
        names(replica.connection()),
        ["tea", "plum jam"],
        "the refused row is as it was"
    );

    let up = say(&mut replica).unwrap();
    assert_eq!(
        up.sequence, server.sequence,
        "the Up says the message was applied"
    );
    assert_eq!(up.rejected.len(), 1);
    let r = &up.rejected[0];
    assert_eq!(
        (r.table.as_str(), r.key.as_str()),
        ("products", uuid(1).as_str())
    );
    assert_eq!(
        (r.epoch.as_str(), r.sequence),
        (server.epoch.as_str(), server.sequence)
    );
}

#[test]
fn a_row_beside_another_key_is_rejected_under_the_key_beside_it() {
    let (_shop, mut replica, mut server) = provisioned();
    let (_, row) = product(3, "rye", 2);
    let received = apply(
        &mut replica,
        &server.down(vec![part("products")
            .row(&uuid(4), row)
            .product(2, "plum jam", 6)]),
    );
    let Received::Applied {
        tables, rejected, ..
    } = received
    else {
        unreachable!()
    };
    assert_eq!(tables[0].keys, [uuid(2)]);
    assert_eq!(rejected[0].key, uuid(4));
    assert!(
        rejected[0].reason.starts_with("a_row_beside_another_key"),
        "{}",
        rejected[0].reason
    );
    assert_eq!(names(replica.connection()), ["tea", "plum jam"]);
}

#[test]
fn a_row_that_does_not_decode_is_rejected() {
    let (_shop, mut replica, mut server) = provisioned();
    let mut bad = part("products");
    bad.0.keys.push(uuid(1));
    bad.0.upserts.push(b"{not json".to_vec());
    let received = apply(&mut replica, &server.down(vec![bad]));
    assert!(matches!(received, Received::Applied { ref rejected, .. } if rejected.len() == 1));
}

#[test]
fn a_value_not_of_its_column_type_rejects_the_row() {
    let (_shop, mut replica, mut server) = provisioned();
    let id = uuid(1);
    let received = apply(
        &mut replica,
        &server.down(vec![
            part("products").row(&id, json!({"id": id, "name": "tea", "price": "dear"}))
        ]),
    );
    let Received::Applied { rejected, .. } = received else {
        unreachable!()
    };
    assert!(
        rejected[0].reason.contains("price"),
        "{}",
        rejected[0].reason
    );
}

#[test]
fn rows_of_a_table_the_replica_does_not_hold_are_rejected_and_its_deletes_ignored() {
    let (_shop, mut replica, mut server) = provisioned();
    let received = apply(
        &mut replica,
        &server.down(vec![
            part("suppliers").row("1", json!({"id": 1})).delete("2"),
            part("receipts").row(&uuid(8), json!({"id": uuid(8), "total": 1})),
            part("products").product(2, "plum jam", 6),
        ]),
    );
    let Received::Applied {
        tables, rejected, ..
    } = received
    else {
        unreachable!()
    };
    assert_eq!(tables.len(), 1);
    let rejected: Vec<(&str, &str)> = rejected
        .iter()
        .map(|r| (r.table.as_str(), r.key.as_str()))
        .collect();
    assert_eq!(
        rejected,
        [("suppliers", "1"), ("receipts", uuid(8).as_str())]
    );
    assert_eq!(
        count(replica.connection(), "SELECT count(*) FROM receipts"),
        0
    );
    assert_eq!(names(replica.connection()), ["tea", "plum jam"]);

    // Rows it holds no copy of are forgotten once reported.
    assert_eq!(say(&mut replica).unwrap().rejected.len(), 2);
    assert_eq!(
        count(replica.connection(), "SELECT count(*) FROM sync_rejections"),
        0
    );
}

#[test]
fn a_refused_row_is_taken_once_the_row_it_points_at_is_in() {
    let (_shop, mut replica, mut server) = provisioned();
    let child = json!({"id": "1", "product_id": uuid(3), "qty": 1});
    // The order comes before its product in the part's own order: refused,
    // then taken on the retry once the whole message is in.
    apply(
        &mut replica,
        &server.down(vec![
            part("orders").row("1", child),
            part("products").product(3, "rye", 2),
        ]),
    );
    assert_eq!(
        count(replica.connection(), "SELECT count(*) FROM orders"),
        1
    );
    assert_eq!(
        count(replica.connection(), "SELECT count(*) FROM sync_rejections"),
        0
    );
}

#[test]
fn a_later_row_with_the_same_key_is_the_one() {
    let (_shop, mut replica, mut server) = provisioned();
    apply(
        &mut replica,
        &server.down(vec![part("products")
            .product(1, "bad", -1)
            .product(1, "good", 1)]),
    );
    assert_eq!(names(replica.connection()), ["good", "jam"]);
    assert_eq!(
        count(replica.connection(), "SELECT count(*) FROM sync_rejections"),
        0
    );
}

#[test]
fn a_row_taken_later_forgets_its_rejection() {
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
        &server.down(vec![part("products").product(1, "tea", 1)]),
    );
    assert_eq!(
        count(replica.connection(), "SELECT count(*) FROM sync_rejections"),
        0
    );
}

#[test]
fn a_row_whose_trigger_rolls_back_everything_is_rejected_and_the_rest_applies() {
    let (_shop, mut replica, mut server) = provisioned();
    replica
        .connection()
        .execute_batch(
            "CREATE TRIGGER no_plums BEFORE UPDATE ON products WHEN new.name LIKE '%plum%'
             BEGIN SELECT RAISE(ROLLBACK, 'no plums here'); END;",
        )
        .unwrap();
    let received = apply(
        &mut replica,
        &server.down(vec![part("products")
            .product(1, "green tea", 4)
            .product(2, "plum jam", 6)]),
    );
    let Received::Applied {
        tables, rejected, ..
    } = received
    else {
        unreachable!()
    };
    assert_eq!(tables[0].keys, [uuid(1)]);
    assert_eq!(
        rejected,
        [Rejected {
            table: "products".into(),
            key: uuid(2),
            reason: "the row ended the transaction: no plums here".into(),
            held_back: false,
        }]
    );
    assert_eq!(names(replica.connection()), ["green tea", "jam"]);
    assert_eq!(replica.last_applied().unwrap().sequence, server.sequence);
}

#[test]
fn a_delete_the_database_refuses_is_kept_and_rejected() {
    let (_shop, mut replica, mut server) = provisioned();
    replica
        .connection()
        .execute_batch(
            "CREATE TRIGGER keep_jam BEFORE DELETE ON products WHEN old.name = 'jam'
             BEGIN SELECT RAISE(ABORT, 'jam stays'); END;",
        )
        .unwrap();
    let received = apply(
        &mut replica,
        &server.down(vec![part("products").delete(&uuid(1)).delete(&uuid(2))]),
    );
    let Received::Applied {
        tables, rejected, ..
    } = received
    else {
        unreachable!()
    };
    assert_eq!(tables[0].keys, [uuid(1)]);
    assert_eq!(rejected[0].key, uuid(2));
    assert_eq!(names(replica.connection()), ["jam"]);
}

#[test]
fn a_message_the_database_refuses_at_commit_applies_with_its_rows_rejected() {
    let shop = Shop::with_schema(
        "CREATE TABLE products (id BLOB PRIMARY KEY, name TEXT);
         CREATE TABLE orders (
             id INTEGER PRIMARY KEY,
             product_id BLOB REFERENCES products (id) DEFERRABLE INITIALLY DEFERRED
         );",
    );
    let tables = || Tables::new(vec![Table::catalog("products"), Table::catalog("orders")]);
    let mut replica = shop.open_with(tables());
    let mut server = Server::new();
    // The order points at a product the replica does not hold: the foreign
    // key is checked only at commit.
    let received = replica
        .receive(&server.begin(vec![
            part("orders").row("1", json!({"id": 1, "product_id": uuid(3)})),
        ]))
        .unwrap();
    let Received::Applied {
        tables, rejected, ..
    } = received
    else {
        panic!("{received:?}")
    };
    assert!(tables.is_empty());
    assert_eq!(rejected.len(), 1);
    assert!(
        rejected[0].reason.contains("point at a row of products"),
        "{}",
        rejected[0].reason
    );
    assert_eq!(
        count(replica.connection(), "SELECT count(*) FROM orders"),
        0
    );
    assert_eq!(replica.last_applied().unwrap().sequence, server.sequence);
    apply(&mut replica, &server.end(&["products", "orders"]));
}

#[test]
fn a_database_that_fails_is_an_error_and_nothing_is_applied() {
    let (shop, replica, mut server) = provisioned();
    let before = replica.last_applied().unwrap();
    drop(replica);
    let conn = rusqlite::Connection::open_with_flags(
        shop.path(),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    conn.execute_batch("PRAGMA recursive_triggers = ON")
        .unwrap();
    let mut replica =
        magic_sync_replica::Replica::open(conn, common::tables(), me(), Default::default())
            .unwrap();
    let bytes = server.down(vec![part("products").product(1, "green tea", 4)]);
    let error = replica.receive(&bytes).unwrap_err();
    assert!(
        matches!(error, magic_sync_replica::Error::Storage(_)),
        "{error}"
    );
    drop(replica);

    let mut replica = shop.open();
    assert_eq!(replica.last_applied().unwrap(), before);
    // Delivered again, it applies.
    apply(&mut replica, &bytes);
    assert_eq!(names(replica.connection()), ["green tea", "jam"]);
}

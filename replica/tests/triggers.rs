//! The engine's triggers: what install writes, what check refuses, what
//! the triggers note and refuse.

mod common;

use common::*;
use magic_sync_replica::{
    check_triggers, install, triggers, Error, Replica, Settings, Table, Tables,
};

fn refused(result: rusqlite::Result<usize>) -> String {
    match result {
        Err(e) => e.to_string(),
        Ok(_) => panic!("the write was taken"),
    }
}

#[test]
fn install_writes_the_triggers_check_takes() {
    let shop = Shop::new();
    let mut conn = shop.connect();
    install(&mut conn, &tables()).unwrap();
    check_triggers(&conn, &tables()).unwrap();
    let printed = triggers(&conn, &tables()).unwrap();
    assert!(
        printed.contains("CREATE TRIGGER \"sync_receipts_note_insert\""),
        "{printed}"
    );
    assert!(
        printed.contains("CREATE TRIGGER \"sync_products_refuse_update\""),
        "{printed}"
    );
}

#[test]
fn check_refuses_a_missing_trigger_naming_the_table_and_printing_it() {
    let shop = Shop::new();
    let mut conn = shop.connect();
    install(&mut conn, &tables()).unwrap();
    conn.execute_batch("DROP TRIGGER sync_receipts_note_delete")
        .unwrap();
    let error = check_triggers(&conn, &tables()).unwrap_err();
    assert!(matches!(error, Error::Triggers(_)));
    let text = error.to_string();
    assert!(
        text.contains("table `receipts` lacks the trigger sync_receipts_note_delete"),
        "{text}"
    );
    assert!(text.contains("AFTER DELETE ON \"receipts\""), "{text}");
    let open = Replica::open(conn, tables(), me(), Settings::default());
    assert!(matches!(open, Err(Error::Triggers(_))));
}

#[test]
fn check_refuses_a_trigger_written_otherwise_and_one_not_called_for() {
    let shop = Shop::new();
    let mut conn = shop.connect();
    install(&mut conn, &tables()).unwrap();
    conn.execute_batch(
        "DROP TRIGGER sync_receipts_note_insert;
         CREATE TRIGGER sync_receipts_note_insert AFTER INSERT ON receipts BEGIN SELECT 1; END;
         CREATE TRIGGER sync_orders_extra AFTER INSERT ON orders BEGIN SELECT 1; END;",
    )
    .unwrap();
    let text = check_triggers(&conn, &tables()).unwrap_err().to_string();
    assert!(
        text.contains("sync_receipts_note_insert written otherwise"),
        "{text}"
    );
    assert!(
        text.contains("table `orders` has the trigger sync_orders_extra"),
        "{text}"
    );
}

#[test]
fn a_trigger_pasted_with_other_whitespace_is_the_same() {
    let shop = Shop::new();
    let mut conn = shop.connect();
    install(&mut conn, &tables()).unwrap();
    let script = triggers(&conn, &tables()).unwrap();
    let drops: String = rusqlite_names(&conn)
        .iter()
        .map(|n| format!("DROP TRIGGER \"{n}\";"))
        .collect();
    conn.execute_batch(&drops).unwrap();
    conn.execute_batch(&script.replace('\n', "\n\t  ")).unwrap();
    check_triggers(&conn, &tables()).unwrap();
}

fn rusqlite_names(conn: &rusqlite::Connection) -> Vec<String> {
    strings(
        conn,
        "SELECT name FROM sqlite_schema WHERE type = 'trigger' AND name LIKE 'sync%'",
    )
}

#[test]
fn a_write_the_engine_did_not_make_to_a_table_the_server_sends_is_refused() {
    let (_shop, replica, _server) = provisioned();
    let conn = replica.connection();
    let text = refused(conn.execute("UPDATE products SET name = 'mine'", []));
    assert!(text.contains("products is written by the server"), "{text}");
    refused(conn.execute("DELETE FROM products", []));
    refused(conn.execute("INSERT INTO orders (id) VALUES (1)", []));
    assert_eq!(names(conn), ["tea", "jam"]);
}

#[test]
fn until_the_replica_knows_its_id_nothing_is_refused() {
    let shop = Shop::new();
    let mut conn = shop.connect();
    install(&mut conn, &tables()).unwrap();
    // Setting the device up: a placeholder the provisioning will set right.
    conn.execute("INSERT INTO orders (id, qty) VALUES (1, 1)", [])
        .unwrap();
    conn.execute("UPDATE orders SET qty = 2", []).unwrap();
    // What it wrote to its own tables is noted, to go up once it knows.
    conn.execute("INSERT INTO receipts (id) VALUES (?1)", [receipt(1)])
        .unwrap();
    assert_eq!(
        strings(&conn, "SELECT table_name FROM sync_notes"),
        ["receipts"]
    );
    let replica = Replica::open(conn, tables(), me(), Settings::default()).unwrap();
    refused(
        replica
            .connection()
            .execute("UPDATE orders SET qty = 3", []),
    );
}

#[test]
fn history_is_written_once() {
    let (_shop, replica, _server) = provisioned();
    let conn = replica.connection();
    write_receipt(conn, &receipt(1), 1, 3);
    let text = refused(conn.execute("UPDATE receipts SET total = 4", []));
    assert!(text.contains("receipts is history"), "{text}");
}

#[test]
fn a_created_column_is_written_once() {
    let shop = Shop::with_schema(
        "CREATE TABLE visits (id INTEGER PRIMARY KEY, register_id BLOB, v INTEGER, created_at TEXT);",
    );
    let tables = Tables::new(vec![Table::record("visits")
        .origin("register_id")
        .version("v")
        .created("created_at")]);
    let replica = shop.open_with(tables);
    let conn = replica.connection();
    conn.execute_batch("INSERT INTO visits VALUES (1, NULL, 1, 'monday')")
        .unwrap();
    conn.execute_batch("UPDATE visits SET v = 2").unwrap();
    let text = refused(conn.execute("UPDATE visits SET created_at = 'tuesday'", []));
    assert!(
        text.contains("created_at of visits is written once"),
        "{text}"
    );
}

#[test]
fn a_database_of_another_replica_is_refused() {
    let (shop, replica, _server) = provisioned();
    drop(replica);
    let mut conn = shop.connect();
    install(&mut conn, &tables()).unwrap();
    let other = uuid::Uuid::new_v4();
    let error = Replica::open(conn, tables(), other, Settings::default())
        .err()
        .unwrap()
        .to_string();
    assert!(error.contains("belongs to replica"), "{error}");
}

//! Installing the engine's tables, and what opening a replica refuses.

mod common;

use common::*;
use magic_sync_replica::{install, Error, Replica, Settings, Table, Tables, SCHEMA_VERSION};
use rusqlite::Connection;

fn refusal(conn: Connection, tables: Tables) -> String {
    match Replica::open(conn, tables, me(), Settings::default()) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("opened"),
    }
}

fn installed(shop: &Shop) -> Connection {
    let mut conn = shop.connect();
    install(&mut conn, &tables()).unwrap();
    conn
}

#[test]
fn install_creates_the_engine_tables_all_named_sync() {
    let shop = Shop::new();
    let conn = installed(&shop);
    let engine = strings(
        &conn,
        "SELECT name FROM sqlite_schema WHERE type = 'table'
         AND name NOT IN ('products', 'orders', 'receipts') AND name NOT LIKE 'sqlite_%' ORDER BY name",
    );
    assert_eq!(
        engine,
        [
            "sync_declarations",
            "sync_narrowing",
            "sync_notes",
            "sync_rejections",
            "sync_retired_for_edits",
            "sync_schema",
            "sync_snapshot_keys",
            "sync_state",
            "sync_uploads",
            "sync_wishes"
        ]
    );
    assert_eq!(
        count(&conn, "SELECT version FROM sync_schema"),
        SCHEMA_VERSION
    );
}

#[test]
fn install_is_idempotent() {
    let (shop, mut replica, _server) = provisioned();
    let sequence = replica.last_applied().unwrap().sequence;
    say(&mut replica);
    drop(replica);
    let mut conn = installed(&shop);
    install(&mut conn, &tables()).unwrap();
    let replica = Replica::open(conn, tables(), me(), Settings::default()).unwrap();
    assert_eq!(replica.last_applied().unwrap().sequence, sequence);
    assert_eq!(names(replica.connection()), ["tea", "jam"]);
}

#[test]
fn install_refuses_a_declaration_that_does_not_match_and_creates_nothing() {
    let shop = Shop::new();
    let mut conn = shop.connect();
    let error = install(&mut conn, &Tables::new(vec![Table::catalog("nowhere")])).unwrap_err();
    assert!(error.to_string().contains("nowhere"), "{error}");
    assert_eq!(
        count(
            &conn,
            "SELECT count(*) FROM sqlite_schema WHERE name LIKE 'sync_%'"
        ),
        0
    );
}

#[test]
fn open_refuses_a_database_without_the_engine_tables() {
    let shop = Shop::new();
    let error = refusal(shop.connect(), tables());
    assert!(error.contains("install"), "{error}");
}

#[test]
fn open_refuses_synchronous_normal() {
    let shop = Shop::new();
    let conn = installed(&shop);
    conn.execute_batch("PRAGMA synchronous = NORMAL").unwrap();
    let error = refusal(conn, tables());
    assert!(error.contains("PRAGMA synchronous is NORMAL"), "{error}");
}

#[test]
fn open_takes_synchronous_extra() {
    let shop = Shop::new();
    let conn = installed(&shop);
    conn.execute_batch("PRAGMA synchronous = EXTRA").unwrap();
    Replica::open(conn, tables(), me(), Settings::default()).unwrap();
}

#[test]
fn open_refuses_journal_mode_off() {
    let shop = Shop::new();
    let conn = installed(&shop);
    conn.execute_batch("PRAGMA journal_mode = OFF").unwrap();
    let error = refusal(conn, tables());
    assert!(error.contains("PRAGMA journal_mode is OFF"), "{error}");
}

#[test]
fn open_refuses_journal_mode_memory_on_a_file() {
    let shop = Shop::new();
    let conn = installed(&shop);
    conn.execute_batch("PRAGMA journal_mode = MEMORY").unwrap();
    let error = refusal(conn, tables());
    assert!(error.contains("PRAGMA journal_mode is MEMORY"), "{error}");
}

#[test]
fn open_takes_wal() {
    let shop = Shop::new();
    let conn = installed(&shop);
    conn.execute_batch("PRAGMA journal_mode = WAL").unwrap();
    Replica::open(conn, tables(), me(), Settings::default()).unwrap();
}

#[test]
fn open_takes_a_database_in_memory() {
    let mut conn = Connection::open_in_memory().unwrap();
    conn.execute_batch(&format!("{SHOP} PRAGMA recursive_triggers = ON;"))
        .unwrap();
    install(&mut conn, &tables()).unwrap();
    Replica::open(conn, tables(), me(), Settings::default()).unwrap();
}

#[test]
fn open_refuses_recursive_triggers_off() {
    let shop = Shop::new();
    let conn = installed(&shop);
    conn.execute_batch("PRAGMA recursive_triggers = OFF")
        .unwrap();
    let error = refusal(conn, tables());
    assert!(
        error.contains("PRAGMA recursive_triggers is OFF"),
        "{error}"
    );
}

#[test]
fn open_refuses_a_table_that_does_not_exist() {
    let shop = Shop::new();
    let conn = installed(&shop);
    let error = refusal(conn, Tables::new(vec![Table::catalog("suppliers")]));
    assert!(
        error.contains("table `suppliers` does not exist"),
        "{error}"
    );
}

#[test]
fn open_refuses_a_key_column_the_table_lacks() {
    let shop = Shop::new();
    let conn = installed(&shop);
    let error = refusal(
        conn,
        Tables::new(vec![Table::catalog("products").key(&["sku"])]),
    );
    assert!(
        error.contains("table `products` has no key column `sku`"),
        "{error}"
    );
}

#[test]
fn open_refuses_a_key_without_a_unique_index() {
    let shop = Shop::new();
    let conn = installed(&shop);
    let error = refusal(
        conn,
        Tables::new(vec![Table::catalog("orders").key(&["product_id"])]),
    );
    assert!(error.contains("unique index"), "{error}");
}

#[test]
fn a_declared_key_with_a_unique_index_is_taken() {
    let shop = Shop::with_schema(
        "CREATE TABLE items (rowid_alias INTEGER PRIMARY KEY, code INTEGER NOT NULL UNIQUE, name TEXT);",
    );
    let tables = || Tables::new(vec![Table::catalog("items").key(&["code"])]);
    let mut replica = shop.open_with(tables());
    let mut server = Server::new();
    apply(
        &mut replica,
        &server.begin(vec![
            part("items").row("12", serde_json::json!({"code": 12, "name": "a"}))
        ]),
    );
    apply(
        &mut replica,
        &server.down(vec![
            part("items").row("12", serde_json::json!({"code": 12, "name": "b"}))
        ]),
    );
    assert_eq!(
        strings(replica.connection(), "SELECT name FROM items"),
        ["b"]
    );
}

#[test]
fn open_refuses_a_table_without_a_key() {
    let shop = Shop::with_schema("CREATE TABLE loose (a TEXT);");
    let mut conn = shop.connect();
    let error = install(&mut conn, &Tables::new(vec![Table::catalog("loose")]))
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("table `loose` has no primary key"),
        "{error}"
    );
}

#[test]
fn open_refuses_a_table_named_like_the_engines() {
    let shop = Shop::new();
    let conn = installed(&shop);
    let error = refusal(conn, Tables::new(vec![Table::catalog("sync_state")]));
    assert!(error.contains("engine's own"), "{error}");
}

#[test]
fn open_refuses_a_retired_column_the_table_lacks() {
    let shop = Shop::new();
    let conn = installed(&shop);
    let error = refusal(
        conn,
        Tables::new(vec![Table::catalog("orders").retired("gone_at")]),
    );
    assert!(error.contains("no retired column `gone_at`"), "{error}");
}

#[test]
fn errors_are_of_their_kind() {
    let shop = Shop::new();
    let conn = installed(&shop);
    conn.execute_batch("PRAGMA synchronous = OFF").unwrap();
    assert!(matches!(
        Replica::open(conn, tables(), me(), Settings::default()),
        Err(Error::Connection(_))
    ));
    let conn = installed(&shop);
    assert!(matches!(
        Replica::open(
            conn,
            Tables::new(vec![Table::catalog("x")]),
            me(),
            Settings::default()
        ),
        Err(Error::Declaration(_))
    ));
}

#[test]
fn a_replica_may_move_to_another_thread() {
    fn send<T: Send>(_: &T) {}
    let (_shop, replica, _server) = provisioned();
    send(&replica);
}

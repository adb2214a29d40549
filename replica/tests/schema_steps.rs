//! The engine's tables move forward a step at a time and never back
//! (the book's "Upgrading"): `install` takes every step a database lacks in
//! one transaction, a host with migrations of its own runs `migration(n)`,
//! a database a later build upgraded is refused, and a register's file made
//! by the previous release opens with this build keeping every row, note
//! and upload.

mod common;

use common::*;
use magic_sync_replica::{install, migration, triggers, Error, Replica, Settings, SCHEMA_VERSION};
use rusqlite::Connection;

/// The engine's tables, indexes and triggers as the database defines them,
/// by name.
fn engine_schema(conn: &Connection) -> Vec<String> {
    strings(
        conn,
        "SELECT type || ' ' || name || ': ' || coalesce(sql, '') FROM sqlite_schema
         WHERE name LIKE 'sync%' ORDER BY type, name",
    )
}

/// Runs the migration for step `n` as a host's migration tool would: in a
/// transaction of its own.
fn migrate(conn: &mut Connection, n: i64) {
    let tx = conn.transaction().unwrap();
    tx.execute_batch(&migration(n).unwrap()).unwrap();
    tx.commit().unwrap();
}

/// Product 1, as the server would have sent it: what a receipt points at.
fn with_product_1(conn: &Connection) {
    as_the_engine(
        conn,
        "INSERT INTO products (id, name, price) VALUES (x'01960000000070008000000000000001', 'tea', 3)",
    );
}

fn version(conn: &Connection) -> i64 {
    count(conn, "SELECT version FROM sync_schema")
}

#[test]
fn a_hosts_own_migrations_running_each_step_make_the_tables_install_makes() {
    let by_install = Shop::new();
    let mut installed = by_install.connect();
    install(&mut installed, &tables()).unwrap();

    let by_migrations = Shop::new();
    let mut conn = by_migrations.connect();
    for n in 1..=SCHEMA_VERSION {
        migrate(&mut conn, n);
        assert_eq!(version(&conn), n, "step {n} records its version");
    }
    conn.execute_batch(&triggers(&conn, &tables()).unwrap())
        .unwrap();

    assert_eq!(engine_schema(&conn), engine_schema(&installed));
    let mut replica = Replica::open(conn, tables(), me(), Settings::default()).unwrap();
    with_product_1(replica.connection());
    write_receipt(replica.connection(), &receipt(1), 1, 300);
    assert!(say(&mut replica).is_some(), "the receipt goes up");
}

#[test]
fn a_step_this_build_does_not_have_is_refused_naming_the_steps_it_has() {
    for n in [0, -1, SCHEMA_VERSION + 1] {
        match migration(n) {
            Err(Error::Schema(text)) => assert_eq!(
                text,
                format!("there is no step {n}: this build's steps are 1 to {SCHEMA_VERSION}")
            ),
            other => panic!("step {n}: {other:?}"),
        }
    }
}

#[test]
fn install_takes_the_steps_an_earlier_build_left_keeping_what_was_written() {
    let shop = Shop::new();
    let mut conn = shop.connect();
    // A database an earlier build made: every step but the last, its
    // triggers, and a receipt written and noted.
    for n in 1..SCHEMA_VERSION {
        migrate(&mut conn, n);
    }
    conn.execute_batch(&triggers(&conn, &tables()).unwrap())
        .unwrap();
    with_product_1(&conn);
    write_receipt(&conn, &receipt(1), 1, 300);
    let notes = count(&conn, "SELECT count(*) FROM sync_notes");
    assert_eq!(notes, 1);
    match Replica::open(shop.connect(), tables(), me(), Settings::default()) {
        Err(Error::Schema(text)) => assert!(
            text.contains(&format!(
                "at version {} and this build needs {SCHEMA_VERSION}",
                SCHEMA_VERSION - 1
            )),
            "{text}"
        ),
        Err(other) => panic!("{other:?}"),
        Ok(_) => panic!("opened a database an earlier build left"),
    }

    install(&mut conn, &tables()).unwrap();
    assert_eq!(version(&conn), SCHEMA_VERSION);
    assert_eq!(count(&conn, "SELECT count(*) FROM sync_notes"), notes);
    let fresh = Shop::new();
    let mut fresh_conn = fresh.connect();
    install(&mut fresh_conn, &tables()).unwrap();
    assert_eq!(engine_schema(&conn), engine_schema(&fresh_conn));

    let mut replica = Replica::open(conn, tables(), me(), Settings::default()).unwrap();
    let up = say(&mut replica).expect("the receipt noted before goes up");
    assert_eq!(up.tables.len(), 1, "{up:?}");
    assert_eq!(up.tables[0].keys, [receipt(1)], "{up:?}");
}

#[test]
fn a_database_a_later_build_upgraded_is_refused_by_this_one_naming_both_versions() {
    let shop = Shop::new();
    let mut conn = shop.connect();
    install(&mut conn, &tables()).unwrap();
    conn.execute("UPDATE sync_schema SET version = ?1", [SCHEMA_VERSION + 1])
        .unwrap();
    let before = engine_schema(&conn);
    let expected = format!(
        "the engine's tables: they are at version {}, made by a later build than this one \
         (version {SCHEMA_VERSION})",
        SCHEMA_VERSION + 1
    );
    assert_eq!(
        install(&mut conn, &tables()).unwrap_err().to_string(),
        expected
    );
    assert_eq!(engine_schema(&conn), before, "install changed nothing");
    match Replica::open(conn, tables(), me(), Settings::default()) {
        Err(e) => assert_eq!(e.to_string(), expected),
        Ok(_) => panic!("opened a database a later build upgraded"),
    }
}

/// A register's file as release 0.1.0 left it, as `sqlite3 .dump` prints
/// it: made by that release's `magic-sync-replica` (how, in the file).
const PREVIOUS_RELEASE: &str = include_str!("previous/0.1.0-register.sql");

#[test]
fn a_register_file_of_the_previous_release_opens_with_this_build_keeping_rows_notes_and_uploads() {
    let shop = Shop::with_schema("");
    let conn = shop.connect();
    conn.execute_batch(PREVIOUS_RELEASE).unwrap();
    let products = strings(&conn, "SELECT name FROM products ORDER BY name");
    let receipts = strings(&conn, "SELECT id FROM receipts ORDER BY id");
    let notes = count(&conn, "SELECT count(*) FROM sync_notes");
    let uploads = count(&conn, "SELECT count(*) FROM sync_uploads");
    assert_eq!(products, ["jam", "tea"]);
    assert_eq!(receipts.len(), 3);
    assert!(
        notes > 0 && uploads == 1,
        "notes {notes}, uploads {uploads}"
    );
    drop(conn);

    let mut conn = shop.connect();
    install(&mut conn, &tables()).unwrap();
    assert_eq!(version(&conn), SCHEMA_VERSION);
    assert_eq!(
        strings(&conn, "SELECT name FROM products ORDER BY name"),
        products
    );
    assert_eq!(
        strings(&conn, "SELECT id FROM receipts ORDER BY id"),
        receipts
    );
    assert_eq!(count(&conn, "SELECT count(*) FROM sync_notes"), notes);
    assert_eq!(count(&conn, "SELECT count(*) FROM sync_uploads"), uploads);
    let fresh = Shop::new();
    let mut fresh_conn = fresh.connect();
    install(&mut fresh_conn, &tables()).unwrap();
    assert_eq!(engine_schema(&conn), engine_schema(&fresh_conn));

    // The two receipts the release sent wait for their answer, as they
    // did, and go again once `resend_after` has passed since (as it has,
    // the file being older); the one it had not sent goes up now.
    let mut replica = Replica::open(conn, tables(), me(), Settings::default()).unwrap();
    let backlog = |replica: &Replica| {
        let receipts = replica.progress().unwrap();
        let receipts = receipts.iter().find(|t| t.table == "receipts").unwrap();
        (receipts.unsent, receipts.unfiled)
    };
    assert_eq!(backlog(&replica), (1, 2));
    let up = say(&mut replica).expect("an Up");
    assert_eq!(up.tables.len(), 1, "{up:?}");
    let mut keys = up.tables[0].keys.clone();
    keys.sort();
    assert_eq!(keys, receipts, "the unsent receipt, and those due again");
    assert_eq!(backlog(&replica), (0, 3));
}

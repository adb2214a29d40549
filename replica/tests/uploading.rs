//! Sending the replica's own writes up (protocol §7, §4.4, §8): notes,
//! uploads, Filed, refusals, lanes, digests and the backlog.

mod common;

use std::time::Duration;

use common::*;
use magic_sync_replica::proto::digest::fingerprint;
use magic_sync_replica::proto::limits::Limits;
use magic_sync_replica::proto::wire::Up;
use magic_sync_replica::{
    install, Lane, Narrowed, Refusal, Replica, Settings, Table, TableBacklog, Tables,
};
use serde_json::{json, Value};

/// Settings under which digests and the backlog are always due.
fn eager() -> Settings {
    Settings {
        digests_every: Duration::ZERO,
        backlog_every: Duration::ZERO,
        backlog_again: Duration::ZERO,
        ..Settings::default()
    }
}

fn open(shop: &Shop, tables: Tables, settings: Settings) -> Replica {
    let mut conn = shop.connect();
    install(&mut conn, &tables).unwrap();
    Replica::open(conn, tables, me(), settings).unwrap()
}

fn provisioned_with(settings: Settings) -> (Shop, Replica, Server) {
    let shop = Shop::new();
    let mut replica = open(&shop, tables(), settings);
    let mut server = Server::new();
    apply(
        &mut replica,
        &server.begin(vec![part("products")
            .product(1, "tea", 3)
            .product(2, "jam", 5)]),
    );
    apply(&mut replica, &server.end(&["products", "orders"]));
    (shop, replica, server)
}

fn rows_of(up: &Up, table: &str) -> Vec<Value> {
    up.tables
        .iter()
        .filter(|t| t.table == table)
        .flat_map(|t| t.upserts.iter())
        .map(|b| serde_json::from_slice(b).unwrap())
        .collect()
}

fn filed(replica: &mut Replica, up: &Up) {
    let received = replica.receive(&encode_filed(up.uploads.clone())).unwrap();
    assert!(matches!(
        received,
        magic_sync_replica::Received::Filed { .. }
    ));
}

fn notes(replica: &Replica) -> i64 {
    count(replica.connection(), "SELECT count(*) FROM sync_notes")
}

#[test]
fn a_written_row_goes_up_as_it_is_now_with_its_key_and_a_fresh_upload_number() {
    let (_shop, mut replica, _server) = provisioned();
    write_receipt(replica.connection(), &receipt(1), 1, 3);
    replica
        .connection()
        .execute("DELETE FROM receipts WHERE id = ?1", [receipt(1)])
        .unwrap();
    write_receipt(replica.connection(), &receipt(1), 1, 4);
    let up = say(&mut replica).unwrap();
    let rows = rows_of(&up, "receipts");
    assert_eq!(rows.len(), 1, "one row, however often written");
    assert_eq!(rows[0]["total"], json!("4"), "as it is now");
    assert_eq!(rows[0]["register_id"], json!(me().to_string()));
    assert_eq!(up.tables[0].keys, [receipt(1)]);
    assert_eq!(up.uploads.len(), 1);
    assert!(up.uploads[0] >= 1 && up.uploads[0] <= i64::MAX as u64);
    assert_eq!(up.sequence, replica.last_applied().unwrap().sequence);
}

#[test]
fn a_row_sent_again_goes_under_another_number() {
    let (_shop, mut replica, _server) = provisioned_with(Settings {
        resend_after: Duration::ZERO,
        ..Settings::default()
    });
    write_receipt(replica.connection(), &receipt(1), 1, 3);
    let first = say(&mut replica).unwrap();
    let again = say(&mut replica).expect("unanswered, it goes again");
    assert_eq!(rows_of(&again, "receipts"), rows_of(&first, "receipts"));
    assert_ne!(again.uploads, first.uploads);
}

#[test]
fn filed_forgets_the_notes_that_send_carried_and_nothing_else() {
    let (_shop, mut replica, _server) = provisioned();
    write_receipt(replica.connection(), &receipt(1), 1, 3);
    let up = say(&mut replica).unwrap();
    write_receipt(replica.connection(), &receipt(2), 1, 3);
    filed(&mut replica, &up);
    assert_eq!(
        strings(replica.connection(), "SELECT key FROM sync_notes"),
        [receipt(2)]
    );
    // A number no send carried names nothing.
    replica.receive(&encode_filed(vec![12345])).unwrap();
    assert_eq!(notes(&replica), 1);
}

#[test]
fn a_row_written_after_its_send_goes_up_again_after_filed() {
    let (_shop, mut replica, _server) = provisioned();
    write_receipt(replica.connection(), &receipt(1), 1, 3);
    let up = say(&mut replica).unwrap();
    // History cannot be rewritten once the replica knows itself: delete and
    // write it again instead.
    replica
        .connection()
        .execute("DELETE FROM receipts WHERE id = ?1", [receipt(1)])
        .unwrap();
    write_receipt(replica.connection(), &receipt(1), 1, 9);
    filed(&mut replica, &up);
    assert_eq!(notes(&replica), 1, "written since: not forgotten");
    let next = say(&mut replica).unwrap();
    assert_eq!(rows_of(&next, "receipts")[0]["total"], json!("9"));
}

#[test]
fn an_answer_before_the_send_was_recorded_counts() {
    let (_shop, mut replica, _server) = provisioned();
    write_receipt(replica.connection(), &receipt(1), 1, 3);
    let upload = replica.next_up().unwrap().unwrap();
    filed(&mut replica, &upload.message());
    replica.sent(&upload).unwrap();
    assert_eq!(notes(&replica), 0);
}

#[test]
fn a_deleted_row_goes_as_its_key_only_for_a_table_keyed_by_its_replica() {
    let shop = Shop::with_schema(&format!(
        "{SHOP} CREATE TABLE readings (id INTEGER PRIMARY KEY, value INTEGER);"
    ));
    let tables = Tables::new(vec![
        Table::catalog("products").retired("retired_at"),
        Table::catalog("orders"),
        Table::record("receipts").origin("register_id"),
        Table::record("readings"),
    ]);
    let mut replica = open(&shop, tables, Settings::default());
    as_the_engine(
        replica.connection(),
        &format!(
            "INSERT INTO products (id, name) VALUES (X'{}', 'tea')",
            uuid(1).replace('-', "")
        ),
    );
    write_receipt(replica.connection(), &receipt(1), 1, 3);
    replica
        .connection()
        .execute_batch("INSERT INTO readings VALUES (1, 7)")
        .unwrap();
    let up = say(&mut replica).unwrap();
    filed(&mut replica, &up);
    replica
        .connection()
        .execute_batch("DELETE FROM receipts; DELETE FROM readings;")
        .unwrap();
    let up = say(&mut replica).unwrap();
    let deletes: Vec<(&str, &Vec<String>)> = up
        .tables
        .iter()
        .map(|t| (t.table.as_str(), &t.deletes))
        .collect();
    assert_eq!(deletes, [("receipts", &vec![receipt(1)])]);
    assert_eq!(
        strings(replica.connection(), "SELECT table_name FROM sync_notes"),
        ["receipts"],
        "pruned history is forgotten, not sent"
    );
}

#[test]
fn a_key_change_notes_the_old_key_gone() {
    let shop = Shop::with_schema(
        "CREATE TABLE tags (id INTEGER PRIMARY KEY, register_id BLOB, name TEXT, v INTEGER);",
    );
    let tables = Tables::new(vec![Table::record("tags")
        .origin("register_id")
        .version("v")]);
    let mut replica = open(&shop, tables, Settings::default());
    replica
        .connection()
        .execute_batch("INSERT INTO tags VALUES (1, NULL, 'a', 1)")
        .unwrap();
    let up = say(&mut replica).unwrap();
    filed(&mut replica, &up);
    replica
        .connection()
        .execute_batch("UPDATE tags SET id = 2, v = 2 WHERE id = 1")
        .unwrap();
    let up = say(&mut replica).unwrap();
    assert_eq!(up.tables[0].keys, ["2"]);
    assert_eq!(up.tables[1].deletes, ["1"]);
}

#[test]
fn a_row_an_insert_or_replace_removes_is_noted_gone() {
    let shop = Shop::with_schema(
        "CREATE TABLE tags (id INTEGER PRIMARY KEY, register_id BLOB, name TEXT UNIQUE, v INTEGER);",
    );
    let tables = Tables::new(vec![Table::record("tags")
        .origin("register_id")
        .version("v")]);
    let mut replica = open(&shop, tables, Settings::default());
    replica
        .connection()
        .execute_batch("INSERT INTO tags VALUES (1, NULL, 'a', 1)")
        .unwrap();
    let up = say(&mut replica).unwrap();
    filed(&mut replica, &up);
    replica
        .connection()
        .execute_batch("INSERT OR REPLACE INTO tags VALUES (2, NULL, 'a', 1)")
        .unwrap();
    let up = say(&mut replica).unwrap();
    assert_eq!(up.tables[0].keys, ["2"]);
    assert_eq!(up.tables[1].deletes, ["1"]);
}

#[test]
fn upserts_go_parents_first_and_deletes_children_first() {
    let shop = Shop::with_schema(
        "CREATE TABLE visits (id INTEGER PRIMARY KEY, register_id BLOB);
         CREATE TABLE notes (id INTEGER PRIMARY KEY, register_id BLOB,
                             visit INTEGER REFERENCES visits (id));",
    );
    // Declared children first: the foreign keys decide.
    let tables = Tables::new(vec![
        Table::record("notes").origin("register_id"),
        Table::record("visits").origin("register_id"),
    ]);
    let mut replica = open(&shop, tables, Settings::default());
    replica
        .connection()
        .execute_batch(
            "INSERT INTO visits VALUES (1, NULL); INSERT INTO notes VALUES (1, NULL, 1);",
        )
        .unwrap();
    let up = say(&mut replica).unwrap();
    let order: Vec<&str> = up.tables.iter().map(|t| t.table.as_str()).collect();
    assert_eq!(order, ["visits", "notes"]);
    filed(&mut replica, &up);
    replica
        .connection()
        .execute_batch("DELETE FROM notes; DELETE FROM visits;")
        .unwrap();
    let up = say(&mut replica).unwrap();
    let order: Vec<&str> = up.tables.iter().map(|t| t.table.as_str()).collect();
    assert_eq!(order, ["notes", "visits"]);
}

#[test]
fn an_up_stays_within_the_limits_and_the_rest_waits() {
    let (_shop, mut replica, _server) = provisioned_with(Settings {
        limits: Limits {
            rows: 3,
            ..Limits::DEFAULT
        },
        ..Settings::default()
    });
    for n in 0..7 {
        write_receipt(replica.connection(), &receipt(n as u128), 1, n);
    }
    let sizes: Vec<usize> = std::iter::from_fn(|| say(&mut replica))
        .map(|up| up.tables.iter().map(|t| t.keys.len()).sum())
        .collect();
    assert_eq!(sizes, [3, 3, 1]);
}

#[test]
fn a_row_that_can_never_fit_is_set_aside_and_counted() {
    let (_shop, mut replica, _server) = provisioned_with(Settings {
        limits: Limits {
            bytes: 2048,
            ..Limits::DEFAULT
        },
        ..Settings::default()
    });
    replica
        .connection()
        .execute(
            "INSERT INTO receipts (id, register_id) VALUES (?1, ?2)",
            [receipt(8), "9".repeat(4000)],
        )
        .unwrap();
    write_receipt(replica.connection(), &receipt(9), 1, 1);
    let up = say(&mut replica).unwrap();
    assert_eq!(up.tables[0].keys, [receipt(9)]);
    let receipts = replica
        .progress()
        .unwrap()
        .into_iter()
        .find(|t| t.table == "receipts")
        .unwrap();
    assert_eq!(
        receipts,
        TableBacklog {
            table: "receipts".into(),
            unsent: 0,
            unfiled: 1,
            set_aside: 1
        }
    );
}

#[test]
fn an_up_refused_for_good_is_halved_until_the_row_at_fault_is_set_aside() {
    let (_shop, mut replica, _server) = provisioned();
    say(&mut replica);
    for n in 0..4 {
        write_receipt(replica.connection(), &receipt(n as u128), 1, n);
    }
    let keys = |u: &magic_sync_replica::Upload| -> Vec<String> {
        u.message()
            .tables
            .into_iter()
            .flat_map(|t| t.keys)
            .collect()
    };
    // A transport that refuses any Up carrying r2.
    let mut refusals = Vec::new();
    let mut taken = Vec::new();
    while let Some(upload) = replica.next_up().unwrap() {
        if keys(&upload).contains(&receipt(2)) {
            refusals.push(replica.refused(&upload, Refusal::ForGood).unwrap());
        } else {
            taken.extend(keys(&upload));
            replica.sent(&upload).unwrap();
        }
    }
    assert_eq!(
        refusals.last(),
        Some(&Narrowed::SetAside {
            table: "receipts".into(),
            key: receipt(2)
        })
    );
    taken.sort();
    let mut expected = vec![receipt(0), receipt(1), receipt(3)];
    expected.sort();
    assert_eq!(taken, expected);
}

#[test]
fn a_transport_that_refuses_everything_sets_nothing_aside() {
    let (_shop, mut replica, _server) = provisioned();
    say(&mut replica);
    write_receipt(replica.connection(), &receipt(1), 1, 1);
    write_receipt(replica.connection(), &receipt(2), 1, 1);
    for _ in 0..8 {
        let upload = replica.next_up().unwrap().expect("something to say");
        let narrowed = replica.refused(&upload, Refusal::ForGood).unwrap();
        assert!(
            matches!(narrowed, Narrowed::Halving | Narrowed::Stuck),
            "{narrowed:?}"
        );
    }
    let receipts = &replica.progress().unwrap()[0];
    assert_eq!((receipts.unsent, receipts.set_aside), (2, 0));
    // Once the transport takes messages again, everything goes.
    let mut keys = Vec::new();
    while let Some(up) = say(&mut replica) {
        keys.extend(up.tables.into_iter().flat_map(|t| t.keys));
    }
    keys.sort();
    assert_eq!(keys, [receipt(1), receipt(2)]);
}

#[test]
fn a_transient_refusal_sends_the_same_rows_again() {
    let (_shop, mut replica, _server) = provisioned();
    write_receipt(replica.connection(), &receipt(1), 1, 1);
    let upload = replica.next_up().unwrap().unwrap();
    assert_eq!(
        replica.refused(&upload, Refusal::Transient).unwrap(),
        Narrowed::Again
    );
    let again = say(&mut replica).unwrap();
    assert_eq!(again.tables[0].keys, [receipt(1)]);
    assert_ne!(again.uploads, upload.message().uploads);
}

#[test]
fn each_table_goes_on_its_lane_and_the_engine_speaks_on_the_first() {
    let settings = Settings {
        lanes: vec![Lane::new("main", &[]), Lane::new("receipts", &["receipts"])],
        ..Settings::default()
    };
    let (_shop, mut replica, server) = provisioned_with(settings);
    write_receipt(replica.connection(), &receipt(1), 1, 1);
    let first = replica.next_up().unwrap().unwrap();
    assert_eq!(first.lane, "main");
    assert!(first.message().tables.is_empty());
    assert_eq!(first.message().sequence, server.sequence);
    replica.sent(&first).unwrap();
    let second = replica.next_up().unwrap().unwrap();
    assert_eq!(second.lane, "receipts");
    let up = second.message();
    assert_eq!(up.tables[0].keys, [receipt(1)]);
    assert_eq!((up.epoch.as_str(), up.sequence), ("", 0));
}

#[test]
fn a_table_on_two_lanes_is_refused() {
    let shop = Shop::new();
    let mut conn = shop.connect();
    install(&mut conn, &tables()).unwrap();
    let settings = Settings {
        lanes: vec![
            Lane::new("main", &["receipts"]),
            Lane::new("other", &["receipts"]),
        ],
        ..Settings::default()
    };
    let error = Replica::open(conn, tables(), me(), settings)
        .err()
        .unwrap()
        .to_string();
    assert!(
        error.contains("table `receipts` is on two lanes"),
        "{error}"
    );
}

#[test]
fn digests_count_and_fingerprint_what_the_server_sends_leaving_out_unfiled_tables() {
    let (_shop, mut replica, mut server) = provisioned_with(eager());
    apply(
        &mut replica,
        &server.down(vec![part("orders").row("1", json!({"id": 1, "qty": "1"}))]),
    );
    let up = say(&mut replica).unwrap();
    let mut keys = vec![uuid(1), uuid(2)];
    keys.sort();
    let products = up.digests.iter().find(|d| d.table == "products").unwrap();
    assert_eq!(products.count, 2);
    assert_eq!(products.fingerprint, fingerprint(&keys));
    let orders = up.digests.iter().find(|d| d.table == "orders").unwrap();
    assert_eq!((orders.count, orders.fingerprint), (1, fingerprint(["1"])));
    assert!(up.digests.iter().all(|d| d.table != "receipts"));
}

#[test]
fn digests_leave_out_retired_and_rejected_rows() {
    let (_shop, mut replica, mut server) = provisioned_with(eager());
    write_receipt(replica.connection(), &receipt(1), 1, 1);
    let up = say(&mut replica).unwrap();
    filed(&mut replica, &up);
    apply(
        &mut replica,
        &server.down(vec![part("products")
            .delete(&uuid(1))
            .product(2, "jam", -1)]),
    );
    let up = say(&mut replica).unwrap();
    let products = up.digests.iter().find(|d| d.table == "products").unwrap();
    assert_eq!(
        (products.count, products.fingerprint),
        (0, fingerprint(Vec::<String>::new()))
    );
}

#[test]
fn digests_are_said_when_due_not_on_every_up() {
    let (_shop, mut replica, mut server) = provisioned();
    assert!(
        !say(&mut replica).unwrap().digests.is_empty(),
        "the first is due"
    );
    apply(
        &mut replica,
        &server.down(vec![part("products").product(1, "x", 1)]),
    );
    assert!(say(&mut replica).unwrap().digests.is_empty());
}

#[test]
fn the_backlog_is_said_when_it_changes_and_at_once_when_it_empties() {
    let (_shop, mut replica, _server) = provisioned_with(Settings {
        backlog_every: Duration::from_secs(3600),
        backlog_again: Duration::from_secs(3600),
        ..Settings::default()
    });
    // On opening it says its backlog, empty: and that starts the wait.
    let opened = say(&mut replica).unwrap();
    assert_eq!(opened.backlog.unwrap().tables, []);
    write_receipt(replica.connection(), &receipt(1), 1, 1);
    let up = say(&mut replica).unwrap();
    assert!(up.backlog.is_none(), "not within backlog_every of the last");
    // An hour later, the change is said.
    replica
        .connection()
        .execute_batch("UPDATE sync_state SET backlog_at = backlog_at - 3600")
        .unwrap();
    let changed = say(&mut replica).unwrap();
    let backlog = changed.backlog.clone().expect("the change is said");
    assert_eq!(backlog.tables[0].table, "receipts");
    assert_eq!(
        (backlog.tables[0].unsent, backlog.tables[0].unfiled),
        (0, 1)
    );
    write_receipt(replica.connection(), &receipt(2), 1, 1);
    let next = say(&mut replica).unwrap();
    assert!(next.backlog.is_none(), "not on every write");
    filed(&mut replica, &up);
    filed(&mut replica, &next);
    let emptied = say(&mut replica).unwrap();
    assert_eq!(emptied.backlog.unwrap().tables, []);
}

#[test]
fn a_rejection_reason_is_cut_to_512_bytes() {
    let (_shop, mut replica, mut server) = provisioned();
    let trigger = format!(
        "CREATE TRIGGER wordy BEFORE UPDATE ON products WHEN new.name = 'x'
         BEGIN SELECT RAISE(ABORT, '{}'); END;",
        "ü".repeat(400)
    );
    replica.connection().execute_batch(&trigger).unwrap();
    apply(
        &mut replica,
        &server.down(vec![part("products").product(1, "x", 1)]),
    );
    let up = say(&mut replica).unwrap();
    assert!(up.rejected[0].reason.len() <= 512);
}

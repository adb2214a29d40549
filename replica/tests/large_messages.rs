//! Large messages take the engine's quicker ways: its own triggers set aside
//! while it writes (when they are the database's only ones), rows written
//! several to a statement, a snapshot's keys kept per message. Each must
//! take exactly what writing one row at a time, with every trigger running,
//! takes — the same rows, the same rejections, the same report.

mod common;

use common::*;
use magic_sync_replica::{Received, Replica, Table, Tables};
use serde_json::json;

const SCHEMA: &str = "
    CREATE TABLE items (
        id         INTEGER PRIMARY KEY,
        name       TEXT NOT NULL,
        qty        INTEGER CHECK (qty >= 0),
        price      REAL,
        tag        BLOB,
        retired_at TEXT
    );
    CREATE TABLE labels (id BLOB PRIMARY KEY, text TEXT UNIQUE);
    CREATE TABLE receipts (
        id          TEXT PRIMARY KEY,
        register_id BLOB,
        item_id     INTEGER REFERENCES items (id)
    );
    CREATE TABLE scratch (x);
";

fn shop_tables() -> Tables {
    Tables::new(vec![
        Table::catalog("items").retired("retired_at"),
        Table::catalog("labels"),
        Table::record("receipts").origin("register_id"),
    ])
}

/// Two replicas of the same database: the first as a device has it, the
/// second with a trigger of the device program's own (on a table the server
/// does not send), so its engine never sets triggers aside and writes one
/// row at a time.
fn twins() -> (Shop, Replica, Shop, Replica) {
    let quick = Shop::with_schema(SCHEMA);
    let plain = Shop::with_schema(SCHEMA);
    plain
        .connect()
        .execute_batch("CREATE TRIGGER program_scratch AFTER INSERT ON scratch BEGIN SELECT 1; END")
        .unwrap();
    let quick_replica = quick.open_with(shop_tables());
    let plain_replica = plain.open_with(shop_tables());
    (quick, quick_replica, plain, plain_replica)
}

/// Everything the replica holds and keeps, as text.
fn contents(replica: &Replica) -> Vec<String> {
    let conn = replica.connection();
    let tables = strings(
        conn,
        "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name",
    );
    let mut out = Vec::new();
    for table in tables {
        // When a row was retired is the clock's: whether it was is the row's.
        let select = match table.as_str() {
            "items" => {
                "SELECT id, name, qty, price, tag, retired_at IS NOT NULL FROM items".to_owned()
            }
            _ => format!("SELECT * FROM \"{table}\""),
        };
        let mut statement = conn.prepare(&select).unwrap();
        let width = statement.column_count();
        let mut rows: Vec<String> = statement
            .query_map([], |row| {
                let values: Vec<String> = (0..width)
                    .map(|i| format!("{:?}", row.get_ref(i).unwrap()))
                    .collect();
                Ok(values.join(","))
            })
            .unwrap()
            .map(Result::unwrap)
            .collect();
        rows.sort();
        out.push(format!("{table}: {}", rows.join("; ")));
    }
    out
}

/// An item's row as the server sends it.
fn item(id: i64, name: &str, qty: i64) -> serde_json::Value {
    json!({"id": id.to_string(), "name": name, "qty": qty.to_string(), "price": 1.5})
}

/// A part of `n` items from `first`, every `bad`-th refused by the
/// database (a negative quantity), every `short`-th carrying fewer
/// columns, every `broken`-th not decoding.
fn items(first: i64, n: i64, bad: i64, short: i64, broken: i64) -> Part {
    let mut part = part("items");
    for id in first..first + n {
        let key = id.to_string();
        part = if broken > 0 && id % broken == 0 {
            part.row(&key, json!({"id": key, "name": "broken", "qty": "many"}))
        } else if bad > 0 && id % bad == 0 {
            part.row(&key, item(id, "refused", -1))
        } else if short > 0 && id % short == 0 {
            part.row(&key, json!({"id": key, "name": format!("short {id}")}))
        } else {
            part.row(&key, item(id, &format!("item {id}"), id % 7))
        };
    }
    part
}

fn label(n: u128, text: &str) -> (String, serde_json::Value) {
    let id = uuid(n);
    (id.clone(), json!({"id": id, "text": text}))
}

/// The same messages to both; each answered the same, each leaving both
/// holding the same.
fn both(quick: &mut Replica, plain: &mut Replica, messages: &[Vec<u8>]) -> Vec<Received> {
    let mut answers = Vec::new();
    for message in messages {
        let a = quick.receive(message).unwrap();
        let b = plain.receive(message).unwrap();
        assert_eq!(a, b);
        assert_eq!(contents(quick), contents(plain));
        answers.push(a);
    }
    answers
}

#[test]
fn a_large_snapshot_takes_what_one_row_at_a_time_takes() {
    let (_q, mut quick, _p, mut plain) = twins();
    let mut server = Server::new();
    let mut labels = part("labels");
    for n in 0..40 {
        // Label 9 takes label 7's text, among rows written together.
        let text = if n == 9 {
            "label 7".to_owned()
        } else {
            format!("label {n}")
        };
        let (id, row) = label(n, &text);
        labels = labels.row(&id, row);
        if n == 12 {
            // Label 2 again, the later row the one, among rows written
            // together.
            let (id, row) = label(2, "label two");
            labels = labels.row(&id, row);
        }
    }
    // Two labels swap a unique value: both refused, as one at a time.
    let (a, _) = label(3, "");
    let (b, _) = label(4, "");
    labels = labels
        .row(&a, json!({"id": a, "text": "label 4"}))
        .row(&b, json!({"id": b, "text": "label 3"}));
    let messages = vec![
        server.begin(vec![items(0, 100, 0, 0, 0), labels]),
        // Rows refused by the database, rows that do not decode, rows
        // carrying fewer columns, a key sent twice (the later row is the
        // one), in one part.
        server.down(vec![items(100, 100, 17, 5, 23)
            .row("150", item(150, "again", 3))
            .row("101", item(101, "again", 1))]),
        server.down(vec![items(200, 64, 0, 0, 0).delete("7").delete("8")]),
        server.down(vec![items(264, 40, 0, 2, 0), items(304, 33, 13, 0, 0)]),
        server.end(&["items", "labels"]),
    ];
    let answers = both(&mut quick, &mut plain, &messages);
    let Received::Applied { rejected, .. } = &answers[1] else {
        panic!("{:?}", answers[1]);
    };
    assert!(rejected.iter().any(|r| r.key == "119"), "{rejected:?}");
    assert!(rejected.iter().any(|r| r.key == "115"), "{rejected:?}");
    // Then a snapshot that names fewer rows sweeps the rest.
    let messages = vec![
        server.begin(vec![items(0, 50, 0, 0, 0)]),
        // Let go of and sent again in one part: held.
        server.down(vec![items(50, 20, 0, 0, 0).delete("60")]),
        // Let go of by a later message of the snapshot: not named.
        server.down(vec![part("items").delete("61")]),
        server.end(&["items", "labels"]),
    ];
    let answers = both(&mut quick, &mut plain, &messages);
    assert!(matches!(&answers[3], Received::Ended { swept, .. } if swept.len() == 2));
    let conn = quick.connection();
    assert_eq!(count(conn, "SELECT count(*) FROM items"), 69);
    assert_eq!(count(conn, "SELECT count(*) FROM labels"), 0);
}

#[test]
fn rows_the_programs_own_point_at_are_retired_and_let_go_of_as_one_at_a_time() {
    let (_q, mut quick, _p, mut plain) = twins();
    let mut server = Server::new();
    both(
        &mut quick,
        &mut plain,
        &[
            server.begin(vec![items(0, 100, 0, 0, 0)]),
            server.end(&["items"]),
        ],
    );
    // The program writes between messages, through the replica's
    // connection: its triggers note the write.
    for replica in [&quick, &plain] {
        replica
            .connection()
            .execute(
                "INSERT INTO receipts (id, register_id, item_id) VALUES (?1, ?2, 5)",
                rusqlite::params![receipt(1), me().as_bytes().to_vec()],
            )
            .unwrap();
    }
    assert_eq!(contents(&quick), contents(&plain));
    let messages = vec![
        // Item 5 let go of, among many rows: retired, for the receipt.
        server.down(vec![items(100, 50, 0, 0, 0).delete("5").delete("6")]),
        server.down(vec![items(150, 1, 0, 0, 0)]),
    ];
    both(&mut quick, &mut plain, &messages);
    let conn = quick.connection();
    assert_eq!(
        count(
            conn,
            "SELECT count(*) FROM items WHERE retired_at IS NOT NULL"
        ),
        1
    );
    // The receipt goes; after the next messages, so does item 5.
    for replica in [&quick, &plain] {
        replica
            .connection()
            .execute("DELETE FROM receipts", [])
            .unwrap();
    }
    let messages = vec![
        server.down(vec![items(200, 40, 0, 0, 0)]),
        server.down(vec![items(240, 1, 0, 0, 0)]),
    ];
    both(&mut quick, &mut plain, &messages);
    assert_eq!(
        count(
            quick.connection(),
            "SELECT count(*) FROM items WHERE id = 5"
        ),
        0
    );
}

#[test]
fn a_row_that_ends_the_transaction_is_found_among_rows_written_together() {
    let (_q, mut quick, _p, mut plain) = twins();
    for replica in [&quick, &plain] {
        replica
            .connection()
            .execute_batch(
                "CREATE TEMP TRIGGER program_boom BEFORE INSERT ON items WHEN NEW.name = 'boom'
                 BEGIN SELECT RAISE(ROLLBACK, 'boom'); END",
            )
            .unwrap();
    }
    // A part of items from `first` to `last`, `boom` among them.
    let with_boom = |first: i64, last: i64, boom: i64| {
        let mut part = part("items");
        for id in first..last {
            let name = if id == boom { "boom" } else { "item" };
            part = part.row(&id.to_string(), item(id, name, 1));
        }
        part
    };
    let mut server = Server::new();
    let messages = vec![
        server.begin(vec![with_boom(0, 100, 40)]),
        server.down(vec![with_boom(100, 170, 110)]),
        server.end(&["items"]),
    ];
    let answers = both(&mut quick, &mut plain, &messages);
    let Received::Applied { rejected, .. } = &answers[1] else {
        panic!("{:?}", answers[1]);
    };
    assert_eq!(rejected.len(), 1);
    assert_eq!(rejected[0].key, "110");
    assert!(rejected[0].reason.contains("boom"), "{rejected:?}");
}

#[test]
fn a_trigger_of_the_programs_own_runs_for_every_row_of_a_large_message() {
    let shop = Shop::with_schema(SCHEMA);
    let mut replica = shop.open_with(shop_tables());
    let mut server = Server::new();
    apply(&mut replica, &server.begin(vec![items(0, 100, 0, 0, 0)]));
    // Written after the replica opened, as a program's own migration may.
    shop.connect()
        .execute_batch(
            "CREATE TABLE seen (id INTEGER);
             CREATE TRIGGER program_seen AFTER INSERT ON items BEGIN INSERT INTO seen VALUES (NEW.id); END",
        )
        .unwrap();
    apply(&mut replica, &server.down(vec![items(100, 100, 0, 0, 0)]));
    let conn = replica.connection();
    assert_eq!(count(conn, "SELECT count(*) FROM seen"), 100);
    assert_eq!(count(conn, "SELECT min(id) FROM seen"), 100);
}

#[test]
fn after_a_large_message_the_engines_triggers_refuse_the_programs_writes() {
    let shop = Shop::with_schema(SCHEMA);
    let mut replica = shop.open_with(shop_tables());
    let mut server = Server::new();
    apply(&mut replica, &server.begin(vec![items(0, 100, 0, 0, 0)]));
    apply(&mut replica, &server.down(vec![items(100, 100, 0, 0, 0)]));
    apply(&mut replica, &server.end(&["items"]));
    // A small message after them: the triggers stay aside through it.
    apply(&mut replica, &server.down(vec![items(200, 1, 0, 0, 0)]));
    let conn = replica.connection();
    assert_eq!(count(conn, "SELECT writing FROM sync_state"), 0);
    for write in [
        "INSERT INTO items (id, name) VALUES (1000, 'mine')",
        "UPDATE items SET name = 'mine' WHERE id = 1",
        "DELETE FROM items WHERE id = 2",
    ] {
        let refused = conn.execute(write, []).unwrap_err().to_string();
        assert!(
            refused.contains("items is written by the server"),
            "{refused}"
        );
    }
    assert_eq!(count(conn, "SELECT count(*) FROM items"), 201);
    // The program's own rows are noted again.
    conn.execute("INSERT INTO receipts (id) VALUES ('r')", [])
        .unwrap();
    assert_eq!(count(conn, "SELECT count(*) FROM sync_notes"), 1);
    // And so through a connection taken back.
    let conn = replica.into_connection();
    conn.execute("UPDATE items SET name = 'mine'", [])
        .unwrap_err();
}

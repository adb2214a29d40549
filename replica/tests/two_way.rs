//! Tables written on both sides, settings, and rows as protobuf.

mod common;

use common::*;
use magic_sync_replica::proto::wire::Up;
use magic_sync_replica::{Codec, Field, Kind, Received, Replica, Table, Tables};
use serde_json::json;

const STATE: &str = "
    CREATE TABLE registers (
        id        BLOB PRIMARY KEY,
        label     TEXT,
        battery   INTEGER,
        gone_at   TEXT
    );
    CREATE TABLE footers (
        register_id BLOB PRIMARY KEY,
        text        TEXT NOT NULL,
        changed_at  TEXT NOT NULL
    );
";

fn two_way() -> Tables {
    Tables::new(vec![
        Table::both("registers")
            .replica_owned(&["battery"])
            .origin("id")
            .retired("gone_at"),
        Table::setting("footers")
            .version("changed_at")
            .origin("register_id")
            .desired(&["text"]),
    ])
}

fn me_text() -> String {
    me().to_string()
}

/// A replica holding its own register row (label "Till") and another's.
fn holding() -> (Shop, Replica, Server) {
    let shop = Shop::with_schema(STATE);
    let mut replica = shop.open_with(two_way());
    let mut server = Server::new();
    let other = uuid(77);
    apply(
        &mut replica,
        &server.begin(vec![part("registers")
            .row(
                &me_text(),
                json!({"id": me_text(), "label": "Till", "battery": "1"}),
            )
            .row(&other, json!({"id": other, "label": "Other"}))]),
    );
    apply(&mut replica, &server.end(&["registers"]));
    (shop, replica, server)
}

fn battery(replica: &Replica) -> i64 {
    count(
        replica.connection(),
        &format!(
            "SELECT coalesce(battery, -1) FROM registers WHERE id = X'{}'",
            me_text().replace('-', "")
        ),
    )
}

fn set_battery(replica: &Replica, level: i64) {
    replica
        .connection()
        .execute(
            "UPDATE registers SET battery = ?1 WHERE id = ?2",
            rusqlite::params![level, me().as_bytes().to_vec()],
        )
        .unwrap();
}

fn filed(replica: &mut Replica, up: &Up) {
    replica.receive(&encode_filed(up.uploads.clone())).unwrap();
}

#[test]
fn the_server_never_overwrites_the_columns_the_replica_owns() {
    let (_shop, mut replica, mut server) = holding();
    assert_eq!(
        battery(&replica),
        -1,
        "a column the replica owns is not taken"
    );
    set_battery(&replica, 80);
    apply(
        &mut replica,
        &server.down(vec![part("registers").row(
            &me_text(),
            json!({"id": me_text(), "label": "Front till", "battery": "5"}),
        )]),
    );
    assert_eq!(battery(&replica), 80);
    assert_eq!(
        strings(
            replica.connection(),
            "SELECT label FROM registers ORDER BY label"
        ),
        ["Front till", "Other"]
    );
}

#[test]
fn an_edit_of_its_own_columns_goes_up_alone() {
    let (_shop, mut replica, _server) = holding();
    say(&mut replica);
    set_battery(&replica, 80);
    let up = say(&mut replica).unwrap();
    let row: serde_json::Value = serde_json::from_slice(&up.tables[0].upserts[0]).unwrap();
    assert_eq!(row, json!({"id": me_text(), "battery": "80"}));
}

#[test]
fn the_replica_writes_no_other_column_of_a_two_way_row_nor_a_new_one() {
    let (_shop, replica, _server) = holding();
    let conn = replica.connection();
    let update = conn
        .execute("UPDATE registers SET label = 'mine'", [])
        .unwrap_err()
        .to_string();
    assert!(
        update.contains("writes only battery of registers"),
        "{update}"
    );
    let insert = conn
        .execute("INSERT INTO registers (id) VALUES (x'00')", [])
        .unwrap_err()
        .to_string();
    assert!(insert.contains("begins on the server"), "{insert}");
    let delete = conn
        .execute("DELETE FROM registers WHERE label = 'Other'", [])
        .unwrap_err()
        .to_string();
    assert!(
        delete.contains("deletes no row of registers but its own"),
        "{delete}"
    );
}

#[test]
fn a_row_of_its_own_it_deleted_is_held_back_until_the_delete_is_filed() {
    let (_shop, mut replica, mut server) = holding();
    say(&mut replica);
    replica
        .connection()
        .execute(
            "DELETE FROM registers WHERE id = ?1",
            [me().as_bytes().to_vec()],
        )
        .unwrap();
    let received = apply(
        &mut replica,
        &server.down(vec![
            part("registers").row(&me_text(), json!({"id": me_text(), "label": "Till again"}))
        ]),
    );
    let Received::Applied { rejected, .. } = received else {
        unreachable!()
    };
    assert!(rejected[0].held_back, "{rejected:?}");
    let up = say(&mut replica).unwrap();
    assert_eq!(up.tables[0].deletes, [me_text()]);
    assert!(up.rejected[0].held_back);
    assert_eq!(
        count(replica.connection(), "SELECT count(*) FROM registers"),
        1
    );
    filed(&mut replica, &up);
    apply(
        &mut replica,
        &server.down(vec![
            part("registers").row(&me_text(), json!({"id": me_text(), "label": "Till again"}))
        ]),
    );
    assert_eq!(
        count(replica.connection(), "SELECT count(*) FROM registers"),
        2
    );
}

#[test]
fn a_row_with_an_unfiled_edit_is_retired_and_let_go_once_filed() {
    let (_shop, mut replica, mut server) = holding();
    say(&mut replica);
    set_battery(&replica, 80);
    let up = say(&mut replica).unwrap();
    apply(
        &mut replica,
        &server.down(vec![part("registers").delete(&me_text())]),
    );
    assert_eq!(
        count(
            replica.connection(),
            "SELECT count(*) FROM registers WHERE gone_at IS NOT NULL"
        ),
        1
    );
    filed(&mut replica, &up);
    assert_eq!(
        count(replica.connection(), "SELECT count(*) FROM registers"),
        1
    );
}

#[test]
fn a_snapshot_begins_by_noting_every_setting_again_restated() {
    let (_shop, mut replica, mut server) = holding();
    replica
        .connection()
        .execute(
            "INSERT INTO footers VALUES (?1, 'Thanks', '2026-01-01T00:00:00.000000Z')",
            [me().as_bytes().to_vec()],
        )
        .unwrap();
    let up = say(&mut replica).unwrap();
    assert!(!up.tables[0].restated);
    filed(&mut replica, &up);
    apply(&mut replica, &server.begin(vec![]));
    let up = say(&mut replica).unwrap();
    let footers = up.tables.iter().find(|t| t.table == "footers").unwrap();
    assert!(footers.restated);
    assert_eq!(footers.keys, [me_text()]);
}

#[test]
fn a_recorded_setting_the_replica_does_not_hold_is_noted_as_its_delete() {
    let (_shop, mut replica, mut server) = holding();
    let mut recorded = part("footers");
    recorded.0.recorded.push(uuid(5));
    apply(&mut replica, &server.begin(vec![recorded]));
    let up = say(&mut replica).unwrap();
    let footers = up.tables.iter().find(|t| t.table == "footers").unwrap();
    assert_eq!(footers.deletes, [uuid(5)]);
    assert!(!footers.restated, "a delete goes in a part not re-stated");
}

#[test]
fn rows_travel_as_protobuf_both_ways() {
    let shop = Shop::with_schema(
        "CREATE TABLE items (id BLOB PRIMARY KEY, name TEXT, qty INTEGER);
         CREATE TABLE counts (id INTEGER PRIMARY KEY, register_id BLOB, qty INTEGER);",
    );
    let codec = |fields: Vec<Field>| Codec::protobuf(fields);
    let tables = Tables::new(vec![
        Table::catalog("items").codec(codec(vec![
            Field::new("id", 1, Kind::String),
            Field::new("name", 2, Kind::String),
            Field::new("qty", 3, Kind::Sint64),
        ])),
        Table::record("counts")
            .origin("register_id")
            .codec(codec(vec![
                Field::new("id", 1, Kind::Int64),
                Field::new("register_id", 2, Kind::Bytes),
                Field::new("qty", 3, Kind::Int64).optional(),
            ])),
    ]);
    let mut replica = shop.open_with(tables.clone());
    let mut server = Server::new();
    let id = uuid(3);
    // id = 1 (string), name = 2 (string), qty = 3 (sint64 -2 → 3).
    let mut row = vec![0x0a, id.len() as u8];
    row.extend_from_slice(id.as_bytes());
    row.extend_from_slice(&[0x12, 3, b't', b'e', b'a', 0x18, 3]);
    let mut items = part("items");
    items.0.keys.push(id.clone());
    items.0.upserts.push(row);
    apply(&mut replica, &server.begin(vec![items]));
    assert_eq!(
        strings(replica.connection(), "SELECT name || ':' || qty FROM items"),
        ["tea:-2"]
    );
    replica
        .connection()
        .execute_batch("INSERT INTO counts VALUES (7, x'01', NULL)")
        .unwrap();
    let up = say(&mut replica).unwrap();
    let counts = up.tables.iter().find(|t| t.table == "counts").unwrap();
    // id = 7 (field 1), register_id = bytes [1] (field 2), qty NULL: absent.
    assert_eq!(counts.upserts[0], [0x08, 7, 0x12, 1, 1]);
}

/// The device program writes on a connection of its own while the replica
/// builds an Up with digests due: the digest is never read around that
/// write. The Up waits for it (it is built under the write lock), and then
/// leaves the written table out of its digests, carrying the edit instead.
#[test]
fn a_table_written_while_the_digest_is_read_is_left_out() {
    let (shop, mut replica, _server) = holding();
    let device = shop.connect();
    let (begun, writing) = std::sync::mpsc::channel();
    let writer = std::thread::spawn(move || {
        device.execute_batch("BEGIN IMMEDIATE").unwrap();
        device
            .execute(
                "UPDATE registers SET battery = 9 WHERE id = ?1",
                [me().as_bytes().to_vec()],
            )
            .unwrap();
        begun.send(()).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(300));
        device.execute_batch("COMMIT").unwrap();
    });
    writing.recv().unwrap();
    let up = say(&mut replica).expect("the first Up, digests due");
    writer.join().unwrap();
    assert!(
        up.digests.iter().all(|d| d.table != "registers"),
        "a table with a write not yet filed has no digest: {:?}",
        up.digests
    );
    let row: serde_json::Value = serde_json::from_slice(&up.tables[0].upserts[0]).unwrap();
    assert_eq!(row, json!({"id": me_text(), "battery": "9"}));
}

/// The same Up built with no write in flight does carry the table's digest:
/// the case above is left out for the write, not always.
#[test]
fn a_table_with_nothing_unfiled_has_its_digest() {
    let (_shop, mut replica, _server) = holding();
    let up = say(&mut replica).expect("the first Up, digests due");
    let registers = up.digests.iter().find(|d| d.table == "registers");
    assert_eq!(registers.map(|d| d.count), Some(2), "{:?}", up.digests);
}

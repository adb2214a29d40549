//! Filing what registers send up, end to end: a PostgreSQL cluster with the
//! extension, registers on SQLite files, the default transport (the queue
//! in the database, `sync.receive` for what goes up). Every receipt is
//! filed exactly once — none lost, none twice — whatever the transport or
//! the server does in between.

mod common;
#[path = "common/filing_shop.rs"]
mod shop;

use std::collections::BTreeSet;

use magic_sync_replica::{Received, Settings};
use shop::*;
use uuid::Uuid;

/// Receipts the registers wrote, as the server should hold them.
fn written(registers: &[(Uuid, Vec<(Uuid, i64)>)]) -> Vec<(Uuid, Uuid, i64)> {
    let mut all: Vec<(Uuid, Uuid, i64)> = registers
        .iter()
        .flat_map(|(register, receipts)| {
            receipts
                .iter()
                .map(move |(id, total)| (*id, *register, *total))
        })
        .collect();
    all.sort();
    all
}

#[test]
fn receipts_written_offline_are_each_filed_exactly_once() {
    let mut shop = Shop::open();
    shop.run(
        "INSERT INTO shop.products (id, name, price_cents) VALUES (gen_random_uuid(), 'Tea', 250)",
    );
    let (a, b) = (
        shop.add_register("Register 1"),
        shop.add_register("Register 2"),
    );
    let mut registers = vec![
        open_register(&shop.file_of(a), a),
        open_register(&shop.file_of(b), b),
    ];
    sync_all(&mut shop, &mut registers);

    // Offline: each sells, nothing goes up.
    let sold_a: Vec<i64> = (1..=700).collect();
    let sold_b: Vec<i64> = (1..=30).map(|i| i * 10).collect();
    let ids_a = sell(&registers[0], &sold_a);
    let ids_b = sell(&registers[1], &sold_b);

    // Back: everything goes up, in as many uploads as it takes.
    sync_all(&mut shop, &mut registers);
    let expected = written(&[
        (a, ids_a.into_iter().zip(sold_a).collect()),
        (b, ids_b.into_iter().zip(sold_b).collect()),
    ]);
    assert_eq!(shop.receipts(), expected);
    for register in &registers {
        assert_eq!(
            unfiled(register),
            0,
            "every note of {} is answered",
            register.me()
        );
    }
    assert_eq!(shop.count("SELECT count(*) FROM sync.inbox"), 0);
}

#[test]
fn an_upload_sent_twice_is_filed_once() {
    let mut shop = Shop::open();
    let a = shop.add_register("Register 1");
    let mut register = open_register(&shop.file_of(a), a);
    sync_all(&mut shop, std::slice::from_mut(&mut register));
    let ids = sell(&register, &[100, 200, 300]);

    let up = register
        .next_up()
        .unwrap()
        .expect("an Up with the receipts");
    for _ in 0..2 {
        let verdict: String = shop
            .pg
            .query_one("SELECT sync.receive($1, $2)::text", &[&a, &up.bytes])
            .unwrap()
            .get(0);
        assert!(verdict.contains("\"answered\""), "{verdict}");
    }
    register.sent(&up).unwrap();
    let answers = deliver(&mut shop.pg, &mut register);
    assert_eq!(
        answers
            .iter()
            .filter(|r| matches!(r, Received::Filed { .. }))
            .count(),
        2
    );
    assert_eq!(
        shop.receipts(),
        written(&[(a, ids.into_iter().zip([100, 200, 300]).collect())])
    );
    assert_eq!(unfiled(&register), 0);
}

#[test]
fn a_lost_filed_is_made_good_by_the_upload_sent_again() {
    let mut shop = Shop::open();
    let a = shop.add_register("Register 1");
    let settings = Settings {
        resend_after: std::time::Duration::from_secs(1),
        ..Settings::default()
    };
    let mut register = open_register_with(&shop.file_of(a), a, settings);
    sync_all(&mut shop, std::slice::from_mut(&mut register));
    let ids = sell(&register, &[5, 6]);
    let first = register
        .next_up()
        .unwrap()
        .expect("an Up with the receipts");
    send(&mut shop, &mut register, &first);
    // The answer is lost on the way.
    let lost = shop.count(
        "WITH gone AS (DELETE FROM sync.outbox WHERE kind = 'filed' RETURNING 1) SELECT count(*) FROM gone",
    );
    assert_eq!(lost, 1);
    deliver(&mut shop.pg, &mut register);
    assert_eq!(unfiled(&register), 2);

    // Unanswered, the upload goes again, under another number; the server
    // files the same rows, and answers.
    std::thread::sleep(std::time::Duration::from_millis(2100));
    let again = register.next_up().unwrap().expect("the receipts again");
    assert_ne!(again.number(), first.number());
    send(&mut shop, &mut register, &again);
    deliver(&mut shop.pg, &mut register);
    assert_eq!(unfiled(&register), 0);
    assert_eq!(
        shop.receipts(),
        written(&[(a, ids.into_iter().zip([5, 6]).collect())])
    );
}

/// Hands one Up to the server, and records it sent.
fn send(
    shop: &mut Shop,
    register: &mut magic_sync_replica::Replica,
    up: &magic_sync_replica::Upload,
) {
    shop.pg
        .query_one("SELECT sync.receive($1, $2)", &[&register.me(), &up.bytes])
        .unwrap();
    register.sent(up).unwrap();
}

#[test]
fn the_server_stopping_in_the_middle_of_filing_loses_nothing() {
    let mut shop = Shop::open();
    let a = shop.add_register("Register 1");
    let mut register = open_register(&shop.file_of(a), a);
    sync_all(&mut shop, std::slice::from_mut(&mut register));
    let ids = sell(&register, &[11, 12, 13]);

    // The filing transaction is open when the server stops.
    let up = register
        .next_up()
        .unwrap()
        .expect("an Up with the receipts");
    shop.pg.batch_execute("BEGIN").unwrap();
    shop.pg
        .query_one("SELECT sync.receive($1, $2)", &[&a, &up.bytes])
        .unwrap();
    shop.cluster.restart_immediately();
    assert!(
        shop.pg.batch_execute("COMMIT").is_err(),
        "the connection is gone"
    );
    register
        .refused(&up, magic_sync_replica::Refusal::Transient)
        .unwrap();
    shop.reconnect();
    assert!(shop.receipts().is_empty(), "nothing of the filing survived");

    sync_all(&mut shop, std::slice::from_mut(&mut register));
    assert_eq!(unfiled(&register), 0);
    assert_eq!(
        shop.receipts(),
        written(&[(a, ids.into_iter().zip([11, 12, 13]).collect())])
    );
}

#[test]
fn two_registers_and_many_uploads_file_no_receipt_twice() {
    let mut shop = Shop::open();
    let (ids, mut registers) = shop.add_registers(3);
    sync_all(&mut shop, &mut registers);
    let mut sold: Vec<(Uuid, Vec<(Uuid, i64)>)> = ids.iter().map(|id| (*id, Vec::new())).collect();
    for round in 0..5 {
        for (i, register) in registers.iter().enumerate() {
            let totals: Vec<i64> = (0..(round * 37 + i as i64 * 11)).collect();
            let new = sell(register, &totals);
            sold[i].1.extend(new.into_iter().zip(totals));
        }
        sync_all(&mut shop, &mut registers);
    }
    assert_eq!(shop.receipts(), written(&sold));
    let distinct: BTreeSet<Uuid> = shop.receipts().iter().map(|r| r.0).collect();
    assert_eq!(distinct.len(), shop.receipts().len());
}

#[test]
fn a_receipt_the_database_refuses_is_kept_answered_and_filed_after_a_deploy() {
    let mut shop = Shop::open();
    let a = shop.add_register("Register 1");
    let mut register = open_register(&shop.file_of(a), a);
    sync_all(&mut shop, std::slice::from_mut(&mut register));
    let ids = sell(&register, &[-5, 10]);

    let verdicts = report(&mut shop.pg, &mut register);
    let rows = &verdicts[0]["rows"][0];
    assert_eq!(rows["filed"], 1, "{verdicts:?}");
    assert_eq!(
        rows["kept"].as_array().map(Vec::len),
        Some(1),
        "{verdicts:?}"
    );
    deliver(&mut shop.pg, &mut register);
    assert_eq!(unfiled(&register), 0, "a kept row counts as filed");
    assert_eq!(shop.receipts().len(), 1);
    assert_eq!(shop.count("SELECT count(*) FROM sync.inbox"), 1);

    // Not before a fix: what is due is tried again, and kept again.
    shop.run("SELECT sync.refile(true)");
    assert_eq!(shop.count("SELECT tries::bigint FROM sync.inbox"), 2);

    // A deploy lets it through; a relay that starts files it.
    shop.run("ALTER TABLE shop.receipts DROP CONSTRAINT receipts_total_cents_check");
    shop.run("SELECT sync.refile(true)");
    assert_eq!(shop.count("SELECT count(*) FROM sync.inbox"), 0);
    assert_eq!(
        shop.receipts(),
        written(&[(a, ids.into_iter().zip([-5, 10]).collect())])
    );
}

#[test]
fn a_registers_own_columns_and_its_settings_are_filed_as_it_writes_them() {
    let mut shop = Shop::open();
    let a = shop.add_register("Register 1");
    let mut register = open_register(&shop.file_of(a), a);
    sync_all(&mut shop, std::slice::from_mut(&mut register));
    let footer = Uuid::new_v4();
    let conn = register.connection();
    conn.execute("UPDATE register_state SET battery = 80", [])
        .unwrap();
    conn.execute(
        "INSERT INTO footers (register_id, id, text, changed_at) \
         VALUES (?1, ?2, 'Thanks', '2026-10-01T10:00:00.000000Z')",
        rusqlite::params![a.as_bytes().to_vec(), footer.as_bytes().to_vec()],
    )
    .unwrap();
    sync_all(&mut shop, std::slice::from_mut(&mut register));
    let conn = register.connection();
    conn.execute(
        "UPDATE footers SET text = 'Thank you', changed_at = '2026-10-02T10:00:00.000000Z'",
        [],
    )
    .unwrap();
    sync_all(&mut shop, std::slice::from_mut(&mut register));

    let battery: Option<i32> = shop
        .pg
        .query_one(
            "SELECT battery FROM shop.register_state WHERE id = $1",
            &[&a],
        )
        .unwrap()
        .get(0);
    assert_eq!(battery, Some(80));
    let text: String = shop
        .pg
        .query_one(
            "SELECT text FROM shop.footers WHERE register_id = $1",
            &[&a],
        )
        .unwrap()
        .get(0);
    assert_eq!(text, "Thank you");
    assert_eq!(unfiled(&register), 0);
}

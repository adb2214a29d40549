//! The nats transport end to end: PostgreSQL with the extension preloaded
//! and `magic_sync.transport = nats`, its relay worker publishing to a real
//! nats-server with JetStream, and registers on SQLite files running the
//! device loop over their own consumers. No `CALL` anywhere: the worker
//! relays, publishes, and files what comes up.

mod common;
#[path = "common/device.rs"]
mod device;
#[path = "common/filing_shop.rs"]
mod shop;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use async_nats::jetstream;
use device::{Device, PATIENCE};
use magic_sync_replica::transport::nats::{Nats, NatsSettings};
use magic_sync_replica::transport::{Options, Status};
use magic_sync_replica::Replica;
use magic_sync_tests::nats::{self as nats_server, NatsServer};
use rusqlite::Connection;
use shop::Shop;
use uuid::Uuid;

/// The filing shop on a cluster whose relay worker publishes to `nats`.
fn shop_over(nats: &NatsServer, more: &[&str]) -> Shop {
    let url = format!("magic_sync.nats_url={}", nats.url());
    let mut settings = vec![
        "shared_preload_libraries=magic_sync",
        "magic_sync.database=shop",
        "magic_sync.transport=nats",
        "magic_sync.idle=1",
        "magic_sync.send_timeout=2000",
        url.as_str(),
    ];
    settings.extend_from_slice(more);
    Shop::open_with(&settings)
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let began = Instant::now();
    while !done() {
        assert!(began.elapsed() < PATIENCE, "waited {PATIENCE:?} for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A register's device program: its loop over its own consumer.
fn start_register(nats: &NatsServer, replica: Replica) -> Device {
    let settings = NatsSettings::new(nats.url());
    let options = Options {
        poll_every: Duration::from_secs(3600),
        ..Options::default()
    };
    Device::start(replica, options, move |replica| {
        Nats::new(settings, replica).expect("a client of NATS")
    })
}

/// The products a register's file holds: (id, name, price), sorted.
fn held(file: &Path) -> Vec<(Uuid, String, i64)> {
    let conn = Connection::open(file).unwrap();
    let mut rows: Vec<(Uuid, String, i64)> = conn
        .prepare("SELECT id, name, price_cents FROM products")
        .unwrap()
        .query_map([], |r| {
            let id: Vec<u8> = r.get(0)?;
            Ok((Uuid::from_slice(&id).unwrap(), r.get(1)?, r.get(2)?))
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    rows.sort();
    rows
}

fn unfiled(file: &Path) -> i64 {
    Connection::open(file)
        .unwrap()
        .query_row("SELECT count(*) FROM sync_notes", [], |r| r.get(0))
        .unwrap()
}

/// The register's program writes receipts through a connection of its own.
fn sell(file: &Path, me: Uuid, totals: &[i64]) -> Vec<(Uuid, Uuid, i64)> {
    let conn = Connection::open(file).unwrap();
    conn.execute_batch("PRAGMA recursive_triggers = ON")
        .unwrap();
    totals
        .iter()
        .map(|total| {
            let id = Uuid::new_v4();
            conn.execute(
                "INSERT INTO receipts (id, register_id, total_cents, sold_at) \
                 VALUES (?1, ?2, ?3, '2026-10-01T10:00:00.000000Z')",
                rusqlite::params![id.as_bytes().to_vec(), me.as_bytes().to_vec(), total],
            )
            .unwrap();
            (id, me, *total)
        })
        .collect()
}

fn add_product(shop: &mut Shop, name: &str, price: i64) {
    shop.pg
        .execute(
            "INSERT INTO shop.products (id, name, price_cents) VALUES (gen_random_uuid(), $1, $2)",
            &[&name, &price],
        )
        .unwrap();
}

/// Waits until every register's file holds exactly the server's products.
fn until_every_register_holds_the_servers_products(shop: &mut Shop, files: &[PathBuf]) {
    wait_until("every register to hold the server's products", || {
        let products = shop.products();
        files.iter().all(|file| held(file) == products)
    });
}

fn sorted(mut rows: Vec<(Uuid, Uuid, i64)>) -> Vec<(Uuid, Uuid, i64)> {
    rows.sort();
    rows
}

fn worker_pid(shop: &mut Shop) -> Option<i32> {
    shop.pg
        .query_opt(
            "SELECT pid FROM pg_stat_activity WHERE backend_type = 'magic_sync relay' AND datname = 'shop'",
            &[],
        )
        .unwrap()
        .map(|row| row.get(0))
}

fn outbox_count(shop: &mut Shop) -> i64 {
    shop.count("SELECT count(*) FROM sync.outbox")
}

/// The shop with two registers running their loops, each holding Tea.
fn two_registers_holding_tea(nats: &NatsServer) -> (Shop, Vec<Uuid>, Vec<PathBuf>, Vec<Device>) {
    let mut shop = shop_over(nats, &[]);
    let ids = vec![shop.add_register("R1"), shop.add_register("R2")];
    let files: Vec<PathBuf> = ids.iter().map(|id| shop.file_of(*id)).collect();
    let devices = ids
        .iter()
        .zip(&files)
        .map(|(id, file)| start_register(nats, shop::open_register(file, *id)))
        .collect();
    add_product(&mut shop, "Tea", 250);
    until_every_register_holds_the_servers_products(&mut shop, &files);
    (shop, ids, files, devices)
}

#[test]
fn over_nats_changes_reach_every_register_and_receipts_written_offline_are_filed_once() {
    let nats = nats_server::start();
    let (mut shop, ids, files, mut devices) = two_registers_holding_tea(&nats);
    for price in [260, 270] {
        shop.run(&format!(
            "UPDATE shop.products SET price_cents = {price}, updated_at = now() WHERE name = 'Tea'"
        ));
        until_every_register_holds_the_servers_products(&mut shop, &files);
    }

    // The first register goes offline and sells; the server changes on.
    let away = devices.remove(0);
    let (replica, _) = away.stop();
    drop(replica);
    let sold = sell(&files[0], ids[0], &[1250, 399]);
    add_product(&mut shop, "Cake", 400);
    until_every_register_holds_the_servers_products(&mut shop, &files[1..]);
    assert!(shop.receipts().is_empty());

    // Back, it takes what it missed and its receipts are filed, once.
    let back = start_register(&nats, shop::open_register(&files[0], ids[0]));
    until_every_register_holds_the_servers_products(&mut shop, &files);
    wait_until("the receipts filed and the Filed applied", || {
        unfiled(&files[0]) == 0
    });
    assert_eq!(shop.receipts(), sorted(sold.clone()));
    assert_eq!(outbox_count(&mut shop), 0, "everything left the outbox");
    drop(back);
    assert_eq!(shop.receipts(), sorted(sold));
}

#[test]
fn a_nats_server_stopped_and_started_again_mid_stream_loses_nothing() {
    let mut nats = nats_server::start();
    let (mut shop, ids, files, _devices) = two_registers_holding_tea(&nats);

    nats.stop();
    // Changes and sales while the transport is down: the outbox keeps the
    // messages, the registers their receipts.
    for (i, price) in [300, 310, 320].into_iter().enumerate() {
        shop.run(&format!(
            "UPDATE shop.products SET price_cents = {price}, updated_at = now() WHERE name = 'Tea'"
        ));
        add_product(&mut shop, &format!("Bun {i}"), 100 + i as i64);
    }
    let mut sold = sell(&files[0], ids[0], &[500]);
    sold.extend(sell(&files[1], ids[1], &[600, 700]));
    wait_until("the worker to record the changes", || {
        outbox_count(&mut shop) >= 2
    });

    nats.start_again();
    until_every_register_holds_the_servers_products(&mut shop, &files);
    wait_until("every receipt filed", || shop.receipts().len() == 3);
    wait_until("the Filed applied", || {
        files.iter().all(|f| unfiled(f) == 0)
    });
    assert_eq!(shop.receipts(), sorted(sold));
}

#[test]
fn the_worker_killed_between_recording_and_publishing_publishes_once_started_again() {
    let mut nats = nats_server::start();
    let (mut shop, _ids, files, _devices) = two_registers_holding_tea(&nats);

    // NATS away: the pass records, and the messages wait in the outbox.
    nats.stop();
    add_product(&mut shop, "Cake", 400);
    wait_until("the change recorded", || outbox_count(&mut shop) >= 2);
    let pid = worker_pid(&mut shop).expect("the worker");
    std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    nats.start_again();
    wait_until("the server to come back with a new worker", || {
        std::thread::sleep(Duration::from_millis(200));
        let Ok(mut pg) = postgres::Client::connect(&shop.cluster.url("shop"), postgres::NoTls)
        else {
            return false;
        };
        pg.query_opt(
            "SELECT pid FROM pg_stat_activity WHERE backend_type = 'magic_sync relay'",
            &[],
        )
        .ok()
        .flatten()
        .is_some_and(|row| row.get::<_, i32>(0) != pid)
    });
    shop.reconnect();
    until_every_register_holds_the_servers_products(&mut shop, &files);
}

#[test]
fn the_worker_killed_in_the_middle_of_a_pass_loses_nothing() {
    let nats = nats_server::start();
    let (mut shop, _ids, files, _devices) = two_registers_holding_tea(&nats);
    shop.run("SET synchronous_commit = on");
    // A pass long enough to be killed in.
    shop.run(
        "INSERT INTO shop.products (id, name, price_cents) \
         SELECT gen_random_uuid(), 'Item ' || i, i FROM generate_series(1, 20000) AS i",
    );
    std::thread::sleep(Duration::from_millis(300));
    let pid = worker_pid(&mut shop).expect("the worker");
    std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    wait_until("the server to come back", || {
        std::thread::sleep(Duration::from_millis(200));
        postgres::Client::connect(&shop.cluster.url("shop"), postgres::NoTls).is_ok()
    });
    shop.reconnect();
    until_every_register_holds_the_servers_products(&mut shop, &files);
}

#[test]
fn a_message_published_twice_is_stored_once_and_applied_once() {
    let nats = nats_server::start();
    let (mut shop, ids, files, mut devices) = two_registers_holding_tea(&nats);
    // The first register away, so its next message stays in the stream.
    let (replica, _) = devices.remove(0).stop();
    drop(replica);
    shop.run("UPDATE shop.products SET price_cents = 999, updated_at = now() WHERE name = 'Tea'");
    until_every_register_holds_the_servers_products(&mut shop, &files[1..]);

    let runtime = tokio::runtime::Runtime::new().unwrap();
    let subject = format!("magic_sync.down.{}", ids[0]);
    runtime.block_on(async {
        let client = async_nats::connect(nats.url()).await.unwrap();
        let js = jetstream::new(client);
        let mut stream = js.get_stream("MAGIC_SYNC_DOWN").await.unwrap();
        let stored = stream.info().await.unwrap().state.messages;
        // The worker's publish whose acknowledgement was lost: it publishes
        // the message again, under the same id.
        let consumer: jetstream::consumer::PullConsumer =
            stream.get_consumer(&ids[0].to_string()).await.unwrap();
        let mut batch = consumer.fetch().max_messages(1).messages().await.unwrap();
        let message = futures_util::StreamExt::next(&mut batch)
            .await
            .unwrap()
            .unwrap();
        let id = message
            .headers
            .as_ref()
            .and_then(|h| h.get("Nats-Msg-Id"))
            .expect("a message id")
            .to_string();
        message
            .ack_with(jetstream::AckKind::Nak(None))
            .await
            .unwrap();
        let again = js
            .send_publish(
                subject.clone(),
                jetstream::message::PublishMessage::build()
                    .payload(message.payload.clone())
                    .message_id(&id),
            )
            .await
            .unwrap()
            .await
            .unwrap();
        assert!(again.duplicate, "stored twice");
        assert_eq!(stream.info().await.unwrap().state.messages, stored);
    });

    let mut back = start_register(&nats, shop::open_register(&files[0], ids[0]));
    until_every_register_holds_the_servers_products(&mut shop, &files);
    let applied = back
        .drain()
        .into_iter()
        .filter(|s| matches!(s, Status::Applied(_)))
        .count();
    assert_eq!(applied, 1, "{:?}", back.history());
}

#[test]
fn a_nats_server_that_does_not_answer_is_named_in_the_log_with_its_setting() {
    let mut nats = nats_server::start();
    let url = nats.url();
    nats.stop();
    let mut shop = shop_over(&nats, &[]);
    let id = shop.add_register("R1");
    add_product(&mut shop, "Tea", 250);
    wait_until("the worker to say which server it cannot reach", || {
        let log = shop.cluster.log();
        log.contains(&format!("cannot connect to {url} (magic_sync.nats_url)"))
    });
    // Passes go on meanwhile; what they record waits in the outbox.
    wait_until("the register's snapshot recorded", || {
        outbox_count(&mut shop) > 0
    });
    nats.start_again();
    let file = shop.file_of(id);
    let _device = start_register(&nats, shop::open_register(&file, id));
    until_every_register_holds_the_servers_products(&mut shop, &[file]);
}

#[test]
fn postgresql_stopped_at_once_and_started_again_loses_nothing_over_nats() {
    let nats = nats_server::start();
    let (mut shop, ids, files, _devices) = two_registers_holding_tea(&nats);
    shop.run("SET synchronous_commit = on");
    let mut sold = sell(&files[0], ids[0], &[100, 200]);
    add_product(&mut shop, "Cake", 400);
    shop.cluster.restart_immediately();
    shop.reconnect();
    sold.extend(sell(&files[1], ids[1], &[300]));
    add_product(&mut shop, "Bun", 120);
    until_every_register_holds_the_servers_products(&mut shop, &files);
    wait_until("every receipt filed", || {
        shop.receipts().len() == sold.len()
    });
    wait_until("the Filed applied", || {
        files.iter().all(|f| unfiled(f) == 0)
    });
    assert_eq!(shop.receipts(), sorted(sold));
}

#[test]
fn a_stream_deleted_under_the_worker_is_made_again_and_nothing_is_lost() {
    let nats = nats_server::start();
    let (mut shop, _ids, files, _devices) = two_registers_holding_tea(&nats);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let client = async_nats::connect(nats.url()).await.unwrap();
        jetstream::new(client)
            .delete_stream("MAGIC_SYNC_DOWN")
            .await
            .unwrap();
    });
    add_product(&mut shop, "Cake", 400);
    until_every_register_holds_the_servers_products(&mut shop, &files);
    assert!(
        shop.cluster
            .log()
            .contains("no stream for the replicas' messages: making it again"),
        "{}",
        shop.cluster.log()
    );
}

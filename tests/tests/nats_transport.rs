//! The nats transport end to end: PostgreSQL with the extension preloaded
//! and `magic_sync.transport = nats`, its relay worker publishing to a real
//! nats-server with JetStream, and registers on SQLite files running the
//! device loop over their own consumers. No `CALL` anywhere: the worker
//! relays, publishes, and files what comes up. Each fault is followed by
//! the same check: every register holds exactly the server's products, and
//! every receipt the registers wrote is filed once.

mod common;
#[path = "common/device.rs"]
mod device;
#[path = "common/nats_transport_help.rs"]
mod help;
#[path = "common/nats_shop.rs"]
mod nats_shop;
#[path = "common/register_files.rs"]
mod register_files;
#[path = "common/filing_shop.rs"]
mod shop;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use async_nats::jetstream;
use device::{wait_until, Device, PATIENCE};
use help::{every_receipt_is_filed_once, kill_9, until_a_new_worker, worker_pid};
use magic_sync_replica::transport::nats_subjects as subjects;
use magic_sync_replica::transport::Status;
use magic_sync_replica::{Received, Replica, Upload};
use magic_sync_tests::nats::{self as nats_server, NatsServer};
use nats_shop::{shop_over, start_register, SEND_TIMEOUT};
use register_files::{
    sell_through_its_own_connection, unfiled, until_every_register_holds_the_servers_products,
};
use shop::Shop;
use uuid::Uuid;

/// Messages the transport has not taken yet (one it took stays in the
/// outbox, published, until its register applied it).
fn outbox_count(shop: &mut Shop) -> i64 {
    shop.count("SELECT count(*) FROM sync.outbox WHERE NOT published")
}

/// The shop with two registers running their loops, each holding Tea.
fn two_registers_holding_tea(nats: &NatsServer) -> (Shop, Vec<Uuid>, Vec<PathBuf>, Vec<Device>) {
    let mut shop = shop_over(&nats.url(), &[SEND_TIMEOUT]);
    let ids = vec![shop.add_register("R1"), shop.add_register("R2")];
    let files: Vec<PathBuf> = ids.iter().map(|id| shop.file_of(*id)).collect();
    let devices = ids
        .iter()
        .zip(&files)
        .map(|(id, file)| start_register(&nats.url(), shop::open_register(file, *id)))
        .collect();
    shop.add_product("Tea", 250);
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
    let sold = sell_through_its_own_connection(&files[0], ids[0], &[1250, 399]);
    shop.add_product("Cake", 400);
    until_every_register_holds_the_servers_products(&mut shop, &files[1..]);
    assert!(shop.receipts().is_empty());

    // Back, it takes what it missed and its receipts are filed, once.
    let back = start_register(&nats.url(), shop::open_register(&files[0], ids[0]));
    until_every_register_holds_the_servers_products(&mut shop, &files);
    every_receipt_is_filed_once(&mut shop, &ids, &files, &sold);
    assert_eq!(outbox_count(&mut shop), 0, "everything left the outbox");
    // What JetStream took stays until its register says it applied it; an
    // answer (Filed), which no register confirms, until it applied a
    // message written after it, or for an hour.
    wait_until("every message published confirmed applied", || {
        shop.count("SELECT count(*) FROM sync.outbox WHERE kind <> 'filed'") == 0
    });
    drop(back);
    assert_eq!(shop.receipts(), sold);
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
        shop.add_product(&format!("Bun {i}"), 100 + i as i64);
    }
    let mut sold = sell_through_its_own_connection(&files[0], ids[0], &[500]);
    sold.extend(sell_through_its_own_connection(
        &files[1],
        ids[1],
        &[600, 700],
    ));
    wait_until("the worker to record the changes", || {
        outbox_count(&mut shop) >= 2
    });

    nats.start_again();
    until_every_register_holds_the_servers_products(&mut shop, &files);
    every_receipt_is_filed_once(&mut shop, &ids, &files, &sold);
}

/// Messages not yet published to each register (a Filed aside).
fn unpublished_for(shop: &mut Shop, register: Uuid) -> i64 {
    shop.pg
        .query_one(
            "SELECT count(*) FROM sync.outbox WHERE replica = $1 AND kind <> 'filed' AND NOT published",
            &[&register],
        )
        .unwrap()
        .get(0)
}

#[test]
fn the_worker_killed_between_recording_and_publishing_publishes_once_started_again() {
    let mut nats = nats_server::start();
    let (mut shop, ids, files, devices) = two_registers_holding_tea(&nats);
    shop.run("SET synchronous_commit = on");
    let mut sold = sell_through_its_own_connection(&files[0], ids[0], &[150]);
    devices[0].control.poke();

    // NATS away: the pass records, and the messages wait in the outbox;
    // the second register's receipts wait on it.
    nats.stop();
    shop.add_product("Cake", 400);
    sold.extend(sell_through_its_own_connection(
        &files[1],
        ids[1],
        &[250, 350],
    ));
    devices[1].control.poke();
    wait_until("the change recorded for both registers", || {
        ids.iter().all(|id| unpublished_for(&mut shop, *id) > 0)
    });
    // What the pass recorded on disk, so the crash cannot take it back:
    // the worker killed has recorded, and not published.
    shop.run("CHECKPOINT");
    let pid = worker_pid(&mut shop.pg).expect("the worker");
    kill_9(pid);
    until_a_new_worker(&mut shop, pid);
    for id in &ids {
        assert!(
            unpublished_for(&mut shop, *id) > 0,
            "what the killed worker recorded for {id} is still to publish"
        );
    }

    // NATS back: the new worker publishes what the killed one recorded.
    nats.start_again();
    sold.extend(sell_through_its_own_connection(&files[0], ids[0], &[450]));
    devices[0].control.poke();
    until_every_register_holds_the_servers_products(&mut shop, &files);
    every_receipt_is_filed_once(&mut shop, &ids, &files, &sold);
}

/// Waits, looking often, until the worker `pid` is in a pass, and kills it
/// there (it panics if it never sees one).
fn kill_the_worker_in_a_pass(shop: &mut Shop, pid: i32) {
    let began = Instant::now();
    while !help::in_a_pass(&mut shop.pg, pid) {
        assert!(
            began.elapsed() < PATIENCE,
            "waited {PATIENCE:?} to see the worker in a pass"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    kill_9(pid);
}

#[test]
fn the_worker_killed_in_the_middle_of_a_pass_loses_nothing() {
    let nats = nats_server::start();
    let (mut shop, ids, files, devices) = two_registers_holding_tea(&nats);
    shop.run("SET synchronous_commit = on");
    // Receipts on their way up while it happens.
    let mut sold = sell_through_its_own_connection(&files[0], ids[0], &[100, 200]);
    sold.extend(sell_through_its_own_connection(&files[1], ids[1], &[300]));
    for device in &devices {
        device.control.poke();
    }
    let pid = worker_pid(&mut shop.pg).expect("the worker");
    // A pass long enough to be killed in: 20,000 products for each of two
    // registers, planned and recorded in one pass.
    shop.run(
        "INSERT INTO shop.products (id, name, price_cents) \
         SELECT gen_random_uuid(), 'Item ' || i, i FROM generate_series(1, 20000) AS i",
    );
    kill_the_worker_in_a_pass(&mut shop, pid);
    until_a_new_worker(&mut shop, pid);
    let log = shop.cluster.log();
    assert!(
        log.contains(&format!("(PID {pid}) was terminated by signal 9: Killed\n"))
            && log.contains("Failed process was running: relay round"),
        "the postmaster saw the worker die in its round:\n{log}"
    );
    // And more, once it is back.
    shop.run("UPDATE shop.products SET price_cents = 275, updated_at = now() WHERE name = 'Tea'");
    sold.extend(sell_through_its_own_connection(&files[1], ids[1], &[400]));
    devices[1].control.poke();
    until_every_register_holds_the_servers_products(&mut shop, &files);
    every_receipt_is_filed_once(&mut shop, &ids, &files, &sold);
}

/// How many messages a stream holds on `subject`.
async fn stored_on(stream: &jetstream::stream::Stream, subject: &str) -> usize {
    let mut info = stream.info_with_subjects(subject).await.unwrap();
    let mut stored = 0;
    while let Some((_, count)) = futures_util::TryStreamExt::try_next(&mut info)
        .await
        .unwrap()
    {
        stored += count;
    }
    stored
}

#[test]
fn a_message_published_twice_is_stored_once_and_applied_once() {
    let nats = nats_server::start();
    let (mut shop, ids, files, mut devices) = two_registers_holding_tea(&nats);
    // The first register away, so its next message stays in the stream;
    // it sells meanwhile, and so does the other.
    let (replica, _) = devices.remove(0).stop();
    drop(replica);
    let other = &devices[0];
    let mut sold = sell_through_its_own_connection(&files[0], ids[0], &[120, 130]);
    shop.run("UPDATE shop.products SET price_cents = 999, updated_at = now() WHERE name = 'Tea'");
    sold.extend(sell_through_its_own_connection(&files[1], ids[1], &[140]));
    other.control.poke();
    until_every_register_holds_the_servers_products(&mut shop, &files[1..]);

    let runtime = tokio::runtime::Runtime::new().unwrap();
    let subject = format!("magic_sync.down.{}", ids[0]);
    runtime.block_on(async {
        let client = async_nats::connect(nats.url()).await.unwrap();
        let js = jetstream::new(client);
        let stream = js.get_stream("MAGIC_SYNC_DOWN").await.unwrap();
        // (The other register's messages go to the same stream meanwhile.)
        let stored = stored_on(&stream, &subject).await;
        assert!(stored > 0, "the message waits in the stream");
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
        assert_eq!(stored_on(&stream, &subject).await, stored);
    });

    let mut back = start_register(&nats.url(), shop::open_register(&files[0], ids[0]));
    until_every_register_holds_the_servers_products(&mut shop, &files);
    // Its receipts filed, and the Filed applied, before the count.
    every_receipt_is_filed_once(&mut shop, &ids, &files, &sold);
    let downs_applied = back
        .drain()
        .into_iter()
        .filter(|s| matches!(s, Status::Applied(Received::Applied { .. })))
        .count();
    assert_eq!(downs_applied, 1, "{:?}", back.history());
}

/// Publishes an Up on `subject` as a device does, under `msg_id` when it
/// carries rows; waits for the up stream to store it.
fn publish_up(nats: &NatsServer, subject: String, msg_id: Option<String>, bytes: Vec<u8>) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let client = async_nats::connect(nats.url()).await.unwrap();
        let js = jetstream::new(client);
        let mut headers = async_nats::HeaderMap::new();
        if let Some(id) = msg_id {
            headers.insert(subjects::MSG_ID, id.as_str());
        }
        let stored = js
            .publish_with_headers(subject, headers, bytes.into())
            .await
            .expect("publishes the Up")
            .await
            .expect("the up stream stores it");
        assert!(!stored.duplicate, "the Up taken for one published before");
    });
}

/// The Up of a register's next rows, built by the replica library: every
/// Up it offers before that one (where it stands) published as it would be.
fn next_up_with_rows(nats: &NatsServer, replica: &mut Replica) -> Upload {
    loop {
        let up = replica.next_up().unwrap().expect("an Up carrying the rows");
        if up.number().is_some() {
            return up;
        }
        publish_up(
            nats,
            subjects::up_subject(subjects::DEFAULT_PREFIX, replica.me(), &up.lane),
            None,
            up.bytes.clone(),
        );
        replica.sent(&up).unwrap();
    }
}

/// The origins an Up's receipts say, by receipt.
fn origins_in(up: &Upload) -> Vec<(Uuid, Uuid)> {
    let mut origins: Vec<(Uuid, Uuid)> = up
        .message()
        .tables
        .iter()
        .filter(|t| t.table == "receipts")
        .flat_map(|t| &t.upserts)
        .map(|row| {
            let row: serde_json::Value = serde_json::from_slice(row).expect("a JSON row");
            let uuid = |name: &str| Uuid::try_parse(row[name].as_str().expect(name)).unwrap();
            (uuid("id"), uuid("register_id"))
        })
        .collect();
    origins.sort();
    origins
}

/// A register back from a fault has nothing left to send: no row unsent,
/// none waiting for its Filed, none set aside.
fn assert_nothing_left_to_send(replica: &Replica) {
    let backlog = replica.progress().unwrap();
    assert!(
        backlog
            .iter()
            .all(|t| t.unsent == 0 && t.unfiled == 0 && t.set_aside == 0),
        "{backlog:?}"
    );
}

#[test]
fn an_up_published_on_one_replicas_subject_is_filed_as_that_replicas_whatever_it_claims() {
    let nats = nats_server::start();
    let (mut shop, ids, files, mut devices) = two_registers_holding_tea(&nats);
    let (a, b) = (ids[0], ids[1]);
    // Register A's program stopped; its file, under its identity, holds a
    // receipt of its own and one whose origin column says register B.
    let (mut replica, _) = devices.remove(0).stop();
    let own = sell_through_its_own_connection(&files[0], a, &[500]);
    let claimed = Uuid::new_v4();
    replica
        .connection()
        .execute(
            "INSERT INTO receipts (id, register_id, total_cents, sold_at) \
             VALUES (?1, ?2, 600, '2026-10-01T10:00:00.000000Z')",
            rusqlite::params![claimed.as_bytes().to_vec(), b.as_bytes().to_vec()],
        )
        .unwrap();
    let up = next_up_with_rows(&nats, &mut replica);
    let mut says = vec![(own[0].0, a), (claimed, b)];
    says.sort();
    assert_eq!(origins_in(&up), says, "the Up claims a receipt of B's");

    // Published on A's subject, as A's device does.
    let number = up.number().expect("an upload number");
    publish_up(
        &nats,
        subjects::up_subject(subjects::DEFAULT_PREFIX, a, &up.lane),
        Some(subjects::up_msg_id(a, &up.lane, number)),
        up.bytes.clone(),
    );
    replica.sent(&up).unwrap();
    // Nothing else of A's is running: what is filed is this Up, filed.
    wait_until("A's own receipt filed", || !shop.receipts().is_empty());
    assert!(
        help::answered_at(&mut shop.pg, a, number).is_some(),
        "the Up answered as A's"
    );
    assert!(
        help::answered_at(&mut shop.pg, b, number).is_none(),
        "the Up answered as B's"
    );
    // Filed as the subject's replica: the origin column is the sender, and
    // a row that names another replica there is malformed and left out
    // (docs/src/filing.md, "The origin column"): filed neither as B's nor
    // as A's, nor kept to be filed later.
    assert_eq!(shop.receipts(), own, "only A's own receipt is filed");
    let kept = shop.count("SELECT count(*) FROM sync.inbox");
    assert_eq!(kept, 0, "a receipt kept in the inbox");
    // Nobody reads the verdict over nats: the worker says what it left out.
    let said = format!("row(s) of \"receipts\" in an Up of replica {}", ids[0]);
    wait_until("the worker to log the row left out", || {
        shop.cluster.log().contains(&said)
    });

    // The Filed goes back down to A: the row left out counts as answered,
    // and A has nothing left to send.
    let back = start_register(&nats.url(), replica);
    wait_until("the Filed applied on A", || unfiled(&files[0]) == 0);
    let (replica, _) = back.stop();
    assert_nothing_left_to_send(&replica);
    assert_eq!(shop.receipts(), own, "only A's own receipt is filed");
    until_every_register_holds_the_servers_products(&mut shop, &files);
}

#[test]
fn a_nats_server_that_does_not_answer_is_named_in_the_log_with_its_setting() {
    let mut nats = nats_server::start();
    let url = nats.url();
    nats.stop();
    let mut shop = shop_over(&nats.url(), &[SEND_TIMEOUT]);
    let id = shop.add_register("R1");
    shop.add_product("Tea", 250);
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
    let _device = start_register(&nats.url(), shop::open_register(&file, id));
    until_every_register_holds_the_servers_products(&mut shop, &[file]);
}

#[test]
fn postgresql_stopped_at_once_and_started_again_loses_nothing_over_nats() {
    let nats = nats_server::start();
    let (mut shop, ids, files, _devices) = two_registers_holding_tea(&nats);
    shop.run("SET synchronous_commit = on");
    let mut sold = sell_through_its_own_connection(&files[0], ids[0], &[100, 200]);
    shop.add_product("Cake", 400);
    shop.cluster.restart_immediately();
    shop.reconnect();
    sold.extend(sell_through_its_own_connection(&files[1], ids[1], &[300]));
    shop.add_product("Bun", 120);
    until_every_register_holds_the_servers_products(&mut shop, &files);
    every_receipt_is_filed_once(&mut shop, &ids, &files, &sold);
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
    shop.add_product("Cake", 400);
    until_every_register_holds_the_servers_products(&mut shop, &files);
    assert!(
        shop.cluster
            .log()
            .contains("no stream for the replicas' messages: making it again"),
        "{}",
        shop.cluster.log()
    );
}

/// The relay's consumer of every replica's Ups
/// (pg_magic_sync/src/publish/nats/mod.rs).
const UP_CONSUMER: &str = "magic_sync_relay";

/// The message ids of the Ups the up stream still holds: the ones the
/// relay has not acknowledged (a work queue drops each once it is).
fn ups_not_acknowledged(nats: &NatsServer) -> Vec<String> {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let client = async_nats::connect(nats.url()).await.unwrap();
        let js = jetstream::new(client);
        let mut stream = js.get_stream(subjects::UP_STREAM).await.unwrap();
        let state = stream.info().await.unwrap().state.clone();
        let mut ids = Vec::new();
        if state.messages == 0 {
            return ids;
        }
        for sequence in state.first_sequence..=state.last_sequence {
            // A sequence acknowledged meanwhile is gone: skipped.
            if let Ok(message) = stream.get_raw_message(sequence).await {
                if let Some(id) = message.headers.get(subjects::MSG_ID) {
                    ids.push(id.to_string());
                }
            }
        }
        ids
    })
}

/// Has the relay's consumer hand out again what it handed out and was not
/// acknowledged after 1 s rather than its 30: JetStream's clock, not the
/// worker's behaviour, so the test need not wait out half a minute. (By
/// the request nats-server 2.9 takes to change a durable consumer: the
/// client's `create_consumer` leaves one that exists as it is.)
fn hand_out_again_sooner(nats: &NatsServer) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let client = async_nats::connect(nats.url()).await.unwrap();
        let js = jetstream::new(client.clone());
        let stream = js.get_stream(subjects::UP_STREAM).await.unwrap();
        let mut config = stream.consumer_info(UP_CONSUMER).await.unwrap().config;
        config.ack_wait = Duration::from_secs(1);
        let request = serde_json::json!({ "stream_name": subjects::UP_STREAM, "config": config });
        client
            .request(
                format!(
                    "$JS.API.CONSUMER.DURABLE.CREATE.{}.{UP_CONSUMER}",
                    subjects::UP_STREAM
                ),
                serde_json::to_vec(&request).unwrap().into(),
            )
            .await
            .expect("nats-server answers");
        // (Its answer may still show the old config, after a restart.)
        let now = stream.consumer_info(UP_CONSUMER).await.unwrap().config;
        assert_eq!(
            now.ack_wait,
            Duration::from_secs(1),
            "the relay's consumer takes a shorter ack_wait"
        );
    });
}

#[test]
fn an_up_whose_filing_committed_before_the_worker_died_is_answered_filed_already_when_it_comes_again(
) {
    // The worker files an Up, the filing commits, and the worker dies before
    // JetStream heard its acknowledgement: JetStream hands the very same
    // stream message out again, to the worker that comes next, which must
    // answer it as filed already (sync.answered) and file nothing twice.
    // To land the kill in that gap, the test holds a lock the filing of a
    // receipt waits for; while the worker waits on it, nats-server stops;
    // the lock goes, the filing commits, and the worker is killed while
    // nats-server is away, so its acknowledgement reaches no one (its
    // client would otherwise send it on connecting again).
    let mut nats = nats_server::start();
    let (mut shop, ids, files, mut devices) = two_registers_holding_tea(&nats);
    let a = ids[0];
    shop.run("SET synchronous_commit = on");
    let mut holder = shop.cluster.connect("shop");
    let mut hold = holder.transaction().unwrap();
    hold.batch_execute("LOCK TABLE shop.receipts IN SHARE MODE")
        .unwrap();

    let sold = sell_through_its_own_connection(&files[0], a, &[1234]);
    devices[0].control.poke();
    let sent = devices[0].expect("the receipt's Up published", |s| {
        matches!(
            s,
            Status::Sent {
                upload: Some(_),
                ..
            }
        )
    });
    let Status::Sent {
        lane,
        upload: Some(number),
    } = sent
    else {
        unreachable!()
    };
    // Register A away from here on: nothing else of its comes meanwhile.
    let (replica, _) = devices.remove(0).stop();
    let pid = worker_pid(&mut shop.pg).expect("the worker");
    wait_until("the worker filing the Up, held by the lock", || {
        help::waits_on_a_table(&mut shop.pg, pid)
    });
    let msg_id = subjects::up_msg_id(a, &lane, number);
    assert!(
        ups_not_acknowledged(&nats).contains(&msg_id),
        "the Up acknowledged before its filing committed"
    );
    nats.stop();
    hold.commit().unwrap();
    wait_until("the filing committed", || shop.receipts() == sold);
    let first = help::answered_at(&mut shop.pg, a, number).expect("the Up answered");
    // The filing on disk, so the crash cannot take it back.
    shop.run("CHECKPOINT");
    kill_9(pid);
    until_a_new_worker(&mut shop, pid);
    assert_eq!(shop.receipts(), sold, "the filing outlived the crash");
    assert_eq!(help::answered_at(&mut shop.pg, a, number), Some(first));

    nats.start_again();
    assert!(
        ups_not_acknowledged(&nats).contains(&msg_id),
        "the Up filed is still unacknowledged in the stream"
    );
    hand_out_again_sooner(&nats);
    wait_until("the Up handed out again, and acknowledged", || {
        !ups_not_acknowledged(&nats).contains(&msg_id)
    });
    let again = help::answered_at(&mut shop.pg, a, number).expect("the Up answered");
    assert!(again > first, "the Up that came again was answered again");
    assert_eq!(shop.receipts(), sold, "filed once");

    // A back: it takes the Filed, and has nothing left to send.
    let back = start_register(&nats.url(), replica);
    every_receipt_is_filed_once(&mut shop, &ids, &files, &sold);
    let (replica, _) = back.stop();
    assert_nothing_left_to_send(&replica);
    until_every_register_holds_the_servers_products(&mut shop, &files);
}

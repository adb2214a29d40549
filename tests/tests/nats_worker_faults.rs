//! The relay worker's publishing over NATS JetStream, and the bounds of a
//! replica's outbox, under faults: PostgreSQL with the extension preloaded
//! and its relay worker, a real nats-server with JetStream, and registers
//! on SQLite files running the device loop (over the queue for the byte
//! bound, where the outbox is what a register away leaves behind). Where a
//! fault lies between JetStream and the worker (an acknowledgement lost,
//! answers held back), a small TCP proxy in the test stands between them
//! (common/nats_worker_faults_help.rs); the registers talk to nats-server
//! directly.

mod common;
#[path = "common/device.rs"]
mod device;
#[path = "common/nats_worker_faults_help.rs"]
mod help;
#[path = "common/nats_shop.rs"]
mod nats_shop;
#[path = "common/register_files.rs"]
mod register_files;
#[path = "common/filing_shop.rs"]
mod shop;

use std::path::{Path, PathBuf};
use std::time::Duration;

use async_nats::jetstream::{self, consumer, stream};
use device::{wait_until, Device};
use futures_util::StreamExt;
use help::{nats_server_pid, Proxy, Stopped};
use magic_sync_replica::transport::nats::NatsSettings;
use magic_sync_replica::transport::nats_subjects as subjects;
use magic_sync_replica::transport::queue::Queue;
use magic_sync_replica::transport::{Options, Status};
use magic_sync_replica::{Received, Replica};
use magic_sync_tests::nats::{self as nats_server, NatsServer};
use nats_shop::{shop_over, start_register, start_register_over, waiting_for_news, SEND_TIMEOUT};
use register_files::{
    holds_the_servers_products, products_in, sell_through_its_own_connection, unfiled,
    until_every_register_holds_the_servers_products, Receipt,
};
use shop::Shop;
use tokio::runtime::Runtime;
use uuid::Uuid;

/// The filing shop whose relay worker leaves the messages in the outbox
/// for the devices to take (the queue), with these settings too.
fn shop_over_the_queue(more: &[&str]) -> Shop {
    let mut settings = vec![
        "shared_preload_libraries=magic_sync",
        "magic_sync.database=shop",
        "magic_sync.idle=1",
    ];
    settings.extend_from_slice(more);
    Shop::open_with(&settings)
}

/// A register's device program over the server's queue.
fn start_queue_register(shop: &Shop, replica: Replica) -> Device {
    let config: postgres::Config = shop.cluster.url("shop").parse().unwrap();
    Device::start(replica, Options::default(), move |replica| {
        Queue::new(config, replica.me())
    })
}

fn set_price(shop: &mut Shop, name: &str, price: i64) {
    shop.pg
        .execute(
            "UPDATE shop.products SET price_cents = $2, updated_at = now() WHERE name = $1",
            &[&name, &price],
        )
        .unwrap();
}

/// One register, R1, its loop started by `start`, holding the server's
/// one product, Tea: its id, its file and its device.
fn one_register_holding_tea(
    shop: &mut Shop,
    start: impl FnOnce(&Shop, Replica) -> Device,
) -> (Uuid, PathBuf, Device) {
    let id = shop.add_register("R1");
    let file = shop.file_of(id);
    let device = start(shop, shop::open_register(&file, id));
    shop.add_product("Tea", 250);
    until_every_register_holds_the_servers_products(shop, std::slice::from_ref(&file));
    (id, file, device)
}

/// Messages waiting in a replica's outbox for the transport to take them
/// (over nats one it took stays, published, until the replica applied it).
fn outbox_of(shop: &mut Shop, replica: Uuid) -> i64 {
    shop.pg
        .query_one(
            "SELECT count(*) FROM sync.outbox WHERE replica = $1 AND NOT published",
            &[&replica],
        )
        .unwrap()
        .get(0)
}

/// The last message written for a replica (its chain's sequence).
fn last_sequence(shop: &mut Shop, replica: Uuid) -> i64 {
    shop.pg
        .query_opt(
            "SELECT last_sequence FROM sync.replicas WHERE id = $1",
            &[&replica],
        )
        .unwrap()
        .map_or(0, |row| row.get(0))
}

/// The snapshot last begun for a replica.
fn snapshot_of(shop: &mut Shop, replica: Uuid) -> Option<Uuid> {
    shop.pg
        .query_opt(
            "SELECT snapshot_id FROM sync.replicas WHERE id = $1",
            &[&replica],
        )
        .unwrap()
        .and_then(|row| row.get(0))
}

fn alarms_of(shop: &mut Shop, replica: Uuid) -> Vec<String> {
    shop.pg
        .query(
            "SELECT what FROM sync.alarms WHERE replica = $1 ORDER BY id",
            &[&replica],
        )
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect()
}

/// A running register's statuses until its file holds the server's
/// products and its loop waits for news; answers every status it reported.
fn statuses_until_settled(shop: &mut Shop, device: &mut Device, file: &Path) -> Vec<Status> {
    let mut seen = Vec::new();
    wait_until(
        "the register to settle, holding the server's products",
        || {
            seen.extend(device.drain());
            matches!(seen.last(), Some(Status::Waiting { .. }))
                && holds_the_servers_products(shop, file)
        },
    );
    seen
}

/// The `Nats-Msg-Id` of each message the stream of messages down, at the
/// NATS server at `url`, holds on `subject`, in order.
fn ids_stored_down(url: &str, subject: &str) -> Vec<String> {
    Runtime::new().unwrap().block_on(async {
        let js = jetstream_at(url).await;
        let mut stream = js
            .get_stream(subjects::DOWN_STREAM)
            .await
            .expect("the stream");
        let state = stream.info().await.unwrap().state.clone();
        let mut ids = Vec::new();
        if state.messages == 0 {
            return ids;
        }
        for sequence in state.first_sequence..=state.last_sequence {
            // A sequence whose message was taken or dropped answers none.
            let Ok(message) = stream.get_raw_message(sequence).await else {
                continue;
            };
            if message.subject.as_str() != subject {
                continue;
            }
            let id = message
                .headers
                .get(subjects::MSG_ID)
                .map(|v| v.to_string())
                .unwrap_or_default();
            ids.push(id);
        }
        ids
    })
}

/// Waits until the server filed as many receipts as `sold` and the
/// register on `file` applied the Filed that answered them; then checks
/// that the server holds exactly the receipts `sold` and keeps no upload
/// in its inbox.
fn every_receipt_filed_and_answered(shop: &mut Shop, file: &Path, sold: &[Receipt]) {
    wait_until("every receipt filed", || {
        shop.receipts().len() == sold.len()
    });
    wait_until("the Filed applied", || unfiled(file) == 0);
    assert_eq!(shop.receipts(), sold);
    let kept = shop.count("SELECT count(*) FROM sync.inbox");
    assert_eq!(kept, 0, "uploads kept in the inbox");
}

async fn jetstream_at(url: &str) -> jetstream::Context {
    jetstream::new(async_nats::connect(url).await.expect("connects to NATS"))
}

#[test]
fn the_worker_makes_a_file_stream_and_one_consumer_per_replica_that_holds_one_message_at_a_time() {
    let nats = nats_server::start();
    let mut shop = shop_over(
        &nats.url(),
        &[
            "magic_sync.nats_subjects=till",
            "magic_sync.nats_down_stream=TILL_DOWN",
            "magic_sync.nats_up_stream=TILL_UP",
            "magic_sync.nats_replicas=1",
        ],
    );
    let ids = vec![shop.add_register("R1"), shop.add_register("R2")];
    let files: Vec<PathBuf> = ids.iter().map(|id| shop.file_of(*id)).collect();
    let _devices: Vec<Device> = ids
        .iter()
        .zip(&files)
        .map(|(id, file)| {
            let settings = NatsSettings {
                prefix: "till".to_owned(),
                down_stream: "TILL_DOWN".to_owned(),
                ..NatsSettings::new(nats.url())
            };
            start_register_over(settings, waiting_for_news(), shop::open_register(file, *id))
        })
        .collect();
    shop.add_product("Tea", 250);
    until_every_register_holds_the_servers_products(&mut shop, &files);

    Runtime::new().unwrap().block_on(async {
        let js = jetstream_at(&nats.url()).await;
        for (name, subjects) in [("TILL_DOWN", "till.down.*"), ("TILL_UP", "till.up.>")] {
            let mut made = js
                .get_stream(name)
                .await
                .expect("the stream, by its given name");
            let config = &made.info().await.unwrap().config;
            assert_eq!(config.name, name);
            assert_eq!(config.storage, stream::StorageType::File, "{name}");
            assert_eq!(config.num_replicas, 1, "{name}");
            assert_eq!(config.subjects, vec![subjects.to_owned()], "{name}");
        }
        for default in [subjects::DOWN_STREAM, subjects::UP_STREAM] {
            assert!(
                js.get_stream(default).await.is_err(),
                "the stream {default} was made though the settings name others"
            );
        }

        let down = js.get_stream("TILL_DOWN").await.unwrap();
        let mut names: Vec<String> = down
            .consumer_names()
            .map(|name| name.expect("a consumer's name"))
            .collect()
            .await;
        names.sort();
        let mut expected: Vec<String> = ids.iter().map(|id| id.to_string()).collect();
        expected.sort();
        assert_eq!(names, expected, "one consumer per replica, named as it");
        for id in &ids {
            let info = down.consumer_info(id.to_string()).await.unwrap();
            let config = &info.config;
            assert_eq!(
                config.durable_name.as_deref(),
                Some(id.to_string().as_str())
            );
            assert_eq!(config.deliver_subject, None, "a pull consumer");
            assert_eq!(config.ack_policy, consumer::AckPolicy::Explicit);
            assert_eq!(config.max_ack_pending, 1);
            assert_eq!(config.filter_subject, format!("till.down.{id}"));
        }
    });
}

#[test]
fn a_publish_whose_acknowledgement_is_lost_is_sent_again_stored_once_and_applied_once() {
    let nats = nats_server::start();
    let proxy = Proxy::start(nats.port(), subjects::DEFAULT_PREFIX);
    let mut shop = shop_over(&proxy.url(), &[SEND_TIMEOUT]);
    let (id, file, device) =
        one_register_holding_tea(&mut shop, |_, replica| start_register(&nats.url(), replica));

    // The register away, so what the worker publishes stays in the stream.
    let (replica, _) = device.stop();
    drop(replica);
    let subject = subjects::down_subject(subjects::DEFAULT_PREFIX, id);
    proxy.lose_the_next_answer_to(&subject);
    set_price(&mut shop, "Tea", 300);
    wait_until("JetStream's answer to the publish lost", || {
        !proxy.lost().is_empty()
    });
    let lost = proxy.lost()[0].clone();
    wait_until("the worker to publish it again and hear the answer", || {
        proxy.times_published(&lost) >= 2 && outbox_of(&mut shop, id) == 0
    });
    assert!(
        shop.cluster
            .log()
            .contains("no answer in time, publishing (magic_sync.send_timeout)"),
        "the worker did not take the lost answer for a send unanswered in time"
    );

    let stored = ids_stored_down(&nats.url(), &subject);
    assert_eq!(
        stored.iter().filter(|stored| **stored == lost).count(),
        1,
        "the message published twice is stored once: {stored:?}"
    );
    let mut distinct = stored.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), stored.len(), "{stored:?}");

    // Back, the register applies each message stored once, none again.
    let mut back = start_register(&nats.url(), shop::open_register(&file, id));
    let seen = statuses_until_settled(&mut shop, &mut back, &file);
    let applied = seen
        .iter()
        .filter(|s| {
            matches!(
                s,
                Status::Applied(Received::Applied { .. } | Received::Ended { .. })
            )
        })
        .count();
    let again = seen
        .iter()
        .filter(|s| matches!(s, Status::Applied(Received::Already { .. })))
        .count();
    assert_eq!(applied, stored.len(), "{:?}", back.history());
    assert_eq!(again, 0, "a message applied twice: {:?}", back.history());
    assert_eq!(products_in(&file)[0].2, 300);
    wait_until("the register's report of what it applied", || {
        let row = shop
            .pg
            .query_one(
                "SELECT applied_sequence, last_sequence FROM sync.replicas WHERE id = $1",
                &[&id],
            )
            .unwrap();
        row.get::<_, i64>(0) == row.get::<_, i64>(1)
    });
    assert_eq!(outbox_of(&mut shop, id), 0, "everything left the outbox");
}

/// A register over NATS that stayed away while more messages were
/// published to it than `magic_sync.outbox_messages`, and came back: what
/// stays of it once it holds the server's products and its receipts
/// written while away are filed. (Fields drop in order: the register, the
/// server, then NATS.)
struct CameBack {
    _register: Device,
    shop: Shop,
    id: Uuid,
    _nats: NatsServer,
}

/// How many messages a replica's subject holds at most, in
/// `away_past_the_bound_over_nats`.
const MESSAGES_BOUND: i64 = 3;

/// The outbox's bounds are what a register away reaches only when it is
/// never passed over (`magic_sync.messages_ahead` 0): passed over, it keeps
/// four messages waiting however long it is away (tests/behind.rs).
const AWAY_FOR_GOOD: &str = "magic_sync.messages_ahead=0";

fn away_past_the_bound_over_nats() -> CameBack {
    let nats = nats_server::start();
    let mut shop = shop_over(
        &nats.url(),
        &[
            SEND_TIMEOUT,
            &format!("magic_sync.outbox_messages={MESSAGES_BOUND}"),
            // Never passed over: a register away would keep four messages
            // waiting and never reach the bound (tests/behind.rs).
            AWAY_FOR_GOOD,
        ],
    );
    let (id, file, device) =
        one_register_holding_tea(&mut shop, |_, replica| start_register(&nats.url(), replica));
    let provisioned = snapshot_of(&mut shop, id);

    // Away: each change is a message of its own, more than the bound.
    let (replica, _) = device.stop();
    drop(replica);
    let first = last_sequence(&mut shop, id);
    let last_price = MESSAGES_BOUND + 5;
    for price in 1..=last_price {
        set_price(&mut shop, "Tea", price);
        wait_until("the change written for the register", || {
            last_sequence(&mut shop, id) >= first + price
        });
    }
    wait_until("every message published", || outbox_of(&mut shop, id) == 0);
    let subject = subjects::down_subject(subjects::DEFAULT_PREFIX, id);
    let stored = ids_stored_down(&nats.url(), &subject);
    assert!(
        stored.len() as i64 <= MESSAGES_BOUND,
        "the subject holds more than magic_sync.outbox_messages: {stored:?}"
    );
    // The server counts what JetStream holds for it until it applied it,
    // and finds the bound passed within its checks (every second here).
    wait_until("the bound's alarm", || !alarms_of(&mut shop, id).is_empty());
    let sold = sell_through_its_own_connection(&file, id, &[1250, 399, 75]);

    // Back: it takes the snapshot that superseded what it missed, and its
    // receipts are filed once.
    let back = start_register(&nats.url(), shop::open_register(&file, id));
    until_every_register_holds_the_servers_products(&mut shop, std::slice::from_ref(&file));
    assert_eq!(products_in(&file)[0].2, last_price);
    assert_ne!(
        snapshot_of(&mut shop, id),
        provisioned,
        "not provisioned again"
    );
    every_receipt_filed_and_answered(&mut shop, &file, &sold);
    CameBack {
        _register: back,
        shop,
        id,
        _nats: nats,
    }
}

#[test]
fn a_register_away_until_its_outbox_passes_its_bound_is_provisioned_again_over_nats() {
    away_past_the_bound_over_nats();
}

/// The issue: "An outbox that outgrows magic_sync.outbox_messages ... is
/// dropped and the replica provisioned again, with an alarm", whatever the
/// transport. Over nats what JetStream took stays in the outbox, published,
/// until the register applied it, so the bound counts it: the alarm is the
/// server's, not a gap the register finds.
#[test]
fn a_register_away_past_its_bound_over_nats_raises_an_alarm_naming_the_bound() {
    let mut came_back = away_past_the_bound_over_nats();
    let id = came_back.id;
    let alarms = alarms_of(&mut came_back.shop, id);
    assert!(
        alarms
            .iter()
            .any(|alarm| alarm.contains("magic_sync.outbox_messages")),
        "no alarm names the bound: {alarms:?}"
    );
}

/// The figure written just before `unit` in an alarm ("5 messages").
fn figure_before(text: &str, unit: &str) -> i64 {
    let at = text
        .find(unit)
        .unwrap_or_else(|| panic!("{unit:?} in {text:?}"));
    let digits: String = text[..at]
        .chars()
        .rev()
        .take_while(char::is_ascii_digit)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    digits
        .parse()
        .unwrap_or_else(|_| panic!("a figure before {unit:?} in {text:?}"))
}

/// The figure written just after `name` in an alarm ("outbox_bytes 1024").
fn figure_after(text: &str, name: &str) -> i64 {
    let at = text
        .find(name)
        .unwrap_or_else(|| panic!("{name:?} in {text:?}"))
        + name.len();
    let digits: String = text[at..]
        .trim_start()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits
        .parse()
        .unwrap_or_else(|_| panic!("a figure after {name:?} in {text:?}"))
}

/// What `six_changes_of_400_bytes_each` waits for after each change.
#[derive(Clone, Copy, PartialEq)]
enum UntilEach {
    /// The change written for the register (its chain's sequence moved).
    Written,
    /// The change written, or the bound's alarm raised, whichever comes
    /// first: the test over the queue goes on to the alarm once it is
    /// raised, whether or not the change was written.
    WrittenOrTheAlarm,
}

/// The Tea a register away holds changes six times, by some 400 bytes
/// each: a handful of messages in all, well under
/// magic_sync.outbox_messages (10000), and past an outbox_bytes of 1 kB.
/// The two byte-bound tests, over the queue and over nats, make the same
/// changes; each waits after every change as `until` says.
fn six_changes_of_400_bytes_each(shop: &mut Shop, register: Uuid, until: UntilEach) {
    let or_the_alarm = until == UntilEach::WrittenOrTheAlarm;
    let what = if or_the_alarm {
        "the change written, or the bound passed"
    } else {
        "the change written for the register"
    };
    let first = last_sequence(shop, register);
    for i in 1..=6_i64 {
        shop.pg
            .execute(
                "UPDATE shop.products SET name = 'Tea ' || $1::bigint || repeat('.', 400), \
                 price_cents = $1, updated_at = now() WHERE name LIKE 'Tea%'",
                &[&i],
            )
            .unwrap();
        wait_until(what, || {
            last_sequence(shop, register) >= first + i
                || (or_the_alarm && !alarms_of(shop, register).is_empty())
        });
    }
}

/// Over the queue: there the outbox is what a register away leaves behind
/// (with nats it drains into the stream, which bounds messages only).
#[test]
fn an_outbox_past_its_byte_bound_is_dropped_and_the_replica_provisioned_again() {
    let mut shop = shop_over_the_queue(&["magic_sync.outbox_bytes=1kB", AWAY_FOR_GOOD]);
    let (id, file, device) = one_register_holding_tea(&mut shop, start_queue_register);
    let provisioned = snapshot_of(&mut shop, id);

    // Away: changes past 1 kB, well under the bound of messages.
    let (replica, _) = device.stop();
    drop(replica);
    six_changes_of_400_bytes_each(&mut shop, id, UntilEach::WrittenOrTheAlarm);
    wait_until("the alarm", || !alarms_of(&mut shop, id).is_empty());
    let alarm = alarms_of(&mut shop, id).remove(0);
    let (messages, bytes) = (
        figure_before(&alarm, " messages"),
        figure_before(&alarm, " bytes"),
    );
    let (messages_bound, bytes_bound) = (
        figure_after(&alarm, "magic_sync.outbox_messages"),
        figure_after(&alarm, "magic_sync.outbox_bytes"),
    );
    assert_eq!(bytes_bound, 1024, "{alarm}");
    assert!(bytes > bytes_bound, "{alarm}");
    assert!(messages <= messages_bound, "not the byte bound: {alarm}");

    // What waits now is a snapshot of what it should hold, not the changes.
    wait_until("the changes dropped for a snapshot", || {
        let begins: Option<i64> = shop
            .pg
            .query_one(
                "SELECT min(o.position) FROM sync.outbox o JOIN sync.replicas r ON r.id = o.replica \
                 WHERE o.replica = $1 AND o.position = r.snapshot_sequence",
                &[&id],
            )
            .unwrap()
            .get(0);
        let first_waiting: Option<i64> = shop
            .pg
            .query_one(
                "SELECT min(position) FROM sync.outbox WHERE replica = $1",
                &[&id],
            )
            .unwrap()
            .get(0);
        begins.is_some() && begins == first_waiting
    });
    assert_ne!(
        snapshot_of(&mut shop, id),
        provisioned,
        "not provisioned again"
    );
    let sold = sell_through_its_own_connection(&file, id, &[500, 610]);

    let _back = start_queue_register(&shop, shop::open_register(&file, id));
    until_every_register_holds_the_servers_products(&mut shop, std::slice::from_ref(&file));
    every_receipt_filed_and_answered(&mut shop, &file, &sold);
}

/// The same bound over nats. The stream bounds each subject by messages
/// only (`max_messages_per_subject`); the bytes a register away was sent
/// are bounded by the server, which counts what it published until the
/// register applied it.
#[test]
fn over_nats_a_register_away_past_the_byte_bound_is_provisioned_again_with_an_alarm() {
    let nats = nats_server::start();
    let mut shop = shop_over(
        &nats.url(),
        &[SEND_TIMEOUT, "magic_sync.outbox_bytes=1kB", AWAY_FOR_GOOD],
    );
    let (id, file, device) =
        one_register_holding_tea(&mut shop, |_, replica| start_register(&nats.url(), replica));
    let provisioned = snapshot_of(&mut shop, id);

    let (replica, _) = device.stop();
    drop(replica);
    six_changes_of_400_bytes_each(&mut shop, id, UntilEach::Written);
    wait_until("every message published", || outbox_of(&mut shop, id) == 0);
    // The register's messages, all that the stream holds.
    let (messages, bytes) = Runtime::new().unwrap().block_on(async {
        let js = jetstream_at(&nats.url()).await;
        let mut stream = js.get_stream(subjects::DOWN_STREAM).await.unwrap();
        let state = stream.info().await.unwrap().state.clone();
        (state.messages, state.bytes)
    });
    let what = format!("an alarm, the stream holding {messages} messages, {bytes} bytes for it");
    wait_until(&what, || !alarms_of(&mut shop, id).is_empty());
    let alarm = alarms_of(&mut shop, id).remove(0);
    assert!(alarm.contains("magic_sync.outbox_bytes"), "{alarm}");
    // The alarm marks it; the worker's next pass provisions it.
    wait_until("a new snapshot", || {
        snapshot_of(&mut shop, id) != provisioned
    });
    assert_ne!(
        snapshot_of(&mut shop, id),
        provisioned,
        "not provisioned again"
    );
    let _back = start_register(&nats.url(), shop::open_register(&file, id));
    until_every_register_holds_the_servers_products(&mut shop, std::slice::from_ref(&file));
}

/// The row of `sync.sends` for a replica: failures, refusals, last error.
fn send_failures(shop: &mut Shop, replica: Uuid) -> Option<(i32, i32, String)> {
    shop.pg
        .query_opt(
            "SELECT failures, refusals, last_error FROM sync.sends WHERE replica = $1",
            &[&replica],
        )
        .unwrap()
        .map(|row| (row.get(0), row.get(1), row.get(2)))
}

#[test]
fn a_send_that_does_not_answer_in_time_is_a_transient_failure_shown_as_the_last_error() {
    let nats = nats_server::start();
    let mut shop = shop_over(&nats.url(), &["magic_sync.send_timeout=1000"]);
    let (id, file, _device) =
        one_register_holding_tea(&mut shop, |_, replica| start_register(&nats.url(), replica));
    assert_eq!(send_failures(&mut shop, id), None);

    // nats-server stops answering: its connections stay open, and what
    // the worker publishes is never acknowledged.
    let stopped = Stopped::stop(nats_server_pid(nats.port()));
    set_price(&mut shop, "Tea", 300);
    wait_until("a send to the register to time out", || {
        send_failures(&mut shop, id).is_some()
    });
    let (failures, refusals, last_error) = send_failures(&mut shop, id).unwrap();
    assert!(failures >= 1);
    assert_eq!(refusals, 0, "a timeout taken for a refusal: {last_error}");
    assert!(
        last_error.contains("no answer in time") && last_error.contains("magic_sync.send_timeout"),
        "{last_error}"
    );
    let health: serde_json::Value = shop
        .pg
        .query_one("SELECT sync.health()", &[])
        .unwrap()
        .get(0);
    let failing = &health["failing"]["first"];
    let shown = failing.as_array().into_iter().flatten().any(|f| {
        f["replica"] == id.to_string()
            && f["remedy"] == "wait"
            && f["last_error"]
                .as_str()
                .is_some_and(|e| e.contains("magic_sync.send_timeout"))
    });
    assert!(shown, "sync.health() does not show it: {health}");
    assert_eq!(
        health["healthy"], true,
        "a timeout is the network's: {health}"
    );

    drop(stopped);
    until_every_register_holds_the_servers_products(&mut shop, std::slice::from_ref(&file));
    wait_until("sync.sends to empty", || {
        shop.count("SELECT count(*) FROM sync.sends") == 0
    });
    assert_eq!(outbox_of(&mut shop, id), 0);
}

/// Sets `magic_sync.concurrency` in the server's configuration, and waits
/// until the worker took it. A worker shows no setting, so the reload
/// changes `magic_sync.send_timeout` too (a new `timeout`, in ms): the
/// worker says it connects to NATS again once it read it, and it read both
/// in the one reload.
fn reconfigure(shop: &mut Shop, concurrency: i32, timeout: i32) {
    const SAID: &str = "the nats settings changed: connecting again";
    let before = shop.cluster.log().matches(SAID).count();
    shop.run(&format!(
        "ALTER SYSTEM SET magic_sync.concurrency = {concurrency}"
    ));
    shop.run(&format!(
        "ALTER SYSTEM SET magic_sync.send_timeout = {timeout}"
    ));
    shop.run("SELECT pg_reload_conf()");
    wait_until("the worker to read its configuration again", || {
        shop.cluster.log().matches(SAID).count() > before
    });
}

#[test]
fn no_more_replicas_are_sent_to_at_once_than_magic_sync_concurrency_allows() {
    const REGISTERS: usize = 8;
    let nats = nats_server::start();
    let proxy = Proxy::start(nats.port(), subjects::DEFAULT_PREFIX);
    // Each answer held back a little, so that publishes that overlap
    // overlap long enough for the proxy to see them all.
    proxy.hold_answers(Duration::from_millis(20));
    // Set by the server's configuration, not its command line, so that a
    // reload changes it later.
    let mut shop = shop_over(&proxy.url(), &[]);
    wait_until("the worker connected to NATS", || {
        shop.cluster.log().contains("connected to nats at")
    });
    reconfigure(&mut shop, 2, 5000);
    let ids: Vec<Uuid> = (0..REGISTERS)
        .map(|i| shop.add_register(&format!("R{i}")))
        .collect();
    let files: Vec<PathBuf> = ids.iter().map(|id| shop.file_of(*id)).collect();
    let _devices: Vec<Device> = ids
        .iter()
        .zip(&files)
        .map(|(id, file)| start_register(&nats.url(), shop::open_register(file, *id)))
        .collect();
    shop.add_product("Tea", 250);
    shop.add_product("Cake", 400);
    until_every_register_holds_the_servers_products(&mut shop, &files);
    for price in [260, 270, 280] {
        set_price(&mut shop, "Tea", price);
        until_every_register_holds_the_servers_products(&mut shop, &files);
    }
    let most = proxy.most_replicas_at_once();
    assert!(proxy.publishes() >= 4 * REGISTERS, "{}", proxy.publishes());
    assert!(most >= 1, "no publish seen");
    assert!(
        most <= 2,
        "{most} replicas were sent to at once, magic_sync.concurrency being 2"
    );

    // The proxy sees more at once when more are allowed: the bound above
    // is the worker's, not the proxy's.
    reconfigure(&mut shop, 8, 6000);
    let mut most = 0;
    for price in 300..310 {
        set_price(&mut shop, "Tea", price);
        until_every_register_holds_the_servers_products(&mut shop, &files);
        most = proxy.most_replicas_at_once();
        if most > 2 {
            break;
        }
    }
    assert!(
        most > 2,
        "with magic_sync.concurrency 8, no more than {most} at once"
    );
}

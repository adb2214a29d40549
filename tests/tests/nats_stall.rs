//! A register stalled behind NATS (issue 29), and healed without a person:
//! PostgreSQL with the extension preloaded and its relay worker, a real
//! nats-server with JetStream, a register on its SQLite file running the
//! device loop.
//!
//! The stall is the one a kill of nats-server just after an
//! acknowledgement left behind: the register applied a message and
//! acknowledged it, the stream let the message go, and the consumer's own
//! record, lost with the kill, still has it pending. With one message at a
//! time, JetStream hands the register nothing more, and every fetch goes
//! unanswered. It is made by hand (tests/src/nats.rs,
//! `lose_an_acknowledgement`), since the kill's timing cannot be hit every
//! time.

mod common;
#[path = "common/device.rs"]
mod device;
#[path = "common/nats_shop.rs"]
mod nats_shop;
#[path = "common/register_files.rs"]
mod register_files;
#[path = "common/filing_shop.rs"]
mod shop;

use std::time::{Duration, Instant};

use async_nats::jetstream;
use device::wait_until;
use futures_util::StreamExt;
use magic_sync_replica::transport::nats::{Credentials, NatsSettings};
use magic_sync_replica::transport::nats_subjects as subjects;
use magic_sync_tests::nats::{self as nats_server, NatsServer, SERVER_USER};
use nats_shop::{shop_over, start_register, start_register_over, waiting_for_news, SEND_TIMEOUT};
use register_files::{
    holds_the_servers_products, sell_through_its_own_connection, unfiled,
    until_every_register_holds_the_servers_products,
};
use serde_json::Value;
use shop::{open_register, Shop};
use tempfile::TempDir;
use tokio::runtime::Runtime;
use uuid::Uuid;

/// Sets a server setting in the configuration, and reloads it.
fn set(shop: &mut Shop, setting: &str, value: &str) {
    shop.run(&format!("ALTER SYSTEM SET {setting} = '{value}'"));
    shop.run("SELECT pg_reload_conf()");
}

/// The state the overview gives a replica.
fn state_of(shop: &mut Shop, replica: Uuid) -> String {
    let listing: Value = shop
        .pg
        .query_one("SELECT sync.listing(NULL, NULL, 0, 100)", &[])
        .unwrap()
        .get(0);
    listing["replicas"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == replica.to_string())
        .map(|r| r["state"].as_str().unwrap().to_owned())
        .unwrap_or_default()
}

/// Whether every message recorded for `replica` was taken by NATS.
fn all_published(shop: &mut Shop, replica: Uuid) -> bool {
    shop.count(&format!(
        "SELECT count(*) FROM sync.outbox WHERE replica = '{replica}' AND NOT published"
    )) == 0
        && shop.count(&format!(
            "SELECT count(*) FROM sync.outbox WHERE replica = '{replica}' AND kind <> 'filed'"
        )) > 0
}

/// Messages written for `replica` that the server has not heard it apply.
fn unapplied(shop: &mut Shop, replica: Uuid) -> i64 {
    shop.count(&format!(
        "SELECT count(*) FROM sync.outbox o JOIN sync.replicas r ON r.id = o.replica \
         WHERE o.replica = '{replica}' AND o.kind <> 'filed' AND o.position > r.applied_sequence"
    ))
}

/// The next message the replica's consumer hands out, taken as the
/// register's loop would and not acknowledged: its bytes, the subject that
/// acknowledges it, and its sequence in the stream.
fn take_unacknowledged(
    runtime: &Runtime,
    nats: &NatsServer,
    replica: Uuid,
) -> (Vec<u8>, String, u64) {
    runtime.block_on(async {
        let client = async_nats::connect(nats.url()).await.unwrap();
        let js = jetstream::new(client);
        let consumer: jetstream::consumer::PullConsumer = js
            .get_stream(subjects::DOWN_STREAM)
            .await
            .unwrap()
            .get_consumer(&subjects::consumer_name(replica))
            .await
            .unwrap();
        let mut batch = consumer
            .fetch()
            .max_messages(1)
            .expires(Duration::from_secs(5))
            .messages()
            .await
            .unwrap();
        let message = batch.next().await.expect("a message waits").unwrap();
        let reply = message.reply.clone().expect("an ack subject").to_string();
        let sequence = message.info().expect("its metadata").stream_sequence;
        (message.payload.to_vec(), reply, sequence)
    })
}

/// What the replica's consumer says of itself: messages pending
/// acknowledgement, and waiting behind them.
fn stream_holds(runtime: &Runtime, nats: &NatsServer, sequence: u64) -> bool {
    runtime.block_on(async {
        let client = async_nats::connect(nats.url()).await.unwrap();
        let js = jetstream::new(client);
        let stream = js.get_stream(subjects::DOWN_STREAM).await.unwrap();
        stream.get_raw_message(sequence).await.is_ok()
    })
}

fn consumer_counts(runtime: &Runtime, nats: &NatsServer, replica: Uuid) -> (usize, u64) {
    runtime.block_on(async {
        let client = async_nats::connect(nats.url()).await.unwrap();
        let js = jetstream::new(client);
        let info = js
            .get_stream(subjects::DOWN_STREAM)
            .await
            .unwrap()
            .consumer_info(subjects::consumer_name(replica))
            .await
            .unwrap();
        (info.num_ack_pending, info.num_pending)
    })
}

#[test]
fn a_register_stalled_behind_a_lost_acknowledgement_files_its_receipts_shows_stalled_and_is_healed()
{
    let runtime = Runtime::new().unwrap();
    let mut nats = nats_server::start();
    let mut shop = shop_over(&nats.url(), &[SEND_TIMEOUT]);
    // Nothing counts as stalled, so nothing heals, until the test has made
    // the stall and seen the uploads go through it.
    set(&mut shop, "magic_sync.stalled_after", "3600");
    shop.add_product("Tea", 250);
    shop.add_product("Coffee", 300);

    // A register away, whose messages stay first in the stream.
    let away = shop.add_register("Away");
    wait_until("the away register's messages published", || {
        all_published(&mut shop, away)
    });
    let me = shop.add_register("Register 1");
    let file = shop.file_of(me);
    let device = start_register(&nats.url(), open_register(&file, me));
    wait_until("the register to hold the products", || {
        holds_the_servers_products(&mut shop, &file)
    });
    let (replica, _) = device.stop();
    drop(replica);

    // A change; the register applies its message and acknowledges it, and
    // the acknowledgement is lost as a kill of nats-server loses it.
    shop.run("UPDATE shop.products SET price_cents = 260 WHERE name = 'Tea'");
    wait_until("the change's message published", || {
        all_published(&mut shop, me) && unapplied(&mut shop, me) == 1
    });
    let (message, reply, sequence) = take_unacknowledged(&runtime, &nats, me);
    let mut replica = open_register(&file, me);
    replica.receive(&message).expect("applies the message");
    drop(replica);
    nats.lose_an_acknowledgement(subjects::DOWN_STREAM, &subjects::consumer_name(me), &reply);
    assert!(
        !stream_holds(&runtime, &nats, sequence),
        "the stream let the message go"
    );

    // More changes wait behind it.
    shop.add_product("Cake", 400);
    shop.run("UPDATE shop.products SET price_cents = 310 WHERE name = 'Coffee'");
    wait_until("the changes published", || {
        all_published(&mut shop, me) && unapplied(&mut shop, me) >= 2
    });
    let (pending, waiting) = consumer_counts(&runtime, &nats, me);
    assert_eq!(pending, 1, "the consumer holds the message it lost pending");
    assert!(waiting > 0, "messages wait behind it");

    // The register runs again and sells: its receipts reach the head
    // office while it cannot take a single message. Its client asks the
    // consumer after two quiet seconds whether messages wait all the same.
    let settings = NatsSettings {
        stuck_after: Duration::from_secs(2),
        ..NatsSettings::new(nats.url())
    };
    let device = start_register_over(settings, waiting_for_news(), open_register(&file, me));
    let sold = sell_through_its_own_connection(&file, me, &[100, 250, 975]);
    device.control.poke();
    wait_until("the receipts filed while downloads are stuck", || {
        shop.receipts() == sold
    });
    assert!(
        !holds_the_servers_products(&mut shop, &file),
        "the register is stuck: it has not taken the changes"
    );

    // Its client finds its consumer stuck, connects again, and the
    // register says where it stands: the server hears it after its
    // position stopped moving.
    wait_until("the register heard after its position stopped", || {
        shop.count(&format!(
            "SELECT count(*) FROM sync.replicas WHERE id = '{me}' AND heard_at > applied_at"
        )) == 1
    });

    // While it lasts, the stall shows: the worker stopped, nothing heals
    // it, and two seconds is shorter than it has lasted.
    shop.run("SELECT sync.stop_relay()");
    set(&mut shop, "magic_sync.stalled_after", "2");
    wait_until("the overview to say the register is stalled", || {
        state_of(&mut shop, me) == "stalled"
    });
    let health: Value = shop
        .pg
        .query_one("SELECT sync.health()", &[])
        .unwrap()
        .get(0);
    let stalled = &health["stalled"];
    assert_eq!(stalled["total"], 1, "{health:#}");
    assert_eq!(stalled["first"][0]["replica"], me.to_string());
    assert_eq!(stalled["first"][0]["remedy"], "wait", "the worker heals it");
    assert!(stalled["first"][0]["messages"].as_i64().unwrap() >= 1);
    assert_eq!(health["healthy"], true, "nothing waits for a fix yet");
    let metrics: String = shop
        .pg
        .query_one("SELECT sync.metrics()", &[])
        .unwrap()
        .get(0);
    assert!(
        metrics.contains("magic_sync_replicas{state=\"stalled\"} 1"),
        "{metrics}"
    );

    // The worker, started again, heals it: its consumer made again, it
    // takes every message that waits.
    let began = Instant::now();
    shop.run("SELECT sync.start_relay()");
    until_every_register_holds_the_servers_products(&mut shop, &[&file]);
    let healed_in = began.elapsed();
    eprintln!("healed {healed_in:?} after the worker started, the stall overdue already");
    wait_until("the Filed applied: nothing unfiled", || unfiled(&file) == 0);
    assert_eq!(shop.receipts(), sold, "every receipt filed once");
    wait_until("the register synced", || {
        state_of(&mut shop, me) == "synced"
    });
    assert_eq!(
        shop.count(&format!(
            "SELECT count(*) FROM sync.alarms WHERE replica = '{me}' \
             AND what LIKE '%its consumer made again%'"
        )),
        1,
        "one alarm, for the one step it took"
    );
    assert_eq!(
        shop.count(&format!(
            "SELECT count(*) FROM sync.alarms WHERE replica = '{me}' \
             AND what LIKE '%provisioned again%'"
        )),
        0,
        "making the consumer again was enough"
    );
    assert!(
        shop.cluster
            .log()
            .contains(&format!("replica {me} is stalled")),
        "the worker says so in its log"
    );
    device.stop();
}

const SERVER_PASSWORD: &str = "the head office's secret";

/// The shop over a nats-server with the book's accounts, where the
/// register `me` may publish its Ups and read its consumer's info, but not
/// take a message from it: taking fails for good, on the device's side.
fn shop_whose_register_may_not_take(me: Uuid, password: &str) -> (NatsServer, Shop, TempDir) {
    let config: String = nats_server::accounts_config(SERVER_PASSWORD, &[(me, password)])
        .lines()
        .filter(|line| !line.contains("CONSUMER.MSG.NEXT"))
        .map(|line| format!("{line}\n"))
        .collect();
    let nats = nats_server::start_with_config(&config);
    let secrets = tempfile::tempdir().unwrap();
    let password_file = secrets.path().join("nats-password");
    std::fs::write(&password_file, format!("{SERVER_PASSWORD}\n")).unwrap();
    for (path, mode) in [(secrets.path(), 0o755), (password_file.as_path(), 0o644)] {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let user = format!("magic_sync.nats_user={SERVER_USER}");
    let file = format!("magic_sync.nats_password_file={}", password_file.display());
    let shop = shop_over(
        &nats.url(),
        &[SEND_TIMEOUT, &user, &file, "magic_sync.stalled_after=2"],
    );
    (nats, shop, secrets)
}

#[test]
fn a_register_that_may_not_take_its_messages_files_its_receipts_is_provisioned_again_and_then_waits_for_a_fix(
) {
    let me = Uuid::new_v4();
    let password = format!("secret of {me}");
    let (nats, mut shop, _secrets) = shop_whose_register_may_not_take(me, &password);
    shop.add_product("Tea", 250);
    shop.pg
        .execute(
            "INSERT INTO shop.registers (id, name) VALUES ($1, 'Register 1')",
            &[&me],
        )
        .unwrap();
    shop.pg
        .execute(
            "INSERT INTO shop.register_state (id, register_id, note) VALUES ($1, $1, 'new')",
            &[&me],
        )
        .unwrap();
    let file = shop.file_of(me);
    let settings = NatsSettings {
        credentials: Credentials::UserPassword {
            user: me.to_string(),
            password,
        },
        stuck_after: Duration::from_secs(2),
        ..NatsSettings::new(nats.url())
    };
    let device = start_register_over(settings, waiting_for_news(), open_register(&file, me));
    let sold = sell_through_its_own_connection(&file, me, &[480, 1200]);
    device.control.poke();
    wait_until(
        "the receipts filed, though the register takes nothing",
        || shop.receipts() == sold,
    );

    // Heard and not moving: its consumer made again, then provisioned
    // again through a fresh one, and still it takes nothing. The worker has
    // no step left: the stall waits for a fix on the device's side.
    wait_until("the stall to wait for a fix", || {
        let health: Value = shop
            .pg
            .query_one("SELECT sync.health()", &[])
            .unwrap()
            .get(0);
        health["stalled"]["first"][0]["remedy"] == "fix"
    });
    let health: Value = shop
        .pg
        .query_one("SELECT sync.health()", &[])
        .unwrap()
        .get(0);
    assert_eq!(health["healthy"], false, "{health:#}");
    assert_eq!(health["stalled"]["first"][0]["replica"], me.to_string());
    assert_eq!(health["stalled"]["first"][0]["heals"], 2);
    assert_eq!(state_of(&mut shop, me), "stalled");
    let alarms: Vec<String> = shop
        .pg
        .query(
            "SELECT what FROM sync.alarms WHERE replica = $1 ORDER BY id",
            &[&me],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    // Its consumer was made again as soon as it was overdue, before it was
    // heard (a replica only away costs that, and no alarm); provisioning
    // needs it heard, and raises one.
    assert!(
        shop.cluster
            .log()
            .contains(&format!("replica {me} has applied nothing since"))
            && shop.cluster.log().contains("its consumer made again"),
        "the worker logs the consumer made again"
    );
    assert_eq!(alarms.len(), 1, "{alarms:#?}");
    assert!(
        alarms[0].contains("provisioned again through a fresh consumer"),
        "{alarms:#?}"
    );
    assert_eq!(shop.receipts(), sold, "every receipt filed once");
    device.stop();
}

//! Switching `magic_sync.transport` with messages published and not yet
//! confirmed, both ways (issue 30): what the old transport holds
//! unconfirmed, answers to uploads included, comes through the new one at
//! once, and every receipt is filed once. PostgreSQL with the extension
//! preloaded and its relay worker, a real nats-server, a register on its
//! SQLite file; the transport is switched in the configuration and
//! reloaded, as an operator would, and the register started again on the
//! new transport's client.
//!
//! The register's program is stopped at the moment it matters, and the
//! Up it owes is built from its file and handed to the transport by the
//! test, as its loop would: so that its answer (a Filed) is left with the
//! old transport, not taken.

mod common;
#[path = "common/device.rs"]
mod device;
#[path = "common/nats_shop.rs"]
mod nats_shop;
#[path = "common/register_files.rs"]
mod register_files;
#[path = "common/filing_shop.rs"]
mod shop;

use async_nats::jetstream;
use async_nats::HeaderMap;
use device::{wait_until, Device};
use magic_sync_replica::transport::nats_subjects as subjects;
use magic_sync_replica::transport::queue::Queue;
use magic_sync_replica::transport::Options;
use magic_sync_tests::nats::{self as nats_server, NatsServer};
use nats_shop::{start_register, SEND_TIMEOUT};
use register_files::{holds_the_servers_products, sell_through_its_own_connection, unfiled};
use shop::{open_register, Shop};
use tokio::runtime::Runtime;
use uuid::Uuid;

/// The filing shop with its relay worker, and a nats-server it may switch
/// to: the transport itself is set in the configuration, where a reload
/// changes it.
fn shop_that_may_switch(nats: &NatsServer, transport: &str) -> Shop {
    let url = format!("magic_sync.nats_url={}", nats.url());
    let mut shop = Shop::open_with(&[
        "shared_preload_libraries=magic_sync",
        "magic_sync.database=shop",
        "magic_sync.idle=1",
        SEND_TIMEOUT,
        &url,
    ]);
    switch_to(&mut shop, transport);
    shop
}

fn switch_to(shop: &mut Shop, transport: &str) {
    shop.run(&format!(
        "ALTER SYSTEM SET magic_sync.transport = '{transport}'"
    ));
    shop.run("SELECT pg_reload_conf()");
}

fn start_queue_register(shop: &Shop, me: Uuid) -> Device {
    let config: postgres::Config = shop.cluster.url("shop").parse().unwrap();
    Device::start(
        open_register(&shop.file_of(me), me),
        Options::default(),
        move |replica| Queue::new(config, replica.me()),
    )
}

/// Messages written for the register that it has not confirmed, and how
/// many of them the worker published.
fn unconfirmed(shop: &mut Shop, me: Uuid) -> (i64, i64) {
    let count = |shop: &mut Shop, published: &str| {
        shop.count(&format!(
            "SELECT count(*) FROM sync.outbox o JOIN sync.replicas r ON r.id = o.replica \
             WHERE o.replica = '{me}' AND o.kind <> 'filed' AND o.position > r.applied_sequence \
               AND {published}"
        ))
    };
    (count(shop, "true"), count(shop, "o.published"))
}

/// Answers (Filed) waiting for the register, and how many were published.
fn answers(shop: &mut Shop, me: Uuid) -> (i64, i64) {
    let count = |shop: &mut Shop, published: &str| {
        shop.count(&format!(
            "SELECT count(*) FROM sync.outbox WHERE replica = '{me}' AND kind = 'filed' \
               AND {published}"
        ))
    };
    (count(shop, "true"), count(shop, "published"))
}

#[test]
fn switched_from_nats_to_the_queue_what_nats_held_comes_through_the_queue_and_receipts_are_filed_once(
) {
    let nats = nats_server::start();
    let mut shop = shop_that_may_switch(&nats, "nats");
    shop.add_product("Tea", 250);
    let me = shop.add_register("Register 1");
    let file = shop.file_of(me);
    let device = start_register(&nats.url(), open_register(&file, me));
    wait_until("the register to hold Tea", || {
        holds_the_servers_products(&mut shop, &file)
    });
    device.stop();

    // A change NATS took and the register has not confirmed.
    shop.run("UPDATE shop.products SET price_cents = 260");
    wait_until("the change published", || {
        let (all, published) = unconfirmed(&mut shop, me);
        all > 0 && all == published
    });
    // A receipt sent up over NATS and filed, its answer left in the stream.
    let sold = sell_through_its_own_connection(&file, me, &[1250]);
    let mut replica = open_register(&file, me);
    let up = replica.next_up().unwrap().expect("an Up with the receipt");
    let number = up.number().expect("an upload");
    Runtime::new().unwrap().block_on(async {
        let js = jetstream::new(async_nats::connect(nats.url()).await.unwrap());
        let mut headers = HeaderMap::new();
        headers.insert(
            subjects::MSG_ID,
            subjects::up_msg_id(me, &up.lane, number).as_str(),
        );
        js.publish_with_headers(
            subjects::up_subject(subjects::DEFAULT_PREFIX, me, &up.lane),
            headers,
            up.bytes.clone().into(),
        )
        .await
        .unwrap()
        .await
        .unwrap();
    });
    replica.sent(&up).unwrap();
    drop(replica);
    wait_until("the receipt filed and its answer published", || {
        shop.receipts() == sold && answers(&mut shop, me) == (1, 1)
    });

    // Switched to the queue, the register started on its client: it takes
    // the change and the answer at once (not after resending its upload,
    // five minutes on).
    switch_to(&mut shop, "queue");
    let device = start_queue_register(&shop, me);
    wait_until("the register to hold the change", || {
        holds_the_servers_products(&mut shop, &file)
    });
    wait_until("the answer taken: nothing unfiled", || unfiled(&file) == 0);
    device.stop();
    assert_eq!(shop.receipts(), sold, "the receipt filed once");
}

#[test]
fn switched_from_the_queue_to_nats_what_the_queue_held_is_published_and_receipts_are_filed_once() {
    let nats = nats_server::start();
    let mut shop = shop_that_may_switch(&nats, "queue");
    shop.add_product("Tea", 250);
    let me = shop.add_register("Register 1");
    let file = shop.file_of(me);
    let device = start_queue_register(&shop, me);
    wait_until("the register to hold Tea", || {
        holds_the_servers_products(&mut shop, &file)
    });
    device.stop();

    // A change in the queue, not taken.
    shop.run("UPDATE shop.products SET price_cents = 260");
    wait_until("the change in the queue", || {
        unconfirmed(&mut shop, me).0 > 0
    });
    // A receipt filed through the queue, its answer left there.
    let sold = sell_through_its_own_connection(&file, me, &[990]);
    let mut replica = open_register(&file, me);
    let up = replica.next_up().unwrap().expect("an Up with the receipt");
    shop.pg
        .query_one("SELECT sync.receive($1, $2)", &[&me, &up.bytes])
        .unwrap();
    replica.sent(&up).unwrap();
    drop(replica);
    assert_eq!(shop.receipts(), sold);
    assert_eq!(answers(&mut shop, me).0, 1, "its answer waits in the queue");

    // Switched to NATS: the worker publishes what the queue held, and the
    // register, started on the NATS client, takes it all.
    switch_to(&mut shop, "nats");
    wait_until("what the queue held published", || {
        let (all, published) = unconfirmed(&mut shop, me);
        all == published && answers(&mut shop, me).1 == 1
    });
    let device = start_register(&nats.url(), open_register(&file, me));
    wait_until("the register to hold the change", || {
        holds_the_servers_products(&mut shop, &file)
    });
    wait_until("the answer taken: nothing unfiled", || unfiled(&file) == 0);
    device.stop();
    assert_eq!(shop.receipts(), sold, "the receipt filed once");
}

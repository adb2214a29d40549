//! A delivery over the queue in one call (issue 37): `sync.take`
//! acknowledges what the device applied, files its report and answers the
//! next message, so a change reaching a register costs the server one call
//! where it cost three (next, ack_next, receive). What it must not change:
//! nothing lost, nothing applied twice, order kept, the server hearing the
//! last message applied (protocol §5.2), a report with a rejection going no
//! later than the report of the message that refused the row (§6), and a
//! register on a server without `sync.take`, or let call only what it was
//! let call before, taking its messages as before.

mod common;
#[path = "common/device.rs"]
mod device;
#[path = "common/filing_shop.rs"]
mod shop;

use std::path::Path;
use std::time::Duration;

use device::{wait_until, Device};
use magic_sync_replica::transport::queue::Queue;
use magic_sync_replica::transport::{Options, Status};
use magic_sync_replica::Received;
use rusqlite::Connection;
use shop::{names_held, Shop};
use uuid::Uuid;

/// The filing shop with a relay worker that idles an hour (a commit that
/// notes a change wakes it), and a role `device` of the registers' own
/// whose calls the server counts. A register shut out is never passed over
/// (`magic_sync.messages_ahead` 0): the burst below is twenty messages
/// waiting, not the one a register far behind is sent (tests/behind.rs).
fn shop_with_worker() -> Shop {
    let mut shop = Shop::open_with(&[
        "shared_preload_libraries=magic_sync",
        "magic_sync.database=shop",
        "magic_sync.idle=3600",
        "magic_sync.messages_ahead=0",
    ]);
    shop.run("CREATE ROLE device LOGIN SUPERUSER; ALTER ROLE device SET track_functions = 'all'");
    shop
}

/// The device loop of register `me`, as the role `device`, reporting at
/// most `report_after` after applying; only notifications wake it.
fn start(shop: &Shop, file: &Path, me: Uuid, user: &str, report_after: Duration) -> Device {
    let replica = shop::open_register(file, me);
    let config: postgres::Config = format!("{} user={user}", shop.cluster.url("shop"))
        .parse()
        .unwrap();
    let options = Options {
        poll_every: Duration::from_secs(3600),
        report_after,
        ..Options::default()
    };
    Device::start(replica, options, move |replica| {
        Queue::new(config, replica.me()).in_one_call(true)
    })
}

/// The price a register holds of product `name`.
fn price_held(file: &Path, name: &str) -> Option<i64> {
    Connection::open(file)
        .unwrap()
        .query_row(
            "SELECT price_cents FROM products WHERE name = ?1",
            [name],
            |r| r.get(0),
        )
        .ok()
}

/// How many times the server's functions `sync.<function>` were called,
/// as it counts them (`track_functions`, the role `device`'s sessions).
fn calls(shop: &mut Shop, function: &str) -> i64 {
    shop.count(&format!(
        "SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_user_functions \
         WHERE schemaname = 'sync' AND funcname = '{function}'"
    ))
}

/// Waits until the register took its snapshot, said so, and nothing waits
/// for it; then forgets the server's counts of calls.
fn settled(shop: &mut Shop, device: &mut Device) {
    device.expect("waiting", |s| matches!(s, Status::Waiting { .. }));
    wait_until("the snapshot taken and reported", || {
        shop.count(
            "SELECT count(*) FROM sync.replicas WHERE applied_sequence > 0 \
             AND applied_sequence = last_sequence AND NOT EXISTS (SELECT 1 FROM sync.outbox)",
        ) == 1
    });
    device.drain();
    shop.run("SELECT pg_stat_reset()");
}

/// How many Downs the loop applied (a redelivery, or a gap, is not one).
fn applied_downs(statuses: &[Status]) -> usize {
    statuses
        .iter()
        .filter(|s| matches!(s, Status::Applied(Received::Applied { .. })))
        .count()
}

fn is_report(status: &Status) -> bool {
    matches!(status, Status::Sent { upload: None, .. })
}

#[test]
fn changes_one_at_a_time_are_taken_acknowledged_and_reported_in_one_call_each() {
    let mut shop = shop_with_worker();
    let me = shop.add_register("Register 1");
    let file = shop.file_of(me);
    // The report of each change waits longer than the next change takes
    // to come: it rides the take of the next.
    let mut device = start(&shop, &file, me, "device", Duration::from_secs(5));
    settled(&mut shop, &mut device);
    shop.add_product("Kettle", 1);
    wait_until("the register to hold the kettle", || {
        price_held(&file, "Kettle") == Some(1)
    });

    // Ten changes of one row, each written once the register holds the
    // one before.
    for price in 2..=11 {
        shop.run(&format!(
            "UPDATE shop.products SET price_cents = {price} WHERE name = 'Kettle'"
        ));
        wait_until("the register to hold the change", || {
            price_held(&file, "Kettle") == Some(price)
        });
    }
    // The server hears the last applied: the held-back report goes once it
    // falls due, in a take of its own.
    wait_until("the server to hear the last message applied", || {
        shop.count(
            "SELECT count(*) FROM sync.replicas WHERE applied_sequence = last_sequence \
             AND NOT EXISTS (SELECT 1 FROM sync.outbox)",
        ) == 1
    });
    let (_, statuses) = device.stop();
    let mut statuses = statuses;
    statuses.retain(|s| !matches!(s, Status::Stopped));

    // Eleven messages (the kettle added, then ten changes): one take each,
    // which acknowledged the one before (and carried its report, when it
    // was due), and one more carrying the last report; a notification of
    // a pass that wrote the register nothing costs a take more. Nothing
    // else: no sync.next, no acknowledgement of its own, no report alone.
    let takes = calls(&mut shop, "take");
    assert!(
        (11..=14).contains(&takes),
        "one call a message, and one for the last report: {takes} takes"
    );
    for function in ["next", "ack", "ack_next"] {
        assert_eq!(calls(&mut shop, function), 0, "sync.{function} called");
    }
    // An Up that says more than what was applied (its backlog, said again
    // now and then) goes at once, as any Up does; the reports rode takes.
    let alone = calls(&mut shop, "receive");
    assert!(alone <= 2, "{alone} Ups filed with sync.receive");
    assert_eq!(price_held(&file, "Kettle"), Some(11));
    assert!(
        statuses.iter().filter(|s| is_report(s)).count() <= 12,
        "{statuses:?}"
    );
}

#[test]
fn a_burst_taken_in_one_call_a_message_is_applied_once_each_in_order_and_reported_once() {
    let mut shop = shop_with_worker();
    let me = shop.add_register("Register 1");
    let file = shop.file_of(me);
    let mut device = start(&shop, &file, me, "device", Duration::from_millis(100));
    settled(&mut shop, &mut device);

    // Shut out, the register misses twenty messages: a row added, then
    // changed nineteen times, each a pass of its own.
    shop.run(
        "ALTER ROLE device NOLOGIN; \
         SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'device'",
    );
    device.expect("the loop to lose the server", |s| {
        matches!(s, Status::Disconnected { .. })
    });
    shop.add_product("Kettle", 1);
    wait_until("its message waiting", || {
        shop.count("SELECT count(*) FROM sync.outbox") == 1
    });
    for price in 2..=20 {
        shop.run(&format!(
            "UPDATE shop.products SET price_cents = {price} WHERE name = 'Kettle'"
        ));
        wait_until("the change's message waiting", || {
            shop.count("SELECT count(*) FROM sync.outbox") == price
        });
    }
    shop.run("SELECT pg_stat_reset()");
    device.drain();

    shop.run("ALTER ROLE device LOGIN");
    device.control.poke();
    wait_until("the register to hold the last change", || {
        price_held(&file, "Kettle") == Some(20)
    });
    wait_until("the server to hear the last message applied", || {
        shop.count(
            "SELECT count(*) FROM sync.replicas WHERE applied_sequence = last_sequence \
             AND NOT EXISTS (SELECT 1 FROM sync.outbox)",
        ) == 1
    });
    let (_, rest) = device.stop();
    let statuses: Vec<Status> = device_statuses(rest);

    // Nothing lost, nothing applied twice: twenty Downs applied, none
    // redelivered, no gap.
    assert_eq!(applied_downs(&statuses), 20, "{statuses:?}");
    assert!(
        !statuses.iter().any(|s| matches!(
            s,
            Status::Applied(Received::Already { .. } | Received::Gap { .. })
        )),
        "{statuses:?}"
    );
    // In order: the last change is what it holds (a message applied out of
    // order would be a gap, and none was).
    assert_eq!(
        names_held(&file).iter().filter(|n| *n == "Kettle").count(),
        1
    );
    // One call a message (the first take, then one acknowledging each and
    // taking the next), and one more for the report; the burst reported
    // once.
    let takes = calls(&mut shop, "take");
    assert!(takes <= 22, "{takes} takes for twenty messages");
    assert_eq!(calls(&mut shop, "ack_next"), 0);
    assert!(
        statuses.iter().filter(|s| is_report(s)).count() <= 2,
        "{statuses:?}"
    );
}

fn device_statuses(mut rest: Vec<Status>) -> Vec<Status> {
    rest.retain(|s| !matches!(s, Status::Stopped));
    rest
}

#[test]
fn a_register_let_call_only_what_it_was_before_takes_its_messages_as_before() {
    let mut shop = shop_with_worker();
    // A gateway's role let take and acknowledge before sync.take was
    // (sync.allow_gateway of 0.1.0): no right to call it.
    shop.run(
        "CREATE ROLE old_gateway LOGIN; \
         ALTER ROLE old_gateway SET track_functions = 'all'; \
         GRANT USAGE ON SCHEMA sync TO old_gateway; \
         GRANT EXECUTE ON FUNCTION sync.next(uuid), sync.ack(uuid, text), \
             sync.ack_next(uuid, text), sync.receive(uuid, bytea) TO old_gateway; \
         GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA shop TO old_gateway; \
         GRANT USAGE ON SCHEMA shop TO old_gateway",
    );
    let me = shop.add_register("Register 1");
    let file = shop.file_of(me);
    let mut device = start(&shop, &file, me, "old_gateway", Duration::from_millis(100));
    device.expect("waiting", |s| matches!(s, Status::Waiting { .. }));
    shop.add_product("Kettle", 7);
    wait_until("the register to hold the kettle", || {
        price_held(&file, "Kettle") == Some(7)
    });
    wait_until("the server to hear the last message applied", || {
        shop.count(
            "SELECT count(*) FROM sync.replicas WHERE applied_sequence = last_sequence \
             AND NOT EXISTS (SELECT 1 FROM sync.outbox)",
        ) == 1
    });
    let (_, rest) = device.stop();
    assert!(
        !rest
            .iter()
            .any(|s| matches!(s, Status::Disconnected { .. })),
        "{rest:?}"
    );
    assert!(calls(&mut shop, "ack_next") >= 1);
}

/// The filing gate's key (pg_magic_sync/src/locks.rs): the relay worker
/// holds it for the session while a pass runs.
const GATE: i64 = 7_809_643_163_296_757_359;

#[test]
fn a_report_carried_while_a_pass_runs_waits_for_it_and_the_take_answers_the_message_it_wrote() {
    let mut shop = Shop::open();
    let me = shop.add_register("Register 1");
    let mut register = shop::open_register(&shop.file_of(me), me);
    shop::sync_all(&mut shop, std::slice::from_mut(&mut register));
    shop.add_product("Kettle", 1);
    shop.relay();
    let kettles = shop.count("SELECT last_sequence FROM sync.replicas");
    // The register applied the kettle's message, and has its report to say.
    assert_eq!(shop::deliver(&mut shop.pg, &mut register).len(), 1);
    let report = register.next_up().unwrap().expect("a report");
    assert!(report.number().is_none(), "a report carries no rows");

    // A pass runs: the gate closed, as the relay worker closes it, and the
    // change it relays written meanwhile.
    let mut worker = shop.cluster.connect("shop");
    worker
        .execute("SELECT pg_advisory_lock($1)", &[&GATE])
        .unwrap();
    shop.run("UPDATE shop.products SET price_cents = 2 WHERE name = 'Kettle'");
    let mut device = shop.cluster.connect("shop");
    let bytes = report.bytes.clone();
    let taking = std::thread::spawn(move || {
        let row = device
            .query_one(
                "SELECT id, message, reported, more FROM sync.take($1, NULL, $2)",
                &[&me, &bytes],
            )
            .unwrap();
        let message: Option<Vec<u8>> = row.get(1);
        let reported: bool = row.get(2);
        (message, reported)
    });
    wait_until("the take to wait at the gate", || {
        shop.count("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted") == 1
    });
    let relayed: serde_json::Value = worker.query_one("CALL sync.relay()", &[]).unwrap().get(0);
    worker
        .execute("SELECT pg_advisory_unlock($1)", &[&GATE])
        .unwrap();
    let (message, reported) = taking.join().unwrap();

    // Filed once the pass ended, not refused (which would send it again in
    // an Up of its own); and the take answered what the pass wrote.
    assert!(reported, "the report filed after the pass: {relayed}");
    register.sent(&report).unwrap();
    assert_eq!(
        shop.count("SELECT applied_sequence FROM sync.replicas"),
        kettles,
        "the server heard the kettle's message applied"
    );
    let message = message.expect("the message the pass wrote");
    register.receive(&message).unwrap();
    let held = shop::products_where(&register, "name = 'Kettle'");
    assert_eq!(held.iter().map(|p| p.2).collect::<Vec<_>>(), vec![2]);
}

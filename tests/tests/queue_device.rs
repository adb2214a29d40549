//! The device loop over the server's queue, against a real PostgreSQL with
//! the extension and its relay worker: the loop LISTENs on the replica's
//! channel, so a change on the server reaches the register with no polling,
//! and it connects again after losing the server, sending what was written
//! meanwhile.

mod common;
#[path = "common/device.rs"]
mod device;
#[path = "common/filing_shop.rs"]
mod shop;

use std::path::Path;
use std::time::Duration;

use device::{Device, PATIENCE};
use magic_sync_replica::transport::queue::Queue;
use magic_sync_replica::transport::{Options, Status};
use rusqlite::Connection;
use shop::{names_held, Shop};
use uuid::Uuid;

/// The filing shop with a relay worker that idles an hour: what relays a
/// change is the commit that noted it, waking the worker.
fn shop_with_worker() -> Shop {
    Shop::open_with(&[
        "shared_preload_libraries=magic_sync",
        "magic_sync.database=shop",
        "magic_sync.idle=3600",
    ])
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let began = std::time::Instant::now();
    while !done() {
        assert!(began.elapsed() < PATIENCE, "waited {PATIENCE:?} for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn unfiled(file: &Path) -> i64 {
    Connection::open(file)
        .unwrap()
        .query_row("SELECT count(*) FROM sync_notes", [], |r| r.get(0))
        .unwrap()
}

/// The register's program writes a receipt through a connection of its own.
fn sell(file: &Path, me: Uuid, total: i64) -> Uuid {
    let conn = Connection::open(file).unwrap();
    conn.execute_batch("PRAGMA recursive_triggers = ON")
        .unwrap();
    shop::write_receipt(&conn, me, total)
}

fn carries_rows(status: &Status) -> bool {
    matches!(
        status,
        Status::Sent {
            upload: Some(_),
            ..
        }
    )
}

/// The device loop of register `me`, connecting as the role `device` (its
/// own, so a test can shut it out and let it in). An hour between polls:
/// only the server's notifications wake it.
fn start_as_device(shop: &Shop, file: &Path, me: Uuid) -> Device {
    let replica = shop::open_register(file, me);
    let config: postgres::Config = format!("{} user=device", shop.cluster.url("shop"))
        .parse()
        .unwrap();
    let options = Options {
        poll_every: Duration::from_secs(3600),
        ..Options::default()
    };
    // The calls of 0.1.0's client (sync.next, sync.ack_next), which these
    // tests count and take away; sync.take is delivery_batched.rs's.
    Device::start(replica, options, move |replica| {
        Queue::new(config, replica.me()).in_one_call(false)
    })
}

/// The server shuts the device out, and drops its connection.
fn shut_out(shop: &mut Shop, device: &mut Device) {
    shop.run(
        "ALTER ROLE device NOLOGIN; \
         SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'device'",
    );
    device.expect("the loop to lose the server", |s| {
        matches!(s, Status::Disconnected { .. })
    });
}

#[test]
fn over_the_queue_a_change_wakes_the_loop_and_a_receipt_written_offline_is_filed_once_it_connects_again(
) {
    let mut shop = shop_with_worker();
    shop.run("CREATE ROLE device LOGIN SUPERUSER");
    let me = shop.add_register("Register 1");
    let file = shop.file_of(me);
    let mut device = start_as_device(&shop, &file, me);
    device.expect("connected", |s| matches!(s, Status::Connected));
    device.expect("waiting", |s| matches!(s, Status::Waiting { .. }));

    shop.run(
        "INSERT INTO shop.products (id, name, price_cents) VALUES (gen_random_uuid(), 'Tea', 250)",
    );
    wait_until("the register to hold Tea", || names_held(&file) == ["Tea"]);

    shut_out(&mut shop, &mut device);
    let receipt = sell(&file, me, 1250);
    device.control.poke();
    device.expect("a connection refused while shut out", |s| {
        matches!(s, Status::Disconnected { .. })
    });
    assert!(
        !device.drain().iter().any(carries_rows),
        "sent while shut out"
    );

    shop.run("ALTER ROLE device LOGIN");
    device.expect("connected again", |s| matches!(s, Status::Connected));
    device.expect("the receipt sent", carries_rows);
    wait_until("the receipt filed and its Filed applied", || {
        unfiled(&file) == 0
    });
    assert_eq!(shop.receipts(), [(receipt, me, 1250)]);

    let (_, rest) = device.stop();
    assert!(
        !rest.iter().any(carries_rows),
        "the receipt sent twice: {rest:?}"
    );
    assert_eq!(shop.receipts(), [(receipt, me, 1250)]);
}

#[test]
fn the_workers_passes_never_fail_for_the_reports_registers_file_meanwhile() {
    // Each register files a report after every message it applies, while
    // the worker passes back to back: a filing that commits during a pass
    // must not make the pass start over (it would wait a backoff).
    use magic_sync_tests::registers::Fleet;
    use magic_sync_tests::worker_shop::{Transport, WorkerShop};

    let mut shop = WorkerShop::start(Transport::Queue, 10, &[]);
    let ids = shop.add_registers(3);
    let fleet = Fleet::start(&shop.link(), &ids);
    assert!(
        fleet.wait_until(PATIENCE, Duration::from_millis(20), |a| a.rows >= 10),
        "the registers took their snapshots"
    );
    let mut writer = shop.cluster.connect("shop");
    let update = writer
        .prepare("UPDATE shop.products SET price_cents = $1 WHERE name = 'Product 1'")
        .unwrap();
    let last = 1_000_000 + 600;
    for price in 1_000_000..=last {
        writer.execute(&update, &[&price]).unwrap();
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(
        fleet.wait_until(PATIENCE, Duration::from_millis(20), |a| a.top >= last),
        "every register applied the last change"
    );
    let log = shop.cluster.log();
    let failures: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("a pass failed"))
        .collect();
    assert!(failures.is_empty(), "passes failed: {failures:#?}");
    assert_eq!(fleet.troubles().count, 0, "{:?}", fleet.troubles().first);
}

#[test]
fn a_gateways_role_takes_applies_and_files_over_the_queue_with_no_right_on_the_engine() {
    let mut shop = shop_with_worker();
    // A role given only what sync.allow_gateway grants, and what filing
    // receipts writes on the host's table (ON CONFLICT reads the key).
    shop.run(
        "CREATE ROLE gateway LOGIN; \
         SELECT sync.allow_gateway('gateway'); \
         GRANT USAGE ON SCHEMA shop TO gateway; \
         GRANT SELECT, INSERT ON shop.receipts TO gateway",
    );
    let me = shop.add_register("Register 1");
    let file = shop.file_of(me);
    let replica = shop::open_register(&file, me);
    let url = format!("{} user=gateway", shop.cluster.url("shop"));
    let config: postgres::Config = url.parse().unwrap();
    let mut device = Device::start(replica, Options::default(), move |replica| {
        Queue::new(config, replica.me())
    });
    device.expect("connected", |s| matches!(s, Status::Connected));

    shop.run(
        "INSERT INTO shop.products (id, name, price_cents) VALUES (gen_random_uuid(), 'Tea', 250)",
    );
    wait_until("the register to hold Tea", || names_held(&file) == ["Tea"]);
    let receipt = sell(&file, me, 1250);
    device.control.poke();
    wait_until("the receipt filed and its Filed applied", || {
        unfiled(&file) == 0
    });
    assert_eq!(shop.receipts(), [(receipt, me, 1250)]);
    device.stop();

    // And nothing else: not the messages, not the inbox, not relaying.
    let mut gateway = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    for refused in [
        "SELECT count(*) FROM sync.outbox",
        "SELECT count(*) FROM sync.inbox",
        "SELECT count(*) FROM sync.epochs",
        "CALL sync.relay(NULL)",
        "SELECT sync.overview()",
    ] {
        let e = gateway.batch_execute(refused).unwrap_err();
        assert_eq!(
            e.code(),
            Some(&postgres::error::SqlState::INSUFFICIENT_PRIVILEGE),
            "{refused}: {e}"
        );
    }
}

/// Whether a status is an Up sent that carries no rows: a report of what
/// the register applied.
/// Five products added, Tea 1 to Tea 5, `after_each` called after each
/// with the names added so far (to wait until it went where it goes).
/// Answers the names.
fn five_changes(shop: &mut Shop, mut after_each: impl FnMut(&mut Shop, &[String])) -> Vec<String> {
    let mut names = Vec::new();
    for n in 1..=5 {
        let name = format!("Tea {n}");
        shop.run(&format!(
            "INSERT INTO shop.products (id, name, price_cents) VALUES (gen_random_uuid(), '{name}', 250)"
        ));
        names.push(name);
        after_each(shop, &names);
    }
    names
}

fn is_report(status: &Status) -> bool {
    matches!(status, Status::Sent { upload: None, .. })
}

/// Takes the loop's statuses until it said it sent the report that came
/// after the last message it applied. Once the server heard the last
/// message, that report was sent, and every message's `Applied` came
/// before it: only the loop's saying so may still be on its way.
fn snapshot_reported(device: &mut Device) {
    let mut reported_last = false;
    wait_until("the loop to say it sent the snapshot's report", || {
        for status in device.drain() {
            if matches!(status, Status::Applied(_)) {
                reported_last = false;
            } else if is_report(&status) {
                reported_last = true;
            }
        }
        reported_last
    });
}

#[test]
fn messages_applied_in_a_burst_are_reported_once_after_it_and_the_server_hears_the_last() {
    let mut shop = shop_with_worker();
    let me = shop.add_register("Register 1");
    let file = shop.file_of(me);
    let replica = shop::open_register(&file, me);
    let config: postgres::Config = shop.cluster.url("shop").parse().unwrap();
    // Longer than the burst takes: every message of it waits for one report.
    let options = Options {
        poll_every: Duration::from_secs(3600),
        report_after: Duration::from_secs(5),
        ..Options::default()
    };
    let mut device = Device::start(replica, options, move |replica| {
        Queue::new(config, replica.me()).in_one_call(false)
    });
    // What opening says (where it stands) and the snapshot's report, all
    // taken before the burst (no status taken before: the opening turn may
    // apply the snapshot and report it at once). The loop says it sent a
    // report only once the server took it, so a server that heard the
    // snapshot's last message is not yet a loop that said so: wait for
    // both, or the snapshot's report is counted with the burst's.
    wait_until("the server to hear the snapshot's last message", || {
        shop.count(
            "SELECT count(*) FROM sync.replicas \
             WHERE applied_sequence > 0 AND applied_sequence = last_sequence",
        ) == 1
    });
    snapshot_reported(&mut device);

    // Five changes, each taken by the register before the next is written:
    // five messages.
    five_changes(&mut shop, |_, names| {
        wait_until("the register to hold the change", || {
            names_held(&file) == names
        })
    });
    let during = device.drain();
    let applied = during
        .iter()
        .filter(|s| matches!(s, Status::Applied(_)))
        .count();
    assert!(applied >= 5, "five messages applied: {during:?}");

    // The server hears the last message applied, in one report.
    wait_until("the server to hear the last message applied", || {
        shop.count("SELECT count(*) FROM sync.replicas WHERE applied_sequence = last_sequence") == 1
    });
    let (_, after) = device.stop();
    let reports = during.iter().chain(&after).filter(|s| is_report(s)).count();
    assert_eq!(reports, 1, "{during:?} {after:?}");
}

/// How many times the device's sessions called each of the queue's
/// functions, as the server counts them (`track_functions`).
fn queue_calls(shop: &mut Shop, function: &str) -> i64 {
    shop.count(&format!(
        "SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_user_functions \
         WHERE schemaname = 'sync' AND funcname = '{function}'"
    ))
}

#[test]
fn a_burst_waiting_for_the_device_is_taken_with_one_call_a_message() {
    let mut shop = shop_with_worker();
    shop.run("CREATE ROLE device LOGIN SUPERUSER; ALTER ROLE device SET track_functions = 'all'");
    let me = shop.add_register("Register 1");
    let file = shop.file_of(me);
    let mut device = start_as_device(&shop, &file, me);
    device.expect("waiting", |s| matches!(s, Status::Waiting { .. }));
    wait_until("the snapshot taken and reported", || {
        shop.count(
            "SELECT count(*) FROM sync.replicas WHERE applied_sequence > 0 \
             AND NOT EXISTS (SELECT 1 FROM sync.outbox)",
        ) == 1
    });

    // Shut out, the device misses five messages, one a change.
    shut_out(&mut shop, &mut device);
    let names = five_changes(&mut shop, |shop, names| {
        wait_until("the change's message waiting", || {
            shop.count("SELECT count(*) FROM sync.outbox") == names.len() as i64
        })
    });
    shop.run("SELECT pg_stat_reset()");

    shop.run("ALTER ROLE device LOGIN");
    device.control.poke();
    wait_until("the register to hold the five changes", || {
        names_held(&file) == names
    });
    // Counts reach the server once the device's session is idle.
    wait_until("the calls counted", || {
        queue_calls(&mut shop, "ack_next") >= 5
    });
    device.stop();
    assert_eq!(
        queue_calls(&mut shop, "ack_next"),
        5,
        "one acknowledgement a message"
    );
    assert_eq!(
        queue_calls(&mut shop, "ack"),
        0,
        "each acknowledged with the next taken"
    );
    // sync.next takes the burst's first message, and looks once more when
    // the held-back report falls due; the rest come with acknowledgements.
    let nexts = queue_calls(&mut shop, "next");
    assert!(
        nexts <= 2,
        "sync.next called {nexts} times for a burst of five"
    );
}

/// The stall of a replica over the queue, as the status reads say it.
fn stall_in_health(shop: &mut Shop) -> serde_json::Value {
    let health: serde_json::Value = shop
        .pg
        .query_one("SELECT sync.health()", &[])
        .unwrap()
        .get(0);
    health
}

#[test]
fn over_the_queue_receipts_are_filed_while_taking_fails_for_good_and_the_stall_shows_until_it_takes_again(
) {
    let mut shop = Shop::open_with(&[
        "shared_preload_libraries=magic_sync",
        "magic_sync.database=shop",
        "magic_sync.idle=1",
        "magic_sync.stalled_after=2",
    ]);
    shop.run(
        "CREATE ROLE device LOGIN; \
         SELECT sync.allow_gateway('device'); \
         GRANT USAGE ON SCHEMA shop TO device; \
         GRANT SELECT, INSERT ON shop.receipts TO device",
    );
    let me = shop.add_register("Register 1");
    let file = shop.file_of(me);
    let mut device = start_as_device(&shop, &file, me);
    shop.add_product("Tea", 250);
    wait_until("the register to hold Tea", || names_held(&file) == ["Tea"]);

    // Taking fails for good: the device's role may file, and not take.
    // Its session ended, the loop connects again and asks the queue first.
    shop.run(
        "REVOKE EXECUTE ON FUNCTION sync.next(uuid), sync.ack(uuid, text), \
         sync.ack_next(uuid, text) FROM device; \
         SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'device'",
    );
    device.expect("the loop to lose the server", |s| {
        matches!(s, Status::Disconnected { .. })
    });
    shop.add_product("Coffee", 300);
    let mut sold = vec![sell(&file, me, 100), sell(&file, me, 200)];
    sold.sort();
    device.control.poke();
    wait_until("the receipts filed while taking fails", || {
        shop.receipts().iter().map(|r| r.0).collect::<Vec<_>>() == sold
    });
    assert_eq!(names_held(&file), ["Tea"], "Coffee waits for it");

    // Heard, and taking nothing while Coffee waits: stalled. Over the
    // queue nothing the server holds keeps a device from its messages, so
    // once noticed it waits for a fix on the device's side.
    wait_until("the stall noticed, waiting for a fix", || {
        stall_in_health(&mut shop)["stalled"]["first"][0]["remedy"] == "fix"
    });
    let health = stall_in_health(&mut shop);
    assert_eq!(health["stalled"]["first"][0]["replica"], me.to_string());
    assert_eq!(health["healthy"], false, "{health:#}");
    let overview: serde_json::Value = shop
        .pg
        .query_one("SELECT sync.overview()", &[])
        .unwrap()
        .get(0);
    assert_eq!(overview["states"]["stalled"], 1, "{overview:#}");
    assert_eq!(
        shop.count(&format!(
            "SELECT count(*) FROM sync.alarms WHERE replica = '{me}' \
             AND what LIKE '%see the device''s own log%'"
        )),
        1
    );

    // Let in again, it takes what waits, and the stall is over.
    shop.run("SELECT sync.allow_gateway('device')");
    wait_until("the register to hold Coffee", || {
        names_held(&file) == ["Coffee", "Tea"]
    });
    wait_until("the Filed applied: nothing unfiled", || unfiled(&file) == 0);
    wait_until("the register synced, the stall over", || {
        let health = stall_in_health(&mut shop);
        health["stalled"]["total"] == 0 && health["healthy"] == true
    });
    assert_eq!(shop.receipts().len(), 2, "every receipt filed once");
    device.stop();
}

/// The state the overview gives `replica`.
fn state_of(shop: &mut Shop, replica: Uuid) -> String {
    let listing: serde_json::Value = shop
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

#[test]
fn a_register_whose_last_receipt_was_filed_says_so_at_once_and_is_synced_with_no_other_write() {
    let mut shop = shop_with_worker();
    shop.run("CREATE ROLE device LOGIN SUPERUSER");
    let me = shop.add_register("Register 1");
    let file = shop.file_of(me);
    let device = start_as_device(&shop, &file, me);
    shop.add_product("Tea", 250);
    wait_until("the register to hold Tea", || names_held(&file) == ["Tea"]);
    wait_until("the register synced", || {
        state_of(&mut shop, me) == "synced"
    });

    let receipt = sell(&file, me, 480);
    device.control.poke();
    wait_until("the receipt filed", || shop.receipts().len() == 1);
    assert_eq!(shop.receipts()[0].0, receipt);
    wait_until(
        "the register synced again, with nothing else written",
        || state_of(&mut shop, me) == "synced",
    );

    // Sold while it was stopped: it opens saying a backlog of one receipt,
    // with the receipt; the Filed that answers it empties the backlog.
    device.stop();
    let receipt = sell(&file, me, 990);
    let device = start_as_device(&shop, &file, me);
    wait_until("the second receipt filed", || shop.receipts().len() == 2);
    assert!(shop.receipts().iter().any(|r| r.0 == receipt));
    // Its Filed emptied its backlog: it says so in an Up of its own, and
    // the server stops counting the receipt as on its way.
    wait_until(
        "the register synced again, with nothing else written",
        || state_of(&mut shop, me) == "synced",
    );
    let backlog_empty = shop.count(&format!(
        "SELECT count(*) FROM sync.backlogs WHERE replica = '{me}' AND empty"
    ));
    assert_eq!(backlog_empty, 1, "the backlog it said last is empty");
    device.stop();
}

//! The relay worker: with `shared_preload_libraries = 'magic_sync'` and
//! `magic_sync.database`, a background worker relays by itself. Changes on
//! the server reach the registers with no `CALL sync.relay()` anywhere, a
//! device LISTENing on its replica's channel is woken when messages wait,
//! and the worker comes back after it is killed.

mod common;

use std::time::{Duration, Instant};

use common::*;
use magic_sync_replica::Replica;
use postgres::fallible_iterator::FallibleIterator;
use postgres::Client;
use uuid::Uuid;

/// Long enough for a busy machine; each wait ends as soon as it may.
const PATIENCE: Duration = Duration::from_secs(30);

/// The shop with a relay worker that sleeps `idle` seconds when no commit
/// wakes it. It connects to `shop` once that exists (until then, it is
/// started again every few seconds), and relays once the extension is there.
fn shop_with_worker(idle: u32) -> Shop {
    let idle = format!("magic_sync.idle={idle}");
    Shop::open_with(&[
        "shared_preload_libraries=magic_sync",
        "magic_sync.database=shop",
        &idle,
    ])
}

/// Waits until `done` answers true, or panics saying what it waited for.
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let began = Instant::now();
    while !done() {
        assert!(began.elapsed() < PATIENCE, "waited {PATIENCE:?} for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn worker_pid(pg: &mut Client) -> Option<i32> {
    pg.query_opt(
        "SELECT pid FROM pg_stat_activity WHERE backend_type = 'magic_sync relay' AND datname = 'shop'",
        &[],
    )
    .unwrap()
    .map(|row| row.get(0))
}

fn waiting_for(pg: &mut Client, register: Uuid) -> i64 {
    pg.query_one(
        "SELECT count(*) FROM sync.outbox WHERE replica = $1",
        &[&register],
    )
    .unwrap()
    .get(0)
}

fn add_product(shop: &mut Shop, name: &str, price: i64) {
    shop.pg
        .execute(
            "INSERT INTO shop.products (id, name, price_cents) VALUES (gen_random_uuid(), $1, $2)",
            &[&name, &price],
        )
        .unwrap();
}

/// The shop with its worker (waking every second), and one register that
/// holds its one product, Tea, relayed by the worker.
fn a_register_holding_tea() -> (Shop, Replica) {
    let mut shop = shop_with_worker(1);
    wait_until("the relay worker", || worker_pid(&mut shop.pg).is_some());
    let a = shop.add_register("Register 1");
    let mut register = open_register(&shop.file_of(a), a);
    add_product(&mut shop, "Tea", 250);
    deliver_when_relayed(&mut shop, &mut register);
    (shop, register)
}

/// Takes what waits for a register, again and again, until it holds
/// exactly the server's products: the worker relays on its own time.
fn deliver_when_relayed(shop: &mut Shop, register: &mut Replica) {
    wait_until("the register to hold the server's products", || {
        deliver(&mut shop.pg, register);
        report(&mut shop.pg, register);
        held_by(register) == shop.products()
    });
}

#[test]
fn changes_reach_the_registers_with_no_relay_called() {
    // An hour of idling: what relays each change is the commit that noted
    // it, waking the worker. (The register becomes live with no note: the
    // first change's pass finds it and provisions it.)
    let mut shop = shop_with_worker(3600);
    wait_until("the relay worker", || worker_pid(&mut shop.pg).is_some());
    let a = shop.add_register("Register 1");
    let mut register = open_register(&shop.file_of(a), a);
    add_product(&mut shop, "Tea", 250);
    deliver_when_relayed(&mut shop, &mut register);

    for price in [260, 270, 280] {
        shop.run(&format!(
            "UPDATE shop.products SET price_cents = {price}, updated_at = now() WHERE name = 'Tea'"
        ));
        deliver_when_relayed(&mut shop, &mut register);
        assert_each_holds_the_servers_products(&mut shop, std::slice::from_ref(&register));
    }
}

#[test]
fn what_the_worker_deleted_is_counted_for_autovacuum_while_it_runs() {
    // A worker that never flushed its statistics would hide the dead rows
    // of the notes it planned from autovacuum until it exited.
    let (mut shop, mut register) = a_register_holding_tea();
    let pid = worker_pid(&mut shop.pg);
    for price in [260, 270, 280] {
        shop.run(&format!(
            "UPDATE shop.products SET price_cents = {price} WHERE name = 'Tea'"
        ));
        deliver_when_relayed(&mut shop, &mut register);
    }
    wait_until("the notes' deletions in pg_stat_user_tables", || {
        let deleted: i64 = shop
            .pg
            .query_one(
                "SELECT coalesce(sum(n_tup_del), 0)::int8 FROM pg_stat_user_tables \
                  WHERE schemaname = 'sync' AND relname = 'notes'",
                &[],
            )
            .unwrap()
            .get(0);
        deleted >= 4
    });
    assert_eq!(worker_pid(&mut shop.pg), pid, "the same worker throughout");
}

#[test]
fn a_device_listening_on_its_channel_is_woken_when_its_messages_wait() {
    let (mut shop, mut register) = a_register_holding_tea();
    let a = register.me();

    let mut device = shop.cluster().connect("shop");
    device
        .batch_execute(&format!("LISTEN \"magic_sync:{a}\""))
        .unwrap();
    add_product(&mut shop, "Cake", 400);
    let began = Instant::now();
    let woken = loop {
        let mut notifications = device.notifications();
        if let Some(n) = notifications
            .timeout_iter(Duration::from_millis(200))
            .next()
            .unwrap()
        {
            break n;
        }
        assert!(began.elapsed() < PATIENCE, "no notification came");
    };
    assert_eq!(woken.channel(), format!("magic_sync:{a}"));
    assert!(
        waiting_for(&mut shop.pg, a) > 0,
        "woken with nothing waiting"
    );
    deliver(&mut shop.pg, &mut register);
    assert_each_holds_the_servers_products(&mut shop, std::slice::from_ref(&register));
}

#[test]
fn a_worker_killed_is_started_again_and_relays_what_came_meanwhile() {
    let (mut shop, mut register) = a_register_holding_tea();

    let pid = worker_pid(&mut shop.pg).unwrap();
    // SIGKILL: the postmaster takes it as a crash, restarts every backend
    // and starts the worker again.
    std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    wait_until("the server to come back", || {
        std::thread::sleep(Duration::from_millis(200));
        let Ok(mut pg) = postgres::Client::connect(&shop.cluster().url("shop"), postgres::NoTls)
        else {
            return false;
        };
        worker_pid(&mut pg).is_some_and(|again| again != pid)
    });
    shop.reconnect();
    add_product(&mut shop, "Cake", 400);
    deliver_when_relayed(&mut shop, &mut register);
}

#[test]
fn a_relay_stopped_relays_no_more_and_one_started_by_hand_does() {
    // No preloading: the worker started by hand wakes every magic_sync.idle.
    let mut shop = Shop::open_with(&["magic_sync.idle=1"]);
    assert_eq!(worker_pid(&mut shop.pg), None);
    let a = shop.add_register("Register 1");
    let mut register = open_register(&shop.file_of(a), a);
    let started: Option<i32> = shop
        .pg
        .query_one("SELECT sync.start_relay()", &[])
        .unwrap()
        .get(0);
    assert!(started.is_some());
    let again: Option<i32> = shop
        .pg
        .query_one("SELECT sync.start_relay()", &[])
        .unwrap()
        .get(0);
    assert_eq!(again, None, "a second worker for the same database");
    add_product(&mut shop, "Tea", 250);
    deliver_when_relayed(&mut shop, &mut register);

    let stopped: i64 = shop
        .pg
        .query_one("SELECT sync.stop_relay()", &[])
        .unwrap()
        .get(0);
    assert_eq!(stopped, 1);
    wait_until("the worker to stop", || worker_pid(&mut shop.pg).is_none());
    add_product(&mut shop, "Cake", 400);
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(waiting_for(&mut shop.pg, a), 0, "relayed with no worker");
}

#[test]
fn a_role_that_is_not_the_owner_may_not_start_a_relay() {
    let mut shop = Shop::open();
    shop.run("CREATE ROLE clerk LOGIN; GRANT USAGE ON SCHEMA sync TO clerk");
    let mut clerk = postgres::Client::connect(
        &format!("{} user=clerk", shop.cluster().url("shop")),
        postgres::NoTls,
    )
    .unwrap();
    let refused = clerk
        .query_one("SELECT sync.start_relay()", &[])
        .unwrap_err();
    assert_eq!(
        refused.code(),
        Some(&postgres::error::SqlState::INSUFFICIENT_PRIVILEGE),
        "{refused}"
    );
}

#[test]
fn a_hot_standby_runs_no_relay_and_once_promoted_relays() {
    let (mut shop, mut register) = a_register_holding_tea();

    let standby = shop.cluster().standby(&[
        "shared_preload_libraries=magic_sync",
        "magic_sync.database=shop",
        "magic_sync.idle=1",
    ]);
    let mut replayed = standby.connect("shop");
    let in_recovery: bool = replayed
        .query_one("SELECT pg_is_in_recovery()", &[])
        .unwrap()
        .get(0);
    assert!(in_recovery);
    // What the primary writes reaches the standby; its relay does not run.
    add_product(&mut shop, "Cake", 400);
    deliver_when_relayed(&mut shop, &mut register);
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(worker_pid(&mut replayed), None, "a relay on a hot standby");

    // The standby is promoted, and relays from then on (the old primary is
    // left alone: the register talks to the promoted server only).
    std::thread::sleep(Duration::from_secs(1));
    standby.promote();
    let mut promoted = standby.connect("shop");
    wait_until("the promoted server's relay worker", || {
        worker_pid(&mut promoted).is_some()
    });
    promoted
        .batch_execute(
            "UPDATE shop.products SET price_cents = 450, updated_at = now() WHERE name = 'Cake'",
        )
        .unwrap();
    wait_until(
        "the register to hold the promoted server's products",
        || {
            deliver(&mut promoted, &mut register);
            report(&mut promoted, &mut register);
            held_by(&register) == products_of(&mut promoted)
        },
    );
    assert!(held_by(&register)
        .iter()
        .any(|p| p.1 == "Cake" && p.2 == 450));
}

#[test]
fn a_server_stopped_at_once_and_started_again_relays_what_came_meanwhile() {
    let (mut shop, mut register) = a_register_holding_tea();
    // Committed for good (the throwaway cluster commits asynchronously),
    // then the server stopped before the worker may have relayed it, or
    // while it does.
    shop.run("SET synchronous_commit = on");
    add_product(&mut shop, "Cake", 400);
    shop.cluster().restart_immediately();
    shop.reconnect();
    deliver_when_relayed(&mut shop, &mut register);
    assert_eq!(held_by(&register).len(), 2, "{:?}", shop.products());
}

#[test]
fn a_transport_it_does_not_know_is_refused_naming_the_setting() {
    let mut shop = shop_with_worker(1);
    let refused = shop
        .pg
        .batch_execute("ALTER SYSTEM SET magic_sync.transport = 'carrier pigeon'")
        .unwrap_err();
    let db = refused.as_db_error().expect("an error of the server");
    assert_eq!(
        db.code(),
        &postgres::error::SqlState::INVALID_PARAMETER_VALUE
    );
    assert!(
        db.message().contains("magic_sync.transport"),
        "{}",
        db.message()
    );
    assert!(
        db.hint().unwrap_or_default().contains("queue"),
        "{:?}",
        db.hint()
    );
}

#[test]
fn a_database_that_does_not_exist_is_named_in_the_log_with_its_setting() {
    let cluster = magic_sync_tests::Cluster::start_with(&[
        "shared_preload_libraries=magic_sync",
        "magic_sync.database=nowhere",
    ]);
    wait_until("the worker to say which database it could not find", || {
        let log = cluster.log();
        log.contains("connecting to database \"nowhere\" (magic_sync.database")
            && log.contains("database \"nowhere\" does not exist")
    });
}

fn alarms_of(pg: &mut Client, register: Uuid) -> Vec<String> {
    pg.query(
        "SELECT what FROM sync.alarms WHERE replica = $1 ORDER BY id",
        &[&register],
    )
    .unwrap()
    .iter()
    .map(|row| row.get(0))
    .collect()
}

#[test]
fn a_register_away_until_its_outbox_passes_its_bound_is_provisioned_again_with_an_alarm() {
    let mut shop = Shop::open_with(&[
        "shared_preload_libraries=magic_sync",
        "magic_sync.database=shop",
        "magic_sync.idle=1",
        "magic_sync.outbox_messages=3",
        // Never passed over: a register away would keep four messages
        // waiting and never reach the bound (tests/behind.rs).
        "magic_sync.messages_ahead=0",
    ]);
    wait_until("the relay worker", || worker_pid(&mut shop.pg).is_some());
    let a = shop.add_register("Register 1");
    let mut register = open_register(&shop.file_of(a), a);
    add_product(&mut shop, "Tea", 250);
    deliver_when_relayed(&mut shop, &mut register);

    // Away: each change is a message of its own, until the fifth passes
    // the bound of three.
    for price in 1..=5 {
        shop.run(&format!(
            "UPDATE shop.products SET price_cents = {price}, updated_at = now() WHERE name = 'Tea'"
        ));
        wait_until("the change to be relayed", || {
            waiting_for(&mut shop.pg, a) >= price.min(4) || !alarms_of(&mut shop.pg, a).is_empty()
        });
    }
    wait_until("the alarm", || !alarms_of(&mut shop.pg, a).is_empty());
    let alarms = alarms_of(&mut shop.pg, a);
    assert!(
        alarms[0].contains("magic_sync.outbox_messages"),
        "{alarms:?}"
    );
    // What waits now is a snapshot of what it should hold, not the changes.
    wait_until("the snapshot", || {
        let begins: Option<i64> = shop
            .pg
            .query_one(
                "SELECT min(position) FROM sync.outbox o JOIN sync.replicas r ON r.id = o.replica \
                 WHERE o.replica = $1 AND o.position = r.snapshot_sequence",
                &[&a],
            )
            .unwrap()
            .get(0);
        begins.is_some() && waiting_for(&mut shop.pg, a) <= 2
    });
    deliver_when_relayed(&mut shop, &mut register);
    assert_eq!(held_by(&register)[0].2, 5);
}

#[test]
fn messages_a_register_never_confirmed_are_sent_again_after_unconfirmed_after() {
    let mut shop = Shop::open_with(&[
        "shared_preload_libraries=magic_sync",
        "magic_sync.database=shop",
        "magic_sync.idle=1",
        "magic_sync.unconfirmed_after=2",
    ]);
    wait_until("the relay worker", || worker_pid(&mut shop.pg).is_some());
    let a = shop.add_register("Register 1");
    let mut register = open_register(&shop.file_of(a), a);
    add_product(&mut shop, "Tea", 250);
    deliver_when_relayed(&mut shop, &mut register);

    // The transport loses the change: it is taken from the queue and never
    // reaches the register, which says nothing.
    shop.run("UPDATE shop.products SET price_cents = 300, updated_at = now() WHERE name = 'Tea'");
    wait_until("the change to be relayed", || {
        waiting_for(&mut shop.pg, a) > 0
    });
    let (id, _lost) = next(&mut shop.pg, &register).unwrap();
    assert!(ack(&mut shop.pg, &register, &id));

    wait_until("the alarm", || !alarms_of(&mut shop.pg, a).is_empty());
    assert!(alarms_of(&mut shop.pg, a)[0].contains("magic_sync.unconfirmed_after"));
    deliver_when_relayed(&mut shop, &mut register);
    assert_eq!(held_by(&register)[0].2, 300);
}

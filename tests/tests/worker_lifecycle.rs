//! The relay worker's life: what its start tries again, how it waits for
//! the extension, a standby promoted while no relay ran, passes that fail
//! for a moment or for good, and the settings no session may change.
//! Each runs a real PostgreSQL with the library preloaded and real SQLite
//! registers; no CALL relays what the worker relays.

mod common;
#[path = "common/device.rs"]
mod device;
#[path = "common/filing_shop.rs"]
mod filing_shop;
#[path = "common/worker_lifecycle_help.rs"]
mod help;

use common::*;
use help::*;
use magic_sync_replica::{Settings, Table, Tables};
use magic_sync_tests::Cluster;
use postgres::error::SqlState;
use postgres::Client;
use uuid::Uuid;

/// What the worker logs, once, while its database lacks the extension.
fn waiting_for_the_extension(database: &str) -> String {
    format!("magic_sync relay: database \"{database}\" has no magic_sync extension yet: waiting")
}

#[test]
fn a_row_set_aside_is_tried_again_when_the_worker_starts_and_not_by_a_new_session() {
    // Messages of 4 kB, and rows set aside tried again after an hour.
    let settings = with_worker(
        "shop",
        &[
            "magic_sync.message_bytes=4096",
            "magic_sync.retry_every=3600",
        ],
    );
    let mut shop = Shop::open_with(&as_strs(&settings));
    let first = the_worker(&mut shop.pg, "shop");
    let a = shop.add_register("Register 1");
    let mut register = open_register(&shop.file_of(a), a);
    add_product(&mut shop.pg, "Tea", 250);
    deliver_when_relayed(&mut shop.pg, &mut register);

    // A row no message of 4 kB carries: the worker sets it aside.
    shop.pg
        .execute(
            "INSERT INTO shop.products (id, name, price_cents) VALUES (gen_random_uuid(), $1, 1)",
            &[&"x".repeat(6000)],
        )
        .unwrap();
    wait_until("the worker to set the long row aside", || {
        set_aside(&mut shop.pg) == 1
    });

    // The fix: larger messages, for every connection made from now on (a
    // database's setting outranks the server's command line). The worker
    // running took its settings when it connected.
    shop.run("ALTER DATABASE shop SET magic_sync.message_bytes = 65536");
    let mut fresh = shop.cluster().connect("shop");
    let limit: String = fresh
        .query_one("SHOW magic_sync.message_bytes", &[])
        .unwrap()
        .get(0);
    assert_eq!(limit, "65536", "the fresh session has the fix");
    let summary: serde_json::Value = fresh.query_one("CALL sync.relay()", &[]).unwrap().get(0);
    assert_eq!(
        summary["set_aside"], 1,
        "a new session's pass is no relay starting: {summary}"
    );
    assert_eq!(set_aside(&mut fresh), 1);
    deliver(&mut fresh, &mut register);
    report(&mut fresh, &mut register);
    let held: Vec<String> = held_by(&register).into_iter().map(|p| p.1).collect();
    assert_eq!(held, ["Tea"], "the long row went without its retry");
    assert_eq!(worker_pid(&mut fresh, "shop"), Some(first));

    // The worker stopped and started again: its first pass is a relay
    // starting, which tries the row again, and it goes.
    let stopped: i64 = fresh
        .query_one("SELECT sync.stop_relay()", &[])
        .unwrap()
        .get(0);
    assert_eq!(stopped, 1);
    wait_until("the worker to stop", || {
        worker_pid(&mut fresh, "shop").is_none()
    });
    let started: Option<i32> = fresh
        .query_one("SELECT sync.start_relay()", &[])
        .unwrap()
        .get(0);
    let again = started.expect("a worker started");
    assert_ne!(again, first);
    wait_until("the row tried again and sent", || {
        set_aside(&mut fresh) == 0
    });
    deliver_when_relayed(&mut fresh, &mut register);
    assert_eq!(held_by(&register).len(), 2);
    assert_eq!(worker_pid(&mut fresh, "shop"), Some(again));
}

#[test]
fn a_worker_started_before_the_extension_waits_quietly_and_relays_once_it_is_created() {
    // The database `postgres` exists from the start and lacks the
    // extension: the worker connects at once and has nothing to relay.
    let cluster = Cluster::start_with(&as_strs(&with_worker("postgres", &[])));
    let mut pg = cluster.connect("postgres");
    let waiting = waiting_for_the_extension("postgres");
    wait_until("the worker to say it waits for the extension", || {
        cluster.log().contains(&waiting)
    });
    let pid = the_worker(&mut pg, "postgres");

    // Five seconds: five wake-ups of magic_sync.idle, and two looks for
    // the extension (every 2 s). The same worker throughout, and one line.
    assert_stays(&mut pg, "postgres", pid, 10);
    let log = cluster.log();
    assert_eq!(
        log.matches(&waiting).count(),
        1,
        "said more than once:\n{log}"
    );
    assert_eq!(lines_of(&log, pid, &waiting).len(), 1, "not this worker's");
    assert!(workers_ended(&log).is_empty(), "{log}");
    assert!(lines_of(&log, pid, "a pass failed").is_empty(), "{log}");

    // The extension and the shop come: changes reach a register with no
    // CALL anywhere.
    pg.batch_execute("CREATE EXTENSION magic_sync").unwrap();
    pg.batch_execute(SERVER_SCHEMA).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let a = Uuid::new_v4();
    pg.execute(
        "INSERT INTO shop.registers (id, name) VALUES ($1, 'Register 1')",
        &[&a],
    )
    .unwrap();
    let mut register = open_register(&dir.path().join("register.db"), a);
    add_product(&mut pg, "Tea", 250);
    deliver_when_relayed(&mut pg, &mut register);
    pg.execute(
        "UPDATE shop.products SET price_cents = 275, updated_at = now()",
        &[],
    )
    .unwrap();
    deliver_when_relayed(&mut pg, &mut register);
    assert_eq!(held_by(&register)[0].2, 275);

    let log = cluster.log();
    assert_eq!(
        worker_pid(&mut pg, "postgres"),
        Some(pid),
        "the same worker"
    );
    assert_eq!(log.matches(&waiting).count(), 1);
    assert!(workers_ended(&log).is_empty(), "{log}");
    // Nor did a pass fail between the extension and the declarations.
    assert!(lines_of(&log, pid, "a pass failed").is_empty(), "{log}");
}

/// Delivers and reports until the register holds the server's products
/// and has nothing left unfiled.
fn in_step(pg: &mut Client, register: &mut magic_sync_replica::Replica) -> bool {
    filing_shop::deliver(pg, register);
    filing_shop::report(pg, register);
    filing_shop::products_of(register) == filing_shop::products_on(pg)
        && filing_shop::unfiled(register) == 0
}

#[test]
fn a_standby_promoted_relays_what_was_written_while_no_relay_ran() {
    let settings = with_worker("shop", &[]);
    let mut shop = filing_shop::Shop::open_with(&as_strs(&settings));
    the_worker(&mut shop.pg, "shop");
    let me = shop.add_register("Register 1");
    let mut register = filing_shop::open_register(&shop.file_of(me), me);
    shop.run(
        "INSERT INTO shop.products (id, name, price_cents) VALUES (gen_random_uuid(), 'Tea', 250)",
    );
    let online = filing_shop::sell(&register, &[500]);
    wait_until("the register in step with the primary", || {
        in_step(&mut shop.pg, &mut register)
    });
    let standby = shop.cluster.standby(&as_strs(&settings));

    // The primary's relay stops: what is written from now on is noted,
    // and nothing relays it.
    let stopped: i64 = shop
        .pg
        .query_one("SELECT sync.stop_relay()", &[])
        .unwrap()
        .get(0);
    assert_eq!(stopped, 1);
    wait_until("the primary's worker to stop", || {
        worker_pid(&mut shop.pg, "shop").is_none()
    });
    shop.run(
        "INSERT INTO shop.products (id, name, price_cents) VALUES (gen_random_uuid(), 'Cake', 400); \
         UPDATE shop.products SET price_cents = 275, updated_at = now() WHERE name = 'Tea'; \
         INSERT INTO shop.products (id, name, price_cents) VALUES (gen_random_uuid(), 'Scone', 300); \
         DELETE FROM shop.products WHERE name = 'Scone'; \
         INSERT INTO shop.products (id, name, price_cents) VALUES (gen_random_uuid(), 'Pie', 600)",
    );
    let notes = count(&mut shop.pg, "SELECT count(*) FROM sync.notes");
    assert!(notes > 0, "the changes are noted");
    filing_shop::deliver(&mut shop.pg, &mut register);
    let tea_only: Vec<String> = filing_shop::products_of(&register)
        .into_iter()
        .map(|p| p.1)
        .collect();
    assert_eq!(tea_only, ["Tea"], "relayed with no relay running");
    // And the register sells while it is away.
    let offline = filing_shop::sell(&register, &[1250, 80]);

    // The standby replays all of it, and runs no relay.
    let mut replayed = standby.connect("shop");
    let primary_products = filing_shop::products_on(&mut shop.pg);
    wait_until("the standby to replay the changes and their notes", || {
        filing_shop::products_on(&mut replayed) == primary_products
            && count(&mut replayed, "SELECT count(*) FROM sync.notes") == notes
    });
    assert_eq!(
        worker_pid(&mut replayed, "shop"),
        None,
        "a relay on a standby"
    );

    // The primary goes; the standby is promoted, and its worker relays.
    stop(&shop.cluster);
    standby.promote();
    let mut promoted = standby.connect("shop");
    let pid = the_worker(&mut promoted, "shop");
    wait_until("the register in step with the promoted server", || {
        in_step(&mut promoted, &mut register)
    });
    let names: Vec<String> = filing_shop::products_of(&register)
        .into_iter()
        .map(|p| p.1)
        .collect();
    assert_eq!(names.len(), 3, "{names:?}");
    for name in ["Tea", "Cake", "Pie"] {
        assert!(names.iter().any(|n| n == name), "{name} missing: {names:?}");
    }
    assert_eq!(count(&mut promoted, "SELECT count(*) FROM sync.notes"), 0);

    // Every receipt filed once: the one sold before, the two sold away.
    let mut expected: Vec<(Uuid, Uuid, i64)> = online
        .iter()
        .map(|id| (*id, me, 500))
        .chain(offline.iter().zip([1250, 80]).map(|(id, t)| (*id, me, t)))
        .collect();
    expected.sort();
    assert_eq!(filing_shop::receipts_filed_on(&mut promoted), expected);
    // Another round changes nothing.
    assert!(in_step(&mut promoted, &mut register));
    assert_eq!(filing_shop::receipts_filed_on(&mut promoted), expected);
    assert_eq!(worker_pid(&mut promoted, "shop"), Some(pid));
}

#[test]
fn a_pass_that_fails_for_a_moment_is_tried_again_by_the_same_worker() {
    // Locks are waited for 200 ms at most, the worker's included.
    let settings = with_worker("shop", &["lock_timeout=200ms"]);
    let mut shop = Shop::open_with(&as_strs(&settings));
    let pid = the_worker(&mut shop.pg, "shop");
    // What the log says from then on (before, the worker waited for the
    // database `shop` to be made).
    let mark = shop.cluster().log().len();
    let a = shop.add_register("Register 1");
    let mut register = open_register(&shop.file_of(a), a);
    add_product(&mut shop.pg, "Tea", 250);
    deliver_when_relayed(&mut shop.pg, &mut register);

    // Another session holds the relay's lock (as a long pass run by hand
    // would): the worker's pass times out waiting for it.
    let mut holder = shop.cluster().connect("shop");
    holder
        .batch_execute(&format!(
            "BEGIN; SELECT pg_advisory_xact_lock({RELAY_LOCK})"
        ))
        .unwrap();
    add_product(&mut shop.pg, "Cake", 400);
    wait_until("the worker's pass to fail, and fail again", || {
        lines_of(&shop.cluster().log(), pid, "a pass failed (transient)").len() >= 2
    });
    assert!(
        count(&mut shop.pg, "SELECT count(*) FROM sync.notes") > 0,
        "the change is not relayed while the lock is held"
    );
    holder.batch_execute("COMMIT").unwrap();
    deliver_when_relayed(&mut shop.pg, &mut register);
    assert_eq!(held_by(&register).len(), 2);

    let log = shop.cluster().log();
    let failed = lines_of(&log, pid, "a pass failed");
    assert!(
        failed
            .iter()
            .all(|l| l.contains("(transient)") && l.contains("lock timeout")),
        "{failed:#?}"
    );
    // Tried again after a backoff that grows: 0.1 s, then 0.2 s.
    assert!(
        failed
            .windows(2)
            .any(|w| w[0].contains("tried again in 0.1 s") && w[1].contains("tried again in 0.2 s")),
        "{failed:#?}"
    );
    assert_eq!(
        worker_pid(&mut shop.pg, "shop"),
        Some(pid),
        "the same worker"
    );
    assert!(workers_ended(&log[mark..]).is_empty(), "{log}");
}

/// Shelves, a second table every register holds.
const SHELVES: &str = "
    CREATE TABLE shop.shelves (id uuid PRIMARY KEY, label text NOT NULL);
    SELECT sync.declare_table('shop.shelves', sync => 'broadcast');
    INSERT INTO shop.shelves VALUES (gen_random_uuid(), 'Top');
";

fn shelves_on(pg: &mut Client) -> Vec<(Uuid, String)> {
    let mut rows: Vec<(Uuid, String)> = pg
        .query("SELECT id, label FROM shop.shelves", &[])
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    rows.sort();
    rows
}

fn shelves_held(register: &magic_sync_replica::Replica) -> Vec<(Uuid, String)> {
    filing_shop::values_by_id(register, "SELECT id, label FROM shelves")
}

#[test]
fn a_pass_refused_for_good_neither_crash_loops_the_worker_nor_stops_it_once_fixed() {
    // A pass refused for good is tried again after retry_every: 2 s here.
    let settings = with_worker("shop", &["magic_sync.retry_every=2"]);
    let mut shop = Shop::open_with(&as_strs(&settings));
    shop.run(SHELVES);
    let pid = the_worker(&mut shop.pg, "shop");
    // What the log says from then on (before, the worker waited for the
    // database `shop` to be made).
    let mark = shop.cluster().log().len();
    let a = shop.add_register("Register 1");
    let schema = format!(
        "{REGISTER_SCHEMA} CREATE TABLE shelves (id BLOB PRIMARY KEY NOT NULL, label TEXT NOT NULL);"
    );
    let tables = Tables::new(vec![Table::catalog("products"), Table::catalog("shelves")]);
    let mut register = open_replica(&shop.file_of(a), &schema, tables, a, Settings::default());
    add_product(&mut shop.pg, "Tea", 250);
    deliver_when_relayed(&mut shop.pg, &mut register);
    assert_eq!(shelves_held(&register), shelves_on(&mut shop.pg));

    // The engine's note trigger left on a table no declaration names (a
    // table no longer declared, its trigger kept by hand): no table's plan
    // says what becomes of its notes, so the relay's check refuses every
    // pass until it is gone. (A problem of one declared table stops that
    // table alone: tests/tests/drift.rs.)
    shop.run(
        "CREATE TABLE shop.old_prices (id uuid PRIMARY KEY); \
         CREATE TRIGGER sync_note_row AFTER INSERT OR UPDATE OR DELETE ON shop.old_prices \
             FOR EACH ROW EXECUTE FUNCTION sync.note_row('old_prices', '', '1', 'id', '0', '0')",
    );

    // Changes to the products keep coming, each commit waking the worker.
    let mut commits = 0;
    wait_until("the refusal logged three times", || {
        add_product(&mut shop.pg, &format!("Item {commits}"), commits);
        commits += 1;
        lines_of(&shop.cluster().log(), pid, "a pass failed (permanent)").len() >= 3
    });
    let log = shop.cluster().log();
    let refused = lines_of(&log, pid, "a pass failed (permanent)");
    assert!(
        refused[0].contains("differs from the declarations"),
        "{refused:#?}"
    );
    let naming = "the trigger sync_note_row on shop.old_prices is the engine's, and no declaration asks for it";
    assert!(
        log.contains(naming),
        "the refusal does not say `{naming}`:\n{log}"
    );
    // Once each retry_every, not once for each commit that woke it.
    assert!(
        refused.len() * 4 <= commits as usize,
        "{} refusals for {commits} commits",
        refused.len()
    );
    assert_eq!(
        worker_pid(&mut shop.pg, "shop"),
        Some(pid),
        "the same worker"
    );
    assert!(workers_ended(&log[mark..]).is_empty(), "{log}");
    // A refusal no note is about sets no row aside.
    assert_eq!(set_aside(&mut shop.pg), 0);

    // The trigger gone: what waited goes, and so does what comes next.
    shop.run("DROP TRIGGER sync_note_row ON shop.old_prices");
    deliver_when_relayed(&mut shop.pg, &mut register);
    shop.run("UPDATE shop.shelves SET label = 'Bottom'");
    wait_until("the shelves' change to reach the register", || {
        deliver(&mut shop.pg, &mut register);
        report(&mut shop.pg, &mut register);
        shelves_held(&register) == shelves_on(&mut shop.pg)
    });
    assert_eq!(held_by(&register), shop.products());
    assert_eq!(
        worker_pid(&mut shop.pg, "shop"),
        Some(pid),
        "the same worker"
    );
    assert!(workers_ended(&shop.cluster().log()[mark..]).is_empty());
}

/// pg_settings' context for who the docs say sets a setting.
fn context_of(who: &str) -> &'static str {
    match who {
        "superuser" => "superuser",
        "configuration (reload)" => "sighup",
        "server start (preloaded)" => "postmaster",
        "anyone" => "user",
        other => panic!("the docs say {other:?} sets a setting: which context is that?"),
    }
}

/// SET, as a session runs it; answers the SQLSTATE of its refusal, if any.
fn set(pg: &mut Client, name: &str, value: &str) -> Option<SqlState> {
    let value = value.replace('\'', "''");
    pg.batch_execute(&format!("SET {name} = '{value}'"))
        .err()
        .map(|e| e.code().cloned().expect("an error of the server"))
}

#[test]
fn the_engines_limits_and_timers_cannot_be_set_by_a_session() {
    let mut shop = Shop::open_with(&as_strs(&with_worker("shop", &[])));
    shop.run(
        "CREATE ROLE clerk LOGIN; GRANT USAGE ON SCHEMA shop TO clerk; \
         GRANT INSERT ON shop.products TO clerk",
    );
    let clerk_url = format!("{} user=clerk", shop.cluster().url("shop"));
    let mut clerk = Client::connect(&clerk_url, postgres::NoTls).unwrap();

    let documented = documented_settings(&server_docs());
    for named in [
        "magic_sync.message_rows",
        "magic_sync.message_bytes",
        "magic_sync.retry_every",
        "magic_sync.idle",
        "magic_sync.transport",
    ] {
        assert!(
            documented.iter().any(|(name, _)| name == named),
            "{named} is not in the docs' table"
        );
    }
    for (name, who) in &documented {
        let (context, value): (String, String) = shop
            .pg
            .query_one(
                "SELECT context, coalesce(setting, '') FROM pg_settings WHERE name = $1",
                &[name],
            )
            .map(|r| (r.get(0), r.get(1)))
            .unwrap_or_else(|e| panic!("{name} is not a setting of the server: {e}"));
        assert_eq!(context, context_of(who), "{name}: the docs say {who}");
        if who == "anyone" {
            continue;
        }
        // A plain role may not, whatever the setting: not by SET, not by
        // set_config(), not as it connects.
        let refusal = if context == "superuser" {
            SqlState::INSUFFICIENT_PRIVILEGE
        } else {
            SqlState::CANT_CHANGE_RUNTIME_PARAM
        };
        assert_eq!(
            set(&mut clerk, name, &value),
            Some(refusal.clone()),
            "{name}"
        );
        let by_function = clerk
            .query_one("SELECT set_config($1, $2, false)", &[name, &value])
            .unwrap_err();
        assert_eq!(by_function.code(), Some(&refusal), "{name}");
        let connecting = Client::connect(
            &format!("{clerk_url} options='-c {name}={value}'"),
            postgres::NoTls,
        );
        assert!(connecting.is_err(), "{name} set as a plain role connects");
        // A superuser's session may set what the docs give the superuser
        // (for its own passes: the worker is a session of its own), and
        // nothing the configuration sets.
        let by_superuser = set(&mut shop.pg, name, &value);
        if context == "superuser" {
            assert_eq!(by_superuser, None, "{name}");
        } else {
            assert_eq!(
                by_superuser,
                Some(SqlState::CANT_CHANGE_RUNTIME_PARAM),
                "{name}"
            );
        }
    }

    // What a superuser's session sets stays its own: the worker's pass
    // and every other session keep the server's.
    shop.run("SET magic_sync.message_rows = 1");
    let elsewhere: String = clerk
        .query_one("SHOW magic_sync.message_rows", &[])
        .unwrap()
        .get(0);
    assert_eq!(elsewhere, "500");
}

#[test]
fn without_preloading_a_limit_a_plain_role_sets_is_dropped_once_the_library_loads() {
    // Before the library is loaded in a session, its settings are
    // placeholders anyone may set; PostgreSQL checks them once it loads
    // (here, at the note trigger of the clerk's insert) and drops them.
    let mut shop = Shop::open();
    shop.run(
        "CREATE ROLE clerk LOGIN; GRANT USAGE ON SCHEMA shop TO clerk; \
         GRANT INSERT ON shop.products TO clerk",
    );
    let mut clerk = Client::connect(
        &format!("{} user=clerk", shop.cluster().url("shop")),
        postgres::NoTls,
    )
    .unwrap();
    for (name, value) in [
        ("magic_sync.message_rows", "1"),
        ("magic_sync.message_bytes", "4096"),
        ("magic_sync.retry_every", "1"),
        ("magic_sync.idle", "1"),
        ("magic_sync.transport", "nats"),
    ] {
        assert_eq!(
            set(&mut clerk, name, value),
            None,
            "{name}: not yet checked"
        );
    }
    add_product(&mut clerk, "Tea", 250);
    for (name, default) in [
        ("magic_sync.message_rows", "500"),
        ("magic_sync.message_bytes", "1048576"),
        ("magic_sync.retry_every", "1h"),
        ("magic_sync.idle", "10s"),
        ("magic_sync.transport", "queue"),
    ] {
        let shown: String = clerk
            .query_one(&format!("SHOW {name}"), &[])
            .unwrap()
            .get(0);
        assert_eq!(shown, default, "{name} kept what a plain role set");
    }
}

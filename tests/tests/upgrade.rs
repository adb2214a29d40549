//! Releases that upgrade in place (issue 32). The previous release is
//! installed as a server administrator of it had it (its library, built
//! from the commit sql/releases.txt names by scripts/release-library.sh,
//! and its install script, sql/magic_sync--0.1.0.sql), and filled as a shop
//! would: declarations, registers provisioned, rows held, messages in the
//! outbox not yet confirmed, an upload kept in the inbox, a row set aside,
//! a wish, the relay worker running. Then this build's library goes in
//! over it, as a package upgrade does (PostgreSQL restarted, since the
//! library is preloaded), and `ALTER EXTENSION magic_sync UPDATE` runs.
//!
//! The test runs its own copy of the machine's PostgreSQL, so that the
//! other tests, running beside it, go on with this build's library.

mod common;
#[path = "common/device.rs"]
mod device;
#[path = "common/filing_shop.rs"]
mod shop;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use device::{wait_until, Device};
use magic_sync_replica::transport::queue::Queue;
use magic_sync_replica::transport::Options;
use magic_sync_tests::private_postgres::{repository, PrivatePostgres};
use magic_sync_tests::Cluster;
use postgres::Client;
use shop::{open_register, products_on, write_receipt, SERVER_SCHEMA};
use uuid::Uuid;

/// The release upgraded from.
const PREVIOUS: &str = "0.1.0";

/// This build's version.
const CURRENT: &str = env!("CARGO_PKG_VERSION");

fn connect(cluster: &Cluster, database: &str) -> Client {
    let began = std::time::Instant::now();
    loop {
        match postgres::Client::connect(&cluster.url(database), postgres::NoTls) {
            Ok(client) => return client,
            Err(e) => {
                assert!(began.elapsed() < Duration::from_secs(60), "{e}");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

fn count(pg: &mut Client, sql: &str) -> i64 {
    pg.query_one(sql, &[]).unwrap().get(0)
}

fn start_register(cluster: &Cluster, file: &Path, me: Uuid) -> Device {
    let config: postgres::Config = cluster.url("shop").parse().unwrap();
    let options = Options {
        poll_every: Duration::from_millis(500),
        ..Options::default()
    };
    Device::start(open_register(file, me), options, move |replica| {
        Queue::new(config, replica.me())
    })
}

type Product = (Uuid, String, i64);

fn products_in(file: &Path) -> Vec<Product> {
    let conn = rusqlite::Connection::open(file).unwrap();
    let mut rows: Vec<Product> = conn
        .prepare("SELECT id, name, price_cents FROM products WHERE retired_at IS NULL")
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

fn sell(file: &Path, me: Uuid, total: i64) -> Uuid {
    let conn = rusqlite::Connection::open(file).unwrap();
    conn.execute_batch("PRAGMA recursive_triggers = ON")
        .unwrap();
    write_receipt(&conn, me, total)
}

/// Where each replica's chain began: a provisioning begins a new one.
fn snapshots(pg: &mut Client) -> BTreeMap<Uuid, Option<Uuid>> {
    pg.query("SELECT id, snapshot_id FROM sync.replicas", &[])
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect()
}

/// Everything of the extension's two schemas a catalog says, one line a
/// thing, sorted: tables and their columns (in order), constraints,
/// indexes, views, sequences, functions whole, triggers, and what belongs
/// to the extension. No data.
const CATALOG: &str = "
    WITH ns AS (SELECT oid, nspname FROM pg_namespace WHERE nspname IN ('sync', 'sync_internal'))
    SELECT line FROM (
        SELECT format('relation %s.%s %s %s', ns.nspname, c.relname, c.relkind, coalesce(c.relacl::text, ''))
        FROM pg_class c JOIN ns ON ns.oid = c.relnamespace
        UNION ALL
        SELECT format('column %s.%s %s %s %s %s %s', ns.nspname, c.relname, a.attnum, a.attname,
                      format_type(a.atttypid, a.atttypmod), a.attnotnull,
                      coalesce(pg_get_expr(d.adbin, d.adrelid), ''))
        FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN ns ON ns.oid = c.relnamespace
        LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
        WHERE a.attnum > 0 AND NOT a.attisdropped AND c.relkind IN ('r', 'v', 'p')
        UNION ALL
        SELECT format('constraint %s.%s %s %s', ns.nspname, c.relname, k.conname, pg_get_constraintdef(k.oid))
        FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid JOIN ns ON ns.oid = c.relnamespace
        UNION ALL
        SELECT format('index %s', pg_get_indexdef(i.indexrelid))
        FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN ns ON ns.oid = c.relnamespace
        UNION ALL
        SELECT format('view %s.%s %s', ns.nspname, c.relname, pg_get_viewdef(c.oid))
        FROM pg_class c JOIN ns ON ns.oid = c.relnamespace WHERE c.relkind = 'v'
        UNION ALL
        SELECT format('function %s %s', pg_get_functiondef(p.oid), coalesce(p.proacl::text, ''))
        FROM pg_proc p JOIN ns ON ns.oid = p.pronamespace
        UNION ALL
        SELECT format('trigger %s', pg_get_triggerdef(t.oid))
        FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN ns ON ns.oid = c.relnamespace
        WHERE NOT t.tgisinternal
        UNION ALL
        SELECT format('member %s', pg_describe_object(d.classid, d.objid, d.objsubid))
        FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
        WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e' AND e.extname = 'magic_sync'
    ) AS all_lines (line) ORDER BY line";

fn catalog(pg: &mut Client) -> Vec<String> {
    pg.query(CATALOG, &[])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

#[test]
fn a_shop_on_the_previous_release_upgrades_in_place_and_goes_on_as_one_installed_fresh() {
    // The previous release as its package installed it: its library and
    // its install script, beside this build's steps.
    let postgres = PrivatePostgres::copy();
    postgres
        .install_library(&repository().join(format!("target-releases/{PREVIOUS}/magic_sync.so")));
    postgres.install_script(&format!("magic_sync--{PREVIOUS}.sql"));
    let cluster = Cluster::start_from(
        postgres.bin(),
        &[
            "shared_preload_libraries=magic_sync",
            "magic_sync.database=shop",
            "magic_sync.idle=1",
        ],
    );
    connect(&cluster, "postgres")
        .batch_execute("CREATE DATABASE shop")
        .unwrap();
    let mut pg = connect(&cluster, "shop");
    pg.batch_execute(&format!("CREATE EXTENSION magic_sync VERSION '{PREVIOUS}'"))
        .unwrap();
    pg.batch_execute(SERVER_SCHEMA).unwrap();

    // The shop as it stood on the previous release: the catalog, three
    // registers (one running, one stopped later, one never running), a
    // receipt the database refuses kept in the inbox, a product too large
    // for any message set aside, and a wish.
    pg.batch_execute(
        "INSERT INTO shop.products (id, name, price_cents) \
         SELECT gen_random_uuid(), 'Item ' || i, i FROM generate_series(1, 20) AS i",
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ids: Vec<Uuid> = (0..3).map(|_| Uuid::new_v4()).collect();
    let files: Vec<PathBuf> = ids
        .iter()
        .map(|id| dir.path().join(format!("{id}.db")))
        .collect();
    for (i, id) in ids.iter().enumerate() {
        pg.execute(
            "INSERT INTO shop.registers (id, name) VALUES ($1, $2)",
            &[id, &format!("Register {i}")],
        )
        .unwrap();
        pg.execute(
            "INSERT INTO shop.register_state (id, register_id) VALUES ($1, $1)",
            &[id],
        )
        .unwrap();
    }
    let running = start_register(&cluster, &files[0], ids[0]);
    let stopped = start_register(&cluster, &files[1], ids[1]);
    wait_until("two registers to hold the catalog", || {
        let servers = products_on(&mut pg);
        products_in(&files[0]) == servers && products_in(&files[1]) == servers
    });
    stopped.stop();
    let refused = sell(&files[0], ids[0], -5);
    let mut sold = vec![sell(&files[0], ids[0], 250)];
    running.control.poke();
    wait_until("the refused receipt kept in the inbox", || {
        count(&mut pg, "SELECT count(*) FROM sync.inbox") == 1
    });
    // Its footer, written on the register, and a wish of another text.
    let footer = Uuid::new_v4();
    rusqlite::Connection::open(&files[0])
        .unwrap()
        .execute(
            "INSERT INTO footers (register_id, id, text, changed_at) \
             VALUES (?1, ?2, 'Hello', '2026-12-04T08:00:00.000000Z')",
            rusqlite::params![ids[0].as_bytes().to_vec(), footer.as_bytes().to_vec()],
        )
        .unwrap();
    running.control.poke();
    wait_until("the register's footer filed", || {
        count(&mut pg, "SELECT count(*) FROM shop.footers") == 1
    });
    pg.execute(
        "SELECT sync.desire('footers', $1)",
        &[&serde_json::json!({"register_id": ids[0].to_string(), "id": footer.to_string(), "text": "Thank you"})],
    )
    .unwrap();
    assert_eq!(count(&mut pg, "SELECT count(*) FROM sync.sync_wishes"), 1);
    // A product too large for the transport's messages (its limit lowered
    // for the server, the worker included), set aside by the worker; the
    // limit raised again, it waits for its retry (an hour), or for the
    // relay to start again.
    pg.batch_execute("ALTER SYSTEM SET magic_sync.message_bytes = 4096")
        .unwrap();
    pg.batch_execute("SELECT pg_reload_conf()").unwrap();
    // The reload reaches the worker when it next wakes: the product is
    // changed until a pass under the lower limit sets it aside.
    let large = Uuid::new_v4();
    pg.execute(
        "INSERT INTO shop.products (id, name, price_cents) VALUES ($1, $2, 1)",
        &[&large, &"x".repeat(6000)],
    )
    .unwrap();
    wait_until("the large product set aside", || {
        pg.execute(
            "UPDATE shop.products SET price_cents = price_cents + 1 WHERE id = $1",
            &[&large],
        )
        .unwrap();
        std::thread::sleep(Duration::from_millis(500));
        count(&mut pg, "SELECT count(*) FROM sync.quarantine") == 1
    });
    pg.batch_execute("ALTER SYSTEM RESET magic_sync.message_bytes")
        .unwrap();
    pg.batch_execute("SELECT pg_reload_conf()").unwrap();
    pg.batch_execute("UPDATE shop.products SET price_cents = price_cents + 1 WHERE price_cents < 10 AND length(name) < 100")
        .unwrap();
    wait_until("messages written for the stopped registers", || {
        count(
            &mut pg,
            "SELECT count(DISTINCT replica) FROM sync.outbox WHERE kind <> 'filed'",
        ) >= 2
    });
    running.stop();
    let before = snapshots(&mut pg);
    let alarms_before = count(&mut pg, "SELECT count(*) FROM sync.alarms");
    // Sold while the head office is being upgraded: kept on the register.
    sold.push(sell(&files[1], ids[1], 990));

    // The package upgrade: this build's library, PostgreSQL restarted. The
    // database still holds the previous release's SQL: the worker waits,
    // saying what to run, and the library refuses to run the engine.
    postgres.install_this_builds_library();
    cluster.restart_immediately();
    let mut pg = connect(&cluster, "shop");
    wait_until("the worker to say what to run", || {
        cluster.log().contains(&format!(
            "holds magic_sync {PREVIOUS} and this library is {CURRENT}: \
             run ALTER EXTENSION magic_sync UPDATE TO '{CURRENT}'"
        ))
    });
    let refused_call = pg
        .query("SELECT * FROM sync.next($1)", &[&ids[0]])
        .unwrap_err();
    let db = refused_call.as_db_error().expect("the library's refusal");
    assert!(
        db.message().contains(&format!("version {PREVIOUS}")) && db.message().contains(CURRENT),
        "{db:?}"
    );
    assert!(
        db.hint()
            .unwrap_or_default()
            .contains("ALTER EXTENSION magic_sync UPDATE"),
        "{db:?}"
    );

    pg.batch_execute("ALTER EXTENSION magic_sync UPDATE")
        .unwrap();
    let version: String = pg
        .query_one(
            "SELECT extversion FROM pg_extension WHERE extname = 'magic_sync'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(version, CURRENT);

    // Every register converges, the product set aside among what it holds
    // (the relay, started again, tried it at once, and the limit is the
    // transport's again), and every receipt is filed once; nothing is
    // provisioned again, nothing alarmed.
    let devices: Vec<Device> = ids
        .iter()
        .zip(&files)
        .map(|(id, file)| start_register(&cluster, file, *id))
        .collect();
    wait_until("every register to hold the catalog", || {
        let servers: Vec<Product> = products_on(&mut pg);
        files.iter().all(|f| products_in(f) == servers)
    });
    wait_until("every receipt filed", || {
        let filed: Vec<Uuid> = pg
            .query("SELECT id FROM shop.receipts", &[])
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        sold.iter().all(|s| filed.contains(s)) && filed.len() == sold.len()
    });
    drop(devices);
    assert_eq!(snapshots(&mut pg), before, "nothing provisioned again");
    assert_eq!(
        count(&mut pg, "SELECT count(*) FROM sync.alarms"),
        alarms_before,
        "no alarm"
    );
    assert_eq!(
        count(&mut pg, "SELECT count(*) FROM sync.inbox"),
        1,
        "the refused receipt still kept, waiting for its fix"
    );
    assert!(!sold.contains(&refused));
    assert_eq!(count(&mut pg, "SELECT count(*) FROM sync.quarantine"), 0);
    let overview: serde_json::Value = pg.query_one("SELECT sync.overview()", &[]).unwrap().get(0);
    assert_eq!(overview["replicas"]["total"], 3, "{overview:#}");

    // The upgraded schema is the one installed fresh.
    connect(&cluster, "postgres")
        .batch_execute("CREATE DATABASE fresh")
        .unwrap();
    let mut fresh = connect(&cluster, "fresh");
    fresh.batch_execute("CREATE EXTENSION magic_sync").unwrap();
    let (upgraded, installed) = (catalog(&mut pg), catalog(&mut fresh));
    let only_upgraded: Vec<&String> = upgraded.iter().filter(|l| !installed.contains(l)).collect();
    let only_fresh: Vec<&String> = installed.iter().filter(|l| !upgraded.contains(l)).collect();
    assert!(
        only_upgraded.is_empty() && only_fresh.is_empty(),
        "the upgraded schema differs from the fresh one: write the change into \
         sql/magic_sync--{PREVIOUS}--{CURRENT}.sql\nonly upgraded:\n{}\nonly fresh:\n{}",
        only_upgraded
            .iter()
            .map(|l| l.as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        only_fresh
            .iter()
            .map(|l| l.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
}

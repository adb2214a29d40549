//! The status reads of rows: sync.progress(), sync.row_progress() and
//! sync.explain().
//!
//! - Registers running the device loop over the queue, relayed by the real
//!   relay worker: what the reads say each register holds is what its
//!   SQLite file holds, before it confirms (nothing counts as held) and
//!   after.
//! - The JSON of every read in every state, held to the golden files of
//!   tests/golden/status/ (`MAGIC_SYNC_BLESS=1` writes them afresh).

mod common;
#[path = "common/device.rs"]
mod device;
#[path = "common/filing_shop.rs"]
mod shop;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use device::{Device, PATIENCE};
use magic_sync_replica::transport::queue::Queue;
use magic_sync_replica::transport::Options;
use magic_sync_tests::{add_products, Cluster};
use postgres::Client;
use rusqlite::Connection;
use serde_json::Value;
use shop::Shop;
use uuid::Uuid;

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let began = Instant::now();
    while !done() {
        assert!(began.elapsed() < PATIENCE, "waited {PATIENCE:?} for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One register's figures for one table, as sync.progress() says them;
/// None while the relay has not seen the register yet.
fn seen_figures(pg: &mut Client, register: Uuid, table: &str) -> Option<Value> {
    let progress: Value = pg
        .query_one(
            "SELECT sync.progress(jsonb_build_object('replicas', jsonb_build_array($1::uuid)))",
            &[&register],
        )
        .unwrap()
        .get(0);
    let replicas = progress["replicas"].as_array().unwrap();
    assert!(replicas.len() <= 1, "{progress}");
    let tables = replicas.first()?["tables"].as_array().unwrap();
    let found = tables.iter().find(|t| t["table"] == table).cloned();
    Some(found.unwrap_or_else(|| panic!("no {table} in {progress}")))
}

/// `seen_figures`, of a register the relay has seen.
fn figures(pg: &mut Client, register: Uuid, table: &str) -> Value {
    seen_figures(pg, register, table).expect("the relay has seen the register")
}

/// A figure of `seen_figures`; -1 while the relay has not seen the register.
fn figure(pg: &mut Client, register: Uuid, table: &str, name: &str) -> i64 {
    seen_figures(pg, register, table).map_or(-1, |f| f[name].as_i64().unwrap())
}

/// Each product's state on `register`, as sync.row_progress() says it.
fn states(pg: &mut Client, register: Uuid, products: &[Uuid]) -> BTreeMap<Uuid, String> {
    products
        .iter()
        .filter_map(|id| {
            let row: Value = pg
                .query_one(
                    "SELECT sync.row_progress(NULL, 'products', $1::uuid::text)",
                    &[id],
                )
                .unwrap()
                .get(0);
            row["places"]
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p["replica"] == register.to_string())
                .map(|p| (*id, p["state"].as_str().unwrap().to_owned()))
        })
        .collect()
}

/// The products a register's SQLite file holds and has not retired, with
/// their prices.
fn in_the_file(file: &Path) -> BTreeMap<Uuid, i64> {
    let conn = Connection::open(file).unwrap();
    let mut rows = conn
        .prepare("SELECT id, price_cents FROM products WHERE retired_at IS NULL")
        .unwrap();
    rows.query_map([], |r| {
        let id: Vec<u8> = r.get(0)?;
        Ok((Uuid::from_slice(&id).unwrap(), r.get(1)?))
    })
    .unwrap()
    .collect::<Result<_, _>>()
    .unwrap()
}

/// The server's products, with their prices.
fn on_the_server(pg: &mut Client) -> BTreeMap<Uuid, i64> {
    pg.query("SELECT id, price_cents FROM shop.products", &[])
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect()
}

/// The products whose state is `state`.
fn those(states: &BTreeMap<Uuid, String>, state: &str) -> Vec<Uuid> {
    states
        .iter()
        .filter(|(_, s)| s.as_str() == state)
        .map(|(id, _)| *id)
        .collect()
}

fn start_device(shop: &Shop, file: &Path, me: Uuid) -> Device {
    let replica = shop::open_register(file, me);
    let config: postgres::Config = shop.cluster.url("shop").parse().unwrap();
    Device::start(replica, Options::default(), move |replica| {
        Queue::new(config, replica.me())
    })
}

#[test]
fn progress_and_row_progress_count_a_row_held_only_once_the_register_confirmed_it_as_its_file_shows(
) {
    let mut shop = Shop::open_with(&[
        "shared_preload_libraries=magic_sync",
        "magic_sync.database=shop",
        "magic_sync.idle=1",
    ]);
    add_products(&mut shop.pg, 3);
    let (ids, registers) = shop.add_registers(2);
    // Each register's file exists, with its schema: it has applied nothing.
    drop(registers);
    let (first, second) = (ids[0], ids[1]);
    let files: Vec<PathBuf> = ids.iter().map(|id| shop.file_of(*id)).collect();
    let products: Vec<Uuid> = on_the_server(&mut shop.pg).keys().copied().collect();

    // The worker sends both their snapshots; neither has confirmed: every
    // row is in flight, none held, as neither file holds any.
    wait_until("both snapshots sent", || {
        ids.iter()
            .all(|id| figure(&mut shop.pg, *id, "products", "in_flight") == 3)
    });
    for (id, file) in ids.iter().zip(&files) {
        let f = figures(&mut shop.pg, *id, "products");
        assert_eq!(
            (f["should"].as_i64(), f["holds"].as_i64()),
            (Some(3), Some(0)),
            "{f}"
        );
        assert!(in_the_file(file).is_empty());
        let states = states(&mut shop.pg, *id, &products);
        assert_eq!(those(&states, "on_its_way"), products, "{states:?}");
    }

    // The first register runs and confirms: what it holds is in its file,
    // at the server's prices; the second still holds nothing.
    let device = start_device(&shop, &files[0], first);
    wait_until("the first register's confirmation filed", || {
        figure(&mut shop.pg, first, "products", "holds") == 3
    });
    let held = those(&states(&mut shop.pg, first, &products), "holds");
    let file: Vec<Uuid> = in_the_file(&files[0]).keys().copied().collect();
    assert_eq!(held, file);
    assert_eq!(in_the_file(&files[0]), on_the_server(&mut shop.pg));
    assert_eq!(figure(&mut shop.pg, first, "register_state", "holds"), 1);
    assert_eq!(figure(&mut shop.pg, second, "products", "holds"), 0);
    assert!(in_the_file(&files[1]).is_empty());
    let (_, _) = device.stop();

    // With the first register stopped, a product changes and one is
    // deleted: the worker sends both, unconfirmed. The file still holds
    // the old price and the deleted row; the reads count neither as held.
    let (changed, deleted) = (products[0], products[1]);
    shop.pg
        .execute(
            "UPDATE shop.products SET price_cents = 999 WHERE id = $1",
            &[&changed],
        )
        .unwrap();
    shop.pg
        .execute("DELETE FROM shop.products WHERE id = $1", &[&deleted])
        .unwrap();
    wait_until("the change and the take-back sent", || {
        let states = states(&mut shop.pg, first, &products);
        states.get(&changed).map(String::as_str) == Some("on_its_way")
            && states.get(&deleted).map(String::as_str) == Some("leaving")
    });
    let f = figures(&mut shop.pg, first, "products");
    assert_eq!(
        (
            f["should"].as_i64(),
            f["holds"].as_i64(),
            f["in_flight"].as_i64(),
            f["to_remove"].as_i64()
        ),
        (Some(2), Some(1), Some(1), Some(1)),
        "{f}"
    );
    let file = in_the_file(&files[0]);
    assert_eq!(file.len(), 3, "the file is as it was: {file:?}");
    assert_ne!(file[&changed], 999);
    // What counts as held is in the file as the server has it.
    let server = on_the_server(&mut shop.pg);
    for id in those(&states(&mut shop.pg, first, &products), "holds") {
        assert_eq!(file.get(&id), server.get(&id), "{id}");
    }

    // It runs again and confirms: it holds what it should, as its file does.
    let device = start_device(&shop, &files[0], first);
    wait_until("the first register's second confirmation filed", || {
        let f = figures(&mut shop.pg, first, "products");
        f["holds"] == 2 && f["to_remove"] == 0 && f["in_flight"] == 0
    });
    assert_eq!(in_the_file(&files[0]), on_the_server(&mut shop.pg));
    let states_now = states(&mut shop.pg, first, &products);
    assert_eq!(
        those(&states_now, "holds"),
        in_the_file(&files[0]).keys().copied().collect::<Vec<_>>()
    );
    assert!(!states_now.contains_key(&deleted), "{states_now:?}");
    let (_, _) = device.stop();
    // The second never confirmed: what it should hold is still on its way.
    let f = figures(&mut shop.pg, second, "products");
    assert_eq!(
        (f["holds"].as_i64(), f["should"].as_i64()),
        (Some(0), Some(2)),
        "{f}"
    );
}

// ---------------------------------------------------------------------------
// Golden files.

/// A shop of fixed ids, relayed by `CALL sync.relay()`: registers a, b and
/// c (which the test makes not live after the first pass); a broadcast table with an active view, a table only sent as
/// a parent, one that follows it, an assigned one.
const SCENE: &str = "
    CREATE SCHEMA shop;
    CREATE TABLE shop.registers (id uuid PRIMARY KEY, active boolean NOT NULL DEFAULT true);
    CREATE TABLE shop.brands (id uuid PRIMARY KEY, name text NOT NULL,
                              archived boolean NOT NULL DEFAULT false);
    CREATE VIEW shop.live_brands AS SELECT * FROM shop.brands WHERE NOT archived;
    CREATE TABLE shop.products (id uuid PRIMARY KEY, name text NOT NULL,
                                brand_id uuid REFERENCES shop.brands);
    CREATE TABLE shop.nutrition (product_id uuid PRIMARY KEY REFERENCES shop.products,
                                 calories integer NOT NULL);
    CREATE TABLE shop.orders (id uuid PRIMARY KEY, register_id uuid NOT NULL,
                              product_id uuid NOT NULL REFERENCES shop.products);
    SELECT sync.declare_replicas('shop.registers', live => 'active');
    SELECT sync.declare_table('shop.brands', sync => 'broadcast', active => 'shop.live_brands');
    SELECT sync.declare_table('shop.products');
    SELECT sync.declare_table('shop.nutrition', sync => 'follows(product_id)');
    SELECT sync.declare_table('shop.orders', sync => 'assigned(register_id)');
    INSERT INTO shop.registers VALUES ('00000000-0000-0000-0000-00000000000a', true),
                                      ('00000000-0000-0000-0000-00000000000b', true),
                                      ('00000000-0000-0000-0000-00000000000c', true);
    INSERT INTO shop.brands VALUES ('00000000-0000-0000-0000-0000000000b1', 'Acme', false),
                                   ('00000000-0000-0000-0000-0000000000b2', 'Gone', true);
    INSERT INTO shop.products VALUES
        ('00000000-0000-0000-0000-000000000001', 'Tea', '00000000-0000-0000-0000-0000000000b1'),
        ('00000000-0000-0000-0000-000000000002', 'Coffee', '00000000-0000-0000-0000-0000000000b1'),
        ('00000000-0000-0000-0000-000000000003', 'Cocoa', '00000000-0000-0000-0000-0000000000b1'),
        ('00000000-0000-0000-0000-000000000004', 'Mate', NULL);
    INSERT INTO shop.nutrition VALUES ('00000000-0000-0000-0000-000000000001', 2);
    INSERT INTO shop.orders VALUES
        ('00000000-0000-0000-0000-0000000000d1', '00000000-0000-0000-0000-00000000000a',
         '00000000-0000-0000-0000-000000000001'),
        ('00000000-0000-0000-0000-0000000000d2', '00000000-0000-0000-0000-00000000000a',
         '00000000-0000-0000-0000-000000000002'),
        ('00000000-0000-0000-0000-0000000000d3', '00000000-0000-0000-0000-00000000000b',
         '00000000-0000-0000-0000-000000000001'),
        ('00000000-0000-0000-0000-0000000000d4', '00000000-0000-0000-0000-00000000000a',
         '00000000-0000-0000-0000-000000000004');
";

const A: &str = "00000000-0000-0000-0000-00000000000a";
const B: &str = "00000000-0000-0000-0000-00000000000b";
const C: &str = "00000000-0000-0000-0000-00000000000c";

fn product(n: u8) -> String {
    format!("00000000-0000-0000-0000-00000000000{n}")
}

fn order(n: u8) -> String {
    format!("00000000-0000-0000-0000-0000000000d{n}")
}

/// Holds the answer of `sql` (one jsonb) to tests/golden/status/<name>.json,
/// with `now` and every time in it written as "<time>", so a file changes
/// only when the JSON does. Answers whether it differs (or writes it).
fn golden(pg: &mut Client, name: &str, sql: &str, differ: &mut Vec<String>) {
    let mut answer: Value = pg.query_one(sql, &[]).unwrap().get(0);
    assert_eq!(answer["contract"], 1, "{name}: {answer}");
    assert!(answer["now"].is_string(), "{name}: {answer}");
    blank_times(&mut answer);
    let text = serde_json::to_string_pretty(&answer).unwrap() + "\n";
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("golden/status")
        .join(format!("{name}.json"));
    if std::env::var_os("MAGIC_SYNC_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_default();
    if expected != text {
        differ.push(format!("{}:\n{text}", path.display()));
    }
}

/// Every value of a key that names a time (`now`, `since`, `at`, ...) as
/// "<time>" where it is one.
fn blank_times(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                let timed = matches!(
                    key.as_str(),
                    "now" | "since" | "at" | "retry_at" | "refused_at"
                );
                if timed && v.is_string() {
                    *v = Value::String("<time>".into());
                } else {
                    blank_times(v);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(blank_times),
        _ => {}
    }
}

/// Counts every row's state on every replica, as sync.row_progress() says
/// them one row at a time (walking back from the row), and holds
/// sync.progress() (which works everything out forwards) to the same
/// figures, table by table.
fn progress_agrees_with_row_progress(pg: &mut Client) {
    let progress: Value = pg.query_one("SELECT sync.progress()", &[]).unwrap().get(0);
    for (table, key) in [
        ("brands", "id"),
        ("products", "id"),
        ("nutrition", "product_id"),
        ("orders", "id"),
    ] {
        // Every row the table has, and every row a replica was sent of it.
        let keys: Vec<String> = pg
            .query(
                &format!(
                    "SELECT {key}::text FROM shop.{table} \
                     UNION SELECT key FROM sync.held WHERE table_name = $1"
                ),
                &[&table],
            )
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        let mut counted: BTreeMap<(String, String), i64> = BTreeMap::new();
        for key in &keys {
            let row: Value = pg
                .query_one("SELECT sync.row_progress(NULL, $1, $2)", &[&table, key])
                .unwrap()
                .get(0);
            for place in row["places"].as_array().unwrap() {
                let replica = place["replica"].as_str().unwrap().to_owned();
                let state = place["state"].as_str().unwrap().to_owned();
                // A row it refused is one it should hold, set aside.
                let should = matches!(
                    state.as_str(),
                    "holds" | "outdated" | "on_its_way" | "missing"
                ) || (state == "set_aside" && place["refused"].is_string());
                *counted.entry((replica.clone(), state)).or_default() += 1;
                if should {
                    *counted.entry((replica, "should".into())).or_default() += 1;
                }
            }
        }
        for replica in progress["replicas"].as_array().unwrap() {
            let id = replica["replica"].as_str().unwrap().to_owned();
            let f = replica["tables"]
                .as_array()
                .unwrap()
                .iter()
                .find(|t| t["table"] == table)
                .unwrap();
            let n = |state: &str| {
                counted
                    .get(&(id.clone(), state.to_owned()))
                    .copied()
                    .unwrap_or(0)
            };
            let from_rows = [
                n("should"),
                n("holds") + n("outdated"),
                n("outdated"),
                n("on_its_way"),
                n("missing"),
                n("leaving"),
                n("set_aside"),
            ];
            let figures = [
                "should",
                "holds",
                "outdated",
                "in_flight",
                "missing",
                "to_remove",
                "set_aside",
            ]
            .map(|name| f[name].as_i64().unwrap());
            assert_eq!(figures, from_rows, "{table} on {id}: {f}");
        }
    }
}

fn confirm(pg: &mut Client, replica: &str) {
    pg.execute(
        "UPDATE sync.replicas SET applied_epoch = epoch, applied_sequence = last_sequence \
         WHERE id = $1::text::uuid",
        &[&replica],
    )
    .unwrap();
}

fn row_progress(table: &str, key: &str) -> String {
    format!("SELECT sync.row_progress(NULL, '{table}', '{key}')")
}

fn explain(replica: &str, table: &str, key: &str) -> String {
    format!("SELECT sync.explain('{replica}', '{table}', '{key}')")
}

#[test]
fn every_read_in_every_state_answers_the_json_of_its_golden_file() {
    let cluster = Cluster::start();
    let mut pg = cluster.database_with_extension("shop");
    pg.batch_execute(SCENE).unwrap();
    let mut differ = Vec::new();
    let mut hold = |pg: &mut Client, name: &str, sql: &str| golden(pg, name, sql, &mut differ);

    hold(
        &mut pg,
        "progress-no-replica-seen",
        "SELECT sync.progress()",
    );
    pg.batch_execute("CALL sync.relay()").unwrap();
    // The relay saw c live; now it is not, and no read counts it.
    pg.batch_execute(&format!(
        "UPDATE shop.registers SET active = false WHERE id = '{C}'"
    ))
    .unwrap();
    pg.batch_execute("CALL sync.relay()").unwrap();
    // Snapshots sent, nothing confirmed.
    hold(&mut pg, "progress-on-its-way", "SELECT sync.progress()");
    hold(
        &mut pg,
        "row-progress-on-its-way",
        &row_progress("products", &product(1)),
    );
    hold(
        &mut pg,
        "explain-snapshot-on-its-way",
        &explain(B, "orders", &order(3)),
    );
    progress_agrees_with_row_progress(&mut pg);

    confirm(&mut pg, A);
    hold(
        &mut pg,
        "progress-holds",
        &format!("SELECT sync.progress('{{\"replicas\": [\"{A}\"]}}')"),
    );
    hold(
        &mut pg,
        "row-progress-holds",
        &row_progress("orders", &order(1)),
    );
    hold(&mut pg, "explain-rule", &explain(A, "orders", &order(1)));
    hold(
        &mut pg,
        "explain-parent-of",
        &explain(A, "products", &product(1)),
    );
    hold(
        &mut pg,
        "explain-follows",
        &explain(A, "nutrition", &product(1)),
    );
    hold(&mut pg, "explain-no-rule", &explain(B, "orders", &order(1)));
    hold(
        &mut pg,
        "explain-outside-active-view",
        &explain(A, "brands", "00000000-0000-0000-0000-0000000000b2"),
    );
    hold(
        &mut pg,
        "explain-no-such-row",
        &explain(A, "orders", &order(9)),
    );
    hold(
        &mut pg,
        "explain-not-live",
        &explain(C, "orders", &order(1)),
    );
    hold(
        &mut pg,
        "explain-unknown-replica",
        &explain("00000000-0000-0000-0000-0000000000ee", "orders", &order(1)),
    );

    // Changes not planned yet.
    pg.batch_execute(&format!(
        "UPDATE shop.products SET name = 'Green tea' WHERE id = '{p1}';
         INSERT INTO shop.orders VALUES ('{o5}', '{A}', '{p3}');
         UPDATE shop.orders SET register_id = '{B}' WHERE id = '{o2}';",
        p1 = product(1),
        p3 = product(3),
        o5 = order(5),
        o2 = order(2),
    ))
    .unwrap();
    hold(
        &mut pg,
        "row-progress-outdated",
        &row_progress("products", &product(1)),
    );
    hold(
        &mut pg,
        "row-progress-missing",
        &row_progress("orders", &order(5)),
    );
    hold(
        &mut pg,
        "row-progress-leaving",
        &row_progress("orders", &order(2)),
    );
    hold(&mut pg, "explain-missing", &explain(A, "orders", &order(5)));
    hold(&mut pg, "explain-leaving", &explain(A, "orders", &order(2)));
    progress_agrees_with_row_progress(&mut pg);

    // A row set aside, and a row a replica refused.
    pg.batch_execute(&format!(
        "INSERT INTO sync.quarantine (table_name, key, note, reason, retry_at) \
         VALUES ('products', '{p4}', 0, 'no message can carry it', now() + interval '1 day');
         UPDATE sync.held_recorded SET refused = 'CHECK (calories >= 0) failed', refused_by = sent, \
                refused_at = now(), retry_at = now() + interval '1 day' \
         WHERE replica = '{A}' AND table_name = 'nutrition';",
        p4 = product(4),
    ))
    .unwrap();
    hold(
        &mut pg,
        "row-progress-set-aside",
        &row_progress("orders", &order(4)),
    );
    hold(
        &mut pg,
        "row-progress-refused",
        &row_progress("nutrition", &product(1)),
    );
    hold(
        &mut pg,
        "explain-set-aside",
        &explain(A, "orders", &order(4)),
    );
    hold(
        &mut pg,
        "explain-refused",
        &explain(A, "nutrition", &product(1)),
    );
    hold(&mut pg, "progress-every-state", "SELECT sync.progress()");
    progress_agrees_with_row_progress(&mut pg);

    // A partition's scope, and a row of another partition.
    // What no rule brings to B: Cocoa, which only A's order points at, and
    // its nutrition, which follows it.
    pg.batch_execute(&format!(
        "INSERT INTO shop.nutrition VALUES ('{}', 9)",
        product(3)
    ))
    .unwrap();
    hold(
        &mut pg,
        "explain-no-rule-follows",
        &explain(B, "nutrition", &product(3)),
    );
    hold(
        &mut pg,
        "explain-no-rule-none",
        &explain(B, "products", &product(3)),
    );

    pg.batch_execute(
        "DELETE FROM sync.quarantine;
         SELECT count(sync.undeclare_table(relation)) \
         FROM (SELECT relation FROM sync.tables ORDER BY position DESC) AS t;
         DROP SCHEMA shop CASCADE;
         CREATE SCHEMA shop;
         CREATE TABLE shop.registers (id uuid PRIMARY KEY, company text NOT NULL);
         CREATE TABLE shop.products (id uuid PRIMARY KEY, company text NOT NULL, name text NOT NULL);
         SELECT sync.declare_replicas('shop.registers', partitioned_by => 'company');
         SELECT sync.declare_table('shop.products', sync => 'broadcast');",
    )
    .unwrap();
    pg.batch_execute(&format!(
        "INSERT INTO shop.registers VALUES ('{A}', 'acme'), ('{B}', 'globex');
         INSERT INTO shop.products VALUES ('{p1}', 'acme', 'Tea'), ('{p2}', 'globex', 'Coffee');",
        p1 = product(1),
        p2 = product(2),
    ))
    .unwrap();
    // A relay pass is called on its own: it commits as it goes.
    pg.batch_execute("CALL sync.relay()").unwrap();
    hold(
        &mut pg,
        "progress-partition",
        "SELECT sync.progress('{\"partition\": \"acme\"}')",
    );
    hold(
        &mut pg,
        "explain-other-partition",
        &explain(A, "products", &product(2)),
    );

    assert!(
        differ.is_empty(),
        "the reads' JSON differs from its golden files (MAGIC_SYNC_BLESS=1 writes them):\n{}",
        differ.join("\n")
    );
}

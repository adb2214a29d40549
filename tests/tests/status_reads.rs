//! The status reads (`sync.overview`, `sync.listing`, `sync.health`)
//! against registers on real SQLite files: what they say of each register
//! is compared to what its file really holds, and their JSON in every
//! state is held to the golden files of tests/golden/status/ (written
//! again with MAGIC_SYNC_BLESS=1), which a dashboard holds its types to.

mod common;
#[path = "common/device.rs"]
mod device;
#[path = "common/filing_shop.rs"]
mod shop;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use device::{Device, PATIENCE};
use magic_sync_replica::transport::nats::{Nats, NatsSettings};
use magic_sync_replica::transport::queue::Queue;
use magic_sync_replica::transport::{Options, Status};
use magic_sync_tests::add_products;
use magic_sync_tests::nats::{self as nats_server, NatsServer};
use rusqlite::{Connection, OpenFlags};
use serde_json::Value;
use shop::*;
use uuid::Uuid;

/// The rows `sql` answers of a register's file, each read by `row` (its
/// first column a uuid's bytes), sorted. Read through a connection of its
/// own, as another program on the device would.
fn rows_in<T: Ord>(
    file: &Path,
    sql: &str,
    row: impl Fn(Uuid, &rusqlite::Row) -> rusqlite::Result<T>,
) -> Vec<T> {
    let conn = Connection::open_with_flags(file, OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let mut rows: Vec<T> = conn
        .prepare(sql)
        .unwrap()
        .query_map([], |r| {
            let id: Vec<u8> = r.get(0)?;
            row(Uuid::from_slice(&id).unwrap(), r)
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    rows.sort();
    rows
}

/// A register's products as its file holds them (those not retired):
/// (id, name, price), sorted.
fn products_in(file: &Path) -> Vec<(Uuid, String, i64)> {
    rows_in(
        file,
        "SELECT id, name, price_cents FROM products WHERE retired_at IS NULL",
        |id, r| Ok((id, r.get(1)?, r.get(2)?)),
    )
}

/// The register's state rows as its file holds them: (id, note).
fn states_in(file: &Path) -> Vec<(Uuid, String)> {
    rows_in(
        file,
        "SELECT id, note FROM register_state WHERE retired_at IS NULL",
        |id, r| Ok((id, r.get(1)?)),
    )
}

/// What the server says every register should hold, and the overview, read
/// in one REPEATABLE READ transaction: the same moment.
struct Moment {
    overview: Value,
    products: Vec<(Uuid, String, i64)>,
    states: BTreeMap<Uuid, Vec<(Uuid, String)>>,
}

fn moment(shop: &mut Shop) -> Moment {
    let mut tx = shop
        .pg
        .build_transaction()
        .isolation_level(postgres::IsolationLevel::RepeatableRead)
        .start()
        .unwrap();
    let overview: Value = tx
        .query_one("SELECT sync.overview(NULL, 1000)", &[])
        .unwrap()
        .get(0);
    let mut products: Vec<(Uuid, String, i64)> = tx
        .query("SELECT id, name, price_cents FROM shop.products", &[])
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    products.sort();
    let mut states: BTreeMap<Uuid, Vec<(Uuid, String)>> = BTreeMap::new();
    for r in tx
        .query("SELECT register_id, id, note FROM shop.register_state", &[])
        .unwrap()
    {
        states
            .entry(r.get(0))
            .or_default()
            .push((r.get(1), r.get(2)));
    }
    for rows in states.values_mut() {
        rows.sort();
    }
    tx.commit().unwrap();
    Moment {
        overview,
        products,
        states,
    }
}

/// The state the overview gives a replica; "unseen" before a relay pass
/// recorded it.
fn state_of(overview: &Value, replica: Uuid) -> String {
    overview["replicas"]["first"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == replica.to_string())
        .map_or("unseen", |r| r["state"].as_str().unwrap())
        .to_owned()
}

/// Every figure of one answer is of one moment: the states add up to the
/// replicas; the notes pending are the same count wherever the answer
/// reads them (per replica, per table, in the health: this shop is not
/// partitioned and has no groups); rows in flight are on their way to a
/// replica that has something unconfirmed; and no table waits on anything
/// while every replica is synced.
fn assert_of_one_moment(overview: &Value) {
    let states = overview["states"].as_object().unwrap();
    let counted: i64 = states.values().map(|n| n.as_i64().unwrap()).sum();
    assert_eq!(
        counted,
        overview["replicas"]["total"].as_i64().unwrap(),
        "{overview:#}"
    );
    let notes = overview["health"]["notes"]["pending"].as_i64().unwrap();
    let tables = overview["tables"].as_array().unwrap();
    let per_table: i64 = tables.iter().map(|t| t["pending"].as_i64().unwrap()).sum();
    assert_eq!(per_table, notes, "{overview:#}");
    let replicas = overview["replicas"]["first"].as_array().unwrap();
    for r in replicas {
        assert_eq!(r["why"]["pending"], notes, "{overview:#}");
    }
    let in_flight: i64 = tables
        .iter()
        .map(|t| t["in_flight"].as_i64().unwrap())
        .sum();
    if in_flight > 0 {
        assert!(
            replicas.iter().any(|r| r["why"]["unconfirmed"] == true),
            "{overview:#}"
        );
    }
    if states["synced"] == overview["replicas"]["total"] {
        for table in tables {
            assert_eq!(table["synced"], true, "every replica synced: {overview:#}");
        }
    }
}

/// An overview read on its own, in the connection's READ COMMITTED: still
/// of one moment, however the worker and the devices write meanwhile.
fn assert_read_committed_overview_is_of_one_moment(shop: &mut Shop) {
    let overview: Value = shop
        .pg
        .query_one("SELECT sync.overview(NULL, 1000)", &[])
        .unwrap()
        .get(0);
    assert_of_one_moment(&overview);
}

/// Every register the moment's overview calls synced holds exactly what the
/// server says it should, as its file shows; answers how many it called so.
fn assert_synced_ones_hold_what_they_should(m: &Moment, files: &[(Uuid, PathBuf)]) -> usize {
    assert_of_one_moment(&m.overview);
    let mut synced = 0;
    for (id, file) in files {
        if state_of(&m.overview, *id) != "synced" {
            continue;
        }
        synced += 1;
        assert_eq!(
            products_in(file),
            m.products,
            "{id}, called synced, holds the server's products: {:#}",
            m.overview
        );
        assert_eq!(
            states_in(file),
            m.states.get(id).cloned().unwrap_or_default(),
            "{id}, called synced, holds its state row"
        );
    }
    synced
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let began = Instant::now();
    while !done() {
        assert!(began.elapsed() < PATIENCE, "waited {PATIENCE:?} for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn run_device(shop: &Shop, me: Uuid, user: &str) -> Device {
    let replica = open_register(&shop.file_of(me), me);
    let config: postgres::Config = format!("{} user={user}", shop.cluster.url("shop"))
        .parse()
        .unwrap();
    let options = Options {
        poll_every: Duration::from_millis(200),
        first_pause: Duration::from_millis(100),
        longest_pause: Duration::from_secs(1),
        ..Options::default()
    };
    Device::start(replica, options, move |replica| {
        Queue::new(config, replica.me())
    })
}

#[test]
fn a_replica_called_synced_holds_exactly_what_it_should_while_the_transport_fails_sends() {
    let mut shop = Shop::open_with(&[
        "shared_preload_libraries=magic_sync",
        "magic_sync.database=shop",
        "magic_sync.idle=1",
    ]);
    // The third register's device connects as a role of its own, which the
    // test locks out: every take and send of its loop fails.
    shop.run("CREATE ROLE device LOGIN SUPERUSER");
    add_products(&mut shop.pg, 20);
    let ids: Vec<Uuid> = (0..3)
        .map(|i| shop.add_register(&format!("R{i}")))
        .collect();
    let files: Vec<(Uuid, PathBuf)> = ids.iter().map(|id| (*id, shop.file_of(*id))).collect();
    let mut devices = vec![
        run_device(&shop, ids[0], "postgres"),
        run_device(&shop, ids[1], "postgres"),
        run_device(&shop, ids[2], "device"),
    ];
    wait_for("every register synced", || {
        let m = moment(&mut shop);
        assert_synced_ones_hold_what_they_should(&m, &files);
        m.overview["states"]["synced"] == 3
    });

    // The third is shut out: what it is sent waits for it, unconfirmed.
    shop.run(
        "ALTER ROLE device NOLOGIN; \
         SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'device'",
    );
    devices[2].expect("its loop to lose the server", |s| {
        matches!(s, Status::Disconnected { .. })
    });

    // Changes come while the worker relays and the other two apply them;
    // whatever the overview calls synced, at any moment, holds exactly what
    // it should.
    let mut called_synced = 0;
    for round in 0..6 {
        shop.run(&format!(
            "UPDATE shop.products SET price_cents = price_cents + 1000 WHERE price_cents % 3 = {r}; \
             DELETE FROM shop.products WHERE name = 'Product {d}'; \
             INSERT INTO shop.products (id, name, price_cents) VALUES (gen_random_uuid(), 'New {round}', 7); \
             UPDATE shop.register_state SET note = 'round {round}' WHERE register_id = '{one}'",
            r = round % 3,
            d = round + 1,
            one = ids[round % 3],
        ));
        for _ in 0..20 {
            assert_read_committed_overview_is_of_one_moment(&mut shop);
            let m = moment(&mut shop);
            called_synced += assert_synced_ones_hold_what_they_should(&m, &files);
            assert_ne!(
                state_of(&m.overview, ids[2]),
                "synced",
                "the register shut out lacks the changes"
            );
            std::thread::sleep(Duration::from_millis(25));
        }
    }
    wait_for("the two that can be reached synced", || {
        let m = moment(&mut shop);
        called_synced += assert_synced_ones_hold_what_they_should(&m, &files);
        state_of(&m.overview, ids[0]) == "synced" && state_of(&m.overview, ids[1]) == "synced"
    });
    assert!(called_synced >= 2, "registers were called synced");

    // The one shut out is catching up: messages owed, not confirmed, and
    // its file really lacks them.
    let m = moment(&mut shop);
    let out = m.overview["replicas"]["first"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == ids[2].to_string())
        .unwrap()
        .clone();
    assert_eq!(out["state"], "catching_up", "{out:#}");
    assert!(out["owed"].as_i64().unwrap() > 0, "{out:#}");
    assert_eq!(out["why"]["unconfirmed"], true, "{out:#}");
    assert_ne!(products_in(&files[2].1), m.products);
    assert_eq!(m.overview["healthy"], true, "out of reach is not unhealthy");
    // Worst first: the one catching up before the synced ones.
    assert_eq!(m.overview["replicas"]["first"][0]["id"], ids[2].to_string());
    let listing: Value = shop
        .pg
        .query_one("SELECT sync.listing(NULL, 'catching_up')", &[])
        .unwrap()
        .get(0);
    assert_eq!(listing["total"], 1, "{listing:#}");
    assert_eq!(listing["replicas"][0]["id"], ids[2].to_string());

    // Let in again, it catches up, and is then synced, holding what it
    // should.
    shop.run("ALTER ROLE device LOGIN");
    wait_for("the third register synced again", || {
        let m = moment(&mut shop);
        assert_synced_ones_hold_what_they_should(&m, &files);
        m.overview["states"]["synced"] == 3
    });
    for device in devices.drain(..) {
        device.stop();
    }
}

/// A register's device program over NATS: its loop over its own consumer.
fn run_device_over_nats(shop: &Shop, nats: &NatsServer, me: Uuid) -> Device {
    let replica = open_register(&shop.file_of(me), me);
    let settings = NatsSettings::new(nats.url());
    let options = Options {
        poll_every: Duration::from_millis(500),
        first_pause: Duration::from_millis(100),
        longest_pause: Duration::from_secs(1),
        ..Options::default()
    };
    Device::start(replica, options, move |replica| {
        Nats::new(settings, replica).expect("a client of NATS")
    })
}

#[test]
fn over_nats_a_replica_is_never_called_synced_while_sends_to_it_fail_and_is_synced_once_they_pass()
{
    let mut nats = nats_server::start();
    let url = format!("magic_sync.nats_url={}", nats.url());
    let mut shop = Shop::open_with(&[
        "shared_preload_libraries=magic_sync",
        "magic_sync.database=shop",
        "magic_sync.transport=nats",
        "magic_sync.idle=1",
        "magic_sync.send_timeout=2000",
        url.as_str(),
    ]);
    add_products(&mut shop.pg, 10);
    let ids: Vec<Uuid> = (0..2)
        .map(|i| shop.add_register(&format!("R{i}")))
        .collect();
    let files: Vec<(Uuid, PathBuf)> = ids.iter().map(|id| (*id, shop.file_of(*id))).collect();
    let _devices: Vec<Device> = ids
        .iter()
        .map(|id| run_device_over_nats(&shop, &nats, *id))
        .collect();
    wait_for("every register synced", || {
        let m = moment(&mut shop);
        assert_synced_ones_hold_what_they_should(&m, &files);
        m.overview["states"]["synced"] == 2
    });

    // NATS goes away: what the worker sends fails, for real. Whatever the
    // overview says meanwhile, a register it calls synced holds exactly
    // what it should; none does, since none can be sent the changes.
    nats.stop();
    shop.run("UPDATE shop.products SET price_cents = price_cents + 100");
    let mut failing = false;
    wait_for("sends to every register recorded failing", || {
        let m = moment(&mut shop);
        assert_eq!(
            assert_synced_ones_hold_what_they_should(&m, &files),
            0,
            "no register holds the change: {:#}",
            m.overview
        );
        failing = m.overview["states"]["unreachable"] == 2;
        failing
    });
    let m = moment(&mut shop);
    assert_eq!(m.overview["healthy"], true, "the network's to settle");
    let health = &m.overview["health"]["failing"];
    assert_eq!(health["total"], 2, "{health:#}");
    for item in health["first"].as_array().unwrap() {
        assert_eq!(item["remedy"], "wait", "{item:#}");
        assert!(item["failures"].as_i64().unwrap() >= 1, "{item:#}");
    }
    for r in m.overview["replicas"]["first"].as_array().unwrap() {
        assert_eq!(r["state"], "unreachable", "{r:#}");
        assert!(r["why"]["last_error"].is_string(), "{r:#}");
        assert!(r["owed"].as_i64().unwrap() >= 1, "{r:#}");
    }

    // Back: sends pass, the registers catch up, and are called synced only
    // once they hold what they should.
    nats.start_again();
    wait_for("every register synced again", || {
        let m = moment(&mut shop);
        assert_synced_ones_hold_what_they_should(&m, &files);
        m.overview["states"]["synced"] == 2
    });
    let m = moment(&mut shop);
    for (_, file) in &files {
        assert_eq!(products_in(file), m.products);
    }
}

// ---------------------------------------------------------------------------
// Golden files.

/// An answer as its golden file holds it: every time (and the age of the
/// oldest note, and message numbers) masked, each replica id as the
/// register's name, any other id as its place among them.
fn masked(value: &Value, names: &BTreeMap<String, String>, others: &mut Vec<String>) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let timed = k == "now"
                        || k == "since"
                        || k.ends_with("_since")
                        || k == "message"
                        || k == "oldest_age_seconds"
                        || k.ends_with("_at");
                    let v = if timed && !v.is_null() {
                        Value::String("<masked>".into())
                    } else {
                        masked(v, names, others)
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        Value::Array(items) => {
            Value::Array(items.iter().map(|v| masked(v, names, others)).collect())
        }
        Value::String(s) if Uuid::parse_str(s).is_ok() => match names.get(s) {
            Some(name) => Value::String(name.clone()),
            None => {
                let n = others.iter().position(|o| o == s).unwrap_or_else(|| {
                    others.push(s.clone());
                    others.len() - 1
                });
                Value::String(format!("<id {n}>"))
            }
        },
        other => other.clone(),
    }
}

struct Golden {
    dir: PathBuf,
    bless: bool,
    names: BTreeMap<String, String>,
    differ: Vec<String>,
    written: usize,
}

impl Golden {
    fn new(ids: &[Uuid]) -> Golden {
        Golden {
            dir: Path::new(env!("CARGO_MANIFEST_DIR")).join("golden/status"),
            bless: std::env::var_os("MAGIC_SYNC_BLESS").is_some(),
            names: ids
                .iter()
                .enumerate()
                .map(|(i, id)| (id.to_string(), format!("R{i}")))
                .collect(),
            differ: Vec::new(),
            written: 0,
        }
    }

    /// Each read's answer in this state, against its golden file; and the
    /// metrics of this state, as Prometheus's own check reads them.
    fn hold(&mut self, shop: &mut Shop, state: &str) {
        for by_replica in [false, true] {
            let text: String = shop
                .pg
                .query_one("SELECT sync.metrics($1)", &[&by_replica])
                .unwrap()
                .get(0);
            if let Some(complaint) = promtool_complaint(&text) {
                self.differ.push(format!(
                    "sync.metrics({by_replica}) in state {state}: promtool check metrics says:\n\
                     {complaint}\n--- the text ---\n{text}"
                ));
            }
        }
        let reads = [
            ("overview", "SELECT sync.overview()".to_owned()),
            ("listing", format!("SELECT sync.listing(NULL, '{state}')")),
            ("health", "SELECT sync.health()".to_owned()),
        ];
        for (read, sql) in reads {
            let answer: Value = shop.pg.query_one(sql.as_str(), &[]).unwrap().get(0);
            let text = serde_json::to_string_pretty(&masked(&answer, &self.names, &mut Vec::new()))
                .unwrap()
                + "\n";
            let file = self.dir.join(format!("{read}-{state}.json"));
            self.written += 1;
            if self.bless {
                std::fs::create_dir_all(&self.dir).unwrap();
                std::fs::write(&file, &text).unwrap();
                continue;
            }
            match std::fs::read_to_string(&file) {
                Ok(golden) if golden == text => {}
                Ok(golden) => self.differ.push(format!(
                    "{}:\n--- golden\n{golden}\n--- now\n{text}",
                    file.display()
                )),
                Err(e) => self.differ.push(format!("{}: {e}", file.display())),
            }
        }
    }

    fn check(self) {
        assert!(self.written >= 15, "every read in every state");
        assert!(
            self.differ.is_empty(),
            "the reads answer otherwise than their golden files (MAGIC_SYNC_BLESS=1 writes them \
             again):\n{}",
            self.differ.join("\n")
        );
    }
}

/// What `promtool check metrics` (Debian's package `prometheus`, which
/// scripts/setup.sh installs) says of a text of metrics, if anything: a
/// scrape Prometheus takes without a word says nothing.
fn promtool_complaint(text: &str) -> Option<String> {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut check = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("runs promtool (scripts/setup.sh installs the package prometheus)");
    check
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = check.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (!out.status.success() || !said.trim().is_empty()).then_some(said)
}

fn replica_state(shop: &mut Shop, replica: Uuid) -> String {
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
        .unwrap()["state"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[test]
fn the_reads_answer_in_every_state_as_their_golden_files_say() {
    let mut shop = Shop::open();
    shop.run(
        "INSERT INTO shop.products (id, name, price_cents) VALUES \
         ('00000000-0000-0000-0000-000000000001', 'Tea', 250), \
         ('00000000-0000-0000-0000-000000000002', 'Coffee', 300)",
    );
    let (ids, mut registers) = shop.add_registers(3);
    let mut golden = Golden::new(&ids);
    sync_all(&mut shop, &mut registers);
    for id in &ids {
        assert_eq!(replica_state(&mut shop, *id), "synced");
    }
    golden.hold(&mut shop, "synced");

    // A change planned and sent, not yet confirmed by anyone.
    shop.run("UPDATE shop.products SET price_cents = 260 WHERE name = 'Tea'");
    shop.relay();
    assert_eq!(replica_state(&mut shop, ids[0]), "catching_up");
    golden.hold(&mut shop, "catching_up");

    // Sends to R1 keep failing (as the nats transport records them).
    shop.run(&format!(
        "INSERT INTO sync.sends (replica, failures, message, last_error, retry_at) \
         VALUES ('{}', 4, 'the message', 'no responders available for request', now())",
        ids[1]
    ));
    assert_eq!(replica_state(&mut shop, ids[1]), "unreachable");
    golden.hold(&mut shop, "unreachable");

    // R0 is heard, and has taken nothing of what waits for it for longer
    // than magic_sync.stalled_after (two minutes, by default): its message
    // and its last move are put ten minutes back, and it says where it
    // stands without taking its message.
    shop.run(&format!(
        "UPDATE sync.outbox SET written_at = now() - interval '10 minutes' WHERE replica = '{0}'; \
         UPDATE sync.replicas SET applied_at = now() - interval '10 minutes' WHERE id = '{0}'",
        ids[0]
    ));
    registers[0].say_where_it_stands();
    report(&mut shop.pg, &mut registers[0]);
    assert_eq!(replica_state(&mut shop, ids[0]), "stalled");
    golden.hold(&mut shop, "stalled");

    // R2 sells a receipt the database refuses: kept in the inbox, its
    // own, waiting for a fix.
    sell(&registers[2], &[-5]);
    deliver(&mut shop.pg, &mut registers[2]);
    report(&mut shop.pg, &mut registers[2]);
    assert_eq!(replica_state(&mut shop, ids[2]), "awaiting_fix");
    golden.hold(&mut shop, "awaiting_fix");
    golden.check();
}

#[test]
fn drift_shows_in_the_health_the_overview_and_the_metrics_and_goes_once_declared_again() {
    let mut shop = Shop::open_with(&[
        "shared_preload_libraries=magic_sync",
        "magic_sync.database=shop",
        "magic_sync.idle=1",
    ]);
    shop.add_product("Tea", 250);
    let (ids, mut registers) = shop.add_registers(2);
    sync_all(&mut shop, &mut registers);

    // A column added and not declared: the worker stops planning products.
    shop.run("ALTER TABLE shop.products ADD COLUMN vat_rate int");
    shop.run("UPDATE shop.products SET price_cents = 260");
    let health = wait_for_read(
        &mut shop,
        "SELECT sync.health()",
        "the drift recorded",
        |h| h["drift"]["total"] == 1,
    );
    assert_eq!(health["healthy"], false, "{health:#}");
    let drift = &health["drift"]["first"][0];
    let problem = drift["problem"].as_str().unwrap();
    assert!(
        problem.contains("shop.products") && problem.contains("vat_rate"),
        "{problem}"
    );
    let fix = drift["fix"].as_str().unwrap().to_owned();
    let statement = fix.lines().last().unwrap().to_owned();
    assert!(
        statement.starts_with("SELECT sync.declare_table(") && statement.contains("products"),
        "{drift}"
    );
    assert_eq!(drift["remedy"], "fix");

    let overview: Value = shop
        .pg
        .query_one("SELECT sync.overview()", &[])
        .unwrap()
        .get(0);
    assert_eq!(overview["healthy"], false);
    assert_eq!(overview["states"]["awaiting_fix"], 2, "{overview:#}");
    for replica in overview["replicas"]["first"].as_array().unwrap() {
        assert!(ids.iter().any(|id| replica["id"] == id.to_string()));
        assert_eq!(replica["why"]["drift"], true, "{replica}");
    }
    let metrics: String = shop
        .pg
        .query_one("SELECT sync.metrics()", &[])
        .unwrap()
        .get(0);
    assert!(metrics.contains("magic_sync_healthy 0"), "{metrics}");
    assert!(
        metrics.contains("magic_sync_waiting{kind=\"drift\"} 1"),
        "{metrics}"
    );

    // Declared again with the statement the fix gives: the drift goes at
    // once.
    shop.run(&statement);
    let health: Value = shop
        .pg
        .query_one("SELECT sync.health()", &[])
        .unwrap()
        .get(0);
    assert_eq!(health["drift"]["total"], 0, "{health:#}");
    assert_eq!(health["healthy"], true, "{health:#}");
    let overview: Value = shop
        .pg
        .query_one("SELECT sync.overview()", &[])
        .unwrap()
        .get(0);
    assert_eq!(overview["states"]["awaiting_fix"], 0, "{overview:#}");
}

/// Reads `sql` until `done` says its answer is the one waited for.
fn wait_for_read(shop: &mut Shop, sql: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let began = Instant::now();
    loop {
        let answer: Value = shop.pg.query_one(sql, &[]).unwrap().get(0);
        if done(&answer) {
            return answer;
        }
        assert!(began.elapsed() < PATIENCE, "waited for {what}: {answer:#}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

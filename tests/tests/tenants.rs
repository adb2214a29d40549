//! Tenants across databases (issue 38): two companies on one PostgreSQL
//! server, each in a database of its own with the filing shop and its own
//! registers, `magic_sync.database = 'acme,globex'`: one relay worker
//! each, over each database's own queue. A fault in one company's
//! database does not stop the other:
//!
//! - acme's worker killed (`kill -9`): PostgreSQL takes any backend killed
//!   so for a crash and restarts every backend of the server, globex's
//!   worker and connections too; both come back by themselves and globex
//!   goes on, as acme does;
//! - acme's worker stopped (`sync.stop_relay()`): globex goes on, acme's
//!   changes wait for its worker and go once it is started again;
//! - acme's engine held as its upgrade holds it: `ALTER EXTENSION
//!   magic_sync UPDATE` runs its script in one transaction, and a script
//!   that alters the engine's tables holds each in ACCESS EXCLUSIVE mode
//!   until it commits. The stand-in takes that lock on every table of the
//!   schema `sync`, the worst such script, and holds it: acme's worker, its
//!   registers' calls and its head office's writes to declared tables
//!   wait, while globex relays, delivers and files as before. Released,
//!   acme catches up.
//!
//! - acme's extension upgraded, for real: both companies on release 0.1.0,
//!   the package upgraded and the server restarted, globex updated at once
//!   and trading while acme is not (its worker waits, saying what to run),
//!   then acme's `ALTER EXTENSION magic_sync UPDATE` in a transaction left
//!   open while globex trades; committed, acme catches up.
//!
//! After each, every register of both holds exactly its own company's
//! products and every receipt it sold is filed once, in its own
//! company's database.

mod common;
#[path = "common/device.rs"]
mod device;
#[path = "common/register_files.rs"]
mod register_files;
#[path = "common/filing_shop.rs"]
mod shop;

use std::path::PathBuf;
use std::time::Duration;

use device::{wait_until, Device};
use magic_sync_replica::transport::queue::Queue;
use magic_sync_replica::transport::Options;
use magic_sync_tests::private_postgres::{repository, PrivatePostgres};
use magic_sync_tests::Cluster;
use postgres::{Client, NoTls};
use register_files::{products_in, receipts_in, sell_through_its_own_connection, unfiled, Receipt};
use uuid::Uuid;

/// One company: its database, its registers on their files, each running
/// the device loop over that database's queue, and what they sold.
struct Company {
    name: &'static str,
    url: String,
    pg: Client,
    ids: Vec<Uuid>,
    files: Vec<PathBuf>,
    devices: Vec<Device>,
    sold: Vec<Receipt>,
}

fn connect(url: &str) -> Client {
    let mut last = None;
    for _ in 0..600 {
        match Client::connect(url, NoTls) {
            Ok(client) => return client,
            Err(e) => last = Some(e),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("cannot connect to {url}: {last:?}");
}

impl Company {
    /// The company's database with the extension and the filing shop, and
    /// `registers` registers running.
    /// The company on the extension at `version` (None: this build's).
    fn open_at(
        cluster: &Cluster,
        dir: &tempfile::TempDir,
        name: &'static str,
        version: Option<&str>,
    ) -> Company {
        let mut pg = match version {
            None => cluster.database_with_extension(name),
            Some(version) => {
                cluster
                    .connect("postgres")
                    .batch_execute(&format!("CREATE DATABASE \"{name}\""))
                    .unwrap();
                let mut pg = cluster.connect(name);
                pg.batch_execute(&format!("CREATE EXTENSION magic_sync VERSION '{version}'"))
                    .unwrap();
                pg
            }
        };
        pg.batch_execute(shop::SERVER_SCHEMA).unwrap();
        let url = cluster.url(name);
        let mut company = Company {
            name,
            url,
            pg,
            ids: Vec::new(),
            files: Vec::new(),
            devices: Vec::new(),
            sold: Vec::new(),
        };
        for i in 0..2 {
            let id = Uuid::new_v4();
            company
                .pg
                .execute(
                    "INSERT INTO shop.registers (id, name) VALUES ($1, $2)",
                    &[&id, &format!("{name} {i}")],
                )
                .unwrap();
            company
                .pg
                .execute(
                    "INSERT INTO shop.register_state (id, register_id, note) VALUES ($1, $1, '')",
                    &[&id],
                )
                .unwrap();
            let file = dir.path().join(format!("{name}-{id}.db"));
            let config: postgres::Config = company.url.parse().unwrap();
            let device = Device::start(
                shop::open_register(&file, id),
                Options {
                    poll_every: Duration::from_secs(3600),
                    longest_pause: Duration::from_secs(1),
                    ..Options::default()
                },
                move |replica| Queue::new(config, replica.me()),
            );
            company.ids.push(id);
            company.files.push(file);
            company.devices.push(device);
        }
        company.add_product(&format!("{name} tea"), 250);
        company
    }

    fn reconnect(&mut self) {
        self.pg = connect(&self.url);
    }

    /// Waits until the server, back from a crash, runs a worker for this
    /// company other than `killed`, and connects again.
    fn until_a_worker_other_than(&mut self, killed: i32) {
        wait_until("the server back with a new worker", || {
            std::thread::sleep(Duration::from_millis(100));
            let Ok(mut pg) = Client::connect(&self.url, NoTls) else {
                return false;
            };
            let worker = pg
                .query_opt(
                    "SELECT pid FROM pg_stat_activity \
                     WHERE backend_type = 'magic_sync relay' AND datname = current_database()",
                    &[],
                )
                .ok()
                .flatten()
                .map(|row| row.get::<_, i32>(0));
            if worker.is_some_and(|pid| pid != killed) {
                self.pg = pg;
                return true;
            }
            false
        });
    }

    fn add_product(&mut self, name: &str, price: i64) {
        self.pg
            .execute(
                "INSERT INTO shop.products (id, name, price_cents) VALUES (gen_random_uuid(), $1, $2)",
                &[&name, &price],
            )
            .unwrap();
    }

    /// The head office changes its catalog and every register sells.
    fn trade(&mut self, round: i64) {
        self.add_product(&format!("{} bun {round}", self.name), 100 + round);
        for ((id, file), device) in self.ids.iter().zip(&self.files).zip(&self.devices) {
            self.sold
                .extend(sell_through_its_own_connection(file, *id, &[round]));
            device.control.poke();
        }
    }

    fn count(&mut self, sql: &str) -> i64 {
        self.pg.query_one(sql, &[]).unwrap().get(0)
    }

    /// The relay worker of this company's database, if one runs.
    fn worker_pid(&mut self) -> Option<i32> {
        self.pg
            .query_opt(
                "SELECT pid FROM pg_stat_activity \
                 WHERE backend_type = 'magic_sync relay' AND datname = current_database()",
                &[],
            )
            .unwrap()
            .map(|row| row.get(0))
    }

    /// Waits until every register holds exactly this company's products
    /// and every receipt it sold is filed, once, here.
    fn in_step(&mut self, when: &str) {
        let what = format!("{}'s registers in step ({when})", self.name);
        wait_until(&what, || {
            let products = common::products_of(&mut self.pg);
            self.files
                .iter()
                .all(|file| products_in(file) == products && unfiled(file) == 0)
        });
        let mut sold = self.sold.clone();
        sold.sort();
        assert_eq!(
            shop::receipts_filed_on(&mut self.pg),
            sold,
            "{}: the receipts filed, each once ({when})",
            self.name
        );
        for (id, file) in self.ids.iter().zip(&self.files) {
            let own: Vec<Receipt> = sold.iter().filter(|r| r.1 == *id).copied().collect();
            assert_eq!(receipts_in(file), own, "{when}");
        }
    }
}

/// A server with two companies, each in its own database with its own
/// worker and registers, both in step.
fn two_companies() -> (Cluster, tempfile::TempDir, Company, Company) {
    two_companies_on(Cluster::start_with(&SETTINGS), None)
}

const SETTINGS: [&str; 3] = [
    "shared_preload_libraries=magic_sync",
    "magic_sync.database=acme,globex",
    "magic_sync.idle=1",
];

/// Both companies on `cluster`, their extension at `version` (None: this
/// build's).
fn two_companies_on(
    cluster: Cluster,
    version: Option<&str>,
) -> (Cluster, tempfile::TempDir, Company, Company) {
    let dir = tempfile::tempdir().unwrap();
    let mut acme = Company::open_at(&cluster, &dir, "acme", version);
    let mut globex = Company::open_at(&cluster, &dir, "globex", version);
    acme.in_step("opened");
    globex.in_step("opened");
    // Each company's rows are its own: acme's registers hold no globex row.
    assert!(products_in(&acme.files[0])
        .iter()
        .all(|p| p.1.starts_with("acme")));
    (cluster, dir, acme, globex)
}

#[test]
fn a_company_whose_worker_is_killed_or_stopped_does_not_stop_the_other() {
    let (_cluster, _dir, mut acme, mut globex) = two_companies();

    // acme's worker killed: the server restarts every backend, and both
    // companies come back by themselves.
    let killed = acme.worker_pid().expect("acme's worker");
    let status = std::process::Command::new("kill")
        .args(["-9", &killed.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    acme.until_a_worker_other_than(killed);
    globex.reconnect();
    for round in 1..=3 {
        globex.trade(round);
        acme.trade(round);
    }
    globex.in_step("acme's worker killed");
    acme.in_step("its worker killed");

    // acme's worker stopped: globex goes on; acme's change waits for it.
    let stopped: i64 = acme
        .pg
        .query_one("SELECT sync.stop_relay()", &[])
        .unwrap()
        .get(0);
    assert_eq!(stopped, 1, "acme's worker stopped");
    wait_until("acme's worker gone", || acme.worker_pid().is_none());
    acme.trade(4);
    for round in 4..=6 {
        globex.trade(round);
    }
    globex.in_step("acme's worker stopped");
    assert!(
        acme.count("SELECT count(*) FROM sync.notes") > 0,
        "acme's change waits for its worker while globex's went"
    );
    assert!(acme.worker_pid().is_none(), "acme's worker stayed stopped");
    acme.pg.query_one("SELECT sync.start_relay()", &[]).unwrap();
    acme.in_step("its worker started again");
}

#[test]
fn a_company_whose_engine_is_held_as_an_upgrade_holds_it_does_not_stop_the_other() {
    let (cluster, _dir, mut acme, mut globex) = two_companies();

    // acme's engine held: every table of schema sync, ACCESS EXCLUSIVE,
    // in a transaction left open, as an upgrade's script holds them.
    let mut upgrade = cluster.connect("acme");
    let mut held = upgrade.transaction().unwrap();
    let tables: Vec<String> = held
        .query(
            "SELECT format('%I.%I', schemaname, tablename) FROM pg_tables \
             WHERE schemaname = 'sync' ORDER BY 1",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert!(tables.len() > 10, "the engine's tables: {tables:?}");
    held.batch_execute(&format!(
        "LOCK TABLE {} IN ACCESS EXCLUSIVE MODE",
        tables.join(", ")
    ))
    .unwrap();

    // Meanwhile acme's head office writes (it waits on the lock, as every
    // writer of a declared table does) and its registers sell.
    let acme_url = acme.url.clone();
    let writer = std::thread::spawn(move || {
        connect(&acme_url)
            .execute(
                "INSERT INTO shop.products (id, name, price_cents) \
                 VALUES (gen_random_uuid(), 'acme cake', 400)",
                &[],
            )
            .unwrap();
    });
    for ((id, file), device) in acme.ids.iter().zip(&acme.files).zip(&acme.devices) {
        acme.sold
            .extend(sell_through_its_own_connection(file, *id, &[777]));
        device.control.poke();
    }
    // globex relays, delivers and files through it all.
    for round in 1..=4 {
        globex.trade(round);
    }
    globex.in_step("acme's engine held");
    let waiting: i64 = cluster
        .connect("postgres")
        .query_one(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE datname = 'acme' AND wait_event_type = 'Lock'",
            &[],
        )
        .unwrap()
        .get(0);
    assert!(waiting > 0, "acme's sessions wait on the engine's lock");
    assert!(!writer.is_finished(), "acme's head office waits to write");

    // The upgrade done: acme catches up.
    held.rollback().unwrap();
    writer.join().unwrap();
    acme.in_step("its engine released");
    assert!(common::products_of(&mut acme.pg)
        .iter()
        .any(|p| p.1 == "acme cake"));
}

#[test]
fn a_company_whose_extension_is_being_upgraded_does_not_stop_the_other() {
    // Both companies on the previous release, in a copy of PostgreSQL of
    // the test's own (the other tests keep this build's library).
    let postgres = PrivatePostgres::copy();
    postgres.install_library(&repository().join("target-releases/0.1.0/magic_sync.so"));
    postgres.install_script("magic_sync--0.1.0.sql");
    let cluster = Cluster::start_from(postgres.bin(), &SETTINGS);
    let (cluster, _dir, mut acme, mut globex) = two_companies_on(cluster, Some("0.1.0"));

    // The package upgraded and the server restarted; globex updates its
    // extension at once and goes on, while acme has not: its worker waits
    // saying what to run, its registers keep their receipts and try again.
    postgres.install_this_builds_library();
    cluster.restart_immediately();
    acme.reconnect();
    globex.reconnect();
    globex
        .pg
        .batch_execute("ALTER EXTENSION magic_sync UPDATE")
        .unwrap();
    acme.trade(1);
    for round in 1..=3 {
        globex.trade(round);
    }
    globex.in_step("acme not yet updated");
    wait_until("acme's worker to say what to run", || {
        cluster
            .log()
            .contains("database \"acme\" holds magic_sync 0.1.0 and this library is")
    });
    assert!(
        acme.count("SELECT count(*) FROM sync.notes") > 0,
        "acme's change waits, noted"
    );

    // acme's update, in a transaction left open a while: globex goes on.
    let mut upgrade = cluster.connect("acme");
    let mut updating = upgrade.transaction().unwrap();
    updating
        .batch_execute("ALTER EXTENSION magic_sync UPDATE")
        .unwrap();
    for round in 4..=5 {
        globex.trade(round);
    }
    globex.in_step("acme's update under way");
    updating.commit().unwrap();

    // Updated, acme catches up by itself: nothing lost, each receipt filed
    // once.
    acme.trade(2);
    acme.in_step("its extension updated");
    globex.trade(6);
    globex.in_step("acme updated");
}

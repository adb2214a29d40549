//! NATS JetStream as a cluster (issue 38): three nats-server nodes on
//! loopback, each running the book's docs/src/nats/cluster.conf with the
//! book's account (the server half's user, a user per register), routes
//! between them and a store each. The relay worker makes its streams with
//! `magic_sync.nats_replicas = 3` and is given every node's address in
//! `magic_sync.nats_url`; each register's client is given all three too.
//! The shop runs end to end through it while, mid-stream, the node that
//! leads the down stream is killed (`kill -9`), and later, once it is back,
//! the node a register is connected to. Nobody tells the worker or the
//! registers: they reconnect to the surviving nodes by themselves. At each
//! step every register holds exactly the server's products, every receipt
//! is filed once, and no register applied any message twice (a trigger on
//! its file logs each message its chain moved to).

mod common;
#[path = "common/device.rs"]
mod device;
#[allow(dead_code)]
#[path = "common/nats_transport_help.rs"]
mod help;
#[path = "common/nats_shop.rs"]
mod nats_shop;
#[path = "common/register_files.rs"]
mod register_files;
#[path = "common/filing_shop.rs"]
mod shop;

use std::path::{Path, PathBuf};
use std::time::Duration;

use device::{wait_until, Device};
use help::every_receipt_is_filed_once;
use magic_sync_replica::transport::nats::{Credentials, NatsSettings};
use magic_sync_replica::transport::Options;
use magic_sync_tests::nats::{self as nats_server, NatsCluster, SERVER_USER};
use nats_shop::{shop_over, start_register_over, SEND_TIMEOUT};
use register_files::{
    sell_through_its_own_connection, until_every_register_holds_the_servers_products, Receipt,
};
use rusqlite::Connection;
use shop::Shop;
use tempfile::TempDir;
use uuid::Uuid;

const SERVER_PASSWORD: &str = "the head office's secret";
const ACCOUNT: &str = "MAGIC_SYNC";
const DOWN_STREAM: &str = "MAGIC_SYNC_DOWN";
const REGISTERS: usize = 3;

fn password_of(device: Uuid) -> String {
    format!("secret of {device}")
}

/// Each message a register's chain moves to, logged by its own file:
/// the chain's one row (`sync_state`) changes its epoch or sequence once
/// for each message applied. A message applied twice would be logged
/// twice.
const APPLIED_LOG: &str = "
    CREATE TABLE IF NOT EXISTS test_applied (epoch TEXT NOT NULL, sequence INTEGER NOT NULL);
    CREATE TRIGGER IF NOT EXISTS test_applied_log AFTER UPDATE OF epoch, sequence ON sync_state
    WHEN NEW.epoch <> OLD.epoch OR NEW.sequence <> OLD.sequence
    BEGIN INSERT INTO test_applied (epoch, sequence) VALUES (NEW.epoch, NEW.sequence); END;
";

/// The messages a register applied more than once, and how many it
/// applied in all.
fn applied_twice(file: &Path) -> (Vec<(String, i64, i64)>, i64) {
    let conn = Connection::open(file).unwrap();
    let twice = conn
        .prepare(
            "SELECT epoch, sequence, count(*) FROM test_applied \
             GROUP BY epoch, sequence HAVING count(*) > 1",
        )
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let all = conn
        .query_row("SELECT count(*) FROM test_applied", [], |r| r.get(0))
        .unwrap();
    (twice, all)
}

/// The client name a register's NATS connection gives.
fn client_of(register: Uuid) -> String {
    format!("magic_sync replica {register}")
}

const RELAY_CLIENT: &str = "magic_sync relay";

struct Fleet {
    shop: Shop,
    ids: Vec<Uuid>,
    files: Vec<PathBuf>,
    devices: Vec<Device>,
    sold: Vec<Receipt>,
    _secrets: TempDir,
}

/// The shop whose worker publishes to the cluster (every node's address,
/// streams of 3 replicas) as the account's server user, and its
/// registers, each over its own user, holding Tea.
fn the_shop_over(cluster: &NatsCluster, ids: &[Uuid]) -> Fleet {
    let secrets = tempfile::tempdir().unwrap();
    let password_file = secrets.path().join("nats-password");
    std::fs::write(&password_file, format!("{SERVER_PASSWORD}\n")).unwrap();
    for (path, mode) in [(secrets.path(), 0o755), (password_file.as_path(), 0o644)] {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let user = format!("magic_sync.nats_user={SERVER_USER}");
    let file = format!("magic_sync.nats_password_file={}", password_file.display());
    let mut shop = shop_over(
        &cluster.url_list(),
        &[SEND_TIMEOUT, "magic_sync.nats_replicas=3", &user, &file],
    );
    for (i, id) in ids.iter().enumerate() {
        shop.pg
            .execute(
                "INSERT INTO shop.registers (id, name) VALUES ($1, $2)",
                &[id, &format!("R{i}")],
            )
            .unwrap();
        shop.pg
            .execute(
                "INSERT INTO shop.register_state (id, register_id, note) VALUES ($1, $1, 'new')",
                &[id],
            )
            .unwrap();
    }
    shop.add_product("Tea", 250);
    let files: Vec<PathBuf> = ids.iter().map(|id| shop.file_of(*id)).collect();
    let devices = ids
        .iter()
        .zip(&files)
        .map(|(id, file)| {
            let replica = shop::open_register(file, *id);
            replica.connection().execute_batch(APPLIED_LOG).unwrap();
            let mut settings = NatsSettings::new(cluster.urls()[0].as_str());
            settings.servers = cluster.urls();
            settings.credentials = Credentials::UserPassword {
                user: id.to_string(),
                password: password_of(*id),
            };
            let options = Options {
                poll_every: Duration::from_secs(3600),
                longest_pause: Duration::from_secs(2),
                ..Options::default()
            };
            start_register_over(settings, options, replica)
        })
        .collect();
    let mut fleet = Fleet {
        shop,
        ids: ids.to_vec(),
        files,
        devices,
        sold: Vec::new(),
        _secrets: secrets,
    };
    fleet.in_step("every register holds Tea");
    fleet
}

impl Fleet {
    /// One round of the shop at work: the head office changes a price
    /// (and every fifth round adds a product), every register sells.
    fn round(&mut self, round: usize) {
        self.shop.run(&format!(
            "UPDATE shop.products SET price_cents = {}, updated_at = now() WHERE name = 'Tea'",
            300 + round
        ));
        if round.is_multiple_of(5) {
            self.shop
                .add_product(&format!("Bun {round}"), 100 + round as i64);
        }
        for ((id, file), device) in self.ids.iter().zip(&self.files).zip(&self.devices) {
            self.sold.extend(sell_through_its_own_connection(
                file,
                *id,
                &[1000 + round as i64],
            ));
            device.control.poke();
        }
        std::thread::sleep(Duration::from_millis(40));
    }

    /// Waits until every register holds exactly the server's products and
    /// every receipt sold is filed once and answered; and no register
    /// applied a message twice.
    fn in_step(&mut self, when: &str) {
        until_every_register_holds_the_servers_products(&mut self.shop, &self.files);
        every_receipt_is_filed_once(&mut self.shop, &self.ids, &self.files, &self.sold);
        for (id, file) in self.ids.iter().zip(&self.files) {
            let (twice, all) = applied_twice(file);
            assert!(
                twice.is_empty(),
                "{when}: register {id} applied these messages more than once: {twice:?}"
            );
            assert!(all > 0, "{when}: register {id} applied nothing");
        }
        for d in &mut self.devices {
            d.drain();
            eprintln!(
                "DEVICE {:?}",
                d.history()
                    .iter()
                    .filter(|h| !h.starts_with("applied")
                        && !h.starts_with("sent")
                        && !h.starts_with("waiting"))
                    .collect::<Vec<_>>()
            );
        }
        eprintln!(
            "LOG {}",
            self.shop
                .cluster
                .log()
                .lines()
                .filter(|l| l.contains("nats") || l.contains("NATS"))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }

    /// The node each register is connected to now, waiting until each is
    /// connected to one that runs.
    fn nodes_of_registers(&self, cluster: &NatsCluster) -> Vec<usize> {
        let mut nodes = Vec::new();
        for id in &self.ids {
            let mut node = None;
            wait_until(&format!("register {id} connected to a node"), || {
                node = cluster.node_of_client(&client_of(*id));
                node.is_some()
            });
            nodes.push(node.unwrap());
        }
        nodes
    }
}

#[test]
fn a_cluster_of_three_that_loses_the_streams_leader_and_then_a_registers_node_loses_nothing() {
    let ids: Vec<Uuid> = (0..REGISTERS).map(|_| Uuid::new_v4()).collect();
    let passwords: Vec<String> = ids.iter().map(|id| password_of(*id)).collect();
    let devices: Vec<(Uuid, &str)> = ids
        .iter()
        .zip(&passwords)
        .map(|(id, password)| (*id, password.as_str()))
        .collect();
    let mut cluster =
        nats_server::start_cluster(3, &nats_server::accounts_config(SERVER_PASSWORD, &devices));
    let mut fleet = the_shop_over(&cluster, &ids);

    // The streams as the worker made them: three replicas, one leader.
    let down = cluster
        .stream(ACCOUNT, DOWN_STREAM)
        .expect("the worker made the down stream");
    assert_eq!(down["config"]["num_replicas"], 3, "{down}");
    for round in 0..5 {
        fleet.round(round);
    }

    // Mid-stream, the node that leads the down stream is killed; another
    // takes the lead. Later, the killed node is started again on its
    // store, and then the node a register is connected to is killed —
    // the worker's own, when a register shares it. The shop works on
    // throughout, and nobody tells the worker or the registers anything.
    let leader = cluster
        .leader_of(ACCOUNT, DOWN_STREAM)
        .expect("the down stream has a leader");
    let (mut victim, mut moved, mut worker_on) = (leader, Vec::new(), None);
    for round in 5..45 {
        match round {
            10 => cluster.nodes[leader].kill(),
            19 => wait_until("another node to lead the down stream", || {
                cluster
                    .leader_of(ACCOUNT, DOWN_STREAM)
                    .is_some_and(|node| node != leader)
            }),
            20 => {
                cluster.nodes[leader].start_again();
                cluster.wait_for_a_metadata_leader();
            }
            25 => {
                let registers_on = fleet.nodes_of_registers(&cluster);
                worker_on = cluster.node_of_client(RELAY_CLIENT);
                // The worker's node if a register shares it, else a
                // register's node other than the one killed before.
                victim = worker_on
                    .filter(|node| registers_on.contains(node))
                    .or_else(|| registers_on.iter().copied().find(|node| *node != leader))
                    .unwrap_or(registers_on[0]);
                moved = fleet
                    .ids
                    .iter()
                    .zip(&registers_on)
                    .filter(|(_, node)| **node == victim)
                    .map(|(id, _)| *id)
                    .collect();
            }
            30 => cluster.nodes[victim].kill(),
            _ => {}
        }
        fleet.round(round);
    }
    eprintln!(
        "killed {} (it led the down stream), then {} (registers {moved:?} on it, the worker {})",
        nats_server::node_name(leader),
        nats_server::node_name(victim),
        if worker_on == Some(victim) {
            "too"
        } else {
            "not"
        }
    );
    fleet.in_step("two nodes killed in turn");

    // Each reconnected by itself to a node that survived.
    let now_on = fleet.nodes_of_registers(&cluster);
    assert!(
        now_on.iter().all(|node| *node != victim),
        "every register on a surviving node: {now_on:?}, {} killed",
        nats_server::node_name(victim)
    );
    let mut worker_now = None;
    wait_until("the worker connected to a node", || {
        worker_now = cluster.node_of_client(RELAY_CLIENT);
        worker_now.is_some()
    });
    assert_ne!(worker_now, Some(victim));
    // What the worker had to say of it (a register provisioned again).
    let alarms = fleet.shop.count("SELECT count(*) FROM sync.alarms");
    eprintln!("alarms raised: {alarms}");
    for device in fleet.devices.drain(..) {
        device.stop();
    }
}

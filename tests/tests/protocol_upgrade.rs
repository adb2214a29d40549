//! A later protocol waits, both ways, end to end (the book's "Upgrading",
//! the protocol's section 4.0): through the queue and through NATS, with
//! both halves built as a release that raises the protocol would
//! (scripts/next-protocol.sh: the extension's library and the replica's
//! command line, magic_sync_proto's feature next-protocol).
//!
//! Two registers. The second is upgraded first: its Ups, of the later
//! protocol, are answered with an error by the server of the protocol
//! before and sent again until the server is upgraded, while it takes the
//! server's messages of the protocol before as ever. Then the server is
//! upgraded (its library, PostgreSQL restarted): the waiting receipts are
//! filed, and its messages, of the later protocol, wait at the first
//! register, unacknowledged, until that one is upgraded too. Nothing is
//! lost, nothing is filed twice.
//!
//! The server runs in a copy of PostgreSQL of the test's own, so that the
//! other tests keep this build's library.

mod common;
#[path = "common/device.rs"]
mod device;
#[path = "common/nats_shop.rs"]
mod nats_shop;
#[path = "common/register_files.rs"]
mod register_files;
#[path = "common/filing_shop.rs"]
mod shop;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use device::{wait_until, wait_within, Device};
use magic_sync_replica::proto::PROTOCOL;
use magic_sync_replica::transport::queue::Queue;
use magic_sync_replica::transport::{Options, Status};
use magic_sync_replica::Error;
use magic_sync_tests::nats::{self as nats_server, NatsServer};
use magic_sync_tests::private_postgres::{repository, PrivatePostgres};
use magic_sync_tests::worker_shop::Transport;
use magic_sync_tests::Cluster;
use register_files::{holds_the_servers_products, products_in, sell_through_its_own_connection};
use shop::{open_register, Shop};
use uuid::Uuid;

/// What scripts/next-protocol.sh built.
fn next_protocol(file: &str) -> PathBuf {
    let path = repository()
        .join("target-releases/next-protocol")
        .join(file);
    assert!(
        path.exists(),
        "{} is missing: `bash scripts/next-protocol.sh` builds it (scripts/test.sh does)",
        path.display()
    );
    path
}

/// The register of the later protocol: the replica's command line of that
/// build, `run` on the register's file, stopped when dropped.
struct LaterRegister {
    child: Child,
    log: PathBuf,
}

impl LaterRegister {
    fn run(file: &Path, transport: &[String]) -> LaterRegister {
        let log = file.with_extension("log");
        let child = Command::new(next_protocol("magic-sync-replica"))
            .arg("run")
            .arg(file)
            .args(transport)
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("starts the later build's command line");
        LaterRegister { child, log }
    }

    fn said(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for LaterRegister {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The server's log says it answered `replica`'s Up of the later protocol
/// with an error.
fn refused_as_later(cluster: &Cluster, replica: Uuid) -> bool {
    cluster.log().contains(&format!(
        "{replica} speaks protocol {}, and this server {PROTOCOL}",
        PROTOCOL + 1
    ))
}

/// The receipts the server filed, by id.
fn filed(shop: &mut Shop) -> BTreeSet<Uuid> {
    shop.receipts().into_iter().map(|r| r.0).collect()
}

fn a_later_protocol_waits_both_ways_and_nothing_is_lost(transport: Transport) {
    let postgres = PrivatePostgres::copy();
    let nats: Option<NatsServer> = (transport == Transport::Nats).then(nats_server::start);
    let mut settings = vec![
        "shared_preload_libraries=magic_sync".to_owned(),
        "magic_sync.database=shop".to_owned(),
        "magic_sync.idle=1".to_owned(),
    ];
    if let Some(nats) = &nats {
        settings.push("magic_sync.transport=nats".to_owned());
        settings.push(format!("magic_sync.nats_url={}", nats.url()));
        settings.push(nats_shop::SEND_TIMEOUT.to_owned());
    }
    let settings: Vec<&str> = settings.iter().map(String::as_str).collect();
    let mut shop = Shop::over(Cluster::start_from(postgres.bin(), &settings));
    shop.add_product("Tea", 250);
    shop.add_product("Jam", 400);
    let first = shop.add_register("First");
    let second = shop.add_register("Second");
    let (first_file, second_file) = (shop.file_of(first), shop.file_of(second));

    // The first register runs this build, in this process.
    let url = shop.cluster.url("shop");
    let start_first = |shop: &Shop| -> Device {
        let replica = open_register(&shop.file_of(first), first);
        match &nats {
            Some(nats) => nats_shop::start_register(&nats.url(), replica),
            None => {
                let config: postgres::Config = url.parse().unwrap();
                let options = Options {
                    poll_every: Duration::from_millis(200),
                    ..Options::default()
                };
                Device::start(replica, options, move |replica| {
                    Queue::new(config, replica.me())
                })
            }
        }
    };
    let mut first_device = start_first(&shop);
    // The second is upgraded first: the next protocol's command line on
    // its file, which this build made.
    drop(open_register(&second_file, second));
    let transport_options = match &nats {
        Some(nats) => vec!["--nats".to_owned(), nats.url()],
        None => vec!["--queue".to_owned(), url.clone()],
    };
    let second_register = LaterRegister::run(&second_file, &transport_options);
    wait_until("both registers to hold the catalog", || {
        holds_the_servers_products(&mut shop, &first_file)
            && holds_the_servers_products(&mut shop, &second_file)
    });

    // The server speaks the protocol before the second register's: its
    // Ups wait, sent again, while the first register's are filed.
    let mut sold = sell_through_its_own_connection(&first_file, first, &[120]);
    let waiting = sell_through_its_own_connection(&second_file, second, &[990, 15]);
    first_device.control.poke();
    wait_until("the server to answer the later Up with an error", || {
        refused_as_later(&shop.cluster, second)
    });
    wait_until("the first register's receipt filed", || {
        filed(&mut shop).contains(&sold[0].0)
    });
    assert!(
        waiting.iter().all(|r| !filed(&mut shop).contains(&r.0)),
        "an Up of a later protocol was filed"
    );
    // The later register takes the messages of the protocol before.
    shop.add_product("Honey", 700);
    wait_until("both registers to hold the new product", || {
        holds_the_servers_products(&mut shop, &first_file)
            && holds_the_servers_products(&mut shop, &second_file)
    });
    assert!(
        waiting.iter().all(|r| !filed(&mut shop).contains(&r.0)),
        "an Up of a later protocol was filed: {}",
        second_register.said()
    );

    // The server upgraded: the next protocol's library, PostgreSQL
    // restarted. The second register's receipts, sent again, are filed.
    postgres.install_library(&next_protocol("magic_sync.so"));
    shop.cluster.restart_immediately();
    shop.reconnect();
    sold.extend(waiting);
    // Over NATS the worker handed the later Up back to the stream for a
    // minute (FILE_AGAIN_AFTER_PERMANENT): the wait may be that long.
    wait_within(
        Duration::from_secs(150),
        "the receipts that waited filed",
        || sold.iter().all(|r| filed(&mut shop).contains(&r.0)),
    );

    // Its messages, of the later protocol, wait at the first register,
    // unacknowledged, and so does every one behind them; its Ups, of the
    // protocol before, are filed.
    shop.add_product("Bread", 300);
    wait_until("the later register to hold the new product", || {
        holds_the_servers_products(&mut shop, &second_file)
    });
    first_device.control.poke();
    let status = first_device.expect("the later message left unacknowledged", |s| {
        matches!(s, Status::Unapplied { .. })
    });
    assert!(
        matches!(
            &status,
            Status::Unapplied {
                error: Error::LaterProtocol { theirs, ours },
                ..
            } if *theirs == PROTOCOL + 1 && *ours == PROTOCOL
        ),
        "{status:?}"
    );
    shop.add_product("Salt", 90);
    sold.extend(sell_through_its_own_connection(&first_file, first, &[60]));
    first_device.control.poke();
    wait_until(
        "the first register's receipt filed by the later server",
        || sold.iter().all(|r| filed(&mut shop).contains(&r.0)),
    );
    let names: Vec<String> = products_in(&first_file).into_iter().map(|p| p.1).collect();
    assert!(
        !names.contains(&"Bread".to_owned()) && !names.contains(&"Salt".to_owned()),
        "the first register applied a message of a later protocol: {names:?}"
    );
    first_device.stop();

    // The first register upgraded: everything that waited is applied.
    let first_register = LaterRegister::run(&first_file, &transport_options);
    wait_until("both registers to hold the catalog", || {
        holds_the_servers_products(&mut shop, &first_file)
            && holds_the_servers_products(&mut shop, &second_file)
    });
    let filed_now = filed(&mut shop);
    let expected: BTreeSet<Uuid> = sold.iter().map(|r| r.0).collect();
    assert_eq!(filed_now, expected, "every receipt filed, once");
    drop((first_register, second_register));
}

#[test]
fn a_later_protocol_waits_both_ways_through_the_queue_and_nothing_is_lost() {
    a_later_protocol_waits_both_ways_and_nothing_is_lost(Transport::Queue);
}

#[test]
fn a_later_protocol_waits_both_ways_through_nats_and_nothing_is_lost() {
    a_later_protocol_waits_both_ways_and_nothing_is_lost(Transport::Nats);
}

//! The device loop over NATS JetStream, against a real nats-server: the
//! test plays the server half's part by the conventions
//! (`nats_subjects`) — it makes both streams and the replica's consumer,
//! publishes the replica's messages down and reads its Ups from the up
//! stream — and a register runs the loop in a thread of its own, as a
//! device program does.

mod common;
#[path = "common/chain.rs"]
mod chain;
#[path = "common/device.rs"]
mod device;
#[path = "common/filing_shop.rs"]
mod shop;

use std::path::{Path, PathBuf};
use std::time::Duration;

use async_nats::jetstream::{self, consumer, AckKind};
use chain::{filed, Chain, Product};
use device::{Device, PATIENCE};
use futures_util::StreamExt;
use magic_sync_proto::wire::Up;
use magic_sync_proto::PROTOCOL;
use magic_sync_replica::transport::nats::{Nats, NatsSettings};
use magic_sync_replica::transport::nats_subjects as subjects;
use magic_sync_replica::transport::{Options, Status};
use magic_sync_replica::{install, Error, Lane, Received, Replica, Settings};
use magic_sync_tests::nats::{self as nats_server, NatsServer};
use prost::Message;
use rusqlite::Connection;
use tempfile::TempDir;
use tokio::runtime::Runtime;
use uuid::Uuid;

/// Receipts go up on a lane of their own, whose name is no subject token.
const RECEIPTS_LANE: &str = "till rolls";

/// A nats-server, the server half's part played on it, and a register's
/// database.
struct Scene {
    nats: NatsServer,
    runtime: Runtime,
    js: jetstream::Context,
    me: Uuid,
    _dir: TempDir,
    file: PathBuf,
}

/// An Up as the up stream holds it.
#[derive(Debug, PartialEq)]
struct UpSeen {
    subject: String,
    msg_id: Option<String>,
    up: Up,
}

impl Scene {
    fn new() -> Scene {
        let nats = nats_server::start();
        let runtime = Runtime::new().unwrap();
        let js = connect_as_the_server(&runtime, &nats);
        let me = Uuid::new_v4();
        runtime.block_on(async {
            nats_server::create_streams(&js).await;
            nats_server::create_consumer(&js, me).await;
        });
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("register.db");
        Scene {
            nats,
            runtime,
            js,
            me,
            _dir: dir,
            file,
        }
    }

    /// The register's replica, its receipts on a lane of their own.
    fn open(&self) -> Replica {
        let mut conn = Connection::open(&self.file).unwrap();
        conn.execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; \
             PRAGMA foreign_keys = ON; PRAGMA recursive_triggers = ON;",
        )
        .unwrap();
        // A database another connection holds is refused at once, not
        // after rusqlite's five seconds.
        conn.busy_timeout(Duration::from_millis(100)).unwrap();
        conn.execute_batch(shop::REGISTER_SCHEMA).unwrap();
        let tables = shop::tables();
        install(&mut conn, &tables).unwrap();
        let settings = Settings {
            lanes: vec![
                Lane::new("main", &[]),
                Lane::new(RECEIPTS_LANE, &["receipts"]),
            ],
            wishes: common::carried_out_directly(&tables),
            ..Settings::default()
        };
        Replica::open(conn, tables, self.me, settings).unwrap()
    }

    fn start_device(&self, replica: Replica) -> Device {
        let settings = NatsSettings::new(self.nats.url());
        Device::start(replica, Options::default(), move |replica| {
            Nats::new(settings, replica).expect("a client of NATS")
        })
    }

    /// Publishes a message down, under its outbox id.
    fn publish(&self, outbox_id: u64, bytes: Vec<u8>) {
        self.runtime.block_on(nats_server::publish_down(
            &self.js,
            self.me,
            &outbox_id.to_string(),
            bytes,
        ));
    }

    fn consumer(&self) -> consumer::Info {
        self.runtime.block_on(async {
            self.js
                .get_consumer_from_stream::<consumer::pull::Config, _, _>(
                    subjects::consumer_name(self.me),
                    subjects::DOWN_STREAM,
                )
                .await
                .unwrap()
                .get_info()
                .await
                .unwrap()
        })
    }

    /// Every Up the up stream holds, in order.
    fn ups(&self) -> Vec<UpSeen> {
        self.runtime.block_on(async {
            let stream = self.js.get_stream(subjects::UP_STREAM).await.unwrap();
            let last = stream.get_info().await.unwrap().state.last_sequence;
            let mut ups = Vec::new();
            for sequence in 1..=last {
                let message = stream.get_raw_message(sequence).await.unwrap();
                ups.push(UpSeen {
                    subject: message.subject.to_string(),
                    msg_id: message
                        .headers
                        .get(subjects::MSG_ID)
                        .map(|v| v.as_str().to_owned()),
                    up: Up::decode(message.payload.as_ref()).unwrap(),
                });
            }
            ups
        })
    }

    /// The server half connects again (after its nats-server restarted).
    fn reconnect(&mut self) {
        self.js = connect_as_the_server(&self.runtime, &self.nats);
    }
}

fn connect_as_the_server(runtime: &Runtime, nats: &NatsServer) -> jetstream::Context {
    runtime.block_on(async {
        let client = async_nats::connect(nats.url()).await.unwrap();
        jetstream::new(client)
    })
}

fn product(name: &'static str, price: i64) -> Product {
    (Uuid::new_v4(), name, price)
}

/// What the register holds: (name, price), sorted.
fn held(file: &Path) -> Vec<(String, i64)> {
    let conn = Connection::open(file).unwrap();
    let mut rows: Vec<(String, i64)> = conn
        .prepare("SELECT name, price_cents FROM products")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    rows.sort();
    rows
}

/// How many of its writes the register waits to have filed.
fn unfiled(file: &Path) -> i64 {
    Connection::open(file)
        .unwrap()
        .query_row("SELECT count(*) FROM sync_notes", [], |r| r.get(0))
        .unwrap()
}

/// The register's program writes a receipt, through a connection of its
/// own, as a device program does while the loop runs.
fn sell(file: &Path, me: Uuid, total: i64) -> Uuid {
    let conn = Connection::open(file).unwrap();
    conn.execute_batch("PRAGMA recursive_triggers = ON")
        .unwrap();
    shop::write_receipt(&conn, me, total)
}

fn applied(status: &Status) -> Option<&Received> {
    match status {
        Status::Applied(received) => Some(received),
        _ => None,
    }
}

fn sent_rows(status: &Status) -> Option<(String, u64)> {
    match status {
        Status::Sent {
            lane,
            upload: Some(n),
        } => Some((lane.clone(), *n)),
        _ => None,
    }
}

/// Waits until `done` answers true, or panics saying what it waited for.
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let began = std::time::Instant::now();
    while !done() {
        assert!(began.elapsed() < PATIENCE, "waited {PATIENCE:?} for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_loop_applies_in_order_once_each_even_redelivered_and_sends_rows_up_on_their_lanes_subject() {
    let scene = Scene::new();
    let mut chain = Chain::new();
    let tea = product("Tea", 250);
    let jam = product("Jam", 400);
    scene.publish(1, chain.begin(&[tea]));
    scene.publish(2, chain.end());
    scene.publish(3, chain.down(&[(tea.0, "Tea", 260), jam]));

    // A run before this one took the first message and committed it, and
    // its acknowledgement was lost: the consumer delivers it again.
    let mut replica = scene.open();
    scene.runtime.block_on(async {
        let consumer: consumer::PullConsumer = scene
            .js
            .get_consumer_from_stream(subjects::consumer_name(scene.me), subjects::DOWN_STREAM)
            .await
            .unwrap();
        let mut batch = consumer.fetch().max_messages(1).messages().await.unwrap();
        let first = batch.next().await.unwrap().unwrap();
        replica.receive(&first.payload).unwrap();
        first.ack_with(AckKind::Nak(None)).await.unwrap();
    });

    let mut device = scene.start_device(replica);
    let mut received = Vec::new();
    while received.len() < 3 {
        let status = device.expect("the three messages applied", |s| applied(s).is_some());
        received.push(applied(&status).cloned().unwrap());
    }
    assert!(
        matches!(received[0], Received::Already { .. }),
        "the message delivered again changes nothing: {received:?}"
    );
    assert!(
        matches!(received[1], Received::Ended { .. }),
        "{received:?}"
    );
    assert!(
        matches!(received[2], Received::Applied { .. }),
        "{received:?}"
    );
    assert_eq!(
        held(&scene.file),
        [("Jam".to_owned(), 400), ("Tea".to_owned(), 260)]
    );
    let consumer = scene.consumer();
    assert_eq!(consumer.ack_floor.stream_sequence, 3, "each acknowledged");
    assert_eq!((consumer.num_ack_pending, consumer.num_pending), (0, 0));

    // A receipt, written while the loop waits, goes up at the poke on its
    // lane's subject, under a message id of its upload number.
    let receipt = sell(&scene.file, scene.me, 1250);
    device.control.poke();
    let status = device.expect("the receipt sent", |s| sent_rows(s).is_some());
    let (lane, number) = sent_rows(&status).unwrap();
    assert_eq!(lane, RECEIPTS_LANE);
    let ups = scene.ups();
    let carrying: Vec<&UpSeen> = ups.iter().filter(|u| u.up.uploads == [number]).collect();
    assert_eq!(carrying.len(), 1, "the receipt's Up, once");
    let up = carrying[0];
    assert_eq!(
        up.subject,
        format!("magic_sync.up.{}.x74696c6c20726f6c6c73", scene.me)
    );
    assert_eq!(
        up.subject,
        subjects::up_subject("magic_sync", scene.me, RECEIPTS_LANE)
    );
    assert_eq!(
        up.msg_id.as_deref(),
        Some(format!("{}.x74696c6c20726f6c6c73.{number}", scene.me).as_str())
    );
    assert_eq!(up.up.tables[0].table, "receipts");
    assert_eq!(up.up.tables[0].keys, [receipt.to_string()]);
    assert_eq!(up.up.protocol, PROTOCOL);
    // The Ups of the first lane say what was applied, and carry no rows,
    // so no message id.
    let main = subjects::up_subject("magic_sync", scene.me, "main");
    let firsts: Vec<&UpSeen> = ups.iter().filter(|u| u.subject == main).collect();
    assert!(
        firsts.iter().any(|u| u.up.sequence == 103),
        "the last message applied is said"
    );
    assert!(firsts
        .iter()
        .all(|u| u.up.uploads.is_empty() && u.msg_id.is_none()));

    // The server's answer comes down like any message: the register
    // forgets what it sent.
    scene.publish(4, filed(vec![number]));
    device.expect("the Filed applied", |s| {
        matches!(applied(s), Some(Received::Filed { .. }))
    });
    assert_eq!(unfiled(&scene.file), 0);

    device.stop();
}

#[test]
fn a_message_the_replica_cannot_commit_is_left_unacknowledged_and_applied_when_it_comes_again() {
    let scene = Scene::new();
    let mut chain = Chain::new();
    scene.publish(1, chain.begin(&[product("Tea", 250)]));
    let mut device = scene.start_device(scene.open());
    device.expect("the first message applied", |s| applied(s).is_some());

    // Another connection holds the database: the replica cannot commit.
    let holder = Connection::open(&scene.file).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    scene.publish(2, chain.end());
    let status = device.expect("the message left unacknowledged", |s| {
        matches!(s, Status::Unapplied { .. })
    });
    assert!(
        matches!(
            &status,
            Status::Unapplied {
                error: Error::Storage(_),
                ..
            }
        ),
        "{status:?}"
    );
    assert_eq!(
        scene.consumer().ack_floor.stream_sequence,
        1,
        "not acknowledged"
    );

    holder.execute_batch("COMMIT").unwrap();
    let status = device.expect("the message applied when it came again", |s| {
        applied(s).is_some()
    });
    assert!(
        matches!(applied(&status), Some(Received::Ended { .. })),
        "{status:?}"
    );
    wait_until("the consumer to hear it acknowledged", || {
        scene.consumer().ack_floor.stream_sequence == 2
    });
    device.stop();
}

#[test]
fn a_message_of_a_later_protocol_is_never_acknowledged_and_holds_back_those_behind_it() {
    let scene = Scene::new();
    let mut chain = Chain::new();
    scene.publish(1, chain.begin(&[product("Tea", 250)]));
    scene.publish(2, chain.end_speaking(PROTOCOL + 1));
    scene.publish(3, chain.down(&[product("Jam", 400)]));
    let mut device = scene.start_device(scene.open());
    device.expect("the first message applied", |s| applied(s).is_some());
    for _ in 0..2 {
        let status = device.expect("the later protocol left unacknowledged", |s| {
            matches!(s, Status::Unapplied { .. })
        });
        assert!(
            matches!(
                &status,
                Status::Unapplied {
                    error: Error::LaterProtocol { .. },
                    ..
                }
            ),
            "{status:?}"
        );
    }
    let (_, statuses) = device.stop();
    assert!(
        !statuses.iter().any(|s| applied(s).is_some()),
        "{statuses:?}"
    );
    assert_eq!(scene.consumer().ack_floor.stream_sequence, 1);
    assert_eq!(held(&scene.file), [("Tea".to_owned(), 250)], "Jam waits");
}

#[test]
fn the_loop_connects_again_after_the_nats_server_restarts_and_nothing_is_lost() {
    let mut scene = Scene::new();
    let mut chain = Chain::new();
    let tea = product("Tea", 250);
    scene.publish(1, chain.begin(&[tea]));
    scene.publish(2, chain.end());
    let mut device = scene.start_device(scene.open());
    for _ in 0..2 {
        device.expect("the snapshot applied", |s| applied(s).is_some());
    }
    device.expect("what it applied said", |s| matches!(s, Status::Sent { .. }));
    let stored_before = scene.ups();

    // A message, and the server stops before or while the loop takes it.
    scene.publish(3, chain.down(&[(tea.0, "Tea", 260)]));
    scene.nats.stop();
    device.expect("the loop to notice", |s| {
        matches!(s, Status::Disconnected { .. })
    });
    // Written while the transport is away.
    let receipt = sell(&scene.file, scene.me, 990);
    device.control.poke();

    scene.nats.restart();
    scene.reconnect();
    device.expect("the loop connected again", |s| {
        matches!(s, Status::Connected)
    });
    let status = device.expect("the receipt sent", |s| sent_rows(s).is_some());
    let (_, number) = sent_rows(&status).unwrap();
    let jam = product("Jam", 400);
    scene.publish(4, chain.down(&[jam]));
    scene.publish(5, filed(vec![number]));
    wait_until("the register to hold what was sent", || {
        held(&scene.file) == [("Jam".to_owned(), 400), ("Tea".to_owned(), 260)]
    });
    wait_until("the receipt's Filed applied", || unfiled(&scene.file) == 0);

    let (_, _) = device.stop();
    let consumer = scene.consumer();
    assert_eq!(consumer.ack_floor.stream_sequence, 5, "every message taken");
    let ups = scene.ups();
    let receipts: Vec<&UpSeen> = ups
        .iter()
        .filter(|u| u.up.tables.iter().any(|t| t.keys == [receipt.to_string()]))
        .collect();
    assert_eq!(
        receipts.len(),
        1,
        "the receipt stored once in the up stream"
    );
    assert_eq!(receipts[0].up.uploads, [number]);
    assert!(!stored_before.is_empty());
    assert_eq!(
        ups[..stored_before.len()],
        stored_before[..],
        "what the up stream held before the restart, it holds after"
    );
}

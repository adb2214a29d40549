//! The device loop and wishes: it offers them at start, after a message
//! that changes one, and every `wishes_every` while one waits — with no
//! message and no poke to wake it. The transport here keeps its messages
//! in memory, in the same process: the loop asks nothing else of one.

mod common;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use magic_sync_replica::proto::wire::{DownTable, Wish as WireWish};
use magic_sync_replica::transport::{run, Control, Delivery, Options, Status, Transport};
use magic_sync_replica::{
    Answered, CarryOut, Direct, Error, Outcome, Replica, Settings, Table, Tables, Upload, Wish,
    Wishes,
};
use prost::Message;
use serde_json::json;

const SCHEMA: &str = "
    CREATE TABLE footers (
        register_id BLOB PRIMARY KEY,
        text        TEXT NOT NULL,
        changed     INTEGER NOT NULL
    );
";

fn tables() -> Tables {
    Tables::new(vec![Table::setting("footers")
        .origin("register_id")
        .version("changed")
        .desired(&["text"])])
}

/// A printer that is on or off.
#[derive(Clone, Default)]
struct Printer {
    off: Arc<AtomicBool>,
}

impl CarryOut for Printer {
    fn carry_out(&self, _wish: &Wish) -> Outcome {
        match self.off.load(Ordering::SeqCst) {
            true => Outcome::Later("the printer is off".to_owned()),
            false => Outcome::Applied,
        }
    }
}

/// Messages waiting in memory, taken one at a time; Ups kept as sent.
#[derive(Clone, Default)]
struct InMemory {
    inbox: Arc<Mutex<VecDeque<Vec<u8>>>>,
    sent: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl Transport for InMemory {
    type Handle = ();

    fn connect(&mut self) -> Result<(), Error> {
        Ok(())
    }

    fn next(&mut self) -> Result<Option<Delivery<()>>, Error> {
        Ok(self
            .inbox
            .lock()
            .unwrap()
            .pop_front()
            .map(|bytes| Delivery { handle: (), bytes }))
    }

    fn ack(&mut self, _handle: ()) -> Result<(), Error> {
        Ok(())
    }

    fn send(&mut self, up: &Upload) -> Result<(), Error> {
        self.sent.lock().unwrap().push(up.bytes.clone());
        Ok(())
    }

    fn wait(&mut self, timeout: Duration) -> Result<bool, Error> {
        std::thread::sleep(timeout.min(Duration::from_millis(20)));
        Ok(!self.inbox.lock().unwrap().is_empty())
    }
}

fn wish_message(server: &mut Server, version: u64) -> Vec<u8> {
    let wish = WireWish {
        id: uuid(0x3001),
        table: "footers".into(),
        key: me().to_string(),
        wanted: serde_json::to_vec(
            &json!({"register_id": me().to_string(), "text": "Open on Sundays", "changed": "1"}),
        )
        .unwrap(),
        version,
        ..WireWish::default()
    };
    server.down(vec![Part(DownTable {
        table: "sync_wishes".into(),
        keys: vec![wish.id.clone()],
        upserts: vec![wish.encode_to_vec()],
        ..DownTable::default()
    })])
}

/// A register holding its footer, its printer off, with a wish waiting.
/// The replica opened with `settings`, provisioned with no wish, and
/// holding its footer "Thank you" at version 1.
fn holding_its_footer(shop: &Shop, settings: Settings) -> (Replica, Server) {
    let mut replica = shop.open_with_settings(tables(), settings);
    let mut server = Server::new();
    apply(&mut replica, &server.nothing(&["sync_wishes"]));
    replica
        .connection()
        .execute(
            "INSERT INTO footers VALUES (?1, 'Thank you', 1)",
            [me().as_bytes().to_vec()],
        )
        .unwrap();
    (replica, server)
}

fn waiting(every: Duration) -> (Shop, Replica, Server, Printer) {
    let shop = Shop::with_schema(SCHEMA);
    let printer = Printer::default();
    printer.off.store(true, Ordering::SeqCst);
    let settings = Settings {
        wishes: Wishes::new().on("footers", printer.clone()),
        wishes_every: every,
        ..Settings::default()
    };
    let (mut replica, mut server) = holding_its_footer(&shop, settings);
    apply(&mut replica, &wish_message(&mut server, 7));
    assert_eq!(replica.wishes_due().unwrap(), 1);
    (shop, replica, server, printer)
}

/// Runs the loop until `done` holds of what it reported, or `within`.
fn run_until(
    replica: &mut Replica,
    transport: &mut InMemory,
    within: Duration,
    done: impl Fn(&Status) -> bool + Sync,
) -> bool {
    let control = Control::new();
    let (report, reported) = mpsc::channel::<bool>();
    std::thread::scope(|scope| {
        let looping = scope.spawn(|| {
            let options = Options {
                poll_every: Duration::from_secs(30),
                ..Options::default()
            };
            run(replica, transport, &options, &control, |status| {
                let _ = report.send(done(&status));
            });
        });
        let until = Instant::now() + within;
        let mut seen = false;
        while !seen {
            let left = until.saturating_duration_since(Instant::now());
            match reported.recv_timeout(left) {
                Ok(hit) => seen = hit,
                Err(_) => break,
            }
        }
        control.stop();
        looping.join().unwrap();
        seen
    })
}

fn applied(status: &Status) -> bool {
    matches!(status, Status::Wishes(answered) if answered.iter().any(|a: &Answered| a.outcome == "applied"))
}

#[test]
fn the_device_loop_offers_the_wishes_due_at_start() {
    let (_shop, mut replica, _server, printer) = waiting(Duration::from_secs(3600));
    printer.off.store(false, Ordering::SeqCst);
    let mut transport = InMemory::default();
    let sent = transport.sent.clone();
    // Done once the wish was applied and an Up has gone since: the loop
    // sends after it offers, so stopping at the answer alone races it.
    let answered = AtomicBool::new(false);
    assert!(
        run_until(
            &mut replica,
            &mut transport,
            Duration::from_secs(10),
            |status| {
                if applied(status) {
                    answered.store(true, Ordering::SeqCst);
                }
                answered.load(Ordering::SeqCst) && !sent.lock().unwrap().is_empty()
            }
        ),
        "the wish applied at start, and the answer went up"
    );
    assert_eq!(replica.wishes_due().unwrap(), 0);
}

#[test]
fn the_device_loop_offers_a_waiting_wish_again_every_wishes_every() {
    let (_shop, mut replica, _server, printer) = waiting(Duration::from_millis(300));
    let mut transport = InMemory::default();
    let back = printer.clone();
    // The printer comes back after the loop offered the wish at start: no
    // message and no poke tells the loop.
    let turned_on = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(500));
        back.off.store(false, Ordering::SeqCst);
    });
    assert!(run_until(
        &mut replica,
        &mut transport,
        Duration::from_secs(10),
        applied
    ));
    turned_on.join().unwrap();
    assert_eq!(replica.wishes_due().unwrap(), 0);
}

#[test]
fn the_device_loop_offers_a_wish_a_message_brings() {
    let shop = Shop::with_schema(SCHEMA);
    let settings = Settings {
        wishes: Wishes::new().on("footers", Direct),
        ..Settings::default()
    };
    let (mut replica, mut server) = holding_its_footer(&shop, settings);
    let mut transport = InMemory::default();
    transport
        .inbox
        .lock()
        .unwrap()
        .push_back(wish_message(&mut server, 7));
    let carried_out = |status: &Status| {
        matches!(status, Status::Applied(magic_sync_replica::Received::Applied { wishes, .. })
            if wishes.iter().any(|a| a.outcome == "applied"))
    };
    assert!(run_until(
        &mut replica,
        &mut transport,
        Duration::from_secs(10),
        carried_out
    ));
    assert_eq!(
        strings(replica.connection(), "SELECT text FROM footers"),
        ["Open on Sundays"]
    );
}

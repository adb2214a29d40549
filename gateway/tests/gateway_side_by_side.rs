//! Two gateways side by side in front of one database (issue 38): each
//! its own `magic-sync-gateway` process, as the same role, woken by the
//! same queue. The gateway keeps nothing of its own that a device needs
//! (a message not acknowledged stays at the head of its queue; an Up not
//! answered is sent again), so a device may reach either.
//!
//! - Registers spread across both, each given both addresses: a register
//!   whose gateway is killed connects to the other and goes on, nothing
//!   lost, each receipt filed once.
//! - A register whose link goes silent (a network that stops carrying,
//!   closing nothing) moves to the other gateway while the first still
//!   holds its topic open, its link not yet timed out; the Up the first
//!   held unanswered is filed again once the network carries it, late,
//!   and changes nothing.
//! - A register connected to both at once, taking from both and sending
//!   every Up to both: each message comes twice, and is applied once;
//!   each Up is filed twice, and each receipt is on the server once.
//!
//! After each, every register holds every product, every receipt is filed
//! once, and no register applied any message twice: a trigger on its file
//! logs each message its chain moved to.

mod help;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use help::{Gateway, Proxy, Register, Shop};
use magic_sync_replica::transport::ws::{Held, Ws, WsSettings};
use magic_sync_replica::transport::{Delivery, Status, Transport, Waker};
use magic_sync_replica::{Error, Upload};
use rusqlite::Connection;
use uuid::Uuid;

fn connected(s: &Status) -> bool {
    matches!(s, Status::Connected)
}

/// Each message a register's chain moves to, logged by its own file: the
/// chain's one row (`sync_state`) changes its epoch or sequence once for
/// each message applied. A message applied twice would be logged twice.
const APPLIED_LOG: &str = "
    CREATE TABLE IF NOT EXISTS test_applied (epoch TEXT NOT NULL, sequence INTEGER NOT NULL);
    CREATE TRIGGER IF NOT EXISTS test_applied_log AFTER UPDATE OF epoch, sequence ON sync_state
    WHEN NEW.epoch <> OLD.epoch OR NEW.sequence <> OLD.sequence
    BEGIN INSERT INTO test_applied (epoch, sequence) VALUES (NEW.epoch, NEW.sequence); END;
";

/// A register's file made ready, with the log of what it applies, before
/// its program opens it.
fn logged_register(shop: &mut Shop, name: &str) -> Uuid {
    let me = shop.add_register(name);
    let replica = help::open_register(&shop.file_of(me), me);
    replica.connection().execute_batch(APPLIED_LOG).unwrap();
    me
}

/// The messages a register's file logs as applied more than once, and how
/// many it applied in all.
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

/// Settings that try these gateways in turn.
fn over(gateways: &[String], credential: String) -> WsSettings {
    let mut settings = WsSettings::new(gateways[0].clone(), credential);
    settings.urls = gateways.to_vec();
    settings
}

/// Every register holds every product of the shop, every receipt sold is
/// filed once, under its register, and no register applied a message
/// twice.
fn all_in_step(shop: &mut Shop, registers: &[Register], sold: &[(Uuid, Uuid, i64)]) {
    let products = shop.product_names();
    help::wait_until("every register to hold every product", || {
        registers.iter().all(|r| r.names_held() == products)
    });
    help::wait_until("every receipt filed", || {
        registers.iter().all(|r| r.unfiled() == 0)
    });
    let mut sold = sold.to_vec();
    sold.sort();
    assert_eq!(shop.receipts(), sold, "each receipt filed once");
    for register in registers {
        let (twice, all) = applied_twice(&register.file);
        assert!(
            twice.is_empty(),
            "register {} applied these messages more than once: {twice:?}",
            register.me
        );
        assert!(all > 0, "register {} applied nothing", register.me);
    }
}

#[test]
fn registers_spread_over_two_gateways_go_on_through_the_other_when_theirs_is_killed() {
    let mut shop = Shop::open();
    let mut a = Gateway::start(&shop, &[]);
    let mut b = Gateway::start(&shop, &[]);
    let ids: Vec<Uuid> = (0..4)
        .map(|i| logged_register(&mut shop, &format!("R{i}")))
        .collect();
    // Half try A first, half B.
    let mut registers: Vec<Register> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| {
            let gateways = if i % 2 == 0 {
                vec![a.url(), b.url()]
            } else {
                vec![b.url(), a.url()]
            };
            let settings = over(&gateways, a.issue(*id));
            Register::with_transport(&shop, *id, move |replica| {
                Ws::new(settings, replica).unwrap()
            })
        })
        .collect();
    for register in &mut registers {
        register.expect("connected", connected);
    }

    // A killed mid-stream, and later, once it is back, B.
    let mut sold = Vec::new();
    for round in 0..30i64 {
        match round {
            10 => a.kill(),
            20 => a.start_again(),
            22 => b.kill(),
            _ => {}
        }
        shop.add_product(&format!("P{round:02}"), 100 + round);
        for r in &registers {
            sold.push((r.sell(round), r.me, round));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    all_in_step(&mut shop, &registers, &sold);
    // Each lost its link once at least, and connected again by itself.
    for register in &mut registers {
        let seen = register.drain();
        let history = register.history();
        let lost = history
            .iter()
            .position(|s| s.starts_with("disconnected"))
            .unwrap_or_else(|| panic!("register {} never lost its link: {seen:?}", register.me));
        assert!(
            history[lost..].iter().any(|s| s == "connected"),
            "register {} connected again",
            register.me
        );
    }
}

/// Waits until the register has said what it applied last (an Up the
/// gateway took) and waits for news: nothing of its own is in flight.
fn until_idle(register: &mut Register) {
    help::wait_until("the register to report and wait", || {
        register.drain();
        let history = register.history();
        let since = history
            .iter()
            .rposition(|s| s.starts_with("applied"))
            .unwrap_or(0);
        history[since..].iter().any(|s| s.starts_with("sent"))
            && history.last().is_some_and(|s| s.starts_with("waiting"))
    });
}

/// How many of its uploads the server has answered a replica (of the
/// last hour).
fn answered(shop: &mut Shop, me: Uuid) -> i64 {
    shop.pg
        .query_one(
            "SELECT count(*) FROM sync.answered WHERE replica = $1",
            &[&me],
        )
        .unwrap()
        .get(0)
}

#[test]
fn a_register_whose_link_goes_silent_moves_to_the_other_gateway_and_its_late_up_changes_nothing() {
    let mut shop = Shop::open();
    let a = Gateway::start(&shop, &[]);
    let b = Gateway::start(&shop, &[]);
    let silent = Proxy::to(&a);
    let me = logged_register(&mut shop, "R");
    // A through a network that may go silent, then B. A request
    // unanswered for 2 s ends the link (pings, every 5 s here, would end
    // it after two unanswered).
    let mut settings = over(&[silent.url(), b.url()], a.issue(me));
    settings.request_timeout = Duration::from_secs(2);
    settings.ping_every = Duration::from_secs(5);
    let mut register = Register::with_transport(&shop, me, move |replica| {
        Ws::new(settings, replica).unwrap()
    });
    register.expect("connected to A", connected);
    shop.add_product("Tea", 250);
    help::wait_until("the register to hold Tea", || {
        register.names_held() == ["Tea"]
    });
    until_idle(&mut register);

    // The network to A stops carrying; A hears nothing, not even the link
    // ending, and holds the register's topic open (its idle timeout is 90
    // s). A change and a sale meanwhile: A sends the change into the
    // silence, and the register's Up goes into it.
    let before = answered(&mut shop, me);
    silent.freeze();
    shop.add_product("Cake", 400);
    let mut sold = vec![(register.sell(990), me, 990)];
    register.expect("the Up unanswered, the silent link given up", |s| {
        matches!(s, Status::Disconnected { error, .. } if error.to_string().contains("no answer"))
    });
    register.expect("connected to B", connected);
    all_in_step(&mut shop, std::slice::from_ref(&register), &sold);
    assert_eq!(
        answered(&mut shop, me),
        before + 1,
        "B filed the Up again, under a fresh number"
    );

    // The network carries again: A gets the Up it held, late, and files
    // it; the receipt is on the server once all the same.
    silent.thaw();
    help::wait_until("A to file the Up it held", || {
        answered(&mut shop, me) > before + 1
    });
    shop.add_product("Scone", 300);
    sold.push((register.sell(5), me, 5));
    all_in_step(&mut shop, std::slice::from_ref(&register), &sold);
}

/// One register on two links at once, one to each gateway: it takes what
/// either sends, acknowledges each message on the link it came on, and
/// sends every Up on both.
struct BothGateways {
    a: Ws,
    b: Ws,
}

enum Via {
    A(Held),
    B(Held),
}

impl Transport for BothGateways {
    type Handle = Via;

    fn connect(&mut self) -> Result<(), Error> {
        self.a.connect()?;
        self.b.connect()
    }

    fn next(&mut self) -> Result<Option<Delivery<Via>>, Error> {
        if let Some(d) = self.a.next()? {
            return Ok(Some(Delivery {
                handle: Via::A(d.handle),
                bytes: d.bytes,
            }));
        }
        Ok(self.b.next()?.map(|d| Delivery {
            handle: Via::B(d.handle),
            bytes: d.bytes,
        }))
    }

    fn ack(&mut self, handle: Via) -> Result<(), Error> {
        match handle {
            Via::A(held) => self.a.ack(held),
            Via::B(held) => self.b.ack(held),
        }
    }

    fn hold(&mut self, handle: Via, retry_in: Duration) -> Result<(), Error> {
        match handle {
            Via::A(held) => self.a.hold(held, retry_in),
            Via::B(held) => self.b.hold(held, retry_in),
        }
    }

    fn send(&mut self, up: &Upload) -> Result<(), Error> {
        self.a.send(up)?;
        self.b.send(up)
    }

    fn wait(&mut self, timeout: Duration) -> Result<bool, Error> {
        let until = Instant::now() + timeout;
        loop {
            if self.a.wait(Duration::ZERO)? || self.b.wait(Duration::from_millis(20))? {
                return Ok(true);
            }
            if Instant::now() >= until {
                return Ok(false);
            }
        }
    }

    fn waker(&self) -> Option<Waker> {
        let (a, b) = (self.a.waker()?, self.b.waker()?);
        Some(Arc::new(move || {
            a();
            b();
        }))
    }
}

#[test]
fn a_register_connected_to_both_gateways_at_once_applies_each_message_once_and_is_filed_once() {
    let mut shop = Shop::open();
    let a = Gateway::start(&shop, &[]);
    let b = Gateway::start(&shop, &[]);
    let me = logged_register(&mut shop, "R");
    let (to_a, to_b) = (
        WsSettings::new(a.url(), a.issue(me)),
        WsSettings::new(b.url(), b.issue(me)),
    );
    let mut register = Register::with_transport(&shop, me, move |replica| BothGateways {
        a: Ws::new(to_a, replica).unwrap(),
        b: Ws::new(to_b, replica).unwrap(),
    });
    register.expect("connected to both", connected);

    let mut sold = Vec::new();
    for round in 0..10i64 {
        shop.add_product(&format!("P{round:02}"), 100 + round);
        sold.push((register.sell(round), me, round));
        std::thread::sleep(Duration::from_millis(50));
    }
    all_in_step(&mut shop, std::slice::from_ref(&register), &sold);
    // Both gateways sent the messages: the replica's chain took each once
    // and found the second already applied.
    register.drain();
    let twice = register
        .history()
        .iter()
        .filter(|s| s.starts_with("applied: Already"))
        .count();
    assert!(
        twice > 0,
        "a message came through both gateways: {:?}",
        register.history()
    );
}

//! Faults under the gateway, each followed by a check that every register
//! holds exactly what it should and every receipt is filed once: the
//! gateway killed (`kill -9`) mid-stream and started again; the socket
//! cut in the middle of a frame; a device that dies between applying a
//! message and acknowledging it; PostgreSQL restarted under the gateway.

mod help;

use std::time::Duration;

use help::{Gateway, Proxy, Register, Shop};
use magic_sync_replica::transport::ws::{Held, Ws, WsSettings};
use magic_sync_replica::transport::{Delivery, Status, Transport, Waker};
use magic_sync_replica::{Error, Received, Upload};
use uuid::Uuid;

fn connected(s: &Status) -> bool {
    matches!(s, Status::Connected)
}

/// Every register holds every product of the shop, and every receipt
/// sold is filed once, under its register.
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
}

#[test]
fn the_gateway_killed_mid_stream_and_started_again_loses_nothing() {
    let mut shop = Shop::open();
    let mut gateway = Gateway::start(&shop, &[]);
    let ids: Vec<_> = (0..3)
        .map(|i| shop.add_register(&format!("R{i}")))
        .collect();
    let mut registers: Vec<Register> = ids
        .iter()
        .map(|id| Register::start(&shop, &gateway, *id))
        .collect();
    for register in &mut registers {
        register.expect("connected", connected);
    }
    let mut sold = Vec::new();
    for round in 0..20i64 {
        shop.add_product(&format!("P{round:02}"), 100 + round);
        for r in &registers {
            sold.push((r.sell(round), r.me, round));
        }
        if round == 10 {
            gateway.kill();
            gateway.start_again();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    all_in_step(&mut shop, &registers, &sold);
}

#[test]
fn the_socket_cut_in_the_middle_of_a_frame_loses_nothing_and_files_nothing_twice() {
    let mut shop = Shop::open();
    let gateway = Gateway::start(&shop, &[]);
    let proxy = Proxy::to(&gateway);
    let me = shop.add_register("R");
    let token = gateway.issue(me);
    let settings = WsSettings::new(proxy.url(), token);
    let mut register = Register::with_transport(&shop, me, move |replica| {
        Ws::new(settings, replica).unwrap()
    });
    register.expect("connected", connected);
    shop.add_product("Tea", 250);
    help::wait_until("the register to hold Tea", || {
        register.names_held() == ["Tea"]
    });
    std::thread::sleep(Duration::from_millis(300));
    register.drain();

    proxy.cut_the_next_frame_midway();
    let sold = vec![(register.sell(990), me, 990)];
    register.expect("the link cut", |s| matches!(s, Status::Disconnected { .. }));
    register.expect("connected again", connected);
    all_in_step(&mut shop, std::slice::from_ref(&register), &sold);
}

/// The WebSocket client, but the first acknowledgement of a message that
/// carried a product is never sent: the device died after committing it.
struct DiesBeforeAcknowledging {
    ws: Ws,
    died: bool,
}

impl Transport for DiesBeforeAcknowledging {
    type Handle = Held;
    fn connect(&mut self) -> Result<(), Error> {
        self.ws.connect()
    }
    fn next(&mut self) -> Result<Option<Delivery<Held>>, Error> {
        self.ws.next()
    }
    fn ack(&mut self, handle: Held) -> Result<(), Error> {
        if !self.died {
            self.died = true;
            return Err(Error::TransportDown("died before acknowledging".into()));
        }
        self.ws.ack(handle)
    }
    fn hold(&mut self, handle: Held, retry_in: Duration) -> Result<(), Error> {
        self.ws.hold(handle, retry_in)
    }
    fn send(&mut self, up: &Upload) -> Result<(), Error> {
        self.ws.send(up)
    }
    fn wait(&mut self, timeout: Duration) -> Result<bool, Error> {
        self.ws.wait(timeout)
    }
    fn waker(&self) -> Option<Waker> {
        self.ws.waker()
    }
}

#[test]
fn a_device_that_dies_between_applying_and_acknowledging_is_sent_the_message_again_and_it_changes_nothing(
) {
    let mut shop = Shop::open();
    let gateway = Gateway::start(&shop, &[]);
    let me = shop.add_register("R");
    let settings = WsSettings::new(gateway.url(), gateway.issue(me));
    let mut register =
        Register::with_transport(&shop, me, move |replica| DiesBeforeAcknowledging {
            ws: Ws::new(settings, replica).unwrap(),
            died: false,
        });
    register.expect("connected", connected);
    register.expect(
        "the first message applied, and its acknowledgement lost",
        |s| matches!(s, Status::Disconnected { .. }),
    );
    register.expect("the same message delivered again, changing nothing", |s| {
        matches!(s, Status::Applied(Received::Already { .. }))
    });
    shop.add_product("Tea", 250);
    let sold = vec![(register.sell(5), me, 5)];
    all_in_step(&mut shop, std::slice::from_ref(&register), &sold);
}

#[test]
fn postgresql_restarted_under_the_gateway_loses_nothing() {
    let mut shop = Shop::open();
    let gateway = Gateway::start(&shop, &[]);
    let ids: Vec<_> = (0..2)
        .map(|i| shop.add_register(&format!("R{i}")))
        .collect();
    let mut registers: Vec<Register> = ids
        .iter()
        .map(|id| Register::start(&shop, &gateway, *id))
        .collect();
    for register in &mut registers {
        register.expect("connected", connected);
    }
    shop.add_product("Tea", 250);
    help::wait_until("every register to hold Tea", || {
        registers.iter().all(|r| r.names_held() == ["Tea"])
    });

    shop.cluster.restart_immediately();
    shop.reconnect();
    let sold: Vec<_> = registers.iter().map(|r| (r.sell(77), r.me, 77)).collect();
    shop.add_product("Coffee", 300);
    all_in_step(&mut shop, &registers, &sold);
}

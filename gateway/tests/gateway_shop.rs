//! The shop end to end over the gateway: the relay worker writes each
//! register's messages to the queue, the gateway (its own binary, as the
//! gateway role) is woken by the queue's NOTIFY and carries them over the
//! aweft link, and each register (a SQLite file running the device loop
//! over the WebSocket client) applies them and sends its receipts up. No
//! `CALL` anywhere.

mod help;

use help::{Gateway, Register, Shop};
use magic_sync_replica::transport::ws::{WsLink, WsSettings};
use magic_sync_replica::transport::Status;

fn connected(s: &Status) -> bool {
    matches!(s, Status::Connected)
}

#[test]
fn catalog_changes_reach_every_register_and_receipts_written_offline_are_filed_once_it_is_back() {
    let mut shop = Shop::open();
    let gateway = &mut Gateway::start(&shop, &[]);
    let ids: Vec<_> = (0..2)
        .map(|i| shop.add_register(&format!("R{i}")))
        .collect();
    let mut registers: Vec<Register> = ids
        .iter()
        .map(|id| Register::start(&shop, gateway, *id))
        .collect();
    for register in &mut registers {
        register.expect("connected", connected);
    }

    shop.add_product("Tea", 250);
    help::wait_until("every register to hold Tea", || {
        registers.iter().all(|r| r.names_held() == ["Tea"])
    });

    assert!(gateway.interrupt(), "Ctrl-C stops the gateway cleanly");
    let receipts: Vec<_> = registers
        .iter()
        .flat_map(|r| [r.sell(100), r.sell(250)].map(|id| (id, r.me)))
        .collect();
    shop.add_product("Coffee", 300);

    gateway.start_again();
    help::wait_until("every register to hold Coffee too", || {
        registers
            .iter()
            .all(|r| r.names_held() == ["Coffee", "Tea"])
    });
    help::wait_until("every receipt filed and its Filed applied", || {
        registers.iter().all(|r| r.unfiled() == 0)
    });
    let mut expected: Vec<_> = receipts
        .iter()
        .zip([100, 250].iter().cycle())
        .map(|((id, me), total)| (*id, *me, *total))
        .collect();
    expected.sort();
    assert_eq!(
        shop.receipts(),
        expected,
        "each receipt filed once, under its register"
    );
}

#[test]
fn several_registers_on_one_link_and_one_register_per_link_side_by_side_hold_the_same() {
    let mut shop = Shop::open();
    let gateway = Gateway::start(&shop, &[]);
    let shared_ids: Vec<_> = (0..3)
        .map(|i| shop.add_register(&format!("S{i}")))
        .collect();
    let own_ids: Vec<_> = (0..2)
        .map(|i| shop.add_register(&format!("O{i}")))
        .collect();
    // The back office's link carries three registers, one credential each.
    let mut settings = WsSettings::new(gateway.url(), gateway.issue(shared_ids[0]));
    settings
        .credentials
        .extend(shared_ids[1..].iter().map(|id| gateway.issue(*id)));
    let link = WsLink::new(settings);
    let mut registers: Vec<Register> = shared_ids
        .iter()
        .map(|id| Register::on(&shop, &link, *id))
        .chain(
            own_ids
                .iter()
                .map(|id| Register::start(&shop, &gateway, *id)),
        )
        .collect();
    for register in &mut registers {
        register.expect("connected", connected);
    }

    shop.add_product("Tea", 250);
    shop.add_product("Scones", 400);
    help::wait_until("every register to hold both products", || {
        registers
            .iter()
            .all(|r| r.names_held() == ["Scones", "Tea"])
    });
    let mut expected: Vec<_> = registers
        .iter()
        .enumerate()
        .map(|(i, r)| (r.sell(1000 + i as i64), r.me, 1000 + i as i64))
        .collect();
    expected.sort();
    help::wait_until("every receipt filed", || {
        registers.iter().all(|r| r.unfiled() == 0)
    });
    assert_eq!(
        shop.receipts(),
        expected,
        "each filed once, under its own register"
    );
}

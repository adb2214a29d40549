//! A relay that fell far behind (issue 37): a million notes waiting, made
//! while no pass ran, drained by passes of `magic_sync.notes_per_pass`
//! each, the registers taking what each pass wrote. What that must not
//! change: every register ends holding exactly the server's products; each
//! product's prices arrive in their order and none twice; the messages
//! stay within the limits however much a pass carries; and the passes
//! take the backlog a batch at a time, none left behind. Asserted by what
//! the registers applied and what the passes said, never by the clock.

mod common;

use common::*;
use magic_sync_replica::Replica;

/// Products the backlog changes, each as often as the others.
const PRODUCTS: i64 = 1_000;

/// Changes to every product: PRODUCTS × ROUNDS notes in all.
const ROUNDS: i64 = 1_000;

/// What the server sends a message at most, set below the defaults so
/// that a pass's rows must be cut into several messages.
const MESSAGE_ROWS: usize = 200;
const MESSAGE_BYTES: usize = 32 * 1024;

/// A register whose SQLite file logs every price it applies, in order.
fn a_register_logging_prices(shop: &mut Shop, name: &str) -> Replica {
    let me = shop.add_register(name);
    let register = open_register(&shop.file_of(me), me);
    log_prices_applied(&register);
    register
}

/// Takes, checks against the limits, applies and acknowledges every
/// message waiting for a register; answers how many rows they carried.
fn take_within_the_limits(shop: &mut Shop, register: &mut Replica) -> usize {
    let mut rows = 0;
    while let Some((id, bytes)) = next(&mut shop.pg, register) {
        assert!(
            bytes.len() <= MESSAGE_BYTES,
            "a message of {} bytes, past the limit of {MESSAGE_BYTES}",
            bytes.len()
        );
        if let Some(carried) = rows_of_down(&bytes) {
            assert!(
                carried <= MESSAGE_ROWS,
                "a message of {carried} rows, past the limit of {MESSAGE_ROWS}"
            );
            rows += carried;
        }
        register.receive(&bytes).expect("applies");
        assert!(ack(&mut shop.pg, register, &id), "acknowledged");
    }
    report(&mut shop.pg, register);
    rows
}

fn notes_waiting(shop: &mut Shop) -> i64 {
    shop.pg
        .query_one("SELECT count(*) FROM sync.notes", &[])
        .unwrap()
        .get(0)
}

#[test]
fn a_backlog_of_a_million_notes_is_drained_a_batch_a_pass_with_every_register_converged() {
    let mut shop = Shop::open_with(&[
        &format!("magic_sync.message_rows={MESSAGE_ROWS}"),
        &format!("magic_sync.message_bytes={MESSAGE_BYTES}"),
    ]);
    let mut registers: Vec<Replica> = (1..=3)
        .map(|n| a_register_logging_prices(&mut shop, &format!("Register {n}")))
        .collect();
    shop.pg
        .execute(
            "INSERT INTO shop.products (id, name, price_cents) \
             SELECT gen_random_uuid(), 'P' || i, 0 FROM generate_series(1, $1::bigint) AS i",
            &[&PRODUCTS],
        )
        .unwrap();
    sync_all(&mut shop, &mut registers);
    assert_each_holds_the_servers_products(&mut shop, &registers);

    // The backlog: every product's price raised ROUNDS times, a round a
    // transaction, while no pass runs.
    for _ in 0..ROUNDS {
        shop.run("UPDATE shop.products SET price_cents = price_cents + 1");
    }
    let backlog = notes_waiting(&mut shop);
    assert_eq!(backlog, PRODUCTS * ROUNDS, "a note for every change");

    // Passes, each taking a batch, until none is left; the registers take
    // what each wrote before the next.
    let batch: i64 = shop
        .pg
        .query_one(
            "SELECT current_setting('magic_sync.notes_per_pass')::bigint",
            &[],
        )
        .unwrap()
        .get(0);
    let mut passes = 0;
    let mut rows_each = vec![0; registers.len()];
    while notes_waiting(&mut shop) > 0 {
        let before = notes_waiting(&mut shop);
        shop.relay();
        passes += 1;
        let after = notes_waiting(&mut shop);
        assert_eq!(
            before - after,
            batch.min(before),
            "a pass took other than a batch of the backlog"
        );
        for (register, rows) in registers.iter_mut().zip(rows_each.iter_mut()) {
            *rows += take_within_the_limits(&mut shop, register);
        }
    }
    assert_eq!(passes, (backlog + batch - 1) / batch);
    shop.relay();
    for register in registers.iter_mut() {
        take_within_the_limits(&mut shop, register);
    }

    // Converged: each register holds the server's products, column for
    // column, every one at its last price.
    assert_each_holds_the_servers_products(&mut shop, &registers);
    let prices: Vec<i64> = shop
        .products()
        .into_iter()
        .map(|(_, _, price, _)| price)
        .collect();
    assert!(
        prices.iter().all(|&p| p == ROUNDS),
        "a change lost on the server"
    );

    // In order and none twice: each product's prices, as applied, rise;
    // and a product changed many times in one pass went once that pass.
    for (register, rows) in registers.iter().zip(&rows_each) {
        let applied = prices_applied(register);
        assert_eq!(applied.len() as i64, PRODUCTS);
        for prices in applied.values() {
            assert!(
                prices.windows(2).all(|w| w[0] < w[1]),
                "a product's prices applied out of order or twice: {prices:?}"
            );
            assert_eq!(prices.last(), Some(&ROUNDS));
        }
        assert!(
            *rows as i64 <= PRODUCTS * passes,
            "{rows} rows sent for {passes} passes over {PRODUCTS} products: a row more than once a pass"
        );
    }
}

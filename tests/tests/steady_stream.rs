//! The relay worker under a steady stream of writes (issue 37): while notes
//! arrive faster than passes clear them, it lets them gather a bounded few
//! milliseconds before the next pass (pg_magic_sync/src/worker/pacing.rs).
//! What that must not change: nothing lost, nothing applied twice, each
//! row's changes applied in their order; and a change alone, after quiet,
//! is relayed by a pass that waited for nothing. Asserted by what the
//! register applied and by what the worker says it did
//! (`pg_stat_activity`), never by the clock.

mod common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use common::*;
use magic_sync_replica::Replica;
use postgres::Client;

/// Long enough for a busy machine; each wait ends as soon as it may.
const PATIENCE: Duration = Duration::from_secs(60);

/// Products the stream changes, in turn.
const PRODUCTS: usize = 20;

fn shop_with_worker() -> Shop {
    Shop::open_with(&[
        "shared_preload_libraries=magic_sync",
        "magic_sync.database=shop",
        "magic_sync.idle=1",
    ])
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let began = Instant::now();
    while !done() {
        assert!(began.elapsed() < PATIENCE, "waited {PATIENCE:?} for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// What the worker says of its pacing while it sleeps: (passes, passes
/// that waited for notes to gather, the wait before the last pass in ms).
fn pacing(pg: &mut Client) -> Option<(u64, u64, u64)> {
    let row = pg
        .query_opt(
            "SELECT query FROM pg_stat_activity \
              WHERE backend_type = 'magic_sync relay' AND datname = 'shop' AND state = 'idle'",
            &[],
        )
        .unwrap()?;
    let shown: String = row.get(0);
    // "relay idle: N passes, M after gathering notes (T ms in all), the
    // last after L ms"
    let numbers: Vec<u64> = shown
        .split(|c: char| !c.is_ascii_digit())
        .filter(|n| !n.is_empty())
        .map(|n| n.parse().unwrap())
        .collect();
    match numbers[..] {
        [passes, gathered, _, last] => Some((passes, gathered, last)),
        _ => None,
    }
}

/// The shop with its worker, `PRODUCTS` products at price 0, and a
/// register holding them that logs every price it applies.
fn a_register_logging_prices() -> (Shop, Replica) {
    let mut shop = shop_with_worker();
    wait_until("the relay worker", || pacing(&mut shop.pg).is_some());
    let a = shop.add_register("Register 1");
    let mut register = open_register(&shop.file_of(a), a);
    log_prices_applied(&register);
    shop.pg
        .execute(
            "INSERT INTO shop.products (id, name, price_cents) \
             SELECT gen_random_uuid(), 'P' || i, 0 FROM generate_series(0, $1::int - 1) AS i",
            &[&(PRODUCTS as i32)],
        )
        .unwrap();
    deliver_until_it_holds_the_servers(&mut shop, &mut register);
    (shop, register)
}

fn deliver_until_it_holds_the_servers(shop: &mut Shop, register: &mut Replica) {
    wait_until("the register to hold the server's products", || {
        deliver(&mut shop.pg, register);
        report(&mut shop.pg, register);
        held_by(register) == shop.products()
    });
}

#[test]
fn a_steady_stream_is_applied_whole_once_and_in_order() {
    let (mut shop, mut register) = a_register_logging_prices();
    let (passes_before, gathered_before, _) = pacing(&mut shop.pg).unwrap();
    let changes = 1500;
    // The writer: one product after another, each price higher than that
    // product's last, a commit every millisecond or so.
    let url = shop.cluster().url("shop");
    let writer = std::thread::spawn(move || {
        let mut pg = Client::connect(&url, postgres::NoTls).unwrap();
        let update = pg
            .prepare("UPDATE shop.products SET price_cents = $1 WHERE name = $2")
            .unwrap();
        for change in 1..=changes {
            let name = format!("P{}", change % PRODUCTS as i64);
            pg.execute(&update, &[&change, &name]).unwrap();
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    // The register takes what comes while the stream goes on.
    while !writer.is_finished() {
        deliver(&mut shop.pg, &mut register);
        report(&mut shop.pg, &mut register);
        std::thread::sleep(Duration::from_millis(5));
    }
    writer.join().unwrap();
    deliver_until_it_holds_the_servers(&mut shop, &mut register);

    // Nothing lost: the register holds each product at its last price;
    // nothing twice and in order: each product's prices, as applied, rise.
    let servers: HashMap<Vec<u8>, i64> = shop
        .products()
        .into_iter()
        .map(|(id, _, price, _)| (id.as_bytes().to_vec(), price))
        .collect();
    let applied = prices_applied(&register);
    assert_eq!(applied.len(), PRODUCTS);
    for (id, prices) in &applied {
        assert!(
            prices.windows(2).all(|w| w[0] < w[1]),
            "a product's prices applied out of order or twice: {prices:?}"
        );
        assert_eq!(prices.last(), servers.get(id), "the last price lost");
    }
    let applied_changes: usize = applied.values().map(|p| p.len() - 1).sum();
    assert!(applied_changes <= changes as usize);

    // The passes grew with the stream: some waited for notes to gather,
    // and there were fewer passes than changes.
    wait_until("the worker to sleep", || pacing(&mut shop.pg).is_some());
    let (passes, gathered, _) = pacing(&mut shop.pg).unwrap();
    assert!(
        gathered > gathered_before,
        "no pass waited for notes to gather while they streamed in"
    );
    assert!(
        passes - passes_before < changes as u64,
        "a pass for every change: {} passes",
        passes - passes_before
    );
}

#[test]
fn a_change_after_quiet_is_relayed_by_a_pass_that_waited_for_nothing() {
    let (mut shop, mut register) = a_register_logging_prices();
    // Quiet: a pass with nothing to plan (the worker's idle pass, every
    // second) ends whatever stream setting up made.
    let (passes, _, _) = pacing(&mut shop.pg).unwrap();
    wait_until("a pass with nothing to plan", || {
        pacing(&mut shop.pg).is_some_and(|(now, _, _)| now > passes + 1)
    });
    for price in [100, 200, 300] {
        let (passes, gathered, _) = pacing(&mut shop.pg).unwrap();
        shop.run(&format!(
            "UPDATE shop.products SET price_cents = {price} WHERE name = 'P1'"
        ));
        deliver_until_it_holds_the_servers(&mut shop, &mut register);
        wait_until("the worker to sleep after its pass", || {
            pacing(&mut shop.pg).is_some_and(|(now, _, _)| now > passes)
        });
        let (_, gathered_now, _) = pacing(&mut shop.pg).unwrap();
        assert_eq!(
            gathered_now, gathered,
            "a change alone waited for notes to gather before its pass"
        );
    }
}

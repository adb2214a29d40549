//! A register far behind (issue 37, `magic_sync.messages_ahead`): once
//! that many messages wait for it, passes plan nothing for it and keep
//! what changed as owed; the first pass after it took them sends what it
//! is owed in one go, each row once, as it is then. What that must not
//! change: nothing lost, nothing applied twice, each row's versions in
//! order, the message limits held; the register ends holding exactly what
//! the server says it should. Asserted by what the registers applied and
//! what the server's outbox holds, never by the clock.

mod common;
#[path = "common/device.rs"]
mod device;
#[path = "common/filing_shop.rs"]
mod filing_shop;

use common::*;
use filing_shop::rows_by_register;
use magic_sync_replica::{Received, Replica, Settings, Table, Tables};
use uuid::Uuid;

/// The default of `magic_sync.messages_ahead`.
const AHEAD: i64 = 4;

/// A register counts as far behind as soon as AHEAD messages wait for it,
/// however young (by default the oldest must have waited a second: a test
/// would wait that long at every pass).
const AT_ONCE: &str = "magic_sync.behind_after=0";

/// Passes while the late register takes nothing.
const PASSES: i64 = 20;

/// Products, and the labels that point at them: a table that points at
/// the products keeps them out of the journal (every register's plan is
/// its own), the case this test is about.
const LABELS: &str = "
    CREATE TABLE shop.labels (
        id          uuid PRIMARY KEY,
        product_id  uuid NOT NULL REFERENCES shop.products,
        text        text NOT NULL);
    SELECT sync.declare_table('shop.labels', sync => 'broadcast');
";

const REGISTER_LABELS: &str = "
    CREATE TABLE IF NOT EXISTS labels (
        id          BLOB PRIMARY KEY NOT NULL,
        product_id  BLOB NOT NULL,
        text        TEXT NOT NULL);
";

/// A register of the products and one more catalog table, `table`, whose
/// SQLite schema is `schema`.
fn open_register_with(shop: &mut Shop, name: &str, table: &str, schema: &str) -> Replica {
    let me = shop.add_register(name);
    open_replica(
        &shop.file_of(me),
        &format!("{REGISTER_SCHEMA}{schema}"),
        Tables::new(vec![Table::catalog("products"), Table::catalog(table)]),
        me,
        Settings::default(),
    )
}

fn open_labelled_register(shop: &mut Shop, name: &str) -> Replica {
    let register = open_register_with(shop, name, "labels", REGISTER_LABELS);
    log_prices_applied(&register);
    register
}

/// Fifty products P1..P50, each with a label.
fn stock_the_shop(shop: &mut Shop) {
    shop.run(LABELS);
    shop.run(
        "INSERT INTO shop.products (id, name, price_cents) \
         SELECT gen_random_uuid(), 'P' || i, 100 FROM generate_series(1, 50) AS i; \
         INSERT INTO shop.labels (id, product_id, text) \
         SELECT gen_random_uuid(), id, 'label of ' || name FROM shop.products",
    );
}

/// Pass `n`'s changes: P1's price every pass, five other products in turn,
/// a label rewritten; on pass 10 a product and its label go, on pass 15 one
/// comes.
fn change_for_pass(shop: &mut Shop, n: i64) {
    shop.run(&format!(
        "UPDATE shop.products SET price_cents = price_cents + 1 WHERE name = 'P1'; \
         UPDATE shop.products SET price_cents = price_cents + 10 \
         WHERE substr(name, 2)::int BETWEEN {from} AND {to}; \
         UPDATE shop.labels SET text = 'pass {n}' \
         WHERE product_id = (SELECT id FROM shop.products WHERE name = 'P{label}')",
        from = 2 + (n * 5) % 45,
        to = 6 + (n * 5) % 45,
        label = 2 + n % 40,
    ));
    if n == 10 {
        shop.run(
            "DELETE FROM shop.labels WHERE product_id = (SELECT id FROM shop.products WHERE name = 'P50'); \
             DELETE FROM shop.products WHERE name = 'P50'",
        );
    }
    if n == 15 {
        shop.run(
            "INSERT INTO shop.products (id, name, price_cents) VALUES (gen_random_uuid(), 'P51', 5); \
             INSERT INTO shop.labels (id, product_id, text) \
             SELECT gen_random_uuid(), id, 'new' FROM shop.products WHERE name = 'P51'",
        );
    }
}

fn waiting_for(shop: &mut Shop, register: &Replica) -> i64 {
    shop.pg
        .query_one(
            "SELECT count(*) FROM sync.outbox WHERE replica = $1 AND kind <> 'filed'",
            &[&register.me()],
        )
        .unwrap()
        .get(0)
}

fn owed_to(shop: &mut Shop, register: &Replica) -> i64 {
    shop.pg
        .query_one(
            "SELECT count(*) FROM sync.owed WHERE replica = $1",
            &[&register.me()],
        )
        .unwrap()
        .get(0)
}

/// Takes, applies and acknowledges every message waiting for a register,
/// each held to `rows_at_most`; answers the rows each Down carried.
fn take_each(shop: &mut Shop, register: &mut Replica, rows_at_most: usize) -> Vec<usize> {
    let mut carried = Vec::new();
    while let Some((id, bytes)) = next(&mut shop.pg, register) {
        if let Some(rows) = rows_of_down(&bytes) {
            assert!(
                rows <= rows_at_most,
                "a message of {rows} rows, past the limit of {rows_at_most}"
            );
            carried.push(rows);
        }
        let received = register.receive(&bytes).expect("applies");
        assert!(
            matches!(received, Received::Applied { .. } | Received::Ended { .. }),
            "each message applied once, in order: {received:?}"
        );
        assert!(ack(&mut shop.pg, register, &id), "acknowledged");
    }
    report(&mut shop.pg, register);
    carried
}

fn labels_of_server(shop: &mut Shop) -> Vec<(Uuid, Uuid, String)> {
    let mut rows: Vec<(Uuid, Uuid, String)> = shop
        .pg
        .query("SELECT id, product_id, text FROM shop.labels", &[])
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    rows.sort();
    rows
}

fn labels_held(register: &Replica) -> Vec<(Uuid, Uuid, String)> {
    rows_by_register(
        register.connection(),
        "SELECT id, product_id, text FROM labels",
    )
}

/// The register holds the server's products and labels, column for column,
/// and applied each product's prices in order, none twice.
fn assert_converged(shop: &mut Shop, register: &Replica) {
    assert_eq!(held_by(register), shop.products(), "the products");
    assert_eq!(labels_held(register), labels_of_server(shop), "the labels");
    for (product, prices) in prices_applied(register) {
        let mut sorted = prices.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(
            prices, sorted,
            "product {product:?}'s prices applied out of order or twice"
        );
    }
}

/// The shop with a register that keeps up and one that goes away, both
/// provisioned; then PASSES passes of changes, the steady register taking
/// what each wrote, the late one nothing. Answers the shop, the steady
/// register and how many messages it applied, and the late register.
fn passes_with_a_register_away() -> (Shop, Replica, usize, Replica) {
    let mut shop = Shop::open_with(&[AT_ONCE]);
    stock_the_shop(&mut shop);
    let mut steady = open_labelled_register(&mut shop, "Steady");
    let mut late = open_labelled_register(&mut shop, "Late");
    shop.relay();
    for register in [&mut steady, &mut late] {
        take_each(&mut shop, register, usize::MAX);
        shop.relay();
        take_each(&mut shop, register, usize::MAX);
    }
    assert_converged(&mut shop, &late);
    assert_eq!(owed_to(&mut shop, &late), 0);

    let mut steady_messages = 0;
    for n in 1..=PASSES {
        change_for_pass(&mut shop, n);
        shop.relay();
        steady_messages += take_each(&mut shop, &mut steady, usize::MAX).len();
        // The late register's outbox fills up to the bound, and stays
        // there: what changes past it is owed.
        assert_eq!(waiting_for(&mut shop, &late), n.min(AHEAD), "pass {n}");
        if n > AHEAD {
            assert!(owed_to(&mut shop, &late) > 0, "pass {n}: nothing owed");
        }
    }
    assert_eq!(steady_messages as i64, PASSES, "a message a pass");
    assert_converged(&mut shop, &steady);
    (shop, steady, steady_messages, late)
}

#[test]
fn a_register_that_falls_behind_catches_up_in_fewer_and_larger_messages() {
    let (mut shop, _steady, steady_messages, mut late) = passes_with_a_register_away();

    // Back: it takes what waited, which wakes no pass by itself here (no
    // worker); the next pass sends everything owed, in one message.
    let waited = take_each(&mut shop, &mut late, usize::MAX);
    assert_eq!(waited.len() as i64, AHEAD);
    shop.relay();
    let caught_up = take_each(&mut shop, &mut late, usize::MAX);
    assert_eq!(caught_up.len(), 1, "everything owed in one message");
    assert_eq!(owed_to(&mut shop, &late), 0, "nothing owed once sent");
    assert!(
        waited.len() + caught_up.len() < steady_messages,
        "{} messages for the late register against {steady_messages}",
        waited.len() + caught_up.len()
    );
    // Each row once: P1, changed every pass, is in it once; the message
    // carries fewer rows than the passes changed.
    assert!(caught_up[0] < (PASSES - AHEAD) as usize * 7);
    assert_converged(&mut shop, &late);
    let p1 = shop
        .pg
        .query_one("SELECT id FROM shop.products WHERE name = 'P1'", &[])
        .unwrap()
        .get::<_, Uuid>(0);
    let p1_prices = &prices_applied(&late)[p1.as_bytes().as_slice()];
    assert_eq!(
        p1_prices.len() as i64,
        1 + AHEAD + 1,
        "P1's prices: provisioned, a message each pass up to the bound, then the one owed: {p1_prices:?}"
    );
    assert_eq!(*p1_prices.last().unwrap(), 100 + PASSES);

    // And from then on it is sent a message a pass again.
    change_for_pass(&mut shop, PASSES + 1);
    shop.relay();
    assert_eq!(take_each(&mut shop, &mut late, usize::MAX).len(), 1);
    assert_converged(&mut shop, &late);
}

#[test]
fn what_a_register_behind_is_owed_is_sent_within_the_message_limits() {
    let (mut shop, _steady, steady_messages, mut late) = passes_with_a_register_away();
    take_each(&mut shop, &mut late, usize::MAX);
    const ROWS: usize = 8;
    shop.run(&format!("SET magic_sync.message_rows = {ROWS}"));
    shop.relay();
    let caught_up = take_each(&mut shop, &mut late, ROWS);
    let rows: usize = caught_up.iter().sum();
    assert!(
        caught_up.len() > 1,
        "cut into several messages: {caught_up:?}"
    );
    assert_eq!(
        caught_up.len(),
        rows.div_ceil(ROWS),
        "as few messages as the limit allows: {caught_up:?}"
    );
    assert!(AHEAD as usize + caught_up.len() < steady_messages);
    assert_converged(&mut shop, &late);
}

#[test]
fn a_register_behind_that_is_provisioned_again_owes_nothing_and_holds_the_servers_rows() {
    let (mut shop, _steady, _, mut late) = passes_with_a_register_away();
    shop.run(&format!(
        "UPDATE sync.replicas SET provision = true WHERE id = '{}'",
        late.me()
    ));
    shop.relay();
    assert_eq!(owed_to(&mut shop, &late), 0, "a snapshot sends it all");
    take_each(&mut shop, &mut late, usize::MAX);
    shop.relay();
    take_each(&mut shop, &mut late, usize::MAX);
    assert_eq!(held_by(&late), shop.products());
    assert_eq!(labels_held(&late), labels_of_server(&mut shop));
}

#[test]
fn with_messages_ahead_zero_every_pass_writes_a_message_to_every_register() {
    let mut shop = Shop::open_with(&["magic_sync.messages_ahead=0"]);
    stock_the_shop(&mut shop);
    let mut late = open_labelled_register(&mut shop, "Late");
    shop.relay();
    take_each(&mut shop, &mut late, usize::MAX);
    for n in 1..=10 {
        change_for_pass(&mut shop, n);
        shop.relay();
        assert_eq!(waiting_for(&mut shop, &late), n);
    }
    assert_eq!(owed_to(&mut shop, &late), 0);
    assert_eq!(take_each(&mut shop, &mut late, usize::MAX).len(), 10);
    assert_converged(&mut shop, &late);
}

#[test]
fn a_register_back_from_away_is_sent_what_it_is_owed_by_the_worker_with_no_change_to_wake_it() {
    let mut shop = Shop::open_with(&[
        "shared_preload_libraries=magic_sync",
        "magic_sync.database=shop",
        "magic_sync.idle=3600",
        AT_ONCE,
    ]);
    let notes_done = |shop: &mut Shop| {
        shop.pg
            .query_one("SELECT count(*) FROM sync.notes", &[])
            .unwrap()
            .get::<_, i64>(0)
            == 0
    };
    let mut late = open_labelled_register(&mut shop, "Late");
    stock_the_shop(&mut shop);
    device::wait_until("the register provisioned", || {
        take_each(&mut shop, &mut late, usize::MAX);
        notes_done(&mut shop)
            && held_by(&late) == shop.products()
            && labels_held(&late) == labels_of_server(&mut shop)
    });
    for n in 1..=PASSES {
        change_for_pass(&mut shop, n);
        device::wait_until("the worker's pass", || notes_done(&mut shop));
    }
    assert_eq!(waiting_for(&mut shop, &late), AHEAD);
    assert!(owed_to(&mut shop, &late) > 0);

    // Taking what waited wakes the worker, whose next pass sends what is
    // owed: no change is made meanwhile.
    device::wait_until("everything owed sent and taken", || {
        take_each(&mut shop, &mut late, usize::MAX);
        owed_to(&mut shop, &late) == 0 && waiting_for(&mut shop, &late) == 0
    });
    assert_converged(&mut shop, &late);
}

/// A note for one register: a table of its own, beside the products,
/// which nothing points at and so are the journal's (every register
/// follows its stand-in for them).
const NOTES: &str = "
    CREATE TABLE shop.notes_for (
        id          uuid PRIMARY KEY,
        register_id uuid NOT NULL,
        text        text NOT NULL);
    SELECT sync.declare_table('shop.notes_for', sync => 'assigned(register_id)');
";

const REGISTER_NOTES: &str = "
    CREATE TABLE IF NOT EXISTS notes_for (
        id          BLOB PRIMARY KEY NOT NULL,
        register_id BLOB NOT NULL,
        text        TEXT NOT NULL);
";

fn notes_held(register: &Replica) -> Vec<String> {
    let conn = register.connection();
    let mut statement = conn
        .prepare("SELECT text FROM notes_for ORDER BY text")
        .unwrap();
    let notes = statement
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    notes
}

#[test]
fn a_follower_far_behind_is_sent_what_the_journal_changed_with_what_it_is_owed_in_one_message() {
    let mut shop = Shop::open_with(&[AT_ONCE]);
    shop.run(NOTES);
    shop.run(
        "INSERT INTO shop.products (id, name, price_cents) \
         SELECT gen_random_uuid(), 'P' || i, 100 FROM generate_series(1, 10) AS i",
    );
    let mut late = open_register_with(&mut shop, "Late", "notes_for", REGISTER_NOTES);
    let me = late.me();
    shop.relay();
    take_each(&mut shop, &mut late, usize::MAX);
    shop.relay();
    take_each(&mut shop, &mut late, usize::MAX);
    let follows: i64 = shop
        .pg
        .query_one(
            "SELECT count(*) FROM sync.followers WHERE replica = $1",
            &[&me],
        )
        .unwrap()
        .get(0);
    assert_eq!(follows, 1, "it follows the journal's stand-in");

    // Each pass writes it the journal's message and one of its own, until
    // AHEAD wait; from then on neither: its notes are owed, and the
    // journal's messages it is not sent are mapped to its next message.
    let (mut waiting, mut owed) = (0, 0);
    for n in 1..=PASSES {
        shop.run(&format!(
            "UPDATE shop.products SET price_cents = price_cents + 1 WHERE name = 'P1'; \
             INSERT INTO shop.notes_for (id, register_id, text) \
             VALUES (gen_random_uuid(), '{me}', 'note {n:02}')"
        ));
        // The journal, meanwhile, takes a product back, changes one and
        // takes it back, and sends one that it takes back again before the
        // register is back.
        match n {
            7 => shop.run("UPDATE shop.products SET price_cents = 7 WHERE name = 'P3'"),
            8 => shop.run("DELETE FROM shop.products WHERE name = 'P10'"),
            10 => shop.run("DELETE FROM shop.products WHERE name = 'P3'"),
            9 => shop.run(
                "INSERT INTO shop.products (id, name, price_cents) VALUES (gen_random_uuid(), 'P11', 1)",
            ),
            12 => shop.run("DELETE FROM shop.products WHERE name = 'P11'"),
            _ => {}
        }
        shop.relay();
        if waiting >= AHEAD {
            owed += 1;
        } else {
            waiting += 2;
        }
        assert_eq!(waiting_for(&mut shop, &late), waiting, "pass {n}");
        assert_eq!(owed_to(&mut shop, &late), owed, "pass {n}");
    }
    assert!(owed > 0);
    // Its digests go with the report below, as if an hour had passed since
    // it last said them (the replica's own clock), and the server compares
    // them, as if ten minutes had passed since it last did. One passed over
    // has applied all it was sent, and what the server records for it (its
    // stand-in's rows) is more: they must not be compared then.
    late.connection()
        .execute("UPDATE sync_state SET digests_at = 0 WHERE id = 1", [])
        .unwrap();
    shop.run(&format!(
        "UPDATE sync.replicas SET digests_at = NULL WHERE id = '{me}'"
    ));
    let waited = take_each(&mut shop, &mut late, usize::MAX);
    assert_eq!(waited.len() as i64, waiting);
    shop.relay();
    let provisioned_again: i64 = shop
        .pg
        .query_one(
            "SELECT count(*) FROM sync.replicas WHERE id = $1 \
             AND (provision OR digests_provisioned_at IS NOT NULL)",
            &[&me],
        )
        .unwrap()
        .get(0);
    assert_eq!(
        provisioned_again, 0,
        "its digests, said while behind, not compared"
    );
    let caught_up = take_each(&mut shop, &mut late, usize::MAX);
    assert_eq!(
        caught_up,
        vec![owed as usize + 4],
        "in one message: its notes owed, P1 as it is, and the take-backs of P10, of P3 \
         (changed, then taken back, while it was away) and of P11 (sent and taken back \
         while it was away: a take-back of nothing it holds)"
    );
    assert_eq!(held_by(&late), shop.products());
    // The journal lets go of nothing the follower has not applied, and it
    // follows on: the next change comes as the stand-in's message.
    let behind: Option<i64> = shop
        .pg
        .query_one(
            "SELECT behind_since FROM sync.followers WHERE replica = $1",
            &[&me],
        )
        .unwrap()
        .get(0);
    assert_eq!(behind, None, "caught up");
    shop.run("UPDATE shop.products SET price_cents = price_cents + 1 WHERE name = 'P2'");
    shop.relay();
    assert_eq!(take_each(&mut shop, &mut late, usize::MAX), vec![1]);
    let unconfirmed: i64 = shop
        .pg
        .query_one("SELECT count(*) FROM sync.held WHERE replica = $1 AND sent > (SELECT applied_sequence FROM sync.replicas WHERE id = $1)", &[&me])
        .unwrap()
        .get(0);
    assert_eq!(
        unconfirmed, 0,
        "everything it holds applied, as the server records it"
    );
    let held_by_record: i64 = shop
        .pg
        .query_one(
            "SELECT count(*) FROM sync.held WHERE replica = $1 AND table_name = 'products'",
            &[&me],
        )
        .unwrap()
        .get(0);
    assert_eq!(held_by_record, shop.products().len() as i64);
    assert_eq!(owed_to(&mut shop, &late), 0);
    assert_eq!(held_by(&late), shop.products());
    let expected: Vec<String> = (1..=PASSES).map(|n| format!("note {n:02}")).collect();
    assert_eq!(notes_held(&late), expected);
}

#[test]
fn a_register_whose_messages_waited_less_than_behind_after_is_not_passed_over() {
    // The default: the oldest message must have waited a second. Passes
    // back to back leave a register that reports within its loop's
    // report_after several messages behind by what it said, and that is
    // not being away.
    let mut shop = Shop::open();
    stock_the_shop(&mut shop);
    let mut late = open_labelled_register(&mut shop, "Late");
    shop.relay();
    take_each(&mut shop, &mut late, usize::MAX);
    for n in 1..=10 {
        change_for_pass(&mut shop, n);
        shop.relay();
    }
    assert_eq!(waiting_for(&mut shop, &late), 10, "a message a pass");
    assert_eq!(owed_to(&mut shop, &late), 0);
    // Once the oldest has waited past it, the next pass passes it over.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    change_for_pass(&mut shop, 11);
    shop.relay();
    assert_eq!(waiting_for(&mut shop, &late), 10, "passed over");
    assert!(owed_to(&mut shop, &late) > 0);
    take_each(&mut shop, &mut late, usize::MAX);
    shop.relay();
    assert_eq!(take_each(&mut shop, &mut late, usize::MAX).len(), 1);
    assert_converged(&mut shop, &late);
}

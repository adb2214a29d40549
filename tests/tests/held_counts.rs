//! sync.held's counts (sql/held_counts.sql), which the status reads count
//! the rows in flight from: driven through the real engine (relay passes,
//! registers on SQLite files taking and confirming what they are sent,
//! refusing a row, provisioned again, leaving, a table undeclared, a dump
//! and restore), and held after every step to a recount of sync.held, and
//! the overview's rows in flight to the query that counted them row by row
//! before the counts (the reference).

mod common;

use std::collections::BTreeMap;

use common::*;
use magic_sync_replica::{Replica, Table, Tables};
use uuid::Uuid;

/// Register 2 refuses a product named 'Forbidden'.
const REFUSING: &str = "
    CREATE TRIGGER IF NOT EXISTS no_forbidden BEFORE INSERT ON products
    WHEN NEW.name = 'Forbidden' BEGIN SELECT RAISE(ABORT, 'forbidden here'); END;
";

const SHELVES: &str = "CREATE TABLE shelves (id BLOB PRIMARY KEY NOT NULL, label TEXT NOT NULL);";

/// Per (replica, table, leaving), the counts summed against what the engine
/// records (sync.held_recorded: a stand-in's rows once, as its own) counted
/// row by row: the two must agree whatever was folded.
const TOTALS_DIFFER: &str = "
    WITH counted AS (
        SELECT replica, table_name, leaving, sum(n)::bigint AS n FROM sync.held_counts
        GROUP BY 1, 2, 3 HAVING sum(n) <> 0),
    recounted AS (
        SELECT replica, table_name, leaving IS NOT NULL AS leaving, count(*) AS n
        FROM sync.held_recorded WHERE refused IS NULL GROUP BY 1, 2, 3)
    SELECT count(*) FROM counted c FULL JOIN recounted r USING (replica, table_name, leaving)
    WHERE c.n IS DISTINCT FROM r.n";

/// Per (replica, table), the rows in flight by the counts against those
/// recorded, for every replica, confirmed or not.
const IN_FLIGHT_DIFFERS: &str = "
    WITH counted AS (
        SELECT c.replica, c.table_name, sum(c.n)::bigint AS n
        FROM sync.held_counts c JOIN sync.replicas r ON r.id = c.replica
        WHERE c.leaving OR c.sent > r.applied_sequence
        GROUP BY 1, 2 HAVING sum(c.n) <> 0),
    recounted AS (
        SELECT h.replica, h.table_name, count(*) AS n
        FROM sync.held_recorded h JOIN sync.replicas r ON r.id = h.replica
        WHERE h.refused IS NULL AND (h.sent > r.applied_sequence OR h.leaving IS NOT NULL)
        GROUP BY 1, 2)
    SELECT count(*) FROM counted c FULL JOIN recounted r USING (replica, table_name)
    WHERE c.n IS DISTINCT FROM r.n";

/// The rows in flight by table as sync_internal.table_figures counted them
/// before the counts, row by row over sync.held (the reference), for the
/// live replicas of `$1` (NULL: all), of the declared tables: the overview
/// lists those, and the deletes of a table undeclared, on their way to the
/// replicas that held it, are counted by the counts (checked above) but
/// belong to no table the overview lists.
const REFERENCE_IN_FLIGHT: &str = "
    SELECT h.table_name::text, count(*)
    FROM sync.held h
    JOIN sync.replicas s ON s.id = h.replica
    WHERE s.live AND ($1::uuid IS NULL OR s.id = $1)
      AND (s.last_sequence > s.applied_sequence OR s.applied_epoch IS DISTINCT FROM s.epoch)
      AND h.refused IS NULL AND (h.sent > s.applied_sequence OR h.leaving IS NOT NULL)
      AND EXISTS (SELECT 1 FROM sync.tables t WHERE t.name = h.table_name)
    GROUP BY h.table_name";

fn count(shop: &mut Shop, sql: &str) -> i64 {
    shop.pg.query_one(sql, &[]).unwrap().get(0)
}

/// The overview's rows in flight by table, over one replica or all.
fn overview_in_flight(shop: &mut Shop, replica: Option<Uuid>) -> BTreeMap<String, i64> {
    let scope = replica.map(|r| serde_json::json!({ "replicas": [r.to_string()] }));
    let overview: serde_json::Value = shop
        .pg
        .query_one("SELECT sync.overview($1)", &[&scope])
        .unwrap()
        .get(0);
    overview["tables"]
        .as_array()
        .expect("the overview's tables")
        .iter()
        .filter(|t| t["in_flight"].as_i64() != Some(0))
        .map(|t| {
            (
                t["table"].as_str().unwrap().to_owned(),
                t["in_flight"].as_i64().unwrap(),
            )
        })
        .collect()
}

fn reference_in_flight(shop: &mut Shop, replica: Option<Uuid>) -> BTreeMap<String, i64> {
    shop.pg
        .query(REFERENCE_IN_FLIGHT, &[&replica])
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect()
}

/// The counts agree with sync.held, and the overview with the reference,
/// over every replica and each one; then again once the counts are folded.
/// Answers the rows in flight over all, as the reference counts them.
fn check(shop: &mut Shop, step: &str, replicas: &[Uuid]) -> i64 {
    for folded in [false, true] {
        if folded {
            shop.run("SELECT sync_internal.compact_held_counts()");
        }
        let when = format!("{step}{}", if folded { ", folded" } else { "" });
        assert_eq!(count(shop, TOTALS_DIFFER), 0, "{when}: counts of held rows");
        assert_eq!(count(shop, IN_FLIGHT_DIFFERS), 0, "{when}: rows in flight");
        for scope in std::iter::once(None).chain(replicas.iter().copied().map(Some)) {
            assert_eq!(
                overview_in_flight(shop, scope),
                reference_in_flight(shop, scope),
                "{when}: the overview's rows in flight over {scope:?}"
            );
        }
    }
    reference_in_flight(shop, None).values().sum()
}

fn both() -> Tables {
    Tables::new(vec![Table::catalog("products"), Table::catalog("shelves")])
}

fn take_and_confirm(shop: &mut Shop, register: &mut Replica) {
    deliver(&mut shop.pg, register);
    report(&mut shop.pg, register);
}

#[test]
fn the_counts_of_held_rows_equal_a_recount_of_sync_held_after_every_step_of_the_engine() {
    let mut shop = Shop::open();
    shop.run(
        "CREATE TABLE shop.shelves (id uuid PRIMARY KEY, label text NOT NULL); \
         SELECT sync.declare_table('shop.shelves', sync => 'broadcast'); \
         INSERT INTO shop.shelves VALUES (gen_random_uuid(), 'Top'), (gen_random_uuid(), 'Low'); \
         INSERT INTO shop.products (id, name, price_cents) \
         SELECT gen_random_uuid(), 'Product ' || i, i FROM generate_series(1, 5) AS i",
    );
    let ids = [
        shop.add_register("Register 1"),
        shop.add_register("Register 2"),
    ];
    let schemas = [
        format!("{REGISTER_SCHEMA}{SHELVES}"),
        format!("{REGISTER_SCHEMA}{SHELVES}{REFUSING}"),
    ];
    let mut registers: Vec<Replica> = ids
        .iter()
        .zip(&schemas)
        .map(|(id, schema)| {
            open_replica(&shop.file_of(*id), schema, both(), *id, Default::default())
        })
        .collect();

    shop.relay();
    let sent = check(&mut shop, "sent (provisioned)", &ids);
    assert_eq!(sent, 2 * 7, "every row is on its way to both");

    take_and_confirm(&mut shop, &mut registers[0]);
    let after_one = check(&mut shop, "one register confirmed", &ids);
    assert_eq!(after_one, 7, "only the other's rows are on their way");
    take_and_confirm(&mut shop, &mut registers[1]);
    assert_eq!(check(&mut shop, "both confirmed", &ids), 0);

    shop.run("UPDATE shop.products SET price_cents = price_cents + 1 WHERE name = 'Product 1'");
    shop.relay();
    assert_eq!(check(&mut shop, "a row sent again", &ids), 2);
    take_and_confirm(&mut shop, &mut registers[0]);
    assert_eq!(
        check(&mut shop, "a row sent again, confirmed by one", &ids),
        1
    );
    take_and_confirm(&mut shop, &mut registers[1]);

    shop.run("DELETE FROM shop.products WHERE name = 'Product 2'");
    shop.relay();
    assert_eq!(check(&mut shop, "a row taken back", &ids), 2);
    take_and_confirm(&mut shop, &mut registers[0]);
    assert_eq!(check(&mut shop, "a take-back confirmed by one", &ids), 1);
    take_and_confirm(&mut shop, &mut registers[1]);
    assert_eq!(check(&mut shop, "a take-back confirmed by both", &ids), 0);

    shop.run("INSERT INTO shop.products (id, name, price_cents) VALUES (gen_random_uuid(), 'Forbidden', 1)");
    shop.relay();
    check(&mut shop, "a row to be refused, sent", &ids);
    for register in registers.iter_mut() {
        take_and_confirm(&mut shop, register);
    }
    assert_eq!(
        count(
            &mut shop,
            "SELECT count(*) FROM sync.held WHERE refused IS NOT NULL"
        ),
        1,
        "register 2 refused it"
    );
    check(&mut shop, "a row refused", &ids);
    shop.run("SELECT sync.retry()");
    shop.relay();
    check(&mut shop, "a refused row sent again", &ids);
    take_and_confirm(&mut shop, &mut registers[1]);
    check(&mut shop, "a refused row refused again", &ids);

    shop.run(&format!("SELECT sync.resync('{}')", ids[0]));
    shop.relay();
    assert!(
        check(&mut shop, "provisioned again", &ids) > 0,
        "the snapshot is on its way"
    );
    take_and_confirm(&mut shop, &mut registers[0]);
    check(&mut shop, "provisioned again, confirmed", &ids);

    shop.run("SELECT sync.undeclare_table('shop.shelves')");
    shop.relay();
    check(
        &mut shop,
        "a table undeclared (every register lets go of its rows)",
        &ids,
    );
    for register in registers.iter_mut() {
        take_and_confirm(&mut shop, register);
    }
    check(&mut shop, "a table undeclared, confirmed", &ids);

    shop.run(&format!(
        "UPDATE shop.registers SET active = false WHERE id = '{}'",
        ids[1]
    ));
    shop.relay();
    check(&mut shop, "a register no longer live", &ids);
    assert_eq!(
        count(
            &mut shop,
            &format!(
                "SELECT coalesce(sum(n), 0)::bigint FROM sync.held_counts WHERE replica = '{}'",
                ids[1]
            )
        ),
        0,
        "nothing is counted of a register forgotten"
    );

    // Folded, the counts of a holder that confirmed everything are one per
    // table: register 1's products, and the products of the journal's
    // stand-in, made again when the shelves went (register 1 keeps what it
    // followed as rows of its own).
    shop.run("SELECT sync_internal.compact_held_counts()");
    assert_eq!(
        count(&mut shop, "SELECT count(*) FROM sync.held_counts"),
        2,
        "register 1's products and the stand-in's, each in one count"
    );
    assert_eq!(
        count(
            &mut shop,
            "SELECT count(*) FROM (SELECT DISTINCT replica, table_name FROM sync.held_recorded) h"
        ),
        2,
        "a count for each holder and table it holds"
    );

    // Counted again from scratch when a relay starts, even with nothing
    // counted before.
    shop.run("DELETE FROM sync.held_counts; SELECT sync_internal.before_pass(true)");
    check(&mut shop, "counted again as a relay starts", &ids);

    // A restored database counts what it restores.
    shop.run(&format!(
        "UPDATE shop.products SET price_cents = 7 WHERE name = 'Product 3'; \
         UPDATE shop.registers SET active = true WHERE id = '{}'",
        ids[1]
    ));
    shop.relay();
    let before_dump = check(&mut shop, "before a dump", &ids);
    assert!(before_dump > 0);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("shop.sql");
    shop.cluster().dump("shop", &file);
    shop.cluster().restore("shop", &file);
    shop.reconnect();
    assert_eq!(check(&mut shop, "restored", &ids), before_dump);
}

//! A column added travels in two steps at different times (issue 36, the
//! register's side of a column): the server's migration, which adds the
//! column and declares the table again, and each register's new build,
//! which adds the column to its SQLite table. A register whose build lacks
//! the column keeps applying the table's rows, the column ignored; one
//! whose build has it gets its values for every row of that table it
//! holds, once, when it first runs that build, and no other table is sent
//! again. The register says the columns its build holds once per open
//! (Up.columns), and the server sends it the table again when they grew by
//! one it sends (docs/src/protocol.md, "A column added"). Both orders:
//! the server first, then the registers one by one; and a register
//! updated before the server.

mod common;
#[path = "common/filing_shop.rs"]
mod shop;

use std::collections::BTreeMap;

use magic_sync_replica::{Received, Replica};
use serde_json::{json, Value};
use shop::*;
use uuid::Uuid;

/// The server's migration: the column, and the table declared again.
const SERVER_MIGRATION: &str = "
    ALTER TABLE shop.products ADD COLUMN vat_rate integer NOT NULL DEFAULT 20;
    UPDATE shop.products SET vat_rate = 5 WHERE name = 'Coffee';
    SELECT sync.declare_table('shop.products', sync => 'broadcast');
";

/// A register's new build: its migration adds the column to its table.
const REGISTER_MIGRATION: &str = "ALTER TABLE products ADD COLUMN vat_rate INTEGER;";

/// A product with the column, as both sides hold it: id, name, price,
/// instant as text, VAT rate (NULL while the register holds it empty).
type Product = (Uuid, String, i64, String, Option<i64>);

/// Per table, rows applied (upserts) by these messages.
fn applied(received: &[Received]) -> BTreeMap<String, usize> {
    let mut figures = BTreeMap::new();
    for r in received {
        if let Received::Applied { tables, .. } = r {
            for t in tables {
                *figures.entry(t.table.clone()).or_default() += t.keys.len();
            }
        }
    }
    figures.retain(|_, n| *n > 0);
    figures
}

/// How many rows these messages left refused.
fn refused(received: &[Received]) -> usize {
    received
        .iter()
        .map(|r| match r {
            Received::Applied { rejected, .. } | Received::Ended { rejected, .. } => rejected.len(),
            _ => 0,
        })
        .sum()
}

fn products_with_vat_on_server(shop: &mut Shop) -> Vec<Product> {
    let mut rows: Vec<Product> = shop
        .pg
        .query(
            "SELECT id, name, price_cents, \
             to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'), \
             vat_rate::bigint FROM shop.products",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4)))
        .collect();
    rows.sort();
    rows
}

/// What a register of the new build holds of the products, column for
/// column.
fn products_with_vat_of(register: &Replica) -> Vec<Product> {
    let mut rows: Vec<Product> = register
        .connection()
        .prepare(
            "SELECT id, name, price_cents, updated_at, vat_rate FROM products \
             WHERE retired_at IS NULL",
        )
        .unwrap()
        .query_map([], |r| {
            let id: Vec<u8> = r.get(0)?;
            Ok((
                Uuid::from_slice(&id).unwrap(),
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
            ))
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    rows.sort();
    rows
}

/// Closes a register and opens it again on its file, as its new build:
/// the build's migration adds the column first. Answers what the server
/// made of what the build said of its columns as it opened.
fn run_the_new_build(shop: &mut Shop, registers: &mut [Replica], at: usize) -> Value {
    open_again(
        shop,
        registers,
        at,
        &format!("{REGISTER_SCHEMA}{REGISTER_MIGRATION}"),
    )
}

/// Closes a register and opens it again on its file over `schema`;
/// answers what the server made of the columns it said as it opened.
fn open_again(shop: &mut Shop, registers: &mut [Replica], at: usize, schema: &str) -> Value {
    let me = registers[at].me();
    let file = shop.file_of(me);
    // A replica of a file of its own holds the place while the register's
    // file is closed.
    let stand_in = Uuid::new_v4();
    let placeholder = open_register(&shop.file_of(stand_in), stand_in);
    drop(std::mem::replace(&mut registers[at], placeholder).into_connection());
    registers[at] = crate::common::open_replica(&file, schema, tables(), me, Default::default());
    said_columns(shop, &mut registers[at])
}

/// Reports what a register has to say, and answers what the server made
/// of the columns it said.
fn said_columns(shop: &mut Shop, register: &mut Replica) -> Value {
    report(&mut shop.pg, register)
        .into_iter()
        .find_map(|verdict| verdict.get("columns").cloned())
        .expect("the columns said once per open, beside where it stands")
}

/// A pass, then every register takes what waits for it and says what it
/// applied: per register, the rows it applied by table.
fn pass(shop: &mut Shop, registers: &mut [Replica]) -> Vec<BTreeMap<String, usize>> {
    shop.relay();
    registers
        .iter_mut()
        .map(|register| {
            let received = deliver(&mut shop.pg, register);
            assert_eq!(refused(&received), 0, "nothing refused: {received:?}");
            report(&mut shop.pg, register);
            applied(&received)
        })
        .collect()
}

fn nothing() -> BTreeMap<String, usize> {
    BTreeMap::new()
}

fn only_products(rows: usize) -> BTreeMap<String, usize> {
    BTreeMap::from([("products".to_owned(), rows)])
}

/// Where each replica's chain began: a provisioning begins a new one.
fn snapshots(shop: &mut Shop) -> BTreeMap<Uuid, Option<Uuid>> {
    shop.pg
        .query("SELECT id, snapshot_id FROM sync.replicas", &[])
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect()
}

/// A shop of two products and `count` registers of the build without the
/// column, each holding them and its state.
fn shop_with_registers(count: usize) -> (Shop, Vec<Replica>) {
    let mut shop = Shop::open();
    shop.add_product("Tea", 250);
    shop.add_product("Coffee", 300);
    let (_, mut registers) = shop.add_registers(count);
    sync_all(&mut shop, &mut registers);
    sync_all(&mut shop, &mut registers);
    for register in &registers {
        assert_eq!(products_of(register), shop.products());
    }
    (shop, registers)
}

#[test]
fn server_first_then_each_register_gets_the_columns_values_once_when_its_build_has_it() {
    let (mut shop, mut registers) = shop_with_registers(3);

    // The server's migration. The registers' builds lack the column: they
    // keep applying the products' rows, the column ignored.
    shop.run(SERVER_MIGRATION);
    for applied in pass(&mut shop, &mut registers) {
        assert!(
            applied.keys().all(|t| t == "products"),
            "only the table that changed: {applied:?}"
        );
    }
    sync_all(&mut shop, &mut registers);
    for register in &registers {
        assert_eq!(products_of(register), shop.products());
    }
    let provisioned = snapshots(&mut shop);

    // The registers are updated one by one, days apart.
    for at in 0..registers.len() {
        // Meanwhile a price changes: every register applies it, with the
        // column or without.
        shop.run(&format!(
            "UPDATE shop.products SET price_cents = price_cents + 10, vat_rate = {} \
             WHERE name = 'Tea'",
            7 + at
        ));
        let each = pass(&mut shop, &mut registers);
        assert!(each.iter().all(|a| *a == only_products(1)), "{each:?}");
        for register in &registers[at..] {
            assert_eq!(products_of(register), shop.products(), "without the column");
        }

        let said = run_the_new_build(&mut shop, &mut registers, at);
        assert_eq!(
            said["products"],
            json!({ "gained": ["vat_rate"] }),
            "{said}"
        );
        assert_eq!(said["register_state"], "kept", "{said}");
        assert!(
            products_with_vat_of(&registers[at])
                .iter()
                .all(|p| p.4.is_none()),
            "the column empty until the server sends it"
        );

        let each = pass(&mut shop, &mut registers);
        for (i, applied) in each.iter().enumerate() {
            if i == at {
                assert_eq!(
                    *applied,
                    only_products(2),
                    "its products again, nothing else"
                );
            } else {
                assert_eq!(*applied, nothing(), "register {i} is sent nothing");
            }
        }
        assert_eq!(
            products_with_vat_of(&registers[at]),
            products_with_vat_on_server(&mut shop),
            "column for column"
        );
        let each = pass(&mut shop, &mut registers);
        assert!(each.iter().all(|a| a.is_empty()), "once: {each:?}");
    }
    assert_eq!(
        snapshots(&mut shop),
        provisioned,
        "no register provisioned again"
    );
    for register in &registers {
        assert_eq!(
            products_with_vat_of(register),
            products_with_vat_on_server(&mut shop)
        );
    }
}

#[test]
fn a_register_updated_before_the_server_holds_the_column_empty_until_the_server_sends_it() {
    let (mut shop, mut registers) = shop_with_registers(2);
    let provisioned = snapshots(&mut shop);

    // Register 0 runs the new build first: the server sends no such column
    // yet, so nothing is sent again.
    let said = run_the_new_build(&mut shop, &mut registers, 0);
    assert_eq!(said["products"], "kept", "{said}");
    assert_eq!(pass(&mut shop, &mut registers), vec![nothing(), nothing()]);
    assert!(products_with_vat_of(&registers[0])
        .iter()
        .all(|p| p.4.is_none()));

    // A change before the server's migration: the column stays empty.
    shop.run("UPDATE shop.products SET price_cents = 260 WHERE name = 'Tea'");
    assert_eq!(
        pass(&mut shop, &mut registers),
        vec![only_products(1), only_products(1)]
    );
    assert!(products_with_vat_of(&registers[0])
        .iter()
        .all(|p| p.4.is_none()));
    assert_eq!(products_of(&registers[0]), shop.products());

    // The server's migration: register 0 gets the values, register 1
    // applies the rows without the column; neither is provisioned again.
    shop.run(SERVER_MIGRATION);
    let each = pass(&mut shop, &mut registers);
    assert!(
        each.iter().all(|a| a.keys().all(|t| t == "products")),
        "{each:?}"
    );
    sync_all(&mut shop, &mut registers);
    assert_eq!(
        products_with_vat_of(&registers[0]),
        products_with_vat_on_server(&mut shop),
        "column for column"
    );
    assert_eq!(products_of(&registers[1]), shop.products());
    assert_eq!(
        snapshots(&mut shop),
        provisioned,
        "no register provisioned again"
    );

    // Opened again with the same build: it says the same columns, and
    // nothing is sent again.
    let said = open_again(&mut shop, &mut registers, 0, REGISTER_SCHEMA);
    assert_eq!(said["products"], "kept", "{said}");
    assert_eq!(pass(&mut shop, &mut registers), vec![nothing(), nothing()]);
}

#[test]
fn a_column_of_a_table_each_register_holds_its_own_rows_of_is_sent_to_the_updated_register_alone() {
    let (mut shop, mut registers) = shop_with_registers(2);
    let provisioned = snapshots(&mut shop);
    shop.run(
        "ALTER TABLE shop.register_state ADD COLUMN till text NOT NULL DEFAULT 'front';
         SELECT sync.declare_table('shop.register_state', mirror => 'both',
                                   sync => 'assigned(register_id)', origin => 'register_id',
                                   replica_owned => '{battery}');",
    );
    let each = pass(&mut shop, &mut registers);
    assert!(
        each.iter().all(|a| a.keys().all(|t| t == "register_state")),
        "{each:?}"
    );
    sync_all(&mut shop, &mut registers);

    let said = open_again(
        &mut shop,
        &mut registers,
        1,
        &format!("{REGISTER_SCHEMA}ALTER TABLE register_state ADD COLUMN till TEXT;"),
    );
    assert_eq!(
        said["register_state"],
        json!({ "gained": ["till"] }),
        "{said}"
    );
    assert_eq!(said["products"], "kept", "{said}");
    let each = pass(&mut shop, &mut registers);
    assert_eq!(
        each,
        vec![
            nothing(),
            BTreeMap::from([("register_state".to_owned(), 1)])
        ],
        "its own state row again, nothing else"
    );
    let till: Vec<(Uuid, String)> =
        values_by_id(&registers[1], "SELECT id, till FROM register_state");
    assert_eq!(till, vec![(registers[1].me(), "front".to_owned())]);
    assert_eq!(
        pass(&mut shop, &mut registers),
        vec![nothing(), nothing()],
        "once"
    );
    assert_eq!(
        snapshots(&mut shop),
        provisioned,
        "no register provisioned again"
    );
}

/// Files an Up saying these columns, as a register's first lane would at
/// open; answers what the server made of the columns.
fn file_columns(shop: &mut Shop, register: Uuid, said: &[(&str, &[&str])]) -> Value {
    use magic_sync_proto::wire::{Backlog, TableColumns, Up};
    use prost::Message;
    let up = Up {
        protocol: magic_sync_proto::PROTOCOL,
        backlog: Some(Backlog::default()),
        columns: said
            .iter()
            .map(|(table, columns)| TableColumns {
                table: table.to_string(),
                columns: columns.iter().map(|c| c.to_string()).collect(),
            })
            .collect(),
        ..Up::default()
    };
    let verdict: Value = shop
        .pg
        .query_one(
            "SELECT sync.receive($1, $2)",
            &[&register, &up.encode_to_vec()],
        )
        .unwrap()
        .get(0);
    verdict["columns"].clone()
}

#[test]
fn columns_said_twice_of_one_table_are_malformed_and_a_table_the_server_does_not_send_is_skipped() {
    let (mut shop, registers) = shop_with_registers(1);
    let me = registers[0].me();
    let products: &[&str] = &["id", "name", "price_cents", "updated_at"];
    let with_vat: &[&str] = &["id", "name", "price_cents", "updated_at", "vat_rate"];
    shop.run(SERVER_MIGRATION);
    let said = file_columns(
        &mut shop,
        me,
        &[("products", with_vat), ("products", products)],
    );
    assert!(said.as_str().unwrap().starts_with("malformed"), "{said}");
    let said = file_columns(
        &mut shop,
        me,
        &[("receipts", &["id"]), ("shelves", &["id"])],
    );
    assert_eq!(
        said,
        json!({
            "receipts": "skipped: not a table the server sends",
            "shelves": "skipped: not a table the server sends",
        })
    );
    let noted: i64 = shop
        .pg
        .query_one("SELECT count(*) FROM sync.columns_gained", &[])
        .unwrap()
        .get(0);
    assert_eq!(noted, 0, "nothing noted of either");
    // Said once, well: the column gained is noted.
    let said = file_columns(&mut shop, me, &[("products", with_vat)]);
    assert_eq!(
        said["products"],
        json!({ "gained": ["vat_rate"] }),
        "{said}"
    );
}

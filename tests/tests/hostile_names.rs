//! Identifiers that fight back (issue 12): a schema, tables, columns and a
//! replicas relation whose names hold double and single quotes, semicolons,
//! spaces, upper case, non-ASCII and SQL words, declared with every rule
//! (broadcast, assigned, follows, grouped, a two-way table and a record
//! that goes up), noted, relayed to registers on real SQLite files whose
//! tables bear the same names, filed back, and read through every status
//! read. Every identifier is built here from the names themselves with one
//! quoting rule (the same in both dialects), so a name the engine forgets
//! to quote shows as a syntax error, a wrong table or a read that fails.
//!
//! Then: awkward values down and back up; the DDL and fixes the engine
//! prints for such names, run as printed; partitions, an active view, a
//! name of its own; and the relay worker in a database so named.

mod common;

use std::collections::BTreeSet;

use magic_sync_replica::{Apply, Replica, Settings, Table, Tables};
use magic_sync_tests::Cluster;
use postgres::Client;
use serde_json::Value;
use tempfile::TempDir;
use uuid::Uuid;

// The names, as the user spells them (never folded).
const SCHEMA: &str = "Ünïcødé \"Shop\"; drop table x;--";
const REGISTERS: &str = "Régisters 'select' 🧾";
const REGISTER_ID: &str = "Id 'x'";
const LIVE: &str = "Live?; ok";

const PRODUCTS: &str = "Pröducts \"best\"; select";
const PRODUCT_NAME: &str = "Näme \"quoted\"";
const PRICE: &str = "price; drop table x;--";
const KEYWORD: &str = "select";

const NUTRITION: &str = "Nütrition 'facts' (per 100 g)";
const NUTRITION_PRODUCT: &str = "Pröduct \"Id\"";
const KCAL: &str = "KCAL; value";

const STATE: &str = "Stäte of Register";
const STATE_REGISTER: &str = "Register; Id";
const NOTE: &str = "Nöte";
const BATTERY: &str = "Battery %";

const RECEIPTS: &str = "Récéipts 'sold' 🧾";
const RECEIPT_REGISTER: &str = "Register Id \"who\"";
const TOTAL: &str = "Total € cents";
const RECEIVED_AT: &str = "Receïved At";
const NOT_NEGATIVE: &str = "Total; \"≥ 0\"";

const FOOTERS: &str = "Föoters; \"Setting\"";
const FOOTER_REGISTER: &str = "Régister";
const FOOTER_TEXT: &str = "Text 'x'";
const CHANGED_AT: &str = "Changed; At";

const CUSTOMERS: &str = "Cüstomers";
const CUSTOMER_NAME: &str = "NAME";
const LISTS: &str = "Lïsts";
const MEMBERS: &str = "Lïst \"Members\"";
const LIST_ID: &str = "Lïst Id";
const CUSTOMER_ID: &str = "Cüstomer; Id";
const REGISTER_LISTS: &str = "Register 'Lists'";
const LISTED_REGISTER: &str = "Régister Id";

/// The tables that come down, as replicas know them, parents first.
const DOWN: [&str; 4] = [PRODUCTS, NUTRITION, STATE, CUSTOMERS];

/// An identifier, quoted: the rule of PostgreSQL and of SQLite alike.
fn q(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// A string literal.
fn lit(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// A relation of the hostile schema, qualified and quoted.
fn rel(table: &str) -> String {
    format!("{}.{}", q(SCHEMA), q(table))
}

/// A text[] literal of one element, quoted for the array parser.
fn one_name_array(name: &str) -> String {
    lit(&format!(
        "{{\"{}\"}}",
        name.replace('\\', "\\\\").replace('"', "\\\"")
    ))
}

fn server_schema() -> String {
    format!(
        "CREATE SCHEMA {schema};
         CREATE TABLE {registers} (
             {id} uuid PRIMARY KEY,
             {live} boolean NOT NULL DEFAULT true);
         CREATE TABLE {products} (
             \"Id\" uuid PRIMARY KEY,
             {name} text NOT NULL,
             {price} bigint NOT NULL,
             {keyword} text);
         CREATE TABLE {nutrition} (
             {nutrition_product} uuid PRIMARY KEY REFERENCES {products} (\"Id\") ON DELETE CASCADE,
             {kcal} integer);
         CREATE TABLE {state} (
             \"Id\" uuid PRIMARY KEY,
             {state_register} uuid NOT NULL,
             {note} text NOT NULL DEFAULT '',
             {battery} integer);
         CREATE TABLE {receipts} (
             \"Id\" uuid PRIMARY KEY,
             {receipt_register} uuid NOT NULL,
             {total} bigint NOT NULL CONSTRAINT {not_negative} CHECK ({total} >= 0),
             {received_at} timestamptz NOT NULL DEFAULT now());
         CREATE TABLE {footers} (
             {footer_register} uuid NOT NULL,
             \"Id\" uuid NOT NULL,
             {footer_text} text NOT NULL,
             {changed_at} timestamptz NOT NULL,
             PRIMARY KEY ({footer_register}, \"Id\"));
         CREATE TABLE {customers} (\"Id\" uuid PRIMARY KEY, {customer_name} text NOT NULL);
         CREATE TABLE {lists} (\"Id\" uuid PRIMARY KEY);
         CREATE TABLE {members} (
             {list_id} uuid REFERENCES {lists} (\"Id\"),
             {customer_id} uuid REFERENCES {customers} (\"Id\"),
             PRIMARY KEY ({list_id}, {customer_id}));
         CREATE TABLE {register_lists} (
             {list_id} uuid REFERENCES {lists} (\"Id\"),
             {listed_register} uuid REFERENCES {registers} ({id}),
             PRIMARY KEY ({list_id}, {listed_register}));
         SELECT sync.declare_replicas({registers_text}, live => {live_sql}, id => {id_text});
         SELECT sync.declare_table({products_text}, sync => 'broadcast');
         SELECT sync.declare_table({nutrition_text}, sync => {follows});
         SELECT sync.declare_table({state_text}, mirror => 'both', sync => {assigned},
                                   origin => {state_register_text},
                                   replica_owned => {battery_array});
         SELECT sync.declare_table({receipts_text}, mirror => 'record',
                                   origin => {receipt_register_text},
                                   unmirrored => {received_at_array});
         SELECT sync.declare_table({footers_text}, mirror => 'setting',
                                   origin => {footer_register_text},
                                   version => {changed_at_text},
                                   desired => {footer_text_array});
         SELECT sync.declare_table({customers_text}, sync => {grouped});",
        footers = rel(FOOTERS),
        footer_register = q(FOOTER_REGISTER),
        footer_text = q(FOOTER_TEXT),
        changed_at = q(CHANGED_AT),
        footers_text = lit(&rel(FOOTERS)),
        footer_register_text = lit(FOOTER_REGISTER),
        changed_at_text = lit(CHANGED_AT),
        footer_text_array = one_name_array(FOOTER_TEXT),
        schema = q(SCHEMA),
        registers = rel(REGISTERS),
        id = q(REGISTER_ID),
        live = q(LIVE),
        products = rel(PRODUCTS),
        name = q(PRODUCT_NAME),
        price = q(PRICE),
        keyword = q(KEYWORD),
        nutrition = rel(NUTRITION),
        nutrition_product = q(NUTRITION_PRODUCT),
        kcal = q(KCAL),
        state = rel(STATE),
        state_register = q(STATE_REGISTER),
        note = q(NOTE),
        battery = q(BATTERY),
        receipts = rel(RECEIPTS),
        receipt_register = q(RECEIPT_REGISTER),
        total = q(TOTAL),
        not_negative = q(NOT_NEGATIVE),
        received_at = q(RECEIVED_AT),
        customers = rel(CUSTOMERS),
        customer_name = q(CUSTOMER_NAME),
        lists = rel(LISTS),
        members = rel(MEMBERS),
        list_id = q(LIST_ID),
        customer_id = q(CUSTOMER_ID),
        register_lists = rel(REGISTER_LISTS),
        listed_register = q(LISTED_REGISTER),
        registers_text = lit(&rel(REGISTERS)),
        live_sql = lit(&q(LIVE)),
        id_text = lit(REGISTER_ID),
        products_text = lit(&rel(PRODUCTS)),
        nutrition_text = lit(&rel(NUTRITION)),
        follows = lit(&format!("follows({})", q(NUTRITION_PRODUCT))),
        state_text = lit(&rel(STATE)),
        assigned = lit(&format!("assigned({})", q(STATE_REGISTER))),
        state_register_text = lit(STATE_REGISTER),
        battery_array = one_name_array(BATTERY),
        receipts_text = lit(&rel(RECEIPTS)),
        receipt_register_text = lit(RECEIPT_REGISTER),
        received_at_array = one_name_array(RECEIVED_AT),
        customers_text = lit(&rel(CUSTOMERS)),
        grouped = lit(&format!(
            "grouped(members => {}, assigned => {})",
            rel(MEMBERS),
            rel(REGISTER_LISTS)
        )),
    )
}

/// The registers' tables: the same names, in SQLite.
fn register_schema() -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS {products} (
             \"Id\" BLOB PRIMARY KEY NOT NULL, {name} TEXT NOT NULL,
             {price} INTEGER NOT NULL CHECK ({price} >= 0), {keyword} TEXT);
         CREATE TABLE IF NOT EXISTS {nutrition} (
             {nutrition_product} BLOB PRIMARY KEY NOT NULL REFERENCES {products} (\"Id\"),
             {kcal} INTEGER);
         CREATE TABLE IF NOT EXISTS {state} (
             \"Id\" BLOB PRIMARY KEY NOT NULL, {state_register} BLOB NOT NULL,
             {note} TEXT NOT NULL DEFAULT '', {battery} INTEGER);
         CREATE TABLE IF NOT EXISTS {receipts} (
             \"Id\" BLOB PRIMARY KEY NOT NULL, {receipt_register} BLOB NOT NULL,
             {total} INTEGER NOT NULL);
         CREATE TABLE IF NOT EXISTS {footers} (
             {footer_register} BLOB NOT NULL, \"Id\" BLOB NOT NULL,
             {footer_text} TEXT NOT NULL, {changed_at} TEXT NOT NULL,
             PRIMARY KEY ({footer_register}, \"Id\"));
         CREATE TABLE IF NOT EXISTS {customers} (
             \"Id\" BLOB PRIMARY KEY NOT NULL, {customer_name} TEXT NOT NULL);",
        footers = q(FOOTERS),
        footer_register = q(FOOTER_REGISTER),
        footer_text = q(FOOTER_TEXT),
        changed_at = q(CHANGED_AT),
        products = q(PRODUCTS),
        name = q(PRODUCT_NAME),
        price = q(PRICE),
        keyword = q(KEYWORD),
        nutrition = q(NUTRITION),
        nutrition_product = q(NUTRITION_PRODUCT),
        kcal = q(KCAL),
        state = q(STATE),
        state_register = q(STATE_REGISTER),
        note = q(NOTE),
        battery = q(BATTERY),
        receipts = q(RECEIPTS),
        receipt_register = q(RECEIPT_REGISTER),
        total = q(TOTAL),
        customers = q(CUSTOMERS),
        customer_name = q(CUSTOMER_NAME),
    )
}

fn tables() -> Tables {
    Tables::new(vec![
        Table::catalog(PRODUCTS),
        Table::catalog(NUTRITION),
        Table::both(STATE)
            .replica_owned(&[BATTERY])
            .origin(STATE_REGISTER),
        Table::record(RECEIPTS).origin(RECEIPT_REGISTER),
        Table::setting(FOOTERS)
            .origin(FOOTER_REGISTER)
            .version(CHANGED_AT)
            .desired(&[FOOTER_TEXT])
            .apply(Apply::Always),
        Table::catalog(CUSTOMERS),
    ])
}

struct HostileShop {
    _cluster: Cluster,
    pg: Client,
    dir: TempDir,
    /// How many rows a relay pass is expected to set aside.
    set_aside: u64,
}

impl HostileShop {
    fn open() -> HostileShop {
        HostileShop::open_with(&server_schema())
    }

    /// A cluster whose database holds `schema`.
    fn open_with(schema: &str) -> HostileShop {
        let cluster = Cluster::start();
        let mut pg = cluster.database_with_extension("shop");
        pg.batch_execute(schema)
            .expect("the hostile schema declares");
        HostileShop {
            _cluster: cluster,
            pg,
            dir: tempfile::tempdir().expect("a directory for the registers"),
            set_aside: 0,
        }
    }

    fn run(&mut self, sql: &str) {
        self.pg
            .batch_execute(sql)
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }

    fn add_register(&mut self) -> (Uuid, Replica) {
        self.add_register_of(&register_schema(), tables())
    }

    /// A register, its state row, and its replica of `tables` opened on a
    /// file holding `schema`.
    fn add_register_of(&mut self, schema: &str, tables: Tables) -> (Uuid, Replica) {
        let id = Uuid::new_v4();
        self.run(&format!(
            "INSERT INTO {} ({}) VALUES ('{id}');
             INSERT INTO {} (\"Id\", {}, {}) VALUES ('{id}', '{id}', 'new');",
            rel(REGISTERS),
            q(REGISTER_ID),
            rel(STATE),
            q(STATE_REGISTER),
            q(NOTE)
        ));
        (id, self.open_replica(id, schema, tables))
    }

    /// The replica `id` of `tables`, opened on its file holding `schema`.
    fn open_replica(&self, id: Uuid, schema: &str, tables: Tables) -> Replica {
        let file = self.dir.path().join(format!("{id}.db"));
        common::open_replica(&file, schema, tables, id, Settings::default())
    }

    /// A relay pass (what the inbox keeps filed first, as the worker does),
    /// then every register takes what waits and answers, twice (the second
    /// round takes the answers to the first).
    fn sync_all(&mut self, registers: &mut [Replica]) {
        self.pg.query_one("SELECT sync.refile()", &[]).unwrap();
        let summary: Value = self.pg.query_one("CALL sync.relay()", &[]).unwrap().get(0);
        assert_eq!(summary["set_aside"], self.set_aside, "set aside: {summary}");
        for _ in 0..2 {
            for register in registers.iter_mut() {
                common::deliver(&mut self.pg, register);
                common::report(&mut self.pg, register);
            }
        }
    }

    fn json(&mut self, sql: &str) -> Value {
        self.pg
            .query_one(sql, &[])
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
            .get(0)
    }

    /// `sync.explain` of one row on one replica.
    fn explain(&mut self, replica: Uuid, table: &str, key: &str) -> Value {
        self.pg
            .query_one("SELECT sync.explain($1, $2, $3)", &[&replica, &table, &key])
            .unwrap_or_else(|e| panic!("sync.explain({replica}, {table}, {key}): {e}"))
            .get(0)
    }

    fn text(&mut self, sql: &str, params: &[&(dyn postgres::types::ToSql + Sync)]) -> String {
        self.pg
            .query_one(sql, params)
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
            .get(0)
    }

    /// Every row of a server table of the hostile schema as text: its
    /// columns' values.
    fn rows(
        &mut self,
        table: &str,
        columns: &[&str],
        condition: &str,
    ) -> BTreeSet<Vec<Option<String>>> {
        self.rows_of(&rel(table), columns, condition)
    }

    /// Every row of `relation` (qualified and quoted) as text.
    fn rows_of(
        &mut self,
        relation: &str,
        columns: &[&str],
        condition: &str,
    ) -> BTreeSet<Vec<Option<String>>> {
        let list: Vec<String> = columns.iter().map(|c| format!("{}::text", q(c))).collect();
        let sql = format!(
            "SELECT {} FROM {relation} WHERE {condition}",
            list.join(", ")
        );
        self.pg
            .query(&sql, &[])
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
            .iter()
            .map(|r| (0..columns.len()).map(|i| r.get(i)).collect())
            .collect()
    }
}

/// Every row of a register's table, as text: a 16-byte blob as its UUID.
fn held(register: &Replica, table: &str, columns: &[&str]) -> BTreeSet<Vec<Option<String>>> {
    let list: Vec<String> = columns.iter().map(|c| q(c)).collect();
    let sql = format!("SELECT {} FROM {}", list.join(", "), q(table));
    let conn = register.connection();
    let mut statement = conn.prepare(&sql).unwrap();
    statement
        .query_map([], |r| {
            (0..columns.len())
                .map(|i| {
                    Ok(match r.get_ref(i)? {
                        rusqlite::types::ValueRef::Null => None,
                        rusqlite::types::ValueRef::Integer(n) => Some(n.to_string()),
                        rusqlite::types::ValueRef::Real(x) => Some(x.to_string()),
                        rusqlite::types::ValueRef::Text(t) => {
                            Some(String::from_utf8(t.to_vec()).unwrap())
                        }
                        rusqlite::types::ValueRef::Blob(b) => {
                            Some(Uuid::from_slice(b).unwrap().to_string())
                        }
                    })
                })
                .collect()
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

const PRODUCT_COLUMNS: [&str; 4] = ["Id", PRODUCT_NAME, PRICE, KEYWORD];
const NUTRITION_COLUMNS: [&str; 2] = [NUTRITION_PRODUCT, KCAL];
const STATE_COLUMNS: [&str; 4] = ["Id", STATE_REGISTER, NOTE, BATTERY];
const CUSTOMER_COLUMNS: [&str; 2] = ["Id", CUSTOMER_NAME];
const RECEIPT_COLUMNS: [&str; 3] = ["Id", RECEIPT_REGISTER, TOTAL];
const FOOTER_COLUMNS: [&str; 3] = [FOOTER_REGISTER, "Id", FOOTER_TEXT];

/// What a register should hold of the server's tables: every product and
/// its nutrition, its own state, the customers of the lists given it.
fn assert_holds_what_it_should(shop: &mut HostileShop, register: &Replica) {
    let me = register.me();
    assert_eq!(
        held(register, PRODUCTS, &PRODUCT_COLUMNS),
        shop.rows(PRODUCTS, &PRODUCT_COLUMNS, "true")
    );
    assert_eq!(
        held(register, NUTRITION, &NUTRITION_COLUMNS),
        shop.rows(NUTRITION, &NUTRITION_COLUMNS, "true")
    );
    assert_eq!(
        held(register, STATE, &STATE_COLUMNS),
        shop.rows(
            STATE,
            &STATE_COLUMNS,
            &format!("{} = '{me}'", q(STATE_REGISTER))
        )
    );
    assert_eq!(
        held(register, CUSTOMERS, &CUSTOMER_COLUMNS),
        shop.rows(
            CUSTOMERS,
            &CUSTOMER_COLUMNS,
            &format!(
                "\"Id\" IN (SELECT m.{customer} FROM {members} m JOIN {assigned} a USING ({list}) \
                 WHERE a.{register} = '{me}')",
                customer = q(CUSTOMER_ID),
                members = rel(MEMBERS),
                assigned = rel(REGISTER_LISTS),
                list = q(LIST_ID),
                register = q(LISTED_REGISTER),
            )
        )
    );
}

/// The server's first rows: two products (one with its nutrition, one
/// whose values are themselves hostile), a list of customers given to
/// `listed` only.
fn write_the_catalog(shop: &mut HostileShop, listed: Uuid) -> Uuid {
    let tea = Uuid::new_v4();
    let list = Uuid::new_v4();
    shop.run(&format!(
        "INSERT INTO {products} (\"Id\", {name}, {price}, {keyword}) VALUES
             ('{tea}', 'Tea \"Earl\"; ''Grey''', 250, 'drop table x;--'),
             (gen_random_uuid(), 'Crème brûlée 🍮', 9007199254740993, NULL);
         INSERT INTO {nutrition} VALUES ('{tea}', 2);
         INSERT INTO {customers} VALUES (gen_random_uuid(), 'Zoë'), (gen_random_uuid(), 'Åsa');
         INSERT INTO {lists} VALUES ('{list}');
         INSERT INTO {members} SELECT '{list}', \"Id\" FROM {customers} WHERE {customer_name} = 'Zoë';
         INSERT INTO {register_lists} VALUES ('{list}', '{listed}');",
        products = rel(PRODUCTS),
        name = q(PRODUCT_NAME),
        price = q(PRICE),
        keyword = q(KEYWORD),
        nutrition = rel(NUTRITION),
        customers = rel(CUSTOMERS),
        customer_name = q(CUSTOMER_NAME),
        lists = rel(LISTS),
        members = rel(MEMBERS),
        register_lists = rel(REGISTER_LISTS),
    ));
    tea
}

/// A register sells: receipts written on the device, and its battery.
fn sell(register: &Replica, totals: &[i64], battery: i64) -> Vec<Uuid> {
    let conn = register.connection();
    let me = register.me();
    let ids: Vec<Uuid> = totals.iter().map(|_| Uuid::new_v4()).collect();
    for (id, total) in ids.iter().zip(totals) {
        conn.execute(
            &format!(
                "INSERT INTO {} (\"Id\", {}, {}) VALUES (?1, ?2, ?3)",
                q(RECEIPTS),
                q(RECEIPT_REGISTER),
                q(TOTAL)
            ),
            rusqlite::params![id.as_bytes().to_vec(), me.as_bytes().to_vec(), total],
        )
        .unwrap();
    }
    conn.execute(
        &format!("UPDATE {} SET {} = ?1", q(STATE), q(BATTERY)),
        [battery],
    )
    .unwrap();
    conn.execute(
        &format!(
            "INSERT INTO {} ({}, \"Id\", {}, {}) VALUES (?1, ?2, ?3, '2026-10-01T10:00:00.000000Z')",
            q(FOOTERS),
            q(FOOTER_REGISTER),
            q(FOOTER_TEXT),
            q(CHANGED_AT)
        ),
        rusqlite::params![
            me.as_bytes().to_vec(),
            Uuid::new_v4().as_bytes().to_vec(),
            format!("Thank you; \"{battery}\" 'ü'")
        ],
    )
    .unwrap();
    ids
}

#[test]
fn hostile_names_are_declared_relayed_filed_and_read_back() {
    let mut shop = HostileShop::open();
    let (a, register_a) = shop.add_register();
    let (b, register_b) = shop.add_register();
    let mut registers = vec![register_a, register_b];
    let tea = write_the_catalog(&mut shop, a);
    shop.sync_all(&mut registers);
    for register in &registers {
        assert_holds_what_it_should(&mut shop, register);
    }
    assert_eq!(held(&registers[0], CUSTOMERS, &CUSTOMER_COLUMNS).len(), 1);
    assert!(held(&registers[1], CUSTOMERS, &CUSTOMER_COLUMNS).is_empty());

    // The devices write: receipts go up, and the battery of a two-way row.
    let sold = sell(&registers[0], &[100, 250], 42);
    sell(&registers[1], &[7], 9);
    shop.sync_all(&mut registers);
    let filed = shop.rows(RECEIPTS, &RECEIPT_COLUMNS, "true");
    let mut expected: BTreeSet<Vec<Option<String>>> =
        held(&registers[0], RECEIPTS, &RECEIPT_COLUMNS);
    expected.extend(held(&registers[1], RECEIPTS, &RECEIPT_COLUMNS));
    assert_eq!(filed, expected, "every receipt is filed exactly once");
    assert_eq!(filed.len(), 3);
    assert!(sold
        .iter()
        .all(|id| filed.iter().any(|row| row[0] == Some(id.to_string()))));
    let mut footers = held(&registers[0], FOOTERS, &FOOTER_COLUMNS);
    footers.extend(held(&registers[1], FOOTERS, &FOOTER_COLUMNS));
    assert_eq!(
        shop.rows(FOOTERS, &FOOTER_COLUMNS, "true"),
        footers,
        "every setting is filed"
    );
    assert_eq!(footers.len(), 2);
    let batteries = shop.rows(STATE, &[STATE_REGISTER, BATTERY], "true");
    assert_eq!(
        batteries,
        BTreeSet::from([
            vec![Some(a.to_string()), Some("42".to_owned())],
            vec![Some(b.to_string()), Some("9".to_owned())],
        ])
    );

    // The server changes: an update, a delete that cascades, a customer
    // given to the other register too.
    shop.run(&format!(
        "UPDATE {products} SET {name} = 'Tea; ''Lapsang'' \"Souchong\"' WHERE \"Id\" = '{tea}';
         DELETE FROM {nutrition};
         UPDATE {state} SET {note} = 'Ünïcødé ✓' WHERE {state_register} = '{b}';
         INSERT INTO {register_lists} SELECT {list}, '{b}' FROM {register_lists};",
        products = rel(PRODUCTS),
        name = q(PRODUCT_NAME),
        nutrition = rel(NUTRITION),
        state = rel(STATE),
        note = q(NOTE),
        state_register = q(STATE_REGISTER),
        register_lists = rel(REGISTER_LISTS),
        list = q(LIST_ID),
    ));
    shop.sync_all(&mut registers);
    for register in &registers {
        assert_holds_what_it_should(&mut shop, register);
    }
    assert_eq!(held(&registers[1], CUSTOMERS, &CUSTOMER_COLUMNS).len(), 1);

    every_status_read_names_the_tables_as_declared(&mut shop, a, tea);
    refusals_and_kept_uploads_are_named_as_declared(&mut shop, &mut registers);
}

/// A row the registers refuse (their CHECK) and a receipt the server
/// refuses (its CHECK): the health names each by its table as declared.
fn refusals_and_kept_uploads_are_named_as_declared(
    shop: &mut HostileShop,
    registers: &mut [Replica],
) {
    let refused = Uuid::new_v4();
    shop.run(&format!(
        "INSERT INTO {} (\"Id\", {}, {}) VALUES ('{refused}', 'Below; \"zero\"', -1)",
        rel(PRODUCTS),
        q(PRODUCT_NAME),
        q(PRICE)
    ));
    let kept = sell(&registers[0], &[-5], 41)[0];
    shop.sync_all(registers);

    let health = shop.json("SELECT sync.health()");
    let refusals = health["refused"]["first"].as_array().unwrap();
    assert_eq!(refusals.len(), 2, "each register refuses it: {health:#}");
    for refusal in refusals {
        assert_eq!(refusal["table"], PRODUCTS, "{health:#}");
        assert_eq!(refusal["key"], refused.to_string(), "{health:#}");
    }
    let kept_back = health["inbox"]["first"].as_array().unwrap();
    assert_eq!(kept_back.len(), 1, "{health:#}");
    assert_eq!(kept_back[0]["table"], RECEIPTS, "{health:#}");
    assert_eq!(kept_back[0]["key"], kept.to_string(), "{health:#}");
    assert_eq!(kept_back[0]["remedy"], "fix", "{health:#}");
    let a = registers[0].me();
    let explained: Value = shop.explain(a, PRODUCTS, &refused.to_string());
    assert_eq!(explained["table"], PRODUCTS, "{explained}");
    // The fix deployed, the receipt kept is filed, once.
    shop.run(&format!(
        "ALTER TABLE {} DROP CONSTRAINT {}; SELECT sync.refile(true);",
        rel(RECEIPTS),
        q(NOT_NEGATIVE)
    ));
    shop.sync_all(registers);
    let filed = shop.rows(RECEIPTS, &["Id"], &format!("\"Id\" = '{kept}'"));
    assert_eq!(filed.len(), 1, "the receipt kept is filed");
    let health = shop.json("SELECT sync.health()");
    assert_eq!(health["inbox"]["total"], 0, "{health:#}");
    // A row it should hold and refused is, in explain's words, set aside.
    assert_eq!(explained["state"], "set_aside", "{explained:#}");
    assert_eq!(
        explained["kept_away"][0]["reason"], "refused",
        "{explained:#}"
    );
}

fn names(tables: &[&str]) -> BTreeSet<String> {
    tables.iter().map(|t| t.to_string()).collect()
}

fn every_status_read_names_the_tables_as_declared(shop: &mut HostileShop, a: Uuid, tea: Uuid) {
    let overview = shop.json("SELECT sync.overview(NULL, 100)");
    let tables: BTreeSet<String> = overview["tables"]
        .as_array()
        .unwrap_or_else(|| panic!("the overview lists its tables: {overview}"))
        .iter()
        .map(|t| t["table"].as_str().unwrap().to_owned())
        .collect();
    let mut declared = names(&DOWN);
    declared.insert(RECEIPTS.to_owned());
    declared.insert(FOOTERS.to_owned());
    assert_eq!(tables, declared, "{overview}");
    assert_eq!(overview["states"]["synced"], 2, "{overview}");

    let listing = shop.json("SELECT sync.listing()");
    assert_eq!(listing["total"], 2, "{listing}");
    let health = shop.json("SELECT sync.health()");
    assert_eq!(health["set_aside"]["total"], 0, "{health}");
    let progress = shop.json("SELECT sync.progress()");
    let replicas = progress["replicas"]
        .as_array()
        .unwrap_or_else(|| panic!("progress lists its replicas: {progress}"));
    assert_eq!(replicas.len(), 2, "{progress}");
    for replica in replicas {
        let progressed: BTreeSet<String> = replica["tables"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["table"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(progressed, names(&DOWN), "{progress}");
    }

    let tea = tea.to_string();
    let row: Value = shop
        .pg
        .query_one("SELECT sync.row_progress(NULL, $1, $2)", &[&PRODUCTS, &tea])
        .unwrap()
        .get(0);
    assert_eq!(row["table"], PRODUCTS, "{row}");
    assert_eq!(row["key"], tea, "{row}");
    let places = row["places"].as_array().unwrap();
    assert_eq!(places.len(), 2, "{row}");
    assert!(places.iter().all(|p| p["state"] == "holds"), "{row}");
    let explained: Value = shop.explain(a, PRODUCTS, &tea);
    assert_eq!(explained["table"], PRODUCTS, "{explained}");
    assert_eq!(explained["state"], "holds", "{explained}");
    let customer = shop.text(
        &format!(
            "SELECT \"Id\"::text FROM {} WHERE {} = 'Zoë'",
            rel(CUSTOMERS),
            q(CUSTOMER_NAME)
        ),
        &[],
    );
    let explained: Value = shop.explain(a, CUSTOMERS, &customer);
    assert_eq!(explained["table"], CUSTOMERS, "{explained}");
    assert_eq!(explained["should"], true, "{explained}");
    let unlisted = shop.text(
        &format!(
            "SELECT \"Id\"::text FROM {} WHERE {} = 'Åsa'",
            rel(CUSTOMERS),
            q(CUSTOMER_NAME)
        ),
        &[],
    );
    let explained: Value = shop.explain(a, CUSTOMERS, &unlisted);
    assert_eq!(explained["table"], CUSTOMERS, "{explained}");
    assert_eq!(explained["should"], false, "in no list: {explained}");
    let synced = shop.json("SELECT sync.listing(NULL, 'synced')");
    assert_eq!(synced["total"], 2, "{synced}");

    let metrics = shop.text("SELECT sync.metrics()", &[]);
    for table in DOWN.iter().chain(&[RECEIPTS, FOOTERS]) {
        let label = format!(
            "table=\"{}\"",
            table.replace('\\', "\\\\").replace('"', "\\\"")
        );
        assert!(metrics.contains(&label), "metrics name {table}:\n{metrics}");
    }
}

// ---------------------------------------------------------------------------
// Awkward values
// ---------------------------------------------------------------------------

const ODD: &str = "Odd \"Values\" ✓";
const ODD_UP: &str = "Odd 'Uploads' ⇡";

/// The awkward columns: name, PostgreSQL type, SQLite type. Every one is
/// nullable; most are text on the device, so what travels is held as it
/// travels; jsonb and arrays are JSON there, held as JSON text and sent
/// back as the JSON they hold.
const ODD_COLUMNS: [(&str, &str, &str); 16] = [
    ("Nöthing", "text", "TEXT"),
    ("Empty", "text", "TEXT"),
    ("Control \"chars\"", "text", "TEXT"),
    ("Huge", "text", "TEXT"),
    ("Nümeric", "numeric", "TEXT"),
    ("Float 8", "float8", "TEXT"),
    ("Real 4", "real", "TEXT"),
    ("Small", "smallint", "INTEGER"),
    ("Int", "integer", "INTEGER"),
    ("Big", "bigint", "INTEGER"),
    ("Flag", "boolean", "BOOLEAN"),
    ("Whën", "timestamptz", "TEXT"),
    ("Däte", "date", "TEXT"),
    ("Doc", "jsonb", "JSON"),
    ("Tags", "text[]", "JSON"),
    ("Bytes", "bytea", "TEXT"),
];

fn odd_column_list() -> String {
    ODD_COLUMNS
        .iter()
        .map(|(name, _, _)| q(name))
        .collect::<Vec<_>>()
        .join(", ")
}

fn odd_server_schema() -> String {
    let columns: Vec<String> = ODD_COLUMNS
        .iter()
        .map(|(name, ty, _)| format!("{} {ty}", q(name)))
        .collect();
    let columns = columns.join(", ");
    format!(
        "CREATE TABLE {odd} (\"Id\" uuid PRIMARY KEY, {columns});
         CREATE TABLE {up} (\"Id\" uuid PRIMARY KEY, {columns});
         SELECT sync.declare_table({odd_text}, sync => 'broadcast');
         SELECT sync.declare_table({up_text}, mirror => 'record');",
        odd = rel(ODD),
        up = rel(ODD_UP),
        odd_text = lit(&rel(ODD)),
        up_text = lit(&rel(ODD_UP)),
    )
}

fn odd_register_schema() -> String {
    let columns: Vec<String> = ODD_COLUMNS
        .iter()
        .map(|(name, _, ty)| format!("{} {ty}", q(name)))
        .collect();
    let columns = columns.join(", ");
    format!(
        "{}
         CREATE TABLE IF NOT EXISTS {} (\"Id\" BLOB PRIMARY KEY NOT NULL, {columns});
         CREATE TABLE IF NOT EXISTS {} (\"Id\" BLOB PRIMARY KEY NOT NULL, {columns});",
        register_schema(),
        q(ODD),
        q(ODD_UP)
    )
}

fn odd_tables() -> Tables {
    let mut all: Vec<Table> = tables().iter().cloned().collect();
    all.push(Table::catalog(ODD));
    all.push(Table::record(ODD_UP));
    Tables::new(all)
}

/// The awkward rows, one edge each, by the column they try: a row of
/// NULLs, the lowest and highest of each type, the infinities and NaNs,
/// dates before Christ and far ahead, microseconds and offsets, control
/// characters and non-ASCII, JSON, arrays and bytes, and a text of a
/// million bytes that still fits a message.
const ODD_ROWS: &str = "
    INSERT INTO {odd} (\"Id\", \"Empty\") VALUES ('00000000-0000-0000-0000-000000000001', NULL);
    INSERT INTO {odd} (\"Id\", \"Empty\", \"Nümeric\", \"Float 8\", \"Real 4\", \"Small\", \"Int\", \"Big\", \"Flag\", \"Whën\", \"Däte\")
        VALUES ('00000000-0000-0000-0000-000000000002', '', 'NaN', 'NaN', 'NaN', -32768, -2147483648,
                -9223372036854775808, false, '-infinity', '-infinity');
    INSERT INTO {odd} (\"Id\", \"Nümeric\", \"Float 8\", \"Real 4\", \"Small\", \"Int\", \"Big\", \"Flag\", \"Whën\", \"Däte\")
        VALUES ('00000000-0000-0000-0000-000000000003', '123456789012345678901234567890.000000000000000000001',
                'Infinity', 'Infinity', 32767, 2147483647, 9223372036854775807, true, 'infinity', 'infinity');
    INSERT INTO {odd} (\"Id\", \"Float 8\", \"Real 4\", \"Whën\", \"Däte\")
        VALUES ('00000000-0000-0000-0000-000000000004', '-Infinity', '-Infinity',
                '4713-01-01 00:00:00+00 BC', '4713-01-01 BC');
    INSERT INTO {odd} (\"Id\", \"Float 8\", \"Real 4\", \"Whën\", \"Däte\")
        VALUES ('00000000-0000-0000-0000-000000000005', 1.7976931348623157e308, 3.4028235e38,
                '294276-12-31 23:59:59.999999+00', '5874897-12-31');
    INSERT INTO {odd} (\"Id\", \"Control \"\"chars\"\"\", \"Float 8\", \"Real 4\", \"Whën\", \"Däte\", \"Doc\", \"Tags\", \"Bytes\")
        VALUES ('00000000-0000-0000-0000-000000000006',
                E'tab\\there\\nline\\r\\x01\\x1f\\x7f \"quoted\" \\\\back ''single'' Ünïcødé 🎉 \\u2028',
                5e-324, -0.0,
                '2000-02-29 23:59:59.123456-02:30', '2000-02-29',
                '{\"ü\": [1, null, \"x\", 1.5e300], \"big\": 12345678901234567890, \"\": {}}',
                '{a,\"b c\",NULL,\"Ü\\\\\"}', '\\x00ff10');
    INSERT INTO {odd} (\"Id\", \"Huge\")
        VALUES ('00000000-0000-0000-0000-000000000007', repeat('é', 500000));
";

/// How many bytes a text too large for any message has (the limit is
/// 1 MiB).
const TOO_LARGE: i32 = 2 * 1024 * 1024;

#[test]
fn awkward_values_travel_down_as_the_protocol_writes_them_and_back_up_unchanged() {
    let mut shop = HostileShop::open();
    shop.run(&odd_server_schema());
    shop.run(&ODD_ROWS.replace("{odd}", &rel(ODD)));
    shop.run(&format!(
        "INSERT INTO {} (\"Id\", \"Huge\") VALUES ('00000000-0000-0000-0000-0000000000ff', repeat('x', {TOO_LARGE}))",
        rel(ODD)
    ));
    shop.set_aside = 1;
    let (_, register) = shop.add_register_of(&odd_register_schema(), odd_tables());
    let mut registers = vec![register];
    shop.sync_all(&mut registers);

    each_value_travels_as_the_protocol_writes_it(&held_as_json(&registers[0], ODD));
    the_row_too_large_is_set_aside_and_health_says_so(&mut shop);

    // Up again: the device files what it holds as records of its own.
    registers[0]
        .connection()
        .execute_batch(&format!(
            "INSERT INTO {} SELECT * FROM {}",
            q(ODD_UP),
            q(ODD)
        ))
        .unwrap();
    shop.sync_all(&mut registers);
    assert_eq!(
        shop.json("SELECT coalesce(jsonb_agg(to_jsonb(i) - 'row'), '[]') FROM sync.inbox i"),
        serde_json::json!([]),
        "every upload is filed, none kept"
    );
    let differ = shop.json(&format!(
        "SELECT coalesce(jsonb_agg(d), '[]') FROM (
             (SELECT 'sent' AS side, \"Id\", {list} FROM {odd} WHERE \"Id\" <> '00000000-0000-0000-0000-0000000000ff'
              EXCEPT SELECT 'sent', \"Id\", {list} FROM {up})
             UNION ALL
             (SELECT 'filed', \"Id\", {list} FROM {up} EXCEPT SELECT 'filed', \"Id\", {list} FROM {odd})) d",
        list = odd_column_list(),
        odd = rel(ODD),
        up = rel(ODD_UP),
    ));
    assert_eq!(
        differ,
        serde_json::json!([]),
        "what came back differs from what went:\n{differ:#}"
    );
    let filed: i64 = shop
        .pg
        .query_one(&format!("SELECT count(*) FROM {}", rel(ODD_UP)), &[])
        .unwrap()
        .get(0);
    assert_eq!(filed, 7, "every row the register held, once");
}

/// The row `n` of the awkward rows, as the register holds it.
fn row(held: &Value, n: u8) -> &Value {
    let id = format!("00000000-0000-0000-0000-{n:012}");
    held.as_array()
        .unwrap()
        .iter()
        .find(|r| r["Id"] == id.as_str())
        .unwrap_or_else(|| panic!("the register holds row {n}: {held:#}"))
}

/// What the register holds of each awkward value, as the JSON row
/// conventions carry it: 64-bit integers whole, NaN and the infinities as
/// PostgreSQL writes them, instants in UTC to the microsecond (` BC` after
/// a year before Christ, infinities as `infinity`), dates as PostgreSQL
/// writes them, text byte for byte, JSON as its text.
fn each_value_travels_as_the_protocol_writes_it(held: &Value) {
    use serde_json::json;
    let nulls = row(held, 1);
    for (name, _, _) in ODD_COLUMNS {
        assert_eq!(nulls[name], Value::Null, "{name} of the row of NULLs");
    }
    let low = row(held, 2);
    assert_eq!(low["Big"], json!(i64::MIN));
    assert_eq!(low["Int"], json!(i32::MIN));
    assert_eq!(low["Small"], json!(i16::MIN));
    assert_eq!(low["Flag"], json!(0));
    assert_eq!(low["Empty"], json!(""));
    for nan in ["Nümeric", "Float 8", "Real 4"] {
        assert_eq!(low[nan], json!("NaN"), "{nan}");
    }
    assert_eq!(low["Whën"], json!("-infinity"));
    assert_eq!(low["Däte"], json!("-infinity"));
    let high = row(held, 3);
    assert_eq!(high["Big"], json!(i64::MAX));
    assert_eq!(
        high["Nümeric"],
        json!("123456789012345678901234567890.000000000000000000001")
    );
    assert_eq!(high["Float 8"], json!("Infinity"));
    assert_eq!(high["Whën"], json!("infinity"));
    assert_eq!(high["Däte"], json!("infinity"));
    let before_christ = row(held, 4);
    assert_eq!(before_christ["Float 8"], json!("-Infinity"));
    assert_eq!(
        before_christ["Whën"],
        json!("4713-01-01T00:00:00.000000Z BC")
    );
    assert_eq!(before_christ["Däte"], json!("4713-01-01 BC"));
    let far = row(held, 5);
    assert_eq!(far["Whën"], json!("294276-12-31T23:59:59.999999Z"));
    assert_eq!(far["Däte"], json!("5874897-12-31"));
    assert_eq!(far["Float 8"], json!("1.7976931348623157e+308"));
    let odd = row(held, 6);
    assert_eq!(
        odd["Control \"chars\""],
        json!("tab\there\nline\r\u{1}\u{1f}\u{7f} \"quoted\" \\back 'single' Ünïcødé 🎉 \u{2028}")
    );
    assert_eq!(odd["Whën"], json!("2000-03-01T02:29:59.123456Z"), "in UTC");
    assert_eq!(odd["Däte"], json!("2000-02-29"));
    assert_eq!(
        serde_json::from_str::<Value>(odd["Doc"].as_str().unwrap()).unwrap(),
        json!({"ü": [1, null, "x", 1.5e300], "big": 12345678901234567890u64, "": {}})
    );
    assert_eq!(odd["Tags"], json!("[\"a\",\"b c\",null,\"Ü\\\\\"]"));
    assert_eq!(odd["Bytes"], json!("\\x00ff10"));
    assert_eq!(row(held, 7)["Huge"], json!("é".repeat(500_000)));
}

/// A register's rows of `table`, each as JSON: what SQLite holds.
fn held_as_json(register: &Replica, table: &str) -> Value {
    let conn = register.connection();
    let mut statement = conn
        .prepare(&format!("SELECT * FROM {} ORDER BY \"Id\"", q(table)))
        .unwrap();
    let names: Vec<String> = statement
        .column_names()
        .iter()
        .map(|n| n.to_string())
        .collect();
    let rows: Vec<Value> = statement
        .query_map([], |r| {
            let mut row = serde_json::Map::new();
            for (i, name) in names.iter().enumerate() {
                let value = match r.get_ref(i)? {
                    rusqlite::types::ValueRef::Null => Value::Null,
                    rusqlite::types::ValueRef::Integer(n) => serde_json::json!(n),
                    rusqlite::types::ValueRef::Real(x) => serde_json::json!(x.to_string()),
                    rusqlite::types::ValueRef::Text(t) => {
                        Value::String(String::from_utf8(t.to_vec()).unwrap())
                    }
                    rusqlite::types::ValueRef::Blob(b) => {
                        Value::String(Uuid::from_slice(b).unwrap().to_string())
                    }
                };
                row.insert(name.clone(), value);
            }
            Ok(Value::Object(row))
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    Value::Array(rows)
}

fn the_row_too_large_is_set_aside_and_health_says_so(shop: &mut HostileShop) {
    let health = shop.json("SELECT sync.health()");
    let set_aside = &health["set_aside"];
    assert_eq!(set_aside["total"], 1, "{health}");
    let item = &set_aside["first"][0];
    assert_eq!(item["table"], ODD, "{health}");
    assert_eq!(
        item["key"], "00000000-0000-0000-0000-0000000000ff",
        "{health}"
    );
    assert_eq!(item["remedy"], "fix", "{health}");
    let reason = item["reason"].as_str().unwrap();
    assert!(
        reason.contains(ODD) && reason.contains("more than a message carries"),
        "the reason names the table as declared: {reason}"
    );
}

// ---------------------------------------------------------------------------
// What the engine prints for hostile names runs as printed
// ---------------------------------------------------------------------------

/// Drops every trigger the engine wrote on the hostile schema's tables.
const DROP_THE_ENGINES_TRIGGERS: &str = "
    DO $$ DECLARE t record; BEGIN
        FOR t IN SELECT tgname, tgrelid::regclass AS rel FROM pg_trigger
                  WHERE tgname LIKE 'sync\\_%' AND NOT tgisinternal LOOP
            EXECUTE format('DROP TRIGGER %I ON %s', t.tgname, t.rel);
        END LOOP;
    END $$";

/// Drops every index of the hostile schema but the primary keys.
const DROP_THE_LOOKUP_INDEXES: &str = "
    DO $$ DECLARE i record; BEGIN
        FOR i IN SELECT x.indexrelid::regclass AS index FROM pg_index x
                   JOIN pg_class c ON c.oid = x.indrelid
                   JOIN pg_namespace n ON n.oid = c.relnamespace
                  WHERE n.nspname = current_setting('hostile.schema') AND NOT x.indisprimary LOOP
            EXECUTE format('DROP INDEX %s', i.index);
        END LOOP;
    END $$";

impl HostileShop {
    /// What `sync.check()` finds: (problem, fix).
    fn problems(&mut self) -> Vec<(String, String)> {
        self.pg
            .query("SELECT problem, fix FROM sync.check()", &[])
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect()
    }

    fn statements(&mut self, sql: &str) -> Vec<String> {
        self.pg
            .query(sql, &[])
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect()
    }

    fn assert_checks_clean(&mut self) {
        let problems = self.problems();
        assert!(problems.is_empty(), "the relay may run: {problems:#?}");
    }
}

/// The statement a fix prints after its first line's advice, or the whole
/// of a fix that is a statement. An ENABLE TRIGGER fix ends with an aside.
fn statement_of(fix: &str) -> &str {
    let statement = match fix.split_once(":\n") {
        Some((_, call)) => call,
        None => fix,
    };
    statement.split(" (or ENABLE ALWAYS").next().unwrap()
}

#[test]
fn the_ddl_and_the_fixes_the_engine_prints_for_hostile_names_run_as_printed() {
    let mut shop = HostileShop::open();
    shop.assert_checks_clean();
    shop.run(&format!("SET hostile.schema = {}", lit(SCHEMA)));

    // The triggers, printed by the check and by sync.triggers().
    let printed = shop.statements("SELECT * FROM sync.triggers()");
    assert!(printed.len() >= DOWN.len() + 2, "{printed:#?}");
    shop.run(DROP_THE_ENGINES_TRIGGERS);
    let problems = shop.problems();
    assert_eq!(
        problems.len(),
        printed.len(),
        "a missing trigger each: {problems:#?}"
    );
    for (_, fix) in problems {
        shop.run(statement_of(&fix));
    }
    shop.assert_checks_clean();
    shop.run(DROP_THE_ENGINES_TRIGGERS);
    for statement in printed {
        shop.run(&statement);
    }
    shop.assert_checks_clean();

    // A trigger disabled: the fix enables it.
    shop.run(&format!(
        "ALTER TABLE {} DISABLE TRIGGER sync_note_row",
        rel(PRODUCTS)
    ));
    let problems = shop.problems();
    assert_eq!(problems.len(), 1, "{problems:#?}");
    shop.run(statement_of(&problems[0].1));
    shop.assert_checks_clean();

    // The lookups' indexes, printed by the check and by sync.indexes().
    shop.run(DROP_THE_LOOKUP_INDEXES);
    let printed = shop.statements("SELECT * FROM sync.indexes()");
    assert!(!printed.is_empty(), "the lookups need indexes");
    for statement in printed {
        shop.run(&statement);
    }
    shop.assert_checks_clean();

    // A table that drifted: the call printed declares it again.
    shop.run(&format!(
        "ALTER TABLE {} ADD COLUMN {} text",
        rel(STATE),
        q("Nëw \"col\"; 'x'")
    ));
    let problems = shop.problems();
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert!(problems[0].0.contains(STATE), "{problems:#?}");
    shop.run(statement_of(&problems[0].1));
    shop.assert_checks_clean();

    // An active view without the column an assigned rule reads is refused.
    shop.run(&format!(
        "CREATE VIEW {} AS SELECT \"Id\" FROM {}",
        rel(KEYS_ONLY),
        rel(STATE)
    ));
    let refused = shop
        .pg
        .execute(
            &format!(
                "SELECT sync.declare_table($1, mirror => 'both', sync => {}, origin => $2, \
                 replica_owned => {}, active => $3)",
                lit(&format!("assigned({})", q(STATE_REGISTER))),
                one_name_array(BATTERY)
            ),
            &[&rel(STATE), &STATE_REGISTER, &rel(KEYS_ONLY)],
        )
        .expect_err("a view without the assigned column is refused");
    let message = refused
        .as_db_error()
        .expect("the server's refusal")
        .message();
    assert!(
        message.contains(KEYS_ONLY) && message.contains(STATE_REGISTER),
        "the refusal names the view and the column: {message}"
    );
    shop.assert_checks_clean();

    // Taken back by its declared name, and declared again.
    shop.pg
        .execute("SELECT sync.undeclare_table($1)", &[&CUSTOMERS])
        .unwrap();
    shop.assert_checks_clean();
    shop.run(&format!(
        "SELECT sync.declare_table({}, sync => {})",
        lit(&rel(CUSTOMERS)),
        lit(&format!(
            "grouped(members => {}, assigned => {})",
            rel(MEMBERS),
            rel(REGISTER_LISTS)
        ))
    ));
    shop.assert_checks_clean();
}

// ---------------------------------------------------------------------------
// Partitions, an active view, a name of its own, a created column
// ---------------------------------------------------------------------------

const PARTED: &str = "Pärt; \"itioned\" 'ü'";
const COMPANY: &str = "Cömpany; \"Id\"";
const ITEMS: &str = "Ïtems 'p' %s";
const SHOWN_AS: &str = "Shown; \"as\" ünï $1";
const RETIRED: &str = "Retired?";
const ACTIVE: &str = "Äctive \"items\"";
const SALES: &str = "Sälës; 'up'";
const SELLER: &str = "Séller";
const CREATED: &str = "Créated; At";

fn parted(table: &str) -> String {
    format!("{}.{}", q(PARTED), q(table))
}

fn parted_server_schema() -> String {
    format!(
        "CREATE SCHEMA {schema};
         CREATE TABLE {registers} (\"Id\" uuid PRIMARY KEY, {company} uuid NOT NULL);
         CREATE TABLE {items} (
             \"Id\" uuid PRIMARY KEY, {company} uuid NOT NULL,
             \"Näme\" text NOT NULL, {retired} boolean NOT NULL DEFAULT false);
         CREATE VIEW {active} AS SELECT \"Id\", {company} FROM {items} WHERE NOT {retired};
         CREATE TABLE {sales} (
             \"Id\" uuid PRIMARY KEY, {company} uuid, {seller} uuid NOT NULL,
             {created} timestamptz NOT NULL);
         SELECT sync.declare_replicas({registers_text}, id => 'Id', partitioned_by => {company_text});
         SELECT sync.declare_table({items_text}, sync => 'broadcast', name => {shown_text},
                                   active => {active_text});
         SELECT sync.declare_table({sales_text}, mirror => 'record', key => '{{Id}}',
                                   origin => {seller_text}, created => {created_text});",
        schema = q(PARTED),
        registers = parted(REGISTERS),
        company = q(COMPANY),
        items = parted(ITEMS),
        retired = q(RETIRED),
        active = parted(ACTIVE),
        sales = parted(SALES),
        seller = q(SELLER),
        created = q(CREATED),
        registers_text = lit(&parted(REGISTERS)),
        company_text = lit(COMPANY),
        items_text = lit(&parted(ITEMS)),
        shown_text = lit(SHOWN_AS),
        active_text = lit(&parted(ACTIVE)),
        sales_text = lit(&parted(SALES)),
        seller_text = lit(SELLER),
        created_text = lit(CREATED),
    )
}

fn parted_register_schema() -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS {shown} (
             \"Id\" BLOB PRIMARY KEY NOT NULL, {company} BLOB NOT NULL,
             \"Näme\" TEXT NOT NULL, {retired} BOOLEAN NOT NULL);
         CREATE TABLE IF NOT EXISTS {sales} (
             \"Id\" BLOB PRIMARY KEY NOT NULL, {company} BLOB, {seller} BLOB NOT NULL,
             {created} TEXT NOT NULL);",
        shown = q(SHOWN_AS),
        company = q(COMPANY),
        retired = q(RETIRED),
        sales = q(SALES),
        seller = q(SELLER),
        created = q(CREATED),
    )
}

fn parted_tables() -> Tables {
    Tables::new(vec![
        Table::catalog(SHOWN_AS),
        Table::record(SALES).origin(SELLER).created(CREATED),
    ])
}

/// A view of the active rows without their partition: the planner could
/// not tell which replicas they go to.
const KEYS_ONLY: &str = "Kéys \"only\"";

#[test]
fn partitions_an_active_view_and_a_name_of_its_own_fight_back_too() {
    let mut shop = HostileShop::open_with(&parted_server_schema());
    shop.run(&format!(
        "CREATE VIEW {} AS SELECT \"Id\" FROM {}",
        parted(KEYS_ONLY),
        parted(ITEMS)
    ));
    let refused = shop
        .pg
        .execute(
            "SELECT sync.declare_table($1, sync => 'broadcast', name => $2, active => $3)",
            &[&parted(ITEMS), &SHOWN_AS, &parted(KEYS_ONLY)],
        )
        .expect_err("a view without the partition column is refused");
    let message = refused
        .as_db_error()
        .expect("the server's refusal")
        .message();
    assert!(
        message.contains(KEYS_ONLY) && message.contains(COMPANY),
        "the refusal names the view and the column: {message}"
    );
    let (north, south) = (Uuid::new_v4(), Uuid::new_v4());
    let mut registers = Vec::new();
    for company in [north, south] {
        let id = Uuid::new_v4();
        shop.run(&format!(
            "INSERT INTO {} VALUES ('{id}', '{company}');
             INSERT INTO {} (\"Id\", {}, \"Näme\", {}) VALUES
                 (gen_random_uuid(), '{company}', 'kept; \"ü\"', false),
                 (gen_random_uuid(), '{company}', 'retired', true);",
            parted(REGISTERS),
            parted(ITEMS),
            q(COMPANY),
            q(RETIRED)
        ));
        registers.push(shop.open_replica(id, &parted_register_schema(), parted_tables()));
    }
    shop.sync_all(&mut registers);
    let columns = ["Id", COMPANY, "Näme"];
    for (register, company) in registers.iter().zip([north, south]) {
        let should = shop.rows_of(
            &parted(ITEMS),
            &columns,
            &format!("{} = '{company}' AND NOT {}", q(COMPANY), q(RETIRED)),
        );
        assert_eq!(held(register, SHOWN_AS, &columns), should);
        assert_eq!(should.len(), 1, "its company's active item only");
    }

    // A sale goes up, its created column written once.
    let sale = Uuid::new_v4();
    registers[0]
        .connection()
        .execute(
            &format!(
                "INSERT INTO {} (\"Id\", {}, {}, {}) VALUES (?1, ?2, ?3, '2026-10-01T10:00:00.123456Z')",
                q(SALES),
                q(COMPANY),
                q(SELLER),
                q(CREATED)
            ),
            rusqlite::params![
                sale.as_bytes().to_vec(),
                north.as_bytes().to_vec(),
                registers[0].me().as_bytes().to_vec()
            ],
        )
        .unwrap();
    shop.sync_all(&mut registers);
    assert_eq!(
        shop.rows_of(&parted(SALES), &["Id", COMPANY, SELLER, CREATED], "true"),
        BTreeSet::from([vec![
            Some(sale.to_string()),
            Some(north.to_string()),
            Some(registers[0].me().to_string()),
            Some(shop.text(
                "SELECT '2026-10-01T10:00:00.123456Z'::timestamptz::text",
                &[]
            )),
        ]])
    );

    // Provisioned again from scratch, it holds the same.
    let first = registers[0].me();
    let before = held(&registers[0], SHOWN_AS, &columns);
    shop.pg
        .execute("SELECT sync.resync($1)", &[&first])
        .unwrap();
    shop.sync_all(&mut registers);
    assert_eq!(held(&registers[0], SHOWN_AS, &columns), before);

    // The reads of a partition name the tables as declared.
    let scope = serde_json::json!({ "partition": north.to_string() });
    let overview: Value = shop
        .pg
        .query_one("SELECT sync.overview($1, 100)", &[&scope])
        .unwrap()
        .get(0);
    let tables: BTreeSet<String> = overview["tables"]
        .as_array()
        .unwrap_or_else(|| panic!("{overview}"))
        .iter()
        .map(|t| t["table"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(tables, names(&[SHOWN_AS, SALES]), "{overview}");
    assert_eq!(overview["states"]["synced"], 1, "{overview}");
    let item = shop.text(
        &format!(
            "SELECT \"Id\"::text FROM {} WHERE {} = '{north}' AND NOT {}",
            parted(ITEMS),
            q(COMPANY),
            q(RETIRED)
        ),
        &[],
    );
    let row: Value = shop
        .pg
        .query_one(
            "SELECT sync.row_progress($1, $2, $3)",
            &[&scope, &SHOWN_AS, &item],
        )
        .unwrap()
        .get(0);
    assert_eq!(row["table"], SHOWN_AS, "{row}");
    let explained: Value = shop.explain(first, SHOWN_AS, &item);
    assert_eq!(explained["state"], "holds", "{explained}");
    let retired = shop.text(
        &format!(
            "SELECT \"Id\"::text FROM {} WHERE {} = '{north}' AND {}",
            parted(ITEMS),
            q(COMPANY),
            q(RETIRED)
        ),
        &[],
    );
    let explained: Value = shop.explain(first, SHOWN_AS, &retired);
    assert_eq!(
        explained["should"], false,
        "outside the active view: {explained}"
    );
    let metrics = shop.text("SELECT sync.metrics(true)", &[]);
    assert!(metrics.contains("Shown; \\\"as\\\" ünï $1"), "{metrics}");
}

// ---------------------------------------------------------------------------
// The relay worker in a database whose name fights back
// ---------------------------------------------------------------------------

const DATABASE: &str = "Shöp, \"db\"; drop database x;--";

/// Long enough for a busy machine; the wait ends as soon as it may.
const PATIENCE: std::time::Duration = std::time::Duration::from_secs(30);

fn connect_to(cluster: &Cluster, database: &str) -> Client {
    let mut config = postgres::Config::new();
    config
        .host_path(cluster.socket_dir())
        .port(cluster.port())
        .user("postgres")
        .dbname(database);
    config
        .connect(postgres::NoTls)
        .unwrap_or_else(|e| panic!("cannot connect to {database}: {e}"))
}

#[test]
fn a_relay_worker_runs_in_a_database_whose_name_fights_back() {
    let cluster =
        Cluster::start_with(&["shared_preload_libraries=magic_sync", "magic_sync.idle=1"]);
    let mut admin = cluster.connect("postgres");
    // Each alone: neither runs inside a transaction block.
    admin
        .batch_execute(&format!("CREATE DATABASE {}", q(DATABASE)))
        .unwrap();
    admin
        .batch_execute(&format!(
            "ALTER SYSTEM SET magic_sync.database = {}",
            lit(&format!("postgres, {}", q(DATABASE)))
        ))
        .unwrap();
    cluster.restart_immediately();
    let mut pg = connect_to(&cluster, DATABASE);
    pg.batch_execute("CREATE EXTENSION magic_sync").unwrap();
    pg.batch_execute(&server_schema()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut shop = HostileShop {
        _cluster: cluster,
        pg,
        dir,
        set_aside: 0,
    };
    let (a, mut register) = shop.add_register();
    write_the_catalog(&mut shop, a);

    // No CALL sync.relay(): the worker of that database relays.
    let began = std::time::Instant::now();
    loop {
        common::deliver(&mut shop.pg, &mut register);
        common::report(&mut shop.pg, &mut register);
        let held_now = held(&register, PRODUCTS, &PRODUCT_COLUMNS);
        if held_now == shop.rows(PRODUCTS, &PRODUCT_COLUMNS, "true") && held_now.len() == 2 {
            break;
        }
        assert!(
            began.elapsed() < PATIENCE,
            "waited {PATIENCE:?} for the worker of {DATABASE} to relay"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let workers: i64 = shop
        .pg
        .query_one(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE backend_type = 'magic_sync relay' AND datname = $1",
            &[&DATABASE],
        )
        .unwrap()
        .get(0);
    assert_eq!(workers, 1, "one worker runs in {DATABASE}");
}

//! Passes that share a session: its scratch tables live as long as it does,
//! and the check before a pass is skipped while nothing it reads changed
//! (what it found last is kept: the tables it stopped stay stopped).
//! Whatever came before in the session (a pass undone, a big pass, a change
//! of the catalog in this session or another), each pass is as a first
//! pass in a fresh session would be.

mod common;

use common::*;
use postgres::Client;

/// What a pass found the database to differ in from the declarations, or
/// None when it planned every table (any other failure panics): its
/// refusal, for a problem of the whole relay, or the problems it recorded
/// (sync.drift) for the tables it stopped.
fn refusal(pg: &mut Client) -> Option<String> {
    let summary: serde_json::Value = match pg.query_one("CALL sync.relay()", &[]) {
        Ok(row) => row.get(0),
        Err(e) => {
            let error = format!("{e:?}");
            assert!(
                error.contains("the relay does not run while the database differs"),
                "{error}"
            );
            return Some(error);
        }
    };
    let stopped = summary["stopped"].as_array().expect("the tables stopped");
    if stopped.is_empty() {
        return None;
    }
    let problems: Vec<String> = pg
        .query("SELECT problem FROM sync.drift ORDER BY problem", &[])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(!problems.is_empty(), "{summary}");
    Some(format!("stopped {stopped:?}: {}", problems.join("\n")))
}

/// Runs a pass in a transaction that is rolled back: its work undone.
fn undone_pass(pg: &mut Client) {
    pg.batch_execute(
        "BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT sync_internal.pass(false); ROLLBACK",
    )
    .unwrap();
}

#[test]
fn a_pass_undone_leaves_nothing_for_the_next_pass_of_its_session() {
    let mut shop = Shop::open();
    shop.run(
        "INSERT INTO shop.products (id, name, price_cents) \
         SELECT gen_random_uuid(), 'Item ' || i, i FROM generate_series(1, 20) AS i",
    );
    let a = shop.add_register("Register 1");
    let mut register = open_register(&shop.file_of(a), a);
    // The session's first pass undone: the tables it made are gone with it.
    undone_pass(&mut shop.pg);
    sync_all(&mut shop, std::slice::from_mut(&mut register));
    assert_each_holds_the_servers_products(&mut shop, std::slice::from_ref(&register));

    // A pass undone after passes that ran: what it emptied is back.
    shop.run("DELETE FROM shop.products WHERE name = 'Item 1'");
    sync_all(&mut shop, std::slice::from_mut(&mut register));
    shop.run("UPDATE shop.products SET price_cents = 0 WHERE name = 'Item 2'");
    undone_pass(&mut shop.pg);
    shop.run("UPDATE shop.products SET price_cents = 1 WHERE name = 'Item 3'");
    sync_all(&mut shop, std::slice::from_mut(&mut register));
    assert_each_holds_the_servers_products(&mut shop, std::slice::from_ref(&register));
    let notes: i64 = shop
        .pg
        .query_one("SELECT count(*) FROM sync.notes", &[])
        .unwrap()
        .get(0);
    assert_eq!(notes, 0);
}

#[test]
fn small_passes_after_a_big_one_in_the_same_session_stay_exact() {
    let mut shop = Shop::open();
    let a = shop.add_register("Register 1");
    let mut register = open_register(&shop.file_of(a), a);
    sync_all(&mut shop, std::slice::from_mut(&mut register));
    // Thousands of rows in question for a register kept up to date: its
    // scratch tables grow large, and are analyzed and truncated.
    shop.run(
        "INSERT INTO shop.products (id, name, price_cents) \
         SELECT gen_random_uuid(), 'Item ' || i, i FROM generate_series(1, 5000) AS i",
    );
    sync_all(&mut shop, std::slice::from_mut(&mut register));
    assert_each_holds_the_servers_products(&mut shop, std::slice::from_ref(&register));
    for change in [
        "UPDATE shop.products SET price_cents = -1 WHERE name = 'Item 7'",
        "DELETE FROM shop.products WHERE name = 'Item 8'",
        "UPDATE shop.products SET price_cents = price_cents + 1 WHERE price_cents % 2 = 0",
        "DELETE FROM shop.products WHERE price_cents % 3 = 0",
        "UPDATE shop.products SET name = name || '.' WHERE price_cents < 10",
    ] {
        shop.run(change);
        sync_all(&mut shop, std::slice::from_mut(&mut register));
        assert_each_holds_the_servers_products(&mut shop, std::slice::from_ref(&register));
    }
}

#[test]
fn a_table_changed_after_a_pass_is_stopped_by_the_next_whichever_session_changed_it() {
    let mut shop = Shop::open();
    shop.add_register("Register 1");
    assert_eq!(refusal(&mut shop.pg), None);
    assert_eq!(refusal(&mut shop.pg), None);
    let mut other = shop.cluster().connect("shop");

    other
        .batch_execute("ALTER TABLE shop.products ADD COLUMN sku text")
        .unwrap();
    let refused = refusal(&mut shop.pg).expect("stopped");
    assert!(refused.contains("column sku (text) was added"), "{refused}");
    assert!(
        refused.starts_with("stopped [String(\"products\")]"),
        "{refused}"
    );
    other
        .batch_execute("ALTER TABLE shop.products DROP COLUMN sku")
        .unwrap();
    assert_eq!(refusal(&mut shop.pg), None);

    shop.run("ALTER TABLE shop.products DISABLE TRIGGER sync_note_row");
    let refused = refusal(&mut shop.pg).expect("refused");
    assert!(refused.contains("is disabled"), "{refused}");
    shop.run("ALTER TABLE shop.products ENABLE TRIGGER sync_note_row");
    assert_eq!(refusal(&mut shop.pg), None);
}

#[test]
fn a_schema_or_type_renamed_after_a_pass_is_found_by_the_next() {
    let mut shop = Shop::open();
    shop.run(
        "CREATE TYPE shop.size AS ENUM ('small', 'large'); \
         CREATE TABLE shop.boxes (id uuid PRIMARY KEY, size shop.size NOT NULL); \
         SELECT sync.declare_table('shop.boxes', sync => 'broadcast')",
    );
    shop.add_register("Register 1");
    assert_eq!(refusal(&mut shop.pg), None);
    assert_eq!(refusal(&mut shop.pg), None);
    let mut other = shop.cluster().connect("shop");

    other
        .batch_execute("ALTER TYPE shop.size RENAME TO dimension")
        .unwrap();
    let refused = refusal(&mut shop.pg).expect("refused");
    assert!(
        refused.contains("column size is shop.dimension"),
        "{refused}"
    );
    other
        .batch_execute("ALTER TYPE shop.dimension RENAME TO size")
        .unwrap();
    assert_eq!(refusal(&mut shop.pg), None);

    other
        .batch_execute("ALTER SCHEMA shop RENAME TO store")
        .unwrap();
    let refused = refusal(&mut shop.pg).expect("refused");
    assert!(refused.contains("does not exist"), "{refused}");
    other
        .batch_execute("ALTER SCHEMA store RENAME TO shop")
        .unwrap();
    assert_eq!(refusal(&mut shop.pg), None);
}

/// A pass plans at most `magic_sync.notes_per_pass` notes. A row with
/// notes beyond that batch is still recorded at its newest note (read from
/// sync.notes again), and sent as it is now; the notes beyond wait for the
/// next pass, which finds the row up to date.
#[test]
fn a_batch_cut_short_records_each_row_it_plans_at_its_newest_note() {
    let mut shop = Shop::open();
    let a = shop.add_register("Register 1");
    let mut register = open_register(&shop.file_of(a), a);
    sync_all(&mut shop, std::slice::from_mut(&mut register));

    // Notes, oldest first: Tea inserted, Jam inserted, Tea changed twice.
    shop.run(
        "INSERT INTO shop.products (id, name, price_cents) VALUES (gen_random_uuid(), 'Tea', 250); \
         INSERT INTO shop.products (id, name, price_cents) VALUES (gen_random_uuid(), 'Jam', 400); \
         UPDATE shop.products SET price_cents = 260, updated_at = now() WHERE name = 'Tea'; \
         UPDATE shop.products SET price_cents = 270, updated_at = now() WHERE name = 'Tea'",
    );
    let newest = |pg: &mut Client, name: &str| -> i64 {
        pg.query_one(
            "SELECT max(n.id) FROM sync.notes n JOIN shop.products p ON n.key = p.id::text \
             WHERE p.name = $1",
            &[&name],
        )
        .unwrap()
        .get(0)
    };
    let (tea, jam) = (newest(&mut shop.pg, "Tea"), newest(&mut shop.pg, "Jam"));

    shop.run("SET magic_sync.notes_per_pass = 2");
    let summary: serde_json::Value = shop.pg.query_one("CALL sync.relay()", &[]).unwrap().get(0);
    assert_eq!(summary["notes"], 2, "{summary}");
    let recorded = |pg: &mut Client, name: &str| -> i64 {
        pg.query_one(
            "SELECT h.note FROM sync.held h JOIN shop.products p ON h.key = p.id::text \
             WHERE h.table_name = 'products' AND p.name = $1",
            &[&name],
        )
        .unwrap()
        .get(0)
    };
    assert_eq!(recorded(&mut shop.pg, "Tea"), tea, "Tea at its newest note");
    assert_eq!(recorded(&mut shop.pg, "Jam"), jam);
    deliver(&mut shop.pg, &mut register);
    assert_each_holds_the_servers_products(&mut shop, std::slice::from_ref(&register));

    // The rest of the batch plans Tea again, and finds nothing to send.
    shop.run("RESET magic_sync.notes_per_pass");
    let summary: serde_json::Value = shop.pg.query_one("CALL sync.relay()", &[]).unwrap().get(0);
    assert_eq!(summary["notes"], 2, "{summary}");
    assert_eq!(summary["messages"], 0, "{summary}");
}

//! A backlog of notes, drained by passes of a batch each (issue 37): a pass
//! reads its batch and the rows it changed, not the whole backlog, and what
//! it drains leaves every replica holding every row at its newest note.

mod common;

use common::*;
use postgres::Client;

/// Rows of sync.notes read so far, by sequential and index scans, as the
/// statistics count them (flushed by the session that read them).
fn notes_rows_read(pg: &mut Client) -> i64 {
    pg.batch_execute("SELECT pg_stat_force_next_flush()")
        .unwrap();
    // A statement after the flush's transaction, so that its counts are in.
    pg.batch_execute("SELECT 1").unwrap();
    pg.batch_execute("SELECT pg_stat_clear_snapshot()").unwrap();
    pg.query_one(
        "SELECT (coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0))::bigint \
         FROM pg_stat_all_tables WHERE relid = 'sync.notes'::regclass",
        &[],
    )
    .unwrap()
    .get(0)
}

/// Each product's newest note, by name.
fn newest_notes(pg: &mut Client) -> Vec<(String, i64)> {
    pg.query(
        "SELECT p.name, max(n.id) FROM sync.notes n JOIN shop.products p ON n.key = p.id::text \
         GROUP BY p.name ORDER BY p.name",
        &[],
    )
    .unwrap()
    .iter()
    .map(|r| (r.get(0), r.get(1)))
    .collect()
}

/// What a register is recorded as holding of each product, by name.
fn recorded_notes(pg: &mut Client, register: uuid::Uuid) -> Vec<(String, i64)> {
    pg.query(
        "SELECT p.name, h.note FROM sync.held h JOIN shop.products p ON h.key = p.id::text \
         WHERE h.table_name = 'products' AND h.replica = $1 ORDER BY p.name",
        &[&register],
    )
    .unwrap()
    .iter()
    .map(|r| (r.get(0), r.get(1)))
    .collect()
}

#[test]
fn a_pass_over_a_backlog_reads_its_batch_of_notes_and_not_the_backlog() {
    let mut shop = Shop::open();
    let a = shop.add_register("Register 1");
    let mut register = open_register(&shop.file_of(a), a);
    shop.run(
        "INSERT INTO shop.products (id, name, price_cents) \
         SELECT gen_random_uuid(), 'Item ' || i, i FROM generate_series(1, 2000) AS i",
    );
    sync_all(&mut shop, std::slice::from_mut(&mut register));
    // 20,000 notes waiting, ten of each product, in the order of a steady
    // stream of writes; passes of 1,000.
    for _ in 0..10 {
        shop.run("UPDATE shop.products SET price_cents = price_cents + 1, updated_at = now()");
    }
    shop.run("ANALYZE sync.notes");
    shop.run("SET magic_sync.notes_per_pass = 1000");
    for pass in 0..3 {
        let before = notes_rows_read(&mut shop.pg);
        let summary = shop.relay();
        assert_eq!(summary["notes"], 1000, "{summary}");
        let read = notes_rows_read(&mut shop.pg) - before;
        // The batch, and a look-up of each row it changed: at most two
        // notes a note planned, where reading the backlog is twenty.
        assert!(
            read <= 2 * 1000,
            "pass {pass} read {read} notes of sync.notes for a batch of 1,000 out of {}",
            20_000 - 1000 * pass
        );
    }
}

#[test]
fn a_backlog_drained_in_batches_leaves_every_replica_holding_every_row_at_its_newest_note() {
    let mut shop = Shop::open();
    let registers: Vec<_> = (1..=2)
        .map(|i| shop.add_register(&format!("Register {i}")))
        .collect();
    let mut replicas: Vec<_> = registers
        .iter()
        .map(|&r| open_register(&shop.file_of(r), r))
        .collect();
    shop.run(
        "INSERT INTO shop.products (id, name, price_cents) \
         SELECT gen_random_uuid(), 'Item ' || i, i FROM generate_series(1, 500) AS i",
    );
    sync_all(&mut shop, &mut replicas);
    // Every product changed once, then 3,000 single-row changes by random
    // product, and some rows deleted and inserted again among them.
    shop.run(
        "UPDATE shop.products SET price_cents = price_cents + 1, updated_at = now(); \
         DO $$ BEGIN FOR i IN 1..3000 LOOP \
           UPDATE shop.products SET price_cents = price_cents + 1, updated_at = now() \
           WHERE name = 'Item ' || (1 + floor(random() * 500))::int; \
         END LOOP; END $$; \
         DELETE FROM shop.products WHERE name IN ('Item 7', 'Item 8'); \
         INSERT INTO shop.products (id, name, price_cents) VALUES (gen_random_uuid(), 'Item 7', 7)",
    );
    let newest = newest_notes(&mut shop.pg);
    shop.run("SET magic_sync.notes_per_pass = 250");
    let mut passes = 0;
    while shop.relay()["notes"] != 0 {
        passes += 1;
    }
    assert!(passes >= 14, "drained in batches ({passes} passes)");
    let count: i64 = shop
        .pg
        .query_one("SELECT count(*) FROM sync.notes", &[])
        .unwrap()
        .get(0);
    assert_eq!(count, 0, "every note planned");
    for (register, replica) in registers.iter().zip(replicas.iter_mut()) {
        assert_eq!(
            recorded_notes(&mut shop.pg, *register),
            newest,
            "each row recorded at its newest note"
        );
        deliver(&mut shop.pg, replica);
        report(&mut shop.pg, replica);
    }
    assert_each_holds_the_servers_products(&mut shop, &replicas);
}

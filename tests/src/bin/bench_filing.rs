//! Filing's figures, measured side by side in one run: 100,000 receipts
//! sent up by registers in uploads of 500 rows, each upload filed by
//! `sync.receive` in a transaction of its own (as the default transport
//! files them), beside a plain multi-row INSERT of the same rows, 500 at a
//! time, into a table like the receipts' (same columns, same key), each in
//! a transaction of its own.
//!
//! Each upload is an `Up` as a register builds it: its rows as JSON (a
//! 64-bit integer as its decimal text, an instant RFC 3339), a key beside
//! each, an upload number, and the last message it applied (sealed, as the
//! server sent it). Filing answers each with a `Filed`, written to the
//! register's queue.
//!
//! Run it with a release build of the extension installed (`cargo pgrx
//! install --release -p magic_sync --pg-config ...`), then `cargo run
//! --release -p magic_sync_tests --bin bench_filing`. `--rows N` and
//! `--per-upload N` change the sizes; `--registers N` spreads the uploads
//! over more registers.

use std::time::Instant;

use magic_sync_proto::wire::{to_replica::Body, ToReplica, Up, UpTable};
use magic_sync_tests::args::arg;
use magic_sync_tests::relaying::relay;
use magic_sync_tests::Cluster;
use postgres::Client;
use prost::Message;
use uuid::Uuid;

const SHOP: &str = "
    CREATE SCHEMA shop;
    CREATE TABLE shop.registers (id uuid PRIMARY KEY, active boolean NOT NULL DEFAULT true);
    CREATE TABLE shop.receipts (
        id uuid PRIMARY KEY, register_id uuid NOT NULL, total_cents bigint NOT NULL,
        sold_at timestamptz NOT NULL, note text);
    CREATE TABLE shop.receipts_plain (LIKE shop.receipts INCLUDING ALL);
    SELECT sync.declare_replicas('shop.registers', live => 'active');
    SELECT sync.declare_table('shop.receipts', mirror => 'record', origin => 'register_id');
";

/// One receipt: id, its register, total, when, a note.
struct Receipt {
    id: Uuid,
    register: Uuid,
    total: i64,
    sold_at: String,
}

fn receipts(count: usize, registers: &[Uuid]) -> Vec<Receipt> {
    (0..count)
        .map(|i| Receipt {
            id: Uuid::new_v4(),
            register: registers[(i / 500) % registers.len()],
            total: (i as i64 * 37) % 10_000,
            sold_at: format!(
                "2026-10-01T10:{:02}:{:02}.{:06}Z",
                (i / 60) % 60,
                i % 60,
                i % 1_000_000
            ),
        })
        .collect()
}

fn row_json(r: &Receipt) -> Vec<u8> {
    serde_json::json!({
        "id": r.id.to_string(),
        "register_id": r.register.to_string(),
        "total_cents": r.total.to_string(),
        "sold_at": r.sold_at,
        "note": "paid by card",
    })
    .to_string()
    .into_bytes()
}

/// What a register last applied, as the server sent it: the head of its
/// queue after its provisioning.
struct Applied {
    epoch: String,
    sequence: u64,
    nonce: u64,
    mac: Vec<u8>,
}

fn provisioned(pg: &mut Client, register: Uuid) -> Applied {
    let mut last = None;
    while let Some(row) = pg
        .query_opt("SELECT id, message FROM sync.next($1)", &[&register])
        .unwrap()
    {
        let (id, bytes): (String, Vec<u8>) = (row.get(0), row.get(1));
        let message = ToReplica::decode(bytes.as_slice()).unwrap();
        last = match message.body {
            Some(Body::Down(d)) => Some(Applied {
                epoch: d.epoch,
                sequence: d.sequence,
                nonce: d.nonce,
                mac: d.mac,
            }),
            Some(Body::EndSnapshot(e)) => Some(Applied {
                epoch: e.epoch,
                sequence: e.sequence,
                nonce: e.nonce,
                mac: e.mac,
            }),
            _ => last,
        };
        pg.query_one("SELECT sync.ack($1, $2)", &[&register, &id])
            .unwrap();
    }
    last.expect("a provisioning")
}

fn up(batch: &[Receipt], applied: &Applied, number: u64) -> Vec<u8> {
    Up {
        protocol: 1,
        epoch: applied.epoch.clone(),
        sequence: applied.sequence,
        nonce: applied.nonce,
        mac: applied.mac.clone(),
        tables: vec![UpTable {
            table: "receipts".into(),
            upserts: batch.iter().map(row_json).collect(),
            keys: batch.iter().map(|r| r.id.to_string()).collect(),
            ..UpTable::default()
        }],
        uploads: vec![number],
        ..Up::default()
    }
    .encode_to_vec()
}

fn plain_insert(pg: &mut Client, batch: &[Receipt]) {
    let mut sql = String::from(
        "INSERT INTO shop.receipts_plain (id, register_id, total_cents, sold_at, note) VALUES ",
    );
    let mut params: Vec<&(dyn postgres::types::ToSql + Sync)> = Vec::with_capacity(batch.len() * 4);
    let totals: Vec<i64> = batch.iter().map(|r| r.total).collect();
    for (i, r) in batch.iter().enumerate() {
        if i > 0 {
            sql.push_str(", ");
        }
        let n = i * 4;
        sql.push_str(&format!(
            "(${}, ${}, ${}, ${}::text::timestamptz, 'paid by card')",
            n + 1,
            n + 2,
            n + 3,
            n + 4
        ));
        params.push(&r.id);
        params.push(&r.register);
        params.push(&totals[i]);
        params.push(&r.sold_at);
    }
    pg.execute(sql.as_str(), &params).unwrap();
}

fn count(pg: &mut Client, table: &str) -> i64 {
    pg.query_one(&format!("SELECT count(*) FROM {table}"), &[])
        .unwrap()
        .get(0)
}

fn main() {
    let total = arg::<usize>("--rows", 100_000);
    let per_upload = arg::<usize>("--per-upload", 500);
    let register_count = arg::<usize>("--registers", 4);
    let cluster = Cluster::start();
    let mut pg = cluster.database_with_extension("bench");
    pg.batch_execute(SHOP).unwrap();
    let registers: Vec<Uuid> = (0..register_count).map(|_| Uuid::new_v4()).collect();
    for id in &registers {
        pg.execute("INSERT INTO shop.registers (id) VALUES ($1)", &[id])
            .unwrap();
    }
    relay(&mut pg);
    let applied: Vec<Applied> = registers.iter().map(|r| provisioned(&mut pg, *r)).collect();

    let rows = receipts(total, &registers);
    let batches: Vec<&[Receipt]> = rows.chunks(per_upload).collect();
    let ups: Vec<(Uuid, Vec<u8>)> = batches
        .iter()
        .enumerate()
        .map(|(i, batch)| {
            let r = registers
                .iter()
                .position(|r| *r == batch[0].register)
                .unwrap();
            (batch[0].register, up(batch, &applied[r], i as u64 + 1))
        })
        .collect();

    // Warm both paths up (plans, caches), then measure them in turns, so
    // the machine's noise falls on both alike.
    let warm: Vec<Receipt> = receipts(per_upload, &registers[..1]);
    pg.query_one(
        "SELECT sync.receive($1, $2)",
        &[&registers[0], &up(&warm, &applied[0], 999_999)],
    )
    .unwrap();
    plain_insert(&mut pg, &warm);
    pg.batch_execute(
        "TRUNCATE shop.receipts, shop.receipts_plain; DELETE FROM sync.outbox WHERE kind = 'filed'",
    )
    .unwrap();

    let mut filing = std::time::Duration::ZERO;
    let mut plain = std::time::Duration::ZERO;
    let mut first_verdict = None;
    for (i, ((register, bytes), batch)) in ups.iter().zip(&batches).enumerate() {
        let started = Instant::now();
        let verdict: String = pg
            .query_one("SELECT sync.receive($1, $2)::text", &[register, bytes])
            .unwrap()
            .get(0);
        filing += started.elapsed();
        if i == 0 {
            first_verdict = Some(verdict);
        }
        let started = Instant::now();
        plain_insert(&mut pg, batch);
        plain += started.elapsed();
    }
    let filed = count(&mut pg, "shop.receipts");
    let inserted = count(&mut pg, "shop.receipts_plain");
    let answered = count(&mut pg, "sync.outbox WHERE kind = 'filed'");
    assert_eq!(
        filed as usize, total,
        "every receipt filed: {first_verdict:?}"
    );
    assert_eq!(inserted as usize, total);
    assert_eq!(answered as usize, ups.len(), "every upload answered");

    let rate = |d: std::time::Duration| total as f64 / d.as_secs_f64();
    println!(
        "filing {total} receipts in {} uploads of {per_upload} rows ({} registers), each upload its own transaction:",
        ups.len(),
        registers.len()
    );
    println!(
        "  sync.receive  {:>8.0} rows/s  ({:.2} s, {:.2} ms per upload)",
        rate(filing),
        filing.as_secs_f64(),
        filing.as_secs_f64() * 1000.0 / ups.len() as f64
    );
    println!(
        "  plain INSERT  {:>8.0} rows/s  ({:.2} s, {:.2} ms per statement)",
        rate(plain),
        plain.as_secs_f64(),
        plain.as_secs_f64() * 1000.0 / ups.len() as f64
    );
    println!(
        "  filing takes {:.2}x the time of the plain INSERT ({:.0}% of its rate)",
        filing.as_secs_f64() / plain.as_secs_f64(),
        100.0 * rate(filing) / rate(plain)
    );
    println!(
        "  first upload's verdict: {}",
        first_verdict.unwrap_or_default()
    );
}

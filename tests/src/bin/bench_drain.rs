//! The relay alone, draining a backlog, against PostgreSQL's own logical
//! decoding of the same writes, in one run (issue 37):
//!
//! - pgbench is the writer: single-row UPDATEs by random key over 100,000
//!   products (`-c 4 -j 2 -M prepared`), 10 live replicas declared, and no
//!   relay running while it writes (no worker: the library is not
//!   preloaded), so the notes wait;
//! - 100,000 notes waiting, relayed by one pass; then 1,000,000, drained
//!   by `CALL sync.relay()` passes back to back: the changes a second, the
//!   relaying backend's CPU per change, and a pass's time per 100,000
//!   notes with 1,000,000 waiting against with 100,000 (a pass that costs
//!   its batch, not the backlog, takes the same);
//! - the writers' anchor: pgbench with nothing declared, the same writes;
//! - the relay's anchor: `pg_recvlogical` with pgoutput on a slot made before the
//!   million writes (a publication of the products), catching up after
//!   the writers stopped, to the end of their writes: its rate, and the
//!   walsender's CPU per change.
//!
//! Run with `bash scripts/bench.sh bench_drain` (a release build of the
//! extension), or against a copy of PostgreSQL with `PG_CONFIG` set.
//! Smaller for a quick look: `--backlog 200000 --batch 20000`.

use std::process::Command;
use std::time::Instant;

use magic_sync_tests::args::arg;
use magic_sync_tests::cluster::bindir;
use magic_sync_tests::pgbench::{
    by_number, cpu_seconds, pgbench, CpuWatch, Run, NUMBERED_DECLARED, NUMBERED_SHOP,
};
use magic_sync_tests::relaying::{drain, relay};
use magic_sync_tests::Cluster;
use postgres::Client;

/// pgbench's writes, `n` times over: its rate, writes a second.
fn write_with_pgbench(cluster: &Cluster, db: &str, writes: i64, products: i64) -> f64 {
    pgbench(cluster, db, &by_number(products), Run::Transactions(writes)).rate()
}

/// What was sent is taken and confirmed, as replicas that keep up would:
/// the outbox's bounds stay out of the figures.
fn replicas_took_everything(pg: &mut Client) {
    pg.batch_execute(
        "DELETE FROM sync.outbox; \
         UPDATE sync.replicas SET applied_sequence = last_sequence, applied_epoch = epoch",
    )
    .unwrap();
}

fn settle(pg: &mut Client) {
    pg.batch_execute("VACUUM ANALYZE").unwrap();
    pg.batch_execute("CHECKPOINT").unwrap();
    let _ = Command::new("sync").status();
}

/// One pass over what waits: (milliseconds, notes read).
fn timed_pass(pg: &mut Client) -> (f64, i64) {
    let started = Instant::now();
    let summary = relay(pg);
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    (ms, summary["notes"].as_i64().unwrap_or(0))
}

struct Drained {
    rate: f64,
    cpu_us: f64,
    first_pass_per_batch_ms: f64,
    mean_pass_per_batch_ms: f64,
    passes: usize,
}

/// Drains every note by passes back to back.
fn drain_timed(pg: &mut Client, pid: i32, batch: i64) -> Drained {
    let cpu = cpu_seconds(pid).unwrap_or(0.0);
    let started = Instant::now();
    let mut passes = Vec::new();
    loop {
        let (ms, notes) = timed_pass(pg);
        if notes == 0 {
            break;
        }
        passes.push((ms, notes));
    }
    let seconds = started.elapsed().as_secs_f64();
    let cpu = cpu_seconds(pid).unwrap_or(0.0) - cpu;
    let notes: i64 = passes.iter().map(|p| p.1).sum();
    let per_batch = |(ms, n): (f64, i64)| ms * batch as f64 / n as f64;
    Drained {
        rate: notes as f64 / seconds,
        cpu_us: cpu * 1e6 / notes as f64,
        first_pass_per_batch_ms: per_batch(passes[0]),
        mean_pass_per_batch_ms: passes.iter().map(|p| per_batch(*p)).sum::<f64>()
            / passes.len() as f64,
        passes: passes.len(),
    }
}

/// `pg_recvlogical` (pgoutput) on `slot`, from where it stands to `end`:
/// (changes a second, walsender's µs of CPU a change, its own µs a change).
fn decode(cluster: &Cluster, db: &str, slot: &str, end: &str, changes: i64) -> (f64, f64, f64) {
    let mut pg = cluster.connect(db);
    let started = Instant::now();
    let mut child = Command::new(bindir().join("pg_recvlogical"))
        .arg("-h")
        .arg(cluster.socket_dir())
        .args([
            "-p",
            &cluster.port().to_string(),
            "-U",
            "postgres",
            "-d",
            db,
        ])
        .args(["--slot", slot, "--start", "--no-loop", "-f", "/dev/null"])
        .args(["-o", "proto_version=1", "-o", "publication_names=bench"])
        .arg(format!("--endpos={end}"))
        .spawn()
        .expect("runs pg_recvlogical");
    let client_pid = child.id() as i32;
    let client_cpu = CpuWatch::of(client_pid);
    let mut walsender = None;
    while walsender.is_none() && started.elapsed().as_secs() < 30 {
        walsender = pg
            .query_opt(
                "SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1 AND active",
                &[&slot],
            )
            .unwrap()
            .and_then(|r| r.get::<_, Option<i32>>(0));
    }
    let server_cpu = CpuWatch::of(walsender.expect("the walsender started"));
    let status = child.wait().unwrap();
    let seconds = started.elapsed().as_secs_f64();
    assert!(status.success(), "pg_recvlogical failed");
    (
        changes as f64 / seconds,
        server_cpu.used() * 1e6 / changes as f64,
        client_cpu.used() * 1e6 / changes as f64,
    )
}

fn main() {
    let products = arg::<i64>("--products", 100_000);
    let replicas = arg::<i64>("--replicas", 10);
    let backlog = arg::<i64>("--backlog", 1_000_000);
    let batch = arg::<i64>("--batch", 100_000);
    let cluster = Cluster::start_with(&[
        "wal_level=logical",
        "max_wal_senders=4",
        "max_replication_slots=4",
        "shared_buffers=512MB",
    ]);
    let db = "drain";
    let mut pg = cluster.database_with_extension(db);
    pg.batch_execute(NUMBERED_SHOP).unwrap();
    pg.execute(
        "INSERT INTO shop.products (id, n, name, price_cents) \
         SELECT gen_random_uuid(), i, 'Product ' || i, i FROM generate_series(1, $1::bigint) AS i",
        &[&products],
    )
    .unwrap();
    // The anchor of the writers: pgbench with nothing declared.
    settle(&mut pg);
    let undeclared = write_with_pgbench(&cluster, db, batch, products);
    pg.batch_execute(NUMBERED_DECLARED).unwrap();
    drain(&mut pg);
    pg.execute(
        "INSERT INTO shop.registers (id) SELECT gen_random_uuid() FROM generate_series(1, $1::bigint)",
        &[&replicas],
    )
    .unwrap();
    drain(&mut pg);
    replicas_took_everything(&mut pg);
    // Its replicas take nothing while the backlog drains: with
    // magic_sync.messages_ahead at its default they would be passed over
    // after four passes (relay/plan/behind.rs), and the relay would plan
    // for the stand-in alone. At 0 it plans and records for ten replicas
    // that keep up, as it did before the setting.
    pg.batch_execute(&format!(
        "ALTER DATABASE {db} SET magic_sync.notes_per_pass = {batch}; \
         ALTER DATABASE {db} SET magic_sync.messages_ahead = 0"
    ))
    .unwrap();
    let mut pg = cluster.connect(db);
    let pid: i32 = pg.query_one("SELECT pg_backend_pid()", &[]).unwrap().get(0);
    println!(
        "{products} products, {replicas} live replicas, passes of {batch} notes; load before: {}",
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );

    // A batch waiting: one pass takes it all.
    settle(&mut pg);
    let written = write_with_pgbench(&cluster, db, batch, products);
    settle(&mut pg);
    let (small_ms, small_notes) = timed_pass(&mut pg);
    drain(&mut pg);
    replicas_took_everything(&mut pg);
    println!(
        "{batch} notes waiting (pgbench wrote them at {written:.0}/s, {:.2}x of its {undeclared:.0}/s \
         with nothing declared): one pass of {small_notes} in {small_ms:.0} ms",
        written / undeclared
    );

    // The backlog, with a slot made before it is written.
    settle(&mut pg);
    pg.execute(
        "SELECT pg_create_logical_replication_slot('bench', 'pgoutput')",
        &[],
    )
    .unwrap();
    let written = write_with_pgbench(&cluster, db, backlog, products);
    let end: String = pg
        .query_one("SELECT pg_current_wal_lsn()::text", &[])
        .unwrap()
        .get(0);
    settle(&mut pg);
    let drained = drain_timed(&mut pg, pid, batch);
    println!(
        "{backlog} notes waiting (pgbench wrote them at {written:.0}/s), drained in {} passes: \
         {:.0} changes/s, {:.1} µs of the relaying backend's CPU a change",
        drained.passes, drained.rate, drained.cpu_us
    );
    settle(&mut pg);
    let (decoded, walsender_us, client_us) = decode(&cluster, db, "bench", &end, backlog);
    println!(
        "pg_recvlogical (pgoutput), the same {backlog} writes: {decoded:.0} changes/s, \
         {walsender_us:.1} µs of the walsender's CPU a change ({client_us:.1} µs of its own)"
    );
    let small = small_ms * batch as f64 / small_notes.max(1) as f64;
    println!("\nfigure | measured | target");
    println!(
        "relay alone draining {backlog} notes against pgoutput | {:.0}/s against {decoded:.0}/s: {:.2}x | at least 0.8x",
        drained.rate,
        drained.rate / decoded
    );
    println!(
        "CPU a change, relay against walsender | {:.1} against {walsender_us:.1} µs: {:.2}x |",
        drained.cpu_us,
        drained.cpu_us / walsender_us
    );
    println!(
        "pass time per {batch} notes, {backlog} waiting (first pass; mean of the drain) against {batch} waiting | \
         {:.0} ms; {:.0} ms against {small:.0} ms: {:.2}x; {:.2}x | at most 1.2x",
        drained.first_pass_per_batch_ms,
        drained.mean_pass_per_batch_ms,
        drained.first_pass_per_batch_ms / small,
        drained.mean_pass_per_batch_ms / small
    );
    println!(
        "load after: {}",
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );
}

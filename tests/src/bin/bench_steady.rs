//! The relay worker under a steady stream of writes, against the build
//! before and against PostgreSQL's own figures, in one run (issue 37, the
//! relay's pacing):
//!
//! - pgbench is the writer: single-row UPDATEs by random key over 100,000
//!   products (`-c 4 -j 2 -M prepared`, fsync off), 10 live replicas
//!   declared, the relay worker running (the library preloaded); no
//!   register takes anything, the outbox bounds set out of reach and what
//!   was sent confirmed between the parts, so that no provisioning again
//!   enters the figures;
//! - the anchors, in the same cluster before anything is declared: pgbench
//!   unpaced, and pgbench unpaced with `pg_recvlogical` (pgoutput) decoding
//!   live, and how far behind decoding was when the writers stopped;
//! - pgbench paced at a steady rate (`-R`, 1,000 a second): the relay
//!   worker's CPU per change (its process's, until it relayed the last);
//! - a backlog drained by the worker (stopped with `sync.stop_relay()`
//!   while pgbench writes it, started again with `sync.start_relay()`):
//!   its CPU per change;
//! - pgbench unpaced with the worker running: writes a second against the
//!   anchors, and the notes pending when it stopped, in seconds of writes.
//!
//! With `--before PG_CONFIG` (a copy of PostgreSQL holding the build
//! before), each round runs the build before, then this one (`PG_CONFIG`'s),
//! in fresh clusters, `--rounds` times, so the machine's noise shows.
//! Options: `--seconds N` (60) each timed part, `--rate N` (1000),
//! `--backlog N` (200,000), `--products N`, `--replicas N` (10),
//! `--this-settings 'a=1;b=2'` (this build's server settings beside the
//! benchmark's: `magic_sync.gather=250`, say).

use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use magic_sync_tests::args::{arg, text_arg};
use magic_sync_tests::cluster::bindir;
use magic_sync_tests::pgbench::{
    by_number, pgbench, CpuWatch, Ran, Run, NUMBERED_DECLARED, NUMBERED_SHOP,
};
use magic_sync_tests::Cluster;
use postgres::Client;

const DB: &str = "steady";

struct Options {
    seconds: u64,
    rate: u64,
    backlog: i64,
    products: i64,
    replicas: i64,
}

/// One build's figures.
struct Figures {
    undeclared: Ran,
    decoding_live: Ran,
    decoding_behind: f64,
    steady: Ran,
    steady_cpu_us: f64,
    steady_passes: i64,
    steady_behind: f64,
    drain_cpu_us: f64,
    /// The same per row changed: a row's notes in a backlog are planned
    /// once.
    drain_cpu_row_us: f64,
    drain_notes_a_row: f64,
    drain_rate: f64,
    unpaced: Ran,
    pending: i64,
    pending_drained: f64,
    pacing: String,
}

fn main() {
    let options = Options {
        seconds: arg("--seconds", 60),
        rate: arg("--rate", 1000),
        backlog: arg("--backlog", 200_000),
        products: arg("--products", 100_000),
        replicas: arg("--replicas", 10),
    };
    let rounds = arg::<usize>("--rounds", 1);
    let this = bindir();
    let before = text_arg("--before").map(|pg_config| {
        let out = Command::new(pg_config)
            .arg("--bindir")
            .output()
            .expect("runs --before's pg_config");
        PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
    });
    let mut builds: Vec<(&str, PathBuf)> = Vec::new();
    if let Some(before) = before {
        builds.push(("before", before));
    }
    builds.push(("this build", this));
    println!(
        "{} products, {} live replicas; pgbench -c 4 -j 2 -M prepared, {} s a part; \
         steady at {}/s; a backlog of {}",
        options.products, options.replicas, options.seconds, options.rate, options.backlog
    );
    let mut all: Vec<(String, Figures)> = Vec::new();
    for round in 1..=rounds {
        for (name, bin) in &builds {
            println!("\n== {name}, round {round}; load {}", load());
            // This build's own settings (`--this-settings 'a=1;b=2'`).
            let more: Vec<String> = match (*name, text_arg("--this-settings")) {
                ("this build", Some(list)) => {
                    list.split(';').map(|s| s.trim().to_owned()).collect()
                }
                _ => Vec::new(),
            };
            let figures = measure(bin, &options, &more);
            print_figures(&figures, &options);
            all.push((format!("{name}, round {round}"), figures));
        }
    }
    println!("\nfigure | target | each run");
    let each = |f: &dyn Fn(&Figures) -> String| -> String {
        all.iter()
            .map(|(name, figures)| format!("{name}: {}", f(figures)))
            .collect::<Vec<_>>()
            .join("; ")
    };
    println!(
        "relay CPU a change at a steady {}/s against draining a backlog | at most 3x | {}",
        options.rate,
        each(&|f| format!(
            "{:.1} against {:.1} µs: {:.2}x",
            f.steady_cpu_us,
            f.drain_cpu_us,
            f.steady_cpu_us / f.drain_cpu_us
        ))
    );
    println!(
        "the same a row changed (the stream's passes change each row once) | | {}",
        each(&|f| format!(
            "{:.1} against {:.1} µs: {:.2}x",
            f.steady_cpu_us,
            f.drain_cpu_row_us,
            f.steady_cpu_us / f.drain_cpu_row_us
        ))
    );
    println!(
        "pgbench unpaced, worker running, against undeclared (decoding live) | at least 0.75x \
         | {}",
        each(&|f| format!(
            "{:.0}/s against {:.0}/s: {:.2}x ({:.2}x)",
            f.unpaced.rate(),
            f.undeclared.rate(),
            f.unpaced.rate() / f.undeclared.rate(),
            f.decoding_live.rate() / f.undeclared.rate()
        ))
    );
    println!(
        "notes pending when pgbench stopped, in seconds of its writes | at most 1 s | {}",
        each(&|f| format!(
            "{} notes: {:.2} s",
            f.pending,
            f.pending as f64 / f.unpaced.rate()
        ))
    );
    println!("load after: {}", load());
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .trim()
        .to_owned()
}

fn print_figures(f: &Figures, o: &Options) {
    println!(
        "  anchors: pgbench undeclared {:.0}/s; with pg_recvlogical (pgoutput) live {:.0}/s \
         ({:.2}x), decoding {:.2} s behind when the writers stopped",
        f.undeclared.rate(),
        f.decoding_live.rate(),
        f.decoding_live.rate() / f.undeclared.rate(),
        f.decoding_behind
    );
    println!(
        "  steady: pgbench -R {} wrote {:.0}/s; the relay worker {:.1} µs of CPU a change \
         ({:.1}% of a core), {} passes ({:.1} changes a pass), the last relayed {:.2} s after \
         the writers stopped",
        o.rate,
        f.steady.rate(),
        f.steady_cpu_us,
        f.steady_cpu_us * f.steady.rate() / 1e4,
        f.steady_passes,
        f.steady.writes as f64 / f.steady_passes.max(1) as f64,
        f.steady_behind
    );
    println!(
        "  a backlog of {} drained by the worker: {:.0} changes/s, {:.1} µs of CPU a change; \
         {:.2} notes a row, {:.1} µs a row changed",
        o.backlog, f.drain_rate, f.drain_cpu_us, f.drain_notes_a_row, f.drain_cpu_row_us
    );
    println!(
        "  unpaced, the worker running: {:.0}/s ({:.2}x of undeclared), {} notes pending at \
         the stop ({:.2} s of writes), relayed {:.1} s later",
        f.unpaced.rate(),
        f.unpaced.rate() / f.undeclared.rate(),
        f.pending,
        f.pending as f64 / f.unpaced.rate(),
        f.pending_drained
    );
    println!("  the worker: {}", f.pacing);
}

fn measure(bin: &std::path::Path, o: &Options, more: &[String]) -> Figures {
    let mut settings: Vec<String> = [
        "shared_preload_libraries=magic_sync",
        &format!("magic_sync.database={DB}"),
        // The worker's own timers as a server has them by default.
        "magic_sync.idle=10",
        // No register takes anything: no outbox outgrows its bound, no
        // replica counts as stalled or unconfirmed.
        "magic_sync.outbox_messages=2000000000",
        "magic_sync.outbox_bytes=2000000000",
        "magic_sync.stalled_after=100000000",
        "magic_sync.unconfirmed_after=100000000",
        "wal_level=logical",
        "max_wal_senders=4",
        "max_replication_slots=4",
        "shared_buffers=512MB",
    ]
    .map(String::from)
    .to_vec();
    settings.extend_from_slice(more);
    let settings: Vec<&str> = settings.iter().map(String::as_str).collect();
    let cluster = Cluster::start_from(bin, &settings);
    let mut pg = cluster.database_with_extension(DB);
    pg.batch_execute(NUMBERED_SHOP).unwrap();
    pg.execute(
        "INSERT INTO shop.products (id, n, name, price_cents) \
         SELECT gen_random_uuid(), i, 'Product ' || i, i FROM generate_series(1, $1::bigint) AS i",
        &[&o.products],
    )
    .unwrap();
    let script = by_number(o.products);
    let timed = Run::Seconds {
        seconds: o.seconds,
        rate: None,
    };

    // The anchors, nothing declared.
    settle(&mut pg);
    let undeclared = pgbench(&cluster, DB, &script, timed);
    settle(&mut pg);
    pg.execute(
        "SELECT pg_create_logical_replication_slot('bench', 'pgoutput')",
        &[],
    )
    .unwrap();
    let decoder = recvlogical(&cluster);
    let decoding_live = pgbench(&cluster, DB, &script, timed);
    let stopped = Instant::now();
    let end: String = pg
        .query_one("SELECT pg_current_wal_lsn()::text", &[])
        .unwrap()
        .get(0);
    // What the walsender decoded and sent, not what the client confirmed
    // (it says so once a second).
    wait_until(
        &mut pg,
        &format!(
            "SELECT coalesce((SELECT sent_lsn >= '{end}'::pg_lsn FROM pg_stat_replication \
              WHERE application_name = 'pg_recvlogical'), false)"
        ),
    );
    let decoding_behind = stopped.elapsed().as_secs_f64();
    stop(decoder);
    wait_until(
        &mut pg,
        "SELECT NOT active FROM pg_replication_slots WHERE slot_name = 'bench'",
    );
    pg.execute("SELECT pg_drop_replication_slot('bench')", &[])
        .unwrap();

    // Declared, 10 live replicas, the worker provisioning them.
    pg.batch_execute(NUMBERED_DECLARED).unwrap();
    pg.execute(
        "INSERT INTO shop.registers (id) SELECT gen_random_uuid() FROM generate_series(1, $1::bigint)",
        &[&o.replicas],
    )
    .unwrap();
    wait_until(
        &mut pg,
        &format!(
            "SELECT NOT EXISTS (SELECT FROM sync.notes) AND \
             (SELECT count(*) FROM sync.replicas WHERE last_sequence > 0) = {}",
            o.replicas
        ),
    );
    took_everything(&mut pg);
    settle(&mut pg);

    // A steady stream.
    let worker = worker_pid(&mut pg);
    let passes = passes(&mut pg);
    let cpu = CpuWatch::of(worker);
    let steady = pgbench(
        &cluster,
        DB,
        &script,
        Run::Seconds {
            seconds: o.seconds,
            rate: Some(o.rate),
        },
    );
    let stopped = Instant::now();
    wait_until(&mut pg, "SELECT NOT EXISTS (SELECT FROM sync.notes)");
    let steady_behind = stopped.elapsed().as_secs_f64();
    let steady_cpu_us = cpu.used() * 1e6 / steady.writes as f64;
    let steady_passes = passes_since(&mut pg, passes);
    took_everything(&mut pg);
    settle(&mut pg);

    // Unpaced, the worker running.
    let unpaced = pgbench(&cluster, DB, &script, timed);
    let stopped = Instant::now();
    let pending: i64 = pg
        .query_one("SELECT count(*) FROM sync.notes", &[])
        .unwrap()
        .get(0);
    wait_until(&mut pg, "SELECT NOT EXISTS (SELECT FROM sync.notes)");
    let pending_drained = stopped.elapsed().as_secs_f64();
    let pacing = worker_activity(&mut pg);
    took_everything(&mut pg);
    settle(&mut pg);

    // A backlog, drained by the worker.
    let stopped: i64 = pg
        .query_one("SELECT sync.stop_relay()", &[])
        .unwrap()
        .get(0);
    assert!(stopped >= 1, "no worker to stop");
    wait_until(
        &mut pg,
        "SELECT NOT EXISTS (SELECT FROM pg_stat_activity WHERE backend_type = 'magic_sync relay')",
    );
    pgbench(&cluster, DB, &script, Run::Transactions(o.backlog));
    settle(&mut pg);
    let (backlog, backlog_rows): (i64, i64) = pg
        .query_one(
            "SELECT count(*), count(DISTINCT (table_name, key)) FROM sync.notes",
            &[],
        )
        .map(|row| (row.get(0), row.get(1)))
        .unwrap();
    let began = Instant::now();
    let pid: i32 = pg
        .query_one("SELECT sync.start_relay()", &[])
        .unwrap()
        .get(0);
    let cpu = CpuWatch::of(pid);
    wait_until(&mut pg, "SELECT NOT EXISTS (SELECT FROM sync.notes)");
    let drain_rate = backlog as f64 / began.elapsed().as_secs_f64();
    let drain_cpu = cpu.used();
    let drain_cpu_us = drain_cpu * 1e6 / backlog as f64;
    let drain_cpu_row_us = drain_cpu * 1e6 / backlog_rows as f64;

    Figures {
        undeclared,
        decoding_live,
        decoding_behind,
        steady,
        steady_cpu_us,
        steady_passes,
        steady_behind,
        drain_cpu_us,
        drain_cpu_row_us,
        drain_notes_a_row: backlog as f64 / backlog_rows as f64,
        drain_rate,
        unpaced,
        pending,
        pending_drained,
        pacing,
    }
}

/// `pg_recvlogical` with pgoutput on the slot `bench`, writing to nowhere.
fn recvlogical(cluster: &Cluster) -> Child {
    Command::new(bindir().join("pg_recvlogical"))
        .arg("-h")
        .arg(cluster.socket_dir())
        .args([
            "-p",
            &cluster.port().to_string(),
            "-U",
            "postgres",
            "-d",
            DB,
        ])
        .args(["--slot", "bench", "--start", "-f", "/dev/null", "-F", "0"])
        .args(["-o", "proto_version=1", "-o", "publication_names=bench"])
        .spawn()
        .expect("runs pg_recvlogical")
}

fn stop(mut child: Child) {
    let _ = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    let _ = child.wait();
}

/// Polls `query` (one boolean) until it answers true.
fn wait_until(pg: &mut Client, query: &str) {
    let began = Instant::now();
    loop {
        let done: Option<bool> = pg.query_one(query, &[]).unwrap().get(0);
        if done == Some(true) {
            return;
        }
        assert!(
            began.elapsed() < Duration::from_secs(1800),
            "waited half an hour for {query}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn worker_pid(pg: &mut Client) -> i32 {
    wait_until(
        pg,
        "SELECT EXISTS (SELECT FROM pg_stat_activity WHERE backend_type = 'magic_sync relay')",
    );
    pg.query_one(
        "SELECT pid FROM pg_stat_activity WHERE backend_type = 'magic_sync relay'",
        &[],
    )
    .unwrap()
    .get(0)
}

fn worker_activity(pg: &mut Client) -> String {
    pg.query_one(
        "SELECT state || ': ' || query FROM pg_stat_activity WHERE backend_type = 'magic_sync relay'",
        &[],
    )
    .unwrap()
    .get::<_, Option<String>>(0)
    .unwrap_or_default()
}

fn passes(pg: &mut Client) -> i64 {
    pg.query_one("SELECT passes FROM sync.relay_state", &[])
        .unwrap()
        .get(0)
}

fn passes_since(pg: &mut Client, before: i64) -> i64 {
    passes(pg) - before
}

/// What was sent is taken and confirmed, as replicas that keep up would.
fn took_everything(pg: &mut Client) {
    // A pass running meanwhile may make this fail to serialize: again.
    for _ in 0..100 {
        if pg
            .batch_execute(
                "BEGIN; DELETE FROM sync.outbox; \
                 UPDATE sync.replicas SET applied_sequence = last_sequence, applied_epoch = epoch; \
                 COMMIT",
            )
            .is_ok()
        {
            return;
        }
        let _ = pg.batch_execute("ROLLBACK");
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("could not confirm what was sent");
}

fn settle(pg: &mut Client) {
    pg.batch_execute("VACUUM ANALYZE").unwrap();
    pg.batch_execute("CHECKPOINT").unwrap();
}

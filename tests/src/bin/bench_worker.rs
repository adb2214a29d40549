//! The relay worker's figures, measured side by side in one run:
//!
//! - the fixed cost of a pass, which a worker pays at every wake-up: a
//!   `CALL sync.relay()` in a warm session with nothing to do, and with one
//!   note for one replica; beside them, what a worker woken with nothing
//!   to do runs instead of a pass (its look at whether work waits); and the
//!   pass of one note broadcast to `--fanout` replicas;
//! - the worker's private memory as its passes go by: after 100 passes,
//!   at every tenfold up to 10,000, then every 10,000 up to
//!   `--memory-passes`. A writer commits a change every millisecond, so
//!   the worker passes back to back, each pass planning the few changes
//!   that came during the one before, and a register running the device
//!   loop over the same transport takes what it sends. Passes are counted
//!   by `sync.relay_state.passes`.
//!
//! Commit to applied, over each transport, is `bench_transports`.
//!
//! Run on a release build: `cargo pgrx install --release -p magic_sync`, then
//! `cargo run --release -p magic_sync_tests --bin bench_worker`. Options:
//! `--passes N` (calls timed per figure of the first part, 200),
//! `--fanout N` (100: the one note's pass is timed again with N registers),
//! `--memory-passes N` (10000; the target's figure is 100000, over an hour
//! here), `--memory-transport queue|nats` (queue; nats passes about twice
//! as fast here: no register's report of what it applied meets a pass),
//! `--contexts` (at each figure of memory, the worker's memory contexts as
//! `pg_log_backend_memory_contexts` logs them).

use std::time::{Duration, Instant};

use magic_sync_tests::args::{arg, flag, text_arg};
use magic_sync_tests::figures::{median_and_p99, ms};
use magic_sync_tests::registers::Fleet;
use magic_sync_tests::relaying::{drain, relay};
use magic_sync_tests::worker_shop::{private_mib, Transport, WorkerShop};
use magic_sync_tests::{add_products, Cluster, BROADCAST_SHOP};
use uuid::Uuid;

/// A hundred products to change one of.
const PRODUCTS: usize = 100;

/// What the worker runs, woken with nothing to do, instead of a pass.
const WORK_WAITS: &str = "SELECT sync_internal.work_waits()";

fn main() {
    // A register's thread that fails must end the run, not leave the rest
    // waiting for it.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        default_hook(info);
        std::process::exit(1);
    }));
    let passes = arg::<usize>("--passes", 200);
    let fanout = arg::<usize>("--fanout", 100);
    let memory_passes = arg::<i64>("--memory-passes", 10_000);
    let transport = text_arg("--memory-transport")
        .map(|t| Transport::parse(&t).expect("--memory-transport names queue or nats"))
        .unwrap_or(Transport::Queue);

    println!("The fixed cost of a pass, in a warm session ({passes} each)");
    fixed_cost(passes, fanout);

    println!();
    println!(
        "The worker's private memory, passing back to back ({memory_passes} passes, {}; \
         target: at most 1.2x its memory after 100)",
        transport.name()
    );
    memory(transport, memory_passes);
}

fn fixed_cost(passes: usize, fanout: usize) {
    let cluster = Cluster::start();
    let (mut pg, registers) = shop_kept_up(&cluster, "fixed", 1);
    let idle: Vec<f64> = (0..passes)
        .map(|_| {
            let began = Instant::now();
            relay(&mut pg);
            ms(began.elapsed())
        })
        .collect();
    let check: Vec<f64> = (0..passes)
        .map(|_| {
            let began = Instant::now();
            let waits: bool = pg.query_one(WORK_WAITS, &[]).unwrap().get(0);
            assert!(!waits);
            ms(began.elapsed())
        })
        .collect();
    let (one_note, one_steps) = one_note_passes(&mut pg, &registers, passes);
    let (idle_p50, idle_p99) = median_and_p99(idle);
    let (check_p50, check_p99) = median_and_p99(check);
    let (note_p50, note_p99) = median_and_p99(one_note);
    println!(
        "  a pass with nothing to do:         median {idle_p50:7.2} ms, p99 {idle_p99:7.2} ms"
    );
    println!(
        "  what a woken worker runs instead:  median {check_p50:7.2} ms, p99 {check_p99:7.2} ms (target: at most 1 ms)"
    );
    println!(
        "  a pass with one note, one replica: median {note_p50:7.2} ms, p99 {note_p99:7.2} ms (target: at most 5 ms)"
    );
    println!("    its steps, the last time (ms): {one_steps}");
    if fanout > 1 {
        let (mut pg, registers) = shop_kept_up(&cluster, "fanout", fanout);
        let (fanned, steps) = one_note_passes(&mut pg, &registers, passes);
        let (p50, p99) = median_and_p99(fanned);
        println!(
            "  a pass with one note, {fanout} replicas: median {p50:7.2} ms, p99 {p99:7.2} ms \
             (what commit to applied with {fanout} registers pays first)"
        );
        println!("    its steps, the last time (ms): {steps}");
    }
}

/// A database of the broadcast shop with a hundred products and `registers`
/// registers, each of which took its snapshot (its messages taken away), so
/// it is kept up to date from here; a few passes warm the session.
fn shop_kept_up(
    cluster: &Cluster,
    database: &str,
    registers: usize,
) -> (postgres::Client, Vec<Uuid>) {
    let mut pg = cluster.database_with_extension(database);
    pg.batch_execute(BROADCAST_SHOP).unwrap();
    add_products(&mut pg, PRODUCTS);
    pg.execute(
        "INSERT INTO shop.registers (id) SELECT gen_random_uuid() FROM generate_series(1, $1)",
        &[&(registers as i32)],
    )
    .unwrap();
    drain(&mut pg);
    let ids: Vec<Uuid> = pg
        .query("SELECT id FROM shop.registers", &[])
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    pg.execute("DELETE FROM sync.outbox WHERE replica = ANY($1)", &[&ids])
        .unwrap();
    for _ in 0..10 {
        relay(&mut pg);
    }
    (pg, ids)
}

/// `passes` passes of one note each, broadcast to every register (their
/// messages taken away after each): each pass's time, and the steps of the
/// last.
fn one_note_passes(
    pg: &mut postgres::Client,
    registers: &[Uuid],
    passes: usize,
) -> (Vec<f64>, serde_json::Value) {
    pg.batch_execute("SET magic_sync.pass_timings = on")
        .unwrap();
    let mut last_steps = serde_json::Value::Null;
    let took = (0..passes)
        .map(|i| {
            pg.execute(
                "UPDATE shop.products SET price_cents = $1 WHERE name = 'Product 1'",
                &[&(i as i64 + 1000)],
            )
            .unwrap();
            let began = Instant::now();
            let summary = relay(pg);
            let took = ms(began.elapsed());
            assert_eq!(summary["notes"], 1, "{summary}");
            pg.execute(
                "DELETE FROM sync.outbox WHERE replica = ANY($1)",
                &[&registers],
            )
            .unwrap();
            last_steps = summary["took_ms"].clone();
            took
        })
        .collect();
    pg.batch_execute("SET magic_sync.pass_timings = off")
        .unwrap();
    (took, last_steps)
}

/// After 100 passes, then at every tenfold up to 10,000, then every
/// 10,000, and after `passes`.
fn milestones(passes: i64) -> Vec<i64> {
    let mut at = Vec::new();
    let mut n = 100;
    while n < passes {
        at.push(n);
        n = if n < 10_000 { n * 10 } else { n + 10_000 };
    }
    at.push(passes.max(100));
    at
}

fn memory(transport: Transport, passes: i64) {
    let mut shop = WorkerShop::start(transport, 100, &[]);
    let ids = shop.add_registers(1);
    let fleet = Fleet::start(&shop.link(), &ids);
    let provisioned = fleet.wait_until(Duration::from_secs(60), Duration::from_millis(20), |a| {
        a.rows >= 100
    });
    assert!(provisioned, "the register took no snapshot");
    fleet.forget_troubles();
    let worker = shop.worker_pid();
    let mut writer = shop.cluster.connect("shop");
    let update = writer
        .prepare("UPDATE shop.products SET price_cents = $1 WHERE name = 'Product 1'")
        .unwrap();
    let began = Instant::now();
    let first = shop.passes();
    let failed = shop.failed_passes();
    let mut commits = 0i64;
    let mut figures: Vec<(i64, f64)> = Vec::new();
    for milestone in milestones(passes) {
        let mut done = shop.passes() - first;
        while done < milestone {
            writer.execute(&update, &[&commits]).unwrap();
            commits += 1;
            std::thread::sleep(Duration::from_millis(1));
            if commits % 10 == 0 {
                done = shop.passes() - first;
            }
        }
        let Some(mib) = private_mib(worker) else {
            println!("  the worker ({worker}) is gone: restarted?");
            return;
        };
        println!(
            "  after {done:7} passes ({commits:7} commits, {:6.0} s): {mib:5.1} MiB",
            began.elapsed().as_secs_f64()
        );
        if flag("--contexts") {
            print_contexts(&shop, &mut writer, worker);
        }
        figures.push((done, mib));
    }
    assert_eq!(shop.worker_pid(), worker, "the same worker throughout");
    if let (Some((early_passes, early)), Some((late_passes, late))) =
        (figures.first(), figures.last())
    {
        println!(
            "  {late:.1} MiB after {late_passes} passes against {early:.1} MiB after \
             {early_passes}: {:.2}x (target: at most 1.2x); {} passes failed and were tried \
             again{}",
            late / early,
            shop.failed_passes() - failed,
            troubles(&fleet)
        );
    }
    if let Some(first) = shop
        .cluster
        .log()
        .lines()
        .find(|l| l.contains("a pass failed"))
    {
        println!("  the first failure: {first}");
    }
}

/// The worker's memory contexts as PostgreSQL logs them, and their grand
/// total: those of levels 0 and 1 by name, every deeper one summed by name
/// as level 2, each of at least 32 kB. Where memory that grows is held,
/// or, when the total stays flat while the worker's memory grows, that it
/// is held outside them.
fn print_contexts(shop: &WorkerShop, sql: &mut postgres::Client, worker: i32) {
    let before = shop.cluster.log().len();
    sql.execute("SELECT pg_log_backend_memory_contexts($1)", &[&worker])
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let log = shop.cluster.log();
    let mut sums: std::collections::BTreeMap<(u32, String), (u64, u32)> = Default::default();
    for line in log.get(before..).unwrap_or("").lines() {
        if line.contains("Grand total") {
            println!("      {line}");
        }
        // "... level: 2; CachedPlan: 4096 total in 3 blocks; ..."
        let Some((_, rest)) = line.split_once("level: ") else {
            continue;
        };
        let Some((level, rest)) = rest.split_once("; ") else {
            continue;
        };
        let Some((name, rest)) = rest.split_once(": ") else {
            continue;
        };
        let bytes = rest
            .split_whitespace()
            .next()
            .and_then(|b| b.parse::<u64>().ok());
        if let (Ok(level), Some(bytes)) = (level.parse::<u32>(), bytes) {
            let sum = sums.entry((level.min(2), name.to_owned())).or_default();
            sum.0 += bytes;
            sum.1 += 1;
        }
    }
    for ((level, name), (bytes, count)) in sums {
        if bytes >= 32 << 10 {
            println!(
                "      level {level} {name}: {:.2} MiB in {count}",
                bytes as f64 / (1 << 20) as f64
            );
        }
    }
}

fn troubles(fleet: &Fleet) -> String {
    let troubles = fleet.troubles();
    if troubles.count == 0 {
        return String::new();
    }
    format!(
        "; the register's loop reported {} trouble(s): {}",
        troubles.count,
        troubles.first.join("; ")
    )
}

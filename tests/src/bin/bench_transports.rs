//! The transports' figures, measured side by side in one run, the relay
//! worker relaying and every register running the real device loop on a
//! SQLite file of its own (`magic_sync_tests::registers`: "applied" is the
//! register's commit, stamped by SQLite's WAL hook):
//!
//! - commit to applied, over the queue and over NATS, with 1 and with 100
//!   registers: a single-row UPDATE on the server, until each register's
//!   transaction applying it committed; p50 and p99 over every change and
//!   register;
//! - the sustained change rate, each transport: writer connections
//!   UPDATE products at an offered rate, stepped up, while 10 registers
//!   apply them; per step the rate written, the rate each register
//!   applied, and whether their lag stayed bounded;
//! - one product changed while 200 registers are connected over NATS:
//!   the time until the last one applied it, median and max of a few.
//!
//! Run on a release build: `cargo pgrx install --release -p magic_sync`,
//! then `cargo run --release -p magic_sync_tests --bin bench_transports`.
//! Options: `--only latency,rate,fleet` (the parts, all by default),
//! `--transports queue,nats`; `--changes N` (1000), `--registers N` (100)
//! and `--back-to-back` (each change as soon as the last was applied,
//! rather than once the registers also said so) and `--report-after-ms
//! A,B` (the loops' `report_after`, each in turn; the default alone unless
//! given) for commit to applied;
//! `--rates 1000,2000,5000,...` (stepped up until the registers fall
//! behind), `--step-seconds N` (60: the minute the target says),
//! `--writers N` (4), `--rate-registers N` (10), `--products N` (100000)
//! and `--lag-bound-ms N` (2000) for the sustained rate, `--pgbench` (the
//! writers are pgbench, `-c 4 -j 2 -M prepared` paced with `-R`,
//! single-row UPDATEs by random key, measured against pgbench unpaced on
//! an undeclared copy of the products in the same cluster first), and
//! `--ceiling-seconds N` (5; 0: none) for the writers unpaced after its
//! steps, what the machine can offer at all; `--fleet N` (200)
//! and `--fleet-changes N` (10) for the fleet; `--profile` prints, after
//! each commit-to-applied run, the server's functions that took the most
//! time (`track_functions`), and the statements, those run inside them
//! too (`pg_stat_statements`), per call; `--server-settings 'a=1;b=2'` sets
//! the server's settings beside the tests' own (`shared_buffers=1GB`
//! unless given).
//!
//! `--builds before=PG_CONFIG,after=PG_CONFIG` runs commit to applied
//! against each build in turn (each a copy of PostgreSQL with its own
//! build of the extension installed), `--rounds N` (2) times alternating,
//! and prints each figure of every round side by side, with the ratio of
//! the last build's median to the first's: p50 and p99 commit to applied,
//! and the registers' and the server's CPU per message applied. A build
//! without `sync.take` (before 0.2.0) is taken the way it was: this
//! program's registers fall back to the calls it has. A PG_CONFIG ending
//! in `:no-take` is that build with `sync.take` dropped from the shop's
//! database: the same server, its registers taking as 0.1.0's did, so
//! what `sync.take` changes is measured apart from the rest of a build.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Whether the shops of the run in progress drop `sync.take` (`--builds
/// name=PG_CONFIG:no-take`).
static WITHOUT_TAKE: AtomicBool = AtomicBool::new(false);
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use magic_sync_replica::transport::Options;
use magic_sync_tests::args::{arg, flag, text_arg};
use magic_sync_tests::figures::{median_and_p99, ms, quantile};
use magic_sync_tests::pgbench::{by_name, pgbench_at, Run};
use magic_sync_tests::registers::Fleet;
use magic_sync_tests::worker_shop::{Transport, WorkerShop};
use uuid::Uuid;

/// The prices commit to applied writes: above every product's own.
const BASE_PRICE: i64 = 1_000_000_000;

/// How long registers get to take their snapshots.
const PROVISIONING: Duration = Duration::from_secs(600);

fn main() {
    // A register's thread that fails must end the run, not leave the rest
    // waiting for it.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        default_hook(info);
        std::process::exit(1);
    }));
    let only = text_arg("--only").unwrap_or_else(|| "latency,rate,fleet".to_owned());
    let transports: Vec<Transport> = text_arg("--transports")
        .unwrap_or_else(|| "queue,nats".to_owned())
        .split(',')
        .map(|t| Transport::parse(t).expect("--transports names queue or nats"))
        .collect();
    if let Some(builds) = text_arg("--builds") {
        builds_part(&builds, &transports);
        return;
    }
    if only.contains("latency") {
        latency_part(&transports);
    }
    if only.contains("rate") {
        rate_part(&transports);
    }
    if only.contains("fleet") {
        fleet_part();
    }
}

// ---------------------------------------------------------------------------
// Commit to applied.

/// When the next change is made.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Spacing {
    /// Once every register applied the last and said so (its loop waits
    /// again): each change meets a server and registers with nothing to do.
    AfterReports,
    /// As soon as every register applied the last: the change's pass may
    /// meet the registers' reports of the last one.
    BackToBack,
}

fn latency_part(transports: &[Transport]) {
    let changes = arg::<usize>("--changes", 1000);
    let many = arg::<usize>("--registers", 100);
    let spacing = if flag("--back-to-back") {
        Spacing::BackToBack
    } else {
        Spacing::AfterReports
    };
    println!(
        "Commit to applied, the worker relaying ({changes} changes, each {}; targets p50 10 ms, \
         p99 50 ms)",
        match spacing {
            Spacing::AfterReports => "once every register applied the last and said so",
            Spacing::BackToBack => "as soon as every register applied the last",
        }
    );
    let paces: Vec<Option<u64>> = match text_arg("--report-after-ms") {
        Some(list) => list
            .split(',')
            .map(|ms| Some(ms.parse().expect("--report-after-ms takes milliseconds")))
            .collect(),
        None => vec![None],
    };
    for &transport in transports {
        let counts = if many > 1 { vec![1, many] } else { vec![1] };
        for registers in counts {
            for &pace in &paces {
                let mut options = Options::default();
                if let Some(ms) = pace {
                    options.report_after = Duration::from_millis(ms);
                    println!("  (each register reports at most {ms} ms after applying)");
                }
                let _ = commit_to_applied(transport, registers, changes, spacing, &options);
            }
        }
    }
}

/// What one commit-to-applied run measured.
#[derive(Clone, Copy)]
struct Figures {
    p50: f64,
    p99: f64,
    /// CPU per message applied, ms: the registers (this process), the
    /// server (every postgres process).
    registers_ms: f64,
    server_ms: f64,
    /// Of the server's, its relay worker's: the rest is the backends the
    /// registers call.
    relay_ms: f64,
}

/// Per transport and number of registers, each build's figures, a round
/// at a time.
type Runs = Vec<((Transport, usize), Vec<Vec<Figures>>)>;

/// Commit to applied against each build of `--builds`, alternating for
/// `--rounds`, then every figure side by side.
fn builds_part(builds: &str, transports: &[Transport]) {
    let builds: Vec<(String, String)> = builds
        .split(',')
        .map(|b| {
            let (name, pg_config) = b
                .split_once('=')
                .expect("--builds takes name=PG_CONFIG,...");
            (name.to_owned(), pg_config.to_owned())
        })
        .collect();
    let rounds = arg::<usize>("--rounds", 2);
    let changes = arg::<usize>("--changes", 1000);
    let many = arg::<usize>("--registers", 100);
    let counts = if many > 1 { vec![1, many] } else { vec![1] };
    let options = Options::default();
    // (transport, registers) -> per build, per round.
    let mut runs: Runs = Vec::new();
    for &transport in transports {
        for &registers in &counts {
            runs.push(((transport, registers), vec![Vec::new(); builds.len()]));
        }
    }
    for round in 1..=rounds {
        for (b, (name, pg_config)) in builds.iter().enumerate() {
            println!("Round {round}, build {name} ({pg_config}):");
            // The clusters read which PostgreSQL, and so which build, from
            // PG_CONFIG as each starts; nothing else reads it meanwhile.
            let (pg_config, without_take) = match pg_config.strip_suffix(":no-take") {
                Some(pg_config) => (pg_config, true),
                None => (pg_config.as_str(), false),
            };
            WITHOUT_TAKE.store(without_take, Ordering::SeqCst);
            // The registers take with sync.take where the build has it (the
            // queue client's default, tests/src/registers.rs), as 0.1.0's
            // client did where it does not (`:no-take`).
            std::env::set_var("PG_CONFIG", pg_config);
            for ((transport, registers), per_build) in runs.iter_mut() {
                let figures = commit_to_applied(
                    *transport,
                    *registers,
                    changes,
                    Spacing::AfterReports,
                    &options,
                );
                per_build[b].push(figures);
            }
        }
    }
    let median = |values: Vec<f64>| median_and_p99(values).0;
    println!(
        "\nSide by side ({changes} changes a run; each cell the rounds in order; ratio: the \
         median of {} against that of {})",
        builds.last().map_or("", |b| b.0.as_str()),
        builds[0].0
    );
    type Pick = fn(&Figures) -> f64;
    let rows: [(&str, Pick); 5] = [
        ("p50 ms", |f| f.p50),
        ("p99 ms", |f| f.p99),
        ("register CPU ms/msg", |f| f.registers_ms),
        ("server CPU ms/msg", |f| f.server_ms),
        ("  of it the relay's", |f| f.relay_ms),
    ];
    for ((transport, registers), per_build) in &runs {
        println!("  {} {registers} register(s):", transport.name());
        for (label, pick) in rows {
            let mut line = format!("    {label:<20}");
            for (b, (name, _)) in builds.iter().enumerate() {
                let cells: Vec<String> = per_build[b]
                    .iter()
                    .map(|f| format!("{:.3}", pick(f)))
                    .collect();
                line.push_str(&format!(" {name}: {:<26}", cells.join(" ")));
            }
            let first = median(per_build[0].iter().map(pick).collect());
            let last = median(per_build[builds.len() - 1].iter().map(pick).collect());
            line.push_str(&format!(" ratio {:.2}x", last / first));
            println!("{line}");
        }
    }
}

fn commit_to_applied(
    transport: Transport,
    registers: usize,
    changes: usize,
    spacing: Spacing,
    options: &Options,
) -> Figures {
    let (mut shop, fleet) = shop_with_fleet(transport, 100, registers, options);
    let failed = shop.failed_passes();
    let began = Instant::now();
    // The server's processes are this cluster's: its postmaster and the
    // processes it started (other clusters may run on the machine).
    let postmaster = postmaster_of(&mut shop);
    if flag("--profile") {
        // What the profile shows is the changes', not the provisioning's.
        shop.pg
            .batch_execute("SELECT pg_stat_statements_reset(); SELECT pg_stat_reset()")
            .unwrap();
    }
    let cpu_before = cpu_now_of(Some(postmaster));
    let latencies = changes_applied(&mut shop, &fleet, changes, spacing, Duration::from_secs(1));
    let cpu_after = cpu_now_of(Some(postmaster));
    let took = began.elapsed();
    let failed = shop.failed_passes() - failed;
    let mut samples = Vec::new();
    let mut missed = 0;
    // Per change, the first register to apply it (the pass and one
    // delivery) and the last (every delivery after it).
    let (mut firsts, mut lasts) = (Vec::new(), Vec::new());
    for per_change in &latencies {
        let applied: Vec<f64> = per_change.iter().flatten().copied().collect();
        missed += per_change.len() - applied.len();
        if let (Some(first), Some(last)) = (
            applied.iter().copied().reduce(f64::min),
            applied.iter().copied().reduce(f64::max),
        ) {
            firsts.push(first);
            lasts.push(last);
        }
        samples.extend(applied);
    }
    let late = samples.iter().filter(|ms| **ms > 1000.0).count();
    let (p50, p99) = median_and_p99(samples);
    println!(
        "  {:5} {registers:3} register(s): p50 {p50:7.2} ms, p99 {p99:7.2} ms; \
         {late} later than 1 s, {missed} never; {failed} passes failed and tried again; {:.1} s{}",
        transport.name(),
        took.as_secs_f64(),
        troubles_of(&fleet)
    );
    if registers > 1 {
        let (first, _) = median_and_p99(firsts);
        let (last, _) = median_and_p99(lasts);
        println!(
            "        per change, the first register to apply it: median {first:7.2} ms; \
             the last: median {last:7.2} ms"
        );
    }
    // What the registers (this process) and the server (every postgres
    // process) spent per message applied, on the machine's cores together.
    let messages = (changes * registers) as f64;
    let cores = cores();
    let registers_ms = (cpu_after.here - cpu_before.here) / messages;
    let server_ms = (cpu_after.server - cpu_before.server) / messages;
    let relay_ms = (cpu_after.relay - cpu_before.relay) / messages;
    println!(
        "        CPU per message applied: the registers {registers_ms:.3} ms, the server \
         {server_ms:.3} ms (its relay worker {relay_ms:.3}, the rest {:.3}); a change to every \
         register costs {:.1} ms of the {cores} cores' time",
        server_ms - relay_ms,
        (registers_ms + server_ms) * registers as f64 / cores
    );
    if flag("--profile") {
        print_profile(&mut shop);
    }
    Figures {
        p50,
        p99,
        registers_ms,
        server_ms,
        relay_ms,
    }
}

/// The server's functions that took the most time over the run (the
/// worker's and the registers' backends alike), with `--profile`.
fn print_profile(shop: &mut WorkerShop) {
    // Backends hand in their counts within a second of going idle.
    std::thread::sleep(Duration::from_millis(1500));
    let rows = shop
        .pg
        .query(
            "SELECT schemaname || '.' || funcname, calls, \
                    total_time / calls, self_time / calls \
               FROM pg_stat_user_functions WHERE calls > 0 \
              ORDER BY total_time DESC LIMIT 12",
            &[],
        )
        .unwrap();
    println!(
        "      {:<44} {:>8} {:>10} {:>10}",
        "function", "calls", "ms/call", "own ms"
    );
    for row in rows {
        let (name, calls, total, own): (String, i64, f64, f64) =
            (row.get(0), row.get(1), row.get(2), row.get(3));
        println!("      {name:<44} {calls:>8} {total:>10.3} {own:>10.3}");
    }
    // Every statement, those the functions run inside them too.
    let rows = shop
        .pg
        .query(
            "SELECT left(regexp_replace(query, '\\s+', ' ', 'g'), 90), calls, mean_exec_time, \
                    mean_plan_time \
               FROM pg_stat_statements ORDER BY total_exec_time + total_plan_time DESC LIMIT 45",
            &[],
        )
        .unwrap();
    println!(
        "      {:<90} {:>8} {:>8} {:>8}",
        "statement", "calls", "ms/call", "planning"
    );
    for row in rows {
        let (query, calls, mean, plan): (String, i64, f64, f64) =
            (row.get(0), row.get(1), row.get(2), row.get(3));
        println!("      {query:<90} {calls:>8} {mean:>8.3} {plan:>8.3}");
    }
}

/// The shop on `transport` with `products` products, and `registers`
/// registers that took their snapshot.
fn shop_with_fleet(
    transport: Transport,
    products: usize,
    registers: usize,
    options: &Options,
) -> (WorkerShop, Fleet) {
    // A server's shared buffers are sized to what it works on: the rate's
    // 1,000,000 rows of sync.held do not fit PostgreSQL's default 128 MB.
    let mut settings: Vec<String> = text_arg("--server-settings")
        .unwrap_or_else(|| "shared_buffers=1GB".to_owned())
        .split(';')
        .map(|one| one.trim().to_owned())
        .collect();
    if flag("--profile") {
        settings.extend(
            [
                "track_functions=all",
                "shared_preload_libraries=magic_sync,pg_stat_statements",
                "pg_stat_statements.track=all",
                "pg_stat_statements.track_planning=on",
            ]
            .map(String::from),
        );
    }
    let settings: Vec<&str> = settings.iter().map(String::as_str).collect();
    let mut shop = WorkerShop::start(transport, products, &settings);
    if flag("--profile") {
        shop.pg
            .batch_execute("CREATE EXTENSION pg_stat_statements")
            .unwrap();
    }
    if WITHOUT_TAKE.load(Ordering::SeqCst) {
        shop.pg
            .batch_execute(
                "ALTER EXTENSION magic_sync DROP FUNCTION sync.take(uuid, text, bytea); \
                 DROP FUNCTION sync.take(uuid, text, bytea)",
            )
            .unwrap();
    }
    let ids = shop.add_registers(registers);
    let fleet = Fleet::start_with(&shop.link(), &ids, options);
    let provisioned = fleet.wait_until(PROVISIONING, Duration::from_millis(50), |a| {
        a.rows >= products as u64
    });
    assert!(
        provisioned,
        "the registers took no snapshot in {PROVISIONING:?}"
    );
    fleet.wait_until(PROVISIONING, Duration::from_millis(50), |a| a.idle);
    fleet.forget_troubles();
    (shop, fleet)
}

/// Changes 'Product 1' `changes` times, each once every register applied
/// the one before, as `spacing` says (or `patience` passed: it is counted
/// late, not lost). Answers, per change, each register's commit to applied
/// in ms.
fn changes_applied(
    shop: &mut WorkerShop,
    fleet: &Fleet,
    changes: usize,
    spacing: Spacing,
    patience: Duration,
) -> Vec<Vec<Option<f64>>> {
    let update = shop
        .pg
        .prepare("UPDATE shop.products SET price_cents = $1 WHERE name = 'Product 1'")
        .unwrap();
    let mut committed_at = Vec::with_capacity(changes);
    for change in 0..changes {
        let price = BASE_PRICE + change as i64;
        shop.pg.execute(&update, &[&price]).unwrap();
        committed_at.push(Instant::now());
        fleet.wait_until(patience, Duration::from_millis(1), |a| {
            a.top >= price && (a.idle || spacing == Spacing::BackToBack)
        });
    }
    // Stragglers get a little longer.
    fleet.wait_until(Duration::from_secs(2), Duration::from_millis(10), |a| {
        a.top >= BASE_PRICE + changes as i64 - 1
    });
    committed_at
        .iter()
        .enumerate()
        .map(|(change, committed)| {
            fleet.each(|a| {
                a.first_reaching(BASE_PRICE + change as i64)
                    .map(|at| ms(at.saturating_duration_since(*committed)))
            })
        })
        .collect()
}

/// CPU time (user and system) so far, in ms.
#[derive(Clone, Copy)]
struct Cpu {
    /// This process: the registers, and the writers' clients.
    here: f64,
    /// Every process named postgres (the runs' one cluster), the relay
    /// worker among them.
    server: f64,
    /// The relay worker alone (its title says `magic_sync relay`).
    relay: f64,
    /// Every core of the machine, busy with anything (/proc/stat).
    machine: f64,
}

/// The machine's cores.
fn cores() -> f64 {
    std::thread::available_parallelism().map_or(1, |n| n.get()) as f64
}

fn cpu_now() -> Cpu {
    cpu_now_of(None)
}

/// The shop's postmaster: the parent of a backend of its.
fn postmaster_of(shop: &mut WorkerShop) -> u32 {
    let backend: i32 = shop
        .pg
        .query_one("SELECT pg_backend_pid()", &[])
        .unwrap()
        .get(0);
    let stat = std::fs::read_to_string(format!("/proc/{backend}/stat")).unwrap_or_default();
    // After the name (in parentheses): the state, then the parent's pid.
    stat.rsplit_once(") ")
        .and_then(|(_, rest)| rest.split_whitespace().nth(1))
        .and_then(|ppid| ppid.parse().ok())
        .unwrap_or(0)
}

/// CPU time so far; with `postmaster`, the server's is that postmaster's
/// and its children's only (a backend that exits takes its time with it:
/// the registers' sessions last the run). Without, every process named
/// postgres.
fn cpu_now_of(postmaster: Option<u32>) -> Cpu {
    // Linux counts CPU time in hundredths of a second (USER_HZ).
    const MS_A_TICK: f64 = 10.0;
    let of = |stat: &str| -> Option<(String, f64)> {
        // The name is in parentheses; the fields after it count from state.
        let (name, rest) = stat.split_once(" (")?.1.rsplit_once(") ")?;
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let ticks: f64 =
            fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
        Some((name.to_owned(), ticks * MS_A_TICK))
    };
    let here = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|stat| of(&stat))
        .map_or(0.0, |(_, ms)| ms);
    let (mut server, mut relay) = (0.0, 0.0);
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some((name, ms)) = std::fs::read_to_string(entry.path().join("stat"))
            .ok()
            .and_then(|stat| of(&stat))
        else {
            continue;
        };
        if name != "postgres" {
            continue;
        }
        if let Some(postmaster) = postmaster {
            let pid: u32 = entry.file_name().to_string_lossy().parse().unwrap_or(0);
            let ppid: u32 = std::fs::read_to_string(entry.path().join("stat"))
                .ok()
                .and_then(|stat| {
                    stat.rsplit_once(") ")
                        .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                        .and_then(|p| p.parse().ok())
                })
                .unwrap_or(0);
            if pid != postmaster && ppid != postmaster {
                continue;
            }
        }
        server += ms;
        let title = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&title).contains("magic_sync relay") {
            relay += ms;
        }
    }
    // The first line of /proc/stat: every core's ticks by kind; idle and
    // iowait are the 4th and 5th.
    let machine = std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|stat| {
            let ticks: Vec<f64> = stat
                .lines()
                .next()?
                .split_whitespace()
                .skip(1)
                .filter_map(|t| t.parse().ok())
                .collect();
            let idle = ticks.get(3)? + ticks.get(4)?;
            Some((ticks.iter().sum::<f64>() - idle) * MS_A_TICK)
        })
        .unwrap_or(0.0);
    Cpu {
        here,
        server,
        relay,
        machine,
    }
}

fn troubles_of(fleet: &Fleet) -> String {
    let troubles = fleet.troubles();
    if troubles.count == 0 {
        return String::new();
    }
    format!(
        "\n      the loops reported {} trouble(s), the first: {}",
        troubles.count,
        troubles.first.join("; ")
    )
}

// ---------------------------------------------------------------------------
// The sustained change rate.

fn rate_part(transports: &[Transport]) {
    let rates: Vec<u64> = text_arg("--rates")
        .unwrap_or_else(|| "1000,2000,5000,10000,20000,40000".to_owned())
        .split(',')
        .map(|r| r.trim().parse().expect("--rates lists rates per second"))
        .collect();
    let registers = arg::<usize>("--rate-registers", 10);
    let products = arg::<usize>("--products", 100_000);
    let step = Step {
        seconds: arg::<u64>("--step-seconds", 60),
        writers: arg::<usize>("--writers", 4),
        lag_bound: Duration::from_millis(arg::<u64>("--lag-bound-ms", 2000)),
        pgbench: flag("--pgbench").then_some(products as i64),
    };
    println!();
    println!(
        "The sustained change rate: {} writers UPDATE {products} products, {registers} registers \
         apply them, {} s a step (target: at least 20,000 row changes/s; kept up: every \
         register's lag under {} ms through the step's second half)",
        step.writers,
        step.seconds,
        step.lag_bound.as_millis()
    );
    for &transport in transports {
        let (mut shop, fleet) =
            shop_with_fleet(transport, products, registers, &Options::default());
        let ids = shop.product_ids();
        println!("  {}:", transport.name());
        if let Some(products) = step.pgbench {
            // The anchor: pgbench as fast as it goes on a copy of the
            // products that nothing declares, in this same cluster.
            shop.pg
                .batch_execute(
                    "CREATE UNIQUE INDEX products_by_name ON shop.products (name); \
                     CREATE TABLE shop.undeclared (LIKE shop.products INCLUDING ALL); \
                     INSERT INTO shop.undeclared SELECT * FROM shop.products",
                )
                .unwrap();
            shop.pg
                .batch_execute("VACUUM ANALYZE shop.undeclared")
                .unwrap();
            let ran = pgbench_at(
                shop.cluster.socket_dir(),
                shop.cluster.port(),
                "shop",
                &by_name("shop.undeclared", products),
                Run::Seconds {
                    seconds: arg::<u64>("--ceiling-seconds", 5).max(5),
                    rate: None,
                },
            );
            println!(
                "    pgbench unpaced on an undeclared copy of the products: {:.0}/s (the anchor)",
                ran.rate()
            );
        }
        for &rate in &rates {
            let kept_up = step.run(&shop, &fleet, &ids, rate);
            if !kept_up {
                break;
            }
        }
        let ceiling = arg::<u64>("--ceiling-seconds", 5);
        if ceiling > 0 {
            println!(
                "    the writers unpaced for {ceiling} s, beside the relay and the registers: \
                 written {:.0}/s (what this machine can offer at all)",
                step.unpaced(&shop, &ids, Duration::from_secs(ceiling))
            );
        }
        let troubles = troubles_of(&fleet);
        if !troubles.is_empty() {
            println!("   {troubles}");
        }
        if flag("--profile") {
            print_profile(&mut shop);
        }
    }
}

/// Where a step's CPU went, per change written, and how busy the machine
/// was: what bounds the rate on this machine, the relay or the rest.
fn print_cpu_per_change(before: Cpu, after: Cpu, writes: u64, seconds: f64) {
    let per_change = |ms: f64| ms * 1000.0 / writes.max(1) as f64;
    let relay = after.relay - before.relay;
    let rest_of_server = after.server - before.server - relay;
    let here = after.here - before.here;
    let cores = cores();
    let busy = (after.machine - before.machine) / (seconds * 1000.0 * cores);
    println!(
        "        CPU per change written: the relay {:.0} µs (on CPU {:.0}% of the step), the \
         rest of the server {:.0} µs, the registers and the writers' clients {:.0} µs; the \
         machine's {cores} cores {:.0}% busy",
        per_change(relay),
        relay / (seconds * 10.0),
        per_change(rest_of_server),
        per_change(here),
        busy * 100.0
    );
}

struct Step {
    seconds: u64,
    writers: usize,
    lag_bound: Duration,
    /// The writers are pgbench, over this many products.
    pgbench: Option<i64>,
}

/// A step's writers at work.
struct Writers {
    stop: Arc<AtomicBool>,
    written: Arc<AtomicU64>,
    threads: Vec<std::thread::JoinHandle<Option<i64>>>,
    /// pgbench, for the step's time: how many it wrote, the newest price.
    pgbench: Option<std::thread::JoinHandle<(u64, Option<i64>)>>,
}

impl Writers {
    /// Stops them: answers how many writes they made and the newest price
    /// any of them wrote.
    fn stop(self) -> (u64, Option<i64>) {
        if let Some(pgbench) = self.pgbench {
            return pgbench.join().unwrap();
        }
        self.stop.store(true, Ordering::Relaxed);
        let newest = self
            .threads
            .into_iter()
            .filter_map(|w| w.join().unwrap())
            .max();
        (self.written.load(Ordering::Relaxed), newest)
    }
}

/// What the registers looked like at one moment of a step.
struct Sample {
    at: Instant,
    /// Each register's lag: how old the newest write it committed is.
    lags: Vec<Duration>,
}

impl Step {
    /// One step at `rate` writes a second; answers whether the registers
    /// kept up.
    fn run(&self, shop: &WorkerShop, fleet: &Fleet, ids: &[Uuid], rate: u64) -> bool {
        let rows_before = fleet.each(|a| a.rows);
        let failed = shop.failed_passes();
        let began = Instant::now();
        let since = micros_now();
        let cpu_before = cpu_now();
        let writers = self.start_writers(shop, ids, rate as f64);
        let samples = self.sample(fleet, began, since);
        let (writes, newest) = writers.stop();
        let elapsed = began.elapsed().as_secs_f64();
        let cpu_after = cpu_now();
        let rows_after = fleet.each(|a| a.rows);
        let applied: Vec<f64> = rows_before
            .iter()
            .zip(&rows_after)
            .map(|(before, after)| (after - before) as f64 / elapsed)
            .collect();
        let caught_up = Instant::now();
        let newest = newest.unwrap_or(i64::MIN);
        let drained = fleet.wait_until(Duration::from_secs(120), Duration::from_millis(20), |a| {
            a.top >= newest
        });
        let catching_up = caught_up.elapsed();
        self.report(rate, writes as f64 / elapsed, &applied, &samples);
        print_cpu_per_change(cpu_before, cpu_after, writes, elapsed);
        let kept_up = self.kept_up(&samples);
        println!(
            "        {}; {} passes failed and were tried again; caught up {}",
            if kept_up { "kept up" } else { "fell behind" },
            shop.failed_passes() - failed,
            if drained {
                format!(
                    "{:.1} s after the writers stopped",
                    catching_up.as_secs_f64()
                )
            } else {
                "not within 120 s".to_owned()
            }
        );
        kept_up && drained
    }

    /// The writers as fast as they go for `seconds`: answers the rate they
    /// wrote. What they wrote is left for the relay (the shop goes next).
    fn unpaced(&self, shop: &WorkerShop, ids: &[Uuid], seconds: Duration) -> f64 {
        let began = Instant::now();
        if self.pgbench.is_some() {
            let (writes, _) = self.start_pgbench(shop, None, seconds.as_secs()).stop();
            return writes as f64 / began.elapsed().as_secs_f64();
        }
        let writers = self.start_writers(shop, ids, f64::INFINITY);
        std::thread::sleep(seconds);
        let (writes, _) = writers.stop();
        writes as f64 / began.elapsed().as_secs_f64()
    }

    /// The step's writers, each UPDATEing its share of `ids`, `rate` writes
    /// a second between them.
    fn start_writers(&self, shop: &WorkerShop, ids: &[Uuid], rate: f64) -> Writers {
        if self.pgbench.is_some() {
            return self.start_pgbench(shop, Some(rate as u64), self.seconds);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let written = Arc::new(AtomicU64::new(0));
        let chunks: Vec<&[Uuid]> = ids.chunks(ids.len().div_ceil(self.writers)).collect();
        let pace = rate / chunks.len() as f64;
        let threads = chunks
            .into_iter()
            .map(|chunk| start_writer(shop, chunk.to_vec(), pace, stop.clone(), written.clone()))
            .collect();
        Writers {
            stop,
            written,
            threads,
            pgbench: None,
        }
    }

    /// pgbench for `seconds`, at `rate` a second (`-R`) or unpaced.
    fn start_pgbench(&self, shop: &WorkerShop, rate: Option<u64>, seconds: u64) -> Writers {
        let products = self.pgbench.expect("--pgbench");
        let socket_dir = shop.cluster.socket_dir().to_path_buf();
        let port = shop.cluster.port();
        let mut pg = shop.cluster.connect("shop");
        let pgbench = std::thread::spawn(move || {
            let ran = pgbench_at(
                &socket_dir,
                port,
                "shop",
                &by_name("shop.products", products),
                Run::Seconds { seconds, rate },
            );
            // Its prices are its clock's microseconds: the newest is the
            // highest.
            let newest: Option<i64> = pg
                .query_one("SELECT max(price_cents) FROM shop.products", &[])
                .unwrap()
                .get(0);
            (ran.writes as u64, newest)
        });
        Writers {
            stop: Arc::new(AtomicBool::new(false)),
            written: Arc::new(AtomicU64::new(0)),
            threads: Vec::new(),
            pgbench: Some(pgbench),
        }
    }

    /// Samples every register's lag each 100 ms until the step's end.
    fn sample(&self, fleet: &Fleet, began: Instant, since: i64) -> Vec<Sample> {
        let end = began + Duration::from_secs(self.seconds);
        let mut samples = Vec::new();
        while Instant::now() < end {
            std::thread::sleep(Duration::from_millis(100));
            let now = micros_now();
            let lags = fleet.each(|a| {
                let newest = a.top.max(since);
                Duration::from_micros(now.saturating_sub(newest).max(0) as u64)
            });
            samples.push(Sample {
                at: Instant::now(),
                lags,
            });
        }
        samples
    }

    /// Every register's lag in the step's second half under the bound.
    fn kept_up(&self, samples: &[Sample]) -> bool {
        second_half(samples)
            .iter()
            .all(|s| s.lags.iter().all(|lag| *lag <= self.lag_bound))
    }

    fn report(&self, rate: u64, written: f64, applied: &[f64], samples: &[Sample]) {
        let mut sorted = applied.to_vec();
        sorted.sort_by(|a, b| a.total_cmp(b));
        let worst_lag = |samples: &[Sample]| {
            samples
                .iter()
                .flat_map(|s| s.lags.iter())
                .max()
                .map_or(0.0, |d| ms(*d))
        };
        let half = second_half(samples);
        let last = samples.last().map_or(&[][..], |s| &s.lags[..]);
        let last_lag = last.iter().max().map_or(0.0, |d| ms(*d));
        println!(
            "    offered {rate:6}/s: written {written:7.0}/s; applied per register {:7.0}/s \
             (slowest {:7.0}/s); lag: worst {:7.0} ms in the first half, {:7.0} ms in the second, \
             {last_lag:7.0} ms at the end",
            quantile(&sorted, 0.5),
            sorted.first().copied().unwrap_or(0.0),
            worst_lag(&samples[..samples.len() - half.len()]),
            worst_lag(half),
        );
    }
}

fn second_half(samples: &[Sample]) -> &[Sample] {
    let Some(first) = samples.first() else {
        return samples;
    };
    let middle = first.at + (samples[samples.len() - 1].at - first.at) / 2;
    let at = samples.partition_point(|s| s.at < middle);
    &samples[at..]
}

/// Microseconds since the Unix epoch: the price a writer writes, which
/// says when it wrote it.
fn micros_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as i64
}

/// A writer of its own connection: UPDATEs its products in turn, each to
/// the time it writes it, `pace` a second (as many as it can if fewer),
/// until stopped. Answers the newest price it wrote.
fn start_writer(
    shop: &WorkerShop,
    products: Vec<Uuid>,
    pace: f64,
    stop: Arc<AtomicBool>,
    written: Arc<AtomicU64>,
) -> std::thread::JoinHandle<Option<i64>> {
    let mut pg = shop.cluster.connect("shop");
    std::thread::spawn(move || {
        let update = pg
            .prepare("UPDATE shop.products SET price_cents = $1 WHERE id = $2")
            .unwrap();
        let began = Instant::now();
        let mut newest = None;
        let mut count = 0u64;
        while !stop.load(Ordering::Relaxed) {
            let due = began + Duration::from_secs_f64(count as f64 / pace);
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
            let price = micros_now();
            let product = products[count as usize % products.len()];
            pg.execute(&update, &[&price, &product]).unwrap();
            newest = Some(price);
            count += 1;
            written.fetch_add(1, Ordering::Relaxed);
        }
        newest
    })
}

// ---------------------------------------------------------------------------
// One change, 200 registers over NATS.

fn fleet_part() {
    let registers = arg::<usize>("--fleet", 200);
    let changes = arg::<usize>("--fleet-changes", 10);
    println!();
    println!(
        "One product changed, {registers} registers over NATS: until the last applied it \
         ({changes} changes; target: at most 1 s)"
    );
    let began = Instant::now();
    let (mut shop, fleet) = shop_with_fleet(Transport::Nats, 100, registers, &Options::default());
    println!(
        "  {} registers provisioned in {:.1} s",
        fleet.len(),
        began.elapsed().as_secs_f64()
    );
    // Apart, as a fleet sees changes: each alone.
    let mut last = Vec::new();
    let mut missed = 0;
    let failed = shop.failed_passes();
    let latencies = changes_applied(
        &mut shop,
        &fleet,
        changes,
        Spacing::AfterReports,
        Duration::from_secs(10),
    );
    let failed = shop.failed_passes() - failed;
    for per_register in latencies {
        match per_register.iter().copied().collect::<Option<Vec<f64>>>() {
            Some(all) => last.push(all.into_iter().fold(0.0, f64::max)),
            None => missed += 1,
        }
    }
    last.sort_by(|a, b| a.total_cmp(b));
    if last.is_empty() {
        println!("  no change reached every register");
        return;
    }
    println!(
        "  the last register applied it after: median {:.1} ms, max {:.1} ms (each: {}); \
         {missed} change(s) some register never applied; {failed} passes failed and tried \
         again{}",
        quantile(&last, 0.5),
        last[last.len() - 1],
        last.iter()
            .map(|ms| format!("{ms:.0}"))
            .collect::<Vec<_>>()
            .join(", "),
        troubles_of(&fleet)
    );
}

//! pgbench, PostgreSQL's own client, as the benchmarks' writer (issue 37):
//! single-row UPDATEs by random key over the products (`n`, 1 to
//! `products`), `-c 4 -j 2 -M prepared`, for a number of transactions or of
//! seconds, unpaced or paced (`-R`); and the CPU a process spends.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::cluster::bindir;
use crate::Cluster;

/// The shop pgbench writes to: its products carry a number `n`, so that
/// a script can pick one at random, and a publication of them, for
/// logical decoding's anchor.
pub const NUMBERED_SHOP: &str = "
    CREATE SCHEMA shop;
    CREATE TABLE shop.registers (id uuid PRIMARY KEY, active boolean NOT NULL DEFAULT true);
    CREATE TABLE shop.products (
        id uuid PRIMARY KEY, n integer NOT NULL UNIQUE, name text NOT NULL,
        price_cents bigint NOT NULL, updated_at timestamptz NOT NULL DEFAULT now());
    CREATE PUBLICATION bench FOR TABLE shop.products;
";

/// Its declarations: the registers, and the products sent to every live
/// one. Made apart, so that a benchmark can write to the shop undeclared
/// first.
pub const NUMBERED_DECLARED: &str = "
    SELECT sync.declare_replicas('shop.registers', live => 'active');
    SELECT sync.declare_table('shop.products', sync => 'broadcast');
";

/// How long pgbench writes.
#[derive(Clone, Copy, Debug)]
pub enum Run {
    /// This many UPDATEs in all, as fast as it can.
    Transactions(i64),
    /// For this long, as fast as it can or at `rate` a second (`-R`).
    Seconds { seconds: u64, rate: Option<u64> },
}

/// What a run of pgbench did.
#[derive(Clone, Copy, Debug)]
pub struct Ran {
    /// UPDATEs committed.
    pub writes: i64,
    /// From its start to its end, connections included.
    pub seconds: f64,
}

impl Ran {
    pub fn rate(&self) -> f64 {
        self.writes as f64 / self.seconds
    }
}

/// The script: one UPDATE of a product picked at random by its number
/// `n` (1 to `products`), its price the writer's clock in microseconds (so
/// a register's newest price tells how old the newest change it applied
/// is).
pub fn by_number(products: i64) -> String {
    format!(
        "\\set k random(1, {products})\n\
         UPDATE shop.products SET price_cents = (extract(epoch FROM clock_timestamp()) * 1000000)::bigint, \
         updated_at = now() WHERE n = :k;\n"
    )
}

/// The same, the product of `table` picked by its name, 'Product 1' to
/// 'Product `products`' (a shop with no number; it wants an index on the
/// name).
pub fn by_name(table: &str, products: i64) -> String {
    format!(
        "\\set k random(1, {products})\n\
         UPDATE {table} SET price_cents = (extract(epoch FROM clock_timestamp()) * 1000000)::bigint, \
         updated_at = now() WHERE name = 'Product ' || :k;\n"
    )
}

/// Runs `script` with pgbench against `db` of `cluster` (4 clients, 2
/// threads, prepared).
pub fn pgbench(cluster: &Cluster, db: &str, script: &str, run: Run) -> Ran {
    pgbench_at(cluster.socket_dir(), cluster.port(), db, script, run)
}

/// The same, given the server's socket directory and port.
pub fn pgbench_at(socket_dir: &Path, port: u16, db: &str, script: &str, run: Run) -> Ran {
    let file = tempfile::Builder::new().suffix(".sql").tempfile().unwrap();
    std::fs::write(file.path(), script).unwrap();
    let clients = 4;
    let mut command = Command::new(bindir().join("pgbench"));
    command
        .arg("-h")
        .arg(socket_dir)
        .args(["-p", &port.to_string(), "-U", "postgres", "-n"])
        .args(["-c", &clients.to_string(), "-j", "2", "-M", "prepared"]);
    match run {
        Run::Transactions(n) => {
            command.args(["-t", &(n / clients).to_string()]);
        }
        Run::Seconds { seconds, rate } => {
            command.args(["-T", &seconds.to_string()]);
            if let Some(rate) = rate {
                command.args(["-R", &rate.to_string()]);
            }
        }
    }
    let started = Instant::now();
    let out = command
        .arg("-f")
        .arg(file.path())
        .arg(db)
        .output()
        .expect("runs pgbench");
    let seconds = started.elapsed().as_secs_f64();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "pgbench: {}{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    let writes = text
        .lines()
        .find_map(|l| l.strip_prefix("number of transactions actually processed: "))
        .and_then(|n| n.split('/').next()?.trim().parse().ok())
        .expect("pgbench says how many it processed");
    Ran { writes, seconds }
}

/// A process's CPU time so far (user and system), in seconds.
pub fn cpu_seconds(pid: i32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name, in parentheses, may hold spaces: count after it.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    // Clock ticks: USER_HZ, 100 on Linux.
    Some(ticks / 100.0)
}

/// The CPU a process used until it ended or was asked: sampled every few
/// milliseconds, the last sample kept (a walsender exits with its client).
pub struct CpuWatch {
    stop: Arc<AtomicBool>,
    sampler: std::thread::JoinHandle<f64>,
}

impl CpuWatch {
    pub fn of(pid: i32) -> CpuWatch {
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let start = cpu_seconds(pid).unwrap_or(0.0);
        let sampler = std::thread::spawn(move || {
            let mut last = start;
            while !stopping.load(Ordering::Relaxed) {
                match cpu_seconds(pid) {
                    Some(now) => last = now,
                    None => break,
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            last - start
        });
        CpuWatch { stop, sampler }
    }

    /// Seconds of CPU since it began watching.
    pub fn used(self) -> f64 {
        self.stop.store(true, Ordering::Relaxed);
        self.sampler.join().unwrap()
    }
}

//! The gateway's figures, side by side in one run, the relay worker
//! relaying and every register running the real device loop on a SQLite
//! file of its own ("applied" is the register's commit, stamped by
//! SQLite's WAL hook once it is in the WAL):
//!
//! - commit to applied over the gateway, the queue and NATS, with 1 and
//!   with 100 registers: a single-row UPDATE on the server, until each
//!   register's transaction applying it committed; p50 and p99;
//! - 1,000 registers connected to one gateway, idle: the gateway's
//!   resident memory per link, and one product changed: the time until the
//!   last register applied it;
//! - frames through one gateway for 100 registers kept busy (a writer
//!   changing products as fast as it can): messages down and Ups up a
//!   second, and the gateway's CPU per message.
//!
//! Run on release builds, the gateway's binary built beside this one:
//! `cargo pgrx install --release -p magic_sync`, then
//! `cargo build --release -p magic_sync_gateway` and
//! `cargo run --release -p magic_sync_tests --bin bench_gateway`.
//! Options: `--only latency,idle,busy`; `--transports gateway,queue,nats`;
//! `--changes N` (1000) and `--registers N` (100) for commit to applied;
//! `--idle N` (1000) for the idle links; `--busy-seconds N` (10) and
//! `--busy-registers N` (100); `--gateway PATH` (the binary beside this
//! one).

use std::cell::RefCell;
use std::ffi::c_int;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use magic_sync_replica::transport::nats::{Nats, NatsSettings};
use magic_sync_replica::transport::queue::Queue;
use magic_sync_replica::transport::ws::{Ws, WsSettings};
use magic_sync_replica::transport::{run, Control, Options, Status, Transport};
use magic_sync_replica::{install, Replica, Settings, Table, Tables};
use magic_sync_tests::args::{arg, text_arg};
use magic_sync_tests::figures::{median_and_p99, ms};
use magic_sync_tests::shop;
use magic_sync_tests::worker_shop::{Transport as ShopTransport, WorkerShop};
use rusqlite::hooks::{Action, PreUpdateCase, Wal};
use rusqlite::Connection;
use tempfile::TempDir;
use uuid::Uuid;

/// The prices the changes write: above every product's own.
const BASE_PRICE: i64 = 1_000_000_000;
const PROVISIONING: Duration = Duration::from_secs(600);
const SIGNING_KEY: &[u8] = b"the bench's signing key";

fn main() {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        default_hook(info);
        std::process::exit(1);
    }));
    let only = text_arg("--only").unwrap_or_else(|| "latency,idle,busy".to_owned());
    if only.contains("latency") {
        latency_part();
    }
    if only.contains("idle") {
        idle_part();
    }
    if only.contains("busy") {
        busy_part();
    }
}

// ---------------------------------------------------------------------------
// The shop, its gateway, and how registers reach it.

#[derive(Clone, Copy, PartialEq, Eq)]
enum Way {
    Gateway,
    Queue,
    Nats,
}

impl Way {
    fn name(self) -> &'static str {
        match self {
            Way::Gateway => "gateway",
            Way::Queue => "queue",
            Way::Nats => "nats",
        }
    }

    fn parse(name: &str) -> Way {
        match name.trim() {
            "gateway" => Way::Gateway,
            "queue" => Way::Queue,
            "nats" => Way::Nats,
            other => panic!("--transports names gateway, queue or nats, not {other}"),
        }
    }
}

/// The gateway's binary, run as a process.
struct GatewayProcess {
    child: Child,
    url: String,
    _key: TempDir,
}

impl GatewayProcess {
    fn start(shop: &mut WorkerShop, max_links: usize) -> GatewayProcess {
        shop.pg
            .batch_execute(
                "CREATE ROLE gateway LOGIN; SELECT sync.allow_gateway('gateway'); \
                 GRANT CREATE ON DATABASE shop TO gateway;",
            )
            .unwrap();
        let key = tempfile::tempdir().unwrap();
        let key_file = key.path().join("key");
        std::fs::write(&key_file, SIGNING_KEY).unwrap();
        let database = format!(
            "host={} port={} user=gateway dbname=shop",
            shop.cluster.socket_dir().display(),
            shop.cluster.port()
        );
        let mut child = Command::new(gateway_binary())
            .args(["serve", "--database", &database, "--listen", "127.0.0.1:0"])
            .args(["--max-links", &max_links.to_string(), "--signing-key"])
            .arg(&key_file)
            .stdout(Stdio::piped())
            .spawn()
            .expect("the gateway's binary starts (cargo build --release -p magic_sync_gateway)");
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        let address = first.trim().rsplit(' ').next().unwrap().to_owned();
        GatewayProcess {
            child,
            url: format!("ws://{address}/link"),
            _key: key,
        }
    }

    fn token(replica: Uuid) -> String {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs();
        magic_sync_gateway::credentials::sign(SIGNING_KEY, replica, now + 86_400)
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Its resident memory now, in kB (VmRSS).
    fn resident_kb(&self) -> f64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        status
            .lines()
            .find(|l| l.starts_with("VmRSS:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse().ok())
            .unwrap()
    }

    /// Its CPU time so far (user and system), in ms.
    fn cpu_ms(&self) -> f64 {
        cpu_of(&format!("/proc/{}/stat", self.pid()))
    }
}

impl Drop for GatewayProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn gateway_binary() -> PathBuf {
    text_arg("--gateway").map(PathBuf::from).unwrap_or_else(|| {
        std::env::current_exe()
            .unwrap()
            .with_file_name("magic-sync-gateway")
    })
}

/// CPU time of the process whose stat file this is, in ms.
fn cpu_of(stat_file: &str) -> f64 {
    const MS_A_TICK: f64 = 10.0;
    let stat = std::fs::read_to_string(stat_file).unwrap_or_default();
    let Some((_, rest)) = stat.rsplit_once(") ") else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) * MS_A_TICK
}

/// The shop with its worker, relaying over the queue (the gateway's
/// transport too) or NATS, and its gateway when asked.
fn shop_for(way: Way, products: usize, max_links: usize) -> (WorkerShop, Option<GatewayProcess>) {
    let transport = match way {
        Way::Nats => ShopTransport::Nats,
        _ => ShopTransport::Queue,
    };
    let mut shop = WorkerShop::start(transport, products, &["shared_buffers=512MB"]);
    let gateway = (way == Way::Gateway).then(|| GatewayProcess::start(&mut shop, max_links));
    (shop, gateway)
}

// ---------------------------------------------------------------------------
// Registers that stamp their commits.

/// What a register committed of the products.
#[derive(Default)]
struct Stamps {
    /// Each commit that wrote products: when, and the highest price in it.
    commits: Vec<(Instant, i64)>,
    top: i64,
    rows: u64,
    /// Waiting for news, having said what it applied.
    idle: bool,
    /// Messages applied, and Ups the transport took.
    applied: u64,
    sent: u64,
    troubles: u64,
}

impl Stamps {
    fn first_reaching(&self, price: i64) -> Option<Instant> {
        self.commits
            .iter()
            .find(|(_, top)| *top >= price)
            .map(|(at, _)| *at)
    }
}

struct Register {
    control: Control,
    stamps: Arc<Mutex<Stamps>>,
    thread: Option<JoinHandle<()>>,
}

struct Fleet {
    registers: Vec<Register>,
    _dir: TempDir,
}

/// How a register connects.
#[derive(Clone)]
enum Reach {
    Queue(String),
    Nats(String),
    Ws(String),
}

fn reach_of(way: Way, shop: &WorkerShop, gateway: Option<&GatewayProcess>) -> Reach {
    match (way, gateway) {
        (Way::Gateway, Some(g)) => Reach::Ws(g.url.clone()),
        (Way::Nats, _) => match shop.link() {
            magic_sync_tests::registers::Link::Nats(url) => Reach::Nats(url),
            other => panic!("NATS expected, not {other:?}"),
        },
        _ => Reach::Queue(shop.cluster.url("shop")),
    }
}

impl Fleet {
    fn start(reach: &Reach, ids: &[Uuid]) -> Fleet {
        let dir = tempfile::tempdir().unwrap();
        let registers = ids
            .iter()
            .map(|id| Register::start(reach.clone(), dir.path(), *id))
            .collect();
        Fleet {
            registers,
            _dir: dir,
        }
    }

    fn all(&self, mut done: impl FnMut(&Stamps) -> bool) -> bool {
        self.registers
            .iter()
            .all(|r| done(&r.stamps.lock().unwrap()))
    }

    fn each<T>(&self, mut look: impl FnMut(&Stamps) -> T) -> Vec<T> {
        self.registers
            .iter()
            .map(|r| look(&r.stamps.lock().unwrap()))
            .collect()
    }

    fn wait_until(
        &self,
        patience: Duration,
        every: Duration,
        mut done: impl FnMut(&Stamps) -> bool,
    ) -> bool {
        let began = Instant::now();
        while !self.all(&mut done) {
            if began.elapsed() > patience {
                return false;
            }
            std::thread::sleep(every);
        }
        true
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for r in &self.registers {
            r.control.stop();
        }
        for r in &mut self.registers {
            if let Some(thread) = r.thread.take() {
                let _ = thread.join();
            }
        }
    }
}

impl Register {
    fn start(reach: Reach, dir: &Path, me: Uuid) -> Register {
        let control = Control::new();
        let stamps = Arc::new(Mutex::new(Stamps {
            top: i64::MIN,
            ..Stamps::default()
        }));
        let file = dir.join(format!("{me}.db"));
        let (steering, noted) = (control.clone(), stamps.clone());
        let thread = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(move || {
                let mut replica = open_replica(&file, me, noted.clone());
                let report = |status: Status| note(&noted, &status);
                let options = Options {
                    poll_every: Duration::from_secs(3600),
                    ..Options::default()
                };
                match reach {
                    Reach::Queue(url) => {
                        let queue = Queue::new(url.parse().unwrap(), me);
                        looping(&mut replica, queue, &options, &steering, report)
                    }
                    Reach::Nats(url) => {
                        let nats = Nats::new(NatsSettings::new(url), &replica).unwrap();
                        looping(&mut replica, nats, &options, &steering, report)
                    }
                    Reach::Ws(url) => {
                        let settings = WsSettings::new(url, GatewayProcess::token(me));
                        let ws = Ws::new(settings, &replica).unwrap();
                        looping(&mut replica, ws, &options, &steering, report)
                    }
                }
            })
            .unwrap();
        Register {
            control,
            stamps,
            thread: Some(thread),
        }
    }
}

fn looping<T: Transport>(
    replica: &mut Replica,
    mut transport: T,
    options: &Options,
    control: &Control,
    report: impl FnMut(Status),
) {
    run(replica, &mut transport, options, control, report);
}

fn note(stamps: &Mutex<Stamps>, status: &Status) {
    let mut s = stamps.lock().unwrap();
    match status {
        Status::Waiting { .. } => s.idle = true,
        Status::Applied(_) => {
            s.idle = false;
            s.applied += 1;
        }
        Status::Sent { .. } => {
            s.idle = false;
            s.sent += 1;
        }
        Status::Unapplied { .. }
        | Status::UpRefused { .. }
        | Status::Disconnected { .. }
        | Status::Failed { .. } => s.troubles += 1,
        _ => {}
    }
}

/// `price_cents`, in the order of the register's products (shop::REGISTER).
const PRICE_COLUMN: c_int = 2;

fn open_replica(file: &Path, me: Uuid, stamps: Arc<Mutex<Stamps>>) -> Replica {
    let tables = Tables::new(vec![Table::catalog("products")]);
    let mut conn = Connection::open(file).unwrap();
    conn.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON; \
         PRAGMA recursive_triggers = ON;",
    )
    .unwrap();
    conn.execute_batch(shop::REGISTER).unwrap();
    install(&mut conn, &tables).unwrap();
    stamp_commits(&conn, stamps);
    Replica::open(conn, tables, me, Settings::default()).unwrap()
}

/// What the open transaction on this thread wrote of the products.
struct Writing {
    rows: u64,
    top: i64,
    stamps: Arc<Mutex<Stamps>>,
}

thread_local! {
    static WRITING: RefCell<Option<Writing>> = const { RefCell::new(None) };
}

/// Notes each products row written (the preupdate hook), and stamps the
/// transaction once its commit is in the WAL (the WAL hook): the
/// register's own commit, not the loop's report after acknowledging.
fn stamp_commits(conn: &Connection, stamps: Arc<Mutex<Stamps>>) {
    WRITING.with(|w| {
        *w.borrow_mut() = Some(Writing {
            rows: 0,
            top: i64::MIN,
            stamps,
        })
    });
    conn.preupdate_hook(Some(
        |_: Action, _: &str, table: &str, case: &PreUpdateCase| {
            let new = match case {
                PreUpdateCase::Insert(new) => new,
                PreUpdateCase::Update {
                    new_value_accessor, ..
                } => new_value_accessor,
                _ => return,
            };
            if table != "products" {
                return;
            }
            let price = new
                .get_new_column_value(PRICE_COLUMN)
                .ok()
                .and_then(|v| v.as_i64().ok())
                .unwrap_or(i64::MIN);
            with_writing(|w| {
                w.rows += 1;
                w.top = w.top.max(price);
            });
        },
    ));
    conn.rollback_hook(Some(|| {
        with_writing(|w| {
            w.rows = 0;
            w.top = i64::MIN;
        })
    }));
    conn.wal_hook(Some(committed));
}

fn with_writing(f: impl FnOnce(&mut Writing)) {
    WRITING.with(|w| {
        if let Some(writing) = w.borrow_mut().as_mut() {
            f(writing);
        }
    });
}

fn committed(wal: &Wal, pages: c_int) -> rusqlite::Result<()> {
    let now = Instant::now();
    with_writing(|w| {
        if w.rows > 0 {
            let mut s = w.stamps.lock().unwrap();
            s.rows += w.rows;
            s.top = s.top.max(w.top);
            s.commits.push((now, w.top));
        }
        w.rows = 0;
        w.top = i64::MIN;
    });
    if pages >= 1000 {
        let _ = wal.checkpoint();
    }
    Ok(())
}

/// Starts `count` registers reaching the shop `way`, and waits until each
/// took its snapshot of `products` and said so.
fn provisioned_fleet(
    way: Way,
    shop: &mut WorkerShop,
    gateway: Option<&GatewayProcess>,
    count: usize,
    products: usize,
) -> Fleet {
    let ids = shop.add_registers(count);
    let fleet = Fleet::start(&reach_of(way, shop, gateway), &ids);
    let done = fleet.wait_until(PROVISIONING, Duration::from_millis(50), |s| {
        s.rows >= products as u64 && s.idle
    });
    assert!(done, "the registers took no snapshot in {PROVISIONING:?}");
    fleet
}

// ---------------------------------------------------------------------------
// Commit to applied.

fn latency_part() {
    let changes = arg::<usize>("--changes", 1000);
    let many = arg::<usize>("--registers", 100);
    let ways: Vec<Way> = text_arg("--transports")
        .unwrap_or_else(|| "gateway,queue,nats".to_owned())
        .split(',')
        .map(Way::parse)
        .collect();
    println!(
        "Commit to applied ({changes} changes, each once every register applied the last and \
         said so; targets for 1 register over the gateway: p50 10 ms, p99 50 ms, within 20% of \
         the queue)"
    );
    for registers in [1, many] {
        for &way in &ways {
            let (mut shop, gateway) = shop_for(way, 100, registers + 10);
            let fleet = provisioned_fleet(way, &mut shop, gateway.as_ref(), registers, 100);
            let began = Instant::now();
            let samples = changes_applied(&mut shop, &fleet, changes);
            let (p50, p99) = median_and_p99(samples.clone());
            let troubles: u64 = fleet.each(|s| s.troubles).iter().sum();
            println!(
                "  {:7} {registers:3} register(s): p50 {p50:7.2} ms, p99 {p99:7.2} ms \
                 ({} samples, {troubles} troubles, {:.1} s)",
                way.name(),
                samples.len(),
                began.elapsed().as_secs_f64()
            );
        }
    }
}

/// Makes `changes` changes to one product, each once every register
/// applied the last and went idle; answers, per register and change, ms
/// from the server's commit to the register's.
fn changes_applied(shop: &mut WorkerShop, fleet: &Fleet, changes: usize) -> Vec<f64> {
    let update = shop
        .pg
        .prepare("UPDATE shop.products SET price_cents = $1 WHERE name = 'Product 1'")
        .unwrap();
    let mut committed_at = Vec::with_capacity(changes);
    for change in 0..changes {
        let price = BASE_PRICE + change as i64;
        shop.pg.execute(&update, &[&price]).unwrap();
        committed_at.push(Instant::now());
        fleet.wait_until(Duration::from_secs(5), Duration::from_micros(500), |s| {
            s.top >= price && s.idle
        });
    }
    let mut samples = Vec::new();
    for (change, committed) in committed_at.iter().enumerate() {
        let price = BASE_PRICE + change as i64;
        for at in fleet
            .each(|s| s.first_reaching(price))
            .into_iter()
            .flatten()
        {
            samples.push(ms(at.saturating_duration_since(*committed)));
        }
    }
    samples
}

// ---------------------------------------------------------------------------
// Idle links.

fn idle_part() {
    let count = arg::<usize>("--idle", 1000);
    println!(
        "{count} registers connected to one gateway, idle (targets: at most 64 kB a link; \
         one change applied by the last within 2 s)"
    );
    let (mut shop, gateway) = shop_for(Way::Gateway, 1, count + 10);
    let gateway = gateway.unwrap();
    std::thread::sleep(Duration::from_secs(1));
    let before = gateway.resident_kb();
    let fleet = provisioned_fleet(Way::Gateway, &mut shop, Some(&gateway), count, 1);
    std::thread::sleep(Duration::from_secs(2));
    let after = gateway.resident_kb();
    println!(
        "  the gateway's resident memory: {:.1} MB with no link, {:.1} MB with {count}: \
         {:.1} kB a link",
        before / 1024.0,
        after / 1024.0,
        (after - before) / count as f64
    );
    let mut lasts = Vec::new();
    for round in 0..5 {
        let price = BASE_PRICE + round;
        shop.pg
            .execute(
                "UPDATE shop.products SET price_cents = $1 WHERE name = 'Product 1'",
                &[&price],
            )
            .unwrap();
        let committed = Instant::now();
        fleet.wait_until(Duration::from_secs(60), Duration::from_millis(1), |s| {
            s.top >= price && s.idle
        });
        let last = fleet
            .each(|s| s.first_reaching(price))
            .into_iter()
            .flatten()
            .max()
            .unwrap();
        lasts.push(ms(last.saturating_duration_since(committed)));
    }
    let (median, _) = median_and_p99(lasts.clone());
    let worst = lasts.iter().copied().fold(0.0, f64::max);
    println!(
        "  one product changed, until the last of {count} applied it: median {median:.0} ms, \
         max {worst:.0} ms (of 5)"
    );
}

// ---------------------------------------------------------------------------
// Busy registers.

fn busy_part() {
    let count = arg::<usize>("--busy-registers", 100);
    let seconds = arg::<u64>("--busy-seconds", 10);
    println!("Frames through one gateway, {count} registers kept busy for {seconds} s");
    let (mut shop, gateway) = shop_for(Way::Gateway, 100, count + 10);
    let gateway = gateway.unwrap();
    let fleet = provisioned_fleet(Way::Gateway, &mut shop, Some(&gateway), count, 100);
    let (applied_before, sent_before) = totals(&fleet);
    let cpu_before = gateway.cpu_ms();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let url = shop.cluster.url("shop");
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut pg = postgres::Client::connect(&url, postgres::NoTls).unwrap();
            let update = pg
                .prepare("UPDATE shop.products SET price_cents = price_cents + 1 WHERE name = $1")
                .unwrap();
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let name = format!("Product {}", i % 100 + 1);
                pg.execute(&update, &[&name]).unwrap();
                i += 1;
            }
            i
        })
    };
    let began = Instant::now();
    std::thread::sleep(Duration::from_secs(seconds));
    stop.store(true, Ordering::Relaxed);
    let writes = writer.join().unwrap();
    let took = began.elapsed().as_secs_f64();
    let (applied, sent) = totals(&fleet);
    let cpu = gateway.cpu_ms() - cpu_before;
    let (down, up) = (applied - applied_before, sent - sent_before);
    let messages = (down + up) as f64;
    println!(
        "  {writes} changes written; {:.0} messages down and {:.0} Ups up a second \
         ({:.0} in all); the gateway's CPU {:.3} ms a message",
        down as f64 / took,
        up as f64 / took,
        messages / took,
        cpu / messages.max(1.0)
    );
}

fn totals(fleet: &Fleet) -> (u64, u64) {
    let each = fleet.each(|s| (s.applied, s.sent));
    (
        each.iter().map(|(a, _)| a).sum(),
        each.iter().map(|(_, s)| s).sum(),
    )
}

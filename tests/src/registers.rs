//! The benchmarks' registers: each a SQLite file of its own running the
//! real device loop (`magic_sync_replica::transport::run`) in a thread of
//! its own, over the server's queue (`transport::queue::Queue`) or NATS
//! JetStream (`transport::nats::Nats`), with the default `Options` unless
//! told others.
//!
//! Each tells when it committed the products it applied, as SQLite sees
//! it: a preupdate hook notes the products rows the open transaction
//! writes (how many, and the highest price), and the WAL hook — which
//! SQLite calls once a transaction's commit is in the WAL, synced
//! (`synchronous = FULL`) — stamps them with the time. Nothing polls the
//! file, and the time is not the loop's report (which comes after the
//! acknowledgement).

use std::cell::RefCell;
use std::ffi::c_int;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use magic_sync_replica::transport::nats::{Nats, NatsSettings};
use magic_sync_replica::transport::queue::Queue;
use magic_sync_replica::transport::{run, Control, Options, Status, Transport};
use magic_sync_replica::{install, Replica, Settings, Table, Tables};
use rusqlite::hooks::{Action, PreUpdateCase, Wal};
use rusqlite::Connection;
use tempfile::TempDir;
use uuid::Uuid;

/// The shop's register: its copy of the products.
pub use crate::shop::REGISTER as REGISTER_SCHEMA;

/// `price_cents`, in the order of `REGISTER_SCHEMA`.
const PRICE_COLUMN: c_int = 2;

/// Pages in the WAL past which a commit checkpoints it, as SQLite's own
/// auto-checkpoint does (the WAL hook takes its place).
const CHECKPOINT_PAGES: c_int = 1000;

/// How a register reaches the server.
#[derive(Clone, Debug)]
pub enum Link {
    /// The queue in the server's database, at this connection string.
    Queue(String),
    /// NATS JetStream, at this URL.
    Nats(String),
}

/// What a register committed of the products so far.
#[derive(Debug)]
pub struct Applied {
    /// Products rows written (inserted or updated), in all.
    pub rows: u64,
    /// The highest price it committed.
    pub top: i64,
    /// Each commit that wrote products: when, and the highest price in it.
    pub commits: Vec<(Instant, i64)>,
    /// Whether its loop is waiting for news, having sent what it had to
    /// say of everything it committed (its Up saying what it applied).
    pub idle: bool,
}

impl Applied {
    /// When it first committed a price at least `price`.
    pub fn first_reaching(&self, price: i64) -> Option<Instant> {
        self.commits
            .iter()
            .find(|(_, top)| *top >= price)
            .map(|(at, _)| *at)
    }
}

/// What a register's loop reported that was not routine: a disconnection,
/// a failure, a message left unapplied, an Up refused.
#[derive(Debug, Default)]
pub struct Troubles {
    pub count: u64,
    /// The first few, as text.
    pub first: Vec<String>,
}

struct Register {
    control: Control,
    applied: Arc<Mutex<Applied>>,
    troubles: Arc<Mutex<Troubles>>,
    thread: Option<JoinHandle<()>>,
}

/// Registers running their loops; stopped when dropped.
pub struct Fleet {
    registers: Vec<Register>,
    _dir: TempDir,
}

impl Fleet {
    /// Starts a register for each replica id, each with a fresh file.
    pub fn start(link: &Link, ids: &[Uuid]) -> Fleet {
        Fleet::start_with(link, ids, &Options::default())
    }

    /// The same, each loop paced by `options`.
    pub fn start_with(link: &Link, ids: &[Uuid], options: &Options) -> Fleet {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let registers = ids
            .iter()
            .map(|id| Register::start(link.clone(), dir.path(), *id, options.clone()))
            .collect();
        Fleet {
            registers,
            _dir: dir,
        }
    }

    pub fn len(&self) -> usize {
        self.registers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.registers.is_empty()
    }

    /// What each register committed so far (each locked in turn).
    pub fn each<R>(&self, mut look: impl FnMut(&Applied) -> R) -> Vec<R> {
        self.registers.iter().map(|r| look(&r.applied())).collect()
    }

    /// Whether every register's commits satisfy `done`.
    pub fn all(&self, mut done: impl FnMut(&Applied) -> bool) -> bool {
        self.registers.iter().all(|r| done(&r.applied()))
    }

    /// Waits until every register satisfies `done`, at most `patience`,
    /// looking every `every`; answers whether they all did.
    pub fn wait_until(
        &self,
        patience: Duration,
        every: Duration,
        mut done: impl FnMut(&Applied) -> bool,
    ) -> bool {
        let began = Instant::now();
        loop {
            if self.all(&mut done) {
                return true;
            }
            if began.elapsed() > patience {
                return false;
            }
            std::thread::sleep(every);
        }
    }

    /// Forgets the troubles so far (those of starting up: a register
    /// that connects before the server made its streams).
    pub fn forget_troubles(&self) {
        for register in &self.registers {
            *register.troubles.lock().unwrap() = Troubles::default();
        }
    }

    /// Every register's troubles so far, added up.
    pub fn troubles(&self) -> Troubles {
        let mut all = Troubles::default();
        for register in &self.registers {
            let troubles = register.troubles.lock().unwrap();
            all.count += troubles.count;
            for text in &troubles.first {
                if all.first.len() < 5 {
                    all.first.push(text.clone());
                }
            }
        }
        all
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for register in &self.registers {
            register.control.stop();
        }
        for register in &mut self.registers {
            if let Some(thread) = register.thread.take() {
                let _ = thread.join();
            }
        }
    }
}

impl Register {
    fn start(link: Link, dir: &Path, me: Uuid, options: Options) -> Register {
        let control = Control::new();
        let applied = Arc::new(Mutex::new(Applied {
            rows: 0,
            top: i64::MIN,
            commits: Vec::new(),
            idle: false,
        }));
        let troubles = Arc::new(Mutex::new(Troubles::default()));
        let file = dir.join(format!("{me}.db"));
        let thread = {
            let (control, applied, troubles) = (control.clone(), applied.clone(), troubles.clone());
            std::thread::spawn(move || {
                let mut replica = open_replica(&file, me, applied.clone());
                let report = move |status: Status| note_status(&applied, &troubles, status);
                match link {
                    Link::Queue(url) => {
                        let config = url.parse().expect("a connection string");
                        let queue = Queue::new(config, me).in_one_call(in_one_call());
                        run_loop(&mut replica, queue, &options, &control, report)
                    }
                    Link::Nats(url) => {
                        let nats =
                            Nats::new(NatsSettings::new(url), &replica).expect("a client of NATS");
                        run_loop(&mut replica, nats, &options, &control, report)
                    }
                }
            })
        };
        Register {
            control,
            applied,
            troubles,
            thread: Some(thread),
        }
    }

    fn applied(&self) -> MutexGuard<'_, Applied> {
        self.applied.lock().unwrap()
    }
}

fn run_loop<T: Transport>(
    replica: &mut Replica,
    mut transport: T,
    options: &Options,
    control: &Control,
    report: impl FnMut(Status),
) {
    run(replica, &mut transport, options, control, report);
}

fn note_status(applied: &Mutex<Applied>, troubles: &Mutex<Troubles>, status: Status) {
    match status {
        Status::Waiting { .. } => applied.lock().unwrap().idle = true,
        Status::Applied(_) | Status::Sent { .. } => applied.lock().unwrap().idle = false,
        _ => {}
    }
    let trouble = matches!(
        status,
        Status::Unapplied { .. }
            | Status::UpRefused { .. }
            | Status::Disconnected { .. }
            | Status::Failed { .. }
    );
    if trouble {
        let mut troubles = troubles.lock().unwrap();
        troubles.count += 1;
        if troubles.first.len() < 5 {
            troubles.first.push(status.to_string());
        }
    }
}

/// A register's file, its tables installed, watched (on this thread) and
/// opened as a replica.
fn open_replica(file: &Path, me: Uuid, applied: Arc<Mutex<Applied>>) -> Replica {
    let tables = Tables::new(vec![Table::catalog("products")]);
    let mut conn = Connection::open(file).unwrap();
    conn.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON; \
         PRAGMA recursive_triggers = ON;",
    )
    .unwrap();
    conn.execute_batch(REGISTER_SCHEMA).unwrap();
    install(&mut conn, &tables).unwrap();
    watch(&conn, applied);
    Replica::open(conn, tables, me, Settings::default()).unwrap()
}

/// What the transaction open on this thread's register wrote of the
/// products, and where its commit goes.
struct Watch {
    rows: u64,
    top: i64,
    applied: Arc<Mutex<Applied>>,
}

thread_local! {
    static WATCH: RefCell<Option<Watch>> = const { RefCell::new(None) };
}

/// Sets the hooks on a register's connection: they run on the thread that
/// writes through it, this one.
fn watch(conn: &Connection, applied: Arc<Mutex<Applied>>) {
    WATCH.with(|w| {
        *w.borrow_mut() = Some(Watch {
            rows: 0,
            top: i64::MIN,
            applied,
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
                .and_then(|v| v.as_i64().ok());
            with_watch(|w| {
                w.rows += 1;
                w.top = w.top.max(price.unwrap_or(i64::MIN));
            });
        },
    ));
    conn.rollback_hook(Some(|| {
        with_watch(|w| {
            w.rows = 0;
            w.top = i64::MIN;
        })
    }));
    conn.wal_hook(Some(committed));
}

fn with_watch(f: impl FnOnce(&mut Watch)) {
    WATCH.with(|w| {
        if let Some(watch) = w.borrow_mut().as_mut() {
            f(watch);
        }
    });
}

/// SQLite's WAL hook: a transaction committed.
fn committed(wal: &Wal, pages: c_int) -> rusqlite::Result<()> {
    let now = Instant::now();
    with_watch(|w| {
        if w.rows > 0 {
            let mut applied = w.applied.lock().unwrap();
            applied.rows += w.rows;
            applied.top = applied.top.max(w.top);
            applied.commits.push((now, w.top));
            applied.idle = false;
        }
        w.rows = 0;
        w.top = i64::MIN;
    });
    if pages >= CHECKPOINT_PAGES {
        // An error here would be the committing statement's, though it
        // committed: left to the next commit to try again.
        let _ = wal.checkpoint();
    }
    Ok(())
}

/// Whether the registers over the queue take with `sync.take`
/// (`Queue::in_one_call`, the client's default): unless
/// `MAGIC_SYNC_QUEUE_IN_ONE_CALL` is `0`, which has them call as 0.1.0's
/// client did.
fn in_one_call() -> bool {
    std::env::var("MAGIC_SYNC_QUEUE_IN_ONE_CALL").map_or(true, |v| v != "0")
}

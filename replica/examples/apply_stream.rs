//! A register's CPU per message applied, the replica alone: a stream of
//! the server's messages, captured once (`bench_apply`, in the tests crate,
//! makes it from a real server), applied to a SQLite file on disk by the
//! real device loop, as a register over the queue applies a trickle of
//! changes — each message taken, applied (`Replica::receive`, one
//! transaction, `synchronous = FULL`) and acknowledged; its report held
//! back for `report_after`, then sent in an Up of its own; then a wait for
//! news. The transport is a list in memory, so that no CPU goes to a
//! network client or a server: what is measured is the replica library,
//! the device loop and SQLite, in this process's CPU time (user and
//! system, as Linux counts it in /proc/self/stat).
//!
//!     cargo build --release -p magic_sync_replica --example apply_stream
//!     apply_stream STREAM_FILE [--rounds N]
//!
//! It prints one line a round, which `bench_apply` reads:
//! `messages N user_ms U sys_ms S receive_user_ms U2 receive_sys_ms S2
//! receive_wall_ms W2` (the last three: the same messages applied by
//! `Replica::receive` alone, on a fresh file, without the loop's other
//! work). It uses only the library's public API as 0d21641 has it, so
//! the build before it is measured with the same program.
//!
//! The stream file: the register's id (16 bytes), the number of
//! provisioning messages (u32, little endian), then every message as its
//! length (u32, little endian) and its bytes. The provisioning messages are
//! applied before the clock starts.

use std::cell::Cell;
use std::path::Path;
use std::rc::Rc;
use std::time::{Duration, Instant};

use magic_sync_replica::transport::{run, Control, Delivery, Options, Status, Transport};
use magic_sync_replica::{install, Error, Received, Replica, Settings, Table, Tables, Upload};
use rusqlite::Connection;
use uuid::Uuid;

/// A register's copy of the shop's products, as the tests' shop has it
/// (`magic_sync_tests::shop::REGISTER`).
const REGISTER: &str = "
    CREATE TABLE IF NOT EXISTS products (
        id          BLOB PRIMARY KEY NOT NULL,
        name        TEXT NOT NULL,
        price_cents INTEGER NOT NULL,
        updated_at  TEXT NOT NULL);
";

/// The settings of the benchmarks' registers (`magic_sync_tests::registers`):
/// a commit is on disk once it returns (WAL, synchronous FULL).
const CONNECTION: &str = "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; \
     PRAGMA foreign_keys = ON; PRAGMA recursive_triggers = ON;";

/// How long the loop holds back a report (the default is 100 ms): it
/// changes how long a run waits, not the work of a message.
const REPORT_AFTER: Duration = Duration::from_millis(2);

struct Stream {
    me: Uuid,
    provisioning: Vec<Vec<u8>>,
    changes: Vec<Vec<u8>>,
}

fn read_stream(path: &Path) -> Stream {
    let bytes = std::fs::read(path).expect("the stream file");
    let me = Uuid::from_slice(&bytes[..16]).expect("a register id");
    let first = u32::from_le_bytes(bytes[16..20].try_into().unwrap()) as usize;
    let mut messages = Vec::new();
    let mut at = 20;
    while at < bytes.len() {
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        messages.push(bytes[at + 4..at + 4 + len].to_vec());
        at += 4 + len;
    }
    let changes = messages.split_off(first);
    Stream {
        me,
        provisioning: messages,
        changes,
    }
}

fn open_register(file: &Path, me: Uuid) -> Replica {
    let tables = Tables::new(vec![Table::catalog("products")]);
    let mut conn = Connection::open(file).expect("the register's file");
    conn.execute_batch(CONNECTION).unwrap();
    conn.execute_batch(REGISTER).unwrap();
    install(&mut conn, &tables).unwrap();
    Replica::open(conn, tables, me, Settings::default()).unwrap()
}

/// CPU time this process spent so far, user and system, in ms (Linux's
/// /proc/self/stat, in hundredths of a second).
fn cpu_ms() -> (f64, f64) {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    // The fields after the command's name, which is in parentheses.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    // utime and stime are fields 14 and 15 of the whole line.
    let ticks = |i: usize| fields[i - 3].parse::<f64>().unwrap() * 10.0;
    (ticks(14), ticks(15))
}

/// The transport: the stream's messages, one at a time, as a register over
/// the queue takes a trickle (each relay pass wakes it for one message,
/// further apart than `report_after`). The next message is released once
/// the last was reported; until then a wait lasts its whole timeout, as
/// one with no news does. Ups are taken at once. The loop is stopped once
/// every message was applied and reported.
struct Trickle {
    messages: std::vec::IntoIter<Vec<u8>>,
    /// A message released by the last wait, not taken yet.
    waiting: Option<Vec<u8>>,
    /// Whether an Up went since the last message was acknowledged.
    reported: bool,
    control: Control,
    applied: Rc<Cell<usize>>,
}

impl Transport for Trickle {
    type Handle = ();

    fn connect(&mut self) -> Result<(), Error> {
        Ok(())
    }

    fn next(&mut self) -> Result<Option<Delivery<()>>, Error> {
        Ok(self
            .waiting
            .take()
            .map(|bytes| Delivery { handle: (), bytes }))
    }

    fn ack(&mut self, _: ()) -> Result<(), Error> {
        self.applied.set(self.applied.get() + 1);
        self.reported = false;
        Ok(())
    }

    fn send(&mut self, _: &Upload) -> Result<(), Error> {
        self.reported = true;
        Ok(())
    }

    fn wait(&mut self, timeout: Duration) -> Result<bool, Error> {
        if !self.reported {
            std::thread::sleep(timeout);
            return Ok(false);
        }
        self.waiting = self.messages.next();
        if self.waiting.is_none() {
            self.control.stop();
        }
        Ok(self.waiting.is_some())
    }
}

/// `Replica::receive` alone over the stream's changes, on a fresh file:
/// CPU (user, system) and wall time, in ms.
fn receive_alone(file: &Path, stream: &Stream) -> (f64, f64, f64) {
    let mut replica = open_register(file, stream.me);
    provision(&mut replica, stream);
    let (u0, s0) = cpu_ms();
    let began = Instant::now();
    for message in &stream.changes {
        let received = replica.receive(message).unwrap();
        assert!(matches!(received, Received::Applied { .. }), "{received:?}");
    }
    let wall = began.elapsed().as_secs_f64() * 1000.0;
    let (u1, s1) = cpu_ms();
    (u1 - u0, s1 - s0, wall)
}

fn provision(replica: &mut Replica, stream: &Stream) {
    for message in &stream.provisioning {
        let received = replica.receive(message).unwrap();
        assert!(
            matches!(received, Received::Applied { .. } | Received::Ended { .. }),
            "{received:?}"
        );
    }
    while let Some(up) = replica.next_up().unwrap() {
        replica.sent(&up).unwrap();
    }
}

/// The device loop over the stream's changes: CPU (user, system), in ms.
fn device_loop(file: &Path, stream: &Stream) -> (f64, f64) {
    let mut replica = open_register(file, stream.me);
    provision(&mut replica, stream);
    let control = Control::new();
    let applied = Rc::new(Cell::new(0));
    let mut trickle = Trickle {
        messages: stream.changes.clone().into_iter(),
        waiting: None,
        reported: true,
        control: control.clone(),
        applied: applied.clone(),
    };
    // Each message reported in an Up of its own, as when messages come
    // further apart than `report_after` (a register among a hundred, a
    // change every few hundred ms): the loop's turns are those of the
    // default 100 ms, the wait shortened so the run is short.
    let options = Options {
        report_after: REPORT_AFTER,
        ..Options::default()
    };
    let troubles = Cell::new(0);
    let (u0, s0) = cpu_ms();
    run(&mut replica, &mut trickle, &options, &control, |status| {
        if matches!(
            status,
            Status::Unapplied { .. } | Status::Failed { .. } | Status::Disconnected { .. }
        ) {
            troubles.set(troubles.get() + 1);
            eprintln!("{status}");
        }
    });
    let (u1, s1) = cpu_ms();
    assert_eq!(troubles.get(), 0, "the loop ran into trouble");
    assert_eq!(applied.get(), stream.changes.len(), "every message applied");
    (u1 - u0, s1 - s0)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let stream = read_stream(Path::new(args.get(1).expect("a stream file")));
    let rounds: usize = args
        .iter()
        .position(|a| a == "--rounds")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(1);
    for _ in 0..rounds {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let (user, sys) = device_loop(&dir.path().join("loop.db"), &stream);
        let (r_user, r_sys, r_wall) = receive_alone(&dir.path().join("alone.db"), &stream);
        println!(
            "messages {} user_ms {user:.0} sys_ms {sys:.0} \
             receive_user_ms {r_user:.0} receive_sys_ms {r_sys:.0} receive_wall_ms {r_wall:.0}",
            stream.changes.len()
        );
    }
}

//! A register's CPU per message applied (issue 37: at most 0.25 ms), the
//! replica alone, apart from PostgreSQL and the transport's client.
//!
//! 1. The stream, made once from a real server: a throwaway cluster with
//!    the benchmarks' shop (`--products N` products, 1,000), one live
//!    register provisioned, then `--changes N` (2,000) single-row UPDATEs
//!    of a product, each relayed by its own `CALL sync.relay()` — the
//!    messages a register among many takes over the queue, one small
//!    `Down` each. Every message is taken with `sync.next`, applied by a
//!    real replica (so the server sees a register that keeps up and
//!    reports), acknowledged, and its bytes kept. `--stream FILE` keeps the
//!    stream in FILE, and reads it from there when FILE exists.
//! 2. The replica applying it: `apply_stream` (replica/examples), a program
//!    of the replica crate, runs the real device loop over the stream on a
//!    fresh SQLite file (WAL, `synchronous = FULL`, as the benchmarks'
//!    registers), one message a turn, each reported in an Up of its own,
//!    and then `Replica::receive` alone over the same stream on another
//!    fresh file; it prints the CPU of each. With `--before BIN` (the same
//!    example built from another commit), the two builds run in turn,
//!    `--rounds N` (3) times, and the figures are printed side by side with
//!    the ratio of their medians.
//!
//! Run on release builds:
//!
//!     export CARGO_TARGET_DIR=...
//!     cargo build --release -p magic_sync_replica --example apply_stream
//!     cargo run --release -p magic_sync_tests --bin bench_apply -- \
//!         --before /tmp/replica-before/target/release/examples/apply_stream
//!
//! The build measured as "this" is the `apply_stream` beside this program
//! (`examples/apply_stream` in its target directory), or `--this BIN`.

use std::path::{Path, PathBuf};
use std::process::Command;

use magic_sync_replica::queue;
use magic_sync_replica::{install, Received, Replica, Settings, Table, Tables};
use magic_sync_tests::add_products;
use magic_sync_tests::args::{arg, text_arg};
use magic_sync_tests::figures::quantile;
use magic_sync_tests::{Cluster, BROADCAST_SHOP};
use postgres::Client;
use rusqlite::Connection;
use uuid::Uuid;

/// What the issue asks of a register: CPU per message applied.
const TARGET_MS: f64 = 0.25;

/// The stream as `apply_stream` reads it.
struct Stream {
    me: Uuid,
    provisioning: Vec<Vec<u8>>,
    changes: Vec<Vec<u8>>,
}

impl Stream {
    fn write(&self, path: &Path) {
        let mut bytes = self.me.as_bytes().to_vec();
        bytes.extend((self.provisioning.len() as u32).to_le_bytes());
        for message in self.provisioning.iter().chain(&self.changes) {
            bytes.extend((message.len() as u32).to_le_bytes());
            bytes.extend(message);
        }
        std::fs::write(path, bytes).expect("the stream file");
    }

    fn sizes(&self) -> (usize, usize) {
        let total: usize = self.changes.iter().map(Vec::len).sum();
        (self.changes.len(), total / self.changes.len().max(1))
    }
}

/// A register taking its messages from the queue, keeping their bytes.
struct Capturing {
    replica: Replica,
    kept: Vec<Vec<u8>>,
}

impl Capturing {
    fn open(file: &Path, me: Uuid) -> Capturing {
        let tables = Tables::new(vec![Table::catalog("products")]);
        let mut conn = Connection::open(file).unwrap();
        conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA recursive_triggers = ON;")
            .unwrap();
        conn.execute_batch(magic_sync_tests::shop::REGISTER)
            .unwrap();
        install(&mut conn, &tables).unwrap();
        let replica = Replica::open(conn, tables, me, Settings::default()).unwrap();
        Capturing {
            replica,
            kept: Vec::new(),
        }
    }

    /// Takes, applies and acknowledges what waits, keeping each message;
    /// then reports, as a register does.
    fn take_all(&mut self, pg: &mut Client) -> usize {
        let mut taken = 0;
        while let Some((id, bytes)) = queue::next(pg, &self.replica).unwrap() {
            let received = self.replica.receive(&bytes).unwrap();
            assert!(
                matches!(received, Received::Applied { .. } | Received::Ended { .. }),
                "the stream's messages apply: {received:?}"
            );
            queue::ack(pg, &self.replica, &id).unwrap();
            self.kept.push(bytes);
            taken += 1;
        }
        queue::report(pg, &mut self.replica).unwrap();
        taken
    }
}

/// The stream, from a throwaway cluster.
fn capture(products: usize, changes: usize) -> Stream {
    let cluster = Cluster::start();
    let mut pg = cluster.database_with_extension("shop");
    pg.batch_execute(BROADCAST_SHOP).unwrap();
    add_products(&mut pg, products);
    let me = Uuid::new_v4();
    pg.execute("INSERT INTO shop.registers (id) VALUES ($1)", &[&me])
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut register = Capturing::open(&dir.path().join("capturing.db"), me);
    pg.batch_execute("CALL sync.relay()").unwrap();
    register.take_all(&mut pg);
    let provisioning = std::mem::take(&mut register.kept);
    let ids: Vec<Uuid> = pg
        .query("SELECT id FROM shop.products ORDER BY name", &[])
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    let update = pg
        .prepare(
            "UPDATE shop.products SET price_cents = price_cents + 1, updated_at = now() \
             WHERE id = $1",
        )
        .unwrap();
    for i in 0..changes {
        // Spread over the products, as writers by random key are.
        let id = ids[(i * 7919) % ids.len()];
        pg.execute(&update, &[&id]).unwrap();
        pg.batch_execute("CALL sync.relay()").unwrap();
        let taken = register.take_all(&mut pg);
        assert_eq!(taken, 1, "one message a change");
    }
    Stream {
        me,
        provisioning,
        changes: register.kept,
    }
}

/// One round of one build: what `apply_stream` printed.
#[derive(Clone, Copy, Debug)]
struct Round {
    messages: f64,
    /// The device loop: CPU (user + system), its system part; ms.
    cpu: f64,
    sys: f64,
    /// `Replica::receive` alone: CPU, its system part, wall; ms.
    receive_cpu: f64,
    receive_sys: f64,
    receive_wall: f64,
}

impl Round {
    fn parse(line: &str) -> Round {
        let words: Vec<&str> = line.split_whitespace().collect();
        let field = |name: &str| -> f64 {
            let at = words.iter().position(|w| *w == name).unwrap_or_else(|| {
                panic!("apply_stream printed no {name}: {line}");
            });
            words[at + 1].parse().unwrap()
        };
        let sys = field("sys_ms");
        let receive_sys = field("receive_sys_ms");
        Round {
            messages: field("messages"),
            cpu: field("user_ms") + sys,
            sys,
            receive_cpu: field("receive_user_ms") + receive_sys,
            receive_sys,
            receive_wall: field("receive_wall_ms"),
        }
    }

    /// The figures per message, in ms, in the order `FIGURES` names them.
    fn per_message(&self) -> [f64; 5] {
        let n = self.messages;
        [
            self.cpu / n,
            self.sys / n,
            self.receive_cpu / n,
            self.receive_sys / n,
            self.receive_wall / n,
        ]
    }
}

const FIGURES: [&str; 5] = [
    "device loop: CPU ms/msg",
    "  of it system",
    "receive alone: CPU ms/msg",
    "  of it system",
    "  wall ms/msg",
];

fn run_build(bin: &Path, stream: &Path) -> Round {
    let output = Command::new(bin)
        .arg(stream)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
    assert!(
        output.status.success(),
        "{} failed: {}",
        bin.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8(output.stdout).unwrap();
    Round::parse(text.lines().last().expect("a line of figures"))
}

/// `examples/apply_stream` in this program's target directory.
fn this_build() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().join("examples/apply_stream")
}

fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(|a, b| a.total_cmp(b));
    quantile(&samples, 0.5)
}

fn main() {
    let products: usize = arg("--products", 1000);
    let changes: usize = arg("--changes", 2000);
    let rounds: usize = arg("--rounds", 3);
    let this = text_arg("--this").map_or_else(this_build, PathBuf::from);
    let before = text_arg("--before").map(PathBuf::from);
    let scratch = tempfile::tempdir().unwrap();
    let stream_file =
        text_arg("--stream").map_or_else(|| scratch.path().join("stream.bin"), PathBuf::from);
    if !stream_file.exists() {
        let stream = capture(products, changes);
        let (count, mean) = stream.sizes();
        println!(
            "stream: {} provisioning messages, then {count} changes of one row \
             ({mean} bytes a message on average), from a real server",
            stream.provisioning.len()
        );
        stream.write(&stream_file);
    } else {
        println!("stream: read from {}", stream_file.display());
    }

    let mut builds: Vec<(&str, &Path)> = Vec::new();
    if let Some(before) = &before {
        builds.push(("before", before));
    }
    builds.push(("this", &this));
    let mut figures: Vec<Vec<Round>> = vec![Vec::new(); builds.len()];
    for round in 1..=rounds {
        for (b, (name, bin)) in builds.iter().enumerate() {
            let measured = run_build(bin, &stream_file);
            println!(
                "round {round}, {name}: the loop {:.3} ms CPU a message, receive alone {:.3} ms",
                measured.cpu / measured.messages,
                measured.receive_cpu / measured.messages
            );
            figures[b].push(measured);
        }
    }

    print!("\n{:<28}", "figure (median of rounds)");
    for (name, _) in &builds {
        print!("{name:>12}");
    }
    if builds.len() == 2 {
        print!("{:>10}", "ratio");
    }
    println!("{:>10}", "target");
    for (f, label) in FIGURES.iter().enumerate() {
        print!("{label:<28}");
        let medians: Vec<f64> = figures
            .iter()
            .map(|rounds| median(rounds.iter().map(|r| r.per_message()[f]).collect()))
            .collect();
        for m in &medians {
            print!("{m:>12.3}");
        }
        if medians.len() == 2 {
            print!("{:>9.2}x", medians[1] / medians[0]);
        }
        if f == 0 {
            print!("{:>10}", format!("{TARGET_MS}"));
        }
        println!();
    }
}

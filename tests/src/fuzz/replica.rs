//! The replica's half of the fuzzing (tests/fuzz_replica.rs over the
//! golden runs, tests/fuzz_server.rs over a real relay's messages): a
//! replica opened on a copy of its file as it stood before a message, fed
//! mutations of that message, each answer held to what it changed.
//!
//! Of every input: no panic; an answer of the replica's API (a `Received`,
//! or the one error a message may cause, a later protocol); a malformed
//! case named as the corpus of malformed messages names it; nothing changed
//! unless the answer says the message was applied (the gap, what was filed
//! and what was heard again change where the replica stands, never a row);
//! once applied, the file whole (`integrity_check`, `foreign_key_check`)
//! and the message the last applied. The bytes the replica reads in one
//! pass are read as prost reads them.

use std::collections::{BTreeMap, BTreeSet};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::Instant;

use magic_sync_replica::proto::wire::{to_replica::Body, ToReplica};
use magic_sync_replica::proto::PROTOCOL;
use magic_sync_replica::{check, Error, Received, Replica};
use prost::Message;
use rusqlite::Connection;
use tempfile::TempDir;

use super::{hex, Run};

/// Cases run against one state before the next: opening a replica costs
/// more than most cases.
const CASES_PER_STATE: u64 = 40;

/// A replica's file as it stood before a message, and that message.
pub struct State {
    pub file: PathBuf,
    pub next: Vec<u8>,
}

/// The states to start from, and every message of the runs they come of.
pub struct Corpus {
    dir: TempDir,
    pub states: Vec<State>,
    pub messages: Vec<Vec<u8>>,
}

impl Default for Corpus {
    fn default() -> Corpus {
        Corpus {
            dir: tempfile::tempdir().unwrap(),
            states: Vec::new(),
            messages: Vec::new(),
        }
    }
}

impl Corpus {
    pub fn new() -> Corpus {
        Corpus::default()
    }

    /// Keeps a copy of the replica's file as it stands, before `next` is
    /// delivered to it. The replica must be between transactions.
    pub fn before(&mut self, replica: &Replica, next: &[u8]) {
        let conn = replica.connection();
        // A database in WAL mode keeps commits in the log until a
        // checkpoint: the copy must hold them.
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .unwrap();
        let copy = self
            .dir
            .path()
            .join(format!("state-{}.db", self.states.len()));
        std::fs::copy(conn.path().expect("a file"), &copy).unwrap();
        self.states.push(State {
            file: copy,
            next: next.to_vec(),
        });
        self.messages.push(next.to_vec());
    }
}

/// The malformed cases the corpus of malformed messages names
/// (tests/golden/malformed.txt): every case a replica names.
pub fn malformed_cases() -> BTreeSet<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("golden/malformed.txt");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split('\t').nth(1))
        .filter_map(|v| v.strip_prefix("malformed ("))
        .map(|v| v.trim_end_matches(')').to_owned())
        .collect()
}

/// A replica opened on a copy of a state's file.
struct Scene {
    _dir: TempDir,
    replica: Replica,
    /// Whether it is still as the state left it.
    untouched: bool,
}

fn open_on(state: &State, open: &dyn Fn(Connection) -> Replica) -> Scene {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("replica.db");
    std::fs::copy(&state.file, &file).unwrap();
    let conn = Connection::open(&file).unwrap();
    conn.execute_batch("PRAGMA recursive_triggers = ON; PRAGMA foreign_keys = ON;")
        .unwrap();
    Scene {
        _dir: dir,
        replica: open(conn),
        untouched: true,
    }
}

/// Runs the cases `run` asks for over the corpus, a replica opened by
/// `open` on each state in turn; answers what the answers were.
pub fn fuzz(run: &Run, corpus: &Corpus, open: &dyn Fn(Connection) -> Replica) -> Tally {
    let cases = malformed_cases();
    let known = super::known_keys(&corpus.messages, &[]);
    let started = Instant::now();
    let mut tally = Tally::default();
    let mut scene: Option<(usize, Scene)> = None;
    for case in run.numbers() {
        let at = run.replay(case);
        let index = ((case / CASES_PER_STATE) as usize * 7919) % corpus.states.len();
        let state = &corpus.states[index];
        if !matches!(&scene, Some((i, s)) if *i == index && s.untouched) {
            scene = Some((index, open_on(state, open)));
        }
        let bytes = run
            .mutator(case)
            .knowing(&known)
            .to_replica(&state.next, &corpus.messages);
        let (_, s) = scene.as_mut().unwrap();
        tally.count(run_case(&cases, s, &bytes, &at));
        if case % 10_000 == 9_999 {
            eprintln!("{} cases, {:?}", case + 1, started.elapsed());
        }
    }
    let ran: u64 = tally.0.values().sum();
    eprintln!("{ran} cases in {:?}:", started.elapsed());
    for (name, n) in &tally.0 {
        eprintln!("  {n:>8}  {name}");
    }
    tally
}

impl Tally {
    /// How many answers were of this name.
    pub fn of(&self, name: &str) -> u64 {
        self.0.get(name).copied().unwrap_or(0)
    }

    /// How many kinds of malformed message were answered.
    pub fn malformed_kinds(&self) -> usize {
        self.0.keys().filter(|k| k.starts_with("malformed")).count()
    }
}

/// Everything the database holds, table by table, as text: the device's
/// tables apart from the engine's, and the schema.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Contents {
    rows: BTreeMap<String, Vec<String>>,
    engine: BTreeMap<String, Vec<String>>,
    schema: Vec<String>,
}

fn contents(conn: &Connection) -> Contents {
    let schema = column_text(
        conn,
        "SELECT type || ' ' || name || ' ' || coalesce(sql, '') FROM sqlite_schema ORDER BY 1",
    );
    let names = column_text(
        conn,
        "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name",
    );
    let (mut rows, mut engine) = (BTreeMap::new(), BTreeMap::new());
    for name in names {
        let held = rows_of(conn, &name);
        if name.starts_with("sync_") {
            engine.insert(name, held);
        } else {
            rows.insert(name, held);
        }
    }
    Contents {
        rows,
        engine,
        schema,
    }
}

fn column_text(conn: &Connection, sql: &str) -> Vec<String> {
    let mut statement = conn.prepare(sql).unwrap();
    let rows = statement.query_map([], |r| r.get::<_, String>(0)).unwrap();
    rows.map(Result::unwrap).collect()
}

fn rows_of(conn: &Connection, table: &str) -> Vec<String> {
    let mut statement = conn.prepare(&format!("SELECT * FROM \"{table}\"")).unwrap();
    let width = statement.column_count();
    let mut rows: Vec<String> = statement
        .query_map([], |row| {
            Ok((0..width)
                .map(|i| format!("{:?}", row.get_ref(i).unwrap()))
                .collect::<Vec<_>>()
                .join(","))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    rows.sort();
    rows
}

/// The file is whole and every foreign key holds.
fn assert_whole(conn: &Connection, at: &str) {
    let integrity = column_text(conn, "PRAGMA integrity_check");
    assert_eq!(integrity, ["ok"], "{at}: integrity_check");
    let mut statement = conn.prepare("PRAGMA foreign_key_check").unwrap();
    let broken: Vec<String> = statement
        .query_map([], |r| {
            Ok(format!("{:?} {:?}", r.get_ref(0)?, r.get_ref(1)?))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(broken.is_empty(), "{at}: foreign_key_check: {broken:?}");
}

/// What the answers were, by name, for the report.
#[derive(Default, Debug)]
pub struct Tally(pub BTreeMap<String, u64>);

impl Tally {
    fn count(&mut self, name: String) {
        *self.0.entry(name).or_default() += 1;
    }
}

fn answer_name(received: &Result<Received, Error>) -> String {
    match received {
        Ok(Received::Applied { .. }) => "applied".into(),
        Ok(Received::Ended { .. }) => "ended".into(),
        Ok(Received::Filed { .. }) => "filed".into(),
        Ok(Received::Already { .. }) => "already".into(),
        Ok(Received::Gap { .. }) => "gap".into(),
        Ok(Received::Malformed(m)) => format!("malformed ({})", m.case),
        Err(Error::LaterProtocol { .. }) => "later protocol".into(),
        Err(e) => format!("error: {e}"),
    }
}

/// One case: the input made, received under `catch_unwind`, and its answer
/// held to what it changed.
fn run_case(cases: &BTreeSet<String>, scene: &mut Scene, bytes: &[u8], at: &str) -> String {
    assert_read_as_prost_reads(bytes, at);
    let before = contents(scene.replica.connection());
    let applied_before = scene.replica.last_applied().unwrap();
    let received = catch_unwind(AssertUnwindSafe(|| scene.replica.receive(bytes)))
        .unwrap_or_else(|_| panic!("{at}: receive panicked on {}", hex(bytes)));
    let conn = scene.replica.connection();
    let after = contents(conn);
    let applied_after = scene.replica.last_applied().unwrap();
    let name = answer_name(&received);
    let what = format!("{at}: answered {name} to {}", hex(bytes));
    let decoded = ToReplica::decode(bytes).ok();
    match &received {
        Ok(Received::Applied { .. } | Received::Ended { .. }) => {
            assert_whole(conn, &what);
            let head = chained_head(decoded.as_ref())
                .unwrap_or_else(|| panic!("{what}: applied no Down or EndSnapshot"));
            assert_eq!(
                (applied_after.epoch.as_str(), applied_after.sequence),
                (head.0.as_str(), head.1),
                "{what}: the message is the last applied"
            );
            assert_eq!(applied_after.gap, 0, "{what}: applied with a gap");
        }
        Ok(Received::Filed { uploads }) => {
            assert_eq!(before.rows, after.rows, "{what}: a Filed changed a row");
            assert_eq!(
                applied_before, applied_after,
                "{what}: a Filed moved the chain"
            );
            assert!(
                matches!(decoded.and_then(|m| m.body), Some(Body::Filed(f)) if &f.uploads == uploads),
                "{what}"
            );
        }
        Ok(Received::Already { .. }) => {
            assert_eq!(
                before.rows, after.rows,
                "{what}: a message already applied changed a row"
            );
            assert_eq!(applied_before, applied_after, "{what}: moved the chain");
        }
        Ok(Received::Gap { newest }) => {
            assert_eq!(before.rows, after.rows, "{what}: a gap changed a row");
            let widened = applied_before.gap.max(*newest);
            assert_eq!(applied_after.gap, widened, "{what}: the gap kept");
            assert_eq!(
                (&applied_before.epoch, applied_before.sequence),
                (&applied_after.epoch, applied_after.sequence),
                "{what}: a gap moved the chain"
            );
        }
        Ok(Received::Malformed(m)) => {
            assert_eq!(
                before, after,
                "{what}: a malformed message changed the database"
            );
            assert!(
                cases.contains(m.case),
                "{what}: the case `{}` is not in tests/golden/malformed.txt",
                m.case
            );
        }
        Err(Error::LaterProtocol { theirs, .. }) => {
            assert_eq!(
                before, after,
                "{what}: a later protocol changed the database"
            );
            assert!(*theirs > PROTOCOL, "{what}");
        }
        Err(e) => panic!("{what}: a message may fail only for a later protocol, and failed: {e}"),
    }
    if before != after {
        scene.untouched = false;
    }
    name
}

/// The epoch and sequence of a chained message.
fn chained_head(message: Option<&ToReplica>) -> Option<(String, u64)> {
    match message?.body.as_ref()? {
        Body::Down(d) => Some((d.epoch.clone(), d.sequence)),
        Body::EndSnapshot(e) => Some((e.epoch.clone(), e.sequence)),
        Body::Filed(_) => None,
    }
}

/// The replica's own reading of the bytes is prost's, message for message.
fn assert_read_as_prost_reads(bytes: &[u8], at: &str) {
    let ours = check::decode(bytes).ok();
    let prosts = ToReplica::decode(bytes).ok();
    assert_eq!(
        ours,
        prosts,
        "{at}: read otherwise than prost reads {}",
        hex(bytes)
    );
}

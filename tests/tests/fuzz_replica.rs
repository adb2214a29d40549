//! Fuzzing the replica's `receive` (issue 12, "Crash loops and bad bytes"):
//! a real replica on a SQLite file on disk, set at each step of the golden
//! runs (tests/golden/to_replica.txt, malformed.txt), fed mutations of the
//! messages of those runs (tests/src/fuzz.rs) and arbitrary bytes.
//!
//! Of every input: no panic; an answer of the replica's API (a `Received`,
//! or the one error a message may cause, a later protocol); a malformed
//! case named as the corpus of malformed messages names it; nothing changed
//! unless the answer says the message was applied (the gap, what was filed
//! and what was heard again change where the replica stands, never a row);
//! once applied, the file whole (`integrity_check`, `foreign_key_check`)
//! and the message the last applied. The bytes the replica reads in one
//! pass are read as prost reads them.
//!
//! CI runs 2,000 cases; `MAGIC_SYNC_FUZZ_CASES`, `MAGIC_SYNC_FUZZ_SEED`
//! (a number or `random`) and `MAGIC_SYNC_FUZZ_CASE` (one case alone) run
//! others (docs/src/testing.md).

#[path = "../../replica/tests/golden_shared/mod.rs"]
mod golden_shared;

use std::collections::{BTreeMap, BTreeSet};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::Instant;

use golden_shared::{tables, Run as GoldenRun, LOST, ME, WRITES};
use magic_sync_replica::proto::wire::{to_replica::Body, ToReplica};
use magic_sync_replica::proto::PROTOCOL;
use magic_sync_replica::{check, Error, Received, Replica, Settings};
use magic_sync_tests::fuzz::{hex, unhex, Run};
use prost::Message;
use rusqlite::Connection;
use tempfile::TempDir;

/// The cases CI runs: a few seconds.
const CI_CASES: u64 = 2_000;

/// Cases run against one state before the next: opening a replica costs
/// more than most cases.
const CASES_PER_STATE: u64 = 40;

/// A step of a golden run: the replica's file as it stood before the step,
/// and the message the step delivered.
struct State {
    file: PathBuf,
    next: Vec<u8>,
}

/// Every step of both golden runs, and every message in them.
struct Corpus {
    _dir: TempDir,
    states: Vec<State>,
    messages: Vec<Vec<u8>>,
    /// The malformed cases the corpus of malformed messages names.
    cases: BTreeSet<String>,
}

fn golden(file: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("golden")
        .join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"))
}

/// The lines of a golden file that deliver or write: (verdict, bytes).
fn steps(text: &str) -> Vec<(String, Vec<u8>)> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty() && !l.starts_with("holds\t"))
        .map(|l| {
            let fields: Vec<&str> = l.splitn(3, '\t').collect();
            (fields[1].to_owned(), unhex(fields[2]))
        })
        .collect()
}

impl Corpus {
    fn gather() -> Corpus {
        let dir = tempfile::tempdir().unwrap();
        let mut corpus = Corpus {
            _dir: dir,
            states: Vec::new(),
            messages: Vec::new(),
            cases: BTreeSet::new(),
        };
        for file in ["to_replica.txt", "malformed.txt"] {
            corpus.replay(file);
        }
        corpus
    }

    /// Replays a golden run, keeping the file as it stood before each
    /// message delivered.
    fn replay(&mut self, file: &str) {
        let mut run = GoldenRun::new();
        for (verdict, bytes) in steps(&golden(file)) {
            if let Some(case) = verdict.strip_prefix("malformed (") {
                self.cases.insert(case.trim_end_matches(')').to_owned());
            }
            match verdict.as_str() {
                WRITES => run.write(&bytes),
                LOST => self.messages.push(bytes),
                _ => {
                    let copy = self
                        ._dir
                        .path()
                        .join(format!("state-{}.db", self.states.len()));
                    let path = run.replica.connection().path().expect("a file").to_owned();
                    std::fs::copy(path, &copy).unwrap();
                    self.states.push(State {
                        file: copy,
                        next: bytes.clone(),
                    });
                    run.deliver(&bytes);
                    self.messages.push(bytes);
                }
            }
        }
    }
}

/// A replica opened on a copy of a state's file.
struct Scene {
    _dir: TempDir,
    replica: Replica,
    /// Whether it is still as the state left it.
    untouched: bool,
}

fn open_on(state: &State) -> Scene {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("replica.db");
    std::fs::copy(&state.file, &file).unwrap();
    let conn = Connection::open(&file).unwrap();
    conn.execute_batch("PRAGMA recursive_triggers = ON; PRAGMA foreign_keys = ON;")
        .unwrap();
    let me = uuid::Uuid::parse_str(ME).unwrap();
    let replica = Replica::open(conn, tables(), me, Settings::default()).unwrap();
    Scene {
        _dir: dir,
        replica,
        untouched: true,
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
#[derive(Default)]
struct Tally(BTreeMap<String, u64>);

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
fn run_case(corpus: &Corpus, scene: &mut Scene, bytes: &[u8], at: &str) -> String {
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
                corpus.cases.contains(m.case),
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

#[test]
fn receive_answers_every_mutated_message_by_name_and_applies_it_whole_or_not_at_all() {
    let run = Run::from_env(CI_CASES);
    let corpus = Corpus::gather();
    assert!(
        corpus.states.len() > 40 && corpus.cases.len() > 20,
        "the golden runs gave {} states and {} malformed cases",
        corpus.states.len(),
        corpus.cases.len()
    );
    eprintln!(
        "fuzzing the replica's receive: seed {}, {} cases",
        run.seed, run.cases
    );
    let started = Instant::now();
    let mut tally = Tally::default();
    let mut scene: Option<(usize, Scene)> = None;
    for case in run.numbers() {
        let at = run.replay(case);
        let index = ((case / CASES_PER_STATE) as usize * 7919) % corpus.states.len();
        let state = &corpus.states[index];
        if !matches!(&scene, Some((i, s)) if *i == index && s.untouched) {
            scene = Some((index, open_on(state)));
        }
        let mut mutator = run.mutator(case);
        let bytes = mutator.to_replica(&state.next, &corpus.messages);
        let (_, s) = scene.as_mut().unwrap();
        tally.count(run_case(&corpus, s, &bytes, &at));
        if case % 10_000 == 9_999 {
            eprintln!("{} cases, {:?}", case + 1, started.elapsed());
        }
    }
    eprintln!("{} cases in {:?}:", run.cases, started.elapsed());
    for (name, n) in &tally.0 {
        eprintln!("  {n:>8}  {name}");
    }
    if run.only.is_none() && run.cases >= CI_CASES {
        // The mutations reach past the checks: some apply, some are each
        // kind of malformed.
        let applied = tally.0.get("applied").copied().unwrap_or(0);
        assert!(
            applied > 0,
            "no mutated message applied: the mutations never pass the checks"
        );
        let kinds = tally
            .0
            .keys()
            .filter(|k| k.starts_with("malformed"))
            .count();
        assert!(kinds > 10, "only {kinds} kinds of malformed message");
    }
}

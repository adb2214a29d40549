//! Fuzzing the replica's `receive` (issue 12, "Crash loops and bad bytes"):
//! a real replica on a SQLite file on disk, set at each step of the golden
//! runs (tests/golden/to_replica.txt, malformed.txt), fed mutations of the
//! messages of those runs (tests/src/fuzz/mod.rs) and arbitrary bytes, each
//! answer held to what it changed (tests/src/fuzz/replica.rs).
//!
//! CI runs 2,000 cases; `MAGIC_SYNC_FUZZ_CASES`, `MAGIC_SYNC_FUZZ_SEED`
//! (a number or `random`) and `MAGIC_SYNC_FUZZ_CASE` (one case alone) run
//! others (docs/src/testing.md).

#[path = "../../replica/tests/golden_shared/mod.rs"]
mod golden_shared;

use std::path::Path;

use golden_shared::{settings, tables, Run as GoldenRun, LOST, ME, WRITES};
use magic_sync_replica::Replica;
use magic_sync_tests::fuzz::replica::{fuzz, malformed_cases, Corpus};
use magic_sync_tests::fuzz::{unhex, Run};

/// The cases CI runs: a few seconds.
const CI_CASES: u64 = 2_000;

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

/// Replays a golden run, keeping the file as it stood before each message
/// delivered.
fn replay(corpus: &mut Corpus, file: &str) {
    let mut run = GoldenRun::new();
    for (verdict, bytes) in steps(&golden(file)) {
        match verdict.as_str() {
            WRITES => run.write(&bytes),
            LOST => corpus.messages.push(bytes),
            _ => {
                corpus.before(&run.replica, &bytes);
                run.deliver(&bytes);
            }
        }
    }
}

fn open(conn: rusqlite::Connection) -> Replica {
    let me = uuid::Uuid::parse_str(ME).unwrap();
    Replica::open(conn, tables(), me, settings()).unwrap()
}

#[test]
fn receive_answers_every_mutated_message_by_name_and_applies_it_whole_or_not_at_all() {
    let run = Run::from_env(CI_CASES);
    let mut corpus = Corpus::new();
    replay(&mut corpus, "to_replica.txt");
    replay(&mut corpus, "malformed.txt");
    assert!(corpus.states.len() > 40, "{} states", corpus.states.len());
    assert!(malformed_cases().len() > 20);
    eprintln!(
        "fuzzing the replica's receive: seed {}, {} cases",
        run.seed, run.cases
    );
    let tally = fuzz(&run, &corpus, &open);
    if run.only.is_none() && run.cases >= CI_CASES {
        // The mutations reach past the checks: some apply, many kinds are
        // malformed.
        assert!(tally.of("applied") > 0, "none applied: {tally:?}");
        assert!(tally.malformed_kinds() > 10, "{tally:?}");
    }
}

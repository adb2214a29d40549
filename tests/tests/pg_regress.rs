//! The SQL surface as pg_regress cases (pg_regress/sql and expected), and
//! the engine under concurrent sessions as isolation specs
//! (pg_regress/isolation/specs and expected, PostgreSQL's isolation
//! tester), each run against a throwaway cluster with the extension
//! installed. `MAGIC_SYNC_BLESS=1` writes what they answered as expected.

use std::path::{Path, PathBuf};
use std::process::Command;

use magic_sync_tests::cluster::{bindir, pkglibdir};
use magic_sync_tests::Cluster;

/// One of PostgreSQL's regression drivers, over the cases in `root`.
struct Suite {
    /// The driver, under pgxs/src/test.
    driver: &'static str,
    root: PathBuf,
    /// Where the cases are, under `root`, and how their names end.
    cases: &'static str,
    suffix: &'static str,
}

impl Suite {
    fn cases(&self) -> Vec<String> {
        let mut cases: Vec<String> = std::fs::read_dir(self.root.join(self.cases))
            .unwrap_or_else(|e| panic!("{}/{}: {e}", self.root.display(), self.cases))
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                e.file_name()
                    .to_str()?
                    .strip_suffix(self.suffix)
                    .map(str::to_owned)
            })
            .collect();
        cases.sort();
        assert!(!cases.is_empty(), "no cases in {}", self.cases);
        cases
    }

    /// Runs every case; panics with the differences, or, blessing, writes
    /// what each answered as its expected output.
    fn run(&self) {
        let cases = self.cases();
        let bless = std::env::var_os("MAGIC_SYNC_BLESS").is_some();
        if bless {
            // The drivers stop at a case with no expected output: give it one.
            for case in &cases {
                let expected = self.root.join(format!("expected/{case}.out"));
                if !expected.exists() {
                    std::fs::write(expected, "").expect("an empty expected output");
                }
            }
        }
        let cluster = Cluster::start();
        let out = tempfile::tempdir().expect("an output directory");
        let status = Command::new(pkglibdir().join("pgxs/src/test").join(self.driver))
            .arg(format!("--inputdir={}", self.root.display()))
            .arg(format!("--outputdir={}", out.path().display()))
            .arg(format!("--bindir={}", bindir().display()))
            .arg(format!("--host={}", cluster.socket_dir().display()))
            .arg(format!("--port={}", cluster.port()))
            .args(["--user=postgres", "--dbname=magic_sync_regress"])
            .args(&cases)
            .status()
            .expect("runs the driver (postgresql-server-dev-15 installs it)");
        if status.success() {
            return;
        }
        let diffs =
            std::fs::read_to_string(out.path().join("regression.diffs")).unwrap_or_default();
        if bless {
            for case in &cases {
                let result = out.path().join(format!("results/{case}.out"));
                std::fs::copy(result, self.root.join(format!("expected/{case}.out")))
                    .expect("blesses");
            }
            return;
        }
        panic!("the cases differ from their expected output:\n{diffs}");
    }
}

fn pg_regress_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../pg_regress")
}

#[test]
fn the_sql_surface_answers_as_its_pg_regress_cases_expect() {
    Suite {
        driver: "regress/pg_regress",
        root: pg_regress_dir(),
        cases: "sql",
        suffix: ".sql",
    }
    .run();
}

#[test]
fn concurrent_sessions_interleave_as_the_isolation_specs_expect() {
    Suite {
        driver: "isolation/pg_isolation_regress",
        root: pg_regress_dir().join("isolation"),
        cases: "specs",
        suffix: ".spec",
    }
    .run();
}

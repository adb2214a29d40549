//! The SQL surface as pg_regress cases (pg_regress/sql and expected), run
//! against a throwaway cluster with the extension installed.

use std::path::Path;
use std::process::Command;

use magic_sync_tests::cluster::{bindir, pkglibdir};
use magic_sync_tests::Cluster;

#[test]
fn the_sql_surface_answers_as_its_pg_regress_cases_expect() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../pg_regress");
    let mut cases: Vec<String> = std::fs::read_dir(root.join("sql"))
        .expect("pg_regress/sql")
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            e.file_name()
                .to_str()?
                .strip_suffix(".sql")
                .map(str::to_owned)
        })
        .collect();
    cases.sort();
    assert!(!cases.is_empty(), "no pg_regress cases found");

    let bless = std::env::var_os("MAGIC_SYNC_BLESS").is_some();
    if bless {
        // pg_regress stops at a case with no expected output: give it one.
        for case in &cases {
            let expected = root.join(format!("expected/{case}.out"));
            if !expected.exists() {
                std::fs::write(expected, "").expect("an empty expected output");
            }
        }
    }
    let cluster = Cluster::start();
    let out = tempfile::tempdir().expect("an output directory");
    let status = Command::new(pkglibdir().join("pgxs/src/test/regress/pg_regress"))
        .arg(format!("--inputdir={}", root.display()))
        .arg(format!("--outputdir={}", out.path().display()))
        .arg(format!("--bindir={}", bindir().display()))
        .arg(format!("--host={}", cluster.socket_dir().display()))
        .arg(format!("--port={}", cluster.port()))
        .args(["--user=postgres", "--dbname=magic_sync_regress"])
        .args(&cases)
        .status()
        .expect("runs pg_regress (postgresql-server-dev-15 installs it)");
    if !status.success() {
        let diffs =
            std::fs::read_to_string(out.path().join("regression.diffs")).unwrap_or_default();
        if bless {
            for case in &cases {
                let result = out.path().join(format!("results/{case}.out"));
                std::fs::copy(result, root.join(format!("expected/{case}.out"))).expect("blesses");
            }
            return;
        }
        panic!("pg_regress cases differ from their expected output:\n{diffs}");
    }
}

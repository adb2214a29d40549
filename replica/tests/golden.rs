//! Replays the golden files (tests/golden/*.txt) against a real replica:
//! every verdict and every holding must come out as the file says.

mod golden_shared;

use golden_shared::*;

fn replay(file: &str) -> usize {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/golden")
        .join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let mut run = Run::new();
    let mut lines = 0;
    for (number, line) in text.lines().enumerate() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        lines += 1;
        if let Some(holding) = line.strip_prefix("holds\t") {
            let expected: serde_json::Value = serde_json::from_str(holding).unwrap();
            let held: serde_json::Value = serde_json::from_str(&run.holds()).unwrap();
            assert_eq!(
                held,
                expected,
                "{file}:{}: what the replica holds",
                number + 1
            );
            continue;
        }
        let fields: Vec<&str> = line.splitn(3, '\t').collect();
        assert_eq!(fields.len(), 3, "{file}:{}: not three fields", number + 1);
        let (name, verdict, data) = (fields[0], fields[1], fields[2]);
        match (name, verdict) {
            (_, LOST) => {}
            (_, WRITES) => run.write(&unhex(data)),
            (_, expected) => {
                let got = run.deliver(&unhex(data));
                assert_eq!(got, expected, "{file}:{}: {name}", number + 1);
            }
        }
    }
    lines
}

#[test]
fn to_replica_replays_as_written() {
    assert!(replay("to_replica.txt") > 20);
}

#[test]
fn malformed_replays_as_written() {
    assert!(replay("malformed.txt") > 25);
}

//! Replays the golden vectors of what replicas send up against a real
//! server: tests/golden/to_server.txt and to_server_verdicts.txt, written
//! by `cargo run -p magic_sync_tests --example golden_to_server`. Each file
//! is played on a database of its own, from its scene: every message the
//! server sent is recorded as the relay records it, and every Up is filed
//! by `sync.receive`, whose verdict must be the line's.

mod common;
#[path = "common/golden_to_server.rs"]
mod golden;

use std::path::Path;

use golden::{kind, Kind};
use magic_sync_tests::Cluster;

fn replay(cluster: &Cluster, file: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("golden")
        .join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let lines = golden::read(&text);
    assert!(lines.len() > 3, "{file} has its lines");
    let database = file.trim_end_matches(".txt");
    let mut pg = cluster.database_with_extension(database);
    golden::set_the_scene(&mut pg, &golden::replicas_of(&lines));
    let mut replica = None;
    let mut differ = Vec::new();
    let mut ups = 0;
    for line in &lines {
        match kind(line) {
            Kind::Replica(id) => replica = Some(id),
            Kind::Sent { recorded, message } => {
                if recorded {
                    golden::record_sent(&mut pg, replica.expect("a replica line first"), &message);
                }
            }
            Kind::Up { verdict, bytes } => {
                ups += 1;
                let got = golden::receive(&mut pg, replica.expect("a replica line first"), &bytes);
                if got != verdict {
                    differ.push(format!(
                        "{}:\n  expected {verdict}\n  got      {got}",
                        line.name
                    ));
                }
            }
        }
    }
    assert!(ups > 0, "{file} has Ups");
    assert!(
        differ.is_empty(),
        "{file}: the server makes otherwise of\n{}",
        differ.join("\n")
    );
}

#[test]
fn the_server_makes_of_what_a_replica_sends_up_what_to_server_txt_says() {
    let cluster = Cluster::start();
    replay(&cluster, "to_server.txt");
}

#[test]
fn the_server_makes_of_each_upload_what_to_server_verdicts_txt_says() {
    let cluster = Cluster::start();
    replay(&cluster, "to_server_verdicts.txt");
}

//! The command line for people who look after devices.

mod common;

use std::process::Command;

use common::*;

fn run(args: &[&str]) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_magic-sync-replica"))
        .args(args)
        .arg("--json")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn it_shows_applies_and_writes_the_next_up_from_what_the_database_recorded() {
    let (shop, mut replica, mut server) = provisioned();
    write_receipt(replica.connection(), &receipt(1), 1, 3);
    say(&mut replica);
    drop(replica);
    let db = shop.path();
    let db = db.to_str().unwrap();

    let shown = run(&["show", db]);
    assert_eq!(shown["last_applied"]["sequence"], server.sequence);
    assert_eq!(shown["holds"]["products"]["rows"], 2);
    assert_eq!(shown["backlog"][0]["table"], "receipts");
    assert_eq!(shown["backlog"][0]["unfiled"], 1);

    let message = shop.dir.path().join("message.bin");
    std::fs::write(
        &message,
        server.down(vec![part("products").product(3, "rye", 2)]),
    )
    .unwrap();
    let applied = run(&["apply", db, message.to_str().unwrap()]);
    assert_eq!(applied["received"]["applied"]["products"], 1);

    let out = shop.dir.path().join("up.bin");
    let written = run(&["up", db, out.to_str().unwrap()]);
    assert_eq!(written["up"]["sequence"], server.sequence);
    assert!(std::fs::metadata(&out).unwrap().len() > 0);
}

//! A register anyone can run without writing Rust: `magic-sync-replica
//! init` and `magic-sync-replica run --ws`, the replica's own binary,
//! against the gateway's. Ctrl-C stops it at a message boundary, and what
//! it wrote is filed once.
//!
//! The replica's binary is the one `cargo test --workspace` builds beside
//! the gateway's (with the workspace's features, `ws` among them); run
//! alone, build it first: `cargo build -p magic_sync_replica --features ws
//! --bin magic-sync-replica`.

mod help;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc::channel;

use help::{replica_binary, Gateway, Shop, DECLARATION};

#[test]
fn a_register_brought_up_with_init_and_run_keeps_the_catalog_and_files_its_receipts_until_ctrl_c() {
    let cli = replica_binary();
    let mut shop = Shop::open();
    let gateway = Gateway::start(&shop, &[]);
    let me = shop.add_register("R");
    let dir = tempfile::tempdir().unwrap();
    let (declaration, credential, db) = (
        dir.path().join("shop.json"),
        dir.path().join("register.credential"),
        dir.path().join("register.db"),
    );
    std::fs::write(&declaration, DECLARATION).unwrap();
    std::fs::write(&credential, gateway.issue(me)).unwrap();
    shop.add_product("Tea", 250);

    let init = Command::new(&cli)
        .arg("init")
        .args([&db, &declaration])
        .arg(me.to_string())
        .output()
        .unwrap();
    assert!(
        init.status.success(),
        "{}",
        String::from_utf8_lossy(&init.stderr)
    );
    let mut run = Command::new(&cli)
        .arg("run")
        .arg(&db)
        .args(["--ws", &gateway.url(), "--credential"])
        .arg(&credential)
        .arg("--json")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let (tell, lines) = channel();
    let stdout = run.stdout.take().unwrap();
    let reading = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let _ = tell.send(line.unwrap());
        }
    });

    help::wait_until("the register to hold Tea", || {
        help::names_held(&db) == ["Tea"]
    });
    let receipt = help::sell(&db, me, 1234);
    shop.add_product("Scones", 400);
    help::wait_until("the register to hold Scones", || {
        help::names_held(&db) == ["Scones", "Tea"]
    });
    help::wait_until("the receipt filed", || help::unfiled(&db) == 0);
    assert_eq!(shop.receipts(), [(receipt, me, 1234)]);

    let stopped = Command::new("kill")
        .args(["-INT", &run.id().to_string()])
        .status()
        .unwrap();
    assert!(stopped.success());
    assert!(run.wait().unwrap().success(), "Ctrl-C ends it in success");
    reading.join().unwrap();
    let said: Vec<String> = lines.try_iter().collect();
    let statuses: Vec<serde_json::Value> = said
        .iter()
        .take_while(|line| line.starts_with('{') && line.ends_with('}'))
        .map(|line| serde_json::from_str(line).expect("one JSON object a line"))
        .collect();
    let kinds: Vec<&str> = statuses
        .iter()
        .filter_map(|s| s["status"].as_str())
        .collect();
    assert_eq!(kinds.first(), Some(&"connected"), "{said:?}");
    assert!(kinds.contains(&"applied"), "{said:?}");
    assert_eq!(kinds.last(), Some(&"stopped"), "{said:?}");
    let answer: serde_json::Value =
        serde_json::from_str(&said[statuses.len()..].join("\n")).expect("the answer, last");
    assert!(answer["stopped"]["applied"].as_u64() >= Some(3), "{answer}");
    assert_eq!(shop.receipts(), [(receipt, me, 1234)], "filed once");
}

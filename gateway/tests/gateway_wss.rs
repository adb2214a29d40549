//! Devices reach the gateway over `wss://`, through a proxy that
//! terminates TLS in front of it (help/tls.rs: tokio-rustls on a
//! certificate and an authority made for the test), as
//! docs/src/gateway.md ("TLS: behind a proxy") sets it up with nginx.
//!
//! The command line's register is the replica's binary, built beside the
//! gateway's by `cargo test --workspace`; run alone, build it first:
//! `cargo build -p magic_sync_replica --features ws --bin magic-sync-replica`.

mod help;
#[path = "help/tls.rs"]
mod tls;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc::channel;
use std::time::Duration;

use help::{replica_binary, Gateway, Register, Shop, DECLARATION};
use magic_sync_replica::transport::ws::{Ws, WsSettings};
use magic_sync_replica::transport::Status;
use magic_sync_replica::Error;
use tls::{Authority, TlsProxy};

#[test]
fn a_register_run_over_wss_with_the_shops_ca_given_is_provisioned_and_its_receipt_filed_once() {
    let cli = replica_binary();
    let mut shop = Shop::open();
    let gateway = Gateway::start(&shop, &[]);
    let authority = Authority::new("the shop's own CA");
    let proxy = TlsProxy::to(gateway.address, &authority);
    let me = shop.add_register("R");
    let dir = tempfile::tempdir().unwrap();
    let (declaration, credential, db) = (
        dir.path().join("shop.json"),
        dir.path().join("register.credential"),
        dir.path().join("register.db"),
    );
    let ca = tls::ca_file(dir.path(), &authority, "shop-ca.pem");
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
    // A receipt sold before the register ever reached the head office.
    let receipt = help::sell(&db, me, 1234);
    let mut run = Command::new(&cli)
        .arg("run")
        .arg(&db)
        .args(["--ws", &proxy.url(), "--credential"])
        .arg(&credential)
        .arg("--ca")
        .arg(&ca)
        .arg("--json")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
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
        if let Some(ended) = run.try_wait().unwrap() {
            let mut said = String::new();
            std::io::Read::read_to_string(&mut run.stderr.take().unwrap(), &mut said).unwrap();
            panic!("`run` ended ({ended}): {said}");
        }
        help::names_held(&db) == ["Tea"]
    });
    help::wait_until("the receipt filed", || help::unfiled(&db) == 0);
    shop.add_product("Scones", 400);
    help::wait_until("the register to hold Scones", || {
        help::names_held(&db) == ["Scones", "Tea"]
    });
    assert_eq!(shop.receipts(), [(receipt, me, 1234)], "filed once");
    assert!(proxy.carried() >= 1, "the link went through the proxy");
    assert_eq!(proxy.failed_handshakes(), 0);

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
    assert!(!kinds.contains(&"disconnected"), "{said:?}");
    assert_eq!(shop.receipts(), [(receipt, me, 1234)], "filed once");
}

#[test]
fn a_register_over_wss_without_the_shops_ca_is_refused_naming_the_certificate_and_nothing_is_applied(
) {
    let mut shop = Shop::open();
    let gateway = Gateway::start(&shop, &[]);
    let authority = Authority::new("the shop's own CA");
    let proxy = TlsProxy::to(gateway.address, &authority);
    let me = shop.add_register("R");
    shop.add_product("Tea", 250);
    // A receipt the register holds, to go up once it connects.
    drop(help::open_register(&shop.file_of(me), me));
    help::sell(&shop.file_of(me), me, 1234);

    let url = proxy.url();
    let settings = WsSettings::new(url.clone(), gateway.issue(me));
    let mut register = Register::with_transport(&shop, me, move |replica| {
        Ws::new(settings, replica).unwrap()
    });
    let mut refusals = Vec::new();
    while refusals.len() < 2 {
        register.expect("a refusal of the certificate", |status| {
            assert!(
                !matches!(status, Status::Connected | Status::Applied(_)),
                "connected with a certificate it does not trust: {status}"
            );
            match status {
                Status::Disconnected {
                    error: Error::TransportRefused(why),
                    ..
                } => {
                    refusals.push(why.clone());
                    true
                }
                _ => false,
            }
        });
    }
    eprintln!("the device's status: {}", register.history().join("\n"));
    // Refused for good each time, and tried again all the same.
    for why in &refusals {
        assert!(why.contains(&url), "the refusal names the URL: {why}");
        assert!(
            why.contains("certificate does not verify") && why.contains("UnknownIssuer"),
            "the refusal names the certificate's problem: {why}"
        );
        assert!(why.contains("--ca"), "the refusal says what to do: {why}");
    }
    std::thread::sleep(Duration::from_millis(500));
    assert!(register.names_held().is_empty(), "nothing applied");
    assert_eq!(register.unfiled(), 1, "the receipt waits on the register");
    assert!(shop.receipts().is_empty(), "nothing filed");
    assert_eq!(proxy.carried(), 0, "nothing reached the gateway");
    assert!(proxy.failed_handshakes() >= 2);
    register.stop();
}

#[test]
fn a_ca_file_put_right_while_the_register_runs_is_read_at_its_next_connect_without_a_restart() {
    let mut shop = Shop::open();
    let gateway = Gateway::start(&shop, &[]);
    let authority = Authority::new("the shop's own CA");
    let proxy = TlsProxy::to(gateway.address, &authority);
    let me = shop.add_register("R");
    shop.add_product("Tea", 250);
    let dir = tempfile::tempdir().unwrap();
    // At first the file holds another authority's certificate.
    let ca = tls::ca_file(dir.path(), &Authority::new("another CA"), "shop-ca.pem");

    let mut settings = WsSettings::new(proxy.url(), gateway.issue(me));
    settings.ca_file = Some(ca.clone());
    let mut register = Register::with_transport(&shop, me, move |replica| {
        Ws::new(settings, replica).unwrap()
    });
    register.expect("a refusal of the certificate", |status| {
        matches!(status, Status::Disconnected { error: Error::TransportRefused(why), .. }
            if why.contains("UnknownIssuer"))
    });
    assert!(register.names_held().is_empty());

    authority.write_to(&ca);
    register.expect("connected", |status| matches!(status, Status::Connected));
    help::wait_until("the register to hold Tea", || {
        register.names_held() == ["Tea"]
    });
    let receipt = register.sell(700);
    help::wait_until("the receipt filed", || register.unfiled() == 0);
    assert_eq!(shop.receipts(), [(receipt, me, 700)], "filed once");
    register.stop();
}

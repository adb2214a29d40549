//! The dashboard in a real browser: `magic-sync-dashboard` over a
//! throwaway cluster, connected as a role that may only read the status,
//! registers put in each state one after the other, and the page opened in
//! headless Chromium (Debian's, driven by dashboard/tests/browser/driver.mjs).
//! Each state's page is checked for what a person reads, and saved as a
//! screenshot under target/dashboard-screenshots/ for a person to look at.
//!
//! Needs the page built (`npm ci && npm run build` in dashboard/) and
//! Debian's chromium: scripts/test.sh runs both first.

mod fleet;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use fleet::Fleet;
use serde_json::{json, Value};

fn dashboard_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn screenshot(name: &str) -> String {
    dashboard_dir()
        .join("../target/dashboard-screenshots")
        .join(format!("{name}.png"))
        .display()
        .to_string()
}

/// A child process ended when dropped (the test may fail half way).
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The server, started as an operator would, on a free port.
fn start_server(url: &str) -> (Running, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_magic-sync-dashboard"))
        .args([
            "--database",
            url,
            "--listen",
            "127.0.0.1:0",
            "--refresh",
            "0.5",
        ])
        .args(["--silent-after", "3600"])
        .arg("--assets")
        .arg(dashboard_dir().join("dist/app"))
        .stdout(Stdio::piped())
        .spawn()
        .expect("starts magic-sync-dashboard");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let address = line
        .trim()
        .strip_prefix("magic-sync-dashboard: ")
        .unwrap_or_else(|| panic!("the server said {line:?}, not its address"))
        .to_owned();
    (Running(child), address)
}

struct Browser {
    _child: Running,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Browser {
    fn start() -> Browser {
        let mut child = Command::new("node")
            .arg(dashboard_dir().join("tests/browser/driver.mjs"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("starts node");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Browser {
            _child: Running(child),
            stdin,
            stdout,
        }
    }

    fn ask(&mut self, command: Value) -> Value {
        writeln!(self.stdin, "{command}").unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        let answer: Value =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("the driver said {line:?}: {e}"));
        assert!(answer.get("error").is_none(), "{answer:#}");
        answer
    }

    /// What the page shows once it shows `want`, saved as a screenshot.
    fn look(&mut self, want: Value, name: &str) -> Value {
        self.ask(json!({ "wait": want, "screenshot": screenshot(name) }))
    }
}

fn line_of<'a>(seen: &'a Value, id: &str) -> &'a str {
    seen["replicas"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == id)
        .unwrap_or_else(|| panic!("{id} not shown: {seen:#}"))["text"]
        .as_str()
        .unwrap()
}

/// Every register's state: those named in theirs, the rest in sync.
fn states(fleet: &Fleet, named: &[(&str, &str)]) -> Value {
    fleet::NAMES
        .iter()
        .map(|name| {
            let state = named
                .iter()
                .find(|(n, _)| n == name)
                .map_or("synced", |(_, s)| s);
            (fleet.id(name).to_string(), json!(state))
        })
        .collect::<serde_json::Map<_, _>>()
        .into()
}

#[test]
fn the_page_shows_each_state_as_the_registers_go_through_them() {
    let mut fleet = Fleet::open();
    let url = fleet.reader_url();
    let (_server, address) = start_server(&url);
    let mut browser = Browser::start();
    browser.ask(json!({ "open": address }));
    let id = |fleet: &Fleet, name: &str| fleet.id(name).to_string();

    // Everything in sync: green.
    let seen = browser.look(
        json!({ "tone": "ok", "states": states(&fleet, &[]) }),
        "1-synced",
    );
    assert_eq!(
        seen["banner"]["text"],
        "✓ In sync Everything is in sync: all 6 replicas hold what they should."
    );
    assert!(line_of(&seen, &id(&fleet, "Front"))
        .contains("Holds what it should; everything it wrote is filed."));

    // A change on its way to the back register: amber.
    fleet.catching_up("Back");
    let back = id(&fleet, "Back");
    let seen = browser.look(
        json!({ "tone": "busy", "states": states(&fleet, &[("Back", "catching_up")]) }),
        "2-catching-up",
    );
    assert!(
        seen["banner"]["text"]
            .as_str()
            .unwrap()
            .contains("Changes are on their way to 1 replica of 6."),
        "{seen:#}"
    );
    assert!(line_of(&seen, &back).contains("Catching up"));
    // Worst first: the one catching up before those in sync.
    assert_eq!(seen["replicas"][0]["id"], back);

    // Sends to the terrace keep failing: out of reach, still amber.
    fleet.unreachable("Terrace");
    let terrace = id(&fleet, "Terrace");
    let seen = browser.look(
        json!({ "tone": "busy", "states": states(&fleet, &[("Back", "catching_up"), ("Terrace", "unreachable")]) }),
        "3-unreachable",
    );
    assert!(seen["banner"]["text"]
        .as_str()
        .unwrap()
        .contains("1 replica is out of reach"));
    let line = line_of(&seen, &terrace);
    assert!(line.contains("4 sends failed in a row"), "{line}");
    assert!(
        line.contains("no responders available for request."),
        "{line}"
    );
    assert_eq!(seen["replicas"][0]["id"], terrace);
    let failing = seen["problems"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["kind"] == "failing")
        .expect("the failing sends listed as a problem");
    assert_eq!(failing["remedy"], "wait");
    assert!(failing["text"].as_str().unwrap().contains("network"));

    // The patio is heard from but takes nothing: not moving.
    fleet.stalled("Patio");
    let patio = id(&fleet, "Patio");
    let seen = browser.look(
        json!({ "states": states(&fleet, &[("Back", "catching_up"), ("Terrace", "unreachable"), ("Patio", "stalled")]) }),
        "4-stalled",
    );
    assert!(line_of(&seen, &patio).contains("Not moving"), "{seen:#}");
    assert!(seen["banner"]["text"]
        .as_str()
        .unwrap()
        .contains("not moving"));

    // A receipt the head office's database refuses, and a footer too long
    // for the bar's printer: red, the kiosk first.
    fleet.wish("Bar", "A footer far too long for the printer");
    fleet.awaiting_fix("Kiosk");
    fleet.settle();
    let kiosk = id(&fleet, "Kiosk");
    let seen = browser.look(
        json!({ "tone": "fix", "states": states(&fleet, &[
            ("Back", "catching_up"),
            ("Terrace", "unreachable"),
            ("Patio", "stalled"),
            ("Kiosk", "awaiting_fix"),
        ]) }),
        "5-awaiting-fix",
    );
    assert!(seen["banner"]["text"]
        .as_str()
        .unwrap()
        .contains("1 replica of 6 waits for a fix to be deployed."));
    assert_eq!(seen["replicas"][0]["id"], kiosk);
    assert!(line_of(&seen, &kiosk).contains("1 upload of its is kept in the inbox."));
    let inbox = seen["problems"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["kind"] == "inbox")
        .expect("the kept upload listed as a problem");
    assert_eq!(inbox["remedy"], "fix");
    assert!(inbox["text"]
        .as_str()
        .unwrap()
        .contains("violates check constraint \"receipts_total_cents_check\""));
    let refused = &seen["wishes"][0];
    assert_eq!(refused["state"], "refused", "{seen:#}");
    assert!(refused["text"]
        .as_str()
        .unwrap()
        .contains("longer than the printer's 20 characters"));

    // The kiosk picked by keyboard: its progress, table by table.
    let seen = browser.ask(json!({ "pick": kiosk }));
    let products = seen["progress"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["table"] == "products")
        .expect("the kiosk's products");
    assert!(
        products["text"].as_str().unwrap().contains("holds 2 of 2"),
        "{seen:#}"
    );
    browser.look(json!({ "tone": "fix" }), "6-kiosk-picked");

    // A column added to the products and not declared: every register
    // waits for the fix, saying why, and the statement that mends it is
    // shown to copy.
    fleet.drift();
    let every: Vec<(&str, &str)> = fleet::NAMES.iter().map(|n| (*n, "awaiting_fix")).collect();
    let seen = browser.look(
        json!({ "tone": "fix", "states": states(&fleet, &every) }),
        "7-drift",
    );
    assert!(
        seen["banner"]["text"].as_str().unwrap().contains(
            "1 difference between the database and its declarations waits for its statement to be run."
        ),
        "{seen:#}"
    );
    for name in fleet::NAMES {
        assert!(
            line_of(&seen, &id(&fleet, name))
                .contains("It waits for the database to match its declarations again"),
            "{seen:#}"
        );
    }
    let drift = &seen["problems"][0];
    assert_eq!(drift["kind"], "drift", "the drift listed first: {seen:#}");
    assert_eq!(drift["remedy"], "fix");
    let text = drift["text"].as_str().unwrap();
    assert!(
        text.contains(
            "shop.products differs from its declaration: column vat_rate (integer) was added"
        ),
        "{text}"
    );
    assert!(
        text.contains("SELECT sync.declare_table('\"shop\".\"products\"', sync => 'broadcast');"),
        "{text}"
    );
    assert!(text.contains("Copy the statement"), "{text}");

    // The reader may read no more: the page says why, and keeps the last answer.
    fleet
        .pg
        .batch_execute("REVOKE EXECUTE ON FUNCTION sync.overview(jsonb, integer) FROM dashboard")
        .unwrap();
    let seen = browser.look(json!({ "failed": true, "tone": "fix" }), "8-read-failed");
    assert!(
        seen["failed"]
            .as_str()
            .unwrap()
            .contains("permission denied for function overview"),
        "{seen:#}"
    );
    assert!(
        seen["banner"]["text"]
            .as_str()
            .unwrap()
            .contains("6 replicas of 6 wait for a fix to be deployed."),
        "the last answer is kept: {seen:#}"
    );
    writeln!(browser.stdin, "{}", json!({ "quit": true })).unwrap();
}

#[test]
fn the_server_refuses_a_role_that_may_do_more_than_read_the_status() {
    let fleet = Fleet::open();
    let out = Command::new(env!("CARGO_BIN_EXE_magic-sync-dashboard"))
        .args(["--database", &fleet.cluster.url("shop")])
        .args(["--listen", "127.0.0.1:0"])
        .arg("--assets")
        .arg(dashboard_dir().join("dist/app"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("postgres is a superuser"), "{said}");
    assert!(said.contains("sync.allow_reading"), "{said}");
}

#[test]
fn the_server_asks_for_a_token_anywhere_but_loopback() {
    let out = Command::new(env!("CARGO_BIN_EXE_magic-sync-dashboard"))
        .args(["--database", "host=/nowhere", "--listen", "0.0.0.0:0"])
        .env_remove("MAGIC_SYNC_DASHBOARD_TOKEN")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("give a token"), "{said}");
}

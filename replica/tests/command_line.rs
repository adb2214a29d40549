//! The command line for people who look after devices, run as a real
//! process: its answers, its exit codes (docs/src/replica-cli.md), and a
//! reader that stops reading early.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use common::*;
use magic_sync_replica::proto::PROTOCOL;
use magic_sync_replica::{Replica, Settings};
use serde_json::{json, Value};

/// The exit codes, as the docs give them.
const FAILED: i32 = 1;
const USAGE: i32 = 2;
const LATER_PROTOCOL: i32 = 3;
const REFUSED: i32 = 4;

fn command() -> Command {
    Command::new(env!("CARGO_BIN_EXE_magic-sync-replica"))
}

/// Runs the command line with `--json` and insists it succeeded.
fn run(args: &[&str]) -> Value {
    let out = run_as_it_may(args);
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn run_as_it_may(args: &[&str]) -> Output {
    command().args(args).arg("--json").output().unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn text(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// The shop's declaration file, as `init` reads it.
fn shop_declarations() -> Value {
    json!({
        "schema": [SHOP],
        "tables": [
            {"name": "products", "mirror": "catalog", "retired": "retired_at"},
            {"name": "orders", "mirror": "catalog"},
            {"name": "receipts", "mirror": "record", "origin": "register_id"}
        ]
    })
}

/// A directory with a declaration file in it; the database is to be made.
struct Place {
    dir: tempfile::TempDir,
}

impl Place {
    fn new(declarations: &Value) -> Place {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("tables.json"), declarations.to_string()).unwrap();
        Place { dir }
    }

    fn tables(&self) -> PathBuf {
        self.dir.path().join("tables.json")
    }

    fn db(&self) -> PathBuf {
        self.dir.path().join("reference.db")
    }

    fn init(&self, id: &str) -> Output {
        run_as_it_may(&["init", text(&self.db()), text(&self.tables()), id])
    }

    fn file(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    }
}

fn my_id() -> String {
    me().hyphenated().to_string()
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

#[test]
fn init_makes_a_replica_that_show_reads_back_and_the_library_opens() {
    let place = Place::new(&shop_declarations());
    let made = place.init(&my_id());
    assert!(made.status.success(), "{}", stderr(&made));
    let answered: Value = serde_json::from_slice(&made.stdout).unwrap();

    let shown = run(&["show", text(&place.db())]);
    assert_eq!(answered, shown, "init answers what show does");
    assert_eq!(shown["replica"], my_id());
    assert_eq!(shown["last_applied"]["sequence"], 0);
    assert_eq!(
        shown["holds"]["products"],
        json!({"mirror": "catalog", "rows": 0})
    );
    assert_eq!(shown["holds"]["receipts"]["mirror"], "record");
    assert_eq!(shown["backlog"][0]["table"], "receipts");

    // The library opens it as the shop's own replica.
    let replica = Replica::open(connect(&place.db()), tables(), me(), Settings::default());
    assert!(replica.is_ok(), "{:?}", replica.err());
}

#[test]
fn a_replica_made_by_init_takes_a_snapshot_through_apply() {
    let place = Place::new(&shop_declarations());
    assert!(place.init(&my_id()).status.success());
    let db = place.db();
    let mut server = Server::new();
    let begin = place.file(
        "begin.bin",
        &server.begin(vec![part("products")
            .product(1, "tea", 3)
            .product(2, "jam", 5)]),
    );
    let end = place.file("end.bin", &server.end(&["products", "orders"]));
    let began = run(&["apply", text(&db), text(&begin)]);
    assert_eq!(
        began,
        json!({"received": {"applied": {"products": 2}, "rejected": 0}, "acknowledge": true})
    );
    let ended = run(&["apply", text(&db), text(&end)]);
    assert_eq!(ended["received"]["ended"], json!(["products", "orders"]));
    let shown = run(&["show", text(&db)]);
    assert_eq!(shown["holds"]["products"]["rows"], 2);
    assert_eq!(shown["last_applied"]["sequence"], server.sequence);
}

#[test]
fn init_refuses_a_malformed_file_naming_each_problem_and_makes_nothing() {
    let place = Place::new(&json!({
        "schema": "CREATE TABLE products (id BLOB PRIMARY KEY)",
        "tables": [
            {"name": "products", "mirror": "catalogue", "colour": "red"},
            {"mirror": "record"},
            "orders"
        ],
        "lanes": [{"name": "main", "tables": [1]}]
    }));
    let out = place.init(&my_id());
    assert_eq!(out.status.code(), Some(REFUSED), "{}", stderr(&out));
    let said = stderr(&out);
    for problem in [
        "schema: give a list of strings",
        "tables[0].mirror: \"catalogue\" is none of catalog, record, both, setting",
        "tables[0].colour: no such member",
        "tables[1].name: missing",
        "tables[2]: give an object",
        "lanes[0].tables: give a list of strings",
    ] {
        assert!(said.contains(problem), "{said} lacks {problem}");
    }
    assert!(!place.db().exists(), "nothing made");
}

#[test]
fn init_refuses_a_file_that_is_no_json() {
    let place = Place::new(&json!(null));
    std::fs::write(place.tables(), "{\"tables\": [").unwrap();
    let out = place.init(&my_id());
    assert_eq!(out.status.code(), Some(REFUSED));
    assert!(stderr(&out).contains("not JSON"), "{}", stderr(&out));
    assert!(!place.db().exists());
}

#[test]
fn init_refuses_what_the_library_refuses_and_leaves_no_database_behind() {
    let mut declarations = shop_declarations();
    declarations["tables"][2]["retired"] = json!("total");
    let place = Place::new(&declarations);
    let out = place.init(&my_id());
    assert_eq!(out.status.code(), Some(REFUSED), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("table `receipts`: a retired column on a record"),
        "{}",
        stderr(&out)
    );
    assert!(
        !place.db().exists(),
        "a database it could not finish is removed"
    );

    let mut declarations = shop_declarations();
    declarations["schema"] = json!(["CREATE TABLE products (id BLOB PRIMARY KEY"]);
    let place = Place::new(&declarations);
    let out = place.init(&my_id());
    assert_eq!(out.status.code(), Some(REFUSED));
    assert!(stderr(&out).contains("schema[0]"), "{}", stderr(&out));
    assert!(!place.db().exists());
}

#[test]
fn init_refuses_a_database_that_is_there_already_and_leaves_it_alone() {
    let place = Place::new(&shop_declarations());
    std::fs::write(place.db(), b"someone's data").unwrap();
    let out = place.init(&my_id());
    assert_eq!(out.status.code(), Some(REFUSED));
    assert!(
        stderr(&out).contains("a file is there already"),
        "{}",
        stderr(&out)
    );
    assert_eq!(std::fs::read(place.db()).unwrap(), b"someone's data");

    let said: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(said["error"], "refused");
    assert_eq!(said["exit"], REFUSED);
}

#[test]
fn init_refuses_an_id_that_is_no_replica_id_as_a_usage_error() {
    let place = Place::new(&shop_declarations());
    for id in [
        "register-7".to_owned(),
        format!("{{{}}}", my_id()),
        format!("urn:uuid:{}", my_id()),
        "00000000-0000-0000-0000-000000000000".to_owned(),
    ] {
        let out = place.init(&id);
        assert_eq!(out.status.code(), Some(USAGE), "{id}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("is no replica id"),
            "{}",
            stderr(&out)
        );
        assert!(!place.db().exists(), "{id}");
    }
}

#[test]
fn a_message_of_a_later_protocol_has_an_exit_code_of_its_own_and_changes_nothing() {
    let (shop, replica, mut server) = provisioned();
    let before = replica.last_applied().unwrap();
    drop(replica);
    let down = server.peek(vec![part("products").product(3, "rye", 2)]);
    let later = encode(
        PROTOCOL + 1,
        Some(magic_sync_replica::proto::wire::to_replica::Body::Down(
            down,
        )),
    );
    let message = shop.dir.path().join("later.bin");
    std::fs::write(&message, later).unwrap();

    let out = run_as_it_may(&["apply", text(&shop.path()), text(&message)]);
    assert_eq!(out.status.code(), Some(LATER_PROTOCOL), "{}", stderr(&out));
    let said: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(said["error"], "later_protocol");
    assert!(
        stderr(&out).contains("leave it unacknowledged"),
        "{}",
        stderr(&out)
    );

    let replica = shop.open();
    assert_eq!(replica.last_applied().unwrap(), before);
    assert_eq!(names(replica.connection()), ["tea", "jam"]);
}

#[test]
fn a_malformed_message_is_acknowledged_with_success() {
    let (shop, replica, _server) = provisioned();
    drop(replica);
    let message = shop.dir.path().join("junk.bin");
    std::fs::write(&message, b"\xff\xff not a message").unwrap();
    let applied = run(&["apply", text(&shop.path()), text(&message)]);
    assert_eq!(applied["acknowledge"], true);
    assert!(applied["received"]["malformed"].is_string(), "{applied}");
}

#[test]
fn a_wrong_command_line_is_a_usage_error_and_a_missing_database_a_failure() {
    for args in [
        &[][..],
        &["frob"][..],
        &["show"][..],
        &["apply", "a.db"][..],
    ] {
        let out = run_as_it_may(args);
        assert_eq!(out.status.code(), Some(USAGE), "{args:?}");
        assert!(stderr(&out).contains("usage:"), "{args:?}");
    }
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("none.db");
    let out = run_as_it_may(&["show", text(&missing)]);
    assert_eq!(out.status.code(), Some(FAILED));
    assert!(!missing.exists(), "show makes no database");
}

#[test]
fn help_says_usage_once_with_a_line_a_command_and_how_to_install_it() {
    let out = command().arg("help").output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let usage = String::from_utf8(out.stdout).unwrap();
    assert_eq!(usage.matches("usage").count(), 1, "{usage}");
    for name in ["init", "show", "apply", "up", "run", "help"] {
        let lines = usage
            .lines()
            .filter(|l| {
                l.trim_start()
                    .starts_with(&format!("magic-sync-replica {name} "))
            })
            .count();
        assert_eq!(lines, 1, "one line for {name}:\n{usage}");
    }
    // The install line names features the crate has: a renamed feature
    // would leave a command that fails.
    let install = usage
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("cargo install --path replica --features "))
        .unwrap_or_else(|| panic!("no install line:\n{usage}"));
    let manifest =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml")).unwrap();
    let features = &manifest[manifest.find("[features]").unwrap()..];
    for feature in install.rsplit(' ').next().unwrap().split(',') {
        assert!(
            features
                .lines()
                .any(|l| l.starts_with(&format!("{feature} ="))),
            "replica/Cargo.toml has no feature {feature}"
        );
    }
    // The book shows it as it is.
    let book = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/src/replica-cli.md"
    ))
    .unwrap();
    assert!(
        book.contains(usage.trim_end()),
        "docs/src/replica-cli.md does not show the usage:\n{usage}"
    );
    // The same text as JSON, and after the reason of a usage error.
    assert_eq!(run(&["help"])["usage"].as_str().unwrap(), usage.trim_end());
    let wrong = command().arg("frob").output().unwrap();
    assert_eq!(wrong.status.code(), Some(USAGE));
    assert_eq!(
        stderr(&wrong).matches("usage").count(),
        1,
        "{}",
        stderr(&wrong)
    );
    assert!(
        stderr(&wrong).contains(usage.trim_end()),
        "{}",
        stderr(&wrong)
    );
}

/// Runs `show` with stdout a pipe whose reader has gone before it writes a
/// byte: what `show DB | head` meets once head has read its lines.
fn show_into_a_closed_pipe(db: &Path, json: bool) -> Output {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let mut show = command();
    show.args(["show", text(db)]);
    if json {
        show.arg("--json");
    }
    let child = show
        .stdout(Stdio::from(writer))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn show_into_a_pipe_closed_early_ends_quietly_in_success() {
    let (shop, replica, _server) = provisioned();
    drop(replica);
    for json in [false, true] {
        let out = show_into_a_closed_pipe(&shop.path(), json);
        assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));
        assert_eq!(stderr(&out), "", "a command line tool exits quietly there");
        assert_eq!(out.status.code(), Some(0));
    }
}

#[test]
fn a_replica_with_a_setting_shows_its_wishes_and_the_command_line_carries_none_out() {
    let declarations = json!({
        "schema": ["CREATE TABLE footers (register_id BLOB PRIMARY KEY, text TEXT NOT NULL, changed INTEGER NOT NULL)"],
        "tables": [{"name": "footers", "mirror": "setting", "origin": "register_id",
                    "version": "changed", "desired": ["text"]}]
    });
    let place = Place::new(&declarations);
    let made = place.init(&my_id());
    assert!(made.status.success(), "{}", stderr(&made));
    let db = place.db();
    assert_eq!(run(&["show", text(&db)])["wishes"], json!([]));
    let conn = connect(&db);
    conn.execute(
        "INSERT INTO footers VALUES (?1, 'Thank you', 1)",
        [me().as_bytes().to_vec()],
    )
    .unwrap();
    drop(conn);
    let mut server = Server::new();
    let wish = magic_sync_replica::proto::wire::Wish {
        id: uuid(0x3001),
        table: "footers".into(),
        key: my_id(),
        wanted: serde_json::to_vec(
            &json!({"register_id": my_id(), "text": "Open on Sundays", "changed": "1"}),
        )
        .unwrap(),
        version: 7,
        note: "the head office".into(),
        ..Default::default()
    };
    let begin = place.file(
        "begin.bin",
        &server.begin(vec![Part(magic_sync_replica::proto::wire::DownTable {
            table: "sync_wishes".into(),
            keys: vec![wish.id.clone()],
            upserts: vec![prost::Message::encode_to_vec(&wish)],
            ..Default::default()
        })]),
    );
    let end = place.file("end.bin", &server.end(&["sync_wishes"]));
    run(&["apply", text(&db), text(&begin)]);
    run(&["apply", text(&db), text(&end)]);
    let shown = run(&["show", text(&db)]);
    assert_eq!(
        shown["wishes"],
        json!([{"id": uuid(0x3001), "table": "footers", "key": my_id(), "version": "7",
                "note": "the head office", "outcome": null, "reason": null,
                "answered_at": null, "retired": false}])
    );
    let footer: String = connect(&db)
        .query_row("SELECT text FROM footers", [], |r| r.get(0))
        .unwrap();
    assert_eq!(footer, "Thank you", "left to the program's handler");
}

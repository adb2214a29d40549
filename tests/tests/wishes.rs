//! The book's footer scenarios (Settings and wishes), end to end: the head
//! office wishes a register's receipt footer another text with
//! `sync.desire`, the relay sends the wish, the register carries it out
//! through its printer, and its answer and the footer it wrote come back.
//! Every scenario ends comparing both sides: the register's footer, the
//! server's copy of it, and where the wish stands on each side.

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::open_replica;
use magic_sync_replica::queue;
use magic_sync_replica::{
    Apply, CarryOut, Outcome, Replica, Settings, Table, Tables, Wish, Wishes,
};
use magic_sync_tests::Cluster;
use postgres::Client;
use serde_json::{json, Value};
use tempfile::TempDir;
use uuid::Uuid;

// Two settings of a register: its receipt footer, wished only while it is
// what the operator saw (if_unchanged, the book's), and its banner, every
// wish of which is carried out (always).
const SERVER_SCHEMA: &str = "
    CREATE SCHEMA shop;
    CREATE TABLE shop.registers (
        id     uuid PRIMARY KEY,
        name   text NOT NULL,
        active boolean NOT NULL DEFAULT true);
    CREATE TABLE shop.footers (
        register_id uuid NOT NULL,
        id          uuid NOT NULL,
        text        text NOT NULL,
        changed_at  timestamptz NOT NULL,
        PRIMARY KEY (register_id, id));
    CREATE TABLE shop.banners (
        register_id uuid NOT NULL,
        id          uuid NOT NULL,
        text        text NOT NULL,
        changed_at  timestamptz NOT NULL,
        PRIMARY KEY (register_id, id));
    SELECT sync.declare_replicas('shop.registers', live => 'active');
    SELECT sync.declare_table('shop.footers', mirror => 'setting', origin => 'register_id',
                              version => 'changed_at', desired => '{text}',
                              apply => 'if_unchanged');
    SELECT sync.declare_table('shop.banners', mirror => 'setting', origin => 'register_id',
                              version => 'changed_at', desired => '{text}',
                              apply => 'always');
";

const REGISTER_SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS footers (
        register_id BLOB NOT NULL,
        id          BLOB NOT NULL,
        text        TEXT NOT NULL,
        changed_at  TEXT NOT NULL,
        PRIMARY KEY (register_id, id));
    CREATE TABLE IF NOT EXISTS banners (
        register_id BLOB NOT NULL,
        id          BLOB NOT NULL,
        text        TEXT NOT NULL,
        changed_at  TEXT NOT NULL,
        PRIMARY KEY (register_id, id));
";

fn tables() -> Tables {
    Tables::new(vec![
        Table::setting("footers")
            .version("changed_at")
            .origin("register_id")
            .desired(&["text"])
            .apply(Apply::IfUnchanged),
        Table::setting("banners")
            .version("changed_at")
            .origin("register_id")
            .desired(&["text"])
            .apply(Apply::Always),
    ])
}

/// The receipt printer: it takes a footer when it is on and the footer fits
/// its 40 characters. It counts what it printed, to show a wish carried
/// out twice prints as once does.
#[derive(Clone, Default)]
struct Printer {
    off: Arc<AtomicBool>,
    printed: Arc<AtomicUsize>,
}

impl CarryOut for Printer {
    fn carry_out(&self, wish: &Wish) -> Outcome {
        let text = wish.wanted["text"].as_str().unwrap_or_default();
        if text.chars().count() > 40 {
            return Outcome::Refused(format!(
                "\"{text}\" is longer than the printer's 40 characters"
            ));
        }
        if self.off.load(Ordering::SeqCst) {
            return Outcome::Later("the printer is off".to_owned());
        }
        self.printed.fetch_add(1, Ordering::SeqCst);
        Outcome::Applied
    }
}

struct Shop {
    cluster: Cluster,
    pg: Client,
    dir: TempDir,
}

/// A register: its replica, its printer, and its footer's and banner's ids.
struct Register {
    replica: Replica,
    printer: Printer,
    id: Uuid,
    footer: Uuid,
    banner: Uuid,
}

impl Shop {
    fn open() -> Shop {
        let cluster = Cluster::start();
        let mut pg = cluster.database_with_extension("shop");
        pg.batch_execute(SERVER_SCHEMA).expect("the shop's schema");
        Shop {
            cluster,
            pg,
            dir: tempfile::tempdir().expect("a directory for the registers"),
        }
    }

    /// A register, provisioned, whose footer and banner the server has
    /// filed: "Thanks" and "Welcome", both at the same first instant.
    fn register(&mut self) -> Register {
        let id = Uuid::new_v4();
        self.pg
            .execute(
                "INSERT INTO shop.registers (id, name) VALUES ($1, 'Register')",
                &[&id],
            )
            .unwrap();
        let printer = Printer::default();
        let replica = open(&self.file_of(id), id, &printer);
        let mut register = Register {
            replica,
            printer,
            id,
            footer: Uuid::new_v4(),
            banner: Uuid::new_v4(),
        };
        for (table, row, text) in [
            ("footers", register.footer, "Thanks"),
            ("banners", register.banner, "Welcome"),
        ] {
            register.write(table, row, text, FIRST);
        }
        self.settle(&mut register);
        assert_eq!(self.footer(&register), ("Thanks".into(), FIRST.into()));
        register
    }

    fn file_of(&self, register: Uuid) -> std::path::PathBuf {
        self.dir.path().join(format!("{register}.db"))
    }

    /// What a relay does, then the register takes everything, carries out
    /// what it can, and says so; until nothing more moves.
    fn settle(&mut self, register: &mut Register) {
        for _ in 0..4 {
            self.relay();
            queue::deliver(&mut self.pg, &mut register.replica).expect("delivers");
            queue::report(&mut self.pg, &mut register.replica).expect("reports");
        }
    }

    fn relay(&mut self) {
        self.pg.query_one("SELECT sync.refile()", &[]).unwrap();
        self.pg.query_one("CALL sync.relay()", &[]).unwrap();
    }

    /// The head office wishes a register's row of `table` the text `text`,
    /// based on the version the operator's page showed.
    fn desire(&mut self, table: &str, register: Uuid, row: Uuid, text: &str, seen: &str) -> Uuid {
        self.pg
            .query_one(
                "SELECT sync.desire($1, jsonb_build_object('register_id', $2::uuid, \
                 'id', $3::uuid, 'text', $4::text, 'changed_at', $5::text), 'the operator')",
                &[&table, &register, &row, &text, &seen],
            )
            .expect("sync.desire")
            .get(0)
    }

    /// Where the wish stands as the server sees it.
    fn wish(&mut self, id: Uuid) -> Value {
        let answer: Value = self
            .pg
            .query_one("SELECT sync.wishes(lim => 1000)", &[])
            .unwrap()
            .get(0);
        answer["wishes"]
            .as_array()
            .expect("wishes")
            .iter()
            .find(|w| w["id"] == json!(id.to_string()))
            .cloned()
            .unwrap_or(Value::Null)
    }

    fn state_of(&mut self, id: Uuid) -> String {
        self.wish(id)["state"].as_str().unwrap_or("none").to_owned()
    }

    /// The register's footer as the server filed it: text and version.
    fn footer(&mut self, register: &Register) -> (String, String) {
        self.setting("footers", register.id, register.footer)
    }

    fn setting(&mut self, table: &str, register: Uuid, row: Uuid) -> (String, String) {
        let row = self
            .pg
            .query_one(
                &format!(
                    "SELECT text, to_char(changed_at AT TIME ZONE 'UTC', \
                     'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') FROM shop.{table} \
                     WHERE register_id = $1 AND id = $2"
                ),
                &[&register, &row],
            )
            .unwrap();
        (row.get(0), row.get(1))
    }

    /// Both sides show the same footer and banner, and the same answer to
    /// every wish the register holds.
    fn assert_both_sides_agree(&mut self, register: &Register) {
        assert_eq!(
            register.footer(),
            self.footer(register),
            "the footer on the register and on the server"
        );
        assert_eq!(
            register.setting("banners", register.banner),
            self.setting("banners", register.id, register.banner),
            "the banner on the register and on the server"
        );
        for (id, outcome) in register.answers() {
            let state = self.state_of(id);
            assert_eq!(
                state, outcome,
                "the answer to wish {id} on the register and on the server"
            );
        }
    }
}

impl Register {
    fn write(&mut self, table: &str, row: Uuid, text: &str, at: &str) {
        self.replica
            .connection()
            .execute(
                &format!(
                    "INSERT INTO {table} (register_id, id, text, changed_at) VALUES (?1, ?2, ?3, ?4) \
                     ON CONFLICT (register_id, id) DO UPDATE SET text = excluded.text, \
                     changed_at = excluded.changed_at"
                ),
                rusqlite::params![self.id.as_bytes().to_vec(), row.as_bytes().to_vec(), text, at],
            )
            .unwrap();
    }

    fn footer(&self) -> (String, String) {
        self.setting("footers", self.footer)
    }

    fn setting(&self, table: &str, row: Uuid) -> (String, String) {
        self.replica
            .connection()
            .query_row(
                &format!("SELECT text, changed_at FROM {table} WHERE id = ?1"),
                [row.as_bytes().to_vec()],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap()
    }

    /// The register's answers to the wishes it holds: wish id and outcome
    /// (`pending` for one not answered).
    fn answers(&self) -> Vec<(Uuid, String)> {
        let mut statement = self
            .replica
            .connection()
            .prepare("SELECT id, outcome FROM sync_wishes WHERE retired_at IS NULL")
            .unwrap();
        statement
            .query_map([], |r| {
                let id: Value = match r.get_ref(0)? {
                    rusqlite::types::ValueRef::Blob(b) => {
                        json!(Uuid::from_slice(b).unwrap().to_string())
                    }
                    other => json!(other.as_str().unwrap().to_owned()),
                };
                let outcome: Option<String> = r.get(1)?;
                Ok((
                    id.as_str().unwrap().parse().unwrap(),
                    outcome
                        .filter(|o| !o.is_empty())
                        .unwrap_or_else(|| "pending".into()),
                ))
            })
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    fn holds_wish(&self, id: Uuid) -> bool {
        self.answers().iter().any(|(held, _)| *held == id)
    }
}

const FIRST: &str = "2026-10-01T10:00:00.000000Z";

fn open(file: &Path, me: Uuid, printer: &Printer) -> Replica {
    open_with(file, me, printer, Settings::default().digests_every)
}

/// The register, saying its digests this often.
fn open_with(file: &Path, me: Uuid, printer: &Printer, digests_every: Duration) -> Replica {
    let settings = Settings {
        digests_every,
        wishes: Wishes::new()
            .on("footers", printer.clone())
            .on("banners", printer.clone()),
        ..Settings::default()
    };
    open_replica(file, REGISTER_SCHEMA, tables(), me, settings)
}

#[test]
fn a_wish_is_carried_out_and_both_sides_show_the_new_footer() {
    let mut shop = Shop::open();
    let mut register = shop.register();
    let wish = shop.desire("footers", register.id, register.footer, "Come again", FIRST);
    assert_eq!(shop.state_of(wish), "pending");

    shop.settle(&mut register);
    assert_eq!(register.footer().0, "Come again");
    assert!(register.footer().1.as_str() > FIRST, "its version moved on");
    assert_eq!(register.printer.printed.load(Ordering::SeqCst), 1);
    assert_eq!(shop.state_of(wish), "applied");
    assert_eq!(shop.wish(wish)["reported"]["text"], "Come again");
    shop.assert_both_sides_agree(&register);
}

#[test]
fn a_wish_waits_while_the_printer_is_off_and_is_applied_once_it_is_back_on() {
    let mut shop = Shop::open();
    let mut register = shop.register();
    register.printer.off.store(true, Ordering::SeqCst);
    let wish = shop.desire("footers", register.id, register.footer, "Come again", FIRST);
    shop.settle(&mut register);
    assert_eq!(shop.state_of(wish), "waiting");
    assert_eq!(shop.wish(wish)["reason"], "the printer is off");
    assert_eq!(register.footer().0, "Thanks", "nothing was written yet");
    shop.assert_both_sides_agree(&register);

    register.printer.off.store(false, Ordering::SeqCst);
    let answered = register.replica.offer_wishes().unwrap();
    assert_eq!(answered.len(), 1, "{answered:?}");
    assert_eq!(answered[0].outcome, "applied");
    shop.settle(&mut register);
    assert_eq!(shop.state_of(wish), "applied");
    assert_eq!(register.footer().0, "Come again");
    shop.assert_both_sides_agree(&register);
}

#[test]
fn a_footer_longer_than_the_printer_takes_is_refused_and_withdrawing_it_lets_it_go() {
    let mut shop = Shop::open();
    let mut register = shop.register();
    let long = "Thank you for shopping with us, see you soon!";
    let wish = shop.desire("footers", register.id, register.footer, long, FIRST);
    shop.settle(&mut register);
    assert_eq!(shop.state_of(wish), "refused");
    assert!(
        shop.wish(wish)["reason"]
            .as_str()
            .is_some_and(|r| r.contains("40 characters")),
        "{}",
        shop.wish(wish)
    );
    assert_eq!(
        register.footer().0,
        "Thanks",
        "the register's footer stands"
    );
    shop.assert_both_sides_agree(&register);

    let key = format!("{}|{}", register.id, register.footer);
    let withdrawn: bool = shop
        .pg
        .query_one("SELECT sync.withdraw('footers', $1)", &[&key])
        .unwrap()
        .get(0);
    assert!(withdrawn);
    shop.settle(&mut register);
    assert_eq!(shop.state_of(wish), "none", "the server let go of it");
    assert!(!register.holds_wish(wish), "the register let go of it");
    assert_eq!(register.footer().0, "Thanks");
    shop.assert_both_sides_agree(&register);
}

#[test]
fn a_register_that_changed_its_footer_first_supersedes_a_wish_based_on_the_old_one() {
    let mut shop = Shop::open();
    let mut register = shop.register();
    // The operator's page showed the footer at FIRST; meanwhile the
    // register's user changed it.
    register.write(
        "footers",
        register.footer,
        "Hello",
        "2026-10-02T09:00:00.000000Z",
    );
    let wish = shop.desire("footers", register.id, register.footer, "Come again", FIRST);
    shop.settle(&mut register);
    assert_eq!(shop.state_of(wish), "superseded");
    assert_eq!(register.footer().0, "Hello", "the register's value stands");
    assert_eq!(shop.footer(&register).0, "Hello");
    assert_eq!(register.printer.printed.load(Ordering::SeqCst), 0);
    shop.assert_both_sides_agree(&register);
}

#[test]
fn a_wish_to_a_register_offline_is_on_its_way_until_it_is_back() {
    let mut shop = Shop::open();
    let mut register = shop.register();
    let wish = shop.desire("footers", register.id, register.footer, "Come again", FIRST);
    // The register takes nothing: the relay runs, and runs again.
    shop.relay();
    shop.relay();
    assert_eq!(shop.state_of(wish), "pending");
    let overview: Value = shop
        .pg
        .query_one("SELECT sync.overview()", &[])
        .unwrap()
        .get(0);
    assert_eq!(
        overview["states"]["catching_up"],
        json!(1),
        "a register with a wish not answered is not synced: {overview}"
    );

    shop.settle(&mut register);
    assert_eq!(shop.state_of(wish), "applied");
    assert_eq!(register.footer().0, "Come again");
    shop.assert_both_sides_agree(&register);
}

#[test]
fn with_always_a_wish_wins_over_an_earlier_change_and_a_later_change_wins_until_the_next_wish() {
    let mut shop = Shop::open();
    let mut register = shop.register();
    // The register's user changes the banner, and it is filed.
    register.write(
        "banners",
        register.banner,
        "Sale",
        "2026-10-02T09:00:00.000000Z",
    );
    shop.settle(&mut register);
    // A wish based on what the page showed before: carried out anyway.
    let wish = shop.desire(
        "banners",
        register.id,
        register.banner,
        "Opening hours 9-5",
        FIRST,
    );
    shop.settle(&mut register);
    assert_eq!(shop.state_of(wish), "applied");
    assert_eq!(
        register.setting("banners", register.banner).0,
        "Opening hours 9-5"
    );
    shop.assert_both_sides_agree(&register);

    // A change made after the wish wins, and stands.
    let later = "2099-01-01T00:00:00.000000Z";
    register.write("banners", register.banner, "Closed today", later);
    shop.settle(&mut register);
    assert_eq!(
        shop.setting("banners", register.id, register.banner),
        ("Closed today".into(), later.into())
    );
    assert_eq!(shop.state_of(wish), "applied", "the wish was answered once");
    shop.assert_both_sides_agree(&register);
}

#[test]
fn a_register_restored_from_an_older_copy_still_ends_showing_the_servers_value() {
    let mut shop = Shop::open();
    let mut register = shop.register();
    let file = shop.file_of(register.id);
    let backup = shop.dir.path().join("backup.db");
    register
        .replica
        .connection()
        .execute("VACUUM INTO ?1", [backup.to_str().unwrap()])
        .unwrap();

    let wish = shop.desire("footers", register.id, register.footer, "Come again", FIRST);
    shop.settle(&mut register);
    assert_eq!(shop.state_of(wish), "applied");

    // The register's disk is put back as it was before the wish.
    let printer = register.printer.clone();
    drop(register.replica);
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", file.display()));
    }
    std::fs::copy(&backup, &file).unwrap();
    register.replica = open(&file, register.id, &printer);
    for _ in 0..3 {
        shop.settle(&mut register);
    }
    // Both sides show one footer, whichever it is, and agree on the wish.
    shop.assert_both_sides_agree(&register);
    assert_eq!(
        register.footer().0,
        "Come again",
        "the wish, still held for it, is carried out again"
    );
}

#[test]
fn a_server_restored_from_an_older_dump_and_its_register_still_end_showing_the_same_footer() {
    let mut shop = Shop::open();
    let mut register = shop.register();
    let dump = shop.dir.path().join("shop.sql");
    shop.cluster.dump("shop", &dump);

    // After the dump: a wish is carried out, and the register changes its
    // banner.
    let wish = shop.desire("footers", register.id, register.footer, "Come again", FIRST);
    register.write(
        "banners",
        register.banner,
        "Sale",
        "2026-10-03T09:00:00.000000Z",
    );
    shop.settle(&mut register);
    assert_eq!(shop.state_of(wish), "applied");

    // The head office's database is restored from the dump: it knows
    // neither the wish nor the footer and banner the register holds now.
    shop.pg = shop.cluster.connect("postgres");
    shop.cluster.restore("shop", &dump);
    shop.pg = shop.cluster.connect("shop");
    // Nothing moves until the register says its digests (hourly): an hour
    // later, its Up says where it stands and what it holds.
    let printer = register.printer.clone();
    drop(register.replica);
    register.replica = open_with(
        &shop.file_of(register.id),
        register.id,
        &printer,
        Duration::ZERO,
    );
    let up = register
        .replica
        .next_up()
        .unwrap()
        .expect("digests are due");
    let verdict: Value = shop
        .pg
        .query_one("SELECT sync.receive($1, $2)", &[&register.id, &up.bytes])
        .unwrap()
        .get(0);
    register.replica.sent(&up).unwrap();
    eprintln!("the register's digests, an hour later: {verdict}");
    drop(register.replica);
    register.replica = open(&shop.file_of(register.id), register.id, &printer);
    for _ in 0..3 {
        shop.settle(&mut register);
    }
    assert_eq!(
        register.footer().0,
        "Come again",
        "the register's footer stands"
    );
    shop.assert_both_sides_agree(&register);
    assert!(
        !register.holds_wish(wish),
        "a wish the server no longer has is let go"
    );
}

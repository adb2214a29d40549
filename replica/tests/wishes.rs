//! The server's wishes of the replica's settings (protocol 4.5), on one
//! replica: the book's footer cases as far as one replica shows them, and
//! every rule of carrying a wish out.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use magic_sync_replica::proto::digest::{fingerprint, wish_line};
use magic_sync_replica::proto::wire::{DownTable, Up, Wish as WireWish};
use magic_sync_replica::{
    Answered, Apply, CarryOut, Direct, Outcome, Received, Replica, Settings, Table, Tables, Wish,
    Wishes,
};
use prost::Message;
use serde_json::{json, Value};

const SCHEMA: &str = "
    CREATE TABLE footers (
        register_id BLOB PRIMARY KEY,
        text        TEXT NOT NULL,
        changed_at  TEXT NOT NULL
    );
    CREATE TABLE screens (
        register_id BLOB PRIMARY KEY,
        level       INTEGER NOT NULL CHECK (level BETWEEN 0 AND 100),
        version     INTEGER NOT NULL
    );
";

/// The footer the register prints (if_unchanged, versioned by an instant)
/// and its screen's brightness (always, versioned by an integer).
fn tables() -> Tables {
    Tables::new(vec![
        Table::setting("footers")
            .origin("register_id")
            .version("changed_at")
            .desired(&["text"])
            .apply(Apply::IfUnchanged),
        Table::setting("screens")
            .origin("register_id")
            .version("version")
            .desired(&["level"]),
    ])
}

const T0: &str = "2026-10-01T08:00:00.000000Z";
const T1: &str = "2026-10-01T09:00:00.000000Z";

/// The receipt printer, which takes a new footer when it is on and when
/// the footer fits its 40 characters.
#[derive(Clone, Default)]
struct Printer {
    off: Arc<AtomicBool>,
    printed: Arc<Mutex<Vec<String>>>,
    asked: Arc<AtomicUsize>,
}

impl CarryOut for Printer {
    fn carry_out(&self, wish: &Wish) -> Outcome {
        self.asked.fetch_add(1, Ordering::SeqCst);
        let text = wish.wanted["text"].as_str().unwrap_or_default().to_owned();
        if text.chars().count() > 40 {
            return Outcome::Refused(format!(
                "\"{text}\" is longer than the printer's 40 characters"
            ));
        }
        if self.off.load(Ordering::SeqCst) {
            return Outcome::Later("the printer is off".to_owned());
        }
        self.printed.lock().unwrap().push(text);
        Outcome::Applied
    }
}

impl Printer {
    fn asked(&self) -> usize {
        self.asked.load(Ordering::SeqCst)
    }
}

/// A handler given as a closure.
struct By<F>(F);

impl<F: Fn(&Wish) -> Outcome + Send + Sync + 'static> CarryOut for By<F> {
    fn carry_out(&self, wish: &Wish) -> Outcome {
        (self.0)(wish)
    }
}

fn settings(footers: impl CarryOut) -> Settings {
    Settings {
        wishes: Wishes::new().on("footers", footers).on("screens", Direct),
        wishes_timeout: Duration::from_millis(500),
        ..Settings::default()
    }
}

fn me_bytes() -> Vec<u8> {
    me().as_bytes().to_vec()
}

/// A register provisioned with nothing, holding its own footer and screen.
fn register(footers: impl CarryOut) -> (Shop, Replica, Server) {
    register_with(settings(footers))
}

/// `register` with settings of the test's own.
fn register_with(settings: Settings) -> (Shop, Replica, Server) {
    let shop = Shop::with_schema(SCHEMA);
    let mut replica = shop.open_with_settings(tables(), settings);
    let mut server = Server::new();
    apply(&mut replica, &server.nothing(&["sync_wishes"]));
    write_footer(&replica, "Thank you", T0);
    replica
        .connection()
        .execute(
            "INSERT INTO screens VALUES (?1, 50, 1)",
            rusqlite::params![me_bytes()],
        )
        .unwrap();
    (shop, replica, server)
}

fn write_footer(replica: &Replica, text: &str, at: &str) {
    replica
        .connection()
        .execute(
            "INSERT INTO footers VALUES (?1, ?2, ?3)
             ON CONFLICT (register_id) DO UPDATE SET text = excluded.text, changed_at = excluded.changed_at",
            rusqlite::params![me_bytes(), text, at],
        )
        .unwrap();
}

fn footer(replica: &Replica) -> (String, String) {
    replica
        .connection()
        .query_row("SELECT text, changed_at FROM footers", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap()
}

fn level(replica: &Replica) -> (i64, i64) {
    replica
        .connection()
        .query_row("SELECT level, version FROM screens", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap()
}

/// A wish as the server sends it: the setting row with the wished columns
/// (and, under if_unchanged, the version it is based on) laid over it.
fn wish(n: u128, table: &str, row: Value, version: u64) -> WireWish {
    WireWish {
        id: uuid(0x3000 + n),
        table: table.to_owned(),
        key: me().to_string(),
        wanted: serde_json::to_vec(&row).unwrap(),
        version,
        note: "the head office".to_owned(),
        ..WireWish::default()
    }
}

fn footer_wish(n: u128, text: &str, based_on: &str, version: u64) -> WireWish {
    wish(
        n,
        "footers",
        json!({"register_id": me().to_string(), "text": text, "changed_at": based_on}),
        version,
    )
}

fn screen_wish(n: u128, level: i64, version: u64) -> WireWish {
    wish(
        n,
        "screens",
        json!({"register_id": me().to_string(), "level": level.to_string(), "version": "1"}),
        version,
    )
}

fn wishes(list: &[WireWish]) -> Part {
    Part(DownTable {
        table: "sync_wishes".to_owned(),
        keys: list.iter().map(|w| w.id.clone()).collect(),
        upserts: list.iter().map(|w| w.encode_to_vec()).collect(),
        ..DownTable::default()
    })
}

fn one(wish: &WireWish) -> Part {
    wishes(std::slice::from_ref(wish))
}

fn withdrawn(ids: &[String]) -> Part {
    Part(DownTable {
        table: "sync_wishes".to_owned(),
        deletes: ids.to_vec(),
        ..DownTable::default()
    })
}

/// What applying the message answered of wishes.
fn answered(received: &Received) -> Vec<Answered> {
    match received {
        Received::Applied { wishes, .. } | Received::Ended { wishes, .. } => wishes.clone(),
        other => panic!("{other:?}"),
    }
}

fn outcomes(answers: &[Answered]) -> Vec<(String, String)> {
    answers
        .iter()
        .map(|a| (a.table.clone(), a.outcome.clone()))
        .collect()
}

/// The answer the replica holds of a wish: (answered, outcome, reason).
fn held_answer(replica: &Replica, id: &str) -> (i64, String, String) {
    replica
        .connection()
        .query_row(
            "SELECT answered, outcome, reason FROM sync_wishes WHERE id = ?1",
            [id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap()
}

fn answered_at(replica: &Replica, id: &str) -> String {
    replica
        .connection()
        .query_row(
            "SELECT answered_at FROM sync_wishes WHERE id = ?1",
            [id],
            |r| r.get(0),
        )
        .unwrap()
}

/// The rows of `table` an Up carries, decoded as the table's JSON.
fn rows_up(up: &Up, table: &str) -> Vec<Value> {
    up.tables
        .iter()
        .filter(|t| t.table == table)
        .flat_map(|t| t.upserts.iter())
        .map(|b| serde_json::from_slice(b).unwrap())
        .collect()
}

fn wishes_up(up: &Up) -> Vec<WireWish> {
    up.tables
        .iter()
        .filter(|t| t.table == "sync_wishes")
        .flat_map(|t| t.upserts.iter())
        .map(|b| WireWish::decode(b.as_slice()).unwrap())
        .collect()
}

/// Every Up the replica has now, each counted sent.
fn say_all(replica: &mut Replica) -> Vec<Up> {
    std::iter::from_fn(|| say(replica)).collect()
}

/// Every Up sent, and filed.
fn send_and_file(replica: &mut Replica) {
    let ups = say_all(replica);
    file_all(replica, &ups);
}

fn file_all(replica: &mut Replica, ups: &[Up]) {
    let uploads: Vec<u64> = ups.iter().flat_map(|u| u.uploads.clone()).collect();
    replica.receive(&encode_filed(uploads)).unwrap();
}

#[test]
fn a_wish_is_carried_out_once_the_message_that_brought_it_commits_and_both_go_up() {
    let printer = Printer::default();
    let (_shop, mut replica, mut server) = register(printer.clone());
    send_and_file(&mut replica);
    let w = footer_wish(1, "Merry Christmas", T0, 4242);
    let received = apply(&mut replica, &server.down(vec![one(&w)]));
    assert_eq!(
        outcomes(&answered(&received)),
        [("footers".to_owned(), "applied".to_owned())]
    );
    assert_eq!(*printer.printed.lock().unwrap(), ["Merry Christmas"]);
    let (text, changed_at) = footer(&replica);
    assert_eq!(text, "Merry Christmas");
    assert!(
        changed_at.as_str() > T0,
        "the version moved on: {changed_at}"
    );
    assert_eq!(changed_at.len(), T0.len(), "six digits and Z: {changed_at}");
    assert_eq!(
        held_answer(&replica, &w.id),
        (4242, "applied".into(), "".into())
    );

    let ups = say_all(&mut replica);
    let up = ups
        .iter()
        .find(|u| !u.tables.is_empty())
        .expect("rows go up");
    let footers = rows_up(up, "footers");
    assert_eq!(footers.len(), 1);
    assert_eq!(footers[0]["text"], "Merry Christmas");
    assert_eq!(footers[0]["changed_at"], changed_at.as_str());
    let answers = wishes_up(up);
    assert_eq!(answers.len(), 1, "the answer goes in the same Up");
    let a = &answers[0];
    assert_eq!(
        (&a.id, &a.table, &a.key, &a.wanted, a.version, &a.note),
        (&w.id, &w.table, &w.key, &w.wanted, w.version, &w.note),
        "the wish as it came"
    );
    assert_eq!((a.answered, a.outcome.as_str()), (4242, "applied"));
    assert!(a.reason.is_empty());
    assert!(
        chrono::DateTime::parse_from_rfc3339(&a.answered_at).is_ok()
            && a.answered_at.ends_with('Z')
            && a.answered_at.split('.').nth(1).map(str::len) == Some(7),
        "RFC 3339, UTC, microseconds: {}",
        a.answered_at
    );
}

#[test]
fn the_printer_off_has_the_wish_wait_and_it_is_applied_when_offered_again() {
    let printer = Printer::default();
    printer.off.store(true, Ordering::SeqCst);
    let (_shop, mut replica, mut server) = register(printer.clone());
    let w = footer_wish(1, "Open on Sundays", T0, 7);
    let received = apply(&mut replica, &server.down(vec![one(&w)]));
    assert_eq!(
        outcomes(&answered(&received)),
        [("footers".to_owned(), "waiting".to_owned())]
    );
    assert_eq!(
        held_answer(&replica, &w.id),
        (7, "waiting".into(), "the printer is off".into())
    );
    assert_eq!(
        footer(&replica).0,
        "Thank you",
        "the register's footer stands"
    );
    assert_eq!(replica.wishes_due().unwrap(), 1);

    printer.off.store(false, Ordering::SeqCst);
    let again = replica.offer_wishes().unwrap();
    assert_eq!(
        outcomes(&again),
        [("footers".to_owned(), "applied".to_owned())]
    );
    assert_eq!(footer(&replica).0, "Open on Sundays");
    assert_eq!(held_answer(&replica, &w.id).1, "applied");
    assert_eq!(replica.wishes_due().unwrap(), 0);
    assert!(
        replica.offer_wishes().unwrap().is_empty(),
        "applied is final"
    );
}

#[test]
fn a_waiting_answer_is_recorded_only_when_its_reason_is_new() {
    let reason = Arc::new(Mutex::new("the printer is off".to_owned()));
    let said = reason.clone();
    let (_shop, mut replica, mut server) = register(By(move |_: &Wish| {
        Outcome::Later(said.lock().unwrap().clone())
    }));
    let w = footer_wish(1, "Open on Sundays", T0, 7);
    apply(&mut replica, &server.down(vec![one(&w)]));
    let first = answered_at(&replica, &w.id);
    send_and_file(&mut replica);
    std::thread::sleep(Duration::from_millis(5));
    assert_eq!(outcomes(&replica.offer_wishes().unwrap()).len(), 1);
    assert_eq!(answered_at(&replica, &w.id), first, "the same reason again");
    assert!(
        say_all(&mut replica).iter().all(|u| u.tables.is_empty()),
        "nothing new goes up"
    );
    *reason.lock().unwrap() = "the printer is out of paper".to_owned();
    replica.offer_wishes().unwrap();
    assert_eq!(
        held_answer(&replica, &w.id).2,
        "the printer is out of paper"
    );
    assert_ne!(answered_at(&replica, &w.id), first);
    let ups = say_all(&mut replica);
    assert_eq!(
        ups.iter()
            .flat_map(wishes_up)
            .map(|a| a.reason)
            .collect::<Vec<_>>(),
        ["the printer is out of paper"]
    );
}

#[test]
fn a_footer_longer_than_40_characters_is_refused_and_the_footer_stands() {
    let printer = Printer::default();
    let (_shop, mut replica, mut server) = register(printer.clone());
    let long = "Thank you for shopping with us, see you soon!";
    let w = footer_wish(1, long, T0, 7);
    apply(&mut replica, &server.down(vec![one(&w)]));
    let (answered, outcome, reason) = held_answer(&replica, &w.id);
    assert_eq!((answered, outcome.as_str()), (7, "refused"));
    assert!(
        reason.contains("longer than the printer's 40 characters"),
        "{reason}"
    );
    assert_eq!(footer(&replica), ("Thank you".to_owned(), T0.to_owned()));
    assert!(
        replica.offer_wishes().unwrap().is_empty(),
        "refused is final"
    );
    assert_eq!(printer.asked(), 1);
    // Withdrawn, it is let go of.
    send_and_file(&mut replica);
    apply(
        &mut replica,
        &server.down(vec![withdrawn(std::slice::from_ref(&w.id))]),
    );
    assert_eq!(
        count(replica.connection(), "SELECT count(*) FROM sync_wishes"),
        0
    );
}

#[test]
fn the_registers_own_change_first_under_if_unchanged_supersedes_the_wish() {
    let printer = Printer::default();
    let (_shop, mut replica, mut server) = register(printer.clone());
    // The technician changes the footer while the head office's form shows
    // the one before.
    write_footer(&replica, "Closed on Mondays", T1);
    let w = footer_wish(1, "Open on Sundays", T0, 7);
    apply(&mut replica, &server.down(vec![one(&w)]));
    let (_, outcome, reason) = held_answer(&replica, &w.id);
    assert_eq!(outcome, "superseded");
    assert!(reason.contains(T1) && reason.contains(T0), "{reason}");
    assert_eq!(printer.asked(), 0, "never offered to the handler");
    assert_eq!(
        footer(&replica),
        ("Closed on Mondays".to_owned(), T1.to_owned())
    );
}

#[test]
fn versions_are_compared_as_text_in_their_canonical_form() {
    let printer = Printer::default();
    let (_shop, mut replica, mut server) = register(printer.clone());
    // The same instant, spelt otherwise, with a digit past the microsecond.
    let w = footer_wish(1, "Open on Sundays", "2026-10-01T10:00:00.0000009+02:00", 7);
    apply(&mut replica, &server.down(vec![one(&w)]));
    assert_eq!(held_answer(&replica, &w.id).1, "applied");
}

#[test]
fn always_wins_over_a_change_made_before_the_wish() {
    let (_shop, mut replica, mut server) = register(Printer::default());
    replica
        .connection()
        .execute("UPDATE screens SET level = 40, version = 2", [])
        .unwrap();
    let w = screen_wish(2, 70, 9);
    apply(&mut replica, &server.down(vec![one(&w)]));
    assert_eq!(held_answer(&replica, &w.id).1, "applied");
    assert_eq!(level(&replica), (70, 3), "an integer version moves one on");
    // A change after it wins until the next wish.
    replica
        .connection()
        .execute("UPDATE screens SET level = 20, version = 4", [])
        .unwrap();
    assert!(replica.offer_wishes().unwrap().is_empty());
    assert_eq!(level(&replica), (20, 4));
}

#[test]
fn a_version_that_cannot_move_answers_the_wish_refused_and_leaves_the_row() {
    let (_shop, mut replica, mut server) = register(Printer::default());
    replica
        .connection()
        .execute("UPDATE screens SET version = ?1", [i64::MAX])
        .unwrap();
    let w = screen_wish(2, 70, 9);
    apply(&mut replica, &server.down(vec![one(&w)]));
    let (_, outcome, reason) = held_answer(&replica, &w.id);
    assert_eq!(outcome, "refused");
    assert!(reason.contains("cannot move"), "{reason}");
    assert_eq!(level(&replica), (50, i64::MAX));
}

#[test]
fn a_write_the_database_refuses_answers_the_wish_refused_with_its_reason() {
    let (_shop, mut replica, mut server) = register(Printer::default());
    let w = screen_wish(2, 150, 9);
    apply(&mut replica, &server.down(vec![one(&w)]));
    let (_, outcome, reason) = held_answer(&replica, &w.id);
    assert_eq!(outcome, "refused");
    assert!(reason.contains("CHECK constraint failed"), "{reason}");
    assert_eq!(level(&replica), (50, 1), "the row as it was");
}

#[test]
fn the_same_wish_carried_out_twice_leaves_the_setting_as_once_does() {
    let printer = Printer::default();
    printer.off.store(true, Ordering::SeqCst);
    let (shop, mut replica, mut server) = register(printer.clone());
    let w = footer_wish(1, "Open on Sundays", T0, 7);
    apply(&mut replica, &server.down(vec![one(&w)]));
    // A copy of the register before it carried the wish out.
    drop(replica);
    let copy = shop.dir.path().join("copy.db");
    std::fs::copy(shop.path(), &copy).unwrap();
    let mut replica = shop.open_with_settings(tables(), settings(printer.clone()));
    printer.off.store(false, Ordering::SeqCst);
    replica.offer_wishes().unwrap();
    let once = footer(&replica).0;
    // Restored from the copy, the register carries the same wish out again.
    drop(replica);
    std::fs::copy(&copy, shop.path()).unwrap();
    let mut replica = shop.open_with_settings(tables(), settings(printer.clone()));
    assert_eq!(footer(&replica).0, "Thank you");
    assert_eq!(outcomes(&replica.offer_wishes().unwrap()).len(), 1);
    assert_eq!(footer(&replica).0, once);
    assert_eq!(held_answer(&replica, &w.id).1, "applied");
    assert_eq!(
        *printer.printed.lock().unwrap(),
        ["Open on Sundays", "Open on Sundays"]
    );
}

#[test]
fn a_handler_that_panics_has_the_wish_wait_and_another_wish_is_still_carried_out() {
    // Each handler runs on a thread of its own, waited for no longer than
    // `wishes_timeout`: 500 ms would answer "did not answer within" for a
    // thread a loaded machine had not yet run (or one still unwinding),
    // and the screen's wish "waiting". Both answer at once; a minute only
    // bounds the wait.
    let (_shop, mut replica, mut server) = register_with(Settings {
        wishes_timeout: Duration::from_secs(60),
        ..settings(By(|_: &Wish| -> Outcome {
            panic!("the printer's driver crashed")
        }))
    });
    let f = footer_wish(1, "Open on Sundays", T0, 7);
    let s = screen_wish(2, 70, 9);
    let received = apply(
        &mut replica,
        &server.down(vec![wishes(&[f.clone(), s.clone()])]),
    );
    assert_eq!(
        outcomes(&answered(&received)),
        [
            ("footers".to_owned(), "waiting".to_owned()),
            ("screens".to_owned(), "applied".to_owned())
        ]
    );
    let (_, _, reason) = held_answer(&replica, &f.id);
    assert!(
        reason.contains("panicked: the printer's driver crashed"),
        "{reason}"
    );
    assert_eq!(footer(&replica).0, "Thank you");
    assert_eq!(level(&replica).0, 70);
}

#[test]
fn a_handler_that_does_not_answer_in_time_has_the_wish_wait_and_records_nothing_later() {
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let (_shop, mut replica, mut server) = register(By(move |_: &Wish| {
        counted.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(1_500));
        Outcome::Applied
    }));
    let f = footer_wish(1, "Open on Sundays", T0, 7);
    let s = screen_wish(2, 70, 9);
    let received = apply(
        &mut replica,
        &server.down(vec![wishes(&[f.clone(), s.clone()])]),
    );
    assert_eq!(
        outcomes(&answered(&received)),
        [
            ("footers".to_owned(), "waiting".to_owned()),
            ("screens".to_owned(), "applied".to_owned())
        ],
        "one wish's trouble never holds back another's"
    );
    let (_, _, reason) = held_answer(&replica, &f.id);
    assert!(reason.contains("did not answer within"), "{reason}");
    // Offered again while the handler is still at it: not offered twice.
    assert!(replica.offer_wishes().unwrap().is_empty());
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    std::thread::sleep(Duration::from_millis(1_800));
    assert_eq!(
        held_answer(&replica, &f.id).1,
        "waiting",
        "the late answer is heard by nobody"
    );
    assert_eq!(footer(&replica).0, "Thank you");
}

#[test]
fn a_wish_of_a_row_not_held_yet_waits_and_is_carried_out_once_the_row_is_there() {
    let shop = Shop::with_schema(SCHEMA);
    let printer = Printer::default();
    let mut replica = shop.open_with_settings(tables(), settings(printer.clone()));
    let mut server = Server::new();
    apply(&mut replica, &server.nothing(&["sync_wishes"]));
    let w = footer_wish(1, "Open on Sundays", T0, 7);
    apply(&mut replica, &server.down(vec![one(&w)]));
    assert_eq!(
        held_answer(&replica, &w.id),
        (
            7,
            "waiting".into(),
            "the replica holds no such row yet".into()
        )
    );
    assert_eq!(
        count(replica.connection(), "SELECT count(*) FROM footers"),
        0,
        "it never writes one"
    );
    assert_eq!(printer.asked(), 0);
    write_footer(&replica, "Thank you", T0);
    assert_eq!(
        outcomes(&replica.offer_wishes().unwrap()),
        [("footers".to_owned(), "applied".to_owned())]
    );
    assert_eq!(footer(&replica).0, "Open on Sundays");
}

#[test]
fn a_withdrawn_wish_is_let_go_of_and_never_carried_out() {
    let printer = Printer::default();
    printer.off.store(true, Ordering::SeqCst);
    let (_shop, mut replica, mut server) = register(printer.clone());
    let w = footer_wish(1, "Open on Sundays", T0, 7);
    apply(&mut replica, &server.down(vec![one(&w)]));
    send_and_file(&mut replica);
    apply(
        &mut replica,
        &server.down(vec![withdrawn(std::slice::from_ref(&w.id))]),
    );
    assert_eq!(
        count(replica.connection(), "SELECT count(*) FROM sync_wishes"),
        0
    );
    printer.off.store(false, Ordering::SeqCst);
    assert!(replica.offer_wishes().unwrap().is_empty());
    assert_eq!(footer(&replica).0, "Thank you");
}

#[test]
fn a_wish_withdrawn_before_its_answer_is_filed_is_retired_until_it_is() {
    let printer = Printer::default();
    printer.off.store(true, Ordering::SeqCst);
    let (_shop, mut replica, mut server) = register(printer.clone());
    let w = footer_wish(1, "Open on Sundays", T0, 7);
    apply(&mut replica, &server.down(vec![one(&w)]));
    apply(
        &mut replica,
        &server.down(vec![withdrawn(std::slice::from_ref(&w.id))]),
    );
    assert_eq!(
        count(
            replica.connection(),
            "SELECT count(*) FROM sync_wishes WHERE retired_at IS NOT NULL"
        ),
        1
    );
    printer.off.store(false, Ordering::SeqCst);
    assert!(
        replica.offer_wishes().unwrap().is_empty(),
        "a retired wish is not carried out"
    );
    let ups = say_all(&mut replica);
    assert_eq!(
        ups.iter()
            .flat_map(wishes_up)
            .map(|a| a.outcome)
            .collect::<Vec<_>>(),
        ["waiting"],
        "its answer still goes up"
    );
    file_all(&mut replica, &ups);
    assert_eq!(
        count(replica.connection(), "SELECT count(*) FROM sync_wishes"),
        0
    );
}

#[test]
fn the_replica_takes_no_answer_from_a_message() {
    let printer = Printer::default();
    let (_shop, mut replica, mut server) = register(printer.clone());
    let mut w = footer_wish(1, "Open on Sundays", T0, 7);
    w.answered = 7;
    w.outcome = "refused".to_owned();
    w.reason = "said by the server".to_owned();
    apply(&mut replica, &server.down(vec![one(&w)]));
    assert_eq!(
        held_answer(&replica, &w.id),
        (7, "applied".into(), "".into())
    );
    // Sent again, the wish keeps the replica's answer.
    w.outcome = "waiting".to_owned();
    apply(&mut replica, &server.down(vec![one(&w)]));
    assert_eq!(held_answer(&replica, &w.id).1, "applied");
    assert_eq!(printer.asked(), 1);
}

#[test]
fn a_wish_replaced_is_carried_out_under_its_new_version() {
    let printer = Printer::default();
    printer.off.store(true, Ordering::SeqCst);
    let (_shop, mut replica, mut server) = register(printer.clone());
    let first = footer_wish(1, "Open on Sundays", T0, 7);
    apply(&mut replica, &server.down(vec![one(&first)]));
    printer.off.store(false, Ordering::SeqCst);
    let replaced = footer_wish(1, "Open every day", T0, 8);
    let received = apply(&mut replica, &server.down(vec![one(&replaced)]));
    assert_eq!(outcomes(&answered(&received)).len(), 1);
    assert_eq!(
        held_answer(&replica, &first.id),
        (8, "applied".into(), "".into())
    );
    assert_eq!(footer(&replica).0, "Open every day");
}

#[test]
fn an_answer_is_recorded_only_while_the_wish_held_is_the_one_answered() {
    let shop = Shop::with_schema(SCHEMA);
    let path = shop.path();
    let w = footer_wish(1, "Open on Sundays", T0, 7);
    let id = w.id.clone();
    let replaced = Arc::new(AtomicBool::new(false));
    let once = replaced.clone();
    // While its handler carries the wish out, the server replaces it (as a
    // message applied meanwhile would).
    let handler = By(move |wish: &Wish| {
        if !once.swap(true, Ordering::SeqCst) {
            let other = connect(&path);
            other
                .execute_batch(&format!(
                    "BEGIN; UPDATE sync_state SET writing = 1;
                     UPDATE sync_wishes SET version = 8 WHERE id = '{id}';
                     UPDATE sync_state SET writing = 0; COMMIT;"
                ))
                .unwrap();
        }
        assert!(wish.version == 7 || wish.version == 8);
        Outcome::Applied
    });
    let mut replica = shop.open_with_settings(tables(), settings(handler));
    let mut server = Server::new();
    apply(&mut replica, &server.nothing(&["sync_wishes"]));
    write_footer(&replica, "Thank you", T0);
    let received = apply(&mut replica, &server.down(vec![one(&w)]));
    // The answer to 7 is not recorded, nor its row written: the wish
    // replaced is carried out next, and answered.
    assert_eq!(
        outcomes(&answered(&received)),
        [("footers".to_owned(), "applied".to_owned())]
    );
    assert_eq!(
        held_answer(&replica, &w.id),
        (8, "applied".into(), "".into())
    );
    // Written by the register, then once for the wish answered.
    let writes = count(
        replica.connection(),
        "SELECT writes FROM sync_notes WHERE table_name = 'footers'",
    );
    assert_eq!(writes, 2);
    let (text, changed_at) = footer(&replica);
    assert_eq!(text, "Open on Sundays");
    assert!(changed_at.as_str() > T0);
}

#[test]
fn a_wish_of_another_replica_or_of_another_row_is_refused() {
    let (_shop, mut replica, mut server) = register(Printer::default());
    let other = uuid(0x77);
    let mut theirs = wish(
        1,
        "footers",
        json!({"register_id": other, "text": "Not yours", "changed_at": T0}),
        7,
    );
    theirs.key = other.clone();
    let mut beside = footer_wish(2, "Not this row", T0, 8);
    beside.key = uuid(0x78);
    apply(
        &mut replica,
        &server.down(vec![wishes(&[theirs.clone(), beside.clone()])]),
    );
    let (_, outcome, reason) = held_answer(&replica, &theirs.id);
    assert_eq!(outcome, "refused");
    assert!(reason.contains("another replica's"), "{reason}");
    let (_, outcome, reason) = held_answer(&replica, &beside.id);
    assert_eq!(outcome, "refused");
    assert!(reason.contains("not the row"), "{reason}");
    assert_eq!(footer(&replica).0, "Thank you");
}

#[test]
fn a_wish_of_a_table_this_build_holds_as_no_setting_waits_for_a_build_that_does() {
    let (_shop, mut replica, mut server) = register(Printer::default());
    let w = wish(1, "brightness", json!({"register_id": me().to_string()}), 7);
    apply(&mut replica, &server.down(vec![one(&w)]));
    let (_, outcome, reason) = held_answer(&replica, &w.id);
    assert_eq!(outcome, "waiting");
    assert!(reason.contains("no setting `brightness`"), "{reason}");
}

#[test]
fn no_wish_is_carried_out_while_a_snapshot_is_in_progress() {
    let printer = Printer::default();
    let (_shop, mut replica, mut server) = register(printer.clone());
    let w = footer_wish(1, "Open on Sundays", T0, 7);
    let received = apply(&mut replica, &server.begin(vec![one(&w)]));
    assert!(answered(&received).is_empty());
    assert_eq!(printer.asked(), 0);
    assert!(replica.offer_wishes().unwrap().is_empty());
    let ended = apply(&mut replica, &server.end(&["sync_wishes"]));
    assert_eq!(
        outcomes(&answered(&ended)),
        [("footers".to_owned(), "applied".to_owned())]
    );
}

#[test]
fn a_snapshot_re_states_every_answer_and_lets_go_of_wishes_it_does_not_name() {
    let (_shop, mut replica, mut server) = register(Printer::default());
    let kept = footer_wish(1, "Open on Sundays", T0, 7);
    let gone = screen_wish(2, 70, 9);
    apply(
        &mut replica,
        &server.down(vec![wishes(&[kept.clone(), gone.clone()])]),
    );
    send_and_file(&mut replica);
    apply(&mut replica, &server.begin(vec![one(&kept)]));
    let ups = say_all(&mut replica);
    let restated: Vec<WireWish> = ups
        .iter()
        .flat_map(|u| u.tables.iter())
        .filter(|t| t.table == "sync_wishes" && t.restated)
        .flat_map(|t| t.upserts.iter())
        .map(|b| WireWish::decode(b.as_slice()).unwrap())
        .collect();
    let mut ids: Vec<String> = restated.iter().map(|a| a.id.clone()).collect();
    ids.sort();
    assert_eq!(ids, [kept.id.clone(), gone.id.clone()]);
    assert!(restated.iter().all(|a| a.outcome == "applied"));
    file_all(&mut replica, &ups);
    apply(&mut replica, &server.end(&["sync_wishes"]));
    assert_eq!(
        strings(replica.connection(), "SELECT id FROM sync_wishes"),
        std::slice::from_ref(&kept.id)
    );
    assert_eq!(
        held_answer(&replica, &kept.id).1,
        "applied",
        "the answer held stands"
    );
}

#[test]
fn digests_say_each_wish_held_and_its_answer() {
    let printer = Printer::default();
    printer.off.store(true, Ordering::SeqCst);
    let shop = Shop::with_schema(SCHEMA);
    let mut replica = shop.open_with_settings(
        tables(),
        Settings {
            digests_every: Duration::ZERO,
            ..settings(printer.clone())
        },
    );
    let mut server = Server::new();
    apply(&mut replica, &server.nothing(&["sync_wishes"]));
    write_footer(&replica, "Thank you", T0);
    let applied = screen_wish(2, 70, 9);
    let unanswered = footer_wish(1, "Open on Sundays", T0, 7);
    // The screen's wish is applied at once; the footer's waits for a row
    // the register does not hold yet (it deletes its footer first).
    replica
        .connection()
        .execute("DELETE FROM footers", [])
        .unwrap();
    replica
        .connection()
        .execute("INSERT INTO screens VALUES (?1, 50, 1)", [me_bytes()])
        .unwrap();
    apply(
        &mut replica,
        &server.down(vec![wishes(&[applied.clone(), unanswered.clone()])]),
    );
    // Unanswered as far as the server knows: answered for another version.
    replica
        .connection()
        .execute_batch(&format!(
            "UPDATE sync_state SET writing = 1;
             UPDATE sync_wishes SET version = 6 WHERE id = '{}';
             UPDATE sync_state SET writing = 0;",
            unanswered.id
        ))
        .unwrap();
    // Digests are due in every Up here: the first few carry the rows.
    let ups: Vec<Up> = (0..3).filter_map(|_| say(&mut replica)).collect();
    file_all(&mut replica, &ups);
    let up = say(&mut replica).expect("digests are due");
    let digest = up
        .digests
        .iter()
        .find(|d| d.table == "sync_wishes")
        .expect("a digest of sync_wishes");
    assert_eq!(digest.count, 2);
    assert_eq!(
        digest.fingerprint,
        fingerprint([
            wish_line(&applied.id, Some(("9", "applied"))),
            wish_line(&unanswered.id, None),
        ])
    );
}

#[test]
fn a_build_without_wishes_refuses_a_wish_as_a_row_it_cannot_take() {
    let (_shop, mut replica, mut server) = provisioned();
    let w = footer_wish(1, "Open on Sundays", T0, 7);
    let received = apply(&mut replica, &server.down(vec![one(&w)]));
    let Received::Applied {
        rejected, wishes, ..
    } = received
    else {
        panic!("{received:?}");
    };
    assert!(wishes.is_empty());
    assert_eq!(rejected.len(), 1);
    assert_eq!(
        (rejected[0].table.as_str(), rejected[0].key.as_str()),
        ("sync_wishes", w.id.as_str())
    );
    assert!(
        rejected[0]
            .reason
            .contains("does not hold table `sync_wishes`"),
        "{}",
        rejected[0].reason
    );
    let up = say(&mut replica).unwrap();
    assert_eq!(up.rejected.len(), 1, "it shows as set aside on the server");
}

#[test]
fn opening_a_replica_with_a_setting_and_no_handler_is_refused_naming_the_table() {
    let shop = Shop::with_schema(SCHEMA);
    let mut conn = shop.connect();
    magic_sync_replica::install(&mut conn, &tables()).unwrap();
    let only_screens = Settings {
        wishes: Wishes::new().on("screens", Direct),
        ..Settings::default()
    };
    let error = Replica::open(conn, tables(), me(), only_screens)
        .err()
        .expect("refused")
        .to_string();
    assert!(error.contains("`footers` is a setting"), "{error}");
    assert!(!error.contains("`screens`"), "{error}");
    let conn = shop.connect();
    let stray = Settings {
        wishes: Wishes::new()
            .on("footers", Direct)
            .on("screens", Direct)
            .on("receipts", Direct),
        ..Settings::default()
    };
    let error = Replica::open(conn, tables(), me(), stray)
        .err()
        .expect("refused")
        .to_string();
    assert!(error.contains("`receipts`, which is no setting"), "{error}");
}

#[test]
fn a_tool_that_opens_the_replica_as_recorded_holds_wishes_and_carries_none_out() {
    let printer = Printer::default();
    let (shop, mut replica, mut server) = register(printer.clone());
    printer.off.store(true, Ordering::SeqCst);
    let w = footer_wish(1, "Open on Sundays", T0, 7);
    apply(&mut replica, &server.down(vec![one(&w)]));
    drop(replica);
    let mut tool = Replica::open_recorded(shop.connect(), Settings::default()).unwrap();
    assert!(tool.offer_wishes().unwrap().is_empty());
    assert_eq!(tool.wishes_due().unwrap(), 0);
    assert_eq!(held_answer(&tool, &w.id).1, "waiting");
}

#[test]
fn a_reason_is_cut_to_512_bytes_at_a_character() {
    let (_shop, mut replica, mut server) =
        register(By(|_: &Wish| Outcome::Refused("é".repeat(400))));
    let w = footer_wish(1, "Open on Sundays", T0, 7);
    apply(&mut replica, &server.down(vec![one(&w)]));
    let (_, outcome, reason) = held_answer(&replica, &w.id);
    assert_eq!(outcome, "refused");
    assert_eq!(reason, "é".repeat(256));
}

#[test]
fn the_engines_triggers_keep_what_the_server_wished_from_the_program() {
    let (shop, mut replica, mut server) = register(Printer::default());
    let w = footer_wish(1, "Open on Sundays", T0, 7);
    apply(&mut replica, &server.down(vec![one(&w)]));
    let conn = replica.connection();
    let edit = conn.execute("UPDATE sync_wishes SET wanted = x'00'", []);
    assert!(
        edit.unwrap_err()
            .to_string()
            .contains("the replica writes only answered"),
        "a column the server owns"
    );
    let made = conn.execute("INSERT INTO sync_wishes (id) VALUES (?1)", [uuid(0x3009)]);
    assert!(made
        .unwrap_err()
        .to_string()
        .contains("begins on the server"));
    let gone = conn.execute("DELETE FROM sync_wishes", []);
    assert!(gone.is_err(), "the replica deletes no wish");
    // What a program's migrations paste carries them too.
    let printed = magic_sync_replica::triggers(&shop.connect(), &tables()).unwrap();
    assert!(
        printed.contains("sync_sync_wishes_refuse_insert"),
        "{printed}"
    );
}

#[test]
fn the_triggers_printed_for_migrations_without_the_engines_tables_cover_the_wishes() {
    let conn = rusqlite::Connection::open_in_memory().unwrap();
    conn.execute_batch(SCHEMA).unwrap();
    let printed = magic_sync_replica::triggers(&conn, &tables()).unwrap();
    assert!(printed.contains("ON \"sync_wishes\""), "{printed}");
    assert!(printed.contains("sync_footers_note_update"), "{printed}");
}

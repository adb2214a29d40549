//! Fuzzing the server's `sync.receive` (issue 12, "Crash loops and bad
//! bytes"): a real PostgreSQL with the extension and the filing shop
//! (tests/common/filing_shop.rs), three registers, the Ups real replicas
//! built for two of them (receipts, a two-way row's own column, settings
//! written and deleted, what they applied, their digests and backlogs), and
//! mutations of those Ups (tests/src/fuzz.rs) and arbitrary bytes, every one
//! handed to `sync.receive` under register A in one connection.
//!
//! Of every input: the backend stays up (the connection answers, and so
//! does another, which a crash would have ended); the call answers a named
//! verdict, or raises an error whose SQLSTATE says the bytes are no Up
//! (22P03) or speak a later protocol (0A000), and then nothing changed;
//! nothing changed either when the Up is dropped as malformed; and nothing
//! is filed under any register but A: no row of another register's in the
//! shop's tables, nothing of another's in the engine's.
//!
//! CI runs 1,000 cases; `MAGIC_SYNC_FUZZ_CASES`, `MAGIC_SYNC_FUZZ_SEED` (a
//! number or `random`) and `MAGIC_SYNC_FUZZ_CASE` run others
//! (docs/src/testing.md). A case depends on the cases before it (the server
//! keeps what it filed), so a case replays with the same seed and the
//! cases before it.

mod common;
#[path = "common/filing_shop.rs"]
mod shop;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use magic_sync_replica::queue;
use magic_sync_replica::{Replica, Settings};
use magic_sync_tests::fuzz::replica::{self, Corpus};
use magic_sync_tests::fuzz::{hex, known_keys, Run};
use postgres::Client;
use serde_json::Value;
use shop::*;
use uuid::Uuid;

/// The cases CI runs: a few seconds.
const CI_CASES: u64 = 1_000;

/// Every table of the shop and the engine as one digest each: of the rows
/// of any register but `$1`, and of everything. A table with a column
/// naming a register (`replica`, `register_id`) counts the rows of the
/// others; the registers and the engine's replicas by their id; the
/// catalog whole, as no register writes it.
const DIGESTS: &str = "
CREATE FUNCTION public.fuzz_digests(a uuid, OUT others text, OUT everything text,
                                    OUT beside_answers text)
LANGUAGE plpgsql AS $$
DECLARE
    t record;
    whole text;
    theirs text;
BEGIN
    others := '';
    everything := '';
    beside_answers := '';
    FOR t IN
        SELECT n.nspname AS nsp, c.relname AS rel,
               (SELECT a.attname FROM pg_attribute a
                 WHERE a.attrelid = c.oid AND NOT a.attisdropped
                   AND a.attname IN ('replica', 'register_id')
                 ORDER BY a.attname LIMIT 1) AS owner
          FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname IN ('sync', 'shop') AND c.relkind IN ('r', 'p')
         ORDER BY 1, 2
    LOOP
        EXECUTE format('SELECT coalesce(md5(string_agg(r::text, ''|'' ORDER BY r::text)), '''') FROM %I.%I r',
                       t.nsp, t.rel) INTO whole;
        everything := everything || t.nsp || '.' || t.rel || '=' || whole || ' ';
        IF (t.nsp, t.rel) NOT IN (('sync', 'outbox'), ('sync', 'answered')) THEN
            beside_answers := beside_answers || t.nsp || '.' || t.rel || '=' || whole || ' ';
        END IF;
        theirs := NULL;
        IF t.owner IS NOT NULL THEN
            EXECUTE format('SELECT coalesce(md5(string_agg(r::text, ''|'' ORDER BY r::text)), '''') FROM %I.%I r WHERE %I <> $1',
                           t.nsp, t.rel, t.owner) INTO theirs USING a;
        ELSIF (t.nsp, t.rel) IN (('sync', 'replicas'), ('shop', 'registers')) THEN
            EXECUTE format('SELECT coalesce(md5(string_agg(r::text, ''|'' ORDER BY r::text)), '''') FROM %I.%I r WHERE id <> $1',
                           t.nsp, t.rel) INTO theirs USING a;
        ELSIF (t.nsp, t.rel) = ('shop', 'products') THEN
            theirs := whole;
        END IF;
        IF theirs IS NOT NULL THEN
            others := others || t.nsp || '.' || t.rel || '=' || theirs || ' ';
        END IF;
    END LOOP;
END $$;
";

#[derive(Clone, Debug, PartialEq, Eq)]
struct Digests {
    others: String,
    everything: String,
    /// Everything but the answers to uploads (the outbox's Filed, the
    /// numbers answered): all a redelivered Up may change.
    beside_answers: String,
}

fn digests(pg: &mut Client, a: Uuid) -> Digests {
    let row = pg
        .query_one(
            "SELECT others, everything, beside_answers FROM public.fuzz_digests($1)",
            &[&a],
        )
        .expect("the digests");
    Digests {
        others: row.get(0),
        everything: row.get(1),
        beside_answers: row.get(2),
    }
}

/// Settings that make a register say its digests in every Up.
fn saying_digests() -> Settings {
    Settings {
        digests_every: Duration::ZERO,
        wishes: common::carried_out_directly(&tables()),
        ..Settings::default()
    }
}

/// Takes, applies and acknowledges what waits for a register, keeping its
/// file as it stood before each message, and the message.
fn deliver_keeping(pg: &mut Client, register: &mut Replica, kept: &mut Corpus) {
    while let Some((id, message)) = queue::next(pg, register).unwrap() {
        kept.before(register, &message);
        register
            .receive(&message)
            .expect("a message of the relay applies");
        queue::ack(pg, register, &id).unwrap();
    }
}

/// Sends up what a register has to say, keeping each Up's bytes, and takes
/// the answers. Saying its digests every time, it always has more to say:
/// it stops at the first Up after the rows that carries none.
fn upload_all(
    pg: &mut Client,
    register: &mut Replica,
    corpus: &mut Vec<Vec<u8>>,
    kept: &mut Corpus,
) {
    for sent in 0..50 {
        let Some(up) = register.next_up().unwrap() else {
            break;
        };
        corpus.push(up.bytes.clone());
        pg.query_one("SELECT sync.receive($1, $2)", &[&register.me(), &up.bytes])
            .expect("a valid Up is filed");
        register.sent(&up).unwrap();
        if sent > 0 && up.message().tables.is_empty() {
            break;
        }
    }
    deliver_keeping(pg, register, kept);
}

/// A register writes what goes up: receipts, its battery, its footers
/// (one written, one changed, one deleted).
fn write_a_day(register: &Replica, day: u32) {
    sell(register, &[100 * i64::from(day), 250, 0]);
    let conn = register.connection();
    conn.execute("UPDATE register_state SET battery = ?1", [80 - day])
        .unwrap();
    let me = register.me().as_bytes().to_vec();
    let footer = Uuid::from_u128(u128::from(day)).as_bytes().to_vec();
    conn.execute(
        "INSERT INTO footers (register_id, id, text, changed_at) VALUES (?1, ?2, 'Thanks', ?3)",
        rusqlite::params![me, footer, format!("2026-10-0{day}T10:00:00.000000Z")],
    )
    .unwrap();
    conn.execute(
        "UPDATE footers SET text = text || '!', changed_at = ?2 WHERE register_id = ?1",
        rusqlite::params![me, format!("2026-10-0{day}T11:00:00.000000Z")],
    )
    .unwrap();
    if day > 1 {
        let yesterday = Uuid::from_u128(u128::from(day - 1)).as_bytes().to_vec();
        conn.execute("DELETE FROM footers WHERE id = ?1", [yesterday])
            .unwrap();
    }
}

/// What the scene leaves: the shop, register A, the Ups A and B built,
/// and A's file before each message the relay sent it.
struct Scene {
    shop: Shop,
    a: Uuid,
    ups: Vec<Vec<u8>>,
    downs: Corpus,
}

/// The shop with registers A, B and C (C never connects), A and B
/// provisioned and having sent up three days' writes.
fn scene() -> Scene {
    let mut shop = Shop::open();
    shop.run(
        "INSERT INTO shop.products (id, name, price_cents) VALUES (gen_random_uuid(), 'Tea', 250)",
    );
    let (a, b) = (shop.add_register("A"), shop.add_register("B"));
    shop.add_register("C");
    let mut registers = [
        open_register_with(&shop.file_of(a), a, saying_digests()),
        open_register_with(&shop.file_of(b), b, saying_digests()),
    ];
    let (mut ups, mut downs, mut bs) = (Vec::new(), Corpus::new(), Corpus::new());
    for day in 1..=3 {
        shop.relay();
        for register in registers.iter_mut() {
            let kept = if register.me() == a {
                &mut downs
            } else {
                &mut bs
            };
            deliver_keeping(&mut shop.pg, register, kept);
            write_a_day(register, day);
            upload_all(&mut shop.pg, register, &mut ups, kept);
        }
        shop.run(&format!(
            "UPDATE shop.products SET price_cents = {}",
            250 + day
        ));
    }
    shop.pg.batch_execute(DIGESTS).unwrap();
    Scene {
        shop,
        a,
        ups,
        downs,
    }
}

/// What `sync.receive` answered: a verdict by name, or an error's SQLSTATE.
fn answer_name(answer: &Result<Value, postgres::Error>) -> String {
    match answer {
        Ok(verdict) => verdict["verdict"]
            .as_str()
            .unwrap_or("(no verdict)")
            .to_owned(),
        Err(e) => match e.code() {
            Some(code) => format!("error {}", code.code()),
            None => format!("no answer: {e}"),
        },
    }
}

/// The verdicts `sync.receive` answers.
const VERDICTS: [&str; 4] = ["filed", "malformed", "unknown sender", "redelivered"];

/// The errors it may raise of an input: no Up at all, a later protocol.
const SQLSTATES: [&str; 2] = ["22P03", "0A000"];

/// One case: the Up handed over under A, and what it changed held to its
/// answer.
fn run_case(
    pg: &mut Client,
    a: Uuid,
    before: &Digests,
    bytes: &[u8],
    at: &str,
) -> (Vec<String>, Digests) {
    let answer = pg
        .query_one("SELECT sync.receive($1, $2)::text", &[&a, &bytes])
        .map(|row| serde_json::from_str::<Value>(&row.get::<_, String>(0)).expect("jsonb"));
    let name = answer_name(&answer);
    let what = format!("{at}: answered {name} to {}", hex(bytes));
    assert!(!pg.is_closed(), "{what}: the backend is gone");
    let after = digests(pg, a);
    match &answer {
        Ok(verdict) => {
            assert!(VERDICTS.contains(&name.as_str()), "{what}: {verdict}");
            match name.as_str() {
                "filed" => {}
                // The same Up again: answered again, and nothing else.
                "redelivered" => assert_eq!(
                    before.beside_answers, after.beside_answers,
                    "{what}: a redelivered Up changed more than the answers"
                ),
                _ => assert_eq!(
                    before, &after,
                    "{what}: an Up not filed changed the database"
                ),
            }
        }
        Err(e) => {
            let code = e.code().map(|c| c.code().to_owned());
            assert!(
                code.as_deref().is_some_and(|c| SQLSTATES.contains(&c)),
                "{what}: an input may raise only {SQLSTATES:?}, and raised {e:?}"
            );
            assert_eq!(
                before, &after,
                "{what}: an Up that raised an error changed the database"
            );
        }
    }
    assert_eq!(
        before.others, after.others,
        "{what}: something changed under another register"
    );
    let mut names = vec![name];
    if let Ok(verdict) = &answer {
        names.extend(reach(verdict));
    }
    (names, after)
}

/// How far into filing an answer says the Up went: its parts' outcomes and
/// what else it judged, by name.
fn reach(verdict: &Value) -> Vec<String> {
    let mut names = Vec::new();
    for part in verdict["rows"].as_array().into_iter().flatten() {
        for outcome in [
            "filed",
            "unchanged",
            "deleted",
            "kept",
            "waiting",
            "left_out",
        ] {
            let some = match &part[outcome] {
                Value::Number(n) => n.as_u64() != Some(0),
                Value::Array(a) => !a.is_empty(),
                _ => false,
            };
            if some {
                names.push(format!("  a part with rows {outcome}"));
            }
        }
    }
    for said in [
        "rejections",
        "applied",
        "gap",
        "digests",
        "backlog",
        "answered",
    ] {
        if !verdict[said].is_null() {
            names.push(format!("  {said} judged"));
        }
    }
    names
}

/// Takes every `Filed` waiting for `a` off the queue.
fn take_the_answers(pg: &mut Client, a: Uuid) {
    pg.execute(
        "DELETE FROM sync.outbox WHERE replica = $1 AND kind = 'filed'",
        &[&a],
    )
    .expect("the answers taken");
}

/// The backend that ran the cases and another connection both answer: a
/// backend that crashed would have taken every connection with it.
fn assert_server_up(pg: &mut Client, watcher: &mut Client, at: &str) {
    pg.simple_query("SELECT 1")
        .unwrap_or_else(|e| panic!("{at}: the backend is gone: {e}"));
    watcher
        .simple_query("SELECT 1")
        .unwrap_or_else(|e| panic!("{at}: the server restarted: {e}"));
}

#[test]
fn sync_receive_answers_every_mutated_up_by_name_and_files_nothing_under_another_replica() {
    let run = Run::from_env(CI_CASES);
    let Scene {
        mut shop,
        a,
        ups: corpus,
        ..
    } = scene();
    assert!(
        corpus.len() >= 10,
        "the registers built {} Ups",
        corpus.len()
    );
    let known = known_keys(&[], &corpus);
    let mut watcher = shop.cluster.connect("shop");
    eprintln!(
        "fuzzing sync.receive: seed {}, {} cases, {} Ups to start from",
        run.seed,
        run.cases,
        corpus.len()
    );
    let started = Instant::now();
    let mut tally: BTreeMap<String, u64> = BTreeMap::new();
    let mut before = digests(&mut shop.pg, a);
    for case in run.numbers_with_those_before() {
        let at = run.replay(case);
        let mut mutator = run.mutator(case).knowing(&known);
        let base = mutator.pick(&corpus).clone();
        let bytes = mutator.up(&base, &corpus);
        let (names, after) = run_case(&mut shop.pg, a, &before, &bytes, &at);
        for name in names {
            *tally.entry(name).or_default() += 1;
        }
        before = after;
        if case % 100 == 99 {
            assert_server_up(&mut shop.pg, &mut watcher, &at);
        }
        if case % 1_000 == 999 {
            // A's transport takes the answers, as it would: the digests
            // read every table, and a long run would slow down as they grow.
            take_the_answers(&mut shop.pg, a);
            before = digests(&mut shop.pg, a);
        }
        if case % 10_000 == 9_999 {
            eprintln!("{} cases, {:?}", case + 1, started.elapsed());
        }
    }
    assert_server_up(&mut shop.pg, &mut watcher, "after the cases");
    let ran = run.numbers_with_those_before().count();
    eprintln!("{ran} cases in {:?}:", started.elapsed());
    for (name, n) in &tally {
        eprintln!("  {n:>8}  {name}");
    }
    if run.only.is_none() && run.cases >= CI_CASES {
        assert!(
            tally.get("filed").copied().unwrap_or(0) > run.cases / 4,
            "few mutated Ups were filed: {tally:?}"
        );
    }
}

#[test]
fn receive_answers_every_mutated_message_of_a_real_relay_by_name_and_applies_it_whole_or_not_at_all(
) {
    let run = Run::from_env(CI_CASES);
    let Scene { a, downs, .. } = scene();
    assert!(downs.states.len() >= 6, "{} messages", downs.states.len());
    eprintln!(
        "fuzzing the replica's receive over a real relay's messages: seed {}, {} cases",
        run.seed, run.cases
    );
    let open =
        |conn| Replica::open(conn, tables(), a, saying_digests()).expect("the replica opens");
    let tally = replica::fuzz(&run, &downs, &open);
    if run.only.is_none() && run.cases >= CI_CASES {
        assert!(tally.of("applied") > 0, "none applied: {tally:?}");
    }
}

//! Writes the golden vectors of what replicas send up, and what the server
//! makes of each: tests/golden/to_server.txt and to_server_verdicts.txt
//! (protocol section 10). Run with
//!
//!     cargo run -p magic_sync_tests --example golden_to_server
//!
//! with the extension installed. The server's messages are written here,
//! deterministically (fixed epochs, numbers, nonces), and sealed under a
//! fixed secret; a real replica (the library, on a SQLite file) applies
//! them and builds every Up; a real server (a throwaway cluster, the scene
//! of tests/common/golden_to_server.rs) files each and says what it made of
//! it. Each Up's upload number is set to a fixed one so the files are the
//! same every time they are written; the replica is answered under the
//! number it drew. tests/to_server_golden.rs replays both files.

#[path = "../tests/common/golden_to_server.rs"]
mod golden;

use std::path::{Path, PathBuf};

use golden::{hex, Line, EPOCH, SECRET};
use magic_sync_proto::wire::{
    to_replica::Body, Down, DownTable, EndSnapshot, Filed, ToReplica, UpTable, Wish,
};
use magic_sync_replica::{install, Apply, Direct, Replica, Settings, Table, Tables, Wishes};
use magic_sync_tests::Cluster;
use postgres::Client;
use prost::Message;
use rusqlite::Connection;
use uuid::Uuid;

const REGISTER_SCHEMA: &str = "
    CREATE TABLE products (id BLOB PRIMARY KEY NOT NULL, name TEXT NOT NULL,
                           price INTEGER CHECK (price >= 0), updated_at TEXT, retired_at TEXT);
    CREATE TABLE shelves (id BLOB PRIMARY KEY NOT NULL, name TEXT NOT NULL);
    CREATE TABLE receipts (id BLOB PRIMARY KEY NOT NULL, register_id BLOB NOT NULL,
                           product_id BLOB REFERENCES products (id),
                           shelf_id BLOB REFERENCES shelves (id), total INTEGER NOT NULL);
    CREATE TABLE register_state (id BLOB PRIMARY KEY NOT NULL, register_id BLOB NOT NULL,
                                 note TEXT NOT NULL DEFAULT '', battery INTEGER);
    CREATE TABLE footers (register_id BLOB NOT NULL, id BLOB NOT NULL, text TEXT NOT NULL,
                          changed_at TEXT NOT NULL, PRIMARY KEY (register_id, id));
";

fn tables() -> Tables {
    Tables::new(vec![
        Table::catalog("products").retired("retired_at"),
        Table::catalog("shelves"),
        Table::record("receipts").origin("register_id"),
        Table::both("register_state")
            .replica_owned(&["battery"])
            .origin("register_id"),
        Table::setting("footers")
            .version("changed_at")
            .origin("register_id")
            .desired(&["text"])
            .apply(Apply::Always),
    ])
}

/// The footers live only in the register's database: a wish of one is
/// written as it comes.
fn settings() -> Settings {
    Settings {
        wishes: Wishes::new().on("footers", Direct),
        ..Settings::default()
    }
}

fn id(n: u128) -> Uuid {
    Uuid::from_u128(0x01960000_0000_7000_8000_000000000000 | n)
}

const TEA: u128 = 0x01;
const JAM: u128 = 0x02;
const OATS: u128 = 0x03;
const FRONT: u128 = 0xf1;
const TILL: u128 = 0xc1;
const DRAWER: u128 = 0xc2;
const FOOTER: u128 = 0xd1;
/// Two wishes of its footer.
const WISH: u128 = 0x3001;
const OTHER_WISH: u128 = 0x3002;
/// Another server's epoch, and its secret: one this database never had.
const OTHER_EPOCH: u128 = 0xe9;
const OTHER_SECRET: &str = "616e6f74686572207365727665722c20616e6f746865722073656372657421";

fn product(key: u128, name: &str, price: i64, day: u32) -> (Uuid, serde_json::Value) {
    (
        id(key),
        serde_json::json!({"id": id(key).to_string(), "name": name, "price": price.to_string(),
                           "updated_at": format!("2026-10-{day:02}T08:00:00.000000Z")}),
    )
}

fn shelf(key: u128, name: &str) -> (Uuid, serde_json::Value) {
    (
        id(key),
        serde_json::json!({"id": id(key).to_string(), "name": name}),
    )
}

fn state(key: u128, register: Uuid, note: &str) -> (Uuid, serde_json::Value) {
    (
        id(key),
        serde_json::json!({"id": id(key).to_string(), "register_id": register.to_string(),
                           "note": note, "battery": null}),
    )
}

fn part(table: &str, upserts: Vec<(Uuid, serde_json::Value)>, deletes: &[u128]) -> DownTable {
    DownTable {
        table: table.into(),
        deletes: deletes.iter().map(|k| id(*k).to_string()).collect(),
        keys: upserts.iter().map(|(k, _)| k.to_string()).collect(),
        upserts: upserts
            .iter()
            .map(|(_, r)| r.to_string().into_bytes())
            .collect(),
        recorded: Vec::new(),
    }
}

/// Wishes of the footer `key` (a setting row's key), each `(wish, version)`:
/// the part of sync_wishes that sends them, each a Wish message wanting the
/// footer's text changed.
fn wishes(key: &str, of: &[(u128, u64)]) -> DownTable {
    let register = key.split('|').next().unwrap_or_default();
    DownTable {
        table: "sync_wishes".into(),
        keys: of.iter().map(|(w, _)| id(*w).to_string()).collect(),
        upserts: of
            .iter()
            .map(|(w, version)| {
                let wanted = serde_json::json!({"register_id": register, "id": id(FOOTER).to_string(),
                    "text": format!("Wish {version}"), "changed_at": "2026-10-02T10:00:00.000000Z"});
                Wish {
                    id: id(*w).to_string(),
                    table: "footers".into(),
                    key: key.to_owned(),
                    wanted: wanted.to_string().into_bytes(),
                    version: *version,
                    note: "from the head office".into(),
                    ..Wish::default()
                }
                .encode_to_vec()
            })
            .collect(),
        ..DownTable::default()
    }
}

/// An Up of a register's answers, each `(wish, version answered, outcome)`,
/// saying it applied the message `applied` (sequence, nonce) under `mac`,
/// as upload `upload`; `restated` for a part re-stated as a snapshot began.
fn answers(
    mac: &[u8],
    applied: (u64, u64),
    of: &[(u128, u64, &str)],
    restated: bool,
    upload: u64,
) -> magic_sync_proto::wire::Up {
    magic_sync_proto::wire::Up {
        protocol: 1,
        epoch: EPOCH.to_owned(),
        sequence: applied.0,
        nonce: applied.1,
        mac: mac.to_vec(),
        tables: vec![UpTable {
            table: "sync_wishes".into(),
            keys: of.iter().map(|(w, _, _)| id(*w).to_string()).collect(),
            upserts: of
                .iter()
                .map(|(w, version, outcome)| {
                    Wish {
                        id: id(*w).to_string(),
                        table: "footers".into(),
                        version: *version,
                        answered: *version,
                        outcome: (*outcome).to_owned(),
                        reason: if *outcome == "applied" {
                            String::new()
                        } else {
                            format!("{outcome}, as it happens")
                        },
                        answered_at: "2026-10-02T10:00:01.000000Z".into(),
                        ..Wish::default()
                    }
                    .encode_to_vec()
                })
                .collect(),
            restated,
            ..UpTable::default()
        }],
        uploads: vec![upload],
        ..Default::default()
    }
}

/// A register: a real replica, and where the chain of what it was sent
/// stands.
struct Register {
    id: Uuid,
    file: PathBuf,
    replica: Option<Replica>,
    last: (u64, u64),
    snapshot: Option<Uuid>,
}

impl Register {
    fn open(dir: &Path, id: Uuid) -> Register {
        let file = dir.join(format!("{id}.db"));
        let mut conn = Connection::open(&file).unwrap();
        conn.execute_batch("PRAGMA foreign_keys = ON; PRAGMA recursive_triggers = ON;")
            .unwrap();
        conn.execute_batch(REGISTER_SCHEMA).unwrap();
        install(&mut conn, &tables()).unwrap();
        let replica = Replica::open(conn, tables(), id, settings()).unwrap();
        Register {
            id,
            file,
            replica: Some(replica),
            last: (0, 0),
            snapshot: None,
        }
    }

    fn replica(&mut self) -> &mut Replica {
        self.replica.as_mut().expect("an open replica")
    }

    fn write(&mut self, sql: &str) {
        let me = self.id.as_bytes().to_vec();
        let conn = self.replica().connection();
        let done = if sql.contains(":me") {
            conn.execute(sql, rusqlite::named_params! {":me": me})
        } else {
            conn.execute(sql, [])
        };
        done.unwrap_or_else(|e| panic!("{sql}: {e}"));
    }

    /// A copy of its database as it is now.
    fn copy(&mut self) -> PathBuf {
        let to = self.file.with_extension("copy");
        self.replica()
            .connection()
            .execute("VACUUM INTO ?1", [to.to_str().unwrap()])
            .unwrap();
        to
    }

    /// Its database put back as the copy was.
    fn restore(&mut self, copy: &Path) {
        drop(self.replica.take());
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", self.file.display()));
        }
        std::fs::copy(copy, &self.file).unwrap();
        let mut conn = Connection::open(&self.file).unwrap();
        conn.execute_batch("PRAGMA foreign_keys = ON; PRAGMA recursive_triggers = ON;")
            .unwrap();
        install(&mut conn, &tables()).unwrap();
        self.replica = Some(Replica::open(conn, tables(), self.id, settings()).unwrap());
    }
}

/// How the server's record stands of a message it sends.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Sent {
    /// Recorded, and delivered.
    Delivered,
    /// Recorded, and lost on the way: the replica never gets it.
    Lost,
    /// Delivered, and not recorded: the server's database has no record of
    /// it (restored from an older copy, or another server's).
    NotRecorded,
}

struct Writer {
    pg: Client,
    lines: Vec<Line>,
    uploads: u64,
}

impl Writer {
    fn seal(
        &mut self,
        replica: Uuid,
        epoch: Uuid,
        secret: &str,
        sequence: u64,
        nonce: u64,
    ) -> Vec<u8> {
        self.pg
            .query_one(
                "SELECT substring(hmac('magic_sync seal 1'::bytea || uuid_send($1) || uuid_send($2) \
                 || int8send($3) || int8send($4), decode($5, 'hex'), 'sha256') FROM 1 FOR 16)",
                &[&replica, &epoch, &(sequence as i64), &(nonce as i64), &secret],
            )
            .unwrap()
            .get(0)
    }

    fn replica_line(&mut self, register: &Register) {
        self.lines.push(Line {
            name: "replica".into(),
            verdict: register.id.to_string(),
            hex: String::new(),
        });
    }

    /// The server sends a Down (or, with `end`, an EndSnapshot) numbered
    /// `sequence` to the register: a snapshot's first when `begins`.
    #[allow(clippy::too_many_arguments)]
    fn send(
        &mut self,
        name: &str,
        register: &mut Register,
        sequence: u64,
        begins: Option<u128>,
        tables: Vec<DownTable>,
        end: Option<Vec<&str>>,
        sent: Sent,
        epoch: (Uuid, &str),
    ) {
        let nonce = sequence * 1000 + 7;
        if let Some(snapshot) = begins {
            register.snapshot = Some(id(0x5000 | snapshot));
        }
        let (previous, previous_nonce) = if begins.is_some() {
            (0, 0)
        } else {
            register.last
        };
        let mac = self.seal(register.id, epoch.0, epoch.1, sequence, nonce);
        let snapshot_id = register.snapshot.map(|s| s.to_string()).unwrap_or_default();
        let body = match &end {
            Some(covered) => Body::EndSnapshot(EndSnapshot {
                sequence,
                nonce,
                previous,
                previous_nonce,
                epoch: epoch.0.to_string(),
                snapshot_id,
                mac,
                tables: covered.iter().map(|t| (*t).to_owned()).collect(),
            }),
            None => Body::Down(Down {
                sequence,
                nonce,
                previous,
                previous_nonce,
                epoch: epoch.0.to_string(),
                snapshot_id,
                mac,
                tables,
            }),
        };
        if end.is_some() {
            register.snapshot = None;
        }
        let message = ToReplica {
            protocol: 1,
            body: Some(body),
        };
        if sent != Sent::NotRecorded {
            golden::record_sent(&mut self.pg, register.id, &message);
        }
        let bytes = message.encode_to_vec();
        if sent != Sent::Lost {
            register.replica().receive(&bytes).unwrap();
        }
        register.last = (sequence, nonce);
        let verdict = match sent {
            Sent::Delivered => "sent",
            Sent::Lost => "sent, lost on the way",
            Sent::NotRecorded => "sent, not recorded",
        };
        self.lines.push(Line {
            name: name.into(),
            verdict: verdict.into(),
            hex: hex(&bytes),
        });
    }

    /// A snapshot delivered in two messages: "a_provisioning", numbered
    /// `first`, carrying `tables`, and "its_end" after it, covering `covered`.
    fn provision(
        &mut self,
        register: &mut Register,
        first: u64,
        snapshot: u128,
        tables: Vec<DownTable>,
        covered: &[&str],
        epoch: (Uuid, &str),
    ) {
        let (sent, end) = (Sent::Delivered, Some(covered.to_vec()));
        self.send(
            "a_provisioning",
            register,
            first,
            Some(snapshot),
            tables,
            None,
            sent,
            epoch,
        );
        self.send(
            "its_end",
            register,
            first + 1,
            None,
            vec![],
            end,
            sent,
            epoch,
        );
    }

    /// The next fixed upload number.
    fn next_upload(&mut self) -> u64 {
        self.uploads += 1;
        self.uploads
    }

    /// An Up as it goes, filed by the server; the line says what the server
    /// made of it.
    fn file(&mut self, name: &str, replica: Uuid, message: &magic_sync_proto::wire::Up) {
        let bytes = message.encode_to_vec();
        let verdict = golden::receive(&mut self.pg, replica, &bytes);
        self.lines.push(Line {
            name: name.into(),
            verdict: verdict.to_string(),
            hex: hex(&bytes),
        });
    }

    /// The register's next Up, filed by the server; the line says what the
    /// server made of it.
    fn up(&mut self, name: &str, register: &mut Register) {
        let upload = register
            .replica()
            .next_up()
            .unwrap()
            .unwrap_or_else(|| panic!("{name}: the replica has nothing to say"));
        let mut message = upload.message();
        let drawn = message.uploads.clone();
        if !drawn.is_empty() {
            self.uploads += 1;
            message.uploads = vec![self.uploads];
        }
        let bytes = message.encode_to_vec();
        let verdict = golden::receive(&mut self.pg, register.id, &bytes);
        self.lines.push(Line {
            name: name.into(),
            verdict: verdict.to_string(),
            hex: hex(&bytes),
        });
        register.replica().sent(&upload).unwrap();
        if !drawn.is_empty() {
            // The answer, under the number the replica drew.
            let filed = ToReplica {
                protocol: 1,
                body: Some(Body::Filed(Filed { uploads: drawn })),
            };
            register.replica().receive(&filed.encode_to_vec()).unwrap();
        }
        self.pg
            .batch_execute("DELETE FROM sync.outbox WHERE kind = 'filed'")
            .unwrap();
    }
}

const HEADER_COMMON: &str = "\
#
# Each line is: name TAB verdict TAB message, the message in hex.
# - `replica`: the lines after it are to and from the replica whose id is
#   the verdict (no message).
# - verdict `sent`: the server sent this ToReplica to the replica and
#   recorded it as its relay does (the rows it carries held as of it, what
#   it lets go of leaving; a message that begins a snapshot forgets what
#   the replica held before); the rows it sends are the server's rows, and
#   what it lets go of the server deleted. `sent, lost on the way`:
#   recorded, and the replica never got it. `sent, not recorded`: the
#   replica got it, and the server's database has no record of it.
# - any other line is an Up the replica sent, its verdict what the server
#   made of it (`sync.receive`'s answer), as JSON: `applied` (what it said
#   it applied), `gap`, `rejections` (one verdict each), `rows` (per part:
#   filed, unchanged, deleted, kept, waiting, left_out), `digests`, `backlog`,
#   and `answered` (the upload numbers its Filed names).
#
# The server is played on a fresh database of its own (its scene, in
# tests/tests/common/golden_to_server.rs), every replica named live with
# nothing sent it yet; its epoch, and that epoch's secret (hex):
#   EPOCH
#   SECRET
# Its tables (schema shop):
#   products (id uuid, name text, price bigint, updated_at timestamptz):
#     a catalog sent to every replica;
#   shelves (id uuid, name text): a catalog sent to every replica;
#   receipts (id uuid, register_id uuid, product_id uuid, shelf_id uuid,
#     total bigint): a record, keyed by its replica (register_id);
#   register_state (id uuid, register_id uuid, note text, battery integer):
#     written on both sides, assigned to its register; the register owns
#     battery;
#   footers (register_id uuid, id uuid, text text, changed_at timestamptz):
#     a setting of its register, versioned by changed_at.
# A replica holds the same tables in SQLite, foreign keys on: products has
# CHECK (price >= 0) and retired_at; shelves has nothing to retire a row
# by; a receipt points at a product and a shelf.
# Upload numbers are fixed (1, 2, ...) so the file is the same every time
# it is written.
";

fn header(title: &str) -> String {
    format!(
        "{title}{}",
        HEADER_COMMON
            .replace("EPOCH", EPOCH)
            .replace("SECRET", SECRET)
    )
}

/// tests/golden/to_server.txt: what a replica sends up after the steps of
/// to_replica.txt before its upload is answered.
fn to_server(cluster: &Cluster, dir: &Path) -> Vec<Line> {
    let mut w = new_writer(cluster, "write_to_server");
    let epoch = (EPOCH.parse().unwrap(), SECRET);
    let mut r = Register::open(dir, id(0xaa));
    golden::set_the_scene(&mut w.pg, &[r.id]);
    w.replica_line(&r);
    w.send(
        "provisioning_begins",
        &mut r,
        101,
        Some(1),
        vec![part(
            "products",
            vec![
                product(TEA, "tea", 3, 1),
                product(JAM, "jam", 5, 1),
                product(OATS, "oats", 2, 1),
            ],
            &[],
        )],
        None,
        Sent::Delivered,
        epoch,
    );
    w.send(
        "provisioning_ends",
        &mut r,
        102,
        None,
        vec![],
        Some(vec!["products", "shelves"]),
        Sent::Delivered,
        epoch,
    );
    w.send(
        "an_update_and_a_row_the_replicas_own_check_refuses",
        &mut r,
        103,
        None,
        vec![part(
            "products",
            vec![product(TEA, "green tea", 4, 2), product(JAM, "jam", -1, 2)],
            &[],
        )],
        None,
        Sent::Delivered,
        epoch,
    );
    r.write(&format!(
        "INSERT INTO receipts (id, register_id, product_id, total) VALUES (x'{}', :me, x'{}', 4)",
        id(0x1001).simple(),
        id(OATS).simple()
    ));
    // The replica's next Up carries its rows, its rejection, what it
    // applied and its digests (due on its first Up); the lines give them
    // one case at a time.
    let upload = r
        .replica()
        .next_up()
        .unwrap()
        .expect("the replica has something to say");
    let full = upload.message();
    let drawn = full.uploads.clone();
    let mut rows = full.clone();
    rows.digests.clear();
    rows.uploads = vec![1];
    w.file("its_rows_its_rejections_and_what_it_applied", r.id, &rows);
    let digests = magic_sync_proto::wire::Up {
        protocol: full.protocol,
        epoch: full.epoch.clone(),
        sequence: full.sequence,
        nonce: full.nonce,
        mac: full.mac.clone(),
        digests: full.digests.clone(),
        ..Default::default()
    };
    w.file("its_digests", r.id, &digests);
    let mut forged = digests.clone();
    forged.mac[0] ^= 0xff;
    w.file("the_same_with_a_seal_the_server_never_made", r.id, &forged);
    r.replica().sent(&upload).unwrap();
    let filed = ToReplica {
        protocol: 1,
        body: Some(Body::Filed(Filed { uploads: drawn })),
    };
    r.replica().receive(&filed.encode_to_vec()).unwrap();
    w.lines
}

/// tests/golden/to_server_verdicts.txt: uploads a replica sends after a
/// provisioning, a change and a take-back it applied.
fn verdicts(cluster: &Cluster, dir: &Path) -> Vec<Line> {
    let mut w = new_writer(cluster, "write_verdicts");
    let epoch = (EPOCH.parse().unwrap(), SECRET);
    let covered = vec!["products", "shelves", "register_state"];
    let mut v = Register::open(dir, id(0xa1));
    let mut lower = Register::open(dir, id(0xa2));
    let mut gap = Register::open(dir, id(0xa3));
    let mut other = Register::open(dir, id(0xa4));
    let mut past = Register::open(dir, id(0xa5));
    golden::set_the_scene(&mut w.pg, &[v.id, lower.id, gap.id, other.id, past.id]);

    // One register through a provisioning, a change and a take-back.
    w.replica_line(&v);
    let me = v.id;
    w.provision(
        &mut v,
        201,
        1,
        vec![
            part(
                "products",
                vec![product(TEA, "tea", 3, 1), product(JAM, "jam", 5, 1)],
                &[],
            ),
            part("shelves", vec![shelf(FRONT, "front")], &[]),
            part(
                "register_state",
                vec![state(TILL, me, "till"), state(DRAWER, me, "drawer")],
                &[],
            ),
        ],
        &covered,
        epoch,
    );
    v.write(&format!(
        "INSERT INTO receipts (id, register_id, product_id, shelf_id, total) VALUES (x'{}', :me, x'{}', x'{}', 5)",
        id(0x1002).simple(),
        id(JAM).simple(),
        id(FRONT).simple()
    ));
    w.send(
        "a_change",
        &mut v,
        203,
        None,
        vec![part("products", vec![product(TEA, "tea", 4, 2)], &[])],
        None,
        Sent::Delivered,
        epoch,
    );
    w.send(
        "a_take_back",
        &mut v,
        204,
        None,
        vec![
            part("shelves", vec![], &[FRONT]),
            part("products", vec![], &[JAM]),
        ],
        None,
        Sent::Delivered,
        epoch,
    );
    w.up("a_refused_delete_with_what_it_applied", &mut v);
    v.write(&format!(
        "UPDATE register_state SET battery = 80 WHERE id = x'{}'",
        id(TILL).simple()
    ));
    w.up("an_edit_of_a_two_way_row", &mut v);
    v.write(&format!(
        "DELETE FROM register_state WHERE id = x'{}'",
        id(DRAWER).simple()
    ));
    w.up("a_delete_of_a_row_of_its_own", &mut v);
    w.send(
        "provisioned_again",
        &mut v,
        205,
        Some(2),
        vec![
            part("products", vec![product(TEA, "tea", 4, 2)], &[]),
            part("register_state", vec![state(TILL, me, "till")], &[]),
        ],
        None,
        Sent::Delivered,
        epoch,
    );
    w.send(
        "its_end_which_the_replica_cannot_sweep_a_shelf_by",
        &mut v,
        206,
        None,
        vec![],
        Some(covered.clone()),
        Sent::Delivered,
        epoch,
    );
    w.up("a_refused_sweep", &mut v);
    v.write(&format!(
        "DELETE FROM register_state WHERE id = x'{}'",
        id(TILL).simple()
    ));
    w.send(
        "a_change_of_a_row_the_replica_deleted",
        &mut v,
        207,
        None,
        vec![part(
            "register_state",
            vec![state(TILL, me, "till, moved")],
            &[],
        )],
        None,
        Sent::Delivered,
        epoch,
    );
    w.up("a_row_of_its_own_held_back", &mut v);
    v.write(&format!(
        "INSERT INTO footers (register_id, id, text, changed_at) VALUES (:me, x'{}', 'Thank you', '2026-10-02T10:00:00.000000Z')",
        id(FOOTER).simple()
    ));
    w.up("a_setting", &mut v);
    v.write("UPDATE footers SET text = 'Thanks', changed_at = '2026-10-01T10:00:00.000000Z'");
    w.up("an_older_version_of_it", &mut v);

    // A wish of its footer, answered waiting, then withdrawn: the answer
    // the register gave before it applied the withdrawal is left out (the
    // server is taking the wish back). Then another wish of it, answered
    // applied; a later answer to the same version (one the transport kept
    // back) does not take the final one's place, but one re-stated does
    // (protocol A.6).
    let footer_key = format!("{me}|{}", id(FOOTER));
    w.send(
        "a_wish",
        &mut v,
        208,
        None,
        vec![wishes(&footer_key, &[(WISH, 7)])],
        None,
        Sent::Delivered,
        epoch,
    );
    let at = v.last;
    let up = answers(
        &w.seal(me, epoch.0, epoch.1, at.0, at.1),
        at,
        &[(WISH, 7, "waiting")],
        false,
        w.next_upload(),
    );
    w.file("an_answer_to_a_wish", me, &up);
    w.send(
        "it_withdrawn",
        &mut v,
        209,
        None,
        vec![part("sync_wishes", vec![], &[WISH])],
        None,
        Sent::Delivered,
        epoch,
    );
    let up = answers(
        &w.seal(me, epoch.0, epoch.1, at.0, at.1),
        at,
        &[(WISH, 7, "applied")],
        false,
        w.next_upload(),
    );
    w.file("an_answer_to_one_withdrawn", me, &up);
    w.send(
        "another_wish",
        &mut v,
        210,
        None,
        vec![wishes(&footer_key, &[(OTHER_WISH, 8)])],
        None,
        Sent::Delivered,
        epoch,
    );
    let at = v.last;
    let up = answers(
        &w.seal(me, epoch.0, epoch.1, at.0, at.1),
        at,
        &[(OTHER_WISH, 8, "applied")],
        false,
        w.next_upload(),
    );
    w.file("its_answer", me, &up);
    let up = answers(
        &w.seal(me, epoch.0, epoch.1, at.0, at.1),
        at,
        &[(OTHER_WISH, 8, "waiting")],
        false,
        w.next_upload(),
    );
    w.file("another_answer_to_the_same_version_later", me, &up);
    let up = answers(
        &w.seal(me, epoch.0, epoch.1, at.0, at.1),
        at,
        &[(OTHER_WISH, 8, "refused")],
        true,
        w.next_upload(),
    );
    w.file("an_answer_to_it_restated", me, &up);

    // What it applied, said again lower: a register restored from a copy.
    w.replica_line(&lower);
    w.provision(
        &mut lower,
        301,
        3,
        vec![part("products", vec![product(TEA, "tea", 4, 2)], &[])],
        &covered,
        epoch,
    );
    let copy = lower.copy();
    w.up("what_it_applied", &mut lower);
    w.send(
        "a_change",
        &mut lower,
        303,
        None,
        vec![part("products", vec![product(TEA, "tea", 6, 3)], &[])],
        None,
        Sent::Delivered,
        epoch,
    );
    w.up("what_it_applied_then", &mut lower);
    lower.restore(&copy);
    w.up("what_it_applied_said_again_lower", &mut lower);

    // A gap.
    w.replica_line(&gap);
    w.provision(
        &mut gap,
        401,
        4,
        vec![part("products", vec![product(TEA, "tea", 4, 2)], &[])],
        &covered,
        epoch,
    );
    w.up("what_it_applied", &mut gap);
    w.send(
        "a_change",
        &mut gap,
        403,
        None,
        vec![part("products", vec![product(TEA, "tea", 7, 3)], &[])],
        None,
        Sent::Lost,
        epoch,
    );
    w.send(
        "the_next",
        &mut gap,
        404,
        None,
        vec![part("products", vec![product(JAM, "jam", 5, 3)], &[])],
        None,
        Sent::Delivered,
        epoch,
    );
    w.up("a_gap", &mut gap);

    // Of another epoch: another server's snapshot, which the replica takes.
    w.replica_line(&other);
    w.provision(
        &mut other,
        501,
        5,
        vec![part("products", vec![product(TEA, "tea", 4, 2)], &[])],
        &covered,
        epoch,
    );
    w.up("what_it_applied", &mut other);
    let another = (id(OTHER_EPOCH), OTHER_SECRET);
    w.send(
        "another_servers_snapshot",
        &mut other,
        1001,
        Some(6),
        vec![part("products", vec![product(OATS, "oats", 2, 4)], &[])],
        None,
        Sent::NotRecorded,
        another,
    );
    w.send(
        "its_end",
        &mut other,
        1002,
        None,
        vec![],
        Some(covered.clone()),
        Sent::NotRecorded,
        another,
    );
    w.up("of_another_epoch", &mut other);

    // Past anything sent: a message the server's database has no record
    // of (it was restored from an older copy). Last: it takes a new epoch.
    w.replica_line(&past);
    w.provision(
        &mut past,
        601,
        7,
        vec![part("products", vec![product(TEA, "tea", 4, 2)], &[])],
        &covered,
        epoch,
    );
    w.up("what_it_applied", &mut past);
    w.send(
        "a_change_before_the_database_went_back",
        &mut past,
        603,
        None,
        vec![part("products", vec![product(TEA, "tea", 8, 4)], &[])],
        None,
        Sent::NotRecorded,
        epoch,
    );
    w.up("past_anything_sent", &mut past);
    w.lines
}

fn new_writer(cluster: &Cluster, database: &str) -> Writer {
    let mut pg = cluster.database_with_extension(database);
    pg.batch_execute("CREATE EXTENSION pgcrypto").unwrap();
    Writer {
        pg,
        lines: Vec::new(),
        uploads: 0,
    }
}

fn write(file: &str, header: String, lines: &[Line]) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("golden")
        .join(file);
    let mut text = header;
    for line in lines {
        text.push_str(&line.to_text());
        text.push('\n');
    }
    std::fs::write(&path, text).unwrap();
    println!("wrote {} ({} lines)", path.display(), lines.len());
}

fn main() {
    let cluster = Cluster::start();
    let dir = tempfile::tempdir().unwrap();
    let lines = to_server(&cluster, dir.path());
    write(
        "to_server.txt",
        header(
            "# What a replica sends up after the steps of to_replica.txt, before its\n\
             # upload is answered (the replica protocol, section 10): its rows, its\n\
             # rejections and what it applied; its digests; the same with a seal the\n\
             # server never made. Each with what the server makes of it. The replica\n\
             # sent the first two as one Up; they are given one case at a time.\n",
        ),
        &lines,
    );
    let lines = verdicts(&cluster, dir.path());
    write(
        "to_server_verdicts.txt",
        header(
            "# Uploads replicas send after a provisioning, a change and a take-back\n\
             # they applied (the replica protocol, section 10): a refused delete with\n\
             # what it applied, an edit of a two-way row, a delete of a row of its\n\
             # own, a refused sweep, a row of its own held back, a setting and an\n\
             # older version of it, an answer to a wish and to one withdrawn (then\n\
             # another wish, its answer, a later answer to the same version, and\n\
             # one re-stated); then, each from a replica of its own, what it\n\
             # applied said again lower (a replica restored from a copy), a gap, of\n\
             # another epoch, and past anything sent (the server's database went\n\
             # back). Each with what the server makes of it. A part of sync_wishes\n\
             # sent carries Wish messages (the wishes are the server's, in\n\
             # sync.sync_wishes); the answers are written by hand, as a replica\n\
             # that holds settings sends them.\n",
        ),
        &lines,
    );
}

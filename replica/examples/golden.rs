//! Writes the replica's test vectors, tests/golden/to_replica.txt and
//! tests/golden/malformed.txt, by running every message through a real
//! replica and recording what it made of it (and, for to_replica, what it
//! then holds). Deterministic: fixed epochs, nonces and seals.
//!
//!     cargo run -p magic_sync_replica --example golden
//!
//! replica/tests/golden.rs replays both files and fails on any difference.

#[path = "../tests/golden_shared/mod.rs"]
mod golden_shared;

use std::fmt::Write as _;
use std::path::PathBuf;

use golden_shared::*;
use magic_sync_replica::proto::wire::{
    to_replica::Body, Down, DownTable, EndSnapshot, Filed, ToReplica, Wish,
};
use magic_sync_replica::proto::{LARGEST_NUMBER, PROTOCOL};
use prost::Message;
use serde_json::json;

/// A server numbering its messages as a real one does, with nonces and
/// seals drawn from a counter so the files come out the same every time.
struct Server {
    epoch: String,
    sequence: u64,
    nonce: u64,
    snapshot: String,
    draws: u64,
}

impl Server {
    fn new(epoch: u128) -> Server {
        Server {
            epoch: id(0xe000 + epoch),
            sequence: 100,
            nonce: 0,
            snapshot: String::new(),
            draws: 0,
        }
    }

    fn next_nonce(&self) -> u64 {
        1_000_003 * (self.draws + 1)
    }

    fn head(&self) -> (u64, u64, Vec<u8>) {
        let sequence = self.sequence + 1;
        let nonce = self.next_nonce();
        let mut mac = sequence.to_be_bytes().to_vec();
        mac.extend_from_slice(&nonce.to_be_bytes());
        (sequence, nonce, mac)
    }

    fn peek(&self, tables: Vec<DownTable>) -> Down {
        let (sequence, nonce, mac) = self.head();
        Down {
            sequence,
            nonce,
            previous: self.sequence,
            previous_nonce: self.nonce,
            epoch: self.epoch.clone(),
            snapshot_id: self.snapshot.clone(),
            mac,
            tables,
        }
    }

    fn peek_end(&self, tables: &[&str]) -> EndSnapshot {
        let d = self.peek(Vec::new());
        EndSnapshot {
            sequence: d.sequence,
            nonce: d.nonce,
            previous: d.previous,
            previous_nonce: d.previous_nonce,
            epoch: d.epoch,
            snapshot_id: d.snapshot_id,
            mac: d.mac,
            tables: tables.iter().map(|t| (*t).to_owned()).collect(),
        }
    }

    fn took(&mut self, sequence: u64, nonce: u64) {
        self.sequence = sequence;
        self.nonce = nonce;
        self.draws += 1;
    }

    fn down(&mut self, tables: Vec<DownTable>) -> Vec<u8> {
        let d = self.peek(tables);
        self.took(d.sequence, d.nonce);
        down_bytes(d)
    }

    fn begin(&mut self, snapshot: u128, tables: Vec<DownTable>) -> Vec<u8> {
        self.snapshot = id(0x5000 + snapshot);
        let mut d = self.peek(tables);
        d.previous = 0;
        d.previous_nonce = 0;
        self.took(d.sequence, d.nonce);
        down_bytes(d)
    }

    fn end(&mut self, tables: &[&str]) -> Vec<u8> {
        let e = self.peek_end(tables);
        self.took(e.sequence, e.nonce);
        self.snapshot.clear();
        wrap(Body::EndSnapshot(e))
    }
}

fn wrap(body: Body) -> Vec<u8> {
    ToReplica {
        protocol: PROTOCOL,
        body: Some(body),
    }
    .encode_to_vec()
}

fn down_bytes(d: Down) -> Vec<u8> {
    wrap(Body::Down(d))
}

fn products(rows: &[(u128, &str, i64, &str)]) -> DownTable {
    let mut t = DownTable {
        table: "products".into(),
        ..DownTable::default()
    };
    for (n, name, price, updated) in rows {
        let key = id(*n);
        t.keys.push(key.clone());
        t.upserts.push(
            serde_json::to_vec(&json!({"id": key, "name": name, "price": price.to_string(), "updated_at": updated}))
                .unwrap(),
        );
    }
    t
}

/// A wish of the replica's footer, as the server sends it: the footer row
/// with the wished text laid over it.
fn footer_wish(n: u128, text: &str, version: u64) -> Wish {
    Wish {
        id: id(0x3000 + n),
        table: "footers".into(),
        key: ME.into(),
        wanted: serde_json::to_vec(&json!({"register_id": ME, "text": text, "changed": "1"}))
            .unwrap(),
        version,
        note: "the head office".into(),
        ..Wish::default()
    }
}

fn wishes(list: &[Wish]) -> DownTable {
    DownTable {
        table: WISHES.into(),
        keys: list.iter().map(|w| w.id.clone()).collect(),
        upserts: list.iter().map(|w| w.encode_to_vec()).collect(),
        ..DownTable::default()
    }
}

fn deletes(table: &str, keys: &[String]) -> DownTable {
    DownTable {
        table: table.into(),
        deletes: keys.to_vec(),
        ..DownTable::default()
    }
}

/// Writes lines as the replica takes each message.
struct File {
    text: String,
    run: Run,
    holds: bool,
}

impl File {
    fn new(header: &str, holds: bool) -> File {
        File {
            text: header.to_owned(),
            run: Run::new(),
            holds,
        }
    }

    fn line(&mut self, name: &str, bytes: &[u8]) {
        let verdict = self.run.deliver(bytes);
        writeln!(self.text, "{name}\t{verdict}\t{}", hex(bytes)).unwrap();
        self.after();
    }

    fn lost(&mut self, name: &str, bytes: &[u8]) {
        writeln!(self.text, "{name}\t{LOST}\t{}", hex(bytes)).unwrap();
    }

    fn writes(&mut self, name: &str, receipt: &serde_json::Value) {
        let bytes = serde_json::to_vec(receipt).unwrap();
        self.run.write(&bytes);
        writeln!(self.text, "{name}\t{WRITES}\t{}", hex(&bytes)).unwrap();
        self.after();
    }

    fn after(&mut self) {
        if self.holds {
            writeln!(self.text, "holds\t{}", self.run.holds()).unwrap();
        }
    }
}

fn to_replica() -> String {
    let mut f = File::new(TO_REPLICA_HEADER, true);
    let mut s = Server::new(1);
    let t0 = "2026-10-01T08:00:00.000000Z";
    let first = s.begin(
        1,
        vec![products(&[
            (1, "tea", 3, t0),
            (2, "jam", 5, t0),
            (3, "oats", 2, t0),
        ])],
    );
    f.line("provisioning_begins", &first);
    f.line(
        "provisioning_goes_on",
        &s.down(vec![products(&[(4, "rye", 4, t0)])]),
    );
    f.line("provisioning_ends", &s.end(&["products"]));
    f.line("the_first_delivered_again", &first);
    let t1 = "2026-10-02T08:00:00.000000Z";
    f.line(
        "an_update",
        &s.down(vec![products(&[(1, "green tea", 4, t1)])]),
    );
    f.line(
        "a_row_the_replicas_own_check_refuses",
        &s.down(vec![products(&[(2, "jam", -1, t1)])]),
    );
    f.writes(
        "the_replica_writes_a_receipt_pointing_at_oats",
        &json!({"id": id(0x1001), "register_id": ME, "product_id": id(3), "total": "2"}),
    );
    f.line(
        "a_delete_of_a_row_a_row_of_its_own_points_at",
        &s.down(vec![deletes("products", &[id(3)])]),
    );
    f.line(
        "a_snapshot_cut_short",
        &s.begin(2, vec![products(&[(1, "green tea", 4, t1)])]),
    );
    f.line(
        "the_snapshot_that_supersedes_it",
        &s.begin(
            3,
            vec![products(&[(1, "green tea", 4, t1), (2, "jam", 5, t1)])],
        ),
    );
    f.line("its_end", &s.end(&["products"]));
    let lost = s.down(vec![products(&[(5, "plums", 6, t1)])]);
    f.lost("a_message_lost_on_the_way", &lost);
    f.line(
        "the_gap_after_it",
        &s.down(vec![products(&[(6, "figs", 7, t1)])]),
    );
    f.line(
        "what_comes_during_the_gap",
        &s.down(vec![deletes("products", &[id(1)])]),
    );
    f.line(
        "the_answer_to_an_upload",
        &wrap(Body::Filed(Filed {
            uploads: vec![4242],
        })),
    );
    f.line(
        "the_snapshot_that_ends_the_gap",
        &s.begin(
            4,
            vec![products(&[
                (1, "green tea", 4, t1),
                (2, "jam", 5, t1),
                (5, "plums", 6, t1),
            ])],
        ),
    );
    f.line("its_end_too", &s.end(&["products"]));
    f.line(
        "a_version_older_than_the_one_held",
        &s.down(vec![products(&[(1, "tea", 3, t0)])]),
    );
    let mut unknown = s.down(vec![products(&[(2, "jam", 6, t1)])]);
    // Field 99 of ToReplica, a varint: a field this build does not know.
    unknown.extend_from_slice(&[0x98, 0x06, 0x01]);
    f.line("a_field_the_replica_does_not_know", &unknown);
    let mut s = Server::new(2);
    f.line(
        "a_new_epoch",
        &s.begin(5, vec![products(&[(1, "tea", 3, t1), (7, "honey", 8, t1)])]),
    );
    f.line("its_provisioning_ends", &s.end(&["products"]));
    f.writes(
        "the_replica_writes_its_footer",
        &json!({"register_id": ME, "text": "Thank you", "changed": "1"}),
    );
    f.line(
        "a_wish_of_a_setting_the_replica_holds",
        &s.down(vec![wishes(&[footer_wish(1, "Open on Sundays", 4242)])]),
    );
    f.line(
        "a_provisioning_that_carries_the_wish_replaced",
        &s.begin(
            6,
            vec![
                products(&[(1, "tea", 3, t1), (7, "honey", 8, t1)]),
                wishes(&[footer_wish(1, "Open every day", 4343)]),
            ],
        ),
    );
    f.line("its_end_names_the_wishes", &s.end(&["products", WISHES]));
    f.line(
        "the_wish_withdrawn",
        &s.down(vec![deletes(WISHES, &[id(0x3001)])]),
    );
    f.text
}

fn malformed() -> String {
    let mut f = File::new(MALFORMED_HEADER, false);
    let mut s = Server::new(1);
    let t0 = "2026-10-01T08:00:00.000000Z";
    f.line(
        "scene_provisioning_begins",
        &s.begin(1, vec![products(&[(1, "tea", 3, t0), (2, "jam", 5, t0)])]),
    );
    f.line("scene_provisioning_ends", &s.end(&["products"]));
    let next = |s: &Server| s.peek(vec![products(&[(9, "spoiled", 1, t0)])]);
    let spoiled = |s: &Server, how: &dyn Fn(&mut Down)| {
        let mut d = next(s);
        how(&mut d);
        down_bytes(d)
    };
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("does_not_decode", vec![0xff, 0xff, 0xff]),
        (
            "no_protocol",
            ToReplica {
                protocol: 0,
                body: Some(Body::Down(next(&s))),
            }
            .encode_to_vec(),
        ),
        (
            "no_body",
            ToReplica {
                protocol: PROTOCOL,
                body: None,
            }
            .encode_to_vec(),
        ),
        ("sequence_zero", spoiled(&s, &|d| d.sequence = 0)),
        (
            "sequence_too_large",
            spoiled(&s, &|d| d.sequence = LARGEST_NUMBER + 1),
        ),
        ("no_nonce", spoiled(&s, &|d| d.nonce = 0)),
        (
            "nonce_too_large",
            spoiled(&s, &|d| d.nonce = LARGEST_NUMBER + 1),
        ),
        ("follows_itself", spoiled(&s, &|d| d.previous = d.sequence)),
        (
            "follows_a_later_one",
            spoiled(&s, &|d| d.previous = d.sequence + 1),
        ),
        (
            "follows_without_its_nonce",
            spoiled(&s, &|d| d.previous_nonce = 0),
        ),
        (
            "follows_nothing_with_a_nonce",
            spoiled(&s, &|d| {
                d.previous = 0;
                d.snapshot_id = id(0x5099);
            }),
        ),
        (
            "follows_a_nonce_too_large",
            spoiled(&s, &|d| d.previous_nonce = LARGEST_NUMBER + 1),
        ),
        (
            "epoch_no_uuid",
            spoiled(&s, &|d| d.epoch = "epoch one".into()),
        ),
        (
            "snapshot_no_uuid",
            spoiled(&s, &|d| d.snapshot_id = "snapshot one".into()),
        ),
        (
            "begins_no_snapshot",
            spoiled(&s, &|d| {
                d.previous = 0;
                d.previous_nonce = 0;
            }),
        ),
        ("ends_a_snapshot_of_no_id", {
            let mut e = s.peek_end(&["products"]);
            e.snapshot_id.clear();
            wrap(Body::EndSnapshot(e))
        }),
        ("no_mac", spoiled(&s, &|d| d.mac.clear())),
        ("mac_too_short", spoiled(&s, &|d| d.mac.truncate(15))),
        ("mac_too_long", spoiled(&s, &|d| d.mac.push(0))),
        (
            "keys_not_one_per_row",
            spoiled(&s, &|d| d.tables[0].keys.push(id(8))),
        ),
        ("more_rows_than_a_message_carries", {
            let rows: Vec<(u128, &str, i64, &str)> =
                (0..501).map(|n| (100 + n, "one too many", 1, t0)).collect();
            down_bytes(s.peek(vec![products(&rows)]))
        }),
        (
            "more_tables_than_a_message_carries",
            down_bytes(s.peek((0..501).map(|_| deletes("products", &[])).collect())),
        ),
        ("ends_more_tables_than_a_message_carries", {
            let mut e = s.peek_end(&vec!["products"; 501]);
            e.snapshot_id = id(0x5099);
            wrap(Body::EndSnapshot(e))
        }),
        (
            "files_more_uploads_than_a_message_carries",
            wrap(Body::Filed(Filed {
                uploads: (1..=501).collect(),
            })),
        ),
        (
            "names_another_snapshot",
            spoiled(&s, &|d| d.snapshot_id = id(0x5099)),
        ),
    ];
    for (name, bytes) in cases {
        f.line(name, &bytes);
    }
    let later = ToReplica {
        protocol: PROTOCOL + 1,
        body: Some(Body::Down(next(&s))),
    }
    .encode_to_vec();
    f.line("a_later_protocol", &later);
    let mut bad_delete = deletes("products", &["not-a-uuid".into(), id(2)]);
    bad_delete.table = "products".into();
    f.line(
        "a_delete_of_a_key_that_does_not_parse",
        &s.down(vec![bad_delete]),
    );
    let mut beside = products(&[(3, "rye", 2, t0)]);
    beside.keys[0] = id(4);
    f.line("a_row_beside_another_key", &s.down(vec![beside]));
    f.text
}

fn main() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/golden");
    std::fs::create_dir_all(&dir).expect("creates tests/golden");
    for (file, text) in [
        ("to_replica.txt", to_replica()),
        ("malformed.txt", malformed()),
    ] {
        std::fs::write(dir.join(file), text).expect("writes the file");
        println!("wrote tests/golden/{file}");
    }
}

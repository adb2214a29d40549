//! The mutation engine both fuzzing harnesses share (tests/fuzz_replica.rs,
//! tests/fuzz_server.rs): from valid messages, a stream of inputs a
//! receive must answer without a panic, a crash or a partial apply.
//!
//! A case starts from a valid message of the corpus, decodes it with prost,
//! changes its structure (parts dropped, repeated, reordered; numbers set to
//! the edges of their range; names swapped; keys corrupted; row JSON cut,
//! extended or given the wrong types; huge strings), encodes it again, and
//! sometimes changes the bytes themselves (bits flipped, cut, bytes put in,
//! unknown fields and fields given twice added, two messages run together);
//! a few cases are random bytes from nothing.
//!
//! Every case draws from a generator seeded with the run's seed and its own
//! number, so a failure names both and replays alone
//! (`MAGIC_SYNC_FUZZ_SEED`, `MAGIC_SYNC_FUZZ_CASE`).

pub mod replica;

use magic_sync_proto::wire::{
    to_replica::Body, Backlog, BacklogTable, Digest, Down, DownTable, EndSnapshot, Filed,
    Rejection, ToReplica, Up, UpTable,
};
use prost::Message;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::Value;

/// How a run goes: its seed, how many cases, or one case alone.
#[derive(Clone, Copy, Debug)]
pub struct Run {
    pub seed: u64,
    pub cases: u64,
    /// Only this case (to replay a failure).
    pub only: Option<u64>,
}

impl Run {
    /// The run the environment asks for: `MAGIC_SYNC_FUZZ_SEED` (a number,
    /// or `random`), `MAGIC_SYNC_FUZZ_CASES`, `MAGIC_SYNC_FUZZ_CASE`; CI's
    /// fixed seed and `default_cases` otherwise.
    pub fn from_env(default_cases: u64) -> Run {
        let number = |name: &str| {
            std::env::var(name).ok().map(|v| {
                v.trim()
                    .parse::<u64>()
                    .unwrap_or_else(|_| panic!("{name}={v:?} is not a number"))
            })
        };
        let seed = match std::env::var("MAGIC_SYNC_FUZZ_SEED").as_deref() {
            Ok("random") => rand::random(),
            Ok(_) => number("MAGIC_SYNC_FUZZ_SEED").unwrap(),
            Err(_) => CI_SEED,
        };
        Run {
            seed,
            cases: number("MAGIC_SYNC_FUZZ_CASES").unwrap_or(default_cases),
            only: number("MAGIC_SYNC_FUZZ_CASE"),
        }
    }

    /// The case numbers to run, in order.
    pub fn numbers(&self) -> Box<dyn Iterator<Item = u64>> {
        match self.only {
            Some(case) => Box::new(std::iter::once(case)),
            None => Box::new(0..self.cases),
        }
    }

    /// The case numbers to run where a case depends on those before it:
    /// one case alone runs after them.
    pub fn numbers_with_those_before(&self) -> std::ops::Range<u64> {
        match self.only {
            Some(case) => 0..case + 1,
            None => 0..self.cases,
        }
    }

    /// How to replay a case, for a failure's message.
    pub fn replay(&self, case: u64) -> String {
        format!(
            "seed {} case {case} (replay: MAGIC_SYNC_FUZZ_SEED={} MAGIC_SYNC_FUZZ_CASE={case})",
            self.seed, self.seed
        )
    }

    /// The generator of one case: the same for the same seed and number,
    /// whatever ran before it.
    pub fn mutator(&self, case: u64) -> Mutator {
        Mutator::new(self.seed ^ case.wrapping_mul(0x9E37_79B9_7F4A_7C15))
    }
}

/// The seed CI runs with, so that CI runs the same cases each time.
pub const CI_SEED: u64 = 0x6d61_6769_635f_7379;

/// A number at an edge of its range, or near what it was.
const EDGES: [u64; 7] = [0, 1, 2, i64::MAX as u64, 1 << 63, u64::MAX, u32::MAX as u64];

/// Text a name or key may be swapped for: the tables a side holds and does
/// not, the engine's own, names in other cases, hostile text.
const NAMES: [&str; 16] = [
    "",
    "products",
    "PRODUCTS",
    "receipts",
    "register_state",
    "footers",
    "sync_state",
    "sync_notes",
    "sqlite_master",
    "sync.inbox",
    "shop.receipts",
    "nope",
    "x\"; DROP TABLE products; --",
    "'",
    "|",
    "caf\u{e9}\u{0}",
];

/// A key spelt every way a key may be spelt wrongly.
const KEYS: [&str; 14] = [
    "",
    "|",
    "1",
    "-1",
    "9223372036854775808",
    "01960000-0000-7000-8000-000000000001",
    "01960000-0000-7000-8000-000000000001|x",
    "01960000000070008000000000000001",
    "01960000-0000-7000-8000-00000000000G",
    "{01960000-0000-7000-8000-000000000001}",
    "urn:uuid:01960000-0000-7000-8000-000000000001",
    "01960000-0000-7000-8000-000000000001|01960000-0000-7000-8000-000000000002",
    "NaN",
    " 1",
];

/// A JSON value of every type, for a column that expects another.
fn wrong_value(m: &mut Mutator) -> Value {
    match m.below(13) {
        0 => Value::Null,
        1 => Value::Bool(m.rng.random()),
        2 => serde_json::json!(m.rng.random::<i64>()),
        3 => serde_json::json!(f64::MAX),
        4 => serde_json::json!("9223372036854775808"),
        5 => serde_json::json!("-9223372036854775809"),
        6 => serde_json::json!("NaN"),
        7 => serde_json::json!([1, "two", null]),
        8 => serde_json::json!({"nested": {"deeper": [true]}}),
        9 => Value::String("z".repeat(m.below(70_000) as usize)),
        10 => serde_json::json!("2026-13-45T25:61:61Z"),
        11 => serde_json::json!("nul \u{0} inside"),
        _ => Value::String(KEYS[m.below(KEYS.len() as u64) as usize].to_owned()),
    }
}

/// The source of one case's changes.
pub struct Mutator {
    rng: StdRng,
    /// Keys the corpus names (another row's, another table's, another
    /// replica's), for a key to be swapped for.
    known: Vec<String>,
}

impl Mutator {
    pub fn new(seed: u64) -> Mutator {
        Mutator {
            rng: StdRng::seed_from_u64(seed),
            known: Vec::new(),
        }
    }

    /// The mutator, swapping keys for these at times as well.
    pub fn knowing(mut self, keys: &[String]) -> Mutator {
        self.known = keys.to_vec();
        self
    }

    /// A number in 0..n.
    pub fn below(&mut self, n: u64) -> u64 {
        self.rng.random_range(0..n.max(1))
    }

    pub fn chance(&mut self, p: f64) -> bool {
        self.rng.random_bool(p)
    }

    /// One of `items`, by index.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }

    // -- inputs -----------------------------------------------------------

    /// A `ToReplica` made from the corpus: mostly `base` changed, at times
    /// another of the corpus, two run together, or bytes from nothing.
    pub fn to_replica(&mut self, base: &[u8], corpus: &[Vec<u8>]) -> Vec<u8> {
        self.input(base, corpus, Mutator::change_to_replica)
    }

    /// An `Up` made from the corpus, as `to_replica` does.
    pub fn up(&mut self, base: &[u8], corpus: &[Vec<u8>]) -> Vec<u8> {
        self.input(base, corpus, Mutator::change_up)
    }

    fn input(
        &mut self,
        base: &[u8],
        corpus: &[Vec<u8>],
        change: fn(&mut Mutator, &[u8]) -> Vec<u8>,
    ) -> Vec<u8> {
        match self.below(100) {
            0..=4 => self.random_bytes(),
            5..=9 => {
                // Protobuf merges messages run together: fields of both.
                let mut bytes = change(self, base);
                let other: &Vec<u8> = self.pick(corpus);
                bytes.extend_from_slice(other);
                bytes
            }
            10..=14 => {
                let other = self.pick(corpus).clone();
                change(self, &other)
            }
            _ => {
                let mut bytes = change(self, base);
                if self.chance(0.2) {
                    self.change_bytes(&mut bytes);
                }
                bytes
            }
        }
    }

    fn random_bytes(&mut self) -> Vec<u8> {
        let mut bytes = vec![0u8; self.below(600) as usize];
        self.rng.fill(&mut bytes[..]);
        bytes
    }

    /// Bits flipped, bytes cut, put in or repeated, an unknown field or a
    /// field given twice at the end.
    pub fn change_bytes(&mut self, bytes: &mut Vec<u8>) {
        let at = self.below(bytes.len() as u64 + 1) as usize;
        match self.below(7) {
            0 if !bytes.is_empty() => {
                let i = at.min(bytes.len() - 1);
                bytes[i] ^= 1 << self.below(8);
            }
            1 => bytes.truncate(at),
            2 => {
                let byte = self.rng.random();
                bytes.insert(at, byte);
            }
            3 => {
                let tail = bytes[at..].to_vec();
                bytes.extend(tail);
            }
            4 => {
                // An unknown field, of each wire type in turn.
                let number = 20 + self.below(1000);
                match self.below(3) {
                    0 => {
                        varint(bytes, number << 3);
                        varint(bytes, self.rng.random());
                    }
                    1 => {
                        varint(bytes, (number << 3) | 2);
                        let body = self.random_bytes();
                        varint(bytes, body.len() as u64);
                        bytes.extend(body);
                    }
                    _ => {
                        varint(bytes, (number << 3) | 5);
                        bytes.extend(self.rng.random::<u32>().to_le_bytes());
                    }
                }
            }
            5 => {
                // Field 1 again (protocol): prost keeps the last.
                varint(bytes, 1 << 3);
                varint(bytes, *self.pick(&EDGES));
            }
            _ => {
                let length = self.below(8) as usize;
                for _ in 0..length.min(bytes.len()) {
                    let i = self.below(bytes.len() as u64) as usize;
                    bytes[i] = self.rng.random();
                }
            }
        }
    }

    // -- ToReplica --------------------------------------------------------

    fn change_to_replica(&mut self, bytes: &[u8]) -> Vec<u8> {
        let Ok(mut message) = ToReplica::decode(bytes) else {
            let mut bytes = bytes.to_vec();
            self.change_bytes(&mut bytes);
            return bytes;
        };
        for _ in 0..1 + self.below(4) {
            self.change_message(&mut message);
        }
        if self.chance(0.1) {
            return self.with_unknown_field_in_body(&message);
        }
        message.encode_to_vec()
    }

    fn change_message(&mut self, message: &mut ToReplica) {
        match self.below(20) {
            0 => message.protocol = *self.pick(&[0, 1, 2, u32::MAX]),
            1 => message.body = None,
            2 => message.body = Some(self.body_of_another_kind(message.body.take())),
            _ => match &mut message.body {
                Some(Body::Down(down)) => self.change_down(down),
                Some(Body::EndSnapshot(end)) => self.change_end(end),
                Some(Body::Filed(filed)) => self.change_filed(filed),
                None => message.body = Some(Body::Filed(Filed::default())),
            },
        }
    }

    /// The same head under another body: a Down as an EndSnapshot, and so on.
    fn body_of_another_kind(&mut self, body: Option<Body>) -> Body {
        let head = match body {
            Some(Body::Down(d)) => Some((
                d.sequence,
                d.nonce,
                d.previous,
                d.previous_nonce,
                d.epoch,
                d.snapshot_id,
                d.mac,
            )),
            Some(Body::EndSnapshot(e)) => Some((
                e.sequence,
                e.nonce,
                e.previous,
                e.previous_nonce,
                e.epoch,
                e.snapshot_id,
                e.mac,
            )),
            _ => None,
        };
        let (sequence, nonce, previous, previous_nonce, epoch, snapshot_id, mac) =
            head.unwrap_or_default();
        match self.below(3) {
            0 => Body::Down(Down {
                sequence,
                nonce,
                previous,
                previous_nonce,
                epoch,
                snapshot_id,
                mac,
                tables: Vec::new(),
            }),
            1 => Body::EndSnapshot(EndSnapshot {
                sequence,
                nonce,
                previous,
                previous_nonce,
                epoch,
                snapshot_id,
                mac,
                tables: vec!["products".to_owned()],
            }),
            _ => Body::Filed(Filed {
                uploads: vec![sequence, nonce],
            }),
        }
    }

    fn change_down(&mut self, down: &mut Down) {
        // Most changes go to the rows: a head changed is mostly malformed,
        // and the rows are where applying can go wrong.
        match self.below(24) {
            0 => self.number(&mut down.sequence),
            1 => self.number(&mut down.nonce),
            2 => self.number(&mut down.previous),
            3 => self.number(&mut down.previous_nonce),
            4 => self.text(&mut down.epoch),
            5 => self.text(&mut down.snapshot_id),
            6 => self.blob(&mut down.mac),
            7 => {
                // A snapshot begun, or one that follows nothing.
                down.previous = 0;
                down.previous_nonce = 0;
            }
            8..=10 => {
                let fresh = DownTable {
                    table: "products".to_owned(),
                    ..DownTable::default()
                };
                self.list(&mut down.tables, fresh);
            }
            _ if !down.tables.is_empty() => {
                let i = self.below(down.tables.len() as u64) as usize;
                self.change_down_table(&mut down.tables[i]);
            }
            _ => {}
        }
    }

    fn change_down_table(&mut self, part: &mut DownTable) {
        match self.below(10) {
            0 => self.name(&mut part.table),
            1 => self.keys(&mut part.deletes),
            2 | 3 => self.rows(&mut part.upserts),
            4 | 5 => self.keys(&mut part.keys),
            6 => self.keys(&mut part.recorded),
            7 => {
                // A key moved to another row.
                part.keys.reverse();
            }
            8 => {
                // A row let go of and taken in one part.
                if let Some(key) = part.keys.first().cloned() {
                    part.deletes.push(key);
                }
            }
            _ => {
                // Every row twice.
                let (upserts, keys) = (part.upserts.clone(), part.keys.clone());
                part.upserts.extend(upserts);
                part.keys.extend(keys);
            }
        }
    }

    fn change_end(&mut self, end: &mut EndSnapshot) {
        match self.below(9) {
            0 => self.number(&mut end.sequence),
            1 => self.number(&mut end.nonce),
            2 => self.number(&mut end.previous),
            3 => self.number(&mut end.previous_nonce),
            4 => self.text(&mut end.epoch),
            5 => self.text(&mut end.snapshot_id),
            6 => self.blob(&mut end.mac),
            _ => self.names(&mut end.tables),
        }
    }

    fn change_filed(&mut self, filed: &mut Filed) {
        self.numbers(&mut filed.uploads);
    }

    /// The message encoded with an unknown field inside its body, which a
    /// side must ignore.
    fn with_unknown_field_in_body(&mut self, message: &ToReplica) -> Vec<u8> {
        let (number, body) = match &message.body {
            Some(Body::Down(d)) => (2, d.encode_to_vec()),
            Some(Body::EndSnapshot(e)) => (3, e.encode_to_vec()),
            Some(Body::Filed(f)) => (4, f.encode_to_vec()),
            None => return message.encode_to_vec(),
        };
        let mut body = body;
        varint(&mut body, (40 << 3) | 2);
        varint(&mut body, 3);
        body.extend_from_slice(b"new");
        let mut bytes = Vec::new();
        if message.protocol != 0 {
            varint(&mut bytes, 1 << 3);
            varint(&mut bytes, u64::from(message.protocol));
        }
        varint(&mut bytes, (number << 3) | 2);
        varint(&mut bytes, body.len() as u64);
        bytes.extend(body);
        bytes
    }

    // -- Up ---------------------------------------------------------------

    fn change_up(&mut self, bytes: &[u8]) -> Vec<u8> {
        let Ok(mut up) = Up::decode(bytes) else {
            let mut bytes = bytes.to_vec();
            self.change_bytes(&mut bytes);
            return bytes;
        };
        for _ in 0..1 + self.below(4) {
            self.change_up_once(&mut up);
        }
        up.encode_to_vec()
    }

    fn change_up_once(&mut self, up: &mut Up) {
        match self.below(22) {
            0 => up.protocol = *self.pick(&[0, 1, 2, u32::MAX]),
            1 => self.text(&mut up.epoch),
            2 => self.number(&mut up.sequence),
            3 => self.number(&mut up.nonce),
            4 => self.blob(&mut up.mac),
            5 => self.number(&mut up.gap),
            6 => self.numbers(&mut up.uploads),
            7 | 8 => {
                let fresh = UpTable {
                    table: "receipts".to_owned(),
                    ..UpTable::default()
                };
                self.list(&mut up.tables, fresh);
            }
            9..=17 if !up.tables.is_empty() => {
                let i = self.below(up.tables.len() as u64) as usize;
                self.change_up_table(&mut up.tables[i]);
            }
            18 => {
                // Of the message the Up says it applied, as a real one is.
                let fresh = Rejection {
                    table: "products".to_owned(),
                    key: KEYS[5].to_owned(),
                    epoch: up.epoch.clone(),
                    sequence: up.sequence,
                    ..Rejection::default()
                };
                self.list(&mut up.rejected, fresh);
                if let Some(r) = up.rejected.last_mut() {
                    self.change_rejection(r);
                }
            }
            19 => {
                let fresh = Digest {
                    table: "products".to_owned(),
                    count: 1,
                    fingerprint: 0,
                };
                self.list(&mut up.digests, fresh);
                if let Some(d) = up.digests.last_mut() {
                    self.change_digest(d);
                }
            }
            20 => self.change_backlog(&mut up.backlog),
            _ => {}
        }
    }

    fn change_up_table(&mut self, part: &mut UpTable) {
        match self.below(9) {
            0 => self.name(&mut part.table),
            1 | 2 => self.rows(&mut part.upserts),
            3 | 4 => self.keys(&mut part.keys),
            5 => self.keys(&mut part.deletes),
            6 => part.restated = !part.restated,
            7 => part.keys.reverse(),
            _ => {
                let (upserts, keys) = (part.upserts.clone(), part.keys.clone());
                part.upserts.extend(upserts);
                part.keys.extend(keys);
            }
        }
    }

    fn change_rejection(&mut self, r: &mut Rejection) {
        match self.below(6) {
            0 => self.name(&mut r.table),
            1 => self.key(&mut r.key),
            2 => self.text(&mut r.reason),
            3 => self.text(&mut r.epoch),
            4 => self.number(&mut r.sequence),
            _ => r.held_back = !r.held_back,
        }
    }

    fn change_digest(&mut self, d: &mut Digest) {
        match self.below(3) {
            0 => self.name(&mut d.table),
            1 => self.number(&mut d.count),
            _ => d.fingerprint = self.rng.random(),
        }
    }

    fn change_backlog(&mut self, backlog: &mut Option<Backlog>) {
        match (self.below(3), backlog.as_mut()) {
            (0, _) => *backlog = None,
            (_, None) => *backlog = Some(Backlog::default()),
            (_, Some(b)) => {
                let fresh = BacklogTable {
                    table: "receipts".to_owned(),
                    unsent: 1,
                    ..BacklogTable::default()
                };
                self.list(&mut b.tables, fresh);
                if let Some(t) = b.tables.last_mut() {
                    match self.below(4) {
                        0 => self.name(&mut t.table),
                        1 => self.number(&mut t.unsent),
                        2 => self.number(&mut t.unfiled),
                        _ => self.number(&mut t.set_aside),
                    }
                }
            }
        }
    }

    // -- fields -----------------------------------------------------------

    /// A number at an edge of its range, one off what it was, or random.
    pub fn number(&mut self, n: &mut u64) {
        *n = match self.below(4) {
            0 | 1 => *self.pick(&EDGES),
            2 => {
                if self.chance(0.5) {
                    n.wrapping_add(1)
                } else {
                    n.wrapping_sub(1)
                }
            }
            _ => self.rng.random(),
        };
    }

    fn numbers(&mut self, numbers: &mut Vec<u64>) {
        let fresh = *self.pick(&EDGES);
        self.list(numbers, fresh);
        if !numbers.is_empty() && self.chance(0.5) {
            let i = self.below(numbers.len() as u64) as usize;
            self.number(&mut numbers[i]);
        }
    }

    /// Text changed as a UUID or a name might be: emptied, cased, cut,
    /// made huge, given a character it should not hold.
    pub fn text(&mut self, text: &mut String) {
        *text = match self.below(9) {
            0 => String::new(),
            1 => text.to_uppercase(),
            2 => text.replace('-', ""),
            3 => format!("{{{text}}}"),
            4 => text.chars().take(self.below(40) as usize).collect(),
            5 => "y".repeat(1 + self.below(100_000) as usize),
            6 => format!("{text}\u{0}"),
            7 => uuid::Uuid::from_u128(self.rng.random()).to_string(),
            _ => NAMES[self.below(NAMES.len() as u64) as usize].to_owned(),
        };
    }

    fn name(&mut self, name: &mut String) {
        if self.chance(0.7) {
            *name = NAMES[self.below(NAMES.len() as u64) as usize].to_owned();
        } else {
            self.text(name);
        }
    }

    fn names(&mut self, names: &mut Vec<String>) {
        let fresh = NAMES[self.below(NAMES.len() as u64) as usize].to_owned();
        self.list(names, fresh);
    }

    fn key(&mut self, key: &mut String) {
        if !self.known.is_empty() && self.chance(0.4) {
            *key = self.pick(&self.known.clone()).clone();
        } else if self.chance(0.6) {
            *key = KEYS[self.below(KEYS.len() as u64) as usize].to_owned();
        } else {
            self.text(key);
        }
    }

    fn keys(&mut self, keys: &mut Vec<String>) {
        let fresh = KEYS[self.below(KEYS.len() as u64) as usize].to_owned();
        self.list(keys, fresh);
        if !keys.is_empty() && self.chance(0.5) {
            let i = self.below(keys.len() as u64) as usize;
            self.key(&mut keys[i]);
        }
    }

    /// Bytes of a mac: of another length, or other bytes.
    fn blob(&mut self, blob: &mut Vec<u8>) {
        let length = *self.pick(&[0usize, 1, 15, 16, 17, 64]);
        blob.resize(length, 0);
        if self.chance(0.5) {
            self.rng.fill(&mut blob[..]);
        }
    }

    fn rows(&mut self, rows: &mut Vec<Vec<u8>>) {
        if rows.is_empty() || self.chance(0.3) {
            let fresh = b"{}".to_vec();
            self.list(rows, fresh);
        } else {
            let i = self.below(rows.len() as u64) as usize;
            self.row(&mut rows[i]);
        }
    }

    /// A row's bytes: its JSON given a member of the wrong type, one less
    /// or one more, cut short or made longer, bytes that are no UTF-8, or
    /// no JSON at all.
    pub fn row(&mut self, row: &mut Vec<u8>) {
        let parsed = serde_json::from_slice::<serde_json::Map<String, Value>>(row).ok();
        match (self.below(8), parsed) {
            (0..=3, Some(mut object)) => {
                self.change_object(&mut object);
                *row = serde_json::to_vec(&object).unwrap();
            }
            (4, _) => row.truncate(self.below(row.len() as u64 + 1) as usize),
            (5, _) => row.extend_from_slice(b",\"more\":1}"),
            (6, _) => {
                // Invalid UTF-8 inside a string.
                let at = row.iter().position(|&b| b == b'"').map_or(0, |i| i + 1);
                row.splice(at..at, [0xff, 0xfe, 0xc3]);
            }
            _ => *row = serde_json::to_vec(&wrong_value(self)).unwrap(),
        }
    }

    fn change_object(&mut self, object: &mut serde_json::Map<String, Value>) {
        let names: Vec<String> = object.keys().cloned().collect();
        let name = if names.is_empty() {
            "id".to_owned()
        } else {
            names[self.below(names.len() as u64) as usize].clone()
        };
        match self.below(5) {
            0 => {
                object.remove(&name);
            }
            1 => {
                object.insert("unknown_column".to_owned(), wrong_value(self));
            }
            2 => {
                // A key the part's key beside it does not name.
                let key = KEYS[self.below(KEYS.len() as u64) as usize];
                object.insert(name, Value::String(key.to_owned()));
            }
            _ => {
                let value = wrong_value(self);
                object.insert(name, value);
            }
        }
    }

    /// A list with an entry dropped, given twice, moved, a fresh one added,
    /// emptied, or made long.
    pub fn list<T: Clone>(&mut self, list: &mut Vec<T>, fresh: T) {
        let at = self.below(list.len() as u64 + 1) as usize;
        match self.below(7) {
            0 if !list.is_empty() => {
                list.remove(at.min(list.len() - 1));
            }
            1 if !list.is_empty() => {
                let item = list[at.min(list.len() - 1)].clone();
                list.insert(at, item);
            }
            2 if list.len() > 1 => {
                let (i, j) = (
                    at.min(list.len() - 1),
                    self.below(list.len() as u64) as usize,
                );
                list.swap(i, j);
            }
            3 => list.insert(at, fresh),
            4 => list.clear(),
            5 => {
                // Past the limits of a message, at times.
                let n = *self.pick(&[2usize, 10, 501]);
                list.extend(std::iter::repeat_n(fresh, n));
            }
            _ => list.reverse(),
        }
    }
}

fn varint(bytes: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        bytes.push((n as u8) | 0x80);
        n >>= 7;
    }
    bytes.push(n as u8);
}

/// Every key the messages of a corpus name, rows' and deletes' alike.
pub fn known_keys(to_replica: &[Vec<u8>], ups: &[Vec<u8>]) -> Vec<String> {
    let mut keys = std::collections::BTreeSet::new();
    for message in to_replica
        .iter()
        .filter_map(|b| ToReplica::decode(b.as_slice()).ok())
    {
        if let Some(Body::Down(down)) = message.body {
            for part in down.tables {
                keys.extend(part.keys.into_iter().chain(part.deletes));
            }
        }
    }
    for up in ups.iter().filter_map(|b| Up::decode(b.as_slice()).ok()) {
        for part in up.tables {
            keys.extend(part.keys.into_iter().chain(part.deletes));
        }
    }
    keys.into_iter().collect()
}

/// The bytes as hex, for a failure's message.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Hex as bytes (the golden files' messages).
pub fn unhex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_case_draws_the_same_input_whatever_ran_before_it() {
        let run = Run {
            seed: 7,
            cases: 10,
            only: None,
        };
        let base = ToReplica {
            protocol: 1,
            body: Some(Body::Filed(Filed { uploads: vec![5] })),
        }
        .encode_to_vec();
        let corpus = vec![base.clone()];
        let first: Vec<Vec<u8>> = (0..10)
            .map(|c| run.mutator(c).to_replica(&base, &corpus))
            .collect();
        assert_eq!(run.mutator(3).to_replica(&base, &corpus), first[3]);
        assert_ne!(first[3], first[4]);
    }
}

//! What became of each row a message named: taken, let go of, or rejected.
//! Kept in memory while the message applies, then written (rejections
//! recorded, rejections of rows now taken forgotten) in the same
//! transaction, and returned to the device program.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use magic_sync_proto::key::KeyPart;
use rusqlite::Connection;

use crate::engine::reject::{self, NewRejection};
use crate::message::check::Head;
use crate::model::row_json::key_to_sql;
use crate::model::shape::Shape;
use crate::sql::quote;

/// The rows of one table a message changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AppliedTable {
    pub table: String,
    /// Keys (in the key text form) of the rows written or let go of.
    pub keys: Vec<String>,
}

/// A row the replica could not take or let go of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejected {
    pub table: String,
    pub key: String,
    pub reason: String,
    /// A row of the replica's own it holds back (nothing is at fault).
    pub held_back: bool,
}

#[derive(Clone, Debug)]
enum Fate {
    Taken,
    LetGo,
    /// `parts` is the key parsed as its table types it; `None` for a table
    /// the replica does not hold, whose rows it never keeps.
    Rejected {
        reason: String,
        parts: Option<Vec<KeyPart>>,
        held_back: bool,
    },
}

/// The fate of every row a message named, the last one for a row named
/// twice (a later row is the one), in the order first named.
///
/// While the message applies, every naming is added at the end (nothing is
/// looked up per row, and a part applied again is undone by cutting back
/// to where it began); `settle` then keeps each row once.
#[derive(Clone, Default)]
pub(crate) struct Outcome {
    tables: Vec<String>,
    rows: Vec<Named>,
    /// Whether a row may be named twice: not while each table's rows come
    /// together, each key after the one before (by length, then bytes).
    twice: bool,
}

#[derive(Clone, Debug)]
struct Named {
    /// Into `tables`.
    table: usize,
    key: String,
    fate: Fate,
}

impl Outcome {
    fn table(&mut self, table: &str) -> usize {
        if let Some(last) = self.rows.last() {
            if self.tables[last.table] == table {
                return last.table;
            }
        }
        match self.tables.iter().position(|t| t == table) {
            Some(i) => i,
            None => {
                self.tables.push(table.to_owned());
                self.tables.len() - 1
            }
        }
    }

    fn set(&mut self, table: &str, key: String, fate: Fate) {
        let table = self.table(table);
        if !self.twice {
            self.twice = match self.rows.last() {
                Some(last) if last.table == table => {
                    (last.key.len(), last.key.as_bytes()) >= (key.len(), key.as_bytes())
                }
                // A table named again after another: compare all.
                _ => self.rows.iter().any(|r| r.table == table),
            };
        }
        self.rows.push(Named { table, key, fate });
    }

    /// Where the outcome is now, to go back to with `undo`.
    pub(crate) fn mark(&self) -> usize {
        self.rows.len()
    }

    /// Forgets what was named since `mark`.
    pub(crate) fn undo(&mut self, mark: usize) {
        self.rows.truncate(mark);
    }

    pub(crate) fn taken(&mut self, table: &str, key: impl Into<String>) {
        self.set(table, key.into(), Fate::Taken);
    }

    pub(crate) fn let_go(&mut self, table: &str, key: impl Into<String>) {
        self.set(table, key.into(), Fate::LetGo);
    }

    pub(crate) fn rejected(
        &mut self,
        table: &str,
        key: impl Into<String>,
        parts: Option<Vec<KeyPart>>,
        reason: impl Into<String>,
    ) {
        let (key, reason) = (key.into(), reason.into());
        log::info!("rejected {table} {key}: {reason}");
        self.set(
            table,
            key,
            Fate::Rejected {
                reason,
                parts,
                held_back: false,
            },
        );
    }

    /// A row of the replica's own whose delete the server has not filed:
    /// not taken, and said held back.
    pub(crate) fn held_back(&mut self, table: &str, key: impl Into<String>) {
        let key = key.into();
        log::info!("held back {table} {key}: its delete is not filed yet");
        self.set(
            table,
            key,
            Fate::Rejected {
                reason: "the replica deleted this row of its own, and the server has not filed the delete yet".into(),
                parts: None,
                held_back: true,
            },
        );
    }

    /// Each row once, where it was first named, with its last fate.
    fn settle(&mut self) {
        if !self.twice {
            return;
        }
        self.twice = false;
        let mut first: HashMap<(usize, &str), usize, Fx> =
            HashMap::with_capacity_and_hasher(self.rows.len(), Fx::default());
        let mut again = Vec::new();
        for (i, row) in self.rows.iter().enumerate() {
            let at = *first.entry((row.table, row.key.as_str())).or_insert(i);
            if at != i {
                again.push((at, i));
            }
        }
        drop(first);
        if again.is_empty() {
            return;
        }
        let mut gone = vec![false; self.rows.len()];
        for (at, i) in again {
            self.rows[at].fate = self.rows[i].fate.clone();
            gone[i] = true;
        }
        let mut i = 0;
        self.rows.retain(|_| {
            i += 1;
            !gone[i - 1]
        });
    }

    /// Records the rejections and forgets those of rows now taken or let go
    /// of, in the transaction that applies the message.
    /// `any_kept`: whether any rejection was kept before the message.
    pub(crate) fn write(
        &mut self,
        conn: &Connection,
        shapes: &[Shape],
        head: &Head<'_>,
        any_kept: bool,
    ) -> rusqlite::Result<()> {
        self.settle();
        // Nearly always there is no rejection to forget: then no row is
        // looked up for one.
        for row in &self.rows {
            let (table, key) = (&self.tables[row.table], &row.key);
            match &row.fate {
                Fate::Taken | Fate::LetGo if !any_kept => {}
                Fate::Taken | Fate::LetGo => reject::forget(conn, table, key)?,
                Fate::Rejected {
                    reason,
                    parts,
                    held_back,
                } => {
                    let holds_copy = match (parts, shapes.iter().find(|s| &s.name == table)) {
                        (Some(parts), Some(shape)) => holds(conn, shape, parts)?,
                        _ => false,
                    };
                    reject::record(
                        conn,
                        &NewRejection {
                            table,
                            key,
                            reason,
                            epoch: head.epoch,
                            sequence: head.sequence,
                            holds_copy,
                            held_back: *held_back,
                        },
                    )?;
                }
            }
        }
        Ok(())
    }

    /// What the device program is told: rows changed per table, in the order
    /// first named, and the rows rejected.
    pub(crate) fn report(mut self) -> (Vec<AppliedTable>, Vec<Rejected>) {
        self.settle();
        // Per table named, where its rows go in `tables`.
        let mut slot: Vec<Option<usize>> = vec![None; self.tables.len()];
        let mut tables: Vec<AppliedTable> = Vec::new();
        let mut rejected = Vec::new();
        for row in self.rows {
            let table = &self.tables[row.table];
            match row.fate {
                Fate::Taken | Fate::LetGo => {
                    let at = *slot[row.table].get_or_insert_with(|| {
                        tables.push(AppliedTable {
                            table: table.clone(),
                            keys: Vec::new(),
                        });
                        tables.len() - 1
                    });
                    tables[at].keys.push(row.key);
                }
                Fate::Rejected {
                    reason, held_back, ..
                } => rejected.push(Rejected {
                    table: table.clone(),
                    key: row.key,
                    reason: reject::cut(&reason),
                    held_back,
                }),
            }
        }
        (tables, rejected)
    }
}

/// Whether the replica holds a row with this key.
pub(crate) fn holds(conn: &Connection, shape: &Shape, parts: &[KeyPart]) -> rusqlite::Result<bool> {
    let sql = format!(
        "SELECT count(*) > 0 FROM {} WHERE {}",
        quote(&shape.name),
        shape.key_match()
    );
    let values = key_to_sql(shape, parts);
    conn.prepare_cached(&sql)?
        .query_row(rusqlite::params_from_iter(values), |row| row.get(0))
}

/// A quick hash for keys the server sent, which it does not choose to
/// collide (the same as `rustc`'s own: rotate, xor, multiply).
#[derive(Default)]
pub(crate) struct FxHasher(u64);

pub(crate) type Fx = BuildHasherDefault<FxHasher>;

impl FxHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            self.add(u64::from_le_bytes(chunk.try_into().expect("8 bytes")));
        }
        let mut last = [0u8; 8];
        let rest = chunks.remainder();
        last[..rest.len()].copy_from_slice(rest);
        self.add(u64::from_le_bytes(last) ^ ((rest.len() as u64) << 59));
    }

    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

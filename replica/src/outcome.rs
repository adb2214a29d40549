//! What became of each row a message named: taken, let go of, or rejected.
//! Kept in memory while the message applies, then written (rejections
//! recorded, rejections of rows now taken forgotten) in the same
//! transaction, and returned to the device program.

use std::collections::HashMap;

use magic_sync_proto::key::KeyPart;
use rusqlite::Connection;

use crate::check::Head;
use crate::reject::{self, NewRejection};
use crate::row_json::key_to_sql;
use crate::shape::Shape;
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
/// twice (a later row is the one).
#[derive(Clone, Default)]
pub(crate) struct Outcome {
    order: Vec<(String, String)>,
    fates: HashMap<(String, String), Fate>,
}

impl Outcome {
    fn set(&mut self, table: &str, key: &str, fate: Fate) {
        let id = (table.to_owned(), key.to_owned());
        if self.fates.insert(id.clone(), fate).is_none() {
            self.order.push(id);
        }
    }

    pub(crate) fn taken(&mut self, table: &str, key: &str) {
        self.set(table, key, Fate::Taken);
    }

    pub(crate) fn let_go(&mut self, table: &str, key: &str) {
        self.set(table, key, Fate::LetGo);
    }

    pub(crate) fn rejected(
        &mut self,
        table: &str,
        key: &str,
        parts: Option<Vec<KeyPart>>,
        reason: impl Into<String>,
    ) {
        let reason = reason.into();
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
    pub(crate) fn held_back(&mut self, table: &str, key: &str) {
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

    /// Records the rejections and forgets those of rows now taken or let go
    /// of, in the transaction that applies the message.
    pub(crate) fn write(
        &self,
        conn: &Connection,
        shapes: &[Shape],
        head: &Head<'_>,
    ) -> rusqlite::Result<()> {
        // Nearly always there is no rejection to forget: then no row is
        // looked up for one.
        let any_kept = reject::any(conn)?;
        for id in &self.order {
            let (table, key) = id;
            match &self.fates[id] {
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
    pub(crate) fn report(&self) -> (Vec<AppliedTable>, Vec<Rejected>) {
        let mut tables: Vec<AppliedTable> = Vec::new();
        let mut rejected = Vec::new();
        for id in &self.order {
            let (table, key) = id;
            match &self.fates[id] {
                Fate::Taken | Fate::LetGo => match tables.iter_mut().find(|t| &t.table == table) {
                    Some(t) => t.keys.push(key.clone()),
                    None => tables.push(AppliedTable {
                        table: table.clone(),
                        keys: vec![key.clone()],
                    }),
                },
                Fate::Rejected {
                    reason, held_back, ..
                } => rejected.push(Rejected {
                    table: table.clone(),
                    key: key.clone(),
                    reason: reject::cut(reason),
                    held_back: *held_back,
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

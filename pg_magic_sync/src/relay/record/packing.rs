//! One cohort's rows packed into bodies under the message limits, and what
//! each body carries.

use std::collections::BTreeSet;

use magic_sync_proto::limits::Limits;

use super::rows::Planned;
use super::writer::Writer;
use super::Unsendable;
use crate::message::envelope::{self, Kind};
use crate::message::pack::{Op, Packer};

/// What is recorded of a row a body carries.
pub(super) struct Carried {
    pub(super) table: String,
    pub(super) key: String,
    pub(super) note: i64,
    pub(super) op: Op,
}

/// One cohort's rows being packed into bodies.
pub(super) struct Packing {
    pub(super) cohort: i32,
    pub(super) packer: Packer,
    /// The rows of the body being filled.
    pub(super) open: Vec<Carried>,
}

impl Packing {
    /// `spanning`: the tables the cohort is sent upserts and deletes of.
    pub(super) fn new(cohort: i32, limits: Limits, spanning: BTreeSet<String>) -> Packing {
        Packing {
            cohort,
            packer: Packer::spanning(limits, spanning),
            open: Vec::new(),
        }
    }

    pub(super) fn push(&mut self, row: Planned, writer: &mut Writer) -> Result<(), Unsendable> {
        if row.op == Op::Upsert && row.bytes.is_none() {
            // Gone since the plan read it: nothing to send.
            return Ok(());
        }
        let carried = Carried {
            table: row.table.clone(),
            key: row.key.clone(),
            note: row.note,
            op: row.op,
        };
        match self.packer.push(&row.table, row.op, row.key, row.bytes) {
            Ok(full) => {
                for body in full {
                    let rest = self.open.split_off(body.rows);
                    let rows = std::mem::replace(&mut self.open, rest);
                    writer.body(
                        self.cohort,
                        Kind::Down,
                        envelope::down_body(body.parts),
                        rows,
                    );
                }
                self.open.push(carried);
                Ok(())
            }
            Err(too_large) => Err(Unsendable {
                reason: too_large.to_string(),
                table: carried.table.clone(),
                key: carried.key.clone(),
                note: carried.note,
            }),
        }
    }

    pub(super) fn finish(self, writer: &mut Writer) {
        if let Some(parts) = self.packer.finish() {
            writer.body(
                self.cohort,
                Kind::Down,
                envelope::down_body(parts),
                self.open,
            );
        }
        writer.end_cohort(self.cohort);
    }
}

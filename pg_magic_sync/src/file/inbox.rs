//! The inbox (`sync.inbox`): what a replica uploaded that could not be
//! filed yet, kept rather than lost, and counted as filed in the Filed that
//! answered it.
//!
//! - a row or a delete the database refused waits for a fix: it is filed
//!   again by `sync.refile()`, which a relay runs as it starts (everything)
//!   and before its passes (what is due, every `magic_sync.retry_every`);
//! - an edit of a two-way row that came while the replica was provisioned
//!   again waits for the provisioning to be confirmed, and is filed again
//!   when the replica says it applied it.
//!
//! One entry per row of a replica: the newest upload of a row replaces what
//! was kept of it, and one filed (or left out) drops it, so nothing filed
//! later ever rolls a row back.

use std::collections::BTreeMap;

use pgrx::prelude::*;
use serde_json::{json, Map, Value};
use uuid::Uuid;

use crate::catalog::{self, Declared};
use crate::error::Error;
use crate::file::acting::Caller;
use crate::file::rows::{self, Candidate, Outcome, Part};
use crate::file::senders::{self, Sender};
use crate::file::standing::Standing;
use crate::settings;
use crate::spi::{self, from_pg, to_pg};
use crate::statements::file::inbox::{DROP_DONE, DUE, ENTRIES, KEEP};

/// Whether anything of the replica waits in the inbox: only then must a
/// filed row drop what was kept of it.
pub fn has_any(replica: Uuid) -> bool {
    spi::one::<bool>(
        "SELECT EXISTS (SELECT 1 FROM sync.inbox WHERE replica = $1)",
        &[to_pg(replica).into()],
    )
    .unwrap_or(false)
}

/// Whether outcomes come of a new upload, or of filing the inbox again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum From {
    Upload,
    Inbox,
}

/// Records what became of an upload's parts: what was done with drops what
/// the inbox kept of it; what was kept or waits replaces it. A row named
/// twice (two parts of one table, a key given twice) is recorded as the
/// later naming left it, once: the inbox keeps one entry per row.
pub fn record(replica: Uuid, outcomes: &[Outcome], from: From, inbox_had_any: bool) {
    let fates = last_fates(outcomes);
    if inbox_had_any {
        let (tables, keys): (Vec<String>, Vec<String>) = fates
            .iter()
            .filter(|(_, fate)| matches!(fate, Fate::Done))
            .map(|((table, key), _)| ((*table).to_owned(), (*key).to_owned()))
            .unzip();
        if !keys.is_empty() {
            spi::run_with(
                DROP_DONE,
                &[to_pg(replica).into(), tables.into(), keys.into()],
            );
        }
    }
    let mut k = KeepRows::default();
    for ((table, _), fate) in &fates {
        let Fate::Keep {
            outcome,
            kept,
            waiting,
        } = fate
        else {
            continue;
        };
        k.table.push((*table).to_owned());
        k.key.push(kept.key.clone());
        k.op.push(if kept.row.is_some() { "u" } else { "d" }.to_owned());
        k.row
            .push(kept.row.clone().map(|r| pgrx::JsonB(Value::Object(r))));
        k.restated.push(outcome.restated);
        k.applied_epoch.push(outcome.applied.map(|(e, _)| to_pg(e)));
        k.applied_sequence.push(outcome.applied.map(|(_, s)| s));
        k.reason.push(kept.reason.clone());
        k.waiting.push(*waiting);
    }
    if k.key.is_empty() {
        return;
    }
    spi::run_with(
        KEEP,
        &[
            to_pg(replica).into(),
            k.table.into(),
            k.key.into(),
            k.op.into(),
            k.row.into(),
            k.restated.into(),
            k.applied_epoch.into(),
            k.applied_sequence.into(),
            k.reason.into(),
            k.waiting.into(),
            (from == From::Inbox).into(),
            f64::from(settings::RETRY_EVERY.get()).into(),
        ],
    );
}

/// What an upload's parts left of a row in the end.
enum Fate<'o> {
    Done,
    Keep {
        outcome: &'o Outcome,
        kept: &'o rows::Kept,
        waiting: bool,
    },
}

/// Each row's last fate, by (table, key), the parts read in order: one
/// statement may not write an inbox entry twice, and the later naming of
/// a row is the one that stands.
fn last_fates(outcomes: &[Outcome]) -> BTreeMap<(&str, &str), Fate<'_>> {
    let mut fates = BTreeMap::new();
    for outcome in outcomes {
        let table = outcome.table.as_str();
        for key in &outcome.done {
            fates.insert((table, key.as_str()), Fate::Done);
        }
        let kept = outcome.kept.iter().map(|k| (k, false));
        for (kept, waiting) in kept.chain(outcome.waiting.iter().map(|k| (k, true))) {
            let fate = Fate::Keep {
                outcome,
                kept,
                waiting,
            };
            fates.insert((table, kept.key.as_str()), fate);
        }
    }
    fates
}

#[derive(Default)]
struct KeepRows {
    table: Vec<String>,
    key: Vec<String>,
    op: Vec<String>,
    row: Vec<Option<pgrx::JsonB>>,
    restated: Vec<bool>,
    applied_epoch: Vec<Option<pgrx::Uuid>>,
    applied_sequence: Vec<Option<i64>>,
    reason: Vec<String>,
    waiting: Vec<bool>,
}

// ---------------------------------------------------------------------------
// Filing the inbox again.

/// One entry of the inbox.
struct Entry {
    table: String,
    key: String,
    row: Option<Map<String, Value>>,
    restated: bool,
    applied: Option<(Uuid, i64)>,
}

fn entries(replica: Uuid, everything: bool, only_waiting: bool) -> Vec<Entry> {
    let mut found = Vec::new();
    Spi::connect_mut(|client| {
        let rows = client
            .update(
                ENTRIES,
                None,
                &[
                    to_pg(replica).into(),
                    everything.into(),
                    only_waiting.into(),
                ],
            )
            .unwrap_or_else(|e| Error::spi(ENTRIES, e).raise());
        for row in rows {
            let row_json: Option<pgrx::JsonB> = spi::nullable(&row, 3, "sync.inbox.row");
            let epoch: Option<pgrx::Uuid> = spi::nullable(&row, 5, "sync.inbox.applied_epoch");
            let sequence: Option<i64> = spi::nullable(&row, 6, "sync.inbox.applied_sequence");
            found.push(Entry {
                table: spi::column(&row, 1, "sync.inbox.table_name"),
                key: spi::column(&row, 2, "sync.inbox.key"),
                row: row_json.and_then(|j| match j.0 {
                    Value::Object(m) => Some(m),
                    _ => None,
                }),
                restated: spi::column(&row, 4, "sync.inbox.restated"),
                applied: epoch.map(from_pg).zip(sequence),
            });
        }
    });
    found
}

/// What gathers entries into one part: the table, whether they are
/// deletes, whether re-stated, and for deletes the position they were sent
/// at.
type PartOf = (String, bool, bool, Option<(Uuid, i64)>);

/// The entries as parts, and the (table, key) of those whose table is no
/// longer declared.
fn as_parts<'t>(
    entries: Vec<Entry>,
    tables: &'t [Declared],
) -> (Vec<Part<'t>>, Vec<(String, String)>) {
    let mut parts: BTreeMap<PartOf, Part<'t>> = BTreeMap::new();
    let mut undeclared = Vec::new();
    for entry in entries {
        let Some(table) = tables.iter().find(|t| t.name == entry.table) else {
            undeclared.push((entry.table, entry.key));
            continue;
        };
        let delete = entry.row.is_none();
        let applied = if delete { entry.applied } else { None };
        let part = parts
            .entry((entry.table.clone(), delete, entry.restated, applied))
            .or_insert_with(|| Part {
                table,
                restated: entry.restated,
                rows: Vec::new(),
                deletes: Vec::new(),
                applied,
                left_out: Vec::new(),
            });
        match entry.row {
            Some(row) => part.rows.push(Candidate {
                key: entry.key,
                row,
            }),
            None => part.deletes.push(entry.key),
        }
    }
    (parts.into_values().collect(), undeclared)
}

/// What filing the inbox again did.
#[derive(Debug, Default)]
pub struct Refiled {
    pub filed: usize,
    pub kept: usize,
    pub waiting: usize,
    pub left_out: usize,
    pub dropped: usize,
}

impl Refiled {
    fn add(&mut self, other: Refiled) {
        self.filed += other.filed;
        self.kept += other.kept;
        self.waiting += other.waiting;
        self.left_out += other.left_out;
        self.dropped += other.dropped;
    }

    pub fn to_json(&self) -> Value {
        json!({"filed": self.filed, "kept": self.kept, "waiting": self.waiting,
               "left_out": self.left_out, "dropped": self.dropped})
    }
}

/// Files again what the inbox keeps of one replica: everything, what is
/// due, or what waits for its provisioning. `filing` is the sender when
/// its filing hook ran already in this transaction (an Up of its is being
/// filed).
pub fn refile_replica(
    replica: Uuid,
    everything: bool,
    only_waiting: bool,
    tables: &[Declared],
    filing: Option<&Sender>,
) -> Refiled {
    let mut refiled = Refiled::default();
    let found = entries(replica, everything, only_waiting);
    if found.is_empty() {
        return refiled;
    }
    let (sender, failure) = match filing {
        Some(sender) => (sender.clone(), None),
        None => match senders::recognise(replica, &Caller::here()) {
            Some(mut sender) => {
                let failure = sender.begin_filing();
                (sender, failure)
            }
            None => {
                // A sender the server no longer knows: what it sent goes
                // with it.
                refiled.dropped = found.len();
                spi::run_with(
                    "DELETE FROM sync.inbox WHERE replica = $1",
                    &[to_pg(replica).into()],
                );
                return refiled;
            }
        },
    };
    let standing = Standing::read(replica);
    let (parts, undeclared) = as_parts(found, tables);
    for (table, key) in &undeclared {
        pgrx::log!("magic_sync: the inbox kept {table} {key} of {replica}, a table no longer declared: dropped");
        spi::run_with(
            "DELETE FROM sync.inbox WHERE replica = $1 AND table_name = $2 AND key = $3",
            &[
                to_pg(replica).into(),
                table.as_str().into(),
                key.as_str().into(),
            ],
        );
    }
    refiled.dropped += undeclared.len();
    let outcomes: Vec<Outcome> = parts
        .into_iter()
        .map(|part| match &failure {
            Some(why) => rows::keep_all(part, why),
            None => rows::file_part(part, &sender, standing.as_ref()),
        })
        .collect();
    for outcome in &outcomes {
        refiled.filed += outcome.filed + outcome.deleted + outcome.unchanged;
        refiled.kept += outcome.kept.len();
        refiled.waiting += outcome.waiting.len();
        refiled.left_out += outcome.left_out.len();
    }
    record(replica, &outcomes, From::Inbox, true);
    refiled
}

/// `sync.refile(everything)`: files again what the inbox keeps — what is
/// due (and what waits for a provisioning), or everything, as after a
/// deploy. A relay runs it as it starts, and before its passes; run it in a
/// transaction of its own: the senders' filing hooks run in it.
pub fn refile(everything: bool) -> Value {
    let replicas: Vec<Uuid> = spi::select(DUE, None, &[everything.into()], |rows| {
        rows.map(|row| from_pg(spi::column(&row, 1, "sync.inbox.replica")))
            .collect()
    });
    // Read only when something is filed again: most passes file nothing.
    let tables = match replicas.is_empty() {
        true => Vec::new(),
        false => catalog::wishes::with_wishes(catalog::declared_tables()),
    };
    let mut total = Refiled::default();
    for replica in &replicas {
        total.add(refile_replica(*replica, everything, false, &tables, None));
    }
    let mut summary = total.to_json();
    summary["replicas"] = json!(replicas.len());
    summary
}

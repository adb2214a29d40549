//! Filing the rows of an upload (protocol A.3), a part at a time, under the
//! replica the transport named:
//!
//! - a record is kept from its first delivery; a record with a version, and
//!   a setting, is taken only over an older version of the sender's own
//!   row, except in a re-stated part, which is taken whatever its version;
//! - an edit of a two-way row takes only the columns the replica owns, and
//!   only of a row the server records it holding; one that arrives while
//!   it is provisioned again waits (kept, filed once it holds the row); one
//!   of a row it no longer holds is left out (the server's wins); one of a
//!   row never sent it is malformed;
//! - an answer to a wish (a row of `sync_wishes`, a Wish message) is such
//!   an edit of the engine's own table, filed as the engine, beside its
//!   wish (wishes/answers.rs); one to a wish withdrawn is left out;
//! - a catalog row is refused; deletes are taken only in a table keyed by
//!   the replica, of the sender's own rows;
//! - the origin column is the sender, whatever the row says; a row naming
//!   another replica is malformed; a row without its key beside it, or
//!   whose own key is another, is malformed.
//!
//! A part is filed in one statement (rows_sql.rs). When the database
//! refuses it, it is filed again a row at a time, each in a savepoint, and
//! the rows it still refuses are kept in the inbox (inbox.rs), counted as
//! filed all the same.

use std::collections::{BTreeMap, BTreeSet};

use magic_sync_proto::json::{read_int64, read_uuid};
use magic_sync_proto::key::{self, KeyPart, KeyType};
use magic_sync_proto::wire::UpTable;
use pgrx::prelude::*;
use serde_json::{json, Map, Value};
use uuid::Uuid;

use crate::catalog::{Declared, Mirror};
use crate::error::Error;
use crate::file::rows_sql::{self, Over};
use crate::file::senders::Sender;
use crate::file::standing::Standing;
use crate::message::row::Travel;
use crate::spi::{self, to_pg};
use crate::statements::file::rows::{FILE_EACH, FILE_TOGETHER, HELD_OR_LEAVING, PLACE_EACH};
use crate::wishes::answers;

/// A row of a part, read and checked, ready to file.
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    pub key: String,
    /// The row as it came, its key and origin as the server reads them.
    pub row: Map<String, Value>,
}

/// A row, or a delete, left out: named by its key (or its place in the
/// part when it has none) and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeftOut {
    pub key: String,
    pub why: String,
}

/// What a part asks of one table.
#[derive(Clone, Debug)]
pub struct Part<'t> {
    pub table: &'t Declared,
    pub restated: bool,
    pub rows: Vec<Candidate>,
    pub deletes: Vec<String>,
    /// For deletes: the last message the replica had applied when it sent
    /// them, in its chain's epoch (protocol A.3).
    pub applied: Option<(Uuid, i64)>,
    pub left_out: Vec<LeftOut>,
}

/// A row or delete kept in the inbox.
#[derive(Clone, Debug, PartialEq)]
pub struct Kept {
    pub key: String,
    /// The row as it came, or None for a delete.
    pub row: Option<Map<String, Value>>,
    pub reason: String,
}

/// What became of one part.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    pub table: String,
    pub restated: bool,
    /// Rows taken (inserted or updated), and rows left as they were: the
    /// server has the record already (its first delivery stands), or a
    /// version as new or newer.
    pub filed: usize,
    pub unchanged: usize,
    pub deleted: usize,
    /// Refused by the database: kept, filed later.
    pub kept: Vec<Kept>,
    /// Edits that wait for the replica's provisioning to be confirmed.
    pub waiting: Vec<Kept>,
    pub left_out: Vec<LeftOut>,
    /// For deletes: the applied position they were judged against.
    pub applied: Option<(Uuid, i64)>,
    /// Keys done with: what the inbox kept of them goes.
    pub done: Vec<String>,
}

impl Outcome {
    pub fn to_json(&self) -> Value {
        let mut v = json!({ "table": self.table });
        if self.restated {
            v["restated"] = json!(true);
        }
        for (name, n) in [
            ("filed", self.filed),
            ("unchanged", self.unchanged),
            ("deleted", self.deleted),
        ] {
            if n > 0 {
                v[name] = json!(n);
            }
        }
        if !self.kept.is_empty() {
            v["kept"] = self
                .kept
                .iter()
                .map(|k| json!({"key": k.key, "why": k.reason}))
                .collect();
        }
        if !self.waiting.is_empty() {
            v["waiting"] = self.waiting.iter().map(|k| json!(k.key)).collect();
        }
        if !self.left_out.is_empty() {
            v["left_out"] = self
                .left_out
                .iter()
                .map(|l| json!({"key": l.key, "why": l.why}))
                .collect();
        }
        v
    }
}

// ---------------------------------------------------------------------------
// Reading a part.

/// Why a whole part is left out, if it is.
fn part_refused(table: Option<&Declared>) -> Option<&'static str> {
    match table {
        None => Some("a table the server does not file"),
        Some(t) if t.mirror == Mirror::Catalog => Some("a catalog row: the server's to write"),
        _ => None,
    }
}

/// One key part of a row's own key, as its JSON member holds it.
fn key_part_of(value: &Value, ty: KeyType) -> Option<KeyPart> {
    match ty {
        KeyType::Uuid => read_uuid(value).ok().map(KeyPart::Uuid),
        KeyType::Integer => read_int64(value).ok().map(KeyPart::Integer),
    }
}

/// A row of a part: its key read as the table's, its own key (where it
/// carries one) the same, and its origin the sender's.
pub fn read_row(
    table: &Declared,
    sender: Uuid,
    key: Option<&str>,
    bytes: &[u8],
) -> Result<Candidate, Error> {
    let key = key.ok_or_else(|| Error::bad_message("no key beside it", ""))?;
    if key.contains('\0') {
        return Err(Error::bad_message(NUL_KEY, ""));
    }
    if Travel::of(table) == Travel::AsWish {
        return read_answer(table, key, bytes);
    }
    let parts = key::parse(key, &table.key_types)
        .map_err(|e| Error::bad_message(format!("a key that is not the table's: {e}"), ""))?;
    let key = key::join(&parts);
    let Ok(Value::Object(mut row)) = serde_json::from_slice::<Value>(bytes) else {
        return Err(Error::bad_message(
            "a row that does not read as a JSON object",
            "",
        ));
    };
    if row
        .iter()
        .any(|(name, value)| name.contains('\0') || holds_nul(value))
    {
        // Neither jsonb nor text holds one: it could not even be kept.
        return Err(Error::bad_message(
            "a row holding a NUL character, which no PostgreSQL text holds",
            "",
        ));
    }
    for ((column, ty), part) in table.key_columns.iter().zip(&table.key_types).zip(&parts) {
        match row.get(column) {
            None | Some(Value::Null) => {
                row.insert(column.clone(), Value::String(part.to_string()));
            }
            Some(value) => {
                if key_part_of(value, *ty).as_ref() != Some(part) {
                    return Err(Error::bad_message(
                        format!("its own key is not the one beside it ({column} is {value})"),
                        "",
                    ));
                }
                row.insert(column.clone(), Value::String(part.to_string()));
            }
        }
    }
    if let Some(origin) = &table.origin {
        stamp_origin(&mut row, origin, sender)?;
    }
    Ok(Candidate { key, row })
}

/// An answer to a wish: a Wish message, of which only what the replica
/// owns is read.
fn read_answer(table: &Declared, key: &str, bytes: &[u8]) -> Result<Candidate, Error> {
    let key = key::canonical(key, &table.key_types)
        .map_err(|e| Error::bad_message(format!("a key that is not the table's: {e}"), ""))?;
    let row = answers::read_answer(&key, bytes)?;
    Ok(Candidate { key, row })
}

/// Why a key holding a NUL is left out: the server's table could never
/// hold the row (a device's text key may hold one).
const NUL_KEY: &str = "a key holding a NUL character, which no PostgreSQL text holds";

/// Whether a JSON value holds a NUL character in any text of it.
fn holds_nul(value: &Value) -> bool {
    match value {
        Value::String(text) => text.contains('\0'),
        Value::Array(items) => items.iter().any(holds_nul),
        Value::Object(members) => members
            .iter()
            .any(|(name, value)| name.contains('\0') || holds_nul(value)),
        _ => false,
    }
}

/// The origin column is the sender: a row naming another replica there is
/// malformed.
fn stamp_origin(row: &mut Map<String, Value>, origin: &str, sender: Uuid) -> Result<(), Error> {
    if let Some(value) = row.get(origin).filter(|v| !v.is_null()) {
        match read_uuid(value) {
            Ok(named) if named == sender => {}
            Ok(named) => {
                return Err(Error::bad_message(
                    format!("a row of another replica ({origin} is {named})"),
                    "",
                ))
            }
            Err(_) => {
                return Err(Error::bad_message(
                    format!("{origin} is no replica id: {value}"),
                    "",
                ))
            }
        }
    }
    row.insert(origin.to_owned(), Value::String(sender.to_string()));
    Ok(())
}

/// Reads one part of an Up: its rows and deletes checked, what is
/// malformed left out.
pub fn read_part<'t>(
    part: &UpTable,
    tables: &'t [Declared],
    sender: Uuid,
    applied: Option<(Uuid, i64)>,
) -> Result<Part<'t>, Box<Outcome>> {
    let table = tables.iter().find(|t| t.name == part.table);
    if let Some(why) = part_refused(table) {
        let mut outcome = Outcome {
            table: part.table.clone(),
            restated: part.restated,
            ..Outcome::default()
        };
        for (i, _) in part.upserts.iter().enumerate() {
            let key = part.keys.get(i).cloned().unwrap_or_else(|| format!("#{i}"));
            outcome.left_out.push(LeftOut {
                key,
                why: why.to_owned(),
            });
        }
        for key in &part.deletes {
            outcome.left_out.push(LeftOut {
                key: key.clone(),
                why: why.to_owned(),
            });
        }
        return Err(Box::new(outcome));
    }
    let table = table.expect("a declared table");
    let mut read = Part {
        table,
        restated: part.restated,
        rows: Vec::new(),
        deletes: Vec::new(),
        applied,
        left_out: Vec::new(),
    };
    // The last row of a key is the one: a key twice in a part is its last.
    let mut at: BTreeMap<String, usize> = BTreeMap::new();
    for (i, bytes) in part.upserts.iter().enumerate() {
        match read_row(table, sender, part.keys.get(i).map(String::as_str), bytes) {
            Ok(candidate) => {
                if let Some(&earlier) = at.get(&candidate.key) {
                    read.rows[earlier] = candidate;
                } else {
                    at.insert(candidate.key.clone(), read.rows.len());
                    read.rows.push(candidate);
                }
            }
            Err(why) => read.left_out.push(LeftOut {
                key: part.keys.get(i).cloned().unwrap_or_else(|| format!("#{i}")),
                why: why.to_string(),
            }),
        }
    }
    if !part.deletes.is_empty() && table.origin.is_none() {
        for key in &part.deletes {
            read.left_out.push(LeftOut {
                key: key.clone(),
                why: "a delete of a table not keyed by the replica".to_owned(),
            });
        }
        return Ok(read);
    }
    let mut seen = BTreeSet::new();
    for text in &part.deletes {
        if text.contains('\0') {
            read.left_out.push(LeftOut {
                key: text.clone(),
                why: NUL_KEY.to_owned(),
            });
            continue;
        }
        match key::canonical(text, &table.key_types) {
            Ok(key) => {
                if seen.insert(key.clone()) {
                    read.deletes.push(key);
                }
            }
            Err(e) => read.left_out.push(LeftOut {
                key: text.clone(),
                why: format!("a key that is not the table's: {e}"),
            }),
        }
    }
    Ok(read)
}

/// Everything of a part kept as it came, for a reason that holds for all
/// of it (the filing hook failed).
pub fn keep_all(part: Part<'_>, reason: &str) -> Outcome {
    let mut outcome = Outcome {
        table: part.table.name.clone(),
        restated: part.restated,
        applied: part.applied,
        left_out: part.left_out,
        ..Outcome::default()
    };
    for row in part.rows {
        outcome.kept.push(Kept {
            key: row.key,
            row: Some(row.row),
            reason: reason.to_owned(),
        });
    }
    for key in part.deletes {
        outcome.kept.push(Kept {
            key,
            row: None,
            reason: reason.to_owned(),
        });
    }
    outcome
}

// ---------------------------------------------------------------------------
// Filing a part.

/// Files one part, as the sender. `standing` is where the replica's chain
/// stands, when the relay has seen it.
pub fn file_part(part: Part<'_>, sender: &Sender, standing: Option<&Standing>) -> Outcome {
    let table = part.table;
    let mut outcome = Outcome {
        table: table.name.clone(),
        restated: part.restated,
        applied: part.applied,
        left_out: part.left_out,
        ..Outcome::default()
    };
    if !part.rows.is_empty() && Travel::of(table) == Travel::AsWish {
        // The engine's own table: no hook of the host's sees its rows.
        let rows = part
            .rows
            .into_iter()
            .map(|came| Placed { came, placed: None })
            .collect();
        file_answers(rows, table, sender, standing, part.restated, &mut outcome);
    } else if !part.rows.is_empty() {
        let rows = place(part.rows, table, sender, &mut outcome);
        match table.mirror {
            Mirror::Both => file_edits(rows, table, sender, standing, &mut outcome),
            _ => file_rows(rows, table, sender, part.restated, &mut outcome),
        }
    }
    if !part.deletes.is_empty() {
        file_deletes(part.deletes, table, sender, &mut outcome);
    }
    outcome
}

/// A row ready for a statement: the candidate as it came (kept if it must
/// be), and as the place function answered it to be filed (None: as it
/// came).
struct Placed {
    came: Candidate,
    placed: Option<Map<String, Value>>,
}

impl Placed {
    fn filed(&self) -> &Map<String, Value> {
        self.placed.as_ref().unwrap_or(&self.came.row)
    }
}

/// Runs the rows through the host's place function, when there is one.
fn place(
    rows: Vec<Candidate>,
    table: &Declared,
    sender: &Sender,
    outcome: &mut Outcome,
) -> Vec<Placed> {
    let Some(function) = &sender.hooks.place else {
        return rows
            .into_iter()
            .map(|came| Placed { came, placed: None })
            .collect();
    };
    let array = Value::Array(rows.iter().map(|c| Value::Object(c.row.clone())).collect());
    let mut answers: Vec<(Option<Value>, Option<String>)> = vec![(None, None); rows.len()];
    Spi::connect(|client| {
        let found = client
            .select(
                PLACE_EACH,
                None,
                &[
                    function.as_str().into(),
                    pgrx::JsonB(array).into(),
                    to_pg(sender.replica).into(),
                    sender.known_json().into(),
                    table.name.as_str().into(),
                    sender.runs_as().into(),
                    sender.search_path().into(),
                ],
            )
            .unwrap_or_else(|e| Error::spi(PLACE_EACH, e).raise());
        for row in found {
            let at: i32 = spi::column(&row, 1, "place_each's at");
            let placed: Option<pgrx::JsonB> = spi::nullable(&row, 2, "place_each's row");
            let failure: Option<String> = spi::nullable(&row, 3, "place_each's failure");
            answers[at as usize] = (placed.map(|p| p.0), failure);
        }
    });
    let mut placed = Vec::with_capacity(rows.len());
    for (came, (answer, failure)) in rows.into_iter().zip(answers) {
        let refused = |why: String| Kept {
            key: came.key.clone(),
            row: Some(came.row.clone()),
            reason: why,
        };
        let filed = match (answer, failure) {
            (_, Some(why)) => Err(format!("the place function failed: {why}")),
            (Some(Value::Object(row)), None) => Ok(row),
            (other, None) => Err(format!(
                "the place function answered no row: {}",
                other.unwrap_or(Value::Null)
            )),
        }
        .and_then(|mut row| {
            // What the place function answers is filed under the same key
            // and origin as the row that came.
            for column in table.key_columns.iter().chain(&table.origin) {
                if row.get(column) != came.row.get(column) {
                    if table.origin.as_ref() == Some(column) {
                        row.insert(column.clone(), came.row[column].clone());
                    } else {
                        return Err(format!(
                            "the place function changed the row's key ({column})"
                        ));
                    }
                }
            }
            Ok(row)
        });
        match filed {
            Ok(filed) => placed.push(Placed {
                came,
                placed: Some(filed),
            }),
            Err(why) => outcome.kept.push(refused(why)),
        }
    }
    placed
}

/// The travelling columns a row carries, in the table's order.
fn carried<'t>(table: &'t Declared, row: &Map<String, Value>) -> Vec<&'t str> {
    table
        .columns
        .iter()
        .filter(|c| row.contains_key(c.as_str()))
        .map(String::as_str)
        .collect()
}

/// Groups rows by the columns they carry (one group, nearly always).
fn by_columns<'t>(
    table: &'t Declared,
    rows: Vec<Placed>,
    only: &[String],
) -> Vec<(Vec<&'t str>, Vec<Placed>)> {
    let mut groups: Vec<(Vec<&'t str>, Vec<Placed>)> = Vec::new();
    for row in rows {
        let mut columns = carried(table, row.filed());
        if !only.is_empty() {
            columns.retain(|c| only.iter().any(|o| o == c));
        }
        match groups.iter_mut().find(|(c, _)| *c == columns) {
            Some((_, group)) => group.push(row),
            None => groups.push((columns, vec![row])),
        }
    }
    groups
}

/// Files the rows of a record or a setting.
fn file_rows(
    rows: Vec<Placed>,
    table: &Declared,
    sender: &Sender,
    restated: bool,
    outcome: &mut Outcome,
) {
    let over = match (&table.version, restated) {
        (None, _) => Over::Never,
        (Some(_), false) => Over::Older,
        (Some(_), true) => Over::Always,
    };
    for (columns, group) in by_columns(table, rows, &[]) {
        let statement = rows_sql::insert_rows(table, &columns, over);
        run(&statement, group, table, sender, outcome);
    }
}

/// Where a replica's edit of a two-way row stands against what the server
/// records it holding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EditStands {
    /// It holds the row: the edit is filed.
    Held,
    /// It is provisioned again and does not hold the row yet: the edit
    /// waits.
    Waits,
    /// The server is taking the row back: the server's wins.
    Leaving,
    /// The server deleted the row: the server's wins.
    Deleted,
    /// The server never sent it the row (or took it back): malformed.
    NeverSent,
}

impl EditStands {
    pub fn judge(held: bool, leaving: bool, present: bool, provisioning: bool) -> EditStands {
        if held {
            EditStands::Held
        } else if provisioning {
            EditStands::Waits
        } else if leaving {
            EditStands::Leaving
        } else if !present {
            EditStands::Deleted
        } else {
            EditStands::NeverSent
        }
    }

    fn why(self) -> &'static str {
        match self {
            EditStands::Leaving => "an edit of a row the server is taking back: the server's wins",
            EditStands::Deleted => "an edit of a row the server deleted: the server's wins",
            EditStands::NeverSent => "an edit of a row the replica does not hold",
            _ => "",
        }
    }
}

/// Of these keys, which the replica holds (true) or has leaving (false).
fn held_keys(replica: Uuid, table: &str, keys: &[String]) -> BTreeMap<String, bool> {
    let mut held = BTreeMap::new();
    Spi::connect(|client| {
        let rows = client
            .select(
                HELD_OR_LEAVING,
                None,
                &[to_pg(replica).into(), table.into(), keys.to_vec().into()],
            )
            .unwrap_or_else(|e| Error::spi(HELD_OR_LEAVING, e).raise());
        for row in rows {
            let key: String = spi::column(&row, 1, "sync.held.key");
            let holds: bool = spi::column(&row, 2, "whether sync.held holds the row");
            held.insert(key, holds);
        }
    });
    held
}

fn keys_answered(
    sql: &str,
    keys: &[String],
    extra: Option<pgrx::datum::DatumWithOid>,
) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut args = vec![keys.to_vec().into()];
    args.extend(extra);
    Spi::connect(|client| {
        let rows = client
            .select(sql, None, &args)
            .unwrap_or_else(|e| Error::spi(sql, e).raise());
        for row in rows {
            found.insert(spi::column::<String>(&row, 1, "a key answered"));
        }
    });
    found
}

/// Of a replica's edits of two-way rows, those of rows the server records
/// it holding, to be filed; the others wait (its provisioning) or are left
/// out, as `outcome` then says.
fn held_edits(
    rows: Vec<Placed>,
    table: &Declared,
    sender: &Sender,
    standing: Option<&Standing>,
    outcome: &mut Outcome,
) -> Vec<Placed> {
    let keys: Vec<String> = rows.iter().map(|r| r.came.key.clone()).collect();
    let held = held_keys(sender.replica, &table.name, &keys);
    let present_sql = rows_sql::keys_present(table);
    // The engine's own table is read as the engine; a host's as the sender.
    let present = match Travel::of(table) == Travel::AsWish {
        true => keys_answered(&present_sql, &keys, None),
        false => sender.as_sender(|| keys_answered(&present_sql, &keys, None)),
    };
    let provisioning =
        standing.is_some_and(|s| s.snapshot_on_its_way_after(s.applied_in_chain().unwrap_or(0)));
    let mut filing = Vec::new();
    for row in rows {
        let key = &row.came.key;
        let stands = EditStands::judge(
            held.get(key) == Some(&true),
            held.get(key) == Some(&false),
            present.contains(key),
            provisioning,
        );
        match stands {
            EditStands::Held => filing.push(row),
            EditStands::Waits => outcome.waiting.push(Kept {
                key: key.clone(),
                row: Some(row.came.row),
                reason: "waits for the replica's provisioning".to_owned(),
            }),
            other => {
                outcome.done.push(key.clone());
                outcome.left_out.push(LeftOut {
                    key: key.clone(),
                    why: other.why().to_owned(),
                });
            }
        }
    }
    filing
}

/// Files a replica's edits of two-way rows it holds.
fn file_edits(
    rows: Vec<Placed>,
    table: &Declared,
    sender: &Sender,
    standing: Option<&Standing>,
    outcome: &mut Outcome,
) {
    let filing = held_edits(rows, table, sender, standing, outcome);
    for (owned, group) in by_columns(table, filing, &table.replica_owned) {
        if owned.is_empty() {
            // Nothing of the replica's own: nothing to take.
            for row in group {
                outcome.done.push(row.came.key);
                outcome.unchanged += 1;
            }
            continue;
        }
        let statement = rows_sql::update_owned(table, &owned);
        run(&statement, group, table, sender, outcome);
    }
}

/// Files a replica's answers to wishes it holds (protocol A.6), as the
/// engine: the table is its own. One withdrawn, or being taken back, is
/// left out.
fn file_answers(
    rows: Vec<Placed>,
    table: &Declared,
    sender: &Sender,
    standing: Option<&Standing>,
    restated: bool,
    outcome: &mut Outcome,
) {
    let held = held_edits(rows, table, sender, standing, outcome);
    // Withdrawn since the pass that last planned it: the take-back follows.
    let keys: Vec<String> = held.iter().map(|r| r.came.key.clone()).collect();
    let present = keys_answered(&rows_sql::keys_present(table), &keys, None);
    let (filing, withdrawn): (Vec<Placed>, Vec<Placed>) = held
        .into_iter()
        .partition(|r| present.contains(&r.came.key));
    for row in withdrawn {
        outcome.done.push(row.came.key.clone());
        outcome.left_out.push(LeftOut {
            key: row.came.key,
            why: EditStands::Deleted.why().to_owned(),
        });
    }
    if filing.is_empty() {
        return;
    }
    let answers = filing
        .iter()
        .map(|row| Value::Object(row.filed().clone()))
        .collect();
    let filed = spi::one::<i64>(
        answers::FILE_ANSWERS,
        &[
            pgrx::JsonB(Value::Array(answers)).into(),
            to_pg(sender.replica).into(),
            restated.into(),
        ],
    )
    .unwrap_or(0) as usize;
    outcome.filed += filed;
    outcome.unchanged += filing.len().saturating_sub(filed);
    outcome
        .done
        .extend(filing.into_iter().map(|row| row.came.key));
}

/// Files the replica's deletes of its own rows. In a two-way table the
/// server records it holding them no more — but for a row a message it had
/// not applied when it sent them carries — and a row whose delete the
/// database refused is noted, so the relay sends it again.
fn file_deletes(mut keys: Vec<String>, table: &Declared, sender: &Sender, outcome: &mut Outcome) {
    // Another replica's row is left out, and said so, as every row left out
    // is: the delete statement would pass it over in silence.
    let others = sender.as_sender(|| {
        keys_answered(
            &rows_sql::keys_of_others(table),
            &keys,
            Some(to_pg(sender.replica).into()),
        )
    });
    keys.retain(|k| {
        if others.contains(k) {
            outcome.done.push(k.clone());
            outcome.left_out.push(LeftOut {
                key: k.clone(),
                why: "a delete of another replica's row".to_owned(),
            });
            false
        } else {
            true
        }
    });
    if keys.is_empty() {
        return;
    }
    let statement = rows_sql::delete_own(table);
    let rows = serde_json::to_string(&keys).expect("keys write as JSON");
    let (deleted, refused) = run_statement(&statement, &rows, table, sender);
    outcome.deleted += deleted;
    let mut refused_keys = Vec::new();
    for (at, why) in refused {
        refused_keys.push(keys[at].clone());
        outcome.kept.push(Kept {
            key: keys[at].clone(),
            row: None,
            reason: why,
        });
    }
    for key in &keys {
        if !refused_keys.contains(key) {
            outcome.done.push(key.clone());
        }
    }
    if table.mirror == Mirror::Both {
        let applied = outcome.applied.map_or(0, |(_, sequence)| sequence);
        spi::run_with(
            "DELETE FROM sync.held_recorded WHERE replica = $1 AND table_name = $2 AND key = ANY($3) AND sent <= $4",
            &[to_pg(sender.replica).into(), table.name.as_str().into(), keys.clone().into(), applied.into()],
        );
        if !refused_keys.is_empty() {
            spi::run_with(
                &rows_sql::note_rows(table),
                &[refused_keys.into(), table.name.as_str().into()],
            );
        }
    }
}

/// Runs a statement over a group of rows, and counts what became of each.
fn run(
    statement: &str,
    group: Vec<Placed>,
    table: &Declared,
    sender: &Sender,
    outcome: &mut Outcome,
) {
    let rows = json_array(group.iter().map(Placed::filed));
    let (filed, refused) = run_statement(statement, &rows, table, sender);
    outcome.filed += filed;
    outcome.unchanged += group.len().saturating_sub(filed + refused.len());
    let mut refused_at: BTreeMap<usize, String> = refused.into_iter().collect();
    for (at, row) in group.into_iter().enumerate() {
        match refused_at.remove(&at) {
            Some(why) => outcome.kept.push(Kept {
                key: row.came.key,
                row: Some(row.came.row),
                reason: why,
            }),
            None => outcome.done.push(row.came.key),
        }
    }
}

/// Values as the text of one JSON array, written straight from them (no
/// copy of a row is made: a part may hold hundreds).
fn json_array<'r>(rows: impl Iterator<Item = &'r Map<String, Value>>) -> String {
    let mut text = String::from("[");
    for (i, row) in rows.enumerate() {
        if i > 0 {
            text.push(',');
        }
        text.push_str(&serde_json::to_string(row).expect("a JSON object writes"));
    }
    text.push(']');
    text
}

/// Runs a filing statement over rows (the text of a JSON array): together,
/// and when the database refuses that, one at a time. Answers how many it
/// filed, and the rows (by place) the database refused, with why.
fn run_statement(
    statement: &str,
    rows: &str,
    table: &Declared,
    sender: &Sender,
) -> (usize, Vec<(usize, String)>) {
    let args = |rows: &str| {
        vec![
            statement.into(),
            rows.into(),
            to_pg(sender.replica).into(),
            sender.known_json().into(),
            table.name.as_str().into(),
            sender.runs_as().into(),
            sender.search_path().into(),
        ]
    };
    let together = Spi::connect(|client| {
        let mut found = client
            .select(FILE_TOGETHER, Some(1), &args(rows))
            .unwrap_or_else(|e| Error::spi(FILE_TOGETHER, e).raise());
        let Some(row) = found.next() else {
            Error::engine("magic_sync: file_together answered no row", FILE_TOGETHER).raise()
        };
        let filed: i64 = spi::nullable(&row, 1, "file_together's filed").unwrap_or(0);
        let failure: Option<String> = spi::nullable(&row, 2, "file_together's failure");
        (filed, failure)
    });
    match together {
        (filed, None) => (filed as usize, Vec::new()),
        (_, Some(_)) => {
            let mut filed = 0usize;
            let mut refused = Vec::new();
            Spi::connect(|client| {
                let found = client
                    .select(FILE_EACH, None, &args(rows))
                    .unwrap_or_else(|e| Error::spi(FILE_EACH, e).raise());
                for row in found {
                    let at: i32 = spi::column(&row, 1, "file_each's at");
                    let n: i64 = spi::nullable(&row, 2, "file_each's filed").unwrap_or(0);
                    match spi::nullable::<String>(&row, 3, "file_each's failure") {
                        Some(why) => refused.push((at as usize, why)),
                        None => filed += n as usize,
                    }
                }
            });
            (filed, refused)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::table_sql::qualified;

    const ME: &str = "01960000-0000-7000-8000-0000000000aa";
    const OTHER: &str = "01960000-0000-7000-8000-0000000000bb";
    const RECEIPT: &str = "01960000-0000-7000-8000-000000001001";

    fn me() -> Uuid {
        ME.parse().unwrap()
    }

    fn receipts() -> Declared {
        Declared {
            name: "receipts".into(),
            relation: qualified("shop", "receipts"),
            mirror: Mirror::Record,
            key_columns: vec!["id".into()],
            key_types: vec![KeyType::Uuid],
            columns: vec!["id".into(), "register_id".into(), "total".into()],
            column_types: vec!["uuid".into(), "uuid".into(), "bigint".into()],
            origin: Some("register_id".into()),
            ..Declared::default()
        }
    }

    fn row(v: Value) -> Vec<u8> {
        v.to_string().into_bytes()
    }

    #[test]
    fn the_origin_is_the_sender_whatever_the_row_leaves_out() {
        let c = read_row(
            &receipts(),
            me(),
            Some(RECEIPT),
            &row(json!({"id": RECEIPT, "total": "5"})),
        )
        .unwrap();
        assert_eq!(c.row["register_id"], json!(ME));
        assert_eq!(c.key, RECEIPT);
    }

    #[test]
    fn a_row_holding_a_nul_anywhere_is_malformed() {
        for held in [
            json!({"id": RECEIPT, "total": "5\u{0}"}),
            json!({"id": RECEIPT, "note": ["a", {"b": "\u{0}"}]}),
            json!({"id": RECEIPT, "\u{0}": 1}),
        ] {
            let read = read_row(&receipts(), me(), Some(RECEIPT), &row(held.clone()));
            assert!(read.is_err(), "{held}");
        }
    }

    #[test]
    fn a_row_naming_another_replica_is_malformed() {
        let e = read_row(
            &receipts(),
            me(),
            Some(RECEIPT),
            &row(json!({"id": RECEIPT, "register_id": OTHER})),
        )
        .unwrap_err();
        assert!(e.to_string().contains("another replica"), "{e}");
        let same = read_row(
            &receipts(),
            me(),
            Some(RECEIPT),
            &row(json!({"id": RECEIPT, "register_id": ME.to_uppercase()})),
        );
        assert_eq!(same.unwrap().row["register_id"], json!(ME));
    }

    #[test]
    fn a_key_is_read_as_the_tables_whatever_its_spelling() {
        let shouting = RECEIPT.to_uppercase().replace('-', "");
        let c = read_row(
            &receipts(),
            me(),
            Some(&shouting),
            &row(json!({"id": RECEIPT})),
        )
        .unwrap();
        assert_eq!(c.key, RECEIPT);
    }

    #[test]
    fn a_row_without_its_key_beside_it_or_with_another_is_malformed() {
        assert_eq!(
            read_row(&receipts(), me(), None, b"{}")
                .unwrap_err()
                .to_string(),
            "no key beside it"
        );
        let other = "01960000-0000-7000-8000-000000001002";
        let e = read_row(&receipts(), me(), Some(other), &row(json!({"id": RECEIPT}))).unwrap_err();
        assert!(e.to_string().contains("not the one beside it"), "{e}");
        assert!(read_row(&receipts(), me(), Some("nope"), &row(json!({}))).is_err());
        assert!(read_row(&receipts(), me(), Some(RECEIPT), b"[1]").is_err());
    }

    #[test]
    fn a_key_twice_in_a_part_is_its_last_row() {
        let tables = vec![receipts()];
        let part = UpTable {
            table: "receipts".into(),
            upserts: vec![row(json!({"total": "1"})), row(json!({"total": "2"}))],
            keys: vec![RECEIPT.into(), RECEIPT.into()],
            ..UpTable::default()
        };
        let read = read_part(&part, &tables, me(), None).unwrap();
        assert_eq!(read.rows.len(), 1);
        assert_eq!(read.rows[0].row["total"], json!("2"));
    }

    #[test]
    fn catalogs_and_unknown_tables_are_left_out_whole() {
        let products = Declared {
            name: "products".into(),
            mirror: Mirror::Catalog,
            ..receipts()
        };
        let tables = vec![products];
        for name in ["products", "nowhere"] {
            let part = UpTable {
                table: name.into(),
                upserts: vec![row(json!({}))],
                keys: vec![RECEIPT.into()],
                ..UpTable::default()
            };
            let outcome = read_part(&part, &tables, me(), None).unwrap_err();
            assert_eq!(outcome.left_out.len(), 1, "{name}");
        }
    }

    #[test]
    fn deletes_only_of_a_table_keyed_by_its_replica() {
        let history = Declared {
            origin: None,
            ..receipts()
        };
        let tables = vec![history];
        let part = UpTable {
            table: "receipts".into(),
            deletes: vec![RECEIPT.into()],
            ..UpTable::default()
        };
        let read = read_part(&part, &tables, me(), None).unwrap();
        assert!(read.deletes.is_empty());
        assert_eq!(
            read.left_out[0].why,
            "a delete of a table not keyed by the replica"
        );
    }

    #[test]
    fn an_edit_is_filed_only_of_a_row_the_replica_holds() {
        assert_eq!(EditStands::judge(true, false, true, true), EditStands::Held);
        assert_eq!(
            EditStands::judge(false, false, true, true),
            EditStands::Waits
        );
        assert_eq!(
            EditStands::judge(false, true, true, false),
            EditStands::Leaving
        );
        assert_eq!(
            EditStands::judge(false, false, false, false),
            EditStands::Deleted
        );
        assert_eq!(
            EditStands::judge(false, false, true, false),
            EditStands::NeverSent
        );
    }
}

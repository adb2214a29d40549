//! Building the `Up` a replica sends (protocol §5.2, §6, §7, §8): where it
//! stands (the last message applied, as that message carried its numbers,
//! and its gap), the rejections the server has not heard of, the rows it
//! wrote as they are now, digests when due and the backlog when it changed.
//!
//! Once per open, the first lane says where the replica stands at once,
//! even with nothing else to say: its last applied message (sequence 0
//! when it applied nothing) and its backlog (empty or not). A replica put
//! back to an older copy of its database, or a device set up again under
//! its id, so tells the server at once, and the server provisions it
//! again (protocol A.1, A.2).
//!
//! An Up is built in one write transaction: the notes it carries are
//! stamped there with a fresh random upload number, so an answer (Filed)
//! counts even if it arrives before `sent` is called. One Up per lane is
//! out at a time: building the next one on a lane gives up an earlier one
//! neither `sent` nor `refused`, whose rows go again.

pub(crate) mod backlog;
mod columns;
mod digest;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use magic_sync_proto::key;
use magic_sync_proto::wire::{Rejection, Up, UpTable};
use magic_sync_proto::{LARGEST_NUMBER, PROTOCOL};
use prost::Message;
use rand::Rng;
use rusqlite::types::ValueRef;
use rusqlite::{params, params_from_iter, Connection, OptionalExtension};
use serde_json::json;

use crate::engine::{reject, state};
use crate::error::Error;
use crate::model::codec::{Codec, Kind};
use crate::model::row_json::{cell_of_sql, key_to_sql};
use crate::model::shape::Shape;
use crate::settings::Settings;
use crate::sql::{quote, Transaction};

/// An `Up` to send, encoded. Hand `bytes` to the transport on `lane`, then
/// call `Replica::sent` once the transport took it, or `Replica::refused`
/// when it would not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upload {
    pub bytes: Vec<u8>,
    pub lane: String,
    /// The state's news counter this Up answers to (first lane).
    pub(crate) news: Option<i64>,
    /// The rejections it carries.
    pub(crate) rejections: Vec<i64>,
    /// Its upload number, when it carries rows.
    pub(crate) number: Option<u64>,
    /// The notes it carries.
    pub(crate) notes: Vec<i64>,
    /// Whether it carries digests, and which backlog.
    pub(crate) digests: bool,
    pub(crate) backlog: Option<String>,
    /// Whether it carries part of what a refused Up carried.
    pub(crate) narrowing: bool,
    /// Whether it says where the replica stands, as it owes once per open:
    /// what it applied and its backlog.
    pub(crate) standing: bool,
    /// Whether its lane was narrowing a refusal down (or stuck) when it
    /// was built: taken, it tells the narrowing so.
    pub(crate) suspected: bool,
}

impl Upload {
    /// The message, decoded again (for logs and tests).
    pub fn message(&self) -> Up {
        Up::decode(self.bytes.as_slice()).expect("an Up this library encoded decodes")
    }

    /// The upload number of this send, when it carries rows.
    pub fn number(&self) -> Option<u64> {
        self.number
    }

    /// Whether it only says what the replica applied: no rows, no
    /// rejections, no digests, no backlog, and not the standing owed once
    /// per open. Such a report may wait to cover several messages (§5.2).
    pub fn only_says_applied(&self) -> bool {
        self.number.is_none()
            && self.notes.is_empty()
            && self.rejections.is_empty()
            && !self.digests
            && self.backlog.is_none()
            && !self.narrowing
            && !self.standing
    }

    /// Rows and rejections it carries (what halving halves).
    pub fn items(&self) -> usize {
        self.notes.len() + self.rejections.len()
    }
}

/// How the transport refused an Up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// A retry may get through (the transport is away, or busy): the same
    /// rows go again in the next Up.
    Transient,
    /// This message is refused for good: it is sent again in halves until
    /// the row (or rejection) at fault is alone.
    ForGood,
}

/// What the replica made of a refusal for good.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Narrowed {
    /// Nothing to narrow: the rows go again as they are.
    Again,
    /// The next Up of the lane carries half of what was refused.
    Halving,
    /// The row at fault, alone, is set aside: counted in the backlog and
    /// never sent by this build.
    SetAside { table: String, key: String },
    /// The rejection at fault, alone, is taken as told, so it never holds
    /// back the confirmation of what was applied.
    RejectionTold { table: String, key: String },
    /// What was refused is alone, but the transport took nothing else
    /// meanwhile: it may refuse every message. Nothing is set aside; back
    /// off, raise the alarm, and ask again.
    Stuck,
}

/// What building an Up needs of the replica.
pub(crate) struct Uploading<'a> {
    pub conn: &'a Connection,
    pub shapes: &'a [Shape],
    /// Indices into `shapes` of the tables that go up, parents first.
    pub order: &'a [usize],
    pub settings: &'a Settings,
    /// The replica opened and has not said yet where it stands: the first
    /// lane's next Up says it, with nothing else to say.
    pub opening: bool,
    /// The news the transport took in Ups kept in memory (see `sent`).
    pub said: i64,
}

impl Uploading<'_> {
    fn first_lane(&self) -> &str {
        &self.settings.lanes[0].name
    }

    /// The lane a table's rows go on: the one naming it, else the first.
    pub(crate) fn lane_of(&self, table: &str) -> &str {
        self.settings
            .lanes
            .iter()
            .find(|l| l.tables.iter().any(|t| t == table))
            .unwrap_or(&self.settings.lanes[0])
            .name
            .as_str()
    }

    fn tables_on(&self, lane: &str) -> Vec<&Shape> {
        self.order
            .iter()
            .map(|&i| &self.shapes[i])
            .filter(|s| self.lane_of(&s.name) == lane)
            .collect()
    }
}

pub(crate) fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

fn seconds(d: Duration) -> i64 {
    i64::try_from(d.as_secs()).unwrap_or(i64::MAX)
}

/// What a narrowing lane still suspects.
#[derive(Default)]
struct Suspects {
    notes: Vec<i64>,
    rejections: Vec<i64>,
    took_other: bool,
    stuck: bool,
}

impl Suspects {
    fn read(conn: &Connection, lane: &str) -> rusqlite::Result<Option<Suspects>> {
        conn.prepare_cached(
            "SELECT suspects, took_other, stuck FROM sync_narrowing WHERE lane = ?1",
        )?
        .query_row([lane], |row| {
            let text: String = row.get(0)?;
            let value: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
            let ids = |field: &str| -> Vec<i64> {
                value[field]
                    .as_array()
                    .map(|a| a.iter().filter_map(|v| v.as_i64()).collect())
                    .unwrap_or_default()
            };
            Ok(Suspects {
                notes: ids("notes"),
                rejections: ids("rejections"),
                took_other: row.get(1)?,
                stuck: row.get(2)?,
            })
        })
        .optional()
    }

    fn write(&self, conn: &Connection, lane: &str) -> rusqlite::Result<()> {
        if self.notes.is_empty() && self.rejections.is_empty() {
            conn.execute("DELETE FROM sync_narrowing WHERE lane = ?1", [lane])?;
            return Ok(());
        }
        let text = json!({"notes": self.notes, "rejections": self.rejections}).to_string();
        conn.execute(
            "INSERT OR REPLACE INTO sync_narrowing (lane, suspects, took_other, stuck)
             VALUES (?1, ?2, ?3, ?4)",
            params![lane, text, self.took_other, self.stuck],
        )?;
        Ok(())
    }

    fn contains_note(&self, id: i64) -> bool {
        self.notes.contains(&id)
    }
}

/// The next Up of a lane (of any lane, first lane first, for `None`), when
/// there is something to say.
pub(crate) fn next(u: &Uploading<'_>, lane: Option<&str>) -> Result<Option<Upload>, Error> {
    let tx = Transaction::begin(u.conn)?;
    let lanes: Vec<String> = match lane {
        Some(lane) => vec![lane.to_owned()],
        None => u.settings.lanes.iter().map(|l| l.name.clone()).collect(),
    };
    release_unanswered(u)?;
    for lane in lanes {
        give_up_unsent(u.conn, &lane)?;
        if let Some(upload) = build(u, &lane)? {
            tx.commit()?;
            return Ok(Some(upload));
        }
    }
    tx.commit()?;
    Ok(None)
}

/// Notes whose upload the transport took a while ago and the server has
/// not answered go up again (the server files the same rows idempotently).
fn release_unanswered(u: &Uploading<'_>) -> rusqlite::Result<()> {
    let before = now() - seconds(u.settings.resend_after);
    // Most Ups find none: asked first, since the UPDATE builds its IN list
    // in a temporary B-tree every time it runs, which cost more than the
    // rest of a report.
    let any: bool = u
        .conn
        .prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM sync_uploads WHERE taken = 1 AND taken_at <= ?1)",
        )?
        .query_row([before], |row| row.get(0))?;
    if !any {
        return Ok(());
    }
    u.conn
        .prepare_cached(
            "UPDATE sync_notes SET pending = 1 WHERE pending = 0 AND upload IN
             (SELECT number FROM sync_uploads WHERE taken = 1 AND taken_at <= ?1)",
        )?
        .execute([before])?;
    u.conn
        .prepare_cached("DELETE FROM sync_uploads WHERE taken = 1 AND taken_at <= ?1")?
        .execute([before])?;
    Ok(())
}

/// An earlier Up of the lane neither sent nor refused is given up: its
/// rows go again.
fn give_up_unsent(conn: &Connection, lane: &str) -> rusqlite::Result<()> {
    // Most Ups find none: asked first (see `release_unanswered`).
    let any: bool = conn
        .prepare_cached("SELECT EXISTS (SELECT 1 FROM sync_uploads WHERE taken = 0 AND lane = ?1)")?
        .query_row([lane], |row| row.get(0))?;
    if !any {
        return Ok(());
    }
    conn.prepare_cached(
        "UPDATE sync_notes SET pending = 1 WHERE upload IN
         (SELECT number FROM sync_uploads WHERE taken = 0 AND lane = ?1)",
    )?
    .execute([lane])?;
    conn.prepare_cached("DELETE FROM sync_uploads WHERE taken = 0 AND lane = ?1")?
        .execute([lane])?;
    Ok(())
}

/// A row going up, read as it is now.
struct Row {
    note: i64,
    table: usize,
    key: String,
    /// The row's bytes, or `None` for a row that is gone (a delete).
    bytes: Option<Vec<u8>>,
    restated: bool,
}

fn build(u: &Uploading<'_>, lane: &str) -> Result<Option<Upload>, Error> {
    let conn = u.conn;
    let first = lane == u.first_lane();
    let opening = first && u.opening;
    let mut state = state::read(conn)?;
    state.said = state.said.max(u.said);
    let limits = &u.settings.limits;
    let suspects = Suspects::read(conn, lane)?;
    // A narrowing lane sends half of what is suspected — unless it is
    // stuck, when it sends anything else to learn whether the transport
    // takes messages at all.
    let narrowing = suspects.as_ref().is_some_and(|s| !s.stuck);
    let excluded = suspects.as_ref().filter(|s| s.stuck);

    let mut up = Up {
        protocol: PROTOCOL,
        ..Up::default()
    };
    if first {
        up.epoch = state.epoch.clone();
        up.sequence = state.sequence;
        up.nonce = state.nonce;
        up.mac = state.mac.clone();
        up.gap = state.gap;
    }
    // Once per open, beside where it stands: the columns this build holds
    // of the tables the server sends it (a new build may have added one).
    if opening && !narrowing {
        let mut with = up.clone();
        with.columns = columns::held(u.shapes);
        if with.encoded_len() <= limits.bytes {
            up = with;
        } else {
            log::warn!(
                "the tables' columns do not fit an Up: said where the replica stands without them"
            );
        }
    }

    let (mut rejection_ids, mut rejections, mut notes_allowed): (
        Vec<i64>,
        Vec<Rejection>,
        Option<Vec<i64>>,
    ) = (Vec::new(), Vec::new(), None);
    // Most Ups have no rejection to read: the state says whether any is
    // kept at all.
    let waiting: Vec<(i64, Rejection)> = if first && !state.epoch.is_empty() && state.rejections {
        reject::unreported(conn, &state.epoch)?
    } else {
        Vec::new()
    };
    let waiting: Vec<(i64, Rejection)> = match (&suspects, narrowing) {
        (Some(s), true) => {
            // Half of the suspects, rows first, then rejections.
            let live: Vec<i64> = live_notes(conn, &s.notes)?;
            let live_rejections: Vec<&(i64, Rejection)> = waiting
                .iter()
                .filter(|(id, _)| s.rejections.contains(id))
                .collect();
            let total = live.len() + live_rejections.len();
            if total == 0 {
                conn.execute("DELETE FROM sync_narrowing WHERE lane = ?1", [lane])?;
                return build(u, lane);
            }
            let half = total.div_ceil(2);
            let notes: Vec<i64> = live.iter().copied().take(half).collect();
            let rest = half - notes.len();
            notes_allowed = Some(notes);
            live_rejections.into_iter().take(rest).cloned().collect()
        }
        (Some(s), false) => waiting
            .into_iter()
            .filter(|(id, _)| !s.rejections.contains(id))
            .collect(),
        (None, _) => waiting,
    };
    let mut all_rejections_fit = true;
    for (id, rejection) in &waiting {
        rejections.push(rejection.clone());
        up.rejected = rejections.clone();
        if rejections.len() > limits.rows || up.encoded_len() > limits.bytes {
            rejections.pop();
            all_rejections_fit = false;
            break;
        }
        rejection_ids.push(*id);
    }
    up.rejected = rejections;

    let room = limits.rows.saturating_sub(up.rejected.len());
    let rows = if narrowing && notes_allowed.as_ref().is_some_and(Vec::is_empty) {
        Vec::new()
    } else {
        gather(
            u,
            lane,
            room,
            up.encoded_len(),
            notes_allowed.as_deref(),
            excluded,
        )?
    };
    let mut number = None;
    if !rows.is_empty() {
        up.tables = parts(u, &rows);
        let n = draw();
        up.uploads = vec![n];
        number = Some(n);
    }

    let mut news = None;
    let mut digests = false;
    let mut backlog_said = None;
    if first {
        news = Some(if all_rejections_fit {
            state.news
        } else {
            state.said
        });
        if !all_rejections_fit {
            // The server must hear every rejection of a message no later
            // than that the message was applied. These do not all fit:
            // this Up says nothing of where the replica stands.
            up.epoch.clear();
            up.sequence = 0;
            up.nonce = 0;
            up.mac.clear();
            up.gap = 0;
        }
    }

    // Stamp the notes carried, so the backlog counts them unfiled.
    let carried: Vec<i64> = rows.iter().map(|r| r.note).collect();
    if let Some(n) = number {
        stamp(conn, lane, n, &carried)?;
    }

    // Said where it stands: what it applied, and its backlog.
    let mut standing = false;
    if first && !narrowing {
        if digests_due(u, &state)? {
            let read = digest::read(conn, u.shapes)?;
            let mut with = up.clone();
            with.digests = read;
            if with.encoded_len() <= limits.bytes {
                up = with;
                digests = true;
            }
        }
        // On opening the backlog is said whatever was said before, even
        // empty: the server may keep another (a copy put back, a device set
        // up again).
        let due = if opening {
            Some(backlog::read(conn)?)
        } else {
            backlog_due(u, &state)?
        };
        let mut never_fits = false;
        if let Some(current) = due {
            let mut with = up.clone();
            with.backlog = Some(backlog::to_wire(&current));
            if with.encoded_len() <= limits.bytes {
                up = with;
                backlog_said = Some(backlog::fingerprint(&current));
            } else {
                let alone = Up {
                    protocol: PROTOCOL,
                    epoch: state.epoch.clone(),
                    sequence: state.sequence,
                    nonce: state.nonce,
                    mac: state.mac.clone(),
                    gap: state.gap,
                    backlog: Some(backlog::to_wire(&current)),
                    ..Up::default()
                };
                never_fits = alone.encoded_len() > limits.bytes;
            }
        }
        // What it applied goes unless rejections took its place. The
        // backlog goes beside it, unless what else goes left it no room:
        // then the next Up says it (one that could never carry it says
        // where it stands without).
        standing = opening && all_rejections_fit && (backlog_said.is_some() || never_fits);
        if standing && never_fits {
            log::warn!("the backlog does not fit an Up: said where the replica stands without it");
        }
    }

    let has_news = first && state.news > state.said;
    let says_something = opening
        || has_news
        || !up.rejected.is_empty()
        || !up.tables.is_empty()
        || digests
        || backlog_said.is_some();
    if !says_something {
        return Ok(None);
    }
    Ok(Some(Upload {
        bytes: up.encode_to_vec(),
        lane: lane.to_owned(),
        news,
        rejections: rejection_ids,
        number,
        notes: carried,
        digests,
        backlog: backlog_said,
        narrowing,
        standing,
        suspected: suspects.is_some(),
    }))
}

fn live_notes(conn: &Connection, ids: &[i64]) -> rusqlite::Result<Vec<i64>> {
    let mut live = Vec::new();
    let mut statement = conn.prepare_cached(
        "SELECT EXISTS (SELECT 1 FROM sync_notes WHERE id = ?1 AND pending = 1 AND set_aside IS NULL)",
    )?;
    for &id in ids {
        if statement.query_row([id], |row| row.get::<_, bool>(0))? {
            live.push(id);
        }
    }
    Ok(live)
}

/// A fresh random upload number: 1 to 2^63 - 1.
fn draw() -> u64 {
    rand::rng().random_range(1..=LARGEST_NUMBER)
}

fn stamp(conn: &Connection, lane: &str, number: u64, notes: &[i64]) -> rusqlite::Result<()> {
    conn.prepare_cached("INSERT INTO sync_uploads (number, lane) VALUES (?1, ?2)")?
        .execute(params![number as i64, lane])?;
    let mut mark = conn.prepare_cached(
        "UPDATE sync_notes SET upload = ?1, sent_writes = writes, pending = 0 WHERE id = ?2",
    )?;
    for id in notes {
        mark.execute(params![number as i64, id])?;
    }
    Ok(())
}

/// The noted rows of the lane's tables, parents first, as they are now,
/// within what one Up takes (`room` rows, `used` bytes taken already). A
/// row gone by now goes as a delete only for a table keyed by its replica;
/// otherwise its note is forgotten. A row that cannot go (it does not
/// encode, or could never fit) is set aside.
fn gather(
    u: &Uploading<'_>,
    lane: &str,
    room: usize,
    used: usize,
    only: Option<&[i64]>,
    excluded: Option<&Suspects>,
) -> Result<Vec<Row>, Error> {
    let conn = u.conn;
    let limit = u.settings.limits.bytes;
    let mut rows = Vec::new();
    let mut bytes = used + 64;
    // Rows left out of this Up (a narrowing's) must not use up the scan.
    let scan: i64 = if only.is_some() || excluded.is_some() {
        -1
    } else {
        (room + 1) as i64
    };
    'tables: for shape in u.tables_on(lane) {
        let table = u
            .shapes
            .iter()
            .position(|s| std::ptr::eq(s, shape))
            .expect("a declared table");
        let reading = Reading::of(shape);
        let notes: Vec<(i64, String, bool)> = conn
            .prepare_cached(
                "SELECT id, key, restated FROM sync_notes
                 WHERE table_name = ?1 AND pending = 1 AND set_aside IS NULL ORDER BY id LIMIT ?2",
            )?
            .query_map(params![shape.name, scan], |row| {
                Ok((row.get(0)?, row.get(1)?, row.get(2)?))
            })?
            .collect::<rusqlite::Result<_>>()?;
        for (note, key_text, restated) in notes {
            if rows.len() >= room {
                break 'tables;
            }
            if only.is_some_and(|o| !o.contains(&note))
                || excluded.is_some_and(|s| s.contains_note(note))
            {
                continue;
            }
            let parts = match key::parse(&key_text, &shape.key_types) {
                Ok(parts) if key::join(&parts) == key_text => parts,
                _ => {
                    set_aside(
                        conn,
                        note,
                        &format!("the key `{key_text}` is not in the key text form"),
                    )?;
                    continue;
                }
            };
            let encoded = match read_row(shape, conn, &parts, &reading)? {
                Some(Ok(encoded)) => Some(encoded),
                Some(Err(why)) => {
                    set_aside(conn, note, &format!("the row does not encode: {why}"))?;
                    continue;
                }
                None if shape.origin.is_some() => None,
                None => {
                    // History pruned before it went up: not the server's
                    // to delete.
                    conn.execute("DELETE FROM sync_notes WHERE id = ?1", [note])?;
                    continue;
                }
            };
            let cost = encoded.as_ref().map_or(0, Vec::len) + key_text.len() + 24;
            if cost + 256 > limit {
                set_aside(conn, note, "the row can never fit a message")?;
                continue;
            }
            if bytes + cost > limit {
                break 'tables;
            }
            bytes += cost;
            rows.push(Row {
                note,
                table,
                key: key_text,
                bytes: encoded,
                restated,
            });
        }
    }
    Ok(rows)
}

fn set_aside(conn: &Connection, note: i64, why: &str) -> rusqlite::Result<()> {
    log::error!("a row set aside, never sent by this build: {why}");
    conn.execute(
        "UPDATE sync_notes SET set_aside = ?2 WHERE id = ?1",
        params![note, why],
    )?;
    Ok(())
}

/// How a table's rows are read to go up: the columns, whether each goes as
/// raw bytes, and the statement (made once per Up, not per row).
struct Reading {
    columns: Vec<usize>,
    raw: Vec<bool>,
    sql: String,
}

impl Reading {
    fn of(shape: &Shape) -> Reading {
        let columns = shape.columns_up();
        let sql = format!(
            "SELECT {} FROM {} WHERE {}",
            columns
                .iter()
                .map(|&i| quote(&shape.columns[i].name))
                .collect::<Vec<_>>()
                .join(", "),
            quote(&shape.name),
            shape.key_match()
        );
        let raw = columns
            .iter()
            .map(|&i| raw_bytes(&shape.codec, &shape.columns[i].name))
            .collect();
        Reading { columns, raw, sql }
    }
}

/// The row with this key as it is now, encoded by its codec; `None` when
/// it is gone.
fn read_row(
    shape: &Shape,
    conn: &Connection,
    parts: &[key::KeyPart],
    reading: &Reading,
) -> rusqlite::Result<Option<Result<Vec<u8>, Error>>> {
    let mut statement = conn.prepare_cached(&reading.sql)?;
    let mut rows = statement.query(params_from_iter(key_to_sql(shape, parts)))?;
    let Some(row) = rows.next()? else {
        return Ok(None);
    };
    let mut cells = Vec::with_capacity(reading.columns.len());
    for (at, (&i, &raw)) in reading.columns.iter().zip(&reading.raw).enumerate() {
        let column = &shape.columns[i];
        let value: ValueRef<'_> = row.get_ref(at)?;
        cells.push((column.name.as_str(), cell_of_sql(column.kind, raw, value)));
    }
    Ok(Some(shape.codec.encode(&cells)))
}

fn raw_bytes(codec: &Codec, column: &str) -> bool {
    match codec {
        Codec::Json => false,
        Codec::Protobuf(fields) => fields
            .iter()
            .any(|f| f.kind == Kind::Bytes && f.column.eq_ignore_ascii_case(column)),
    }
}

/// The rows as parts: upserts parents first (re-stated ones in a part of
/// their own), then deletes children first.
fn parts(u: &Uploading<'_>, rows: &[Row]) -> Vec<UpTable> {
    let mut parts = Vec::new();
    let mut tables: Vec<usize> = Vec::new();
    for row in rows {
        if !tables.contains(&row.table) {
            tables.push(row.table);
        }
    }
    // `rows` came parents first: that order is kept for upserts.
    for &table in &tables {
        for restated in [false, true] {
            let mut part = UpTable {
                table: u.shapes[table].name.clone(),
                restated,
                ..UpTable::default()
            };
            for row in rows
                .iter()
                .filter(|r| r.table == table && r.restated == restated)
            {
                if let Some(bytes) = &row.bytes {
                    part.upserts.push(bytes.clone());
                    part.keys.push(row.key.clone());
                }
            }
            if !part.upserts.is_empty() {
                parts.push(part);
            }
        }
    }
    for &table in tables.iter().rev() {
        let mut part = UpTable {
            table: u.shapes[table].name.clone(),
            ..UpTable::default()
        };
        for row in rows
            .iter()
            .filter(|r| r.table == table && r.bytes.is_none())
        {
            part.deletes.push(row.key.clone());
        }
        if !part.deletes.is_empty() {
            parts.push(part);
        }
    }
    parts
}

/// Digests are due once `digests_every` has passed since the last ones
/// said, while the replica follows a chain (applied something, no gap, no
/// snapshot in progress).
fn digests_due(u: &Uploading<'_>, state: &state::State) -> rusqlite::Result<bool> {
    if state.epoch.is_empty() || state.has_gap() || state.in_snapshot() {
        return Ok(false);
    }
    let at: i64 = u
        .conn
        .prepare_cached("SELECT digests_at FROM sync_state WHERE id = 1")?
        .query_row([], |r| r.get(0))?;
    Ok(at == 0 || now() - at >= seconds(u.settings.digests_every))
}

/// The backlog is said when it changed — at once when it emptied, else at
/// most every `backlog_every` — again every `backlog_again` while it is
/// not empty, and to a server whose epoch changed.
///
/// Answers the backlog to say, when due. Counting it reads every note, so
/// between times it is only asked whether it emptied.
fn backlog_due(
    u: &Uploading<'_>,
    state: &state::State,
) -> rusqlite::Result<Option<Vec<backlog::TableBacklog>>> {
    let (said, at, epoch): (String, i64, String) = u
        .conn
        .prepare_cached(
            "SELECT backlog_said, backlog_at, backlog_epoch FROM sync_state WHERE id = 1",
        )?
        .query_row([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
    let elapsed = now() - at;
    // Epochs are compared as UUIDs, whatever their spelling.
    let another_epoch = state::epoch_spelt(&epoch) != state::epoch_spelt(&state.epoch);
    let in_time = elapsed >= seconds(u.settings.backlog_every)
        || elapsed >= seconds(u.settings.backlog_again)
        || another_epoch;
    if !in_time {
        let empty: bool = u
            .conn
            .prepare_cached("SELECT NOT EXISTS (SELECT 1 FROM sync_notes)")?
            .query_row([], |r| r.get(0))?;
        return Ok((empty && !said.is_empty()).then(Vec::new));
    }
    let current = backlog::read(u.conn)?;
    let now_text = backlog::fingerprint(&current);
    let empty = current.is_empty();
    let changed = now_text != said;
    let due = (changed && (empty || elapsed >= seconds(u.settings.backlog_every)))
        || (!empty && elapsed >= seconds(u.settings.backlog_again))
        || (another_epoch && !(empty && said.is_empty()));
    Ok(due.then_some(current))
}

/// The transport took this Up: what it said need not be said again.
///
/// An Up that only said what was applied is kept as taken in `said`, in
/// memory, and not written: written, its commit and its sync of the disk
/// cost a register as much CPU as applying the message it reports
/// (docs/src/decisions.md, issue 37). Nothing is lost with it: a replica
/// opened again says where it stands first thing whatever it said before,
/// and the server takes a report twice as any Up delivered twice.
pub(crate) fn sent(conn: &Connection, upload: &Upload, said: &mut i64) -> Result<(), Error> {
    let news = upload.news.unwrap_or(0);
    if upload.only_says_applied() && !upload.suspected {
        *said = (*said).max(news);
        return Ok(());
    }
    let tx = Transaction::begin(conn)?;
    let t = now();
    if upload.news.is_some() {
        state::said(conn, news.max(*said))?;
    }
    reject::reported(conn, &upload.rejections)?;
    if let Some(n) = upload.number {
        conn.prepare_cached("UPDATE sync_uploads SET taken = 1, taken_at = ?2 WHERE number = ?1")?
            .execute(params![n as i64, t])?;
    }
    if upload.digests {
        conn.prepare_cached("UPDATE sync_state SET digests_at = ?1 WHERE id = 1")?
            .execute([t])?;
    }
    if let Some(backlog) = &upload.backlog {
        conn.prepare_cached(
            "UPDATE sync_state SET backlog_said = ?1, backlog_at = ?2, backlog_epoch = epoch WHERE id = 1",
        )?
        .execute(params![backlog, t])?;
    }
    if let Some(mut suspects) = Suspects::read(conn, &upload.lane)? {
        // The transport took a message of this lane: what it carried of the
        // suspects went through, and the transport is not refusing all.
        suspects.notes.retain(|id| !upload.notes.contains(id));
        suspects
            .rejections
            .retain(|id| !upload.rejections.contains(id));
        suspects.took_other = true;
        suspects.stuck = false;
        suspects.write(conn, &upload.lane)?;
    }
    tx.commit()?;
    Ok(())
}

/// The transport refused this Up.
pub(crate) fn refused(
    conn: &Connection,
    upload: &Upload,
    refusal: Refusal,
) -> Result<Narrowed, Error> {
    let tx = Transaction::begin(conn)?;
    // Its rows go again (or are narrowed down): they were not taken.
    if let Some(n) = upload.number {
        conn.execute(
            "UPDATE sync_notes SET pending = 1 WHERE upload = ?1",
            [n as i64],
        )?;
        conn.execute("DELETE FROM sync_uploads WHERE number = ?1", [n as i64])?;
    }
    let narrowed = match refusal {
        Refusal::Transient => Narrowed::Again,
        Refusal::ForGood => narrow(conn, upload)?,
    };
    tx.commit()?;
    Ok(narrowed)
}

fn narrow(conn: &Connection, upload: &Upload) -> Result<Narrowed, Error> {
    let lane = &upload.lane;
    let existing = Suspects::read(conn, lane)?;
    if upload.items() == 0 {
        // Nothing in it could be at fault: the transport refuses it all.
        log::error!("the transport refused an Up of lane {lane} that carried no row: it may refuse every message");
        return Ok(Narrowed::Stuck);
    }
    let took_other = existing.as_ref().is_some_and(|s| s.took_other);
    if upload.items() > 1 {
        Suspects {
            notes: upload.notes.clone(),
            rejections: upload.rejections.clone(),
            took_other,
            stuck: false,
        }
        .write(conn, lane)?;
        return Ok(Narrowed::Halving);
    }
    if !took_other {
        log::error!(
            "the transport refused one row of lane {lane} alone, and took nothing else meanwhile: \
             nothing is set aside; back off and ask again"
        );
        Suspects {
            notes: upload.notes.clone(),
            rejections: upload.rejections.clone(),
            took_other: false,
            stuck: true,
        }
        .write(conn, lane)?;
        return Ok(Narrowed::Stuck);
    }
    let narrowed = if let Some(&note) = upload.notes.first() {
        let (table, key): (String, String) = conn.query_row(
            "SELECT table_name, key FROM sync_notes WHERE id = ?1",
            [note],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        set_aside(conn, note, "the transport refused it for good")?;
        Narrowed::SetAside { table, key }
    } else {
        let id = upload.rejections[0];
        let (table, key): (String, String) = conn.query_row(
            "SELECT table_name, key FROM sync_rejections WHERE id = ?1",
            [id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        log::error!("the transport refused the rejection of {table} {key} for good: taken as told");
        reject::reported(conn, &[id])?;
        Narrowed::RejectionTold { table, key }
    };
    let mut rest = existing.unwrap_or_default();
    rest.notes.retain(|id| !upload.notes.contains(id));
    rest.rejections.retain(|id| !upload.rejections.contains(id));
    rest.write(conn, lane)?;
    Ok(narrowed)
}

/// What every table that goes up waits on.
pub(crate) fn progress(u: &Uploading<'_>) -> rusqlite::Result<Vec<backlog::TableBacklog>> {
    let found = backlog::read(u.conn)?;
    Ok(u.order
        .iter()
        .map(|&i| {
            let name = &u.shapes[i].name;
            found
                .iter()
                .find(|t| &t.table == name)
                .cloned()
                .unwrap_or_else(|| backlog::TableBacklog {
                    table: name.clone(),
                    ..Default::default()
                })
        })
        .collect())
}

//! What a replica sends up: `sync.receive(replica, bytes)`, everything
//! protocol Appendix A says the server does with an `Up`, filed under the
//! replica the caller names (the transport's word), never what the message
//! itself claims.
//!
//! It runs in the caller's transaction, and raises an error when the Up must
//! come again (it speaks a later protocol, or the database failed in a way a
//! resend may cure) and when the bytes are no Up at all: whoever hands them
//! over is told plainly, and nothing changes. Anything else is answered (a
//! jsonb verdict) and kept: a row the database refuses waits in the inbox
//! (inbox.rs) and counts as filed. An Up beyond the limits, and one from a
//! sender the server does not know, are dropped, unanswered. One whose
//! upload numbers were answered already is the same Up handed over again:
//! answered again, and nothing else (answer.rs).
//!
//! In order, each step apart from the others, so none holds back another:
//! the rejections (rejections.rs), what it applied and its gap
//! (applied.rs), its rows (rows.rs), its digests (digests.rs), its backlog
//! (backlogs.rs), the columns its build holds (columns.rs); then the answer, a Filed written in this transaction
//! (answer.rs).

pub mod standing;
pub mod acting;
pub mod senders;
pub mod applied;
pub mod went_back;
pub mod provision_again;
pub mod rejections;
pub mod rows;
pub mod rows_sql;
pub mod inbox;
pub mod digests;
pub mod backlogs;
pub mod columns;
pub mod answer;

use std::cell::OnceCell;

use magic_sync_proto::wire::Up;
use magic_sync_proto::{LARGEST_NUMBER, PROTOCOL};
use prost::Message;
use serde_json::{json, Value};
use uuid::Uuid;

use self::acting::Caller;
use self::applied::Judged;
use self::rows::Outcome;
use self::senders::Sender;
use crate::catalog::{self, Declared};
use crate::error::Error;
use crate::file::standing::Standing;
use crate::gate;
use crate::settings;
use crate::spi;
use crate::statements::spi::SET_FOR_THE_TRANSACTION;

fn dropped(replica: Uuid, why: &str) -> Value {
    pgrx::log!("magic_sync: an Up from {replica} dropped as malformed: {why}");
    json!({ "verdict": "malformed", "why": why })
}

/// Why an Up is beyond the server's limits, if it is: more bytes than a
/// message takes, more rows and rejections together than one carries, more
/// tables or upload numbers.
pub fn beyond_limits(up: &Up, bytes: usize) -> Option<String> {
    let limits = settings::limits();
    let rows: usize = up
        .tables
        .iter()
        .map(|t| t.upserts.len() + t.deletes.len())
        .sum::<usize>()
        + up.rejected.len();
    if bytes > limits.bytes {
        Some(format!(
            "{bytes} bytes, more than a message takes ({})",
            limits.bytes
        ))
    } else if rows > limits.rows {
        Some(format!(
            "{rows} rows and rejections, more than a message carries ({})",
            limits.rows
        ))
    } else if up.tables.len() > limits.tables {
        Some(format!(
            "{} parts, more than a message carries ({})",
            up.tables.len(),
            limits.tables
        ))
    } else if up.uploads.len() > limits.uploads {
        Some(format!(
            "{} upload numbers, more than a Filed carries ({})",
            up.uploads.len(),
            limits.uploads
        ))
    } else {
        None
    }
}

/// Why an Up's upload numbers are none a replica sends, if they are not:
/// every send of rows carries a fresh number from 1 to 2^63 - 1 (protocol
/// 4.4), and a Filed names them. Rows under no number could never be
/// answered, and the replica would send them for ever: malformed instead,
/// so the fault shows where it lies.
pub fn unanswerable(up: &Up) -> Option<String> {
    let rows = up
        .tables
        .iter()
        .any(|t| !t.upserts.is_empty() || !t.deletes.is_empty());
    if let Some(n) = up
        .uploads
        .iter()
        .find(|n| !(1..=LARGEST_NUMBER).contains(*n))
    {
        Some(format!("an upload number of {n}, outside 1 to 2^63 - 1"))
    } else if rows && up.uploads.is_empty() {
        Some("rows under no upload number: no Filed could answer them".to_owned())
    } else {
        None
    }
}

/// The first of the Up's texts about the replica that holds a NUL
/// character, by name. No text or jsonb value of PostgreSQL holds one, and
/// a replica writes these from what the server sent it or from its
/// declarations, which hold none: such an Up is no replica's. (A key of a
/// row the replica wrote may hold one: that row alone is left out, in
/// rows.rs.)
pub fn text_holding_nul(up: &Up) -> Option<&'static str> {
    let nul = |text: &String| text.contains('\0');
    if nul(&up.epoch) {
        return Some("its epoch");
    }
    for r in &up.rejected {
        if [&r.table, &r.key, &r.reason, &r.epoch].into_iter().any(nul) {
            return Some("a rejection");
        }
    }
    if up.digests.iter().any(|d| nul(&d.table)) {
        return Some("a digest's table");
    }
    let backlog = up.backlog.iter().flat_map(|b| &b.tables);
    if backlog.map(|t| &t.table).any(nul) {
        return Some("a backlog's table");
    }
    if up
        .columns
        .iter()
        .any(|t| nul(&t.table) || t.columns.iter().any(nul))
    {
        return Some("a table's columns");
    }
    None
}

/// The verdict with every NUL character of the texts it gives back (a key
/// or a table's name left out) shown as U+FFFD: jsonb holds none.
fn printable(verdict: Value) -> Value {
    let text = |t: String| {
        if t.contains('\0') {
            t.replace('\0', "\u{FFFD}")
        } else {
            t
        }
    };
    match verdict {
        Value::String(t) => Value::String(text(t)),
        Value::Array(items) => Value::Array(items.into_iter().map(printable).collect()),
        Value::Object(members) => Value::Object(
            members
                .into_iter()
                .map(|(name, value)| (text(name), printable(value)))
                .collect(),
        ),
        other => other,
    }
}

/// An Up of the first lane (it carries the backlog, which only the first
/// lane does) saying sequence 0 with no rejection beside it: the replica
/// applied nothing yet.
fn says_it_applied_nothing(up: &Up) -> bool {
    up.sequence == 0 && up.backlog.is_some() && up.rejected.is_empty()
}

/// Files an Up under `replica`, for `caller`: the hooks and the host's
/// tables see it (acting.rs).
pub fn file_up(replica: Uuid, bytes: &[u8], caller: &Caller) -> Value {
    let up = match Up::decode(bytes) {
        Ok(up) => up,
        Err(e) => Error::bad_message(
            format!("magic_sync: the bytes from {replica} are not an Up message: {e}"),
            "sync.receive takes the bytes of an Up, as the replica library builds them.",
        )
        .raise(),
    };
    if up.protocol == 0 {
        return dropped(replica, "no protocol");
    }
    if up.protocol > PROTOCOL {
        Error::not_yet(
            format!(
                "magic_sync: {replica} speaks protocol {}, and this server {PROTOCOL}",
                up.protocol
            ),
            "The replica sends it again; it is filed once the server is upgraded.",
        )
        .raise();
    }
    if let Some(why) = beyond_limits(&up, bytes.len()).or_else(|| unanswerable(&up)) {
        return dropped(replica, &why);
    }
    if let Some(field) = text_holding_nul(&up) {
        return dropped(
            replica,
            &format!("{field} holds a NUL character, which no PostgreSQL text holds"),
        );
    }
    // A replica forgets what it uploaded once it sees the answer: the answer
    // (written in this transaction) must not be seen before the filing is
    // safe from a crash, whatever the server's synchronous_commit. With it
    // off, a crash after the answer was taken lost receipts for good.
    spi::run_with(
        SET_FOR_THE_TRANSACTION,
        &["synchronous_commit".into(), "on".into()],
    );
    // Not while the relay worker's pass runs: it would have to start over.
    gate::pass_through();
    let Some(mut sender) = senders::recognise(replica, caller) else {
        return json!({ "verdict": "unknown sender" });
    };
    // The same Up again, handed over twice: filed already. What it says of
    // the replica is older than what came since (read as the replica gone
    // back, it would provision it again): answered again, and nothing else.
    if answer::redelivered(replica, &up.uploads) {
        return json!({ "verdict": "redelivered", "answered": answer::answer(replica, &up.uploads) });
    }
    let standing = Standing::read(replica);
    // Read only when the Up needs them: most Ups of a fleet at work only
    // say what was applied.
    let declared = OnceCell::new();
    let tables = || {
        declared
            .get_or_init(|| catalog::wishes::with_wishes(catalog::declared_tables()))
            .as_slice()
    };
    let mut verdict = json!({ "verdict": "filed" });

    // What the upload says of the replica, filed apart from its rows.
    if !up.rejected.is_empty() {
        verdict["rejections"] = Value::Array(rejections::take(
            replica,
            standing.as_ref(),
            &up.rejected,
            tables(),
        ));
    }
    // Sequence 0 says nothing of where the replica stands on a lane but the
    // first, or beside rejections that took its place; on the first lane
    // (the one that carries the backlog) without them, it says the replica
    // applied nothing: one set up again under its id.
    let judged = match &standing {
        Some(s) if up.sequence == 0 && says_it_applied_nothing(&up) => {
            verdict["applied"] = json!(applied::take_nothing_applied(replica, s));
            Judged::NothingSaid
        }
        _ if up.sequence == 0 => Judged::NothingSaid,
        Some(s) => {
            let (judged, said) = applied::take(replica, s, &up);
            verdict["applied"] = json!(said);
            judged
        }
        None => {
            verdict["applied"] = json!("no chain recorded for it yet: ignored");
            Judged::NothingSaid
        }
    };
    if up.gap != 0 {
        verdict["gap"] = json!(match Standing::read(replica) {
            Some(s) => applied::take_gap(replica, &s, up.gap),
            None => "no chain recorded for it yet: ignored".to_owned(),
        });
    }

    // Its rows, as the sender.
    let applied_at = applied_position(&up, standing.as_ref(), judged);
    let waiting_may_go = judged == Judged::Counted;
    let rows = file_rows(
        &up,
        tables,
        &mut sender,
        standing.as_ref(),
        applied_at,
        waiting_may_go,
    );
    if let Some((outcomes, refiled)) = rows {
        if !outcomes.is_empty() {
            verdict["rows"] = outcomes.iter().map(Outcome::to_json).collect();
        }
        if let Some(refiled) = refiled {
            verdict["refiled"] = refiled;
        }
    }

    if !up.digests.is_empty() {
        verdict["digests"] = match &standing {
            Some(s) => digests::take(
                replica,
                s,
                digests::caught_up(s, judged, &up),
                &up.digests,
                tables(),
            ),
            None => json!("not compared: no chain recorded for it yet"),
        };
    }
    if let Some(backlog) = &up.backlog {
        verdict["backlog"] = backlogs::keep(replica, backlog);
    }
    if !up.columns.is_empty() {
        verdict["columns"] = columns::take(replica, &up.columns, tables());
    }
    let answered = answer::answer(replica, &up.uploads);
    if !answered.is_empty() {
        verdict["answered"] = json!(answered);
    }
    printable(verdict)
}

/// What the replica had applied when it sent this Up's deletes: what it
/// says, when that is a sealed message of its chain, or else what the
/// server last heard it apply.
fn applied_position(up: &Up, s: Option<&Standing>, judged: Judged) -> Option<(Uuid, i64)> {
    let s = s?;
    let chain = s.epoch?;
    let said = matches!(
        judged,
        Judged::Counted | Judged::Already | Judged::ReplicaWentBack
    );
    if said {
        return Some((chain, up.sequence as i64));
    }
    s.applied_in_chain().map(|sequence| (chain, sequence))
}

/// Files the Up's rows, and what waited for the replica's provisioning once
/// it is confirmed. Answers the parts' outcomes and what was filed again,
/// or None when there was nothing to file.
fn file_rows<'t>(
    up: &Up,
    tables: impl FnOnce() -> &'t [Declared],
    sender: &mut Sender,
    standing: Option<&Standing>,
    applied: Option<(Uuid, i64)>,
    waiting_may_go: bool,
) -> Option<(Vec<Outcome>, Option<Value>)> {
    let replica = sender.replica;
    let had_any = inbox::has_any(replica);
    let refile_waiting = waiting_may_go && had_any;
    if up.tables.is_empty() && !refile_waiting {
        return None;
    }
    let tables = tables();
    // Read first: a part that is malformed is left out whole, the rest of a
    // part filed.
    let mut outcomes = Vec::new();
    let mut parts = Vec::new();
    for part in &up.tables {
        match rows::read_part(part, tables, replica, applied) {
            Ok(read) => parts.push(read),
            Err(left_out) => outcomes.push(*left_out),
        }
    }
    let failure = if parts.is_empty() && !refile_waiting {
        None
    } else {
        sender.begin_filing()
    };
    // Edits that waited for the provisioning this Up confirms (unless the
    // filing hook failed: they wait on).
    let refiled = (refile_waiting && failure.is_none())
        .then(|| inbox::refile_replica(replica, false, true, tables, Some(sender)).to_json());
    for part in parts {
        outcomes.push(match &failure {
            Some(why) => rows::keep_all(part, why),
            None => rows::file_part(part, sender, standing),
        });
    }
    inbox::record(replica, &outcomes, inbox::From::Upload, had_any);
    Some((outcomes, refiled))
}

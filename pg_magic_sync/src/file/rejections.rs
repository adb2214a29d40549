//! What a replica could not take or let go of (protocol A.4, section 6).
//!
//! A rejection of the last message that carried the row — or its delete —
//! records the row refused in `sync.held`: still held for every decision
//! that takes rows back (a delete still goes when the row leaves the
//! replica's scope, and a refused delete is sent again), and not held for
//! progress or digests. The relay sends it again when its retry comes, or
//! when a relay starts; the refusal is taken once the replica applies a
//! later message that carries it (applied.rs). A row the replica held back
//! is recorded the same way, with no alarm: nothing is at fault.
//!
//! A rejection of another message than the last that carried the row, or
//! of another epoch, names a version that no longer matters, and is left
//! out. A rejection of a table the server does not send, with a key that is
//! not the table's, or of a message never sent the replica, is malformed
//! and left out.
//!
//! A follower's snapshot of the journaled tables is the stand-in's rows,
//! recorded once, as the stand-in's: `sync.held` shows each as sent in the
//! follower's last message of its provisioning (`since_sequence`), whichever
//! message of the snapshot carried it, and the replica names the one that
//! did (protocol section 6). So a rejection of any message of that
//! provisioning, of a row shown sent in its last, is of the last message
//! that carried the row: the row is recorded refused in that last, which a
//! later message that carries it follows.

use magic_sync_proto::key;
use magic_sync_proto::wire::Rejection;
use pgrx::prelude::*;
use serde_json::{json, Value};
use uuid::Uuid;

use crate::catalog::Declared;
use crate::error::Error;
use crate::file::standing::Standing;
use crate::settings;
use crate::spi::{self, to_pg};
use crate::statements::file::rejections::{FOLLOWING, RECORDED, REFUSE, REFUSED_SWEEP};

/// What the server makes of one rejection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Judged {
    /// A version that no longer matters.
    LeftOut(&'static str),
    Malformed(String),
}

/// What a rejection names, checked without the database.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Named {
    pub table: String,
    pub key: String,
    pub sequence: i64,
}

/// Checks a rejection's own fields: the table is one the server sends, the
/// key is the table's (read whatever its spelling), the message is one of
/// the replica's chain.
pub fn name(r: &Rejection, tables: &[Declared], s: Option<&Standing>) -> Result<Named, Judged> {
    let Some(table) = tables
        .iter()
        .find(|t| t.name == r.table && t.mirror.goes_down())
    else {
        return Err(Judged::Malformed(
            "a table the server does not send".to_owned(),
        ));
    };
    let key = key::canonical(&r.key, &table.key_types)
        .map_err(|e| Judged::Malformed(format!("a key that is not the table's: {e}")))?;
    let Ok(epoch) = Uuid::try_parse(&r.epoch) else {
        return Err(Judged::Malformed("not an epoch".to_owned()));
    };
    let Some(s) = s else {
        return Err(Judged::Malformed(
            "a message never sent the replica".to_owned(),
        ));
    };
    if s.epoch != Some(epoch) {
        return Err(Judged::LeftOut("another epoch"));
    }
    let sequence = i64::try_from(r.sequence).unwrap_or(i64::MAX);
    if sequence == 0 || sequence > s.last_sequence {
        return Err(Judged::Malformed(
            "a message never sent the replica".to_owned(),
        ));
    }
    Ok(Named {
        table: table.name.clone(),
        key,
        sequence,
    })
}

/// How the rejected message stands against what the server records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Against {
    /// The row's last message upserted it: the upsert is refused.
    Upsert,
    /// The row's last message let it go: the delete is refused, and the row
    /// recorded held again.
    Delete,
    /// No row recorded: one the end of the snapshot let go of (a refused
    /// sweep), recorded held again.
    Sweep,
    NotTheLast,
}

/// Judges a rejection of message `sequence` against the row the server
/// records (`sent`, `leaving`), if any, and the snapshot last begun.
/// `as_one`, for a follower, is its provisioning's messages (first, last):
/// a row recorded as sent in the last was carried by one of them.
pub fn against(
    sequence: i64,
    recorded: Option<(i64, Option<i64>)>,
    snapshot_began: Option<i64>,
    as_one: Option<(i64, i64)>,
) -> Against {
    let of_the_snapshot = |sent: i64| {
        as_one.is_some_and(|(first, last)| sent == last && (first..=last).contains(&sequence))
    };
    match recorded {
        Some((_, Some(leaving))) if leaving == sequence => Against::Delete,
        Some((sent, None)) if sent == sequence || of_the_snapshot(sent) => Against::Upsert,
        Some(_) => Against::NotTheLast,
        None if snapshot_began.is_some_and(|began| sequence >= began) => Against::Sweep,
        None => Against::NotTheLast,
    }
}

fn recorded(replica: Uuid, named: &Named) -> Option<(i64, Option<i64>)> {
    Spi::connect_mut(|client| {
        let mut rows = client
            .update(
                RECORDED,
                Some(1),
                &[
                    to_pg(replica).into(),
                    named.table.as_str().into(),
                    named.key.as_str().into(),
                ],
            )
            .unwrap_or_else(|e| Error::spi(RECORDED, e).raise());
        rows.next().map(|row| {
            (
                spi::column::<i64>(&row, 1, "sync.held.sent"),
                spi::nullable::<i64>(&row, 2, "sync.held.leaving"),
            )
        })
    })
}

/// A follower's provisioning, as its first and last message, read before
/// it parts: its snapshot's rows of the stand-in's are shown as sent in the
/// last. Only while it has not been heard applying a message past it: a row
/// a later message carried, applied, is shown so too, and a rejection of
/// the snapshot's comes no later than the report that applied it (section
/// 6).
fn provisioned_as_follower(replica: Uuid, s: Option<&Standing>) -> Option<(i64, i64)> {
    let s = s?;
    let first = s.snapshot_sequence?;
    let last = spi::one::<i64>(FOLLOWING, &[to_pg(replica).into()])?;
    (first <= last && s.applied_in_chain().unwrap_or(0) <= last).then_some((first, last))
}

/// Records one rejection; answers the verdict.
fn record(
    replica: Uuid,
    s: &Standing,
    named: &Named,
    r: &Rejection,
    as_one: Option<(i64, i64)>,
) -> String {
    let found = recorded(replica, named);
    let how = against(named.sequence, found, s.snapshot_sequence, as_one);
    // Refused in the message the row is recorded as sent in: a later one
    // that carries it, once applied, takes the refusal (applied.rs).
    let by = match (how, found) {
        (Against::Upsert, Some((sent, _))) => sent,
        _ => named.sequence,
    };
    let sql = match how {
        Against::NotTheLast => return "not the last message that carried it: left out".to_owned(),
        Against::Sweep => REFUSED_SWEEP,
        Against::Upsert | Against::Delete => REFUSE,
    };
    let reason = if r.reason.is_empty() {
        "refused"
    } else {
        r.reason.as_str()
    };
    spi::run_with(
        sql,
        &[
            to_pg(replica).into(),
            named.table.as_str().into(),
            named.key.as_str().into(),
            by.into(),
            reason.into(),
            r.held_back.into(),
            f64::from(settings::RETRY_EVERY.get()).into(),
        ],
    );
    if !r.held_back {
        pgrx::log!(
            "magic_sync: {replica} refused {} {} of message {}: {reason}; set aside for it, sent again when its retry comes",
            named.table,
            named.key,
            named.sequence
        );
    }
    let what = match (how, r.held_back) {
        (Against::Upsert, false) => "refused the row: recorded refused",
        (Against::Upsert, true) => "held back the row: recorded refused, no alarm",
        (Against::Delete, false) => "refused its delete: recorded held again, refused",
        (Against::Delete, true) => "held back its delete: recorded held again, refused, no alarm",
        (_, false) => "refused the sweep: recorded held again, refused",
        (_, true) => "held back the sweep: recorded held again, refused, no alarm",
    };
    what.to_owned()
}

/// Takes every rejection an Up carries; answers a verdict for each.
pub fn take(
    replica: Uuid,
    s: Option<&Standing>,
    rejections: &[Rejection],
    tables: &[Declared],
) -> Vec<Value> {
    // A refusal is recorded on the replica's own rows: a follower of a
    // stand-in takes its rows as its own first.
    let mut as_one = None;
    if !rejections.is_empty() {
        as_one = provisioned_as_follower(replica, s);
        spi::run_with("SELECT sync_internal.part($1)", &[to_pg(replica).into()]);
    }
    rejections
        .iter()
        .map(|r| {
            let verdict = match name(r, tables, s) {
                Ok(named) => record(
                    replica,
                    s.expect("a named rejection has a standing"),
                    &named,
                    r,
                    as_one,
                ),
                Err(Judged::LeftOut(why)) => format!("{why}: left out"),
                Err(Judged::Malformed(why)) => format!("malformed: {why}"),
            };
            json!({"table": r.table, "key": r.key, "verdict": verdict})
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Mirror;
    use magic_sync_proto::key::KeyType;

    const E: &str = "00000000-0000-0000-0000-0000000000e1";
    const K: &str = "01960000-0000-7000-8000-000000000001";

    fn tables() -> Vec<Declared> {
        vec![
            Declared {
                name: "products".into(),
                mirror: Mirror::Catalog,
                key_columns: vec!["id".into()],
                key_types: vec![KeyType::Uuid],
                ..Declared::default()
            },
            Declared {
                name: "receipts".into(),
                mirror: Mirror::Record,
                key_columns: vec!["id".into()],
                key_types: vec![KeyType::Uuid],
                ..Declared::default()
            },
        ]
    }

    fn standing() -> Standing {
        Standing {
            epoch: Some(E.parse().unwrap()),
            last_sequence: 20,
            snapshot_sequence: Some(10),
            ..Standing::default()
        }
    }

    fn rejection(table: &str, key: &str, sequence: u64) -> Rejection {
        Rejection {
            table: table.into(),
            key: key.into(),
            reason: "check failed".into(),
            epoch: E.into(),
            sequence,
            held_back: false,
        }
    }

    #[test]
    fn a_rejection_names_a_row_of_a_table_the_server_sends() {
        let named = name(
            &rejection("products", &K.to_uppercase(), 12),
            &tables(),
            Some(&standing()),
        )
        .unwrap();
        assert_eq!(
            named,
            Named {
                table: "products".into(),
                key: K.into(),
                sequence: 12
            }
        );
        for (r, why) in [
            (
                rejection("receipts", K, 12),
                "a table the server does not send",
            ),
            (
                rejection("nowhere", K, 12),
                "a table the server does not send",
            ),
            (
                rejection("products", "x", 12),
                "a key that is not the table's",
            ),
            (
                rejection("products", K, 21),
                "a message never sent the replica",
            ),
            (
                rejection("products", K, 0),
                "a message never sent the replica",
            ),
        ] {
            match name(&r, &tables(), Some(&standing())) {
                Err(Judged::Malformed(m)) => assert!(m.starts_with(why), "{m}"),
                other => panic!("{r:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_rejection_of_another_epoch_is_left_out() {
        let r = Rejection {
            epoch: "00000000-0000-0000-0000-0000000000e2".into(),
            ..rejection("products", K, 12)
        };
        assert_eq!(
            name(&r, &tables(), Some(&standing())),
            Err(Judged::LeftOut("another epoch"))
        );
    }

    #[test]
    fn only_the_last_message_that_carried_the_row_counts() {
        assert_eq!(
            against(12, Some((12, None)), Some(10), None),
            Against::Upsert
        );
        assert_eq!(
            against(14, Some((12, Some(14))), Some(10), None),
            Against::Delete
        );
        assert_eq!(
            against(12, Some((12, Some(14))), Some(10), None),
            Against::NotTheLast
        );
        assert_eq!(
            against(11, Some((12, None)), Some(10), None),
            Against::NotTheLast
        );
        assert_eq!(against(15, None, Some(10), None), Against::Sweep);
        assert_eq!(against(9, None, Some(10), None), Against::NotTheLast);
    }

    #[test]
    fn a_message_of_a_followers_provisioning_is_the_last_that_carried_a_row_shown_sent_in_its_last()
    {
        // Its snapshot ran from 10 to 13; the stand-in's rows show sent 13.
        let as_one = Some((10, 13));
        assert_eq!(
            against(11, Some((13, None)), Some(10), as_one),
            Against::Upsert
        );
        assert_eq!(
            against(10, Some((13, None)), Some(10), as_one),
            Against::Upsert
        );
        // Not of its provisioning, or a row shown sent otherwise.
        assert_eq!(
            against(9, Some((13, None)), Some(10), as_one),
            Against::NotTheLast
        );
        assert_eq!(
            against(11, Some((12, None)), Some(10), as_one),
            Against::NotTheLast
        );
        assert_eq!(
            against(11, Some((13, Some(15))), Some(10), as_one),
            Against::NotTheLast
        );
        // Not a follower: the message itself.
        assert_eq!(
            against(11, Some((13, None)), Some(10), None),
            Against::NotTheLast
        );
    }
}

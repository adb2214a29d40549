//! Recording an answer (protocol 4.5): only while the wish held is still
//! the one answered, and, for a wish applied, in the same transaction as
//! the wished columns written onto the row as it holds it then, its
//! version moved past what it was. A version that cannot move, or a write
//! the database refuses, answers the wish refused and leaves the row as it
//! was. A waiting answer is recorded only when its reason is new.
//!
//! The answer and the row are written as the replica's own writes (the
//! engine is not `writing`, and the database's triggers run): the triggers
//! note both to go up, and a check of the program's on the setting refuses
//! a write as it would refuse the program's.

use chrono::{DateTime, TimeDelta, Utc};
use magic_sync_proto::json::instant_text;
use magic_sync_proto::key::KeyPart;
use rusqlite::params_from_iter;
use rusqlite::types::Value as SqlValue;
use uuid::Uuid;

use crate::engine::reject::cut;
use crate::error::Error;
use crate::model::row_json::key_to_sql;
use crate::model::shape::{ColumnKind, Shape};
use crate::sql::{attempt, quote, Attempt, Failure, Transaction};
use crate::wishes::due::{self, NO_ROW};
use crate::wishes::held::{self, Held};
use crate::wishes::{Answered, Offering, Outcome};

/// What carrying a wish out writes: the wished columns' values onto the
/// row with this key of this setting, while it is at `based_on` (under
/// `if_unchanged`).
pub(crate) struct Carry {
    pub table: String,
    pub parts: Vec<KeyPart>,
    pub set: Vec<(usize, SqlValue)>,
    pub based_on: Option<String>,
}

/// An answer to record.
pub(crate) enum Given {
    Applied(Carry),
    Refused(String),
    Superseded(String),
    Waiting(String),
}

impl Given {
    pub(crate) fn from_outcome(outcome: Outcome, carry: Carry) -> Given {
        match outcome {
            Outcome::Applied => Given::Applied(carry),
            Outcome::Refused(why) => Given::Refused(why),
            Outcome::Later(why) => Given::Waiting(why),
        }
    }
}

/// What became of the write of a wish applied.
enum Written {
    Done,
    Refused(String),
    Superseded(String),
    NoRow,
    /// The write ended the transaction (a trigger's RAISE(ROLLBACK)).
    Lost(String),
}

/// Records the answer, in one transaction with the row an applied wish
/// writes; answers it, or `None` when the wish held is no longer the one
/// answered (replaced, withdrawn, let go of) and nothing was recorded.
pub(crate) fn record(
    o: &Offering<'_>,
    wish: &Held,
    given: Given,
) -> rusqlite::Result<Option<Answered>> {
    o.quiet.run(o.conn)?;
    let tx = Transaction::begin(o.conn)?;
    let Some(now) = held::read(o.conn, &wish.id)?.filter(|h| wish.is_still(h)) else {
        return Ok(None);
    };
    let (outcome, reason) = match given {
        Given::Applied(carry) => match write(o, &carry)? {
            Written::Done => ("applied", String::new()),
            Written::Refused(why) => ("refused", why),
            Written::Superseded(why) => ("superseded", why),
            Written::NoRow => ("waiting", NO_ROW.to_owned()),
            Written::Lost(why) => {
                drop(tx);
                return record(o, wish, Given::Refused(why));
            }
        },
        Given::Refused(why) => ("refused", why),
        Given::Superseded(why) => ("superseded", why),
        Given::Waiting(why) => ("waiting", why),
    };
    let reason = cut(&reason);
    let answered = Answered {
        id: Uuid::try_parse(&now.id).unwrap_or_default(),
        table: now.table.clone(),
        key: now.key.clone(),
        outcome: outcome.to_owned(),
        reason: reason.clone(),
    };
    let said_already = outcome == "waiting"
        && now.is_answered()
        && now.outcome == "waiting"
        && now.reason == reason;
    if said_already {
        return Ok(Some(answered));
    }
    held::write_answer(o.conn, &now, outcome, &reason, &instant_text(&Utc::now()))?;
    tx.commit()?;
    Ok(Some(answered))
}

/// Writes the wished columns onto the row as it is held now, its version
/// moved on.
fn write(o: &Offering<'_>, carry: &Carry) -> rusqlite::Result<Written> {
    let Some(shape) = due::setting(o.shapes, &carry.table) else {
        return Ok(Written::NoRow);
    };
    let Some(row) = due::read_row(o.conn, shape, &carry.parts)? else {
        return Ok(Written::NoRow);
    };
    let v = due::version_column(shape);
    if let Some(base) = &carry.based_on {
        // Changed on the replica while its handler carried the wish out.
        let holds = due::version_of(shape, Some(&row[v]));
        if &holds != base {
            return Ok(Written::Superseded(due::superseded(&holds, base)));
        }
    }
    let next = match next_version(shape.columns[v].kind, &row[v], Utc::now()) {
        Ok(next) => next,
        Err(why) => return Ok(Written::Refused(why.to_string())),
    };
    let sql = update(shape, carry.set.iter().map(|(i, _)| *i).chain([v]));
    let values: Vec<SqlValue> = carry
        .set
        .iter()
        .map(|(_, value)| value.clone())
        .chain([next])
        .chain(key_to_sql(shape, &carry.parts))
        .collect();
    let done = attempt(o.conn, || {
        o.conn
            .prepare_cached(&sql)?
            .execute(params_from_iter(&values))
    });
    Ok(match done {
        Ok(Attempt::Done(_)) => Written::Done,
        Ok(Attempt::Refused(why)) => {
            Written::Refused(format!("the database refused the write: {why}"))
        }
        Err(Failure::Storage(e)) => return Err(e),
        Err(Failure::TransactionLost(why)) => {
            Written::Lost(format!("the database refused the write: {why}"))
        }
        Err(Failure::Careful) => unreachable!("the write has a savepoint of its own"),
    })
}

/// `UPDATE "t" SET "a" = ?1, "v" = ?2 WHERE "k" = ?3`: these columns of
/// the row with a key, bound after them.
fn update(shape: &Shape, columns: impl Iterator<Item = usize>) -> String {
    let sets: Vec<String> = columns
        .enumerate()
        .map(|(n, i)| format!("{} = ?{}", quote(&shape.columns[i].name), n + 1))
        .collect();
    let key: Vec<String> = shape
        .key_columns()
        .enumerate()
        .map(|(n, c)| format!("{} = ?{}", quote(&c.name), sets.len() + n + 1))
        .collect();
    format!(
        "UPDATE {} SET {} WHERE {}",
        quote(&shape.name),
        sets.join(", "),
        key.join(" AND ")
    )
}

/// The version past `held` (protocol 4.5): an integer one more; an instant
/// `now`, truncated to the microsecond, or a microsecond past the old one
/// when the clock is behind it. Or why it cannot move.
pub(crate) fn next_version(
    kind: ColumnKind,
    held: &SqlValue,
    now: DateTime<Utc>,
) -> Result<SqlValue, Error> {
    match (kind, held) {
        (_, SqlValue::Integer(i)) => i.checked_add(1).map(SqlValue::Integer).ok_or_else(|| {
            Error::Row(format!(
                "the version {i} is at its largest: it cannot move on"
            ))
        }),
        (ColumnKind::Integer, SqlValue::Null) => Ok(SqlValue::Integer(1)),
        (ColumnKind::Integer, other) => Err(Error::Row(format!(
            "the version {other:?} is no integer: it cannot move on"
        ))),
        (_, SqlValue::Null) => Ok(SqlValue::Text(instant_text(&microseconds(now)))),
        (_, SqlValue::Text(text)) => {
            let old = DateTime::parse_from_rfc3339(text).map_err(|_| {
                Error::Row(format!(
                    "the version `{text}` is no instant: it cannot move on"
                ))
            })?;
            let old = microseconds(old.with_timezone(&Utc));
            let now = microseconds(now);
            let next = if now > old {
                now
            } else {
                old + TimeDelta::microseconds(1)
            };
            Ok(SqlValue::Text(instant_text(&next)))
        }
        (_, other) => Err(Error::Row(format!(
            "the version {other:?} is neither an integer nor an instant: it cannot move on"
        ))),
    }
}

/// An instant truncated toward the past to the microsecond.
fn microseconds(instant: DateTime<Utc>) -> DateTime<Utc> {
    DateTime::from_timestamp_micros(instant.timestamp_micros()).unwrap_or(instant)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .unwrap()
            .with_timezone(&Utc)
    }

    #[test]
    fn an_integer_version_moves_one_on_and_not_past_its_largest() {
        let now = at("2026-10-12T10:00:00Z");
        assert_eq!(
            next_version(ColumnKind::Integer, &SqlValue::Integer(7), now),
            Ok(SqlValue::Integer(8))
        );
        assert!(next_version(ColumnKind::Integer, &SqlValue::Integer(i64::MAX), now).is_err());
    }

    #[test]
    fn an_instant_version_moves_to_now_truncated_to_the_microsecond() {
        let now = at("2026-10-12T10:00:00.1234567Z");
        assert_eq!(
            next_version(
                ColumnKind::Text,
                &SqlValue::Text("2026-10-12T09:00:00.000000Z".into()),
                now
            ),
            Ok(SqlValue::Text("2026-10-12T10:00:00.123456Z".into()))
        );
    }

    #[test]
    fn an_instant_version_moves_a_microsecond_on_when_the_clock_is_behind() {
        let now = at("2026-10-12T10:00:00Z");
        assert_eq!(
            next_version(
                ColumnKind::Text,
                &SqlValue::Text("2026-10-12T12:00:00.5000009+02:00".into()),
                now
            ),
            Ok(SqlValue::Text("2026-10-12T10:00:00.500001Z".into()))
        );
    }

    #[test]
    fn a_version_that_is_no_instant_cannot_move() {
        let now = at("2026-10-12T10:00:00Z");
        assert!(next_version(ColumnKind::Text, &SqlValue::Text("soon".into()), now).is_err());
    }
}

//! What the first three steps of protocol 4.5 make of a wish due: one the
//! replica cannot read waits for a build that can; one that is not the
//! table's, or another replica's, is refused; one of a row not held waits
//! for the row; one based on another version than the row holds is
//! superseded (under `if_unchanged`). Any other is offered to its handler.

use std::collections::HashMap;

use magic_sync_proto::key::{self, KeyPart};
use rusqlite::types::{Value as SqlValue, ValueRef};
use serde_json::{Map, Value as JsonValue};
use uuid::Uuid;

use crate::error::Error;
use crate::model::declare::{Apply, Mirror};
use crate::model::row_json::{cell_to_sql, key_of_sql, key_to_sql, to_json, version_text};
use crate::model::shape::Shape;
use crate::sql::quote;
use crate::wishes::answer::{Carry, Given};
use crate::wishes::held::Held;
use crate::wishes::{Offering, Wish};

/// What became of a wish before any handler saw it.
pub(crate) enum Judged {
    /// Answered by the engine alone.
    Given(Given),
    /// To be offered to the setting's handler, then carried so.
    Offer(Wish, Carry),
}

/// The reason of a wish of a row the replica does not hold.
pub(crate) const NO_ROW: &str = "the replica holds no such row yet";

pub(crate) fn judge(o: &Offering<'_>, held: &Held) -> rusqlite::Result<Judged> {
    let waiting = |why: String| Ok(Judged::Given(Given::Waiting(why)));
    let refused = |why: String| Ok(Judged::Given(Given::Refused(why)));
    // 1. The table, the key and the row wished, as the setting's.
    let Some(shape) = setting(o.shapes, &held.table) else {
        return waiting(format!(
            "this build holds no setting `{}`: a build that does carries it out",
            held.table
        ));
    };
    let parts = match key::parse(&held.key, &shape.key_types) {
        Ok(parts) => parts,
        Err(e) => return refused(format!("`{}` is no key of {}: {e}", held.key, shape.name)),
    };
    let key = key::join(&parts);
    let wanted = match read_wanted(shape, &held.wanted) {
        Ok(wanted) => wanted,
        Err(why) => {
            return waiting(format!(
                "the row wished cannot be read by this build: {why}"
            ))
        }
    };
    if let Err(why) = own_key(shape, &wanted, &key) {
        return refused(why.to_string());
    }
    if let Some(origin) = shape.origin.and_then(|i| wanted.get(&i)) {
        if !is_me(origin, o.me) {
            return refused("the row wished is another replica's, by its origin".to_owned());
        }
    }
    // 2. Only a row the replica holds: it never writes one a wish names.
    let Some(row) = read_row(o.conn, shape, &parts)? else {
        return waiting(NO_ROW.to_owned());
    };
    if let Some(origin) = shape.origin.filter(|i| !wanted.contains_key(i)) {
        if !is_me(&row[origin], o.me) {
            return refused("the row is another replica's, by its origin".to_owned());
        }
    }
    // 3. Under if_unchanged, only while the row is at the version wished.
    let based_on = match shape.apply {
        Apply::IfUnchanged => Some(version_of(shape, wanted.get(&version_column(shape)))),
        Apply::Always => None,
    };
    if let Some(base) = &based_on {
        let holds = version_of(shape, Some(&row[version_column(shape)]));
        if &holds != base {
            return Ok(Judged::Given(Given::Superseded(superseded(&holds, base))));
        }
    }
    // 4. To its handler.
    let set: Vec<(usize, SqlValue)> = shape
        .desired
        .iter()
        .filter_map(|i| wanted.get(i).map(|v| (*i, v.clone())))
        .collect();
    let wish = Wish {
        id: Uuid::try_parse(&held.id).unwrap_or_default(),
        table: shape.name.clone(),
        key: key.clone(),
        wanted: as_json(shape, set.iter().map(|(i, v)| (*i, v))),
        row: as_json(shape, row.iter().enumerate()),
        version: held.version,
        note: held.note.clone(),
    };
    let carry = Carry {
        table: shape.name.clone(),
        parts,
        set,
        based_on,
    };
    Ok(Judged::Offer(wish, carry))
}

/// The setting a wish names.
pub(crate) fn setting<'s>(shapes: &'s [Shape], table: &str) -> Option<&'s Shape> {
    shapes
        .iter()
        .find(|s| s.mirror == Mirror::Setting && s.name == table)
        .or_else(|| {
            shapes
                .iter()
                .find(|s| s.mirror == Mirror::Setting && s.name.eq_ignore_ascii_case(table))
        })
}

/// The row wished, as the values its columns would store, by column.
fn read_wanted(shape: &Shape, bytes: &[u8]) -> Result<HashMap<usize, SqlValue>, Error> {
    let mut values = HashMap::new();
    for (name, cell) in shape.codec.decode(bytes)? {
        let Some(i) = shape.column(&name) else {
            continue; // a column the replica does not have
        };
        let value = cell_to_sql(shape.columns[i].kind, &cell)
            .map_err(|e| e.within(&format!("column `{name}`")))?;
        values.insert(i, value);
    }
    Ok(values)
}

/// The row wished is of the row the wish names.
fn own_key(shape: &Shape, wanted: &HashMap<usize, SqlValue>, key: &str) -> Result<(), Error> {
    let mut refs = Vec::with_capacity(shape.key.len());
    for &i in &shape.key {
        match wanted.get(&i) {
            Some(v) => refs.push(ValueRef::from(v)),
            None => {
                return Err(Error::Row(format!(
                    "the row wished has no key column `{}`",
                    shape.columns[i].name
                )))
            }
        }
    }
    match key_of_sql(shape, &refs) {
        Some(own) if own == key => Ok(()),
        Some(own) => Err(Error::Row(format!(
            "the row wished is {own}, not the row {key}"
        ))),
        None => Err(Error::row("the row wished has no key of its table's types")),
    }
}

/// Whether a value of an origin column names this replica.
fn is_me(value: &SqlValue, me: Uuid) -> bool {
    match value {
        SqlValue::Blob(b) => Uuid::from_slice(b).is_ok_and(|u| u == me),
        SqlValue::Text(t) => Uuid::try_parse(t).is_ok_and(|u| u == me),
        _ => false,
    }
}

/// The row with this key as the replica holds it: every column's value.
pub(crate) fn read_row(
    conn: &rusqlite::Connection,
    shape: &Shape,
    parts: &[KeyPart],
) -> rusqlite::Result<Option<Vec<SqlValue>>> {
    let columns: Vec<String> = shape.columns.iter().map(|c| quote(&c.name)).collect();
    let sql = format!(
        "SELECT {} FROM {} WHERE {}",
        columns.join(", "),
        quote(&shape.name),
        shape.key_match()
    );
    let mut statement = conn.prepare_cached(&sql)?;
    let mut rows = statement.query(rusqlite::params_from_iter(key_to_sql(shape, parts)))?;
    let Some(row) = rows.next()? else {
        return Ok(None);
    };
    (0..columns.len())
        .map(|i| row.get::<_, SqlValue>(i))
        .collect::<rusqlite::Result<_>>()
        .map(Some)
}

/// A setting's version column (every setting declares one).
pub(crate) fn version_column(shape: &Shape) -> usize {
    shape.version.expect("a setting has a version column")
}

/// A version as text, as 4.5 compares them ("" for none).
pub(crate) fn version_of(shape: &Shape, value: Option<&SqlValue>) -> String {
    let kind = Some(shape.columns[version_column(shape)].kind);
    value.map_or_else(String::new, |v| version_text(kind, ValueRef::from(v)))
}

pub(crate) fn superseded(holds: &str, base: &str) -> String {
    format!("the row is at version {holds}, and the wish was based on {base}")
}

fn as_json<'v>(
    shape: &Shape,
    values: impl Iterator<Item = (usize, &'v SqlValue)>,
) -> Map<String, JsonValue> {
    values
        .map(|(i, v)| {
            let column = &shape.columns[i];
            (column.name.clone(), to_json(column.kind, ValueRef::from(v)))
        })
        .collect()
}

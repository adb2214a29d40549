//! Finding the rows at fault when the database refuses to commit a message
//! (protocol §4.1): a foreign key checked at commit, because a row points at
//! one the replica does not hold, or rows point at a value the message
//! changed or let go of.
//!
//! The message is applied again row by row while this tracker records
//! which row wrote each stored row, and what each row the message changed
//! or let go of held before, of the columns foreign keys point at. Then
//! the database's own check of its keys (`PRAGMA foreign_key_check`) names
//! the rows that break one, and each is traced to a row of the message.

use std::collections::HashMap;

use rusqlite::types::Value as SqlValue;
use rusqlite::{params_from_iter, Connection, OptionalExtension};

use crate::apply::spot::Spot;
use crate::model::links::Link;
use crate::model::shape::Shape;
use crate::sql::quote;

#[derive(Default)]
pub(crate) struct Tracker {
    /// (table, rowid) of a row the message wrote, and where.
    written: HashMap<(String, i64), Spot>,
    /// Before a row of a parent table changed or went: which foreign key
    /// points at it, the values it pointed at, and where in the message.
    before: Vec<(usize, Vec<SqlValue>, Spot)>,
}

impl Tracker {
    /// Records what the row keyed `key` of `shape` holds now, for every
    /// foreign key that points at its table.
    pub(crate) fn before(
        &mut self,
        conn: &Connection,
        links: &[Link],
        shape: &Shape,
        key: &[SqlValue],
        spot: Spot,
    ) -> rusqlite::Result<()> {
        for (index, link) in links.iter().enumerate() {
            if !link.parent.eq_ignore_ascii_case(&shape.name) {
                continue;
            }
            let columns: Vec<String> = link.to.iter().map(|c| quote(c)).collect();
            let sql = format!(
                "SELECT {} FROM {} WHERE {}",
                columns.join(", "),
                quote(&shape.name),
                shape.key_match()
            );
            let values: Option<Vec<SqlValue>> = conn
                .prepare_cached(&sql)?
                .query_row(params_from_iter(key), |row| {
                    (0..columns.len()).map(|i| row.get(i)).collect()
                })
                .optional()?;
            if let Some(values) = values {
                self.before.push((index, values, spot.clone()));
            }
        }
        Ok(())
    }

    /// Records which stored row a taken row is.
    pub(crate) fn written(
        &mut self,
        conn: &Connection,
        shape: &Shape,
        key: &[SqlValue],
        spot: Spot,
    ) -> rusqlite::Result<()> {
        let sql = format!(
            "SELECT rowid FROM {} WHERE {}",
            quote(&shape.name),
            shape.key_match()
        );
        // A table WITHOUT ROWID has none: its rows are traced from their
        // parents only.
        if let Ok(mut statement) = conn.prepare_cached(&sql) {
            if let Some(rowid) = statement
                .query_row(params_from_iter(key), |row| row.get::<_, i64>(0))
                .optional()?
            {
                self.written
                    .insert((shape.name.to_ascii_lowercase(), rowid), spot);
            }
        }
        Ok(())
    }

    /// The rows of the message at fault, by the database's check of its
    /// foreign keys, each with why.
    pub(crate) fn faults(
        &self,
        conn: &Connection,
        links: &[Link],
    ) -> rusqlite::Result<Vec<(Spot, String)>> {
        let mut check = conn.prepare("PRAGMA foreign_key_check")?;
        let broken: Vec<(String, Option<i64>, String, i64)> = check
            .query_map([], |row| {
                Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
            })?
            .collect::<rusqlite::Result<_>>()?;
        let mut faults = Vec::new();
        for (child, rowid, parent, id) in broken {
            let Some(rowid) = rowid else { continue };
            let why = format!(
                "the database refused the message at commit: a row of {child} would point at a row of {parent} it does not hold"
            );
            if let Some(spot) = self.written.get(&(child.to_ascii_lowercase(), rowid)) {
                faults.push((spot.clone(), why));
                continue;
            }
            // A row the message did not write: it pointed at a value the
            // message changed or let go of.
            let Some(index) = links
                .iter()
                .position(|l| l.child.eq_ignore_ascii_case(&child) && l.id == id)
            else {
                continue;
            };
            let link = &links[index];
            let columns: Vec<String> = link.from.iter().map(|c| quote(c)).collect();
            let values: Option<Vec<SqlValue>> = conn
                .query_row(
                    &format!(
                        "SELECT {} FROM {} WHERE rowid = ?1",
                        columns.join(", "),
                        quote(&child)
                    ),
                    [rowid],
                    |row| (0..columns.len()).map(|i| row.get(i)).collect(),
                )
                .optional()?;
            let Some(values) = values else { continue };
            for (at, held, spot) in &self.before {
                if *at == index && *held == values {
                    faults.push((
                        spot.clone(),
                        format!(
                            "the database refused the message at commit: a row of {child} points at what this row held"
                        ),
                    ));
                }
            }
        }
        Ok(faults)
    }
}

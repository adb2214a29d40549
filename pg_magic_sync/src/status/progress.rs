//! `sync.progress(scope)`: how far along each replica of the scope is, per
//! table that goes down. "holds - outdated of should" is a replica's
//! progress bar: a row counts as held only once the replica confirmed the
//! message that carried it, so the bar never runs ahead of the replica.
//!
//! Replica by replica, what its rules reach is walked in rounds
//! (rounds.rs), what it holds is read in one scan of its rows of
//! sync.held, and each row's state is named and counted here (row_state.rs,
//! the states `sync_internal.row_state` names): a join of the two in SQL,
//! fifteen thousand rows a side, cost more than both reads together.

use pgrx::datum::DatumWithOid;
use rustc_hash::{FxHashMap, FxHashSet};
use serde_json::{json, Map, Value};

use super::rounds::{self, table_at, Down, Row, Seen};
use super::row_state::{row_state, Held, RowState};
use super::{answer, scope_ids, tables, CONTRACT, NOW};
use crate::spi;
use crate::statements::status::progress::{HELD, NEWEST_NOTES, REPLICA};

/// One replica's figures for one table.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Figures {
    should: i64,
    holds: i64,
    outdated: i64,
    in_flight: i64,
    missing: i64,
    to_remove: i64,
    set_aside: i64,
}

impl Figures {
    /// Counts a row in `state`, which the replica should hold or not.
    fn count(&mut self, should: bool, state: Option<RowState>) {
        self.should += i64::from(should);
        let Some(state) = state else { return };
        let figure = match state {
            RowState::Holds => &mut self.holds,
            RowState::Outdated => {
                self.holds += 1;
                &mut self.outdated
            }
            RowState::OnItsWay => &mut self.in_flight,
            RowState::Missing => &mut self.missing,
            RowState::Leaving => &mut self.to_remove,
            RowState::SetAside => &mut self.set_aside,
        };
        *figure += 1;
    }

    fn to_json(self, table: &str) -> Value {
        json!({
            "table": table,
            "should": self.should,
            "holds": self.holds,
            "outdated": self.outdated,
            "in_flight": self.in_flight,
            "missing": self.missing,
            "to_remove": self.to_remove,
            "set_aside": self.set_aside,
        })
    }
}

/// The progress of every live replica of `scope`, replica by replica, so
/// that no read holds more than one replica's rows.
pub fn progress(scope: Option<Value>) -> Value {
    let tables = tables();
    let down = Down::of(&tables);
    let mut replicas = scope_ids(scope);
    // In the order of uuids in PostgreSQL: by their bytes.
    replicas.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    let mut listed = Vec::with_capacity(replicas.len());
    if !replicas.is_empty() {
        let blocked = rounds::blocked_rows(&tables);
        let newest = newest_notes(&down);
        for replica in replicas {
            let reached = rounds::reached(&tables, &blocked, replica);
            let figures = figures_of(&down, replica, reached, &blocked, &newest);
            listed.push(replica_json(replica, &down, &figures));
        }
    }
    json!({"contract": CONTRACT, "now": answer(NOW, &[]), "replicas": listed})
}

/// The figures of each table that goes down on `replica`: every row it
/// holds, as the scan of its rows of sync.held gives them, then every row
/// it reaches and does not hold.
fn figures_of(
    down: &Down,
    replica: pgrx::Uuid,
    reached: FxHashMap<Row, Seen>,
    blocked: &FxHashSet<Row>,
    newest: &FxHashMap<Row, i64>,
) -> Vec<Figures> {
    let args: [DatumWithOid; 1] = [replica.into()];
    spi::select(HELD, None, &args, |rows| {
        let held = rows.filter_map(|row| {
            let what = "a held row";
            let table = table_at(down, &row, what)?;
            let held = Held {
                note: spi::nullable::<i64>(&row, 3, what),
                refused: spi::column::<bool>(&row, 4, what),
                leaving: spi::column::<bool>(&row, 5, what),
                sent_confirmed: spi::column::<bool>(&row, 6, what),
                leaving_confirmed: spi::column::<bool>(&row, 7, what),
            };
            Some(((table, spi::column::<String>(&row, 2, what)), held))
        });
        count(down.len(), reached, held, blocked, newest)
    })
}

/// Counts each row `held` names (rows of tables that do not go down are
/// left out before), then each row of `reached` it did not name, into
/// figures per table.
fn count(
    tables: usize,
    mut reached: FxHashMap<Row, Seen>,
    held: impl Iterator<Item = (Row, Held)>,
    blocked: &FxHashSet<Row>,
    newest: &FxHashMap<Row, i64>,
) -> Vec<Figures> {
    let mut figures = vec![Figures::default(); tables];
    let newest_of = |row: &Row| newest.get(row).copied();
    for (row, kept) in held {
        // A row held and reached is blocked when it, or a row it points
        // at, is; a row only held, when it is in the blocked set.
        let (should, blocked) = match reached.remove(&row) {
            Some(seen) => (!seen.blocked, seen.blocked),
            None => (false, !blocked.is_empty() && blocked.contains(&row)),
        };
        let state = row_state(should, blocked, Some(&kept), newest_of(&row));
        figures[row.0].count(should, state);
    }
    for (row, seen) in reached {
        let state = row_state(!seen.blocked, seen.blocked, None, newest_of(&row));
        figures[row.0].count(!seen.blocked, state);
    }
    figures
}

/// One replica of the answer: its id, partition, whether its snapshot is
/// on its way, and its figures per table, parents first.
fn replica_json(replica: pgrx::Uuid, down: &Down, figures: &[Figures]) -> Value {
    let args: [DatumWithOid; 1] = [replica.into()];
    let mut entry = spi::select(REPLICA, Some(1), &args, |mut rows| {
        let mut entry = Map::new();
        if let Some(row) = rows.next() {
            let field = |ordinal| {
                spi::nullable::<pgrx::JsonB>(&row, ordinal, "a replica's id or partition")
                    .map_or(Value::Null, |j| j.0)
            };
            entry.insert("replica".into(), field(1));
            entry.insert("partition".into(), field(2));
            let on_its_way = spi::nullable::<bool>(&row, 3, "whether a snapshot is on its way");
            entry.insert("snapshot_on_its_way".into(), json!(on_its_way));
        }
        entry
    });
    let tables: Vec<Value> = down
        .names()
        .zip(figures)
        .map(|(name, figures)| figures.to_json(name))
        .collect();
    entry.insert("tables".into(), Value::Array(tables));
    Value::Object(entry)
}

/// The newest pending note of each row that has one.
fn newest_notes(down: &Down) -> FxHashMap<Row, i64> {
    spi::select(NEWEST_NOTES, None, &[], |rows| {
        rows.filter_map(|row| {
            let what = "a pending note";
            let table = table_at(down, &row, what)?;
            Some((
                (table, spi::column::<String>(&row, 2, what)),
                spi::column::<i64>(&row, 3, what),
            ))
        })
        .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(table: usize, key: &str) -> Row {
        (table, key.to_owned())
    }

    fn map<K: std::hash::Hash + Eq, V, const N: usize>(items: [(K, V); N]) -> FxHashMap<K, V> {
        items.into_iter().collect()
    }

    fn seen(blocked: bool) -> Seen {
        Seen {
            blocked,
            read: true,
        }
    }

    fn held(sent_confirmed: bool, note: i64) -> Held {
        Held {
            note: Some(note),
            refused: false,
            leaving: false,
            sent_confirmed,
            leaving_confirmed: false,
        }
    }

    fn counted(reached: FxHashMap<Row, Seen>, held: Vec<(Row, Held)>) -> Vec<Figures> {
        count(
            1,
            reached,
            held.into_iter(),
            &FxHashSet::default(),
            &FxHashMap::default(),
        )
    }

    #[test]
    fn a_row_held_and_reached_counts_once_and_a_row_only_held_counts_as_leaving() {
        let reached = map([(row(0, "1"), seen(false)), (row(0, "2"), seen(false))]);
        let kept = vec![(row(0, "1"), held(true, 7)), (row(0, "3"), held(true, 7))];
        let figures = counted(reached, kept);
        let expected = Figures {
            should: 2,
            holds: 1,
            missing: 1,
            to_remove: 1,
            ..Figures::default()
        };
        assert_eq!(figures, vec![expected]);
    }

    #[test]
    fn a_row_whose_message_is_unconfirmed_is_in_flight() {
        let reached = map([(row(0, "1"), seen(false))]);
        let figures = counted(reached, vec![(row(0, "1"), held(false, 7))]);
        assert_eq!(
            figures,
            vec![Figures {
                should: 1,
                in_flight: 1,
                ..Figures::default()
            }]
        );
    }

    #[test]
    fn an_outdated_row_is_held_and_counted_as_outdated_too() {
        let reached = map([(row(0, "1"), seen(false))]);
        let kept = vec![(row(0, "1"), held(true, 7))];
        let newest = map([(row(0, "1"), 9)]);
        let figures = count(1, reached, kept.into_iter(), &FxHashSet::default(), &newest);
        let expected = Figures {
            should: 1,
            holds: 1,
            outdated: 1,
            ..Figures::default()
        };
        assert_eq!(figures, vec![expected]);
    }

    #[test]
    fn a_blocked_row_is_set_aside_and_not_counted_as_one_it_should_hold() {
        let figures = counted(map([(row(0, "1"), seen(true))]), Vec::new());
        assert_eq!(
            figures,
            vec![Figures {
                set_aside: 1,
                ..Figures::default()
            }]
        );
    }

    #[test]
    fn a_row_held_but_no_longer_reached_is_set_aside_while_it_is_blocked() {
        let blocked: FxHashSet<Row> = [row(1, "9")].into_iter().collect();
        let kept = vec![(row(1, "9"), held(true, 7))];
        let figures = count(
            2,
            FxHashMap::default(),
            kept.into_iter(),
            &blocked,
            &FxHashMap::default(),
        );
        assert_eq!(
            figures,
            vec![
                Figures::default(),
                Figures {
                    set_aside: 1,
                    ..Figures::default()
                }
            ]
        );
    }
}

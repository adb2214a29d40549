//! What one replica's rules reach, worked out in rounds over SPI: the same
//! rows, each with the same `blocked`, as should.rs's recursive `reach`,
//! at a fraction of its cost (docs/src/status-rows.md).
//!
//! The recursive expression probes every reached row again, once per edge,
//! to learn what it points at, and de-duplicates them all in SQL. Here each
//! row read from its table brings the keys of its parents in the same read
//! (they are its own columns), so only rows reached as parents are looked
//! up by key, and only the rows a follower follows are looked up for their
//! followers: a round is one SELECT over arrays of the keys newly reached,
//! and a hash map keeps what was reached. Every read is a SELECT (the
//! status reads are STABLE). A row names its table by its place among the
//! tables that go down, so that the map's keys cost one string, not two.

use std::collections::hash_map::Entry;

use rustc_hash::{FxHashMap, FxHashSet};

use pgrx::datum::DatumWithOid;

use crate::catalog::reach::{row_is, rule_rows_with};
use crate::catalog::table_sql::{key_is, key_of, key_text_of, quote_literal};
use crate::catalog::Declared;
use crate::spi;

use super::should;
use crate::statements::status::rounds::ONE_REPLICA;

/// A row by its table (its place in `Down`) and key text.
pub type Row = (usize, String);

/// The tables that go down, the only ones a replica is sent, parents
/// first; a row names its table by its place here.
pub struct Down<'a>(Vec<&'a Declared>);

impl<'a> Down<'a> {
    pub fn of(tables: &'a [Declared]) -> Self {
        Down(tables.iter().filter(|t| t.mirror.goes_down()).collect())
    }

    /// The place of the table `name`, if it goes down.
    pub fn position(&self, name: &str) -> Option<usize> {
        self.0.iter().position(|t| t.name == name)
    }

    pub fn names(&self) -> impl Iterator<Item = &'a str> + '_ {
        self.0.iter().map(|t| t.name.as_str())
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }
}

/// A row's table, read from SPI as its name, by its place in `down`; None
/// for a table that does not go down.
pub fn table_at(down: &Down, row: &pgrx::spi::SpiHeapTupleData, what: &str) -> Option<usize> {
    down.position(spi::column::<&str>(row, 1, what))
}

/// A row read from a table: its key, and the keys of its parents in the
/// order of its table's references (None where a reference points at
/// nothing); no parents where they were not read from the table itself.
struct Fetched {
    row: Row,
    parents: Option<Vec<Option<String>>>,
}

/// The columns every read of rows answers, in `Fetched`'s order.
const FETCHED: &str = "AS x(table_name, key, parents)";

/// The rows set aside and every row that points at one: blocked for every
/// replica, so read once for a whole scope.
pub fn blocked_rows(tables: &[Declared]) -> FxHashSet<Row> {
    let down = Down::of(tables);
    let what = "a blocked row";
    spi::select(&should::blocked_rows(tables), None, &[], |rows| {
        rows.filter_map(|row| {
            Some((
                table_at(&down, &row, what)?,
                spi::column::<String>(&row, 2, what),
            ))
        })
        .collect()
    })
}

/// The keys of the parents of the row `t` of `table`, as a text array.
fn parent_keys(table: &Declared) -> String {
    let keys: Vec<String> = table
        .references
        .iter()
        .map(|reference| key_text_of("t", &reference.columns))
        .collect();
    format!("ARRAY[{}]::text[]", keys.join(", "))
}

/// The rows the rules send the replica `$1`, each with its parents' keys.
/// A table read through its active view gives none: the walk reads its
/// parents from the table itself, as the recursive expression does.
fn rule_rows_sql(tables: &[Declared]) -> Option<String> {
    let parts: Vec<String> = Down::of(tables)
        .0
        .into_iter()
        .filter_map(|table| {
            let parents = if table.active.is_some() {
                "NULL::text[]".to_owned()
            } else {
                parent_keys(table)
            };
            rule_rows_with(table, "scope", None, &format!(", {parents}"))
        })
        .collect();
    if parts.is_empty() {
        return None;
    }
    Some(format!(
        "{ONE_REPLICA}SELECT x.table_name, x.key, x.parents FROM ( \
         SELECT s.table_name, s.key, s.parents FROM ({}) AS s(replica, table_name, key, parents)) {FETCHED}",
        parts.join(" UNION ALL ")
    ))
}

/// One round's reads, with two text arrays per table that goes down (in
/// order: `$1` and `$2` for the first, and so on): the keys of its rows to
/// read by key, and the keys of its rows whose followers to read; each row
/// comes with its parents' keys. An array per table lets the planner see
/// how many keys each read takes (six thousand products' followers are
/// read by one hash join, not six thousand index probes). None when no
/// table goes down.
fn round_sql(tables: &[Declared]) -> Option<String> {
    let down = Down::of(tables).0;
    let by_key = |position: usize| 2 * position + 1;
    let followed_of = |position: usize| 2 * position + 2;
    let mut parts = Vec::new();
    for (position, table) in down.iter().enumerate() {
        let matches = row_is(table, "t", "c.key");
        parts.push(rows_of_keys(table, by_key(position), &matches));
        let Some(followed) = table.followed() else {
            continue;
        };
        let Some(parent) = down.iter().position(|t| t.name == followed.parent) else {
            continue;
        };
        let points = key_is("t", &followed.columns, &followed.key_types, "c.key");
        parts.push(rows_of_keys(table, followed_of(parent), &points));
    }
    if parts.is_empty() {
        return None;
    }
    Some(format!(
        "SELECT x.table_name, x.key, x.parents FROM ({}) {FETCHED}",
        parts.join(" UNION ALL ")
    ))
}

/// The rows `t` of `table` that `on` matches with a key `c.key` of the
/// array parameter `param`, each with its key and its parents' keys.
fn rows_of_keys(table: &Declared, param: usize, on: &str) -> String {
    format!(
        "SELECT {name}, {key}, {parents} \
         FROM unnest(${param}::text[]) AS c(key) JOIN {rel} AS t ON {on}",
        name = quote_literal(&table.name),
        key = key_of(table, "t"),
        parents = parent_keys(table),
        rel = table.relation,
    )
}

fn read_fetched(down: &Down, sql: &str, args: &[DatumWithOid]) -> Vec<Fetched> {
    let what = "a reached row";
    spi::select(sql, None, args, |rows| {
        rows.filter_map(|row| {
            Some(Fetched {
                row: (
                    table_at(down, &row, what)?,
                    spi::column::<String>(&row, 2, what),
                ),
                parents: spi::nullable::<Vec<Option<String>>>(&row, 3, "a reached row's parents"),
            })
        })
        .collect()
    })
}

/// What the walk knows of a row it reached.
#[derive(Clone, Copy)]
pub struct Seen {
    /// It, or a row it points at, is set aside: it cannot go.
    pub blocked: bool,
    /// Read from its table, so its parents' keys are known.
    pub read: bool,
}

/// The walk's state: what was reached, and what each table points at.
struct Walk<'a> {
    blocked: &'a FxHashSet<Row>,
    reached: FxHashMap<Row, Seen>,
    /// Per table that goes down, the parent table of each of its
    /// references (None for a parent that does not go down: no replica
    /// is sent it).
    parents: Vec<Vec<Option<usize>>>,
    /// Per table that goes down, whether some table follows it.
    followed: Vec<bool>,
}

impl<'a> Walk<'a> {
    fn new(down: &Down, blocked: &'a FxHashSet<Row>) -> Self {
        let mut followed = vec![false; down.len()];
        for table in &down.0 {
            if let Some(parent) = table.followed().and_then(|f| down.position(&f.parent)) {
                followed[parent] = true;
            }
        }
        Walk {
            blocked,
            reached: FxHashMap::default(),
            parents: down
                .0
                .iter()
                .map(|t| {
                    t.references
                        .iter()
                        .map(|r| down.position(&r.parent))
                        .collect()
                })
                .collect(),
            followed,
        }
    }

    /// Takes in a round's rows, answering the rows reached for the first
    /// time: the rows themselves, then the parents of each that is not
    /// blocked (a blocked row reaches nothing further).
    fn take(&mut self, fetched: Vec<Fetched>) -> Vec<Row> {
        let mut new = Vec::new();
        let mut pointed = Vec::new();
        for f in fetched {
            let read = f.parents.is_some();
            let table = f.row.0;
            let seen = self.arrive(f.row, read, &mut new);
            if let (Some(keys), false) = (f.parents, seen.blocked) {
                pointed.push((table, keys));
            }
        }
        for (table, keys) in pointed {
            let parents: Vec<Row> = self.parents[table]
                .iter()
                .zip(keys)
                .filter_map(|(parent, key)| Some(((*parent)?, key?)))
                .collect();
            for parent in parents {
                self.arrive(parent, false, &mut new);
            }
        }
        new
    }

    /// Records `row` as reached (and as `read` from its table, if it was),
    /// adding it to `new` if it was not reached before.
    fn arrive(&mut self, row: Row, read: bool, new: &mut Vec<Row>) -> Seen {
        let blocked = self.blocked;
        match self.reached.entry(row) {
            Entry::Occupied(mut known) => {
                known.get_mut().read |= read;
                *known.get()
            }
            Entry::Vacant(vacant) => {
                let row = vacant.key().clone();
                let seen = Seen {
                    blocked: !blocked.is_empty() && blocked.contains(&row),
                    read,
                };
                vacant.insert(seen);
                new.push(row);
                seen
            }
        }
    }

    /// Of the rows reached for the first time, those to read by key (rows
    /// of a table that goes down whose parents are not known yet) and
    /// those whose followers to read; blocked rows lead nowhere.
    fn next(&self, new: Vec<Row>) -> (Vec<Row>, Vec<Row>) {
        let mut by_key = Vec::new();
        let mut followed = Vec::new();
        for row in new {
            let seen = self.reached[&row];
            if seen.blocked {
                continue;
            }
            if self.followed[row.0] {
                followed.push(row.clone());
            }
            if !seen.read {
                by_key.push(row);
            }
        }
        (by_key, followed)
    }

    fn into_reached(self) -> FxHashMap<Row, Seen> {
        self.reached
    }
}

/// A round's parameters: for each table that goes down, the keys of
/// `by_key` of it, then the keys of `followed` of it.
fn round_args(down: &Down, by_key: Vec<Row>, followed: Vec<Row>) -> Vec<DatumWithOid<'static>> {
    let per_table = |rows: Vec<Row>| {
        let mut keys: Vec<Vec<String>> = vec![Vec::new(); down.len()];
        for (table, key) in rows {
            keys[table].push(key);
        }
        keys
    };
    per_table(by_key)
        .into_iter()
        .zip(per_table(followed))
        .flat_map(|(by_key, followed)| [by_key.into(), followed.into()])
        .collect()
}

/// Everything the rules send `replica`, closed over parents and followers
/// of every row that is not blocked.
pub fn reached(
    tables: &[Declared],
    blocked: &FxHashSet<Row>,
    replica: pgrx::Uuid,
) -> FxHashMap<Row, Seen> {
    let down = Down::of(tables);
    let mut walk = Walk::new(&down, blocked);
    let Some(seed) = rule_rows_sql(tables) else {
        return walk.into_reached();
    };
    let args: [DatumWithOid; 1] = [replica.into()];
    let mut new = walk.take(read_fetched(&down, &seed, &args));
    let round = round_sql(tables).unwrap_or_default();
    loop {
        let (by_key, followed) = walk.next(new);
        if by_key.is_empty() && followed.is_empty() {
            return walk.into_reached();
        }
        let args = round_args(&down, by_key, followed);
        new = walk.take(read_fetched(&down, &round, &args));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::table_sql::qualified;
    use crate::catalog::{Mirror, Rule};
    use magic_sync_proto::key::KeyType;

    fn products(mirror: Mirror) -> Declared {
        Declared {
            name: "products".into(),
            relation: qualified("shop", "products"),
            mirror,
            key_columns: vec!["id".into()],
            key_types: vec![KeyType::Uuid],
            rule: Rule::Broadcast,
            ..Default::default()
        }
    }

    #[test]
    fn tables_that_point_at_nothing_reach_only_what_their_rules_send() {
        let sql = rule_rows_sql(&[products(Mirror::Catalog)]).unwrap();
        assert!(sql.contains("\"shop\".\"products\""), "{sql}");
        assert!(sql.contains("ARRAY[]::text[]"), "{sql}");
    }

    #[test]
    fn tables_that_go_up_reach_no_replica() {
        assert!(rule_rows_sql(&[products(Mirror::Record)]).is_none());
        assert!(round_sql(&[products(Mirror::Record)]).is_none());
    }
}

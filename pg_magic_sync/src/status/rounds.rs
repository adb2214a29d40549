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
//! and a HashSet keeps what was reached. Every read is a SELECT (the
//! status reads are STABLE).

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};

use pgrx::datum::DatumWithOid;

use crate::catalog::table_sql::{key_is, key_of, key_text_of, quote_literal};
use crate::catalog::Declared;
use crate::relay::plan::reach::{row_is, rule_rows_with};
use crate::spi;

use super::should;

/// A row by its table and key text.
type Row = (String, String);

/// The rows one replica reaches, as three arrays of one length: the table
/// of each, its key, and whether it is blocked.
#[derive(Debug, Default)]
pub struct Reached {
    pub tables: Vec<String>,
    pub keys: Vec<String>,
    pub blocked: Vec<bool>,
}

/// A row read from a table: its key, and the keys of its parents in the
/// order of its table's references (None where a reference points at
/// nothing); no parents where they were not read from the table itself.
struct Fetched {
    row: Row,
    parents: Option<Vec<Option<String>>>,
}

/// The relation of the one replica `$1`, as `rule_rows` takes its targets.
const ONE_REPLICA: &str =
    "WITH scope AS MATERIALIZED (SELECT r.id, r.partition FROM sync.replicas r WHERE r.id = $1) ";

/// The columns every read of rows answers, in `Fetched`'s order.
const FETCHED: &str = "AS x(table_name, key, parents)";

/// The rows set aside and every row that points at one: blocked for every
/// replica, so read once for a whole scope.
pub fn blocked_rows(tables: &[Declared]) -> HashSet<Row> {
    spi::select(&should::blocked_rows(tables), None, &[], |rows| {
        rows.map(|row| {
            (
                spi::column::<String>(&row, 1, "a blocked row's table"),
                spi::column::<String>(&row, 2, "a blocked row's key"),
            )
        })
        .collect()
    })
}

/// The tables that go down, the only ones a replica is sent.
fn down(tables: &[Declared]) -> impl Iterator<Item = &Declared> {
    tables.iter().filter(|t| t.mirror.goes_down())
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
    let parts: Vec<String> = down(tables)
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

/// One round's reads: the rows of `$1` (tables) and `$2` (keys) read by
/// key, and the followers of the rows of `$3` and `$4`, each with its
/// parents' keys. None when no table goes down.
fn round_sql(tables: &[Declared]) -> Option<String> {
    let mut parts = Vec::new();
    for table in down(tables) {
        parts.push(format!(
            "SELECT {name}, {key}, {parents} \
             FROM unnest($1::text[], $2::text[]) AS c(table_name, key) \
             JOIN {rel} AS t ON c.table_name = {name} AND {matches}",
            name = quote_literal(&table.name),
            key = key_of(table, "t"),
            parents = parent_keys(table),
            rel = table.relation,
            matches = row_is(table, "t", "c.key"),
        ));
        if let Some(followed) = table.followed() {
            parts.push(format!(
                "SELECT {name}, {key}, {parents} \
                 FROM unnest($3::text[], $4::text[]) AS c(table_name, key) \
                 JOIN {rel} AS t ON c.table_name = {parent} AND {points}",
                name = quote_literal(&table.name),
                key = key_of(table, "t"),
                parents = parent_keys(table),
                rel = table.relation,
                parent = quote_literal(&followed.parent),
                points = key_is("t", &followed.columns, &followed.key_types, "c.key"),
            ));
        }
    }
    if parts.is_empty() {
        return None;
    }
    Some(format!(
        "SELECT x.table_name, x.key, x.parents FROM ({}) {FETCHED}",
        parts.join(" UNION ALL ")
    ))
}

fn read_fetched(sql: &str, args: &[DatumWithOid]) -> Vec<Fetched> {
    spi::select(sql, None, args, |rows| {
        rows.map(|row| Fetched {
            row: (
                spi::column::<String>(&row, 1, "a reached row's table"),
                spi::column::<String>(&row, 2, "a reached row's key"),
            ),
            parents: spi::nullable::<Vec<Option<String>>>(&row, 3, "a reached row's parents"),
        })
        .collect()
    })
}

/// What the walk knows of a row it reached.
#[derive(Clone, Copy)]
struct Seen {
    blocked: bool,
    /// Read from its table, so its parents' keys are known.
    read: bool,
}

/// The walk's state: what was reached, and what each table points at.
struct Walk<'a> {
    blocked: &'a HashSet<Row>,
    reached: HashMap<Row, Seen>,
    /// The parent table of each reference, per table that goes down.
    parents: HashMap<&'a str, Vec<&'a str>>,
    /// The tables some table that goes down follows.
    followed: HashSet<&'a str>,
}

impl<'a> Walk<'a> {
    fn new(tables: &'a [Declared], blocked: &'a HashSet<Row>) -> Self {
        Walk {
            blocked,
            reached: HashMap::new(),
            parents: down(tables)
                .map(|t| {
                    let parents = t.references.iter().map(|r| r.parent.as_str()).collect();
                    (t.name.as_str(), parents)
                })
                .collect(),
            followed: down(tables)
                .filter_map(|t| t.followed().map(|f| f.parent.as_str()))
                .collect(),
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
            let seen = self.arrive(f.row.clone(), read, &mut new);
            if let (Some(keys), false) = (f.parents, seen.blocked) {
                pointed.push((f.row.0, keys));
            }
        }
        for (table, keys) in pointed {
            let Some(tables) = self.parents.get(table.as_str()) else {
                continue;
            };
            let parents: Vec<Row> = tables
                .iter()
                .zip(keys)
                .filter_map(|(table, key)| key.map(|key| ((*table).to_owned(), key)))
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
            if self.followed.contains(row.0.as_str()) {
                followed.push(row.clone());
            }
            if !seen.read && self.parents.contains_key(row.0.as_str()) {
                by_key.push(row);
            }
        }
        (by_key, followed)
    }

    fn into_reached(self) -> Reached {
        let mut reached = Reached::default();
        for ((table, key), seen) in self.reached {
            reached.tables.push(table);
            reached.keys.push(key);
            reached.blocked.push(seen.blocked);
        }
        reached
    }
}

/// The rows as two arrays, tables and keys, for a round's parameters.
fn columns(rows: Vec<Row>) -> (Vec<String>, Vec<String>) {
    rows.into_iter().unzip()
}

/// Everything the rules send `replica`, closed over parents and followers
/// of every row that is not blocked.
pub fn reached(tables: &[Declared], blocked: &HashSet<Row>, replica: pgrx::Uuid) -> Reached {
    let mut walk = Walk::new(tables, blocked);
    let Some(seed) = rule_rows_sql(tables) else {
        return walk.into_reached();
    };
    let args: [DatumWithOid; 1] = [replica.into()];
    let mut new = walk.take(read_fetched(&seed, &args));
    let round = round_sql(tables).unwrap_or_default();
    loop {
        let (by_key, followed) = walk.next(new);
        if by_key.is_empty() && followed.is_empty() {
            return walk.into_reached();
        }
        let (key_tables, keys) = columns(by_key);
        let (followed_tables, followed_keys) = columns(followed);
        let args: [DatumWithOid; 4] = [
            key_tables.into(),
            keys.into(),
            followed_tables.into(),
            followed_keys.into(),
        ];
        new = walk.take(read_fetched(&round, &args));
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

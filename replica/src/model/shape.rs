//! What each declared table looks like in SQLite: its columns, how each
//! one's values are written, its key and the key's types.
//!
//! Read once when the replica opens, and checked against the declaration
//! then, so a mistake shows at start-up rather than on the first message.

use std::collections::{HashMap, HashSet};

use magic_sync_proto::key::KeyType;
use rusqlite::Connection;

use crate::error::Error;
use crate::model::codec::Codec;
use crate::model::declare::{self, Apply, Mirror, Table, Tables};
use crate::sql::quote;

/// How a column's values are written, from its declared SQLite type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ColumnKind {
    Integer,
    Real,
    Bool,
    Blob,
    /// JSON text: what a server's json, jsonb or array column is, held
    /// as SQLite's JSON functions read it.
    Json,
    Text,
}

impl ColumnKind {
    /// Follows SQLite's own affinity rules where they apply (any type that
    /// contains INT is an integer), and adds BOOL, which SQLite stores as an
    /// integer but JSON writes as true or false, and JSON, which SQLite
    /// stores as text but which goes up as the JSON it holds. Anything not
    /// recognised is text, which stores whatever it is given.
    pub(crate) fn of_declared(declared: &str) -> ColumnKind {
        let upper = declared.to_ascii_uppercase();
        if upper.contains("INT") {
            ColumnKind::Integer
        } else if upper.contains("BOOL") {
            ColumnKind::Bool
        } else if upper.contains("REAL") || upper.contains("FLOA") || upper.contains("DOUB") {
            ColumnKind::Real
        } else if upper.contains("BLOB") {
            ColumnKind::Blob
        } else if upper.contains("JSON") {
            ColumnKind::Json
        } else {
            ColumnKind::Text
        }
    }

    /// How a key part in a column of this kind is read: integers are
    /// integers, and every other key column holds a UUID (as 16 bytes in a
    /// BLOB, or as text).
    pub(crate) fn key_type(self) -> KeyType {
        match self {
            ColumnKind::Integer => KeyType::Integer,
            _ => KeyType::Uuid,
        }
    }
}

#[derive(Clone, Debug)]
pub(crate) struct Column {
    pub name: String,
    pub kind: ColumnKind,
}

/// A declared table as SQLite has it.
#[derive(Clone, Debug)]
pub(crate) struct Shape {
    pub name: String,
    pub mirror: Mirror,
    pub columns: Vec<Column>,
    /// Indices into `columns`, in key order.
    pub key: Vec<usize>,
    pub key_types: Vec<KeyType>,
    pub retired: Option<usize>,
    pub origin: Option<usize>,
    pub version: Option<usize>,
    pub created: Option<usize>,
    /// The columns of a two-way table the replica owns.
    pub owned: Vec<usize>,
    /// The columns of a setting a wish may set, and how it takes one.
    pub desired: Vec<usize>,
    pub apply: Apply,
    /// The engine's `sync_wishes`: its rows go up whole, and its digest
    /// says each wish's answer.
    pub wishes: bool,
    pub codec: Codec,
    /// A record without a version: written once.
    pub history: bool,
    /// Lowercased column name to index: SQLite's names are case-blind.
    by_name: HashMap<String, usize>,
}

impl Shape {
    pub(crate) fn column(&self, name: &str) -> Option<usize> {
        // Rows nearly always name columns as the table does: no new text
        // is made for those.
        if let Some(i) = self.columns.iter().position(|c| c.name == name) {
            return Some(i);
        }
        self.by_name.get(&name.to_ascii_lowercase()).copied()
    }

    pub(crate) fn key_columns(&self) -> impl Iterator<Item = &Column> {
        self.key.iter().map(|&i| &self.columns[i])
    }

    pub(crate) fn is_key(&self, index: usize) -> bool {
        self.key.contains(&index)
    }

    /// `"a", "b"`: the key's columns, quoted, for SQL.
    pub(crate) fn key_list(&self) -> String {
        self.key_columns()
            .map(|c| quote(&c.name))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// `"a" = ?1 AND "b" = ?2`: matches one row by its key.
    pub(crate) fn key_match(&self) -> String {
        self.key_columns()
            .enumerate()
            .map(|(i, c)| format!("{} = ?{}", quote(&c.name), i + 1))
            .collect::<Vec<_>>()
            .join(" AND ")
    }

    /// The columns that go up: every one of a record or setting, and the
    /// key and the replica's own of a two-way table (only its edits go up).
    pub(crate) fn columns_up(&self) -> Vec<usize> {
        let mut up: Vec<usize> = match self.mirror {
            // An answer goes up with the wish it answers, as it came.
            Mirror::Both if self.wishes => (0..self.columns.len())
                .filter(|&i| Some(i) != self.retired)
                .collect(),
            Mirror::Both => self.key.iter().chain(&self.owned).copied().collect(),
            _ => (0..self.columns.len()).collect(),
        };
        if let Some(carried) = self.codec.columns() {
            up.retain(|&i| {
                carried
                    .iter()
                    .any(|c| c.eq_ignore_ascii_case(&self.columns[i].name))
            });
        }
        up
    }
}

/// Reads every declared table's shape and, when a setting is declared,
/// the engine's `sync_wishes` last; or refuses naming every problem.
pub(crate) fn read_all(conn: &Connection, tables: &Tables) -> Result<Vec<Shape>, Error> {
    let mut shapes = read_declared(conn, tables)?;
    if tables.has_settings() {
        shapes.push(read_wishes(conn)?);
    }
    Ok(shapes)
}

/// The shape of the engine's `sync_wishes` as this database has it.
pub(crate) fn read_wishes(conn: &Connection) -> Result<Shape, Error> {
    match read_one(conn, &declare::wishes_table())? {
        Ok(mut shape) => {
            shape.wishes = true;
            Ok(shape)
        }
        Err(problems) => Err(Error::Schema(format!(
            "{}: call install first",
            problems.join("; ")
        ))),
    }
}

/// Reads every declared table's shape, or refuses naming every problem.
pub(crate) fn read_declared(conn: &Connection, tables: &Tables) -> Result<Vec<Shape>, Error> {
    let mut problems = Vec::new();
    let mut shapes = Vec::new();
    let mut seen = HashSet::new();
    for table in tables.iter() {
        if !seen.insert(table.name.to_ascii_lowercase()) {
            problems.push(format!("table `{}` is declared twice", table.name));
            continue;
        }
        let mut own = table.problems();
        if !own.is_empty() {
            problems.append(&mut own);
            continue;
        }
        match read_one(conn, table)? {
            Ok(shape) => shapes.push(shape),
            Err(mut more) => problems.append(&mut more),
        }
    }
    if problems.is_empty() {
        Ok(shapes)
    } else {
        Err(Error::declaration(problems.join("; ")))
    }
}

/// The shape of one table, or the problems with its declaration.
fn read_one(conn: &Connection, table: &Table) -> Result<Result<Shape, Vec<String>>, Error> {
    let name = &table.name;
    if !table_exists(conn, name)? {
        return Ok(Err(vec![format!(
            "table `{name}` does not exist in the database"
        )]));
    }

    let (columns, primary_key) = read_columns(conn, name)?;
    let by_name: HashMap<String, usize> = columns
        .iter()
        .enumerate()
        .map(|(i, c)| (c.name.to_ascii_lowercase(), i))
        .collect();
    let find = |column: &str| by_name.get(&column.to_ascii_lowercase()).copied();
    let mut problems = Vec::new();

    let key: Vec<usize> = match &table.key {
        Some(declared) => {
            let mut key = Vec::new();
            for column in declared {
                match find(column) {
                    Some(i) => key.push(i),
                    None => problems.push(format!("table `{name}` has no key column `{column}`")),
                }
            }
            if problems.is_empty()
                && key != primary_key
                && !has_unique_index(conn, name, &key, &columns)?
            {
                // An upsert finds the row it overwrites through this index.
                problems.push(format!(
                    "table `{name}`: its key ({}) is neither its primary key nor covered by a unique index",
                    declared.join(", ")
                ));
            }
            key
        }
        None if primary_key.is_empty() => {
            problems.push(format!(
                "table `{name}` has no primary key: declare its key"
            ));
            Vec::new()
        }
        None => primary_key,
    };

    let mut one = |what: &str, column: &Option<String>, may_be_key: bool| -> Option<usize> {
        let column = column.as_ref()?;
        match find(column) {
            Some(i) if !may_be_key && key.contains(&i) => {
                problems.push(format!(
                    "table `{name}`: the {what} column `{column}` is part of the key"
                ));
                None
            }
            Some(i) => Some(i),
            None => {
                problems.push(format!("table `{name}` has no {what} column `{column}`"));
                None
            }
        }
    };
    let retired = one("retired", &table.retired, false);
    // A table keyed by its replica may have the replica's id as its key.
    let origin = one("origin", &table.origin, true);
    let version = one("version", &table.version, false);
    let created = one("created", &table.created, false);
    let mut many = |what: &str, list: &[String]| -> Vec<usize> {
        list.iter()
            .filter_map(|c| one(what, &Some(c.clone()), false))
            .collect()
    };
    let owned = many("replica-owned", &table.replica_owned);
    let desired = many("desired", &table.desired);
    for &i in &desired {
        if Some(i) == version || Some(i) == origin {
            problems.push(format!(
                "table `{name}`: the desired column `{}` is its version or origin",
                columns[i].name
            ));
        }
    }
    if let Some(retired) = retired {
        if owned.contains(&retired) {
            problems.push(format!(
                "table `{name}`: the retired column is the engine's, not one the replica owns"
            ));
        }
        let key_names: Vec<&str> = key.iter().map(|&i| columns[i].name.as_str()).collect();
        problems.extend(unique_indexes_holding_retired_rows(
            conn,
            name,
            &columns[retired].name,
            &key_names,
        )?);
    }
    if let Some(carried) = table.codec.columns() {
        for column in &carried {
            if find(column).is_none() {
                problems.push(format!(
                    "table `{name}`: its protobuf codec names column `{column}`, which it lacks"
                ));
            }
        }
        let carries = |i: usize| {
            carried
                .iter()
                .any(|c| c.eq_ignore_ascii_case(&columns[i].name))
        };
        for &i in key.iter().chain(&owned) {
            if !carries(i) {
                problems.push(format!(
                    "table `{name}`: its protobuf codec does not carry column `{}`",
                    columns[i].name
                ));
            }
        }
    }

    if !problems.is_empty() {
        return Ok(Err(problems));
    }
    let key_types = key.iter().map(|&i| columns[i].kind.key_type()).collect();
    Ok(Ok(Shape {
        name: name.clone(),
        mirror: table.mirror,
        columns,
        key,
        key_types,
        retired,
        origin,
        version,
        created,
        owned,
        desired,
        apply: table.apply.unwrap_or(Apply::Always),
        wishes: false,
        codec: table.codec.clone(),
        history: table.is_history(),
        by_name,
    }))
}

/// A unique index of a table with a retired column must leave retired
/// rows out (a partial index naming the column), or an old row the
/// replica keeps for its own would refuse a new one with the same value.
fn unique_indexes_holding_retired_rows(
    conn: &Connection,
    table: &str,
    retired: &str,
    key: &[&str],
) -> rusqlite::Result<Vec<String>> {
    let mut parts = conn.prepare("SELECT name FROM pragma_index_info(?1)")?;
    let mut statement = conn.prepare(
        "SELECT l.name, l.partial, coalesce(s.sql, '') FROM pragma_index_list(?1) l
         LEFT JOIN sqlite_schema s ON s.type = 'index' AND s.name = l.name
         WHERE l.\"unique\" = 1 AND l.origin <> 'pk'",
    )?;
    let rows = statement.query_map([table], |row| {
        Ok((
            row.get::<_, String>(0)?,
            row.get::<_, bool>(1)?,
            row.get::<_, String>(2)?,
        ))
    })?;
    let mut problems = Vec::new();
    for row in rows {
        let (index, partial, sql) = row?;
        let covered: Vec<String> = parts
            .query_map([&index], |r| r.get::<_, Option<String>>(0))?
            .collect::<rusqlite::Result<Vec<_>>>()?
            .into_iter()
            .flatten()
            .collect();
        // The key's own index: a retired row sent again is revived by it.
        let is_the_key = covered.len() == key.len()
            && covered
                .iter()
                .all(|c| key.iter().any(|k| k.eq_ignore_ascii_case(c)));
        if is_the_key {
            continue;
        }
        let leaves_retired_out = partial
            && sql
                .to_ascii_lowercase()
                .contains(&retired.to_ascii_lowercase());
        if !leaves_retired_out {
            problems.push(format!(
                "table `{table}`: the unique index `{index}` holds the values of retired rows; \
                 make it partial: CREATE UNIQUE INDEX ... WHERE {retired} IS NULL"
            ));
        }
    }
    Ok(problems)
}

fn table_exists(conn: &Connection, name: &str) -> rusqlite::Result<bool> {
    conn.query_row(
        "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?1 COLLATE NOCASE",
        [name],
        |row| row.get::<_, i64>(0),
    )
    .map(|n| n > 0)
}

/// The table's columns, and its primary key's columns in key order.
fn read_columns(conn: &Connection, table: &str) -> rusqlite::Result<(Vec<Column>, Vec<usize>)> {
    let mut statement =
        conn.prepare("SELECT name, type, pk FROM pragma_table_info(?1) ORDER BY cid")?;
    let mut columns = Vec::new();
    let mut primary = Vec::new();
    let mut rows = statement.query([table])?;
    while let Some(row) = rows.next()? {
        let name: String = row.get(0)?;
        let declared: String = row.get(1)?;
        let pk: i64 = row.get(2)?;
        if pk > 0 {
            primary.push((pk, columns.len()));
        }
        columns.push(Column {
            name,
            kind: ColumnKind::of_declared(&declared),
        });
    }
    primary.sort();
    Ok((columns, primary.into_iter().map(|(_, i)| i).collect()))
}

/// Whether a unique index (not partial) covers exactly these columns.
fn has_unique_index(
    conn: &Connection,
    table: &str,
    key: &[usize],
    columns: &[Column],
) -> rusqlite::Result<bool> {
    let wanted: HashSet<String> = key
        .iter()
        .map(|&i| columns[i].name.to_ascii_lowercase())
        .collect();
    let mut indexes = conn
        .prepare("SELECT name FROM pragma_index_list(?1) WHERE \"unique\" = 1 AND partial = 0")?;
    let names: Vec<String> = indexes
        .query_map([table], |row| row.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let mut parts = conn.prepare("SELECT name FROM pragma_index_info(?1)")?;
    for index in names {
        let covered: HashSet<String> = parts
            .query_map([&index], |row| row.get::<_, Option<String>>(0))?
            .filter_map(|name| name.transpose())
            .map(|name| name.map(|n| n.to_ascii_lowercase()))
            .collect::<rusqlite::Result<_>>()?;
        if covered == wanted {
            return Ok(true);
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_types_map_to_how_values_are_written() {
        for (declared, kind) in [
            ("INTEGER", ColumnKind::Integer),
            ("bigint", ColumnKind::Integer),
            ("REAL", ColumnKind::Real),
            ("double precision", ColumnKind::Real),
            ("FLOAT", ColumnKind::Real),
            ("BOOLEAN", ColumnKind::Bool),
            ("BLOB", ColumnKind::Blob),
            ("TEXT", ColumnKind::Text),
            ("JSON", ColumnKind::Json),
            ("jsonb", ColumnKind::Json),
            ("UUID", ColumnKind::Text),
            ("", ColumnKind::Text),
            ("NUMERIC", ColumnKind::Text),
        ] {
            assert_eq!(ColumnKind::of_declared(declared), kind, "{declared}");
        }
    }

    #[test]
    fn only_integer_columns_have_integer_keys() {
        assert_eq!(ColumnKind::Integer.key_type(), KeyType::Integer);
        for kind in [
            ColumnKind::Blob,
            ColumnKind::Text,
            ColumnKind::Real,
            ColumnKind::Bool,
        ] {
            assert_eq!(kind.key_type(), KeyType::Uuid);
        }
    }
}

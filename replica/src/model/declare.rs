//! Declaring the tables a device holds: what the device program writes.
//!
//! A declaration says how each table is shared with the server. What the
//! table looks like (its columns, their types, its key) is read from SQLite
//! itself when the replica opens (see `shape`), so the two cannot disagree.

use serde_json::{json, Value as JsonValue};

use crate::error::Error;
use crate::model::codec::{Codec, Kind};

// How a table is shared, and how a setting takes a wish: the same words
// the server declares its tables with.
pub use magic_sync_proto::mirror::{Apply, Mirror};

/// One table the device holds, as the device program declares it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Table {
    pub(crate) name: String,
    pub(crate) mirror: Mirror,
    pub(crate) key: Option<Vec<String>>,
    pub(crate) retired: Option<String>,
    pub(crate) origin: Option<String>,
    pub(crate) version: Option<String>,
    pub(crate) created: Option<String>,
    pub(crate) replica_owned: Vec<String>,
    pub(crate) desired: Vec<String>,
    pub(crate) apply: Option<Apply>,
    pub(crate) codec: Codec,
}

impl Table {
    pub fn new(name: impl Into<String>, mirror: Mirror) -> Table {
        Table {
            name: name.into(),
            mirror,
            key: None,
            retired: None,
            origin: None,
            version: None,
            created: None,
            replica_owned: Vec::new(),
            desired: Vec::new(),
            apply: None,
            codec: Codec::Json,
        }
    }

    /// A table the server writes and the replica holds a copy of.
    pub fn catalog(name: impl Into<String>) -> Table {
        Table::new(name, Mirror::Catalog)
    }

    /// A table the replica writes and sends up: history unless it is given
    /// a [`version`](Table::version).
    pub fn record(name: impl Into<String>) -> Table {
        Table::new(name, Mirror::Record)
    }

    /// A table written on both sides: give it the columns the replica owns
    /// with [`replica_owned`](Table::replica_owned).
    pub fn both(name: impl Into<String>) -> Table {
        Table::new(name, Mirror::Both)
    }

    /// A setting: a record with a [`version`](Table::version), an
    /// [`origin`](Table::origin) and [`desired`](Table::desired) columns.
    pub fn setting(name: impl Into<String>) -> Table {
        Table::new(name, Mirror::Setting)
    }

    /// The key's columns, in key order. Without it, the key is the SQLite
    /// table's primary key. Another set of columns needs a unique index.
    pub fn key(mut self, columns: &[&str]) -> Table {
        self.key = Some(owned(columns));
        self
    }

    /// The column the replica marks a row retired by (when it must let go of
    /// a row its own rows still point at). The replica owns it: an upsert
    /// sets it back to NULL.
    pub fn retired(mut self, column: impl Into<String>) -> Table {
        self.retired = Some(column.into());
        self
    }

    /// The column that names the replica a row belongs to: the table is
    /// keyed by its replica, so the replica's deletes of it go up.
    pub fn origin(mut self, column: impl Into<String>) -> Table {
        self.origin = Some(column.into());
        self
    }

    /// The column of a record (or setting) whose value only moves forward:
    /// its rows may then be updated.
    pub fn version(mut self, column: impl Into<String>) -> Table {
        self.version = Some(column.into());
        self
    }

    /// A column of a record written once, never updated.
    pub fn created(mut self, column: impl Into<String>) -> Table {
        self.created = Some(column.into());
        self
    }

    /// The columns of a table written on both sides that the replica owns:
    /// the server never overwrites them, and only they go up.
    pub fn replica_owned(mut self, columns: &[&str]) -> Table {
        self.replica_owned = owned(columns);
        self
    }

    /// The columns of a setting the server may wish other values.
    pub fn desired(mut self, columns: &[&str]) -> Table {
        self.desired = owned(columns);
        self
    }

    /// How a setting takes a wish (`Always` unless said).
    pub fn apply(mut self, apply: Apply) -> Table {
        self.apply = Some(apply);
        self
    }

    /// How the table's rows travel (JSON unless said).
    pub fn codec(mut self, codec: Codec) -> Table {
        self.codec = codec;
        self
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn mirror(&self) -> Mirror {
        self.mirror
    }

    /// A record without a version: written once.
    pub(crate) fn is_history(&self) -> bool {
        self.mirror == Mirror::Record && self.version.is_none()
    }

    /// What is wrong with the declaration on its own, before the database
    /// is looked at: each problem names the table.
    pub(crate) fn problems(&self) -> Vec<String> {
        let name = &self.name;
        let mirror = self.mirror.name();
        let mut problems = Vec::new();
        let mut refuse = |text: String| problems.push(format!("table `{name}`: {text}"));
        if name.to_ascii_lowercase().starts_with("sync_") {
            refuse("names beginning sync_ are the engine's own".into());
        }
        if self.retired.is_some() && !self.mirror.goes_down() {
            refuse(format!(
                "a retired column on a {mirror}, which the server never lets go of"
            ));
        }
        if self.origin.is_some() && self.mirror == Mirror::Catalog {
            refuse("an origin column on a catalog, which the replica does not write".into());
        }
        if self.version.is_some() && self.mirror.goes_down() {
            refuse(format!(
                "a version on a {mirror}, which the server sends down"
            ));
        }
        if self.created.is_some() && self.mirror.goes_down() {
            refuse(format!(
                "a created column on a {mirror}, which the server writes"
            ));
        }
        match self.mirror {
            Mirror::Both if self.replica_owned.is_empty() => {
                refuse("a table written on both sides needs the columns the replica owns".into())
            }
            Mirror::Both => {}
            _ if !self.replica_owned.is_empty() => refuse(format!(
                "replica-owned columns on a {mirror}: only a table written on both sides has them"
            )),
            _ => {}
        }
        if self.mirror == Mirror::Setting {
            if self.version.is_none() {
                refuse("a setting needs a version column".into());
            }
            if self.origin.is_none() {
                refuse("a setting needs an origin column".into());
            }
            if self.desired.is_empty() {
                refuse("a setting needs the columns a wish may set (desired)".into());
            }
        } else {
            if !self.desired.is_empty() {
                refuse(format!(
                    "desired columns on a {mirror}: only a setting has them"
                ));
            }
            if self.apply.is_some() {
                refuse(format!("apply on a {mirror}: only a setting takes wishes"));
            }
        }
        if let Some(key) = &self.key {
            if key.is_empty() {
                refuse("the declared key has no columns".into());
            }
        }
        problems.extend(self.codec.problems(name));
        problems
    }

    /// The declaration as JSON, kept in the database for tools that read it
    /// back (the command line).
    pub(crate) fn to_json(&self) -> JsonValue {
        json!({
            "name": self.name,
            "mirror": self.mirror.name(),
            "key": self.key,
            "retired": self.retired,
            "origin": self.origin,
            "version": self.version,
            "created": self.created,
            "replica_owned": self.replica_owned,
            "desired": self.desired,
            "apply": self.apply.map(Apply::name),
            "codec": self.codec.to_json(),
        })
    }

    /// A declaration as the engine's tables recorded it (`to_json`).
    pub(crate) fn from_json(value: &JsonValue) -> Result<Table, Error> {
        let text = |field: &str| value.get(field).and_then(JsonValue::as_str);
        let list = |field: &str| -> Vec<String> {
            value
                .get(field)
                .and_then(JsonValue::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default()
        };
        let name =
            text("name").ok_or_else(|| Error::Schema("a declaration without a name".to_owned()))?;
        let unread = |why: String| Error::Schema(format!("table `{name}`: {why}"));
        let mirror = text("mirror")
            .and_then(Mirror::from_name)
            .ok_or_else(|| unread("no mirror this build knows".to_owned()))?;
        let mut table = Table::new(name, mirror);
        table.key = value
            .get("key")
            .filter(|k| !k.is_null())
            .map(|_| list("key"));
        table.retired = text("retired").map(str::to_owned);
        table.origin = text("origin").map(str::to_owned);
        table.version = text("version").map(str::to_owned);
        table.created = text("created").map(str::to_owned);
        table.replica_owned = list("replica_owned");
        table.desired = list("desired");
        table.apply = match text("apply") {
            Some(a) => {
                Some(Apply::from_name(a).ok_or_else(|| unread(format!("apply `{a}` is unknown")))?)
            }
            None => None,
        };
        table.codec = Codec::from_json(value.get("codec").unwrap_or(&JsonValue::Null))
            .map_err(|e| e.within(&format!("table `{name}`")))?;
        Ok(table)
    }
}

/// The name replicas know the server's wishes by: the engine's own table.
pub(crate) const WISHES: &str = "sync_wishes";

/// The engine's `sync_wishes` (protocol 4.5), held when a setting is
/// declared: written on both sides, the replica owning the answer, retired
/// while an answer the server let go of is not filed, its rows the `Wish`
/// message. Never declared by a program (names beginning `sync_` are the
/// engine's), so it is built here and never checked as theirs are.
pub(crate) fn wishes_table() -> Table {
    Table::both(WISHES)
        .replica_owned(&["answered", "outcome", "reason", "answered_at"])
        .retired("retired_at")
        .codec(Codec::protobuf(vec![
            ("id", 1, Kind::String),
            ("table_name", 2, Kind::String),
            ("key", 3, Kind::String),
            ("wanted", 4, Kind::Bytes),
            ("version", 5, Kind::Uint64),
            ("note", 6, Kind::String),
            ("answered", 7, Kind::Uint64),
            ("outcome", 8, Kind::String),
            ("reason", 9, Kind::String),
            ("answered_at", 10, Kind::String),
        ]))
}

fn owned(columns: &[&str]) -> Vec<String> {
    columns.iter().map(|c| (*c).to_owned()).collect()
}

/// A lane: a stream of Ups the transport keeps apart, carrying the rows of
/// some tables. The first lane carries every table no other lane names, and
/// everything the engine itself says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lane {
    pub name: String,
    pub tables: Vec<String>,
}

impl Lane {
    pub fn new(name: impl Into<String>, tables: &[&str]) -> Lane {
        Lane {
            name: name.into(),
            tables: owned(tables),
        }
    }
}

/// Every table the device holds, parents first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tables {
    pub(crate) list: Vec<Table>,
}

impl Tables {
    pub fn new(list: Vec<Table>) -> Tables {
        Tables { list }
    }

    pub fn iter(&self) -> impl Iterator<Item = &Table> {
        self.list.iter()
    }

    pub fn get(&self, name: &str) -> Option<&Table> {
        self.list.iter().find(|t| t.name == name)
    }

    /// Whether any table is a setting: then the replica holds wishes.
    pub(crate) fn has_settings(&self) -> bool {
        self.list.iter().any(|t| t.mirror == Mirror::Setting)
    }

    #[cfg(test)]
    pub(crate) fn to_json(&self) -> JsonValue {
        JsonValue::Array(self.list.iter().map(Table::to_json).collect())
    }

    #[cfg(test)]
    pub(crate) fn from_json(value: &JsonValue) -> Result<Tables, Error> {
        let list = value
            .as_array()
            .ok_or_else(|| Error::Schema("the declarations are no list".to_owned()))?;
        Ok(Tables::new(
            list.iter()
                .map(Table::from_json)
                .collect::<Result<_, _>>()?,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::codec::Kind;

    #[test]
    fn a_declaration_comes_back_from_its_json() {
        let tables = Tables::new(vec![
            Table::catalog("products").retired("retired_at"),
            Table::record("receipts")
                .origin("register_id")
                .created("created_at"),
            Table::both("state")
                .replica_owned(&["battery"])
                .key(&["id"]),
            Table::setting("footers")
                .version("changed_at")
                .origin("register_id")
                .desired(&["text"])
                .apply(Apply::IfUnchanged)
                .codec(Codec::protobuf(vec![
                    ("register_id", 1, Kind::String),
                    ("text", 2, Kind::String),
                ])),
        ]);
        assert_eq!(Tables::from_json(&tables.to_json()), Ok(tables));
    }

    #[test]
    fn declarations_that_cannot_work_are_named() {
        let cases = [
            (
                Table::record("r").retired("gone"),
                "a retired column on a record",
            ),
            (
                Table::catalog("c").origin("o"),
                "an origin column on a catalog",
            ),
            (Table::catalog("c").version("v"), "a version on a catalog"),
            (Table::both("b"), "needs the columns the replica owns"),
            (
                Table::record("r").replica_owned(&["x"]),
                "replica-owned columns on a record",
            ),
            (
                Table::setting("s").origin("o").desired(&["d"]),
                "a setting needs a version",
            ),
            (
                Table::setting("s").version("v").desired(&["d"]),
                "a setting needs an origin",
            ),
            (
                Table::setting("s").version("v").origin("o"),
                "needs the columns a wish may set",
            ),
            (
                Table::record("r").desired(&["d"]),
                "desired columns on a record",
            ),
            (Table::record("r").apply(Apply::Always), "apply on a record"),
            (Table::catalog("sync_x"), "engine's own"),
            (
                Table::catalog("c").key(&[]),
                "the declared key has no columns",
            ),
        ];
        for (table, expected) in cases {
            let problems = table.problems().join("; ");
            assert!(problems.contains(expected), "{problems} lacks {expected}");
            assert!(
                problems.contains(&format!("`{}`", table.name)),
                "{problems}"
            );
        }
    }
}

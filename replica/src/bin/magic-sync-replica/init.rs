//! `init`: a new replica's database, from a declaration file and the
//! replica's id. The file is JSON (docs/src/replica-cli.md):
//!
//! ```json
//! {
//!   "schema": ["CREATE TABLE products (id BLOB PRIMARY KEY, name TEXT)"],
//!   "tables": [{"name": "products", "mirror": "catalog"}],
//!   "lanes":  [{"name": "main", "tables": []}]
//! }
//! ```
//!
//! `schema` makes the SQLite tables; `tables` declares them as the
//! library's `Table` builders do, one member per builder; `lanes` is
//! optional. Every problem of the file is named at once, by where it is.

use std::fs::OpenOptions;
use std::io;
use std::path::Path;

use magic_sync_replica::{
    install, Apply, Codec, Field, Kind, Lane, Mirror, Replica, Settings, Table, Tables, Wishes,
};
use rusqlite::Connection;
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::exit::Failure;

/// What a declaration file says.
pub struct Declared {
    pub schema: Vec<String>,
    pub tables: Tables,
    pub lanes: Option<Vec<Lane>>,
}

/// The replica's id, as the server knows it: a UUID, hyphenated or its 32
/// hex digits (the key rules' spellings), and not the nil one.
pub fn replica_id(text: &str) -> Result<Uuid, Failure> {
    let refuse = |why: &str| Failure::Usage(format!("`{text}` is no replica id: {why}"));
    if ![36, 32].contains(&text.len()) {
        return Err(refuse("give its UUID, hyphenated"));
    }
    match Uuid::try_parse(text) {
        Ok(id) if id.is_nil() => Err(refuse("the nil UUID names no replica")),
        Ok(id) => Ok(id),
        Err(_) => Err(refuse("give its UUID, hyphenated")),
    }
}

/// Reads and checks a declaration file.
pub fn read(path: &str) -> Result<Declared, Failure> {
    let text =
        std::fs::read_to_string(path).map_err(|e| Failure::Failed(format!("{path}: {e}")))?;
    let value: Value = serde_json::from_str(&text)
        .map_err(|e| Failure::Refused(format!("{path}: not JSON: {e}")))?;
    declared(&value)
        .map_err(|problems| Failure::Refused(format!("{path}: {}", problems.join("; "))))
}

/// Creates the database at `db` (refusing a file that is there already),
/// makes its tables, installs the engine and opens the replica as `me`. A
/// database it could not finish is removed, so `init` can be run again.
pub fn create(db: &str, declared: Declared, me: Uuid) -> Result<Replica, Failure> {
    claim(db)?;
    let made = make(db, declared, me);
    if made.is_err() {
        remove(db);
    }
    made
}

/// Creates the empty file, only if none is there.
fn claim(db: &str) -> Result<(), Failure> {
    match OpenOptions::new().write(true).create_new(true).open(db) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Err(Failure::Refused(format!(
            "{db}: a file is there already; init makes a new database and leaves one that is there alone"
        ))),
        Err(e) => Err(Failure::Failed(format!("{db}: {e}"))),
    }
}

fn make(db: &str, declared: Declared, me: Uuid) -> Result<Replica, Failure> {
    let failed = |e: rusqlite::Error| Failure::Failed(format!("{db}: {e}"));
    let mut conn = Connection::open(db).map_err(failed)?;
    conn.execute_batch("PRAGMA recursive_triggers = ON; PRAGMA foreign_keys = ON;")
        .map_err(failed)?;
    make_schema(&mut conn, &declared.schema)?;
    install(&mut conn, &declared.tables)?;
    // The command line holds wishes, and leaves them to the program.
    let mut settings = Settings {
        wishes: Wishes::none_carried_out(),
        ..Settings::default()
    };
    if let Some(lanes) = declared.lanes {
        settings.lanes = lanes;
    }
    Ok(Replica::open(conn, declared.tables, me, settings)?)
}

/// Runs the schema's statements in one transaction.
fn make_schema(conn: &mut Connection, schema: &[String]) -> Result<(), Failure> {
    let failed = |e: rusqlite::Error| Failure::Failed(e.to_string());
    let tx = conn.transaction().map_err(failed)?;
    for (at, statement) in schema.iter().enumerate() {
        tx.execute_batch(statement)
            .map_err(|e| Failure::Refused(format!("schema[{at}]: {e}")))?;
    }
    tx.commit().map_err(failed)
}

/// Removes a database `init` made and could not finish, with the files
/// SQLite keeps beside it.
fn remove(db: &str) {
    for suffix in ["", "-journal", "-wal", "-shm"] {
        let path = format!("{db}{suffix}");
        if Path::new(&path).exists() {
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// The file's declarations, or every problem with them.
fn declared(value: &Value) -> Result<Declared, Vec<String>> {
    let mut problems = Vec::new();
    let Some(top) = object(value, "the file", &mut problems) else {
        return Err(problems);
    };
    let mut top = Members::new("", top, &mut problems);
    let schema = top.texts("schema", Required::Yes);
    let tables = top.list("tables", Required::Yes, table);
    let lanes = top
        .has("lanes")
        .then(|| top.list("lanes", Required::Yes, lane));
    top.none_else(&["schema", "tables", "lanes"]);
    if tables.as_ref().is_some_and(Vec::is_empty) {
        problems.push("tables: declares no table".into());
    }
    match problems.is_empty() {
        true => Ok(Declared {
            schema: schema.unwrap_or_default(),
            tables: Tables::new(tables.unwrap_or_default()),
            lanes: lanes.flatten(),
        }),
        false => Err(problems),
    }
}

/// One table's declaration, its members named as the `Table` builders.
fn table(m: &mut Members<'_>) -> Option<Table> {
    let name = m.text("name", Required::Yes);
    let mirror = m.named(
        "mirror",
        Required::Yes,
        Mirror::from_name,
        "catalog, record, both, setting",
    );
    let key = m.texts("key", Required::No);
    let retired = m.text("retired", Required::No);
    let origin = m.text("origin", Required::No);
    let version = m.text("version", Required::No);
    let created = m.text("created", Required::No);
    let replica_owned = m.texts("replica_owned", Required::No);
    let desired = m.texts("desired", Required::No);
    let apply = m.named(
        "apply",
        Required::No,
        Apply::from_name,
        "always, if_unchanged",
    );
    let codec = m.has("codec").then(|| codec(m)).flatten();
    m.none_else(&[
        "name",
        "mirror",
        "key",
        "retired",
        "origin",
        "version",
        "created",
        "replica_owned",
        "desired",
        "apply",
        "codec",
    ]);
    let mut table = Table::new(name?, mirror?);
    if let Some(key) = key {
        table = table.key(&strs(&key));
    }
    if let Some(column) = retired {
        table = table.retired(column);
    }
    if let Some(column) = origin {
        table = table.origin(column);
    }
    if let Some(column) = version {
        table = table.version(column);
    }
    if let Some(column) = created {
        table = table.created(column);
    }
    if let Some(columns) = replica_owned {
        table = table.replica_owned(&strs(&columns));
    }
    if let Some(columns) = desired {
        table = table.desired(&strs(&columns));
    }
    if let Some(apply) = apply {
        table = table.apply(apply);
    }
    if let Some(codec) = codec {
        table = table.codec(codec);
    }
    Some(table)
}

/// `"json"`, or `{"protobuf": [{"column", "number", "kind", "optional"}…]}`.
fn codec(m: &mut Members<'_>) -> Option<Codec> {
    let value = m.object.get("codec")?;
    if value == "json" {
        return Some(Codec::Json);
    }
    let path = m.path("codec");
    let Some(members) = value
        .as_object()
        .filter(|o| o.len() == 1 && o.contains_key("protobuf"))
    else {
        m.problems.push(format!(
            "{path}: give \"json\" or {{\"protobuf\": [fields]}}"
        ));
        return None;
    };
    let mut inner = Members::new(&path, members, m.problems);
    let fields = inner.list("protobuf", Required::Yes, field)?;
    Some(Codec::protobuf(fields))
}

fn field(m: &mut Members<'_>) -> Option<Field> {
    let column = m.text("column", Required::Yes);
    let number = m.number("number");
    let kind = m.named(
        "kind",
        Required::Yes,
        Kind::from_name,
        "string, bytes, int64, sint64, uint64, int32, bool, double",
    );
    let optional = m.flag("optional");
    m.none_else(&["column", "number", "kind", "optional"]);
    let field = Field::new(column?, number?, kind?);
    Some(if optional { field.optional() } else { field })
}

fn lane(m: &mut Members<'_>) -> Option<Lane> {
    let name = m.text("name", Required::Yes);
    let tables = m.texts("tables", Required::No).unwrap_or_default();
    m.none_else(&["name", "tables"]);
    Some(Lane::new(name?, &strs(&tables)))
}

fn strs(texts: &[String]) -> Vec<&str> {
    texts.iter().map(String::as_str).collect()
}

fn object<'v>(
    value: &'v Value,
    path: &str,
    problems: &mut Vec<String>,
) -> Option<&'v Map<String, Value>> {
    let object = value.as_object();
    if object.is_none() {
        problems.push(format!("{path}: give an object"));
    }
    object
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Required {
    Yes,
    No,
}

/// The members of one object of the file, read strictly: each problem is
/// named by its path (`tables[1].mirror`).
struct Members<'a> {
    at: String,
    object: &'a Map<String, Value>,
    problems: &'a mut Vec<String>,
}

impl<'a> Members<'a> {
    fn new(at: &str, object: &'a Map<String, Value>, problems: &'a mut Vec<String>) -> Members<'a> {
        Members {
            at: at.to_owned(),
            object,
            problems,
        }
    }

    fn path(&self, member: &str) -> String {
        match self.at.is_empty() {
            true => member.to_owned(),
            false => format!("{}.{member}", self.at),
        }
    }

    fn has(&self, member: &str) -> bool {
        self.object.get(member).is_some_and(|v| !v.is_null())
    }

    /// The member, or `None` (named as a problem when it is required).
    fn get(&mut self, member: &str, required: Required) -> Option<&'a Value> {
        match self.object.get(member).filter(|v| !v.is_null()) {
            Some(value) => Some(value),
            None => {
                if required == Required::Yes {
                    let path = self.path(member);
                    self.problems.push(format!("{path}: missing"));
                }
                None
            }
        }
    }

    fn refuse(&mut self, member: &str, why: &str) {
        let path = self.path(member);
        self.problems.push(format!("{path}: {why}"));
    }

    fn text(&mut self, member: &str, required: Required) -> Option<String> {
        let value = self.get(member, required)?;
        match value.as_str() {
            Some(text) if !text.is_empty() => Some(text.to_owned()),
            _ => {
                self.refuse(member, "give a name (a non-empty string)");
                None
            }
        }
    }

    fn texts(&mut self, member: &str, required: Required) -> Option<Vec<String>> {
        let value = self.get(member, required)?;
        let texts = value.as_array().and_then(|items| {
            items
                .iter()
                .map(|v| v.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
        });
        if texts.is_none() {
            self.refuse(member, "give a list of strings");
        }
        texts
    }

    fn named<T>(
        &mut self,
        member: &str,
        required: Required,
        by_name: fn(&str) -> Option<T>,
        known: &str,
    ) -> Option<T> {
        let value = self.get(member, required)?;
        let found = value.as_str().and_then(by_name);
        if found.is_none() {
            self.refuse(member, &format!("{value} is none of {known}"));
        }
        found
    }

    fn number(&mut self, member: &str) -> Option<u32> {
        let value = self.get(member, Required::Yes)?;
        let number = value.as_u64().and_then(|n| u32::try_from(n).ok());
        if number.is_none() {
            self.refuse(member, &format!("{value} is no field number"));
        }
        number
    }

    fn flag(&mut self, member: &str) -> bool {
        match self.get(member, Required::No) {
            None => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => {
                self.refuse(member, "give true or false");
                false
            }
        }
    }

    /// A list of objects, each read by `item`.
    fn list<T>(
        &mut self,
        member: &str,
        required: Required,
        item: fn(&mut Members<'_>) -> Option<T>,
    ) -> Option<Vec<T>> {
        let value = self.get(member, required)?;
        let Some(items) = value.as_array() else {
            self.refuse(member, "give a list");
            return None;
        };
        let path = self.path(member);
        let read: Vec<Option<T>> = items
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let at = format!("{path}[{i}]");
                let object = object(v, &at, self.problems)?;
                item(&mut Members::new(&at, object, self.problems))
            })
            .collect();
        read.into_iter().collect()
    }

    /// Names each member this object does not take.
    fn none_else(&mut self, known: &[&str]) {
        let unknown: Vec<String> = self
            .object
            .keys()
            .filter(|k| !known.contains(&k.as_str()))
            .cloned()
            .collect();
        for member in unknown {
            self.refuse(
                &member,
                &format!("no such member (members: {})", known.join(", ")),
            );
        }
    }
}

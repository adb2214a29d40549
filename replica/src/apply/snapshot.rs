//! Snapshots (protocol §4.2): while one is in progress the replica
//! remembers every key its messages carried; at its end it lets go of every
//! row of the tables it covered that it did not name.
//!
//! The keys are kept one row per part of a message (`sync_snapshot_keys`,
//! in the message's own transaction, so they survive the program
//! stopping): the keys the part's deletes let go of, then the keys of its
//! rows, each a list of lines. The end reads them back in order — a key's
//! last word stands — and compares every stored row's key text with them
//! in one pass over the table, so only the rows it lets go of are kept in
//! memory besides the keys.

use std::collections::HashSet;

use magic_sync_proto::wire::EndSnapshot;
use rusqlite::types::{ToSqlOutput, Value as SqlValue, ValueRef};
use rusqlite::{params, Connection};
use uuid::Uuid;

use crate::apply::context::{settle, Context, Stop};
use crate::apply::let_go::{self, Doomed};
use crate::apply::outcome::Outcome;
use crate::apply::spot::Spot;
use crate::engine::reject;
use crate::model::key_sql;
use crate::model::shape::{ColumnKind, Shape};
use crate::sql::quote;

/// The keys one part of a message of the snapshot in progress let go of,
/// then named, in the key text form.
#[derive(Clone, Debug)]
pub(crate) struct PartKeys {
    pub table: String,
    let_go: KeyList,
    named: KeyList,
}

impl PartKeys {
    pub(crate) fn new(table: &str) -> PartKeys {
        PartKeys {
            table: table.to_owned(),
            let_go: KeyList::default(),
            named: KeyList::default(),
        }
    }

    /// The part let go of this row: the snapshot's last word on it, unless
    /// a row of it comes after.
    pub(crate) fn let_go(&mut self, key: &str) {
        self.let_go.push(key);
    }

    /// The part carried this row (refused ones too: a refused row keeps
    /// what the replica had).
    pub(crate) fn named(&mut self, key: &str) {
        self.named.push(key);
    }
}

/// Keys, one a line (no key has a line break), in any order. A run of
/// integers each one more than the one before is one line, `first..last`
/// (no key has two dots).
#[derive(Clone, Debug, Default)]
struct KeyList {
    text: String,
    /// The run of integers not written yet.
    run: Option<(i64, i64)>,
}

impl KeyList {
    fn push(&mut self, key: &str) {
        let integer = decimal(key.as_bytes());
        match (&mut self.run, integer) {
            (Some((_, last)), Some(i)) if last.checked_add(1) == Some(i) => *last = i,
            (_, Some(i)) => {
                self.write_run();
                self.run = Some((i, i));
            }
            (_, None) => {
                self.write_run();
                self.line(key);
            }
        }
    }

    fn line(&mut self, line: &str) {
        if !self.text.is_empty() {
            self.text.push('\n');
        }
        self.text.push_str(line);
    }

    fn write_run(&mut self) {
        use std::fmt::Write;
        if let Some((first, last)) = self.run.take() {
            if !self.text.is_empty() {
                self.text.push('\n');
            }
            match first == last {
                true => write!(self.text, "{first}"),
                false => write!(self.text, "{first}..{last}"),
            }
            .expect("writing to memory");
        }
    }

    fn is_empty(&self) -> bool {
        self.text.is_empty() && self.run.is_none()
    }

    fn finish(&mut self) -> &str {
        self.write_run();
        &self.text
    }
}

/// Keeps what the parts of a message named, in the message's transaction.
pub(crate) fn keep(conn: &Connection, parts: &mut [PartKeys]) -> rusqlite::Result<()> {
    for part in parts {
        if part.let_go.is_empty() && part.named.is_empty() {
            continue;
        }
        conn.prepare_cached(
            "INSERT INTO sync_snapshot_keys (table_name, let_go, named) VALUES (?1, ?2, ?3)",
        )?
        .execute(params![
            part.table,
            part.let_go.finish(),
            part.named.finish()
        ])?;
    }
    Ok(())
}

/// The end of the snapshot: sweeps the tables it covered, children first
/// (the reverse of the order listed), and forgets the rejections of those
/// tables recorded before it began.
pub(crate) fn end(ctx: &Context<'_>, end: &EndSnapshot) -> Result<Outcome, Stop> {
    let mut outcome = Outcome::default();
    for table in end.tables.iter().rev() {
        match ctx.shape(table) {
            Some(shape) if shape.mirror.goes_down() => sweep(ctx, shape, &mut outcome)?,
            _ => log::warn!("the snapshot covered table `{table}`, which the replica does not hold from the server"),
        }
    }
    for table in &end.tables {
        reject::forget_before_snapshot(ctx.conn, table, ctx.head.epoch, ctx.snapshot_began)?;
    }
    reject::forget_other_epochs(ctx.conn, ctx.head.epoch, |table| {
        ctx.shape(table).is_some_and(|s| s.mirror.goes_down())
    })?;
    Ok(outcome)
}

/// Lets go of every row of the table the snapshot did not name.
fn sweep(ctx: &Context<'_>, shape: &Shape, outcome: &mut Outcome) -> Result<(), Stop> {
    let mut rows = Vec::new();
    let mut told = Vec::new();
    for (key, values) in unnamed(ctx.conn, shape)? {
        // A row whose key is no key of the table's types is no row the
        // server sent: it was not named, and goes too, unreported.
        let parts = parse(shape, &key);
        let spot = Spot::Swept {
            table: shape.name.clone(),
            key: key.clone(),
        };
        match ctx.plan.verdict(&spot) {
            Some(why) if parts.is_some() => outcome.rejected(&shape.name, &key, parts, why),
            Some(why) => log::warn!("kept {key} of {}: {why}", shape.name),
            None => {
                if ctx.plan.find_faults {
                    ctx.tracker
                        .borrow_mut()
                        .before(ctx.conn, ctx.links, shape, &values, spot)?;
                }
                told.push(parts);
                rows.push(Doomed { key, values });
            }
        }
    }
    let whole = Spot::Sweep {
        table: shape.name.clone(),
    };
    let one_at_a_time = ctx.plan.one_at_a_time.contains(&whole);
    let fates =
        let_go::let_go(&ctx.world(), shape, &rows, one_at_a_time).map_err(|stop| match stop {
            let_go::Stop::Storage(e) => Stop::Storage(e),
            let_go::Stop::TransactionLost(None, why) => Stop::TransactionLost(whole.clone(), why),
            let_go::Stop::TransactionLost(Some(i), why) => Stop::TransactionLost(
                Spot::Swept {
                    table: shape.name.clone(),
                    key: rows[i].key.clone(),
                },
                why,
            ),
        })?;
    for ((parts, row), fate) in told.into_iter().zip(&rows).zip(fates) {
        match (parts, fate) {
            (Some(parts), fate) => settle(ctx, outcome, shape, row, Some(parts), fate)?,
            (None, let_go::Fate::Kept(why)) => {
                log::warn!("kept {} of {}: {why}", row.key, shape.name)
            }
            (None, _) => {}
        }
    }
    Ok(())
}

fn parse(shape: &Shape, key: &str) -> Option<Vec<magic_sync_proto::key::KeyPart>> {
    magic_sync_proto::key::parse(key, &shape.key_types)
        .ok()
        .filter(|parts| magic_sync_proto::key::join(parts) == key)
}

/// The keys the snapshot named of a table, as its parts left them, held
/// as compactly as their table's key allows: integers, UUIDs (16 bytes
/// each), or else their text.
enum Named {
    Integers(Vec<i64>),
    Uuids(Vec<u128>),
    Texts(HashSet<Box<[u8]>>),
}

/// How a table's keys are held.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Form {
    Integer,
    Uuid,
    Text,
}

/// One key of a list in a form: `None` when it is not one.
fn typed(form: Form, key: &[u8]) -> Option<Key> {
    match form {
        Form::Integer => decimal(key).map(Key::Integer),
        Form::Uuid => canonical_uuid(key).map(Key::Uuid),
        Form::Text => Some(Key::Text(key.into())),
    }
}

#[derive(Clone, PartialEq, Eq, Hash)]
enum Key {
    Integer(i64),
    Uuid(u128),
    Text(Box<[u8]>),
}

/// A UUID in the key text form (lowercase, hyphenated): the text a stored
/// UUID reads as.
fn canonical_uuid(text: &[u8]) -> Option<u128> {
    let uuid = Uuid::try_parse_ascii(text).ok()?;
    let mut again = [0u8; uuid::fmt::Hyphenated::LENGTH];
    (uuid.hyphenated().encode_lower(&mut again).as_bytes() == text).then(|| uuid.as_u128())
}

impl Named {
    /// Reads what the parts named, each part's let go of first, then its
    /// named: the last word on a key stands. The keys are held in `form`
    /// while every one is of it, as text otherwise.
    fn read(conn: &Connection, table: &str, form: Form) -> rusqlite::Result<Named> {
        match Named::read_as(conn, table, form)? {
            Some(named) => Ok(named),
            None => Ok(Named::read_as(conn, table, Form::Text)?.expect("any key is text")),
        }
    }

    fn read_as(conn: &Connection, table: &str, form: Form) -> rusqlite::Result<Option<Named>> {
        // Nearly always nothing was let go of: then the keys need no set
        // while they are read.
        let let_go: bool = conn
            .prepare_cached(
                "SELECT EXISTS (SELECT 1 FROM sync_snapshot_keys
                 WHERE table_name = ?1 AND let_go <> '')",
            )?
            .query_row([table], |row| row.get(0))?;
        let mut list: Vec<Key> = Vec::new();
        let mut set: HashSet<Key> = HashSet::new();
        let mut statement = conn.prepare_cached(
            "SELECT let_go, named FROM sync_snapshot_keys WHERE table_name = ?1 ORDER BY id",
        )?;
        let mut rows = statement.query([table])?;
        while let Some(row) = rows.next()? {
            let gone = row.get_ref(0)?.as_str()?;
            let named = row.get_ref(1)?.as_str()?;
            let mut failed = false;
            for_each_key(gone, form, |key| match key {
                Some(key) => {
                    set.remove(&key);
                }
                None => failed = true,
            });
            for_each_key(named, form, |key| match key {
                Some(key) if let_go => {
                    set.insert(key);
                }
                Some(key) => list.push(key),
                None => failed = true,
            });
            if failed {
                return Ok(None);
            }
        }
        list.extend(set);
        Ok(Some(match form {
            Form::Integer => Named::Integers(sorted(list, |k| match k {
                Key::Integer(i) => i,
                _ => unreachable!("integers only"),
            })),
            Form::Uuid => Named::Uuids(sorted(list, |k| match k {
                Key::Uuid(u) => u,
                _ => unreachable!("UUIDs only"),
            })),
            Form::Text => Named::Texts(
                list.into_iter()
                    .map(|k| match k {
                        Key::Text(t) => t,
                        _ => unreachable!("text only"),
                    })
                    .collect(),
            ),
        }))
    }

    /// Whether a stored row whose key reads as `text` was named.
    fn names(&self, text: &[u8]) -> bool {
        match self {
            Named::Integers(keys) => decimal(text).is_some_and(|i| keys.binary_search(&i).is_ok()),
            Named::Uuids(keys) => {
                canonical_uuid(text).is_some_and(|u| keys.binary_search(&u).is_ok())
            }
            Named::Texts(keys) => keys.contains(text),
        }
    }
}

fn sorted<T: Ord>(keys: Vec<Key>, each: impl Fn(Key) -> T) -> Vec<T> {
    let mut keys: Vec<T> = keys.into_iter().map(each).collect();
    keys.sort_unstable();
    keys.dedup();
    keys
}

/// Each key of a list in a form (`None` for one that is not), runs of
/// integers written out.
fn for_each_key(list: &str, form: Form, mut each: impl FnMut(Option<Key>)) {
    for line in lines(list) {
        match range(line) {
            Some((first, last)) => {
                for i in first..=last {
                    each(match form {
                        Form::Integer => Some(Key::Integer(i)),
                        Form::Text => Some(Key::Text(i.to_string().into_bytes().into())),
                        Form::Uuid => None,
                    });
                }
            }
            None => each(typed(form, line)),
        }
    }
}

/// The lines of a list (no key is empty: a key has at least one part).
fn lines(list: &str) -> impl Iterator<Item = &[u8]> {
    list.as_bytes()
        .split(|&b| b == b'\n')
        .filter(|key| !key.is_empty())
}

/// A line `first..last`: a run of integers.
fn range(line: &[u8]) -> Option<(i64, i64)> {
    let at = line.windows(2).position(|w| w == b"..")?;
    Some((decimal(&line[..at])?, decimal(&line[at + 2..])?))
}

/// Whether `keys` (sorted) holds `key`, looked for first just after where
/// the last one was found.
fn find<T: Ord>(keys: &[T], key: &T, next: &mut usize) -> bool {
    let at = match keys.get(*next) {
        Some(k) if k == key => Ok(*next),
        _ => keys.binary_search(key),
    };
    match at {
        Ok(at) => {
            *next = at + 1;
            true
        }
        Err(_) => false,
    }
}

/// An integer in the key text form.
fn decimal(text: &[u8]) -> Option<i64> {
    crate::apply::upsert::canonical_integer(text)
}

fn write_decimal(out: &mut Vec<u8>, n: i64) {
    use std::io::Write;
    write!(out, "{n}").expect("writing to memory");
}

/// One key column's part of the stored row's key text, as `key_sql` writes
/// it, when it is one the engine can tell without SQLite: `false` for a
/// real, or a blob other than a UUID's 16 bytes in a column that holds
/// UUIDs (SQLite's own text of those is asked for).
fn part_text(kind: ColumnKind, value: ValueRef<'_>, out: &mut Vec<u8>) -> bool {
    match value {
        ValueRef::Null => {}
        ValueRef::Integer(i) => write_decimal(out, i),
        ValueRef::Text(t) => out.extend_from_slice(t),
        ValueRef::Blob(b) if kind != ColumnKind::Integer && b.len() == 16 => {
            let uuid = Uuid::from_slice(b).expect("16 bytes");
            let mut text = [0u8; uuid::fmt::Hyphenated::LENGTH];
            out.extend_from_slice(uuid.hyphenated().encode_lower(&mut text).as_bytes());
        }
        ValueRef::Blob(_) | ValueRef::Real(_) => return false,
    }
    true
}

/// One key column's part of a stored row's key text, as SQLite writes it
/// (`key_sql` over the value itself).
fn part_text_by_sqlite(
    conn: &Connection,
    kind: ColumnKind,
    value: ValueRef<'_>,
    out: &mut Vec<u8>,
) -> rusqlite::Result<()> {
    let sql = format!("SELECT {}", key_sql::part(kind, "?1"));
    conn.prepare_cached(&sql)?
        .query_row([ToSqlOutput::Borrowed(value)], |row| {
            match row.get_ref(0)? {
                ValueRef::Null => {}
                other => out.extend_from_slice(other.as_bytes()?),
            }
            Ok(())
        })
}

/// The rows the snapshot did not name: each one's key text and the values
/// its key columns hold.
///
/// One pass over the table reads each row's key columns; the key text is
/// made from them as `key_sql` writes it (SQLite writes the text of the
/// rare values only it knows how to), and looked up among the keys named.
fn unnamed(conn: &Connection, shape: &Shape) -> rusqlite::Result<Vec<(String, Vec<SqlValue>)>> {
    let kinds: Vec<ColumnKind> = shape.key_columns().map(|c| c.kind).collect();
    let n = kinds.len();
    let form = match kinds.as_slice() {
        [ColumnKind::Integer] => Form::Integer,
        [_] => Form::Uuid,
        _ => Form::Text,
    };
    let named = Named::read(conn, &shape.name, form)?;
    let sql = format!(
        "SELECT {} FROM {} t",
        shape
            .key_columns()
            .map(|c| format!("t.{}", quote(&c.name)))
            .collect::<Vec<_>>()
            .join(", "),
        quote(&shape.name)
    );
    let mut statement = conn.prepare(&sql)?;
    let mut rows = statement.query([])?;
    let mut found = Vec::new();
    let mut text: Vec<u8> = Vec::with_capacity(64);
    // Where the key after the last one found is: a table is mostly read
    // in its keys' order.
    let mut next = 0;
    while let Some(row) = rows.next()? {
        // The quick ways: an integer, a UUID's 16 bytes, as they are held.
        let quick = match (&named, row.get_ref(0)?) {
            (Named::Integers(keys), ValueRef::Integer(i)) => Some(find(keys, &i, &mut next)),
            (Named::Uuids(keys), ValueRef::Blob(b)) if b.len() == 16 => {
                let u = Uuid::from_slice(b).expect("16 bytes").as_u128();
                Some(find(keys, &u, &mut next))
            }
            _ => None,
        };
        if quick == Some(true) {
            continue;
        }
        text.clear();
        for (i, &kind) in kinds.iter().enumerate() {
            if i > 0 {
                text.push(b'|');
            }
            let value = row.get_ref(i)?;
            if !part_text(kind, value, &mut text) {
                part_text_by_sqlite(conn, kind, value, &mut text)?;
            }
        }
        if quick.is_none() && named.names(&text) {
            continue;
        }
        let values = (0..n)
            .map(|i| row.get::<_, SqlValue>(i))
            .collect::<rusqlite::Result<_>>()?;
        let key = String::from_utf8(text.clone()).map_err(|e| {
            rusqlite::Error::FromSqlConversionFailure(
                n,
                rusqlite::types::Type::Text,
                Box::new(e.utf8_error()),
            )
        })?;
        found.push((key, values));
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::declare::{Table, Tables};

    /// The rows the snapshot did not name, as the engine once found them:
    /// all in SQL, each stored row's key text against the keys named.
    fn unnamed_in_sql(
        conn: &Connection,
        shape: &Shape,
        named: &[&str],
    ) -> Vec<(String, Vec<SqlValue>)> {
        conn.execute_batch("DROP TABLE IF EXISTS temp.named; CREATE TEMP TABLE named (key TEXT)")
            .unwrap();
        for key in named {
            conn.execute("INSERT INTO temp.named VALUES (?1)", [key])
                .unwrap();
        }
        let key = key_sql::key(shape, "t");
        let sql = format!(
            "SELECT {key}, {} FROM {} t WHERE {key} NOT IN (SELECT key FROM temp.named)",
            shape
                .key_columns()
                .map(|c| format!("t.{}", quote(&c.name)))
                .collect::<Vec<_>>()
                .join(", "),
            quote(&shape.name)
        );
        let mut statement = conn.prepare(&sql).unwrap();
        let rows = statement
            .query_map([], |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    (0..shape.key.len())
                        .map(|i| row.get::<_, SqlValue>(i + 1))
                        .collect::<rusqlite::Result<Vec<_>>>()?,
                ))
            })
            .unwrap()
            .collect::<rusqlite::Result<Vec<_>>>()
            .unwrap();
        rows
    }

    const U: &str = "0196a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b";
    const V: &str = "0196a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5c";
    const W: &str = "0196a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5d";

    #[test]
    fn the_sweep_finds_the_rows_the_sql_comparison_found_whatever_they_hold() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(&format!(
            "CREATE TABLE sync_snapshot_keys (id INTEGER PRIMARY KEY, table_name TEXT NOT NULL,
                 let_go TEXT NOT NULL DEFAULT '', named TEXT NOT NULL DEFAULT '');
             CREATE TABLE a (id INTEGER PRIMARY KEY, v);
             CREATE TABLE b (id INT PRIMARY KEY, v) WITHOUT ROWID;
             CREATE TABLE c (id INT PRIMARY KEY, v);
             CREATE TABLE d (id TEXT PRIMARY KEY, v) WITHOUT ROWID;
             CREATE TABLE e (id BLOB PRIMARY KEY, v);
             CREATE TABLE f (n INTEGER NOT NULL, u BLOB NOT NULL, v, PRIMARY KEY (n, u));
             INSERT INTO a (id) VALUES (1), (2), (3), (-7), (9223372036854775807);
             INSERT INTO b (id) VALUES (1), (1.5), (x'01'), ('abc'), ('007'), (-0.0), (1e300);
             INSERT INTO c (id) VALUES (NULL), (NULL), (4), ('x'), (2.5);
             INSERT INTO d (id) VALUES ('{U}'), (upper('{V}')), (x'0196a1b2c3d47e5f8a9b0c1d2e3f4a5c'),
                 (x'0102'), (12), (0.5), ('');
             INSERT INTO e (id) VALUES (x'0196a1b2c3d47e5f8a9b0c1d2e3f4a5b'), ('{V}'), (x'00'),
                 (3), (NULL);
             INSERT INTO f (n, u) VALUES (1, x'0196a1b2c3d47e5f8a9b0c1d2e3f4a5b'), (2, '{U}'),
                 (3, x'01'), (4.5, 'z');"
        ))
        .unwrap();
        let tables = Tables::new(
            ["a", "b", "c", "d", "e", "f"]
                .into_iter()
                .map(Table::catalog)
                .collect(),
        );
        let shapes = crate::model::shape::read_all(&conn, &tables).unwrap();
        let named: &[&str] = &[
            "1",
            "2",
            "-7",
            "9223372036854775807",
            "7",
            "4",
            "12",
            U,
            V,
            &format!("1|{U}"),
            &format!("2|{U}"),
            "x",
        ];
        // Keys of one form only, each table's keys held in its form.
        let uuids: &[&str] = &[U, V];
        let integers: &[&str] = &["1", "2", "-7", "9223372036854775807", "7", "4", "12"];
        for named in [named, uuids, integers] {
            for shape in &shapes {
                conn.execute("DELETE FROM sync_snapshot_keys", []).unwrap();
                // Named in two parts, the second letting go of a key named
                // before and naming it again, and letting go of "3" (or a
                // UUID not named) for good.
                let gone = if named == uuids { W } else { "3" };
                let mut parts = vec![PartKeys::new(&shape.name), PartKeys::new(&shape.name)];
                for key in named {
                    parts[0].named(key);
                }
                parts[0].named(gone);
                parts[1].let_go(gone);
                parts[1].let_go(named[0]);
                parts[1].named(named[0]);
                keep(&conn, &mut parts).unwrap();
                let mut found = unnamed(&conn, shape).unwrap();
                let mut expected = unnamed_in_sql(&conn, shape, named);
                let order = |rows: &mut Vec<(String, Vec<SqlValue>)>| {
                    rows.sort_by(|x, y| format!("{x:?}").cmp(&format!("{y:?}")))
                };
                order(&mut found);
                order(&mut expected);
                assert_eq!(found, expected, "table {} named {named:?}", shape.name);
            }
        }
        assert_eq!(
            unnamed_in_sql(&conn, &shapes[0], named).len(),
            1,
            "3 was let go of"
        );
    }
}

#[cfg(test)]
mod key_lists {
    use super::*;

    fn list(keys: &[&str]) -> String {
        let mut list = KeyList::default();
        for key in keys {
            list.push(key);
        }
        list.finish().to_owned()
    }

    /// The keys named, read back in a form, as text.
    fn read(parts: &[(String, String)], form: Form) -> Vec<String> {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE TABLE sync_snapshot_keys (id INTEGER PRIMARY KEY, table_name TEXT NOT NULL,
                 let_go TEXT NOT NULL DEFAULT '', named TEXT NOT NULL DEFAULT '')",
        )
        .unwrap();
        for (let_go, named) in parts {
            conn.execute(
                "INSERT INTO sync_snapshot_keys (table_name, let_go, named) VALUES ('t', ?1, ?2)",
                [let_go, named],
            )
            .unwrap();
        }
        let mut keys: Vec<String> = match Named::read(&conn, "t", form).unwrap() {
            Named::Integers(keys) => keys.iter().map(|i| format!("i{i}")).collect(),
            Named::Uuids(keys) => keys
                .iter()
                .map(|u| format!("u{}", Uuid::from_u128(*u)))
                .collect(),
            Named::Texts(keys) => keys
                .iter()
                .map(|k| format!("t{}", String::from_utf8(k.to_vec()).unwrap()))
                .collect(),
        };
        keys.sort();
        keys
    }

    const U: &str = "0196a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b";

    #[test]
    fn a_run_of_integers_is_one_line_and_reads_back_whole() {
        let named = list(&[
            "1", "2", "3", "4", "5", "7", "abc", "8", "9", "-2", "-1", "0",
        ]);
        assert_eq!(named, "1..5\n7\nabc\n8..9\n-2..0");
        let parts = [(String::new(), named)];
        // abc is no integer: the keys are held as text.
        assert_eq!(
            read(&parts, Form::Integer),
            ["t-1", "t-2", "t0", "t1", "t2", "t3", "t4", "t5", "t7", "t8", "t9", "tabc"]
        );
        let parts = [(String::new(), list(&["3", "1", "2"]))];
        assert_eq!(read(&parts, Form::Integer), ["i1", "i2", "i3"]);
    }

    #[test]
    fn a_key_let_go_of_by_a_later_part_is_not_named_unless_named_again() {
        let max = i64::MAX.to_string();
        let parts = [
            (String::new(), list(&["1", "2", "3", "4", "5"])),
            (list(&["2", "3", "4"]), list(&["3"])),
            (list(&[&max]), list(&[&max, "6"])),
        ];
        let expected = ["i1", "i3", "i5", "i6", &format!("i{max}")];
        assert_eq!(read(&parts, Form::Integer), expected);
        assert_eq!(read(&parts, Form::Text).len(), 5);
    }

    #[test]
    fn uuids_are_held_as_16_bytes_unless_one_is_not_in_the_key_text_form() {
        let parts = [(String::new(), list(&[U])), (list(&[U]), list(&[U]))];
        assert_eq!(read(&parts, Form::Uuid), [format!("u{U}")]);
        let upper = U.to_uppercase();
        let parts = [(String::new(), list(&[U, &upper]))];
        assert_eq!(
            read(&parts, Form::Uuid),
            [format!("t{upper}"), format!("t{U}")]
        );
    }
}

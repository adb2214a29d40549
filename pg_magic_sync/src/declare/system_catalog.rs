//! Reading PostgreSQL's own catalog: relations, their columns, primary
//! keys, foreign keys, indexes and triggers, as declarations and the relay's
//! check need them.

use pgrx::prelude::*;

use crate::catalog::table_sql::qualified;

/// A relation found in the catalog.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Relation {
    pub oid: pg_sys::Oid,
    /// Schema-qualified and quoted, for SQL.
    pub qualified: String,
    /// Schema-qualified, for messages.
    pub shown: String,
    pub schema: String,
    pub name: String,
    /// pg_class.relkind: 'r' a table, 'p' a partitioned table, 'v' a view...
    pub kind: String,
}

impl Relation {
    pub fn is_table(&self) -> bool {
        self.kind == "r" || self.kind == "p"
    }
}

const RELATION: &str = "SELECT c.oid, n.nspname::text, c.relname::text, c.relkind::text \
     FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace";

fn relation_of(row: pgrx::spi::SpiHeapTupleData) -> Relation {
    let schema: String = row.get(2).ok().flatten().unwrap_or_default();
    let name: String = row.get(3).ok().flatten().unwrap_or_default();
    Relation {
        oid: row.get(1).ok().flatten().expect("an oid"),
        qualified: qualified(&schema, &name),
        shown: format!("{schema}.{name}"),
        schema,
        name,
        kind: row.get(4).ok().flatten().unwrap_or_default(),
    }
}

/// Looks a relation up by the name the user gave, as `to_regclass` reads it
/// (an invalid name is no relation).
pub fn find_relation(name: &str) -> Option<Relation> {
    Spi::connect(|client| {
        let mut rows = client
            .select(
                &format!("{RELATION} WHERE c.oid = sync_internal.regclass_or_null($1)"),
                Some(1),
                &[name.into()],
            )
            .expect("reads pg_class");
        rows.next().map(relation_of)
    })
}

/// Looks a relation up by name, and when the name is not qualified and
/// is not found on the search path, in `schema`.
pub fn find_relation_near(name: &str, schema: &str) -> Option<Relation> {
    find_relation(name).or_else(|| {
        if name.contains('.') {
            None
        } else {
            find_relation(&format!(
                "{}.{name}",
                crate::catalog::table_sql::quote_ident(schema)
            ))
        }
    })
}

/// A relation schema-qualified and quoted, as messages show it (unquoted).
pub fn shown(qualified: &str) -> String {
    find_relation(qualified)
        .map(|r| r.shown)
        .unwrap_or_else(|| qualified.to_owned())
}

pub fn relation_by_oid(oid: pg_sys::Oid) -> Option<Relation> {
    Spi::connect(|client| {
        let mut rows = client
            .select(
                &format!("{RELATION} WHERE c.oid = $1"),
                Some(1),
                &[oid.into()],
            )
            .expect("reads pg_class");
        rows.next().map(relation_of)
    })
}

/// One column of a relation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Column {
    pub name: String,
    /// As `format_type` writes it.
    pub sql_type: String,
    pub not_null: bool,
    pub has_default: bool,
}

/// A relation's columns, in order.
pub fn columns_of(relation: pg_sys::Oid) -> Vec<Column> {
    Spi::connect(|client| {
        client
            .select(
                "SELECT attname::text, format_type(atttypid, atttypmod), attnotnull, \
                        atthasdef OR attidentity <> '' OR attgenerated <> '' \
                 FROM pg_attribute \
                 WHERE attrelid = $1 AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
                None,
                &[relation.into()],
            )
            .expect("reads pg_attribute")
            .map(|row| Column {
                name: row.get(1).ok().flatten().unwrap_or_default(),
                sql_type: row.get(2).ok().flatten().unwrap_or_default(),
                not_null: row.get(3).ok().flatten().unwrap_or_default(),
                has_default: row.get(4).ok().flatten().unwrap_or_default(),
            })
            .collect()
    })
}

/// A table's primary key columns, in key order.
pub fn primary_key_of(relation: pg_sys::Oid) -> Vec<String> {
    Spi::connect(|client| {
        client
            .select(
                "SELECT a.attname::text FROM pg_index i \
                 CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord) \
                 JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum \
                 WHERE i.indrelid = $1 AND i.indisprimary ORDER BY k.ord",
                None,
                &[relation.into()],
            )
            .expect("reads pg_index")
            .map(|row| row.get(1).ok().flatten().unwrap_or_default())
            .collect()
    })
}

/// A foreign key of a table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForeignKey {
    pub name: String,
    /// The table's columns, in the constraint's order.
    pub columns: Vec<String>,
    pub parent: pg_sys::Oid,
    /// The parent's columns they point at, in the same order.
    pub parent_columns: Vec<String>,
}

/// A table's foreign keys, by name.
pub fn foreign_keys_of(relation: pg_sys::Oid) -> Vec<ForeignKey> {
    Spi::connect(|client| {
        client
            .select(
                "SELECT c.conname::text, c.confrelid, \
                        ARRAY(SELECT a.attname::text FROM unnest(c.conkey) WITH ORDINALITY k(n, o) \
                              JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.n ORDER BY k.o), \
                        ARRAY(SELECT a.attname::text FROM unnest(c.confkey) WITH ORDINALITY k(n, o) \
                              JOIN pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.n ORDER BY k.o) \
                 FROM pg_constraint c \
                 WHERE c.conrelid = $1 AND c.contype = 'f' AND c.conparentid = 0 \
                 ORDER BY c.conname",
                None,
                &[relation.into()],
            )
            .expect("reads pg_constraint")
            .map(|row| ForeignKey {
                name: row.get(1).ok().flatten().unwrap_or_default(),
                parent: row.get(2).ok().flatten().expect("a parent"),
                columns: row.get(3).ok().flatten().unwrap_or_default(),
                parent_columns: row.get(4).ok().flatten().unwrap_or_default(),
            })
            .collect()
    })
}

/// An index of a table: its key columns in order (None for an expression),
/// and whether it can serve an equality lookup of any of its leading
/// columns (valid, not partial, a btree or hash).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Index {
    pub columns: Vec<Option<String>>,
    pub serves_lookups: bool,
}

pub fn indexes_of(relation: pg_sys::Oid) -> Vec<Index> {
    Spi::connect(|client| {
        client
            .select(
                "SELECT ARRAY(SELECT a.attname::text FROM unnest(i.indkey) WITH ORDINALITY k(n, o) \
                              LEFT JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.n \
                              WHERE k.o <= i.indnkeyatts ORDER BY k.o), \
                        i.indisvalid AND i.indpred IS NULL AND am.amname IN ('btree', 'hash') \
                 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid \
                 JOIN pg_am am ON am.oid = c.relam \
                 WHERE i.indrelid = $1",
                None,
                &[relation.into()],
            )
            .expect("reads pg_index")
            .map(|row| Index {
                columns: row
                    .get::<Vec<Option<String>>>(1)
                    .ok()
                    .flatten()
                    .unwrap_or_default(),
                serves_lookups: row.get(2).ok().flatten().unwrap_or_default(),
            })
            .collect()
    })
}

/// A trigger as the catalog has it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trigger {
    pub relation: pg_sys::Oid,
    pub name: String,
    /// The function, as `regproc` writes it with the search path empty.
    pub function: String,
    pub tgtype: i16,
    /// 'O' fires in origin and local sessions, 'A' always, 'R' only in
    /// replica sessions, 'D' never.
    pub enabled: String,
    pub arguments: Vec<String>,
    /// Anything more than a plain trigger has: a WHEN, a column list,
    /// transition tables, a constraint trigger.
    pub plain: bool,
    /// As PostgreSQL prints it.
    pub definition: String,
}

/// The triggers of the engine's functions, on any table (a clone on a
/// partition of a partitioned table is its parent's, and left out).
pub fn engine_triggers() -> Vec<Trigger> {
    Spi::connect(|client| {
        client
            .select(
                "SELECT t.tgrelid, t.tgname::text, \
                        n.nspname::text || '.' || p.proname::text, t.tgtype, t.tgenabled::text, \
                        t.tgargs, t.tgnargs::int, \
                        t.tgqual IS NULL AND t.tgattr::text = '' AND t.tgoldtable IS NULL \
                          AND t.tgnewtable IS NULL AND t.tgconstraint = 0, \
                        pg_get_triggerdef(t.oid) \
                 FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid \
                 JOIN pg_namespace n ON n.oid = p.pronamespace \
                 WHERE n.nspname = 'sync' AND p.prorettype = 'trigger'::regtype \
                   AND t.tgparentid = 0 AND NOT t.tgisinternal \
                 ORDER BY t.tgrelid, t.tgname",
                None,
                &[],
            )
            .expect("reads pg_trigger")
            .map(|row| {
                let bytes: Vec<u8> = row.get(6).ok().flatten().unwrap_or_default();
                let count: i32 = row.get(7).ok().flatten().unwrap_or_default();
                Trigger {
                    relation: row.get(1).ok().flatten().expect("a relation"),
                    name: row.get(2).ok().flatten().unwrap_or_default(),
                    function: row.get(3).ok().flatten().unwrap_or_default(),
                    tgtype: row.get(4).ok().flatten().unwrap_or_default(),
                    enabled: row.get(5).ok().flatten().unwrap_or_default(),
                    arguments: split_arguments(&bytes, count as usize),
                    plain: row.get(8).ok().flatten().unwrap_or_default(),
                    definition: row.get(9).ok().flatten().unwrap_or_default(),
                }
            })
            .collect()
    })
}

/// pg_trigger.tgargs: each argument followed by a zero byte.
fn split_arguments(bytes: &[u8], count: usize) -> Vec<String> {
    bytes
        .split(|b| *b == 0)
        .take(count)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trigger_arguments_are_split_at_each_zero_byte() {
        assert_eq!(
            split_arguments(b"products\0\x001\0id\0", 4),
            ["products", "", "1", "id"]
        );
        assert!(split_arguments(b"", 0).is_empty());
    }
}

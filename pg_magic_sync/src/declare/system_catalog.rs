//! Reading PostgreSQL's own catalog: relations, their columns, primary
//! keys, foreign keys, indexes and triggers, as declarations and the relay's
//! check need them.
//!
//! Each query is a file of sql/catalog/, which says what it answers. What
//! PostgreSQL answers is never NULL where it is read: a NULL is a fault,
//! raised as one (`spi::column`).

use pgrx::prelude::*;
use pgrx::spi::SpiHeapTupleData;

use crate::catalog::table_sql::{qualified, quote_ident};
use crate::spi;

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

const RELATION_NAMED: &str = include_str!("../../../sql/catalog/relation_named.sql");
const RELATION_BY_OID: &str = include_str!("../../../sql/catalog/relation_by_oid.sql");
const COLUMNS_OF: &str = include_str!("../../../sql/catalog/columns_of.sql");
const PRIMARY_KEY_OF: &str = include_str!("../../../sql/catalog/primary_key_of.sql");
const FOREIGN_KEYS_OF: &str = include_str!("../../../sql/catalog/foreign_keys_of.sql");
const INDEXES_OF: &str = include_str!("../../../sql/catalog/indexes_of.sql");
const ENGINE_TRIGGERS: &str = include_str!("../../../sql/catalog/engine_triggers.sql");

/// A relation as relation_named.sql and relation_by_oid.sql answer it.
fn relation_of(row: &SpiHeapTupleData) -> Relation {
    let schema: String = spi::column(row, 2, "pg_namespace.nspname");
    let name: String = spi::column(row, 3, "pg_class.relname");
    Relation {
        oid: spi::column(row, 1, "pg_class.oid"),
        qualified: qualified(&schema, &name),
        shown: format!("{schema}.{name}"),
        schema,
        name,
        kind: spi::column(row, 4, "pg_class.relkind"),
    }
}

/// Looks a relation up by the name the user gave, as `to_regclass` reads it
/// (an invalid name is no relation).
pub fn find_relation(name: &str) -> Option<Relation> {
    spi::select(RELATION_NAMED, Some(1), &[name.into()], |mut rows| {
        rows.next().map(|row| relation_of(&row))
    })
}

/// Looks a relation up by name, and when the name is not qualified and
/// is not found on the search path, in `schema`.
pub fn find_relation_near(name: &str, schema: &str) -> Option<Relation> {
    find_relation(name).or_else(|| {
        if name.contains('.') {
            None
        } else {
            find_relation(&format!("{}.{name}", quote_ident(schema)))
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
    spi::select(RELATION_BY_OID, Some(1), &[oid.into()], |mut rows| {
        rows.next().map(|row| relation_of(&row))
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
    spi::select(COLUMNS_OF, None, &[relation.into()], |rows| {
        rows.map(|row| Column {
            name: spi::column(&row, 1, "pg_attribute.attname"),
            sql_type: spi::column(&row, 2, "a column's format_type"),
            not_null: spi::column(&row, 3, "pg_attribute.attnotnull"),
            has_default: spi::column(&row, 4, "whether a column has a default"),
        })
        .collect()
    })
}

/// A table's primary key columns, in key order.
pub fn primary_key_of(relation: pg_sys::Oid) -> Vec<String> {
    spi::select(PRIMARY_KEY_OF, None, &[relation.into()], |rows| {
        rows.map(|row| spi::column(&row, 1, "a primary key's pg_attribute.attname"))
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
    spi::select(FOREIGN_KEYS_OF, None, &[relation.into()], |rows| {
        rows.map(|row| ForeignKey {
            name: spi::column(&row, 1, "pg_constraint.conname"),
            parent: spi::column(&row, 2, "pg_constraint.confrelid"),
            columns: spi::column(&row, 3, "a foreign key's columns"),
            parent_columns: spi::column(&row, 4, "a foreign key's parent columns"),
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
    spi::select(INDEXES_OF, None, &[relation.into()], |rows| {
        rows.map(|row| Index {
            columns: spi::column(&row, 1, "an index's columns"),
            serves_lookups: spi::column(&row, 2, "whether an index serves lookups"),
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
    spi::select(ENGINE_TRIGGERS, None, &[], |rows| {
        rows.map(|row| {
            let bytes: Vec<u8> = spi::column(&row, 6, "pg_trigger.tgargs");
            let count: i32 = spi::column(&row, 7, "pg_trigger.tgnargs");
            Trigger {
                relation: spi::column(&row, 1, "pg_trigger.tgrelid"),
                name: spi::column(&row, 2, "pg_trigger.tgname"),
                function: spi::column(&row, 3, "a trigger's function"),
                tgtype: spi::column(&row, 4, "pg_trigger.tgtype"),
                enabled: spi::column(&row, 5, "pg_trigger.tgenabled"),
                arguments: split_arguments(&bytes, count as usize),
                plain: spi::column(&row, 8, "whether a trigger is plain"),
                definition: spi::column(&row, 9, "pg_get_triggerdef"),
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

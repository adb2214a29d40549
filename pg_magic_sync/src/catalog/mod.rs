//! The declarations: where the replicas are, and every declared table with
//! its rule, its references and its columns.
//!
//! - model.rs: the types (`Replicas`, `Declared`, `Mirror`, `Rule`, ...);
//! - store.rs: how they are kept in the engine's tables
//!   (sql/declarations.sql), read and written through one mapping;
//! - digest.rs: the digest of the declarations;
//! - table_sql.rs: the SQL a declared table needs, written from it;
//! - wishes.rs: the engine's table of wishes, which joins the declared
//!   tables whenever a setting is declared.
//!
//! `declared_tables()` is what the relay reads, parents first.

pub mod digest;
#[cfg(test)]
pub mod fixtures;
pub mod model;
pub mod reach;
pub mod store;
pub mod table_sql;
pub mod wishes;

pub use model::{
    followed, Apply, Assignments, Declared, Members, Mirror, Reference, Replicas, Rule,
};
pub use store::{declared_tables, replicas};

use store::TableRows;

/// The declarations as they are stored: what a relay pass reads once, as
/// it starts, for every step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Declarations {
    pub replicas: Option<Replicas>,
    pub tables: Vec<TableRows>,
}

impl Declarations {
    pub fn read() -> Declarations {
        Declarations {
            replicas: replicas(),
            tables: store::table_rows(),
        }
    }

    /// Every declared table, parents first.
    pub fn declared(&self) -> Vec<Declared> {
        self.tables
            .iter()
            .cloned()
            .map(|rows| rows.into_declared().unwrap_or_else(|e| e.raise()))
            .collect()
    }

    /// The digest of these declarations.
    pub fn digest(&self) -> String {
        digest::digest(self.replicas.as_ref(), &self.declared())
    }
}

/// The digest of the declarations, which the relay compares with the one
/// it last ran with: a different one provisions every live replica again.
pub fn declarations_digest() -> String {
    Declarations::read().digest()
}

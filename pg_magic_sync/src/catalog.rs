//! The declarations, as the engine reads them back from `sync.tables`.

use pgrx::prelude::*;

use magic_sync_proto::key::KeyType;

/// Which way a table's rows travel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mirror {
    /// Written on the server, held by replicas.
    Catalog,
}

impl Mirror {
    pub fn name(self) -> &'static str {
        match self {
            Mirror::Catalog => "catalog",
        }
    }
}

/// One declared table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Declared {
    /// The name replicas know it by.
    pub name: String,
    /// Schema-qualified and quoted: safe to write into SQL as it is.
    pub relation: String,
    pub mirror: Mirror,
    pub key_columns: Vec<String>,
    pub key_types: Vec<KeyType>,
    /// The columns that travel, with their types as `format_type` writes them.
    pub columns: Vec<String>,
    pub column_types: Vec<String>,
    pub position: i32,
}

pub fn key_type_name(ty: KeyType) -> &'static str {
    ty.name()
}

pub fn key_type_from_name(name: &str) -> KeyType {
    match name {
        "integer" => KeyType::Integer,
        _ => KeyType::Uuid,
    }
}

/// Every declared table, parents first.
pub fn declared_tables() -> Vec<Declared> {
    Spi::connect(|client| {
        let rows = client
            .select(
                "SELECT name, relation, key_columns, key_types, columns, column_types, position \
                 FROM sync.tables ORDER BY position, name",
                None,
                &[],
            )
            .expect("reads sync.tables");
        rows.map(|row| {
            let text = |i: usize| row.get::<String>(i).ok().flatten().unwrap_or_default();
            let list = |i: usize| row.get::<Vec<String>>(i).ok().flatten().unwrap_or_default();
            Declared {
                name: text(1),
                relation: text(2),
                mirror: Mirror::Catalog,
                key_columns: list(3),
                key_types: list(4).iter().map(|t| key_type_from_name(t)).collect(),
                columns: list(5),
                column_types: list(6),
                position: row.get::<i32>(7).ok().flatten().unwrap_or_default(),
            }
        })
        .collect()
    })
}

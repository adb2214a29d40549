//! The declarations the unit tests of the SQL the engine writes share: a
//! table of products keyed by one uuid, its lines keyed by two columns,
//! and a setting (footers).

use magic_sync_proto::key::KeyType;

use crate::catalog::table_sql::qualified;
use crate::catalog::{Apply, Declared, Mirror};

/// Products: a uuid key, a 64-bit price and an instant.
pub fn products() -> Declared {
    Declared {
        name: "products".into(),
        relation: qualified("shop", "products"),
        mirror: Mirror::Catalog,
        key_columns: vec!["id".into()],
        key_types: vec![KeyType::Uuid],
        columns: vec!["id".into(), "price_cents".into(), "updated_at".into()],
        column_types: vec![
            "uuid".into(),
            "bigint".into(),
            "timestamp with time zone".into(),
        ],
        ..Declared::default()
    }
}

/// Order lines: a key of two columns, a uuid and an integer.
pub fn lines() -> Declared {
    Declared {
        key_columns: vec!["order_id".into(), "line".into()],
        key_types: vec![KeyType::Uuid, KeyType::Integer],
        ..products()
    }
}

/// Footers: a setting of each register's, its text wished under
/// if_unchanged, versioned by an instant.
pub fn footers() -> Declared {
    Declared {
        name: "footers".into(),
        relation: qualified("shop", "footers"),
        mirror: Mirror::Setting,
        key_columns: vec!["register_id".into()],
        key_types: vec![KeyType::Uuid],
        columns: vec!["register_id".into(), "text".into(), "changed_at".into()],
        column_types: vec![
            "uuid".into(),
            "text".into(),
            "timestamp with time zone".into(),
        ],
        origin: Some("register_id".into()),
        version: Some("changed_at".into()),
        desired: vec!["text".into()],
        apply: Some(Apply::IfUnchanged),
        position: 2,
        ..Declared::default()
    }
}

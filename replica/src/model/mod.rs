//! The tables a device holds: how each is declared, how its rows travel
//! and how SQLite has it, the foreign keys between them, and how their keys
//! and values are written.

pub(crate) mod codec;
pub(crate) mod declare;
pub(crate) mod key_sql;
pub(crate) mod links;
pub(crate) mod row_json;
pub(crate) mod shape;
pub(crate) mod value;

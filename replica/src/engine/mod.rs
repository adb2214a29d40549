//! The engine's own part of a replica's database: its tables (`schema`,
//! every name begins `sync_`), the connection settings it needs
//! (`pragmas`), its triggers on the declared tables (`triggers`), and what
//! it keeps in its tables for both applying and uploading: the replica's
//! place in the chain (`state`), the notes of its own writes (`notes`), the
//! rows it could not take (`reject`).

pub(crate) mod notes;
pub(crate) mod pragmas;
pub(crate) mod reject;
pub(crate) mod schema;
pub(crate) mod state;
pub(crate) mod triggers;

//! Wishes (protocol 4.5, A.6; docs/src/wishes.md): what the server wants a
//! row of a setting to hold, and what the replica answered.
//!
//! - desire.rs: `sync.desire` and `sync.withdraw`, in the caller's
//!   transaction: a wish written, replaced or taken back in
//!   `sync.sync_wishes`, which the relay then sends as every row
//!   (catalog/wishes.rs says how it travels);
//! - encode.rs: a wish as it travels, the Wish message;
//! - answers.rs: an answer as it comes up, read and filed beside its wish
//!   (file/rows.rs hands it over).

pub mod answers;
pub mod desire;

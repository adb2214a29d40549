//! What can go wrong, and what the caller does about it: the crate's one
//! error type, each variant saying whose fault it is (the message's, the
//! device's database, the program's declarations or setup, the engine's
//! tables, the transport's, one row's).
//!
//! An `Err` from `receive` means: do not acknowledge the message to the
//! transport. Everything a message itself gets wrong is an `Ok`
//! (`Received::Malformed`, a rejection), because such a message must be
//! acknowledged so it does not hold back the queue.

/// An error the replica returns.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum Error {
    /// The message speaks a later protocol than this build. Do not
    /// acknowledge it: it is delivered again once the device runs a build
    /// that speaks it, and every message behind it waits, as it should.
    #[error(
        "the message speaks protocol {theirs} and this build speaks {ours}: \
         leave it unacknowledged until the replica is updated"
    )]
    LaterProtocol { theirs: u32, ours: u32 },

    /// The database failed (unavailable, full, damaged). Nothing was
    /// applied; do not acknowledge: the message is delivered again.
    #[error("the replica's database failed: {0}")]
    Storage(#[from] rusqlite::Error),

    /// The declared tables do not match the database (or the declaration
    /// asks for what this build does not do yet).
    #[error("declaration: {0}")]
    Declaration(String),

    /// The connection is set up in a way that could lose or half-apply a
    /// message. The text names the setting.
    #[error("connection: {0}")]
    Connection(String),

    /// The engine's triggers are not exactly the ones the declared tables
    /// need. The text names each table and prints the trigger it needs.
    #[error("the engine's triggers: {0}")]
    Triggers(String),

    /// The engine's own tables are missing or belong to another build.
    #[error("the engine's tables: {0}")]
    Schema(String),

    /// The transport failed for now — the network's fault, or its server
    /// is away, busy or restarting, or speaks an earlier protocol than
    /// this build until it is upgraded. Nothing was lost: what it did not
    /// take is asked again after a pause.
    #[error("the transport, for now: {0}")]
    TransportDown(String),

    /// The transport refused for good what it was asked — a permission, a
    /// size limit, a setting it does not take. Asked again the same way,
    /// it refuses again, until its setup (or the device's) changes.
    #[error("the transport refused it: {0}")]
    TransportRefused(String),

    /// One row cannot be read or written as its table is declared: it does
    /// not decode (or encode) with the table's codec, a value does not fit
    /// its column, its own key is not the key beside it, its version cannot
    /// move on. The row's fault, not the message's nor the database's: the
    /// row is rejected (a row going up set aside, a wish answered) with this
    /// text as its reason, and the rest goes on, so the replica's own calls
    /// never answer it. Shown as the text alone, since that is the reason
    /// recorded and sent up.
    #[error("{0}")]
    Row(String),
}

impl Error {
    pub(crate) fn declaration(text: impl Into<String>) -> Error {
        Error::Declaration(text.into())
    }

    pub(crate) fn row(text: impl Into<String>) -> Error {
        Error::Row(text.into())
    }

    /// The same failure, its text saying where it happened first
    /// (`column `price`: ...`).
    pub(crate) fn within(self, place: &str) -> Error {
        let at = |text: String| format!("{place}: {text}");
        match self {
            Error::Declaration(text) => Error::Declaration(at(text)),
            Error::Connection(text) => Error::Connection(at(text)),
            Error::Triggers(text) => Error::Triggers(at(text)),
            Error::Schema(text) => Error::Schema(at(text)),
            Error::TransportDown(text) => Error::TransportDown(at(text)),
            Error::TransportRefused(text) => Error::TransportRefused(at(text)),
            Error::Row(text) => Error::Row(at(text)),
            other @ (Error::LaterProtocol { .. } | Error::Storage(_)) => other,
        }
    }
}

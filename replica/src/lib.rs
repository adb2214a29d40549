//! magic_sync's replica half: applies what the server sends to SQLite, and
//! tells the server what it applied and what it could not.
//!
//! ```no_run
//! use magic_sync_replica::{install, Replica, Settings, Table, Tables};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut conn = rusqlite::Connection::open("register.db")?;
//! conn.execute_batch("PRAGMA recursive_triggers = ON")?;
//! let tables = Tables::new(vec![Table::catalog("products")]);
//! install(&mut conn, &tables)?;
//! let me = uuid::Uuid::new_v4();
//! let mut replica = Replica::open(conn, tables, me, Settings::default())?;
//! # let bytes: Vec<u8> = Vec::new();
//! let received = replica.receive(&bytes)?; // Ok: acknowledge the message
//! if let Some(up) = replica.next_up()? {
//!     // hand up.bytes to the transport on up.lane, then:
//!     replica.sent(&up)?;
//! }
//! # Ok(()) }
//! ```
//!
//! The modules, each named after what it does:
//! - `declare`: the tables a device holds; `shape`: how SQLite has them;
//! - `schema`: the engine's own tables; `pragmas`: the connection it needs;
//! - `check`: whether a message is one a server sends; `chain`: where it
//!   stands against the last applied; `receive`: the whole of taking one;
//! - `apply`: a `Down`'s rows; `let_go`: deletes; `snapshot`: remembering
//!   and sweeping; `row_json`: rows between JSON and SQLite;
//! - `reject`: rows not taken; `outcome`: what became of each row;
//! - `state`: the replica's place in the chain; `upload`: the `Up`.

pub use magic_sync_proto as proto;

mod apply;
mod chain;
pub mod check;
mod declare;
mod error;
mod let_go;
mod outcome;
mod pragmas;
mod receive;
mod reject;
mod row_json;
mod schema;
mod shape;
mod snapshot;
mod sql;
mod state;
mod upload;

pub use check::Malformed;
pub use declare::{Mirror, Table, Tables};
pub use error::Error;
pub use outcome::{AppliedTable, Rejected};
pub use receive::Received;
pub use schema::{install, SCHEMA_VERSION};
pub use upload::Upload;

use magic_sync_proto::limits::Limits;
use rusqlite::Connection;
use uuid::Uuid;

use crate::shape::Shape;

/// How the replica runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// The most one message carries: the server's limits, or more.
    pub limits: Limits,
    /// The lane an `Up` saying where the replica stands goes on (its first).
    pub first_lane: String,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            limits: Limits::DEFAULT,
            first_lane: "main".to_owned(),
        }
    }
}

/// The last message applied, as it carried its numbers, and the gap.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Applied {
    /// Empty, with sequence 0, before anything was applied.
    pub epoch: String,
    pub sequence: u64,
    pub nonce: u64,
    pub mac: Vec<u8>,
    /// The newest message the replica could not follow; 0 for no gap.
    pub gap: u64,
    /// The snapshot in progress, if any.
    pub snapshot: Option<String>,
}

/// A replica: one SQLite database kept in sync with the server.
pub struct Replica {
    conn: Connection,
    tables: Tables,
    shapes: Vec<Shape>,
    me: Uuid,
    settings: Settings,
}

impl Replica {
    /// Opens the replica on a connection whose database has the engine's
    /// tables (see [`install`]). Refuses a connection set up so that it could
    /// lose or half-apply a message, and tables that do not match their
    /// declaration.
    pub fn open(
        conn: Connection,
        tables: Tables,
        me: Uuid,
        settings: Settings,
    ) -> Result<Replica, Error> {
        pragmas::check(&conn)?;
        schema::check_installed(&conn)?;
        let shapes = shape::read_all(&conn, &tables)?;
        Ok(Replica {
            conn,
            tables,
            shapes,
            me,
            settings,
        })
    }

    /// Takes one message the transport delivered. `Ok`: it is committed (or
    /// changed nothing); acknowledge it. `Err`: do not acknowledge it; it
    /// will be delivered again.
    pub fn receive(&mut self, bytes: &[u8]) -> Result<Received, Error> {
        receive::receive(&self.conn, &self.shapes, &self.settings.limits, bytes)
    }

    /// An `Up` to send, when there is something the server has not heard:
    /// a message applied or delivered again, a wider gap, a rejection.
    pub fn next_up(&mut self) -> Result<Option<Upload>, Error> {
        upload::next(&self.conn, &self.settings.limits, &self.settings.first_lane)
    }

    /// The transport took this `Up`.
    pub fn sent(&mut self, upload: &Upload) -> Result<(), Error> {
        upload::sent(&self.conn, upload)
    }

    /// Where the replica stands.
    pub fn last_applied(&self) -> Result<Applied, Error> {
        let state = state::read(&self.conn)?;
        Ok(Applied {
            snapshot: state.in_snapshot().then(|| state.snapshot.clone()),
            epoch: state.epoch,
            sequence: state.sequence,
            nonce: state.nonce,
            mac: state.mac,
            gap: state.gap,
        })
    }

    /// The database, to read what the replica holds. Write through it only
    /// to tables of the replica's own.
    pub fn connection(&self) -> &Connection {
        &self.conn
    }

    /// Closes the replica, giving the connection back.
    pub fn into_connection(self) -> Connection {
        self.conn
    }

    pub fn tables(&self) -> &Tables {
        &self.tables
    }

    /// The replica's own id, as the server knows it.
    pub fn me(&self) -> Uuid {
        self.me
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }
}

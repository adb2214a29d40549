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
//! The modules, each named after what it does, in a folder per stage,
//! listed bottom up: a module uses only the modules before it in this list
//! (and in `mod` order below; `bash scripts/imports.sh` checks it). They
//! import each name from the module that defines it; the names re-exported
//! here are for the library's users.
//! - `error`: the one error type, each variant saying whose fault it is;
//!   `sql`: small SQLite helpers;
//! - `model/`, the tables: `declare`: the tables a device holds; `codec`:
//!   how their rows travel; `value`: a value as a codec carries it;
//!   `shape`: how SQLite has them; `links`: the foreign keys between them;
//!   `key_sql`: keys as SQL; `row_json`: values;
//! - `message/`, what the server sends: `check`: whether a message is one a
//!   server sends (`wire`: a `Down` read in one pass);
//! - `engine/`, the engine's part of the database: `schema`: the engine's
//!   own tables; `triggers`: the note and refusal triggers; `pragmas`: the
//!   connection it needs; `state`: the replica's place in the chain;
//!   `notes`: its own writes; `reject`: rows not taken;
//! - `wishes/`: carrying out the server's wishes of the settings, after
//!   a message committed (`wishes/mod.rs`): `held`: the wishes as rows;
//!   `due`: which are due, and what the engine answers alone; `handler`:
//!   one offered to its handler with a timeout; `answer`: the answer
//!   recorded, with the row it wrote;
//! - `settings`: how the replica runs (`Settings`), and the check of its
//!   lanes;
//! - `apply/`: the whole of applying one message (`apply/mod.rs`); `chain`:
//!   where it stands against the last applied; `down`: a `Down`'s rows;
//!   `upsert`: a row as the upsert that writes it; `let_go`: deletes,
//!   retiring, and letting retired rows go; `snapshot`: remembering and
//!   sweeping; `spot`: a place in a message; `context`: what applying and
//!   sweeping share; `faults`: the rows at fault when the commit is
//!   refused; `outcome`: what became of each row;
//! - `upload/`: the `Up` (`upload/mod.rs`); `digest`: fingerprints;
//!   `backlog`: what waits;
//! - `replica`: the `Replica` a device program holds, which opens the
//!   database and calls the stages above;
//! - `transport/`: moving the bytes — `device_loop`: the blocking loop a
//!   device program runs (take, apply, acknowledge, send up, wait,
//!   reconnect); `control`: stopping and poking it; `queue` (feature
//!   `pg-queue`): the server's queue; `nats_subjects`: the NATS
//!   conventions; `nats` (feature `nats`): the JetStream client; `ws`
//!   (feature `ws`): the gateway's client.

pub use magic_sync_proto as proto;

mod error;
mod sql;
mod model;
mod message;
mod engine;
mod wishes;
mod settings;
mod apply;
mod upload;
mod replica;
pub mod transport;

/// The server's queue, where it always was.
#[cfg(feature = "pg-queue")]
pub use transport::queue;

pub use apply::outcome::{AppliedTable, Rejected};
pub use apply::Received;
pub use engine::schema::{install, migration, SCHEMA_VERSION};
pub use engine::triggers::{check as check_triggers, triggers};
pub use error::Error;
pub use message::check;
pub use message::check::Malformed;
pub use model::codec::{Codec, Field, Kind};
pub use model::declare::{Apply, Lane, Mirror, Table, Tables};
pub use replica::{Applied, Replica};
pub use settings::Settings;
pub use upload::backlog::TableBacklog;
pub use upload::{Narrowed, Refusal, Upload};
pub use wishes::{Answered, CarryOut, Direct, Outcome, Wish, Wishes};

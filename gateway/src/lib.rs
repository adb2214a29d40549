//! magic_sync's WebSocket gateway: devices reach the server's queue over
//! aweft's replication protocol v1 (the link, `link`), wherever they are.
//!
//! - `link`: the frames, their bytes and the text requests beside them;
//!   the replica library's WebSocket client uses it too (without the
//!   `server` feature);
//! - `server` (feature `server`, the default): the gateway itself, an
//!   axum router any host can mount (`Gateway::router`) or serve alone
//!   (`serve`), connected to PostgreSQL as the extension's gateway role;
//!   `credentials`: who a device is, from what it presents; `database`:
//!   the queue's functions and the NOTIFY that wakes the gateway;
//!   `session`: one link, its topics and what the gateway does on each
//!   frame and request.

pub mod link;

#[cfg(feature = "server")]
pub mod credentials;
#[cfg(feature = "server")]
pub mod database;
#[cfg(feature = "server")]
mod error;
#[cfg(feature = "server")]
pub mod server;
#[cfg(feature = "server")]
mod session;
#[cfg(feature = "server")]
pub mod settings;

#[cfg(feature = "server")]
pub use error::Error;
#[cfg(feature = "server")]
pub use server::{serve, Gateway};
#[cfg(feature = "server")]
pub use settings::Settings;

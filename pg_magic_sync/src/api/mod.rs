//! Every SQL function of the extension written in Rust, one file per
//! chapter of docs/src/server.md. Each is thin: it takes SQL values, calls
//! the stage that does the work, and turns the answer into SQL values.

use pgrx::prelude::*;

mod declaring;
mod queue;
mod receiving;
mod refusing;
mod relaying;
mod status;
mod wishing;

/// The schema of the engine's own functions, for
/// `#[pg_extern(schema = "sync_internal")]`: pgrx places a function only in
/// a schema it knows. sql/schema.sql creates it first (the functions of
/// sql/ are made in it before pgrx's), so the `CREATE SCHEMA IF NOT EXISTS`
/// pgrx writes for this does nothing.
#[pg_schema]
mod sync_internal {}

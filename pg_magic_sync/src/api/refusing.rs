//! `sync_internal.refuse(sqlstate, message, hint)`: how the engine's SQL
//! (sql/*.sql) refuses a call on purpose. A PL/pgSQL `RAISE` carries the
//! whole chain of functions and statements it was raised from as CONTEXT,
//! which for a read's bad scope was some eighty lines of the engine's SQL;
//! raised from here, the caller reads the message and the hint alone.

use pgrx::prelude::*;

use crate::error::Error;

#[pg_extern(volatile, schema = "sync_internal")]
fn refuse(sqlstate: &str, message: &str, hint: default!(Option<&str>, "NULL")) {
    Error::said(sqlstate, message, hint.unwrap_or_default()).raise()
}

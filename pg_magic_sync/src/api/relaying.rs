//! Relaying (docs/src/server.md, "Relaying"): the Rust half of `CALL
//! sync.relay()`, which sql/relay.sql runs in the pass's transaction.

use pgrx::prelude::*;

use crate::error::Error;
use crate::relay;
use crate::statements::api::relaying::{STOP_WORKERS, WORKERS_RUNNING};
use crate::version;
use crate::worker;

/// `sync_internal.record_pass(starts, notes)`: the recording half of a
/// pass, planning at most `notes` notes (NULL: `magic_sync.notes_per_pass`).
/// Called by `sync_internal.pass()`, which gives it its transaction, and
/// plans fewer notes when a pass fails; answers what it did.
#[pg_extern(volatile, schema = "sync_internal")]
fn record_pass(starts: bool, notes: default!(Option<i32>, "NULL")) -> pgrx::JsonB {
    version::check();
    pgrx::JsonB(relay::record_pass(starts, notes))
}

/// `sync.start_relay()`: starts a relay worker for the current database,
/// unless one runs. Answers the worker's process id, or NULL when one was
/// running already.
#[pg_extern(volatile)]
fn start_relay() -> Option<i32> {
    // One caller at a time: two would each find no worker and start one.
    Spi::run("SELECT pg_advisory_xact_lock(hashtext('magic_sync start_relay'))")
        .unwrap_or_else(|e| Error::spi("pg_advisory_xact_lock", e).raise());
    if worker_running() {
        return None;
    }
    let database: String = Spi::get_one("SELECT current_database()::text")
        .ok()
        .flatten()
        .unwrap_or_else(|| Error::engine("magic_sync: no current database", "").raise());
    let Some(pid) = worker::start_dynamic(&database) else {
        Error::not_yet(
            "magic_sync: the relay worker could not be started",
            "Every background worker slot may be taken: raise max_worker_processes.",
        )
        .raise()
    };
    // Until it has connected, pg_stat_activity does not say whose it is: a
    // second call made then would start another.
    for _ in 0..1000 {
        if worker_running() {
            break;
        }
        // SAFETY: a plain sleep of this backend, outside any lock of the
        // engine's but the advisory one taken above.
        unsafe { pg_sys::pg_usleep(10_000) };
    }
    Some(pid)
}

/// `sync.stop_relay()`: stops the relay workers of the current database.
/// Answers how many it stopped. One of `magic_sync.database` stays stopped
/// until the server restarts.
#[pg_extern(volatile)]
fn stop_relay() -> i64 {
    Spi::get_one_with_args::<i64>(STOP_WORKERS, &[worker::NAME.into()])
        .ok()
        .flatten()
        .unwrap_or(0)
}

fn worker_running() -> bool {
    // pg_stat_activity is read once per transaction unless asked afresh.
    Spi::run("SELECT pg_stat_clear_snapshot()")
        .unwrap_or_else(|e| Error::spi("pg_stat_clear_snapshot", e).raise());
    Spi::get_one_with_args::<bool>(WORKERS_RUNNING, &[worker::NAME.into()])
        .ok()
        .flatten()
        .unwrap_or(false)
}

/// `sync_internal.outside_a_transaction_block()`: `CALL sync.relay()`
/// commits as it goes, which PostgreSQL refuses inside a transaction block
/// with only "invalid transaction termination": this says what to do.
#[pg_extern(volatile, schema = "sync_internal")]
fn outside_a_transaction_block() {
    // SAFETY: reads the state of this backend's current transaction.
    if unsafe { pg_sys::IsTransactionBlock() } {
        Error::said(
            "25001",
            "magic_sync: CALL sync.relay() commits as it goes, so it cannot run inside a transaction block",
            "CALL it on its own, outside BEGIN ... COMMIT (in psql, with autocommit on).",
        )
        .raise();
    }
}

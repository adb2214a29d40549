//! The relay worker's own transactions: each begun and ended here, outside
//! any other, and an ERROR in one answered as a failure the worker can
//! weigh (transient or not, by its SQLSTATE) instead of ending the process.

use std::panic::AssertUnwindSafe;

use pgrx::pg_sys::panic::CaughtError;
use pgrx::prelude::*;

use crate::error;

/// A failure of a round, as the worker treats it.
pub struct Failure {
    pub transient: bool,
    /// The database differs from the declarations (declare/drift.rs): the
    /// worker records what differs, for the status reads.
    pub not_as_declared: bool,
    pub message: String,
}

/// A failure of SPI itself (not an ERROR raised inside it).
pub fn spi_failure(sql: &str, e: pgrx::spi::SpiError) -> Failure {
    Failure {
        transient: false,
        not_as_declared: false,
        message: format!("{e} (while running {sql})"),
    }
}

/// Runs `work` in a transaction of its own (REPEATABLE READ when asked),
/// committed when it returns; an ERROR in it rolls it back and is answered
/// as a failure, transient or not by its SQLSTATE.
pub fn transaction<R>(repeatable_read: bool, work: impl FnOnce() -> R) -> Result<R, Failure> {
    // SAFETY: the worker's main loop, outside any transaction: a
    // transaction begins here and ends below, committed or aborted. The
    // isolation level is set before the transaction's snapshot is taken,
    // as SET TRANSACTION ISOLATION LEVEL would.
    unsafe {
        pg_sys::SetCurrentStatementStartTimestamp();
        pg_sys::StartTransactionCommand();
        if repeatable_read {
            pg_sys::XactIsoLevel = pg_sys::XACT_REPEATABLE_READ as i32;
        }
        pg_sys::PushActiveSnapshot(pg_sys::GetTransactionSnapshot());
    }
    let work = AssertUnwindSafe(work);
    let outcome = PgTryBuilder::new(AssertUnwindSafe(|| Ok((work.0)())))
        .catch_others(|caught| Err(failure_of(caught)))
        .execute();
    match outcome {
        Ok(value) => {
            // SAFETY: the transaction begun above, its snapshot still pushed.
            unsafe {
                pg_sys::PopActiveSnapshot();
                pg_sys::CommitTransactionCommand();
            }
            Ok(value)
        }
        Err(failure) => {
            // SAFETY: the transaction begun above, failed: aborting it
            // releases its locks, snapshots and memory.
            unsafe { pg_sys::AbortCurrentTransaction() };
            Err(failure)
        }
    }
}

fn failure_of(caught: CaughtError) -> Failure {
    match caught {
        CaughtError::PostgresError(report) | CaughtError::ErrorReport(report) => Failure {
            transient: error::is_transient(&error::sqlstate_text(report.sql_error_code())),
            not_as_declared: error::is_not_as_declared(report.sql_error_code()),
            message: report.message().to_owned(),
        },
        CaughtError::RustPanic { ereport, .. } => Failure {
            transient: false,
            not_as_declared: false,
            message: ereport.message().to_owned(),
        },
    }
}

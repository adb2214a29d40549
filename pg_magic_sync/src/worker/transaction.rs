//! The relay worker's own transactions: each begun and ended here, outside
//! any other, and an ERROR in one answered as the crate's error, which the
//! worker weighs (`Error::is_transient`, by its SQLSTATE) instead of ending
//! the process.

use std::panic::AssertUnwindSafe;

use pgrx::pg_sys::panic::CaughtError;
use pgrx::prelude::*;

use crate::error::Error;

/// A failure of SPI itself (not an ERROR raised inside it): the engine's.
pub fn spi_failure(sql: &str, e: pgrx::spi::SpiError) -> Error {
    Error::spi(sql, e)
}

/// Runs `work` in a transaction of its own (REPEATABLE READ when asked),
/// committed when it returns; an ERROR in it rolls it back and is answered
/// as a failure, transient or not by its SQLSTATE.
pub fn transaction<R>(repeatable_read: bool, work: impl FnOnce() -> R) -> Result<R, Error> {
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

/// An ERROR caught in the worker's transaction, as the crate's error: the
/// database's (`Error::Database`, whose SQLSTATE says whether it passes),
/// or a panic of the engine's own code.
fn failure_of(caught: CaughtError) -> Error {
    match caught {
        CaughtError::PostgresError(report) | CaughtError::ErrorReport(report) => Error::Database {
            code: report.sql_error_code(),
            message: report.message().to_owned(),
        },
        CaughtError::RustPanic { ereport, .. } => Error::engine(
            ereport.message().to_owned(),
            "a panic of the engine's own code",
        ),
    }
}

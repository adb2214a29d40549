//! The filing gate: while the relay worker runs a pass, no Up is filed,
//! and a pass waits for the filings in progress.
//!
//! A pass runs in a REPEATABLE READ transaction and writes the rows that
//! filing writes too (a replica's row in `sync.replicas`, its outbox).
//! Filing that commits after the pass's snapshot was taken makes the pass
//! fail ("could not serialize access"), and with devices reporting after
//! every message that happened to a third of the passes. So the worker
//! closes the gate (an advisory lock of the session, taken before the
//! pass's transaction begins, so its snapshot sees every filing before it)
//! and opens it once the pass ended, however it ended; filing takes the
//! gate shared, for its transaction, and filings never wait on each other.
//!
//! Acknowledgements pass freely: they only delete a message from the
//! outbox, which a pass touches only when it provisions that replica
//! again, and a device blocked at each acknowledgement would take one
//! message per pass. `CALL sync.relay()` does not close the gate (a session
//! lock left behind by an error would stop all filing): a pass of its that
//! loses a race with a filing starts over (sql/relay.sql).

use crate::locks::GATE;
use crate::spi;

/// Closes the gate for the session: call in a transaction of its own,
/// before the pass's.
pub fn close() {
    spi::run_with("SELECT pg_advisory_lock($1)", &[GATE.into()]);
}

/// Opens it again: call in a transaction of its own, after the pass's.
pub fn open() {
    spi::run_with("SELECT pg_advisory_unlock($1)", &[GATE.into()]);
}

/// Waits while a pass runs, then holds the gate open until this
/// transaction ends: call before filing anything.
pub fn pass_through() {
    spi::run_with("SELECT pg_advisory_xact_lock_shared($1)", &[GATE.into()]);
}

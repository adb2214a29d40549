//! Which version of the extension's SQL this library was built for, held
//! against the version installed in the database: after a package upgrade
//! the postmaster loads the new library at once, while each database keeps
//! the SQL it had until `ALTER EXTENSION magic_sync UPDATE` runs there. A
//! library must not run the engine on SQL of another version, so every
//! entry point checks first, and refuses naming both versions and the
//! statement that brings them together. Once they match, a backend does not
//! look again: an extension is updated in a transaction of its own, which
//! the backend that ran it sees as a catalog change, and other backends
//! only after they looked again (the worker, which runs for long, looks
//! before each round).

use std::cell::Cell;

use crate::error::Error;
use crate::spi;
use crate::statements::version::INSTALLED;

/// The version this library was built as: the workspace's.
pub const LIBRARY: &str = env!("CARGO_PKG_VERSION");

thread_local! {
    /// This backend found the installed version to be the library's.
    static MATCHED: Cell<bool> = const { Cell::new(false) };
}

/// Refuses to go on when the extension installed in this database is of
/// another version than the library.
pub fn check() {
    if MATCHED.get() {
        return;
    }
    if let Err(e) = installed_is_the_librarys() {
        e.raise();
    }
    MATCHED.set(true);
}

/// The installed version against the library's, looked at now: `Ok` when
/// they match or no extension is installed (nothing of the engine runs).
pub fn installed_is_the_librarys() -> Result<(), Error> {
    match spi::one::<String>(INSTALLED, &[]) {
        Some(installed) if installed != LIBRARY => Err(Error::OtherVersion {
            installed,
            library: LIBRARY,
        }),
        _ => Ok(()),
    }
}

//! How a command ends: one exit code per kind of ending, and the one place
//! the replica's errors are given theirs.

use magic_sync_replica::Error;

/// Done. For `apply`, the message was dealt with for good: acknowledge it.
pub const SUCCESS: u8 = 0;
/// Something failed: the replica's database, a file, a replica that would
/// not open. For `apply`: do not acknowledge; the message comes again.
pub const FAILED: u8 = 1;
/// The command line is wrong: no such command, arguments missing or over,
/// an id that is no UUID.
pub const USAGE: u8 = 2;
/// `apply`: the message speaks a later protocol than this build. Do not
/// acknowledge it: it waits for an updated build, and so does every
/// message behind it.
pub const LATER_PROTOCOL: u8 = 3;
/// What the command was given is refused: a declaration file that is
/// malformed or declares what cannot work, a database that is there already
/// (`init`), a lane no table is on, or declarations recorded in a database
/// that no longer fit it.
pub const REFUSED: u8 = 4;

/// Why a command did not do what it was asked.
#[derive(Debug)]
pub enum Failure {
    Usage(String),
    Refused(String),
    Failed(String),
    Replica(Error),
}

impl Failure {
    pub fn code(&self) -> u8 {
        match self {
            Failure::Usage(_) => USAGE,
            Failure::Refused(_) => REFUSED,
            Failure::Failed(_) => FAILED,
            Failure::Replica(error) => code_of(error),
        }
    }

    /// The code's name in the JSON a failure prints.
    pub fn name(&self) -> &'static str {
        match self.code() {
            USAGE => "usage",
            REFUSED => "refused",
            LATER_PROTOCOL => "later_protocol",
            _ => "failed",
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Usage(text) | Failure::Refused(text) | Failure::Failed(text) => {
                f.write_str(text)
            }
            Failure::Replica(error) => write!(f, "{error}"),
        }
    }
}

impl From<Error> for Failure {
    fn from(error: Error) -> Failure {
        Failure::Replica(error)
    }
}

/// The exit code of each error the replica answers. No wildcard: a new
/// kind of error must be given its code here.
pub fn code_of(error: &Error) -> u8 {
    match error {
        Error::LaterProtocol { .. } => LATER_PROTOCOL,
        Error::Declaration(_) => REFUSED,
        Error::Storage(_)
        | Error::Connection(_)
        | Error::Triggers(_)
        | Error::Schema(_)
        | Error::TransportDown(_)
        | Error::TransportRefused(_)
        // A row at fault is rejected inside the library, never answered.
        | Error::Row(_) => FAILED,
    }
}

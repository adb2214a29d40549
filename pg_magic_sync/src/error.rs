//! The crate's one error type. Each variant says whose fault an error is,
//! which is what decides its SQLSTATE (`Error::sqlstate`, the one place
//! they are mapped) and what its hint tells the reader to do.
//!
//! The primary message is short and names what is wrong; the SQL that
//! failed, or what else helps to find the cause, goes in the detail.
//!
//! Rows no message can carry are not an error of this type: a pass answers
//! them (relay/record.rs), and sql/relay.sql raises its own SQLSTATE to
//! undo the pass's work before it sets them aside.

use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The caller asked for something the engine cannot do as asked: a
    /// declaration, an argument. The caller changes the call.
    #[error("{message}")]
    BadInput { message: String, hint: String },
    /// Bytes handed over that are no message the engine reads. Whoever
    /// sent them is at fault; nothing was filed.
    #[error("{message}")]
    BadMessage { message: String, hint: String },
    /// A message this server cannot take yet (a later protocol): it must
    /// come again once the server is upgraded. Nobody's fault.
    #[error("{message}")]
    NotYet { message: String, hint: String },
    /// The database is not as the declarations say: a table changed, a
    /// trigger or an index is missing. The hint holds what fixes it.
    #[error("{message}")]
    NotAsDeclared { message: String, hint: String },
    /// The engine's own fault: SQL it wrote failed, or its own tables hold
    /// what it cannot read (a NULL, a value it does not know).
    #[error("{message}")]
    Engine { message: String, detail: String },
}

impl Error {
    pub fn bad_input(message: impl Into<String>, hint: impl Into<String>) -> Error {
        Error::BadInput {
            message: message.into(),
            hint: hint.into(),
        }
    }

    pub fn bad_message(message: impl Into<String>, hint: impl Into<String>) -> Error {
        Error::BadMessage {
            message: message.into(),
            hint: hint.into(),
        }
    }

    pub fn not_yet(message: impl Into<String>, hint: impl Into<String>) -> Error {
        Error::NotYet {
            message: message.into(),
            hint: hint.into(),
        }
    }

    pub fn not_as_declared(message: impl Into<String>, hint: impl Into<String>) -> Error {
        Error::NotAsDeclared {
            message: message.into(),
            hint: hint.into(),
        }
    }

    pub fn engine(message: impl Into<String>, detail: impl Into<String>) -> Error {
        Error::Engine {
            message: message.into(),
            detail: detail.into(),
        }
    }

    /// SQL the engine wrote that failed: `sql` goes in the detail.
    pub fn spi(sql: &str, error: impl std::fmt::Display) -> Error {
        Error::engine(format!("magic_sync: the engine's SQL failed: {error}"), sql)
    }

    /// A value of the engine's own tables that must be there and is not.
    pub fn missing(what: &str) -> Error {
        Error::engine(
            format!("magic_sync: {what} is NULL in the engine's own tables"),
            "The engine writes this value itself: its tables were changed by hand, or this is a bug.",
        )
    }

    /// A value of the engine's own tables it does not know.
    pub fn unknown(what: &str, value: &str) -> Error {
        Error::engine(
            format!("magic_sync: {what} holds {value:?}, which the engine does not know"),
            "The engine writes this value itself: its tables were changed by hand, or a newer version wrote them.",
        )
    }

    /// Whose fault it is, as PostgreSQL's error code.
    pub fn sqlstate(&self) -> PgSqlErrorCode {
        match self {
            Error::BadInput { .. } => PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            Error::BadMessage { .. } => PgSqlErrorCode::ERRCODE_INVALID_BINARY_REPRESENTATION,
            Error::NotYet { .. } => PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
            Error::NotAsDeclared { .. } => PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            Error::Engine { .. } => PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
        }
    }

    /// Reports the error to PostgreSQL, which ends the statement (and the
    /// transaction, unless a savepoint catches it).
    pub fn raise(self) -> ! {
        let code = self.sqlstate();
        let report = match self {
            Error::BadInput { message, hint }
            | Error::BadMessage { message, hint }
            | Error::NotYet { message, hint }
            | Error::NotAsDeclared { message, hint } => {
                ErrorReport::new(code, message, "magic_sync").set_hint(hint)
            }
            Error::Engine { message, detail } => {
                ErrorReport::new(code, message, "magic_sync").set_detail(detail)
            }
        };
        report.report(PgLogLevel::ERROR);
        unreachable!("an ERROR does not return")
    }
}

/// An error code as its five characters ("40001"): PostgreSQL packs each
/// in six bits, the first lowest.
pub fn sqlstate_text(code: PgSqlErrorCode) -> String {
    let packed = code as u32;
    (0..5)
        .map(|i| char::from(b'0' + ((packed >> (6 * i)) & 0x3F) as u8))
        .collect()
}

/// Whether the same work may succeed if tried again: a serialization
/// failure, a deadlock, a lock or statement timeout, the connection or the
/// server going away, resources short. The same list as
/// `sync_internal.is_transient` (sql/filing.sql). Anything else, and an
/// error nobody classified, is permanent.
pub fn is_transient(sqlstate: &str) -> bool {
    matches!(
        sqlstate,
        "40001" | "40P01" | "40003" | "55P03" | "55006" | "57014"
    ) || ["08", "53", "57", "58", "HV"]
        .iter()
        .any(|class| sqlstate.starts_with(class))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_of_fault_has_a_code_of_its_own() {
        let codes = [
            Error::bad_input("m", "h").sqlstate(),
            Error::bad_message("m", "h").sqlstate(),
            Error::not_yet("m", "h").sqlstate(),
            Error::not_as_declared("m", "h").sqlstate(),
            Error::engine("m", "d").sqlstate(),
        ];
        for (i, a) in codes.iter().enumerate() {
            for b in &codes[i + 1..] {
                assert_ne!(a, b);
            }
        }
    }

    #[test]
    fn an_error_code_reads_as_its_five_characters() {
        assert_eq!(
            sqlstate_text(PgSqlErrorCode::ERRCODE_T_R_SERIALIZATION_FAILURE),
            "40001"
        );
        assert_eq!(
            sqlstate_text(PgSqlErrorCode::ERRCODE_T_R_DEADLOCK_DETECTED),
            "40P01"
        );
        assert_eq!(
            sqlstate_text(Error::bad_input("m", "h").sqlstate()),
            "22023"
        );
    }

    #[test]
    fn only_what_a_retry_may_cure_is_transient() {
        for transient in [
            "40001", "40P01", "55P03", "57014", "08006", "53100", "57P01",
        ] {
            assert!(is_transient(transient), "{transient}");
        }
        for permanent in ["22023", "23505", "42P01", "XX000", "55000", "MSU01"] {
            assert!(!is_transient(permanent), "{permanent}");
        }
    }

    #[test]
    fn the_sql_that_failed_goes_in_the_detail_not_the_message() {
        let Error::Engine { message, detail } = Error::spi("SELECT 1/0", "division by zero") else {
            panic!("not an engine fault")
        };
        assert!(message.contains("division by zero") && !message.contains("SELECT"));
        assert_eq!(detail, "SELECT 1/0");
    }
}

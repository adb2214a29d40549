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

#[derive(Clone, Debug, PartialEq, thiserror::Error)]
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
    /// The transport's fault: NATS unreachable, refusing what it was
    /// given, or answering nothing in time. `transient` when a retry may
    /// get through (the network, a server busy or restarting), not when
    /// the transport will never take it (a setting, a message too large);
    /// `stream_missing` when no stream took a publish (the streams are to
    /// be made again).
    #[error("{what}")]
    Transport {
        transient: bool,
        stream_missing: bool,
        what: String,
    },
    /// A statement the relay worker ran failed inside PostgreSQL: the
    /// database's fault or the data's, told apart by its SQLSTATE (a
    /// serialization failure may pass; a constraint will not).
    #[error("{message}")]
    Database {
        code: PgSqlErrorCode,
        message: String,
    },
    /// A row too large for any message, even alone: the data's fault. It is
    /// set aside, and the pass planned again around it.
    #[error("the row {key} of {table} takes {bytes} bytes, more than a message carries")]
    RowTooLarge {
        table: String,
        key: String,
        bytes: usize,
    },
    /// The extension's SQL installed in this database is of another
    /// version than this library: an upgrade half done, the operator's to
    /// finish with `ALTER EXTENSION magic_sync UPDATE` (the library was
    /// installed, the database's SQL not yet moved on).
    #[error(
        "magic_sync: the extension installed in this database is version {installed}, and this \
         library is {library}"
    )]
    OtherVersion {
        installed: String,
        library: &'static str,
    },
    /// A refusal the engine's SQL makes on purpose (sql/*.sql, through
    /// `sync_internal.refuse`), under the SQLSTATE that says whose fault it
    /// is there: a scope or a state a read does not know, a TRUNCATE.
    #[error("{message}")]
    Said {
        code: PgSqlErrorCode,
        message: String,
        hint: String,
    },
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

    /// A refusal of the engine's SQL, under `sqlstate` (five characters,
    /// as `RAISE ... USING ERRCODE` takes them).
    pub fn said(sqlstate: &str, message: impl Into<String>, hint: impl Into<String>) -> Error {
        match sqlstate_of(sqlstate) {
            Some(code) => Error::Said {
                code,
                message: message.into(),
                hint: hint.into(),
            },
            None => Error::engine(
                format!("magic_sync: {sqlstate:?} is no SQLSTATE"),
                "sync_internal.refuse takes five digits or capital letters: a bug of the engine's SQL.",
            ),
        }
    }

    /// Whether the same work may succeed if tried again unchanged: the
    /// network or a busy server (the transport's), or a statement that
    /// failed for a reason that passes (its SQLSTATE: `is_transient`).
    /// Anything else, and whatever nobody classified, is permanent.
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Transport { transient, .. } => *transient,
            Error::Database { code, .. } | Error::Said { code, .. } => {
                is_transient(&sqlstate_text(*code))
            }
            _ => false,
        }
    }

    /// Whether no stream took a publish: the streams are to be made again.
    pub fn stream_missing(&self) -> bool {
        matches!(
            self,
            Error::Transport {
                stream_missing: true,
                ..
            }
        )
    }

    /// Whether the database differs from the declarations, raised by the
    /// engine (`NotAsDeclared`) or caught from a statement as its SQLSTATE.
    pub fn is_not_as_declared(&self) -> bool {
        match self {
            Error::NotAsDeclared { .. } => true,
            Error::Database { code, .. } => is_not_as_declared(*code),
            _ => false,
        }
    }

    /// Whose fault it is, as PostgreSQL's error code.
    pub fn sqlstate(&self) -> PgSqlErrorCode {
        match self {
            Error::Said { code, .. } | Error::Database { code, .. } => *code,
            Error::Transport { .. } => PgSqlErrorCode::ERRCODE_CONNECTION_FAILURE,
            Error::OtherVersion { .. } => PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            Error::RowTooLarge { .. } => PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
            Error::BadInput { .. } => PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            Error::BadMessage { .. } => PgSqlErrorCode::ERRCODE_INVALID_BINARY_REPRESENTATION,
            Error::NotYet { .. } => PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
            Error::NotAsDeclared { .. } => PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            Error::Engine { .. } => PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
        }
    }

    /// Reports the error to PostgreSQL, which ends the statement (and the
    /// transaction, unless a savepoint catches it). An error of the
    /// caller's, or of the database's state, says its message, detail and
    /// hint and nothing of the engine's insides: the functions and SQL it
    /// was raised from are no help to whoever reads it, and a read's plan
    /// printed as CONTEXT was some eighty lines. The engine's own faults
    /// keep that context, which says where to look.
    pub fn raise(self) -> ! {
        let code = self.sqlstate();
        let (report, the_callers) = match self {
            Error::BadInput { message, hint }
            | Error::BadMessage { message, hint }
            | Error::NotYet { message, hint }
            | Error::NotAsDeclared { message, hint }
            | Error::Said { message, hint, .. } => {
                let report = ErrorReport::new(code, message, "magic_sync");
                let report = if hint.is_empty() {
                    report
                } else {
                    report.set_hint(hint)
                };
                (report, true)
            }
            ref other @ Error::OtherVersion { library, .. } => (
                ErrorReport::new(code, other.to_string(), "magic_sync").set_hint(format!(
                    "Run ALTER EXTENSION magic_sync UPDATE TO '{library}' in this database \
                     (docs/src/install.md, \"Upgrading\")."
                )),
                true,
            ),
            Error::Engine { message, detail } => (
                ErrorReport::new(code, message, "magic_sync").set_detail(detail),
                false,
            ),
            other @ (Error::Transport { .. }
            | Error::Database { .. }
            | Error::RowTooLarge { .. }) => (
                ErrorReport::new(code, other.to_string(), "magic_sync"),
                false,
            ),
        };
        if the_callers {
            without_context();
        }
        report.report(PgLogLevel::ERROR);
        unreachable!("an ERROR does not return")
    }
}

/// Leaves the error about to be raised without CONTEXT lines.
fn without_context() {
    // SAFETY: error_context_stack is the backend's list of callbacks that
    // add CONTEXT to an error; emptying it just before an ERROR only drops
    // those lines. Whoever catches the error (a PG_TRY, a PL/pgSQL
    // exception block, the top level) restores the list it saved, as it
    // does for any error.
    unsafe { pg_sys::error_context_stack = std::ptr::null_mut() };
}

/// A SQLSTATE's five characters as PostgreSQL packs them (six bits each,
/// the first lowest), if they are digits or capital letters.
fn sqlstate_of(text: &str) -> Option<PgSqlErrorCode> {
    let bytes = text.as_bytes();
    if bytes.len() != 5
        || !bytes
            .iter()
            .all(|b| b.is_ascii_digit() || b.is_ascii_uppercase())
    {
        return None;
    }
    let packed = bytes.iter().enumerate().fold(0i32, |packed, (i, b)| {
        packed | (i32::from((b - b'0') & 0x3F) << (6 * i))
    });
    Some(PgSqlErrorCode::from(packed))
}

/// Whether an error of this code says the database differs from the
/// declarations (`Error::NotAsDeclared`).
pub fn is_not_as_declared(code: PgSqlErrorCode) -> bool {
    code == PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE
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
    fn a_refusal_of_the_engines_sql_keeps_the_sqlstate_it_names() {
        for (text, code) in [
            ("22023", PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE),
            ("0A000", PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED),
            ("25001", PgSqlErrorCode::ERRCODE_ACTIVE_SQL_TRANSACTION),
        ] {
            assert_eq!(Error::said(text, "m", "h").sqlstate(), code);
            assert_eq!(sqlstate_text(code), text);
        }
        for not_one in ["2202", "220233", "2202a", ""] {
            assert_eq!(
                Error::said(not_one, "m", "h").sqlstate(),
                PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
                "{not_one:?} is refused as a bug of the SQL"
            );
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

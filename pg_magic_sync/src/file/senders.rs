//! What the server knows of a sender (the book's `Senders`), as the host
//! declared it with `sync.declare_senders(known, filing, place)`:
//!
//! - a sender is one the replicas' relation knows (`sync.declare_replicas`),
//!   and, with a `known` function, one it answers something for: what it
//!   answers (as jsonb) is handed to the other two. Any other sender is
//!   dropped, with a log line;
//! - `filing(replica, known)` runs before the sender's rows are filed, in
//!   the filing transaction, as the caller (acting.rs): `set_config(...,
//!   true)` for row policies, or `SET LOCAL ROLE`. A role it takes holds
//!   only for the statements that read and write the host's tables: the
//!   engine's own bookkeeping runs as the extension's owner;
//! - `place(replica, known, table, row)` answers each uploaded row as it is
//!   to be filed: stamped with what the server knows (a company id).

use pgrx::pg_sys;
use pgrx::pg_sys::panic::CaughtError;
use serde_json::Value;
use uuid::Uuid;

use crate::catalog;
use crate::catalog::table_sql::quote_ident;
use crate::error::{self, Error};
use crate::file::acting::{self, Caller};
use crate::spi::{self, to_pg};
use crate::statements::file::senders::{HOOKS, ROLE_SETTING, SET_ROLE_SETTING};

/// The hooks declared, each a function name, schema-qualified and quoted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Hooks {
    pub known: Option<String>,
    pub filing: Option<String>,
    pub place: Option<String>,
}

impl Hooks {
    pub fn read() -> Hooks {
        let found: Option<pgrx::JsonB> = spi::one_fixed(HOOKS);
        let Some(found) = found else {
            return Hooks::default();
        };
        let text = |field: &str| found.0[field].as_str().map(str::to_owned);
        Hooks {
            known: text("known"),
            filing: text("filing"),
            place: text("place"),
        }
    }
}

/// A sender the server knows, and how its rows are filed.
#[derive(Clone, Debug)]
pub struct Sender {
    pub replica: Uuid,
    /// What `known` answered (None without the hook).
    pub known: Option<Value>,
    pub hooks: Hooks,
    /// Who called the engine: the hooks run as it, and so do the
    /// statements over the host's tables unless the filing hook took
    /// another role.
    caller: Caller,
    /// The role the filing hook took, for the host's tables (None: the
    /// caller's).
    role_for_rows: Option<pg_sys::Oid>,
}

/// Whether the replicas' relation has this id.
fn in_the_replicas_relation(replica: Uuid) -> bool {
    let Some(source) = catalog::replicas() else {
        return false;
    };
    spi::one::<bool>(
        &format!(
            "SELECT EXISTS (SELECT 1 FROM {rel} AS r WHERE (r.{id})::uuid = $1)",
            rel = source.relation,
            id = quote_ident(&source.id_column),
        ),
        &[to_pg(replica).into()],
    )
    .unwrap_or(false)
}

/// The sender, when the server knows it; None (logged) otherwise. The
/// replicas' relation is read as the engine (the relay reads it so), the
/// `known` hook run as `caller`.
pub fn recognise(replica: Uuid, caller: &Caller) -> Option<Sender> {
    if !in_the_replicas_relation(replica) {
        pgrx::log!(
            "magic_sync: an Up from {replica}, which the replicas' relation does not know: dropped"
        );
        return None;
    }
    let hooks = Hooks::read();
    let known = match &hooks.known {
        None => None,
        Some(function) => {
            let answer: Option<pgrx::JsonB> =
                acting::as_host(caller.role, &caller.search_path, || {
                    spi::one(
                        &format!("SELECT pg_catalog.to_jsonb({function}($1))"),
                        &[to_pg(replica).into()],
                    )
                });
            match answer {
                Some(known) if !known.0.is_null() => Some(known.0),
                _ => {
                    pgrx::log!("magic_sync: an Up from {replica}, of whom {function} knows nothing: dropped");
                    return None;
                }
            }
        }
    };
    Some(Sender {
        replica,
        known,
        hooks,
        caller: caller.clone(),
        role_for_rows: None,
    })
}

fn role_setting() -> String {
    spi::one::<String>(ROLE_SETTING, &[]).unwrap_or_else(|| "none".to_owned())
}

/// Why an error of a hook is kept with the rows (None: it is not to be
/// kept, but raised again): a failure a resend cannot cure.
fn lasting_failure(caught: &CaughtError) -> Option<String> {
    match caught {
        CaughtError::PostgresError(report) | CaughtError::ErrorReport(report) => {
            let state = error::sqlstate_text(report.sql_error_code());
            (!error::is_transient(&state)).then(|| report.message().to_owned())
        }
        CaughtError::RustPanic { .. } => None,
    }
}

impl Sender {
    /// What is known of the sender, as the hooks take it.
    pub fn known_json(&self) -> pgrx::JsonB {
        pgrx::JsonB(self.known.clone().unwrap_or(Value::Null))
    }

    /// Runs the filing hook before the sender's rows are filed, as the
    /// caller, in a savepoint. Answers why it failed, for a failure a
    /// resend cannot cure (a transient one fails the call).
    pub fn begin_filing(&mut self) -> Option<String> {
        let function = self.hooks.filing.clone()?;
        let statement = format!("SELECT {function}($1, $2)");
        let (outcome, took) = acting::as_caller(&self.caller, || {
            let before = role_setting();
            let outcome = acting::in_subtransaction(|| {
                spi::run_with(
                    &statement,
                    &[to_pg(self.replica).into(), self.known_json().into()],
                );
                // In the savepoint: a hook that set it for the session
                // fails, and keeps the rows.
                acting::insist_on_search_path(&self.caller.search_path);
            });
            // The role it took is kept for the host's tables, and the role
            // setting given back while still the caller: the switch back
            // to the engine leaves PostgreSQL's role and user agreeing.
            let took = acting::current_user();
            if role_setting() != before {
                spi::run_with(SET_ROLE_SETTING, &[before.as_str().into()]);
            }
            if acting::current_user() != self.caller.role {
                Error::engine(
                    "magic_sync: the role the filing hook took could not be given back",
                    function.as_str(),
                )
                .raise();
            }
            (outcome, took)
        });
        if took != self.caller.role {
            self.role_for_rows = Some(took);
        }
        match outcome {
            Ok(()) => None,
            Err(caught) => match lasting_failure(&caught) {
                Some(why) => Some(format!("the filing hook {function} failed: {why}")),
                None => (*caught).rethrow(),
            },
        }
    }

    /// The role the statements that read and write the host's tables run
    /// as: the one the filing hook took, or the caller.
    pub fn runs_as(&self) -> pg_sys::Oid {
        self.role_for_rows.unwrap_or(self.caller.role)
    }

    /// The search_path they run with: the caller's.
    pub fn search_path(&self) -> &str {
        &self.caller.search_path
    }

    /// Runs `work`, which reads the host's tables, as `runs_as`.
    pub fn as_sender<R>(&self, work: impl FnOnce() -> R) -> R {
        acting::as_host(self.runs_as(), self.search_path(), work)
    }
}

//! What the server knows of a sender (the book's `Senders`), as the host
//! declared it with `sync.declare_senders(known, filing, place)`:
//!
//! - a sender is one the replicas' relation knows (`sync.declare_replicas`),
//!   and, with a `known` function, one it answers something for: what it
//!   answers (as jsonb) is handed to the other two. Any other sender is
//!   dropped, with a log line;
//! - `filing(replica, known)` runs before the sender's rows are filed, in
//!   the filing transaction: `set_config(..., true)` for row policies, or
//!   `SET LOCAL ROLE`. A role it takes holds only for the statements that
//!   write the host's tables: the engine's own bookkeeping runs as the
//!   caller;
//! - `place(replica, known, table, row)` answers each uploaded row as it is
//!   to be filed: stamped with what the server knows (a company id).

use serde_json::Value;
use uuid::Uuid;

use crate::catalog;
use crate::catalog::table_sql::quote_ident;
use crate::spi::{self, to_pg};

/// The hooks declared, each a function name, schema-qualified and quoted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Hooks {
    pub known: Option<String>,
    pub filing: Option<String>,
    pub place: Option<String>,
}

impl Hooks {
    pub fn read() -> Hooks {
        let found: Option<pgrx::JsonB> = spi::one(
            "SELECT jsonb_build_object('known', known, 'filing', filing, 'place', place) FROM sync.senders",
            &[],
        );
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
    /// The role the engine's statements run as, and the one the filing hook
    /// left for the host's tables (None: the same).
    role_before: String,
    role_for_rows: Option<String>,
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

/// The sender, when the server knows it; None (logged) otherwise.
pub fn recognise(replica: Uuid) -> Option<Sender> {
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
            let answer: Option<pgrx::JsonB> = spi::one(
                &format!("SELECT to_jsonb({function}($1))"),
                &[to_pg(replica).into()],
            );
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
        role_before: current_role(),
        role_for_rows: None,
    })
}

fn current_role() -> String {
    spi::one::<String>("SELECT current_setting('role')", &[]).unwrap_or_else(|| "none".to_owned())
}

fn set_role(role: &str) {
    spi::run_with("SELECT set_config('role', $1, true)", &[role.into()]);
}

impl Sender {
    /// What is known of the sender, as the hooks take it.
    pub fn known_json(&self) -> pgrx::JsonB {
        pgrx::JsonB(self.known.clone().unwrap_or(Value::Null))
    }

    /// Runs the filing hook before the sender's rows are filed. Answers why
    /// it failed, for a failure a resend cannot cure (a transient one fails
    /// the call).
    pub fn begin_filing(&mut self) -> Option<String> {
        let function = self.hooks.filing.clone()?;
        let failure: Option<String> = spi::one(
            "SELECT sync_internal.run_hook($1, $2, $3)",
            &[
                format!("SELECT {function}($1, $2)").as_str().into(),
                to_pg(self.replica).into(),
                self.known_json().into(),
            ],
        );
        let role = current_role();
        if role != self.role_before {
            self.role_for_rows = Some(role);
            set_role(&self.role_before);
        }
        failure.map(|why| format!("the filing hook {function} failed: {why}"))
    }

    /// The role the filing hook took, which the statements that write the
    /// host's tables run as (sql/filing.sql switches to it around them).
    pub fn runs_as(&self) -> Option<String> {
        self.role_for_rows.clone()
    }

    /// Runs `work`, which reads the host's tables, as the filing hook left
    /// the role.
    pub fn as_sender<R>(&self, work: impl FnOnce() -> R) -> R {
        let Some(role) = &self.role_for_rows else {
            return work();
        };
        set_role(role);
        let answer = work();
        set_role(&self.role_before);
        answer
    }
}

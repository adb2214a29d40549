//! Who filing runs as (docs/src/filing.md, "Who the rows are written as").
//!
//! `sync.receive` runs as the extension's owner, so a gateway's role needs
//! EXECUTE on it and no right on the engine's tables. What the host sees
//! stays the caller's: the hooks, the place function and the statements
//! that read and write the host's tables run as the role that called
//! `sync.receive`, or as the role its filing hook took with `SET LOCAL
//! ROLE`, with the caller's search_path. So the host's grants and row
//! policies apply to a gateway as before, and a gateway files as a role
//! only if PostgreSQL lets it `SET ROLE` to it.
//!
//! The switches are PostgreSQL's own: `SetUserIdAndSecContext`, as
//! `fmgr_security_definer` (src/backend/utils/fmgr/fmgr.c) and REFRESH
//! MATERIALIZED VIEW do, and a GUC nest level for the search_path, as a
//! function's `SET` clause has. `sync.receive` is not marked SECURITY
//! DEFINER because it must know who called it and in what context: a
//! security-definer function has lost both before its code runs.
//!
//! Each switch is undone when its work returns. When the work raises an
//! error, nothing here undoes it: the (sub)transaction the error ends in
//! does, as after an error in a security-definer function. Its abort calls
//! `SetUserIdAndSecContext(prevUser, prevSecContext)` with the user and
//! context saved when it began (AbortTransaction and AbortSubTransaction,
//! src/backend/access/transam/xact.c), and pops the GUC levels begun in it
//! (AtEOXact_GUC / AtEOSubXact_GUC). Every caller of the engine ends an
//! error that way: a PL/pgSQL exception block rolls back its savepoint, the
//! relay worker aborts its transaction (publish/transaction.rs), and
//! `in_subtransaction` below rolls back its own.

use std::ffi::{CStr, CString};
use std::panic::AssertUnwindSafe;

use pgrx::pg_sys::panic::CaughtError;
use pgrx::prelude::*;

use crate::error::Error;
use crate::spi;
use crate::statements::file::acting::EXTENSION_OWNER;

/// The search_path the engine's own statements run with while it acts as
/// the owner, as the status reads have theirs (sql/privileges.sql): every
/// name of the engine's is schema-qualified, and nothing a caller created
/// can stand in for a function or an operator of pg_catalog.
const ENGINE_SEARCH_PATH: &str = "pg_catalog, pg_temp";

/// Who called the engine, as PostgreSQL had it then: the current user, its
/// security context (whether it was inside a security-definer function or
/// a security-restricted operation) and its search_path.
#[derive(Clone, Debug)]
pub struct Caller {
    pub role: pg_sys::Oid,
    context: i32,
    pub search_path: String,
}

impl Caller {
    /// Whoever runs now: the caller of sync.refile, the relay's own.
    pub fn here() -> Caller {
        let (role, context) = identity();
        Caller {
            role,
            context,
            search_path: current_search_path(),
        }
    }
}

/// The current user and security context.
fn identity() -> (pg_sys::Oid, i32) {
    let mut user = pg_sys::InvalidOid;
    let mut context = 0;
    // SAFETY: it only writes the two values through the pointers, which
    // point at these locals.
    unsafe { pg_sys::GetUserIdAndSecContext(&mut user, &mut context) };
    (user, context)
}

/// The current user: the role a query now runs as.
pub fn current_user() -> pg_sys::Oid {
    identity().0
}

/// Makes `user` the current user, in `context`.
fn become_user(user: pg_sys::Oid, context: i32) {
    // SAFETY: it sets two variables of the backend and cannot fail. Every
    // user given here is an existing role (the caller, the owner, or the
    // role a filing hook took), and every switch is undone when its work
    // returns, or by the abort of the (sub)transaction an error ends in
    // (see the module's comment).
    unsafe { pg_sys::SetUserIdAndSecContext(user, context) };
}

fn current_search_path() -> String {
    // SAFETY: search_path always exists; the value is a string the GUC
    // machinery owns, copied here before anything can change it.
    unsafe {
        let value = pg_sys::GetConfigOption(c"search_path".as_ptr(), false, false);
        CStr::from_ptr(value).to_string_lossy().into_owned()
    }
}

/// Begins a GUC nest level with `path` as the search_path, as a function's
/// SET clause does.
fn enter_search_path(path: &str) -> i32 {
    let value = CString::new(path).unwrap_or_else(|_| {
        Error::engine("magic_sync: a search_path with a NUL in it", path).raise()
    });
    // SAFETY: as fmgr_security_definer applies a function's SET clause: a
    // new nest level, then the value saved at it (GUC_ACTION_SAVE), so
    // popping the level (leave_search_path) restores the one before. An
    // invalid value raises an ERROR, whose abort pops the level.
    unsafe {
        let level = pg_sys::NewGUCNestLevel();
        pg_sys::set_config_option(
            c"search_path".as_ptr(),
            value.as_ptr(),
            pg_sys::GucContext::PGC_USERSET,
            pg_sys::GucSource::PGC_S_SESSION,
            pg_sys::GucAction::GUC_ACTION_SAVE,
            true,
            0,
            false,
        );
        level
    }
}

/// Pops the nest level `enter_search_path` began: the search_path is the
/// one before, and what was set LOCAL in the level (a filing hook's
/// set_config(..., true), SET LOCAL ROLE) stays for the transaction.
fn leave_search_path(level: i32) {
    // SAFETY: the level enter_search_path began, the innermost one: every
    // level begun inside it was popped by its own code.
    unsafe { pg_sys::AtEOXact_GUC(true, level) };
}

/// Raises an error when the host's code changed the search_path for the
/// session (a plain SET, which outlives the nest level): the engine's
/// statements, run as the owner, never take a search_path the host's code
/// chose. Inside a savepoint, undoing it undoes the change too.
pub fn insist_on_search_path(path: &str) {
    let now = current_search_path();
    if now != path {
        Error::not_as_declared(
            format!("magic_sync: the host's code that filing ran set the search_path to {now:?}"),
            "A hook, place function or trigger that filing runs may set the search_path only for \
             itself (a function's SET clause) or locally (SET LOCAL, set_config(..., true)).",
        )
        .raise();
    }
}

/// Runs `work` as `user` in `context` with `search_path`, and returns to
/// who ran before.
fn running_as<R>(
    user: pg_sys::Oid,
    context: i32,
    search_path: &str,
    work: impl FnOnce() -> R,
) -> R {
    let (saved_user, saved_context) = identity();
    become_user(user, context);
    let level = enter_search_path(search_path);
    let answer = work();
    insist_on_search_path(search_path);
    leave_search_path(level);
    become_user(saved_user, saved_context);
    answer
}

/// Runs `work` as the extension's owner with the engine's search_path, as
/// a SECURITY DEFINER function would, handing it who called.
pub fn as_owner<R>(work: impl FnOnce(&Caller) -> R) -> R {
    let caller = Caller::here();
    // The owner is looked up with the engine's search_path, still as the
    // caller (pg_extension is everyone's to read).
    let level = enter_search_path(ENGINE_SEARCH_PATH);
    let owner: pg_sys::Oid = spi::one_fixed(EXTENSION_OWNER)
        .unwrap_or_else(|| Error::missing("the extension magic_sync's owner").raise());
    become_user(
        owner,
        caller.context | pg_sys::SECURITY_LOCAL_USERID_CHANGE as i32,
    );
    let answer = work(&caller);
    leave_search_path(level);
    become_user(caller.role, caller.context);
    answer
}

/// Runs `work`, which reads or writes the host's tables, as `role` with
/// the caller's search_path. It runs as a security-definer function's body
/// does: it may not SET ROLE (which would leave PostgreSQL's idea of the
/// role and the user apart once the switch is undone).
pub fn as_host<R>(role: pg_sys::Oid, search_path: &str, work: impl FnOnce() -> R) -> R {
    let (_, context) = identity();
    running_as(
        role,
        context | pg_sys::SECURITY_LOCAL_USERID_CHANGE as i32,
        search_path,
        work,
    )
}

/// Runs `work` (a filing hook) exactly as the caller ran: its user, its
/// context, its search_path. A hook called by a session's role may SET
/// LOCAL ROLE; one called from inside a security-definer function may not,
/// as PostgreSQL has it. Whatever role `work` takes, it must give back
/// before it returns (Sender::begin_filing does), so that PostgreSQL's role
/// setting and its user agree again when the switch is undone.
pub fn as_caller<R>(caller: &Caller, work: impl FnOnce() -> R) -> R {
    running_as(caller.role, caller.context, &caller.search_path, work)
}

/// Runs `work` in a subtransaction of its own, begun as whoever runs now:
/// committed when it returns, rolled back when it raises an ERROR, which
/// is answered. Rolling it back restores the user, the context and the
/// settings (a role taken with SET LOCAL ROLE too) to what they were when
/// it began. As PL/Python's subtransactions do (plpy_subxactobject.c).
pub fn in_subtransaction<R>(work: impl FnOnce() -> R) -> Result<R, Box<CaughtError>> {
    // SAFETY: called inside a transaction (sync.receive, sync.refile, a
    // relay's), in which a subtransaction may begin. The memory context
    // and resource owner are the caller's again once it ends, either way.
    let (memory, owner) = unsafe {
        let memory = pg_sys::CurrentMemoryContext;
        let owner = pg_sys::CurrentResourceOwner;
        pg_sys::BeginInternalSubTransaction(std::ptr::null());
        pg_sys::MemoryContextSwitchTo(memory);
        (memory, owner)
    };
    let work = AssertUnwindSafe(work);
    let outcome = PgTryBuilder::new(AssertUnwindSafe(|| Ok((work.0)())))
        .catch_others(|caught| Err(Box::new(caught)))
        .execute();
    // SAFETY: the subtransaction begun above is the current one: `work`
    // ends every subtransaction it begins (SPI and PL/pgSQL do), and an
    // ERROR was caught and its error state flushed by pgrx.
    unsafe {
        match outcome {
            Ok(_) => pg_sys::ReleaseCurrentSubTransaction(),
            Err(_) => pg_sys::RollbackAndReleaseCurrentSubTransaction(),
        }
        pg_sys::MemoryContextSwitchTo(memory);
        pg_sys::CurrentResourceOwner = owner;
    }
    outcome
}

/// `sync_internal.file_as`: a filing statement over rows ($1, then the
/// sender, what is known of it and the table as $2 to $4), run as `role`.
/// Answers how many rows it filed.
pub fn file_as(
    role: pg_sys::Oid,
    search_path: &str,
    statement: &str,
    rows: pgrx::JsonB,
    replica: pgrx::Uuid,
    known: pgrx::JsonB,
    table_name: &str,
) -> i64 {
    as_host(role, search_path, || {
        spi::one::<i64>(
            statement,
            &[rows.into(), replica.into(), known.into(), table_name.into()],
        )
        .unwrap_or(0)
    })
}

/// `sync_internal.place_as`: the host's place function (its name as
/// sync.senders keeps it, quoted) on one row, run as `role`. Answers the
/// row as it is to be filed.
pub fn place_as(
    role: pg_sys::Oid,
    search_path: &str,
    place: &str,
    replica: pgrx::Uuid,
    known: pgrx::JsonB,
    table_name: &str,
    row: pgrx::JsonB,
) -> Option<pgrx::JsonB> {
    as_host(role, search_path, || {
        spi::one::<pgrx::JsonB>(
            &format!("SELECT {place}($1, $2, $3, $4)"),
            &[replica.into(), known.into(), table_name.into(), row.into()],
        )
    })
}

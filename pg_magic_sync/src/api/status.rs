//! The status reads of rows (docs/src/status-rows.md): thin wrappers over
//! status/. Each is STABLE: it reads one snapshot and writes nothing.

use pgrx::prelude::*;

use crate::error::Error;
use crate::status;
use crate::version;

/// `sync.progress(scope)`: per live replica of the scope and per table that
/// goes down, what it holds, should hold, has on its way, lets go, and has
/// set aside.
#[pg_extern(stable)]
fn progress(scope: default!(Option<pgrx::JsonB>, "NULL")) -> pgrx::JsonB {
    version::check();
    pgrx::JsonB(status::progress::progress(scope.map(|s| s.0)))
}

crate::spi::function_info_v1!(pg_finfo_status_row_progress);

/// `sync.row_progress(scope, table_name, key)`: the row's state on each live
/// replica of the scope it concerns. A V1 function declared in
/// sql/status_rows.sql, so that the jsonb its query builds is returned as
/// it is, never read into Rust and written back.
///
/// # Safety
/// PostgreSQL calls it, as the V1 function `status_row_progress`, with the
/// call's own `fcinfo`.
#[unsafe(no_mangle)]
#[pg_guard]
pub unsafe extern "C-unwind" fn status_row_progress(
    fcinfo: pg_sys::FunctionCallInfo,
) -> pg_sys::Datum {
    // SAFETY: fcinfo is the call's own, with the three arguments its SQL
    // declaration gives it: jsonb, text, text.
    let (scope, table_name, key) = unsafe {
        (
            pgrx::fcinfo::pg_getarg::<pgrx::JsonB>(fcinfo, 0),
            pgrx::fcinfo::pg_getarg::<String>(fcinfo, 1),
            pgrx::fcinfo::pg_getarg::<String>(fcinfo, 2),
        )
    };
    let (Some(table_name), Some(key)) = (table_name, key) else {
        Error::bad_input(
            "magic_sync: sync.row_progress takes a table's name and a key, not NULL",
            "Name the table as replicas know it and the row's key.",
        )
        .raise()
    };
    status::row_progress::row_progress(scope.map(|s| s.0), &table_name, &key)
        .unwrap_or_else(|e| e.raise())
}

/// `sync.explain(replica, table_name, key)`: why the row is, or is not, on
/// the replica, as the planner sees it now.
#[pg_extern(stable)]
fn explain(replica: pgrx::Uuid, table_name: &str, key: &str) -> pgrx::JsonB {
    version::check();
    status::explain::explain(replica, table_name, key)
        .map(pgrx::JsonB)
        .unwrap_or_else(|e| e.raise())
}

// A read's SQL is planned afresh each call, and its estimates (a recursive
// walk, a set-returning scope) run high enough to set the JIT compiling for
// seconds what runs in milliseconds: the reads run without it.
//
// Progress is planned for the replicas it is asked of (a custom plan):
// one replica's rows are read by index, every replica's in one scan, and a
// plan kept for one would be wrong for the other.
extension_sql!(
    "ALTER FUNCTION sync.progress(jsonb) SET jit = off;\n\
     ALTER FUNCTION sync.progress(jsonb) SET plan_cache_mode = force_custom_plan;\n\
     ALTER FUNCTION sync.explain(uuid, text, text) SET jit = off;\n",
    name = "status_rows_without_jit",
    requires = [progress, explain]
);

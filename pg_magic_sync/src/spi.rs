//! Small helpers over SPI: running the engine's SQL and converting values.
//!
//! A statement with parameters, and one asked for with `fixed`, is
//! prepared once per session and its plan kept: planning the engine's
//! short statements cost as much as running them (filing an Up runs about
//! ten). A statement over a pass's scratch tables, which change size from
//! one pass to the next, keeps its plan only while every one it names is
//! small: made for small tables, the plan serves them whenever they are
//! small again, and a large one is planned for its size each time. (A pass
//! of one note planned its forty statements in about 4 ms and ran them in
//! about 1.5.)

use std::cell::RefCell;
use std::collections::HashMap;
use std::mem::ManuallyDrop;
use std::rc::Rc;

use pgrx::datum::DatumWithOid;
use pgrx::prelude::*;
use pgrx::spi::{OwnedPreparedStatement, SpiClient};
use pgrx::PgOid;

use crate::error::Error;
use crate::statements::spi::{SETTING_NOW, SET_FOR_THE_TRANSACTION};
use crate::temp_tables;

/// Plans kept per statement text: whether it writes, the types of its
/// arguments, the plan.
type Kept = Vec<(bool, Vec<pg_sys::Oid>, Rc<KeptPlan>)>;

/// A plan SPI keeps for the rest of the session. Never freed: PostgreSQL
/// frees it with the process, and freeing it from Rust as the process
/// exits (thread-local destructors) would run SPI with nothing set up.
struct KeptPlan(ManuallyDrop<OwnedPreparedStatement>);

thread_local! {
    static PLANS: RefCell<HashMap<String, Kept>> = RefCell::new(HashMap::new());
}

/// The most statements whose plans a session keeps; past it, new ones are
/// planned each time (the engine's fixed statements are far fewer).
const MOST_PLANS: usize = 1024;

/// Whether a statement's plan is kept (or a kept one used): one over the
/// scratch tables while they are all small, any other when it has
/// parameters or is `fixed`.
fn worth_keeping(sql: &str, args: &[DatumWithOid], fixed: bool) -> bool {
    if sql.contains("sync_pass_") {
        return one_command(sql) && temp_tables::named_scratch_all_small(sql);
    }
    fixed || !args.is_empty()
}

/// Whether `sql` is one query or one data-changing command: what SPI can
/// prepare (several commands cannot be, and DDL is not worth it).
fn one_command(sql: &str) -> bool {
    let first = sql.split_whitespace().next().unwrap_or("");
    let commands = ["SELECT", "INSERT", "UPDATE", "DELETE", "WITH"];
    !sql.contains(';') && commands.iter().any(|c| first.eq_ignore_ascii_case(c))
}

/// The kept plan of `sql` for these arguments, prepared now if it is not
/// kept yet; None when it is not to be kept.
fn kept_plan(
    client: &SpiClient<'_>,
    sql: &str,
    args: &[DatumWithOid],
    writes: bool,
    fixed: bool,
) -> Option<Rc<KeptPlan>> {
    if !worth_keeping(sql, args, fixed) {
        return None;
    }
    let types: Vec<pg_sys::Oid> = args.iter().map(|a| a.oid()).collect();
    let found = PLANS.with(|plans| {
        plans.borrow().get(sql).and_then(|kept| {
            kept.iter()
                .find(|(w, t, _)| *w == writes && *t == types)
                .map(|(_, _, plan)| plan.clone())
        })
    });
    if found.is_some() {
        return found;
    }
    if PLANS.with(|plans| plans.borrow().len()) >= MOST_PLANS {
        return None;
    }
    let oids: Vec<PgOid> = types.iter().map(|t| PgOid::from(*t)).collect();
    let prepared = if writes {
        client.prepare_mut(sql, &oids)
    } else {
        client.prepare(sql, &oids)
    }
    .unwrap_or_else(|e| Error::spi(sql, e).raise());
    let plan = Rc::new(KeptPlan(ManuallyDrop::new(prepared.keep())));
    PLANS.with(|plans| {
        plans
            .borrow_mut()
            .entry(sql.to_owned())
            .or_default()
            .push((writes, types, plan.clone()))
    });
    Some(plan)
}

/// Whether the session keeps a plan of `sql` (of any arguments).
#[cfg(any(test, feature = "pg_test"))]
pub fn is_kept(sql: &str) -> bool {
    PLANS.with(|plans| plans.borrow().contains_key(sql))
}

/// Runs `sql` (or its kept plan) through a client that may write.
fn execute<'conn>(
    client: &mut SpiClient<'conn>,
    sql: &str,
    limit: Option<i64>,
    args: &[DatumWithOid],
    fixed: bool,
) -> pgrx::spi::SpiTupleTable<'conn> {
    // The plan is cloned out of the cache first: running it may file or
    // relay through these same helpers.
    let outcome = match kept_plan(client, sql, args, true, fixed) {
        Some(plan) => client.update(&*plan.0, limit, args),
        None => client.update(sql, limit, args),
    };
    outcome.unwrap_or_else(|e| Error::spi(sql, e).raise())
}

/// Runs SQL that answers no rows; a failure is the statement's own error.
pub fn run(sql: &str) {
    Spi::connect_mut(|client| {
        execute(client, sql, None, &[], false);
    });
}

/// Turns one of the planner's methods (`enable_nestloop`, say) off for
/// what is planned next; answers its setting, for `put_back`.
fn planner_method_off(method: &str) -> String {
    let setting = one::<String>(SETTING_NOW, &[method.into()]).unwrap_or_else(|| "on".to_owned());
    run_with(SET_FOR_THE_TRANSACTION, &[method.into(), "off".into()]);
    setting
}

/// Puts a planner method's setting back as `planner_method_off` found it.
fn put_back(method: &str, setting: &str) {
    run_with(SET_FOR_THE_TRANSACTION, &[method.into(), setting.into()]);
}

/// Runs SQL that answers no rows, planned now and without nested loops
/// (then as before): for a join with a table whose statistics cannot be
/// trusted to size it (see relay/plan's CHANGED_ROWS).
pub fn run_without_nested_loops(sql: &str) {
    let setting = planner_method_off("enable_nestloop");
    Spi::connect_mut(|client| {
        client
            .update(sql, None, &[])
            .unwrap_or_else(|e| Error::spi(sql, e).raise());
    });
    put_back("enable_nestloop", &setting);
}

/// Runs SQL with arguments that answers no rows.
pub fn run_with(sql: &str, args: &[DatumWithOid]) {
    Spi::connect_mut(|client| {
        execute(client, sql, None, args, false);
    });
}

/// Runs SQL with arguments that writes rows and answers none: answers how
/// many it wrote.
pub fn run_counting(sql: &str, args: &[DatumWithOid]) -> u64 {
    Spi::connect_mut(|client| execute(client, sql, None, args, false).len() as u64)
}

/// The first column of the first row of a query, if it answers a row and
/// that value is not null.
pub fn one<T: FromDatum + IntoDatum>(sql: &str, args: &[DatumWithOid]) -> Option<T> {
    Spi::connect_mut(|client| {
        let mut rows = execute(client, sql, Some(1), args, false);
        rows.next().and_then(|row| row.get::<T>(1).ok().flatten())
    })
}

/// As `one`, for a fixed query with no parameters that runs often (filing
/// a report, taking a message): its plan is kept too. Parsed and planned
/// at every call, such a query cost a report more than running it.
pub fn one_fixed<T: FromDatum + IntoDatum>(sql: &'static str) -> Option<T> {
    Spi::connect_mut(|client| {
        let mut rows = execute(client, sql, Some(1), &[], true);
        rows.next().and_then(|row| row.get::<T>(1).ok().flatten())
    })
}

/// Runs `work` with what PostgreSQL allocates for it in a scratch memory
/// context, freed when it returns, so a long pass does not pile up what
/// each chunk needed. `work` answers Rust values only.
pub fn in_scratch<R>(work: impl FnOnce() -> R) -> R {
    let mut scratch = pgrx::PgMemoryContexts::new("magic_sync scratch");
    // SAFETY: the context lives until the end of this function, and what
    // `work` answers is owned by Rust, not allocated in it.
    unsafe { scratch.switch_to(|_| work()) }
}

/// Reads a query's rows a chunk at a time, handing each chunk to `each`,
/// which may itself run SQL. Only one chunk is in memory at a time.
pub fn for_each_chunk<T>(
    sql: &str,
    chunk: i64,
    read: impl Fn(&pgrx::spi::SpiHeapTupleData) -> T,
    each: impl FnMut(Vec<T>),
) {
    for_each_chunk_with(sql, &[], chunk, read, each)
}

/// As `for_each_chunk`, for a query with arguments.
pub fn for_each_chunk_with<T>(
    sql: &str,
    args: &[DatumWithOid],
    chunk: i64,
    read: impl Fn(&pgrx::spi::SpiHeapTupleData) -> T,
    each: impl FnMut(Vec<T>),
) {
    chunks(sql, args, Scans::Any, chunk, read, each)
}

/// As `for_each_chunk`, for a query planned with no index scans (a table
/// read whole, in order: from its pages and sorted, which is several times
/// faster than through its index). Only this query is planned so: what
/// `each` runs is planned as usual, and so are the plans it keeps.
pub fn for_each_chunk_scanning_pages<T>(
    sql: &str,
    chunk: i64,
    read: impl Fn(&pgrx::spi::SpiHeapTupleData) -> T,
    each: impl FnMut(Vec<T>),
) {
    chunks(sql, &[], Scans::PagesOnly, chunk, read, each)
}

/// How a cursor's query may be planned.
#[derive(Clone, Copy, PartialEq)]
enum Scans {
    Any,
    PagesOnly,
}

fn chunks<T>(
    sql: &str,
    args: &[DatumWithOid],
    scans: Scans,
    chunk: i64,
    read: impl Fn(&pgrx::spi::SpiHeapTupleData) -> T,
    mut each: impl FnMut(Vec<T>),
) {
    // A cursor's query is planned when it opens, and only then.
    let restore = (scans == Scans::PagesOnly).then(|| planner_method_off("enable_indexscan"));
    Spi::connect(|client| {
        let opened = match kept_plan(client, sql, args, false, false) {
            Some(plan) => client.try_open_cursor(&*plan.0, args),
            None => client.try_open_cursor(sql, args),
        };
        if let Some(setting) = &restore {
            put_back("enable_indexscan", setting);
        }
        let mut cursor = opened.unwrap_or_else(|e| Error::spi(sql, e).raise());
        loop {
            let rows: Vec<T> = in_scratch(|| {
                let rows = cursor
                    .fetch(chunk as _)
                    .unwrap_or_else(|e| Error::spi(sql, e).raise())
                    .map(|row| read(&row))
                    .collect();
                // SPI keeps every fetched table until it disconnects: free each.
                // SAFETY: SPI_tuptable is the table this fetch made; `rows`
                // was copied out of it above, and nothing reads it after.
                unsafe { pg_sys::SPI_freetuptable(pg_sys::SPI_tuptable) };
                rows
            });
            if rows.is_empty() {
                break;
            }
            in_scratch(|| each(rows));
        }
    });
}

pub fn to_pg(id: uuid::Uuid) -> pgrx::Uuid {
    pgrx::Uuid::from_bytes(*id.as_bytes())
}

pub fn from_pg(id: pgrx::Uuid) -> uuid::Uuid {
    uuid::Uuid::from_bytes(*id.as_bytes())
}

/// Says a C function written by hand takes the version-1 calling
/// convention, as PG_FUNCTION_INFO_V1 does in C: PostgreSQL calls
/// `pg_finfo_<name>` to learn it before it calls `<name>`.
macro_rules! function_info_v1 {
    ($info:ident) => {
        #[unsafe(no_mangle)]
        #[doc(hidden)]
        pub extern "C" fn $info() -> &'static pgrx::pg_sys::Pg_finfo_record {
            const V1: pgrx::pg_sys::Pg_finfo_record =
                pgrx::pg_sys::Pg_finfo_record { api_version: 1 };
            &V1
        }
    };
}
pub(crate) use function_info_v1;

/// A column of a row of the engine's own tables that is never NULL: a NULL
/// there (or a value of another type) is an engine fault, raised as one.
pub fn column<T: FromDatum + IntoDatum>(
    row: &pgrx::spi::SpiHeapTupleData,
    ordinal: usize,
    what: &str,
) -> T {
    match row.get::<T>(ordinal) {
        Ok(Some(value)) => value,
        Ok(None) => Error::missing(what).raise(),
        Err(e) => Error::engine(format!("magic_sync: {what} cannot be read: {e}"), what).raise(),
    }
}

/// A column of a row of the engine's own tables that may be NULL.
pub fn nullable<T: FromDatum + IntoDatum>(
    row: &pgrx::spi::SpiHeapTupleData,
    ordinal: usize,
    what: &str,
) -> Option<T> {
    row.get::<T>(ordinal).unwrap_or_else(|e| {
        Error::engine(format!("magic_sync: {what} cannot be read: {e}"), what).raise()
    })
}

/// Runs a query of the engine's own, raising its failure as an engine
/// fault with the SQL in the detail.
pub fn select<R>(
    sql: &str,
    limit: Option<i64>,
    args: &[DatumWithOid],
    read: impl FnOnce(pgrx::spi::SpiTupleTable) -> R,
) -> R {
    select_kept(sql, limit, args, false, read)
}

/// The one value a query of the engine's own answers, as the datum it is,
/// copied out of SPI's memory into the caller's, for a function to return
/// unconverted (a large jsonb read into Rust and written back costs more
/// than the query that built it). None when it answers no row or NULL.
pub fn select_datum(sql: &str, args: &[DatumWithOid]) -> Option<pg_sys::Datum> {
    select(sql, Some(1), args, |rows| {
        let rows = rows.first();
        if rows.is_empty() {
            return None;
        }
        let value = rows
            .get_datum_by_ordinal(1)
            .unwrap_or_else(|e| Error::spi(sql, e).raise())?;
        // SAFETY: still connected to SPI (inside select's closure), and the
        // value is a varlena of the row SPI answered (by reference, length
        // -1, as the callers' jsonb is): SPI_datumTransfer copies it into
        // the memory of the function that connected, which outlives SPI's.
        Some(unsafe { pg_sys::SPI_datumTransfer(value, false, -1) })
    })
}

/// As `select`, for a fixed query with no parameters that runs often (the
/// declarations): its plan is kept too.
pub fn select_fixed<R>(sql: &'static str, read: impl FnOnce(pgrx::spi::SpiTupleTable) -> R) -> R {
    select_kept(sql, None, &[], true, read)
}

fn select_kept<R>(
    sql: &str,
    limit: Option<i64>,
    args: &[DatumWithOid],
    fixed: bool,
    read: impl FnOnce(pgrx::spi::SpiTupleTable) -> R,
) -> R {
    Spi::connect(|client| {
        let outcome = match kept_plan(client, sql, args, false, fixed) {
            Some(plan) => client.select(&*plan.0, limit, args),
            None => client.select(sql, limit, args),
        };
        read(outcome.unwrap_or_else(|e| Error::spi(sql, e).raise()))
    })
}

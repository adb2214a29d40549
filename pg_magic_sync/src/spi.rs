//! Small helpers over SPI: running the engine's SQL and converting values.

use pgrx::datum::DatumWithOid;
use pgrx::prelude::*;

use crate::error::Error;

/// Runs SQL that answers no rows; a failure is the statement's own error.
pub fn run(sql: &str) {
    Spi::run(sql).unwrap_or_else(|e| Error::spi(sql, e).raise());
}

/// Runs SQL with arguments that answers no rows.
pub fn run_with(sql: &str, args: &[DatumWithOid]) {
    Spi::run_with_args(sql, args).unwrap_or_else(|e| Error::spi(sql, e).raise());
}

/// Runs SQL with arguments that writes rows and answers none: answers how
/// many it wrote.
pub fn run_counting(sql: &str, args: &[DatumWithOid]) -> u64 {
    Spi::connect_mut(|client| {
        let written = client
            .update(sql, None, args)
            .unwrap_or_else(|e| Error::spi(sql, e).raise());
        written.len() as u64
    })
}

/// The first column of the first row of a query, if it answers a row and
/// that value is not null.
pub fn one<T: FromDatum + IntoDatum>(sql: &str, args: &[DatumWithOid]) -> Option<T> {
    Spi::connect_mut(|client| {
        let mut rows = client
            .update(sql, Some(1), args)
            .unwrap_or_else(|e| Error::spi(sql, e).raise());
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
    mut each: impl FnMut(Vec<T>),
) {
    Spi::connect(|client| {
        let mut cursor = client
            .try_open_cursor(sql, &[])
            .unwrap_or_else(|e| Error::spi(sql, e).raise());
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
    Spi::connect(|client| {
        let rows = client
            .select(sql, limit, args)
            .unwrap_or_else(|e| Error::spi(sql, e).raise());
        read(rows)
    })
}

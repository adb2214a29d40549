//! Writing a note: formed and inserted with its index entries, as catalog
//! rows are, or, for a table this build does not know the shape of,
//! through SPI with a saved plan. And the values a note is written with.

use std::ffi::CStr;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, Ordering};

use pgrx::pg_sys::{self, Datum, Oid};

use crate::error::Error;

// SAFETY: the declaration is the one PostgreSQL 15's commands/sequence.h
// makes (Oid, bool) -> int64, which the library links against.
unsafe extern "C-unwind" {
    /// commands/sequence.h: `nextval`, without a permission check: a
    /// writer needs no grant on the engine's tables to have its change noted.
    /// Not in pgrx's bindings, so not guarded: call it through
    /// `pg_guard_ffi_boundary`, as it may raise.
    fn nextval_internal(relid: Oid, check_permissions: bool) -> i64;
}

/// A table of the engine's that triggers write notes to, and the columns a
/// trigger gives it (`id` and `noted_at` are drawn here, as their defaults
/// would be).
pub(super) struct Sink {
    relation: &'static EngineRelation,
    given: &'static [&'static str],
    /// The same insert through SPI, for a table this build does not know
    /// the shape of (a column it does not fill, an index it cannot keep).
    /// Its types are the given columns'.
    fallback: SavedPlan,
}

pub(super) static ROW_NOTES: Sink = Sink {
    relation: &NOTES_TABLE,
    given: &["table_name", "key", "partition", "parents_before"],
    fallback: SavedPlan {
        plan: AtomicPtr::new(std::ptr::null_mut()),
        sql: c"INSERT INTO sync.notes (table_name, key, partition, parents_before) VALUES ($1, $2, $3, $4)",
        types: &[pg_sys::TEXTOID, pg_sys::TEXTOID, pg_sys::TEXTOID, pg_sys::TEXTARRAYOID],
    },
};

pub(super) static GROUP_NOTES: Sink = Sink {
    relation: &GROUP_NOTES_TABLE,
    given: &["table_name", "group_key", "key", "replica"],
    fallback: SavedPlan {
        plan: AtomicPtr::new(std::ptr::null_mut()),
        sql: c"INSERT INTO sync.group_notes (table_name, group_key, key, replica) VALUES ($1, $2, $3, $4)",
        types: &[pg_sys::TEXTOID, pg_sys::TEXTOID, pg_sys::TEXTOID, pg_sys::UUIDOID],
    },
};

impl Sink {
    /// Writes one note, the given columns' values in order (None: NULL).
    ///
    /// # Safety
    /// Call from a trigger, in its transaction. `values` holds one value
    /// per given column, each a datum of that column's type (the
    /// fallback's types), valid until the call returns.
    pub(super) unsafe fn write(&self, values: &[Option<Datum>]) {
        // SAFETY: write_directly and insert ask what the caller's contract
        // gives; the insert runs with SPI connected, between SPI_connect
        // and SPI_finish (which, in PostgreSQL 15, raise rather than answer
        // a failure: SPI_finish's only one is not being connected).
        unsafe {
            if !self.write_directly(values) {
                pg_sys::SPI_connect();
                self.fallback.insert(values);
                pg_sys::SPI_finish();
            }
        }
        // The relay has work once this transaction commits.
        crate::wake::noted();
    }

    /// Forms the row and inserts it with its index entries, as catalog rows
    /// are: no executor to start and no plan to check, which is most of
    /// what an insert through SPI costs. Answers false, having written
    /// nothing, when the table is not a plain table, has a column this
    /// build does not fill (or not of the type it fills it with), or an
    /// index other than plain columns.
    ///
    /// # Safety
    /// As for [`Sink::write`].
    unsafe fn write_directly(&self, values: &[Option<Datum>]) -> bool {
        // SAFETY: in a transaction (the caller's contract).
        let relid = unsafe { self.relation.oid() };
        if relid == Oid::INVALID {
            self.relation.missing("table");
        }
        // SAFETY: in a transaction, as above. table_open raises unless relid
        // is a relation's, and answers it open, locked until the
        // transaction ends; it is closed on every way out below, and
        // nothing read from it (desc, attrs) is used after. row and nulls
        // have an entry per attribute of desc, as heap_form_tuple reads
        // them; form put in each non-NULL entry a datum of that column's
        // type (it checks the types), valid for the call (the caller's
        // contract; id and noted_at are by value). The indexes are
        // CatalogOpenIndexes' for rel, closed before rel; plain_indexes
        // says they are what CatalogTupleInsertWithInfo can keep. The
        // relation is a plain table, which simple_heap_insert writes to.
        unsafe {
            let rel = pg_sys::table_open(relid, pg_sys::RowExclusiveLock as i32);
            let desc = (*rel).rd_att;
            let attrs = (*desc).attrs.as_slice((*desc).natts as usize);
            let is_table = (*(*rel).rd_rel).relkind as u8 == pg_sys::RELKIND_RELATION;
            let noted_at = Datum::from(pg_sys::GetCurrentTransactionStartTimestamp());
            let formed = is_table
                .then(|| self.form(attrs, values, noted_at))
                .flatten();
            let Some((mut row, mut nulls, id_at)) = formed else {
                pg_sys::table_close(rel, pg_sys::NoLock as i32);
                return false;
            };
            // A notes table without indexes (one of another shape) opens
            // none, which saves a note a little.
            let indexes = if (*(*rel).rd_rel).relhasindex {
                pg_sys::CatalogOpenIndexes(rel)
            } else {
                std::ptr::null_mut()
            };
            if !indexes.is_null() && !plain_indexes(indexes) {
                pg_sys::CatalogCloseIndexes(indexes);
                pg_sys::table_close(rel, pg_sys::NoLock as i32);
                return false;
            }
            let sequence = NOTE_IDS.oid();
            if sequence == Oid::INVALID {
                NOTE_IDS.missing("sequence");
            }
            // The closure holds nothing to drop, and does not panic: what
            // pg_guard_ffi_boundary asks. An ERROR (the sequence at its
            // end, or no sequence) comes back as a Rust panic.
            let id = pg_sys::ffi::pg_guard_ffi_boundary(|| nextval_internal(sequence, false));
            row[id_at] = Datum::from(id);
            nulls[id_at] = false;
            let tuple = pg_sys::heap_form_tuple(desc, row.as_mut_ptr(), nulls.as_mut_ptr());
            if indexes.is_null() {
                pg_sys::simple_heap_insert(rel, tuple);
            } else {
                pg_sys::CatalogTupleInsertWithInfo(rel, tuple, indexes);
                pg_sys::CatalogCloseIndexes(indexes);
            }
            pg_sys::table_close(rel, pg_sys::NoLock as i32);
            true
        }
    }

    /// The note's values and nulls in the order of the table's columns, and
    /// where `id` goes (still NULL); None when a column is none this build
    /// fills, or not of the type it fills it with, or there is no `id`.
    fn form(
        &self,
        attrs: &[pg_sys::FormData_pg_attribute],
        values: &[Option<Datum>],
        noted_at: Datum,
    ) -> Option<(Vec<Datum>, Vec<bool>, usize)> {
        let mut row = vec![Datum::from(0); attrs.len()];
        let mut nulls = vec![true; attrs.len()];
        let mut id_at = None;
        for (i, attr) in attrs.iter().enumerate() {
            if attr.attisdropped {
                continue;
            }
            match pg_sys::name_data_to_str(&attr.attname) {
                "id" if attr.atttypid == pg_sys::INT8OID => id_at = Some(i),
                "noted_at" if attr.atttypid == pg_sys::TIMESTAMPTZOID => {
                    row[i] = noted_at;
                    nulls[i] = false;
                }
                name => {
                    let j = self.given.iter().position(|g| *g == name)?;
                    if attr.atttypid != self.fallback.types[j] {
                        return None;
                    }
                    if let Some(value) = values[j] {
                        row[i] = value;
                        nulls[i] = false;
                    }
                }
            }
        }
        Some((row, nulls, id_at?))
    }
}

/// Whether every index is of plain columns, immediate, without predicate
/// or exclusion: what an insert without an executor can keep.
///
/// # Safety
/// `indexes` is what `CatalogOpenIndexes` answered for a relation still
/// open.
unsafe fn plain_indexes(indexes: *mut pg_sys::ResultRelInfo) -> bool {
    // SAFETY: CatalogOpenIndexes fills ri_IndexRelationInfo and
    // ri_IndexRelationDescs with ri_NumIndices entries each: the open
    // indexes (with their pg_index rows, rd_index) and their IndexInfo,
    // valid until CatalogCloseIndexes.
    unsafe {
        let count = (*indexes).ri_NumIndices as usize;
        (0..count).all(|i| {
            let info = &**(*indexes).ri_IndexRelationInfo.add(i);
            let index = &**(*indexes).ri_IndexRelationDescs.add(i);
            info.ii_Expressions.is_null()
                && info.ii_Predicate.is_null()
                && info.ii_ExclusionOps.is_null()
                && (*index.rd_index).indimmediate
        })
    }
}

/// A relation of schema sync that a trigger writes to, by name, looked up
/// once per backend (a catalog lookup per note would cost as much as the
/// rest) and forgotten when any of them changes: dropped, or made again.
pub(super) struct EngineRelation {
    name: &'static CStr,
    /// Its OID, or 0 while not known.
    cached: AtomicU32,
}

static NOTES_TABLE: EngineRelation = EngineRelation::new(c"notes");
static GROUP_NOTES_TABLE: EngineRelation = EngineRelation::new(c"group_notes");
static NOTE_IDS: EngineRelation = EngineRelation::new(c"note_ids");
static ENGINE_RELATIONS: [&EngineRelation; 3] = [&NOTES_TABLE, &GROUP_NOTES_TABLE, &NOTE_IDS];
/// Whether this backend registered `forget_engine_relations` already.
static FORGETTING: AtomicBool = AtomicBool::new(false);

/// PostgreSQL's relcache callback: a relation changed (InvalidOid: any).
extern "C-unwind" fn forget_engine_relations(_arg: Datum, relid: Oid) {
    let changed = relid == Oid::INVALID
        || ENGINE_RELATIONS
            .iter()
            .any(|relation| relation.cached.load(Ordering::Relaxed) == relid.to_u32());
    if changed {
        for relation in ENGINE_RELATIONS {
            relation.cached.store(0, Ordering::Relaxed);
        }
    }
}

impl EngineRelation {
    const fn new(name: &'static CStr) -> EngineRelation {
        EngineRelation {
            name,
            cached: AtomicU32::new(0),
        }
    }

    /// Its OID, or InvalidOid when schema sync has no relation of its name.
    ///
    /// # Safety
    /// Call in a transaction: it reads the catalogs.
    unsafe fn oid(&self) -> Oid {
        let known = self.cached.load(Ordering::Relaxed);
        if known != 0 {
            return Oid::from(known);
        }
        if !FORGETTING.swap(true, Ordering::Relaxed) {
            // SAFETY: the callback has the signature PostgreSQL calls, and
            // lives as long as the backend (PostgreSQL never unloads a
            // library); FORGETTING registers it once per backend.
            unsafe {
                pg_sys::CacheRegisterRelcacheCallback(Some(forget_engine_relations), Datum::from(0))
            };
        }
        // SAFETY: in a transaction (the caller's contract); both names are
        // NUL-terminated. get_namespace_oid raises when there is no schema
        // sync.
        let relid = unsafe {
            let schema = pg_sys::get_namespace_oid(c"sync".as_ptr(), false);
            pg_sys::get_relname_relid(self.name.as_ptr(), schema)
        };
        self.cached.store(relid.to_u32(), Ordering::Relaxed);
        relid
    }

    /// Raises: the relation is not there.
    fn missing(&self, kind: &str) -> ! {
        Error::engine(
            format!(
                "magic_sync: the engine's {kind} sync.{:?} is missing",
                self.name
            ),
            "Noting writes to the engine's relations, which CREATE EXTENSION magic_sync makes: this one was dropped or renamed.",
        )
        .raise()
    }
}

/// A saved plan, prepared the first time it is needed in a backend.
struct SavedPlan {
    plan: AtomicPtr<pg_sys::_SPI_plan>,
    sql: &'static CStr,
    types: &'static [Oid],
}

impl SavedPlan {
    /// The plan.
    ///
    /// # Safety
    /// Call with SPI connected.
    unsafe fn get(&self) -> pg_sys::SPIPlanPtr {
        let plan = self.plan.load(Ordering::Relaxed);
        if !plan.is_null() {
            return plan;
        }
        let sql = self.sql.to_string_lossy();
        // SAFETY: SPI is connected (the caller's contract); sql is
        // NUL-terminated, and types holds the types.len() OIDs SPI_prepare
        // reads (it writes none: the *mut is C's signature).
        let plan = unsafe {
            pg_sys::SPI_prepare(
                self.sql.as_ptr(),
                self.types.len() as i32,
                self.types.as_ptr() as *mut Oid,
            )
        };
        if plan.is_null() {
            // SAFETY: SPI_result is the int SPI_prepare set on failing, read
            // as a copy in this, PostgreSQL's only thread.
            let code = unsafe { pg_sys::SPI_result };
            cannot_prepare(code, &sql);
        }
        // SAFETY: plan is the one SPI_prepare just answered. SPI_keepplan
        // moves it into a memory context of its own under
        // CacheMemoryContext, which lasts as long as the backend: the
        // pointer may be kept in a static, which only this backend reads.
        let kept = unsafe { pg_sys::SPI_keepplan(plan) };
        if kept != 0 {
            cannot_prepare(kept, &sql);
        }
        self.plan.store(plan, Ordering::Relaxed);
        plan
    }

    /// Runs the plan once with these values (None: NULL).
    ///
    /// # Safety
    /// Call with SPI connected. `values` holds one value per type, each a
    /// datum of that type valid until the call returns.
    unsafe fn insert(&self, values: &[Option<Datum>]) {
        let mut datums: Vec<Datum> = values.iter().map(|v| v.unwrap_or(Datum::from(0))).collect();
        let nulls: Vec<std::ffi::c_char> = values
            .iter()
            .map(|v| if v.is_some() { b' ' } else { b'n' } as std::ffi::c_char)
            .collect();
        // SAFETY: SPI is connected (the caller's contract); the plan takes
        // types.len() parameters, and datums and nulls hold that many (one
        // per value: the caller's contract), each datum of its parameter's
        // type or marked NULL.
        let status = unsafe {
            pg_sys::SPI_execute_plan(self.get(), datums.as_mut_ptr(), nulls.as_ptr(), false, 0)
        };
        if status != pg_sys::SPI_OK_INSERT as i32 {
            Error::engine(
                format!("magic_sync: writing a note failed ({status})"),
                format!("{}: {}", spi_code(status), self.sql.to_string_lossy()),
            )
            .raise();
        }
    }
}

fn cannot_prepare(code: i32, sql: &str) -> ! {
    Error::engine(
        format!(
            "magic_sync: cannot prepare a note's insert ({})",
            spi_code(code)
        ),
        sql,
    )
    .raise()
}

/// SPI's name of one of its result codes.
fn spi_code(code: i32) -> String {
    // SAFETY: SPI_result_code_string answers a NUL-terminated string for any
    // code: a static one, or, for a code it does not know, a static buffer
    // it wrote the number in, copied out here at once.
    unsafe { CStr::from_ptr(pg_sys::SPI_result_code_string(code)) }
        .to_string_lossy()
        .into_owned()
}

/// A text value, in the current memory context.
pub(super) fn text_datum(text: &str) -> Datum {
    // SAFETY: cstring_to_text_with_len copies len bytes from the pointer,
    // all of them text's, into a new text it allocates.
    unsafe {
        Datum::from(pg_sys::cstring_to_text_with_len(
            text.as_ptr() as *const std::ffi::c_char,
            text.len() as i32,
        ))
    }
}

/// A text[] of possibly NULL elements, in the current memory context.
pub(super) fn text_array(items: &[Option<String>]) -> Datum {
    let mut elements: Vec<Datum> = items
        .iter()
        .map(|item| item.as_deref().map(text_datum).unwrap_or(Datum::from(0)))
        .collect();
    let mut nulls: Vec<bool> = items.iter().map(Option::is_none).collect();
    let mut dims = [items.len() as i32];
    let mut lower = [1];
    // SAFETY: a one-dimensional array of dims[0] elements: elements and
    // nulls hold that many, each non-NULL one a text datum; -1, false, 'i'
    // are text's length, by-value and alignment, as pg_type has them.
    // construct_md_array copies the elements into a new array.
    unsafe {
        Datum::from(pg_sys::construct_md_array(
            elements.as_mut_ptr(),
            nulls.as_mut_ptr(),
            1,
            dims.as_mut_ptr(),
            lower.as_mut_ptr(),
            pg_sys::TEXTOID,
            -1,
            false,
            b'i' as std::ffi::c_char,
        ))
    }
}

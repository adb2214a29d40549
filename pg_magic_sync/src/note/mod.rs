//! Noting: the triggers that write, in the writing transaction, a note of
//! every change to a table that goes down, and of every change to a group.
//!
//! Both are C-language row triggers (`sync.note_row`, `sync.note_group`):
//! a row trigger in PL/pgSQL, or a statement trigger reading transition
//! tables, costs more than the change it notes; these read the few columns
//! they need straight from the row and insert the note with a saved plan.
//!
//! What a trigger notes is said by its arguments, written from the
//! declaration by [`RowNoting::arguments`] and [`GroupNoting::arguments`],
//! each list after its length, so that `sync.triggers()` prints everything
//! the trigger does.

use crate::error::Error;
use std::ffi::CStr;
use std::fmt::Write;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, Ordering};

use pgrx::pg_sys::{self, Datum, Oid};
use pgrx::prelude::*;

/// How a table's rows are noted: the arguments of its `sync.note_row`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowNoting<'a> {
    /// The table's name, as replicas know it.
    pub table: &'a str,
    /// The partition column, when the replicas are partitioned.
    pub partition: Option<&'a str>,
    pub key: Vec<&'a str>,
    /// Per reference to another declared table, its columns in the order of
    /// the parent's key: what the row pointed at before a change is noted
    /// as that parent's key.
    pub references: Vec<Vec<&'a str>>,
    /// Columns a change of which alone is not noted: the replica's own and
    /// those that do not travel.
    pub unnoted: Vec<&'a str>,
}

/// How a group table's rows are noted: the arguments of its
/// `sync.note_group`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GroupNoting<'a> {
    /// A grouped table's members: a row joining or leaving a group.
    Members {
        /// The grouped table, as replicas know it.
        grouped: &'a str,
        /// The columns that point at the group.
        group: Vec<&'a str>,
        /// The columns that point at the grouped row, in its key's order.
        row: Vec<&'a str>,
    },
    /// Groups given to replicas: a group given to or taken from one.
    Assignments {
        /// The column of replica ids.
        replica: &'a str,
        group: Vec<&'a str>,
        /// Every grouped table whose groups these are.
        grouped: Vec<&'a str>,
    },
}

/// Appends a list after its length.
fn push_list(args: &mut Vec<String>, list: &[&str]) {
    args.push(list.len().to_string());
    args.extend(list.iter().map(|s| (*s).to_owned()));
}

/// Reads a list written by `push_list`, moving past it.
fn take_list<'a>(args: &mut &[&'a str]) -> Option<Vec<&'a str>> {
    let (count, rest) = args.split_first()?;
    let count: usize = count.parse().ok()?;
    if rest.len() < count {
        return None;
    }
    let (list, rest) = rest.split_at(count);
    *args = rest;
    Some(list.to_vec())
}

fn take_one<'a>(args: &mut &[&'a str]) -> Option<&'a str> {
    let (first, rest) = args.split_first()?;
    *args = rest;
    Some(first)
}

impl<'a> RowNoting<'a> {
    /// The trigger's arguments: the name, the partition column ('' for
    /// none), the key, the references (how many, then each as a list) and
    /// the unnoted columns.
    pub fn arguments(&self) -> Vec<String> {
        let mut args = vec![
            self.table.to_owned(),
            self.partition.unwrap_or("").to_owned(),
        ];
        push_list(&mut args, &self.key);
        args.push(self.references.len().to_string());
        for reference in &self.references {
            push_list(&mut args, reference);
        }
        push_list(&mut args, &self.unnoted);
        args
    }

    pub fn parse(mut args: &[&'a str]) -> Option<RowNoting<'a>> {
        let table = take_one(&mut args)?;
        let partition = Some(take_one(&mut args)?).filter(|p| !p.is_empty());
        let key = take_list(&mut args)?;
        let count: usize = take_one(&mut args)?.parse().ok()?;
        let references = (0..count)
            .map(|_| take_list(&mut args))
            .collect::<Option<Vec<_>>>()?;
        let unnoted = take_list(&mut args)?;
        (args.is_empty() && !key.is_empty()).then_some(RowNoting {
            table,
            partition,
            key,
            references,
            unnoted,
        })
    }
}

impl<'a> GroupNoting<'a> {
    pub fn arguments(&self) -> Vec<String> {
        let mut args = Vec::new();
        match self {
            GroupNoting::Members {
                grouped,
                group,
                row,
            } => {
                args.push("members".to_owned());
                args.push((*grouped).to_owned());
                push_list(&mut args, group);
                push_list(&mut args, row);
            }
            GroupNoting::Assignments {
                replica,
                group,
                grouped,
            } => {
                args.push("assigned".to_owned());
                args.push((*replica).to_owned());
                push_list(&mut args, group);
                push_list(&mut args, grouped);
            }
        }
        args
    }

    pub fn parse(mut args: &[&'a str]) -> Option<GroupNoting<'a>> {
        let noting = match take_one(&mut args)? {
            "members" => GroupNoting::Members {
                grouped: take_one(&mut args)?,
                group: take_list(&mut args)?,
                row: take_list(&mut args)?,
            },
            "assigned" => GroupNoting::Assignments {
                replica: take_one(&mut args)?,
                group: take_list(&mut args)?,
                grouped: take_list(&mut args)?,
            },
            _ => return None,
        };
        args.is_empty().then_some(noting)
    }
}

// ---------------------------------------------------------------------------
// The triggers themselves.

unsafe extern "C-unwind" {
    /// utils/datum.h: whether two values of a type are the same bytes.
    fn datumIsEqual(value1: Datum, value2: Datum, typ_by_val: bool, typ_len: i32) -> bool;
    /// commands/sequence.h: `nextval`, without a permission check: a
    /// writer needs no grant on the engine's tables to have its change noted.
    fn nextval_internal(relid: Oid, check_permissions: bool) -> i64;
}

/// A table of the engine's that triggers write notes to, and the columns a
/// trigger gives it (`id` and `noted_at` are drawn here, as their defaults
/// would be).
struct Sink {
    table: &'static CStr,
    given: &'static [&'static str],
    /// The same insert through SPI, for a table this build does not know
    /// the shape of (a column it does not fill, an index it cannot keep).
    fallback: SavedPlan,
}

impl Sink {
    /// Writes one note, the given columns' values in order (None: NULL).
    unsafe fn write(&self, values: &[Option<Datum>]) {
        unsafe {
            if !self.write_directly(values) {
                pg_sys::SPI_connect();
                self.fallback.insert(values);
                pg_sys::SPI_finish();
            }
        }
    }

    /// Forms the row and inserts it with its index entries, as catalog rows
    /// are: no executor to start and no plan to check, which is most of
    /// what an insert through SPI costs. Answers false, having written
    /// nothing, when the table has a column this build does not fill, or an
    /// index other than plain columns.
    unsafe fn write_directly(&self, values: &[Option<Datum>]) -> bool {
        unsafe {
            let relid = engine_relation(self.table);
            if relid == Oid::INVALID {
                panic!(
                    "magic_sync: the engine's table sync.{:?} is missing",
                    self.table
                );
            }
            let rel = pg_sys::table_open(relid, pg_sys::RowExclusiveLock as i32);
            let desc = (*rel).rd_att;
            let natts = (*desc).natts as usize;
            let attrs = (*desc).attrs.as_slice(natts);
            let mut row = vec![Datum::from(0); natts];
            let mut nulls = vec![true; natts];
            let mut id_at = None;
            for (i, attr) in attrs.iter().enumerate() {
                if attr.attisdropped {
                    continue;
                }
                match pg_sys::name_data_to_str(&attr.attname) {
                    "id" => id_at = Some(i),
                    "noted_at" => {
                        row[i] = Datum::from(pg_sys::GetCurrentTransactionStartTimestamp());
                        nulls[i] = false;
                    }
                    name => match self.given.iter().position(|g| *g == name) {
                        Some(j) => {
                            if let Some(value) = values[j] {
                                row[i] = value;
                                nulls[i] = false;
                            }
                        }
                        None => {
                            pg_sys::table_close(rel, pg_sys::NoLock as i32);
                            return false;
                        }
                    },
                }
            }
            let Some(id_at) = id_at else {
                pg_sys::table_close(rel, pg_sys::NoLock as i32);
                return false;
            };
            // sync.notes has no index: opening none saves a note a little.
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
            let sequence = engine_relation(c"note_ids");
            row[id_at] = Datum::from(nextval_internal(sequence, false));
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
}

/// The engine's relations a trigger writes to, by name, looked up once
/// per backend (a catalog lookup per note would cost as much as the rest)
/// and forgotten when any of them changes: dropped, or made again.
static ENGINE_RELATIONS: [(&CStr, AtomicU32); 3] = [
    (c"notes", AtomicU32::new(0)),
    (c"group_notes", AtomicU32::new(0)),
    (c"note_ids", AtomicU32::new(0)),
];
static FORGETTING: AtomicBool = AtomicBool::new(false);

unsafe extern "C-unwind" fn forget_engine_relations(_arg: Datum, relid: Oid) {
    let changed = relid == Oid::INVALID
        || ENGINE_RELATIONS
            .iter()
            .any(|(_, cached)| cached.load(Ordering::Relaxed) == relid.to_u32());
    if changed {
        for (_, cached) in &ENGINE_RELATIONS {
            cached.store(0, Ordering::Relaxed);
        }
    }
}

/// A relation of schema sync, or InvalidOid.
unsafe fn engine_relation(name: &CStr) -> Oid {
    let (_, cached) = ENGINE_RELATIONS
        .iter()
        .find(|(n, _)| *n == name)
        .expect("one of the engine's relations");
    let known = cached.load(Ordering::Relaxed);
    if known != 0 {
        return Oid::from(known);
    }
    unsafe {
        if !FORGETTING.swap(true, Ordering::Relaxed) {
            pg_sys::CacheRegisterRelcacheCallback(Some(forget_engine_relations), Datum::from(0));
        }
        let schema = pg_sys::get_namespace_oid(c"sync".as_ptr(), false);
        let relid = pg_sys::get_relname_relid(name.as_ptr(), schema);
        cached.store(relid.to_u32(), Ordering::Relaxed);
        relid
    }
}

/// Whether every index is of plain columns, immediate, without predicate
/// or exclusion: what an insert without an executor can keep.
unsafe fn plain_indexes(indexes: *mut pg_sys::ResultRelInfo) -> bool {
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

/// A saved plan, prepared the first time it is needed in a backend.
struct SavedPlan {
    plan: AtomicPtr<pg_sys::_SPI_plan>,
    sql: &'static CStr,
    types: &'static [Oid],
}

impl SavedPlan {
    /// The plan; call with SPI connected.
    unsafe fn get(&self) -> pg_sys::SPIPlanPtr {
        let plan = self.plan.load(Ordering::Relaxed);
        if !plan.is_null() {
            return plan;
        }
        unsafe {
            let plan = pg_sys::SPI_prepare(
                self.sql.as_ptr(),
                self.types.len() as i32,
                self.types.as_ptr() as *mut Oid,
            );
            if plan.is_null() || pg_sys::SPI_keepplan(plan) != 0 {
                panic!("magic_sync: cannot prepare {:?}", self.sql);
            }
            self.plan.store(plan, Ordering::Relaxed);
            plan
        }
    }

    /// Runs the plan once with these values (None: NULL).
    unsafe fn insert(&self, values: &[Option<Datum>]) {
        let mut datums: Vec<Datum> = values.iter().map(|v| v.unwrap_or(Datum::from(0))).collect();
        let nulls: Vec<std::ffi::c_char> = values
            .iter()
            .map(|v| if v.is_some() { b' ' } else { b'n' } as std::ffi::c_char)
            .collect();
        unsafe {
            let status =
                pg_sys::SPI_execute_plan(self.get(), datums.as_mut_ptr(), nulls.as_ptr(), false, 0);
            if status != pg_sys::SPI_OK_INSERT as i32 {
                panic!("magic_sync: writing a note failed ({status})");
            }
        }
    }
}

static ROW_NOTES: Sink = Sink {
    table: c"notes",
    given: &["table_name", "key", "partition", "parents_before"],
    fallback: SavedPlan {
        plan: AtomicPtr::new(std::ptr::null_mut()),
        sql: c"INSERT INTO sync.notes (table_name, key, partition, parents_before) VALUES ($1, $2, $3, $4)",
        types: &[pg_sys::TEXTOID, pg_sys::TEXTOID, pg_sys::TEXTOID, pg_sys::TEXTARRAYOID],
    },
};

static GROUP_NOTES: Sink = Sink {
    table: c"group_notes",
    given: &["table_name", "group_key", "key", "replica"],
    fallback: SavedPlan {
        plan: AtomicPtr::new(std::ptr::null_mut()),
        sql: c"INSERT INTO sync.group_notes (table_name, group_key, key, replica) VALUES ($1, $2, $3, $4)",
        types: &[pg_sys::TEXTOID, pg_sys::TEXTOID, pg_sys::TEXTOID, pg_sys::UUIDOID],
    },
};

/// The trigger's event, when the function runs as an AFTER ROW trigger.
unsafe fn row_trigger(
    fcinfo: pg_sys::FunctionCallInfo,
    function: &str,
) -> &'static pg_sys::TriggerData {
    unsafe {
        let context = (*fcinfo).context;
        if context.is_null() || (*context).type_ != pg_sys::NodeTag::T_TriggerData {
            Error::bad_input(
                format!("magic_sync: {function} runs only as a trigger"),
                "sync.triggers() prints the triggers the engine needs.",
            )
            .raise();
        }
        let data = &*(context as *const pg_sys::TriggerData);
        let event = data.tg_event;
        if event & pg_sys::TRIGGER_EVENT_ROW == 0 || event & pg_sys::TRIGGER_EVENT_TIMINGMASK != 0 {
            Error::bad_input(
                format!("magic_sync: {function} runs only as an AFTER ... FOR EACH ROW trigger"),
                "sync.triggers() prints the triggers the engine needs.",
            )
            .raise();
        }
        data
    }
}

/// The trigger's arguments.
unsafe fn arguments(trigger: &pg_sys::Trigger) -> Vec<&'static str> {
    (0..trigger.tgnargs as usize)
        .map(|i| unsafe {
            CStr::from_ptr(*trigger.tgargs.add(i))
                .to_str()
                .unwrap_or_default()
        })
        .collect()
}

fn malformed(function: &str, relation: &str) -> ! {
    Error::not_as_declared(
        format!("magic_sync: the arguments of {function} on {relation} are not the engine's"),
        "Write the trigger again as sync.triggers() prints it, or declare the table again.",
    )
    .raise()
}

/// A row's columns, read from a trigger's slot.
struct Row<'a> {
    desc: &'a [pg_sys::FormData_pg_attribute],
    values: &'a [Datum],
    nulls: &'a [bool],
}

impl<'a> Row<'a> {
    unsafe fn of(slot: *mut pg_sys::TupleTableSlot) -> Row<'a> {
        unsafe {
            pg_sys::slot_getallattrs(slot);
            let desc = (*slot).tts_tupleDescriptor;
            let natts = (*desc).natts as usize;
            Row {
                desc: (*desc).attrs.as_slice(natts),
                values: std::slice::from_raw_parts((*slot).tts_values, natts),
                nulls: std::slice::from_raw_parts((*slot).tts_isnull, natts),
            }
        }
    }

    /// The position of a column, by name.
    fn position(&self, name: &str) -> Option<usize> {
        self.desc
            .iter()
            .position(|a| !a.attisdropped && pg_sys::name_data_to_str(&a.attname) == name)
    }

    /// Appends a column's value in its text form: what `::text` writes.
    unsafe fn write_text(&self, at: usize, out: &mut String) {
        let value = self.values[at];
        match self.desc[at].atttypid {
            pg_sys::UUIDOID => {
                let bytes = unsafe { &*(value.cast_mut_ptr::<[u8; 16]>()) };
                let _ = write!(out, "{}", uuid::Uuid::from_bytes(*bytes).hyphenated());
            }
            pg_sys::INT2OID => {
                let _ = write!(out, "{}", value.value() as i16);
            }
            pg_sys::INT4OID => {
                let _ = write!(out, "{}", value.value() as i32);
            }
            pg_sys::INT8OID => {
                let _ = write!(out, "{}", value.value() as i64);
            }
            other => unsafe {
                let mut function = Oid::INVALID;
                let mut varlena = false;
                pg_sys::getTypeOutputInfo(other, &mut function, &mut varlena);
                let text = pg_sys::OidOutputFunctionCall(function, value);
                out.push_str(&CStr::from_ptr(text).to_string_lossy());
            },
        }
    }

    /// The text form of these columns' values joined by a bar (the key text
    /// form), or None when one is NULL or missing.
    unsafe fn key_text(&self, columns: &[&str]) -> Option<String> {
        let mut out = String::with_capacity(40 * columns.len());
        for (i, column) in columns.iter().enumerate() {
            let at = self.position(column)?;
            if self.nulls[at] {
                return None;
            }
            if i > 0 {
                out.push('|');
            }
            unsafe { self.write_text(at, &mut out) };
        }
        Some(out)
    }

    /// Whether a column other than `unnoted` differs between two versions
    /// of a row.
    unsafe fn differs(&self, other: &Row, unnoted: &[&str]) -> bool {
        self.desc.iter().enumerate().any(|(i, attr)| {
            if attr.attisdropped {
                return false;
            }
            if self.nulls[i] || other.nulls[i] {
                return self.nulls[i] != other.nulls[i]
                    && !unnoted.contains(&pg_sys::name_data_to_str(&attr.attname));
            }
            let same = unsafe {
                datumIsEqual(
                    self.values[i],
                    other.values[i],
                    attr.attbyval,
                    attr.attlen as i32,
                )
            };
            !same && !unnoted.contains(&pg_sys::name_data_to_str(&attr.attname))
        })
    }

    /// Whether these columns hold the same values in both versions.
    unsafe fn same(&self, other: &Row, columns: &[&str]) -> bool {
        columns.iter().all(|column| {
            let Some(i) = self.position(column) else {
                return true;
            };
            match (self.nulls[i], other.nulls[i]) {
                (true, true) => true,
                (false, false) => unsafe {
                    let attr = &self.desc[i];
                    datumIsEqual(
                        self.values[i],
                        other.values[i],
                        attr.attbyval,
                        attr.attlen as i32,
                    )
                },
                _ => false,
            }
        })
    }
}

fn text_datum(text: &str) -> Datum {
    unsafe {
        Datum::from(pg_sys::cstring_to_text_with_len(
            text.as_ptr() as *const std::ffi::c_char,
            text.len() as i32,
        ))
    }
}

/// A text[] of possibly NULL elements.
fn text_array(items: &[Option<String>]) -> Datum {
    let mut elements: Vec<Datum> = items
        .iter()
        .map(|item| item.as_deref().map(text_datum).unwrap_or(Datum::from(0)))
        .collect();
    let mut nulls: Vec<bool> = items.iter().map(Option::is_none).collect();
    let mut dims = [items.len() as i32];
    let mut lower = [1];
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

/// One note: a row's key, in a partition, and what it pointed at before.
struct Note {
    key: String,
    partition: Option<String>,
    parents_before: Option<Datum>,
}

impl RowNoting<'_> {
    unsafe fn note_of(
        &self,
        row: &Row,
        parents_before: Option<Datum>,
        data: &pg_sys::TriggerData,
    ) -> Note {
        let key = unsafe { row.key_text(&self.key) }.unwrap_or_else(|| {
            Error::not_as_declared(
                format!("magic_sync: a row of {} has no key to note it by", unsafe {
                    relation_name(data)
                }),
                "The key columns the trigger names are missing or NULL: declare the table again.",
            )
            .raise()
        });
        let partition = self
            .partition
            .and_then(|column| unsafe { row.key_text(&[column]) });
        Note {
            key,
            partition,
            parents_before,
        }
    }

    /// What a row pointed at, per reference: each parent's key, or NULL.
    unsafe fn parents(&self, row: &Row) -> Option<Datum> {
        if self.references.is_empty() {
            return None;
        }
        let parents: Vec<Option<String>> = self
            .references
            .iter()
            .map(|columns| unsafe { row.key_text(columns) })
            .collect();
        Some(text_array(&parents))
    }

    /// The notes of one event: an insert notes the new row; a delete the
    /// old one, with what it pointed at; an update that changes more than
    /// the unnoted columns notes the row, with what it pointed at before,
    /// and, when its key or its partition changed, the old key in the old
    /// partition too.
    unsafe fn notes(
        &self,
        event: u32,
        old: Option<&Row>,
        new: Option<&Row>,
        relation: &pg_sys::TriggerData,
    ) -> Vec<Note> {
        unsafe {
            match (event, old, new) {
                (pg_sys::TRIGGER_EVENT_INSERT, _, Some(new)) => {
                    vec![self.note_of(new, None, relation)]
                }
                (pg_sys::TRIGGER_EVENT_DELETE, Some(old), _) => {
                    vec![self.note_of(old, self.parents(old), relation)]
                }
                (pg_sys::TRIGGER_EVENT_UPDATE, Some(old), Some(new)) => {
                    if !old.differs(new, &self.unnoted) {
                        return Vec::new();
                    }
                    let moved = !old.same(new, &self.key)
                        || self.partition.is_some_and(|p| !old.same(new, &[p]));
                    if moved {
                        vec![
                            self.note_of(old, self.parents(old), relation),
                            self.note_of(new, None, relation),
                        ]
                    } else {
                        vec![self.note_of(new, self.parents(old), relation)]
                    }
                }
                _ => Vec::new(),
            }
        }
    }
}

/// The relation a trigger fired on, schema-qualified, for messages.
unsafe fn relation_name(data: &pg_sys::TriggerData) -> String {
    unsafe {
        let class = &*(*data.tg_relation).rd_rel;
        let schema = pg_sys::get_namespace_name(class.relnamespace);
        let schema = if schema.is_null() {
            String::new()
        } else {
            format!("{}.", CStr::from_ptr(schema).to_string_lossy())
        };
        format!("{schema}{}", pg_sys::name_data_to_str(&class.relname))
    }
}

/// The old and new versions of the row, as the event has them.
unsafe fn versions<'a>(data: &pg_sys::TriggerData) -> (u32, Option<Row<'a>>, Option<Row<'a>>) {
    let event = data.tg_event & pg_sys::TRIGGER_EVENT_OPMASK;
    unsafe {
        match event {
            pg_sys::TRIGGER_EVENT_INSERT => (event, None, Some(Row::of(data.tg_trigslot))),
            pg_sys::TRIGGER_EVENT_DELETE => (event, Some(Row::of(data.tg_trigslot)), None),
            _ => (
                event,
                Some(Row::of(data.tg_trigslot)),
                Some(Row::of(data.tg_newslot)),
            ),
        }
    }
}

fn null_trigger_result() -> Datum {
    Datum::from(0)
}

crate::spi::function_info_v1!(pg_finfo_note_row);

/// `sync.note_row()`: notes a row of a table that goes down.
#[unsafe(no_mangle)]
#[pg_guard]
pub unsafe extern "C-unwind" fn note_row(fcinfo: pg_sys::FunctionCallInfo) -> Datum {
    unsafe {
        let data = row_trigger(fcinfo, "sync.note_row");
        let args = arguments(&*data.tg_trigger);
        let noting = RowNoting::parse(&args)
            .unwrap_or_else(|| malformed("sync.note_row", &relation_name(data)));
        let (event, old, new) = versions(data);
        let notes = noting.notes(event, old.as_ref(), new.as_ref(), data);
        if notes.is_empty() {
            return null_trigger_result();
        }
        for note in notes {
            ROW_NOTES.write(&[
                Some(text_datum(noting.table)),
                Some(text_datum(&note.key)),
                note.partition.as_deref().map(text_datum),
                note.parents_before,
            ]);
        }
        null_trigger_result()
    }
}

/// One group note: a group's key, and the grouped row's key or the replica.
struct GroupNote {
    grouped: String,
    group: String,
    key: Option<String>,
    replica: Option<Datum>,
}

impl GroupNoting<'_> {
    /// The notes of one version of a group table's row.
    unsafe fn notes_of(&self, row: &Row) -> Vec<GroupNote> {
        unsafe {
            match self {
                GroupNoting::Members {
                    grouped,
                    group,
                    row: columns,
                } => match (row.key_text(group), row.key_text(columns)) {
                    (Some(group), Some(key)) => vec![GroupNote {
                        grouped: (*grouped).to_owned(),
                        group,
                        key: Some(key),
                        replica: None,
                    }],
                    _ => Vec::new(),
                },
                GroupNoting::Assignments {
                    replica,
                    group,
                    grouped,
                } => {
                    let at = row.position(replica);
                    let replica = at.filter(|&i| !row.nulls[i]).map(|i| row.values[i]);
                    match (row.key_text(group), replica) {
                        (Some(group), Some(replica)) => grouped
                            .iter()
                            .map(|grouped| GroupNote {
                                grouped: (*grouped).to_owned(),
                                group: group.clone(),
                                key: None,
                                replica: Some(replica),
                            })
                            .collect(),
                        _ => Vec::new(),
                    }
                }
            }
        }
    }

    /// The columns whose change moves a row into or out of a group.
    fn watched(&self) -> Vec<&str> {
        match self {
            GroupNoting::Members { group, row, .. } => group.iter().chain(row).copied().collect(),
            GroupNoting::Assignments { replica, group, .. } => {
                group.iter().copied().chain([*replica]).collect()
            }
        }
    }

    /// An insert notes the new row, a delete the old one, an update that
    /// moves it notes both.
    unsafe fn notes(&self, event: u32, old: Option<&Row>, new: Option<&Row>) -> Vec<GroupNote> {
        unsafe {
            match (event, old, new) {
                (pg_sys::TRIGGER_EVENT_UPDATE, Some(old), Some(new))
                    if old.same(new, &self.watched()) =>
                {
                    Vec::new()
                }
                _ => {
                    let mut notes = old.map(|row| self.notes_of(row)).unwrap_or_default();
                    notes.extend(new.map(|row| self.notes_of(row)).unwrap_or_default());
                    notes
                }
            }
        }
    }
}

crate::spi::function_info_v1!(pg_finfo_note_group);

/// `sync.note_group()`: notes a row of a group table.
#[unsafe(no_mangle)]
#[pg_guard]
pub unsafe extern "C-unwind" fn note_group(fcinfo: pg_sys::FunctionCallInfo) -> Datum {
    unsafe {
        let data = row_trigger(fcinfo, "sync.note_group");
        let args = arguments(&*data.tg_trigger);
        let noting = GroupNoting::parse(&args)
            .unwrap_or_else(|| malformed("sync.note_group", &relation_name(data)));
        let (event, old, new) = versions(data);
        let notes = noting.notes(event, old.as_ref(), new.as_ref());
        if notes.is_empty() {
            return null_trigger_result();
        }
        for note in notes {
            GROUP_NOTES.write(&[
                Some(text_datum(&note.grouped)),
                Some(text_datum(&note.group)),
                note.key.as_deref().map(text_datum),
                note.replica,
            ]);
        }
        null_trigger_result()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_trigger_s_arguments_read_back_as_written() {
        let noting = RowNoting {
            table: "stores",
            partition: Some("company_id"),
            key: vec!["id"],
            references: vec![vec!["region_id"], vec!["company_id", "owner_id"]],
            unnoted: vec!["battery"],
        };
        let args = noting.arguments();
        assert_eq!(
            args,
            [
                "stores",
                "company_id",
                "1",
                "id",
                "2",
                "1",
                "region_id",
                "2",
                "company_id",
                "owner_id",
                "1",
                "battery"
            ]
        );
        let borrowed: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_eq!(RowNoting::parse(&borrowed), Some(noting));
    }

    #[test]
    fn a_table_without_partition_references_or_unnoted_columns_has_short_arguments() {
        let noting = RowNoting {
            table: "products",
            partition: None,
            key: vec!["id"],
            references: vec![],
            unnoted: vec![],
        };
        assert_eq!(noting.arguments(), ["products", "", "1", "id", "0", "0"]);
        assert_eq!(
            RowNoting::parse(&["products", "", "1", "id", "0", "0"]),
            Some(noting)
        );
    }

    #[test]
    fn arguments_that_are_not_the_engine_s_do_not_parse() {
        assert_eq!(RowNoting::parse(&["products", "", "1"]), None);
        assert_eq!(
            RowNoting::parse(&["products", "", "0", "0", "0"]),
            None,
            "no key"
        );
        assert_eq!(
            RowNoting::parse(&["products", "", "1", "id", "0", "0", "extra"]),
            None
        );
        assert_eq!(
            RowNoting::parse(&["products", "", "x", "id", "0", "0"]),
            None
        );
        assert_eq!(GroupNoting::parse(&["lists", "x"]), None);
    }

    #[test]
    fn group_triggers_arguments_read_back_as_written() {
        for noting in [
            GroupNoting::Members {
                grouped: "customers",
                group: vec!["list_id"],
                row: vec!["customer_id"],
            },
            GroupNoting::Assignments {
                replica: "register_id",
                group: vec!["list_id"],
                grouped: vec!["customers", "products"],
            },
        ] {
            let args = noting.arguments();
            let borrowed: Vec<&str> = args.iter().map(String::as_str).collect();
            assert_eq!(GroupNoting::parse(&borrowed), Some(noting));
        }
    }
}

//! A version of a row, as a trigger's slot holds it: its columns' values
//! in the key text form, and whether columns changed between versions.

use std::ffi::CStr;
use std::fmt::Write;

use pgrx::pg_sys::{self, Datum, Oid};

// SAFETY: the declaration is the one PostgreSQL 15's utils/datum.h makes
// (Datum, Datum, bool, int) -> bool, which the library links against.
unsafe extern "C-unwind" {
    /// utils/datum.h: whether two values of a type are the same bytes.
    /// It raises only for a NULL pointer of a type passed by reference, or
    /// a length that is no type's: not for a column's non-NULL value.
    fn datumIsEqual(value1: Datum, value2: Datum, typ_by_val: bool, typ_len: i32) -> bool;
}

/// A row's columns, read from a trigger's slot.
pub(super) struct Row<'a> {
    pub(super) desc: &'a [pg_sys::FormData_pg_attribute],
    pub(super) values: &'a [Datum],
    pub(super) nulls: &'a [bool],
}

impl<'a> Row<'a> {
    /// # Safety
    /// `slot` is one of the call's trigger slots, holding a version of the
    /// row; `'a` must not outlive the call, until which the trigger manager
    /// keeps the slot as it is.
    pub(super) unsafe fn of(slot: *mut pg_sys::TupleTableSlot) -> Row<'a> {
        // SAFETY: slot is valid and holds a tuple (the caller's contract).
        // slot_getallattrs deforms every column into tts_values and
        // tts_isnull, which have an entry per attribute of the slot's
        // descriptor (natts); by-reference values point into the tuple the
        // slot holds. All of it stays as it is until the slot is cleared,
        // after the call.
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
    pub(super) fn position(&self, name: &str) -> Option<usize> {
        self.desc
            .iter()
            .position(|a| !a.attisdropped && pg_sys::name_data_to_str(&a.attname) == name)
    }

    /// Appends a column's value in its text form: what `::text` writes.
    ///
    /// # Safety
    /// The row is as [`Row::of`] made it in this call, and the column at
    /// `at` is not NULL.
    unsafe fn write_text(&self, at: usize, out: &mut String) {
        let value = self.values[at];
        match self.desc[at].atttypid {
            pg_sys::UUIDOID => {
                // SAFETY: a non-NULL uuid is a pointer to its 16 bytes (a
                // fixed-length type, never toasted) in the slot's tuple.
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
            // SAFETY: value is a non-NULL value of the column's type, which
            // its output function reads; getTypeOutputInfo raises for a type
            // without one. The output function answers a NUL-terminated
            // string in the current memory context.
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
    ///
    /// # Safety
    /// The row is as [`Row::of`] made it in this call.
    pub(super) unsafe fn key_text(&self, columns: &[&str]) -> Option<String> {
        let mut out = String::with_capacity(40 * columns.len());
        for (i, column) in columns.iter().enumerate() {
            let at = self.position(column)?;
            if self.nulls[at] {
                return None;
            }
            if i > 0 {
                out.push('|');
            }
            // SAFETY: at is a column of the row, not NULL; the row is valid
            // (the caller's contract).
            unsafe { self.write_text(at, &mut out) };
        }
        Some(out)
    }

    /// Whether a column other than `unnoted` differs between two versions
    /// of a row.
    ///
    /// # Safety
    /// Both rows are as [`Row::of`] made them in this call, from the slots
    /// of one relation: the same descriptor.
    pub(super) unsafe fn differs(&self, other: &Row, unnoted: &[&str]) -> bool {
        self.desc.iter().enumerate().any(|(i, attr)| {
            if attr.attisdropped {
                return false;
            }
            if self.nulls[i] || other.nulls[i] {
                return self.nulls[i] != other.nulls[i]
                    && !unnoted.contains(&pg_sys::name_data_to_str(&attr.attname));
            }
            // SAFETY: both values are non-NULL values of the column i
            // describes (one descriptor: the caller's contract), valid for
            // the call; datumIsEqual reads them as its type says.
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
    ///
    /// # Safety
    /// As for [`Row::differs`]: both rows from the slots of one relation,
    /// in this call.
    pub(super) unsafe fn same(&self, other: &Row, columns: &[&str]) -> bool {
        columns.iter().all(|column| {
            let Some(i) = self.position(column) else {
                return true;
            };
            match (self.nulls[i], other.nulls[i]) {
                (true, true) => true,
                // SAFETY: both values are non-NULL values of column i (one
                // descriptor: the caller's contract), valid for the call.
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

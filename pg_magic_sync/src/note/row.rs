//! `sync.note_row`, the trigger of a table that goes down: the notes of a
//! change to one of its rows, written to sync.notes.

use pgrx::pg_sys::{self, Datum};
use pgrx::prelude::*;

use super::arguments::RowNoting;
use super::call::{
    arguments, malformed, null_trigger_result, relation_name, row_trigger, versions,
};
use super::columns::Row;
use super::sink::{text_array, text_datum, ROW_NOTES};
use crate::error::Error;

/// One note: a row's key, in a partition, and what it pointed at before.
struct Note {
    key: String,
    partition: Option<String>,
    parents_before: Option<Datum>,
}

impl RowNoting<'_> {
    /// # Safety
    /// `row` is a version of the row `data` (the call's trigger data) was
    /// fired for, as [`super::call::versions`] answers it.
    unsafe fn note_of(
        &self,
        row: &Row,
        parents_before: Option<Datum>,
        data: &pg_sys::TriggerData,
    ) -> Note {
        // SAFETY: row is this call's (the caller's contract).
        let key = unsafe { row.key_text(&self.key) }.unwrap_or_else(|| {
            Error::not_as_declared(
                format!(
                    "magic_sync: a row of {} has no key to note it by",
                    // SAFETY: data is the call's trigger data (the caller's
                    // contract).
                    unsafe { relation_name(data) }
                ),
                "The key columns the trigger names are missing or NULL: declare the table again.",
            )
            .raise()
        });
        let partition = self
            .partition
            // SAFETY: row is this call's (the caller's contract).
            .and_then(|column| unsafe { row.key_text(&[column]) });
        Note {
            key,
            partition,
            parents_before,
        }
    }

    /// What a row pointed at, per reference: each parent's key, or NULL.
    ///
    /// # Safety
    /// `row` is a version of the row, as [`super::call::versions`] answers
    /// it in this call.
    unsafe fn parents(&self, row: &Row) -> Option<Datum> {
        if self.references.is_empty() {
            return None;
        }
        let parents: Vec<Option<String>> = self
            .references
            .iter()
            // SAFETY: row is this call's (the caller's contract).
            .map(|columns| unsafe { row.key_text(columns) })
            .collect();
        Some(text_array(&parents))
    }

    /// The notes of one event: an insert notes the new row; a delete the
    /// old one, with what it pointed at; an update that changes more than
    /// the unnoted columns notes the row, with what it pointed at before,
    /// and, when its key or its partition changed, the old key in the old
    /// partition too.
    ///
    /// # Safety
    /// `old` and `new` are the versions [`super::call::versions`] answered
    /// for `relation`, the call's trigger data.
    unsafe fn notes(
        &self,
        event: u32,
        old: Option<&Row>,
        new: Option<&Row>,
        relation: &pg_sys::TriggerData,
    ) -> Vec<Note> {
        // SAFETY: old and new are this call's versions of one row of the
        // relation (one descriptor), and relation its trigger data (the
        // caller's contract): what note_of, parents, differs and same ask.
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

crate::spi::function_info_v1!(pg_finfo_note_row);

/// `sync.note_row()`: notes a row of a table that goes down.
///
/// # Safety
/// PostgreSQL calls it, as the V1 function `note_row`, with the call's own
/// `fcinfo`.
#[unsafe(no_mangle)]
#[pg_guard]
pub unsafe extern "C-unwind" fn note_row(fcinfo: pg_sys::FunctionCallInfo) -> Datum {
    // SAFETY: fcinfo is the call's own (PostgreSQL passes a valid one to a
    // V1 function). row_trigger checked that its context is an AFTER ROW
    // trigger's data, which holds the trigger (and its arguments), the
    // relation and the row's versions, all valid until this call returns;
    // nothing here keeps them past it. The notes' values are datums of the
    // columns' types: text, and parents_before a text[].
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

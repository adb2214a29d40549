//! `sync.note_group`, the trigger of a group table: the notes of a row
//! joining or leaving a group, or of a group given to or taken from a
//! replica, written to sync.group_notes.

use pgrx::pg_sys::{self, Datum};
use pgrx::prelude::*;

use super::arguments::GroupNoting;
use super::call::{
    arguments, malformed, null_trigger_result, relation_name, row_trigger, versions,
};
use super::columns::Row;
use super::sink::{text_datum, GROUP_NOTES};
use crate::error::Error;

/// One group note: a group's key, and the grouped row's key or the replica.
struct GroupNote {
    grouped: String,
    group: String,
    key: Option<String>,
    /// A uuid, pointing into the trigger's row.
    replica: Option<Datum>,
}

impl GroupNoting<'_> {
    /// The notes of one version of a group table's row.
    ///
    /// # Safety
    /// `row` is a version of the row `data` (the call's trigger data) was
    /// fired for, as [`super::call::versions`] answers it.
    unsafe fn notes_of(&self, row: &Row, data: &pg_sys::TriggerData) -> Vec<GroupNote> {
        match self {
            GroupNoting::Members {
                grouped,
                group,
                row: columns,
            } => {
                // SAFETY: row is this call's (the caller's contract).
                let (group, key) = unsafe { (row.key_text(group), row.key_text(columns)) };
                match (group, key) {
                    (Some(group), Some(key)) => vec![GroupNote {
                        grouped: (*grouped).to_owned(),
                        group,
                        key: Some(key),
                        replica: None,
                    }],
                    _ => Vec::new(),
                }
            }
            GroupNoting::Assignments {
                replica,
                group,
                grouped,
            } => {
                let at = row.position(replica);
                // The replica's value is written as a uuid as it is: a
                // column of another type would be read as one.
                if at.is_some_and(|i| row.desc[i].atttypid != pg_sys::UUIDOID) {
                    Error::not_as_declared(
                        format!(
                            "magic_sync: the column {replica} of {} is not uuid, and replica ids are uuid",
                            // SAFETY: data is the call's trigger data (the
                            // caller's contract).
                            unsafe { relation_name(data) }
                        ),
                        "Change the column back to uuid, or declare the tables again.",
                    )
                    .raise();
                }
                let replica = at.filter(|&i| !row.nulls[i]).map(|i| row.values[i]);
                // SAFETY: row is this call's (the caller's contract).
                match (unsafe { row.key_text(group) }, replica) {
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
    ///
    /// # Safety
    /// `old` and `new` are the versions [`super::call::versions`] answered
    /// for `data`, the call's trigger data.
    unsafe fn notes(
        &self,
        event: u32,
        old: Option<&Row>,
        new: Option<&Row>,
        data: &pg_sys::TriggerData,
    ) -> Vec<GroupNote> {
        // SAFETY: old and new are this call's versions of one row of the
        // relation (one descriptor), and data its trigger data (the
        // caller's contract): what same and notes_of ask.
        unsafe {
            match (event, old, new) {
                (pg_sys::TRIGGER_EVENT_UPDATE, Some(old), Some(new))
                    if old.same(new, &self.watched()) =>
                {
                    Vec::new()
                }
                _ => {
                    let mut notes = old.map(|row| self.notes_of(row, data)).unwrap_or_default();
                    notes.extend(new.map(|row| self.notes_of(row, data)).unwrap_or_default());
                    notes
                }
            }
        }
    }
}

crate::spi::function_info_v1!(pg_finfo_note_group);

/// `sync.note_group()`: notes a row of a group table.
///
/// # Safety
/// PostgreSQL calls it, as the V1 function `note_group`, with the call's
/// own `fcinfo`.
#[unsafe(no_mangle)]
#[pg_guard]
pub unsafe extern "C-unwind" fn note_group(fcinfo: pg_sys::FunctionCallInfo) -> Datum {
    // SAFETY: fcinfo is the call's own (PostgreSQL passes a valid one to a
    // V1 function). row_trigger checked that its context is an AFTER ROW
    // trigger's data, which holds the trigger (and its arguments), the
    // relation and the row's versions, all valid until this call returns;
    // nothing here keeps them past it. The notes' values are datums of the
    // columns' types: text, and the replica a uuid (notes_of checks the
    // column's type) pointing into the row, valid for the call.
    unsafe {
        let data = row_trigger(fcinfo, "sync.note_group");
        let args = arguments(&*data.tg_trigger);
        let noting = GroupNoting::parse(&args)
            .unwrap_or_else(|| malformed("sync.note_group", &relation_name(data)));
        let (event, old, new) = versions(data);
        let notes = noting.notes(event, old.as_ref(), new.as_ref(), data);
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

//! What PostgreSQL hands a trigger function: the trigger data, checked to
//! be an AFTER ROW trigger's, the trigger's arguments, the relation it
//! fired on and the versions of the row.
//!
//! What these answer points into the trigger data, which the trigger
//! manager keeps until the function returns: none of it outlives the call.

use std::ffi::CStr;

use pgrx::pg_sys::{self, Datum};

use super::columns::Row;
use crate::error::Error;

/// The trigger's data, when the function runs as an AFTER ROW trigger;
/// raises otherwise.
///
/// # Safety
/// `fcinfo` is the call's own, as PostgreSQL passes it to a V1 function.
/// The data answered is valid until the call returns: `'a` must not
/// outlive it.
pub(super) unsafe fn row_trigger<'a>(
    fcinfo: pg_sys::FunctionCallInfo,
    function: &str,
) -> &'a pg_sys::TriggerData {
    // SAFETY: fcinfo is valid (the caller's contract); its context is NULL
    // or a Node, whose tag is read only when it is not NULL.
    let is_trigger = unsafe {
        let context = (*fcinfo).context;
        !context.is_null() && (*context).type_ == pg_sys::NodeTag::T_TriggerData
    };
    if !is_trigger {
        Error::bad_input(
            format!("magic_sync: {function} runs only as a trigger"),
            "sync.triggers() prints the triggers the engine needs.",
        )
        .raise();
    }
    // SAFETY: a context tagged T_TriggerData is a TriggerData, which the
    // trigger manager made for this call and keeps until it returns.
    let data = unsafe { &*((*fcinfo).context as *const pg_sys::TriggerData) };
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

/// The trigger's arguments. One that is not UTF-8 reads as ''.
///
/// # Safety
/// `trigger` is a trigger data's `tg_trigger`: its `tgargs` holds
/// `tgnargs` NUL-terminated strings, which live as long as it does.
pub(super) unsafe fn arguments(trigger: &pg_sys::Trigger) -> Vec<&str> {
    (0..trigger.tgnargs as usize)
        .map(|i| {
            // SAFETY: i < tgnargs, and each of the first tgnargs entries of
            // tgargs is a NUL-terminated string owned by the trigger (the
            // caller's contract); tgargs is read only when tgnargs > 0.
            unsafe { CStr::from_ptr(*trigger.tgargs.add(i)) }
                .to_str()
                .unwrap_or_default()
        })
        .collect()
}

/// Raises: the trigger's arguments are none the engine writes.
pub(super) fn malformed(function: &str, relation: &str) -> ! {
    Error::not_as_declared(
        format!("magic_sync: the arguments of {function} on {relation} are not the engine's"),
        "Write the trigger again as sync.triggers() prints it, or declare the table again.",
    )
    .raise()
}

/// The relation a trigger fired on, schema-qualified, for messages.
///
/// # Safety
/// `data` is the call's trigger data (from [`row_trigger`]).
pub(super) unsafe fn relation_name(data: &pg_sys::TriggerData) -> String {
    // SAFETY: tg_relation is the relation the trigger fired on, which the
    // executor holds open (and locked) for the statement: its pg_class row
    // rd_rel is valid. get_namespace_name answers NULL or a NUL-terminated
    // copy in the current memory context, read only when not NULL.
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
///
/// # Safety
/// `data` is the call's trigger data, of an AFTER ROW trigger (as
/// [`row_trigger`] answers it). The rows are valid until the call returns:
/// `'a` must not outlive it.
pub(super) unsafe fn versions<'a>(
    data: &pg_sys::TriggerData,
) -> (u32, Option<Row<'a>>, Option<Row<'a>>) {
    let event = data.tg_event & pg_sys::TRIGGER_EVENT_OPMASK;
    // SAFETY: for an AFTER ROW trigger the trigger manager fills
    // tg_trigslot with the row (the new one of an insert, the old one of a
    // delete or an update) and, for an update, tg_newslot with the new
    // one, and keeps both until the call returns. A row trigger's event is
    // never TRUNCATE, so the last arm is an update's.
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

/// What an AFTER trigger answers: its result is ignored.
pub(super) fn null_trigger_result() -> Datum {
    Datum::from(0)
}

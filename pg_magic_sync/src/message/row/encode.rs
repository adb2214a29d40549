//! A row's bytes as they travel: `sync_internal.row_bytes(names, VARIADIC values)`,
//! a JSON object of the values under the names, UTF-8.
//!
//! It writes what `convert_to(json_build_object(name, value, ...)::text,
//! 'UTF8')` writes, byte for byte, at a fraction of the cost:
//! json_build_object looks each value's type up again for every row, and a
//! provisioning encodes a million rows. The types are read here once per
//! query. It takes only the types it writes itself (text, varchar, uuid,
//! smallint, integer, bigint, boolean, timestamptz, json);
//! `table_sql::row_bytes` hands it every other column already made JSON by
//! `to_json`, which writes what json_build_object would.

use crate::error::Error;
use std::ffi::c_void;
use std::fmt::Write;

use pgrx::pg_sys::{self, Datum, Oid};
use pgrx::prelude::*;

/// How one value is written.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    /// A JSON string of the text.
    Text,
    /// A JSON string of the UUID's hyphenated form.
    Uuid,
    Int2,
    Int4,
    /// A 64-bit integer, as a JSON string: a double would round it.
    Int8,
    Bool,
    /// A timestamptz, as a JSON string of the instant in UTC to the
    /// microsecond, ` BC` after a year before Christ, an infinite one as
    /// `infinity` or `-infinity` (what table_sql.rs's json_value writes).
    Instant,
    /// JSON already: written as it is.
    Json,
}

impl Kind {
    fn of(type_oid: Oid) -> Option<Kind> {
        Some(match type_oid {
            pg_sys::TEXTOID | pg_sys::VARCHAROID => Kind::Text,
            pg_sys::UUIDOID => Kind::Uuid,
            pg_sys::INT2OID => Kind::Int2,
            pg_sys::INT4OID => Kind::Int4,
            pg_sys::INT8OID => Kind::Int8,
            pg_sys::BOOLOID => Kind::Bool,
            pg_sys::TIMESTAMPTZOID => Kind::Instant,
            pg_sys::JSONOID => Kind::Json,
            _ => return None,
        })
    }
}

/// What a call site's values are: each one's name, written with what goes
/// before its value (`{"id" : ` for the first, `, "name" : ` after), and
/// its kind. Worked out on the first call and kept with the call site.
struct Layout {
    columns: Vec<(Vec<u8>, Kind)>,
    /// The size of the last row written: where the next one starts.
    guess: usize,
}

/// Appends `text` as a JSON string, escaped as PostgreSQL's escape_json
/// escapes it.
fn push_json_string(out: &mut Vec<u8>, text: &[u8]) {
    out.push(b'"');
    for &byte in text {
        match byte {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\x08' => out.extend_from_slice(b"\\b"),
            b'\x0c' => out.extend_from_slice(b"\\f"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            control if control < b' ' => {
                let _ = write!(ByteWriter(out), "\\u{:04x}", control);
            }
            other => out.push(other),
        }
    }
    out.push(b'"');
}

/// `write!` into a byte vector.
struct ByteWriter<'a>(&'a mut Vec<u8>);

impl std::fmt::Write for ByteWriter<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

/// What goes before the value of the `i`th name: json_build_object's
/// `{"name" : ` for the first, `, "name" : ` for the others.
fn prefix_of(i: usize, name: &str) -> Vec<u8> {
    let mut prefix = if i == 0 {
        b"{".to_vec()
    } else {
        b", ".to_vec()
    };
    push_json_string(&mut prefix, name.as_bytes());
    prefix.extend_from_slice(b" : ");
    prefix
}

impl Layout {
    fn new(names: &[String], types: &[Oid]) -> Layout {
        let columns = names
            .iter()
            .zip(types)
            .enumerate()
            .map(|(i, (name, ty))| {
                let prefix = prefix_of(i, name);
                let kind = Kind::of(*ty).unwrap_or_else(|| {
                    Error::bad_input(
                        format!("magic_sync: sync_internal.row_bytes cannot write a value of type {ty:?} ({name})"),
                        "Give it text, varchar, uuid, smallint, integer, bigint, boolean, timestamptz or json; to_json() makes any other value json.",
                    ).raise()
                });
                (prefix, kind)
            })
            .collect();
        Layout { columns, guess: 64 }
    }

    /// The row as JSON, in the server's encoding.
    ///
    /// # Safety
    /// `values` are the call's own, one per column: each non-NULL one a
    /// value of the type its column's kind was made from, valid for the
    /// call.
    unsafe fn write(&mut self, values: &[pg_sys::NullableDatum]) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.guess);
        for ((prefix, kind), value) in self.columns.iter().zip(values) {
            out.extend_from_slice(prefix);
            if value.isnull {
                out.extend_from_slice(b"null");
                continue;
            }
            // SAFETY: a non-NULL value of the kind's type, valid for the
            // call (the caller's contract).
            unsafe { write_value(&mut out, *kind, value.value) };
        }
        // The first prefix opened the object: a VARIADIC "any" function is
        // never called with no value.
        out.push(b'}');
        self.guess = out.len() + 16;
        out
    }
}

/// Appends one value as its kind is written.
///
/// # Safety
/// `value` is a non-NULL value of a type of that kind (the types
/// [`Kind::of`] names), valid for the call.
unsafe fn write_value(out: &mut Vec<u8>, kind: Kind, value: Datum) {
    match kind {
        // SAFETY: text, varchar and json are varlenas: what text_bytes reads
        // (the caller's contract).
        Kind::Text => push_json_string(out, unsafe { text_bytes(value) }),
        // SAFETY: as for text.
        Kind::Json => out.extend_from_slice(unsafe { text_bytes(value) }),
        Kind::Uuid => {
            // SAFETY: a non-NULL uuid is a pointer to its 16 bytes (a
            // fixed-length type, never toasted), valid for the call.
            let bytes = unsafe { *(value.cast_mut_ptr::<[u8; 16]>()) };
            let _ = write!(
                ByteWriter(out),
                "\"{}\"",
                uuid::Uuid::from_bytes(bytes).hyphenated()
            );
        }
        Kind::Int2 => {
            let _ = write!(ByteWriter(out), "{}", value.value() as i16);
        }
        Kind::Int4 => {
            let _ = write!(ByteWriter(out), "{}", value.value() as i32);
        }
        Kind::Int8 => {
            let _ = write!(ByteWriter(out), "\"{}\"", value.value() as i64);
        }
        Kind::Instant => push_instant(out, value.value() as i64),
        Kind::Bool => out.extend_from_slice(if value.value() != 0 {
            b"true"
        } else {
            b"false"
        }),
    }
}

/// Appends a timestamptz (microseconds since 2000-01-01 UTC) as
/// catalog/table_sql.rs's json_value writes it in UTC: a year before 1 AD
/// as its number before Christ followed by ` BC` (as PostgreSQL writes and
/// reads it back, so the instant is not taken for one after Christ), an
/// infinite one as `infinity` or `-infinity`, which is no instant but
/// comes back as the same value.
fn push_instant(out: &mut Vec<u8>, micros: i64) {
    match micros {
        i64::MIN => return out.extend_from_slice(b"\"-infinity\""),
        i64::MAX => return out.extend_from_slice(b"\"infinity\""),
        _ => {}
    }
    const DAY: i64 = 86_400_000_000;
    let (days, time) = (micros.div_euclid(DAY), micros.rem_euclid(DAY));
    let (year, month, day) = civil_from_days(days + 10_957); // 2000-01-01
    let (shown, era) = if year <= 0 {
        (1 - year, " BC")
    } else {
        (year, "")
    };
    let seconds = time / 1_000_000;
    let _ = write!(
        ByteWriter(out),
        "\"{shown:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:06}Z{era}\"",
        seconds / 3600,
        seconds / 60 % 60,
        seconds % 60,
        time % 1_000_000
    );
}

/// The proleptic Gregorian date of a day counted from 1970-01-01 (Howard
/// Hinnant's civil_from_days).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// The bytes of a text value (detoasted into the row's memory, if need be).
///
/// # Safety
/// `value` is a non-NULL varlena (text, varchar, json), valid for the
/// call; the bytes are valid until the current memory context is reset, so
/// `'a` must not outlive the call.
unsafe fn text_bytes<'a>(value: Datum) -> &'a [u8] {
    // SAFETY: value points at a varlena, maybe toasted or with a short
    // header (the caller's contract). pg_detoast_datum_packed answers it
    // as it is, or a copy made whole in the current memory context, in
    // either case one whose header vardata_any and varsize_any_exhdr read.
    unsafe {
        let text = pg_sys::pg_detoast_datum_packed(value.cast_mut_ptr());
        std::slice::from_raw_parts(
            pgrx::varlena::vardata_any(text) as *const u8,
            pgrx::varlena::varsize_any_exhdr(text),
        )
    }
}

/// The names the first argument gives. A NULL name reads as ''.
///
/// # Safety
/// `value` is a non-NULL text[], valid for the call.
unsafe fn names(value: Datum) -> Vec<String> {
    // SAFETY: a non-NULL text[] (the caller's contract), which pgrx reads
    // (detoasting it if need be) and copies out.
    unsafe { Vec::<Option<String>>::from_polymorphic_datum(value, false, pg_sys::TEXTARRAYOID) }
        .unwrap_or_default()
        .into_iter()
        .map(Option::unwrap_or_default)
        .collect()
}

/// Drops a call site's layout with the memory of its call site.
///
/// # Safety
/// PostgreSQL calls it once, as the reset callback [`layout_of`]
/// registered, with the `Box::into_raw` pointer of a layout it owns.
unsafe extern "C-unwind" fn forget_layout(layout: *mut c_void) {
    // SAFETY: layout came from Box::into_raw and is dropped only here, once:
    // a memory context calls a reset callback once, and forgets it then.
    drop(unsafe { Box::from_raw(layout as *mut Layout) });
}

/// The layout of this call site: kept with it when the names are a
/// constant, as they are in the SQL the engine writes.
///
/// # Safety
/// `fcinfo` is the call's own, of `row_bytes`. The layout is valid until
/// the call returns: `'a` must not outlive it.
unsafe fn layout_of<'a>(fcinfo: pg_sys::FunctionCallInfo) -> &'a mut Layout {
    // SAFETY: fcinfo is valid, with its flinfo (fmgr calls a V1 function
    // through one) and nargs arguments. fn_extra is NULL or a layout made
    // below for this flinfo, which lives until fn_mcxt is reset or deleted,
    // and so, as PostgreSQL keeps every function's fn_extra, as long as the
    // flinfo is used; nothing else holds a reference to it during the call.
    // A layout made for this call only is dropped when the current memory
    // context is reset, after the call. Each callback is allocated in the
    // context it is registered with, so it lives as long as that context.
    unsafe {
        let flinfo = (*fcinfo).flinfo;
        let kept = (*flinfo).fn_extra as *mut Layout;
        if !kept.is_null() {
            return &mut *kept;
        }
        let nargs = (*fcinfo).nargs as usize;
        let args = (*fcinfo).args.as_slice(nargs);
        if nargs < 2 {
            Error::bad_input(
                "magic_sync: sync_internal.row_bytes needs names and at least one value",
                "Write sync_internal.row_bytes(names, value1, value2, ...).",
            )
            .raise();
        }
        if pg_sys::get_fn_expr_variadic(flinfo) {
            Error::bad_input(
                "magic_sync: sync_internal.row_bytes takes its values one by one, not as a VARIADIC array"
                    .to_owned(),
                "Write sync_internal.row_bytes(names, value1, value2, ...).",
            )
            .raise();
        }
        if args[0].isnull {
            Error::bad_input(
                "magic_sync: sync_internal.row_bytes needs the names of its values".to_owned(),
                "Give the names as a text[] first.",
            )
            .raise();
        }
        let names = names(args[0].value);
        if names.len() != nargs - 1 {
            Error::bad_input(
                format!(
                    "magic_sync: sync_internal.row_bytes was given {} names for {} values",
                    names.len(),
                    nargs - 1
                ),
                "Give one name per value.",
            )
            .raise();
        }
        let types: Vec<Oid> = (1..nargs)
            .map(|i| pg_sys::get_fn_expr_argtype(flinfo, i as i32))
            .collect();
        let layout = Box::into_raw(Box::new(Layout::new(&names, &types)));
        if pg_sys::get_fn_expr_arg_stable(flinfo, 0) {
            let callback = pg_sys::MemoryContextAllocZero(
                (*flinfo).fn_mcxt,
                std::mem::size_of::<pg_sys::MemoryContextCallback>(),
            ) as *mut pg_sys::MemoryContextCallback;
            (*callback).func = Some(forget_layout);
            (*callback).arg = layout as *mut c_void;
            pg_sys::MemoryContextRegisterResetCallback((*flinfo).fn_mcxt, callback);
            (*flinfo).fn_extra = layout as *mut c_void;
        } else {
            // Names that may change from row to row: a layout per row,
            // dropped with the row's memory.
            let callback = pg_sys::palloc0(std::mem::size_of::<pg_sys::MemoryContextCallback>())
                as *mut pg_sys::MemoryContextCallback;
            (*callback).func = Some(forget_layout);
            (*callback).arg = layout as *mut c_void;
            pg_sys::MemoryContextRegisterResetCallback(pg_sys::CurrentMemoryContext, callback);
        }
        &mut *layout
    }
}

/// The bytes as a bytea, UTF-8 whatever the server's encoding, in the
/// current memory context.
fn bytea_of(json: &[u8]) -> Datum {
    // SAFETY: pg_server_to_any reads len bytes of json and answers them as
    // they are or a NUL-terminated conversion in the current memory context
    // (JSON text holds no NUL, so strlen is its length). The bytea is
    // allocated with room for its header and len bytes, all written.
    unsafe {
        let mut bytes = json.as_ptr() as *const std::ffi::c_char;
        let mut len = json.len();
        if pg_sys::GetDatabaseEncoding() != pg_sys::pg_enc::PG_UTF8 as i32 {
            let converted =
                pg_sys::pg_server_to_any(bytes, len as i32, pg_sys::pg_enc::PG_UTF8 as i32);
            if !std::ptr::eq(converted, bytes) {
                len = std::ffi::CStr::from_ptr(converted).to_bytes().len();
            }
            bytes = converted;
        }
        let total = len + pg_sys::VARHDRSZ;
        let varlena = pg_sys::palloc(total) as *mut pg_sys::varlena;
        pgrx::varlena::set_varsize_4b(varlena, total as i32);
        std::ptr::copy_nonoverlapping(
            bytes as *const u8,
            (varlena as *mut u8).add(pg_sys::VARHDRSZ),
            len,
        );
        Datum::from(varlena)
    }
}

crate::spi::function_info_v1!(pg_finfo_row_bytes);

/// `sync_internal.row_bytes(names text[], VARIADIC "any") RETURNS bytea`.
///
/// # Safety
/// PostgreSQL calls it, as the V1 function `row_bytes`, with the call's own
/// `fcinfo`.
#[unsafe(no_mangle)]
#[pg_guard]
pub unsafe extern "C-unwind" fn row_bytes(fcinfo: pg_sys::FunctionCallInfo) -> Datum {
    // SAFETY: fcinfo is the call's own (PostgreSQL passes a valid one to a
    // V1 function), with nargs arguments, at least 2 (layout_of checks).
    // The layout was made for this call site's argument types, so each
    // non-NULL value is of its column's kind, valid for the call.
    unsafe {
        let layout = layout_of(fcinfo);
        let nargs = (*fcinfo).nargs as usize;
        let values = &(*fcinfo).args.as_slice(nargs)[1..];
        let json = layout.write(values);
        bytea_of(&json)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_string_is_escaped_as_postgres_escapes_it() {
        let mut out = Vec::new();
        push_json_string(
            &mut out,
            "a\"b\\c\u{8}\u{c}\n\r\t\u{1}\u{1f} é\u{7f}".as_bytes(),
        );
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "\"a\\\"b\\\\c\\b\\f\\n\\r\\t\\u0001\\u001f é\u{7f}\""
        );
    }

    #[test]
    fn an_instant_is_written_in_utc_to_the_microsecond() {
        let written = |micros: i64| {
            let mut out = Vec::new();
            push_instant(&mut out, micros);
            String::from_utf8(out).unwrap()
        };
        assert_eq!(written(0), "\"2000-01-01T00:00:00.000000Z\"");
        assert_eq!(written(-1), "\"1999-12-31T23:59:59.999999Z\"");
        assert_eq!(
            written(848_537_412_345_678),
            "\"2026-11-21T00:50:12.345678Z\""
        );
        assert_eq!(written(i64::MAX), "\"infinity\"");
        assert_eq!(written(i64::MIN), "\"-infinity\"");
        // 4713-01-01 00:00:00 BC, the first instant PostgreSQL takes.
        assert_eq!(
            written(-211_810_204_800_000_000),
            "\"4713-01-01T00:00:00.000000Z BC\""
        );
    }

    #[test]
    fn names_are_written_as_json_build_object_writes_them() {
        let written = |i, name| String::from_utf8(prefix_of(i, name)).unwrap();
        assert_eq!(written(0, "id"), "{\"id\" : ");
        assert_eq!(written(1, "say \"hi\""), ", \"say \\\"hi\\\"\" : ");
    }
}

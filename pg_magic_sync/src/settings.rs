//! The engine's settings, as GUCs (`magic_sync.*`). Its limits and timers
//! are the server's: set in its configuration (a reload applies them), or
//! by a superuser, never by just any session.

use std::ffi::CString;

use pgrx::guc::{GucContext, GucFlags, GucRegistry, GucSetting};
use pgrx::PostgresGucEnum;

use magic_sync_proto::limits::Limits;

pub static MESSAGE_ROWS: GucSetting<i32> = GucSetting::<i32>::new(Limits::DEFAULT.rows as i32);
pub static MESSAGE_BYTES: GucSetting<i32> = GucSetting::<i32>::new(Limits::DEFAULT.bytes as i32);
pub static NOTES_PER_PASS: GucSetting<i32> = GucSetting::<i32>::new(100_000);
pub static PASS_TIMINGS: GucSetting<bool> = GucSetting::<bool>::new(false);
pub static RETRY_EVERY: GucSetting<i32> = GucSetting::<i32>::new(3600);
pub static DATABASE: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
pub static IDLE: GucSetting<i32> = GucSetting::<i32>::new(10);
pub static TRANSPORT: GucSetting<Transport> = GucSetting::<Transport>::new(Transport::Queue);

/// How messages leave PostgreSQL for the replicas.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PostgresGucEnum)]
pub enum Transport {
    /// The outbox is the queue: a device, or a gateway before many, takes
    /// its messages with sync.next() and is woken by NOTIFY.
    #[name = c"queue"]
    Queue,
}

pub fn define() {
    GucRegistry::define_int_guc(
        c"magic_sync.message_rows",
        c"Rows (upserts and deletes) one message carries at most.",
        c"Replicas take 500 by default; keep it at or below what they take.",
        &MESSAGE_ROWS,
        1,
        1_000_000,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"magic_sync.message_bytes",
        c"Bytes one message takes at most: the transport's limit.",
        c"1 MiB by default, what NATS takes.",
        &MESSAGE_BYTES,
        4096,
        i32::MAX,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"magic_sync.notes_per_pass",
        c"Notes one relay pass plans together at most.",
        c"",
        &NOTES_PER_PASS,
        1,
        i32::MAX,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"magic_sync.retry_every",
        c"Seconds between tries of what was set aside (rows no message could carry).",
        c"A relay that starts tries them at once; sync.retry() after a deploy does too.",
        &RETRY_EVERY,
        1,
        i32::MAX,
        GucContext::Suset,
        GucFlags::UNIT_S,
    );
    GucRegistry::define_bool_guc(
        c"magic_sync.pass_timings",
        c"Whether a relay pass's summary says how long each of its steps took.",
        c"For finding what makes a pass slow; off by default, so a summary is the same every time.",
        &PASS_TIMINGS,
        GucContext::Userset,
        GucFlags::default(),
    );
    // Read as the server starts: only a library it preloads may define it.
    // SAFETY: a flag PostgreSQL sets while it loads shared_preload_libraries.
    if unsafe { pgrx::pg_sys::process_shared_preload_libraries_in_progress } {
        define_database();
    }
    GucRegistry::define_int_guc(
        c"magic_sync.idle",
        c"Seconds a relay worker sleeps at most when no commit wakes it.",
        c"It relays then anyway: a replica that became live is noted by no trigger.",
        &IDLE,
        1,
        86_400,
        GucContext::Sighup,
        GucFlags::UNIT_S,
    );
    GucRegistry::define_enum_guc(
        c"magic_sync.transport",
        c"How messages leave PostgreSQL for the replicas.",
        c"queue: the outbox is the queue devices take from with sync.next().",
        &TRANSPORT,
        GucContext::Sighup,
        GucFlags::default(),
    );
}

fn define_database() {
    GucRegistry::define_string_guc(
        c"magic_sync.database",
        c"The databases a relay worker runs in, one per name (a comma-separated list).",
        c"Read when the server starts, with magic_sync in shared_preload_libraries.",
        &DATABASE,
        GucContext::Postmaster,
        GucFlags::default(),
    );
}

/// The databases `magic_sync.database` names, in its order.
pub fn databases() -> Vec<String> {
    let listed = DATABASE
        .get()
        .map(|names| names.to_string_lossy().into_owned())
        .unwrap_or_default();
    listed
        .split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The limits every message of this pass keeps to.
pub fn limits() -> Limits {
    Limits {
        rows: MESSAGE_ROWS.get() as usize,
        bytes: MESSAGE_BYTES.get() as usize,
        ..Limits::DEFAULT
    }
}

//! The engine's settings, as GUCs (`magic_sync.*`).

use pgrx::guc::{GucContext, GucFlags, GucRegistry, GucSetting};

use magic_sync_proto::limits::Limits;

pub static MESSAGE_ROWS: GucSetting<i32> = GucSetting::<i32>::new(Limits::DEFAULT.rows as i32);
pub static MESSAGE_BYTES: GucSetting<i32> = GucSetting::<i32>::new(Limits::DEFAULT.bytes as i32);
pub static NOTES_PER_PASS: GucSetting<i32> = GucSetting::<i32>::new(100_000);
pub static PASS_TIMINGS: GucSetting<bool> = GucSetting::<bool>::new(false);
pub static RETRY_EVERY: GucSetting<i32> = GucSetting::<i32>::new(3600);

pub fn define() {
    GucRegistry::define_int_guc(
        c"magic_sync.message_rows",
        c"Rows (upserts and deletes) one message carries at most.",
        c"Replicas take 500 by default; keep it at or below what they take.",
        &MESSAGE_ROWS,
        1,
        1_000_000,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"magic_sync.message_bytes",
        c"Bytes one message takes at most: the transport's limit.",
        c"1 MiB by default, what NATS takes.",
        &MESSAGE_BYTES,
        4096,
        i32::MAX,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"magic_sync.notes_per_pass",
        c"Notes one relay pass plans together at most.",
        c"",
        &NOTES_PER_PASS,
        1,
        i32::MAX,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"magic_sync.retry_every",
        c"Seconds between tries of what was set aside (rows no message could carry).",
        c"A relay that starts tries them at once; sync.retry() after a deploy does too.",
        &RETRY_EVERY,
        1,
        i32::MAX,
        GucContext::Userset,
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
}

/// The limits every message of this pass keeps to.
pub fn limits() -> Limits {
    Limits {
        rows: MESSAGE_ROWS.get() as usize,
        bytes: MESSAGE_BYTES.get() as usize,
        ..Limits::DEFAULT
    }
}

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
pub static MESSAGES_AHEAD: GucSetting<i32> = GucSetting::<i32>::new(4);
pub static BEHIND_AFTER: GucSetting<i32> = GucSetting::<i32>::new(1000);
pub static PASS_TIMINGS: GucSetting<bool> = GucSetting::<bool>::new(false);
pub static RETRY_EVERY: GucSetting<i32> = GucSetting::<i32>::new(3600);
pub static DATABASE: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
pub static IDLE: GucSetting<i32> = GucSetting::<i32>::new(10);
pub static GATHER: GucSetting<i32> = GucSetting::<i32>::new(100);
pub static TRANSPORT: GucSetting<Transport> = GucSetting::<Transport>::new(Transport::Queue);
pub static CONCURRENCY: GucSetting<i32> = GucSetting::<i32>::new(16);
pub static SEND_TIMEOUT: GucSetting<i32> = GucSetting::<i32>::new(30_000);
pub static OUTBOX_MESSAGES: GucSetting<i32> = GucSetting::<i32>::new(10_000);
pub static OUTBOX_BYTES: GucSetting<i32> = GucSetting::<i32>::new(256 * 1024);
pub static UNCONFIRMED_AFTER: GucSetting<i32> = GucSetting::<i32>::new(3600);
pub static STALLED_AFTER: GucSetting<i32> = GucSetting::<i32>::new(120);
pub static NATS_URL: GucSetting<Option<CString>> =
    GucSetting::<Option<CString>>::new(Some(c"nats://127.0.0.1:4222"));
pub static NATS_CREDENTIALS: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
pub static NATS_USER: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
pub static NATS_PASSWORD_FILE: GucSetting<Option<CString>> =
    GucSetting::<Option<CString>>::new(None);
pub static NATS_SUBJECTS: GucSetting<Option<CString>> =
    GucSetting::<Option<CString>>::new(Some(c"magic_sync"));
pub static NATS_DOWN_STREAM: GucSetting<Option<CString>> =
    GucSetting::<Option<CString>>::new(Some(c"MAGIC_SYNC_DOWN"));
pub static NATS_UP_STREAM: GucSetting<Option<CString>> =
    GucSetting::<Option<CString>>::new(Some(c"MAGIC_SYNC_UP"));
pub static NATS_REPLICAS: GucSetting<i32> = GucSetting::<i32>::new(1);

/// How messages leave PostgreSQL for the replicas.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PostgresGucEnum)]
pub enum Transport {
    /// The outbox is the queue: a device, or a gateway before many, takes
    /// its messages with sync.next() and is woken by NOTIFY.
    #[name = c"queue"]
    Queue,
    /// NATS JetStream: the relay worker publishes each replica's messages
    /// to a subject of its own and files the Ups it consumes.
    #[name = c"nats"]
    Nats,
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
        c"magic_sync.messages_ahead",
        c"Messages a replica may have waiting in its outbox before passes gather its changes for one message later.",
        c"A replica that far behind is planned nothing until it takes its messages; what changed meanwhile is sent it then, each row once. 0: never.",
        &MESSAGES_AHEAD,
        0,
        i32::MAX,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"magic_sync.behind_after",
        c"How long the oldest of magic_sync.messages_ahead messages must have waited before their replica counts as far behind.",
        c"A register that keeps up says what it applied within its loop's report_after (100 ms); over nats, passes in that time leave it behind by its reports alone.",
        &BEHIND_AFTER,
        0,
        i32::MAX,
        GucContext::Suset,
        GucFlags::UNIT_MS,
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
    GucRegistry::define_int_guc(
        c"magic_sync.gather",
        c"Milliseconds a relay worker waits at most for notes to gather before a pass, while they stream in.",
        c"Only after a pass during which more notes were committed (worker/pacing.rs); 0: passes back to back.",
        &GATHER,
        0,
        10_000,
        GucContext::Sighup,
        GucFlags::UNIT_MS,
    );
    GucRegistry::define_enum_guc(
        c"magic_sync.transport",
        c"How messages leave PostgreSQL for the replicas.",
        c"queue: the outbox is the queue devices take from with sync.next(); nats: NATS JetStream.",
        &TRANSPORT,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"magic_sync.concurrency",
        c"Replicas the relay worker sends to at once.",
        c"Each replica's messages go one after another, in order.",
        &CONCURRENCY,
        1,
        10_000,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"magic_sync.send_timeout",
        c"How long a send may go unanswered before it counts as a transient failure.",
        c"",
        &SEND_TIMEOUT,
        1,
        3_600_000,
        GucContext::Sighup,
        GucFlags::UNIT_MS,
    );
    define_bounds();
    define_nats();
}

fn define_bounds() {
    GucRegistry::define_int_guc(
        c"magic_sync.outbox_messages",
        c"Messages a replica's outbox holds at most behind its snapshot: past it, provisioned again.",
        c"A replica long away is sent what it should hold instead of every change it missed.",
        &OUTBOX_MESSAGES,
        1,
        i32::MAX,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"magic_sync.outbox_bytes",
        c"Bytes a replica's outbox holds at most behind its snapshot: past it, provisioned again.",
        c"",
        &OUTBOX_BYTES,
        1,
        i32::MAX,
        GucContext::Sighup,
        GucFlags::UNIT_KB,
    );
    GucRegistry::define_int_guc(
        c"magic_sync.unconfirmed_after",
        c"Seconds a replica may leave what it was sent unconfirmed, nothing newer going to it, before it is provisioned again.",
        c"The transport may have lost what it was sent.",
        &UNCONFIRMED_AFTER,
        1,
        i32::MAX,
        GucContext::Sighup,
        GucFlags::UNIT_S,
    );
    GucRegistry::define_int_guc(
        c"magic_sync.stalled_after",
        c"Seconds a replica may apply nothing while messages wait for it before it counts as stalled and the relay worker heals it.",
        c"Shown by the status reads once it is heard meanwhile; over nats its consumer is made again, then it is provisioned again.",
        &STALLED_AFTER,
        1,
        i32::MAX,
        GucContext::Sighup,
        GucFlags::UNIT_S,
    );
}

fn define_nats() {
    let strings = [
        (
            c"magic_sync.nats_url",
            c"The NATS server(s) the nats transport connects to (comma-separated URLs).",
            &NATS_URL,
        ),
        (
            c"magic_sync.nats_credentials",
            c"A NATS credentials file (.creds) the relay worker connects with; empty for none.",
            &NATS_CREDENTIALS,
        ),
        (
            c"magic_sync.nats_user",
            c"The NATS user the relay worker connects as, with magic_sync.nats_password_file; empty for none.",
            &NATS_USER,
        ),
        (
            c"magic_sync.nats_password_file",
            c"A file holding the password of magic_sync.nats_user (its first line).",
            &NATS_PASSWORD_FILE,
        ),
        (
            c"magic_sync.nats_subjects",
            c"The first token of every subject: {it}.down.{replica}, {it}.up.{replica}.{lane}.",
            &NATS_SUBJECTS,
        ),
        (
            c"magic_sync.nats_down_stream",
            c"The JetStream stream the replicas' messages are stored in.",
            &NATS_DOWN_STREAM,
        ),
        (
            c"magic_sync.nats_up_stream",
            c"The JetStream stream the replicas' Ups are stored in.",
            &NATS_UP_STREAM,
        ),
    ];
    for (name, short, setting) in strings {
        GucRegistry::define_string_guc(
            name,
            short,
            c"",
            setting,
            GucContext::Sighup,
            GucFlags::default(),
        );
    }
    GucRegistry::define_int_guc(
        c"magic_sync.nats_replicas",
        c"The replication factor of the streams the nats transport creates.",
        c"1 for a single nats-server; 3 or 5 in a cluster.",
        &NATS_REPLICAS,
        1,
        5,
        GucContext::Sighup,
        GucFlags::default(),
    );
}

/// A string setting's value, "" when unset.
pub fn text(setting: &GucSetting<Option<CString>>) -> String {
    setting
        .get()
        .map(|value| value.to_string_lossy().into_owned())
        .unwrap_or_default()
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
    database_names(&text(&DATABASE))
}

/// The names of a comma-separated list, each trimmed. A name in double
/// quotes is taken as written, as SQL quotes an identifier (a comma, a
/// space, a doubled quote inside), so any database can be named; one
/// unquoted keeps its case, as it always has.
fn database_names(listed: &str) -> Vec<String> {
    #[derive(PartialEq)]
    enum At {
        Bare,
        Quoted,
        // Past a quoted name's closing quote: nothing more is its.
        Closed,
    }
    // Each name, and whether it was quoted (then kept as it is).
    let mut names: Vec<(String, bool)> = Vec::new();
    let mut name = String::new();
    let mut at = At::Bare;
    let mut chars = listed.chars().peekable();
    while let Some(c) = chars.next() {
        match (&at, c) {
            (At::Quoted, '"') if chars.peek() == Some(&'"') => {
                name.push('"');
                chars.next();
            }
            (At::Quoted, '"') => at = At::Closed,
            (At::Quoted, c) => name.push(c),
            (At::Bare, '"') if name.trim().is_empty() => {
                name.clear();
                at = At::Quoted;
            }
            (At::Bare | At::Closed, ',') => {
                names.push((std::mem::take(&mut name), at == At::Closed));
                at = At::Bare;
            }
            (At::Bare, c) => name.push(c),
            (At::Closed, _) => {}
        }
    }
    names.push((name, at != At::Bare));
    names
        .into_iter()
        .map(|(n, quoted)| if quoted { n } else { n.trim().to_owned() })
        .filter(|n| !n.is_empty())
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

#[cfg(test)]
mod tests {
    use super::database_names;

    #[test]
    fn a_database_list_is_split_at_commas_and_trimmed() {
        assert_eq!(database_names(" shop, Depot ,,"), ["shop", "Depot"]);
        assert!(database_names("").is_empty());
    }

    #[test]
    fn a_quoted_database_name_is_taken_as_written() {
        assert_eq!(
            database_names(r#"shop, "Shöp, ""x""; y", " spaced ""#),
            ["shop", "Shöp, \"x\"; y", " spaced "]
        );
    }
}

//! The relay worker: a background worker per database that runs relay
//! passes by itself, as `CALL sync.relay()` runs one by hand.
//!
//! - With `shared_preload_libraries = 'magic_sync'`, one is registered per
//!   database `magic_sync.database` names, started once the server accepts
//!   writes (never on a hot standby: a promoted one starts it), and started
//!   again by the postmaster after a crash. `sync.start_relay()` starts one
//!   for the current database without preloading.
//! - It sleeps until a commit that noted a change wakes it (note/wake.rs),
//!   or `magic_sync.idle` passes, and then runs passes back to back while
//!   full batches of notes wait. While notes stream in faster than passes
//!   clear them, it waits a bounded few milliseconds before the next pass,
//!   so that a pass takes more of them (pacing.rs); a change alone, after
//!   quiet, is relayed at once.
//! - Each round: what is due before a pass (the inbox filed again, put-off
//!   provisionings), then the pass, which records and, with the queue,
//!   wakes the devices waiting on it (sql/relay.sql). Its first pass is a
//!   relay starting: whatever was set aside is tried again.
//! - A transient failure (serialization, deadlock, a lock or statement
//!   timeout, the database shutting down) is tried again after a backoff; a
//!   permanent one is logged and tried again after `magic_sync.retry_every`
//!   (or a minute, if sooner): it never makes the worker exit.

use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use pgrx::bgworkers::{
    BackgroundWorker, BackgroundWorkerBuilder, BgWorkerStartTime, SignalWakeFlags,
};
use pgrx::prelude::*;
use serde_json::Value;

mod name;
mod pacing;
mod push;
mod stalls;
pub mod transaction;

use crate::declare::drift;
use crate::error::Error;
use crate::gate;
use crate::settings;
use crate::statements::worker::{
    BEFORE_PASS, DROP_TEMP_BUFFERS_TABLE, EXTENSION_IS_HERE, MAKE_TEMP_BUFFERS_TABLE,
    OUTBOX_CHECKS, PASS, TAKE_TEMP_BUFFERS, WAITING, WORK_WAITS,
};
use crate::version;
use crate::wake;
pub use name::NAME;
use pacing::Pacing;
use push::Push;
use transaction::{spi_failure, transaction};

/// The C symbol the postmaster starts a worker at.
const ENTRY: &str = "magic_sync_relay_main";

/// How long a crashed worker waits before the postmaster starts it again.
const RESTART_AFTER: Duration = Duration::from_secs(5);

/// Every how often a worker whose database lacks the extension looks again.
const EXTENSION_LOOKED_FOR_EVERY: Duration = Duration::from_secs(2);

/// Every how many passes the worker empties its catalog caches. Passes
/// once made and dropped their scratch tables, and the caches kept what
/// they learnt of each (about 8 kB a pass) for the life of the process.
/// The tables now live as long as the worker (relay/scratch.rs), so little
/// piles up; the flush is kept, being cheap, as a bound on whatever else
/// does (it also makes the next pass check the declarations again).
const FLUSH_CACHES_EVERY: u32 = 256;

/// The most memory the worker's scratch tables keep their pages in, in
/// pages of 8 kB (1 MB). PostgreSQL takes buffers for temporary tables as
/// pages are first used and keeps them for the session: with the default
/// 8 MB the worker's memory crept up by that much over its first ten
/// thousand passes. A small pass fits in 1 MB, a large one goes through
/// the kernel's page cache either way.
const TEMP_BUFFER_PAGES: i32 = 128;

/// Every how often the worker logs what waits for someone, if anything.
const REPORT_EVERY: Duration = Duration::from_secs(300);

/// Every how often the worker checks what went out (sql/publish.sql), at
/// most: every `magic_sync.idle` when that is shorter.
const CHECK_EVERY: Duration = Duration::from_secs(10);

/// The counts of WAITING that say someone is needed.
const NEEDS_SOMEONE: [&str; 6] = [
    "notes",
    "undelivered",
    "set_aside",
    "refused",
    "inbox",
    "failing",
];

/// Registers a worker per database of `magic_sync.database`: call from
/// `_PG_init` while the library is preloaded.
pub fn register_static_workers() {
    for database in settings::databases() {
        builder(&database)
            .set_restart_time(Some(RESTART_AFTER))
            .load();
    }
}

/// Starts a worker for `database` now; answers its process id.
pub fn start_dynamic(database: &str) -> Option<i32> {
    let worker = builder(database)
        // One started by hand is stopped by hand, and not started again.
        .set_restart_time(None)
        // SAFETY: MyProcPid is this backend's, set before any SQL runs.
        .set_notify_pid(unsafe { pg_sys::MyProcPid })
        .load_dynamic()
        .ok()?;
    worker.wait_for_startup().ok()
}

fn builder(database: &str) -> BackgroundWorkerBuilder {
    BackgroundWorkerBuilder::new(NAME)
        .set_type(NAME)
        .set_library("magic_sync")
        .set_function(ENTRY)
        .set_extra(database)
        .enable_spi_access()
        .set_start_time(BgWorkerStartTime::RecoveryFinished)
}

/// Where the postmaster starts a worker: `bgw_extra` names its database.
///
/// # Safety
/// Called by PostgreSQL's background worker machinery only, in a process
/// of its own, as a bgworker's entry point.
#[unsafe(no_mangle)]
#[pg_guard]
pub extern "C-unwind" fn magic_sync_relay_main(_arg: pg_sys::Datum) {
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGHUP | SignalWakeFlags::SIGTERM);
    let database = BackgroundWorker::get_extra().to_owned();
    // A database that does not exist ends the worker with FATAL as it
    // connects: this line says which setting named it.
    pgrx::log!(
        "{NAME}: connecting to database \"{database}\" (magic_sync.database or sync.start_relay())"
    );
    BackgroundWorker::connect_worker_to_spi(Some(&database), None);
    limit_temp_buffers();
    // SAFETY: connected: MyDatabaseId is this worker's database.
    let oid = unsafe { pg_sys::MyDatabaseId };
    if !wake::register_worker(oid) && wake::commits_wake() {
        pgrx::warning!(
            "{NAME}: no slot left to be woken by commits; relaying every magic_sync.idle"
        );
    }
    Worker::new(database).run();
    wake::unregister_worker(oid);
}

struct Worker {
    database: String,
    /// The next pass is the first since this worker started.
    starting: bool,
    /// After a failure: when to try again, and how long the last wait was.
    retry_at: Option<Instant>,
    backoff: Duration,
    reported_at: Instant,
    /// The extension was missing, or of another version than the library,
    /// when last looked: nothing of the engine runs, and why was said once.
    said_missing: bool,
    /// What was said of it, to say it again only when it changes.
    said_why: Option<String>,
    /// Passes since the catalog caches were last emptied.
    passes: u32,
    /// Every buffer for temporary tables was taken (take_temp_buffers).
    buffers_taken: bool,
    /// Publishing, with a transport the worker pushes to.
    push: Push,
    checked_at: Instant,
    /// How passes are paced while notes stream in (pacing.rs).
    pacing: Pacing,
    /// The wait due before the next pass, for notes to gather.
    gather: Duration,
    /// The wait the next pass came after.
    gathered: Duration,
}

/// What one round did.
enum Round {
    /// Passes ran; more notes may wait.
    Relayed { more: bool },
    /// The database lacks the extension, or holds it at another version
    /// than the library: nothing to do but wait, saying why.
    NotReady(String),
}

/// What a round finds before it passes.
enum Found {
    NoExtension,
    /// The extension's SQL is of this other version (an upgrade half done).
    OtherVersion(String),
    NoWork,
    Work,
}

impl Worker {
    fn new(database: String) -> Worker {
        Worker {
            database,
            starting: true,
            retry_at: None,
            backoff: Duration::ZERO,
            reported_at: Instant::now(),
            said_missing: false,
            said_why: None,
            buffers_taken: false,
            passes: 0,
            push: Push::new(),
            checked_at: Instant::now(),
            pacing: Pacing::default(),
            gather: Duration::ZERO,
            gathered: Duration::ZERO,
        }
    }

    fn run(mut self) {
        let mut more = true;
        // Whether the last wait ended by a latch set (a commit that noted)
        // rather than by its timeout: then a pass runs only if work waits.
        let mut woken = false;
        loop {
            if BackgroundWorker::sighup_received() {
                // SAFETY: the worker's main loop, outside any transaction,
                // where PostgreSQL's own processes read their configuration.
                unsafe { pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP) };
            }
            let gather = std::mem::take(&mut self.gather);
            if !more && !gather.is_zero() {
                // Notes came while the last pass ran: let more gather.
                if !self.gather_notes(gather) {
                    break;
                }
                self.gathered = gather;
                // Notes were committed while the last pass ran (that is
                // why it gathered): work waits, without asking.
                woken = false;
            } else if !more {
                match wait(self.next_wait(), self.push.socket()) {
                    Wake::Stop => break,
                    Wake::Latch => woken = true,
                    // Filed first, so that the round sees what they call
                    // for (a replica to provision again, rows to send on):
                    // a pass only if work waits then.
                    Wake::Ups => {
                        self.publish();
                        woken = true;
                    }
                    Wake::Timeout => woken = false,
                }
                if BackgroundWorker::sigterm_received() {
                    break;
                }
            }
            if self.retry_at.is_some_and(|at| Instant::now() < at) {
                more = self.publish();
                continue;
            }
            let only_if_work_waits = woken && !self.starting && self.retry_at.is_none();
            woken = false;
            show_activity(pg_sys::BackendState::STATE_RUNNING, c"relay round");
            more = match self.round(only_if_work_waits) {
                Ok(Round::Relayed { more }) => {
                    self.retry_at = None;
                    self.backoff = Duration::ZERO;
                    self.starting = false;
                    self.said_missing = false;
                    self.said_why = None;
                    self.publish() || more
                }
                Ok(Round::NotReady(why)) => {
                    // CREATE (or ALTER) EXTENSION wakes no one: look again
                    // soon.
                    self.retry_at = Some(Instant::now() + EXTENSION_LOOKED_FOR_EVERY);
                    self.said_missing = true;
                    if self.said_why.as_deref() != Some(why.as_str()) {
                        pgrx::log!("{NAME}: {why}: waiting");
                        self.said_why = Some(why);
                    }
                    false
                }
                Err(failure) => {
                    self.failed(failure);
                    false
                }
            };
            more |= self.check_if_due();
            self.report_if_due();
            let shown = std::ffi::CString::new(self.pacing.shown()).unwrap_or_default();
            show_activity(pg_sys::BackendState::STATE_IDLE, &shown);
            flush_statistics(!more);
        }
        pgrx::log!("{NAME}: stopping (database \"{}\")", self.database);
    }

    /// Waits `gather` for notes to gather before the next pass, deaf to
    /// the commits that set the latch meanwhile; Ups that come are filed.
    /// Answers false when the worker is to stop.
    fn gather_notes(&mut self, gather: Duration) -> bool {
        let until = Instant::now() + gather;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left < Duration::from_millis(1) {
                return true;
            }
            match wait_deaf_to_commits(left, self.push.socket()) {
                Wake::Stop => return false,
                Wake::Ups => {
                    self.publish();
                }
                Wake::Latch | Wake::Timeout => {}
            }
            if BackgroundWorker::sigterm_received() {
                return false;
            }
        }
    }

    /// Files what came and sends what is due, with a transport the worker
    /// pushes to; answers whether more is due at once. Never while the
    /// extension is missing.
    fn publish(&mut self) -> bool {
        !self.said_missing && self.push.push()
    }

    /// How long to sleep: until the retry after a failure, or `magic_sync.idle`.
    fn next_wait(&self) -> Duration {
        let idle = Duration::from_secs(settings::IDLE.get().max(1) as u64);
        let retry = self
            .retry_at
            .map(|at| at.saturating_duration_since(Instant::now()));
        let send = if self.said_missing {
            None
        } else {
            self.push.due_in()
        };
        [Some(idle), retry, send]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(idle)
            .max(Duration::from_millis(10))
    }

    /// What is due before a pass, then passes. Woken by a latch, the worker
    /// starts no pass when no work waits (`only_if_work_waits`): a timeout
    /// still runs one, as a replica that became live writes no note.
    fn round(&mut self, only_if_work_waits: bool) -> Result<Round, Error> {
        if !self.buffers_taken {
            transaction(false, take_temp_buffers)?
                .map_err(|e| spi_failure(TAKE_TEMP_BUFFERS, e))?;
            self.buffers_taken = true;
        }
        let starting = self.starting;
        // One transaction looks for the extension and, when asked, for work,
        // and does what is due before a pass: one transaction a round
        // fewer, its cost paid by every pass of a stream.
        let found = transaction(false, || {
            if Spi::get_one::<bool>(EXTENSION_IS_HERE)? != Some(true) {
                return Ok(Found::NoExtension);
            }
            if let Err(Error::OtherVersion { installed, .. }) = version::installed_is_the_librarys()
            {
                return Ok(Found::OtherVersion(installed));
            }
            if only_if_work_waits && Spi::get_one::<bool>(WORK_WAITS)? != Some(true) {
                return Ok(Found::NoWork);
            }
            Spi::get_one_with_args::<pgrx::JsonB>(BEFORE_PASS, &[starting.into()])?;
            Ok(Found::Work)
        })?
        .map_err(|e: pgrx::spi::SpiError| {
            spi_failure("the look for the extension and for work", e)
        })?;
        match found {
            Found::NoExtension => {
                return Ok(Round::NotReady(format!(
                    "database \"{}\" has no magic_sync extension yet",
                    self.database
                )))
            }
            Found::OtherVersion(installed) => {
                return Ok(Round::NotReady(format!(
                    "database \"{}\" holds magic_sync {installed} and this library is {}: \
                     run ALTER EXTENSION magic_sync UPDATE TO '{}' there",
                    self.database,
                    version::LIBRARY,
                    version::LIBRARY
                )))
            }
            Found::NoWork => {
                self.pacing.no_pass();
                return Ok(Round::Relayed { more: false });
            }
            Found::Work => {}
        }
        // No filing meanwhile (relay/gate.rs), however the pass ends.
        transaction(false, gate::close)?;
        // A commit that notes from now on sets the latch: set when the pass
        // ends, notes came while it ran (pacing.rs).
        reset_latch();
        self.pacing.waited(std::mem::take(&mut self.gathered));
        let began = Instant::now();
        let passed = pass(starting);
        let arrived = latch_is_set();
        let took = began.elapsed();
        transaction(false, gate::open)?;
        let summary = passed?;
        self.passes += 1;
        if self.passes >= FLUSH_CACHES_EVERY {
            self.passes = 0;
            // SAFETY: inside a transaction of the worker's own, as when
            // PostgreSQL itself finds its invalidation queue overflowed:
            // every cache entry is rebuilt from the catalog when next used.
            transaction(false, || unsafe { pg_sys::InvalidateSystemCaches() })?;
        }
        // A pass that planned a full batch left notes waiting. Notes that
        // committed during a smaller pass set the latch: the next pass comes
        // once they gathered for a while (pacing.rs).
        let (notes, batch) = (notes_of(&summary), notes_per_pass());
        let bound = Duration::from_millis(settings::GATHER.get().max(0) as u64);
        let done = pacing::Pass {
            notes,
            batch,
            arrived,
            took,
        };
        self.gather = self.pacing.after_pass(done, bound);
        Ok(Round::Relayed {
            more: notes >= batch,
        })
    }

    fn failed(&mut self, failure: Error) {
        if failure.is_not_as_declared() {
            // What differs, for the status reads: the pass that found it
            // was rolled back with everything it wrote.
            if let Err(e) = transaction(false, drift::record) {
                pgrx::warning!("{NAME}: recording what differs failed: {e}");
            }
        }
        self.backoff = if failure.is_transient() {
            (self.backoff * 2).clamp(Duration::from_millis(100), Duration::from_secs(60))
        } else {
            Duration::from_secs(settings::RETRY_EVERY.get().max(1) as u64)
                .min(Duration::from_secs(60))
        };
        self.retry_at = Some(Instant::now() + self.backoff);
        let kind = if failure.is_transient() {
            "transient"
        } else {
            "permanent"
        };
        pgrx::warning!(
            "{NAME}: a pass failed ({kind}), tried again in {:.1} s: {}",
            self.backoff.as_secs_f64(),
            failure
        );
    }

    /// Every few seconds, the checks of what went out: outboxes past their
    /// bound, messages left unconfirmed. Answers whether a replica is to be
    /// provisioned again for them (a pass is due at once).
    fn check_if_due(&mut self) -> bool {
        let every = CHECK_EVERY.min(Duration::from_secs(settings::IDLE.get().max(1) as u64));
        if self.said_missing || self.checked_at.elapsed() < every {
            return false;
        }
        self.checked_at = Instant::now();
        let args = [
            i64::from(settings::OUTBOX_MESSAGES.get()).into(),
            (i64::from(settings::OUTBOX_BYTES.get()) * 1024).into(),
            f64::from(settings::UNCONFIRMED_AFTER.get()).into(),
        ];
        let checked = transaction(false, || {
            Spi::get_one_with_args::<pgrx::JsonB>(OUTBOX_CHECKS, &args)
        });
        let provisioned_for_stalls = self.heal_stalls();
        let Ok(Ok(Some(found))) = checked else {
            return provisioned_for_stalls;
        };
        let outgrown = found.0["outgrown"].as_i64().unwrap_or(0);
        let unconfirmed = found.0["unconfirmed"].as_i64().unwrap_or(0);
        if outgrown + unconfirmed == 0 {
            return provisioned_for_stalls;
        }
        pgrx::warning!(
            "{NAME}: provisioning again {outgrown} replica(s) whose outbox outgrew its bound \
             and {unconfirmed} that left messages unconfirmed (sync.alarms)"
        );
        true
    }

    /// The steps due with stalled replicas (publish/stalls.rs): the
    /// transport's part goes to the push. Answers whether one is to be
    /// provisioned again (a pass is due at once).
    fn heal_stalls(&mut self) -> bool {
        let steps = match stalls::check() {
            Ok(steps) => steps,
            Err(failure) => {
                pgrx::warning!("{NAME}: the check of stalled replicas failed: {}", failure);
                return false;
            }
        };
        self.push.remake_consumers(steps.iter().map(|s| s.replica));
        steps.iter().any(|s| s.step == 2)
    }

    /// Every few minutes, a line of what waits for someone, if anything does.
    fn report_if_due(&mut self) {
        if self.reported_at.elapsed() < REPORT_EVERY {
            return;
        }
        self.reported_at = Instant::now();
        let Ok(Ok(Some(waiting))) =
            transaction(false, || Spi::get_one::<pgrx::JsonB>(WAITING)).map_err(|_| ())
        else {
            return;
        };
        let counts = &waiting.0;
        let any = NEEDS_SOMEONE
            .iter()
            .any(|k| counts[*k].as_i64().unwrap_or(0) > 0);
        if any {
            pgrx::log!(
                "{NAME}: waiting in database \"{}\": {counts}",
                self.database
            );
        }
    }
}

/// Runs a pass, again while another pass overtook its snapshot (it answers
/// NULL and rolls back, and starts over with a fresh snapshot).
fn pass(starting: bool) -> Result<Value, Error> {
    loop {
        let summary = transaction(true, || {
            Spi::get_one_with_args::<pgrx::JsonB>(PASS, &[starting.into()])
        })?
        .map_err(|e| spi_failure(PASS, e))?;
        if let Some(summary) = summary {
            return Ok(summary.0);
        }
    }
}

fn notes_of(summary: &Value) -> i64 {
    summary["notes"].as_i64().unwrap_or(0)
}

fn notes_per_pass() -> i64 {
    i64::from(settings::NOTES_PER_PASS.get())
}

/// Keeps the worker's buffers for temporary tables to TEMP_BUFFER_PAGES,
/// or fewer if the server's configuration says so.
fn limit_temp_buffers() {
    // SAFETY: a GUC's variable, read on the main thread, the only one that
    // touches PostgreSQL's state.
    if unsafe { pg_sys::num_temp_buffers } <= TEMP_BUFFER_PAGES {
        return;
    }
    let pages = std::ffi::CString::new(TEMP_BUFFER_PAGES.to_string()).expect("digits");
    // SAFETY: the worker has just connected and made no temporary table
    // yet, so PostgreSQL accepts a new size (later it would refuse it);
    // both strings are copied by SetConfigOption.
    unsafe {
        pg_sys::SetConfigOption(
            c"temp_buffers".as_ptr(),
            pages.as_ptr(),
            pg_sys::GucContext::PGC_USERSET,
            pg_sys::GucSource::PGC_S_SESSION,
        );
    }
}

/// One-integer rows a page is counted for: a page holds about 226, so
/// the rows spill past the last buffer rather than stop short of it.
const ROWS_A_PAGE: i64 = 250;

fn take_temp_buffers() -> Result<(), pgrx::spi::SpiError> {
    // SAFETY: a GUC's variable, read on the main thread.
    let pages = i64::from(unsafe { pg_sys::num_temp_buffers });
    Spi::run(MAKE_TEMP_BUFFERS_TABLE)?;
    Spi::run_with_args(TAKE_TEMP_BUFFERS, &[(pages * ROWS_A_PAGE).into()])?;
    Spi::run(DROP_TEMP_BUFFERS_TABLE)
}

/// Shows what the worker does in `pg_stat_activity` (`state`, `query`).
fn show_activity(state: pg_sys::BackendState::Type, doing: &std::ffi::CStr) {
    // SAFETY: the worker's main loop; PostgreSQL copies the text into the
    // process's own slot of shared memory before returning.
    unsafe { pg_sys::pgstat_report_activity(state, doing.as_ptr()) };
}

/// Hands the counts of what the worker's transactions did (rows inserted
/// and deleted, functions called) to the statistics PostgreSQL keeps. A
/// background worker never flushes them by itself: without this,
/// autovacuum would not see the dead rows its passes leave in the notes
/// and the outbox. Between passes run back to back, at most once a second;
/// before a sleep (`force`), always.
fn flush_statistics(force: bool) {
    // SAFETY: the worker's main loop, outside any transaction, where
    // PostgreSQL's own idle loop calls it.
    unsafe { pg_sys::pgstat_report_stat(force) };
}

/// Forgets that the latch was set: from now on only a new setting shows.
fn reset_latch() {
    // SAFETY: the worker's main loop, outside any transaction: MyLatch is
    // this process's own latch, reset as WaitLatch's callers reset it.
    unsafe { pg_sys::ResetLatch(pg_sys::MyLatch) };
}

/// Whether the latch was set since it was last reset, leaving it set.
fn latch_is_set() -> bool {
    // SAFETY: MyLatch is this process's own latch, in memory for its whole
    // life; is_set is the flag SetLatch writes from any process, read as
    // PostgreSQL reads it, without a lock.
    unsafe { std::ptr::read_volatile(&raw const (*pg_sys::MyLatch).is_set) != 0 }
}

/// What ended a worker's sleep.
enum Wake {
    /// A commit that noted a change set the latch (or a signal did).
    Latch,
    /// Ups came through the transport.
    Ups,
    Timeout,
    /// SIGTERM, or the postmaster died.
    Stop,
}

/// Sleeps until the latch is set, `socket` turns readable, or `timeout`.
fn wait(timeout: Duration, socket: Option<RawFd>) -> Wake {
    wait_for(true, timeout, socket)
}

/// The longest a wait deaf to the latch sleeps in one go: SIGTERM only
/// sets the latch, so the worker looks for it at least this often.
const DEAF_AT_MOST: Duration = Duration::from_millis(100);

/// Sleeps until `socket` turns readable or `timeout` (at most
/// DEAF_AT_MOST), the latch left as it is. While notes gather, every
/// commit that notes sets the latch: waking for each cost the worker
/// 3.3 ms of CPU a pass at 1,000 commits a second (a tenth of its CPU),
/// and each commit a signal to wake it (SetLatch signals only a process
/// that sleeps on its latch).
fn wait_deaf_to_commits(timeout: Duration, socket: Option<RawFd>) -> Wake {
    wait_for(false, timeout.min(DEAF_AT_MOST), socket)
}

fn wait_for(latch: bool, timeout: Duration, socket: Option<RawFd>) -> Wake {
    let mut events = (pg_sys::WL_TIMEOUT | pg_sys::WL_POSTMASTER_DEATH) as i32;
    if latch {
        events |= pg_sys::WL_LATCH_SET as i32;
    }
    if socket.is_some() {
        events |= pg_sys::WL_SOCKET_READABLE as i32;
    }
    let millis = timeout.as_millis().min(i32::MAX as u128) as std::ffi::c_long;
    // SAFETY: the worker's main loop, outside any transaction: MyLatch is
    // this process's latch (none when deaf to it, as WaitLatchOrSocket
    // allows without WL_LATCH_SET), and the socket (when given) is open
    // for as long as the transport that owns it, which outlives this call.
    let happened = unsafe {
        let happened = pg_sys::WaitLatchOrSocket(
            if latch {
                pg_sys::MyLatch
            } else {
                std::ptr::null_mut()
            },
            events,
            socket.unwrap_or(-1),
            millis,
            pg_sys::PG_WAIT_EXTENSION,
        );
        if latch {
            pg_sys::ResetLatch(pg_sys::MyLatch);
        }
        pg_sys::check_for_interrupts!();
        happened
    };
    if happened & pg_sys::WL_POSTMASTER_DEATH as i32 != 0 || BackgroundWorker::sigterm_received() {
        Wake::Stop
    } else if happened & pg_sys::WL_LATCH_SET as i32 != 0 {
        Wake::Latch
    } else if happened & pg_sys::WL_SOCKET_READABLE as i32 != 0 {
        Wake::Ups
    } else {
        Wake::Timeout
    }
}

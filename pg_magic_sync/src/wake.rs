//! A transaction that noted a change wakes its database's relay worker
//! when it commits, so the worker sleeps until there is work instead of
//! polling.
//!
//! Each worker puts where its latch is (its PGPROC's number) in a slot of
//! shared memory under its database; a backend whose trigger noted a change
//! sets that latch from a commit callback. Shared memory is there only when
//! the library is preloaded (`shared_preload_libraries`); without it, a
//! worker started by `sync.start_relay()` wakes every `magic_sync.idle`.

use std::sync::atomic::{AtomicBool, Ordering};

use pgrx::lwlock::PgLwLock;
use pgrx::pg_sys;
use pgrx::shmem::PGRXSharedMemory;

/// The most databases with a relay worker woken by commits.
const SLOTS: usize = 32;

/// One database's worker: `pgprocno` is -1 while none runs.
#[derive(Clone, Copy, Debug)]
pub struct Slot {
    database: pg_sys::Oid,
    pgprocno: i32,
}

impl Default for Slot {
    fn default() -> Slot {
        Slot {
            database: pg_sys::Oid::INVALID,
            pgprocno: -1,
        }
    }
}

#[derive(Clone, Copy, Debug, Default)]
pub struct Workers {
    slots: [Slot; SLOTS],
}

// SAFETY: plain data (an Oid and an integer per slot), with no pointer, so
// the same bytes mean the same in every process that maps them.
unsafe impl PGRXSharedMemory for Workers {}

// SAFETY: the only lock of that name in this library.
pub static WORKERS: PgLwLock<Workers> = unsafe { PgLwLock::new(c"magic_sync relay workers") };

/// Whether WORKERS is in shared memory: set once, by `_PG_init` while the
/// library is preloaded.
static SHARED: AtomicBool = AtomicBool::new(false);

/// Whether this backend's current transaction noted a change.
static NOTED: AtomicBool = AtomicBool::new(false);

/// Whether this backend registered its commit callback.
static LISTENING: AtomicBool = AtomicBool::new(false);

/// Asks for the slots in shared memory: call from `_PG_init`, only while
/// the library is preloaded.
pub fn request_shared_memory() {
    use pgrx::prelude::*;
    pgrx::pg_shmem_init!(WORKERS);
    SHARED.store(true, Ordering::Relaxed);
}

/// Whether commits can wake workers here.
pub fn commits_wake() -> bool {
    SHARED.load(Ordering::Relaxed)
}

/// The note triggers call this for every note: cheap after the first of a
/// backend, which registers the commit callback.
pub fn noted() {
    if !commits_wake() {
        return;
    }
    NOTED.store(true, Ordering::Relaxed);
    if !LISTENING.swap(true, Ordering::Relaxed) {
        // SAFETY: a callback with no argument, registered once per backend
        // for the rest of its life, as RegisterXactCallback intends.
        unsafe { pg_sys::RegisterXactCallback(Some(at_transaction_end), std::ptr::null_mut()) };
    }
}

/// At the end of every transaction of a backend that noted once: a commit
/// that noted sets its database's worker's latch.
///
/// # Safety
/// PostgreSQL calls it, as the transaction callback registered above, at
/// the end of each transaction of this backend, on its main thread.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn at_transaction_end(
    event: pg_sys::XactEvent::Type,
    _arg: *mut std::ffi::c_void,
) {
    match event {
        pg_sys::XactEvent::XACT_EVENT_COMMIT | pg_sys::XactEvent::XACT_EVENT_PARALLEL_COMMIT
            if NOTED.swap(false, Ordering::Relaxed) =>
        {
            // SAFETY: a committed transaction's backend, connected to its
            // database (MyDatabaseId is set).
            wake(unsafe { pg_sys::MyDatabaseId });
        }
        pg_sys::XactEvent::XACT_EVENT_ABORT | pg_sys::XactEvent::XACT_EVENT_PARALLEL_ABORT => {
            NOTED.store(false, Ordering::Relaxed);
        }
        _ => {}
    }
}

/// Sets the latch of the worker of `database`, if one runs.
pub fn wake(database: pg_sys::Oid) {
    if !commits_wake() {
        return;
    }
    let pgprocno = {
        let workers = WORKERS.share();
        workers
            .slots
            .iter()
            .find(|s| s.database == database && s.pgprocno >= 0)
            .map(|s| s.pgprocno)
    };
    if let Some(pgprocno) = pgprocno {
        // SAFETY: ProcGlobal's array of PGPROCs lives in shared memory for
        // the postmaster's life, and a worker put its own index in it; if
        // that worker has gone since, the latch is another process's, which
        // a latch set in vain only wakes.
        unsafe {
            let proc_ = (*pg_sys::ProcGlobal).allProcs.add(pgprocno as usize);
            pg_sys::SetLatch(&raw mut (*proc_).procLatch);
        }
    }
}

/// A worker says where its latch is, for its database. Answers false when
/// every slot is taken (the worker then wakes every `magic_sync.idle`).
pub fn register_worker(database: pg_sys::Oid) -> bool {
    if !commits_wake() {
        return false;
    }
    // SAFETY: a background worker's own PGPROC, set before it runs.
    let me = unsafe { (*pg_sys::MyProc).pgprocno };
    let mut workers = WORKERS.exclusive();
    let at = workers
        .slots
        .iter()
        .position(|s| s.database == database)
        .or_else(|| workers.slots.iter().position(|s| s.pgprocno < 0));
    match at {
        Some(i) => {
            workers.slots[i] = Slot {
                database,
                pgprocno: me,
            };
            true
        }
        None => false,
    }
}

/// A worker that stops takes its latch back.
pub fn unregister_worker(database: pg_sys::Oid) {
    if !commits_wake() {
        return;
    }
    // SAFETY: as in register_worker.
    let me = unsafe { (*pg_sys::MyProc).pgprocno };
    let mut workers = WORKERS.exclusive();
    for slot in workers.slots.iter_mut() {
        if slot.database == database && slot.pgprocno == me {
            *slot = Slot::default();
        }
    }
}

//! Whether the system catalog may have changed since a moment, as this
//! backend learns it: PostgreSQL tells every backend of each committed
//! change to a relation (its columns, constraints, indexes and triggers
//! included), a schema, a type or a function through its invalidation
//! messages, and the callbacks registered here count them. The count
//! moves for much that the relay's check does not read (any relation's
//! statistics, other sessions' temporary tables): it errs towards checking.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use pgrx::pg_sys;

/// Invalidations this backend has received since it started watching.
static SEEN: AtomicU64 = AtomicU64::new(0);

static WATCHING: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// Relations of this backend whose changes the check never reads: the
    /// relay's scratch tables (relay/scratch.rs), their TOAST tables and
    /// indexes. A pass that empties one by TRUNCATE, or takes its
    /// statistics, changes its catalog row; counted, that made the next
    /// pass check the whole database again (1.1 ms of a pass of 150
    /// changes, most passes).
    static NOT_COUNTED: RefCell<Vec<pg_sys::Oid>> = const { RefCell::new(Vec::new()) };
}

/// From now on, changes to these relations are not counted (they replace
/// those given before).
pub fn not_counting(relations: Vec<pg_sys::Oid>) {
    NOT_COUNTED.with(|n| *n.borrow_mut() = relations);
}

/// The caches besides the relations' whose changes alter what the check
/// reads: a renamed schema or type, a function of the engine's renamed.
const CACHES: [pg_sys::SysCacheIdentifier::Type; 3] = [
    pg_sys::SysCacheIdentifier::NAMESPACEOID,
    pg_sys::SysCacheIdentifier::TYPEOID,
    pg_sys::SysCacheIdentifier::PROCOID,
];

/// How many changes this backend has heard of: a moment to compare with
/// later. Starts watching the first time it is asked.
pub fn seen() -> u64 {
    if !WATCHING.swap(true, Ordering::Relaxed) {
        // SAFETY: registering callbacks is allowed at any time in a
        // backend; they stay for its life, and only add to a counter.
        unsafe {
            pg_sys::CacheRegisterRelcacheCallback(Some(relation_changed), pg_sys::Datum::from(0));
            for cache in CACHES {
                pg_sys::CacheRegisterSyscacheCallback(
                    cache as i32,
                    Some(cache_changed),
                    pg_sys::Datum::from(0),
                );
            }
        }
    }
    SEEN.load(Ordering::Relaxed)
}

/// Called by PostgreSQL for a relation's invalidation (every relation's,
/// when its caches are reset): it must not fail, and does not.
///
/// # Safety
/// PostgreSQL calls it, as the callback registered above, on the backend's
/// main thread; it touches nothing of PostgreSQL's, only this module's
/// own list and atomic.
unsafe extern "C-unwind" fn relation_changed(_arg: pg_sys::Datum, relation: pg_sys::Oid) {
    // InvalidOid: every relation's caches were reset, and it is counted.
    let ignored = NOT_COUNTED.with(|n| n.try_borrow().is_ok_and(|n| n.contains(&relation)));
    if !ignored {
        SEEN.fetch_add(1, Ordering::Relaxed);
    }
}

/// Called by PostgreSQL for an entry of one of `CACHES`.
///
/// # Safety
/// As `relation_changed`: a registered callback that touches only an
/// atomic.
unsafe extern "C-unwind" fn cache_changed(_arg: pg_sys::Datum, _cache: i32, _hash: u32) {
    SEEN.fetch_add(1, Ordering::Relaxed);
}

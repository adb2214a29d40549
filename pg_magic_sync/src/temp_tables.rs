//! What this session knows of its own temporary tables (the relay's
//! scratch tables), read from the relation cache: far cheaper than a query
//! of pg_class, and cheap enough to ask before every statement.

use pgrx::pg_sys;

/// A table of at most this many pages (64 kB, a few hundred rows) is small:
/// the relay empties it by DELETE, plans over it without fresh statistics,
/// and keeps the plans of statements that read only small ones.
pub const SMALL_PAGES: i64 = 8;

/// One temporary table's sizes.
pub struct Sizes {
    /// Its size now.
    pub pages: i64,
    /// Its size when its statistics were last taken: 0 when they never
    /// were since it was made or truncated.
    pub analyzed_pages: i64,
}

/// The sizes of this session's temporary table `name`, if it has one.
pub fn sizes(name: &str) -> Option<Sizes> {
    let oid = temp_oid(name)?;
    let lock = pg_sys::AccessShareLock as pg_sys::LOCKMODE;
    // SAFETY: opened, read and closed here, under a lock held meanwhile;
    // NULL when the relation went away since it was looked up.
    unsafe {
        let relation = pg_sys::try_relation_open(oid, lock);
        if relation.is_null() {
            return None;
        }
        let sizes = Sizes {
            pages: i64::from(pg_sys::RelationGetNumberOfBlocksInFork(
                relation,
                pg_sys::ForkNumber::MAIN_FORKNUM,
            )),
            analyzed_pages: i64::from((*(*relation).rd_rel).relpages),
        };
        pg_sys::relation_close(relation, lock);
        Some(sizes)
    }
}

/// This session's temporary table `name` and the relations that go with
/// it, whose catalog rows change with it: its TOAST table and that
/// table's indexes. None when the session has no such table.
pub fn relations_of(name: &str) -> Vec<pg_sys::Oid> {
    let Some(oid) = temp_oid(name) else {
        return Vec::new();
    };
    let mut relations = vec![oid];
    let lock = pg_sys::AccessShareLock as pg_sys::LOCKMODE;
    // SAFETY: each relation opened here is closed here, under a lock held
    // meanwhile; a NULL answer (gone since looked up) is left out. The
    // index list is a List of oids PostgreSQL allocated for the caller,
    // read within its length and freed.
    unsafe {
        let relation = pg_sys::try_relation_open(oid, lock);
        if relation.is_null() {
            return relations;
        }
        let toast = (*(*relation).rd_rel).reltoastrelid;
        pg_sys::relation_close(relation, lock);
        if toast == pg_sys::InvalidOid {
            return relations;
        }
        relations.push(toast);
        let toast_relation = pg_sys::try_relation_open(toast, lock);
        if toast_relation.is_null() {
            return relations;
        }
        let indexes = pg_sys::RelationGetIndexList(toast_relation);
        if !indexes.is_null() {
            for at in 0..(*indexes).length as usize {
                relations.push((*(*indexes).elements.add(at)).oid_value);
            }
            pg_sys::list_free(indexes);
        }
        pg_sys::relation_close(toast_relation, lock);
    }
    relations
}

/// The oid of this session's temporary table `name`, if it has one.
fn temp_oid(name: &str) -> Option<pg_sys::Oid> {
    let name = std::ffi::CString::new(name).expect("a temporary table's name has no NUL");
    let mut temp = pg_sys::InvalidOid;
    let mut temp_toast = pg_sys::InvalidOid;
    // SAFETY: two out-parameters PostgreSQL fills with this backend's
    // temporary schemas (InvalidOid while it has none).
    unsafe { pg_sys::GetTempNamespaceState(&mut temp, &mut temp_toast) };
    if temp == pg_sys::InvalidOid {
        return None;
    }
    // SAFETY: a NUL-terminated name and a schema's oid; answers InvalidOid
    // when the schema has no relation of that name.
    let oid = unsafe { pg_sys::get_relname_relid(name.as_ptr(), temp) };
    (oid != pg_sys::InvalidOid).then_some(oid)
}

/// The names `sync_pass_*` in `sql`, in order, each as often as it is
/// named: the relay's scratch tables a statement reads or writes.
pub fn scratch_names(sql: &str) -> impl Iterator<Item = &str> {
    sql.match_indices("sync_pass_").map(move |(at, _)| {
        let end = sql[at..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .map_or(sql.len(), |n| at + n);
        &sql[at..end]
    })
}

/// Whether every table named `sync_pass_*` in `sql` is a small temporary
/// table of this session: then a plan made for them now suits them the
/// next time they are small too. Each is looked up once, however often it
/// is named.
pub fn named_scratch_all_small(sql: &str) -> bool {
    let mut asked: Vec<&str> = Vec::new();
    scratch_names(sql).all(|name| {
        if asked.contains(&name) {
            return true;
        }
        asked.push(name);
        sizes(name).is_some_and(|s| s.pages <= SMALL_PAGES)
    })
}

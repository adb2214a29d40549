//! magic_sync's server half: a PostgreSQL extension. This file is wiring
//! only: the modules, the order of the SQL files, and `_PG_init`.
//!
//! `CREATE EXTENSION magic_sync` makes schema `sync`, holding the engine's
//! tables (sql/schema.sql) and what a user calls:
//! - declaring (api/declaring.rs): `sync.declare_replicas`,
//!   `sync.declare_table`, `sync.undeclare_table`, `sync.triggers()`,
//!   `sync.indexes()`, `sync.check()`, `sync.declarations_digest()`, and
//!   `sync.declare_senders` (sql/filing.sql);
//! - noting: the trigger functions declared tables run, `sync.note_row`
//!   and `sync.note_group` (note/), and `sync.refuse_truncate`
//!   (sql/noting.sql);
//! - relaying (sql/relay.sql, api/relaying.rs): `CALL sync.relay()`,
//!   `sync.retry()`, `sync.resync(replica)`, `sync.start_relay()`,
//!   `sync.stop_relay()`; with `shared_preload_libraries = 'magic_sync'`
//!   and `magic_sync.database`, a relay worker per database
//!   (publish/worker.rs);
//! - the default transport, a queue in the database (api/queue.rs):
//!   `sync.next(replica)`, `sync.ack(replica, id)`;
//! - what replicas send up (api/receiving.rs): `sync.receive(replica,
//!   bytes)`, `sync.refile(everything)`;
//! - wishing (api/wishing.rs, sql/wishes.sql): `sync.desire(table_name,
//!   wanted, note)`, `sync.withdraw(table_name, key)`, `sync.wishes(scope,
//!   state, offset, lim)`.
//!
//! The engine's own functions, which only it calls (the steps of a relay
//! pass, the savepoints of filing, the lookups of declaring, `row_bytes`),
//! are in schema `sync_internal`, which PUBLIC may not use
//! (sql/privileges.sql).
//!
//! The modules, bottom up: each uses only those above it in this list.

// Every unsafe block says why it is sound, in a SAFETY: comment.
#![deny(clippy::undocumented_unsafe_blocks)]

use pgrx::prelude::*;

mod error;
/// The engine's fixed statements, from sql/statements/ (build.rs).
mod statements {
    include!(concat!(env!("OUT_DIR"), "/statements.rs"));
}
mod locks;
mod temp_tables;
mod spi;
mod settings;
mod version;
mod seal;
mod wake;
mod gate;
mod epochs;
mod catalog;
mod message;
mod note;
mod declare;
mod relay;
mod publish;
mod wishes;
mod file;
mod status;
mod worker;
mod api;

::pgrx::pg_module_magic!(name, version);

// The engine's tables come first; every function is created after them.
extension_sql_file!("../../sql/schema.sql", name = "schema", bootstrap);
extension_sql_file!(
    "../../sql/declarations.sql",
    name = "declarations",
    requires = ["schema"]
);
// Trigger functions, and the relay's procedure, in PL/pgSQL.
extension_sql_file!(
    "../../sql/noting.sql",
    name = "noting",
    requires = ["declarations"]
);
extension_sql_file!(
    "../../sql/filing.sql",
    name = "filing",
    requires = ["declarations"]
);
extension_sql_file!("../../sql/relay.sql", name = "relay");
extension_sql_file!(
    "../../sql/publish.sql",
    name = "publish",
    requires = ["schema"]
);
// The journal of broadcast tables: followers parting, what they applied.
extension_sql_file!(
    "../../sql/journal.sql",
    name = "journal",
    requires = ["schema"]
);
// sync.held_recorded's counts, kept by its triggers, for the status reads.
extension_sql_file!(
    "../../sql/held_counts.sql",
    name = "held_counts",
    requires = ["schema"]
);
// A replica that stops moving while messages wait for it: what the status
// reads show and the worker heals.
extension_sql_file!(
    "../../sql/stalls.sql",
    name = "stalls",
    requires = ["schema"]
);
// The status reads (docs/src/status.md).
extension_sql_file!(
    "../../sql/status.sql",
    name = "status",
    requires = ["schema", "stalls"]
);
// The status reads of rows (docs/src/status-rows.md): the row states they
// share.
extension_sql_file!(
    "../../sql/status_rows.sql",
    name = "status_rows",
    requires = ["status"]
);
// Where wishes stand (docs/src/wishes.md): sync.wishes.
extension_sql_file!(
    "../../sql/wishes.sql",
    name = "wishes",
    requires = ["status", "noting"]
);
// sync.what_if: a migration tried in a relay pass that is rolled back.
extension_sql_file!(
    "../../sql/what_if.sql",
    name = "what_if",
    requires = ["relay"]
);
// Last, once every function exists: EXECUTE on the engine's own taken from
// PUBLIC.
extension_sql_file!("../../sql/privileges.sql", name = "privileges", finalize);

#[pg_guard]
pub extern "C-unwind" fn _PG_init() {
    settings::define();
    // SAFETY: a flag PostgreSQL sets while it loads shared_preload_libraries.
    if unsafe { pg_sys::process_shared_preload_libraries_in_progress } {
        wake::request_shared_memory();
        worker::register_static_workers();
    }
}

#[cfg(any(test, feature = "pg_test"))]
mod tests;

#[cfg(test)]
pub mod pg_test {
    pub fn setup(_options: Vec<&str>) {}

    #[must_use]
    pub fn postgresql_conf_options() -> Vec<&'static str> {
        vec![]
    }
}

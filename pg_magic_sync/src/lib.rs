//! magic_sync's server half: a PostgreSQL extension.
//!
//! `CREATE EXTENSION magic_sync` makes schema `sync` with the engine's
//! tables (sql/schema.sql) and the functions users call:
//! - declarations: `sync.declare_replicas`, `sync.declare_table`,
//!   `sync.triggers` (declare.rs);
//! - the relay: `CALL sync.relay()` runs one pass (relay.rs and the modules
//!   of its steps: observe, plan, load, record);
//! - the default transport, a queue in the database: `sync.next`, `sync.ack`
//!   (queue.rs);
//! - what replicas send up: `sync.receive` (receive.rs).
//!
//! The engine's own functions, which only it calls (the steps of a relay
//! pass, the savepoints of filing, the lookups of declaring), are in schema
//! `sync_internal`, which PUBLIC may not use (sql/privileges.sql).
//!
//! The `#[pg_extern]` functions are thin: they take SQL values, call plain
//! Rust and SQL, and turn the answer into SQL values.

use pgrx::prelude::*;

mod api;
mod catalog;
mod declare;
mod error;
mod message;
mod note;
mod publish;
mod receive;
mod relay;
mod settings;
mod spi;

::pgrx::pg_module_magic!(name, version);

// The engine's tables, and schema sync_internal, come first; every function
// is created after them.
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
// Last, once every function exists: EXECUTE on the engine's own taken from
// PUBLIC.
extension_sql_file!("../../sql/privileges.sql", name = "privileges", finalize);

#[pg_guard]
pub extern "C-unwind" fn _PG_init() {
    settings::define();
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

//! Declaring (docs/src/server.md, "Declaring"): where the replicas are,
//! which tables travel and how, the DDL they need, and the relay's check.

use pgrx::prelude::*;

use crate::catalog;
use crate::declare::{self, drift, resolve::Request};
use crate::version;

/// `sync.declare_replicas(relation, live, id, partitioned_by)`: the table
/// or view that lists the replicas, the condition a replica that should
/// receive anything meets, its column of replica ids, and the column that
/// splits replicas and rows into partitions.
#[pg_extern(volatile)]
fn declare_replicas(
    relation: &str,
    live: default!(&str, "'true'"),
    id: default!(&str, "'id'"),
    partitioned_by: default!(Option<&str>, "NULL"),
) {
    version::check();
    declare::declare_replicas(relation, live, id, partitioned_by);
    drift::record_again();
}

/// `sync.declare_table(relation, mirror, sync, ...)`: declares a table
/// whose rows travel, checks it, and (unless `install => false`) installs
/// its triggers and (unless `indexes => false`) the indexes its lookups
/// need. Declaring a table again replaces its declaration.
#[allow(clippy::too_many_arguments)]
#[pg_extern(volatile)]
fn declare_table(
    relation: &str,
    mirror: default!(&str, "'catalog'"),
    sync: default!(Option<&str>, "NULL"),
    name: default!(Option<&str>, "NULL"),
    key: default!(Option<Vec<String>>, "NULL"),
    origin: default!(Option<&str>, "NULL"),
    version: default!(Option<&str>, "NULL"),
    created: default!(Option<&str>, "NULL"),
    desired: default!(Option<Vec<String>>, "NULL"),
    apply: default!(Option<&str>, "NULL"),
    replica_owned: default!(Option<Vec<String>>, "NULL"),
    active: default!(Option<&str>, "NULL"),
    unmirrored: default!(Option<Vec<String>>, "NULL"),
    install: default!(bool, "true"),
    indexes: default!(bool, "true"),
) {
    version::check();
    declare::declare_table(Request {
        relation: relation.to_owned(),
        mirror: mirror.to_owned(),
        sync: sync.map(str::to_owned),
        name: name.map(str::to_owned),
        key,
        origin: origin.map(str::to_owned),
        version: version.map(str::to_owned),
        created: created.map(str::to_owned),
        desired,
        apply: apply.map(str::to_owned),
        replica_owned,
        active: active.map(str::to_owned),
        unmirrored,
        install,
        indexes,
    });
    drift::record_again();
}

/// `sync.undeclare_table(relation)`: the table travels no more.
#[pg_extern(volatile)]
fn undeclare_table(relation: &str) {
    version::check();
    declare::undeclare_table(relation);
    drift::record_again();
}

/// `sync.triggers()`: the triggers every declaration needs, one CREATE
/// TRIGGER a row, for users who keep them in their own migrations.
#[pg_extern(stable)]
fn triggers() -> SetOfIterator<'static, String> {
    SetOfIterator::new(declare::triggers_ddl())
}

/// `sync.indexes()`: the CREATE INDEX statements of the lookups no index of
/// the database serves, one a row.
#[pg_extern(stable)]
fn indexes() -> SetOfIterator<'static, String> {
    SetOfIterator::new(declare::indexes_ddl())
}

/// `sync.check()`: what the relay's check finds, one problem a row, with
/// the DDL or the call that fixes it. No row: the relay may run. What it
/// finds is recorded for the status reads too (sync.drift), as when the
/// relay worker's pass is refused for it.
#[pg_extern(volatile)]
fn check() -> TableIterator<'static, (name!(problem, String), name!(fix, String))> {
    version::check();
    let problems = drift::record();
    TableIterator::new(problems.into_iter().map(|p| (p.message, p.hint)))
}

/// `sync.declarations_digest()`: the digest of the declarations the relay
/// compares with the one it last ran with.
#[pg_extern(stable)]
fn declarations_digest() -> String {
    catalog::declarations_digest()
}

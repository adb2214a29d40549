//! Declarations, from the user's migrations: where the replicas are, and
//! which tables travel and how (`sync.declare_replicas`,
//! `sync.declare_table`, `sync.undeclare_table`), and the DDL they need
//! printed (`sync.triggers`, `sync.indexes`).
//!
//! Every declaration is resolved again whenever one is made (declare/resolve.rs):
//! a table declared before its parent gains the reference once the parent
//! is declared, and the order, the triggers and the indexes follow.

pub mod rule_text;
pub mod system_catalog;
pub mod resolve;
pub mod triggers;
pub mod indexes;
pub mod catalog_changes;
pub mod drift;

use self::resolve::{Problem, Request, Resolved};
use crate::catalog::store::{self, Shape, TableRows};
use crate::catalog::{self, wishes, Declared, Replicas, Rule};
use crate::error::Error;
use crate::spi;

/// The error of a condition run against the relation, or None when it runs.
fn condition_error(relation: &str, condition: &str) -> Option<String> {
    spi::one::<String>(
        "SELECT sync_internal.check_condition($1, $2)",
        &[relation.into(), condition.into()],
    )
}

/// One declaration at a time: each reads every declaration and writes them
/// all back.
fn lock_declarations() {
    spi::run("SELECT pg_advisory_xact_lock(hashtext('magic_sync.declarations'))");
}

/// Refuses with every problem: the message names each, the hint says
/// what to do about each.
fn refuse_all(problems: Vec<Problem>) -> ! {
    if let [one] = problems.as_slice() {
        Error::bad_input(one.message.clone(), one.hint.clone()).raise();
    }
    let lines: Vec<String> = problems
        .iter()
        .map(|p| format!("- {}", p.message.trim_start_matches("magic_sync: ")))
        .collect();
    let mut hints: Vec<String> = Vec::new();
    for p in &problems {
        if !hints.contains(&p.hint) {
            hints.push(p.hint.clone());
        }
    }
    Error::bad_input(
        format!(
            "magic_sync: {} problems with the declarations:\n{}",
            problems.len(),
            lines.join("\n")
        ),
        hints.join("\n"),
    )
    .raise()
}

/// `sync.declare_replicas(relation, live, id, partitioned_by)`: the table
/// or view that lists the replicas, the condition a replica that should
/// receive anything meets, its column of replica ids, and the column that
/// splits replicas and rows into partitions.
pub fn declare_replicas(relation: &str, live: &str, id: &str, partitioned_by: Option<&str>) {
    lock_declarations();
    let Some(found) = system_catalog::find_relation(relation) else {
        Error::bad_input(
            format!("magic_sync: the replicas' relation {relation} does not exist"),
            "Create the table or view that lists the replicas first, then declare it.",
        )
        .raise();
    };
    let columns = system_catalog::columns_of(found.oid);
    match columns.iter().find(|c| c.name == id) {
        None => Error::bad_input(
            format!("magic_sync: {} has no column {id}", found.shown),
            "Name the column of replica ids with id => '...'.",
        )
        .raise(),
        Some(c) if c.sql_type != "uuid" => Error::bad_input(
            format!(
                "magic_sync: the column {id} of {} is {}, and replica ids are uuid",
                found.shown, c.sql_type
            ),
            "Replicas are identified by a UUID.",
        )
        .raise(),
        Some(_) => {}
    }
    if let Some(partition) = partitioned_by {
        if !columns.iter().any(|c| c.name == partition) {
            Error::bad_input(
                format!("magic_sync: partitioned_by: {} has no column {partition}", found.shown),
                "Name the replicas' column of partitions, which every table that goes down carries too.",
            ).raise();
        }
    }
    if let Some(error) = condition_error(&found.qualified, live) {
        Error::bad_input(
            format!(
                "magic_sync: the live condition ({live}) does not run on {}: {error}",
                found.shown
            ),
            "live => is an SQL condition over the replicas' columns, such as 'active'.",
        )
        .raise();
    }
    let before = catalog::declared_tables();
    store::write_replicas(&Replicas {
        relation: found.qualified.clone(),
        id_column: id.to_owned(),
        live: live.to_owned(),
        partition: partitioned_by.map(str::to_owned),
    });
    apply(drift::requests(), None, &before);
}

/// `sync.declare_table(relation, mirror, sync, ...)`: declares a table
/// whose rows travel, checks it, and (unless `install => false`) installs
/// its triggers and (unless `indexes => false`) the indexes its lookups
/// need. Declaring a table again replaces its declaration.
pub fn declare_table(request: Request) {
    lock_declarations();
    // Problems of the table itself first: they are what the caller asked
    // about.
    let own = match resolve::resolve_one(&request, &resolve::Context::read()) {
        Ok(own) => own,
        Err(problems) => refuse_all(problems),
    };
    let before = catalog::declared_tables();
    let mut requests: Vec<Request> = drift::requests()
        .into_iter()
        .filter(|r| r.relation != own.request.relation)
        .collect();
    requests.push(own.request.clone());
    self::apply(requests, Some(&own.request.relation), &before);
}

/// `sync.undeclare_table(relation)`: the table travels no more (named as
/// a relation, or by its declared name: it may be dropped already). The
/// triggers the engine installed for it are dropped; its notes stay for
/// the relay, which finds the table gone from the declarations.
pub fn undeclare_table(relation: &str) {
    lock_declarations();
    let found = system_catalog::find_relation(relation).map(|f| f.qualified);
    let declared: Option<String> = spi::one(
        "SELECT relation FROM sync.tables \
         WHERE relation = $1 OR name = $2 OR replace(relation, '\"', '') = $2",
        &[found.into(), relation.into()],
    );
    let Some(declared) = declared else {
        Error::bad_input(
            format!("magic_sync: {relation} is not declared"),
            "SELECT name, relation FROM sync.tables lists the declared tables.",
        )
        .raise();
    };
    let before = catalog::declared_tables();
    let rest: Vec<Request> = drift::requests()
        .into_iter()
        .filter(|r| r.relation != declared)
        .collect();
    apply(rest, None, &before);
}

/// Resolves every request together and records them; then writes the
/// triggers and the indexes the engine looks after. `touched`: the
/// relation just declared.
fn apply(requests: Vec<Request>, touched: Option<&str>, before: &[Declared]) {
    let resolved = match resolve::resolve_all(&requests) {
        Ok(resolved) => resolved,
        Err(problems) => refuse_all(problems),
    };
    record(&resolved, touched);
    let tables = catalog::declared_tables();
    // The engine's table of wishes is noted as a declared table is (its
    // triggers come with the extension; written again if dropped).
    let noted = wishes::noted(tables.clone());
    triggers::install(&triggers::expected(&noted), &managed(before, &tables));
    indexes::create_missing(&tables);
}

/// The relations whose engine triggers the engine writes and drops: each
/// table (and its group tables) of a declaration, before or after, made
/// with install => true.
fn managed(before: &[Declared], after: &[Declared]) -> Vec<String> {
    let mut relations = Vec::new();
    for table in before.iter().chain(after).filter(|t| t.install) {
        relations.push(table.relation.clone());
        if let Rule::Grouped { members, assigned } = &table.rule {
            relations.push(members.relation.clone());
            relations.push(assigned.relation.clone());
        }
    }
    relations
}

/// Writes the resolved declarations into sync.tables, sync.table_references
/// and sync.groups, in place of what was there.
fn record(resolved: &[Resolved], touched: Option<&str>) {
    let rows: Vec<TableRows> = resolved.iter().map(record_table).collect();
    store::write_tables(&rows, touched);
}

/// The rows that record one resolved declaration: its table, the table's
/// columns as declared, and the options as given.
fn record_table(r: &Resolved) -> TableRows {
    let shape = Shape {
        columns: r.shape.iter().map(|c| c.name.clone()).collect(),
        types: r.shape.iter().map(|c| c.sql_type.clone()).collect(),
        not_null: r.shape.iter().map(|c| c.not_null).collect(),
    };
    TableRows::of(&r.table, shape, r.request.to_json())
}

/// The triggers every declaration needs, one CREATE TRIGGER each, for
/// users who keep them in their own migrations.
pub fn triggers_ddl() -> Vec<String> {
    triggers::expected(&wishes::noted(catalog::declared_tables()))
        .iter()
        .map(triggers::Expected::ddl)
        .collect()
}

/// The CREATE INDEX statements of the lookups no index of the database
/// serves.
pub fn indexes_ddl() -> Vec<String> {
    indexes::missing(&catalog::declared_tables())
        .iter()
        .map(indexes::Needed::ddl)
        .collect()
}

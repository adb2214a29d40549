//! The relay's check before a pass: the database as the declarations say,
//! or the tables it must stop planning, or a refusal naming every problem
//! and the DDL that fixes each.
//!
//! A problem that concerns a table (it changed, its trigger or an index it
//! needs is not right) stops only that table and what the planner cannot
//! plan without it (`stopped`); one that concerns no single table (the
//! replicas' relation, declarations that no longer resolve, an engine
//! trigger no declaration asks for) refuses the whole pass, as before.
//!
//! - a declared table that changed since it was declared (a column added,
//!   dropped, retyped, its nullability, its primary key, its foreign keys to
//!   declared tables, a column or relation an option names);
//! - a trigger the engine needs missing, disabled, firing only in replica
//!   sessions, or not as the engine writes it; one of the engine's
//!   functions on a table no declaration asks it for;
//! - a lookup no index serves;
//! - the replicas' relation gone, or its columns.
//!
//! A relay pass checks only when something the check reads may have
//! changed since its last check (`check_before_pass`), and otherwise
//! keeps what that check found: the
//! declarations, the search path (types are written as it shows them), or
//! the system catalog (declare/catalog_changes.rs). A change committed in
//! the very instant a pass begins may be seen only by the next pass's check,
//! as PostgreSQL's own caches see a change once its invalidation arrives.

use std::cell::RefCell;

use crate::catalog::store::{self, TableRows};
use crate::catalog::{wishes, Declarations, Declared, Replicas, Rule};
use crate::declare::catalog_changes;
use crate::declare::indexes;
use crate::declare::resolve::{self, Problem, Request, Resolved};
use crate::declare::system_catalog;
use crate::declare::triggers::{self, Finding};
use crate::error::Error;
use crate::spi;
use crate::statements::declare::drift::FORGET_DRIFT;

fn problem(message: String, fix: String) -> Problem {
    Problem { message, hint: fix }
}

/// A declared table as sync.tables recorded it: its request and the table
/// it was declared over.
struct Recorded {
    name: String,
    request: Request,
    columns: Vec<String>,
    types: Vec<String>,
    not_null: Vec<bool>,
}

fn recorded(tables: &[TableRows]) -> Vec<Recorded> {
    tables
        .iter()
        .map(|rows| {
            let t = &rows.table;
            Recorded {
                name: t.name.clone(),
                request: Request::from_json(t.request.clone()).unwrap_or_else(|e| e.raise()),
                columns: t.table_columns.clone(),
                types: t.table_types.clone(),
                not_null: t.table_not_null.clone(),
            }
        })
        .collect()
}

/// The stored requests, to resolve again.
pub fn requests() -> Vec<Request> {
    recorded(&store::table_rows())
        .into_iter()
        .map(|r| r.request)
        .collect()
}

/// How a table differs from what was recorded of it, in words.
fn differences(recorded: &Recorded, now: &Resolved, declared: &Declared) -> Vec<String> {
    let mut found = Vec::new();
    let unmirrored = &now.table.unmirrored;
    for (i, column) in recorded.columns.iter().enumerate() {
        match now.shape.iter().find(|c| &c.name == column) {
            None => found.push(format!("column {column} was dropped")),
            // A column that does not travel may change as it likes.
            Some(_) if unmirrored.contains(column) => {}
            Some(c) => {
                let (ty, not_null) = (&recorded.types[i], recorded.not_null[i]);
                if &c.sql_type != ty {
                    found.push(format!("column {column} is {}, declared {ty}", c.sql_type));
                }
                if c.not_null != not_null {
                    found.push(if c.not_null {
                        format!("column {column} is NOT NULL, declared nullable")
                    } else {
                        format!("column {column} is nullable, declared NOT NULL")
                    });
                }
            }
        }
    }
    for c in &now.shape {
        if !recorded.columns.contains(&c.name) {
            found.push(format!("column {} ({}) was added", c.name, c.sql_type));
        }
    }
    let table = &now.table;
    if table.key_columns != declared.key_columns {
        found.push(format!(
            "its key is ({}), declared ({})",
            table.key_columns.join(", "),
            declared.key_columns.join(", ")
        ));
    }
    let shown = |t: &Declared| {
        let mut r: Vec<String> = t
            .references
            .iter()
            .map(|r| {
                format!(
                    "{} ({}) -> {}",
                    r.constraint,
                    r.columns.join(", "),
                    r.parent
                )
            })
            .collect();
        r.sort();
        r
    };
    let (was, is) = (shown(declared), shown(table));
    for r in was.iter().filter(|r| !is.contains(r)) {
        found.push(format!("the foreign key {r} is gone"));
    }
    for r in is.iter().filter(|r| !was.contains(r)) {
        found.push(format!("the foreign key {r} is new"));
    }
    if found.is_empty() && table.rule != declared.rule {
        found.push(format!(
            "its rule resolves otherwise ({})",
            table.rule.kind()
        ));
    }
    if found.is_empty()
        && table
            != &(Declared {
                position: table.position,
                ..declared.clone()
            })
    {
        found.push("its options resolve otherwise".to_owned());
    }
    found
}

/// A problem the check found, and the declared tables it concerns (none:
/// it concerns the whole relay).
pub struct Found {
    pub problem: Problem,
    pub tables: Vec<String>,
}

fn whole(problem: Problem) -> Found {
    Found {
        problem,
        tables: Vec::new(),
    }
}

/// The declared tables a relation the engine reads concerns: the table
/// declared over it, else the grouped tables whose groups it holds. None
/// (the whole relay) for a relation no declaration names.
fn concerning(relation: &str, stored: &[Declared]) -> Vec<String> {
    let tables = wishes::noted(stored.to_vec());
    let own: Vec<String> = tables
        .iter()
        .filter(|t| t.relation == relation)
        .map(|t| t.name.clone())
        .collect();
    if !own.is_empty() {
        return own;
    }
    tables
        .iter()
        .filter(|t| {
            matches!(&t.rule, Rule::Grouped { members, assigned }
                     if members.relation == relation || assigned.relation == relation)
        })
        .map(|t| t.name.clone())
        .collect()
}

/// The declared tables against the database as it is now.
fn table_problems(stored: &[Declared], tables: &[TableRows]) -> Vec<Found> {
    let recorded = recorded(tables);
    let requests: Vec<Request> = recorded.iter().map(|r| r.request.clone()).collect();
    let again = || {
        requests
            .iter()
            .map(Request::call)
            .collect::<Vec<_>>()
            .join("\n")
    };
    match resolve::resolve_all(&requests) {
        // Declarations that no longer resolve are no model to plan any
        // table by: the whole relay waits.
        Err(problems) => problems
            .into_iter()
            .map(|p| {
                whole(problem(
                    p.message,
                    format!("{}\nThen declare again:\n{}", p.hint, again()),
                ))
            })
            .collect(),
        Ok(resolved) => {
            let mut problems = Vec::new();
            for r in &recorded {
                let (Some(now), Some(declared)) = (
                    resolved.iter().find(|x| x.table.name == r.name),
                    stored.iter().find(|d| d.name == r.name),
                ) else {
                    continue;
                };
                let found = differences(r, now, declared);
                if !found.is_empty() {
                    problems.push(Found {
                        problem: problem(
                            format!(
                                "magic_sync: {} differs from its declaration: {}",
                                now.found.shown,
                                found.join("; ")
                            ),
                            format!(
                                "Declare it again (in the migration that changed it):\n{}",
                                r.request.call()
                            ),
                        ),
                        tables: vec![r.name.clone()],
                    });
                }
            }
            problems
        }
    }
}

fn replicas_problems(replicas: Option<&Replicas>) -> Vec<Found> {
    let Some(replicas) = replicas else {
        return Vec::new();
    };
    let fix = || {
        format!(
            "Declare the replicas again: SELECT sync.declare_replicas({}, live => {}, id => {}{});",
            crate::catalog::table_sql::quote_literal(&replicas.relation),
            crate::catalog::table_sql::quote_literal(&replicas.live),
            crate::catalog::table_sql::quote_literal(&replicas.id_column),
            replicas
                .partition
                .as_ref()
                .map(|p| format!(
                    ", partitioned_by => {}",
                    crate::catalog::table_sql::quote_literal(p)
                ))
                .unwrap_or_default()
        )
    };
    let Some(found) = system_catalog::find_relation(&replicas.relation) else {
        return vec![whole(problem(
            format!(
                "magic_sync: the replicas' relation {} does not exist",
                replicas.relation
            ),
            fix(),
        ))];
    };
    let columns = system_catalog::columns_of(found.oid);
    let mut problems = Vec::new();
    for (what, column) in [
        ("id column", Some(&replicas.id_column)),
        ("partition column", replicas.partition.as_ref()),
    ] {
        let Some(column) = column else { continue };
        if !columns.iter().any(|c| &c.name == column) {
            problems.push(whole(problem(
                format!(
                    "magic_sync: {} has no column {column}, the replicas' {what}",
                    found.shown
                ),
                fix(),
            )));
        }
    }
    problems
}

fn trigger_problems(stored: &[Declared]) -> Vec<Found> {
    // The engine's table of wishes is noted as a declared table is.
    let expected = triggers::expected(&wishes::noted(stored.to_vec()));
    let existing = system_catalog::engine_triggers();
    let on = |relation: &str, p: Problem| Found {
        problem: p,
        tables: concerning(relation, stored),
    };
    triggers::findings(&expected, &existing)
        .into_iter()
        .filter_map(|finding| match finding {
            Finding::Right => None,
            Finding::Missing(e) => Some(on(&e.relation, problem(
                format!("magic_sync: the trigger {} on {} is missing", e.name, shown(&e.relation)),
                e.ddl(),
            ))),
            Finding::Different(e, t) => Some(on(&e.relation, problem(
                format!(
                    "magic_sync: the trigger {} on {} is not as the engine writes it: {}",
                    e.name,
                    shown(&e.relation),
                    t.definition
                ),
                format!("{}\n{}", triggers::drop_ddl(t), e.ddl()),
            ))),
            Finding::NotEnabled(e, t) => Some(on(&e.relation, problem(
                format!(
                    "magic_sync: the trigger {} on {} {}",
                    e.name,
                    shown(&e.relation),
                    if t.enabled == "D" {
                        "is disabled"
                    } else {
                        "fires only in replica sessions"
                    }
                ),
                format!(
                    "ALTER TABLE {} ENABLE TRIGGER {}; (or ENABLE ALWAYS TRIGGER, to note what sessions in replica mode write too)",
                    e.relation, e.name
                ),
            ))),
            // Notes of a table no declaration names: no table's plan says
            // what becomes of them, so the whole relay waits.
            Finding::Unexpected(t) => Some(whole(problem(
                format!(
                    "magic_sync: the trigger {} on {} is the engine's, and no declaration asks for it: what it notes would never be sent",
                    t.name,
                    triggers::shown(t)
                ),
                triggers::drop_ddl(t),
            ))),
        })
        .collect()
}

fn shown(relation: &str) -> String {
    system_catalog::shown(relation)
}

fn index_problems(stored: &[Declared]) -> Vec<Found> {
    indexes::missing(stored)
        .into_iter()
        .map(|n| Found {
            problem: problem(
                format!(
                    "magic_sync: no index of {} serves the lookups by ({})",
                    shown(&n.relation),
                    n.columns.join(", ")
                ),
                n.ddl(),
            ),
            tables: concerning(&n.relation, stored),
        })
        .collect()
}

/// Every problem, in the order: replicas, tables, triggers, indexes.
#[cfg(any(test, feature = "pg_test"))]
pub fn problems() -> Vec<Problem> {
    found_in(&Declarations::read())
        .into_iter()
        .map(|f| f.problem)
        .collect()
}

/// Every problem, with the tables each stops (`stopped`: its own and what
/// cannot be planned without them); none for a problem of the whole relay.
fn found_in(declarations: &Declarations) -> Vec<Found> {
    let stored = declarations.declared();
    let mut found = replicas_problems(declarations.replicas.as_ref());
    found.extend(table_problems(&stored, &declarations.tables));
    found.extend(trigger_problems(&stored));
    found.extend(index_problems(&stored));
    let noted = wishes::noted(stored);
    for f in &mut found {
        if !f.tables.is_empty() {
            f.tables = stopped(&noted, &f.tables);
        }
    }
    found
}

/// The tables the planner cannot plan while `drifted` are not: the
/// drifted tables and every table joined to them by foreign keys, either
/// way, as far as the keys reach (what a parent-child chain of declared
/// tables connects). We chose the whole connected part, not the children
/// alone: the planner's closure keeps a parent for a child that points at
/// it and sends a child with the parent it follows, so a child planned
/// without its stopped parent would be sent pointing at a row its replica
/// may lack, and a parent planned without its stopped children would be
/// taken back from replicas that hold it only for them. Tables not joined
/// to them keep flowing.
pub fn stopped(tables: &[Declared], drifted: &[String]) -> Vec<String> {
    let mut stopped: Vec<String> = drifted.to_vec();
    loop {
        let more: Vec<String> = tables
            .iter()
            .filter(|t| !stopped.contains(&t.name))
            .filter(|t| {
                t.references.iter().any(|r| stopped.contains(&r.parent))
                    || tables.iter().any(|p| {
                        stopped.contains(&p.name) && p.references.iter().any(|r| r.parent == t.name)
                    })
            })
            .map(|t| t.name.clone())
            .collect();
        if more.is_empty() {
            break;
        }
        stopped.extend(more);
    }
    stopped.sort();
    stopped.dedup();
    stopped
}

/// What a check was made against.
#[derive(PartialEq)]
struct Checked {
    /// `catalog_changes::seen()` as the check began.
    changes: u64,
    search_path: String,
    declarations: Declarations,
}

/// This backend's last check: what it was made against, and the tables it
/// stopped (each problem's, in the order found).
struct Last {
    checked: Checked,
    found: Vec<(String, String, Vec<String>)>,
}

thread_local! {
    /// This backend's last check that refused nothing.
    static LAST_CHECKED: RefCell<Option<Last>> = const { RefCell::new(None) };
}

/// The relay's check before a pass. Refuses with every problem when one
/// concerns the whole relay; otherwise answers the tables the pass must not
/// plan (none while the database is as declared), and records the problems
/// for the status reads in the pass's transaction (sync.drift), or lets go
/// of what was recorded when there are none. The check runs again only
/// when something it reads changed since this backend's last check.
pub fn check_before_pass(declarations: &Declarations) -> Vec<String> {
    let now = Checked {
        changes: catalog_changes::seen(),
        search_path: spi::one("SELECT current_setting('search_path')", &[]).unwrap_or_default(),
        declarations: declarations.clone(),
    };
    let cached = LAST_CHECKED.with_borrow(|last| {
        last.as_ref()
            .filter(|l| l.checked == now)
            .map(|l| l.found.clone())
    });
    let found = match cached {
        Some(found) => found,
        None => {
            LAST_CHECKED.set(None);
            let found = found_in(declarations);
            if found.iter().any(|f| f.tables.is_empty()) {
                refuse_problems(&found.into_iter().map(|f| f.problem).collect::<Vec<_>>());
                unreachable!("refused");
            }
            let found: Vec<(String, String, Vec<String>)> = found
                .into_iter()
                .map(|f| (f.problem.message, f.problem.hint, f.tables))
                .collect();
            if found.is_empty() {
                spi::run(FORGET_DRIFT);
            }
            LAST_CHECKED.set(Some(Last {
                checked: now,
                found: found.clone(),
            }));
            found
        }
    };
    if found.is_empty() {
        return Vec::new();
    }
    // Every pass while it lasts: a pass rolled back took its record with
    // it. Unchanged, the record is not written again (sql/declarations.sql).
    record_rows(&found);
    let mut stopped: Vec<String> = found.into_iter().flat_map(|(_, _, t)| t).collect();
    stopped.sort();
    stopped.dedup();
    stopped
}

/// After a declaration changed what is declared: if drift is recorded,
/// it is recorded again as it is now, so that one declared again leaves
/// the status reads at once. With none recorded, nothing: a migration
/// half way through (a table declared, its triggers to come) is no drift
/// the relay has met.
pub fn record_again() {
    if spi::one::<bool>("SELECT EXISTS (SELECT 1 FROM sync.drift)", &[]) == Some(true) {
        record();
    }
}

/// Replaces what sync.drift records with what the check finds now: what the
/// status reads show while the relay refuses to run, or stops tables
/// (sql/status.sql). The relay worker records it when a pass was refused
/// for it, a pass when it stopped tables for it, and a declaration when it
/// changed what is declared; a problem found before keeps the time it was
/// first found. Answers the problems.
pub fn record() -> Vec<Problem> {
    let found = found_in(&Declarations::read());
    let rows: Vec<(String, String, Vec<String>)> = found
        .iter()
        .map(|f| {
            (
                f.problem.message.clone(),
                f.problem.hint.clone(),
                f.tables.clone(),
            )
        })
        .collect();
    record_rows(&rows);
    found.into_iter().map(|f| f.problem).collect()
}

/// Records (problem, fix, tables it stops; none: the whole relay).
fn record_rows(found: &[(String, String, Vec<String>)]) {
    let problems: Vec<String> = found.iter().map(|f| f.0.clone()).collect();
    let fixes: Vec<String> = found.iter().map(|f| f.1.clone()).collect();
    let tables = serde_json::Value::Array(
        found
            .iter()
            .map(|f| {
                if f.2.is_empty() {
                    serde_json::Value::Null
                } else {
                    serde_json::json!(f.2)
                }
            })
            .collect(),
    );
    spi::run_with(
        "SELECT sync_internal.record_drift($1, $2, $3)",
        &[problems.into(), fixes.into(), pgrx::JsonB(tables).into()],
    );
}

/// Refuses with every problem, and every fix in the hint.
pub fn refuse_problems(problems: &[Problem]) {
    if problems.is_empty() {
        return;
    }
    let lines: Vec<String> = problems
        .iter()
        .map(|p| format!("- {}", p.message.trim_start_matches("magic_sync: ")))
        .collect();
    let fixes: Vec<String> = problems.iter().map(|p| p.hint.clone()).collect();
    Error::not_as_declared(
        format!(
            "magic_sync: the relay does not run while the database differs from the declarations:\n{}",
            lines.join("\n")
        ),
        fixes.join("\n"),
    )
    .raise();
}

#[cfg(test)]
mod tests {
    use super::stopped;
    use crate::catalog::{Declared, Reference};

    fn table(name: &str, parents: &[&str]) -> Declared {
        Declared {
            name: name.into(),
            references: parents
                .iter()
                .map(|p| Reference {
                    constraint: format!("{name}_{p}_fkey"),
                    columns: vec![format!("{p}_id")],
                    parent: (*p).into(),
                    parent_columns: vec!["id".into()],
                    key_types: Vec::new(),
                })
                .collect(),
            ..Declared::default()
        }
    }

    #[test]
    fn a_drifted_table_stops_what_its_foreign_keys_join_to_it_either_way_and_nothing_else() {
        // customers <- orders -> products <- order_lines; shelves alone.
        let tables = [
            table("customers", &[]),
            table("orders", &["customers", "products"]),
            table("products", &[]),
            table("order_lines", &["products"]),
            table("shelves", &[]),
        ];
        assert_eq!(
            stopped(&tables, &["customers".into()]),
            vec!["customers", "order_lines", "orders", "products"]
        );
        assert_eq!(stopped(&tables, &["shelves".into()]), vec!["shelves"]);
    }
}

//! A step of a pass, as it observes: whether the declarations changed since
//! the last pass, and what that asks of it.
//!
//! The relay keeps the digest of the declarations it last ran with, whole
//! and in parts (`sync.relay_state.declared`, `declared_parts`:
//! catalog/digest.rs). When the only change is tables declared for the
//! first time, each live replica is sent those tables' rows its rules give
//! it, through the foreign-key closure (a parent it now needs and lacks),
//! and nothing else: their rows are touched for every replica, and the
//! planner works out the rest as for any change (relay/plan/incremental.rs).
//! Any other change (a rule, a column, a key, the replicas, a table no
//! longer declared), or one that changes which tables are journaled or
//! adds a setting (whose wishes share the engine's table of wishes),
//! provisions every live replica again, as before.

use crate::catalog::table_sql::{key_text_of, quote_literal};
use crate::catalog::{digest, Declarations, Declared, Mirror};
use crate::relay::journal::Journaled;
use crate::spi;

const REDECLARED: &str =
    "magic_sync: the declarations changed since the last pass: every live replica is provisioned again";

/// What a change of the declarations asks of this pass.
pub enum Redeclared {
    /// None since the last pass (or the first pass of all).
    No,
    /// Only these tables, declared for the first time: their rows are sent.
    FirstDeclared(Vec<String>),
    /// Anything else: every live replica is provisioned again.
    All,
}

impl Redeclared {
    pub fn any(&self) -> bool {
        !matches!(self, Redeclared::No)
    }

    pub fn first_declared(&self) -> Vec<String> {
        match self {
            Redeclared::FirstDeclared(names) => names.clone(),
            _ => Vec::new(),
        }
    }
}

/// Compares the declarations with the last pass's and does what a change
/// asks: touches the rows of tables declared for the first time, or marks
/// every live replica for provisioning. Raises an alarm for any change.
/// A table declared for the first time that this pass stops (`stopped`:
/// it drifted already, declare/drift.rs) cannot be sent now: that change
/// provisions every replica, which waits for the fix.
pub fn after_declarations_changed(declarations: &Declarations, stopped: &[String]) -> Redeclared {
    let digest = declarations.digest();
    let tables = declarations.declared();
    let parts = digest::parts(declarations.replicas.as_ref(), &tables);
    let last: Option<String> = spi::one("SELECT declared FROM sync.relay_state", &[]);
    if last.as_ref() == Some(&digest) {
        return Redeclared::No;
    }
    let last_parts: Option<pgrx::JsonB> =
        spi::one("SELECT declared_parts FROM sync.relay_state", &[]);
    spi::run_with(
        "UPDATE sync.relay_state SET declared = $1, declared_parts = $2",
        &[digest.as_str().into(), pgrx::JsonB(parts.clone()).into()],
    );
    if last.is_none() {
        return Redeclared::No;
    }
    let first = last_parts
        .and_then(|l| only_declared_first(&l.0, &parts, &tables))
        .filter(|first| !first.iter().any(|t| stopped.contains(t)));
    match first {
        Some(first) => {
            send_first_declared(&tables, &first);
            alarm(&format!(
                "magic_sync: the declarations changed since the last pass: tables declared for the first time ({}) are sent to every live replica, nothing else",
                first.join(", ")
            ));
            Redeclared::FirstDeclared(first)
        }
        None => {
            alarm(REDECLARED);
            spi::run("UPDATE sync.replicas SET provision = true WHERE live; UPDATE sync.stand_ins SET provision = true");
            spi::run(
                "DELETE FROM sync.held_recorded h WHERE NOT EXISTS (SELECT 1 FROM sync.tables t WHERE t.name = h.table_name); \
                 DELETE FROM sync.quarantine q WHERE NOT EXISTS (SELECT 1 FROM sync.tables t WHERE t.name = q.table_name)",
            );
            Redeclared::All
        }
    }
}

/// Whoever runs the server must hear of every declaration change, and of
/// what it sends: a warning in the log and a row of sync.alarms.
fn alarm(what: &str) {
    spi::run_with("INSERT INTO sync.alarms (what) VALUES ($1)", &[what.into()]);
    pgrx::warning!("{what}");
}

/// The tables declared for the first time, when they are the whole change:
/// the replicas and every table declared before are as they were, which
/// tables are journaled is unchanged among those, and none of the new ones
/// is a setting. None otherwise (every replica is provisioned again).
fn only_declared_first(
    last: &serde_json::Value,
    now: &serde_json::Value,
    tables: &[Declared],
) -> Option<Vec<String>> {
    if last["replicas"] != now["replicas"] {
        return None;
    }
    let (was, is) = (last["tables"].as_object()?, now["tables"].as_object()?);
    if was
        .iter()
        .any(|(name, digest)| is.get(name) != Some(digest))
    {
        return None;
    }
    let first: Vec<String> = is
        .keys()
        .filter(|name| !was.contains_key(*name))
        .cloned()
        .collect();
    if first.is_empty() {
        return None;
    }
    let (new, old): (Vec<Declared>, Vec<Declared>) = tables
        .iter()
        .cloned()
        .partition(|t| first.contains(&t.name));
    if new.iter().any(|t| t.mirror == Mirror::Setting) {
        return None;
    }
    // A table journaled before and not now (a new table points at it), or
    // the other way round, changes what the stand-ins stand in for: only a
    // provisioning moves replicas between following and not.
    let (before, after) = (Journaled::of(&old), Journaled::of(tables));
    if old
        .iter()
        .any(|t| before.contains(&t.name) != after.contains(&t.name))
    {
        return None;
    }
    Some(first)
}

/// Touches every row of the tables declared for the first time, for every
/// replica: the planner sends each replica those its rules give it, and the
/// parents and followers they need that it lacks.
fn send_first_declared(tables: &[Declared], first: &[String]) {
    for table in tables
        .iter()
        .filter(|t| first.contains(&t.name) && t.mirror.goes_down())
    {
        spi::run(&format!(
            "INSERT INTO sync_pass_touched (replica, table_name, key) \
             SELECT NULL::uuid, {name}, {key} FROM {relation} AS t",
            name = quote_literal(&table.name),
            key = key_text_of("t", &table.key_columns),
            relation = table.relation,
        ));
    }
}

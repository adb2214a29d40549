//! A step of a pass, as it observes: whether the declarations changed since
//! the last pass, and what that asks of it.
//!
//! The relay keeps the digest of the declarations it last ran with, whole
//! and in parts (`sync.relay_state.declared`, `declared_parts`:
//! catalog/digest.rs), each table's in aspects. A change is planned as a
//! difference, table by table, through the planner's own steps:
//!
//! - a table declared for the first time, or whose rule, active view,
//!   references or mirror changed: its rows are *touched* (per replica, the
//!   rows it holds and those the rule now gives it; for a broadcast or
//!   following table, every row for every replica; with a change of
//!   references, the rows of the parents too),
//!   and the planner sends each replica what it now keeps and lacks, and
//!   takes back what it no longer keeps, with the closure over parents and
//!   followers (relay/plan/incremental.rs). A row held and kept is not sent
//!   again: nothing says it changed.
//! - a table whose columns (or their types) changed: the rows each replica
//!   holds of it are sent again, at the version it holds. Which replica
//!   holds which row did not change, so they are not planned: each held
//!   row not planned otherwise this pass is put in the plan as it is
//!   (`plan::RESEND_HELD`); with its rule changed too, its rows are touched
//!   and PLAN_SENDS sends those kept and held (`sync_pass_resent`).
//! - a table no longer mirrored (undeclared, or a record now): each replica
//!   is sent the delete of every row of it it holds, and the engine forgets
//!   its rows set aside (`plan::take_back_tables_let_go`).
//! - a table whose key, relation or partition column changed: what is held
//!   of it cannot be compared with what it is now; the replicas that hold
//!   it are sent a snapshot of that table only (`scope_of_snapshot`), and
//!   of every other table only what differs from what they are recorded
//!   holding (`sync.replicas.provision_only`, relay/plan/snapshot.rs); the
//!   stand-ins holding it are provisioned again; the alarm says so.
//!
//! Which tables are journaled changing (a broadcast table now assigned, a
//! new table pointing at a broadcast one) drops the journal: the followers
//! keep what they hold as rows of their own, and the stand-ins are made
//! again. A change of the replicas' declaration, or one concerning a
//! setting (whose wishes share the engine's table of wishes), provisions
//! every live replica again, as before. A change concerning a table this
//! pass stops (drift, declare/drift.rs) waits, whole, for the fix: the
//! digest the relay keeps stays the last one until then.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::catalog::reach::rule_rows;
use crate::catalog::table_sql::{key_text_of, quote_literal};
use crate::catalog::{digest, Declarations, Declared, Mirror, Rule};
use crate::relay::journal::Journaled;
use crate::spi;

/// The alarm of a change of the replicas' declaration, or of a setting.
const REDECLARED: &str =
    "magic_sync: the declarations changed since the last pass: every live replica is provisioned again";

/// What a change of the declarations asks of this pass.
pub enum Redeclared {
    /// None since the last pass (or the first pass of all), or one that
    /// waits for the tables it concerns to be fixed.
    No,
    /// A change planned as a difference.
    Difference(Difference),
    /// The replicas' declaration, or a setting: every live replica is
    /// provisioned again.
    All,
}

/// Why a table is in a change, as the alarm says it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Why {
    DeclaredFirst,
    Rule,
    Columns,
    LetGo,
    Key,
    Parent,
}

impl Why {
    fn says(self) -> &'static str {
        match self {
            Why::DeclaredFirst => "declared for the first time",
            Why::Rule => "its rule changed",
            Why::Columns => "its columns changed",
            Why::LetGo => "no longer mirrored",
            Why::Key => "its key changed",
            Why::Parent => "its children's references changed",
        }
    }
}

/// A change planned as a difference, per table.
#[derive(Default, Debug, PartialEq, Eq)]
pub struct Difference {
    /// Tables whose every row is touched for every replica.
    pub touched: BTreeSet<String>,
    /// Tables whose held rows are sent again.
    pub resent: BTreeSet<String>,
    /// Tables no longer mirrored: their held rows are taken back.
    pub let_go: BTreeSet<String>,
    /// Tables whose holders are provisioned again.
    pub provisioned: BTreeSet<String>,
    /// Which tables are journaled changed: the journal is made again.
    pub journal_changed: bool,
    /// Why each table is in the change (the first reason found).
    pub why: BTreeMap<String, Why>,
}

impl Difference {
    fn note(&mut self, table: &str, why: Why) {
        self.why.entry(table.to_owned()).or_insert(why);
        let set = match why {
            Why::DeclaredFirst | Why::Rule | Why::Parent => &mut self.touched,
            Why::Columns => &mut self.resent,
            Why::LetGo => &mut self.let_go,
            Why::Key => &mut self.provisioned,
        };
        set.insert(table.to_owned());
    }

    /// Every table the change concerns.
    fn tables(&self) -> impl Iterator<Item = &String> {
        self.why.keys()
    }

    /// The tables declared for the first time.
    pub fn first_declared(&self) -> Vec<String> {
        self.why
            .iter()
            .filter(|(_, w)| **w == Why::DeclaredFirst)
            .map(|(t, _)| t.clone())
            .collect()
    }
}

impl Redeclared {
    pub fn any(&self) -> bool {
        !matches!(self, Redeclared::No)
    }

    pub fn first_declared(&self) -> Vec<String> {
        match self {
            Redeclared::Difference(d) => d.first_declared(),
            _ => Vec::new(),
        }
    }

    /// The tables no longer mirrored whose rows replicas are told to let go.
    pub fn let_go(&self) -> Vec<String> {
        match self {
            Redeclared::Difference(d) => d.let_go.iter().cloned().collect(),
            _ => Vec::new(),
        }
    }

    /// The tables whose held rows are sent again as they are held, without
    /// planning them: their columns changed and which replica holds which
    /// row did not (not touched: `plan::RESEND_HELD`).
    pub fn resent_as_held(&self) -> Vec<String> {
        match self {
            Redeclared::Difference(d) => d.resent.difference(&d.touched).cloned().collect(),
            _ => Vec::new(),
        }
    }
}

/// The parts of the declarations' digest the relay keeps: the digest's,
/// and which tables are journaled.
fn parts_of(declarations: &Declarations, tables: &[Declared]) -> Value {
    let mut parts = digest::parts(declarations.replicas.as_ref(), tables);
    parts["journaled"] = Journaled::of(tables).names().into();
    parts
}

/// Compares the declarations with the last pass's and does what a change
/// asks (see the module's comment). Raises an alarm for a change that
/// provisions every replica; `report` raises the one of a difference once
/// it is recorded, saying what it sent.
pub fn after_declarations_changed(declarations: &Declarations, stopped: &[String]) -> Redeclared {
    let digest = declarations.digest();
    let last: Option<String> = spi::one("SELECT declared FROM sync.relay_state", &[]);
    if last.as_ref() == Some(&digest) {
        return Redeclared::No;
    }
    let tables = declarations.declared();
    let parts = parts_of(declarations, &tables);
    let last_parts: Option<pgrx::JsonB> =
        spi::one("SELECT declared_parts FROM sync.relay_state", &[]);
    let difference = match &last {
        None => None,
        Some(_) => last_parts.and_then(|l| difference(&l.0, &parts)),
    };
    // A change concerning a table stopped waits for the fix, whole.
    if let Some(d) = &difference {
        if d.tables().any(|t| stopped.contains(t)) {
            return Redeclared::No;
        }
    }
    spi::run_with(
        "UPDATE sync.relay_state SET declared = $1, declared_parts = $2",
        &[digest.as_str().into(), pgrx::JsonB(parts).into()],
    );
    if last.is_none() {
        return Redeclared::No;
    }
    match difference {
        Some(d) => {
            plan_difference(&tables, &d);
            Redeclared::Difference(d)
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

fn goes_down(aspects: &Value) -> bool {
    aspects["mirror"] == Mirror::Catalog.name() || aspects["mirror"] == Mirror::Both.name()
}

fn is_setting(aspects: &Value) -> bool {
    aspects["mirror"] == Mirror::Setting.name()
}

/// The change from the last pass's parts to these, table by table; None
/// when it cannot be planned as a difference for all (the replicas'
/// declaration, a setting, or parts kept by an older build).
pub fn difference(last: &Value, now: &Value) -> Option<Difference> {
    if last["replicas"] != now["replicas"] {
        return None;
    }
    let (was, is) = (last["aspects"].as_object()?, now["aspects"].as_object()?);
    let mut d = Difference {
        journal_changed: last["journaled"] != now["journaled"],
        ..Difference::default()
    };
    let names: BTreeSet<&String> = was.keys().chain(is.keys()).collect();
    for name in names {
        let (w, i) = (was.get(name), is.get(name));
        if w == i {
            continue;
        }
        if w.is_some_and(is_setting) || i.is_some_and(is_setting) {
            return None;
        }
        let (w_down, i_down) = (w.is_some_and(goes_down), i.is_some_and(goes_down));
        match (w, i) {
            (_, Some(_)) if i_down && !w_down => d.note(name, Why::DeclaredFirst),
            (Some(_), _) if w_down && !i_down => d.note(name, Why::LetGo),
            (Some(w), Some(i)) if w_down && i_down => {
                if w["key"] != i["key"] {
                    d.note(name, Why::Key);
                    continue;
                }
                if w["rule"] != i["rule"] || w["mirror"] != i["mirror"] {
                    d.note(name, Why::Rule);
                }
                if w["references"] != i["references"] {
                    d.note(name, Why::Rule);
                    for parent in [w, i]
                        .iter()
                        .flat_map(|a| a["parents"].as_array().cloned().unwrap_or_default())
                    {
                        if let Some(parent) = parent.as_str() {
                            if is.get(parent).is_some_and(goes_down) {
                                d.note(parent, Why::Parent);
                            }
                        }
                    }
                }
                if w["columns"] != i["columns"] || w["mirror"] != i["mirror"] {
                    // Touched for its membership already or not, the
                    // rows kept are sent again.
                    d.note(name, Why::Columns);
                }
            }
            // Neither before nor now going down: a record's change sends
            // nothing.
            _ => {}
        }
    }
    Some(d)
}

/// Does what a difference asks of the pass, before it plans.
fn plan_difference(tables: &[Declared], d: &Difference) {
    if d.journal_changed {
        // The followers keep what they hold as rows of their own; the
        // stand-ins go, and the pass makes those it needs again.
        spi::run("UPDATE sync.stand_ins SET provision = true");
        spi::run("SELECT sync_internal.drop_journal()");
    }
    let names = |set: &BTreeSet<String>| set.iter().cloned().collect::<Vec<String>>();
    let journaled = Journaled::of(tables);
    if !d.provisioned.is_empty() {
        let scope = scope_of_snapshot(d);
        // One that said it has a gap, or is to be provisioned later for
        // what it said, is provisioned whole: a snapshot of some tables
        // only would not set straight what it missed of the others, yet
        // would be taken for the one on its way (file/applied.rs). So is
        // one not heard applying everything sent it: a message still on
        // its way may be lost, and the snapshot, which begins anew
        // whatever gap the replica has (protocol 4.1), would hide that.
        // So is one owed changes (sync.owed): the rows of the other tables
        // it lacks the newest versions of are recorded there, not in what
        // a snapshot of some tables compares.
        let whole = spi::run_counting(
            "UPDATE sync.replicas r SET provision = true WHERE r.live AND NOT r.provision \
             AND (r.gap > 0 OR r.provision_at IS NOT NULL \
                  OR r.applied_epoch IS DISTINCT FROM r.epoch OR r.applied_sequence < r.last_sequence \
                  OR EXISTS (SELECT 1 FROM sync.owed o WHERE o.replica = r.id)) \
             AND EXISTS (SELECT 1 FROM sync.held h WHERE h.replica = r.id AND h.table_name = ANY ($1)) \
             RETURNING r.id",
            &[names(&d.provisioned).into()],
        );
        let replicas = whole
            + spi::run_counting(
                "UPDATE sync.replicas r SET provision_only = ARRAY(SELECT DISTINCT t \
                     FROM unnest(coalesce(r.provision_only, '{}') || $2::text[]) AS t ORDER BY t) \
                 WHERE r.live AND NOT r.provision \
                 AND EXISTS (SELECT 1 FROM sync.held h WHERE h.replica = r.id AND h.table_name = ANY ($1)) \
                 RETURNING r.id",
                &[names(&d.provisioned).into(), scope.clone().into()],
            );
        // Its own alarm, which sync.health() lists while they provision.
        alarm(&format!(
            "magic_sync: a declaration change provisions again the replicas holding {}, whose key or relation changed: {replicas} replicas, \
             with a snapshot of {} only (of every other table, only what differs)",
            names(&d.provisioned).join(", "),
            scope.join(", ")
        ));
        spi::run_with(
            "UPDATE sync.stand_ins s SET provision = true WHERE NOT s.provision \
             AND EXISTS (SELECT 1 FROM sync.held_recorded h WHERE h.replica = s.id AND h.table_name = ANY ($1))",
            &[names(&d.provisioned).into()],
        );
    }
    let forgotten: BTreeSet<String> = d.let_go.union(&d.provisioned).cloned().collect();
    if !forgotten.is_empty() {
        spi::run_with(
            "DELETE FROM sync.quarantine WHERE table_name = ANY ($1)",
            &[names(&forgotten).into()],
        );
    }
    for table in tables.iter().filter(|t| t.mirror.goes_down()) {
        if d.touched.contains(&table.name) {
            touch(table, &journaled, d.resent.contains(&table.name));
        }
        if d.resent.contains(&table.name) {
            spi::run_with(
                "INSERT INTO sync_pass_resent (table_name) VALUES ($1)",
                &[table.name.as_str().into()],
            );
        }
    }
}

/// The tables the snapshot of a replica holding a table whose key or
/// relation changed names, and sweeps:
/// - those tables: what is recorded held of them is keyed as they were,
///   and cannot be compared with what they are now (nor could a delete by
///   such a key be read by a build that has the new one: the sweep needs
///   no key of what it lets go of);
/// - the tables whose columns changed in the same change: every row held
///   of them is sent again anyway.
///
/// Every other table is planned from scratch and compared with what the
/// replica is recorded holding (relay/plan/snapshot.rs): sent what it
/// lacks or holds at an older version, taken back what it should not
/// hold. The children of a changed table whose references into it changed
/// need no more: their own keys did not change, and the comparison sends
/// those whose bytes or membership did. A follower of a stand-in parts as
/// the pass begins, so what it holds of the journaled tables is compared
/// too, and follows again from the pass's end (sql/journal.sql).
fn scope_of_snapshot(d: &Difference) -> Vec<String> {
    d.provisioned.union(&d.resent).cloned().collect()
}

/// Touches the rows of a table whose rule changed (or that is new). A rule
/// that names each row's replicas (assigned, grouped, none) touches, per
/// replica, the rows it holds and those the rule now gives it: the pairs
/// are as many as the rows held before and after, where every row touched
/// for every replica would be the table's rows times the replicas (an
/// assigned table's 1,000,000 rows for 200 registers: 200,000,000 pairs).
/// A broadcast or following table, or a journaled one (planned for the
/// stand-ins), has every row touched for every replica.
///
/// Of a table that names each row's replicas, only the pairs that move
/// are touched: held and no longer given, or given and not held. A row
/// held and still given keeps its reason to be held, and what leans on it
/// or it on is reached from the rows that move, as for any change; touched
/// too, at 200 registers of 5,950 orders each, the 1,190,000 pairs held
/// went through the closure to find the 120,000 that move (90.7 s of a
/// 117.5 s change). With its columns changed too (`resent`), every row
/// held is touched: PLAN_SENDS sends those kept and held again.
fn touch(table: &Declared, journaled: &Journaled, resent: bool) {
    let name = quote_literal(&table.name);
    let per_replica = matches!(
        table.rule,
        Rule::Assigned { .. } | Rule::Grouped { .. } | Rule::None
    ) && !journaled.contains(&table.name);
    if !per_replica {
        spi::run(&format!(
            "INSERT INTO sync_pass_touched (replica, table_name, key) \
             SELECT NULL::uuid, {name}, {key} FROM {relation} AS t",
            key = key_text_of("t", &table.key_columns),
            relation = table.relation,
        ));
        return;
    }
    let held = format!(
        "SELECT h.replica, h.table_name, h.key FROM sync.held_recorded h \
         WHERE h.table_name = {name} AND h.leaving IS NULL"
    );
    let touched = match (rule_rows(table, "sync_pass_live", None), resent) {
        (Some(given), false) => format!(
            "(({held}) EXCEPT SELECT * FROM ({given}) AS g) \
             UNION ALL (SELECT * FROM ({given}) AS g EXCEPT ({held}))"
        ),
        (Some(given), true) => format!("({held}) UNION SELECT * FROM ({given}) AS g"),
        (None, _) => held,
    };
    spi::run(&format!(
        "INSERT INTO sync_pass_touched (replica, table_name, key) {touched}"
    ));
}

/// The alarm of a change planned as a difference, once the pass recorded
/// it: per table, how many rows were sent to how many replicas and taken
/// back from how many (a stand-in's counted for each of its followers),
/// and the replicas provisioned again.
pub fn report(redeclared: &Redeclared, provisioned: i64) {
    let Redeclared::Difference(d) = redeclared else {
        return;
    };
    let mut figures: BTreeMap<String, String> = BTreeMap::new();
    spi::for_each_chunk(
        crate::statements::relay::redeclared::SENT_PER_TABLE,
        1_000,
        |row| {
            (
                spi::column::<String>(row, 1, "table_name"),
                spi::column::<String>(row, 2, "op"),
                spi::column::<i64>(row, 3, "rows"),
                spi::column::<i64>(row, 4, "replicas"),
            )
        },
        |rows| {
            for (table, op, n, replicas) in rows {
                let said = match op.as_str() {
                    "u" => format!("{n} rows sent to {replicas} replicas"),
                    _ => format!("{n} rows let go of by {replicas} replicas"),
                };
                figures
                    .entry(table)
                    .and_modify(|f| {
                        f.push_str(", ");
                        f.push_str(&said);
                    })
                    .or_insert(said);
            }
        },
    );
    let mut parts: Vec<String> = d
        .why
        .iter()
        .map(|(table, why)| {
            let sent = figures
                .remove(table)
                .unwrap_or_else(|| "nothing sent".to_owned());
            format!("{table} ({}): {sent}", why.says())
        })
        .collect();
    parts.extend(
        figures
            .into_iter()
            .map(|(table, sent)| format!("{table} (changed rows): {sent}")),
    );
    if !d.provisioned.is_empty() {
        parts.push(format!(
            "{provisioned} replicas provisioned again, holding {} whose key changed",
            d.provisioned.iter().cloned().collect::<Vec<_>>().join(", ")
        ));
    }
    if d.journal_changed {
        parts.push("the journal of broadcast tables made again".to_owned());
    }
    if parts.is_empty() {
        parts.push("nothing to send (no table that goes down changed)".to_owned());
    }
    alarm(&format!(
        "magic_sync: the declarations changed since the last pass: only the difference is sent: {}",
        parts.join("; ")
    ));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn aspects(mirror: &str, rule: &str, columns: &str, key: &str) -> Value {
        json!({"mirror": mirror, "rule": rule, "columns": columns, "key": key,
               "references": "r", "parents": []})
    }

    fn parts(tables: Value) -> Value {
        json!({"replicas": "x", "aspects": tables, "journaled": []})
    }

    #[test]
    fn each_kind_of_change_is_planned_as_its_own_difference() {
        let last = parts(json!({
            "products": aspects("catalog", "broadcast", "c1", "k"),
            "orders": aspects("catalog", "assigned", "c1", "k"),
            "lines": aspects("catalog", "assigned", "c1", "k"),
            "old": aspects("catalog", "broadcast", "c1", "k"),
            "receipts": aspects("record", "none", "c1", "k"),
        }));
        let now = parts(json!({
            "products": aspects("catalog", "assigned", "c1", "k"),
            "orders": aspects("catalog", "assigned", "c2", "k"),
            "lines": aspects("catalog", "assigned", "c1", "k2"),
            "shelves": aspects("catalog", "broadcast", "c1", "k"),
            "receipts": aspects("record", "none", "c2", "k"),
        }));
        let d = difference(&last, &now).unwrap();
        assert_eq!(d.why["products"], Why::Rule);
        assert_eq!(d.why["orders"], Why::Columns);
        assert_eq!(d.why["lines"], Why::Key);
        assert_eq!(d.why["old"], Why::LetGo);
        assert_eq!(d.why["shelves"], Why::DeclaredFirst);
        assert!(!d.why.contains_key("receipts"));
        assert_eq!(d.touched, ["products", "shelves"].map(String::from).into());
        assert_eq!(d.resent, ["orders"].map(String::from).into());
        assert_eq!(d.first_declared(), vec!["shelves".to_owned()]);
    }

    #[test]
    fn the_replicas_or_a_setting_changed_cannot_be_planned_as_a_difference() {
        let last = parts(json!({"footers": aspects("setting", "none", "c1", "k")}));
        let now = parts(json!({"footers": aspects("setting", "none", "c2", "k")}));
        assert!(difference(&last, &now).is_none());
        let mut other = last.clone();
        other["replicas"] = "y".into();
        assert!(difference(&last, &other).is_none());
        assert!(difference(&json!({"replicas": "x", "tables": {}}), &last).is_none());
    }
}

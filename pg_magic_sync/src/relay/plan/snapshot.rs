//! What a replica being provisioned is sent: everything it should hold,
//! worked out from scratch. The rows its tables' rules send it, then, a
//! round at a time, every row those point at and every row that follows
//! them, until a round adds nothing.
//!
//! A table every row of which goes (broadcast, no view, nothing set aside)
//! is not listed row by row: `sync_pass_whole` says the replica is sent all
//! of it, and its rows are read straight from the table as they are packed.

use crate::catalog::reach::{followers, in_partition_of, parents, rule_rows};
use crate::catalog::table_sql::{key_of, quote_ident, quote_literal};
use crate::catalog::{Declared, Mirror, Rule};
use crate::relay::journal::{self, Among, Journaled};
use crate::relay::scratch;
use crate::spi;
use crate::statements::relay::plan::snapshot::{
    ADVANCE, KEEP_HELD_OUTSIDE_SCOPE, PROVISIONING, TAKE_BACK_OUTSIDE_SCOPE, VERSIONS,
    WHOLE_OUTSIDE_SCOPE,
};

/// Plans every row each replica being provisioned should hold. Answers
/// whether any replica is being provisioned.
pub fn plan_snapshots(tables: &[Declared], journaled: &Journaled) -> bool {
    if spi::run_counting(PROVISIONING, &[]) == 0 {
        return false;
    }
    journal::split(journaled, Among::Provisioning);
    let whole: Vec<&Declared> = tables.iter().filter(|t| goes_whole(t)).collect();
    for table in tables.iter().filter(|t| t.mirror.goes_down()) {
        let provisioning = journal::planned_for(table, journaled, Among::Provisioning);
        if whole.iter().any(|w| w.name == table.name) {
            spi::run(&format!(
                "INSERT INTO sync_pass_whole SELECT id, {} FROM {provisioning} AS p",
                quote_literal(&table.name)
            ));
        } else if let Some(rows) = rule_rows(table, provisioning, None) {
            spi::run(&format!(
                "INSERT INTO sync_pass_plan (replica, table_name, key, op, note) \
                 SELECT s.*, 'u', 0 FROM ({rows}) AS s"
            ));
        }
    }
    // What cannot go is never planned: nor is anything that points at it.
    spi::run(
        "DELETE FROM sync_pass_plan p USING sync_pass_blocked b, sync_pass_provisioning r \
         WHERE p.replica = r.id AND p.table_name = b.table_name AND p.key = b.key",
    );
    if closes_over_anything(tables) {
        spi::run(
            "INSERT INTO sync_pass_frontier SELECT p.replica, p.table_name, p.key \
             FROM sync_pass_plan p JOIN sync_pass_provisioning r ON r.id = p.replica",
        );
        // A whole table's rows are the first frontier too, where they point
        // at parents or are followed.
        let reaching = whole
            .iter()
            .filter(|t| !t.references.is_empty() || is_followed(t, tables));
        for table in reaching {
            spi::run(&format!(
                "INSERT INTO sync_pass_frontier SELECT w.replica, w.table_name, {key} \
                 FROM sync_pass_whole w JOIN sync_pass_provisioning r ON r.id = w.replica \
                 JOIN {rel} AS t ON w.table_name = {name}{within}",
                key = key_of(table, "t"),
                rel = table.relation,
                name = quote_literal(&table.name),
                within = in_partition_of(table, "t", "r"),
            ));
        }
        while close_one_round(tables) > 0 {}
        scratch::empty("sync_pass_frontier");
    }
    let scoped = spi::one::<bool>(ANY_SCOPED, &[]).unwrap_or(false);
    if scoped {
        list_whole_outside_scope(&whole);
    }
    plan_recorded_settings(tables);
    spi::run(VERSIONS);
    if scoped {
        difference_outside_scope(tables);
    }
    true
}

/// Whether a replica of this pass is provisioned again for some tables
/// only (`sync.replicas.provision_only`, relay/redeclared.rs).
const ANY_SCOPED: &str = "SELECT EXISTS (SELECT 1 FROM sync_pass_provisioning r \
     JOIN sync.replicas s ON s.id = r.id WHERE NOT s.provision AND s.provision_only IS NOT NULL)";

/// A replica provisioned again for some tables only holds the others as
/// recorded: what it is sent of them is worked out against that, row by
/// row, so a table sent whole is listed instead.
fn list_whole_outside_scope(whole: &[&Declared]) {
    for table in whole {
        spi::run(&format!(
            "INSERT INTO sync_pass_plan (replica, table_name, key, op, note) \
             SELECT w.replica, w.table_name, {key}, 'u', 0 \
             FROM sync_pass_whole w JOIN sync_pass_provisioning r ON r.id = w.replica \
             JOIN sync.replicas s ON s.id = w.replica AND NOT s.provision \
                  AND s.provision_only IS NOT NULL AND NOT (w.table_name = ANY (s.provision_only)) \
             JOIN {rel} AS t ON w.table_name = {name}{within}",
            key = key_of(table, "t"),
            rel = table.relation,
            name = quote_literal(&table.name),
            within = in_partition_of(table, "t", "r"),
        ));
    }
    spi::run(WHOLE_OUTSIDE_SCOPE);
}

/// Of the tables outside its scope, a replica provisioned again for some
/// tables only is sent what it lacks or holds at an older version, and
/// what it holds and should not is taken back: the snapshot's end sweeps
/// only the tables it names.
fn difference_outside_scope(tables: &[Declared]) {
    let down: Vec<String> = tables
        .iter()
        .filter(|t| t.mirror.goes_down())
        .map(|t| t.name.clone())
        .collect();
    spi::run_with(TAKE_BACK_OUTSIDE_SCOPE, &[down.into()]);
    spi::run(KEEP_HELD_OUTSIDE_SCOPE);
}

/// The keys of each setting the server records a replica being provisioned
/// holding, which its snapshot names (`recorded`): the replica deletes, as
/// its own write, any it no longer holds (protocol 4.2).
fn plan_recorded_settings(tables: &[Declared]) {
    for table in tables.iter().filter(|t| t.mirror == Mirror::Setting) {
        let Some(origin) = &table.origin else {
            continue;
        };
        spi::run(&format!(
            "INSERT INTO sync_pass_plan (replica, table_name, key, op, note) \
             SELECT r.id, {name}, {key}, 'r', 0 FROM sync_pass_provisioning r \
             JOIN {rel} AS t ON t.{origin} = r.id",
            name = quote_literal(&table.name),
            key = key_of(table, "t"),
            rel = table.relation,
            origin = quote_ident(origin),
        ));
    }
}

/// Whether every row of a table goes to every replica being provisioned (of
/// its partition): then it is sent whole, without listing its rows.
fn goes_whole(table: &Declared) -> bool {
    table.mirror.goes_down()
        && table.rule == Rule::Broadcast
        && table.active.is_none()
        && spi::one::<bool>(
            "SELECT NOT EXISTS (SELECT 1 FROM sync_pass_blocked WHERE table_name = $1)",
            &[table.name.as_str().into()],
        )
        .unwrap_or(false)
}

/// Whether some table follows this one.
fn is_followed(table: &Declared, tables: &[Declared]) -> bool {
    tables
        .iter()
        .any(|t| t.followed().is_some_and(|r| r.parent == table.name))
}

/// Whether any table points at another or follows one: if none does, what
/// the rules send is the whole of it.
pub fn closes_over_anything(tables: &[Declared]) -> bool {
    tables
        .iter()
        .any(|t| t.mirror.goes_down() && !t.references.is_empty())
}

/// The parents and followers of the frontier, as `sync_pass_reached`.
pub fn reach_from_frontier(tables: &[Declared]) {
    let mut reached: Vec<String> = Vec::new();
    for table in tables.iter().filter(|t| t.mirror.goes_down()) {
        for reference in &table.references {
            reached.push(parents(table, reference, "sync_pass_frontier"));
        }
        reached.extend(followers(table, "sync_pass_frontier"));
    }
    let union = if reached.is_empty() {
        "SELECT NULL::uuid, NULL::text, NULL::text WHERE false".to_owned()
    } else {
        reached.join(" UNION ")
    };
    spi::run(&format!(
        "INSERT INTO sync_pass_reached (replica, table_name, key) \
         SELECT * FROM ({union}) AS u(replica, table_name, key)"
    ));
}

/// One round: what the frontier reaches that is not planned yet becomes
/// the next frontier. Answers how many rows the round added.
fn close_one_round(tables: &[Declared]) -> i64 {
    reach_from_frontier(tables);
    scratch::empty("sync_pass_frontier");
    spi::run(ADVANCE);
    scratch::empty("sync_pass_reached");
    spi::one::<i64>("SELECT count(*) FROM sync_pass_frontier", &[]).unwrap_or(0)
}

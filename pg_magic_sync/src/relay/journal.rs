//! The journal of broadcast tables (docs/src/decisions.md, "The journal for
//! broadcast tables"): which tables are journaled, the stand-ins a pass
//! plans them for, and which replicas each table is planned for.
//!
//! A journaled table is planned for the stand-ins and for the replicas that
//! do not follow one; every other table for the replicas alone.

use std::collections::BTreeSet;

use crate::catalog::{Declared, Mirror, Rule};
use crate::relay::scratch;
use crate::spi::{self, to_pg};
use crate::statements::relay::journal::STAND_INS;

/// The tables a stand-in journals: broadcast, going down only, pointing at
/// nothing and pointed at by nothing. Worked out once a pass.
pub struct Journaled(BTreeSet<String>);

impl Journaled {
    pub fn of(tables: &[Declared]) -> Journaled {
        let names = tables
            .iter()
            .filter(|t| {
                t.mirror == Mirror::Catalog
                    && t.rule == Rule::Broadcast
                    && t.references.is_empty()
                    && !tables
                        .iter()
                        .any(|o| o.references.iter().any(|r| r.parent == t.name))
            })
            .map(|t| t.name.clone())
            .collect();
        Journaled(names)
    }

    /// Whether the pass has stand-ins at all.
    pub fn any(&self) -> bool {
        !self.0.is_empty()
    }

    pub fn contains(&self, table: &str) -> bool {
        self.0.contains(table)
    }

    pub fn names(&self) -> Vec<String> {
        self.0.iter().cloned().collect()
    }
}

/// Makes the stand-ins this pass needs, parts or stops the followers of
/// what is provisioned, and lets go of what every follower applied the
/// take-back of (sql/journal.sql). Called before the replicas of a pass
/// are listed; `stand_ins_of_replicas` adds them. Which tables are
/// journaled changes only with the declarations (`redeclared`): with none
/// left, the journal goes.
pub fn prepare(journaled: &Journaled, epoch: uuid::Uuid, redeclared: bool) {
    if journaled.any() {
        spi::run_with(
            "SELECT sync_internal.prepare_journal($1)",
            &[to_pg(epoch).into()],
        );
    } else if redeclared {
        spi::run("SELECT sync_internal.drop_journal()");
    }
}

/// Adds the stand-ins to the replicas of this pass.
pub fn stand_ins_of_replicas(journaled: &Journaled) {
    if journaled.any() {
        spi::run(STAND_INS);
    }
}

/// The replicas a step plans for: those kept up to date, or those
/// provisioned.
#[derive(Clone, Copy)]
pub enum Among {
    Current,
    Provisioning,
}

/// Each split is two statements, not one string of both: a plan is kept
/// for one command only (spi.rs).
const SPLIT_CURRENT: [&str; 2] = [
    "INSERT INTO sync_pass_current_journaled SELECT * FROM sync_pass_current x \
     WHERE NOT EXISTS (SELECT 1 FROM sync.followers f WHERE f.replica = x.id)",
    "INSERT INTO sync_pass_current_own SELECT * FROM sync_pass_current x \
     WHERE NOT EXISTS (SELECT 1 FROM sync.stand_ins s WHERE s.id = x.id)",
];

/// Followers provisioned again stopped following as the pass began
/// (`prepare`): every replica provisioned is planned journaled tables.
const SPLIT_PROVISIONING: [&str; 2] = [
    "INSERT INTO sync_pass_provisioning_journaled SELECT * FROM sync_pass_provisioning",
    "INSERT INTO sync_pass_provisioning_own SELECT * FROM sync_pass_provisioning x \
     WHERE NOT EXISTS (SELECT 1 FROM sync.stand_ins s WHERE s.id = x.id)",
];

/// Splits the replicas of a step into those journaled tables are planned
/// for and those other tables are, as scratch tables with statistics: a
/// subquery in their place made PostgreSQL read a broadcast table whole to
/// join it (12 ms a pass of a few hundred changes, over 100,000 products).
pub fn split(journaled: &Journaled, among: Among) {
    if !journaled.any() {
        return;
    }
    let (sql, names) = match among {
        Among::Current => (
            SPLIT_CURRENT,
            ["sync_pass_current_journaled", "sync_pass_current_own"],
        ),
        Among::Provisioning => (
            SPLIT_PROVISIONING,
            [
                "sync_pass_provisioning_journaled",
                "sync_pass_provisioning_own",
            ],
        ),
    };
    for statement in sql {
        spi::run(statement);
    }
    scratch::analyze(&names);
}

/// The scratch table of the replicas `table` is planned for, among those
/// of a step: for a journaled table, the stand-ins and the replicas that do
/// not follow one; for another, the replicas alone (`split` filled them).
pub fn planned_for(table: &Declared, journaled: &Journaled, among: Among) -> &'static str {
    match (among, journaled.any(), journaled.contains(&table.name)) {
        (Among::Current, false, _) => "sync_pass_current",
        (Among::Current, true, true) => "sync_pass_current_journaled",
        (Among::Current, true, false) => "sync_pass_current_own",
        (Among::Provisioning, false, _) => "sync_pass_provisioning",
        (Among::Provisioning, true, true) => "sync_pass_provisioning_journaled",
        (Among::Provisioning, true, false) => "sync_pass_provisioning_own",
    }
}

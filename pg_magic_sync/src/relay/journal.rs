//! The journal of broadcast tables (docs/src/decisions.md, "The journal for
//! broadcast tables"): which tables are journaled, the stand-ins a pass
//! plans them for, and which replicas each table is planned for.
//!
//! A journaled table is planned for the stand-ins and for the replicas that
//! do not follow one; every other table for the replicas alone.

use std::collections::BTreeSet;

use crate::catalog::{Declared, Mirror, Rule};
use crate::spi::{self, to_pg};

/// A stand-in for every partition a live replica is in.
const MAKE_STAND_INS: &str = "\
    INSERT INTO sync.stand_ins (partition) SELECT DISTINCT partition FROM sync_pass_live \
    ON CONFLICT (partition) DO NOTHING";

/// A stand-in whose chain is in another epoch begins again from scratch.
const PROVISION_STAND_INS_OF_OTHER_EPOCHS: &str = "\
    UPDATE sync.stand_ins SET provision = true WHERE NOT provision AND epoch IS DISTINCT FROM $1";

/// Followers of a stand-in about to be provisioned keep what they hold as
/// rows of their own (a replica provisioned too lets go of them anyway).
const PART_FROM_PROVISIONED: &str = "\
    SELECT sync_internal.part(f.replica) FROM sync.followers f \
    JOIN sync.stand_ins s ON s.id = f.stand_in WHERE s.provision";

/// A replica provisioned again holds nothing yet: it stops following, and
/// is planned every journaled table's snapshot.
const STOP_FOLLOWING_PROVISIONED: &str = "\
    DELETE FROM sync.followers f USING sync.replicas r WHERE r.id = f.replica AND r.provision; \
    DELETE FROM sync.follower_messages m USING sync.replicas r WHERE r.id = m.replica AND r.provision";

const STAND_INS: &str = "\
    INSERT INTO sync_pass_replicas (id, provision, partition) \
    SELECT id, provision, partition FROM sync.stand_ins";

/// The names of the tables a stand-in journals: broadcast, going down only,
/// pointing at nothing and pointed at by nothing.
pub fn journaled(tables: &[Declared]) -> BTreeSet<String> {
    tables
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
        .collect()
}

/// Makes the stand-ins this pass needs, and lets go of what every follower
/// applied the take-back of. Called before the replicas of a pass are
/// listed; `stand_ins_of_replicas` adds them.
pub fn prepare(tables: &[Declared], epoch: uuid::Uuid) {
    if journaled(tables).is_empty() {
        return;
    }
    spi::run(MAKE_STAND_INS);
    spi::run_with(PROVISION_STAND_INS_OF_OTHER_EPOCHS, &[to_pg(epoch).into()]);
    spi::run(PART_FROM_PROVISIONED);
    spi::run(STOP_FOLLOWING_PROVISIONED);
    spi::run("SELECT sync_internal.let_go_of_journal()");
}

/// Adds the stand-ins to the replicas of this pass.
pub fn stand_ins_of_replicas(tables: &[Declared]) {
    if !journaled(tables).is_empty() {
        spi::run(STAND_INS);
    }
}

/// The replicas among `replicas` (a relation of `(id, partition)`) that
/// `table` is planned for: for a journaled table, all but the followers;
/// for another, all but the stand-ins.
pub fn planned_for(table: &Declared, journaled: &BTreeSet<String>, replicas: &str) -> String {
    if journaled.contains(&table.name) {
        format!(
            "(SELECT * FROM {replicas} x WHERE NOT EXISTS \
             (SELECT 1 FROM sync.followers f WHERE f.replica = x.id))"
        )
    } else {
        format!(
            "(SELECT * FROM {replicas} x WHERE NOT EXISTS \
             (SELECT 1 FROM sync.stand_ins s WHERE s.id = x.id))"
        )
    }
}

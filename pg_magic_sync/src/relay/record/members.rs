//! The pass's replicas and stand-ins, the cohorts each is in, and where
//! each one's chain stands: the order their messages are numbered in.

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

use crate::spi::{self, from_pg};
use crate::statements::relay::record::{FOLLOWERS, MEMBERS, STAND_INS_OF_PASS};

/// One replica of a pass, and where its chain stands: shared by every
/// cohort it is in (a follower is in its stand-in's and its own).
pub(super) struct Member {
    pub(super) replica: Uuid,
    /// What it is to the journal of broadcast tables.
    pub(super) role: Role,
    pub(super) provision: bool,
    /// The tables its snapshot names, when it is provisioned again for
    /// some tables only (sync.replicas.provision_only); None: every table.
    pub(super) scope: Option<Vec<String>>,
    pub(super) snapshot: Option<Uuid>,
    pub(super) previous: u64,
    pub(super) previous_nonce: u64,
    pub(super) first_sequence: Option<u64>,
    pub(super) ended: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Role {
    /// A replica with rows of its own only.
    Own,
    /// A stand-in: its rows are the journal, it has no outbox.
    StandIn,
    /// A replica provisioned in this pass that follows this stand-in from
    /// its last message of the pass.
    BeginsFollowing(Uuid),
}

/// The pass's replicas, and the cohorts each is in, in the order its
/// messages are numbered.
#[derive(Default)]
pub(super) struct Members {
    pub(super) members: BTreeMap<Uuid, Member>,
    pub(super) cohorts: BTreeMap<i32, Vec<Uuid>>,
    /// The followers in their stand-in's cohort: sent its messages, with no
    /// rows of their own. (A replica in that cohort by the plan it has, as
    /// one that parted may be, records its rows as its own.)
    pub(super) following: BTreeSet<(i32, Uuid)>,
    /// Every follower kept up to date this pass: its own messages record
    /// no rows of journaled tables (one that caught up is sent some:
    /// relay/plan/behind.rs), which it holds as its stand-in's.
    pub(super) followers: BTreeSet<Uuid>,
    /// Every stand-in of the pass, sent anything or not: its partition, and
    /// its last message before the pass.
    pub(super) stand_ins: BTreeMap<Uuid, (Option<String>, u64)>,
    pub(super) journaled: Vec<String>,
}

pub(super) fn members() -> Members {
    let mut read: Vec<(i32, Member, Option<String>)> = Vec::new();
    spi::for_each_chunk(
        MEMBERS,
        10_000,
        |row| {
            let provision: bool = spi::column(row, 3, "sync_pass_cohorts.provision");
            let (previous, previous_nonce) = if provision {
                (0, 0)
            } else {
                (
                    spi::column::<i64>(row, 4, "sync.replicas.last_sequence") as u64,
                    spi::column::<i64>(row, 5, "sync.replicas.last_nonce") as u64,
                )
            };
            let cohort: i32 = spi::column(row, 1, "sync_pass_cohorts.cohort");
            let stand_in: bool = spi::column(row, 6, "whether it is a stand-in");
            let partition = spi::nullable::<String>(row, 7, "its partition");
            let member = Member {
                replica: from_pg(spi::column(row, 2, "sync_pass_cohorts.replica")),
                role: if stand_in { Role::StandIn } else { Role::Own },
                provision,
                scope: spi::nullable::<Vec<String>>(row, 8, "sync.replicas.provision_only"),
                snapshot: provision.then(Uuid::new_v4),
                previous,
                previous_nonce,
                first_sequence: None,
                ended: false,
            };
            (cohort, member, partition)
        },
        |rows| read.extend(rows),
    );
    let mut all = Members::default();
    spi::for_each_chunk(
        STAND_INS_OF_PASS,
        100,
        |row| {
            (
                from_pg(spi::column(row, 1, "sync.stand_ins.id")),
                spi::nullable::<String>(row, 2, "sync.stand_ins.partition"),
                spi::column::<i64>(row, 3, "sync.stand_ins.last_sequence") as u64,
            )
        },
        |rows| {
            for (id, partition, last) in rows {
                all.stand_ins.insert(id, (partition, last));
            }
        },
    );
    // Replicas provisioned beside the stand-in of their partition begin
    // following it.
    let of_partition: BTreeMap<Option<String>, Uuid> = all
        .stand_ins
        .iter()
        .map(|(id, (partition, _))| (partition.clone(), *id))
        .collect();
    // The stand-ins sent something this pass, and their cohorts.
    let by_id: BTreeMap<Uuid, i32> = read
        .iter()
        .filter(|(_, m, _)| m.role == Role::StandIn)
        .map(|(cohort, m, _)| (m.replica, *cohort))
        .collect();
    for (cohort, mut member, partition) in read {
        if member.role == Role::Own && member.provision {
            if let Some(stand_in) = of_partition.get(&partition) {
                member.role = Role::BeginsFollowing(*stand_in);
            }
        }
        all.cohorts.entry(cohort).or_default().push(member.replica);
        all.members.insert(member.replica, member);
    }
    spi::for_each_chunk(
        FOLLOWERS,
        10_000,
        |row| {
            (
                from_pg(spi::column(row, 1, "sync.followers.replica")),
                from_pg(spi::column(row, 2, "sync.followers.stand_in")),
                spi::column::<i64>(row, 3, "sync.replicas.last_sequence") as u64,
                spi::column::<i64>(row, 4, "sync.replicas.last_nonce") as u64,
            )
        },
        |rows| {
            for (replica, stand_in, previous, previous_nonce) in rows {
                all.followers.insert(replica);
                // A stand-in with nothing to send this pass has no cohort.
                let Some(cohort) = by_id.get(&stand_in) else {
                    continue;
                };
                all.cohorts.entry(*cohort).or_default().push(replica);
                all.following.insert((*cohort, replica));
                all.members.entry(replica).or_insert(Member {
                    replica,
                    role: Role::Own,
                    provision: false,
                    scope: None,
                    snapshot: None,
                    previous,
                    previous_nonce,
                    first_sequence: None,
                    ended: false,
                });
            }
        },
    );
    all
}

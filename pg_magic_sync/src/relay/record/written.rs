//! The statements that record what a pass wrote: the outbox, the rows each
//! message carries as held or leaving, the chains, the stand-ins and their
//! followers.

use std::collections::BTreeMap;

use uuid::Uuid;

use super::members::{Member, Role};
use super::packing::Carried;
use crate::epochs::Epoch;
use crate::message::envelope::{Head, Kind};
use crate::spi::{self, to_pg};
use crate::statements::relay::record::{
    ADVANCE_CHAINS, ADVANCE_STAND_INS, BEGIN_FOLLOWING, CARRIED, FOLLOWER_MESSAGES, WRITE_OUTBOX,
};

/// Messages for the outbox, written in one statement.
#[derive(Default)]
pub(super) struct Outbox {
    pub(super) replica: Vec<pgrx::Uuid>,
    pub(super) position: Vec<i64>,
    pub(super) id: Vec<String>,
    pub(super) kind: Vec<String>,
    pub(super) head: Vec<Vec<u8>>,
    pub(super) body: Vec<i64>,
}

impl Outbox {
    pub(super) fn push(&mut self, replica: Uuid, kind: Kind, head: &Head, body: i64) {
        self.replica.push(to_pg(replica));
        self.position.push(head.sequence as i64);
        self.id.push(head.transport_id());
        self.kind.push(kind.name().to_owned());
        self.head.push(head.encode());
        self.body.push(body);
    }

    pub(super) fn write(self) {
        if self.replica.is_empty() {
            return;
        }
        spi::run_with(
            WRITE_OUTBOX,
            &[
                self.replica.into(),
                self.position.into(),
                self.id.into(),
                self.kind.into(),
                self.head.into(),
                self.body.into(),
            ],
        );
    }
}

/// The rows some bodies carry, and the messages that carry each body:
/// recorded as held, or leaving, in two statements.
#[derive(Default)]
pub(super) struct CarriedBy {
    pub(super) m_body: Vec<i32>,
    pub(super) m_replica: Vec<pgrx::Uuid>,
    pub(super) m_sequence: Vec<i64>,
    /// Whether the replica is being provisioned: it holds nothing yet.
    pub(super) m_fresh: Vec<bool>,
    /// Whether it begins following its stand-in: it records no rows of
    /// journaled tables.
    pub(super) m_follows: Vec<bool>,
    pub(super) r_body: Vec<i32>,
    pub(super) r_table: Vec<String>,
    pub(super) r_key: Vec<String>,
    pub(super) r_note: Vec<i64>,
    pub(super) r_op: Vec<String>,
}

impl CarriedBy {
    pub(super) fn message(
        &mut self,
        body: i32,
        replica: Uuid,
        sequence: u64,
        fresh: bool,
        follows: bool,
    ) {
        self.m_body.push(body);
        self.m_replica.push(to_pg(replica));
        self.m_sequence.push(sequence as i64);
        self.m_fresh.push(fresh);
        self.m_follows.push(follows);
    }

    pub(super) fn row(&mut self, body: i32, row: &Carried) {
        self.r_body.push(body);
        self.r_table.push(row.table.clone());
        self.r_key.push(row.key.clone());
        self.r_note.push(row.note);
        // Keys recorded ('r') are no row sent: nothing is recorded of them.
        self.r_op.push(row.op.code().to_owned());
    }

    pub(super) fn write(self, journaled: &[String]) {
        if self.r_body.is_empty() || self.m_body.is_empty() {
            return;
        }
        // Each statement reads every message and row given: run only those
        // that have something to do (provisioning has only fresh upserts).
        let fresh = self.m_fresh.iter().any(|f| *f);
        let known = self.m_fresh.iter().any(|f| !*f);
        let upserts = self.r_op.iter().any(|op| op == "u");
        let deletes = self.r_op.iter().any(|op| op == "d");
        let args = [
            self.m_body.into(),
            self.m_replica.into(),
            self.m_sequence.into(),
            self.r_body.into(),
            self.r_table.into(),
            self.r_key.into(),
            self.r_note.into(),
            self.r_op.into(),
            self.m_fresh.into(),
            self.m_follows.into(),
            journaled.to_vec().into(),
        ];
        // A replica being provisioned holds nothing yet: nothing to update.
        if upserts && fresh {
            spi::run_with(
                &format!(
                    "INSERT INTO sync.held_recorded (replica, table_name, key, note, sent) \
                     SELECT replica, table_name, key, note, sequence FROM ({CARRIED}) AS c \
                     WHERE op = 'u' AND fresh ORDER BY replica, table_name, key"
                ),
                &args,
            );
        }
        if upserts && known {
            spi::run_with(
                &format!(
                    "INSERT INTO sync.held_recorded (replica, table_name, key, note, sent) \
                     SELECT replica, table_name, key, note, sequence FROM ({CARRIED}) AS c \
                     WHERE op = 'u' AND NOT fresh ORDER BY replica, table_name, key \
                     ON CONFLICT (replica, table_name, key) DO UPDATE \
                     SET note = excluded.note, sent = excluded.sent, leaving = NULL"
                ),
                &args,
            );
        }
        // A replica provisioned again for some tables only is taken back
        // rows of the others (relay/plan/snapshot.rs): fresh, yet held.
        if deletes {
            spi::run_with(
                &format!(
                    "UPDATE sync.held_recorded h SET leaving = c.sequence, note = c.note \
                     FROM ({CARRIED}) AS c \
                     WHERE c.op = 'd' AND h.replica = c.replica \
                       AND h.table_name = c.table_name AND h.key = c.key"
                ),
                &args,
            );
        }
    }
}

pub(super) fn write_chains<'a>(epoch: &Epoch, members: impl Iterator<Item = &'a Member>) {
    let mut id = Vec::new();
    let mut last_sequence = Vec::new();
    let mut last_nonce = Vec::new();
    let mut snapshot_id = Vec::new();
    let mut snapshot_sequence = Vec::new();
    for member in members {
        id.push(to_pg(member.replica));
        last_sequence.push(member.previous as i64);
        last_nonce.push(member.previous_nonce as i64);
        snapshot_id.push(member.snapshot.map(to_pg));
        snapshot_sequence.push(member.snapshot.and(member.first_sequence).map(|s| s as i64));
    }
    if id.is_empty() {
        return;
    }
    spi::run_with(
        ADVANCE_CHAINS,
        &[
            to_pg(epoch.id).into(),
            id.into(),
            last_sequence.into(),
            last_nonce.into(),
            snapshot_id.into(),
            snapshot_sequence.into(),
        ],
    );
}

/// Which of its messages carried each stand-in message, for every follower
/// sent one.
#[derive(Default)]
pub(super) struct FollowerMessages {
    pub(super) replica: Vec<pgrx::Uuid>,
    pub(super) stand_in_sequence: Vec<i64>,
    pub(super) sequence: Vec<i64>,
}

impl FollowerMessages {
    pub(super) fn push(&mut self, replica: Uuid, stand_in_sequence: u64, sequence: u64) {
        self.replica.push(to_pg(replica));
        self.stand_in_sequence.push(stand_in_sequence as i64);
        self.sequence.push(sequence as i64);
    }

    pub(super) fn write(self) {
        if self.replica.is_empty() {
            return;
        }
        spi::run_with(
            FOLLOWER_MESSAGES,
            &[
                self.replica.into(),
                self.stand_in_sequence.into(),
                self.sequence.into(),
            ],
        );
    }
}

pub(super) fn write_stand_ins<'a>(epoch: &Epoch, stand_ins: impl Iterator<Item = &'a Member>) {
    let mut id = Vec::new();
    let mut last_sequence = Vec::new();
    let mut last_nonce = Vec::new();
    for member in stand_ins {
        id.push(to_pg(member.replica));
        last_sequence.push(member.previous as i64);
        last_nonce.push(member.previous_nonce as i64);
    }
    if id.is_empty() {
        return;
    }
    spi::run_with(
        ADVANCE_STAND_INS,
        &[
            to_pg(epoch.id).into(),
            id.into(),
            last_sequence.into(),
            last_nonce.into(),
        ],
    );
}

/// The replicas provisioned beside their stand-in follow it from now.
pub(super) fn begin_following(
    members: &BTreeMap<Uuid, Member>,
    stand_ins: &BTreeMap<Uuid, (Option<String>, u64)>,
) {
    let mut replica = Vec::new();
    let mut stand_in = Vec::new();
    let mut since = Vec::new();
    let mut since_sequence = Vec::new();
    for member in members.values() {
        let Role::BeginsFollowing(followed) = member.role else {
            continue;
        };
        // Its last message after the pass: the pass's, if it was sent any.
        let Some(last) = members
            .get(&followed)
            .map(|stand| stand.previous)
            .or_else(|| stand_ins.get(&followed).map(|(_, last)| *last))
        else {
            continue;
        };
        replica.push(to_pg(member.replica));
        stand_in.push(to_pg(followed));
        since.push(last as i64);
        since_sequence.push(member.previous as i64);
    }
    if replica.is_empty() {
        return;
    }
    spi::run_with(
        BEGIN_FOLLOWING,
        &[
            replica.into(),
            stand_in.into(),
            since.into(),
            since_sequence.into(),
        ],
    );
}

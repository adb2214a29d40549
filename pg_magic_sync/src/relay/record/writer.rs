//! Writing what was packed: bodies stored once, each replica's messages
//! numbered, chained and sealed in front of them, a few bodies at a time.

use std::time::Instant;

use pgrx::prelude::*;

use super::members::{Member, Members, Role};
use super::packing::Carried;
use super::written::{
    begin_following, write_chains, write_stand_ins, CarriedBy, FollowerMessages, Outbox,
};
use super::{Recorded, FLUSH_BYTES, FLUSH_ROWS};
use crate::catalog::Declared;
use crate::epochs::Epoch;
use crate::error::Error;
use crate::message::envelope::{self, Head, Kind};
use crate::relay::steps::Steps;
use crate::seal::{self, Sealed};
use crate::spi::{self};
use crate::statements::relay::record::STORE_BODIES;

/// The EndSnapshot body every snapshot of this pass ends with: every table
/// the server sends, parents first.
pub(super) fn end_of_snapshot(tables: &[Declared]) -> Vec<String> {
    tables.iter().map(|t| t.name.clone()).collect()
}

/// A body waiting to be written, with the cohort that is sent it.
pub(super) struct Pending {
    pub(super) cohort: i32,
    pub(super) kind: Kind,
    pub(super) bytes: Vec<u8>,
    pub(super) rows: Vec<Carried>,
}

/// Writes bodies, the messages that carry them and what they carry, a few
/// bodies at a time.
pub(super) struct Writer<'e> {
    pub(super) epoch: &'e Epoch,
    pub(super) steps: &'e mut Steps,
    pub(super) members: Members,
    /// The tables a snapshot names, in the order they are sent.
    pub(super) snapshot_tables: Vec<String>,
    pub(super) pending: Vec<Pending>,
    pub(super) pending_rows: usize,
    pub(super) pending_bytes: usize,
    pub(super) recorded: Recorded,
}

impl<'e> Writer<'e> {
    pub(super) fn new(
        epoch: &'e Epoch,
        members: Members,
        snapshot_tables: Vec<String>,
        steps: &'e mut Steps,
    ) -> Self {
        Writer {
            epoch,
            steps,
            members,
            snapshot_tables,
            pending: Vec::new(),
            pending_rows: 0,
            pending_bytes: 0,
            recorded: Recorded::default(),
        }
    }

    pub(super) fn body(&mut self, cohort: i32, kind: Kind, bytes: Vec<u8>, rows: Vec<Carried>) {
        self.pending_rows += rows.len();
        self.pending_bytes += bytes.len();
        self.pending.push(Pending {
            cohort,
            kind,
            bytes,
            rows,
        });
    }

    /// The end of a cohort's snapshot, for those of its members being
    /// provisioned.
    pub(super) fn end_cohort(&mut self, cohort: i32) {
        let ids = self
            .members
            .cohorts
            .get(&cohort)
            .cloned()
            .unwrap_or_default();
        // A cohort's members provisioned have one scope (cohorts.sql).
        let scope = ids
            .iter()
            .map(|id| &self.members.members[id])
            .find(|m| m.provision)
            .map(|m| m.scope.clone());
        if let Some(scope) = scope {
            let bytes = self.end_body(scope.as_deref());
            self.body(cohort, Kind::End, bytes, Vec::new());
        }
        for id in &ids {
            if let Some(member) = self.members.members.get_mut(id) {
                member.ended = true;
            }
        }
    }

    /// An EndSnapshot naming every table, or those of its scope: the
    /// replica sweeps only the tables it names (protocol 4.2).
    fn end_body(&self, scope: Option<&[String]>) -> Vec<u8> {
        let named = self
            .snapshot_tables
            .iter()
            .filter(|t| scope.is_none_or(|s| s.contains(t)))
            .cloned()
            .collect();
        envelope::end_body(named)
    }

    pub(super) fn flush_if_full(&mut self) {
        if self.pending_rows >= FLUSH_ROWS || self.pending_bytes >= FLUSH_BYTES {
            self.flush();
        }
    }

    /// Stores the waiting bodies, and writes every member's message for
    /// each, and what each carries.
    pub(super) fn flush(&mut self) {
        let pending = std::mem::take(&mut self.pending);
        self.pending_rows = 0;
        self.pending_bytes = 0;
        if pending.is_empty() {
            return;
        }
        spi::in_scratch(|| self.write(pending));
    }

    pub(super) fn write(&mut self, pending: Vec<Pending>) {
        let started = Instant::now();
        // A body only stand-ins are sent goes to no outbox: not stored.
        let sent: Vec<bool> = pending
            .iter()
            .map(|p| self.members_sent(p).any(|m| m.role != Role::StandIn))
            .collect();
        let ids = store_bodies(&pending, &sent);
        self.steps.add("record.bodies", started.elapsed());
        let count: usize = pending.iter().map(|p| self.members_sent(p).count()).sum();
        let mut numbers = draw_numbers(count).into_iter();
        let mut outbox = Outbox::default();
        let mut carried = CarriedBy::default();
        let mut followed = FollowerMessages::default();
        for (index, (body, id)) in pending.iter().zip(ids).enumerate() {
            let epoch = self.epoch;
            let ids = self
                .members
                .cohorts
                .get(&body.cohort)
                .cloned()
                .unwrap_or_default();
            // The stand-in's number for this body, which its followers'
            // messages carry (it comes first in its cohort).
            let mut stand_in_sequence = None;
            for replica in ids {
                let Some(member) = self.members.members.get_mut(&replica) else {
                    continue;
                };
                if body.kind == Kind::End && !member.provision {
                    continue;
                }
                let sequence = numbers.next().expect("a number for every message") as u64;
                let head = next_head(epoch, member, sequence);
                let down = body.kind == Kind::Down;
                let follows = self.members.following.contains(&(body.cohort, replica));
                match (member.role, stand_in_sequence) {
                    (Role::StandIn, _) => {
                        stand_in_sequence = Some(sequence);
                        if down {
                            carried.message(
                                index as i32,
                                replica,
                                sequence,
                                member.provision,
                                false,
                            );
                        }
                        continue;
                    }
                    (_, Some(carrying)) if follows => {
                        followed.push(replica, carrying, sequence);
                    }
                    (role, _) if down => {
                        let follows = matches!(role, Role::BeginsFollowing(_))
                            || self.members.followers.contains(&replica);
                        carried.message(index as i32, replica, sequence, member.provision, follows);
                    }
                    _ => {}
                }
                outbox.push(replica, body.kind, &head, id);
            }
            self.recorded.bodies += i64::from(sent[index]);
            for row in &body.rows {
                carried.row(index as i32, row);
            }
        }
        self.recorded.messages += outbox.replica.len() as i64;
        let started = Instant::now();
        outbox.write();
        self.steps.add("record.outbox", started.elapsed());
        let started = Instant::now();
        carried.write(&self.members.journaled);
        followed.write();
        self.steps.add("record.held", started.elapsed());
    }

    /// The members a body is sent to.
    pub(super) fn members_sent<'a>(
        &'a self,
        body: &'a Pending,
    ) -> impl Iterator<Item = &'a Member> + 'a {
        self.members
            .cohorts
            .get(&body.cohort)
            .into_iter()
            .flatten()
            .filter_map(|id| self.members.members.get(id))
            .filter(move |m| body.kind != Kind::End || m.provision)
    }

    /// Writes what waits, ends the snapshot of every member whose cohort had
    /// nothing to send, and moves every member's chain forward.
    pub(super) fn finish(mut self) -> Recorded {
        let unended: Vec<i32> = self
            .members
            .cohorts
            .iter()
            .filter(|(_, ids)| ids.iter().any(|id| !self.members.members[id].ended))
            .map(|(cohort, _)| *cohort)
            .collect();
        for cohort in unended {
            self.end_cohort(cohort);
        }
        self.flush();
        let members = &self.members.members;
        write_chains(
            self.epoch,
            members.values().filter(|m| m.role != Role::StandIn),
        );
        write_stand_ins(
            self.epoch,
            members.values().filter(|m| m.role == Role::StandIn),
        );
        begin_following(members, &self.members.stand_ins);
        self.recorded.provisioned = members
            .values()
            .filter(|m| m.provision && m.role != Role::StandIn)
            .count() as i64;
        self.recorded
    }
}

/// The next message's head for a member: numbered, chained to its previous
/// message, with a nonce of its own, sealed.
pub(super) fn next_head(epoch: &Epoch, member: &mut Member, sequence: u64) -> Head {
    let nonce = seal::draw_nonce();
    let mac = seal::seal(
        &epoch.secret,
        &Sealed {
            replica: member.replica,
            epoch: epoch.id,
            sequence,
            nonce,
        },
    );
    let head = Head {
        sequence,
        nonce,
        previous: member.previous,
        previous_nonce: member.previous_nonce,
        epoch: epoch.id,
        snapshot_id: member.snapshot,
        mac: mac.to_vec(),
    };
    member.first_sequence.get_or_insert(sequence);
    member.previous = sequence;
    member.previous_nonce = nonce;
    head
}

/// Stores the bodies `sent` says go to an outbox; answers each body's id (0
/// for one not stored).
pub(super) fn store_bodies(pending: &[Pending], sent: &[bool]) -> Vec<i64> {
    let bytes: Vec<Vec<u8>> = pending
        .iter()
        .zip(sent)
        .filter(|(_, sent)| **sent)
        .map(|(p, _)| p.bytes.clone())
        .collect();
    let mut stored_ids = Vec::with_capacity(bytes.len());
    if !bytes.is_empty() {
        Spi::connect_mut(|client| {
            let stored = client
                .update(STORE_BODIES, None, &[bytes.into()])
                .unwrap_or_else(|e| Error::spi(STORE_BODIES, e).raise());
            stored_ids.extend(stored.map(|row| spi::column::<i64>(&row, 1, "sync.bodies.id")));
        });
    }
    let mut stored = stored_ids.into_iter();
    sent.iter()
        .map(|sent| match sent {
            true => stored.next().expect("an id for every body stored"),
            false => 0,
        })
        .collect()
}

/// Message numbers drawn from the sequence, in the order they are given.
pub(super) fn draw_numbers(count: usize) -> Vec<i64> {
    let mut numbers = Vec::with_capacity(count);
    spi::for_each_chunk_with(
        "SELECT nextval('sync.message_numbers') FROM generate_series(1, $1)",
        &[(count as i64).into()],
        10_000,
        |row| spi::column::<i64>(row, 1, "a message number"),
        |chunk| numbers.extend(chunk),
    );
    numbers.sort_unstable();
    numbers
}

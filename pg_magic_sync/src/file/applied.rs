//! What a replica says it applied (protocol A.2, 5.2): the (epoch,
//! sequence, nonce, mac) of the last message it applied, as that message
//! carried them, and its gap.
//!
//! The seal comes first: one the server did not make (a replica that lies,
//! or a bug) is ignored and resets nothing. A sealed report is judged
//! against what the server recorded sending the replica:
//! - past the last it recorded sending it (or, having recorded nothing
//!   since it provisioned it, past every number drawn), or at the sequence
//!   of the last it sent or heard applied with another nonce: the server's
//!   database went back (file/went_back.rs), unless the chain is of an
//!   epoch the server has left since (it took a new one on that news);
//! - older than the last it heard applied: the replica was restored from an
//!   older copy, and is provisioned again (file/provision_again.rs), unless a snapshot
//!   written for it since is on its way;
//! - otherwise every row of every message up to it counts as held.
//!
//! A report of another epoch is ignored, unless the server last heard the
//! replica apply a message of the current epoch: a replica only goes
//! forward, so it follows an epoch this database never had (restored from
//! before that epoch began), or went back to an older one; it is
//! provisioned again.

use magic_sync_proto::wire::Up;
use uuid::Uuid;

use crate::epochs;
use crate::file::provision_again;
use crate::file::standing::{self, Standing};
use crate::file::went_back;
use crate::seal::{self, Sealed};
use crate::spi::{self, to_pg};
use crate::statements::file::applied::FOLLOWER_APPLIED;

/// What the server makes of what a replica says it applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Judged {
    /// Sequence 0: it says nothing of where it stands.
    NothingSaid,
    NotAnEpoch,
    /// A seal the server never made: ignored.
    SealNeverMade,
    /// Another epoch than the chain's: ignored.
    AnotherEpoch,
    /// An epoch this database never had, or one older than the current, from
    /// a replica last heard applying the current one: it went back.
    EpochGoneBack,
    /// Sealed, and past anything recorded: the server's database went back.
    ServerWentBack,
    /// Older than the last it said it applied: the replica went back.
    ReplicaWentBack,
    /// What it said before.
    Already,
    /// Counted: every row of every message up to it is held.
    Counted,
}

impl Judged {
    pub fn verdict(self) -> &'static str {
        match self {
            Judged::NothingSaid => "nothing said",
            Judged::NotAnEpoch => "not an epoch",
            Judged::SealNeverMade => "a seal the server never made",
            Judged::AnotherEpoch => "another epoch",
            Judged::EpochGoneBack => "an epoch the server does not follow",
            Judged::ServerWentBack => "past anything sent: the server's database went back",
            Judged::ReplicaWentBack => "older than the last applied",
            Judged::Already => "already counted",
            Judged::Counted => "counted",
        }
    }
}

/// What the replica says it applied, as the Up carries it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    pub epoch: String,
    pub sequence: u64,
    pub nonce: u64,
    pub mac: Vec<u8>,
}

impl Report {
    pub fn of(up: &Up) -> Report {
        Report {
            epoch: up.epoch.clone(),
            sequence: up.sequence,
            nonce: up.nonce,
            mac: up.mac.clone(),
        }
    }

    /// Whether the seal is the server's: None when the server has no such
    /// epoch (it cannot tell).
    pub fn sealed(&self, replica: Uuid) -> Option<bool> {
        let epoch = Uuid::try_parse(&self.epoch).ok()?;
        let secret = epochs::secret_of(epoch)?;
        Some(seal::is_sealed(
            &secret,
            &Sealed {
                replica,
                epoch,
                sequence: self.sequence,
                nonce: self.nonce,
            },
            &self.mac,
        ))
    }
}

/// Judges a report against the replica's standing. `current` is the
/// current epoch, `sealed` whether the seal checks (None: an epoch this
/// database never had), `drawn` the largest message number drawn.
pub fn judge(
    r: &Report,
    s: &Standing,
    current: Option<Uuid>,
    sealed: Option<bool>,
    drawn: i64,
) -> Judged {
    if r.sequence == 0 {
        return Judged::NothingSaid;
    }
    let Ok(epoch) = Uuid::try_parse(&r.epoch) else {
        return Judged::NotAnEpoch;
    };
    let heard_current = current.is_some() && s.applied_epoch == current;
    match sealed {
        None if heard_current => return Judged::EpochGoneBack,
        None => return Judged::AnotherEpoch,
        Some(false) => return Judged::SealNeverMade,
        Some(true) => {}
    }
    let sequence = i64::try_from(r.sequence).unwrap_or(i64::MAX);
    let nonce = i64::try_from(r.nonce).unwrap_or(i64::MAX);
    if s.epoch != Some(epoch) {
        if heard_current && Some(epoch) != current {
            return Judged::EpochGoneBack;
        }
        if s.epoch.is_none() && Some(epoch) == current && sequence > drawn {
            return Judged::ServerWentBack;
        }
        return Judged::AnotherEpoch;
    }
    let past = if s.last_sequence == 0 {
        sequence > drawn
    } else {
        sequence > s.last_sequence
    };
    let heard_in_chain = s.applied_epoch == Some(epoch);
    if past
        || (sequence == s.last_sequence && nonce != s.last_nonce)
        || (heard_in_chain && sequence == s.applied_sequence && nonce != s.applied_nonce)
    {
        // A chain of an epoch the server has left since: the new epoch was
        // taken (on this very news, perhaps) and provisions every replica.
        // Taking another for each Up saying it again would drop what is on
        // its way and start over, again and again, until the relay runs.
        if current.is_some() && current != Some(epoch) {
            return Judged::AnotherEpoch;
        }
        return Judged::ServerWentBack;
    }
    if heard_in_chain && sequence < s.applied_sequence {
        return Judged::ReplicaWentBack;
    }
    if heard_in_chain && sequence == s.applied_sequence {
        return Judged::Already;
    }
    Judged::Counted
}

/// Counts what the replica applied: the rows of every message up to it are
/// held; what it was told to let go of is gone from its record; a refusal
/// a later message it applied carried is taken.
fn count(replica: Uuid, epoch: Uuid, sequence: i64, nonce: i64) {
    let id = to_pg(replica);
    spi::run_with(
        "UPDATE sync.replicas SET applied_epoch = $2, applied_sequence = $3, applied_nonce = $4, \
         applied_at = now(), heard_at = now() WHERE id = $1",
        &[
            id.into(),
            to_pg(epoch).into(),
            sequence.into(),
            nonce.into(),
        ],
    );
    // Most reports find neither: a write of sync.held that changes nothing
    // still runs its counting triggers, several times the cost of looking.
    let (letting_go, refusals_taken, owed) = spi::select(
        HELD_TO_CHANGE,
        Some(1),
        &[id.into(), sequence.into()],
        |mut rows| {
            rows.next().map_or((false, false, false), |row| {
                (
                    spi::column::<bool>(&row, 1, "rows let go"),
                    spi::column::<bool>(&row, 2, "refusals taken"),
                    spi::column::<bool>(&row, 3, "passed over"),
                )
            })
        },
    );
    if letting_go {
        spi::run_with(LET_GO, &[id.into(), sequence.into()]);
    }
    if refusals_taken {
        spi::run_with(TAKE_REFUSALS, &[id.into(), sequence.into()]);
    }
    // A follower's stand-in messages up to it are applied.
    spi::run_with(FOLLOWER_APPLIED, &[id.into(), sequence.into()]);
    // One passed over while it was far behind (it owes rows, or was not
    // sent its stand-in's messages) wakes the relay worker as this
    // transaction commits: the pass that sends it what it missed may be
    // due (relay/plan/behind.rs).
    if owed {
        crate::wake::noted();
    }
}

/// The rows a replica let go of by applying message `$2`.
macro_rules! let_go {
    () => {
        "replica = $1 AND leaving IS NOT NULL AND leaving <= $2"
    };
}
/// The rows it refused that a message up to `$2` carried again.
macro_rules! refusals_taken {
    () => {
        "replica = $1 AND refused IS NOT NULL AND sent > refused_by AND sent <= $2"
    };
}
const HELD_TO_CHANGE: &str = concat!(
    "SELECT EXISTS (SELECT 1 FROM sync.held_recorded WHERE ",
    let_go!(),
    "), EXISTS (SELECT 1 FROM sync.held_recorded WHERE ",
    refusals_taken!(),
    "), EXISTS (SELECT 1 FROM sync.owed WHERE replica = $1) ",
    "OR EXISTS (SELECT 1 FROM sync.followers WHERE replica = $1 AND behind_since IS NOT NULL)"
);
const LET_GO: &str = concat!("DELETE FROM sync.held_recorded WHERE ", let_go!());
const TAKE_REFUSALS: &str = concat!(
    "UPDATE sync.held_recorded SET refused = NULL, refused_by = NULL, refused_at = NULL, ",
    "held_back = false, retry_at = NULL WHERE ",
    refusals_taken!()
);

/// A replica says it applied nothing. One the server heard apply messages
/// of its chain, with no snapshot on its way to it since, was set up again
/// under its id (a fresh file, a device re-imaged): it holds nothing the
/// server records, and is provisioned again (paced, as what a replica says
/// of itself is). Answers the verdict.
pub fn take_nothing_applied(replica: Uuid, s: &Standing) -> String {
    heard(replica);
    match s.applied_in_chain() {
        Some(heard) if heard > 0 && !s.snapshot_on_its_way_after(heard) => format!(
            "nothing applied, after message {heard}: {}",
            provision_again::provision_again(replica, s)
        ),
        _ => "nothing applied yet".to_owned(),
    }
}

/// The replica said where it stands, and nothing moved: it was heard
/// (alive; while messages wait for it, a stall: sql/stalls.sql).
fn heard(replica: Uuid) {
    spi::run_with(
        "UPDATE sync.replicas SET heard_at = now() WHERE id = $1",
        &[to_pg(replica).into()],
    );
}

/// Judges what the replica says it applied, and acts on it. Answers the
/// judgement and the verdict.
pub fn take(replica: Uuid, s: &Standing, up: &Up) -> (Judged, String) {
    let report = Report::of(up);
    let current = epochs::current_id();
    let sealed = if report.sequence == 0 {
        None
    } else {
        report.sealed(replica)
    };
    let judged = judge(&report, s, current, sealed, standing::numbers_drawn());
    let verdict = judged.verdict().to_owned();
    let verdict = match judged {
        Judged::Counted => {
            let epoch = Uuid::try_parse(&report.epoch).expect("a judged epoch");
            count(replica, epoch, report.sequence as i64, report.nonce as i64);
            verdict
        }
        Judged::Already => {
            heard(replica);
            verdict
        }
        Judged::ReplicaWentBack | Judged::EpochGoneBack => {
            if s.snapshot_on_its_way_after(s.applied_sequence) {
                format!("{verdict}: a snapshot is on its way")
            } else {
                format!(
                    "{verdict}: {}",
                    provision_again::provision_again(replica, s)
                )
            }
        }
        Judged::ServerWentBack => {
            let what = format!(
                "{replica} says it applied message {} of epoch {}, which this database has no record of sending it",
                report.sequence, report.epoch
            );
            match went_back::take_a_new_epoch(replica, current, &what) {
                Some(_) => format!("{verdict}: a new epoch, every replica provisioned again"),
                None => format!("{verdict}: a new epoch was taken already"),
            }
        }
        _ => verdict,
    };
    (judged, verdict)
}

/// A replica with a gap is provisioned again, unless a snapshot that began
/// after the message it could not follow is on its way. A gap past every
/// message sent it is none it could have missed: malformed.
pub fn take_gap(replica: Uuid, s: &Standing, gap: u64) -> String {
    if gap == 0 {
        return "none".to_owned();
    }
    let gap = i64::try_from(gap).unwrap_or(i64::MAX);
    if gap > s.last_sequence {
        return "past anything sent: left out".to_owned();
    }
    spi::run_with(
        "UPDATE sync.replicas SET gap = $2, heard_at = now() WHERE id = $1",
        &[to_pg(replica).into(), gap.into()],
    );
    if s.snapshot_on_its_way_after(gap) {
        return "a snapshot is on its way".to_owned();
    }
    provision_again::provision_again(replica, s).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    const E: u128 = 0xe1;

    fn epoch() -> Uuid {
        Uuid::from_u128(E)
    }

    fn report(sequence: u64, nonce: u64) -> Report {
        Report {
            epoch: epoch().to_string(),
            sequence,
            nonce,
            mac: vec![0; 16],
        }
    }

    /// Sent messages up to 20 (nonce 2020), heard 15 applied (nonce 1515).
    fn standing() -> Standing {
        Standing {
            live: true,
            epoch: Some(epoch()),
            last_sequence: 20,
            last_nonce: 2020,
            applied_epoch: Some(epoch()),
            applied_sequence: 15,
            applied_nonce: 1515,
            ..Standing::default()
        }
    }

    fn judged(r: Report, sealed: Option<bool>) -> Judged {
        judge(&r, &standing(), Some(epoch()), sealed, 100)
    }

    #[test]
    fn a_seal_the_server_never_made_is_ignored() {
        assert_eq!(judged(report(18, 1818), Some(false)), Judged::SealNeverMade);
    }

    #[test]
    fn a_message_up_to_the_last_sent_is_counted() {
        assert_eq!(judged(report(18, 1818), Some(true)), Judged::Counted);
        assert_eq!(judged(report(20, 2020), Some(true)), Judged::Counted);
    }

    #[test]
    fn what_was_applied_said_again_is_already_counted() {
        assert_eq!(judged(report(15, 1515), Some(true)), Judged::Already);
    }

    #[test]
    fn what_was_applied_said_again_lower_is_a_replica_gone_back() {
        assert_eq!(
            judged(report(12, 1212), Some(true)),
            Judged::ReplicaWentBack
        );
    }

    #[test]
    fn past_anything_sent_is_a_server_gone_back() {
        assert_eq!(judged(report(21, 2121), Some(true)), Judged::ServerWentBack);
    }

    #[test]
    fn the_last_sent_or_heard_with_another_nonce_is_a_server_gone_back() {
        assert_eq!(judged(report(20, 9), Some(true)), Judged::ServerWentBack);
        assert_eq!(judged(report(15, 9), Some(true)), Judged::ServerWentBack);
    }

    #[test]
    fn past_a_chain_of_an_epoch_the_server_left_since_is_another_epoch() {
        // The first Up that said it took a new epoch; the relay has not
        // written the replica a message of it yet, and the same Up comes
        // again: no second new epoch.
        let left = Some(Uuid::from_u128(0xe2));
        assert_eq!(
            judge(&report(21, 2121), &standing(), left, Some(true), 100),
            Judged::AnotherEpoch
        );
        assert_eq!(
            judge(&report(20, 9), &standing(), left, Some(true), 100),
            Judged::AnotherEpoch
        );
    }

    #[test]
    fn having_recorded_nothing_past_every_number_drawn_is_a_server_gone_back() {
        let fresh = Standing {
            epoch: None,
            last_sequence: 0,
            applied_epoch: None,
            applied_sequence: 0,
            ..standing()
        };
        assert_eq!(
            judge(&report(101, 1), &fresh, Some(epoch()), Some(true), 100),
            Judged::ServerWentBack
        );
        assert_eq!(
            judge(&report(99, 1), &fresh, Some(epoch()), Some(true), 100),
            Judged::AnotherEpoch
        );
    }

    #[test]
    fn another_epoch_is_ignored_unless_the_replica_was_heard_in_the_current_one() {
        let unknown = Report {
            epoch: Uuid::from_u128(0xe9).to_string(),
            ..report(5, 5)
        };
        assert_eq!(judged(unknown.clone(), None), Judged::EpochGoneBack);
        let heard_elsewhere = Standing {
            applied_epoch: Some(Uuid::from_u128(0xe0)),
            ..standing()
        };
        assert_eq!(
            judge(&unknown, &heard_elsewhere, Some(epoch()), None, 100),
            Judged::AnotherEpoch
        );
        let older_of_ours = Report {
            epoch: Uuid::from_u128(0xe0).to_string(),
            ..report(5, 5)
        };
        assert_eq!(judged(older_of_ours, Some(true)), Judged::EpochGoneBack);
    }

    #[test]
    fn nothing_said_and_no_epoch_change_nothing() {
        assert_eq!(judged(report(0, 0), None), Judged::NothingSaid);
        let bad = Report {
            epoch: "nope".into(),
            ..report(5, 5)
        };
        assert_eq!(judged(bad, None), Judged::NotAnEpoch);
    }
}

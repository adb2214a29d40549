//! Where a message stands against the last one applied (protocol §4.1,
//! §4.2): a pure decision over the replica's state and the message's head.

use uuid::Uuid;

use crate::engine::state::State;
use crate::message::check::{Head, Malformed};

/// What to do with a chained message.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// The same epoch, at or below the last applied: a redelivery, or a
    /// server numbering again. Nothing changes; say the last applied again.
    Already,
    /// It follows nothing: it begins a snapshot, whatever came before.
    Begins,
    /// It follows the last applied: apply it.
    Follows,
    /// The replica missed a message, or has a gap already: apply nothing.
    Gap,
    /// It follows the last applied but names another snapshot than the one
    /// in progress: no server sends that.
    Malformed(Malformed),
}

/// The decision, in the order the protocol gives it.
pub(crate) fn step(state: &State, head: &Head<'_>) -> Step {
    let same_epoch = same_uuid(&state.epoch, head.epoch);
    if same_epoch && state.sequence > 0 && head.sequence <= state.sequence {
        return Step::Already;
    }
    if head.begins_a_snapshot() {
        return Step::Begins;
    }
    let follows = same_epoch
        && state.sequence > 0
        && head.previous == state.sequence
        && head.previous_nonce == state.nonce;
    // Once it has a gap, only a snapshot's beginning is taken, even a
    // message that follows the last applied.
    if !follows || state.has_gap() {
        return Step::Gap;
    }
    if !names_the_snapshot_in_progress(state, head) {
        return Step::Malformed(Malformed::new(
            "names_another_snapshot",
            format!(
                "sequence {} names snapshot {:?} while {}",
                head.sequence,
                head.snapshot_id,
                if state.in_snapshot() {
                    format!("snapshot {:?} is in progress", state.snapshot)
                } else {
                    "no snapshot is in progress".to_owned()
                }
            ),
        ));
    }
    Step::Follows
}

fn names_the_snapshot_in_progress(state: &State, head: &Head<'_>) -> bool {
    match (state.in_snapshot(), head.snapshot_id.is_empty()) {
        (false, true) => true,
        (true, false) => same_uuid(&state.snapshot, head.snapshot_id),
        _ => false,
    }
}

/// Two spellings of one UUID are the same; text that is no UUID is never
/// the same as anything.
fn same_uuid(a: &str, b: &str) -> bool {
    match (Uuid::try_parse(a), Uuid::try_parse(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const E: &str = "0196a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b";
    const S: &str = "0196a1b2-c3d4-7e5f-8a9b-000000000001";

    fn at(sequence: u64, nonce: u64) -> State {
        State {
            epoch: E.into(),
            sequence,
            nonce,
            ..State::default()
        }
    }

    fn head(
        sequence: u64,
        previous: u64,
        previous_nonce: u64,
        snapshot: &'static str,
    ) -> Head<'static> {
        Head {
            sequence,
            nonce: 100 + sequence,
            previous,
            previous_nonce,
            epoch: E,
            snapshot_id: snapshot,
            mac: &[0; 16],
        }
    }

    #[test]
    fn at_or_below_the_last_applied_is_already() {
        assert_eq!(step(&at(5, 105), &head(5, 4, 104, "")), Step::Already);
        assert_eq!(step(&at(5, 105), &head(3, 0, 0, S)), Step::Already);
    }

    #[test]
    fn the_epoch_is_compared_as_a_uuid() {
        let mut state = at(5, 105);
        state.epoch = E.to_uppercase();
        assert_eq!(step(&state, &head(5, 4, 104, "")), Step::Already);
    }

    #[test]
    fn following_nothing_begins_a_snapshot_even_in_a_gap() {
        let mut state = at(5, 105);
        state.gap = 9;
        assert_eq!(step(&state, &head(10, 0, 0, S)), Step::Begins);
    }

    #[test]
    fn a_message_that_follows_is_applied() {
        assert_eq!(step(&at(5, 105), &head(6, 5, 105, "")), Step::Follows);
    }

    #[test]
    fn another_nonce_is_a_gap() {
        assert_eq!(step(&at(5, 105), &head(6, 5, 999, "")), Step::Gap);
    }

    #[test]
    fn another_epoch_is_a_gap() {
        let mut state = at(5, 105);
        state.epoch = S.into();
        assert_eq!(step(&state, &head(6, 5, 105, "")), Step::Gap);
    }

    #[test]
    fn a_gap_takes_nothing_but_a_snapshot() {
        let mut state = at(5, 105);
        state.gap = 7;
        assert_eq!(step(&state, &head(6, 5, 105, "")), Step::Gap);
    }

    #[test]
    fn nothing_applied_follows_nothing() {
        assert_eq!(step(&State::default(), &head(6, 5, 105, "")), Step::Gap);
    }

    #[test]
    fn a_snapshot_named_out_of_turn_is_malformed() {
        let named_while_none = step(&at(5, 105), &head(6, 5, 105, S));
        assert!(
            matches!(named_while_none, Step::Malformed(m) if m.case == "names_another_snapshot")
        );
        let mut state = at(5, 105);
        state.snapshot = S.into();
        let none_while_one = step(&state, &head(6, 5, 105, ""));
        assert!(matches!(none_while_one, Step::Malformed(m) if m.case == "names_another_snapshot"));
        assert_eq!(step(&state, &head(6, 5, 105, S)), Step::Follows);
    }
}

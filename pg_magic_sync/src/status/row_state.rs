//! A row's state on one replica, as `sync_internal.row_state`
//! (sql/status_rows.sql) names it, for a read that counts states in Rust
//! (progress.rs). The reads of one row name them in SQL; a test holds the
//! two to the same answer for every combination of their inputs
//! (src/tests/status_states.rs).

/// The states a row can be in on a replica (docs/src/status-rows.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowState {
    SetAside,
    Missing,
    OnItsWay,
    Outdated,
    Holds,
    Leaving,
}

impl RowState {
    /// The state's name in the reads' JSON (the test against SQL's).
    #[cfg(any(test, feature = "pg_test"))]
    pub fn name(self) -> &'static str {
        match self {
            RowState::SetAside => "set_aside",
            RowState::Missing => "missing",
            RowState::OnItsWay => "on_its_way",
            RowState::Outdated => "outdated",
            RowState::Holds => "holds",
            RowState::Leaving => "leaving",
        }
    }
}

/// What sync.held says of a row a replica holds, with the confirmations
/// already worked out (`sync_internal.confirmed`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Held {
    /// The newest note of the row when the version held was sent.
    pub note: Option<i64>,
    /// The replica refused the message that carried it.
    pub refused: bool,
    /// A message takes it back.
    pub leaving: bool,
    /// The replica confirmed the message that carried it.
    pub sent_confirmed: bool,
    /// The replica confirmed the message that takes it back.
    pub leaving_confirmed: bool,
}

/// The state of a row the replica should hold (`should`: reached and not
/// blocked) or not, `blocked` when its rules reach it and it cannot go,
/// `held` what the replica holds of it, `newest` its newest pending note.
/// None when the row has nothing to do with the replica.
pub fn row_state(
    should: bool,
    blocked: bool,
    held: Option<&Held>,
    newest: Option<i64>,
) -> Option<RowState> {
    if blocked {
        return Some(RowState::SetAside);
    }
    let Some(held) = held else {
        return should.then_some(RowState::Missing);
    };
    let taken_back = held.leaving && held.leaving_confirmed;
    if !should {
        return (!taken_back).then_some(RowState::Leaving);
    }
    Some(if held.leaving {
        if taken_back {
            RowState::Missing
        } else {
            RowState::Leaving
        }
    } else if held.refused {
        RowState::SetAside
    } else if !held.sent_confirmed {
        RowState::OnItsWay
    } else if matches!((newest, held.note), (Some(newest), Some(note)) if newest > note) {
        RowState::Outdated
    } else {
        RowState::Holds
    })
}

//! A replica far behind (docs/src/decisions.md, "A register far behind is
//! planned nothing"): one with `magic_sync.messages_ahead` messages or more
//! waiting in its outbox is planned nothing, and sent nothing; the rows
//! whose reasons to be held changed meanwhile are recorded as owed it
//! (`sync.owed`), each once, with its newest note, and a follower of a
//! stand-in is sent none of the stand-in's messages (`sync.followers.
//! behind_since` is the last it was sent). The first pass after it has
//! taken its messages down below that bound plans what it is owed for it
//! with whatever else changed, and a follower's own plan carries what the
//! stand-in's messages it missed changed, as the stand-in holds it then:
//! one message (or as few as the limits allow) where each pass would have
//! sent one, a row changed ten times sent once.
//!
//! `pass_over_and_release` runs once the pass knows what its notes touched
//! and which replicas it plans for, before any is planned;
//! `catch_up_followers` once every replica and stand-in is planned;
//! `after_record` once the pass recorded its messages.

use crate::relay::journal::Journaled;
use crate::relay::scratch;
use crate::spi;
use crate::statements::relay::plan::behind::{
    ANY_CATCHING_UP, BEHIND, CATCH_UP_JOURNAL, CAUGHT_UP, FORGET_OWED_OF_PROVISIONED,
    FORGET_RELEASED, LEAVE_OUT_BEHIND, MAP_CAUGHT_UP, MAP_SKIPPED, MARK_BEHIND, OWE_OLD_POINTERS,
    OWE_TOUCHED, PASSED_OVER_BEFORE, RELEASED, TOUCH_OWED, VERSIONS_OWED,
};

/// What a pass found of the replicas far behind, for its later steps.
#[derive(Clone, Copy, Default)]
pub struct Behind {
    /// Some replica was passed over this pass.
    passed_over: bool,
    /// Some follower was passed over before this pass (it may catch up).
    followers_behind: bool,
    /// Some follower kept up to date this pass catches up.
    catching_up: bool,
}

/// Passes over the replicas `ahead` messages or more behind, the oldest
/// written `after_ms` ago or more (none when `ahead` is 0, or when
/// `may_pass_over` is false: a declaration change's take-backs and rows
/// sent again are planned for every replica), and touches for the others
/// what they are owed, but of the tables `stopped`. Most passes find
/// nothing owed and no one behind: two statements.
pub fn pass_over_and_release(
    journaled: &Journaled,
    (ahead, after_ms): (i32, i32),
    may_pass_over: bool,
    stopped: &[String],
) -> Behind {
    let (owed, followers_behind) = spi::select(PASSED_OVER_BEFORE, Some(1), &[], |mut rows| {
        rows.next().map_or((false, false), |row| {
            (
                spi::column::<bool>(&row, 1, "rows owed"),
                spi::column::<bool>(&row, 2, "followers behind"),
            )
        })
    });
    if owed {
        spi::run(FORGET_OWED_OF_PROVISIONED);
    }
    let passed_over = ahead > 0
        && may_pass_over
        && spi::run_counting(BEHIND, &[ahead.into(), after_ms.into()]) > 0;
    if passed_over {
        let journaled = journaled.names();
        spi::run_with(OWE_TOUCHED, &[journaled.clone().into()]);
        spi::run_with(OWE_OLD_POINTERS, &[journaled.into()]);
        spi::run(MARK_BEHIND);
        spi::run(LEAVE_OUT_BEHIND);
    }
    if owed && spi::run_counting(RELEASED, &[]) > 0 {
        let stopped = || stopped.to_vec().into();
        spi::run_with(TOUCH_OWED, &[stopped()]);
        spi::run_with(VERSIONS_OWED, &[stopped()]);
        spi::run_with(FORGET_RELEASED, &[stopped()]);
        scratch::analyze(&["sync_pass_touched", "sync_pass_changed"]);
    }
    Behind {
        passed_over,
        followers_behind,
        catching_up: false,
    }
}

/// Plans for each follower kept up to date again what the stand-in's
/// messages it was not sent changed. Answers how many rows. Not while a
/// journaled table is stopped (declare/drift.rs): its rows cannot be read,
/// and the follower catches up once it flows again (meanwhile it is sent
/// the stand-in's messages, which the catching up repeats).
pub fn catch_up_followers(behind: &mut Behind, journaled: &Journaled, stopped: &[String]) -> u64 {
    behind.catching_up = behind.followers_behind
        && journaled.any()
        && !stopped.iter().any(|t| journaled.contains(t))
        && spi::one::<bool>(ANY_CATCHING_UP, &[]).unwrap_or(false);
    match behind.catching_up {
        true => spi::run_counting(CATCH_UP_JOURNAL, &[]),
        false => 0,
    }
}

/// Maps the stand-in messages a follower passed over was not sent to its
/// next message, and those a follower that caught up was sent the rows of
/// to its last: it holds their rows once it applied that.
pub fn after_record(behind: Behind, journaled: &Journaled) {
    if behind.passed_over && journaled.any() {
        spi::run(MAP_SKIPPED);
    }
    if behind.catching_up {
        spi::run(MAP_CAUGHT_UP);
        spi::run(CAUGHT_UP);
    }
}

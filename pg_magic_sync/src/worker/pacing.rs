//! How long the worker lets notes gather before its next pass, while they
//! stream in faster than passes clear them.
//!
//! A pass has a fixed cost (its transactions, its scratch tables, a look
//! at every replica: about 4 ms for 10 replicas on a shared 2-core
//! machine) beside its cost per note (15-18 µs). Run back to back, as the
//! commits' wake-ups asked, passes took a few notes each at a trickle: at
//! 1,000 changes a second the relay spent 693 µs of CPU a change, its
//! fixed cost paid again every few changes. So:
//!
//! - A pass during which no note was committed (the worker's latch still
//!   unset when it ends) ends any stream: the next commit's pass runs at
//!   once. A change alone, after quiet, is never delayed.
//! - A pass that planned notes, less than a full batch, during which more
//!   were committed (the latch set while it ran) means notes arrive faster
//!   than passes clear them: the worker waits before the next pass, 1 ms
//!   after the first such pass, twice as long after each next one, up to
//!   `magic_sync.gather` (100 ms by default), so that the pass takes what
//!   came meanwhile in one batch. A burst of a few changes waits a few
//!   milliseconds; a steady stream reaches the bound in eight passes, and
//!   then the relay runs at most one pass per `magic_sync.gather` plus the
//!   pass's own time, whatever the rate: its fixed cost is spread over
//!   every change of that time (100 at 1,000 a second).
//! - A full batch (`magic_sync.notes_per_pass`) runs the next pass at
//!   once, as before: the relay is behind, and waiting would not help. So
//!   does a pass that took longer than the bound itself: it carried
//!   enough notes that its fixed cost is a small share of it, and a wait
//!   would only leave the relay idle while notes pile up.
//!
//! The wait never bounds how fast the relay drains: a pass takes every
//! note that came, so the more that come, the larger the pass, and the
//! relay keeps up while its cost per note times the rate stays under a
//! core. What it bounds is how late a change in a stream is: by the wait
//! and the pass it waits for.

use std::time::Duration;

/// The first wait of a stream.
const FIRST: Duration = Duration::from_millis(1);

/// What a pass did, as pacing sees it.
#[derive(Debug, Clone, Copy)]
pub struct Pass {
    /// Notes it planned, of at most `batch`.
    pub notes: i64,
    pub batch: i64,
    /// Whether notes were committed while it ran.
    pub arrived: bool,
    /// How long it took.
    pub took: Duration,
}

/// What the worker did to pace its passes, shown in `pg_stat_activity`.
#[derive(Debug, Default, Clone)]
pub struct Pacing {
    /// The wait before the next pass: zero while no stream goes on.
    gather: Duration,
    /// Passes run, and of them those that waited for notes to gather.
    passes: u64,
    gathered: u64,
    /// How long those waited, in all.
    gathered_for: Duration,
    /// The wait before the last pass.
    last: Duration,
}

impl Pacing {
    /// After a pass that planned `notes`, of at most `batch`, in `took`:
    /// whether notes were committed while it ran (`arrived`). Answers how
    /// long to wait before the next pass (zero: at once, when woken).
    pub fn after_pass(&mut self, pass: Pass, bound: Duration) -> Duration {
        self.passes += 1;
        if pass.notes >= pass.batch || (pass.took >= bound && pass.arrived) {
            return Duration::ZERO;
        }
        self.gather = if pass.notes > 0 && pass.arrived && !bound.is_zero() {
            (self.gather * 2).clamp(FIRST.min(bound), bound)
        } else {
            Duration::ZERO
        };
        self.gather
    }

    /// A round that ran no pass (no work waited): the stream, if any, ended.
    pub fn no_pass(&mut self) {
        self.gather = Duration::ZERO;
    }

    /// The next pass waited `waited` for notes to gather (zero: none).
    pub fn waited(&mut self, waited: Duration) {
        self.last = waited;
        if !waited.is_zero() {
            self.gathered += 1;
            self.gathered_for += waited;
        }
    }

    /// The worker's `query` in `pg_stat_activity` while it sleeps: what
    /// its pacing did since it started.
    pub fn shown(&self) -> String {
        format!(
            "relay idle: {} passes, {} after gathering notes ({} ms in all), the last after {} ms",
            self.passes,
            self.gathered,
            self.gathered_for.as_millis(),
            self.last.as_millis()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUND: Duration = Duration::from_millis(100);

    /// A pass of `notes` taking 4 ms, notes arriving meanwhile or not.
    fn pass(notes: i64, arrived: bool) -> Pass {
        Pass {
            notes,
            batch: 100_000,
            arrived,
            took: Duration::from_millis(4),
        }
    }

    #[test]
    fn a_stream_waits_longer_each_pass_up_to_the_bound() {
        let mut p = Pacing::default();
        let waits: Vec<u128> = (0..10)
            .map(|_| p.after_pass(pass(5, true), BOUND).as_millis())
            .collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 64, 100, 100, 100]);
    }

    #[test]
    fn a_pass_with_nothing_arriving_ends_the_stream() {
        let mut p = Pacing::default();
        for _ in 0..5 {
            p.after_pass(pass(5, true), BOUND);
        }
        assert_eq!(p.after_pass(pass(5, false), BOUND), Duration::ZERO);
        // The next stream starts small again.
        assert_eq!(p.after_pass(pass(5, true), BOUND), FIRST);
    }

    #[test]
    fn a_change_alone_waits_for_nothing() {
        let mut p = Pacing::default();
        assert_eq!(p.after_pass(pass(1, false), BOUND), Duration::ZERO);
        // A pass that planned nothing starts no stream, whatever woke it.
        assert_eq!(p.after_pass(pass(0, true), BOUND), Duration::ZERO);
    }

    #[test]
    fn a_full_batch_runs_the_next_pass_at_once() {
        let mut p = Pacing::default();
        p.after_pass(pass(5, true), BOUND);
        assert_eq!(p.after_pass(pass(100_000, true), BOUND), Duration::ZERO);
    }

    #[test]
    fn a_pass_longer_than_the_bound_runs_the_next_at_once() {
        let mut p = Pacing::default();
        for _ in 0..3 {
            p.after_pass(pass(5, true), BOUND);
        }
        let long = Pass {
            took: BOUND * 2,
            ..pass(20_000, true)
        };
        assert_eq!(p.after_pass(long, BOUND), Duration::ZERO);
        // The stream goes on: the next small pass waits as it would have.
        assert_eq!(p.after_pass(pass(5, true), BOUND).as_millis(), 8);
    }

    #[test]
    fn a_bound_of_zero_turns_pacing_off() {
        let mut p = Pacing::default();
        assert_eq!(p.after_pass(pass(5, true), Duration::ZERO), Duration::ZERO);
    }

    #[test]
    fn it_shows_what_it_did() {
        let mut p = Pacing::default();
        p.after_pass(pass(5, true), BOUND);
        p.waited(Duration::from_millis(1));
        p.after_pass(pass(5, false), BOUND);
        p.waited(Duration::ZERO);
        assert_eq!(
            p.shown(),
            "relay idle: 2 passes, 1 after gathering notes (1 ms in all), the last after 0 ms"
        );
    }
}

//! The pause after a failure: short at first, doubling each time it fails
//! again, up to a cap, and short again once something worked. So a blip
//! costs a tenth of a second, and a server away for the night is asked
//! twice a minute, not hammered.

use std::time::Duration;

pub(crate) struct Backoff {
    first: Duration,
    cap: Duration,
    next: Duration,
}

impl Backoff {
    pub(crate) fn new(first: Duration, cap: Duration) -> Backoff {
        Backoff {
            first,
            cap,
            next: first.min(cap),
        }
    }

    /// The pause to take now; the next one is twice as long.
    pub(crate) fn pause(&mut self) -> Duration {
        let now = self.next;
        self.next = now.saturating_mul(2).min(self.cap);
        now
    }

    /// Something worked: the next failure pauses briefly again.
    pub(crate) fn reset(&mut self) {
        self.next = self.first.min(self.cap);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_pause_doubles_up_to_the_cap_and_a_reset_starts_over() {
        let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_millis(500));
        let pauses: Vec<u128> = (0..5).map(|_| backoff.pause().as_millis()).collect();
        assert_eq!(pauses, [100, 200, 400, 500, 500]);
        backoff.reset();
        assert_eq!(backoff.pause(), Duration::from_millis(100));
    }
}

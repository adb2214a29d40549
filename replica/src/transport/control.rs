//! How a device program steers its loop from another thread: it asks it to
//! stop, or pokes it when it wrote rows, so they go up now rather than at
//! the next news. A `Control` is cheap to clone; every clone steers the
//! same loop.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// Cuts a transport's wait short; called from any thread.
pub type Waker = Arc<dyn Fn() + Send + Sync>;

#[derive(Clone, Default)]
pub struct Control {
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Shared {
    flags: Mutex<Flags>,
    changed: Condvar,
}

#[derive(Default)]
struct Flags {
    stop: bool,
    poked: bool,
    /// The waker of the transport the loop waits on, while it runs.
    waker: Option<Waker>,
}

impl Control {
    pub fn new() -> Control {
        Control::default()
    }

    /// Asks the loop to stop: it returns once what it is doing is done (a
    /// message being applied is committed, or not at all).
    pub fn stop(&self) {
        self.flags().stop = true;
        self.wake();
    }

    /// The program wrote rows that go up: the loop sends them now.
    pub fn poke(&self) {
        self.flags().poked = true;
        self.wake();
    }

    pub fn is_stopping(&self) -> bool {
        self.flags().stop
    }

    /// Whether the loop was poked since it last asked (and forgets it).
    pub(crate) fn take_poke(&self) -> bool {
        std::mem::take(&mut self.flags().poked)
    }

    /// Sleeps `pause`, or less when asked to stop — or poked, if
    /// `until_poked`.
    pub(crate) fn sleep(&self, pause: Duration, until_poked: bool) {
        let flags = self.flags();
        let _unused = self
            .shared
            .changed
            .wait_timeout_while(flags, pause, |f| !(f.stop || until_poked && f.poked))
            .unwrap_or_else(|poisoned| poisoned.into_inner());
    }

    pub(crate) fn set_waker(&self, waker: Option<Waker>) {
        self.flags().waker = waker;
    }

    fn wake(&self) {
        let waker = self.flags().waker.clone();
        self.shared.changed.notify_all();
        // Called without the lock held: a waker may take locks of its own.
        if let Some(waker) = waker {
            waker();
        }
    }

    fn flags(&self) -> MutexGuard<'_, Flags> {
        // The flags are plain values, whole after any panic.
        self.shared
            .flags
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl std::fmt::Debug for Control {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let flags = self.flags();
        f.debug_struct("Control")
            .field("stop", &flags.stop)
            .field("poked", &flags.poked)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sleep_ends_when_another_thread_asks_to_stop() {
        let control = Control::new();
        let other = control.clone();
        let stopper = std::thread::spawn(move || other.stop());
        control.sleep(Duration::from_secs(3600), false);
        stopper.join().unwrap();
        assert!(control.is_stopping());
    }

    #[test]
    fn a_poke_ends_a_sleep_only_when_asked_and_is_taken_once() {
        let control = Control::new();
        control.poke();
        // Returns at once: the poke came before the sleep.
        control.sleep(Duration::from_secs(3600), true);
        assert!(control.take_poke());
        assert!(!control.take_poke(), "a poke is taken once");
    }

    #[test]
    fn stopping_and_poking_call_the_transports_waker() {
        let control = Control::new();
        let calls = Arc::new(Mutex::new(0));
        let counted = calls.clone();
        control.set_waker(Some(Arc::new(move || *counted.lock().unwrap() += 1)));
        control.poke();
        control.stop();
        assert_eq!(*calls.lock().unwrap(), 2);
    }
}

//! A device program, as the book shows it: the replica's loop in a thread
//! of its own over some transport, steered by a `Control`, its statuses
//! collected for the test to wait on.
#![allow(dead_code)]

use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use magic_sync_replica::transport::{run, Control, Options, Status, Transport};
use magic_sync_replica::Replica;

/// Long enough for a busy machine; each wait ends as soon as it may.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// Waits until `done` answers true, or panics saying what it waited for
/// once `PATIENCE` has passed: the worker and the loops run on their own
/// time, so a test waits for what it expects rather than a fixed while.
pub fn wait_until(what: &str, done: impl FnMut() -> bool) {
    wait_within(PATIENCE, what, done);
}

/// `wait_until` with a patience of its own, looking every 50 ms.
pub fn wait_within(patience: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let began = Instant::now();
    while !done() {
        assert!(began.elapsed() < patience, "waited {patience:?} for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub struct Device {
    pub control: Control,
    statuses: Receiver<Status>,
    thread: Option<JoinHandle<Replica>>,
    /// Every status so far, as text, to show when a wait fails.
    seen: Vec<String>,
}

impl Device {
    /// Runs the loop over the transport `connect` makes for the replica.
    pub fn start<T, F>(replica: Replica, options: Options, connect: F) -> Device
    where
        T: Transport,
        F: FnOnce(&Replica) -> T + Send + 'static,
    {
        let control = Control::new();
        let steered = control.clone();
        let (tell, statuses) = channel();
        let thread = std::thread::spawn(move || {
            let mut replica = replica;
            let mut transport = connect(&replica);
            run(&mut replica, &mut transport, &options, &steered, |status| {
                let _ = tell.send(status);
            });
            replica
        });
        Device {
            control,
            statuses,
            thread: Some(thread),
            seen: Vec::new(),
        }
    }

    /// Waits for a status that `wanted` picks, and answers it; panics
    /// naming `what` and every status seen when none comes in time.
    pub fn expect(&mut self, what: &str, mut wanted: impl FnMut(&Status) -> bool) -> Status {
        let began = Instant::now();
        loop {
            let left = PATIENCE.saturating_sub(began.elapsed());
            match self.statuses.recv_timeout(left) {
                Ok(status) => {
                    self.seen.push(status.to_string());
                    if wanted(&status) {
                        return status;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    panic!(
                        "waited {PATIENCE:?} for {what}; saw:\n{}",
                        self.seen.join("\n")
                    )
                }
                Err(RecvTimeoutError::Disconnected) => {
                    panic!(
                        "the loop ended waiting for {what}; saw:\n{}",
                        self.seen.join("\n")
                    )
                }
            }
        }
    }

    /// Every status that came so far, without waiting.
    pub fn drain(&mut self) -> Vec<Status> {
        let statuses: Vec<Status> = self.statuses.try_iter().collect();
        self.seen.extend(statuses.iter().map(|s| s.to_string()));
        statuses
    }

    /// Every status so far, as text.
    pub fn history(&self) -> &[String] {
        &self.seen
    }

    /// Asks the loop to stop and waits for it; answers the replica and the
    /// statuses not yet taken, the last of which is `Stopped`.
    pub fn stop(mut self) -> (Replica, Vec<Status>) {
        self.control.stop();
        let replica = self
            .thread
            .take()
            .expect("running")
            .join()
            .expect("the loop's thread ends without a panic");
        let rest = self.drain();
        assert!(
            matches!(rest.last(), Some(Status::Stopped)),
            "the last status is Stopped; saw:\n{}",
            self.seen.join("\n")
        );
        (replica, rest)
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        // A test that failed leaves no loop running behind it.
        self.control.stop();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

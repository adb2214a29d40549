//! A wish offered to its handler on a thread of its own, waited for no
//! longer than `wishes_timeout`. A handler that panics, or does not answer
//! in time, has the wish wait; what a late one answers is heard by nobody,
//! so it records nothing. Until it is done, the same wish is not offered to
//! it again.

use std::any::Any;
use std::collections::HashMap;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use crate::wishes::{CarryOut, Outcome, Wish};

/// The handlers still running, by the wish they were offered.
#[derive(Debug, Default)]
pub(crate) struct Running(HashMap<String, Arc<AtomicBool>>);

impl Running {
    pub(crate) fn is_busy(&self, wish: &str) -> bool {
        self.0
            .get(wish)
            .is_some_and(|busy| busy.load(Ordering::Acquire))
    }

    pub(crate) fn forget_finished(&mut self) {
        self.0.retain(|_, busy| busy.load(Ordering::Acquire));
    }
}

/// What the handler answered in time, or the wait its trouble makes.
pub(crate) fn offer(
    handler: Arc<dyn CarryOut>,
    wish: Wish,
    timeout: Duration,
    running: &mut Running,
) -> Outcome {
    let busy = Arc::new(AtomicBool::new(true));
    running
        .0
        .insert(wish.id.hyphenated().to_string(), busy.clone());
    let (answer, answered) = mpsc::channel();
    let spawned = thread::Builder::new()
        .name("magic_sync wish".to_owned())
        .spawn(move || {
            // The handler is the program's: whatever it leaves behind when
            // it panics is its own, and the engine only reads the panic.
            let outcome = panic::catch_unwind(AssertUnwindSafe(|| handler.carry_out(&wish)));
            busy.store(false, Ordering::Release);
            // Nobody hears it once the engine stopped waiting.
            let _ = answer.send(outcome);
        });
    if let Err(e) = spawned {
        return Outcome::Later(format!("the handler could not be started: {e}"));
    }
    match answered.recv_timeout(timeout) {
        Ok(Ok(outcome)) => outcome,
        Ok(Err(panic)) => Outcome::Later(format!("the handler panicked: {}", said(&*panic))),
        Err(RecvTimeoutError::Timeout) => Outcome::Later(format!(
            "the handler did not answer within {}",
            seconds(timeout)
        )),
        Err(RecvTimeoutError::Disconnected) => {
            Outcome::Later("the handler ended without an answer".to_owned())
        }
    }
}

/// What a panic said, when it said it as text.
fn said(panic: &(dyn Any + Send)) -> String {
    if let Some(text) = panic.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = panic.downcast_ref::<String>() {
        text.clone()
    } else {
        "no message".to_owned()
    }
}

fn seconds(d: Duration) -> String {
    if d.subsec_nanos() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
}

//! The Ups, as the relay's consumer hands them out: a task on the
//! transport's runtime takes them in order and passes them to the worker's
//! thread, which files each in a transaction of its own and only then
//! acknowledges it. One whose filing failed is handed out again later.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::mpsc;
use std::time::Duration;

use async_nats::jetstream::{self, consumer::PullConsumer, AckKind};
use futures_util::StreamExt;
use uuid::Uuid;

use crate::error::Error;
use magic_sync_proto::nats_subjects as subjects;

/// How long the task waits before asking again after the consumer failed.
const ASK_AGAIN_AFTER: Duration = Duration::from_millis(500);

/// One Up, as it came.
pub struct Upload {
    /// The replica the subject names: the one it is filed under. None for
    /// a subject that names none, which nothing files.
    pub replica: Option<Uuid>,
    pub subject: String,
    pub bytes: Vec<u8>,
    message: jetstream::Message,
}

impl Upload {
    /// Acknowledged (the filing committed), or handed out again after
    /// `again`.
    pub async fn finish(self, again: Option<Duration>, timeout: Duration) -> Result<(), Error> {
        let kind = match again {
            None => AckKind::Ack,
            Some(after) => AckKind::Nak(Some(after)),
        };
        match tokio::time::timeout(timeout, self.message.double_ack_with(kind)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(Error::of_ack(e)),
            Err(_) => Err(Error::timed_out("acknowledging an Up")),
        }
    }

    /// A subject no replica of ours publishes on: it is dropped for good.
    pub async fn refuse(self) {
        let _ = self.message.ack_with(AckKind::Term).await;
    }
}

/// Starts taking the Ups the consumer hands out, for as long as the
/// runtime runs: each is passed on, and `wake` made readable.
pub fn take(
    consumer: PullConsumer,
    prefix: String,
    sender: mpsc::Sender<Upload>,
    mut wake: UnixStream,
) {
    tokio::spawn(async move {
        loop {
            let mut messages = match consumer.messages().await {
                Ok(messages) => messages,
                Err(_) => {
                    tokio::time::sleep(ASK_AGAIN_AFTER).await;
                    continue;
                }
            };
            while let Some(next) = messages.next().await {
                let Ok(message) = next else {
                    // Heartbeats missed, the server restarting: the stream
                    // carries on, and what was not acknowledged comes again.
                    continue;
                };
                let subject = message.subject.to_string();
                let upload = Upload {
                    replica: subjects::parse_up_subject(&prefix, &subject)
                        .map(|(replica, _lane)| replica),
                    subject,
                    bytes: message.payload.to_vec(),
                    message,
                };
                if sender.send(upload).is_err() {
                    return; // The worker is gone.
                }
                // A full socket already wakes the worker: nothing is lost.
                let _ = wake.write(&[1]);
            }
        }
    });
}

/// Empties the wake socket, so the next sleep waits for new Ups.
pub fn drain(mut woken: &UnixStream) {
    let mut buffer = [0u8; 256];
    while matches!(woken.read(&mut buffer), Ok(n) if n > 0) {}
}

//! The relay worker's publishing, with a transport it pushes to (nats):
//! each round files the Ups that came (each in a transaction of its own,
//! acknowledged once committed), then sends what the outbox holds. The
//! queue needs none of it: the pass wakes the devices, which take their
//! messages themselves.
//!
//! A failure to reach the transport is waited out with a backoff (0.1 s
//! doubling to a minute) and said once; a send that fails holds back only
//! its own replica (sql/publish.sql).

use std::collections::HashSet;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use pgrx::prelude::*;
use uuid::Uuid;

use super::name::NAME;
use super::stalls;
use super::transaction::{spi_failure, transaction};
use crate::error::Error;
use crate::publish::nats::{self, Nats, Upload};
use crate::publish::outbox;
use crate::settings::{self, Transport};
use crate::statements::worker::push::FILE_UP;

/// How long an Up whose filing failed waits before it is handed out again.
const FILE_AGAIN_AFTER_TRANSIENT: Duration = Duration::from_secs(1);
const FILE_AGAIN_AFTER_PERMANENT: Duration = Duration::from_secs(60);

/// Send rounds one push runs at most before the worker looks at its notes.
const SENDS_PER_PUSH: usize = 64;

pub struct Push {
    nats: Option<Nats>,
    /// After a push failed in the database: when to push again.
    push_at: Option<Instant>,
    /// After a failure to connect: when to try again, and the last wait.
    connect_at: Option<Instant>,
    backoff: Duration,
    /// The last failure said, so one that repeats is said once.
    said: Option<String>,
    /// Replicas whose consumer is to be made again (stalled:
    /// publish/stalls.rs), kept until it was.
    to_remake: HashSet<Uuid>,
}

/// What one push did.
pub struct Pushed {
    /// Sends were cut short: more is due at once.
    pub more: bool,
}

impl Push {
    pub fn new() -> Push {
        Push {
            nats: None,
            push_at: None,
            connect_at: None,
            backoff: Duration::ZERO,
            said: None,
            to_remake: HashSet::new(),
        }
    }

    /// Asks for these replicas' consumers to be made again, at the next
    /// push that finds the transport connected.
    pub fn remake_consumers(&mut self, replicas: impl IntoIterator<Item = Uuid>) {
        if Push::wanted() {
            self.to_remake.extend(replicas);
        }
    }

    /// Whether the transport is one the worker pushes to.
    pub fn wanted() -> bool {
        settings::TRANSPORT.get() == Transport::Nats
    }

    /// The socket that turns readable when Ups come, while connected.
    pub fn socket(&self) -> Option<RawFd> {
        self.nats.as_ref().map(Nats::wake_socket)
    }

    /// How long until a try of this push is due: connecting again, or a
    /// send that waits out its backoff.
    pub fn due_in(&self) -> Option<Duration> {
        if !Push::wanted() {
            return None;
        }
        match self.connect_at.or(self.push_at) {
            Some(at) => Some(at.saturating_duration_since(Instant::now())),
            None => transaction(false, outbox::next_send_in)
                .ok()
                .flatten()
                .map(|seconds| Duration::from_secs_f64(seconds.max(0.0))),
        }
    }

    /// Files the Ups that came, then sends what is due; answers whether
    /// more is due at once. A failure in the database is said and tried
    /// again after a backoff of its own: the passes go on meanwhile.
    pub fn push(&mut self) -> bool {
        if !Push::wanted() {
            self.nats = None;
            return false;
        }
        if self.push_at.is_some_and(|at| Instant::now() < at) || !self.connected() {
            return false;
        }
        let Some(mut nats) = self.nats.take() else {
            return false;
        };
        let pushed = self.send(&mut nats);
        if nats.lost_streams() {
            pgrx::log!("{NAME}: nats has no stream for the replicas' messages: making it again");
        } else {
            self.nats = Some(nats);
        }
        match pushed {
            Ok(pushed) => {
                self.push_at = None;
                pushed.more
            }
            Err(failure) => {
                let after = if failure.is_transient() {
                    Duration::from_secs(1)
                } else {
                    Duration::from_secs(60)
                };
                self.push_at = Some(Instant::now() + after);
                self.say(format!(
                    "publishing failed, tried again in {} s: {}",
                    after.as_secs(),
                    failure
                ));
                false
            }
        }
    }

    fn send(&mut self, nats: &mut Nats) -> Result<Pushed, Error> {
        self.remake(nats)?;
        // What the passes wrote goes before the Ups that came are filed:
        // with a hundred registers, their reports of the last change took
        // the worker longer to file than the next change took to come,
        // and every register waited for them (issue 37). What filing
        // answers (a Filed) goes at once after.
        let published = self.publish(nats)?;
        if !file_uploads(nats)? {
            return Ok(published);
        }
        let answered = self.publish(nats)?;
        Ok(Pushed {
            more: published.more || answered.more,
        })
    }

    /// Publishes what is due, a few rounds of it.
    fn publish(&mut self, nats: &mut Nats) -> Result<Pushed, Error> {
        let concurrency = settings::CONCURRENCY.get().max(1) as usize;
        for _ in 0..SENDS_PER_PUSH {
            let due = transaction(false, || outbox::due(concurrency * 4))?;
            if due.is_empty() {
                return Ok(Pushed { more: false });
            }
            let outcomes = nats.send(due, concurrency);
            let provisioned = transaction(false, || outbox::record(&outcomes))?;
            if provisioned > 0 {
                pgrx::warning!(
                    "{NAME}: {provisioned} replica(s) provisioned again: the transport refused a message three times (sync.alarms)"
                );
            }
            let failures: Vec<&Error> = outcomes
                .iter()
                .filter_map(|o| o.failed.as_ref().map(|f| &f.error))
                .collect();
            if let Some(first) = failures.first() {
                self.say(format!(
                    "sends to {} replica(s) failed, each tried again after a backoff: {first}",
                    failures.len()
                ));
            }
            if outcomes.iter().all(|o| o.taken.is_empty()) {
                return Ok(Pushed { more: false });
            }
        }
        Ok(Pushed { more: true })
    }

    /// Makes again the consumers asked for; one that could not be is
    /// tried again at the next push. A replica for which the stream then
    /// holds nothing, though messages were published for it and it has
    /// not applied them, was sent messages the transport lost (a server
    /// killed before it wrote them down): it is provisioned again now,
    /// not after `magic_sync.unconfirmed_after`.
    fn remake(&mut self, nats: &mut Nats) -> Result<(), Error> {
        if self.to_remake.is_empty() {
            return Ok(());
        }
        let replicas: Vec<Uuid> = self.to_remake.drain().collect();
        let mut lost = Vec::new();
        for (replica, held) in nats.remake_consumers(&replicas) {
            match held {
                Ok(0) => lost.push(replica),
                Ok(_) => {}
                Err(e) => {
                    self.say(format!(
                        "making the consumer of replica {replica} again failed, tried again: {e}"
                    ));
                    self.to_remake.insert(replica);
                }
            }
        }
        if !lost.is_empty() {
            let provisioned = transaction(false, || stalls::lost(&lost))??;
            if provisioned > 0 {
                pgrx::warning!(
                    "{NAME}: {provisioned} replica(s) provisioned again: the stream holds none \
                     of the messages published for them, which they have not applied (sync.alarms)"
                );
            }
        }
        Ok(())
    }

    /// Whether connected, connecting now if it is due; a setting changed
    /// by a reload connects again.
    fn connected(&mut self) -> bool {
        let config = nats::Config::from_settings();
        if self.nats.as_ref().is_some_and(|n| n.config != config) {
            pgrx::log!("{NAME}: the nats settings changed: connecting again");
            self.nats = None;
        }
        if self.nats.is_none() {
            if self.connect_at.is_some_and(|at| Instant::now() < at) {
                return false;
            }
            match Nats::connect(config) {
                Ok(nats) => {
                    pgrx::log!(
                        "{NAME}: connected to nats at {}",
                        nats.config.urls.join(",")
                    );
                    self.nats = Some(nats);
                    self.connect_at = None;
                    self.backoff = Duration::ZERO;
                    self.said = None;
                }
                Err(e) => {
                    self.backoff = if e.is_transient() {
                        (self.backoff * 2)
                            .clamp(Duration::from_millis(100), Duration::from_secs(60))
                    } else {
                        Duration::from_secs(60)
                    };
                    self.connect_at = Some(Instant::now() + self.backoff);
                    let kind = if e.is_transient() {
                        "transient"
                    } else {
                        "permanent"
                    };
                    self.say(format!(
                        "{e} ({kind}; tried again in {:.1} s)",
                        self.backoff.as_secs_f64()
                    ));
                    return false;
                }
            }
        }
        true
    }

    fn say(&mut self, what: String) {
        if self.said.as_deref() != Some(what.as_str()) {
            pgrx::warning!("{NAME}: {what}");
            self.said = Some(what);
        }
    }
}

/// Files each Up that came, in order, under the replica its subject names.
/// One whose filing failed is handed out again later, and so is every
/// later one of its replica, so a replica's Ups are filed in order.
/// Answers whether any came.
fn file_uploads(nats: &mut Nats) -> Result<bool, Error> {
    let mut held_back: Vec<(uuid::Uuid, Duration)> = Vec::new();
    let mut came = false;
    for upload in nats.uploads() {
        came = true;
        let Some(replica) = upload.replica else {
            pgrx::warning!(
                "{NAME}: an Up on {} names no replica: dropped",
                upload.subject
            );
            nats.refuse(upload);
            continue;
        };
        if let Some((_, after)) = held_back.iter().find(|(r, _)| *r == replica) {
            let after = *after;
            finish(nats, upload, Some(after));
            continue;
        }
        match file(replica, &upload) {
            Ok(()) => finish(nats, upload, None),
            Err(failure) => {
                let after = if failure.is_transient() {
                    FILE_AGAIN_AFTER_TRANSIENT
                } else {
                    FILE_AGAIN_AFTER_PERMANENT
                };
                pgrx::warning!(
                    "{NAME}: filing an Up of replica {replica} failed, tried again in {} s: {}",
                    after.as_secs(),
                    failure
                );
                held_back.push((replica, after));
                finish(nats, upload, Some(after));
            }
        }
    }
    Ok(came)
}

fn file(replica: uuid::Uuid, upload: &Upload) -> Result<(), Error> {
    let id = crate::spi::to_pg(replica);
    let verdict = transaction(false, || {
        Spi::get_one_with_args::<pgrx::JsonB>(FILE_UP, &[id.into(), upload.bytes.as_slice().into()])
    })?
    .map_err(|e| spi_failure(FILE_UP, e))?;
    if let Some(verdict) = verdict {
        say_what_was_not_filed(replica, &verdict.0);
    }
    Ok(())
}

/// Over the queue the device reads `sync.receive`'s verdict; over nats
/// nobody does, so what it refused is logged: an Up that could not be
/// read, and rows left out (another replica's, a catalog's), which a
/// device should never send.
fn say_what_was_not_filed(replica: uuid::Uuid, verdict: &serde_json::Value) {
    if verdict["verdict"] == "malformed" {
        pgrx::warning!(
            "{NAME}: an Up of replica {replica} could not be read, and applied nothing: {}",
            verdict["why"]
        );
    }
    let parts = verdict["rows"].as_array().into_iter().flatten();
    for part in parts {
        let Some(left_out) = part["left_out"].as_array().filter(|l| !l.is_empty()) else {
            continue;
        };
        pgrx::warning!(
            "{NAME}: {} row(s) of {} in an Up of replica {replica} were left out, the first: {} ({})",
            left_out.len(),
            part["table"],
            left_out[0]["key"],
            left_out[0]["why"]
        );
    }
}

/// An acknowledgement lost is harmless: the Up comes again, and its
/// filing is answered as filed already.
fn finish(nats: &Nats, upload: Upload, again: Option<Duration>) {
    if let Err(e) = nats.finish(upload, again) {
        pgrx::log!("{NAME}: {e}");
    }
}

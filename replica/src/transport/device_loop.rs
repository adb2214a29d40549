//! The device's loop, whatever the transport: a device program runs it in a
//! thread of its own, and it runs until asked to stop.
//!
//! Each turn it takes what waits, one message at a time: applies it
//! (`Replica::receive`) and acknowledges it only once that returned `Ok` —
//! committed, or changing nothing (protocol §5.1). A message the replica
//! could not take (a later protocol, its storage failed) is left
//! unacknowledged, and the messages behind it wait with it; the loop tries
//! it again after a pause that doubles each time. Then it sends every Up
//! of every lane (`Replica::next_up` until there is none), `sent` once the
//! transport took one, `refused` when it would not. Having sent an upload
//! it takes again before waiting, since its answer may be waiting already
//! (the queue's `Filed` is). Otherwise it waits for news: a message, a
//! poke (the program wrote rows), or `poll_every` passing, in case the
//! transport missed telling.
//!
//! An Up that only says what was applied waits up to `report_after` from
//! the first message it covers, so that a burst of messages is reported
//! once (protocol §5.2: "once for several", "within seconds"). With a
//! hundred registers on one server, every report filed while the others
//! still take the same change is work they wait behind. Until it is due,
//! the first lane's Up is not even built while only messages were applied
//! since the last (nothing rejected, no gap, no wish answered, no poke):
//! it could only be that report, held back.
//!
//! Ups never wait for messages: a turn sends them whatever taking came to
//! (a fetch that failed, a message held back, one of a later protocol), so
//! what the register wrote reaches the server while its downloads are
//! stuck. A transport failure then ends the turn: the loop reports it,
//! pauses (100 ms, doubling to 30 s) and connects again; connected again,
//! the replica says where it stands in its next Up, so the server hears a
//! replica that is alive and not moving (docs/src/how-it-works.md, "A
//! replica that stops moving"). Nothing is lost meanwhile: a message not
//! acknowledged comes again, and an Up not taken is built again.
//!
//! Wishes of the replica's settings are offered to their handlers at
//! start, after each message that changes one (`Replica::receive` does),
//! and every `Settings::wishes_every` while one waits — connected or not:
//! a wish carried out offline goes up once the transport is back.

use std::fmt;
use std::time::{Duration, Instant};

use super::backoff::Backoff;
use super::{Control, Transport};
use crate::apply::Received;
use crate::error::Error;
use crate::replica::Replica;
use crate::upload::backlog::TableBacklog;
use crate::upload::{Narrowed, Refusal, Upload};
use crate::wishes::Answered;

/// How the loop paces itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// The longest it waits for news before it asks the transport anyway,
    /// in case a notification went missing.
    pub poll_every: Duration,
    /// The first pause after a failure; each further failure doubles it...
    pub first_pause: Duration,
    /// ...up to this.
    pub longest_pause: Duration,
    /// With a transport whose wait cannot be cut short, the longest one
    /// wait lasts: how soon a stop or a poke is noticed.
    pub slice: Duration,
    /// How long after applying a message, at most, the loop waits before
    /// it says so in an Up that says nothing else; messages applied
    /// meanwhile go in the same report. Zero: after every message.
    pub report_after: Duration,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            poll_every: Duration::from_secs(30),
            first_pause: Duration::from_millis(100),
            longest_pause: Duration::from_secs(30),
            slice: Duration::from_millis(250),
            report_after: Duration::from_millis(100),
        }
    }
}

/// What the loop is doing, as it happens.
#[derive(Debug)]
pub enum Status {
    /// Connected to the transport (again).
    Connected,
    /// A message taken, committed (or changing nothing) and acknowledged.
    Applied(Received),
    /// A message the replica could not take: left unacknowledged, and
    /// tried again in `retry_in`. `Error::LaterProtocol` waits for a build
    /// that speaks it.
    Unapplied { error: Error, retry_in: Duration },
    /// The transport took an Up of `lane`; `upload` is its upload number,
    /// when it carries rows.
    Sent { lane: String, upload: Option<u64> },
    /// The transport refused an Up for good: what the replica made of it.
    UpRefused {
        lane: String,
        error: Error,
        narrowed: Narrowed,
    },
    /// Nothing to take or send: waiting for news. `backlog`: per table
    /// that goes up, what waits to go, or to be filed.
    Waiting { backlog: Vec<TableBacklog> },
    /// Wishes offered by the loop itself (at start, or again while one
    /// waits), and what they were answered.
    Wishes(Vec<Answered>),
    /// The transport failed: connecting again in `retry_in`.
    Disconnected { error: Error, retry_in: Duration },
    /// The replica's own database failed outside a message (building an
    /// Up, recording it sent): tried again in `retry_in`.
    Failed { error: Error, retry_in: Duration },
    /// Stopped, as asked.
    Stopped,
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Status::Connected => write!(f, "connected"),
            Status::Applied(received) => write!(f, "applied: {received:?}"),
            Status::Unapplied { error, retry_in } => {
                write!(
                    f,
                    "a message left unacknowledged ({error}); again in {retry_in:?}"
                )
            }
            Status::Sent { lane, upload } => match upload {
                Some(n) => write!(f, "sent upload {n} on lane {lane}"),
                None => write!(f, "sent an Up on lane {lane}"),
            },
            Status::UpRefused {
                lane,
                error,
                narrowed,
            } => write!(f, "an Up of lane {lane} refused ({error}): {narrowed:?}"),
            Status::Waiting { backlog } => {
                let unsent: u64 = backlog.iter().map(|t| t.unsent).sum();
                let unfiled: u64 = backlog.iter().map(|t| t.unfiled).sum();
                write!(f, "waiting ({unsent} rows to send, {unfiled} to be filed)")
            }
            Status::Wishes(answered) => {
                let outcomes: Vec<String> = answered
                    .iter()
                    .map(|a| format!("{} {}: {}", a.table, a.key, a.outcome))
                    .collect();
                write!(f, "wishes answered: {}", outcomes.join(", "))
            }
            Status::Disconnected { error, retry_in } => {
                write!(f, "disconnected ({error}); again in {retry_in:?}")
            }
            Status::Failed { error, retry_in } => write!(f, "{error}; again in {retry_in:?}"),
            Status::Stopped => write!(f, "stopped"),
        }
    }
}

/// Runs the loop until `control` asks it to stop, reporting what it does
/// to `report` (from this thread). A device program runs it in a thread of
/// its own, and writes its rows through another connection to the same
/// database, poking `control` after each write.
pub fn run<T: Transport + ?Sized>(
    replica: &mut Replica,
    transport: &mut T,
    options: &Options,
    control: &Control,
    report: impl FnMut(Status),
) {
    let waker = transport.waker();
    let interruptible = waker.is_some();
    control.set_waker(waker);
    let mut looping = Looping {
        replica,
        transport,
        options,
        control,
        report,
        interruptible,
        connected: false,
        ever_connected: false,
        pauses: Backoff::new(options.first_pause, options.longest_pause),
        holds: Backoff::new(options.first_pause, options.longest_pause),
        held_until: None,
        wishes_at: Some(Instant::now()),
        unreported_since: None,
        report_at: None,
        beyond_report: true,
    };
    while !control.is_stopping() {
        match looping.turn() {
            Ok(()) => looping.pauses.reset(),
            Err(fault) => looping.pause_after(fault),
        }
    }
    if looping.connected {
        // An acknowledgement put off goes now; lost, it costs a
        // redelivery, which changes nothing.
        let _ = looping.transport.settle();
    }
    control.set_waker(None);
    (looping.report)(Status::Stopped);
}

/// Whose failure ended a turn.
enum Fault {
    Transport(Error),
    Replica(Error),
}

struct Looping<'a, T: ?Sized, R> {
    replica: &'a mut Replica,
    transport: &'a mut T,
    options: &'a Options,
    control: &'a Control,
    report: R,
    interruptible: bool,
    connected: bool,
    /// Connected at least once since the loop began.
    ever_connected: bool,
    /// Pauses after failures of the transport or of the replica.
    pauses: Backoff,
    /// Pauses before a message the replica could not take is tried again.
    holds: Backoff,
    /// Until when messages are left where they are (one could not be
    /// taken); Ups still go meanwhile.
    held_until: Option<Instant>,
    /// When wishes are offered again (at once, on start); `None` while
    /// none waits.
    wishes_at: Option<Instant>,
    /// When the first message applied and not yet reported was applied.
    unreported_since: Option<Instant>,
    /// When the report of what was applied, held back, is due.
    report_at: Option<Instant>,
    /// Something besides messages applied happened since the first lane's
    /// Up was last built (a message with rejections, a gap, a `Filed`,
    /// wishes answered, a new connection): its next Up is built at once,
    /// even while a report is held back.
    beyond_report: bool,
}

impl<T: Transport + ?Sized, R: FnMut(Status)> Looping<'_, T, R> {
    fn turn(&mut self) -> Result<(), Fault> {
        self.offer_wishes()?;
        if !self.connected {
            self.transport.connect().map_err(Fault::Transport)?;
            if self.ever_connected {
                // Connected again after a failure: the server hears where
                // the replica stands, even with nothing else to say, so a
                // replica that cannot take its messages is seen to be alive
                // and not moving (a stall the server heals).
                self.replica.say_where_it_stands();
            }
            self.beyond_report = true;
            self.connected = true;
            self.ever_connected = true;
            (self.report)(Status::Connected);
        }
        // Uploads never wait for downloads: whatever taking messages came
        // to (a fetch that failed, a message held back), the Ups go, and
        // only then does a failure of taking end the turn.
        let delivered = self.deliver();
        let sent_upload = self.send_ups();
        delivered?;
        if !sent_upload? {
            self.wait()?;
        }
        Ok(())
    }

    /// Takes, applies and acknowledges what waits, in order, until nothing
    /// does or a message cannot be taken.
    fn deliver(&mut self) -> Result<(), Fault> {
        if let Some(until) = self.held_until {
            if Instant::now() < until {
                return Ok(());
            }
            self.held_until = None;
        }
        // The first take of a turn carries the report of what was applied
        // once it is due, where the transport can: one round trip says it
        // and takes what came since. The takes of a burst carry none, so
        // one report covers the burst.
        let mut first = true;
        while !self.control.is_stopping() {
            let delivery = if first {
                first = false;
                self.take_reporting()?
            } else {
                self.transport.next().map_err(Fault::Transport)?
            };
            let Some(delivery) = delivery else {
                return Ok(());
            };
            match self.replica.receive(&delivery.bytes) {
                Ok(received) => {
                    // Committed (or it changed nothing): only now may the
                    // transport let it go. Lost, this acknowledgement costs
                    // a redelivery, which changes nothing.
                    self.transport
                        .ack(delivery.handle)
                        .map_err(Fault::Transport)?;
                    self.holds.reset();
                    // The transport works: a failure after this one is a
                    // blip again, however long the last outage was.
                    self.pauses.reset();
                    self.unreported_since.get_or_insert_with(Instant::now);
                    self.beyond_report |= !only_to_report(&received);
                    if answered_wishes(&received) {
                        self.wishes_again()?;
                    }
                    (self.report)(Status::Applied(received));
                }
                Err(error) => {
                    let retry_in = self.holds.pause();
                    self.held_until = Some(Instant::now() + retry_in);
                    self.transport
                        .hold(delivery.handle, retry_in)
                        .map_err(Fault::Transport)?;
                    (self.report)(Status::Unapplied { error, retry_in });
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// Takes the next message, carrying the report of what was applied
    /// when the transport can and one is due: an Up of the first lane
    /// without rows (what was applied, rejections, digests, backlog). One
    /// with rows, or one the transport did not take, goes as any Up does.
    fn take_reporting(&mut self) -> Result<Option<super::Delivery<T::Handle>>, Fault> {
        let first_lane = self
            .replica
            .settings()
            .lanes
            .first()
            .map(|l| l.name.clone());
        // Only a report due: one carried sooner would be filed before the
        // take answers, in the way of the message it takes (with a hundred
        // registers woken by one pass, a hundred filings before the last
        // register's take), and would cover fewer messages.
        let due = self
            .unreported_since
            .is_some_and(|since| Instant::now() >= since + self.options.report_after);
        let report = match first_lane {
            Some(first) if due && self.transport.carries_reports() => {
                self.first_lane_report(&first)?
            }
            _ => None,
        };
        let taken = self.transport.take(report.as_ref());
        if let Some(up) = &report {
            match &taken {
                Ok(super::Taken { reported: true, .. }) => {
                    self.replica.sent(up).map_err(Fault::Replica)?;
                    self.unreported_since = None;
                    (self.report)(Status::Sent {
                        lane: up.lane.clone(),
                        upload: None,
                    });
                }
                _ => {
                    self.replica
                        .refused(up, Refusal::Transient)
                        .map_err(Fault::Replica)?;
                }
            }
        }
        Ok(taken.map_err(Fault::Transport)?.delivery)
    }

    /// The first lane's next Up, if it carries no rows.
    fn first_lane_report(&mut self, lane: &str) -> Result<Option<Upload>, Fault> {
        Ok(
            match self.replica.next_up_on(lane).map_err(Fault::Replica)? {
                Some(up) if up.number().is_none() => Some(up),
                Some(up) => {
                    // Rows: they go as an Up of their own, built again.
                    self.beyond_report = true;
                    self.replica
                        .refused(&up, Refusal::Transient)
                        .map_err(Fault::Replica)?;
                    None
                }
                None => None,
            },
        )
    }

    /// Sends every Up the replica has, of every lane; answers whether it
    /// sent an upload, whose answer (a `Filed`) is then to be taken. An Up
    /// that only says what the replica applied is answered by nothing.
    fn send_ups(&mut self) -> Result<bool, Fault> {
        // What was written before now goes in this turn.
        self.beyond_report |= self.control.take_poke();
        self.report_at = None;
        let lanes: Vec<String> = self
            .replica
            .settings()
            .lanes
            .iter()
            .map(|lane| lane.name.clone())
            .collect();
        let mut sent_upload = false;
        for (position, lane) in lanes.iter().enumerate() {
            let first = position == 0;
            if first && !self.beyond_report && self.report_held_back() {
                continue;
            }
            match self.send_lane(lane, first) {
                Ok(upload) => sent_upload |= upload,
                Err(fault) => {
                    // What was left unsent is built again next turn.
                    self.beyond_report |= first;
                    return Err(fault);
                }
            }
        }
        Ok(sent_upload)
    }

    /// Whether the report of what was applied is not due yet (then
    /// `report_at` says when it is). Only messages applied happened since
    /// the first lane's last Up, and the program wrote nothing: its next
    /// Up would say only what was applied, and would be held back once
    /// built. Not built: building an Up cost a register, per message, a
    /// sixth of its CPU (docs/src/decisions.md, issue 37).
    fn report_held_back(&mut self) -> bool {
        let Some(since) = self.unreported_since else {
            return false;
        };
        let due = since + self.options.report_after;
        if Instant::now() >= due {
            return false;
        }
        self.report_at = Some(due);
        true
    }

    /// Whether a report of what was applied, and nothing else, waits for
    /// more messages to cover: it is held back until `report_after` from
    /// the first message it covers.
    fn holds_back(&mut self, up: &Upload) -> bool {
        let Some(since) = self.unreported_since else {
            return false;
        };
        let due = since + self.options.report_after;
        if !up.only_says_applied() || Instant::now() >= due {
            return false;
        }
        self.report_at = Some(due);
        true
    }

    /// Sends every Up of `lane`; answers whether one was an upload.
    fn send_lane(&mut self, lane: &str, first: bool) -> Result<bool, Fault> {
        if first {
            self.beyond_report = false;
        }
        let mut sent_upload = false;
        while !self.control.is_stopping() {
            let Some(up) = self.replica.next_up_on(lane).map_err(Fault::Replica)? else {
                break;
            };
            if first && self.holds_back(&up) {
                break;
            }
            match self.transport.send(&up) {
                Ok(()) => {
                    self.replica.sent(&up).map_err(Fault::Replica)?;
                    if first {
                        // The first lane's Up says where the replica stands.
                        self.unreported_since = None;
                    }
                    self.pauses.reset();
                    sent_upload |= up.number().is_some();
                    (self.report)(Status::Sent {
                        lane: up.lane.clone(),
                        upload: up.number(),
                    });
                    if up.only_says_applied() {
                        // It carried all the lane had to say: another
                        // built now would find nothing (rows written since
                        // come with a poke, and a turn of their own).
                        break;
                    }
                }
                Err(Error::TransportRefused(why)) => {
                    let narrowed = self
                        .replica
                        .refused(&up, Refusal::ForGood)
                        .map_err(Fault::Replica)?;
                    if narrowed == Narrowed::Stuck {
                        // It may refuse every message: pause, as after any
                        // failure, and ask again.
                        return Err(Fault::Transport(Error::TransportRefused(why)));
                    }
                    (self.report)(Status::UpRefused {
                        lane: up.lane.clone(),
                        error: Error::TransportRefused(why),
                        narrowed,
                    });
                }
                Err(error) => {
                    self.replica
                        .refused(&up, Refusal::Transient)
                        .map_err(Fault::Replica)?;
                    return Err(Fault::Transport(error));
                }
            }
        }
        Ok(sent_upload)
    }

    /// Offers the wishes due when it is time (at start, and while one
    /// waits, every `wishes_every`).
    fn offer_wishes(&mut self) -> Result<(), Fault> {
        if self.wishes_at.is_none_or(|at| Instant::now() < at) {
            return Ok(());
        }
        let answered = self.replica.offer_wishes().map_err(Fault::Replica)?;
        if !answered.is_empty() {
            self.beyond_report = true;
            (self.report)(Status::Wishes(answered));
        }
        self.wishes_again()
    }

    /// When wishes are offered next: in `wishes_every` while one waits.
    fn wishes_again(&mut self) -> Result<(), Fault> {
        let waiting = self.replica.wishes_due().map_err(Fault::Replica)? > 0;
        self.wishes_at = waiting.then(|| Instant::now() + self.replica.settings().wishes_every);
        Ok(())
    }

    /// Waits for news: a message, a poke, a stop, or `poll_every` passing
    /// (or the end of a hold, or wishes to offer again).
    fn wait(&mut self) -> Result<(), Fault> {
        if self.report_at.is_none() {
            // No report is due to carry what the transport put off.
            self.transport.settle().map_err(Fault::Transport)?;
        }
        let backlog = self.replica.progress().map_err(Fault::Replica)?;
        (self.report)(Status::Waiting { backlog });
        let mut until = Instant::now() + self.options.poll_every;
        if let Some(held) = self.held_until {
            until = until.min(held);
        }
        if let Some(wishes) = self.wishes_at {
            until = until.min(wishes);
        }
        if let Some(report) = self.report_at {
            until = until.min(report);
        }
        loop {
            if self.control.is_stopping() {
                return Ok(());
            }
            if self.control.take_poke() {
                // Rows written: the next turn sends them.
                self.beyond_report = true;
                return Ok(());
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(());
            }
            if self.held_until.is_some() {
                // Messages are left alone until then: only a poke (rows to
                // send) or a stop ends this wait early.
                self.control.sleep(left, true);
                continue;
            }
            let slice = if self.interruptible {
                left
            } else {
                left.min(self.options.slice)
            };
            if self.transport.wait(slice).map_err(Fault::Transport)? {
                return Ok(());
            }
        }
    }

    fn pause_after(&mut self, fault: Fault) {
        let retry_in = self.pauses.pause();
        match fault {
            Fault::Transport(error) => {
                self.connected = false;
                (self.report)(Status::Disconnected { error, retry_in });
            }
            Fault::Replica(error) => (self.report)(Status::Failed { error, retry_in }),
        }
        self.control.sleep(retry_in, false);
    }
}

/// Whether all a message gave the replica to say is that it was applied
/// (or delivered again): nothing rejected, no gap, no wish answered.
fn only_to_report(received: &Received) -> bool {
    match received {
        Received::Applied {
            rejected, wishes, ..
        } => rejected.is_empty() && wishes.is_empty(),
        Received::Already { .. } => true,
        _ => false,
    }
}

/// Whether applying a message offered wishes and answered some.
fn answered_wishes(received: &Received) -> bool {
    match received {
        Received::Applied { wishes, .. } | Received::Ended { wishes, .. } => !wishes.is_empty(),
        _ => false,
    }
}

//! A client of the server's default transport, a queue in its database
//! (feature `pg-queue`): `sync.next(replica)` answers the next message and
//! its id (it stays until acknowledged), `sync.ack(replica, id)` releases
//! it, and `sync.receive(replica, bytes)` files an Up. `sync.take(replica,
//! ack, report)` does the three in one call where the server has it (0.2.0
//! on): [`Queue`] takes its messages with it, unless told not to
//! ([`Queue::in_one_call`]).
//!
//! A message is acknowledged only after `receive` returned `Ok`: then it is
//! committed, or changed nothing. One of a later protocol is left
//! unacknowledged, and delivering stops there until the replica is updated.
//!
//! Two ways to use it: the functions below, one call each, for a program
//! that runs its own loop; or [`Queue`], the device loop's client, which
//! keeps a connection, LISTENs on the replica's channel and reconnects.
//!
//! Either way every failure is the crate's [`Error`]: the server's database
//! (or the way to it) failing is the transport's, `TransportDown` for now
//! or `TransportRefused` for good, by its SQLSTATE; the replica's own are
//! as `Replica` answers them.

use std::time::Duration;

use postgres::error::SqlState;
use postgres::fallible_iterator::FallibleIterator;
use postgres::tls::{MakeTlsConnect, TlsConnect};
use postgres::types::ToSql;
use postgres::{Client, Config, NoTls, Socket, Statement, ToStatement};
use uuid::Uuid;

use super::{Delivery, Taken, Transport, Waker};
use crate::apply::Received;
use crate::error::Error;
use crate::replica::Replica;
use crate::upload::{Refusal, Upload};

/// The next message for the replica, and its id in the queue.
pub fn next(pg: &mut Client, replica: &Replica) -> Result<Option<(String, Vec<u8>)>, Error> {
    take(pg, replica.me()).map_err(failure)
}

/// Releases the message `id`: answers whether the queue held it.
pub fn ack(pg: &mut Client, replica: &Replica, id: &str) -> Result<bool, Error> {
    release(pg, replica.me(), id).map_err(failure)
}

const TAKE: &str = "SELECT id, message FROM sync.next($1)";
const RELEASE: &str = "SELECT sync.ack($1, $2)";
/// Releases a message and takes what is then the head, in one call.
const RELEASE_AND_TAKE: &str = "SELECT id, message FROM sync.ack_next($1, $2)";
/// Files an Up: answers the server's verdict, as its text.
const FILE: &str = "SELECT sync.receive($1, $2)::text";
/// Releases a message (if any), files a report (if any) and takes what is
/// then the head, in one call: the head (or NULLs), whether the report was
/// filed, and whether another message waits behind the head.
const TAKE_AND_REPORT: &str = "SELECT id, message, reported, more FROM sync.take($1, $2, $3)";

/// The message (its id and bytes) that `statement`, TAKE or
/// RELEASE_AND_TAKE as text or prepared, answers, if any.
fn message_of<S: ToStatement + ?Sized>(
    pg: &mut Client,
    statement: &S,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Option<(String, Vec<u8>)>, postgres::Error> {
    Ok(pg
        .query_opt(statement, params)?
        .map(|row| (row.get(0), row.get(1))))
}

/// The verdict FILE (as text or prepared) answers for an Up.
fn verdict_of<S: ToStatement + ?Sized>(
    pg: &mut Client,
    statement: &S,
    me: Uuid,
    bytes: &[u8],
) -> Result<String, postgres::Error> {
    Ok(pg.query_one(statement, &[&me, &bytes])?.get(0))
}

fn take(pg: &mut Client, me: Uuid) -> Result<Option<(String, Vec<u8>)>, postgres::Error> {
    message_of(pg, TAKE, &[&me])
}

fn release(pg: &mut Client, me: Uuid, id: &str) -> Result<bool, postgres::Error> {
    Ok(pg.query_one(RELEASE, &[&me, &id])?.get(0))
}

fn file(pg: &mut Client, me: Uuid, bytes: &[u8]) -> Result<String, postgres::Error> {
    verdict_of(pg, FILE, me, bytes)
}

/// Takes, applies and acknowledges every message waiting for the replica,
/// in order, and answers what the replica made of each. Stops without
/// acknowledging at a message of a later protocol (an error) or when the
/// replica's storage fails (an error: the message comes again).
pub fn deliver(pg: &mut Client, replica: &mut Replica) -> Result<Vec<Received>, Error> {
    let mut received = Vec::new();
    while let Some((id, message)) = next(pg, replica)? {
        let answer = replica.receive(&message)?;
        // Lost, the acknowledgement is harmless: the message comes again,
        // and changes nothing the second time.
        ack(pg, replica, &id)?;
        received.push(answer);
    }
    Ok(received)
}

/// Sends up everything the replica has to say, each Up filed by
/// `sync.receive`, and answers what the server made of each. An Up the
/// server's function refuses stays unsent and is built again next time.
pub fn report(pg: &mut Client, replica: &mut Replica) -> Result<Vec<serde_json::Value>, Error> {
    let mut verdicts = Vec::new();
    while let Some(up) = replica.next_up()? {
        let verdict: String = match file(pg, replica.me(), &up.bytes) {
            Ok(verdict) => verdict,
            Err(e) => {
                replica.refused(&up, Refusal::Transient)?;
                return Err(failure(e));
            }
        };
        replica.sent(&up)?;
        verdicts.push(serde_json::from_str(&verdict).unwrap_or(serde_json::Value::String(verdict)));
    }
    Ok(verdicts)
}

/// One turn of a device's loop: take and apply what waits, then say what
/// there is to say.
pub fn run_once(
    pg: &mut Client,
    replica: &mut Replica,
) -> Result<(Vec<Received>, Vec<serde_json::Value>), Error> {
    let received = deliver(pg, replica)?;
    let verdicts = report(pg, replica)?;
    Ok((received, verdicts))
}

/// The channel the server notifies when messages wait for `replica`
/// (`pg_notify('magic_sync:' || replica, '')`, as a relay pass commits).
pub fn channel(replica: Uuid) -> String {
    format!("magic_sync:{}", replica.hyphenated())
}

/// The device loop's client of the queue: one connection, LISTENing on the
/// replica's channel, so a pass that wrote its messages wakes it; the loop
/// asks anyway every `Options::poll_every`, in case a notification went
/// missing (the connection was down when it was sent).
///
/// TLS: `Queue::new` connects without (through a gateway, a tunnel or a
/// local socket); `Queue::with_tls` takes any of the postgres crate's TLS
/// connectors.
///
/// ```no_run
/// use magic_sync_replica::transport::{queue::Queue, run, Control, Options};
/// use magic_sync_replica::Replica;
///
/// fn device(mut replica: Replica) {
///     let config = "host=head-office dbname=shop user=register".parse().unwrap();
///     let control = Control::new();
///     let steering = control.clone();
///     let looping = std::thread::spawn(move || {
///         let mut queue = Queue::new(config, replica.me());
///         run(&mut replica, &mut queue, &Options::default(), &steering, |status| {
///             println!("{status}")
///         });
///     });
///     control.stop();
///     looping.join().unwrap();
/// }
/// ```
pub struct Queue<T = NoTls> {
    config: Config,
    tls: T,
    me: Uuid,
    connected: Option<Connected>,
    /// What the last acknowledgement found at the head of the queue
    /// (`sync.ack_next`), for the `next` that follows it at once: one call
    /// a message rather than three. Forgotten by anything else the loop
    /// does, after which the queue is asked again.
    after_ack: Option<Option<Delivery<String>>>,
    /// An acknowledgement put off: the last take said nothing waited
    /// behind the message, so the next take (at the next notification, or
    /// with the report of it) carries it, and `settle` sends it otherwise.
    deferred: Option<String>,
    /// Whether the last take said another message waited behind the one
    /// it answered.
    more: bool,
    /// Whether it takes with `sync.take` where the server has it
    /// ([`Queue::in_one_call`], on unless turned off); off, it calls as
    /// 0.1.0 did.
    in_one_call: bool,
}

/// A connection LISTENing on the replica's channel, and the statements the
/// loop runs, prepared once: a statement given as text is parsed, planned
/// and described by the server at every call, a round trip more each.
struct Connected {
    pg: Client,
    take: Statement,
    release_and_take: Statement,
    file: Statement,
    /// `sync.take`, where the server has it (and lets this role call it).
    take_and_report: Option<Statement>,
}

/// What one `sync.take` answered.
struct Answer {
    head: Option<Delivery<String>>,
    reported: bool,
    more: bool,
}

impl Connected {
    fn take(&mut self, me: Uuid) -> Result<Option<Delivery<String>>, postgres::Error> {
        let taken = message_of(&mut self.pg, &self.take, &[&me])?;
        Ok(taken.map(|(handle, bytes)| Delivery { handle, bytes }))
    }

    fn release_and_take(
        &mut self,
        me: Uuid,
        id: &str,
    ) -> Result<Option<Delivery<String>>, postgres::Error> {
        let taken = message_of(&mut self.pg, &self.release_and_take, &[&me, &id])?;
        Ok(taken.map(|(handle, bytes)| Delivery { handle, bytes }))
    }

    fn file(&mut self, me: Uuid, bytes: &[u8]) -> Result<String, postgres::Error> {
        verdict_of(&mut self.pg, &self.file, me, bytes)
    }

    /// One round trip: releases `ack`, files `report`, takes the head.
    /// A server without `sync.take`, or that does not let this role call
    /// it, is asked as before (next, or release and take) from then on.
    fn take_and_report(
        &mut self,
        me: Uuid,
        ack: Option<&str>,
        report: Option<&[u8]>,
    ) -> Result<Answer, postgres::Error> {
        if let Some(statement) = &self.take_and_report {
            match self.pg.query_one(statement, &[&me, &ack, &report]) {
                Ok(row) => {
                    let id: Option<String> = row.get(0);
                    let bytes: Option<Vec<u8>> = row.get(1);
                    return Ok(Answer {
                        head: id
                            .zip(bytes)
                            .map(|(handle, bytes)| Delivery { handle, bytes }),
                        reported: row.get(2),
                        more: row.get(3),
                    });
                }
                Err(e) if cannot_call(&e) => {
                    log::warn!(
                        "the server's sync.take cannot be called ({e}): taking messages as before"
                    );
                    self.take_and_report = None;
                }
                Err(e) => return Err(e),
            }
        }
        let head = match ack {
            Some(id) => self.release_and_take(me, id)?,
            None => self.take(me)?,
        };
        Ok(Answer {
            head,
            reported: false,
            more: true,
        })
    }
}

/// A function the server lacks (a release before 0.2.0), or one this
/// role may not call (let take and acknowledge before the upgrade).
fn cannot_call(error: &postgres::Error) -> bool {
    error.code().is_some_and(|code| {
        code == &SqlState::UNDEFINED_FUNCTION || code == &SqlState::INSUFFICIENT_PRIVILEGE
    })
}

impl Queue<NoTls> {
    /// A client for replica `me`, connecting as `config` says. The
    /// connection is named after the replica unless `config` names it.
    pub fn new(config: Config, me: Uuid) -> Queue<NoTls> {
        Queue::with_tls(config, NoTls, me)
    }
}

impl<T> Queue<T>
where
    T: MakeTlsConnect<Socket> + Clone + Send + 'static,
    T::TlsConnect: Send,
    T::Stream: Send,
    <T::TlsConnect as TlsConnect<Socket>>::Future: Send,
{
    pub fn with_tls(mut config: Config, tls: T, me: Uuid) -> Queue<T> {
        if config.get_application_name().is_none() {
            config.application_name(&format!("magic_sync replica {me}"));
        }
        // A server that does not answer is one to try again later, not
        // one to wait on for good.
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(Duration::from_secs(10));
        }
        Queue {
            config,
            tls,
            me,
            connected: None,
            after_ack: None,
            deferred: None,
            more: true,
            in_one_call: true,
        }
    }

    /// Takes with `sync.take` where the server has it (the default): an
    /// acknowledgement and a report ride the take (docs/src/transports.md).
    /// With 100 registers on this project's machine it cost the server
    /// 0.61 times the CPU a message of the three calls of 0.1.0, and a
    /// change reached them sooner (docs/src/decisions.md, issue 37). Off,
    /// the client calls as 0.1.0's did.
    pub fn in_one_call(mut self, yes: bool) -> Queue<T> {
        self.in_one_call = yes;
        self
    }

    fn connected(&mut self) -> Result<&mut Connected, Error> {
        self.connected
            .as_mut()
            .ok_or_else(|| Error::TransportDown("not connected to the server's queue".to_owned()))
    }

    /// One round trip carrying the acknowledgement put off, if any, and
    /// `report`.
    fn round_trip(&mut self, report: Option<&[u8]>) -> Result<Answer, Error> {
        let me = self.me;
        let ack = self.deferred.take();
        let taken = self
            .connected()?
            .take_and_report(me, ack.as_deref(), report)
            .map_err(failure)?;
        self.more = taken.more;
        Ok(taken)
    }
}

impl<T> Transport for Queue<T>
where
    T: MakeTlsConnect<Socket> + Clone + Send + 'static,
    T::TlsConnect: Send,
    T::Stream: Send,
    <T::TlsConnect as TlsConnect<Socket>>::Future: Send,
{
    /// The message's id in the queue.
    type Handle = String;

    fn connect(&mut self) -> Result<(), Error> {
        self.connected = None;
        self.after_ack = None;
        // Lost, an acknowledgement costs a redelivery, which changes nothing.
        self.deferred = None;
        self.more = true;
        let mut pg = self.config.connect(self.tls.clone()).map_err(failure)?;
        // The channel's name has a colon: quoted, as an identifier.
        let listen = format!("LISTEN \"{}\"", channel(self.me));
        pg.batch_execute(&listen).map_err(failure)?;
        let take = pg.prepare(TAKE).map_err(failure)?;
        let release_and_take = pg.prepare(RELEASE_AND_TAKE).map_err(failure)?;
        let file = pg.prepare(FILE).map_err(failure)?;
        let take_and_report = if self.in_one_call {
            match pg.prepare(TAKE_AND_REPORT) {
                Ok(statement) => Some(statement),
                Err(e) if cannot_call(&e) => None,
                Err(e) => return Err(failure(e)),
            }
        } else {
            None
        };
        self.connected = Some(Connected {
            pg,
            take,
            release_and_take,
            file,
            take_and_report,
        });
        Ok(())
    }

    fn next(&mut self) -> Result<Option<Delivery<String>>, Error> {
        if let Some(found) = self.after_ack.take() {
            return Ok(found);
        }
        Ok(self.round_trip(None)?.head)
    }

    fn ack(&mut self, handle: String) -> Result<(), Error> {
        // Nothing waited behind it when it was taken: the next take carries
        // the acknowledgement, with the report of the message, or at the
        // next pass's notification. Whatever comes meanwhile is notified.
        if !self.more {
            self.deferred = Some(handle);
            self.after_ack = Some(None);
            return Ok(());
        }
        // A message the queue no longer held (acknowledged before, the
        // acknowledgement's answer lost) is gone all the same.
        self.deferred = Some(handle);
        let head = self.round_trip(None)?.head;
        self.after_ack = Some(head);
        Ok(())
    }

    fn carries_reports(&self) -> bool {
        self.connected
            .as_ref()
            .is_some_and(|c| c.take_and_report.is_some())
    }

    fn take(&mut self, report: Option<&Upload>) -> Result<Taken<String>, Error> {
        let Some(report) = report else {
            return Ok(Taken {
                delivery: self.next()?,
                reported: false,
            });
        };
        self.after_ack = None;
        let answer = self.round_trip(Some(&report.bytes))?;
        Ok(Taken {
            delivery: answer.head,
            reported: answer.reported,
        })
    }

    fn settle(&mut self) -> Result<(), Error> {
        if self.deferred.is_some() {
            self.after_ack = None;
            self.round_trip(None)?;
        }
        Ok(())
    }

    fn send(&mut self, up: &Upload) -> Result<(), Error> {
        // Filing may queue a Filed: the queue is asked again.
        self.after_ack = None;
        let me = self.me;
        let verdict = self.connected()?.file(me, &up.bytes).map_err(failure)?;
        log::debug!("the server filed an Up of lane {}: {verdict}", up.lane);
        Ok(())
    }

    fn wait(&mut self, timeout: Duration) -> Result<bool, Error> {
        // Whatever woke the loop (news, or its poll), it asks the queue.
        self.after_ack = None;
        let mut notifications = self.connected()?.pg.notifications();
        let news = notifications
            .timeout_iter(timeout)
            .next()
            .map_err(failure)?;
        Ok(news.is_some())
    }

    /// None: the postgres crate's wait cannot be cut short from another
    /// thread, so the loop waits in slices.
    fn waker(&self) -> Option<Waker> {
        None
    }
}

/// Whose fault a failure of the server's database is, by its SQLSTATE's
/// class: the connection, a conflict, the server short of resources or
/// shutting down, a standby, a lock — transient, and so is a server of an
/// earlier protocol, until it is upgraded; anything else (a permission,
/// bytes it will not take) is a refusal for good. A failure
/// with no SQLSTATE is the connection's.
fn failure(error: postgres::Error) -> Error {
    let Some(code) = error.code() else {
        return Error::TransportDown(error.to_string());
    };
    const TRANSIENT: [&str; 7] = ["08", "25", "40", "53", "55", "57", "58"];
    // 0A000: the server speaks an earlier protocol than this build's Up
    // (or cannot do it yet): sent again until it is upgraded, never set
    // aside as a refusal for good.
    if TRANSIENT.contains(&&code.code()[..2]) || code == &SqlState::FEATURE_NOT_SUPPORTED {
        Error::TransportDown(error.to_string())
    } else {
        Error::TransportRefused(error.to_string())
    }
}

//! One link: a device's WebSocket, the topics it opened (one per
//! replica), and what the gateway does on each frame and request
//! (docs/src/aweft-link.md says the same in prose).
//!
//! A link does one thing at a time: it reads a frame, does what it says
//! (files an Up, takes the next message) and only then reads the next. A
//! device that sends faster than the gateway files is slowed by its own
//! socket, and nothing piles up in the gateway.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use axum::extract::ws::{Message, WebSocket};
use tokio::sync::{mpsc, watch};
use uuid::Uuid;

use crate::credentials::{Authenticate, Identity, Refusal};
use crate::database::{Ear, Event, Filed, Listener, Pool};
use crate::link::reasons::*;
use crate::link::{replica_named, root_of, topic_name, Frame, NotAFrame, Reason, Request, Root};
use crate::Settings;

/// What every link shares.
pub(crate) struct Shared {
    pub settings: Settings,
    pub pool: Pool,
    pub listener: Arc<Listener>,
    pub auth: Arc<dyn Authenticate>,
    pub links: AtomicUsize,
    pub next_link: AtomicU64,
    pub stopping: watch::Receiver<bool>,
}

/// A place among the links the gateway carries, given back when dropped.
pub(crate) struct Slot(pub Arc<Shared>);

impl Slot {
    /// Takes a place, if one is free.
    pub fn take(shared: &Arc<Shared>) -> Option<Slot> {
        let max = shared.settings.max_links;
        let taken = shared
            .links
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            });
        taken.ok().map(|_| Slot(shared.clone()))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.links.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A topic the device opened.
struct Topic {
    replica: Uuid,
    /// The gateway's number for it.
    ours: u64,
    /// The sequence of the last commit sent down.
    sent: u64,
    /// The message sent and not acknowledged yet: its sequence and its id
    /// in the queue. One at a time (protocol 2.3).
    in_flight: Option<(u64, String)>,
}

/// Why a link ends.
enum Ending {
    /// The device closed it, or the socket went.
    Closed,
    /// The gateway ends it with a fault on topic 0.
    Fault(&'static str, String),
    /// The database failed: the device comes back later.
    Database(tokio_postgres::Error),
}

type Step = Result<(), Ending>;

struct Session {
    id: u64,
    ws: WebSocket,
    shared: Arc<Shared>,
    ear: Ear,
    /// The replicas the link's credentials allow, each with what revokes it.
    allowed: HashMap<Uuid, Option<Uuid>>,
    /// Open topics, by the device's number.
    topics: HashMap<u64, Topic>,
    /// The last topic number the gateway gave.
    ours: u64,
}

/// Runs one link until it ends.
pub(crate) async fn run(ws: WebSocket, slot: Slot, presented: Vec<Identity>) {
    let shared = slot.0.clone();
    let (events_in, mut events) = mpsc::channel(64);
    let ear = Ear {
        events: events_in,
        overflowed: Default::default(),
    };
    let mut session = Session {
        id: shared.next_link.fetch_add(1, Ordering::Relaxed),
        ws,
        shared,
        ear,
        allowed: HashMap::new(),
        topics: HashMap::new(),
        ours: 0,
    };
    for identity in presented {
        session.allow(identity);
    }
    let ending = session.serve(&mut events).await;
    session.end(ending).await;
    drop(slot);
}

/// What woke the link.
enum Woke {
    Stop,
    Event(Option<Event>),
    Received(Option<Result<Message, axum::Error>>),
    Idle,
}

impl Session {
    async fn serve(&mut self, events: &mut mpsc::Receiver<Event>) -> Ending {
        let mut stopping = self.shared.stopping.clone();
        let idle = self.shared.settings.idle_timeout;
        loop {
            let woke = tokio::select! {
                biased;
                _ = stopping.wait_for(|stop| *stop) => Woke::Stop,
                event = events.recv() => Woke::Event(event),
                received = tokio::time::timeout(idle, self.ws.recv()) => match received {
                    Ok(message) => Woke::Received(message),
                    Err(_) => Woke::Idle,
                },
            };
            let step = match woke {
                Woke::Stop => Err(Ending::Fault(GOING_AWAY, "the gateway is stopping".into())),
                Woke::Idle => Err(Ending::Fault(IDLE, format!("nothing heard for {idle:?}"))),
                Woke::Event(Some(event)) => self.on_event(event).await,
                Woke::Event(None) => Ok(()),
                Woke::Received(Some(Ok(message))) => self.on_message(message).await,
                Woke::Received(_) => Err(Ending::Closed),
            };
            if let Err(ending) = step {
                return ending;
            }
        }
    }

    async fn end(&mut self, ending: Ending) {
        let fault = match ending {
            Ending::Closed => None,
            Ending::Fault(reason, message) => Some((reason, message)),
            Ending::Database(e) => {
                log::warn!("link {}: the database failed ({e}): the link ends", self.id);
                Some((SERVER_AWAY, "the gateway lost its database".to_owned()))
            }
        };
        if let Some((reason, message)) = fault {
            let frame = Frame::Fault {
                topic: 0,
                reason: reason.to_owned(),
                message,
            };
            let _ = self.ws.send(Message::Binary(frame.encode().into())).await;
            let _ = self.ws.send(Message::Close(None)).await;
        }
        let replicas: HashSet<Uuid> = self.topics.values().map(|t| t.replica).collect();
        self.shared.listener.forget_link(self.id, &replicas);
    }

    fn allow(&mut self, identity: Identity) {
        if let Some(credential) = identity.credential {
            self.shared.listener.hold(self.id, credential, &self.ear);
        }
        self.allowed.insert(identity.replica, identity.credential);
    }

    async fn send_frame(&mut self, frame: Frame) -> Step {
        let bytes = frame.encode();
        self.ws
            .send(Message::Binary(bytes.into()))
            .await
            .map_err(|_| Ending::Closed)
    }

    async fn send_request(&mut self, request: Request) -> Step {
        self.ws
            .send(Message::Text(request.to_text().into()))
            .await
            .map_err(|_| Ending::Closed)
    }

    /// A fault about one topic, named by the number the frame carried: the
    /// topic ends, and the link goes on.
    async fn fault(&mut self, topic: u64, reason: &str, message: String) -> Step {
        self.send_frame(Frame::Fault {
            topic,
            reason: reason.to_owned(),
            message,
        })
        .await
    }

    async fn refuse(&mut self, reason: &str, message: String, topic: Option<u64>) -> Step {
        self.send_request(Request::refused(reason, message, topic))
            .await
    }

    async fn on_event(&mut self, event: Event) -> Step {
        if self.ear.overflowed.swap(false, Ordering::AcqRel) {
            // An event lost to a full channel may have been any replica's
            // wake, or a revocation.
            self.recheck_credentials().await?;
            self.deliver_each(self.topics_of(|_| true)).await?;
        }
        match event {
            Event::Wake(replica) => {
                let topics: Vec<u64> = self.topics_of(|t| t.replica == replica);
                self.deliver_each(topics).await
            }
            Event::WakeAll => self.deliver_each(self.topics_of(|_| true)).await,
            Event::Revoked(credential) => {
                if self.allowed.values().any(|c| *c == Some(credential)) {
                    return Err(Ending::Fault(
                        REVOKED,
                        "a credential of this link was revoked".into(),
                    ));
                }
                Ok(())
            }
        }
    }

    /// Ends the link when a credential it holds is revoked now.
    async fn recheck_credentials(&mut self) -> Step {
        let held: Vec<Uuid> = self.allowed.values().flatten().copied().collect();
        if held.is_empty() {
            return Ok(());
        }
        let client = self.shared.pool.client().await.map_err(Ending::Database)?;
        let live = client
            .query(
                "SELECT id FROM magic_sync_gateway.credentials \
                 WHERE id = ANY($1) AND revoked_at IS NULL",
                &[&held],
            )
            .await
            .map_err(Ending::Database)?;
        if live.len() < held.len() {
            return Err(Ending::Fault(
                REVOKED,
                "a credential of this link was revoked".into(),
            ));
        }
        Ok(())
    }

    fn topics_of(&self, pick: impl Fn(&Topic) -> bool) -> Vec<u64> {
        self.topics
            .iter()
            .filter(|(_, t)| pick(t))
            .map(|(n, _)| *n)
            .collect()
    }

    async fn deliver_each(&mut self, topics: Vec<u64>) -> Step {
        for topic in topics {
            self.deliver(topic).await?;
        }
        Ok(())
    }

    async fn on_message(&mut self, message: Message) -> Step {
        match message {
            Message::Binary(bytes) => self.on_frame_bytes(&bytes).await,
            Message::Text(text) => self.on_request(text.as_str()).await,
            Message::Close(_) => Err(Ending::Closed),
            // The socket answers pings itself.
            Message::Ping(_) | Message::Pong(_) => Ok(()),
        }
    }

    async fn on_frame_bytes(&mut self, bytes: &[u8]) -> Step {
        match Frame::decode(bytes) {
            Ok(frame) => self.on_frame(frame).await,
            Err(NotAFrame::BadFrame(why)) => {
                self.refuse(BAD_FRAME, why.to_owned(), topic_carried(bytes))
                    .await
            }
            Err(NotAFrame::Undecodable(why)) => Err(Ending::Fault(
                why.reason(),
                format!("a frame that does not decode: {why}"),
            )),
        }
    }

    async fn on_frame(&mut self, frame: Frame) -> Step {
        if let Frame::Fault { topic, .. } = &frame {
            return self.on_fault(*topic);
        }
        if let Frame::Open {
            topic,
            name,
            root,
            want,
        } = frame
        {
            return self.on_open(topic, &name, root, want).await;
        }
        let topic = frame.topic();
        if !self.topics.contains_key(&topic) {
            return self
                .fault(
                    topic,
                    NO_TOPIC,
                    format!("nothing here is open as topic {topic}"),
                )
                .await;
        }
        match frame {
            Frame::Commits { first, commits, .. } => self.file(topic, first, commits).await,
            Frame::State { .. } => {
                let why = "the server's document is not the device's to replace";
                self.refuse(NOT_TAKEN, why.into(), Some(topic)).await
            }
            Frame::Refused { seq, reasons, .. } => {
                // The device could not take a message (a later protocol):
                // it stays in flight, and the device tries it again.
                let codes: Vec<&str> = reasons.iter().map(|r| r.code.as_str()).collect();
                log::info!(
                    "link {}: topic {topic} refused commit {seq}: {codes:?}",
                    self.id
                );
                Ok(())
            }
            Frame::Leave { .. } => {
                self.close_topic(topic);
                Ok(())
            }
            Frame::Open { .. } | Frame::Fault { .. } => unreachable!("handled above"),
        }
    }

    /// A fault from the device names the topic by the gateway's number, or
    /// the link (0). Never answered: a fault answering a fault loops.
    fn on_fault(&mut self, ours: u64) -> Step {
        if ours == 0 {
            return Err(Ending::Closed);
        }
        if let Some(topic) = self.topics_of(|t| t.ours == ours).first() {
            self.close_topic(*topic);
        }
        Ok(())
    }

    fn close_topic(&mut self, topic: u64) {
        if let Some(t) = self.topics.remove(&topic) {
            // A message in flight stays in the queue: it comes again.
            self.shared.listener.drop_replica(self.id, t.replica);
        }
    }

    async fn on_open(&mut self, topic: u64, name: &str, root: Option<Root>, want: bool) -> Step {
        if let Some(open) = self.topics.get(&topic) {
            if want && replica_named(name) == Some(open.replica) {
                // Open again with want, on a live topic: answered with state.
                let ours = open.ours;
                return self
                    .send_frame(Frame::State {
                        topic: ours,
                        commit: None,
                    })
                    .await;
            }
            return self
                .fault(
                    topic,
                    TOPIC_IN_USE,
                    format!("topic {topic} is open already"),
                )
                .await;
        }
        let Some(replica) = replica_named(name) else {
            let why = format!("{name:?} names no replica (magic_sync/<uuid>)");
            return self.fault(topic, NO_DOCUMENT, why).await;
        };
        if !self.allowed.contains_key(&replica) {
            let why = format!("no credential of this link allows {replica}");
            return self.fault(topic, NOT_ALLOWED, why).await;
        }
        if self.topics.values().any(|t| t.replica == replica) {
            let why = format!("{replica} is open on this link already");
            return self.fault(topic, TOPIC_IN_USE, why).await;
        }
        let ours = root_of(replica);
        if root.as_ref().is_some_and(|theirs| *theirs != ours) {
            let why = format!("the root is not {replica}'s");
            return self.fault(topic, ROOT_MISMATCH, why).await;
        }
        self.ours += 1;
        let number = self.ours;
        self.topics.insert(
            topic,
            Topic {
                replica,
                ours: number,
                sent: 0,
                in_flight: None,
            },
        );
        self.shared.listener.carry(self.id, replica, &self.ear);
        self.send_frame(Frame::Open {
            topic: number,
            name: topic_name(replica),
            root: Some(ours),
            want: false,
        })
        .await?;
        if want {
            // Nothing to drop at a device that holds nothing: its
            // provisioning comes as commits, through the replica's chain.
            self.send_frame(Frame::State {
                topic: number,
                commit: None,
            })
            .await?;
        }
        self.deliver(topic).await
    }

    /// Sends the topic's next message, unless one is in flight.
    async fn deliver(&mut self, topic: u64) -> Step {
        let Some(t) = self.topics.get(&topic) else {
            return Ok(());
        };
        if t.in_flight.is_some() {
            return Ok(());
        }
        let replica = t.replica;
        let taken = self.shared.pool.take(replica).await;
        match taken.map_err(Ending::Database)? {
            Some(message) => self.send_down(topic, message).await,
            None => Ok(()),
        }
    }

    async fn send_down(&mut self, topic: u64, (id, bytes): (String, Vec<u8>)) -> Step {
        let Some(t) = self.topics.get_mut(&topic) else {
            return Ok(());
        };
        t.sent += 1;
        let (ours, seq) = (t.ours, t.sent);
        t.in_flight = Some((seq, id));
        self.send_frame(Frame::Commits {
            topic: ours,
            first: seq,
            commits: vec![bytes],
        })
        .await
    }

    /// Files the device's Ups, in order, each under the topic's replica.
    async fn file(&mut self, topic: u64, first: u64, commits: Vec<Vec<u8>>) -> Step {
        let (replica, ours) = {
            let t = &self.topics[&topic];
            (t.replica, t.ours)
        };
        for (seq, up) in (first..).zip(commits) {
            let limit = self.shared.settings.message_bytes;
            let filed = if up.len() > limit {
                let why = format!("{} bytes, more than a message takes ({limit})", up.len());
                Filed::Refused(TOO_LARGE, why)
            } else {
                let filed = self.shared.pool.file(replica, &up).await;
                filed.map_err(Ending::Database)?
            };
            match filed {
                Filed::Taken(_) => {
                    self.send_request(Request::Taken { topic: ours, seq })
                        .await?
                }
                Filed::Refused(code, message) => {
                    let reasons = vec![Reason::new(code, message)];
                    let frame = Frame::Refused {
                        topic: ours,
                        seq,
                        reasons,
                    };
                    self.send_frame(frame).await?
                }
            }
        }
        // Filing wrote a Filed, which no notification announces.
        self.deliver(topic).await
    }

    async fn on_request(&mut self, text: &str) -> Step {
        let Some(request) = Request::from_text(text) else {
            let why = "a text message is a request of the mapping (JSON with a type)";
            return self.refuse(BAD_REQUEST, why.into(), None).await;
        };
        match request {
            Request::Ack { topic, seq } => self.on_ack(topic, seq).await,
            Request::Ping { id } => self.send_request(Request::Pong { id }).await,
            Request::Pong { .. } => Ok(()),
            Request::Credential { token } => self.on_credential(&token).await,
            Request::Allowed { .. } | Request::Taken { .. } | Request::Refused { .. } => {
                let why = "a request only the gateway sends";
                self.refuse(BAD_REQUEST, why.into(), None).await
            }
        }
    }

    async fn on_ack(&mut self, topic: u64, seq: u64) -> Step {
        let Some(t) = self.topics.get_mut(&topic) else {
            let why = format!("nothing here is open as topic {topic}");
            return self.refuse(NO_TOPIC, why, Some(topic)).await;
        };
        let id = match &t.in_flight {
            Some((in_flight, id)) if *in_flight == seq => id.clone(),
            _ => {
                let why = format!("commit {seq} is not the one in flight on topic {topic}");
                return self.refuse(NOT_IN_FLIGHT, why, Some(topic)).await;
            }
        };
        t.in_flight = None;
        let replica = t.replica;
        let next = self.shared.pool.release_and_take(replica, &id).await;
        match next.map_err(Ending::Database)? {
            Some(message) => self.send_down(topic, message).await,
            None => Ok(()),
        }
    }

    async fn on_credential(&mut self, token: &str) -> Step {
        let client = self.shared.pool.client().await.map_err(Ending::Database)?;
        match self.shared.auth.authenticate(token, &client).await {
            Ok(identity) => {
                let replica = identity.replica.hyphenated().to_string();
                self.allow(identity);
                self.send_request(Request::Allowed { replica }).await
            }
            Err(Refusal::NotTaken(why)) => self.refuse(BAD_CREDENTIAL, why.into(), None).await,
            Err(Refusal::Database(e)) => Err(Ending::Database(e)),
        }
    }
}

/// The topic a frame of the wrong shape carried, when its second element
/// is a number: said with the refusal, to help whoever reads it.
fn topic_carried(bytes: &[u8]) -> Option<u64> {
    use crate::link::value::Value;
    match Value::decode(bytes).ok()? {
        Value::Array(items) => match items.get(1) {
            Some(Value::Int(n)) if *n >= 0 => Some(*n as u64),
            _ => None,
        },
        _ => None,
    }
}

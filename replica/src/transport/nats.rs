//! The NATS JetStream client (feature `nats`), by the conventions of
//! `nats_subjects`: it takes the replica's messages from its durable pull
//! consumer one at a time, acknowledges each with a double ack (the server
//! confirms it, so an acknowledgement lost is known), and publishes each Up
//! to its lane's subject, awaiting the stream's acknowledgement.
//!
//! Its API is blocking: it drives async-nats from a tokio runtime of its
//! own, on the calling thread (a current-thread runtime), so the device
//! program needs no async runtime. The wait for news is a pull that waits
//! at the server (`fetch_expiry`); a stop or a poke cuts it short, and the
//! pull stays in flight for the next wait, so a message on its way is
//! never dropped.
//!
//! ```no_run
//! use magic_sync_replica::transport::nats::{Credentials, Nats, NatsSettings};
//! use magic_sync_replica::transport::{run, Control, Options};
//! use magic_sync_replica::{Error, Replica};
//!
//! fn device(mut replica: Replica) -> Result<(), Error> {
//!     let mut settings = NatsSettings::new("nats://nats.head-office:4222");
//!     settings.credentials = Credentials::File("/etc/register/nats.creds".into());
//!     let mut nats = Nats::new(settings, &replica)?;
//!     let control = Control::new();
//!     let steering = control.clone();
//!     let looping = std::thread::spawn(move || {
//!         run(&mut replica, &mut nats, &Options::default(), &steering, |status| {
//!             println!("{status}")
//!         });
//!     });
//!     // ... rows written through another connection, then:
//!     control.poke();
//!     // ... and at the end:
//!     control.stop();
//!     looping.join().unwrap();
//!     Ok(())
//! }
//! ```

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::connection::State;
use async_nats::jetstream::consumer::{pull, PullConsumer};
use async_nats::jetstream::context::{PublishError, PublishErrorKind};
use async_nats::jetstream::stream::{ConsumerError, ConsumerErrorKind};
use async_nats::jetstream::ErrorCode;
use async_nats::jetstream::{self, AckKind, Message};
use async_nats::{ConnectErrorKind, ConnectOptions, Event, HeaderMap, ServerAddr};
use futures_util::StreamExt;
use tokio::runtime::Runtime;
use tokio::sync::Notify;
use uuid::Uuid;

use super::backoff::Backoff;
use super::nats_subjects::{self as subjects, DEFAULT_PREFIX, DOWN_STREAM, MSG_ID};
use super::{Delivery, Transport, Waker};
use crate::error::Error;
use crate::replica::Replica;
use crate::upload::Upload;

/// How long `next` gives a pull already waiting at the server to hand over
/// what it has. With none waiting, `next` asks for what is there now, and
/// the server answers at once, with a message or with none. Either way a
/// message that comes later is taken by the wait that follows.
const PULL_IN_HAND: Duration = Duration::from_millis(10);

/// What the device says of its NATS installation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NatsSettings {
    /// The servers, as `nats://host:port` (or `host:port`), tried in turn.
    pub servers: Vec<String>,
    pub credentials: Credentials,
    /// The first token of every subject (`magic_sync`).
    pub prefix: String,
    /// The stream of messages down (`MAGIC_SYNC_DOWN`).
    pub down_stream: String,
    /// How long one pull waits at the server for a message.
    pub fetch_expiry: Duration,
    /// How long a request (a publish's acknowledgement, a double ack, the
    /// consumer's info, connecting) waits for its answer.
    pub request_timeout: Duration,
    /// How long nothing may come before the client asks its consumer
    /// whether messages wait all the same: if they do, the consumer is
    /// stuck (issue 29), and `wait` fails, so that the loop connects again
    /// and the replica tells the server where it stands.
    pub stuck_after: Duration,
}

impl NatsSettings {
    /// The defaults, with one server.
    pub fn new(server: impl Into<String>) -> NatsSettings {
        NatsSettings {
            servers: vec![server.into()],
            credentials: Credentials::None,
            prefix: DEFAULT_PREFIX.to_owned(),
            down_stream: DOWN_STREAM.to_owned(),
            fetch_expiry: Duration::from_secs(5),
            request_timeout: Duration::from_secs(5),
            stuck_after: Duration::from_secs(30),
        }
    }
}

/// Who the device is to the NATS server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Credentials {
    None,
    /// A `.creds` file (a user JWT and its NKey seed).
    File(PathBuf),
    UserPassword {
        user: String,
        password: String,
    },
}

/// A message delivered, to acknowledge by.
pub struct Delivered(Message);

/// The device loop's client of NATS JetStream, for one replica.
pub struct Nats {
    settings: NatsSettings,
    me: Uuid,
    runtime: Runtime,
    link: Option<Link>,
    /// A message fetched and not handed to the loop yet.
    stash: Option<Message>,
    /// A pull waiting at the server.
    pull: Option<pull::Batch>,
    /// Cuts a wait short: a stop, a poke, the connection lost.
    wake: Arc<Notify>,
    /// Where the last message was acknowledged (its reply subject).
    last_ack: Option<async_nats::Subject>,
    /// Since when nothing came: past `stuck_after`, the consumer is asked
    /// whether messages wait all the same.
    quiet_since: Instant,
}

/// One connection, and the replica's consumer once the server made it.
struct Link {
    client: async_nats::Client,
    js: jetstream::Context,
    consumer: Option<PullConsumer>,
    /// Until the server made the consumer: when to look again.
    look_at: Instant,
    looks: Backoff,
}

impl Nats {
    /// A client for `replica`, its lanes as it was opened with. Refuses
    /// lanes whose subject tokens meet (see `nats_subjects::lane_of_token`).
    pub fn new(settings: NatsSettings, replica: &Replica) -> Result<Nats, Error> {
        let lanes = &replica.settings().lanes;
        for (i, lane) in lanes.iter().enumerate() {
            let token = subjects::lane_token(&lane.name);
            if let Some(other) = lanes[..i]
                .iter()
                .find(|l| subjects::lane_token(&l.name) == token)
            {
                return Err(Error::Declaration(format!(
                    "lanes `{}` and `{}` go on the same NATS subject (`{token}`): rename one",
                    other.name, lane.name
                )));
            }
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Error::TransportDown(format!("the NATS client's runtime: {e}")))?;
        Ok(Nats {
            settings,
            me: replica.me(),
            runtime,
            link: None,
            stash: None,
            pull: None,
            wake: Arc::new(Notify::new()),
            last_ack: None,
            quiet_since: Instant::now(),
        })
    }

    fn options(&self) -> ConnectOptions {
        let wake = self.wake.clone();
        ConnectOptions::new()
            .name(format!("magic_sync replica {}", self.me))
            .custom_inbox_prefix(subjects::inbox_prefix(self.me))
            .connection_timeout(self.settings.request_timeout)
            .request_timeout(Some(self.settings.request_timeout))
            .event_callback(move |event| {
                let wake = wake.clone();
                async move {
                    // A wait ends at once when the connection goes, and the
                    // loop connects again.
                    if matches!(event, Event::Disconnected) {
                        wake.notify_one();
                    }
                }
            })
    }

    /// Waits up to `timeout` for the next message, kept in `stash`;
    /// answers whether one came. `wakeable`: a stop or a poke ends it.
    fn pull_for(&mut self, timeout: Duration, wakeable: bool) -> Result<bool, Error> {
        if self.stash.is_some() {
            return Ok(true);
        }
        let Nats {
            settings,
            me,
            runtime,
            link,
            stash,
            pull,
            wake,
            ..
        } = self;
        let link = link.as_mut().ok_or_else(not_connected)?;
        runtime.block_on(async {
            let deadline = tokio::time::sleep(timeout);
            tokio::pin!(deadline);
            loop {
                link.check()?;
                if pull.is_none() {
                    let Some(consumer) = link.consumer(&settings.down_stream, *me).await? else {
                        let look_at = tokio::time::Instant::from_std(link.look_at);
                        tokio::select! {
                            _ = tokio::time::sleep_until(look_at) => continue,
                            _ = wake.notified(), if wakeable => return Ok(false),
                            _ = &mut deadline => return Ok(false),
                        }
                    };
                    let batch = consumer
                        .batch()
                        .max_messages(1)
                        .expires(settings.fetch_expiry)
                        .messages()
                        .await
                        .map_err(|e| Error::TransportDown(format!("a pull: {e}")))?;
                    *pull = Some(batch);
                }
                let batch = pull.as_mut().expect("a pull waits at the server");
                tokio::select! {
                    item = batch.next() => match item {
                        Some(Ok(message)) => {
                            *pull = None;
                            *stash = Some(message);
                            return Ok(true);
                        }
                        Some(Err(e)) => {
                            // The server ended the pull (the consumer
                            // deleted, say): look the consumer up again.
                            *pull = None;
                            link.consumer = None;
                            return Err(Error::TransportDown(format!("a pull: {e}")));
                        }
                        // It expired with nothing: pull again.
                        None => *pull = None,
                    },
                    _ = wake.notified(), if wakeable => return Ok(false),
                    _ = &mut deadline => return Ok(false),
                }
            }
        })
    }

    /// Asks the server for the next message, if one waits now, into
    /// `stash` (a pull that does not wait: the answer is a message, or
    /// that there is none). Only while no other pull is at the server.
    fn take_waiting(&mut self) -> Result<(), Error> {
        if self.stash.is_some() {
            return Ok(());
        }
        let Nats {
            settings,
            me,
            runtime,
            link,
            stash,
            ..
        } = self;
        let link = link.as_mut().ok_or_else(not_connected)?;
        runtime.block_on(async {
            link.check()?;
            let Some(consumer) = link.consumer(&settings.down_stream, *me).await? else {
                return Ok(());
            };
            let mut batch = consumer
                .fetch()
                .max_messages(1)
                .messages()
                .await
                .map_err(|e| Error::TransportDown(format!("a fetch: {e}")))?;
            let answer = tokio::time::timeout(settings.request_timeout, batch.next()).await;
            match answer {
                Ok(Some(Ok(message))) => *stash = Some(message),
                Ok(Some(Err(e))) => {
                    link.consumer = None;
                    return Err(Error::TransportDown(format!("a fetch: {e}")));
                }
                // Nothing waits.
                Ok(None) => {}
                Err(_) => {
                    return Err(Error::TransportDown(format!(
                        "a fetch went unanswered for {:?}",
                        settings.request_timeout
                    )))
                }
            }
            Ok(())
        })
    }
}

impl Nats {
    /// After `stuck_after` with nothing delivered, asks the consumer what
    /// it holds for the replica. Messages waiting, or one pending while
    /// the client holds none, mean it hands out nothing it should: a
    /// consumer whose pending message the stream no longer holds (a kill
    /// of nats-server just after an acknowledgement) stays so for good.
    /// The loop then connects again, and the replica says where it stands,
    /// so that the server sees it alive and not moving, and heals it. A
    /// message that came just as the consumer was asked costs one such
    /// reconnection, nothing more.
    fn fail_if_stuck(&mut self) -> Result<(), Error> {
        if self.stash.is_some() || self.quiet_since.elapsed() < self.settings.stuck_after {
            return Ok(());
        }
        self.quiet_since = Instant::now();
        let Nats {
            settings,
            me,
            runtime,
            link,
            ..
        } = self;
        let link = link.as_mut().ok_or_else(not_connected)?;
        let held = runtime.block_on(async {
            let Some(mut consumer) = link.consumer(&settings.down_stream, *me).await? else {
                return Ok::<_, Error>(None);
            };
            let info = tokio::time::timeout(settings.request_timeout, consumer.info())
                .await
                .map_err(|_| Error::TransportDown("the consumer's info went unanswered".into()))?
                .map_err(|e| Error::TransportDown(format!("the consumer's info: {e}")))?;
            Ok(Some((info.num_pending, info.num_ack_pending)))
        })?;
        match held {
            Some((waiting, pending)) if waiting > 0 || pending > 0 => {
                Err(Error::TransportDown(format!(
                    "its consumer holds {waiting} message(s) waiting and {pending} pending, \
                     yet none came for {:?}",
                    settings.stuck_after
                )))
            }
            _ => Ok(()),
        }
    }
}

impl Link {
    fn check(&self) -> Result<(), Error> {
        match self.client.connection_state() {
            State::Connected => Ok(()),
            _ => Err(not_connected()),
        }
    }

    /// The replica's consumer; `None` while the server has made none, that
    /// is, has sent the replica nothing yet (looked for again after a pause
    /// that doubles, to 30 s).
    async fn consumer(&mut self, stream: &str, me: Uuid) -> Result<Option<PullConsumer>, Error> {
        if let Some(consumer) = &self.consumer {
            return Ok(Some(consumer.clone()));
        }
        if Instant::now() < self.look_at {
            return Ok(None);
        }
        let name = subjects::consumer_name(me);
        match self
            .js
            .get_consumer_from_stream::<pull::Config, _, _>(&name, stream)
            .await
        {
            Ok(consumer) => {
                self.looks.reset();
                self.consumer = Some(consumer.clone());
                Ok(Some(consumer))
            }
            Err(e) if not_made_yet(&e) => {
                let pause = self.looks.pause();
                self.look_at = Instant::now() + pause;
                log::info!(
                    "waiting: the server has sent replica {me} nothing yet \
                     (no consumer {name} on {stream}); looking again in {pause:?}"
                );
                Ok(None)
            }
            Err(e) => Err(consumer_failure(e)),
        }
    }
}

impl Transport for Nats {
    type Handle = Delivered;

    fn connect(&mut self) -> Result<(), Error> {
        self.link = None;
        self.pull = None;
        self.quiet_since = Instant::now();
        // Delivered on the connection given up: it comes again.
        self.stash = None;
        let servers = self
            .settings
            .servers
            .iter()
            .map(|s| {
                s.parse::<ServerAddr>().map_err(|e| {
                    Error::TransportRefused(format!("the NATS server address `{s}`: {e}"))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let options = self.options();
        let credentials = self.settings.credentials.clone();
        let timeout = self.settings.request_timeout;
        let last_ack = self.last_ack.clone();
        let (client, js) = self.runtime.block_on(async {
            let options = match credentials {
                Credentials::None => options,
                Credentials::UserPassword { user, password } => {
                    options.user_and_password(user, password)
                }
                Credentials::File(path) => options.credentials_file(&path).await.map_err(|e| {
                    Error::TransportRefused(format!("the credentials file {}: {e}", path.display()))
                })?,
            };
            let client = options.connect(servers).await.map_err(|e| match e.kind() {
                ConnectErrorKind::Authentication
                | ConnectErrorKind::AuthorizationViolation
                | ConnectErrorKind::ServerParse
                | ConnectErrorKind::Tls => {
                    Error::TransportRefused(format!("connecting to NATS: {e}"))
                }
                _ => Error::TransportDown(format!("connecting to NATS: {e}")),
            })?;
            // Inside the runtime: the context spawns a task of its own.
            let mut js = jetstream::new(client.clone());
            js.set_timeout(timeout);
            // A server stopped just after confirming an acknowledgement may
            // not have kept it, and would deliver that message again only
            // once its ack_wait ran out: it is acknowledged again, which
            // releases that message and no other.
            if let Some(reply) = last_ack {
                let _ = client.publish(reply, "+ACK".into()).await;
            }
            Ok::<_, Error>((client, js))
        })?;
        self.link = Some(Link {
            client,
            js,
            consumer: None,
            look_at: Instant::now(),
            looks: Backoff::new(Duration::from_millis(100), Duration::from_secs(30)),
        });
        Ok(())
    }

    fn next(&mut self) -> Result<Option<Delivery<Delivered>>, Error> {
        if self.pull.is_some() {
            self.pull_for(PULL_IN_HAND, false)?;
        } else {
            self.take_waiting()?;
        }
        let delivery = self.stash.take().map(|message| Delivery {
            bytes: message.payload.to_vec(),
            handle: Delivered(message),
        });
        if delivery.is_some() {
            self.quiet_since = Instant::now();
        }
        Ok(delivery)
    }

    fn ack(&mut self, handle: Delivered) -> Result<(), Error> {
        self.last_ack = handle.0.reply.clone();
        self.runtime
            .block_on(handle.0.double_ack())
            .map_err(|e| Error::TransportDown(format!("the acknowledgement went unconfirmed: {e}")))
    }

    /// Asks the server to deliver it again after `retry_in`.
    fn hold(&mut self, handle: Delivered, retry_in: Duration) -> Result<(), Error> {
        self.runtime
            .block_on(handle.0.ack_with(AckKind::Nak(Some(retry_in))))
            .map_err(|e| Error::TransportDown(format!("asking to deliver a message again: {e}")))
    }

    fn send(&mut self, up: &Upload) -> Result<(), Error> {
        let link = self.link.as_ref().ok_or_else(not_connected)?;
        link.check()?;
        let subject = subjects::up_subject(&self.settings.prefix, self.me, &up.lane);
        let payload = up.bytes.clone().into();
        let msg_id = up
            .number()
            .map(|number| subjects::up_msg_id(self.me, &up.lane, number));
        self.runtime.block_on(async {
            let published = match msg_id {
                Some(id) => {
                    let mut headers = HeaderMap::new();
                    headers.insert(MSG_ID, id.as_str());
                    link.js
                        .publish_with_headers(subject, headers, payload)
                        .await
                }
                None => link.js.publish(subject, payload).await,
            };
            // Taken once the stream acknowledged it: stored (or a duplicate
            // of one stored).
            published
                .map_err(publish_failure)?
                .await
                .map_err(publish_failure)?;
            Ok(())
        })
    }

    /// Waits for a message; when none came for `stuck_after`, fails if
    /// the consumer says messages wait all the same (it is stuck).
    fn wait(&mut self, timeout: Duration) -> Result<bool, Error> {
        if self.pull_for(timeout, true)? {
            return Ok(true);
        }
        self.fail_if_stuck()?;
        Ok(false)
    }

    fn waker(&self) -> Option<Waker> {
        let wake = self.wake.clone();
        Some(Arc::new(move || wake.notify_one()))
    }
}

impl Drop for Nats {
    fn drop(&mut self) {
        // A message fetched and never handed over comes again at once,
        // rather than once its ack_wait ran out.
        // (Not from inside another runtime, where blocking would panic.)
        if tokio::runtime::Handle::try_current().is_ok() {
            return;
        }
        if let Some(message) = self.stash.take() {
            let again = message.ack_with(AckKind::Nak(None));
            let _ = self
                .runtime
                .block_on(async { tokio::time::timeout(Duration::from_secs(1), again).await });
        }
    }
}

fn not_connected() -> Error {
    Error::TransportDown("not connected to the NATS server".to_owned())
}

/// The consumer, or its stream, does not exist: the server has not sent
/// this replica anything yet.
fn not_made_yet(e: &ConsumerError) -> bool {
    matches!(e.kind(), ConsumerErrorKind::JetStream(j)
        if j.error_code() == ErrorCode::CONSUMER_NOT_FOUND
            || j.error_code() == ErrorCode::STREAM_NOT_FOUND)
}

fn consumer_failure(e: ConsumerError) -> Error {
    match e.kind() {
        // No answer (the server away, or the request not allowed).
        ConsumerErrorKind::TimedOut | ConsumerErrorKind::Request | ConsumerErrorKind::Other => {
            Error::TransportDown(format!("the replica's consumer: {e}"))
        }
        // Not a pull consumer, a name it refuses, JetStream not enabled.
        _ => Error::TransportRefused(format!("the replica's consumer: {e}")),
    }
}

fn publish_failure(e: PublishError) -> Error {
    match e.kind() {
        PublishErrorKind::MaxPayloadExceeded => {
            Error::TransportRefused(format!("publishing an Up: {e}"))
        }
        // No stream for the subject yet, no answer in time, the
        // connection: the server's setup or the network, for now.
        _ => Error::TransportDown(format!("publishing an Up: {e}")),
    }
}

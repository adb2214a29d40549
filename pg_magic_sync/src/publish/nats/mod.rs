//! The nats transport: NATS JetStream, driven by the relay worker from a
//! runtime of its own. The runtime's one thread runs the connection and
//! takes the Ups the relay's consumer hands out; the worker's own thread
//! reads and writes the database (SPI is for it alone), and sends with no
//! transaction open.
//!
//! - Down: each replica's messages are published in order to its subject,
//!   one at a time (the next only once JetStream acknowledged the one
//!   before), under `Nats-Msg-Id` = the outbox id, so one published twice
//!   is stored once. Up to `magic_sync.concurrency` replicas at once. A
//!   message leaves the outbox only once acknowledged (publish/outbox.rs).
//! - A durable pull consumer per replica, explicit acks, max_ack_pending 1,
//!   hands the device one message at a time; the worker creates it.
//! - Up: the relay's consumer reads every replica's Ups in order; each is
//!   filed under the replica its subject names, and acknowledged once the
//!   filing committed (uploads.rs).

mod errors;
mod uploads;

use std::collections::HashSet;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::mpsc;
use std::time::Duration;

use async_nats::jetstream::{self, consumer, stream};
use futures_util::StreamExt;
use uuid::Uuid;

use super::outbox::{Due, Outcome, SendFailure};
use crate::error::Error;
use crate::settings;
use magic_sync_proto::nats_subjects as subjects;
pub use uploads::Upload;

/// How long JetStream remembers a message id: one published again within
/// it (a worker that died before the outbox knew it was sent) is stored once.
const DUPLICATE_WINDOW: Duration = Duration::from_secs(600);

/// The relay's durable consumer of every replica's Ups.
const UP_CONSUMER: &str = "magic_sync_relay";

/// How long the relay may take over an Up before it is handed out again.
const UP_ACK_WAIT: Duration = Duration::from_secs(30);

/// Ups the relay's consumer hands out before the first is acknowledged.
const UPS_IN_FLIGHT: i64 = 1024;

/// The nats transport's settings, as the worker read them: a change of any
/// connects again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    pub urls: Vec<String>,
    pub credentials: String,
    /// A user and the file of its password, instead of a `.creds` file.
    pub user: String,
    pub password_file: String,
    /// The first token of every subject.
    pub prefix: String,
    pub down_stream: String,
    pub up_stream: String,
    pub stream_replicas: usize,
    pub send_timeout: Duration,
    /// What a replica's subject holds at most: past it the oldest go, the
    /// replica finds the gap and is provisioned again.
    pub outbox_messages: i64,
}

impl Config {
    pub fn from_settings() -> Config {
        Config {
            urls: settings::text(&settings::NATS_URL)
                .split(',')
                .map(str::trim)
                .filter(|url| !url.is_empty())
                .map(str::to_owned)
                .collect(),
            credentials: settings::text(&settings::NATS_CREDENTIALS),
            user: settings::text(&settings::NATS_USER),
            password_file: settings::text(&settings::NATS_PASSWORD_FILE),
            prefix: settings::text(&settings::NATS_SUBJECTS),
            down_stream: settings::text(&settings::NATS_DOWN_STREAM),
            up_stream: settings::text(&settings::NATS_UP_STREAM),
            stream_replicas: settings::NATS_REPLICAS.get().max(1) as usize,
            send_timeout: send_timeout(),
            outbox_messages: i64::from(settings::OUTBOX_MESSAGES.get()),
        }
    }
}

pub fn send_timeout() -> Duration {
    Duration::from_millis(settings::SEND_TIMEOUT.get().max(1) as u64)
}

/// A connection to NATS, with the streams and the relay's consumer made.
pub struct Nats {
    pub config: Config,
    runtime: tokio::runtime::Runtime,
    jetstream: jetstream::Context,
    down: stream::Stream,
    /// Replicas whose consumer this connection made or found.
    consumers: HashSet<Uuid>,
    uploads: mpsc::Receiver<Upload>,
    /// Readable while Ups wait: the worker's sleep ends on it.
    woken: UnixStream,
    /// A publish found no stream (deleted, or a server that lost its
    /// store): connecting again makes them.
    lost_streams: bool,
}

impl Nats {
    /// Connects, and makes the streams and the relay's consumer if missing.
    pub fn connect(config: Config) -> Result<Nats, Error> {
        let runtime = runtime()?;
        let (sender, uploads) = mpsc::channel();
        let (woken, wake) = UnixStream::pair().map_err(Error::local)?;
        woken.set_nonblocking(true).map_err(Error::local)?;
        wake.set_nonblocking(true).map_err(Error::local)?;
        let (jetstream, down) = runtime.block_on(async {
            let client = connect(&config).await?;
            let jetstream = jetstream::new(client);
            let down = stream_as_set(&jetstream, down_stream(&config)).await?;
            let up = stream_as_set(&jetstream, up_stream(&config)).await?;
            let consumer: consumer::PullConsumer = up
                .get_or_create_consumer(UP_CONSUMER, up_consumer(&config))
                .await
                .map_err(|e| Error::of_consumer(UP_CONSUMER, e))?;
            uploads::take(consumer, config.prefix.clone(), sender, wake);
            Ok::<_, Error>((jetstream, down))
        })?;
        Ok(Nats {
            config,
            runtime,
            jetstream,
            down,
            consumers: HashSet::new(),
            uploads,
            woken,
            lost_streams: false,
        })
    }

    /// Whether a publish found no stream to take it since connecting.
    pub fn lost_streams(&self) -> bool {
        self.lost_streams
    }

    /// The socket the worker's sleep also waits on.
    pub fn wake_socket(&self) -> RawFd {
        self.woken.as_raw_fd()
    }

    /// The Ups handed out so far, in order, each to be filed then finished.
    pub fn uploads(&mut self) -> Vec<Upload> {
        uploads::drain(&self.woken);
        self.uploads.try_iter().collect()
    }

    /// Acknowledges an Up whose filing committed, or hands it out again
    /// after `again` (its filing failed, or one before it of its replica).
    pub fn finish(&self, upload: Upload, again: Option<Duration>) -> Result<(), Error> {
        self.runtime
            .block_on(upload.finish(again, self.config.send_timeout))
    }

    /// Drops an Up of a subject no replica of ours publishes on, for good.
    pub fn refuse(&self, upload: Upload) {
        self.runtime.block_on(upload.refuse());
    }

    /// Publishes what is due, each replica's in order, `concurrency` at once.
    pub fn send(&mut self, due: Vec<Due>, concurrency: usize) -> Vec<Outcome> {
        let timeout = self.config.send_timeout;
        let fresh: Vec<Uuid> = due
            .iter()
            .map(|d| d.replica)
            .filter(|r| !self.consumers.contains(r))
            .collect();
        let (outcomes, made) = self.runtime.block_on(async {
            let made = self.make_consumers(&fresh, concurrency, timeout).await;
            let outcomes = futures_util::stream::iter(due)
                .map(|due| {
                    let failed_consumer =
                        made.get(&due.replica)
                            .and_then(|f| f.as_ref())
                            .map(|f| SendFailure {
                                message: String::new(),
                                error: f.error.clone(),
                            });
                    send_replica(
                        &self.jetstream,
                        &self.down,
                        &self.config,
                        due,
                        failed_consumer,
                    )
                })
                .buffer_unordered(concurrency.max(1))
                .collect::<Vec<(Outcome, bool)>>()
                .await;
            (outcomes, made)
        });
        let outcomes = outcomes
            .into_iter()
            .map(|(outcome, stream_missing)| {
                self.lost_streams |= stream_missing;
                outcome
            })
            .collect();
        for (replica, failure) in made {
            if failure.is_none() {
                self.consumers.insert(replica);
            }
        }
        outcomes
    }

    /// Makes these replicas' consumers again, each deleted and then made
    /// as the settings say: a fresh one delivers what the replica's
    /// subject holds from its oldest message on, whatever the old one
    /// believed was pending (a stall: sql/stalls.sql). Answers, for each,
    /// how many messages the stream holds for it, or why its consumer
    /// could not be made again.
    pub fn remake_consumers(&mut self, replicas: &[Uuid]) -> Vec<(Uuid, Result<u64, Error>)> {
        let timeout = self.config.send_timeout;
        let (down, config) = (&self.down, &self.config);
        let remade = self.runtime.block_on(async {
            futures_util::stream::iter(replicas.iter().copied())
                .map(|replica| async move {
                    let remade =
                        tokio::time::timeout(timeout, remake_consumer(down, config, replica))
                            .await
                            .unwrap_or_else(|_| {
                                Err(Error::timed_out("making a replica's consumer again"))
                            });
                    (replica, remade)
                })
                .buffer_unordered(8)
                .collect::<Vec<_>>()
                .await
        });
        for (replica, held) in &remade {
            if held.is_ok() {
                self.consumers.insert(*replica);
            } else {
                self.consumers.remove(replica);
            }
        }
        remade
    }

    async fn make_consumers(
        &self,
        replicas: &[Uuid],
        concurrency: usize,
        timeout: Duration,
    ) -> std::collections::HashMap<Uuid, Option<SendFailure>> {
        futures_util::stream::iter(replicas.iter().copied())
            .map(|replica| async move {
                let config = device_consumer(&self.config, replica);
                let made = tokio::time::timeout(
                    timeout,
                    self.down.get_or_create_consumer::<consumer::pull::Config>(
                        &subjects::consumer_name(replica),
                        config,
                    ),
                )
                .await;
                let failure = match made {
                    Ok(Ok(_)) => None,
                    Ok(Err(e)) => Some(Error::of_consumer(&replica.to_string(), e)),
                    Err(_) => Some(Error::timed_out("making the replica's consumer")),
                };
                (
                    replica,
                    failure.map(|error| SendFailure {
                        message: String::new(),
                        error,
                    }),
                )
            })
            .buffer_unordered(concurrency.max(1))
            .collect()
            .await
    }
}

/// Deletes a replica's consumer, if there is one, and makes it again;
/// answers how many messages the stream holds for the replica, as the
/// fresh consumer counts them.
async fn remake_consumer(
    down: &stream::Stream,
    config: &Config,
    replica: Uuid,
) -> Result<u64, Error> {
    let name = subjects::consumer_name(replica);
    match down.delete_consumer(&name).await {
        Ok(_) => {}
        Err(e) if Error::is_no_consumer(&e) => {}
        Err(e) => return Err(Error::of_consumer(&name, e)),
    }
    let consumer: consumer::PullConsumer = down
        .create_consumer(device_consumer(config, replica))
        .await
        .map_err(|e| Error::of_consumer(&name, e))?;
    Ok(consumer.cached_info().num_pending)
}

/// One replica's messages, one after another: the first failure stops it.
/// Answers whether a publish found no stream.
async fn send_replica(
    jetstream: &jetstream::Context,
    down: &stream::Stream,
    config: &Config,
    due: Due,
    consumer_failed: Option<SendFailure>,
) -> (Outcome, bool) {
    let mut outcome = Outcome {
        replica: due.replica,
        taken: Vec::new(),
        failed: None,
    };
    if let Some(mut failure) = consumer_failed {
        failure.message = due
            .messages
            .first()
            .map(|m| m.id.clone())
            .unwrap_or_default();
        outcome.failed = Some(failure);
        return (outcome, false);
    }
    let subject = subjects::down_subject(&config.prefix, due.replica);
    for message in due.messages {
        let sent = async {
            if message.begins_snapshot {
                // A provisioning supersedes what the replica was sent before
                // it: a device long away takes the snapshot, not the backlog.
                down.purge()
                    .filter(subject.clone())
                    .await
                    .map_err(|e| Error::of_purge(&subject, e))?;
            }
            let publish = jetstream::message::PublishMessage::build()
                .payload(message.bytes.into())
                .message_id(&message.id);
            let ack = jetstream
                .send_publish(subject.clone(), publish)
                .await
                .map_err(Error::of_publish)?;
            ack.await.map_err(Error::of_publish)
        };
        match tokio::time::timeout(config.send_timeout, sent).await {
            Ok(Ok(_ack)) => outcome.taken.push(message.id),
            Ok(Err(e)) => {
                let stream_missing = e.stream_missing();
                outcome.failed = Some(failure(message.id, e));
                return (outcome, stream_missing);
            }
            Err(_) => {
                outcome.failed = Some(failure(
                    message.id,
                    Error::timed_out("publishing (magic_sync.send_timeout)"),
                ));
                break;
            }
        }
    }
    (outcome, false)
}

fn failure(message: String, error: Error) -> SendFailure {
    SendFailure { message, error }
}

/// A runtime with one thread of its own, which never takes a signal: they
/// are the worker's main thread's (SIGTERM, SIGHUP, its latch).
fn runtime() -> Result<tokio::runtime::Runtime, Error> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .max_blocking_threads(2)
        .thread_name("magic_sync nats")
        .on_thread_start(block_signals)
        .enable_all()
        .build()
        .map_err(Error::local)
}

fn block_signals() {
    // SAFETY: sigfillset initialises the set it is given; pthread_sigmask
    // changes this thread's mask only, one the runtime made, which runs no
    // PostgreSQL code.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, std::ptr::null_mut());
    }
}

async fn connect(config: &Config) -> Result<async_nats::Client, Error> {
    let mut options = async_nats::ConnectOptions::new()
        .name("magic_sync relay")
        .connection_timeout(config.send_timeout)
        .request_timeout(Some(config.send_timeout));
    match (config.credentials.is_empty(), config.user.is_empty()) {
        (false, false) => return Err(Error::two_ways_to_log_in()),
        (false, true) => {
            options = options
                .credentials_file(&config.credentials)
                .await
                .map_err(|e| Error::of_credentials(&config.credentials, e))?;
        }
        (true, false) => {
            let password = password_of(&config.password_file)?;
            options = options.user_and_password(config.user.clone(), password);
        }
        (true, true) => {}
    }
    options
        .connect(config.urls.clone())
        .await
        .map_err(|e| Error::of_connect(&config.urls, e))
}

/// The stream as the settings say, made or changed to be so: a bound or a
/// replication factor set since it was made reaches it.
async fn stream_as_set(
    jetstream: &jetstream::Context,
    config: stream::Config,
) -> Result<stream::Stream, Error> {
    let name = config.name.clone();
    jetstream
        .create_or_update_stream(config)
        .await
        .map_err(|e| Error::of_stream(&name, e))?;
    jetstream
        .get_stream(&name)
        .await
        .map_err(|e| Error::of_getting_stream(&name, e))
}

/// The first line of the password file: the secret stays out of the
/// settings, which any session may read.
fn password_of(file: &str) -> Result<String, Error> {
    if file.is_empty() {
        return Err(Error::no_password_file());
    }
    let text = std::fs::read_to_string(file).map_err(|e| Error::of_password_file(file, e))?;
    Ok(text.lines().next().unwrap_or_default().to_owned())
}

fn down_stream(config: &Config) -> stream::Config {
    stream::Config {
        name: config.down_stream.clone(),
        subjects: vec![subjects::down_stream_subjects(&config.prefix)],
        storage: stream::StorageType::File,
        // A message leaves the stream once its replica acknowledged it.
        retention: stream::RetentionPolicy::WorkQueue,
        max_messages_per_subject: config.outbox_messages,
        discard: stream::DiscardPolicy::Old,
        num_replicas: config.stream_replicas,
        duplicate_window: DUPLICATE_WINDOW,
        ..Default::default()
    }
}

fn up_stream(config: &Config) -> stream::Config {
    stream::Config {
        name: config.up_stream.clone(),
        subjects: vec![subjects::up_stream_subjects(&config.prefix)],
        storage: stream::StorageType::File,
        retention: stream::RetentionPolicy::WorkQueue,
        num_replicas: config.stream_replicas,
        duplicate_window: DUPLICATE_WINDOW,
        ..Default::default()
    }
}

fn device_consumer(config: &Config, replica: Uuid) -> consumer::pull::Config {
    consumer::pull::Config {
        durable_name: Some(subjects::consumer_name(replica)),
        filter_subject: subjects::down_subject(&config.prefix, replica),
        ack_policy: consumer::AckPolicy::Explicit,
        deliver_policy: consumer::DeliverPolicy::All,
        max_ack_pending: subjects::MAX_ACK_PENDING,
        ack_wait: subjects::ACK_WAIT,
        ..Default::default()
    }
}

fn up_consumer(config: &Config) -> consumer::pull::Config {
    consumer::pull::Config {
        durable_name: Some(UP_CONSUMER.to_owned()),
        filter_subject: subjects::up_stream_subjects(&config.prefix),
        ack_policy: consumer::AckPolicy::Explicit,
        deliver_policy: consumer::DeliverPolicy::All,
        max_ack_pending: UPS_IN_FLIGHT,
        ack_wait: UP_ACK_WAIT,
        ..Default::default()
    }
}

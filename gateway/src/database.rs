//! The gateway's side of the server's queue: a few connections as the
//! gateway role, shared by every link (a tokio-postgres connection takes
//! many queries at once), and one connection that LISTENs for the replicas
//! the gateway carries, so that a relay pass wakes it and nothing polls.

use std::collections::{HashMap, HashSet};
use std::str::FromStr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{stream, StreamExt};
use tokio::sync::mpsc;
use tokio_postgres::{AsyncMessage, Client, Config, NoTls, Statement};
use uuid::Uuid;

use crate::credentials::REVOKED_CHANNEL;
use crate::Error;

const TAKE: &str = "SELECT id, message FROM sync.next($1)";
const RELEASE_AND_TAKE: &str = "SELECT id, message FROM sync.ack_next($1, $2)";
const FILE: &str = "SELECT sync.receive($1, $2)::text";

/// One message for a replica: its id in the queue, and its bytes.
pub type Message = (String, Vec<u8>);

/// What filing an Up came to.
#[derive(Debug)]
pub enum Filed {
    /// Filed (the server's verdict, as its text).
    Taken(String),
    /// The server refused it for good; the mapping's reason.
    Refused(&'static str, String),
}

/// A connection and the statements the gateway runs, prepared once.
struct Connection {
    client: Client,
    take: Statement,
    release_and_take: Statement,
    file: Statement,
}

/// One of the pool's connections, lent.
pub struct Pooled(Arc<Connection>);

impl std::ops::Deref for Pooled {
    type Target = Client;
    fn deref(&self) -> &Client {
        &self.0.client
    }
}

/// The connections the links share.
pub struct Pool {
    config: Config,
    slots: Vec<tokio::sync::Mutex<Option<Arc<Connection>>>>,
    next: AtomicUsize,
}

pub fn config_of(database: &str) -> Result<Config, Error> {
    let mut config = Config::from_str(database)
        .map_err(|e| Error::setup(format!("the database's connection string: {e}")))?;
    if config.get_application_name().is_none() {
        config.application_name("magic_sync gateway");
    }
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(Duration::from_secs(10));
    }
    Ok(config)
}

/// Connects, its connection driven on a task of its own; `tell` hears its
/// notifications, if given.
async fn connect(
    config: &Config,
    tell: Option<mpsc::UnboundedSender<(String, String)>>,
) -> Result<Client, tokio_postgres::Error> {
    let (client, mut connection) = config.connect(NoTls).await?;
    tokio::spawn(async move {
        let mut messages = stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(Ok(message)) = messages.next().await {
            if let (AsyncMessage::Notification(n), Some(tell)) = (message, &tell) {
                let _ = tell.send((n.channel().to_owned(), n.payload().to_owned()));
            }
        }
    });
    Ok(client)
}

impl Pool {
    pub fn new(config: Config, size: usize) -> Pool {
        Pool {
            config,
            slots: (0..size.max(1))
                .map(|_| tokio::sync::Mutex::new(None))
                .collect(),
            next: AtomicUsize::new(0),
        }
    }

    /// A connection, made again when the last one was lost.
    async fn connection(&self) -> Result<Arc<Connection>, tokio_postgres::Error> {
        let at = self.next.fetch_add(1, Ordering::Relaxed) % self.slots.len();
        let mut slot = self.slots[at].lock().await;
        if let Some(connection) = slot.as_ref().filter(|c| !c.client.is_closed()) {
            return Ok(connection.clone());
        }
        let client = connect(&self.config, None).await?;
        let connection = Arc::new(Connection {
            take: client.prepare(TAKE).await?,
            release_and_take: client.prepare(RELEASE_AND_TAKE).await?,
            file: client.prepare(FILE).await?,
            client,
        });
        *slot = Some(connection.clone());
        Ok(connection)
    }

    /// A client, for the credentials' look-ups.
    pub async fn client(&self) -> Result<Pooled, tokio_postgres::Error> {
        Ok(Pooled(self.connection().await?))
    }

    /// The replica's next message, if one waits.
    pub async fn take(&self, replica: Uuid) -> Result<Option<Message>, tokio_postgres::Error> {
        let c = self.connection().await?;
        let row = c.client.query_opt(&c.take, &[&replica]).await?;
        Ok(row.map(|r| (r.get(0), r.get(1))))
    }

    /// Releases message `id` and answers the one after it, if one waits.
    pub async fn release_and_take(
        &self,
        replica: Uuid,
        id: &str,
    ) -> Result<Option<Message>, tokio_postgres::Error> {
        let c = self.connection().await?;
        let row = c
            .client
            .query_opt(&c.release_and_take, &[&replica, &id])
            .await?;
        Ok(row.map(|r| (r.get(0), r.get(1))))
    }

    /// Files an Up under `replica`. An error is the database's (asked
    /// again); a refusal for good is `Filed::Refused`.
    pub async fn file(&self, replica: Uuid, up: &[u8]) -> Result<Filed, tokio_postgres::Error> {
        let c = self.connection().await?;
        match c.client.query_one(&c.file, &[&replica, &up]).await {
            Ok(row) => Ok(Filed::Taken(row.get(0))),
            Err(e) => match refusal_of(&e) {
                Some(reason) => Ok(Filed::Refused(reason, e.to_string())),
                None => Err(e),
            },
        }
    }
}

/// The mapping's reason for an error `sync.receive` raised about the Up
/// itself, by its SQLSTATE; `None` for a failure of the database, which a
/// resend may cure.
fn refusal_of(error: &tokio_postgres::Error) -> Option<&'static str> {
    use crate::link::reasons::{LATER_PROTOCOL, MALFORMED};
    let code = error.code()?.code();
    const TRANSIENT: [&str; 7] = ["08", "25", "40", "53", "55", "57", "58"];
    if TRANSIENT.contains(&&code[..2]) {
        return None;
    }
    Some(match code {
        // feature_not_supported: an Up of a later protocol than the server's.
        "0A000" => LATER_PROTOCOL,
        _ => MALFORMED,
    })
}

/// What a link hears from the listener.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// Messages may wait for this replica.
    Wake(Uuid),
    /// This credential was revoked.
    Revoked(Uuid),
    /// The listener connected again: anything may have been missed.
    WakeAll,
}

/// A link's ear: a small channel of events, and whether one was lost
/// because it was full (the link then looks at every topic it carries).
#[derive(Clone)]
pub struct Ear {
    pub events: mpsc::Sender<Event>,
    pub overflowed: Arc<std::sync::atomic::AtomicBool>,
}

impl Ear {
    fn tell(&self, event: Event) {
        if self.events.try_send(event).is_err() {
            self.overflowed.store(true, Ordering::Release);
        }
    }
}

/// The replicas and credentials the links carry, and the connection that
/// LISTENs for them.
pub struct Listener {
    state: Mutex<Listening>,
    commands: mpsc::UnboundedSender<Command>,
}

#[derive(Default)]
struct Listening {
    replicas: HashMap<Uuid, HashMap<u64, Ear>>,
    credentials: HashMap<Uuid, HashMap<u64, Ear>>,
}

enum Command {
    Listen(Uuid),
    Unlisten(Uuid),
}

/// The channel the server notifies when messages wait for `replica`.
pub fn channel(replica: Uuid) -> String {
    format!("magic_sync:{}", replica.hyphenated())
}

impl Listener {
    /// Starts listening (connecting again whenever the connection is
    /// lost, then waking every link).
    pub fn start(config: Config) -> Arc<Listener> {
        let (commands, received) = mpsc::unbounded_channel();
        let listener = Arc::new(Listener {
            state: Mutex::new(Listening::default()),
            commands,
        });
        tokio::spawn(listen(config, Arc::downgrade(&listener), received));
        listener
    }

    fn state(&self) -> std::sync::MutexGuard<'_, Listening> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Link `link` carries `replica`: it is told when messages wait.
    pub fn carry(&self, link: u64, replica: Uuid, ear: &Ear) {
        let first = {
            let mut state = self.state();
            let links = state.replicas.entry(replica).or_default();
            links.insert(link, ear.clone());
            links.len() == 1
        };
        if first {
            let _ = self.commands.send(Command::Listen(replica));
        }
    }

    pub fn drop_replica(&self, link: u64, replica: Uuid) {
        let last = {
            let mut state = self.state();
            let Some(links) = state.replicas.get_mut(&replica) else {
                return;
            };
            links.remove(&link);
            let last = links.is_empty();
            if last {
                state.replicas.remove(&replica);
            }
            last
        };
        if last {
            let _ = self.commands.send(Command::Unlisten(replica));
        }
    }

    /// Link `link` holds `credential`: it is told when it is revoked.
    pub fn hold(&self, link: u64, credential: Uuid, ear: &Ear) {
        self.state()
            .credentials
            .entry(credential)
            .or_default()
            .insert(link, ear.clone());
    }

    /// Link `link` ended: forgets it everywhere.
    pub fn forget_link(&self, link: u64, replicas: &HashSet<Uuid>) {
        for replica in replicas {
            self.drop_replica(link, *replica);
        }
        let mut state = self.state();
        state.credentials.retain(|_, links| {
            links.remove(&link);
            !links.is_empty()
        });
    }

    fn tell(&self, channel: &str, payload: &str) {
        let state = self.state();
        if channel == REVOKED_CHANNEL {
            if let Some(links) = Uuid::parse_str(payload)
                .ok()
                .and_then(|c| state.credentials.get(&c).map(|l| (c, l)))
            {
                for ear in links.1.values() {
                    ear.tell(Event::Revoked(links.0));
                }
            }
            return;
        }
        let Some(replica) = channel
            .strip_prefix("magic_sync:")
            .and_then(|id| Uuid::parse_str(id).ok())
        else {
            return;
        };
        for ear in state
            .replicas
            .get(&replica)
            .into_iter()
            .flat_map(|l| l.values())
        {
            ear.tell(Event::Wake(replica));
        }
    }

    fn wake_all(&self) {
        let state = self.state();
        for ear in state.replicas.values().flat_map(|l| l.values()) {
            ear.tell(Event::WakeAll);
        }
    }

    fn listening(&self) -> Vec<Uuid> {
        self.state().replicas.keys().copied().collect()
    }
}

/// The listening connection's life: connect, LISTEN to everything carried,
/// wake every link (a notification may have gone while it was away), then
/// serve commands and notifications until the connection goes.
async fn listen(
    config: Config,
    listener: std::sync::Weak<Listener>,
    mut commands: mpsc::UnboundedReceiver<Command>,
) {
    let mut pause = Duration::from_millis(100);
    loop {
        let (tell, mut heard) = mpsc::unbounded_channel();
        let client = match connect(&config, Some(tell)).await {
            Ok(client) => client,
            Err(e) => {
                log::warn!("the gateway's listening connection: {e}; again in {pause:?}");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(10));
                continue;
            }
        };
        let Some(me) = listener.upgrade() else { return };
        let mut all = vec![format!("LISTEN {REVOKED_CHANNEL}")];
        all.extend(
            me.listening()
                .into_iter()
                .map(|r| format!("LISTEN \"{}\"", channel(r))),
        );
        if let Err(e) = client.batch_execute(&all.join(";")).await {
            log::warn!("the gateway could not LISTEN: {e}");
            continue;
        }
        pause = Duration::from_millis(100);
        me.wake_all();
        drop(me);
        loop {
            tokio::select! {
                command = commands.recv() => {
                    let Some(command) = command else { return };
                    let sql = match command {
                        Command::Listen(r) => format!("LISTEN \"{}\"", channel(r)),
                        Command::Unlisten(r) => format!("UNLISTEN \"{}\"", channel(r)),
                    };
                    if client.batch_execute(&sql).await.is_err() {
                        break;
                    }
                    // A message may have been written before the LISTEN.
                    if let (Command::Listen(_), Some(me)) = (&command, listener.upgrade()) {
                        me.wake_all_of(&command);
                    }
                }
                heard = heard.recv() => {
                    let Some((channel, payload)) = heard else { break };
                    let Some(me) = listener.upgrade() else { return };
                    me.tell(&channel, &payload);
                }
            }
        }
        log::warn!("the gateway's listening connection was lost: connecting again");
    }
}

impl Listener {
    fn wake_all_of(&self, command: &Command) {
        if let Command::Listen(replica) = command {
            self.tell(&channel(*replica), "");
        }
    }
}

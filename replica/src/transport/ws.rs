//! The WebSocket client (feature `ws`): a replica reaches the server
//! through magic_sync's gateway, over aweft's replication protocol v1
//! (docs/src/aweft-link.md). The replica is a topic of a link: it opens
//! it, takes each message as a commit the gateway sends, acknowledges it
//! on the request channel once committed, and sends its Ups as commits,
//! each answered `taken` once the server filed it (or `refused`).
//!
//! Its API is blocking. A link's socket is driven by a small tokio runtime
//! shared by every link of the process, on threads of its own; the device
//! loop talks to it through channels, so a stop or a poke cuts a wait
//! short. Several replicas may share one link ([`WsLink`]): each
//! replica's loop has its own [`Ws`], a topic of that link.
//!
//! Several gateways in front of one database are given as a list
//! (`WsSettings::urls`): a link connects to the first that answers,
//! trying them in turn, and a link that ended (its gateway stopped, or
//! silent past two pings or a request's timeout) is made again starting
//! with the gateway after it.
//!
//! A gateway behind a proxy that terminates TLS is reached at a `wss://`
//! URL, through rustls (on ring). The client trusts the system's roots
//! and, besides them, the authorities of `WsSettings::ca_file` (a shop's
//! own CA). A certificate that does not verify is
//! [`Error::TransportRefused`], naming the URL and why; the device loop
//! still connects again after its pause, reading the roots again, so a
//! certificate or a CA file put right is taken without a restart.
//!
//! ```no_run
//! use magic_sync_replica::transport::ws::{Ws, WsSettings};
//! use magic_sync_replica::transport::{run, Control, Options};
//! use magic_sync_replica::{Error, Replica};
//!
//! fn device(mut replica: Replica) -> Result<(), Error> {
//!     let token = std::fs::read_to_string("/etc/register/credential").unwrap();
//!     let settings = WsSettings::new("ws://127.0.0.1:8787/link", token.trim());
//!     let mut ws = Ws::new(settings, &replica)?;
//!     let control = Control::new();
//!     let steering = control.clone();
//!     let looping = std::thread::spawn(move || {
//!         run(&mut replica, &mut ws, &Options::default(), &steering, |status| {
//!             println!("{status}")
//!         });
//!     });
//!     control.stop();
//!     looping.join().unwrap();
//!     Ok(())
//! }
//! ```

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use magic_sync_gateway::link::reasons::{LATER_PROTOCOL, NOT_ALLOWED};
use magic_sync_gateway::link::{root_of, topic_name, Frame, Reason, Request};
use tokio::runtime::Runtime;
use tokio::sync::mpsc as async_mpsc;
use tokio::sync::Notify;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::Connector;
use uuid::Uuid;

use super::{Delivery, Transport, Waker};
use crate::error::Error;
use crate::replica::Replica;
use crate::upload::Upload;

/// What the device says of the gateway.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WsSettings {
    /// The gateways' links, `ws://host:port/link` (or `wss://` through a
    /// proxy that terminates TLS), tried in turn: one gateway, or several
    /// in front of the same database.
    pub urls: Vec<String>,
    /// The credentials the link presents (`Authorization: Bearer`), each
    /// allowing one replica.
    pub credentials: Vec<String>,
    /// How long connecting, opening the topic, or an Up's answer may take.
    pub request_timeout: Duration,
    /// How often the link says it is there, when it has nothing else to
    /// say (the gateway closes a link that is silent for its timeout). A
    /// gateway that answers nothing, not even a ping, for twice this long
    /// is taken for gone: the link ends, and is made again.
    pub ping_every: Duration,
    /// The server's message limit: an Up larger than this is refused here
    /// for good, as the gateway would.
    pub message_bytes: usize,
    /// A PEM file of the certificate authorities trusted for `wss://`
    /// besides the system's (a shop's own CA): each certificate in it is a
    /// root. `None`: the system's roots alone.
    pub ca_file: Option<PathBuf>,
}

impl WsSettings {
    pub fn new(url: impl Into<String>, credential: impl Into<String>) -> WsSettings {
        WsSettings {
            urls: vec![url.into()],
            credentials: vec![credential.into()],
            request_timeout: Duration::from_secs(30),
            ping_every: Duration::from_secs(20),
            message_bytes: 1024 * 1024,
            ca_file: None,
        }
    }
}

/// What the link tells a topic.
#[derive(Debug)]
enum Heard {
    /// The gateway's open: the topic is live, under its number.
    Opened,
    /// A message, as the gateway's commit `seq`.
    Commit(u64, Vec<u8>),
    /// The Up sent as commit `seq` was filed.
    Taken(u64),
    /// The Up sent as commit `seq` was refused, for these reasons.
    Refused(u64, Vec<Reason>),
    /// The topic ended: a fault naming it.
    Fault(String, String),
    /// The link ended.
    LinkEnded(String),
    /// A stop or a poke: end the wait.
    Wake,
}

/// Where the link's reader sends what it hears, by topic.
#[derive(Default)]
struct Routes {
    /// By the device's number.
    mine: HashMap<u64, Sender<Heard>>,
    /// The gateway's number to the device's, once opened.
    theirs: HashMap<u64, u64>,
    /// A topic's name to the device's number, until opened.
    named: HashMap<String, u64>,
}

/// A link that is up.
#[derive(Clone)]
struct Up {
    generation: u64,
    /// Which of the settings' gateways it is connected to.
    gateway: usize,
    alive: Arc<AtomicBool>,
    /// Ends the link (a request went unanswered): every topic on it hears
    /// that it ended, and connects again.
    end: Arc<Notify>,
    outgoing: async_mpsc::UnboundedSender<Message>,
    routes: Arc<Mutex<Routes>>,
}

/// One WebSocket to the gateway, carrying the topics of any number of
/// replicas; connected (again) by the first topic that needs it.
#[derive(Clone)]
pub struct WsLink {
    settings: Arc<WsSettings>,
    state: Arc<Mutex<Option<Up>>>,
    generations: Arc<AtomicU64>,
    /// Topic numbers are never reused on one link, nor across links here.
    numbers: Arc<AtomicU64>,
    /// The gateway the next link tries first.
    first: Arc<AtomicUsize>,
    /// The TLS client's settings, made at the first `wss://` connect and
    /// made again after a certificate did not verify.
    tls: Arc<Mutex<Option<Arc<rustls::ClientConfig>>>>,
}

fn runtime() -> &'static Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("magic_sync ws")
            .enable_all()
            .build()
            .expect("a tokio runtime for the WebSocket links")
    })
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // What the mutexes hold is whole after any panic.
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

fn down(text: impl Into<String>) -> Error {
    Error::TransportDown(text.into())
}

impl WsLink {
    pub fn new(settings: WsSettings) -> WsLink {
        WsLink {
            settings: Arc::new(settings),
            state: Arc::new(Mutex::new(None)),
            generations: Arc::new(AtomicU64::new(0)),
            numbers: Arc::new(AtomicU64::new(0)),
            first: Arc::new(AtomicUsize::new(0)),
            tls: Arc::new(Mutex::new(None)),
        }
    }

    /// The link as it is now, connected first when it is not up.
    fn ensure(&self) -> Result<Up, Error> {
        let mut state = lock(&self.state);
        match state.as_ref() {
            Some(up) if up.alive.load(Ordering::Acquire) => return Ok(up.clone()),
            // The link ended: the next one begins with the gateway after
            // its own.
            Some(ended) => {
                let count = self.settings.urls.len().max(1);
                self.first
                    .store((ended.gateway + 1) % count, Ordering::Relaxed);
            }
            None => {}
        }
        *state = None;
        let up = self.connect()?;
        *state = Some(up.clone());
        Ok(up)
    }

    /// Connects to the first gateway that answers, trying each in turn
    /// from `first`; a refused credential is refused for good at once. A
    /// gateway whose certificate does not verify is passed over for the
    /// next, and its refusal answered when none answers.
    fn connect(&self) -> Result<Up, Error> {
        let count = self.settings.urls.len();
        if count == 0 {
            return Err(Error::TransportRefused("no gateway to connect to".into()));
        }
        let first = self.first.load(Ordering::Relaxed) % count;
        let (mut refused, mut failed) = (None, None);
        for gateway in (first..count).chain(0..first) {
            match self.connect_to(gateway) {
                Ok(up) => {
                    self.first.store(gateway, Ordering::Relaxed);
                    return Ok(up);
                }
                Err(Unreached::Everywhere(e)) => return Err(e),
                Err(Unreached::Here(e @ Error::TransportRefused(_))) => {
                    refused.get_or_insert(e);
                }
                Err(Unreached::Here(e)) => failed = Some(e),
            }
        }
        Err(refused
            .or(failed)
            .unwrap_or_else(|| down("no gateway answered")))
    }

    fn connect_to(&self, gateway: usize) -> Result<Up, Unreached> {
        let url = &self.settings.urls[gateway];
        let mut request = url
            .as_str()
            .into_client_request()
            .map_err(|e| Unreached::Here(Error::TransportRefused(format!("{url}: {e}"))))?;
        for token in &self.settings.credentials {
            let value = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
                Unreached::Everywhere(Error::TransportRefused(
                    "a credential that is no header".into(),
                ))
            })?;
            request.headers_mut().append("authorization", value);
        }
        let connector = match request.uri().scheme_str() {
            Some(scheme) if scheme.eq_ignore_ascii_case("wss") => Some(Connector::Rustls(
                self.tls().map_err(Unreached::Everywhere)?,
            )),
            _ => None,
        };
        let mut config = WebSocketConfig::default();
        config.max_message_size = Some(self.settings.message_bytes * 2 + 4096);
        let connecting = tokio_tungstenite::connect_async_tls_with_config(
            request,
            Some(config),
            true,
            connector,
        );
        let timeout = self.settings.request_timeout;
        let connected =
            runtime().block_on(async { tokio::time::timeout(timeout, connecting).await });
        let (socket, _) = match connected {
            Err(_) => {
                return Err(Unreached::Here(down(format!(
                    "{url}: no answer in {timeout:?}"
                ))))
            }
            Ok(Err(e)) => {
                let unreached = refusal_of_handshake(url, e);
                if let Unreached::Here(Error::TransportRefused(_)) = unreached {
                    // The roots are read again next time: a CA file put
                    // right is taken without a restart.
                    *lock(&self.tls) = None;
                }
                return Err(unreached);
            }
            Ok(Ok(connected)) => connected,
        };
        let generation = self.generations.fetch_add(1, Ordering::Relaxed) + 1;
        let alive = Arc::new(AtomicBool::new(true));
        let end = Arc::new(Notify::new());
        let routes = Arc::new(Mutex::new(Routes::default()));
        let (outgoing, queued) = async_mpsc::unbounded_channel();
        runtime().spawn(drive(
            socket,
            queued,
            routes.clone(),
            (alive.clone(), end.clone()),
            self.settings.ping_every,
        ));
        Ok(Up {
            generation,
            gateway,
            alive,
            end,
            outgoing,
            routes,
        })
    }

    fn number(&self) -> u64 {
        self.numbers.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// The TLS client's settings, made once and kept.
    fn tls(&self) -> Result<Arc<rustls::ClientConfig>, Error> {
        let mut kept = lock(&self.tls);
        if let Some(config) = kept.as_ref() {
            return Ok(config.clone());
        }
        let config = Arc::new(tls_config(self.settings.ca_file.as_deref())?);
        *kept = Some(config.clone());
        Ok(config)
    }
}

/// Why a gateway was not reached.
enum Unreached {
    /// For every gateway alike (the credential, the device's settings):
    /// trying the next one is no use.
    Everywhere(Error),
    /// This gateway's: the next one is tried.
    Here(Error),
}

/// The TLS client's settings: rustls on ring, trusting the system's roots
/// and those of `ca_file`.
///
/// The system's roots (rustls-native-certs), not a list built into the
/// program (webpki-roots): a device's operating system keeps its roots up
/// to date while a built-in list ages until the program is built again,
/// and a shop that installs its own CA the system's way
/// (`update-ca-certificates`) is trusted by this client too, with no
/// `ca_file` to give. A system with no roots at all is no failure when
/// `ca_file` gives some.
fn tls_config(ca_file: Option<&std::path::Path>) -> Result<rustls::ClientConfig, Error> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::CertificateDer;
    let refused = |text: String| Error::TransportRefused(text);
    let mut roots = rustls::RootCertStore::empty();
    let system = rustls_native_certs::load_native_certs();
    roots.add_parsable_certificates(system.certs);
    if let Some(file) = ca_file {
        let shown = file.display();
        let certificates: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(file)
            .and_then(|certificates| certificates.collect())
            .map_err(|e| refused(format!("the CA file {shown}: {e}")))?;
        if certificates.is_empty() {
            return Err(refused(format!(
                "the CA file {shown}: no certificate in it (PEM, -----BEGIN CERTIFICATE-----)"
            )));
        }
        for certificate in certificates {
            roots.add(certificate).map_err(|e| {
                refused(format!(
                    "the CA file {shown}: a certificate that is no root: {e}"
                ))
            })?;
        }
    }
    if roots.is_empty() {
        let why: Vec<String> = system.errors.iter().map(|e| e.to_string()).collect();
        return Err(refused(format!(
            "no certificate authority to trust for wss://: the system has none{} and no CA file was given",
            match why.is_empty() {
                true => String::new(),
                false => format!(" ({})", why.join("; ")),
            }
        )));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| refused(format!("TLS: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

/// A handshake refused with 401 or 403 is the credential's, for good, and
/// for every gateway; a certificate that does not verify is this
/// gateway's, for good; any other failure is the network's or the
/// gateway's, for now.
///
/// The certificate is `TransportRefused`, not `TransportDown`: asked again
/// the same way it is refused again, until the proxy's certificate or the
/// device's roots change (what `Error::TransportRefused` says), and the
/// device's status should say so rather than look like a network that
/// comes and goes. The device still keeps trying: its loop connects again
/// after every failure, with its pause, and the roots are read again then.
fn refusal_of_handshake(url: &str, error: tokio_tungstenite::tungstenite::Error) -> Unreached {
    use tokio_tungstenite::tungstenite::Error as WsError;
    match &error {
        WsError::Http(response) if matches!(response.status().as_u16(), 401 | 403) => {
            Unreached::Everywhere(Error::TransportRefused(format!(
                "{url}: the gateway refused the credential"
            )))
        }
        WsError::Io(io) => match io.get_ref().and_then(|e| e.downcast_ref::<rustls::Error>()) {
            Some(rustls::Error::InvalidCertificate(why)) => {
                Unreached::Here(Error::TransportRefused(format!(
                    "{url}: the gateway's certificate does not verify ({why}): {}",
                    certificate_advice(why)
                )))
            }
            Some(tls) => Unreached::Here(down(format!("{url}: TLS: {tls}"))),
            None => Unreached::Here(down(format!("{url}: {error}"))),
        },
        WsError::Tls(tls) => Unreached::Here(Error::TransportRefused(format!("{url}: TLS: {tls}"))),
        _ => Unreached::Here(down(format!("{url}: {error}"))),
    }
}

/// What a certificate that does not verify asks of the one who sets up
/// the device or the proxy.
fn certificate_advice(why: &rustls::CertificateError) -> &'static str {
    use rustls::CertificateError as Why;
    match why {
        Why::UnknownIssuer => {
            "it is signed by no authority this device trusts; give the authority's \
             certificate (--ca FILE, WsSettings::ca_file) or install it in the system's roots"
        }
        Why::NotValidForName | Why::NotValidForNameContext { .. } => {
            "it is not made for this host name; connect by a name it names, or make it anew"
        }
        Why::Expired | Why::ExpiredContext { .. } => "it has expired; the proxy needs a new one",
        Why::NotValidYet | Why::NotValidYetContext { .. } => {
            "it is not valid yet; is the device's clock right?"
        }
        Why::Revoked => "it was revoked; the proxy needs a new one",
        _ => "the proxy's certificate, or the authorities this device trusts, must change",
    }
}

/// The link's life on the runtime: sends what the topics queue, pings
/// when quiet, and routes what it hears, until the socket ends, the
/// gateway says nothing for two pings, or a topic ends it (`end`).
async fn drive(
    socket: tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
    mut queued: async_mpsc::UnboundedReceiver<Message>,
    routes: Arc<Mutex<Routes>>,
    (alive, end): (Arc<AtomicBool>, Arc<Notify>),
    ping_every: Duration,
) {
    let (mut sink, mut stream) = socket.split();
    let mut ping = tokio::time::interval(ping_every);
    let mut pings = 0u64;
    let mut heard_at = tokio::time::Instant::now();
    let why = loop {
        tokio::select! {
            _ = end.notified() => break "a request went unanswered".to_owned(),
            out = queued.recv() => {
                let Some(out) = out else { break "the device let go of the link".to_owned() };
                if let Err(e) = sink.send(out).await {
                    break format!("sending: {e}");
                }
                ping.reset();
            }
            _ = ping.tick() => {
                if heard_at.elapsed() > ping_every * 2 {
                    break format!("the gateway said nothing for {:?}", heard_at.elapsed());
                }
                pings += 1;
                let text = Request::Ping { id: pings }.to_text();
                if let Err(e) = sink.send(Message::Text(text.into())).await {
                    break format!("sending: {e}");
                }
            }
            heard = stream.next() => {
                heard_at = tokio::time::Instant::now();
                match heard {
                    Some(Ok(Message::Binary(bytes))) => match on_frame(&bytes, &routes) {
                        Ok(()) => {}
                        Err(LinkEnd::Faulted(why)) => break why,
                        Err(LinkEnd::NotAFrame(reason, why)) => {
                            let fault = Frame::Fault { topic: 0, reason: reason.to_owned(), message: why.clone() };
                            let _ = sink.send(Message::Binary(fault.encode().into())).await;
                            break why;
                        }
                    },
                    Some(Ok(Message::Text(text))) => on_request(text.as_str(), &routes),
                    Some(Ok(Message::Close(_))) | None => break "the gateway closed the link".to_owned(),
                    Some(Ok(_)) => {}
                    Some(Err(e)) => break format!("the link: {e}"),
                }
            }
        }
    };
    alive.store(false, Ordering::Release);
    let _ = sink.close().await;
    for topic in lock(&routes).mine.values() {
        let _ = topic.send(Heard::LinkEnded(why.clone()));
    }
}

/// Why the link ends on a frame from the gateway.
enum LinkEnd {
    /// The gateway ended it with a fault on topic 0 (never answered).
    Faulted(String),
    /// The gateway sent what no gateway sends: answered with a fault on
    /// topic 0, this reason.
    NotAFrame(&'static str, String),
}

/// Routes one frame from the gateway.
fn on_frame(bytes: &[u8], routes: &Mutex<Routes>) -> Result<(), LinkEnd> {
    let frame = Frame::decode(bytes).map_err(|e| LinkEnd::NotAFrame(e.reason(), e.to_string()))?;
    let mut routes = lock(routes);
    let (mine, heard) = match frame {
        Frame::Open { topic, name, .. } => {
            let Some(mine) = routes.named.remove(&name) else {
                return Ok(());
            };
            routes.theirs.insert(topic, mine);
            (Some(mine), Heard::Opened)
        }
        Frame::Commits {
            topic,
            first,
            commits,
        } => {
            let mine = routes.theirs.get(&topic).copied();
            for (seq, commit) in (first..).zip(commits) {
                if let Some(to) = mine.and_then(|m| routes.mine.get(&m)) {
                    let _ = to.send(Heard::Commit(seq, commit));
                }
            }
            return Ok(());
        }
        Frame::Refused {
            topic,
            seq,
            reasons,
        } => (
            routes.theirs.get(&topic).copied(),
            Heard::Refused(seq, reasons),
        ),
        // A fault answering the device's frame names the device's number.
        Frame::Fault {
            topic: 0,
            reason,
            message,
        } => {
            return Err(LinkEnd::Faulted(format!(
                "the gateway ended the link ({reason}): {message}"
            )));
        }
        Frame::Fault {
            topic,
            reason,
            message,
        } => (Some(topic), Heard::Fault(reason, message)),
        // Nothing to drop: what a replica holds comes as messages (the
        // gateway's state carries none).
        Frame::State { .. } | Frame::Leave { .. } => return Ok(()),
    };
    if let Some(to) = mine.and_then(|m| routes.mine.get(&m)) {
        let _ = to.send(heard);
    }
    Ok(())
}

fn on_request(text: &str, routes: &Mutex<Routes>) {
    let routes = lock(routes);
    let (mine, heard) = match Request::from_text(text) {
        Some(Request::Taken { topic, seq }) => {
            (routes.theirs.get(&topic).copied(), Heard::Taken(seq))
        }
        Some(Request::Refused {
            reason, message, ..
        }) => {
            log::warn!("the gateway refused a request or frame ({reason}): {message}");
            return;
        }
        _ => return,
    };
    if let Some(to) = mine.and_then(|m| routes.mine.get(&m)) {
        let _ = to.send(heard);
    }
}

/// The topic a replica has open on the link now.
struct Open {
    generation: u64,
    end: Arc<Notify>,
    mine: u64,
    outgoing: async_mpsc::UnboundedSender<Message>,
    routes: Arc<Mutex<Routes>>,
    /// The sequence of the last Up sent.
    sent: u64,
}

/// What acknowledges a message: the link it came on, its sequence there,
/// and its bytes (kept to deliver it again when it is held).
pub struct Held {
    generation: u64,
    seq: u64,
    bytes: Vec<u8>,
}

/// The device loop's client of the gateway, for one replica: a topic of a
/// [`WsLink`].
pub struct Ws {
    link: WsLink,
    me: Uuid,
    /// The replica applied nothing yet: it opens with no root, wanting.
    holds_nothing: bool,
    open: Option<Open>,
    inbox: Receiver<Heard>,
    tell: Sender<Heard>,
    /// Messages heard while waiting for something else.
    pending: VecDeque<(u64, u64, Vec<u8>)>,
    /// A message the replica could not take, to deliver again.
    held: Option<Held>,
}

impl Ws {
    /// A client of its own link.
    pub fn new(settings: WsSettings, replica: &Replica) -> Result<Ws, Error> {
        Ws::on(&WsLink::new(settings), replica)
    }

    /// A client for `replica` on a link other replicas may share.
    pub fn on(link: &WsLink, replica: &Replica) -> Result<Ws, Error> {
        let applied = replica.last_applied()?;
        let (tell, inbox) = mpsc::channel();
        Ok(Ws {
            link: link.clone(),
            me: replica.me(),
            holds_nothing: applied.sequence == 0 && applied.epoch.is_empty(),
            open: None,
            inbox,
            tell,
            pending: VecDeque::new(),
            held: None,
        })
    }

    fn open(&self) -> Result<&Open, Error> {
        self.open
            .as_ref()
            .ok_or_else(|| down("the topic is not open"))
    }

    fn queue(&self, message: Message) -> Result<(), Error> {
        self.open()?
            .outgoing
            .send(message)
            .map_err(|_| down("the link ended"))
    }

    fn send_frame(&self, frame: &Frame) -> Result<(), Error> {
        self.queue(Message::Binary(frame.encode().into()))
    }

    fn forget_topic(&mut self) {
        if let Some(open) = self.open.take() {
            let mut routes = lock(&open.routes);
            routes.mine.remove(&open.mine);
            routes.theirs.retain(|_, mine| *mine != open.mine);
            routes.named.retain(|_, mine| *mine != open.mine);
        }
    }

    /// Takes what the link said, keeping messages aside; answers an error
    /// when the topic or the link ended.
    fn heard(&mut self, heard: Heard) -> Result<Option<Heard>, Error> {
        let generation = self.open()?.generation;
        match heard {
            Heard::Commit(seq, bytes) => {
                self.pending.push_back((generation, seq, bytes));
                Ok(None)
            }
            Heard::LinkEnded(why) => {
                self.open = None;
                Err(down(format!("the link ended: {why}")))
            }
            Heard::Fault(reason, message) => {
                self.forget_topic();
                Err(fault_error(&reason, &message))
            }
            other => Ok(Some(other)),
        }
    }

    /// Waits up to `timeout` for what `wanted` picks, keeping messages.
    fn wait_for(
        &mut self,
        timeout: Duration,
        wanted: impl Fn(&Heard) -> bool,
    ) -> Result<Heard, Error> {
        let until = Instant::now() + timeout;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            let heard = match self.inbox.recv_timeout(left) {
                Ok(heard) => heard,
                Err(RecvTimeoutError::Timeout) => {
                    // A gateway that does not answer may be gone without
                    // a word (a host lost, a network cut): the link is
                    // made again, from the next gateway.
                    if let Some(open) = &self.open {
                        open.end.notify_one();
                    }
                    return Err(down(format!("no answer in {timeout:?}")));
                }
                Err(RecvTimeoutError::Disconnected) => return Err(down("the link ended")),
            };
            if let Some(heard) = self.heard(heard)? {
                if wanted(&heard) {
                    return Ok(heard);
                }
            }
        }
    }
}

/// A fault naming the topic: refused for good when the credential does
/// not allow it, for now otherwise (the loop opens it again).
fn fault_error(reason: &str, message: &str) -> Error {
    let text = format!("the gateway ended the topic ({reason}): {message}");
    if reason == NOT_ALLOWED {
        Error::TransportRefused(text)
    } else {
        Error::TransportDown(text)
    }
}

impl Transport for Ws {
    type Handle = Held;

    fn connect(&mut self) -> Result<(), Error> {
        // A topic still open on a link that is up is left first: one
        // replica is one topic on a link.
        if let Some(open) = &self.open {
            let leave = Frame::Leave { topic: open.mine };
            let _ = open.outgoing.send(Message::Binary(leave.encode().into()));
        }
        self.forget_topic();
        self.pending.clear();
        while self.inbox.try_recv().is_ok() {}
        let Up {
            generation,
            end,
            outgoing,
            routes,
            ..
        } = self.link.ensure()?;
        let mine = self.link.number();
        let name = topic_name(self.me);
        {
            let mut routes = lock(&routes);
            routes.mine.insert(mine, self.tell.clone());
            routes.named.insert(name.clone(), mine);
        }
        self.open = Some(Open {
            generation,
            end,
            mine,
            outgoing,
            routes,
            sent: 0,
        });
        let root = (!self.holds_nothing).then(|| root_of(self.me));
        self.send_frame(&Frame::Open {
            topic: mine,
            name,
            want: root.is_none(),
            root,
        })?;
        let timeout = self.link.settings.request_timeout;
        self.wait_for(timeout, |h| matches!(h, Heard::Opened))?;
        Ok(())
    }

    fn next(&mut self) -> Result<Option<Delivery<Held>>, Error> {
        if let Some(held) = self.held.take() {
            let bytes = held.bytes.clone();
            return Ok(Some(Delivery {
                handle: held,
                bytes,
            }));
        }
        while let Ok(heard) = self.inbox.try_recv() {
            self.heard(heard)?;
        }
        self.open()?;
        Ok(self
            .pending
            .pop_front()
            .map(|(generation, seq, bytes)| Delivery {
                handle: Held {
                    generation,
                    seq,
                    bytes: bytes.clone(),
                },
                bytes,
            }))
    }

    fn ack(&mut self, handle: Held) -> Result<(), Error> {
        self.holds_nothing = false;
        let open = self.open()?;
        if open.generation != handle.generation {
            // Came on a link that ended: the message comes again.
            return Ok(());
        }
        let ack = Request::Ack {
            topic: open.mine,
            seq: handle.seq,
        };
        self.queue(Message::Text(ack.to_text().into()))
    }

    fn hold(&mut self, handle: Held, retry_in: Duration) -> Result<(), Error> {
        if let Some(open) = self
            .open
            .as_ref()
            .filter(|o| o.generation == handle.generation)
        {
            let refused = Frame::Refused {
                topic: open.mine,
                seq: handle.seq,
                reasons: vec![Reason::new(
                    "held",
                    format!("the replica could not take it now; again in {retry_in:?}"),
                )],
            };
            self.send_frame(&refused)?;
        }
        self.held = Some(handle);
        Ok(())
    }

    fn send(&mut self, up: &Upload) -> Result<(), Error> {
        let limit = self.link.settings.message_bytes;
        if up.bytes.len() > limit {
            return Err(Error::TransportRefused(format!(
                "an Up of {} bytes, more than a message takes ({limit})",
                up.bytes.len()
            )));
        }
        let open = self
            .open
            .as_mut()
            .ok_or_else(|| down("the topic is not open"))?;
        open.sent += 1;
        let (mine, seq) = (open.mine, open.sent);
        self.send_frame(&Frame::Commits {
            topic: mine,
            first: seq,
            commits: vec![up.bytes.clone()],
        })?;
        let timeout = self.link.settings.request_timeout;
        let answer = self.wait_for(
            timeout,
            |h| matches!(h, Heard::Taken(s) | Heard::Refused(s, _) if *s == seq),
        )?;
        match answer {
            Heard::Refused(_, reasons) => Err(up_refused(&reasons)),
            _ => Ok(()),
        }
    }

    fn wait(&mut self, timeout: Duration) -> Result<bool, Error> {
        if !self.pending.is_empty() {
            return Ok(true);
        }
        match self.inbox.recv_timeout(timeout) {
            Ok(Heard::Wake) => Ok(true),
            Ok(heard) => {
                self.heard(heard)?;
                Ok(true)
            }
            Err(RecvTimeoutError::Timeout) => Ok(false),
            Err(RecvTimeoutError::Disconnected) => Err(down("the link ended")),
        }
    }

    fn waker(&self) -> Option<Waker> {
        let tell = self.tell.clone();
        Some(Arc::new(move || {
            let _ = tell.send(Heard::Wake);
        }))
    }
}

/// An Up the gateway refused: for now when the server speaks an older
/// protocol (it is sent again once the server is upgraded), for good
/// otherwise (malformed, too large: the loop narrows it).
fn up_refused(reasons: &[Reason]) -> Error {
    let codes: Vec<&str> = reasons.iter().map(|r| r.code.as_str()).collect();
    let text = format!("the gateway refused the Up: {codes:?}");
    if codes.contains(&LATER_PROTOCOL) {
        Error::TransportDown(text)
    } else {
        Error::TransportRefused(text)
    }
}

impl Drop for Ws {
    fn drop(&mut self) {
        if let Some(open) = &self.open {
            let leave = Frame::Leave { topic: open.mine };
            let _ = open.outgoing.send(Message::Binary(leave.encode().into()));
        }
        self.forget_topic();
    }
}

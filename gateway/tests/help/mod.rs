//! What the gateway's end-to-end tests share: the shop (products to every
//! register, receipts filed from each) on a throwaway cluster with the
//! extension and its relay worker, the gateway's own binary run as a
//! process, registers on SQLite files running the device loop over the
//! WebSocket client, and a raw link for playing a hostile device.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use magic_sync_gateway::link::{root_of, topic_name, Frame, Request};
use magic_sync_replica::transport::ws::{Ws, WsLink, WsSettings};
use magic_sync_replica::transport::{run, Control, Options, Status, Transport};
use magic_sync_replica::{install, Replica, Settings, Table, Tables};
use magic_sync_tests::Cluster;
use postgres::Client;
use rusqlite::Connection;
use tempfile::TempDir;
use tungstenite::stream::MaybeTlsStream;
use tungstenite::{Message, WebSocket};
use uuid::Uuid;

/// Long enough for a busy machine; each wait ends as soon as it may.
pub const PATIENCE: Duration = Duration::from_secs(60);

pub const SERVER_SCHEMA: &str = "
    CREATE SCHEMA shop;
    CREATE TABLE shop.registers (
        id     uuid PRIMARY KEY,
        name   text NOT NULL,
        active boolean NOT NULL DEFAULT true);
    CREATE TABLE shop.products (
        id          uuid PRIMARY KEY,
        name        text NOT NULL,
        price_cents bigint NOT NULL,
        updated_at  timestamptz NOT NULL DEFAULT now());
    CREATE TABLE shop.receipts (
        id          uuid PRIMARY KEY,
        register_id uuid NOT NULL,
        total_cents bigint NOT NULL,
        sold_at     timestamptz NOT NULL);
    SELECT sync.declare_replicas('shop.registers', live => 'active');
    SELECT sync.declare_table('shop.products', sync => 'broadcast');
    SELECT sync.declare_table('shop.receipts', mirror => 'record', origin => 'register_id');
    -- The gateway's role: the queue's functions, its own schema for the
    -- credentials, and what filing receipts writes.
    CREATE ROLE gateway LOGIN;
    SELECT sync.allow_gateway('gateway');
    GRANT CREATE ON DATABASE shop TO gateway;
    GRANT USAGE ON SCHEMA shop TO gateway;
    GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA shop TO gateway;
";

pub const REGISTER_SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS products (
        id          BLOB PRIMARY KEY NOT NULL,
        name        TEXT NOT NULL,
        price_cents INTEGER NOT NULL,
        updated_at  TEXT NOT NULL,
        retired_at  TEXT);
    CREATE TABLE IF NOT EXISTS receipts (
        id          BLOB PRIMARY KEY NOT NULL,
        register_id BLOB NOT NULL,
        total_cents INTEGER NOT NULL,
        sold_at     TEXT NOT NULL);
";

pub fn tables() -> Tables {
    Tables::new(vec![
        Table::catalog("products").retired("retired_at"),
        Table::record("receipts").origin("register_id"),
    ])
}

pub fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let began = Instant::now();
    while !done() {
        assert!(began.elapsed() < PATIENCE, "waited {PATIENCE:?} for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The shop with its relay worker: a commit that notes a change wakes it.
pub struct Shop {
    pub cluster: Cluster,
    pub pg: Client,
    dir: TempDir,
}

impl Shop {
    pub fn open() -> Shop {
        let cluster = Cluster::start_with(&[
            "shared_preload_libraries=magic_sync",
            "magic_sync.database=shop",
            "magic_sync.idle=3600",
            "max_connections=120",
        ]);
        let mut pg = cluster.database_with_extension("shop");
        pg.batch_execute(SERVER_SCHEMA).expect("the shop's schema");
        Shop {
            cluster,
            pg,
            dir: tempfile::tempdir().expect("a directory for the registers"),
        }
    }

    pub fn reconnect(&mut self) {
        self.pg = self.cluster.connect("shop");
    }

    /// The gateway role's connection string.
    pub fn gateway_database(&self) -> String {
        format!(
            "host={} port={} user=gateway dbname=shop",
            self.cluster.socket_dir().display(),
            self.cluster.port()
        )
    }

    pub fn add_register(&mut self, name: &str) -> Uuid {
        let id = Uuid::new_v4();
        self.pg
            .execute(
                "INSERT INTO shop.registers (id, name) VALUES ($1, $2)",
                &[&id, &name],
            )
            .unwrap();
        id
    }

    pub fn file_of(&self, register: Uuid) -> PathBuf {
        self.dir.path().join(format!("{register}.db"))
    }

    pub fn run(&mut self, sql: &str) {
        self.pg.batch_execute(sql).unwrap();
    }

    pub fn add_product(&mut self, name: &str, price: i64) {
        self.pg
            .execute(
                "INSERT INTO shop.products (id, name, price_cents) VALUES (gen_random_uuid(), $1, $2)",
                &[&name, &price],
            )
            .unwrap();
    }

    /// The products' names, sorted.
    pub fn product_names(&mut self) -> Vec<String> {
        let mut names: Vec<String> = self
            .pg
            .query("SELECT name FROM shop.products", &[])
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        names.sort();
        names
    }

    /// The receipts filed: (id, register, total), sorted.
    pub fn receipts(&mut self) -> Vec<(Uuid, Uuid, i64)> {
        let mut rows: Vec<(Uuid, Uuid, i64)> = self
            .pg
            .query(
                "SELECT id, register_id, total_cents FROM shop.receipts",
                &[],
            )
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2)))
            .collect();
        rows.sort();
        rows
    }
}

/// The gateway's binary, run as a process of its own.
pub struct Gateway {
    child: Child,
    pub address: SocketAddr,
    database: String,
    extra: Vec<String>,
}

pub const BINARY: &str = env!("CARGO_BIN_EXE_magic-sync-gateway");

/// The replica's command line, built beside the gateway (the workspace's
/// build gives it the feature `ws`).
pub fn replica_binary() -> PathBuf {
    let binary = Path::new(BINARY).with_file_name("magic-sync-replica");
    assert!(
        binary.exists(),
        "{} is not built: cargo build -p magic_sync_replica --features ws --bin magic-sync-replica",
        binary.display()
    );
    binary
}

/// The register's tables, as `magic-sync-replica init` takes them.
pub const DECLARATION: &str = r#"{
  "schema": [
    "CREATE TABLE products (id BLOB PRIMARY KEY NOT NULL, name TEXT NOT NULL, price_cents INTEGER NOT NULL, updated_at TEXT NOT NULL, retired_at TEXT)",
    "CREATE TABLE receipts (id BLOB PRIMARY KEY NOT NULL, register_id BLOB NOT NULL, total_cents INTEGER NOT NULL, sold_at TEXT NOT NULL)"
  ],
  "tables": [
    {"name": "products", "mirror": "catalog", "retired": "retired_at"},
    {"name": "receipts", "mirror": "record", "origin": "register_id"}
  ]
}"#;

impl Gateway {
    /// Starts the gateway for the shop on a free loopback port, with these
    /// options too.
    pub fn start(shop: &Shop, extra: &[&str]) -> Gateway {
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        Gateway::spawn(shop.gateway_database(), "127.0.0.1:0", extra)
    }

    fn spawn(database: String, listen: &str, extra: Vec<String>) -> Gateway {
        let mut child = Command::new(BINARY)
            .args(["serve", "--database", &database, "--listen", listen])
            .args(&extra)
            .stdout(Stdio::piped())
            .spawn()
            .expect("the gateway starts");
        let mut first = String::new();
        BufReader::new(child.stdout.take().expect("its stdout"))
            .read_line(&mut first)
            .expect("the gateway says where it listens");
        let address = first
            .trim()
            .rsplit(' ')
            .next()
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("the gateway's first line names its address: {first:?}"));
        Gateway {
            child,
            address,
            database,
            extra,
        }
    }

    pub fn url(&self) -> String {
        format!("ws://{}/link", self.address)
    }

    /// `kill -9`: nothing it was doing is finished.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Ctrl-C; answers whether it exited cleanly.
    pub fn interrupt(&mut self) -> bool {
        let status = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status()
            .expect("kill -INT");
        assert!(status.success());
        self.child.wait().expect("the gateway exits").success()
    }

    /// Starts it again on the same address.
    pub fn start_again(&mut self) {
        let listen = self.address.to_string();
        let mut again = Gateway::spawn(self.database.clone(), &listen, self.extra.clone());
        std::mem::swap(self, &mut again);
    }

    /// Issues a credential for `replica` (the binary's `issue`).
    pub fn issue(&self, replica: Uuid) -> String {
        self.command(&["issue", &replica.to_string()])
    }

    /// Revokes a credential, or every one of a replica.
    pub fn revoke(&self, which: Uuid) -> String {
        self.command(&["revoke", &which.to_string()])
    }

    fn command(&self, args: &[&str]) -> String {
        let out = Command::new(BINARY)
            .arg(args[0])
            .args(["--database", &self.database])
            .args(&args[1..])
            .output()
            .expect("the gateway's binary runs");
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Opens a register's replica on its SQLite file, as its program does.
pub fn open_register(file: &Path, me: Uuid) -> Replica {
    let mut conn = Connection::open(file).unwrap();
    conn.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; \
         PRAGMA foreign_keys = ON; PRAGMA recursive_triggers = ON;",
    )
    .unwrap();
    conn.execute_batch(REGISTER_SCHEMA).unwrap();
    install(&mut conn, &tables()).unwrap();
    Replica::open(conn, tables(), me, Settings::default()).unwrap()
}

/// The products' names a register holds, sorted (retired ones left out).
pub fn names_held(file: &Path) -> Vec<String> {
    magic_sync_tests::shop::product_names_where(file, "retired_at IS NULL")
}

/// Rows the register wrote that the server has not filed yet.
pub fn unfiled(file: &Path) -> i64 {
    Connection::open(file)
        .unwrap()
        .query_row("SELECT count(*) FROM sync_notes", [], |r| r.get(0))
        .unwrap()
}

/// The register's program writes a receipt through a connection of its own.
pub fn sell(file: &Path, me: Uuid, total: i64) -> Uuid {
    let conn = Connection::open(file).unwrap();
    conn.execute_batch("PRAGMA recursive_triggers = ON")
        .unwrap();
    let id = Uuid::new_v4();
    conn.execute(
        "INSERT INTO receipts (id, register_id, total_cents, sold_at) \
         VALUES (?1, ?2, ?3, '2026-10-01T10:00:00.000000Z')",
        rusqlite::params![id.as_bytes().to_vec(), me.as_bytes().to_vec(), total],
    )
    .unwrap();
    id
}

/// Options for registers in tests: an hour between polls, so only the
/// gateway wakes them; short pauses after a failure.
pub fn options() -> Options {
    Options {
        poll_every: Duration::from_secs(3600),
        longest_pause: Duration::from_secs(1),
        ..Options::default()
    }
}

/// A register's device loop in a thread of its own, its statuses collected.
pub struct Register {
    pub me: Uuid,
    pub file: PathBuf,
    pub control: Control,
    statuses: Receiver<Status>,
    thread: Option<JoinHandle<()>>,
    seen: Vec<String>,
}

impl Register {
    /// A register on a link of its own.
    pub fn start(shop: &Shop, gateway: &Gateway, me: Uuid) -> Register {
        let link = WsLink::new(WsSettings::new(gateway.url(), gateway.issue(me)));
        Register::on(shop, &link, me)
    }

    /// A register on a link others may share.
    pub fn on(shop: &Shop, link: &WsLink, me: Uuid) -> Register {
        let link = link.clone();
        Register::with_transport(shop, me, move |replica| Ws::on(&link, replica).unwrap())
    }

    pub fn with_transport<T, F>(shop: &Shop, me: Uuid, connect: F) -> Register
    where
        T: Transport,
        F: FnOnce(&Replica) -> T + Send + 'static,
    {
        let file = shop.file_of(me);
        let control = Control::new();
        let steered = control.clone();
        let (tell, statuses) = channel();
        let opened = file.clone();
        let thread = std::thread::spawn(move || {
            let mut replica = open_register(&opened, me);
            let mut transport = connect(&replica);
            run(
                &mut replica,
                &mut transport,
                &options(),
                &steered,
                |status| {
                    let _ = tell.send(status);
                },
            );
        });
        Register {
            me,
            file,
            control,
            statuses,
            thread: Some(thread),
            seen: Vec::new(),
        }
    }

    /// Waits for a status `wanted` picks; panics with every status seen
    /// when none comes in time.
    pub fn expect(&mut self, what: &str, mut wanted: impl FnMut(&Status) -> bool) {
        let began = Instant::now();
        loop {
            let left = PATIENCE.saturating_sub(began.elapsed());
            match self.statuses.recv_timeout(left) {
                Ok(status) => {
                    self.seen.push(status.to_string());
                    if wanted(&status) {
                        return;
                    }
                }
                Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => {
                    panic!("waited for {what}; saw:\n{}", self.seen.join("\n"))
                }
            }
        }
    }

    pub fn names_held(&self) -> Vec<String> {
        names_held(&self.file)
    }

    pub fn sell(&self, total: i64) -> Uuid {
        let id = sell(&self.file, self.me, total);
        self.control.poke();
        id
    }

    pub fn unfiled(&self) -> i64 {
        unfiled(&self.file)
    }

    /// Every status seen so far, as text (`drain` first to take the
    /// newest).
    pub fn history(&self) -> &[String] {
        &self.seen
    }

    /// Every status seen so far, taken without waiting.
    pub fn drain(&mut self) -> Vec<String> {
        let now: Vec<String> = self.statuses.try_iter().map(|s| s.to_string()).collect();
        self.seen.extend(now.iter().cloned());
        now
    }

    pub fn stop(mut self) {
        self.control.stop();
        if let Some(thread) = self.thread.take() {
            thread.join().expect("the loop ends without a panic");
        }
    }
}

impl Drop for Register {
    fn drop(&mut self) {
        self.control.stop();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A device that speaks the link by hand: frames and requests as given.
pub struct RawLink {
    socket: WebSocket<MaybeTlsStream<TcpStream>>,
}

/// What a raw link heard.
#[derive(Debug, PartialEq)]
pub enum Heard {
    Frame(Frame),
    Request(Request),
    Closed,
}

impl RawLink {
    /// Connects presenting these tokens; `Err` carries the HTTP status of a
    /// refused handshake.
    pub fn connect(gateway: &Gateway, tokens: &[&str]) -> Result<RawLink, u16> {
        use tungstenite::client::IntoClientRequest;
        let mut request = gateway.url().into_client_request().unwrap();
        for token in tokens {
            request
                .headers_mut()
                .append("authorization", format!("Bearer {token}").parse().unwrap());
        }
        match tungstenite::connect(request) {
            Ok((socket, _)) => {
                if let MaybeTlsStream::Plain(tcp) = socket.get_ref() {
                    tcp.set_read_timeout(Some(PATIENCE)).unwrap();
                }
                Ok(RawLink { socket })
            }
            Err(tungstenite::Error::Http(response)) => Err(response.status().as_u16()),
            Err(e) => panic!("connecting to the gateway: {e}"),
        }
    }

    /// The link's TCP socket.
    pub fn tcp(&self) -> &TcpStream {
        match self.socket.get_ref() {
            MaybeTlsStream::Plain(tcp) => tcp,
            _ => unreachable!("the tests' links are plain"),
        }
    }

    pub fn send_bytes(&mut self, bytes: Vec<u8>) {
        self.socket.send(Message::Binary(bytes.into())).unwrap();
    }

    pub fn send(&mut self, frame: &Frame) {
        self.send_bytes(frame.encode());
    }

    pub fn send_text(&mut self, text: &str) {
        self.socket.send(Message::Text(text.into())).unwrap();
    }

    pub fn request(&mut self, request: &Request) {
        self.send_text(&request.to_text());
    }

    /// The next frame or request; `Closed` once the gateway ended the link.
    pub fn next(&mut self) -> Heard {
        loop {
            match self.socket.read() {
                Ok(Message::Binary(bytes)) => {
                    return Heard::Frame(
                        Frame::decode(&bytes).expect("the gateway's frames decode"),
                    )
                }
                Ok(Message::Text(text)) => {
                    return Heard::Request(
                        Request::from_text(text.as_str()).expect("the gateway's requests read"),
                    )
                }
                Ok(Message::Close(_)) => return Heard::Closed,
                Ok(_) => continue,
                Err(tungstenite::Error::Io(e))
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    panic!("the gateway said nothing for {PATIENCE:?}")
                }
                Err(_) => return Heard::Closed,
            }
        }
    }

    /// Skips what the gateway says until it is what `wanted` picks.
    pub fn until(&mut self, what: &str, wanted: impl Fn(&Heard) -> bool) -> Heard {
        let mut seen = Vec::new();
        loop {
            let heard = self.next();
            if wanted(&heard) {
                return heard;
            }
            assert!(
                heard != Heard::Closed,
                "the link ended waiting for {what}; saw {seen:?}"
            );
            seen.push(heard);
        }
    }

    /// Opens `replica` as topic `topic`, holding it; answers the gateway's
    /// number for it.
    pub fn open(&mut self, topic: u64, replica: Uuid) -> u64 {
        self.send(&Frame::Open {
            topic,
            name: topic_name(replica),
            root: Some(root_of(replica)),
            want: false,
        });
        match self.until("the gateway's open", |h| {
            matches!(h, Heard::Frame(Frame::Open { .. } | Frame::Fault { .. }))
        }) {
            Heard::Frame(Frame::Open { topic, .. }) => topic,
            other => panic!("the topic did not open: {other:?}"),
        }
    }

    /// Whether the link still answers: a ping and its pong, skipping what
    /// comes before it.
    pub fn answers_a_ping(&mut self, id: u64) -> bool {
        self.request(&Request::Ping { id });
        loop {
            match self.next() {
                Heard::Request(Request::Pong { id: got }) if got == id => return true,
                Heard::Closed => return false,
                _ => continue,
            }
        }
    }
}

/// A TCP proxy between devices and the gateway that can cut a connection
/// in the middle of what the device sends next, or go silent both ways
/// without closing anything (a network that stops carrying).
pub struct Proxy {
    pub address: SocketAddr,
    cut: std::sync::Arc<std::sync::atomic::AtomicBool>,
    frozen: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Proxy {
    pub fn to(gateway: &Gateway) -> Proxy {
        use std::sync::atomic::AtomicBool;
        use std::sync::Arc;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let target = gateway.address;
        let cut = Arc::new(AtomicBool::new(false));
        let frozen = Arc::new(AtomicBool::new(false));
        let (cutting, freezing) = (cut.clone(), frozen.clone());
        std::thread::spawn(move || {
            for device in listener.incoming() {
                let Ok(device) = device else { return };
                let Ok(upstream) = TcpStream::connect(target) else {
                    continue;
                };
                let (d2, u2) = (device.try_clone().unwrap(), upstream.try_clone().unwrap());
                let (cutting, up_frozen, down_frozen) =
                    (cutting.clone(), freezing.clone(), freezing.clone());
                std::thread::spawn(move || copy(device, upstream, Some(cutting), up_frozen));
                std::thread::spawn(move || copy(u2, d2, None, down_frozen));
            }
        });
        Proxy {
            address,
            cut,
            frozen,
        }
    }

    pub fn url(&self) -> String {
        format!("ws://{}/link", self.address)
    }

    /// The next bytes a device sends are cut in half, and its connection
    /// with them.
    pub fn cut_the_next_frame_midway(&self) {
        self.cut.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Carries nothing more either way, and closes nothing: each side's
    /// bytes wait, unread, until `thaw`.
    pub fn freeze(&self) {
        self.frozen.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Carries again what waited, and what comes.
    pub fn thaw(&self) {
        self.frozen
            .store(false, std::sync::atomic::Ordering::SeqCst);
    }
}

fn copy(
    mut from: TcpStream,
    mut to: TcpStream,
    cut: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    frozen: std::sync::Arc<std::sync::atomic::AtomicBool>,
) {
    use std::io::{ErrorKind, Read, Write};
    use std::net::Shutdown;
    use std::sync::atomic::Ordering;
    // Reads in short slices, so that what it holds while frozen goes on
    // as soon as it thaws.
    let _ = from.set_read_timeout(Some(Duration::from_millis(20)));
    let mut buffer = [0u8; 65536];
    // What came while frozen, or the end of the stream: held, as a
    // network that stops carrying holds it, until it thaws.
    let mut held: Vec<u8> = Vec::new();
    let mut ended = false;
    // The other end went away: what comes is read and dropped, as a
    // network drops what it cannot deliver, until this end ends too.
    let mut gone = false;
    loop {
        if !ended {
            match from.read(&mut buffer) {
                Ok(0) => ended = true,
                Ok(n) => held.extend_from_slice(&buffer[..n]),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(_) => ended = true,
            }
        } else {
            std::thread::sleep(Duration::from_millis(20));
        }
        if frozen.load(Ordering::SeqCst) {
            continue;
        }
        if !held.is_empty() {
            let cutting = cut
                .as_ref()
                .is_some_and(|c| c.swap(false, Ordering::SeqCst));
            let forward = if cutting {
                held.len().div_ceil(2)
            } else {
                held.len()
            };
            gone = gone || to.write_all(&held[..forward]).is_err();
            held.clear();
            if cutting {
                // Cut: the connection ends both ways at once.
                let _ = from.shutdown(Shutdown::Both);
                let _ = to.shutdown(Shutdown::Both);
                return;
            }
        }
        if ended {
            break;
        }
    }
    // One way ends; the other carries on until it ends too.
    let _ = from.shutdown(Shutdown::Read);
    let _ = to.shutdown(Shutdown::Write);
}

//! A throwaway nats-server with JetStream: its store in a scratch
//! directory, on a free loopback port, killed when dropped. It can be
//! stopped and started again on the same port and store, as a server
//! restarted is. And the server half's part of the NATS conventions
//! (`magic_sync_replica::transport::nats_subjects`) for tests that play
//! it: the two streams, a replica's consumer, and the accounts config the
//! book shows (docs/src/nats/). And a JetStream cluster of such servers
//! on loopback (`start_cluster`), each node running the book's
//! docs/src/nats/cluster.conf, with what the tests ask of it: where each
//! client is connected, which node leads a stream.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, consumer, stream};
use magic_sync_replica::transport::nats_subjects as subjects;
use tempfile::TempDir;
use uuid::Uuid;

/// The account the book shows, and one device's user in it.
pub const ACCOUNTS_TEMPLATE: &str = include_str!("../../docs/src/nats/accounts.conf");
pub const DEVICE_TEMPLATE: &str = include_str!("../../docs/src/nats/device.conf");
/// One node of the book's JetStream cluster: it includes `accounts.conf`.
pub const CLUSTER_TEMPLATE: &str = include_str!("../../docs/src/nats/cluster.conf");

/// The server half's user in the accounts config.
pub const SERVER_USER: &str = "magic_sync";

pub struct NatsServer {
    dir: TempDir,
    port: u16,
    config: Option<PathBuf>,
    /// Further options on its command line (a cluster node's name and
    /// routes).
    args: Vec<String>,
    /// Its HTTP monitoring port, when it has one.
    monitor: Option<u16>,
    child: Option<Child>,
    starts: u32,
}

/// Starts a nats-server with JetStream, and no accounts.
pub fn start() -> NatsServer {
    NatsServer::start(None, false)
}

/// Starts a nats-server with JetStream and this config file's text.
pub fn start_with_config(config: &str) -> NatsServer {
    NatsServer::start(Some(config), false)
}

/// Starts a nats-server with JetStream, no accounts, and its HTTP
/// monitoring on a port of its own (`monitoring`, `stream`).
pub fn start_monitored() -> NatsServer {
    NatsServer::start(None, true)
}

fn binary() -> PathBuf {
    let installed = Path::new("/usr/sbin/nats-server");
    if installed.exists() {
        installed.to_owned()
    } else {
        PathBuf::from("nats-server")
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

impl NatsServer {
    fn start(config: Option<&str>, monitored: bool) -> NatsServer {
        let dir = tempfile::Builder::new()
            .prefix("magic_sync-nats-")
            .tempdir()
            .expect("a scratch directory");
        let config = config.map(|text| {
            let path = dir.path().join("nats.conf");
            std::fs::write(&path, text).expect("writes the config");
            path
        });
        let mut server = NatsServer {
            dir,
            port: free_port(),
            config,
            args: Vec::new(),
            monitor: monitored.then(free_port),
            child: None,
            starts: 0,
        };
        server.spawn();
        server
    }

    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn store_dir(&self) -> PathBuf {
        self.dir.path().join("store")
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join(format!("log-{}.txt", self.starts))
    }

    /// Stops the server as its operator would (SIGTERM), and waits for it.
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        let began = Instant::now();
        while child.try_wait().ok().flatten().is_none() {
            if began.elapsed() > Duration::from_secs(10) {
                let _ = child.kill();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.wait();
    }

    /// Kills the server (SIGKILL), as a crash does: what it had not written
    /// down is lost.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts a server stopped by `stop` again, on the same port and store.
    pub fn start_again(&mut self) {
        if self.child.is_none() {
            self.spawn();
        }
    }

    /// Stops the server, and starts it again on the same port and store.
    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }

    fn spawn(&mut self) {
        self.starts += 1;
        let mut command = Command::new(binary());
        command
            .args([
                "-js",
                "-a",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-sd",
            ])
            .arg(self.store_dir())
            .arg("-l")
            .arg(self.log_path())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(self.log_path()).expect("a log file"));
        if let Some(config) = &self.config {
            command.arg("-c").arg(config);
        }
        if let Some(monitor) = self.monitor {
            command.args(["-m", &monitor.to_string()]);
        }
        command.args(&self.args);
        let child = command.spawn().unwrap_or_else(|e| {
            panic!("cannot run nats-server (scripts/setup.sh installs it): {e}")
        });
        self.child = Some(child);
        self.wait_until_ready();
    }

    /// Until it says it is ready (JetStream too) and takes connections.
    fn wait_until_ready(&mut self) {
        let began = Instant::now();
        loop {
            let ready = std::fs::read_to_string(self.log_path())
                .is_ok_and(|log| log.contains("Server is ready"));
            if ready && TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return;
            }
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                panic!("nats-server exited ({status}):\n{}", self.log());
            }
            assert!(
                began.elapsed() < Duration::from_secs(30),
                "nats-server did not become ready:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Where JetStream keeps a consumer's own record (what it delivered,
    /// what is pending), under the default account.
    pub fn consumer_dir(&self, stream: &str, consumer: &str) -> PathBuf {
        self.store_dir()
            .join("jetstream/$G/streams")
            .join(stream)
            .join("obs")
            .join(consumer)
    }

    /// Leaves a consumer as a kill of nats-server just after an
    /// acknowledgement can: the message it delivered (`reply`: that
    /// delivery's acknowledgement subject) is gone from the stream, let go
    /// as acknowledged, while the consumer's own record, kept from before
    /// the acknowledgement, still has it pending. With one delivery at a
    /// time, the consumer then delivers nothing more, and each start of the
    /// server logs that it could not find the message (issue 29).
    ///
    /// The stream must still hold an older message of another subject,
    /// else the server drops a pending message below the stream's first
    /// as it starts. Done by hand, as the timing of a real kill cannot be
    /// hit every time: the server stopped, the consumer's record copied,
    /// the acknowledgement made, and the old record put back.
    pub fn lose_an_acknowledgement(&mut self, stream: &str, consumer: &str, reply: &str) {
        let record = self.consumer_dir(stream, consumer);
        let kept = self.dir.path().join("consumer-before-the-ack");
        self.stop();
        copy_dir(&record, &kept);
        self.start_again();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let url = self.url();
        runtime.block_on(async {
            let client = async_nats::connect(&url).await.expect("connects");
            client
                .publish(reply.to_owned(), "+ACK".into())
                .await
                .expect("acknowledges");
            client.flush().await.expect("flushes");
            let js = jetstream::new(client);
            let began = Instant::now();
            loop {
                let info = js
                    .get_stream(stream)
                    .await
                    .expect("the stream")
                    .consumer_info(consumer)
                    .await
                    .expect("the consumer");
                if info.num_ack_pending == 0 {
                    break;
                }
                assert!(began.elapsed() < Duration::from_secs(30), "the ack taken");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        });
        self.stop();
        std::fs::remove_dir_all(&record).expect("drops the consumer's record");
        copy_dir(&kept, &record);
        self.start_again();
    }

    /// What the server logged since it last started.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// Whether it runs (it was not stopped or killed since it started).
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// Its process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// What its HTTP monitoring answers at `path` (`/varz`, `/connz`...),
    /// as JSON. Panics when it was started without monitoring.
    pub fn monitoring(&self, path: &str) -> serde_json::Value {
        let port = self.monitor.expect("a server started with monitoring");
        let mut http = TcpStream::connect(("127.0.0.1", port)).expect("the monitoring port");
        http.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("a read timeout");
        write!(
            http,
            "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        )
        .expect("asks the monitoring port");
        let mut answer = String::new();
        http.read_to_string(&mut answer)
            .expect("the monitoring port answers");
        let (_, body) = answer
            .split_once("\r\n\r\n")
            .unwrap_or_else(|| panic!("an HTTP answer: {answer}"));
        serde_json::from_str(body).unwrap_or_else(|e| panic!("JSON from {path}: {e}: {body}"))
    }

    /// What it says of a stream (`/jsz`): its config, state (messages,
    /// bytes, consumers) and cluster, if it holds it.
    pub fn stream(&self, stream: &str) -> Option<serde_json::Value> {
        stream_in(
            &self.monitoring("/jsz?accounts=true&streams=true&config=true"),
            stream,
        )
    }

    /// The names of the clients connected to it now (the name each gave
    /// when it connected: `magic_sync relay`, `magic_sync replica <id>`).
    pub fn client_names(&self) -> Vec<String> {
        self.monitoring("/connz?limit=100000")["connections"]
            .as_array()
            .map(|all| {
                all.iter()
                    .filter_map(|c| c["name"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let log = self.log();
            let tail: Vec<&str> = log.lines().rev().take(30).collect();
            eprintln!("--- nats-server's log, last lines ---");
            for line in tail.iter().rev() {
                eprintln!("{line}");
            }
        }
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The accounts config of the book (docs/src/nats/), with the server half's
/// password and a user for each device: (replica, password).
pub fn accounts_config(server_password: &str, devices: &[(Uuid, &str)]) -> String {
    let users: String = devices
        .iter()
        .map(|(replica, password)| {
            DEVICE_TEMPLATE
                .replace("REPLICA_ID", &replica.hyphenated().to_string())
                .replace("DEVICE_PASSWORD", password)
        })
        .collect();
    ACCOUNTS_TEMPLATE
        .replace("SERVER_PASSWORD", server_password)
        .replace("      # DEVICES\n", &users)
}

/// The server half's streams: down (file storage, workqueue retention)
/// and up, with the default prefix.
pub async fn create_streams(js: &jetstream::Context) {
    let prefix = subjects::DEFAULT_PREFIX;
    js.create_stream(stream::Config {
        name: subjects::DOWN_STREAM.to_owned(),
        subjects: vec![subjects::down_stream_subjects(prefix)],
        storage: stream::StorageType::File,
        retention: stream::RetentionPolicy::WorkQueue,
        ..Default::default()
    })
    .await
    .expect("creates the down stream");
    js.create_stream(stream::Config {
        name: subjects::UP_STREAM.to_owned(),
        subjects: vec![subjects::up_stream_subjects(prefix)],
        storage: stream::StorageType::File,
        ..Default::default()
    })
    .await
    .expect("creates the up stream");
}

/// The config of a replica's durable pull consumer on the down stream.
pub fn consumer_config(replica: Uuid) -> consumer::pull::Config {
    consumer::pull::Config {
        durable_name: Some(subjects::consumer_name(replica)),
        filter_subject: subjects::down_subject(subjects::DEFAULT_PREFIX, replica),
        ack_policy: consumer::AckPolicy::Explicit,
        max_ack_pending: subjects::MAX_ACK_PENDING,
        deliver_policy: consumer::DeliverPolicy::All,
        ack_wait: subjects::ACK_WAIT,
        ..Default::default()
    }
}

/// Creates a replica's consumer, as the server half does before it sends
/// the replica anything.
pub async fn create_consumer(js: &jetstream::Context, replica: Uuid) -> consumer::PullConsumer {
    js.get_stream(subjects::DOWN_STREAM)
        .await
        .expect("the down stream")
        .create_consumer(consumer_config(replica))
        .await
        .expect("creates the replica's consumer")
}

/// Publishes a message down to a replica, under its outbox id, as the
/// server half does; waits for the stream to store it.
pub async fn publish_down(js: &jetstream::Context, replica: Uuid, outbox_id: &str, bytes: Vec<u8>) {
    let mut headers = async_nats::HeaderMap::new();
    headers.insert(subjects::MSG_ID, outbox_id);
    js.publish_with_headers(
        subjects::down_subject(subjects::DEFAULT_PREFIX, replica),
        headers,
        bytes.into(),
    )
    .await
    .expect("publishes down")
    .await
    .expect("the down stream stores it");
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("makes the directory");
    for entry in std::fs::read_dir(from).expect("reads the directory") {
        let entry = entry.expect("an entry");
        std::fs::copy(entry.path(), to.join(entry.file_name())).expect("copies a file");
    }
}

/// A JetStream cluster of throwaway nats-servers on loopback: each node
/// runs the book's `cluster.conf` (with `accounts.conf` beside it), its
/// name, client port, route port and store given on its command line,
/// which take the place of the file's hosts; routes between every node;
/// HTTP monitoring on a port of each node's own. A node can be killed and
/// started again like a lone server.
pub struct NatsCluster {
    pub nodes: Vec<NatsServer>,
}

/// Starts `size` nodes as one JetStream cluster, `accounts` (the book's
/// accounts.conf, filled in: `accounts_config`) the account of each, and
/// waits until they agree on a leader of the cluster's metadata.
pub fn start_cluster(size: usize, accounts: &str) -> NatsCluster {
    let routes: Vec<u16> = (0..size).map(|_| free_port()).collect();
    let route_list = routes
        .iter()
        .map(|port| format!("nats-route://127.0.0.1:{port}"))
        .collect::<Vec<_>>()
        .join(",");
    let nodes = routes
        .iter()
        .enumerate()
        .map(|(i, route)| {
            let dir = tempfile::Builder::new()
                .prefix("magic_sync-nats-node-")
                .tempdir()
                .expect("a scratch directory");
            let config = dir.path().join("cluster.conf");
            std::fs::write(&config, CLUSTER_TEMPLATE).expect("writes cluster.conf");
            std::fs::write(dir.path().join("accounts.conf"), accounts)
                .expect("writes accounts.conf");
            let mut node = NatsServer {
                dir,
                port: free_port(),
                config: Some(config),
                args: vec![
                    "--name".to_owned(),
                    node_name(i),
                    "--cluster".to_owned(),
                    format!("nats://127.0.0.1:{route}"),
                    "--routes".to_owned(),
                    route_list.clone(),
                ],
                monitor: Some(free_port()),
                child: None,
                starts: 0,
            };
            node.spawn();
            node
        })
        .collect();
    let cluster = NatsCluster { nodes };
    cluster.wait_for_a_metadata_leader();
    cluster
}

/// The name of node `i` (from 0): `nats-1`, `nats-2`...
pub fn node_name(i: usize) -> String {
    format!("nats-{}", i + 1)
}

impl NatsCluster {
    /// Every node's URL, comma-separated, as `magic_sync.nats_url` takes
    /// them.
    pub fn url_list(&self) -> String {
        self.urls().join(",")
    }

    /// Every node's URL.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(NatsServer::url).collect()
    }

    /// The node of this name (`nats-2`): its index.
    pub fn index_of(&self, name: &str) -> usize {
        (0..self.nodes.len())
            .find(|i| node_name(*i) == name)
            .unwrap_or_else(|| panic!("no node named {name}"))
    }

    /// Waits until every node that runs knows a leader of the cluster's
    /// metadata (JetStream answers nothing before).
    pub fn wait_for_a_metadata_leader(&self) {
        let began = Instant::now();
        while !self
            .nodes
            .iter()
            .filter(|n| n.is_running())
            .all(|n| n.log().contains("metadata leader"))
        {
            assert!(
                began.elapsed() < Duration::from_secs(60),
                "the nodes agreed on no metadata leader"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// What a running node says of a stream of `account` (`/jsz`): its
    /// config, state and cluster (leader, replicas), if it knows it.
    pub fn stream(&self, account: &str, stream: &str) -> Option<serde_json::Value> {
        self.nodes
            .iter()
            .filter(|n| n.is_running())
            .find_map(|node| {
                stream_in(
                    &node.monitoring(&format!("/jsz?acc={account}&streams=true&config=true")),
                    stream,
                )
            })
    }

    /// The node that leads `stream` now, once one does: its index.
    pub fn leader_of(&self, account: &str, stream: &str) -> Option<usize> {
        self.stream(account, stream)
            .and_then(|s| s["cluster"]["leader"].as_str().map(str::to_owned))
            .filter(|name| !name.is_empty())
            .map(|name| self.index_of(&name))
    }

    /// The running node a client of this name is connected to, if one is.
    pub fn node_of_client(&self, name: &str) -> Option<usize> {
        (0..self.nodes.len()).find(|i| {
            self.nodes[*i].is_running() && self.nodes[*i].client_names().iter().any(|n| n == name)
        })
    }
}

/// A stream's details in what `/jsz` answered, whatever its account.
fn stream_in(jsz: &serde_json::Value, stream: &str) -> Option<serde_json::Value> {
    jsz["account_details"]
        .as_array()?
        .iter()
        .flat_map(|a| a["stream_detail"].as_array().cloned().unwrap_or_default())
        .find(|s| s["name"] == stream)
}

//! What tests/nats_worker_faults.rs puts between the relay worker and
//! nats-server: a small TCP proxy that reads enough of the NATS text
//! protocol to see the worker's publishes down and JetStream's answers to
//! them, and can lose an answer or hold answers back a little; and a way to
//! find a nats-server's process, to stop it (SIGSTOP) without closing its
//! connections.
//!
//! Why a proxy, and why it parses: the faults wanted happen between
//! JetStream storing a message and the worker hearing so, which no setting
//! of nats-server or async-nats brings about. A publish is one command of
//! the client (`PUB`/`HPUB subject reply size`, then the bytes), and
//! JetStream's acknowledgement is one message to the reply subject
//! (`MSG`/`HMSG subject sid [reply] size`, then the bytes): reading each
//! command whole (the size says how many bytes follow) is all it takes to
//! forward everything else untouched and act on those two. Everything is
//! forwarded as it was read, command by command.
#![allow(dead_code)]

use std::collections::{HashMap, HashSet};
use std::io::{self, BufRead, BufReader, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// A proxy on a loopback port of its own in front of one nats-server.
pub struct Proxy {
    address: SocketAddr,
    watch: Arc<Mutex<Watch>>,
    stopping: Arc<AtomicBool>,
}

/// What the proxy saw and what it is asked to do.
#[derive(Default)]
struct Watch {
    /// The subjects of messages down begin with it: `{prefix}.down.`.
    down: String,
    /// Lose JetStream's answer to the next publish on this subject.
    armed: Option<String>,
    /// Reply subjects whose answer is to be lost.
    losing: HashSet<String>,
    /// The message ids of the publishes whose answers were lost.
    lost: Vec<String>,
    /// Every publish down, in order: its subject and its `Nats-Msg-Id`.
    published: Vec<(String, String)>,
    /// Publishes down not answered yet: their reply subject, and subject.
    unanswered: HashMap<String, String>,
    /// The most replicas that had a publish down unanswered at once.
    most_at_once: usize,
    /// How long each answer to a publish down is held back.
    hold_answers: Duration,
}

/// What becomes of a message the server sends the client.
enum Answer {
    Forward,
    Lose,
    HoldThenForward(Duration),
}

impl Watch {
    /// The client publishes on `subject`, its answer to come on `reply`.
    /// Noted before the publish is forwarded, so no answer can come first.
    fn publishes(&mut self, subject: &str, reply: Option<&str>, id: Option<String>) {
        if !subject.starts_with(&self.down) {
            return;
        }
        let id = id.unwrap_or_default();
        self.published.push((subject.to_owned(), id.clone()));
        let Some(reply) = reply else {
            return;
        };
        if self.armed.as_deref() == Some(subject) {
            self.armed = None;
            self.losing.insert(reply.to_owned());
            self.lost.push(id);
            // Never answered, as far as the client is concerned.
            return;
        }
        self.unanswered.insert(reply.to_owned(), subject.to_owned());
        let replicas: HashSet<&String> = self.unanswered.values().collect();
        self.most_at_once = self.most_at_once.max(replicas.len());
    }

    /// The server sends the client a message on `subject`.
    fn answers(&mut self, subject: &str) -> Answer {
        if self.losing.remove(subject) {
            return Answer::Lose;
        }
        // Forgotten before it is forwarded: the client cannot publish the
        // next message until it heard this answer.
        if self.unanswered.remove(subject).is_some() && !self.hold_answers.is_zero() {
            return Answer::HoldThenForward(self.hold_answers);
        }
        Answer::Forward
    }
}

impl Proxy {
    /// A proxy to the nats-server on `port` of loopback, for subjects
    /// beginning with `prefix`.
    pub fn start(port: u16, prefix: &str) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a port for the proxy");
        let address = listener.local_addr().unwrap();
        let upstream = SocketAddr::from(([127, 0, 0, 1], port));
        let watch = Arc::new(Mutex::new(Watch {
            down: format!("{prefix}.down."),
            ..Watch::default()
        }));
        let stopping = Arc::new(AtomicBool::new(false));
        {
            let (watch, stopping) = (watch.clone(), stopping.clone());
            std::thread::spawn(move || {
                for client in listener.incoming() {
                    if stopping.load(Ordering::SeqCst) {
                        return;
                    }
                    let Ok(client) = client else { continue };
                    // The server not answering: the client is cut, and
                    // tries again, as it would with no proxy.
                    let Ok(server) = TcpStream::connect(upstream) else {
                        let _ = client.shutdown(Shutdown::Both);
                        continue;
                    };
                    relay(client, server, watch.clone());
                }
            });
        }
        Proxy {
            address,
            watch,
            stopping,
        }
    }

    /// The URL the relay worker is to connect to.
    pub fn url(&self) -> String {
        format!("nats://{}", self.address)
    }

    fn watch(&self) -> MutexGuard<'_, Watch> {
        self.watch.lock().unwrap()
    }

    /// Loses JetStream's answer to the next publish on `subject`: it is
    /// forwarded to the server, which stores it and answers, and the
    /// answer never reaches the client.
    pub fn lose_the_next_answer_to(&self, subject: &str) {
        self.watch().armed = Some(subject.to_owned());
    }

    /// The message ids of the publishes whose answers were lost.
    pub fn lost(&self) -> Vec<String> {
        self.watch().lost.clone()
    }

    /// How many times a message of this id was published down.
    pub fn times_published(&self, id: &str) -> usize {
        self.watch()
            .published
            .iter()
            .filter(|(_, seen)| seen == id)
            .count()
    }

    /// Publishes down seen so far.
    pub fn publishes(&self) -> usize {
        self.watch().published.len()
    }

    /// Holds back each answer to a publish down this long before
    /// forwarding it, so publishes that overlap overlap for longer.
    pub fn hold_answers(&self, hold: Duration) {
        self.watch().hold_answers = hold;
    }

    /// The most replicas that had a publish down unanswered at once, and
    /// starts counting again.
    pub fn most_replicas_at_once(&self) -> usize {
        let mut watch = self.watch();
        let most = watch.most_at_once;
        let now: HashSet<&String> = watch.unanswered.values().collect();
        watch.most_at_once = now.len();
        most
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stopping.store(true, Ordering::SeqCst);
        // Wakes the accepting thread, which then ends.
        let _ = TcpStream::connect(self.address);
    }
}

/// Forwards both ways, each in a thread of its own; the end of either
/// closes both.
fn relay(client: TcpStream, server: TcpStream, watch: Arc<Mutex<Watch>>) {
    let (Ok(client_too), Ok(server_too)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    let up_watch = watch.clone();
    std::thread::spawn(move || {
        let _ = client_to_server(&client, &server, &up_watch);
        let _ = client.shutdown(Shutdown::Both);
        let _ = server.shutdown(Shutdown::Both);
    });
    std::thread::spawn(move || {
        let _ = server_to_client(&server_too, &client_too, &watch);
        let _ = server_too.shutdown(Shutdown::Both);
        let _ = client_too.shutdown(Shutdown::Both);
    });
}

/// One command: its line, and the bytes that follow it (with their CRLF).
struct Command {
    line: Vec<u8>,
    words: Vec<String>,
    bytes: Vec<u8>,
    /// How many of `bytes` are headers (HPUB, HMSG).
    headers: usize,
}

/// Reads the next command whole; `None` at the end of the stream. Those
/// followed by bytes (`with_bytes`) end their line with the size of the
/// bytes, and the size of their headers before it when they have headers
/// (a name beginning with `H`).
fn next_command(from: &mut impl BufRead, with_bytes: &[&str]) -> io::Result<Option<Command>> {
    let mut line = Vec::new();
    if from.read_until(b'\n', &mut line)? == 0 {
        return Ok(None);
    }
    let words: Vec<String> = String::from_utf8_lossy(&line)
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    let name = words
        .first()
        .map(|w| w.to_ascii_uppercase())
        .unwrap_or_default();
    let mut command = Command {
        line,
        words,
        bytes: Vec::new(),
        headers: 0,
    };
    if with_bytes.contains(&name.as_str()) {
        let number = |from_end: usize| -> io::Result<usize> {
            command
                .words
                .len()
                .checked_sub(from_end)
                .and_then(|i| command.words[i].parse().ok())
                .ok_or_else(|| io::Error::other("a command without its size"))
        };
        let total = number(1)?;
        let headers = if name.starts_with('H') { number(2)? } else { 0 };
        let mut bytes = vec![0; total + 2];
        from.read_exact(&mut bytes)?;
        command.bytes = bytes;
        command.headers = headers;
    }
    Ok(Some(command))
}

/// The `Nats-Msg-Id` of a message's headers (`NATS/1.0`, then lines).
fn message_id(headers: &[u8]) -> Option<String> {
    String::from_utf8_lossy(headers).lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.trim()
            .eq_ignore_ascii_case("Nats-Msg-Id")
            .then(|| value.trim().to_owned())
    })
}

fn client_to_server(
    client: &TcpStream,
    server: &TcpStream,
    watch: &Mutex<Watch>,
) -> io::Result<()> {
    let mut from = BufReader::new(client);
    let mut to = server;
    while let Some(command) = next_command(&mut from, &["PUB", "HPUB"])? {
        if !command.bytes.is_empty() {
            // PUB subject [reply] size; HPUB subject [reply] headers size.
            let fixed = if command.headers > 0 { 4 } else { 3 };
            let words = &command.words;
            let reply = (words.len() > fixed).then(|| words[2].as_str());
            let id = message_id(&command.bytes[..command.headers]);
            watch.lock().unwrap().publishes(&words[1], reply, id);
        }
        to.write_all(&command.line)?;
        to.write_all(&command.bytes)?;
    }
    Ok(())
}

fn server_to_client(
    server: &TcpStream,
    client: &TcpStream,
    watch: &Mutex<Watch>,
) -> io::Result<()> {
    let mut from = BufReader::new(server);
    let mut to = client;
    while let Some(command) = next_command(&mut from, &["MSG", "HMSG"])? {
        let is_message = command
            .words
            .first()
            .is_some_and(|w| w.eq_ignore_ascii_case("MSG") || w.eq_ignore_ascii_case("HMSG"));
        if is_message {
            let answer = watch.lock().unwrap().answers(&command.words[1]);
            match answer {
                Answer::Lose => continue,
                Answer::HoldThenForward(hold) => std::thread::sleep(hold),
                Answer::Forward => {}
            }
        }
        to.write_all(&command.line)?;
        to.write_all(&command.bytes)?;
    }
    Ok(())
}

/// The process id of the nats-server listening on `port`, found by its
/// command line (`-p PORT`).
pub fn nats_server_pid(port: u16) -> i32 {
    let port = port.to_string();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let is_ours = args.first().is_some_and(|a| a.ends_with("nats-server"))
            && args.windows(2).any(|w| w[0] == "-p" && w[1] == port);
        if is_ours {
            return pid;
        }
    }
    panic!("no nats-server listens on port {port}");
}

/// A process stopped (SIGSTOP) until this is dropped (SIGCONT): its
/// sockets stay open and nothing answers on them.
pub struct Stopped(i32);

impl Stopped {
    pub fn stop(pid: i32) -> Stopped {
        signal("-STOP", pid);
        Stopped(pid)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        signal("-CONT", self.0);
    }
}

fn signal(which: &str, pid: i32) {
    let status = std::process::Command::new("kill")
        .args([which, &pid.to_string()])
        .status()
        .expect("runs kill");
    assert!(status.success(), "kill {which} {pid}");
}

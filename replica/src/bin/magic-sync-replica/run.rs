//! `magic-sync-replica run DB --queue URL | --nats URL | --ws URL
//! --credential FILE [--ca FILE]`: the device loop (`transport::run`) on the replica's
//! database, one line per thing it does (or one JSON object a line, with
//! `--json`), until Ctrl-C, which stops it once what it is doing is done:
//! a message being applied is committed and acknowledged, or not applied
//! at all. Its answer, printed last, counts what it did.
//!
//! `--ws` takes `ws://` and `wss://` URLs; `--ca FILE` names a PEM file
//! of certificate authorities trusted for `wss://` besides the system's.
//!
//! Each transport is a feature of the build (`pg-queue`, `nats`, `ws`);
//! one the build lacks is a usage error that says so.

use std::io::Write;

use magic_sync_replica::transport::{self, Control, Options, Status, Transport};
use magic_sync_replica::Replica;
use serde_json::{json, Value};

use crate::exit::Failure;

/// How the replica reaches the server.
enum Link {
    Queue(String),
    Nats(String),
    Ws {
        url: String,
        credential: String,
        ca: Option<String>,
    },
}

/// Reads the transport from what follows `run DB`.
fn link_of(rest: &[String]) -> Result<Link, Failure> {
    let usage = |why: &str| Failure::Usage(format!("run: {why}"));
    match rest {
        [flag, url] if flag == "--queue" => Ok(Link::Queue(url.clone())),
        [flag, url] if flag == "--nats" => Ok(Link::Nats(url.clone())),
        _ if rest.first().is_some_and(|f| WS_FLAGS.contains(&f.as_str())) => ws_of(rest),
        _ => Err(usage(
            "which transport? --queue URL, --nats URL or --ws URL --credential FILE [--ca FILE]",
        )),
    }
}

/// What `--ws` takes, each once and with its value, in any order.
const WS_FLAGS: [&str; 3] = ["--ws", "--credential", "--ca"];

fn ws_of(rest: &[String]) -> Result<Link, Failure> {
    let usage = |why: String| Failure::Usage(format!("run: {why}"));
    let mut given: [Option<&String>; 3] = [None; 3];
    let mut pairs = rest.chunks(2);
    for pair in pairs.by_ref() {
        let [flag, value] = pair else {
            return Err(usage(format!("{} takes a value", pair[0])));
        };
        let Some(at) = WS_FLAGS.iter().position(|f| f == flag) else {
            return Err(usage(format!(
                "`{flag}` is no option of --ws (--credential FILE, --ca FILE)"
            )));
        };
        if given[at].replace(value).is_some() {
            return Err(usage(format!("{flag} given twice")));
        }
    }
    let [Some(url), credential, ca] = given else {
        return Err(usage("--credential and --ca go with --ws URL".to_owned()));
    };
    let Some(file) = credential else {
        return Err(usage("--ws takes --credential FILE too".to_owned()));
    };
    let credential =
        std::fs::read_to_string(file).map_err(|e| Failure::Failed(format!("{file}: {e}")))?;
    // The CA file is the library's to read (at each connect after a
    // certificate that did not verify); one missing now is a mistake to
    // say at once.
    if let Some(ca) = ca {
        std::fs::File::open(ca).map_err(|e| Failure::Failed(format!("--ca {ca}: {e}")))?;
    }
    Ok(Link::Ws {
        url: url.clone(),
        credential: credential.trim().to_owned(),
        ca: ca.cloned(),
    })
}

/// Runs the loop until Ctrl-C; answers what it did.
pub fn run(mut replica: Replica, rest: &[String], as_json: bool) -> Result<Value, Failure> {
    let link = link_of(rest)?;
    let control = Control::new();
    let stopping = control.clone();
    ctrlc::set_handler(move || stopping.stop())
        .map_err(|e| Failure::Failed(format!("catching Ctrl-C: {e}")))?;
    let mut counts = Counts::default();
    let report = |status: Status| {
        counts.note(&status);
        say(&status, as_json);
    };
    match link {
        Link::Queue(url) => run_queue(&mut replica, &url, &control, report)?,
        Link::Nats(url) => run_nats(&mut replica, &url, &control, report)?,
        Link::Ws {
            url,
            credential,
            ca,
        } => run_ws(&mut replica, (&url, &credential, ca), &control, report)?,
    }
    Ok(
        json!({"stopped": {"applied": counts.applied, "sent": counts.sent, "disconnected": counts.disconnected}}),
    )
}

fn looping<T: Transport>(
    replica: &mut Replica,
    mut transport: T,
    control: &Control,
    report: impl FnMut(Status),
) {
    transport::run(
        replica,
        &mut transport,
        &Options::default(),
        control,
        report,
    );
}

#[cfg(feature = "pg-queue")]
fn run_queue(
    replica: &mut Replica,
    url: &str,
    control: &Control,
    report: impl FnMut(Status),
) -> Result<(), Failure> {
    let config = url
        .parse()
        .map_err(|e| Failure::Usage(format!("run: --queue {url}: {e}")))?;
    let queue = transport::queue::Queue::new(config, replica.me());
    looping(replica, queue, control, report);
    Ok(())
}

#[cfg(not(feature = "pg-queue"))]
fn run_queue(_: &mut Replica, _: &str, _: &Control, _: impl FnMut(Status)) -> Result<(), Failure> {
    Err(without("pg-queue"))
}

#[cfg(feature = "nats")]
fn run_nats(
    replica: &mut Replica,
    url: &str,
    control: &Control,
    report: impl FnMut(Status),
) -> Result<(), Failure> {
    use transport::nats::{Nats, NatsSettings};
    let nats = Nats::new(NatsSettings::new(url), replica)?;
    looping(replica, nats, control, report);
    Ok(())
}

#[cfg(not(feature = "nats"))]
fn run_nats(_: &mut Replica, _: &str, _: &Control, _: impl FnMut(Status)) -> Result<(), Failure> {
    Err(without("nats"))
}

#[cfg(feature = "ws")]
fn run_ws(
    replica: &mut Replica,
    (url, credential, ca): (&str, &str, Option<String>),
    control: &Control,
    report: impl FnMut(Status),
) -> Result<(), Failure> {
    use transport::ws::{Ws, WsSettings};
    let mut settings = WsSettings::new(url, credential);
    // Read at the first wss:// connect, and again after a certificate
    // that did not verify: a file put right is taken without a restart.
    settings.ca_file = ca.map(Into::into);
    let ws = Ws::new(settings, replica)?;
    looping(replica, ws, control, report);
    Ok(())
}

#[cfg(not(feature = "ws"))]
fn run_ws(
    _: &mut Replica,
    _: (&str, &str, Option<String>),
    _: &Control,
    _: impl FnMut(Status),
) -> Result<(), Failure> {
    Err(without("ws"))
}

#[allow(dead_code)]
fn without(feature: &str) -> Failure {
    Failure::Usage(format!(
        "run: this build has no {feature} transport (cargo install --path replica --features {feature})"
    ))
}

#[derive(Default)]
struct Counts {
    applied: u64,
    sent: u64,
    disconnected: u64,
}

impl Counts {
    fn note(&mut self, status: &Status) {
        match status {
            Status::Applied(_) => self.applied += 1,
            Status::Sent { .. } => self.sent += 1,
            Status::Disconnected { .. } => self.disconnected += 1,
            _ => {}
        }
    }
}

/// One line for a status: words for people, a JSON object with `--json`.
fn say(status: &Status, as_json: bool) {
    let line = if as_json {
        described(status).to_string()
    } else {
        match status {
            Status::Applied(received) => format!("applied: {}", crate::describe(received)),
            other => other.to_string(),
        }
    };
    // A reader gone is no reason to stop the loop.
    let _ = writeln!(std::io::stdout().lock(), "{line}");
}

fn described(status: &Status) -> Value {
    let millis = |d: &std::time::Duration| d.as_millis() as u64;
    match status {
        Status::Connected => json!({"status": "connected"}),
        Status::Applied(received) => {
            json!({"status": "applied", "received": crate::describe(received)})
        }
        Status::Unapplied { error, retry_in } => {
            json!({"status": "unapplied", "error": error.to_string(), "retry_in_ms": millis(retry_in)})
        }
        Status::Sent { lane, upload } => json!({"status": "sent", "lane": lane, "upload": upload}),
        Status::UpRefused {
            lane,
            error,
            narrowed,
        } => json!({
            "status": "up_refused", "lane": lane, "error": error.to_string(),
            "narrowed": format!("{narrowed:?}"),
        }),
        Status::Waiting { backlog } => json!({
            "status": "waiting",
            "backlog": backlog.iter().map(|t| json!({
                "table": t.table, "unsent": t.unsent, "unfiled": t.unfiled, "set_aside": t.set_aside,
            })).collect::<Vec<_>>(),
        }),
        Status::Wishes(answered) => json!({
            "status": "wishes",
            "answered": answered.iter().map(|a| json!({
                "table": a.table, "key": a.key, "outcome": a.outcome.to_string(),
            })).collect::<Vec<_>>(),
        }),
        Status::Disconnected { error, retry_in } => {
            json!({"status": "disconnected", "error": error.to_string(), "retry_in_ms": millis(retry_in)})
        }
        Status::Failed { error, retry_in } => {
            json!({"status": "failed", "error": error.to_string(), "retry_in_ms": millis(retry_in)})
        }
        Status::Stopped => json!({"status": "stopped"}),
        #[allow(unreachable_patterns)]
        other => json!({"status": other.to_string()}),
    }
}

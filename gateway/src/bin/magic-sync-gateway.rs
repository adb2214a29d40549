//! The gateway's program:
//!
//!     magic-sync-gateway serve   --database URL [--listen ADDR] [--max-links N]
//!                                [--idle-timeout SECONDS] [--message-bytes N]
//!                                [--connections N] [--signing-key FILE]
//!     magic-sync-gateway migrate --database URL
//!     magic-sync-gateway issue   --database URL REPLICA [--note TEXT]
//!     magic-sync-gateway revoke  --database URL CREDENTIAL_OR_REPLICA
//!     magic-sync-gateway sign    --signing-key FILE REPLICA --days N
//!
//! `--database` may be given as MAGIC_SYNC_GATEWAY_DATABASE instead. It
//! listens on 127.0.0.1:8787 unless told otherwise, and says where on its
//! first line. Ctrl-C (or SIGTERM) stops it between frames. See
//! docs/src/gateway.md.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use magic_sync_gateway::credentials::{self, Tokens};
use magic_sync_gateway::{serve, Error, Settings};
use tokio_postgres::NoTls;
use uuid::Uuid;

const USAGE: &str =
    "usage: magic-sync-gateway serve|migrate|issue|revoke|sign (see docs/src/gateway.md)";

/// The command line, read.
struct Args {
    command: String,
    positional: Vec<String>,
    options: Vec<(String, String)>,
}

impl Args {
    fn read() -> Result<Args, String> {
        let mut all = std::env::args().skip(1);
        let command = all.next().ok_or("which command?")?;
        let (mut positional, mut options) = (Vec::new(), Vec::new());
        while let Some(arg) = all.next() {
            if let Some(name) = arg.strip_prefix("--") {
                let value = all.next().ok_or(format!("--{name} takes a value"))?;
                options.push((name.to_owned(), value));
            } else {
                positional.push(arg);
            }
        }
        Ok(Args {
            command,
            positional,
            options,
        })
    }

    fn option(&self, name: &str) -> Option<&str> {
        self.options
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    fn parsed<T: std::str::FromStr>(&self, name: &str) -> Result<Option<T>, String> {
        self.option(name)
            .map(|v| {
                v.parse()
                    .map_err(|_| format!("--{name}: {v:?} does not read"))
            })
            .transpose()
    }

    fn database(&self) -> Result<String, String> {
        self.option("database")
            .map(str::to_owned)
            .or_else(|| std::env::var("MAGIC_SYNC_GATEWAY_DATABASE").ok())
            .ok_or_else(|| "--database URL (or MAGIC_SYNC_GATEWAY_DATABASE)".to_owned())
    }

    fn replica(&self) -> Result<Uuid, String> {
        let text = self.positional.first().ok_or("which replica?")?;
        Uuid::parse_str(text).map_err(|_| format!("{text:?} is no replica id"))
    }
}

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let args = match Args::read() {
        Ok(args) => args,
        Err(why) => return usage(&why),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let done = runtime.block_on(command(&args));
    match done {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(why)) => usage(&why),
        Err(Failure::Failed(error)) => {
            eprintln!("magic-sync-gateway: {error}");
            ExitCode::FAILURE
        }
    }
}

fn usage(why: &str) -> ExitCode {
    eprintln!("magic-sync-gateway: {why}\n{USAGE}");
    ExitCode::from(2)
}

enum Failure {
    Usage(String),
    Failed(Error),
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        Failure::Failed(e)
    }
}

impl From<tokio_postgres::Error> for Failure {
    fn from(e: tokio_postgres::Error) -> Failure {
        Failure::Failed(Error::Database(e))
    }
}

async fn command(args: &Args) -> Result<(), Failure> {
    let usage = Failure::Usage;
    match args.command.as_str() {
        "serve" => serve_until_stopped(args).await,
        "migrate" => {
            let db = connect(&args.database().map_err(usage)?).await?;
            db.batch_execute(credentials::MIGRATION).await?;
            println!("the credentials' table is there");
            Ok(())
        }
        "issue" => {
            let replica = args.replica().map_err(usage)?;
            let db = connect(&args.database().map_err(usage)?).await?;
            credentials::migrate(&db).await?;
            let note = args.option("note").unwrap_or("");
            let (id, token) = credentials::issue(&db, replica, note).await?;
            eprintln!("credential {id} for replica {replica} (revoke it by that id)");
            println!("{token}");
            Ok(())
        }
        "revoke" => {
            let which = args.replica().map_err(usage)?;
            let db = connect(&args.database().map_err(usage)?).await?;
            let revoked = credentials::revoke(&db, which).await?;
            println!("{revoked} credential(s) revoked");
            Ok(())
        }
        "sign" => {
            let replica = args.replica().map_err(usage)?;
            let key = signing_key(args)?.ok_or(usage("--signing-key FILE".into()))?;
            let days: u64 = args.parsed("days").map_err(usage)?.unwrap_or(30);
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            println!("{}", credentials::sign(&key, replica, now + days * 86_400));
            Ok(())
        }
        other => Err(usage(format!("`{other}` is no command"))),
    }
}

async fn connect(database: &str) -> Result<tokio_postgres::Client, Failure> {
    let config = magic_sync_gateway::database::config_of(database)?;
    let (client, connection) = config.connect(NoTls).await?;
    tokio::spawn(connection);
    Ok(client)
}

fn signing_key(args: &Args) -> Result<Option<Vec<u8>>, Failure> {
    let Some(file) = args.option("signing-key") else {
        return Ok(None);
    };
    let key = std::fs::read(file)
        .map_err(|e| Failure::Failed(Error::Setup(format!("--signing-key {file}: {e}"))))?;
    Ok(Some(key))
}

fn settings_of(args: &Args) -> Result<Settings, String> {
    let mut settings = Settings::new(args.database()?);
    if let Some(listen) = args.parsed::<SocketAddr>("listen")? {
        settings.listen = listen;
    }
    if let Some(n) = args.parsed("max-links")? {
        settings.max_links = n;
    }
    if let Some(n) = args.parsed("connections")? {
        settings.connections = n;
    }
    if let Some(seconds) = args.parsed::<f64>("idle-timeout")? {
        settings.idle_timeout = Duration::from_secs_f64(seconds);
    }
    if let Some(n) = args.parsed::<usize>("message-bytes")? {
        settings.message_bytes = n;
        settings.frame_bytes = n + 4096;
    }
    Ok(settings)
}

async fn serve_until_stopped(args: &Args) -> Result<(), Failure> {
    let settings = settings_of(args).map_err(Failure::Usage)?;
    let tokens = match signing_key(args)? {
        Some(key) => Tokens::with_signing_key(key),
        None => Tokens::issued_only(),
    };
    serve(settings, Arc::new(tokens), stop_asked(), |address| {
        println!("magic-sync-gateway: listening on {address}");
    })
    .await?;
    eprintln!("magic-sync-gateway: stopped");
    Ok(())
}

/// Ctrl-C or SIGTERM.
async fn stop_asked() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("a SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

//! The head office's own PostgreSQL, when no database is named: a cluster
//! under the directory it runs in (`head-office-data/`), made on the first
//! run and kept, so that a restart is the same head office; started with
//! the extension preloaded and its relay worker on the shop's database,
//! listening on a socket only, and stopped when the head office stops.
//! What a register refused is tried again every 5 seconds (an hour unless
//! told: `magic_sync.retry_every`), so that a fix deployed to a register
//! is seen within seconds, as the book's shop says.
//! PostgreSQL's programs are found as `$PG_CONFIG --bindir` says (or the
//! first `pg_config` on the PATH, or PostgreSQL 15's); as root, the cluster
//! is made and run as the `postgres` user, as PostgreSQL requires.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

pub struct Cluster {
    bin: PathBuf,
    data: PathBuf,
    socket: PathBuf,
    port: u16,
}

fn run(command: &mut Command) -> Result<String, String> {
    let out = command
        .output()
        .map_err(|e| format!("cannot run {command:?}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    } else {
        Err(format!(
            "{command:?} failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

fn as_root() -> bool {
    run(Command::new("id").arg("-u")).is_ok_and(|u| u == "0")
}

fn as_owner(program: &Path) -> Command {
    if as_root() {
        let mut command = Command::new("runuser");
        command.args(["-u", "postgres", "--"]).arg(program);
        command
    } else {
        Command::new(program)
    }
}

fn give_to_owner(path: &Path) -> Result<(), String> {
    if as_root() {
        run(Command::new("chown").arg("-R").arg("postgres").arg(path))?;
    }
    Ok(())
}

/// PostgreSQL's programs: `$PG_CONFIG --bindir`.
fn bindir() -> Result<PathBuf, String> {
    let pg_config = std::env::var("PG_CONFIG").unwrap_or_else(|_| {
        if Command::new("pg_config").arg("--version").output().is_ok() {
            "pg_config".to_owned()
        } else {
            "/usr/lib/postgresql/15/bin/pg_config".to_owned()
        }
    });
    let bindir = PathBuf::from(run(Command::new(&pg_config).arg("--bindir"))?);
    let sharedir = PathBuf::from(run(Command::new(&pg_config).arg("--sharedir"))?);
    if !sharedir.join("extension/magic_sync.control").exists() {
        return Err(format!(
            "the magic_sync extension is not installed in {}: run \
             `cargo pgrx install -p magic_sync --pg-config {pg_config}` (scripts/demo.sh does)",
            sharedir.display()
        ));
    }
    Ok(bindir)
}

fn free_port() -> Result<u16, String> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("no free port: {e}"))
}

impl Cluster {
    /// Makes the cluster under `dir` when it is not there yet, and starts it
    /// with these settings besides (the transport's: `magic_sync.transport`
    /// and `magic_sync.nats_url` over NATS).
    pub fn start(dir: &Path, settings: &[(&str, &str)]) -> Result<Cluster, String> {
        let bin = bindir()?;
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let dir = dir
            .canonicalize()
            .map_err(|e| format!("{}: {e}", dir.display()))?;
        let data = dir.join("pgdata");
        if !data.join("PG_VERSION").exists() {
            give_to_owner(&dir)?;
            run(as_owner(&bin.join("initdb")).arg("-D").arg(&data).args([
                "-A",
                "trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--no-sync",
            ]))?;
        }
        // A socket path is limited to about a hundred bytes: the socket
        // lives in a short directory of its own.
        let socket = std::env::temp_dir().join(format!("shop-pg-{}", std::process::id()));
        std::fs::create_dir_all(&socket).map_err(|e| format!("{}: {e}", socket.display()))?;
        give_to_owner(&socket)?;
        let port = free_port()?;
        let cluster = Cluster {
            bin,
            data,
            socket,
            port,
        };
        let options = format!(
            "-p {port} -k {} -c listen_addresses='' -c shared_preload_libraries=magic_sync \
             -c magic_sync.database=shop -c max_connections=60 -c jit=off \
             -c magic_sync.retry_every=5 -c magic_sync.idle=5{}",
            cluster.socket.display(),
            settings
                .iter()
                .map(|(name, value)| format!(" -c {name}={value}"))
                .collect::<String>()
        );
        let start = || {
            run(as_owner(&cluster.bin.join("pg_ctl"))
                .arg("-D")
                .arg(&cluster.data)
                .arg("-o")
                .arg(&options)
                .arg("-l")
                .arg(dir.join("postgresql.log"))
                .args(["-w", "start"]))
        };
        if start().is_err() {
            // Left running by a head office that was killed: stopped, and
            // started again on this one's socket.
            let _ = cluster.pg_ctl(&["-m", "fast", "-w", "stop"]);
            start()?;
        }
        Ok(cluster)
    }

    fn pg_ctl(&self, args: &[&str]) -> Result<String, String> {
        run(as_owner(&self.bin.join("pg_ctl"))
            .arg("-D")
            .arg(&self.data)
            .args(args))
    }

    /// A connection string to `database` as `user`.
    pub fn url(&self, user: &str, database: &str) -> String {
        format!(
            "host={} port={} user={user} dbname={database}",
            self.socket.display(),
            self.port
        )
    }

    /// Stops it (a fast shutdown: every commit is kept).
    pub fn stop(&self) {
        let _ = self.pg_ctl(&["-m", "fast", "-w", "stop"]);
        let _ = std::fs::remove_dir_all(&self.socket);
    }
}

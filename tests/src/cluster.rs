//! A throwaway PostgreSQL cluster: made in a scratch directory, started on
//! its own socket, stopped and removed when dropped.
//!
//! PostgreSQL refuses to run as root, so as root the cluster is made and run
//! as the `postgres` user.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

use postgres::{Client, NoTls};
use tempfile::TempDir;

pub struct Cluster {
    dir: TempDir,
    bin: PathBuf,
    port: u16,
}

fn output(command: &mut Command) -> String {
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("cannot run {command:?}: {e}"));
    assert!(
        out.status.success(),
        "{command:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn running_as_root() -> bool {
    output(Command::new("id").arg("-u")) == "0"
}

/// A command run as the user that owns the cluster.
fn as_owner(program: &Path) -> Command {
    if running_as_root() {
        let mut command = Command::new("runuser");
        command.args(["-u", "postgres", "--"]).arg(program);
        command
    } else {
        Command::new(program)
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// A scratch directory the cluster's owner may write in.
fn scratch_dir() -> TempDir {
    let dir = tempfile::Builder::new()
        .prefix("magic_sync-pg-")
        .tempdir()
        .expect("a scratch directory");
    if running_as_root() {
        output(
            Command::new("chown")
                .arg("-R")
                .arg("postgres")
                .arg(dir.path()),
        );
    }
    dir
}

/// What pg_config says of the PostgreSQL in use: `$PG_CONFIG`'s, or the
/// first on the PATH.
pub(crate) fn pg_config(what: &str) -> PathBuf {
    let program = std::env::var("PG_CONFIG").unwrap_or_else(|_| "pg_config".to_owned());
    PathBuf::from(output(Command::new(program).arg(what)))
}

/// The directory of PostgreSQL's programs.
pub fn bindir() -> PathBuf {
    pg_config("--bindir")
}

/// Where PostgreSQL's extension modules and pgxs live.
pub fn pkglibdir() -> PathBuf {
    pg_config("--pkglibdir")
}

fn extension_is_installed() -> bool {
    pg_config("--sharedir")
        .join("extension/magic_sync.control")
        .exists()
}

impl Cluster {
    /// Makes and starts a cluster. Panics, saying what to do, when the
    /// extension is not installed.
    pub fn start() -> Cluster {
        Cluster::start_with(&[])
    }

    /// Makes and starts a cluster with these settings (`name=value`) on top
    /// of the throwaway ones.
    pub fn start_with(settings: &[&str]) -> Cluster {
        assert!(
            extension_is_installed(),
            "the magic_sync extension is not installed: run \
             `cargo pgrx install -p magic_sync --pg-config $PG_CONFIG` (scripts/test.sh does)"
        );
        Cluster::start_from(&bindir(), settings)
    }

    /// Makes and starts a cluster with the programs of `bin`: a copy of
    /// PostgreSQL's tree of the test's own, holding other extension files
    /// than the machine's (the upgrade test's previous release).
    pub fn start_from(bin: &Path, settings: &[&str]) -> Cluster {
        let dir = scratch_dir();
        let bin = bin.to_path_buf();
        output(
            as_owner(&bin.join("initdb"))
                .arg("-D")
                .arg(dir.path().join("data"))
                .args(["-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync"]),
        );
        Cluster::run_in(dir, bin, settings)
    }

    /// A hot standby of this cluster (`pg_basebackup -R`), started with
    /// these settings: it replays what this one writes, and takes no
    /// writes until promoted.
    pub fn standby(&self, settings: &[&str]) -> Cluster {
        let dir = scratch_dir();
        output(
            self.as_owner("pg_basebackup")
                .arg("-D")
                .arg(dir.path().join("data"))
                .args(["-R", "-X", "stream", "-c", "fast", "-U", "postgres", "-h"])
                .arg(self.socket_dir())
                .arg("-p")
                .arg(self.port.to_string()),
        );
        Cluster::run_in(dir, self.bin.clone(), settings)
    }

    /// Stops the server at once, as a crash would (no shutdown checkpoint),
    /// and starts it again with the same settings.
    pub fn restart_immediately(&self) {
        // The server started again keeps its log in the same file, and
        // holds no pipe of ours open.
        let status = self
            .as_owner("pg_ctl")
            .arg("-D")
            .arg(self.dir.path().join("data"))
            .arg("-l")
            .arg(self.dir.path().join("log"))
            .args(["-m", "immediate", "-w", "restart"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .expect("pg_ctl restart");
        assert!(status.success(), "pg_ctl restart failed");
    }

    /// Ends a standby's recovery: it takes writes from now on.
    pub fn promote(&self) {
        output(
            self.as_owner("pg_ctl")
                .arg("-D")
                .arg(self.dir.path().join("data"))
                .args(["-w", "promote"]),
        );
    }

    /// Starts the cluster whose data directory is `dir/data`, on a port of
    /// its own.
    fn run_in(dir: TempDir, bin: PathBuf, settings: &[&str]) -> Cluster {
        let port = free_port();
        let mut options = format!(
            "-p {port} -k {} -c listen_addresses='' -c fsync=off -c synchronous_commit=off \
             -c full_page_writes=off -c max_connections=50 -c jit=off",
            dir.path().display()
        );
        for setting in settings {
            options.push_str(&format!(" -c {setting}"));
        }
        output(
            as_owner(&bin.join("pg_ctl"))
                .arg("-D")
                .arg(dir.path().join("data"))
                .arg("-o")
                .arg(options)
                .arg("-l")
                .arg(dir.path().join("log"))
                .args(["-w", "start"]),
        );
        Cluster { dir, bin, port }
    }

    pub fn socket_dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// One of PostgreSQL's programs (`pg_ctl`...), run as the user that
    /// owns this cluster: `postgres` when the tests run as root.
    pub fn as_owner(&self, program: &str) -> Command {
        as_owner(&self.bin.join(program))
    }

    /// The connection string of a database of this cluster.
    pub fn url(&self, database: &str) -> String {
        format!(
            "host={} port={} user=postgres dbname={database}",
            self.socket_dir().display(),
            self.port
        )
    }

    pub fn connect(&self, database: &str) -> Client {
        Client::connect(&self.url(database), NoTls)
            .unwrap_or_else(|e| panic!("cannot connect to {database}: {e}"))
    }

    /// Makes a database with the extension created in it, and connects.
    pub fn database_with_extension(&self, database: &str) -> Client {
        self.connect("postgres")
            .batch_execute(&format!("CREATE DATABASE \"{database}\""))
            .expect("creates the database");
        let mut client = self.connect(database);
        client
            .batch_execute("CREATE EXTENSION magic_sync")
            .expect("creates the extension");
        client
    }

    /// `database` dumped to `file` with pg_dump, as a backup is taken.
    pub fn dump(&self, database: &str, file: &Path) {
        self.run_tool(self.tool("pg_dump").args(["-d", database, "-f"]).arg(file));
    }

    /// `database` dropped, made again, and restored from the dump `file`
    /// with psql. Its connections are cut.
    pub fn restore(&self, database: &str, file: &Path) {
        let mut admin = self.connect("postgres");
        admin
            .batch_execute(&format!("DROP DATABASE \"{database}\" WITH (FORCE)"))
            .expect("drops the database");
        admin
            .batch_execute(&format!("CREATE DATABASE \"{database}\""))
            .expect("makes the database again");
        self.run_tool(
            self.tool("psql")
                .args(["-d", database, "-q", "-v", "ON_ERROR_STOP=1", "-f"])
                .arg(file),
        );
    }

    /// One of PostgreSQL's client programs, connecting to this cluster.
    fn tool(&self, name: &str) -> Command {
        let mut command = Command::new(self.bin.join(name));
        command.arg("-h").arg(self.socket_dir()).args([
            "-p",
            &self.port.to_string(),
            "-U",
            "postgres",
        ]);
        command
    }

    fn run_tool(&self, command: &mut Command) {
        let out = command.output().expect("runs a PostgreSQL tool");
        assert!(
            out.status.success(),
            "{command:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// The server's log so far, to show when something went wrong.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("log")).unwrap_or_default()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // A test that failed shows what the server said last: a crash or
        // an error logged there is often the cause.
        if std::thread::panicking() {
            let log = self.log();
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            eprintln!("--- the server's log, last lines ---");
            for line in tail.iter().rev() {
                eprintln!("{line}");
            }
        }
        let _ = as_owner(&self.bin.join("pg_ctl"))
            .arg("-D")
            .arg(self.dir.path().join("data"))
            .args(["-m", "immediate", "-w", "stop"])
            .output();
    }
}

//! The Debian package of the extension (issue 32), as a server
//! administrator takes it: `scripts/package.sh` builds it, `dpkg -i` puts
//! it on the machine's PostgreSQL, a throwaway cluster that preloads it
//! creates the extension and relays, and `dpkg -r` takes it off again.
//!
//! The machine's extension files are every test's: `cargo pgrx install`
//! put them there, and the package's overwrite them. So these tests are
//! ignored by a plain `cargo test`, and scripts/test.sh runs them last, on
//! their own, given the package:
//!
//! ```sh
//! MAGIC_SYNC_PACKAGE=$(bash scripts/package.sh --debug) \
//!     cargo test -p magic_sync_tests --test package -- --ignored --test-threads=1
//! ```
//!
//! The test that installs saves every file the package would replace or
//! add before it installs, keeps the package in place only while
//! PostgreSQL reads it (a restart that preloads the library, `CREATE
//! EXTENSION` and the catalog of versions; a few seconds), puts every file
//! back however the test ends, and holds the machine's files to be byte
//! for byte what they were.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use magic_sync_tests::{Cluster, BROADCAST_SHOP};
use postgres::Client;
use uuid::Uuid;

/// This build's version: the package's, and the extension's.
const CURRENT: &str = env!("CARGO_PKG_VERSION");

/// Long enough for a busy machine; each wait ends as soon as it may.
const PATIENCE: Duration = Duration::from_secs(60);

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn run(command: &mut Command) -> Output {
    command
        .output()
        .unwrap_or_else(|e| panic!("cannot run {command:?}: {e}"))
}

/// A command's standard output; panics with what it said when it fails.
fn output(command: &mut Command) -> String {
    let out = run(command);
    assert!(
        out.status.success(),
        "{command:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// What pg_config says of the PostgreSQL in use, as the cluster asks it.
fn pg_config(what: &str) -> String {
    let program = std::env::var("PG_CONFIG").unwrap_or_else(|_| "pg_config".to_owned());
    output(Command::new(program).arg(what))
}

/// The package scripts/package.sh built, named by `MAGIC_SYNC_PACKAGE`.
fn the_package() -> PathBuf {
    let deb = std::env::var("MAGIC_SYNC_PACKAGE").unwrap_or_else(|_| {
        panic!(
            "MAGIC_SYNC_PACKAGE is not set: run these tests as scripts/test.sh does, \
             MAGIC_SYNC_PACKAGE=$(bash scripts/package.sh --debug) cargo test -p \
             magic_sync_tests --test package -- --ignored --test-threads=1"
        )
    });
    let deb = PathBuf::from(deb);
    assert!(deb.is_file(), "{} is no file", deb.display());
    deb
}

/// A field of the package's control file.
fn field(deb: &Path, name: &str) -> String {
    output(Command::new("dpkg-deb").arg("--field").arg(deb).arg(name))
}

/// The files the package holds (not its folders), as absolute paths.
fn files_of(deb: &Path) -> Vec<PathBuf> {
    output(Command::new("dpkg-deb").arg("--contents").arg(deb))
        .lines()
        .filter(|line| line.starts_with('-'))
        .map(|line| {
            let path = line.split_whitespace().last().expect("a path");
            PathBuf::from(path.trim_start_matches('.'))
        })
        .collect()
}

/// The package's files, unpacked into a scratch directory.
fn unpacked(deb: &Path) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    output(
        Command::new("dpkg-deb")
            .arg("--extract")
            .arg(deb)
            .arg(dir.path()),
    );
    dir
}

/// One file of the unpacked package, as it holds it.
fn content_in(unpacked: &Path, file: &Path) -> Vec<u8> {
    std::fs::read(unpacked.join(file.strip_prefix("/").unwrap()))
        .unwrap_or_else(|e| panic!("the package lacks {}: {e}", file.display()))
}

/// The upgrade steps of sql/, and the released install scripts they
/// start from, by file name.
fn steps_and_their_starts() -> Vec<String> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(repository().join("sql")).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        let Some(versions) = name
            .strip_prefix("magic_sync--")
            .and_then(|rest| rest.strip_suffix(".sql"))
        else {
            continue;
        };
        if let Some((from, _to)) = versions.split_once("--") {
            names.push(format!("magic_sync--{from}.sql"));
            names.push(name.clone());
        }
    }
    names.sort();
    names.dedup();
    assert!(!names.is_empty(), "sql/ holds no upgrade step");
    names
}

#[test]
#[ignore = "needs the package: scripts/test.sh runs it last, given MAGIC_SYNC_PACKAGE"]
fn the_package_is_named_as_debian_names_extensions_and_depends_on_its_postgresql() {
    let deb = the_package();
    let major = pg_config("--version")
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.split('.').next())
        .expect("PostgreSQL's major version")
        .to_owned();
    assert_eq!(
        field(&deb, "Package"),
        format!("postgresql-{major}-magic-sync")
    );
    assert_eq!(field(&deb, "Version"), CURRENT);
    assert_eq!(
        field(&deb, "Architecture"),
        output(Command::new("dpkg").arg("--print-architecture"))
    );
    let depends = field(&deb, "Depends");
    assert!(
        depends
            .split(',')
            .any(|d| d.trim() == format!("postgresql-{major}")),
        "Depends: {depends}"
    );
}

#[test]
#[ignore = "needs the package: scripts/test.sh runs it last, given MAGIC_SYNC_PACKAGE"]
fn the_package_holds_the_library_the_control_file_the_install_script_and_every_step() {
    let deb = the_package();
    let files = files_of(&deb);
    let unpacked = unpacked(&deb);
    let lib = PathBuf::from(pg_config("--pkglibdir"));
    let ext = PathBuf::from(pg_config("--sharedir")).join("extension");

    let mut wanted = vec![
        lib.join("magic_sync.so"),
        ext.join("magic_sync.control"),
        ext.join(format!("magic_sync--{CURRENT}.sql")),
    ];
    for name in steps_and_their_starts() {
        let installed = ext.join(&name);
        // Each step and released script as sql/ has it, byte for byte.
        assert_eq!(
            content_in(unpacked.path(), &installed),
            std::fs::read(repository().join("sql").join(&name)).unwrap(),
            "{name} in the package is not sql/'s"
        );
        wanted.push(installed);
    }
    wanted.sort();
    let mut held = files.clone();
    held.sort();
    assert_eq!(held, wanted, "the package's files");

    let control =
        String::from_utf8(content_in(unpacked.path(), &ext.join("magic_sync.control"))).unwrap();
    assert!(
        control
            .lines()
            .any(|l| l == format!("default_version = '{CURRENT}'")),
        "{control}"
    );
}

/// A file as it was, or that it was not there.
#[derive(Clone, PartialEq, Eq)]
struct Saved {
    bytes: Vec<u8>,
    mode: u32,
}

impl std::fmt::Debug for Saved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} bytes, mode {:o}", self.bytes.len(), self.mode)
    }
}

/// Every file of the extension on the machine: `magic_sync*` in
/// PostgreSQL's library and extension folders, and any other path the
/// package holds.
fn machine_files(package_files: &[PathBuf]) -> BTreeMap<PathBuf, Option<Saved>> {
    let mut paths: Vec<PathBuf> = package_files.to_vec();
    for dir in [
        PathBuf::from(pg_config("--pkglibdir")),
        PathBuf::from(pg_config("--sharedir")).join("extension"),
    ] {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            if entry
                .file_name()
                .to_string_lossy()
                .starts_with("magic_sync")
            {
                paths.push(entry.path());
            }
        }
    }
    paths
        .into_iter()
        .map(|path| {
            let saved = std::fs::read(&path).ok().map(|bytes| Saved {
                bytes,
                mode: std::fs::metadata(&path).unwrap().permissions().mode(),
            });
            (path, saved)
        })
        .collect()
}

/// The machine's extension files as they were before the package, put
/// back when dropped, whatever happened meanwhile: the package removed if
/// it is still installed, each file written through a new name and renamed
/// into place (as dpkg does, so that no backend loads half a library), and
/// what the package added that was not there before removed.
struct Restore {
    package: String,
    saved: BTreeMap<PathBuf, Option<Saved>>,
    done: bool,
}

impl Restore {
    fn put_back(&mut self) {
        if self.done {
            return;
        }
        self.done = true;
        if known_to_dpkg(&self.package) {
            // Installed, or left half way by a dpkg that failed.
            let _ = dpkg(&["--purge", &self.package]);
        }
        for (path, saved) in &self.saved {
            match saved {
                Some(saved) => {
                    let next = path.with_extension("magic_sync-restoring");
                    std::fs::write(&next, &saved.bytes).expect("writes a file back");
                    std::fs::set_permissions(&next, std::fs::Permissions::from_mode(saved.mode))
                        .expect("its mode");
                    std::fs::rename(&next, path).expect("puts it in place");
                }
                None => {
                    let _ = std::fs::remove_file(path);
                }
            }
        }
    }
}

impl Drop for Restore {
    fn drop(&mut self) {
        self.put_back();
    }
}

/// dpkg, tried again while another dpkg or apt holds its lock.
fn dpkg(args: &[&str]) -> Output {
    let began = Instant::now();
    loop {
        let out = run(Command::new("dpkg").args(args));
        let said = String::from_utf8_lossy(&out.stderr);
        if out.status.success() || !said.contains("lock") || began.elapsed() > PATIENCE {
            return out;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn succeeded(what: &str, out: Output) {
    assert!(
        out.status.success(),
        "{what} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Whether dpkg has the package installed.
fn installed(package: &str) -> bool {
    let out = run(Command::new("dpkg-query").args(["-W", "-f=${Status}", package]));
    out.status.success() && String::from_utf8_lossy(&out.stdout) == "install ok installed"
}

/// Whether dpkg knows the package in any state but not installed.
fn known_to_dpkg(package: &str) -> bool {
    let out = run(Command::new("dpkg-query").args(["-W", "-f=${db:Status-Status}", package]));
    out.status.success()
        && !matches!(
            String::from_utf8_lossy(&out.stdout).trim(),
            "" | "not-installed"
        )
}

fn connect(cluster: &Cluster, database: &str) -> Client {
    let began = Instant::now();
    loop {
        match Client::connect(&cluster.url(database), postgres::NoTls) {
            Ok(client) => return client,
            Err(e) => {
                assert!(began.elapsed() < PATIENCE, "{e}");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let began = Instant::now();
    while !done() {
        assert!(began.elapsed() < PATIENCE, "waited {PATIENCE:?} for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
#[ignore = "replaces the machine's extension files for a moment: scripts/test.sh runs it last, given MAGIC_SYNC_PACKAGE"]
fn the_package_installs_with_dpkg_creates_the_extension_relays_and_uninstalls_leaving_the_machine_as_it_was(
) {
    let deb = the_package();
    let package = field(&deb, "Package");
    assert!(
        !installed(&package),
        "{package} is installed on this machine already: the test would remove it"
    );
    let package_files = files_of(&deb);

    // A cluster that preloads the library and relays "shop", made before
    // the package goes in: it runs the machine's library until restarted.
    let cluster = Cluster::start_with(&[
        "shared_preload_libraries=magic_sync",
        "magic_sync.database=shop",
        "magic_sync.idle=1",
    ]);

    let before = machine_files(&package_files);
    let mut restore = Restore {
        package: package.clone(),
        saved: before.clone(),
        done: false,
    };

    // The window: the package's files in place, as briefly as may be.
    let window = Instant::now();
    succeeded(
        "dpkg --install",
        dpkg(&["--install", deb.to_str().unwrap()]),
    );
    assert!(installed(&package), "dpkg says {package} is installed");
    succeeded(
        "dpkg --verify (every file as the package has it)",
        run(Command::new("dpkg").args(["--verify", &package])),
    );
    // The postmaster loads the package's library as it starts; every
    // backend it forks has it from there, whatever the disk holds later.
    cluster.restart_immediately();
    let mut admin = connect(&cluster, "postgres");
    admin.batch_execute("CREATE DATABASE shop").unwrap();
    let mut pg = connect(&cluster, "shop");
    pg.batch_execute("CREATE EXTENSION magic_sync")
        .expect("CREATE EXTENSION magic_sync, from the package");
    let version: String = pg
        .query_one(
            "SELECT extversion FROM pg_extension WHERE extname = 'magic_sync'",
            &[],
        )
        .unwrap()
        .get(0);
    let available: Vec<String> = pg
        .query(
            "SELECT version FROM pg_available_extension_versions \
             WHERE name = 'magic_sync' ORDER BY version",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let update_paths: Vec<(String, String)> = pg
        .query(
            "SELECT source, path FROM pg_extension_update_paths('magic_sync') \
             WHERE target = $1 AND path IS NOT NULL ORDER BY source",
            &[&CURRENT],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    succeeded("dpkg --remove", dpkg(&["--remove", &package]));
    let left: Vec<&PathBuf> = package_files.iter().filter(|p| p.exists()).collect();
    let listed = run(Command::new("dpkg").args(["--listfiles", &package]));
    restore.put_back();
    // The window is closed: the machine's files are back.
    eprintln!(
        "the package's files were in place for {:.1?}",
        window.elapsed()
    );

    assert_eq!(version, CURRENT, "the extension the package created");
    for name in steps_and_their_starts() {
        let versions = &name["magic_sync--".len()..name.len() - ".sql".len()];
        match versions.split_once("--") {
            Some((from, to)) if to == CURRENT => assert!(
                update_paths.iter().any(|(source, _)| source == from),
                "no update path from {from} to {CURRENT}: {update_paths:?}"
            ),
            Some(_) => {}
            None => assert!(
                available.iter().any(|v| v == versions),
                "{versions} is not available: {available:?}"
            ),
        }
    }
    assert!(available.iter().any(|v| v == CURRENT), "{available:?}");
    assert!(
        !installed(&package),
        "dpkg says {package} is still installed"
    );
    assert!(left.is_empty(), "dpkg --remove left {left:?}");
    assert!(
        !listed.status.success(),
        "dpkg still lists files of {package}: {}",
        String::from_utf8_lossy(&listed.stdout)
    );
    assert_eq!(
        machine_files(&package_files),
        before,
        "the machine's extension files, byte for byte, after the package came and went"
    );

    // The library the package brought, preloaded, relays by itself: a
    // register made live is sent its snapshot with no CALL sync.relay().
    pg.batch_execute(BROADCAST_SHOP).unwrap();
    let register = Uuid::new_v4();
    pg.execute("INSERT INTO shop.registers (id) VALUES ($1)", &[&register])
        .unwrap();
    pg.batch_execute(
        "INSERT INTO shop.products (id, name, price_cents) VALUES (gen_random_uuid(), 'Bread', 250)",
    )
    .unwrap();
    wait_until("the worker to send the register its snapshot", || {
        let waiting: i64 = pg
            .query_one(
                "SELECT count(*) FROM sync.outbox WHERE replica = $1",
                &[&register],
            )
            .unwrap()
            .get(0);
        waiting > 0
    });
    let worker: i64 = pg
        .query_one(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE backend_type = 'magic_sync relay' AND datname = 'shop'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(worker, 1, "one relay worker in shop");
}

//! What the tests of the relay worker's life share (tests/worker_lifecycle.rs):
//! waiting without asserting a time, finding the worker, reading what it
//! logged, and a register kept in step with whichever server relays.

use std::path::Path;
use std::time::Duration;

use magic_sync_replica::Replica;
use magic_sync_tests::Cluster;
use postgres::Client;

use crate::common::{deliver, held_by, products_of, report};
use crate::device::wait_within;

/// Long enough for a busy machine; each wait ends as soon as it may.
pub const PATIENCE: Duration = Duration::from_secs(40);

/// The relay's advisory lock ('magic_sync' as a number, sql/relay.sql):
/// one pass at a time, whoever runs it.
pub const RELAY_LOCK: i64 = 7809643163296757358;

/// The settings of a server whose relay worker runs in `database`, waking
/// every second when no commit wakes it, with these settings too.
pub fn with_worker(database: &str, more: &[&str]) -> Vec<String> {
    let mut settings = vec![
        "shared_preload_libraries=magic_sync".to_owned(),
        format!("magic_sync.database={database}"),
        "magic_sync.idle=1".to_owned(),
    ];
    settings.extend(more.iter().map(|s| (*s).to_owned()));
    settings
}

pub fn as_strs(settings: &[String]) -> Vec<&str> {
    settings.iter().map(String::as_str).collect()
}

/// Waits until `done` answers true, or panics saying what it waited for
/// once `PATIENCE` (this file's) has passed.
pub fn wait_until(what: &str, done: impl FnMut() -> bool) {
    wait_within(PATIENCE, what, done);
}

/// The process id of the relay worker of `database`, if one runs.
pub fn worker_pid(pg: &mut Client, database: &str) -> Option<i32> {
    pg.query_opt(
        "SELECT pid FROM pg_stat_activity WHERE backend_type = 'magic_sync relay' AND datname = $1",
        &[&database],
    )
    .unwrap()
    .map(|row| row.get(0))
}

/// Waits for the relay worker of `database`; answers its process id.
pub fn the_worker(pg: &mut Client, database: &str) -> i32 {
    let mut pid = None;
    wait_until("the relay worker", || {
        pid = worker_pid(pg, database);
        pid.is_some()
    });
    pid.unwrap()
}

/// The lines process `pid` logged that say `what` (PostgreSQL's default
/// log_line_prefix, '%m [%p] ', names the process of each line).
pub fn lines_of(log: &str, pid: i32, what: &str) -> Vec<String> {
    let process = format!("[{pid}] ");
    log.lines()
        .filter(|l| l.contains(&process) && l.contains(what))
        .map(str::to_owned)
        .collect()
}

/// The postmaster's lines of a relay worker that ended other than by
/// being asked to (an exit code other than 0, a signal): a crash loop
/// shows as many of them.
pub fn workers_ended(log: &str) -> Vec<String> {
    log.lines()
        .filter(|l| {
            l.contains("background worker \"magic_sync relay\"")
                && (l.contains("exited with exit code") || l.contains("terminated by signal"))
        })
        .map(str::to_owned)
        .collect()
}

/// The process id stays the same over `looks` looks, half a second apart.
pub fn assert_stays(pg: &mut Client, database: &str, pid: i32, looks: usize) {
    for _ in 0..looks {
        std::thread::sleep(Duration::from_millis(500));
        assert_eq!(
            worker_pid(pg, database),
            Some(pid),
            "the relay worker was replaced or is gone"
        );
    }
}

pub fn add_product(pg: &mut Client, name: &str, price: i64) {
    pg.execute(
        "INSERT INTO shop.products (id, name, price_cents) VALUES (gen_random_uuid(), $1, $2)",
        &[&name, &price],
    )
    .unwrap();
}

/// Takes what waits for a register and says what it applied, again and
/// again, until it holds exactly the server's products: the worker relays
/// on its own time.
pub fn deliver_when_relayed(pg: &mut Client, register: &mut Replica) {
    wait_until("the register to hold the server's products", || {
        deliver(pg, register);
        report(pg, register);
        held_by(register) == products_of(pg)
    });
}

/// How many rows are set aside.
pub fn set_aside(pg: &mut Client) -> i64 {
    pg.query_one("SELECT count(*) FROM sync.quarantine", &[])
        .unwrap()
        .get(0)
}

pub fn count(pg: &mut Client, sql: &str) -> i64 {
    pg.query_one(sql, &[]).unwrap().get(0)
}

/// Stops a server cleanly (`pg_ctl stop -m fast`): what it wrote reaches
/// its standbys before it goes.
pub fn stop(cluster: &Cluster) {
    let data = cluster.socket_dir().join("data");
    let out = cluster
        .as_owner("pg_ctl")
        .arg("-D")
        .arg(&data)
        .args(["-m", "fast", "-w", "stop"])
        .output()
        .expect("pg_ctl stop");
    assert!(
        out.status.success(),
        "pg_ctl stop: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The book's page on the server, whose settings table the tests hold the
/// server to.
pub fn server_docs() -> String {
    let page = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/src/server.md");
    std::fs::read_to_string(&page).unwrap_or_else(|e| panic!("{}: {e}", page.display()))
}

/// The settings table of docs/src/server.md: each GUC and who the docs
/// say sets it ("superuser", "configuration (reload)", "anyone", ...).
pub fn documented_settings(page: &str) -> Vec<(String, String)> {
    page.lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            // "", name, default, who, what, "".
            if cells.len() < 5 || !cells[1].starts_with("`magic_sync.") {
                return None;
            }
            Some((cells[1].trim_matches('`').to_owned(), cells[3].to_owned()))
        })
        .collect()
}

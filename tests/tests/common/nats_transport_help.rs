//! What the nats transport's fault tests check after each fault, and how
//! they find the relay worker and time their faults: every receipt the
//! registers wrote is filed once (that every register holds exactly the
//! server's products is common/register_files.rs's), the worker seen at
//! work (in a pass, or filing an Up held on a lock) before it is killed.

use std::path::Path;
use std::time::{Duration, Instant};

use postgres::Client;
use uuid::Uuid;

use crate::device::{wait_until, PATIENCE};
use crate::register_files::{receipts_in, unfiled, Receipt};
use crate::shop::{receipts_filed_on, Shop};

/// The relay's advisory lock (pg_magic_sync/src/locks.rs, RELAY): held by
/// a pass for as long as it runs, by whoever runs it.
const RELAY_LOCK: i64 = 7_809_643_163_296_757_358;

/// How many times the server holds each receipt, by id.
fn filed_per_id(pg: &mut Client) -> Vec<(Uuid, i64)> {
    pg.query(
        "SELECT id, count(*) FROM shop.receipts GROUP BY id ORDER BY id",
        &[],
    )
    .unwrap()
    .iter()
    .map(|r| (r.get(0), r.get(1)))
    .collect()
}

/// Waits until every register's receipts are filed and the Filed that
/// answered them applied (no note waits on any register: `registers[i]`
/// runs on `files[i]`), then checks that the server holds exactly the
/// receipts `sold`, each once (counted by id), each under the register
/// that wrote it and with its total; that none waits in the inbox; and
/// that each register still holds exactly the ones it wrote.
pub fn every_receipt_is_filed_once(
    shop: &mut Shop,
    registers: &[Uuid],
    files: &[impl AsRef<Path>],
    sold: &[Receipt],
) {
    assert_eq!(registers.len(), files.len());
    let mut expected = sold.to_vec();
    expected.sort();
    let began = Instant::now();
    loop {
        let notes: Vec<i64> = files.iter().map(|f| unfiled(f.as_ref())).collect();
        let filed = receipts_filed_on(&mut shop.pg);
        if notes.iter().all(|n| *n == 0) && filed.len() >= expected.len() {
            break;
        }
        assert!(
            began.elapsed() < PATIENCE,
            "waited {PATIENCE:?} for every receipt filed and answered: \
             notes waiting per register {notes:?}, {} of {} receipts filed",
            filed.len(),
            expected.len()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        receipts_filed_on(&mut shop.pg),
        expected,
        "the receipts filed"
    );
    let once: Vec<(Uuid, i64)> = expected.iter().map(|r| (r.0, 1)).collect();
    assert_eq!(filed_per_id(&mut shop.pg), once, "each receipt filed once");
    let kept = shop.count("SELECT count(*) FROM sync.inbox WHERE table_name = 'receipts'");
    assert_eq!(kept, 0, "receipts kept in the inbox");
    for (register, file) in registers.iter().zip(files) {
        let wrote: Vec<Receipt> = expected
            .iter()
            .filter(|r| r.1 == *register)
            .copied()
            .collect();
        assert_eq!(
            receipts_in(file.as_ref()),
            wrote,
            "the receipts register {register} holds"
        );
    }
}

/// The relay worker's process id, if one runs for `shop`.
pub fn worker_pid(pg: &mut Client) -> Option<i32> {
    pg.query_opt(
        "SELECT pid FROM pg_stat_activity WHERE backend_type = 'magic_sync relay' AND datname = 'shop'",
        &[],
    )
    .unwrap()
    .map(|row| row.get(0))
}

/// Whether the worker `pid` is in a pass now: it shows its round running
/// in pg_stat_activity (`query` 'relay round', `state` active) and holds
/// the relay's lock, which a pass takes first and keeps to its end.
pub fn in_a_pass(pg: &mut Client, pid: i32) -> bool {
    pg.query_one(
        "SELECT EXISTS (
             SELECT 1 FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid
              WHERE a.pid = $1 AND a.query = 'relay round' AND a.state = 'active'
                AND l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
                AND ((l.classid::int8 << 32) | l.objid::int8) = $2)",
        &[&pid, &RELAY_LOCK],
    )
    .unwrap()
    .get(0)
}

/// Whether the worker `pid` waits for a lock on a table now.
pub fn waits_on_a_table(pg: &mut Client, pid: i32) -> bool {
    pg.query_one(
        "SELECT EXISTS (SELECT 1 FROM pg_stat_activity
                         WHERE pid = $1 AND wait_event_type = 'Lock' AND wait_event = 'relation')",
        &[&pid],
    )
    .unwrap()
    .get(0)
}

/// `kill -9`: the postmaster takes it as a crash, ends every backend,
/// recovers and starts the worker again.
pub fn kill_9(pid: i32) {
    let killed = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success(), "kill -9 {pid}");
}

/// Waits until the server, back from the crash, runs a worker other than
/// `killed`, and connects the shop to it again.
pub fn until_a_new_worker(shop: &mut Shop, killed: i32) {
    wait_until("the server to come back with a new worker", || {
        std::thread::sleep(Duration::from_millis(100));
        let Ok(mut pg) = Client::connect(&shop.cluster.url("shop"), postgres::NoTls) else {
            return false;
        };
        pg.query_opt(
            "SELECT pid FROM pg_stat_activity WHERE backend_type = 'magic_sync relay'",
            &[],
        )
        .ok()
        .flatten()
        .is_some_and(|row| row.get::<_, i32>(0) != killed)
    });
    shop.reconnect();
}

/// When the server last answered upload `number` of `replica`, if it did.
pub fn answered_at(pg: &mut Client, replica: Uuid, number: u64) -> Option<std::time::SystemTime> {
    pg.query_opt(
        "SELECT answered_at FROM sync.answered WHERE replica = $1 AND number = $2",
        &[&replica, &(number as i64)],
    )
    .unwrap()
    .map(|row| row.get(0))
}

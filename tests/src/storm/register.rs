//! A register of the storm: its replica on a SQLite file, driven a call at
//! a time through the server's queue (`sync.next`, `sync.ack`,
//! `sync.receive`), with the faults a device brings: messages lost (taken
//! and acknowledged unapplied), applied twice, only some taken, a death
//! before acknowledging, its storage busy, and its file put back to an
//! older copy. It remembers what it wrote (receipts, its battery) and the
//! snapshots it saw begin.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use magic_sync_replica::queue;
use magic_sync_replica::{install, Error, Received, Replica, Settings};
use postgres::Client;
use rusqlite::Connection;
use uuid::Uuid;

use super::schema;

pub struct Register {
    pub me: Uuid,
    file: PathBuf,
    replica: Option<Replica>,
    /// The receipts it wrote, and those it wrote since its last copy.
    pub receipts: BTreeSet<Uuid>,
    /// The last battery it wrote, if any.
    pub battery: Option<i64>,
    /// The snapshot it was last seen in.
    snapshot: Option<String>,
    /// Snapshots seen begin since last asked.
    began: usize,
    /// Rounds it stays unheard.
    pub unheard: u32,
    /// The older copy of its file, and the receipts it held then.
    copy: Option<(PathBuf, BTreeSet<Uuid>)>,
}

/// What a register's database answers SQLite's foreign key check with:
/// rows that point at rows it does not hold.
pub fn orphans(conn: &Connection) -> i64 {
    conn.query_row("SELECT count(*) FROM pragma_foreign_key_check", [], |r| {
        r.get(0)
    })
    .unwrap()
}

fn open(file: &Path, me: Uuid, deployed: bool) -> Replica {
    let mut conn = Connection::open(file).unwrap();
    conn.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; \
         PRAGMA foreign_keys = ON; PRAGMA recursive_triggers = ON;",
    )
    .unwrap();
    conn.execute_batch(&schema::register(deployed)).unwrap();
    install(&mut conn, &schema::tables()).unwrap();
    Replica::open(conn, schema::tables(), me, settings()).unwrap()
}

/// A register's settings: an upload left unanswered (its `Filed` lost)
/// goes again after two seconds, not five minutes, and a backlog that
/// changed is said within a second: a storm's minutes are short.
fn settings() -> Settings {
    Settings {
        resend_after: Duration::from_secs(2),
        backlog_every: Duration::from_secs(1),
        ..Settings::default()
    }
}

impl Register {
    pub fn new(dir: &Path, me: Uuid) -> Register {
        let file = dir.join(format!("{me}.db"));
        let replica = open(&file, me, false);
        Register {
            me,
            file,
            replica: Some(replica),
            receipts: BTreeSet::new(),
            battery: None,
            snapshot: None,
            began: 0,
            unheard: 0,
            copy: None,
        }
    }

    pub fn replica(&self) -> &Replica {
        self.replica.as_ref().expect("open")
    }

    fn replica_mut(&mut self) -> &mut Replica {
        self.replica.as_mut().expect("open")
    }

    pub fn conn(&self) -> &Connection {
        self.replica().connection()
    }

    /// Snapshots it saw begin since last asked.
    pub fn snapshots_begun(&mut self) -> usize {
        std::mem::take(&mut self.began)
    }

    /// Takes one message the transport delivered, noting a snapshot begun.
    fn take(&mut self, bytes: &[u8]) -> Result<Received, Error> {
        let received = self.replica_mut().receive(bytes)?;
        let now = self.replica().last_applied()?.snapshot;
        if now.is_some() && now != self.snapshot {
            self.began += 1;
        }
        self.snapshot = now;
        Ok(received)
    }

    /// Takes, applies and acknowledges up to `most` messages; answers how
    /// many it took.
    pub fn deliver(&mut self, pg: &mut Client, most: usize) -> Result<usize, Error> {
        let mut taken = 0;
        while taken < most {
            let Some((id, bytes)) = queue::next(pg, self.replica())? else {
                break;
            };
            self.take(&bytes)?;
            queue::ack(pg, self.replica(), &id)?;
            taken += 1;
        }
        Ok(taken)
    }

    /// Sends up what it has to say.
    pub fn report(&mut self, pg: &mut Client) -> Result<(), Error> {
        queue::report(pg, self.replica_mut())?;
        Ok(())
    }

    /// The transport loses its next message: taken and acknowledged, never
    /// applied. Answers whether one waited.
    pub fn lose(&mut self, pg: &mut Client) -> Result<bool, Error> {
        let Some((id, _)) = queue::next(pg, self.replica())? else {
            return Ok(false);
        };
        queue::ack(pg, self.replica(), &id)?;
        Ok(true)
    }

    /// Its next message delivered twice: applied, then again.
    pub fn duplicate(&mut self, pg: &mut Client) -> Result<bool, Error> {
        let Some((id, bytes)) = queue::next(pg, self.replica())? else {
            return Ok(false);
        };
        self.take(&bytes)?;
        self.take(&bytes)?;
        queue::ack(pg, self.replica(), &id)?;
        Ok(true)
    }

    /// Applies its next message and dies before acknowledging it: the
    /// program starts again on its file.
    pub fn die_before_ack(&mut self, pg: &mut Client, deployed: bool) -> Result<bool, Error> {
        let taken = match queue::next(pg, self.replica())? {
            Some((_, bytes)) => {
                self.take(&bytes)?;
                true
            }
            None => false,
        };
        self.reopen(deployed);
        Ok(taken)
    }

    /// Its storage busy (another connection holds the write lock) as its
    /// next message comes: not taken, not acknowledged. Answers whether
    /// one waited and was refused.
    pub fn busy(&mut self, pg: &mut Client) -> Result<bool, Error> {
        let Some((_, bytes)) = queue::next(pg, self.replica())? else {
            return Ok(false);
        };
        let holder = Connection::open(&self.file).unwrap();
        holder.execute_batch("BEGIN IMMEDIATE").unwrap();
        self.conn().busy_timeout(Duration::ZERO).unwrap();
        let refused = self.take(&bytes).is_err();
        self.conn().busy_timeout(Duration::from_secs(5)).unwrap();
        holder.execute_batch("ROLLBACK").unwrap();
        Ok(refused)
    }

    /// Closes the replica and opens it again on its file.
    pub fn reopen(&mut self, deployed: bool) {
        drop(self.replica.take());
        self.replica = Some(open(&self.file, self.me, deployed));
        self.snapshot = self.replica().last_applied().unwrap().snapshot;
    }

    /// Keeps a copy of its file as it is now.
    pub fn keep_copy(&mut self) {
        let copy = self.file.with_extension("copy");
        let _ = std::fs::remove_file(&copy);
        self.conn()
            .execute("VACUUM INTO ?1", [copy.to_str().unwrap()])
            .unwrap();
        self.copy = Some((copy, self.receipts.clone()));
    }

    pub fn has_copy(&self) -> bool {
        self.copy.is_some()
    }

    /// Its file put back to the older copy: what it wrote since and the
    /// server filed stays filed; what it had not sent is gone with the
    /// device's newer file (`filed` says which the server has).
    pub fn restore_copy(&mut self, deployed: bool, filed: &BTreeSet<Uuid>) {
        let (copy, receipts) = self.copy.take().expect("a copy");
        drop(self.replica.take());
        for suffix in ["-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", self.file.display()));
        }
        std::fs::rename(&copy, &self.file).unwrap();
        let lost: Vec<Uuid> = self
            .receipts
            .difference(&receipts)
            .filter(|r| !filed.contains(r))
            .copied()
            .collect();
        for receipt in lost {
            self.receipts.remove(&receipt);
        }
        self.replica = Some(open(&self.file, self.me, deployed));
        self.snapshot = self.replica().last_applied().unwrap().snapshot;
    }

    /// Writes a receipt of its own.
    pub fn write_receipt(&mut self, total: i64) -> Uuid {
        let id = Uuid::new_v4();
        self.conn()
            .execute(
                "INSERT INTO receipts (id, register_id, total_cents) VALUES (?1, ?2, ?3)",
                rusqlite::params![id.as_bytes().to_vec(), self.me.as_bytes().to_vec(), total],
            )
            .unwrap();
        self.receipts.insert(id);
        id
    }

    /// Writes its battery on its state row, if it holds it; answers whether.
    pub fn write_battery(&mut self, level: i64) -> bool {
        let written = self
            .conn()
            .execute(
                "UPDATE register_state SET battery = ?1 WHERE id = ?2",
                rusqlite::params![level, self.me.as_bytes().to_vec()],
            )
            .unwrap();
        if written > 0 {
            self.battery = Some(level);
        }
        written > 0
    }

    /// The deploy: its own check dropped.
    pub fn deploy(&mut self) {
        self.conn().execute_batch(schema::DEPLOY).unwrap();
    }

    /// The rows it holds of the tables that come down, by (table, key).
    pub fn held(&self) -> BTreeSet<(String, String)> {
        let mut rows = crate::walk::held(self.replica());
        let mut statement = self
            .conn()
            .prepare("SELECT id FROM register_state")
            .unwrap();
        let keys = statement
            .query_map([], |r| r.get::<_, Vec<u8>>(0))
            .unwrap()
            .map(|k| Uuid::from_slice(&k.unwrap()).unwrap().to_string());
        rows.extend(keys.map(|k| ("register_state".to_owned(), k)));
        rows
    }

    /// Whether everything it wrote reached the server: nothing unsent,
    /// nothing sent and not filed.
    pub fn drained(&self) -> bool {
        let backlog = self.replica().progress().unwrap();
        backlog.iter().all(|t| t.unsent == 0 && t.unfiled == 0)
    }

    /// The products it holds, with their names.
    pub fn products(&self) -> BTreeSet<(Uuid, String)> {
        let mut statement = self
            .conn()
            .prepare("SELECT id, name FROM products")
            .unwrap();
        let rows = statement
            .query_map([], |r| {
                Ok((r.get::<_, Vec<u8>>(0)?, r.get::<_, String>(1)?))
            })
            .unwrap()
            .map(|r| {
                let (id, name) = r.unwrap();
                (Uuid::from_slice(&id).unwrap(), name)
            })
            .collect();
        rows
    }
}

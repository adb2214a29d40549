//! The walk of the storm, its settling and its checks.
//!
//! Each round: a few server writes (the walk's, a product the registers
//! refuse, a note on a register's state row), now and then a fault of the
//! server's side (a relay pass's backend terminated, the worker killed,
//! PostgreSQL stopped immediately, a register's file put back to an older
//! copy, a deploy that changes a declaration), then each register's turn: it writes receipts and its battery,
//! and takes what waits for it — a fifth of the time with a fault — and
//! says what it has to say. After every round no register holds a row
//! without its parents; every few rounds the storm waits for the system to
//! settle and checks every live register holds exactly what the server
//! records for it. At the end the faults stop, the fix is deployed, and
//! every register holds exactly what it should, every receipt is filed
//! once, every battery reached the server, and every provisioning has a
//! cause.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use magic_sync_replica::Error;
use postgres::{Client, NoTls};
use uuid::Uuid;

use super::faults::{Cause, Fault, Tally};
use super::register::{orphans, Register};
use super::schema;
use crate::walk::{self, Dice};
use crate::Cluster;

const DATABASE: &str = "storm";

/// The customers' rule, as the walk declares it.
const CUSTOMERS_RULE: &str =
    "grouped(members => shop.list_members, assigned => shop.register_lists)";

/// What the deploys changed of the walk's declarations: the orders' rule
/// (assigned to a register, or broadcast), and a column of the customers
/// that travels and no register's build holds.
#[derive(Clone, Copy, Debug, Default)]
struct Declared {
    orders_broadcast: bool,
    customers_nickname: bool,
}

/// How long the system may take to settle before the storm says it never
/// did.
const PATIENCE: Duration = Duration::from_secs(120);

/// What one storm runs: its seed, and rounds or seconds.
#[derive(Clone, Copy, Debug)]
pub struct Run {
    pub seed: u64,
    pub rounds: usize,
    /// Rounds go on until this long has passed, if set (the rounds then a
    /// floor).
    pub seconds: Option<u64>,
    pub registers: usize,
    /// Settle and check every this many rounds.
    pub settle_every: usize,
    /// The rounds after which the server's database is dumped, and after
    /// which it is restored from that dump, if at all.
    pub dump: Option<(usize, usize)>,
}

pub struct Storm {
    run: Run,
    // Dropped last: the server, after its clients.
    pg: Client,
    device: Client,
    registers: Vec<Register>,
    dice: Dice,
    pub tally: Tally,
    log: Vec<String>,
    deployed: bool,
    declared: Declared,
    /// The declarations when the dump was taken: its restore puts them back.
    declared_at_dump: Declared,
    live: BTreeMap<Uuid, bool>,
    pub rounds: usize,
    pub settlings: usize,
    began: Instant,
    /// The receipts filed when the dump was taken.
    filed_at_dump: BTreeSet<Uuid>,
    /// Receipts filed after the dump and taken away by its restore: the
    /// registers had forgotten them, and may or may not send them again.
    unfiled_by_restore: BTreeSet<Uuid>,
    /// The epochs the restored database had.
    epochs_restored: Option<i64>,
    /// The new epochs taken since the restore (one, or none if no register
    /// had applied anything past the dump).
    pub new_epochs: i64,
    dir: tempfile::TempDir,
    cluster: Cluster,
}

impl Drop for Storm {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "--- the storm of seed {} (MAGIC_SYNC_STORM_SEED={}), its steps ---",
                self.run.seed, self.run.seed
            );
            for line in &self.log {
                eprintln!("{line}");
            }
            eprintln!("{}", self.tally);
        }
    }
}

impl Storm {
    /// The server with its worker relaying `storm` over the queue, the
    /// walk's schema and its registers.
    pub fn start(run: Run) -> Storm {
        let cluster = Cluster::start_with(&[
            "shared_preload_libraries=magic_sync",
            "magic_sync.database=storm",
            "magic_sync.idle=1",
            // A lost message no later one reveals is caught by the check
            // of what stayed unconfirmed: soon, in a storm.
            "magic_sync.unconfirmed_after=3",
        ]);
        let mut pg = cluster.database_with_extension(DATABASE);
        pg.batch_execute(&schema::server())
            .expect("the storm's schema");
        let device = cluster.connect(DATABASE);
        let dir = tempfile::tempdir().unwrap();
        let ids: Vec<Uuid> = (0..run.registers).map(|_| Uuid::new_v4()).collect();
        for id in &ids {
            pg.execute("INSERT INTO shop.registers (id) VALUES ($1)", &[id])
                .unwrap();
            pg.execute(
                "INSERT INTO shop.register_state (id, register_id, note) VALUES ($1, $1, 'new')",
                &[id],
            )
            .unwrap();
        }
        pg.batch_execute("INSERT INTO shop.lists VALUES (gen_random_uuid()), (gen_random_uuid())")
            .unwrap();
        let mut tally = Tally::default();
        let registers = ids
            .iter()
            .map(|id| {
                tally.owe(*id, Cause::First);
                Register::new(dir.path(), *id)
            })
            .collect();
        Storm {
            run,
            pg,
            device,
            registers,
            dice: Dice(run.seed.max(1)),
            tally,
            log: Vec::new(),
            deployed: false,
            declared: Declared::default(),
            declared_at_dump: Declared::default(),
            live: ids.iter().map(|id| (*id, true)).collect(),
            rounds: 0,
            settlings: 0,
            began: Instant::now(),
            filed_at_dump: BTreeSet::new(),
            unfiled_by_restore: BTreeSet::new(),
            epochs_restored: None,
            new_epochs: 0,
            dir,
            cluster,
        }
    }

    fn say(&mut self, line: String) {
        if std::env::var_os("MAGIC_SYNC_STORM_TRACE").is_some() {
            eprintln!("{line}");
        }
        self.log.push(line);
    }

    /// The whole storm: the rounds with their faults, then the faults
    /// stopped, the fix deployed, and the last checks.
    pub fn rage(&mut self) {
        let deadline = self
            .run
            .seconds
            .map(|s| self.began + Duration::from_secs(s));
        let mut n = 0;
        while n < self.run.rounds || deadline.is_some_and(|d| Instant::now() < d) {
            self.rounds = n;
            self.round(n);
            n += 1;
            match self.run.dump {
                Some((dump, _)) if dump == n => self.dump(n),
                Some((_, restore)) if restore == n => self.restore_dump(n),
                _ => {}
            }
            if n % self.run.settle_every == 0 {
                self.settle(&format!("after round {n}"));
                self.check_as_recorded(n);
            }
        }
        self.rounds = n;
        self.calm();
    }

    fn round(&mut self, n: usize) {
        for _ in 0..=self.dice.roll(3) {
            self.server_write(n);
        }
        match self.dice.roll(30) {
            0 => self.terminate_relay(n),
            1 => self.kill_worker(n),
            2 => self.restart_server(n),
            3 | 4 => self.copy_or_restore(n),
            5 => self.redeclare(n),
            _ => {}
        }
        for i in 0..self.registers.len() {
            self.turn(n, i);
        }
        self.bring_forward_put_off();
        self.check_no_orphans(&format!("round {n}"));
    }

    /// One write of the walk's, or a product the registers refuse, or the
    /// head office's note on a register's state row.
    fn server_write(&mut self, n: usize) {
        let sql = match self.dice.roll(12) {
            0 => {
                self.tally.fault(Fault::Refused);
                format!(
                    "INSERT INTO shop.products VALUES ('{}', 'Forbidden', NULL)",
                    Uuid::new_v4()
                )
            }
            1 => {
                let note = self.dice.roll(1000);
                format!(
                    "UPDATE shop.register_state SET note = 'note {note}' \
                      WHERE id = (SELECT id FROM shop.register_state ORDER BY id \
                                  OFFSET {} LIMIT 1)",
                    self.dice.roll(self.run.registers as u64)
                )
            }
            _ => match walk::write(&mut self.pg, &mut self.dice) {
                Some(sql) => sql,
                None => return,
            },
        };
        self.say(format!("round {n}: server: {sql}"));
        self.pg
            .batch_execute(&sql)
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        // After each write: a register made not live and live again within
        // a round may be seen by a pass in between, and provisioned.
        self.note_liveness(n);
    }

    /// A register that became live again is owed a provisioning.
    fn note_liveness(&mut self, n: usize) {
        let rows = self
            .pg
            .query("SELECT id, active FROM shop.registers", &[])
            .unwrap();
        for row in rows {
            let (id, active): (Uuid, bool) = (row.get(0), row.get(1));
            let was = self.live.insert(id, active);
            if active && was == Some(false) {
                self.tally.owe(id, Cause::LiveAgain);
                self.say(format!("round {n}: {id} live again"));
            }
        }
    }

    /// A register's turn: its writes, then what waits for it, taken with a
    /// fault a fifth of the time, then what it has to say.
    fn turn(&mut self, n: usize, i: usize) {
        let me = self.registers[i].me;
        if self.registers[i].unheard > 0 {
            self.registers[i].unheard -= 1;
            return;
        }
        if self.dice.roll(3) == 0 {
            for _ in 0..=self.dice.roll(2) {
                let total = self.dice.roll(10_000) as i64;
                let id = self.registers[i].write_receipt(total);
                self.say(format!("round {n}: {me} writes receipt {id}"));
            }
        }
        if self.dice.roll(4) == 0 {
            let level = self.dice.roll(101) as i64;
            if self.registers[i].write_battery(level) {
                self.say(format!("round {n}: {me} writes battery {level}"));
            }
        }
        let fault = match self.dice.roll(30) {
            0 => Some(Fault::Lost),
            1 => Some(Fault::Duplicated),
            2 => Some(Fault::Partial),
            3 => Some(Fault::DiedBeforeAck),
            4 => Some(Fault::Busy),
            5 => Some(Fault::Unheard),
            _ => None,
        };
        let outcome = self.take_with(i, fault);
        match outcome {
            Ok(true) => {
                let fault = fault.expect("a fault");
                self.tally.fault(fault);
                if fault == Fault::Lost {
                    self.tally.owe(me, Cause::Lost);
                }
                self.say(format!("round {n}: {me}: {fault}"));
            }
            Ok(false) => {}
            Err(e) => {
                self.say(format!(
                    "round {n}: {me}: the queue failed ({e}); connecting again"
                ));
                self.reconnect();
            }
        }
        self.count_snapshots(n, i);
        assert_eq!(
            orphans(self.registers[i].conn()),
            0,
            "seed {}, round {n}: {me} holds a row without its parent",
            self.run.seed
        );
    }

    /// Takes what waits with `fault`; answers whether the fault came about
    /// (a message waited for it).
    fn take_with(&mut self, i: usize, fault: Option<Fault>) -> Result<bool, Error> {
        let deployed = self.deployed;
        let pg = &mut self.device;
        let register = &mut self.registers[i];
        let happened = match fault {
            None => false,
            Some(Fault::Lost) => register.lose(pg)?,
            Some(Fault::Duplicated) => register.duplicate(pg)?,
            Some(Fault::Partial) => {
                let most = 1 + self.dice.roll(2) as usize;
                let taken = register.deliver(pg, most)?;
                register.report(pg)?;
                return Ok(taken == most);
            }
            Some(Fault::DiedBeforeAck) => return register.die_before_ack(pg, deployed),
            Some(Fault::Busy) => register.busy(pg)?,
            Some(Fault::Unheard) => {
                register.unheard = 1 + self.dice.roll(4) as u32;
                return Ok(true);
            }
            Some(other) => unreachable!("{other} is not a register's"),
        };
        register.deliver(pg, usize::MAX)?;
        register.report(pg)?;
        Ok(happened)
    }

    /// Each snapshot a register saw begin, put down to its cause.
    fn count_snapshots(&mut self, n: usize, i: usize) {
        let me = self.registers[i].me;
        for _ in 0..self.registers[i].snapshots_begun() {
            let cause = self.tally.provisioned(me);
            self.say(format!("round {n}: {me} provisioned ({cause})"));
        }
    }

    /// A `CALL sync.relay()` of a session of its own, its backend
    /// terminated a moment after it began: the pass loses its lock, and
    /// what it recorded is rolled back with it.
    fn terminate_relay(&mut self, n: usize) {
        let mut session = self.cluster.connect(DATABASE);
        let pid: i32 = session
            .query_one("SELECT pg_backend_pid()", &[])
            .unwrap()
            .get(0);
        let pass = std::thread::spawn(move || session.batch_execute("CALL sync.relay()").is_err());
        std::thread::sleep(Duration::from_millis(self.dice.roll(20)));
        self.pg
            .execute("SELECT pg_terminate_backend($1)", &[&pid])
            .unwrap();
        if pass.join().unwrap() {
            self.tally.fault(Fault::RelayTerminated);
            self.say(format!("round {n}: a relay pass's backend terminated"));
        } else {
            self.say(format!(
                "round {n}: a relay pass ended before its backend was terminated"
            ));
        }
    }

    /// The worker killed wherever it is: between its record and its sends,
    /// mid-pass, or asleep. PostgreSQL takes it as a crash.
    fn kill_worker(&mut self, n: usize) {
        let Some(pid) = worker_pid(&mut self.pg) else {
            return;
        };
        std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status()
            .unwrap();
        self.tally.fault(Fault::WorkerKilled);
        self.say(format!("round {n}: the worker {pid} killed"));
        self.reconnect();
    }

    fn restart_server(&mut self, n: usize) {
        self.cluster.restart_immediately();
        self.tally.fault(Fault::ServerRestarted);
        self.say(format!(
            "round {n}: postgres stopped immediately and started again"
        ));
        self.reconnect();
    }

    /// A register's file copied, or put back to the copy taken before.
    fn copy_or_restore(&mut self, n: usize) {
        let i = self.dice.roll(self.registers.len() as u64) as usize;
        let me = self.registers[i].me;
        if !self.registers[i].has_copy() {
            self.registers[i].keep_copy();
            self.say(format!("round {n}: {me}'s file copied"));
            return;
        }
        let filed = self.filed_by(me);
        let deployed = self.deployed;
        self.registers[i].restore_copy(deployed, &filed);
        self.tally.fault(Fault::FileRestored);
        self.tally.owe(me, Cause::FileRestored);
        self.say(format!("round {n}: {me}'s file put back to its copy"));
    }

    /// A deploy that changes a declaration, as a migration would: the
    /// orders' rule turned (assigned to broadcast, or back), or a column of
    /// the customers added or dropped with the table declared again in the
    /// same transaction. No register is owed a provisioning for it: each is
    /// sent only the difference (the rows a rule moves, the rows whose
    /// columns changed), and a register whose build lacks the new column
    /// applies the rows without it.
    fn redeclare(&mut self, n: usize) {
        let sql = if self.dice.roll(2) == 0 {
            self.declared.orders_broadcast = !self.declared.orders_broadcast;
            orders_declaration(self.declared.orders_broadcast)
        } else {
            self.declared.customers_nickname = !self.declared.customers_nickname;
            let column = if self.declared.customers_nickname {
                "ADD COLUMN nickname text DEFAULT 'new'"
            } else {
                "DROP COLUMN nickname"
            };
            format!(
                "BEGIN; ALTER TABLE shop.customers {column}; \
                 SELECT sync.declare_table('shop.customers', sync => '{CUSTOMERS_RULE}'); COMMIT;"
            )
        };
        self.say(format!("round {n}: deploy: {sql}"));
        self.pg
            .batch_execute(&sql)
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        self.tally.fault(Fault::Redeclared);
    }

    fn dump_file(&self) -> std::path::PathBuf {
        self.dir.path().join("storm.sql")
    }

    /// The server's database dumped, as a backup is taken.
    fn dump(&mut self, n: usize) {
        let dump = self.dump_file();
        self.cluster.dump(DATABASE, &dump);
        self.filed_at_dump = self.all_filed();
        self.declared_at_dump = self.declared;
        self.say(format!("round {n}: the server's database dumped"));
    }

    /// The server's database dropped and restored from the older dump,
    /// PostgreSQL started again (a worker stopped by the drop is not
    /// started again until then). Its next messages are numbered from
    /// where the dump left off: the registers apply none, say what they
    /// applied — a message this database has no record of sending — and
    /// the server takes a new epoch and provisions every one again.
    fn restore_dump(&mut self, n: usize) {
        let filed = self.all_filed();
        self.unfiled_by_restore
            .extend(filed.difference(&self.filed_at_dump));
        let dump = self.dump_file();
        self.cluster.restore(DATABASE, &dump);
        self.declared = self.declared_at_dump;
        let mut admin = self.cluster.connect("postgres");
        // The restore committed asynchronously (the cluster's
        // synchronous_commit is off): written out before the stop, or its
        // last statements (the foreign keys) are lost with it.
        admin.batch_execute("CHECKPOINT").unwrap();
        drop(admin);
        self.cluster.restart_immediately();
        self.reconnect();
        self.epochs_restored = Some(self.epochs());
        self.tally.fault(Fault::DumpRestored);
        for register in &self.registers {
            self.tally.owe(register.me, Cause::ServerRestored);
        }
        self.say(format!(
            "round {n}: the server's database restored from its dump ({} receipts filed since taken away)",
            filed.difference(&self.filed_at_dump).count()
        ));
        self.note_liveness(n);
    }

    fn epochs(&mut self) -> i64 {
        self.pg
            .query_one("SELECT count(*) FROM sync.epochs", &[])
            .unwrap()
            .get(0)
    }

    /// Every receipt the server filed.
    fn all_filed(&mut self) -> BTreeSet<Uuid> {
        self.pg
            .query("SELECT id FROM shop.receipts", &[])
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect()
    }

    /// Connects again once the server takes connections, the worker back.
    fn reconnect(&mut self) {
        let began = Instant::now();
        loop {
            assert!(began.elapsed() < PATIENCE, "the server never came back");
            std::thread::sleep(Duration::from_millis(100));
            let url = self.cluster.url(DATABASE);
            let (Ok(mut pg), Ok(device)) =
                (Client::connect(&url, NoTls), Client::connect(&url, NoTls))
            else {
                continue;
            };
            if worker_pid(&mut pg).is_none() {
                continue;
            }
            self.pg = pg;
            self.device = device;
            // The test's own writes commit asynchronously: a crash may
            // have taken the last back, a register's liveness with them.
            self.note_liveness(self.rounds);
            return;
        }
    }

    /// The storm's clock runs fast: a provisioning the server put off (a
    /// replica that said it needs one too often: a minute, doubling) is
    /// due now.
    fn bring_forward_put_off(&mut self) {
        self.pg
            .execute(
                "UPDATE sync.replicas SET provision_at = now() WHERE provision_at > now()",
                &[],
            )
            .unwrap();
    }

    /// No register holds a row without the rows it points at.
    fn check_no_orphans(&mut self, when: &str) {
        for register in &self.registers {
            assert_eq!(
                orphans(register.conn()),
                0,
                "seed {}, {when}: {} holds a row without its parent",
                self.run.seed,
                register.me
            );
        }
    }

    /// Every register takes and says everything, again and again, until
    /// nothing is pending: no notes, nothing due, nothing waits for any
    /// register, every live one applied all it was sent, and a last turn
    /// moved nothing.
    fn settle(&mut self, when: &str) {
        let began = Instant::now();
        self.say(format!("settling {when}"));
        for register in &mut self.registers {
            register.unheard = 0;
        }
        loop {
            if began.elapsed() > PATIENCE {
                let waiting = self.waiting();
                let registers: Vec<String> = self
                    .registers
                    .iter()
                    .map(|r| format!("{}: {:?}", r.me, r.replica().last_applied()))
                    .collect();
                panic!(
                    "seed {}: never settled {when}: {waiting}\nthe registers: {registers:#?}",
                    self.run.seed
                );
            }
            self.bring_forward_put_off();
            let mut moved = 0;
            let mut failed = false;
            for i in 0..self.registers.len() {
                let pg = &mut self.device;
                let register = &mut self.registers[i];
                let turn = register.deliver(pg, usize::MAX).and_then(|taken| {
                    let before = register.replica().progress()?;
                    register.report(pg)?;
                    let after = register.replica().progress()?;
                    Ok(taken + usize::from(before != after))
                });
                match turn {
                    Ok(m) => moved += m,
                    Err(e) => {
                        self.say(format!("settling: the queue failed ({e})"));
                        failed = true;
                        break;
                    }
                }
                self.count_snapshots(self.rounds, i);
            }
            if failed {
                self.reconnect();
                continue;
            }
            let drained = self.registers.iter().all(Register::drained);
            if moved == 0 && drained && self.quiet() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.check_no_orphans(when);
        let away = self
            .live
            .iter()
            .filter(|(_, live)| !**live)
            .map(|(id, _)| *id)
            .collect();
        self.tally.settled(&away);
        self.settlings += 1;
        self.say(format!("settled {when} in {:?}", began.elapsed()));
    }

    /// Nothing pending on the server's side, and a relay pass saw every
    /// register as live as it is.
    fn quiet(&mut self) -> bool {
        self.pg
            .query_one(
                "SELECT NOT sync_internal.work_waits() \
                    AND NOT EXISTS (SELECT 1 FROM sync.outbox) \
                    AND NOT EXISTS (SELECT 1 FROM sync.inbox) \
                    AND NOT EXISTS (SELECT 1 FROM shop.registers g \
                         LEFT JOIN sync.replicas r ON r.id = g.id \
                         WHERE g.active IS DISTINCT FROM coalesce(r.live, false)) \
                    AND NOT EXISTS (SELECT 1 FROM sync.replicas WHERE live \
                         AND (applied_epoch IS DISTINCT FROM epoch \
                              OR applied_sequence < last_sequence \
                              OR provision OR provision_at IS NOT NULL))",
                &[],
            )
            .unwrap()
            .get(0)
    }

    /// What still waits, to say why the system did not settle.
    fn waiting(&mut self) -> String {
        let row = self
            .pg
            .query_one(
                "SELECT jsonb_build_object( \
                   'work_waits', sync_internal.work_waits(), \
                   'notes', (SELECT count(*) FROM sync.notes), \
                   'outbox', (SELECT count(*) FROM sync.outbox), \
                   'inbox', (SELECT jsonb_agg(to_jsonb(i) - 'bytes') FROM sync.inbox i), \
                   'replicas', (SELECT jsonb_agg(jsonb_build_object('id', id, 'live', live, \
                        'epoch', epoch, 'applied_epoch', applied_epoch, \
                        'last_sequence', last_sequence, 'applied_sequence', applied_sequence, \
                        'gap', gap, 'provision', provision, 'provision_at', provision_at)) \
                        FROM sync.replicas))::text",
                &[],
            )
            .unwrap();
        row.get(0)
    }

    fn is_live(&mut self, register: Uuid) -> bool {
        self.pg
            .query_one(
                "SELECT active FROM shop.registers WHERE id = $1",
                &[&register],
            )
            .unwrap()
            .get(0)
    }

    /// Settled: every live register holds exactly what the server records
    /// for it, and the status reads say so (synced, or awaiting a fix for
    /// the rows it refused until the deploy).
    fn check_as_recorded(&mut self, n: usize) {
        let seed = self.run.seed;
        let ids: Vec<Uuid> = self.registers.iter().map(|r| r.me).collect();
        for (i, id) in ids.into_iter().enumerate() {
            if !self.is_live(id) {
                continue; // forgotten: it keeps what it had until it is back
            }
            let recorded = schema::recorded(&mut self.pg, id);
            let held = self.registers[i].held();
            assert_eq!(
                held,
                recorded,
                "seed {seed}, after round {n}: {id} holds other than the server records \
                 (held but not recorded: {:?}; recorded but not held: {:?})",
                held.difference(&recorded).collect::<Vec<_>>(),
                recorded.difference(&held).collect::<Vec<_>>()
            );
            let (state, refused, why) = self.state_of(id);
            let fine =
                state == "synced" || (state == "awaiting_fix" && refused > 0 && !self.deployed);
            assert!(
                fine,
                "seed {seed}, after round {n}: the status reads say {id} is {state} ({refused} refused): {why}"
            );
        }
    }

    /// The status reads' state of a register, and how many rows it refused.
    fn state_of(&mut self, id: Uuid) -> (String, i64, String) {
        let row = self
            .pg
            .query_one(
                "SELECT state, refused::int8, to_jsonb(s)::text \
                   FROM sync_internal.replica_states(NULL) s WHERE id = $1",
                &[&id],
            )
            .unwrap();
        (row.get(0), row.get(1), row.get(2))
    }

    /// The receipts the server filed from a register.
    fn filed_by(&mut self, register: Uuid) -> BTreeSet<Uuid> {
        self.pg
            .query(
                "SELECT id FROM shop.receipts WHERE register_id = $1",
                &[&register],
            )
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect()
    }

    /// The faults stop, every register live, the fix deployed: then every
    /// register holds exactly what it should, every receipt it wrote is
    /// filed once, its last battery reached the server, and every
    /// provisioning had its cause.
    fn calm(&mut self) {
        let seed = self.run.seed;
        self.say("calm: the faults stop, every register live, the fix deployed".to_owned());
        self.pg
            .batch_execute("UPDATE shop.registers SET active = true WHERE NOT active")
            .unwrap();
        self.note_liveness(self.rounds);
        // The walk's reference query knows the orders assigned: its rule
        // back, as a last deploy.
        if self.declared.orders_broadcast {
            self.declared.orders_broadcast = false;
            self.pg.batch_execute(&orders_declaration(false)).unwrap();
        }
        self.deployed = true;
        for register in &mut self.registers {
            register.deploy();
        }
        self.pg.batch_execute("SELECT sync.retry()").unwrap();
        self.settle("once calm");
        self.check_as_recorded(self.rounds);
        self.check_as_they_should();
        // An edit a register made while the server had forgotten it (not
        // live) is dropped, as filing says: the last edits are made live.
        for i in 0..self.registers.len() {
            let level = 1000 + i as i64;
            assert!(self.registers[i].write_battery(level));
        }
        self.settle("once the last batteries are written");
        let ids: Vec<Uuid> = self.registers.iter().map(|r| r.me).collect();
        for (i, id) in ids.into_iter().enumerate() {
            // Every receipt it wrote is filed, but those the restore of the
            // dump took away after the register forgot them.
            let filed = self.filed_by(id);
            let written = &self.registers[i].receipts;
            let missing: Vec<&Uuid> = written
                .difference(&filed)
                .filter(|r| !self.unfiled_by_restore.contains(r))
                .collect();
            let unwritten: Vec<&Uuid> = filed.difference(written).collect();
            assert!(
                missing.is_empty() && unwritten.is_empty(),
                "seed {seed}, once calm: receipts of {id} written and not filed: {missing:?}; \
                 filed and not written: {unwritten:?}"
            );
            let battery: Option<i32> = self
                .pg
                .query_one(
                    "SELECT battery FROM shop.register_state WHERE id = $1",
                    &[&id],
                )
                .unwrap()
                .get(0);
            assert_eq!(
                battery.map(i64::from),
                self.registers[i].battery,
                "seed {seed}, once calm: {id}'s battery did not reach the server"
            );
        }
        let (rows, keys): (i64, i64) = {
            let row = self
                .pg
                .query_one(
                    "SELECT count(*), count(DISTINCT id) FROM shop.receipts",
                    &[],
                )
                .unwrap();
            (row.get(0), row.get(1))
        };
        assert_eq!(rows, keys, "seed {seed}: a receipt filed twice");
        if let Some(restored) = self.epochs_restored {
            self.new_epochs = self.epochs() - restored;
            assert!(
                self.new_epochs <= 1,
                "seed {seed}: {} new epochs after the server's restore",
                self.new_epochs
            );
        }
        self.check_provisionings();
    }

    /// Once calm: every register holds exactly what the reference query
    /// says it should, and the server's products as the server has them.
    fn check_as_they_should(&mut self) {
        let seed = self.run.seed;
        let servers_products: BTreeSet<(Uuid, String)> = self
            .pg
            .query("SELECT id, name FROM shop.products", &[])
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect();
        let ids: Vec<Uuid> = self.registers.iter().map(|r| r.me).collect();
        for (i, id) in ids.into_iter().enumerate() {
            let should = schema::should_hold(&mut self.pg, id);
            let held = self.registers[i].held();
            assert_eq!(
                held,
                should,
                "seed {seed}, once calm: {id} holds other than it should \
                 (held but not owed: {:?}; owed but not held: {:?})",
                held.difference(&should).collect::<Vec<_>>(),
                should.difference(&held).collect::<Vec<_>>()
            );
            assert_eq!(
                self.registers[i].products(),
                servers_products,
                "seed {seed}, once calm: {id}'s products are not the server's"
            );
        }
    }

    /// Provisionings are rare: none that nothing explains, and for each
    /// cause no more than the times it was owed (one per register's
    /// first, per coming back live, per message lost, per file restored).
    fn check_provisionings(&self) {
        let seed = self.run.seed;
        assert_eq!(
            self.tally.provisionings_for(Cause::Unexplained),
            0,
            "seed {seed}: provisionings nothing explains\n{}",
            self.tally
        );
        for (cause, n) in &self.tally.provisionings {
            let owed = self.tally.owed_total.get(cause).copied().unwrap_or(0);
            assert!(
                *n <= owed,
                "seed {seed}: {n} provisionings for {cause}, owed {owed}\n{}",
                self.tally
            );
        }
    }

    pub fn elapsed(&self) -> Duration {
        self.began.elapsed()
    }
}

fn orders_declaration(broadcast: bool) -> String {
    let rule = if broadcast {
        "broadcast"
    } else {
        "assigned(register_id)"
    };
    format!("SELECT sync.declare_table('shop.orders', sync => '{rule}');")
}

fn worker_pid(pg: &mut Client) -> Option<i32> {
    pg.query_opt(
        "SELECT pid FROM pg_stat_activity WHERE backend_type = 'magic_sync relay' \
            AND datname = $1",
        &[&DATABASE],
    )
    .ok()
    .flatten()
    .map(|row| row.get(0))
}

//! The planner's property: a seeded random walk of writes over a schema
//! that uses every rule — broadcast, assigned, follows, grouped, and a table
//! with no rule that travels as a parent — with registers coming and going.
//! After every step's relay pass and deliveries, every register holds
//! exactly its reference set (a plain SQL query of what it should hold,
//! tests/src/walk.rs, which the storm shares), and none ever holds a row
//! without the rows it points at.

use std::collections::BTreeSet;

use magic_sync_replica::queue::{deliver, report};
use magic_sync_replica::Replica;
use magic_sync_tests::walk::{held, open_register, should_hold, step, Dice, SERVER};
use magic_sync_tests::Cluster;
use postgres::Client;
use uuid::Uuid;

/// What the server records a register holding, once it applied everything
/// it was sent.
fn recorded(pg: &mut Client, register: Uuid) -> BTreeSet<(String, String)> {
    pg.query(
        "SELECT table_name, key FROM sync.held WHERE replica = $1 AND leaving IS NULL",
        &[&register],
    )
    .unwrap()
    .iter()
    .map(|r| (r.get(0), r.get(1)))
    .collect()
}

/// The walk against the server alone: after each pass every register is
/// taken to have applied everything, and what the server records it
/// holding is held to the reference.
fn walk_recorded(seed: u64, steps: usize) {
    let cluster = Cluster::start();
    let mut pg = cluster.database_with_extension("walk");
    pg.batch_execute(SERVER).expect("the walk's schema");
    let ids: Vec<Uuid> = (0..3).map(|_| Uuid::new_v4()).collect();
    for id in &ids {
        pg.execute("INSERT INTO shop.registers (id) VALUES ($1)", &[id])
            .unwrap();
    }
    pg.batch_execute("INSERT INTO shop.lists VALUES (gen_random_uuid()), (gen_random_uuid())")
        .unwrap();
    let mut dice = Dice(seed);
    for n in 0..steps {
        let ts = std::time::Instant::now();
        for _ in 0..=dice.roll(3) {
            step(&mut pg, &mut dice);
        }
        if std::env::var_os("MAGIC_SYNC_WALK_TRACE").is_some() {
            eprintln!("   steps {:?}", ts.elapsed());
        }
        let t0 = std::time::Instant::now();
        let summary: serde_json::Value = pg.query_one("CALL sync.relay()", &[]).unwrap().get(0);
        if std::env::var_os("MAGIC_SYNC_WALK_TRACE").is_some() {
            eprintln!("-- step {n}: {summary} relay {:?}", t0.elapsed());
        }
        pg.batch_execute(
            "DELETE FROM sync.outbox; \
             UPDATE sync.replicas SET applied_sequence = last_sequence, applied_epoch = epoch; \
             DELETE FROM sync.held_recorded WHERE leaving IS NOT NULL",
        )
        .unwrap();
        for id in &ids {
            let live: bool = pg
                .query_one("SELECT active FROM shop.registers WHERE id = $1", &[id])
                .unwrap()
                .get(0);
            if live {
                let t1 = std::time::Instant::now();
                let want = should_hold(&mut pg, *id);
                if std::env::var_os("MAGIC_SYNC_WALK_TRACE").is_some() {
                    eprintln!("   reference {:?}", t1.elapsed());
                }
                assert_eq!(recorded(&mut pg, *id), want, "seed {seed}, step {n}: {id}");
            }
        }
    }
}

fn walk(seed: u64, steps: usize) {
    let cluster = Cluster::start();
    let mut pg = cluster.database_with_extension("walk");
    pg.batch_execute(SERVER).expect("the walk's schema");
    let dir = tempfile::tempdir().unwrap();
    let ids: Vec<Uuid> = (0..3).map(|_| Uuid::new_v4()).collect();
    for id in &ids {
        pg.execute("INSERT INTO shop.registers (id) VALUES ($1)", &[id])
            .unwrap();
    }
    pg.batch_execute("INSERT INTO shop.lists VALUES (gen_random_uuid()), (gen_random_uuid())")
        .unwrap();
    let mut registers: Vec<Replica> = ids
        .iter()
        .map(|id| open_register(dir.path(), *id))
        .collect();
    let mut dice = Dice(seed);
    for n in 0..steps {
        for _ in 0..=dice.roll(3) {
            step(&mut pg, &mut dice);
        }
        let summary: serde_json::Value = pg.query_one("CALL sync.relay()", &[]).unwrap().get(0);
        if std::env::var_os("MAGIC_SYNC_WALK_TRACE").is_some() {
            eprintln!("-- step {n}: {summary}");
        }
        for register in registers.iter_mut() {
            deliver(&mut pg, register).unwrap();
            report(&mut pg, register).unwrap();
            let broken: i64 = register
                .connection()
                .query_row("SELECT count(*) FROM pragma_foreign_key_check", [], |r| {
                    r.get(0)
                })
                .unwrap();
            assert_eq!(
                broken,
                0,
                "step {n}: {} holds a row without its parent",
                register.me()
            );
        }
        for register in &registers {
            let live: bool = pg
                .query_one(
                    "SELECT active FROM shop.registers WHERE id = $1",
                    &[&register.me()],
                )
                .unwrap()
                .get(0);
            if !live {
                continue; // forgotten: it keeps what it had until it is back
            }
            let expected = should_hold(&mut pg, register.me());
            assert_eq!(
                held(register),
                expected,
                "seed {seed}, step {n}: register {}",
                register.me()
            );
        }
    }
}

#[test]
fn the_server_records_every_register_holding_exactly_its_reference_set() {
    for seed in 1..=6 {
        walk_recorded(0x2545_f491_4f6c_dd1d ^ seed, 60);
    }
}

#[test]
fn every_register_holds_exactly_its_reference_set_along_a_random_walk() {
    for seed in [1, 2, 3] {
        walk(0x9e37_79b9_7f4a_7c15 ^ seed, 40);
    }
}

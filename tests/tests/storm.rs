//! The storm (the book's "How it is tested", third bullet; tests/src/storm/):
//! the planner's walk of server writes through the real relay worker and
//! the queue, registers on SQLite files, while faults are injected —
//! messages lost, applied twice, taken in part, a device that dies before
//! acknowledging, is busy, or is not heard for a while, a row the
//! registers refuse until a deploy, a relay pass's backend terminated, the
//! worker killed, PostgreSQL stopped immediately, a register's file put
//! back to an older copy, a deploy that changes a declaration (a rule
//! turned, a column added or dropped) — and devices write receipts and
//! their battery throughout. Each time the system settles, every register holds exactly
//! what the server records for it; once calm and deployed, exactly what it
//! should, every receipt filed once, and every provisioning explained.
//!
//! CI runs two seeds of 150 rounds. `MAGIC_SYNC_STORM_SEED` runs one seed
//! of its own, and `MAGIC_SYNC_STORM_SECONDS` goes on for that long (each
//! seed); `MAGIC_SYNC_STORM_TRACE` prints the steps as they go. A failure
//! prints its seed and every step that led to it.

use magic_sync_tests::storm::{Run, Storm};

fn env(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

fn seeds() -> Vec<u64> {
    match env("MAGIC_SYNC_STORM_SEED") {
        Some(seed) => vec![seed],
        None => vec![0x5702_a11e, 0x0dd_ba11],
    }
}

#[test]
fn every_register_converges_through_a_storm_of_faults_and_provisionings_stay_rare() {
    for seed in seeds() {
        let mut storm = Storm::start(Run {
            seed,
            rounds: 150,
            seconds: env("MAGIC_SYNC_STORM_SECONDS"),
            registers: 3,
            settle_every: 10,
            dump: Some((50, 75)),
        });
        storm.rage();
        println!(
            "storm seed {seed}: {} rounds, {} settlings, {} new epoch(s) after the dump's restore, {:.1} s\n{}",
            storm.rounds,
            storm.settlings,
            storm.new_epochs,
            storm.elapsed().as_secs_f64(),
            storm.tally
        );
    }
}

//! The engine's advisory locks, each its own key, so that no two of them
//! are ever one lock by mistake. 'magic_sync' read as a number, then one
//! more for each.

/// One relay pass at a time, whoever runs it: taken by
/// `sync_internal.claim_relay()` in sql/relay.sql, which spells the number
/// (a test holds the two to each other); here so no other lock takes it.
#[allow(dead_code)]
pub const RELAY: i64 = 7_809_643_163_296_757_358;

/// The filing gate: the worker holds it while its pass runs, filing takes
/// it shared (relay/gate.rs).
pub const GATE: i64 = 7_809_643_163_296_757_359;

/// One change of epoch at a time (file/went_back.rs).
pub const EPOCH: i64 = 7_809_643_163_296_757_360;

/// One fold (or recount) of sync.held's counts at a time: taken in
/// sql/held_counts.sql, which spells the number.
#[allow(dead_code)]
pub const COUNTS: i64 = 7_809_643_163_296_757_361;

#[cfg(test)]
mod tests {
    #[test]
    fn the_relays_lock_is_the_one_sql_relay_takes() {
        let sql = include_str!("../../sql/relay.sql");
        assert!(sql.contains(&format!("pg_advisory_xact_lock({})", super::RELAY)));
    }

    #[test]
    fn the_counts_lock_is_the_one_sql_held_counts_takes() {
        let sql = include_str!("../../sql/held_counts.sql");
        assert!(sql.contains(&format!("pg_try_advisory_xact_lock({})", super::COUNTS)));
        assert!(sql.contains(&format!("pg_advisory_xact_lock({})", super::COUNTS)));
    }

    #[test]
    fn every_lock_has_a_key_of_its_own() {
        let keys = [super::RELAY, super::GATE, super::EPOCH, super::COUNTS];
        for (i, a) in keys.iter().enumerate() {
            assert!(keys[i + 1..].iter().all(|b| a != b));
        }
    }
}

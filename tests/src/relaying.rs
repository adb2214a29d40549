//! Relay passes, as the benchmarks run them.

use postgres::Client;

/// One pass (`CALL sync.relay()`): its summary.
pub fn relay(pg: &mut Client) -> serde_json::Value {
    pg.query_one("CALL sync.relay()", &[]).unwrap().get(0)
}

/// Relays until a pass finds no note left to plan.
pub fn drain(pg: &mut Client) {
    while relay(pg)["notes"] != 0 {}
}

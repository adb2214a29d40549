//! Where the server's record of one replica stands, as filing reads it:
//! its chain of messages, what it last said it applied, and the times that
//! pace what it may ask for itself. Read once per Up, locking the replica's
//! row so two Ups of one replica are judged one after the other, and so a
//! caller's REPEATABLE READ snapshot older than a relay pass that wrote to
//! it fails to serialize (and the Up comes again) rather than being judged
//! against a chain that has moved on.

use serde_json::Value;
use uuid::Uuid;

use crate::error::Error;
use crate::spi::{self, to_pg};
use crate::statements::file::standing::{NUMBERS_DRAWN, READ};

/// The replica's row of `sync.replicas`, with times as seconds since the
/// epoch of Unix and `now` the transaction's time.
#[derive(Clone, Debug, Default, PartialEq, serde::Deserialize)]
pub struct Standing {
    pub live: bool,
    /// A provisioning is pending: the next pass sends a snapshot.
    pub provision: bool,
    /// The epoch its chain is numbered in, and the last message written.
    pub epoch: Option<Uuid>,
    pub last_sequence: i64,
    pub last_nonce: i64,
    /// The sequence the last snapshot written for it began at.
    pub snapshot_sequence: Option<i64>,
    /// The last message it said it applied, under a seal the server made.
    pub applied_epoch: Option<Uuid>,
    pub applied_sequence: i64,
    pub applied_nonce: i64,
    /// Its provisioning was noted for later (what it says of itself).
    pub provision_at: Option<f64>,
    pub said_times: i32,
    pub said_at: Option<f64>,
    pub said_provisioned_at: Option<f64>,
    pub digests_at: Option<f64>,
    pub digests_provisioned_at: Option<f64>,
    pub now: f64,
}

impl Standing {
    /// The replica's standing, or None when the relay has not seen it yet.
    pub fn read(replica: Uuid) -> Option<Standing> {
        let json: pgrx::JsonB = spi::one(READ, &[to_pg(replica).into()])?;
        Some(Standing::from_json(json.0).unwrap_or_else(|e| e.raise()))
    }

    /// The replica's row as READ answers it: a column missing or of another
    /// type is an engine fault.
    pub fn from_json(v: Value) -> Result<Standing, Error> {
        serde_json::from_value(v).map_err(|e| {
            Error::engine(
                format!("magic_sync: a row of sync.replicas does not read back: {e}"),
                READ,
            )
        })
    }

    /// The last message it applied, as the server last heard it, in the
    /// epoch of its chain: what a delete it sends is judged against when
    /// the Up says nothing of where it stands.
    pub fn applied_in_chain(&self) -> Option<i64> {
        (self.epoch.is_some() && self.applied_epoch == self.epoch).then_some(self.applied_sequence)
    }

    /// A snapshot written for it after `sequence` has not been applied yet
    /// (or one is about to be written): it sets the replica straight.
    pub fn snapshot_on_its_way_after(&self, sequence: i64) -> bool {
        self.provision || self.snapshot_sequence.is_some_and(|began| began > sequence)
    }
}

/// The largest message number drawn so far (0 for none).
pub fn numbers_drawn() -> i64 {
    spi::one_fixed::<i64>(NUMBERS_DRAWN).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_standing_reads_back_from_its_json() {
        let s = Standing::from_json(json!({
            "live": true, "provision": false,
            "epoch": "00000000-0000-0000-0000-0000000000e1",
            "last_sequence": 12, "last_nonce": 99, "snapshot_sequence": 7,
            "applied_epoch": "00000000-0000-0000-0000-0000000000e1",
            "applied_sequence": 10, "applied_nonce": 5,
            "said_times": 2, "said_at": 1700000000.5, "now": 1700000100.0,
            "provision_at": null, "digests_at": null
        }))
        .unwrap();
        assert_eq!(s.applied_in_chain(), Some(10));
        assert_eq!(s.said_at, Some(1_700_000_000.5));
        assert!(s.snapshot_on_its_way_after(6));
        assert!(!s.snapshot_on_its_way_after(7));
    }

    #[test]
    fn a_row_missing_what_is_never_null_is_an_engine_fault_not_a_default() {
        let read = Standing::from_json(json!({"live": true, "provision": false, "now": 1.0}));
        assert!(matches!(read, Err(Error::Engine { .. })));
    }

    #[test]
    fn what_it_applied_in_another_epoch_is_not_its_chains() {
        let s = Standing {
            epoch: Some(Uuid::from_u128(2)),
            applied_epoch: Some(Uuid::from_u128(1)),
            applied_sequence: 4,
            ..Standing::default()
        };
        assert_eq!(s.applied_in_chain(), None);
    }
}

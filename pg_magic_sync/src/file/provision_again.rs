//! Provisioning a replica again for what it says of itself (protocol A.2):
//! a gap, a message older than the last it applied, an epoch this database
//! never had. None of these carries a seal the server can check, so a
//! replica that keeps saying one is not provisioned on every Up: at most
//! once a minute, then twice as long between each time while it keeps
//! saying so, up to 32 minutes; one quiet for 64 minutes starts over. One
//! that says it sooner is noted for then (`provision_at`), and the relay
//! provisions it once that time has come (`sync_internal.provision_due()`).
//! A replica that is not live is not marked: it is provisioned once it is
//! live again, as every replica that becomes live is.

use uuid::Uuid;

use crate::file::standing::Standing;
use crate::spi::{self, to_pg};

const MINUTE: f64 = 60.0;
/// The longest wait between two provisionings of one replica.
const LONGEST: f64 = 32.0 * MINUTE;
/// A replica quiet this long starts over.
const QUIET: f64 = 64.0 * MINUTE;

/// When a replica that says it needs provisioning again gets it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Paced {
    /// Now: its `times`-th provisioning in a row.
    Now { times: i32 },
    /// Not before `at` (seconds since the Unix epoch).
    Later { at: f64, times: i32 },
}

/// How long a replica provisioned `times` times in a row waits before the
/// next: none before the first, then a minute, doubling, up to 32.
pub fn wait_after(times: i32) -> f64 {
    if times <= 0 {
        0.0
    } else {
        (MINUTE * 2f64.powi(times - 1)).min(LONGEST)
    }
}

/// When the replica is provisioned again, from what the server last noted.
pub fn pace(s: &Standing) -> Paced {
    let quiet = s.said_at.is_none_or(|at| s.now - at >= QUIET);
    let times = if quiet { 0 } else { s.said_times };
    let since = s.said_provisioned_at.unwrap_or(f64::NEG_INFINITY);
    let due = since + wait_after(times);
    if times == 0 || s.now >= due {
        Paced::Now { times: times + 1 }
    } else {
        Paced::Later { at: due, times }
    }
}

/// Provisions the replica again, or notes it for when it may be; answers
/// which, for the verdict.
pub fn provision_again(replica: Uuid, s: &Standing) -> &'static str {
    if s.provision {
        return "already being provisioned";
    }
    // Only a live replica is provisioned: one marked while not live would
    // keep its uploads waiting for a snapshot that cannot come, and the
    // relay passing for them. It is provisioned anyway once live again.
    if !s.live {
        return "not live: provisioned once it is live again";
    }
    match pace(s) {
        Paced::Now { times } => {
            spi::run_with(
                "UPDATE sync.replicas SET provision = true, provision_at = NULL, said_times = $2, \
                 said_at = now(), said_provisioned_at = now() WHERE id = $1",
                &[to_pg(replica).into(), times.into()],
            );
            "provisioned again"
        }
        Paced::Later { at, times } => {
            spi::run_with(
                "UPDATE sync.replicas SET provision_at = to_timestamp($2), said_times = $3, \
                 said_at = now() WHERE id = $1",
                &[to_pg(replica).into(), at.into(), times.into()],
            );
            "provisioned again once it may"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn standing(
        now: f64,
        times: i32,
        said_at: Option<f64>,
        provisioned_at: Option<f64>,
    ) -> Standing {
        Standing {
            now,
            said_times: times,
            said_at,
            said_provisioned_at: provisioned_at,
            ..Standing::default()
        }
    }

    #[test]
    fn the_first_time_a_replica_says_so_it_is_provisioned_at_once() {
        assert_eq!(
            pace(&standing(1000.0, 0, None, None)),
            Paced::Now { times: 1 }
        );
    }

    #[test]
    fn saying_it_again_within_a_minute_is_noted_for_then() {
        let s = standing(1030.0, 1, Some(1000.0), Some(1000.0));
        assert_eq!(
            pace(&s),
            Paced::Later {
                at: 1060.0,
                times: 1
            }
        );
        let s = standing(1061.0, 1, Some(1030.0), Some(1000.0));
        assert_eq!(pace(&s), Paced::Now { times: 2 });
    }

    #[test]
    fn the_wait_doubles_up_to_32_minutes() {
        let waits: Vec<f64> = (0..9).map(wait_after).collect();
        assert_eq!(
            waits,
            vec![0.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 1920.0, 1920.0]
        );
        let s = standing(10_000.0, 8, Some(9_990.0), Some(9_000.0));
        assert_eq!(
            pace(&s),
            Paced::Later {
                at: 9_000.0 + 1920.0,
                times: 8
            }
        );
    }

    #[test]
    fn sixty_four_quiet_minutes_start_over() {
        let s = standing(10_000.0 + 64.0 * 60.0, 6, Some(10_000.0), Some(10_000.0));
        assert_eq!(pace(&s), Paced::Now { times: 1 });
        let s = standing(10_000.0 + 63.0 * 60.0, 6, Some(10_000.0), Some(10_000.0));
        assert_eq!(pace(&s), Paced::Now { times: 7 }, "32 minutes have passed");
    }
}

//! A step of a pass: replicas whose plans are the same form a cohort (every
//! replica, for a change to a broadcast table), so the cohort's rows are
//! packed once into bodies stored once (relay/record.rs).

use crate::spi;
use crate::statements::relay::cohorts::COHORTS;

/// Groups the replicas of this pass by their plans. Answers how many
/// cohorts there are.
pub fn form() -> i64 {
    // The count of the last statement: the representatives, one a cohort.
    spi::run_counting(COHORTS, &[]) as i64
}

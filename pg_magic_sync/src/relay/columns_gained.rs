//! A step of a pass, as it observes: the replicas whose build gained a
//! column the server sends of a table they hold (file/columns.rs noted
//! each in `sync.columns_gained`) are sent the rows of that table they
//! hold again, once, and nothing else (docs/src/protocol.md, "A column
//! added").
//!
//! Their rows of it are touched for them alone, and the planner sends them
//! the rows they keep whatever version they hold (`sync_pass_resent` for
//! that replica, as for every replica when a declaration changed a table's
//! columns: relay/redeclared.rs). A follower
//! of a stand-in parts first, for a journaled table: its rows of it become
//! its own, so they go to it alone, not to every follower. A replica
//! provisioned, or no longer live, needs nothing more; a table stopped by
//! drift waits for the fix.

use crate::relay::journal::Journaled;
use crate::spi;
use crate::statements::relay::columns_gained::{
    ANY_GAINED, FORGET_PROVISIONED, PART_FOLLOWERS_GAINING, SEND_AGAIN,
};

/// Touches what the replicas whose columns grew are sent again; answers
/// how many rows.
pub fn send_again(journaled: &Journaled, stopped: &[String]) -> i64 {
    if !spi::one::<bool>(ANY_GAINED, &[]).unwrap_or(false) {
        return 0;
    }
    spi::run(FORGET_PROVISIONED);
    spi::run_with(
        PART_FOLLOWERS_GAINING,
        &[journaled.names().into(), stopped.to_vec().into()],
    );
    let rows = spi::one::<i64>(SEND_AGAIN, &[stopped.to_vec().into()]).unwrap_or(0);
    if rows > 0 {
        pgrx::log!("magic_sync: {rows} rows held are sent again to the replicas whose build gained a column the server sends");
    }
    rows
}

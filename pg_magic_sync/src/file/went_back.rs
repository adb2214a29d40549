//! The server's database went back (protocol A.2): a replica said it
//! applied a message the server sealed and has no record of sending — past
//! the last it recorded sending it, or at a sequence it sent or heard
//! applied with another nonce. The database was restored from a copy older
//! than what the replica applied, and numbers messages again from where the
//! copy left off.
//!
//! Whoever runs the server must hear of it (an alarm: a warning in the log
//! and a row of `sync.alarms`). The server takes a new epoch with a new
//! secret, so nothing it sealed before can be mistaken for what it sends
//! now; drops what it was about to send (the messages waiting in the outbox,
//! but the answers to uploads); and provisions every replica again. The
//! relay then numbers every chain in the new epoch, each beginning with a
//! snapshot.

use uuid::Uuid;

use crate::epochs;
use crate::locks::EPOCH;
use crate::spi::{self, to_pg};

/// Acts on the news, unless another Up acted on it since `seen` was read as
/// the current epoch. Answers the new epoch, when this call took it.
pub fn take_a_new_epoch(replica: Uuid, seen: Option<Uuid>, what: &str) -> Option<Uuid> {
    // One epoch change at a time: a second replica telling the same news
    // while the first is being acted on finds the epoch changed already.
    spi::run_with("SELECT pg_advisory_xact_lock($1)", &[EPOCH.into()]);
    if epochs::current_id() != seen {
        return None;
    }
    let epoch = Uuid::new_v4();
    let alarm = format!(
        "magic_sync: the database went back (restored from an older copy?): {what}; \
         every replica is provisioned again under a new epoch {epoch}"
    );
    pgrx::warning!("{alarm}");
    spi::run_with(
        "INSERT INTO sync.alarms (replica, what) VALUES ($1, $2)",
        &[to_pg(replica).into(), alarm.as_str().into()],
    );
    epochs::begin(epoch);
    // What waits was numbered and sealed in the old epoch: the snapshots
    // carry it. The answers to uploads are no message of a chain: they go.
    spi::run("DELETE FROM sync.outbox WHERE kind <> 'filed'");
    spi::run("UPDATE sync.replicas SET provision = true, provision_at = NULL WHERE live");
    Some(epoch)
}

//! What a replica sends up: `sync.receive(replica, bytes)`, filed under the
//! replica the caller names (the transport's word), never what the message
//! itself claims.
//!
//! This version takes what the replica says it applied, and its gap. The
//! server counts a row as held only once the replica said it applied the
//! message that carried it, under a seal the server made.

use pgrx::prelude::*;
use prost::Message;
use serde_json::{json, Value};
use uuid::Uuid;

use magic_sync_proto::wire::Up;
use magic_sync_proto::PROTOCOL;

use crate::db::{self, from_pg, refuse, to_pg};
use crate::seal::{self, Sealed};

/// Where the server's record of a replica stands.
struct Known {
    live: bool,
    epoch: Option<Uuid>,
    last_sequence: i64,
    applied_sequence: i64,
    snapshot_sequence: Option<i64>,
}

fn known(replica: Uuid) -> Option<Known> {
    Spi::connect(|client| {
        let mut rows = client
            .select(
                "SELECT live, epoch, last_sequence, applied_sequence, snapshot_sequence \
                 FROM sync.replicas WHERE id = $1",
                Some(1),
                &[to_pg(replica).into()],
            )
            .expect("reads sync.replicas");
        rows.next().map(|row| Known {
            live: row.get(1).ok().flatten().unwrap_or(false),
            epoch: row.get::<pgrx::Uuid>(2).ok().flatten().map(from_pg),
            last_sequence: row.get(3).ok().flatten().unwrap_or(0),
            applied_sequence: row.get(4).ok().flatten().unwrap_or(0),
            snapshot_sequence: row.get(5).ok().flatten(),
        })
    })
}

fn epoch_secret(epoch: Uuid) -> Option<Vec<u8>> {
    db::one(
        "SELECT secret FROM sync.epochs WHERE id = $1",
        &[to_pg(epoch).into()],
    )
}

/// `sync.receive(replica, bytes)`: takes an `Up` from the replica the
/// transport names, and answers what the server made of it.
#[pg_extern(volatile)]
fn receive(replica: pgrx::Uuid, bytes: &[u8]) -> pgrx::JsonB {
    let replica = from_pg(replica);
    let up = Up::decode(bytes).unwrap_or_else(|e| {
        refuse(
            format!("magic_sync: the bytes from {replica} are not an Up message: {e}"),
            "sync.receive takes the bytes of an Up, as the replica library builds them.",
        )
    });
    pgrx::JsonB(file_up(replica, &up))
}

fn file_up(replica: Uuid, up: &Up) -> Value {
    if up.protocol == 0 {
        pgrx::log!("magic_sync: an Up of protocol 0 from {replica}, dropped as malformed");
        return json!({ "verdict": "malformed", "why": "no protocol" });
    }
    if up.protocol > PROTOCOL {
        refuse(
            format!(
                "magic_sync: {replica} speaks protocol {}, and this server {PROTOCOL}",
                up.protocol
            ),
            "The replica sends it again; it is filed once the server is upgraded.",
        );
    }
    let Some(known) = known(replica).filter(|k| k.live) else {
        pgrx::log!("magic_sync: an Up from {replica}, which is no live replica, dropped");
        return json!({ "verdict": "unknown sender" });
    };
    if !up.tables.is_empty() {
        refuse(
            format!("magic_sync: {replica} uploads rows, and this version files none yet"),
            "The replica keeps its rows and sends them again; they are filed once the server is upgraded.",
        );
    }
    json!({
        "applied": take_applied(replica, &known, up),
        "gap": take_gap(replica, &known, up.gap),
    })
}

/// What the replica says it applied: counted once the seal checks.
fn take_applied(replica: Uuid, known: &Known, up: &Up) -> Value {
    if up.sequence == 0 {
        return json!("nothing yet");
    }
    let Ok(epoch) = Uuid::try_parse(&up.epoch) else {
        return json!("not an epoch");
    };
    let sealed = Sealed {
        replica,
        epoch,
        sequence: up.sequence,
        nonce: up.nonce,
    };
    let Some(secret) = epoch_secret(epoch) else {
        return json!("another epoch");
    };
    if !seal::is_sealed(&secret, &sealed, &up.mac) {
        return json!("a seal the server never made");
    }
    let sequence = up.sequence as i64;
    if known.epoch != Some(epoch) {
        return json!("another epoch");
    }
    if sequence > known.last_sequence {
        return json!("past anything sent");
    }
    if sequence <= known.applied_sequence {
        return json!("already counted");
    }
    db::run_with(
        "UPDATE sync.replicas SET applied_epoch = $2, applied_sequence = $3, applied_nonce = $4, \
         applied_at = now(), heard_at = now() WHERE id = $1",
        &[
            to_pg(replica).into(),
            to_pg(epoch).into(),
            sequence.into(),
            (up.nonce as i64).into(),
        ],
    );
    // What the replica let go of is gone from its record once it applied it.
    db::run_with(
        "DELETE FROM sync.held WHERE replica = $1 AND leaving IS NOT NULL AND leaving <= $2",
        &[to_pg(replica).into(), sequence.into()],
    );
    json!("counted")
}

/// A replica that missed a message is provisioned again, unless a snapshot
/// that began after the message it could not follow is on its way.
fn take_gap(replica: Uuid, known: &Known, gap: u64) -> Value {
    if gap == 0 {
        return json!("none");
    }
    let gap = gap as i64;
    if gap > known.last_sequence {
        return json!("past anything sent");
    }
    if known.snapshot_sequence.is_some_and(|began| began > gap) {
        return json!("a snapshot is on its way");
    }
    db::run_with(
        "UPDATE sync.replicas SET provision = true, gap = $2, heard_at = now() WHERE id = $1",
        &[to_pg(replica).into(), gap.into()],
    );
    json!("provisioned again")
}

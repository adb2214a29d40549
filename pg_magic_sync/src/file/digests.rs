//! What a replica says it holds (protocol A.5, section 8): per table, a
//! count and an FNV-1a fingerprint of its sorted key lines.
//!
//! The server compares them only when the replica has applied every
//! message recorded for it (the Up says the chain's epoch and its last
//! sequence and nonce, sealed), against what it recorded as of that
//! message: the rows held, leaving out those the replica refused. A
//! setting's are compared against the rows of it the server keeps of that
//! replica (key, a tab, the version), unless the inbox keeps rows of that
//! table the replica uploaded; so are those of `sync_wishes`, against the
//! answers it keeps of the wishes it records the replica holding. A digest of a table the server neither sends
//! nor holds as a setting is skipped; two digests of one table are
//! malformed, and none of that Up's is compared. At most one comparison per
//! replica every ten minutes. A mismatch provisions the replica again; one
//! again within a day of that is a bug no provisioning cures: logged (an
//! alarm), not acted on.

use std::collections::BTreeSet;

use magic_sync_proto::digest::Fingerprint;
use magic_sync_proto::wire::{Digest, Up};
use serde_json::{json, Value};
use uuid::Uuid;

use crate::catalog::table_sql::{key_of, quote_ident, quote_literal};
use crate::catalog::wishes::WISHES;
use crate::catalog::{Declared, Mirror};
use crate::file::applied::Judged;
use crate::message::row::Travel;
use crate::spi::{self, to_pg};

const TEN_MINUTES: f64 = 600.0;
const A_DAY: f64 = 86_400.0;

/// Whether the replica was passed over far behind (relay/plan/behind.rs):
/// it owes rows, or was not sent its stand-in's messages.
const PASSED_OVER: &str = "SELECT EXISTS (SELECT 1 FROM sync.owed WHERE replica = $1) \
     OR EXISTS (SELECT 1 FROM sync.followers WHERE replica = $1 AND behind_since IS NOT NULL)";

/// Whether the replica has applied every message recorded for it, as the
/// Up says it: the chain's epoch, its last sequence and nonce, sealed (the
/// judgement of what it applied counted it, or had before).
pub fn caught_up(s: &crate::file::standing::Standing, judged: Judged, up: &Up) -> bool {
    matches!(judged, Judged::Counted | Judged::Already)
        && !s.provision
        && s.epoch.is_some()
        && Uuid::try_parse(&up.epoch).ok() == s.epoch
        && up.sequence as i64 == s.last_sequence
        && up.nonce as i64 == s.last_nonce
}

/// A table's digest as the server records it: how many rows, and their
/// fingerprint.
struct Recorded {
    count: u64,
    fingerprint: u64,
}

fn fingerprint_of(sql: &str) -> Recorded {
    let mut f = Fingerprint::new();
    let mut count = 0u64;
    spi::for_each_chunk(
        sql,
        10_000,
        |row| spi::column::<String>(row, 1, "a digest's key line"),
        |lines| {
            for line in lines {
                f.add_line(&line);
                count += 1;
            }
        },
    );
    Recorded {
        count,
        fingerprint: f.value(),
    }
}

/// The rows held of a table the server sends, leaving out those refused.
fn held_lines(replica: Uuid, table: &Declared) -> String {
    format!(
        "SELECT key FROM sync.held WHERE replica = {r}::uuid AND table_name = {t} \
         AND refused IS NULL AND leaving IS NULL ORDER BY key",
        r = quote_literal(&replica.to_string()),
        t = quote_literal(&table.name),
    )
}

/// A setting's rows of this replica, as lines: key, a tab, the version.
fn setting_lines(replica: Uuid, table: &Declared) -> String {
    let version = match (
        &table.version,
        table.version.as_ref().and_then(|v| {
            table
                .columns
                .iter()
                .position(|c| c == v)
                .map(|i| table.column_types[i].as_str())
        }),
    ) {
        (Some(v), Some("timestamp with time zone")) => format!(
            "coalesce(to_char(t.{} AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'), '')",
            quote_ident(v)
        ),
        (Some(v), _) => format!("coalesce((t.{})::text, '')", quote_ident(v)),
        (None, _) => "''".to_owned(),
    };
    format!(
        "SELECT line FROM (SELECT {key} || E'\\t' || {version} AS line FROM {rel} AS t \
         WHERE t.{origin} = {r}::uuid) AS l ORDER BY line COLLATE \"C\"",
        key = key_of(table, "t"),
        rel = table.relation,
        origin = quote_ident(table.origin.as_deref().unwrap_or_default()),
        r = quote_literal(&replica.to_string()),
    )
}

/// The wishes held of this replica, as lines: the wish's id, a tab, the
/// version of the answer the server keeps, a tab, its outcome (both empty
/// while none is kept), as `wish_line` writes them (proto/src/digest.rs).
fn wish_lines(replica: Uuid) -> String {
    format!(
        "SELECT line FROM (SELECT h.key || E'\\t' || coalesce(w.answered::text, '') || E'\\t' \
                || coalesce(w.outcome, '') AS line \
         FROM sync.held h LEFT JOIN sync.sync_wishes w ON w.id = h.key::uuid \
         WHERE h.replica = {r}::uuid AND h.table_name = {t} \
           AND h.refused IS NULL AND h.leaving IS NULL) AS l ORDER BY line COLLATE \"C\"",
        r = quote_literal(&replica.to_string()),
        t = quote_literal(WISHES),
    )
}

fn inbox_keeps(replica: Uuid, table: &str) -> bool {
    spi::one::<bool>(
        "SELECT EXISTS (SELECT 1 FROM sync.inbox WHERE replica = $1 AND table_name = $2)",
        &[to_pg(replica).into(), table.into()],
    )
    .unwrap_or(false)
}

/// Compares one digest: whether it matches, or why it is skipped.
fn compare(replica: Uuid, digest: &Digest, tables: &[Declared]) -> Result<bool, &'static str> {
    let Some(table) = tables.iter().find(|t| t.name == digest.table) else {
        return Err("skipped: a table the server does not know");
    };
    let recorded = match table.mirror {
        // The answers it keeps, as the replica's settings are compared.
        Mirror::Both
            if Travel::of(table) == Travel::AsWish && inbox_keeps(replica, &table.name) =>
        {
            return Err("skipped: rows of it wait in the inbox");
        }
        Mirror::Both if Travel::of(table) == Travel::AsWish => fingerprint_of(&wish_lines(replica)),
        Mirror::Catalog | Mirror::Both => fingerprint_of(&held_lines(replica, table)),
        Mirror::Setting if inbox_keeps(replica, &table.name) => {
            return Err("skipped: rows of it wait in the inbox");
        }
        Mirror::Setting => fingerprint_of(&setting_lines(replica, table)),
        Mirror::Record => return Err("skipped: the replica's records"),
    };
    Ok(recorded.count == digest.count && recorded.fingerprint == digest.fingerprint)
}

/// Takes the digests an Up carries; answers the verdict.
pub fn take(
    replica: Uuid,
    s: &crate::file::standing::Standing,
    caught_up: bool,
    digests: &[Digest],
    tables: &[Declared],
) -> Value {
    let mut seen = BTreeSet::new();
    if digests.iter().any(|d| !seen.insert(d.table.as_str())) {
        return json!("malformed: two digests of one table; none compared");
    }
    if !caught_up {
        return json!("not compared: the replica has not applied everything recorded for it");
    }
    // One passed over far behind has applied all it was sent, yet not what
    // the server records for it: a follower's record is its stand-in's,
    // which it was not sent the messages of (relay/plan/behind.rs).
    if spi::one::<bool>(PASSED_OVER, &[to_pg(replica).into()]).unwrap_or(false) {
        return json!("not compared: it was far behind, and is sent what it missed next");
    }
    if s.digests_at.is_some_and(|at| s.now - at < TEN_MINUTES) {
        return json!("not compared: compared less than ten minutes ago");
    }
    spi::run_with(
        "UPDATE sync.replicas SET digests_at = now() WHERE id = $1",
        &[to_pg(replica).into()],
    );
    let mut tables_verdict = serde_json::Map::new();
    let mut differ = Vec::new();
    for digest in digests {
        let verdict = match compare(replica, digest, tables) {
            Ok(true) => "matches",
            Ok(false) => {
                differ.push(digest.table.clone());
                "differs"
            }
            Err(why) => why,
        };
        tables_verdict.insert(digest.table.clone(), json!(verdict));
    }
    let mut verdict = json!({ "tables": tables_verdict });
    if !differ.is_empty() {
        verdict["then"] = json!(act_on_difference(replica, s, &differ));
    }
    verdict
}

/// A replica whose digests differ is provisioned again — unless they differ
/// again within a day of the provisioning they caused: a bug no
/// provisioning cures, logged and not acted on.
fn act_on_difference(
    replica: Uuid,
    s: &crate::file::standing::Standing,
    tables: &[String],
) -> &'static str {
    if s.digests_provisioned_at
        .is_some_and(|at| s.now - at < A_DAY)
    {
        let what = format!(
            "magic_sync: the digests of {replica} differ again within a day of the provisioning they caused ({}): \
             a bug no provisioning cures; not acted on",
            tables.join(", ")
        );
        pgrx::warning!("{what}");
        spi::run_with(
            "INSERT INTO sync.alarms (replica, what) VALUES ($1, $2)",
            &[to_pg(replica).into(), what.as_str().into()],
        );
        return "differ again within a day: logged, not acted on";
    }
    spi::run_with(
        "UPDATE sync.replicas SET provision = true, digests_provisioned_at = now() WHERE id = $1",
        &[to_pg(replica).into()],
    );
    "provisioned again"
}

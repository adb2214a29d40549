//! A step of a pass, the first: what became of the replicas since the last one.
//!
//! A replica that became live is provisioned from scratch; one that stopped
//! being live, or is gone, is forgotten: nothing recorded as held by it and
//! nothing waiting for it.

use crate::catalog::table_sql::quote_ident;
use crate::catalog::Replicas;
use crate::spi;

/// How many replicas came and went.
#[derive(Debug, Default)]
pub struct Observed {
    pub became_live: i64,
    pub forgotten: i64,
}

/// A replica that became live, or moved to another partition, is
/// provisioned from scratch.
const BECOME_LIVE: &str = "\
    WITH back AS ( \
        INSERT INTO sync.replicas AS s (id, live, provision, partition) \
        SELECT id, true, true, partition FROM sync_pass_live \
        ON CONFLICT (id) DO UPDATE SET live = true, provision = true, \
            partition = excluded.partition, seen_at = now() \
        WHERE NOT s.live OR s.partition IS DISTINCT FROM excluded.partition RETURNING 1) \
    SELECT count(*) FROM back";

const FORGET: &str = "\
    WITH gone AS ( \
        UPDATE sync.replicas s SET live = false, provision = false, epoch = NULL, \
            last_sequence = 0, last_nonce = 0, snapshot_id = NULL, snapshot_sequence = NULL \
        WHERE s.live AND NOT EXISTS (SELECT 1 FROM sync_pass_live l WHERE l.id = s.id) \
        RETURNING s.id), \
    unheld AS (DELETE FROM sync.held_recorded h USING gone WHERE h.replica = gone.id), \
    unfollowed AS (DELETE FROM sync.followers f USING gone WHERE f.replica = gone.id), \
    unmapped AS (DELETE FROM sync.follower_messages m USING gone WHERE m.replica = gone.id), \
    unsent AS (DELETE FROM sync.outbox o USING gone WHERE o.replica = gone.id) \
    SELECT count(*) FROM gone";

/// What a replica being provisioned was owed before is dropped: the
/// snapshot carries it.
const DROP_SUPERSEDED: &str = "\
    DELETE FROM sync.outbox o USING sync.replicas s \
    WHERE s.live AND s.provision AND o.replica = s.id AND o.kind <> 'filed'";

/// The live replicas and their partitions, into `sync_pass_live`: none
/// until they are declared.
fn live_replicas_sql(source: Option<&Replicas>) -> Option<String> {
    source.map(|source| {
        format!(
            "INSERT INTO sync_pass_live (id, partition) \
             SELECT DISTINCT ON (id) (r.{id})::uuid AS id, {partition} AS partition \
             FROM {rel} AS r WHERE ({live}) AND r.{id} IS NOT NULL",
            id = quote_ident(&source.id_column),
            partition = source
                .partition
                .as_ref()
                .map_or("NULL::text".to_owned(), |p| format!(
                    "(r.{})::text",
                    quote_ident(p)
                )),
            rel = source.relation,
            live = source.live,
        )
    })
}

/// Compares the live replicas with what the last pass saw.
pub fn observe_replicas(replicas: Option<&Replicas>) -> Observed {
    if let Some(sql) = live_replicas_sql(replicas) {
        spi::run(&sql);
    }
    let became_live = spi::one::<i64>(BECOME_LIVE, &[]).unwrap_or(0);
    let forgotten = spi::one::<i64>(FORGET, &[]).unwrap_or(0);
    spi::run(DROP_SUPERSEDED);
    Observed {
        became_live,
        forgotten,
    }
}

//! A step of a pass, the first: what became of the replicas since the last one.
//!
//! A replica that became live is provisioned from scratch; one that stopped
//! being live, or is gone, is forgotten: nothing recorded as held by it and
//! nothing waiting for it.

use crate::catalog::table_sql::quote_ident;
use crate::catalog::Replicas;
use crate::spi;
use crate::statements::relay::observe::{ANY_GONE, BECOME_LIVE, DROP_SUPERSEDED, FORGET};

/// How many replicas came and went.
#[derive(Debug, Default)]
pub struct Observed {
    pub became_live: i64,
    pub forgotten: i64,
}

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
    let forgotten = match spi::one::<bool>(ANY_GONE, &[]) {
        Some(true) => spi::one::<i64>(FORGET, &[]).unwrap_or(0),
        _ => 0,
    };
    spi::run(DROP_SUPERSEDED);
    Observed {
        became_live,
        forgotten,
    }
}

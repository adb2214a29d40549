//! `sync.progress(scope)`: how far along each replica of the scope is, per
//! table that goes down. "holds - outdated of should" is a replica's
//! progress bar: a row counts as held only once the replica confirmed the
//! message that carried it, so the bar never runs ahead of the replica.

use pgrx::datum::DatumWithOid;
use serde_json::Value;

use super::{answer, scope_ids, states_sql, tables, CONTRACT, SCOPE_BY_ID};

/// The figures of each row state, per replica and table, answered as one
/// document: every table that goes down (`$2`, parents first) for every
/// replica, with zeros where it has none. The figures are counted once for
/// every replica (MATERIALIZED), not again for each.
const PROGRESS: &str = "\
    , counts AS MATERIALIZED ( \
        SELECT replica, table_name, \
               count(*) FILTER (WHERE should) AS should, \
               count(*) FILTER (WHERE state IN ('holds', 'outdated')) AS holds, \
               count(*) FILTER (WHERE state = 'outdated') AS outdated, \
               count(*) FILTER (WHERE state = 'on_its_way') AS in_flight, \
               count(*) FILTER (WHERE state = 'missing') AS missing, \
               count(*) FILTER (WHERE state = 'leaving') AS to_remove, \
               count(*) FILTER (WHERE state = 'set_aside') AS set_aside \
        FROM states GROUP BY replica, table_name), \
    tables AS (SELECT t.name COLLATE \"C\" AS name, t.position \
               FROM unnest($2::text[]) WITH ORDINALITY AS t(name, position)) \
    SELECT jsonb_build_object('contract', $3::integer, 'now', now(), 'replicas', coalesce(( \
        SELECT jsonb_agg(jsonb_build_object( \
            'replica', r.id, 'partition', r.partition, \
            'snapshot_on_its_way', r.snapshot_on_its_way, \
            'tables', coalesce((SELECT jsonb_agg(jsonb_build_object( \
                    'table', t.name, \
                    'should', coalesce(c.should, 0), \
                    'holds', coalesce(c.holds, 0), \
                    'outdated', coalesce(c.outdated, 0), \
                    'in_flight', coalesce(c.in_flight, 0), \
                    'missing', coalesce(c.missing, 0), \
                    'to_remove', coalesce(c.to_remove, 0), \
                    'set_aside', coalesce(c.set_aside, 0)) ORDER BY t.position) \
                FROM tables t LEFT JOIN counts c ON c.replica = r.id AND c.table_name = t.name), '[]'::jsonb)) \
            ORDER BY r.id) \
        FROM replicas r), '[]'::jsonb))";

/// The progress of every live replica of `scope`.
pub fn progress(scope: Option<Value>) -> Value {
    let tables = tables();
    let down: Vec<String> = tables
        .iter()
        .filter(|t| t.mirror.goes_down())
        .map(|t| t.name.clone())
        .collect();
    let replicas = scope_ids(scope);
    let sql = format!("{}{PROGRESS}", states_sql(&tables, SCOPE_BY_ID, None));
    let args: [DatumWithOid; 3] = [replicas.into(), down.into(), CONTRACT.into()];
    answer(&sql, &args)
}

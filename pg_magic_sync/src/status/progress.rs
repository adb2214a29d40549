//! `sync.progress(scope)`: how far along each replica of the scope is, per
//! table that goes down. "holds - outdated of should" is a replica's
//! progress bar: a row counts as held only once the replica confirmed the
//! message that carried it, so the bar never runs ahead of the replica.

use pgrx::datum::DatumWithOid;
use serde_json::Value;

use super::rounds::{self, Reached};
use super::{answer, scope_ids, should, states_over, tables, CONTRACT, SCOPE_BY_ID};

/// The figures of each row state, per replica and table, answered as one
/// document: every table that goes down (`$2`, parents first) for every
/// replica, with zeros where it has none. The figures are counted once for
/// every replica (MATERIALIZED), not again for each; each row's state is
/// worked out once (OFFSET 0 keeps the planner from copying its expression
/// into every count that reads it).
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
        FROM (SELECT replica, table_name, should, state FROM states OFFSET 0) AS states \
        GROUP BY replica, table_name), \
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

/// `reach` as rounds.rs worked it out for the one replica of the scope:
/// `$4` the tables of its rows, `$5` their keys, `$6` whether each is
/// blocked. Keys compare byte for byte ("C"), as should.rs brings them.
/// rounds.rs names each row once.
const REACHED: &str = "\
    SELECT s.id, x.table_name COLLATE \"C\", x.key COLLATE \"C\", x.blocked \
    FROM scope s CROSS JOIN unnest($4::text[], $5::text[], $6::bool[]) AS x(table_name, key, blocked)";

/// The progress of every live replica of `scope`, replica by replica: what
/// each reaches is walked in rounds (rounds.rs), then counted against what
/// it holds by one query, so no read holds more than one replica's rows.
pub fn progress(scope: Option<Value>) -> Value {
    let tables = tables();
    let down: Vec<String> = tables
        .iter()
        .filter(|t| t.mirror.goes_down())
        .map(|t| t.name.clone())
        .collect();
    let mut replicas = scope_ids(scope);
    // In the order the answer lists them (ORDER BY r.id: uuids by bytes).
    replicas.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    let sql = format!(
        "{}{PROGRESS}",
        states_over(
            &should::ctes_reaching(&tables, SCOPE_BY_ID, REACHED),
            false,
            true,
        )
    );
    let one = |ids: Vec<pgrx::Uuid>, reached: Reached| {
        let args: [DatumWithOid; 6] = [
            ids.into(),
            down.clone().into(),
            CONTRACT.into(),
            reached.tables.into(),
            reached.keys.into(),
            reached.blocked.into(),
        ];
        answer(&sql, &args)
    };
    if replicas.is_empty() {
        return one(Vec::new(), Reached::default());
    }
    let blocked = rounds::blocked_rows(&tables);
    let mut document: Option<Value> = None;
    for replica in replicas {
        let reached = rounds::reached(&tables, &blocked, replica);
        let answered = one(vec![replica], reached);
        document = Some(match document {
            None => answered,
            Some(so_far) => with_replicas_of(so_far, answered),
        });
    }
    document.unwrap_or(Value::Null)
}

/// `document` with the replicas `more` lists appended to its own.
fn with_replicas_of(mut document: Value, more: Value) -> Value {
    let Value::Object(mut more) = more else {
        return document;
    };
    let (Some(Value::Array(listed)), Some(Value::Array(others))) =
        (document.get_mut("replicas"), more.remove("replicas"))
    else {
        return document;
    };
    listed.extend(others);
    document
}

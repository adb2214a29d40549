//! `sync.explain(replica, table, key)`: why a row is, or is not, on a
//! replica, as the planner sees it now. What sends it there (its table's
//! rule, a row the replica should hold that points at it, the row it
//! follows), or what keeps it away, and what the replica holds of it.

use serde_json::{json, Map, Value};

use super::{answer, key_of, should, table_going_down, tables, CONTRACT, NOW, SCOPE};
use crate::catalog::table_sql::{key_matches, quote_ident, quote_literal};
use crate::catalog::{Declared, Rule};
use crate::error::Error;
use crate::statements::status::explain::{HELD, REPLICA};

/// How many rows that pull a row in are named.
const NAMED: i64 = 20;

/// Why row `key` of `table_name` is, or is not, on `replica`.
pub fn explain(replica: pgrx::Uuid, table_name: &str, key: &str) -> Result<Value, Error> {
    let tables = tables();
    let table = table_going_down(&tables, table_name)?;
    let key = key_of(&table, key)?;
    let mut because = Vec::new();
    let mut kept_away = Vec::new();
    let standing = answer(REPLICA, &[replica.into()]);
    let live = standing["live"].as_bool().unwrap_or(false);
    let mut reached = Value::Null;
    if standing.is_null() {
        kept_away.push(json!({"reason": "unknown_replica"}));
    } else if !live {
        kept_away.push(json!({"reason": "not_live"}));
    } else {
        reached = reach(&tables, &table, replica, &key);
    }
    let should = reached["should"].as_bool().unwrap_or(false);
    let blocked = reached["blocked"].as_bool().unwrap_or(false);
    let set_aside = reached["set_aside"]
        .as_array()
        .is_some_and(|roots| !roots.is_empty());
    let mut held = answer(
        HELD,
        &[
            replica.into(),
            table.name.as_str().into(),
            key.as_str().into(),
            should.into(),
            blocked.into(),
            set_aside.into(),
        ],
    );
    let state = if live {
        held["state"].clone()
    } else {
        Value::Null
    };
    let held = held["held"].take();
    if should {
        if reached["rule"].as_bool().unwrap_or(false) {
            because.push(json!({"reason": "rule", "rule": table.rule.kind()}));
        }
        for row in reached["parent_of"].as_array().into_iter().flatten() {
            because.push(json!({"reason": "parent_of", "table": row["table"], "key": row["key"]}));
        }
        for row in reached["follows"].as_array().into_iter().flatten() {
            because.push(json!({"reason": "follows", "table": row["table"], "key": row["key"]}));
        }
        if held["refused"].is_string() && held["leaving"].is_null() {
            kept_away.push(json!({
                "reason": "refused",
                "why": held["refused"],
                "at": held["refused_at"],
                "retry_at": held["retry_at"],
            }));
        }
        let confirmed = held["confirmed"].as_bool().unwrap_or(false);
        if standing["snapshot_on_its_way"].as_bool().unwrap_or(false) && !confirmed {
            kept_away.push(json!({"reason": "snapshot_on_its_way"}));
        }
    } else if live {
        kept_away.extend(away(&table, &key, &standing, &reached));
    }
    let mut out = Map::new();
    out.insert("contract".into(), json!(CONTRACT));
    out.insert("now".into(), answer(NOW, &[]));
    out.insert("replica".into(), json!(crate::spi::from_pg(replica)));
    out.insert("table".into(), json!(table.name));
    out.insert("key".into(), json!(key));
    out.insert("state".into(), state);
    out.insert("should".into(), json!(should));
    out.insert("because".into(), Value::Array(because));
    out.insert("kept_away".into(), Value::Array(kept_away));
    out.insert("held".into(), held);
    Ok(Value::Object(out))
}

/// What keeps a row a live replica should not hold away from it: the row
/// is not there, is in another partition or outside the active view, is
/// set aside (or points at a row that is), or nothing reaches it.
fn away(table: &Declared, key: &str, standing: &Value, reached: &Value) -> Vec<Value> {
    let row = row_facts(table, key);
    if row.is_null() {
        return vec![json!({"reason": "no_such_row"})];
    }
    let mut reasons = Vec::new();
    if table.partition.is_some() && row["partition"] != standing["partition"] {
        reasons.push(json!({
            "reason": "other_partition",
            "row_partition": row["partition"],
            "replica_partition": standing["partition"],
        }));
    }
    if let (Some(view), false) = (&table.active, row["in_view"].as_bool().unwrap_or(true)) {
        reasons.push(json!({"reason": "outside_active_view", "view": view}));
    }
    for root in reached["set_aside"].as_array().into_iter().flatten() {
        reasons.push(json!({
            "reason": "set_aside",
            "table": root["table"],
            "key": root["key"],
            "why": root["why"],
            "since": root["since"],
            "retry_at": root["retry_at"],
        }));
    }
    if reasons.is_empty() {
        reasons.push(no_rule(table, key));
    }
    reasons
}

/// Why no rule reaches the row for this replica, as its rule reads the
/// row, in fields every `no_rule` has: `columns` and `values`, what the
/// rule reads of the row (for `assigned`, its column and the replica id it
/// holds; for `follows`, the columns that point at the row it follows, and
/// their values); `belongs_to`, for `assigned`, the replica that value
/// names (`{replica, live}`, or null for none the relay knows); `follows`,
/// the table of the row it follows, which this replica should not hold;
/// `groups`, for `grouped`, how many groups the row is a member of (none
/// of them given to this replica). For `none`, all empty: the table
/// reaches a replica only as the parent of a row it holds.
fn no_rule(table: &Declared, key: &str) -> Value {
    let mut reason = json!({
        "reason": "no_rule",
        "rule": table.rule.kind(),
        "columns": [],
        "values": [],
        "belongs_to": null,
        "follows": null,
        "groups": 0,
    });
    let read = match &table.rule {
        Rule::Assigned { column } => {
            let value = format!("(t.{})::text", quote_ident(column));
            format!(
                "jsonb_build_object('columns', jsonb_build_array({column}), \
                   'values', jsonb_build_array({value}), \
                   'belongs_to', (SELECT jsonb_build_object('replica', r.id, 'live', r.live) \
                                  FROM sync.replicas r WHERE r.id::text = {value}))",
                column = quote_literal(column),
            )
        }
        Rule::Follows { columns, reference } => {
            let parent = table
                .references
                .get(*reference)
                .map(|r| r.parent.clone())
                .unwrap_or_default();
            let values: Vec<String> = columns
                .iter()
                .map(|c| format!("(t.{})::text", quote_ident(c)))
                .collect();
            format!(
                "jsonb_build_object('follows', {parent}, 'columns', {columns}::jsonb, \
                   'values', jsonb_build_array({values}))",
                parent = quote_literal(&parent),
                columns = quote_literal(&json!(columns).to_string()),
                values = values.join(", "),
            )
        }
        Rule::Grouped { members, .. } => {
            let member_is_row: Vec<String> = members
                .row
                .iter()
                .zip(&table.key_columns)
                .map(|(m, k)| format!("m.{} = t.{}", quote_ident(m), quote_ident(k)))
                .collect();
            format!(
                "jsonb_build_object('groups', (SELECT count(*) FROM {members} AS m WHERE {on}))",
                members = members.relation,
                on = member_is_row.join(" AND "),
            )
        }
        Rule::None | Rule::Broadcast => return reason,
    };
    let sql = format!(
        "SELECT {read} FROM {rel} AS t WHERE {matches}",
        rel = table.relation,
        matches = key_matches(table, "t", "$1"),
    );
    if let (Value::Object(reason), Value::Object(facts)) =
        (&mut reason, answer(&sql, &[key.into()]))
    {
        reason.extend(facts);
    }
    reason
}

/// Whether the row exists, its partition, and whether it is in the table's
/// active view; Null when there is no such row.
fn row_facts(table: &Declared, key: &str) -> Value {
    let partition = match &table.partition {
        Some(column) => format!("(t.{})::text", quote_ident(column)),
        None => "NULL::text".to_owned(),
    };
    let in_view = match &table.active {
        Some(view) => format!(
            "EXISTS (SELECT 1 FROM {view} AS v WHERE {})",
            key_matches(table, "v", "$1")
        ),
        None => "true".to_owned(),
    };
    let sql = format!(
        "SELECT jsonb_build_object('partition', {partition}, 'in_view', {in_view}) \
         FROM {rel} AS t WHERE {matches}",
        rel = table.relation,
        matches = key_matches(table, "t", "$1"),
    );
    answer(&sql, &[key.into()])
}

/// The planner's view of the row for one live replica: whether it should
/// hold it (`should`), whether its rules reach it though it cannot go
/// (`blocked`), whether its table's rule sends it (`rule`), the rows the
/// replica should hold that point at it (`parent_of`) or that it follows
/// (`follows`), and the rows set aside that block it (`set_aside`).
fn reach(tables: &[Declared], table: &Declared, replica: pgrx::Uuid, key: &str) -> Value {
    let sql = format!(
        "WITH RECURSIVE {ctes} \
         SELECT jsonb_build_object( \
           'should', EXISTS (SELECT 1 FROM reach WHERE NOT blocked), \
           'blocked', EXISTS (SELECT 1 FROM reach WHERE blocked), \
           'rule', EXISTS (SELECT 1 FROM hits WHERE via_kind IS NULL), \
           'parent_of', {parent_of}, \
           'follows', {follows}, \
           'set_aside', coalesce((SELECT jsonb_agg(jsonb_build_object('table', q.table_name, \
                'key', q.key, 'why', q.reason, 'since', q.since, 'retry_at', q.retry_at) \
                ORDER BY q.table_name, q.key) \
              FROM (SELECT DISTINCT b.root_table, b.root_key FROM blocked b \
                    WHERE b.table_name = $2 AND b.key = $3) AS b \
              JOIN sync.quarantine q ON q.table_name = b.root_table AND q.key = b.root_key), \
              '[]'::jsonb))",
        ctes = should::one_row_ctes(tables, table, SCOPE, should::Ways::Every),
        parent_of = ways("parent_of"),
        follows = ways("follows"),
    );
    let scope = json!({"replicas": [crate::spi::from_pg(replica)]});
    answer(
        &sql,
        &[
            pgrx::JsonB(scope).into(),
            table.name.as_str().into(),
            key.into(),
        ],
    )
}

/// The rows a way of kind `kind` leads to the row through, which the
/// replica should hold, as `[{table, key}]`: the first NAMED.
fn ways(kind: &str) -> String {
    format!(
        "coalesce((SELECT jsonb_agg(jsonb_build_object('table', w.via_table, 'key', w.via_key) \
                   ORDER BY w.via_table, w.via_key) \
           FROM (SELECT DISTINCT via_table, via_key FROM hits WHERE via_kind = {kind} \
                 ORDER BY via_table, via_key LIMIT {NAMED}) AS w), '[]'::jsonb)",
        kind = quote_literal(kind),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rows_that_pull_a_row_in_are_named_up_to_a_limit() {
        let sql = ways("parent_of");
        assert!(sql.contains("via_kind = 'parent_of'"), "{sql}");
        assert!(sql.contains(&format!("LIMIT {NAMED}")), "{sql}");
    }
}

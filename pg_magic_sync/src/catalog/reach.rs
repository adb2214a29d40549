//! The SQL of how rows reach a replica: the rows a table's rule sends a set
//! of replicas, the parents a set of rows points at, and the rows that
//! follow them. Each answers rows `(replica, table_name, key)`, over a
//! relation of rows `(replica, table_name, key)` given by name.
//!
//! Every identifier is quoted; table names and keys are literals or come
//! from the engine's own tables.

use crate::catalog::table_sql::{
    key_is, key_matches, key_of, key_text_of, quote_ident, quote_literal,
};
use crate::catalog::{Declared, Reference, Rule};

/// The condition that the row `alias` of a table has the key text `key`.
pub fn row_is(table: &Declared, alias: &str, key: &str) -> String {
    key_matches(table, alias, key)
}

/// The condition that a row of a partitioned table is in the partition of
/// the replica `replica` (a relation with a `partition` column), to follow
/// a join's condition.
pub fn in_partition_of(table: &Declared, alias: &str, replica: &str) -> String {
    same_partition(table, alias, replica)
}

fn same_partition(table: &Declared, alias: &str, replica: &str) -> String {
    match &table.partition {
        Some(column) => format!(
            " AND ({alias}.{})::text IS NOT DISTINCT FROM {replica}.partition",
            quote_ident(column)
        ),
        None => String::new(),
    }
}

/// The rows of `table` its rule sends to the replicas of `targets` (a
/// relation of `(id, partition)`), as `(replica, table_name, key)`; with
/// `among`, only those of its rows `(replica, table_name, key)`. None for a
/// table whose rows go only where other rows take them.
pub fn rule_rows(table: &Declared, targets: &str, among: Option<&str>) -> Option<String> {
    rule_rows_with(table, targets, among, "")
}

/// As `rule_rows`, each row with the further columns `more` (expressions of
/// the row `t`, each led by a comma) after its key: what else a reader
/// wants of the rows it is sent, read in the same scan.
pub fn rule_rows_with(
    table: &Declared,
    targets: &str,
    among: Option<&str>,
    more: &str,
) -> Option<String> {
    match among {
        Some(pairs) => rule_sql(table, targets, Asked::Pairs(pairs), more),
        None => rule_sql(table, targets, Asked::Every, more),
    }
}

/// The replicas of `targets` the rule of `table` sends each of the rows
/// `rows` (a relation of `(table_name, key)`), as `(replica, table_name,
/// key)`. Asked of a few rows and many replicas, the rule reads each row
/// once and names its replicas, where pairs would read it once per replica.
pub fn rule_rows_of(table: &Declared, targets: &str, rows: &str) -> Option<String> {
    rule_sql(table, targets, Asked::Rows(rows), "")
}

/// The rows a rule is asked about.
#[derive(Clone, Copy)]
enum Asked<'a> {
    /// Every row of the table, for every target.
    Every,
    /// Only these `(replica, table_name, key)`: is the row sent there?
    Pairs(&'a str),
    /// Only these `(table_name, key)`, for every target.
    Rows(&'a str),
}

fn rule_sql(table: &Declared, targets: &str, asked: Asked<'_>, more: &str) -> Option<String> {
    let name = quote_literal(&table.name);
    let key = format!("{}{more}", key_of(table, "t"));
    let within = same_partition(table, "t", "r");
    let source = table.source();
    let from = match asked {
        Asked::Pairs(pairs) => format!(
            "{pairs} AS c JOIN {targets} AS r ON r.id = c.replica \
             JOIN {source} AS t ON c.table_name = {name} AND {matches}",
            matches = row_is(table, "t", "c.key"),
        ),
        Asked::Rows(rows) => format!(
            "{rows} AS c JOIN {source} AS t ON c.table_name = {name} AND {matches}",
            matches = row_is(table, "t", "c.key"),
        ),
        Asked::Every => format!("{source} AS t"),
    };
    // Asked of pairs, the target is already joined and the rule is a
    // condition; otherwise the rule joins the targets it names.
    let pairs = matches!(asked, Asked::Pairs(_));
    let sql = match &table.rule {
        Rule::Broadcast if pairs => {
            format!("SELECT r.id, {name}, {key} FROM {from} WHERE true{within}")
        }
        Rule::Broadcast => {
            format!("SELECT r.id, {name}, {key} FROM {from} JOIN {targets} AS r ON true{within}")
        }
        Rule::Assigned { column } => {
            let assigned = format!("t.{} = r.id", quote_ident(column));
            if pairs {
                format!("SELECT r.id, {name}, {key} FROM {from} WHERE {assigned}{within}")
            } else {
                format!(
                    "SELECT r.id, {name}, {key} FROM {from} JOIN {targets} AS r ON {assigned}{within}"
                )
            }
        }
        Rule::Grouped { members, assigned } => {
            let member_of = members
                .row
                .iter()
                .zip(&table.key_columns)
                .map(|(m, k)| format!("m.{} = t.{}", quote_ident(m), quote_ident(k)))
                .collect::<Vec<_>>()
                .join(" AND ");
            let same_group = members
                .group
                .iter()
                .zip(&assigned.group)
                .map(|(m, a)| format!("a.{} = m.{}", quote_ident(a), quote_ident(m)))
                .collect::<Vec<_>>()
                .join(" AND ");
            let given = format!("a.{} = r.id", quote_ident(&assigned.replica));
            let groups = format!(
                "JOIN {} AS m ON {member_of} JOIN {} AS a ON {same_group}",
                members.relation, assigned.relation
            );
            if pairs {
                format!(
                    "SELECT DISTINCT r.id, {name}, {key} FROM {from} {groups} WHERE {given}{within}"
                )
            } else {
                format!(
                    "SELECT DISTINCT r.id, {name}, {key} FROM {from} {groups} \
                     JOIN {targets} AS r ON {given}{within}"
                )
            }
        }
        Rule::Follows { .. } | Rule::None => return None,
    };
    Some(sql)
}

/// The parents the rows of `table` in `rows` point at through `reference`,
/// as they are now.
pub fn parents(table: &Declared, reference: &Reference, rows: &str) -> String {
    format!(
        "SELECT f.replica, {parent}, {parent_key} \
         FROM {rows} AS f JOIN {rel} AS t ON f.table_name = {name} AND {matches} \
         WHERE {parent_key} IS NOT NULL",
        parent = quote_literal(&reference.parent),
        parent_key = key_text_of("t", &reference.columns),
        rel = table.relation,
        name = quote_literal(&table.name),
        matches = row_is(table, "t", "f.key"),
    )
}

/// The rows of `follower` that follow rows in `rows` (of the table its rule
/// follows), as they are now.
pub fn followers(follower: &Declared, rows: &str) -> Option<String> {
    let followed = follower.followed()?;
    Some(format!(
        "SELECT f.replica, {name}, {key} FROM {rows} AS f \
         JOIN {rel} AS t ON f.table_name = {parent} AND {points}",
        name = quote_literal(&follower.name),
        key = key_of(follower, "t"),
        rel = follower.relation,
        parent = quote_literal(&followed.parent),
        points = key_is("t", &followed.columns, &followed.key_types, "f.key"),
    ))
}

/// The rows of `table` that point at rows in `rows` through `reference`, as
/// they are now: the children of those rows.
pub fn children(table: &Declared, reference: &Reference, rows: &str) -> String {
    format!(
        "SELECT f.replica, {name}, {key} FROM {rows} AS f \
         JOIN {rel} AS t ON f.table_name = {parent} AND {points}",
        name = quote_literal(&table.name),
        key = key_of(table, "t"),
        rel = table.relation,
        parent = quote_literal(&reference.parent),
        points = key_is("t", &reference.columns, &reference.key_types, "f.key"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::table_sql::qualified;
    use crate::catalog::{Assignments, Members};
    use magic_sync_proto::key::KeyType;

    fn orders() -> Declared {
        Declared {
            name: "orders".into(),
            relation: qualified("shop", "orders"),
            key_columns: vec!["id".into()],
            key_types: vec![KeyType::Uuid],
            rule: Rule::Assigned {
                column: "register_id".into(),
            },
            references: vec![Reference {
                constraint: "orders_product_id_fkey".into(),
                parent: "products".into(),
                columns: vec!["product_id".into()],
                parent_columns: vec!["id".into()],
                key_types: vec![KeyType::Uuid],
            }],
            position: 2,
            ..Default::default()
        }
    }

    #[test]
    fn a_reference_of_several_columns_is_null_when_any_part_is() {
        let sql = key_text_of("t", &["a".into(), "b".into()]);
        assert_eq!(
            sql,
            "CASE WHEN t.\"a\" IS NULL OR t.\"b\" IS NULL THEN NULL \
             ELSE concat_ws('|', (t.\"a\")::text, (t.\"b\")::text) END"
        );
    }

    #[test]
    fn an_assigned_table_sends_a_row_to_the_replica_its_column_names() {
        let sql = rule_rows(&orders(), "targets", None).unwrap();
        assert!(
            sql.contains("JOIN targets AS r ON t.\"register_id\" = r.id"),
            "{sql}"
        );
        let among = rule_rows(&orders(), "targets", Some("candidates")).unwrap();
        assert!(among.contains("WHERE t.\"register_id\" = r.id"), "{among}");
        assert!(among.contains("t.\"id\" = (c.key)::uuid"), "{among}");
    }

    #[test]
    fn rows_asked_of_every_target_are_read_once_and_joined_to_the_replica_their_rule_names() {
        let sql = rule_rows_of(&orders(), "targets", "asked").unwrap();
        assert!(
            sql.contains(
                "FROM asked AS c JOIN \"shop\".\"orders\" AS t ON c.table_name = 'orders'"
            ),
            "{sql}"
        );
        assert!(
            sql.contains("JOIN targets AS r ON t.\"register_id\" = r.id"),
            "{sql}"
        );
        assert!(!sql.contains("r.id = c.replica"), "{sql}");
    }

    #[test]
    fn a_table_without_a_rule_of_its_own_sends_nothing_by_itself() {
        let none = Declared {
            rule: Rule::None,
            ..orders()
        };
        assert!(rule_rows(&none, "targets", None).is_none());
        let follows = Declared {
            rule: Rule::Follows {
                columns: vec!["product_id".into()],
                reference: 0,
            },
            ..orders()
        };
        assert!(rule_rows(&follows, "targets", None).is_none());
    }

    #[test]
    fn a_grouped_table_goes_to_replicas_given_a_group_of_the_row() {
        let customers = Declared {
            name: "customers".into(),
            rule: Rule::Grouped {
                members: Members {
                    relation: qualified("shop", "list_members"),
                    row: vec!["customer_id".into()],
                    group: vec!["list_id".into()],
                    groups: qualified("shop", "lists"),
                },
                assigned: Assignments {
                    relation: qualified("shop", "register_lists"),
                    group: vec!["list_id".into()],
                    replica: "register_id".into(),
                },
            },
            references: vec![],
            ..orders()
        };
        let sql = rule_rows(&customers, "targets", None).unwrap();
        assert!(sql.contains("m.\"customer_id\" = t.\"id\""), "{sql}");
        assert!(sql.contains("a.\"list_id\" = m.\"list_id\""), "{sql}");
        assert!(sql.contains("a.\"register_id\" = r.id"), "{sql}");
    }

    #[test]
    fn parents_and_children_go_through_the_reference() {
        let table = orders();
        let up = parents(&table, &table.references[0], "rows");
        assert!(
            up.contains("SELECT f.replica, 'products', (t.\"product_id\")::text"),
            "{up}"
        );
        let down = children(&table, &table.references[0], "rows");
        assert!(
            down.contains("f.table_name = 'products' AND t.\"product_id\" = (f.key)::uuid"),
            "{down}"
        );
    }

    #[test]
    fn a_partitioned_table_reaches_replicas_of_its_partition_only() {
        let table = Declared {
            partition: Some("company_id".into()),
            rule: Rule::Broadcast,
            ..orders()
        };
        let sql = rule_rows(&table, "targets", None).unwrap();
        assert!(
            sql.contains("(t.\"company_id\")::text IS NOT DISTINCT FROM r.partition"),
            "{sql}"
        );
    }
}

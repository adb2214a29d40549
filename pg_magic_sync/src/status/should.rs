//! What the replicas of a scope should hold now, as the planner sees it,
//! written as SELECTs only: the status reads are STABLE and may not fill the
//! pass's scratch tables. Common table expressions stand for the relations
//! relay/plan/reach.rs takes by name.
//!
//! The expressions, written after `WITH RECURSIVE`:
//! - `scope (id, partition)`: the scope's live replicas;
//! - `blocked (table_name, key, root_table, root_key)`: the rows that cannot
//!   go, each with the row set aside that blocks it (itself, or a row it
//!   points at, through any number of references);
//! - `reach (replica, table_name, key, blocked)`: what the rules send each
//!   replica, then every parent and follower of what was reached; a blocked
//!   row is reached (so it can be counted as set aside) but reaches nothing
//!   further, as the planner never plans it. For every row of a replica,
//!   rounds.rs works it out and `ctes_reaching` takes it in.
//!
//! Asked of one row (`one_row_ctes`), it comes the other way round, at the
//! cost of what leads to that row rather than of everything:
//! - `back (table_name, key, via_kind, via_table, via_key)`: the row (`$2`,
//!   `$3`), then every row that reaches it, walking the edges backwards (a
//!   row that points at one, the row a follower follows), through rows that
//!   are not blocked; `via` is the first step of the way, NULL for the row
//!   itself;
//!   Asked only whether the row reaches each replica (`Ways::Whether`),
//!   `back` stops at the row itself when its own rule already sends it to
//!   every replica of the scope (`everywhere`);
//! - `candidates (table_name, key)`: the rows of `back`, each once;
//! - `hits (replica, via_kind, via_table, via_key)`: the rows of `back` a
//!   replica's rules send it, and the way each leads to the row. Each
//!   candidate is read once and its rule names its replicas, so a row
//!   reaching 200 replicas costs one read, not 200;
//! - `reach`, as above, of that one row only.

use crate::catalog::reach::{children, parents, rule_rows_of};
use crate::catalog::Declared;
use crate::statements::status::should::{BLOCKED_SEEDS, NO_ROWS};

/// Whether the row `alias` is blocked.
fn is_blocked(alias: &str) -> String {
    format!(
        "EXISTS (SELECT 1 FROM blocked b WHERE b.table_name = {alias}.table_name \
         AND b.key = {alias}.key)"
    )
}

/// A blocked row of a lateral join, as a relation reach.rs can take by
/// name: blocked rows are blocked for every replica.
fn one_blocked_row(alias: &str) -> String {
    format!(
        "(SELECT NULL::uuid AS replica, {alias}.table_name AS table_name, \
         {alias}.key AS key)"
    )
}

fn union_all(parts: Vec<String>) -> String {
    if parts.is_empty() {
        NO_ROWS.to_owned()
    } else {
        parts.join(" UNION ALL ")
    }
}

/// The tables that go down, the only ones a replica is sent.
fn down(tables: &[Declared]) -> impl Iterator<Item = &Declared> {
    tables.iter().filter(|t| t.mirror.goes_down())
}

/// Every row that cannot go, `(table_name, key)`, each once.
pub fn blocked_rows(tables: &[Declared]) -> String {
    format!(
        "WITH RECURSIVE blocked(table_name, key, root_table, root_key) AS ({}) \
         SELECT DISTINCT table_name, key FROM blocked",
        blocked(tables)
    )
}

/// What a read of one row asks of its ways there.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Ways {
    /// Every way the row reaches each replica (sync.explain names them).
    Every,
    /// Only whether it reaches each replica (sync.row_progress): once the
    /// row's own rule sends it to every replica of the scope (a broadcast
    /// product), no other way can add one, and none is walked.
    Whether,
}

/// The expressions for one row, `$2` (its table, `asked`) and `$3` (its
/// key): the same `scope`, `blocked` and `reach`, with `back` and `hits`
/// between.
pub fn one_row_ctes(tables: &[Declared], asked: &Declared, scope: &str, ways: Ways) -> String {
    let sent: Vec<String> = down(tables)
        .filter_map(|table| rule_rows_of(table, "scope", "candidates"))
        .collect();
    let own_rule = match ways {
        Ways::Whether => rule_rows_of(asked, "scope", ASKED_ROW),
        Ways::Every => None,
    };
    let (everywhere, walk_on) = match own_rule {
        Some(own) => (
            format!(
                "everywhere AS MATERIALIZED ( \
                     SELECT count(DISTINCT x.replica) = (SELECT count(*) FROM scope) AS sent \
                     FROM ({own}) AS x(replica, table_name, key)), "
            ),
            " AND NOT (SELECT sent FROM everywhere)",
        ),
        None => (String::new(), ""),
    };
    format!(
        "scope AS MATERIALIZED ({scope}), blocked(table_name, key, root_table, root_key) AS ({blocked}), \
         {everywhere}\
         back(table_name, key, via_kind, via_table, via_key) AS ({back}), \
         candidates AS MATERIALIZED (SELECT DISTINCT table_name, key FROM back), \
         hits(replica, via_kind, via_table, via_key) AS ( \
             SELECT DISTINCT x.replica, b.via_kind, b.via_table, b.via_key \
             FROM ({sent}) AS x(replica, table_name, key) \
             JOIN back AS b ON b.table_name = x.table_name COLLATE \"C\" AND b.key = x.key COLLATE \"C\"), \
         reach(replica, table_name, key, blocked) AS ( \
             SELECT DISTINCT h.replica, $2::text COLLATE \"C\", $3::text COLLATE \"C\", \
                    EXISTS (SELECT 1 FROM blocked b WHERE b.table_name = $2 AND b.key = $3) \
             FROM hits AS h)",
        blocked = blocked(tables),
        back = back(tables, walk_on),
        sent = union_all(sent),
    )
}

/// The row asked of, as a relation reach.rs can take by name.
const ASKED_ROW: &str =
    "(SELECT $2::text COLLATE \"C\" AS table_name, $3::text COLLATE \"C\" AS key)";

/// The row `$2`, `$3` and every row that reaches it, each with the first
/// step of its way there. A way back to the row itself (a product, the
/// nutrition that follows it, the product again) leads nowhere new, and
/// would walk every row again under another first step: it is cut.
/// `walk_on` is a further condition of each step past the row.
fn back(tables: &[Declared], walk_on: &str) -> String {
    let seed = "SELECT $2::text COLLATE \"C\", $3::text COLLATE \"C\", NULL::text, \
                NULL::text COLLATE \"C\", NULL::text COLLATE \"C\"";
    let mut steps = Vec::new();
    for table in down(tables) {
        // A row that points at the row: the row is its parent.
        for reference in &table.references {
            steps.push(format!(
                "SELECT 'parent_of', c.replica, c.table_name, c.key \
                 FROM ({}) AS c(replica, table_name, key)",
                children(table, reference, &one_blocked_row("b0"))
            ));
        }
        // The row a follower follows: the follower goes where it goes.
        if let Some(followed) = table.followed() {
            steps.push(format!(
                "SELECT 'follows', p.replica, p.table_name, p.key \
                 FROM ({}) AS p(replica, table_name, key)",
                parents(table, followed, &one_blocked_row("b0"))
            ));
        }
    }
    if steps.is_empty() {
        return seed.to_owned();
    }
    format!(
        "{seed} UNION \
         SELECT u.table_name, u.key, coalesce(b0.via_kind, u.kind), \
                coalesce(b0.via_table, u.table_name), coalesce(b0.via_key, u.key) \
         FROM back AS b0 CROSS JOIN LATERAL ( \
             SELECT u0.kind, u0.table_name COLLATE \"C\" AS table_name, u0.key COLLATE \"C\" AS key \
             FROM ({steps}) AS u0(kind, replica, table_name, key)) AS u \
         WHERE (b0.via_kind IS NULL OR NOT {b0_blocked}) AND NOT {u_blocked} \
           AND NOT (u.table_name = $2 AND u.key = $3){walk_on}",
        steps = steps.join(" UNION ALL "),
        b0_blocked = is_blocked("b0"),
        u_blocked = is_blocked("u"),
    )
}

/// The rows set aside, and every row that points at one.
fn blocked(tables: &[Declared]) -> String {
    let pointing: Vec<String> = down(tables)
        .flat_map(|table| {
            table
                .references
                .iter()
                .map(|reference| children(table, reference, &one_blocked_row("b0")))
        })
        .collect();
    if pointing.is_empty() {
        return BLOCKED_SEEDS.to_owned();
    }
    format!(
        "{BLOCKED_SEEDS} UNION \
         SELECT u.table_name COLLATE \"C\", u.key COLLATE \"C\", b0.root_table, b0.root_key \
         FROM blocked AS b0 CROSS JOIN LATERAL ({}) AS u(replica, table_name, key)",
        pointing.join(" UNION ALL ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::table_sql::qualified;
    use crate::catalog::{Mirror, Reference, Rule};
    use magic_sync_proto::key::KeyType;

    fn table(name: &str, rule: Rule, references: Vec<Reference>) -> Declared {
        Declared {
            name: name.into(),
            relation: qualified("shop", name),
            mirror: Mirror::Catalog,
            key_columns: vec!["id".into()],
            key_types: vec![KeyType::Uuid],
            rule,
            references,
            ..Default::default()
        }
    }

    fn to_products() -> Reference {
        Reference {
            constraint: "orders_product_id_fkey".into(),
            parent: "products".into(),
            columns: vec!["product_id".into()],
            parent_columns: vec!["id".into()],
            key_types: vec![KeyType::Uuid],
        }
    }

    /// Products sent with nothing but the orders that point at them, orders
    /// assigned to a register.
    fn orders_of_products() -> [Declared; 2] {
        [
            table("products", Rule::None, vec![]),
            table(
                "orders",
                Rule::Assigned {
                    column: "register_id".into(),
                },
                vec![to_products()],
            ),
        ]
    }

    #[test]
    fn tables_that_point_at_nothing_block_only_what_is_set_aside() {
        let sql = blocked_rows(&[table("products", Rule::Broadcast, vec![])]);
        assert!(!sql.contains("FROM blocked AS b0"), "{sql}");
        assert!(sql.contains("FROM sync.quarantine q"), "{sql}");
    }

    #[test]
    fn a_reference_blocks_what_points_at_a_row_set_aside() {
        let sql = blocked_rows(&orders_of_products());
        assert!(
            sql.contains("FROM blocked AS b0 CROSS JOIN LATERAL"),
            "{sql}"
        );
    }

    #[test]
    fn one_row_is_reached_backwards_from_the_rows_that_point_at_it() {
        let tables = orders_of_products();
        let sql = one_row_ctes(&tables, &tables[0], "SELECT 1", Ways::Every);
        assert!(sql.contains("FROM back AS b0 CROSS JOIN LATERAL"), "{sql}");
        assert!(sql.contains("SELECT 'parent_of'"), "{sql}");
        assert!(sql.contains("FROM candidates AS c JOIN"), "{sql}");
        assert!(!sql.contains("r.id = c.replica"), "{sql}");
        assert!(!sql.contains("FROM reach AS f0"), "{sql}");
    }

    #[test]
    fn a_row_whose_own_rule_sends_it_everywhere_walks_no_way_back_when_only_whether_is_asked() {
        let mut tables = orders_of_products();
        tables[0].rule = Rule::Broadcast;
        let whether = one_row_ctes(&tables, &tables[0], "SELECT 1", Ways::Whether);
        assert!(whether.contains("everywhere AS MATERIALIZED"), "{whether}");
        assert!(
            whether.contains("AND NOT (SELECT sent FROM everywhere)"),
            "{whether}"
        );
        let every = one_row_ctes(&tables, &tables[0], "SELECT 1", Ways::Every);
        assert!(!every.contains("everywhere"), "{every}");
        // A row with no rule of its own reaches replicas only by the ways.
        let orders_only = orders_of_products();
        let by_ways = one_row_ctes(&orders_only, &orders_only[0], "SELECT 1", Ways::Whether);
        assert!(!by_ways.contains("everywhere"), "{by_ways}");
    }
}

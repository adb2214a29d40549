//! The triggers the declarations need: what they are, their DDL (which
//! `sync.triggers()` prints), writing them, and holding the ones the
//! database has against them.
//!
//! - `sync_note_row` on every table that goes down: notes each change
//!   (note/);
//! - `sync_note_group` on every group table: notes a row joining or leaving
//!   a group, a group given to or taken from a replica;
//! - `sync_refuse_truncate` on all of them: TRUNCATE would remove rows
//!   without a note.

use std::collections::BTreeMap;

use crate::catalog::table_sql::quote_literal;
use crate::catalog::{Declared, Rule};
use crate::declare::system_catalog::{self, Trigger};
use crate::note::{GroupNoting, RowNoting};
use crate::spi;

// pg_trigger.tgtype's bits.
const ROW: i16 = 1;
const BEFORE: i16 = 2;
const INSERT: i16 = 4;
const DELETE: i16 = 8;
const UPDATE: i16 = 16;
const TRUNCATE: i16 = 32;

/// One trigger the declarations need.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expected {
    /// The table it is on, schema-qualified and quoted.
    pub relation: String,
    pub name: &'static str,
    pub function: &'static str,
    pub tgtype: i16,
    pub arguments: Vec<String>,
    /// Whether the engine writes it (false: the user's migrations do).
    pub install: bool,
}

impl Expected {
    fn note(
        relation: &str,
        name: &'static str,
        function: &'static str,
        arguments: Vec<String>,
        install: bool,
    ) -> Expected {
        Expected {
            relation: relation.to_owned(),
            name,
            function,
            tgtype: ROW | INSERT | DELETE | UPDATE,
            arguments,
            install,
        }
    }

    fn refuse_truncate(relation: &str, install: bool) -> Expected {
        Expected {
            relation: relation.to_owned(),
            name: "sync_refuse_truncate",
            function: "sync.refuse_truncate",
            tgtype: BEFORE | TRUNCATE,
            arguments: Vec::new(),
            install,
        }
    }

    /// The trigger's CREATE TRIGGER statement.
    pub fn ddl(&self) -> String {
        let args: Vec<String> = self.arguments.iter().map(|a| quote_literal(a)).collect();
        if self.tgtype & ROW != 0 {
            format!(
                "CREATE TRIGGER {} AFTER INSERT OR UPDATE OR DELETE ON {} FOR EACH ROW EXECUTE FUNCTION {}({});",
                self.name,
                self.relation,
                self.function,
                args.join(", ")
            )
        } else {
            format!(
                "CREATE TRIGGER {} BEFORE TRUNCATE ON {} FOR EACH STATEMENT EXECUTE FUNCTION {}();",
                self.name, self.relation, self.function
            )
        }
    }

    /// Whether a trigger in the database is this one, as it would write it
    /// (its enabled state aside).
    pub fn is(&self, trigger: &Trigger) -> bool {
        trigger.name == self.name
            && trigger.function == self.function
            && trigger.tgtype == self.tgtype
            && trigger.arguments == self.arguments
            && trigger.plain
    }
}

/// How a table that goes down is noted.
pub fn row_noting(table: &Declared) -> RowNoting<'_> {
    RowNoting {
        table: &table.name,
        partition: table.partition.as_deref(),
        key: table.key_columns.iter().map(String::as_str).collect(),
        references: table
            .references
            .iter()
            .map(|r| r.columns.iter().map(String::as_str).collect())
            .collect(),
        unnoted: table.unnoted(),
    }
}

/// Every trigger the declarations need, table by table (a table's own,
/// then its group tables'), each once.
pub fn expected(tables: &[Declared]) -> Vec<Expected> {
    let mut triggers: Vec<Expected> = Vec::new();
    // The grouped tables each table of assignments serves.
    let mut assigned: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for table in tables {
        if let Rule::Grouped { assigned: a, .. } = &table.rule {
            assigned.entry(&a.relation).or_default().push(&table.name);
        }
    }
    for table in tables.iter().filter(|t| t.mirror.goes_down()) {
        triggers.push(Expected::note(
            &table.relation,
            "sync_note_row",
            "sync.note_row",
            row_noting(table).arguments(),
            table.install,
        ));
        triggers.push(Expected::refuse_truncate(&table.relation, table.install));
        if let Rule::Grouped {
            members,
            assigned: a,
        } = &table.rule
        {
            let noting = GroupNoting::Members {
                grouped: &table.name,
                group: members.group.iter().map(String::as_str).collect(),
                row: members.row.iter().map(String::as_str).collect(),
            };
            triggers.push(Expected::note(
                &members.relation,
                "sync_note_group",
                "sync.note_group",
                noting.arguments(),
                table.install,
            ));
            triggers.push(Expected::refuse_truncate(&members.relation, table.install));
            if triggers.iter().any(|t| t.relation == a.relation) {
                continue;
            }
            let mut grouped = assigned
                .get(a.relation.as_str())
                .cloned()
                .unwrap_or_default();
            grouped.sort();
            let noting = GroupNoting::Assignments {
                replica: &a.replica,
                group: a.group.iter().map(String::as_str).collect(),
                grouped,
            };
            let install = tables.iter().any(|t| {
                t.install && matches!(&t.rule, Rule::Grouped { assigned: x, .. } if x.relation == a.relation)
            });
            triggers.push(Expected::note(
                &a.relation,
                "sync_note_group",
                "sync.note_group",
                noting.arguments(),
                install,
            ));
            triggers.push(Expected::refuse_truncate(&a.relation, install));
        }
    }
    triggers
}

/// What one engine trigger in the database is, held against the
/// declarations.
pub enum Finding<'a> {
    /// As it should be.
    Right,
    Missing(&'a Expected),
    /// There, but written otherwise: the trigger as it is.
    Different(&'a Expected, &'a Trigger),
    /// Disabled ('D') or firing only in replica sessions ('R').
    NotEnabled(&'a Expected, &'a Trigger),
    /// A trigger of the engine's functions the declarations do not ask
    /// for, on this relation (its oid).
    Unexpected(&'a Trigger),
}

/// Holds the engine's triggers in the database against the expected ones.
pub fn findings<'a>(expected: &'a [Expected], existing: &'a [Trigger]) -> Vec<Finding<'a>> {
    let oids: BTreeMap<&str, Option<pgrx::pg_sys::Oid>> = expected
        .iter()
        .map(|e| {
            (
                e.relation.as_str(),
                system_catalog::find_relation(&e.relation).map(|r| r.oid),
            )
        })
        .collect();
    let mut findings = Vec::new();
    for e in expected {
        let oid = oids[e.relation.as_str()];
        let found = existing
            .iter()
            .find(|t| Some(t.relation) == oid && t.name == e.name);
        findings.push(match found {
            None => Finding::Missing(e),
            Some(t) if !e.is(t) => Finding::Different(e, t),
            Some(t) if t.enabled == "D" || t.enabled == "R" => Finding::NotEnabled(e, t),
            Some(_) => Finding::Right,
        });
    }
    for t in existing {
        let asked = expected
            .iter()
            .any(|e| oids[e.relation.as_str()] == Some(t.relation) && e.name == t.name);
        if !asked {
            findings.push(Finding::Unexpected(t));
        }
    }
    findings
}

/// `DROP TRIGGER` of a trigger in the database.
pub fn drop_ddl(trigger: &Trigger) -> String {
    let relation = system_catalog::relation_by_oid(trigger.relation)
        .map(|r| r.qualified)
        .unwrap_or_default();
    format!(
        "DROP TRIGGER {} ON {relation};",
        crate::catalog::table_sql::quote_ident(&trigger.name)
    )
}

/// The relation a trigger in the database is on, for messages.
pub fn shown(trigger: &Trigger) -> String {
    system_catalog::relation_by_oid(trigger.relation)
        .map(|r| r.shown)
        .unwrap_or_default()
}

/// Writes the triggers the engine installs and drops those of its
/// functions no declaration asks for any more, on the relations it looks
/// after (`managed`: schema-qualified and quoted).
pub fn install(expected: &[Expected], managed: &[String]) {
    let existing = system_catalog::engine_triggers();
    let managed_oids: Vec<pgrx::pg_sys::Oid> = managed
        .iter()
        .filter_map(|r| system_catalog::find_relation(r).map(|f| f.oid))
        .collect();
    for finding in findings(expected, &existing) {
        match finding {
            Finding::Missing(e) | Finding::Different(e, _) if e.install => {
                spi::run(
                    &e.ddl()
                        .replacen("CREATE TRIGGER", "CREATE OR REPLACE TRIGGER", 1),
                );
            }
            Finding::NotEnabled(e, _) if e.install => {
                spi::run(&format!(
                    "ALTER TABLE {} ENABLE TRIGGER {};",
                    e.relation, e.name
                ));
            }
            Finding::Unexpected(t) if managed_oids.contains(&t.relation) => spi::run(&drop_ddl(t)),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{Assignments, Members, Mirror, Reference};
    use magic_sync_proto::key::KeyType;

    fn customers(name: &str) -> Declared {
        Declared {
            name: name.into(),
            relation: format!("\"shop\".\"{name}\""),
            mirror: Mirror::Catalog,
            key_columns: vec!["id".into()],
            key_types: vec![KeyType::Uuid],
            install: true,
            rule: Rule::Grouped {
                members: Members {
                    relation: format!("\"shop\".\"{name}_members\""),
                    row: vec!["customer_id".into()],
                    group: vec!["list_id".into()],
                    groups: "\"shop\".\"lists\"".into(),
                },
                assigned: Assignments {
                    relation: "\"shop\".\"register_lists\"".into(),
                    group: vec!["list_id".into()],
                    replica: "register_id".into(),
                },
            },
            ..Declared::default()
        }
    }

    #[test]
    fn a_table_that_goes_down_is_noted_row_by_row_and_refuses_truncate() {
        let orders = Declared {
            name: "orders".into(),
            relation: "\"shop\".\"orders\"".into(),
            key_columns: vec!["id".into()],
            partition: Some("company_id".into()),
            references: vec![Reference {
                constraint: "orders_product_id_fkey".into(),
                columns: vec!["product_id".into()],
                parent: "products".into(),
                parent_columns: vec!["id".into()],
                key_types: vec![KeyType::Uuid],
            }],
            replica_owned: vec!["note".into()],
            unmirrored: vec!["archived_at".into()],
            install: true,
            ..Declared::default()
        };
        let ddl: Vec<String> = expected(&[orders]).iter().map(Expected::ddl).collect();
        assert_eq!(
            ddl,
            [
                "CREATE TRIGGER sync_note_row AFTER INSERT OR UPDATE OR DELETE ON \"shop\".\"orders\" \
                 FOR EACH ROW EXECUTE FUNCTION sync.note_row('orders', 'company_id', '1', 'id', '1', \
                 '1', 'product_id', '2', 'note', 'archived_at');",
                "CREATE TRIGGER sync_refuse_truncate BEFORE TRUNCATE ON \"shop\".\"orders\" \
                 FOR EACH STATEMENT EXECUTE FUNCTION sync.refuse_truncate();"
            ]
        );
    }

    #[test]
    fn a_table_that_goes_up_has_no_trigger() {
        let receipts = Declared {
            mirror: Mirror::Record,
            ..customers("receipts")
        };
        assert!(expected(&[receipts]).is_empty());
    }

    #[test]
    fn group_tables_are_noted_and_assignments_shared_by_two_grouped_tables_once() {
        let triggers = expected(&[customers("customers"), customers("products")]);
        let on: Vec<(&str, &str)> = triggers
            .iter()
            .map(|t| (t.relation.as_str(), t.name))
            .collect();
        assert_eq!(
            on,
            [
                ("\"shop\".\"customers\"", "sync_note_row"),
                ("\"shop\".\"customers\"", "sync_refuse_truncate"),
                ("\"shop\".\"customers_members\"", "sync_note_group"),
                ("\"shop\".\"customers_members\"", "sync_refuse_truncate"),
                ("\"shop\".\"register_lists\"", "sync_note_group"),
                ("\"shop\".\"register_lists\"", "sync_refuse_truncate"),
                ("\"shop\".\"products\"", "sync_note_row"),
                ("\"shop\".\"products\"", "sync_refuse_truncate"),
                ("\"shop\".\"products_members\"", "sync_note_group"),
                ("\"shop\".\"products_members\"", "sync_refuse_truncate"),
            ]
        );
        assert_eq!(
            triggers[4].arguments,
            [
                "assigned",
                "register_id",
                "1",
                "list_id",
                "2",
                "customers",
                "products"
            ]
        );
        assert_eq!(
            triggers[2].arguments,
            ["members", "customers", "1", "list_id", "1", "customer_id"]
        );
    }
}

//! The indexes the planner's lookups need: rows looked up by more than
//! their key. On a large table, a lookup no index serves reads the whole
//! table on every pass.
//!
//! An index serves a lookup when it leads with the lookup's columns, in any
//! order, and is valid, whole (not partial), and a btree or hash.

use std::collections::BTreeSet;

use crate::catalog::table_sql::quote_ident;
use crate::catalog::{Declared, Rule};
use crate::declare::system_catalog::{self, Index};
use crate::spi;

/// One lookup an index should serve.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Needed {
    /// Schema-qualified and quoted.
    pub relation: String,
    pub columns: Vec<String>,
    /// Whether the engine creates it (false: the user's migrations do).
    pub create: bool,
}

impl Needed {
    pub fn ddl(&self) -> String {
        format!(
            "CREATE INDEX ON {} ({});",
            self.relation,
            self.columns
                .iter()
                .map(|c| quote_ident(c))
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}

/// Every lookup the declarations ask for, each once: of a table that goes
/// down, the columns that point at other declared tables, its assigned or
/// partition column; of any table, its origin; of a grouped table's
/// members, by row and by group; of its assignments, by group and by
/// replica.
pub fn needed(tables: &[Declared]) -> Vec<Needed> {
    let mut needed: Vec<Needed> = Vec::new();
    let mut add = |relation: &str, columns: &[String], create: bool| {
        if columns.is_empty() {
            return;
        }
        let set: BTreeSet<&String> = columns.iter().collect();
        let same = needed
            .iter_mut()
            .find(|n| n.relation == relation && n.columns.iter().collect::<BTreeSet<_>>() == set);
        match same {
            Some(n) => n.create |= create,
            None => needed.push(Needed {
                relation: relation.to_owned(),
                columns: columns.to_vec(),
                create,
            }),
        }
    };
    for table in tables {
        let create = table.install && table.indexes;
        if let Some(origin) = &table.origin {
            add(&table.relation, std::slice::from_ref(origin), create);
        }
        if !table.mirror.goes_down() {
            continue;
        }
        for reference in &table.references {
            add(&table.relation, &reference.columns, create);
        }
        if let Some(partition) = &table.partition {
            add(&table.relation, std::slice::from_ref(partition), create);
        }
        match &table.rule {
            Rule::Assigned { column } => add(&table.relation, std::slice::from_ref(column), create),
            Rule::Follows { columns, .. } => add(&table.relation, columns, create),
            Rule::Grouped { members, assigned } => {
                add(&members.relation, &members.row, create);
                add(&members.relation, &members.group, create);
                add(&assigned.relation, &assigned.group, create);
                add(
                    &assigned.relation,
                    std::slice::from_ref(&assigned.replica),
                    create,
                );
            }
            Rule::None | Rule::Broadcast => {}
        }
    }
    needed
}

/// Whether an index serves a lookup of these columns.
pub fn serves(index: &Index, columns: &[String]) -> bool {
    if !index.serves_lookups || index.columns.len() < columns.len() {
        return false;
    }
    let leading: BTreeSet<Option<&String>> = index.columns[..columns.len()]
        .iter()
        .map(Option::as_ref)
        .collect();
    let wanted: BTreeSet<Option<&String>> = columns.iter().map(Some).collect();
    leading == wanted
}

/// The lookups no index of the database serves.
pub fn missing(tables: &[Declared]) -> Vec<Needed> {
    needed(tables)
        .into_iter()
        .filter(|n| {
            let Some(found) = system_catalog::find_relation(&n.relation) else {
                return false;
            };
            !system_catalog::indexes_of(found.oid)
                .iter()
                .any(|i| serves(i, &n.columns))
        })
        .collect()
}

/// Creates the missing indexes the engine creates (a plain CREATE INDEX,
/// which holds writes to the table while it builds).
pub fn create_missing(tables: &[Declared]) {
    for n in missing(tables).iter().filter(|n| n.create) {
        spi::run(&n.ddl());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{Assignments, Members, Mirror, Reference};

    fn index(columns: &[&str]) -> Index {
        Index {
            columns: columns.iter().map(|c| Some((*c).to_owned())).collect(),
            serves_lookups: true,
        }
    }

    fn names(columns: &[&str]) -> Vec<String> {
        columns.iter().map(|c| (*c).to_owned()).collect()
    }

    #[test]
    fn an_index_serves_when_it_leads_with_the_columns_in_any_order() {
        assert!(serves(&index(&["a"]), &names(&["a"])));
        assert!(serves(&index(&["b", "a", "c"]), &names(&["a", "b"])));
        assert!(!serves(&index(&["c", "a"]), &names(&["a"])));
        assert!(!serves(&index(&["a"]), &names(&["a", "b"])));
        let partial = Index {
            serves_lookups: false,
            ..index(&["a"])
        };
        assert!(!serves(&partial, &names(&["a"])));
        let expression = Index {
            columns: vec![None, Some("a".into())],
            serves_lookups: true,
        };
        assert!(!serves(&expression, &names(&["a"])));
    }

    #[test]
    fn every_lookup_is_asked_for_once() {
        let orders = Declared {
            name: "orders".into(),
            relation: "o".into(),
            mirror: Mirror::Catalog,
            rule: Rule::Assigned {
                column: "register_id".into(),
            },
            references: vec![Reference {
                constraint: "f".into(),
                columns: vec!["register_id".into()],
                parent: "registers".into(),
                parent_columns: vec!["id".into()],
                key_types: vec![],
            }],
            partition: Some("company_id".into()),
            install: true,
            indexes: true,
            ..Declared::default()
        };
        let customers = Declared {
            name: "customers".into(),
            relation: "c".into(),
            rule: Rule::Grouped {
                members: Members {
                    relation: "m".into(),
                    row: names(&["customer_id"]),
                    group: names(&["list_id"]),
                    groups: "g".into(),
                },
                assigned: Assignments {
                    relation: "a".into(),
                    group: names(&["list_id"]),
                    replica: "register_id".into(),
                },
            },
            install: true,
            indexes: false,
            ..Declared::default()
        };
        let receipts = Declared {
            relation: "r".into(),
            mirror: Mirror::Record,
            origin: Some("register_id".into()),
            install: true,
            indexes: true,
            ..Declared::default()
        };
        let needed = needed(&[orders, customers, receipts]);
        let shown: Vec<String> = needed.iter().map(Needed::ddl).collect();
        assert_eq!(
            shown,
            [
                "CREATE INDEX ON o (\"register_id\");",
                "CREATE INDEX ON o (\"company_id\");",
                "CREATE INDEX ON m (\"customer_id\");",
                "CREATE INDEX ON m (\"list_id\");",
                "CREATE INDEX ON a (\"list_id\");",
                "CREATE INDEX ON a (\"register_id\");",
                "CREATE INDEX ON r (\"register_id\");",
            ]
        );
        assert!(needed[0].create && !needed[2].create);
    }
}

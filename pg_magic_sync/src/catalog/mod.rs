//! The declarations, as the engine reads them back from its tables
//! (sql/schema.sql, through sql/declarations.sql): where the replicas are,
//! and every declared table with its rule, its references and its columns.
//!
//! `declared_tables()` is what the relay reads, parents first.

pub mod digest;
pub mod table_sql;

use pgrx::prelude::*;
use serde_json::Value;

use magic_sync_proto::key::KeyType;

/// Which way a table's rows travel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mirror {
    /// Written on the server, held by replicas.
    #[default]
    Catalog,
    /// Written by a replica, filed on the server.
    Record,
    /// Written on the server, held by replicas, which write their own
    /// columns of it back.
    Both,
    /// A replica's own row, which the server may wish other values.
    Setting,
}

impl Mirror {
    pub fn name(self) -> &'static str {
        match self {
            Mirror::Catalog => "catalog",
            Mirror::Record => "record",
            Mirror::Both => "both",
            Mirror::Setting => "setting",
        }
    }

    pub fn from_name(name: &str) -> Option<Mirror> {
        [
            Mirror::Catalog,
            Mirror::Record,
            Mirror::Both,
            Mirror::Setting,
        ]
        .into_iter()
        .find(|m| m.name() == name)
    }

    /// Whether the server sends its rows to replicas (and notes them).
    pub fn goes_down(self) -> bool {
        matches!(self, Mirror::Catalog | Mirror::Both)
    }
}

/// How a setting takes a wish.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Apply {
    /// Every wish is carried out.
    Always,
    /// Only while the replica holds the version the wish is based on.
    IfUnchanged,
}

impl Apply {
    pub fn name(self) -> &'static str {
        match self {
            Apply::Always => "always",
            Apply::IfUnchanged => "if_unchanged",
        }
    }

    pub fn from_name(name: &str) -> Option<Apply> {
        match name {
            "always" => Some(Apply::Always),
            "if_unchanged" => Some(Apply::IfUnchanged),
            _ => None,
        }
    }
}

/// Which replicas a table that goes down sends its rows to, for their own
/// sake. Whatever the rule, a row also goes wherever a row that points at
/// it goes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Rule {
    /// No rule: the table reaches a replica only as a parent of rows it
    /// holds. Every table that goes up has none.
    #[default]
    None,
    /// Every live replica (of the row's partition).
    Broadcast,
    /// The replica whose id the column holds.
    Assigned { column: String },
    /// Wherever the row it points at goes: `references[reference]`, whose
    /// columns are `columns`.
    Follows {
        columns: Vec<String>,
        reference: usize,
    },
    /// Every replica given a group the row is a member of.
    Grouped {
        members: Members,
        assigned: Assignments,
    },
}

impl Rule {
    /// The rule's name as `sync.tables.rule` stores it.
    pub fn kind(&self) -> &'static str {
        match self {
            Rule::None => "none",
            Rule::Broadcast => "broadcast",
            Rule::Assigned { .. } => "assigned",
            Rule::Follows { .. } => "follows",
            Rule::Grouped { .. } => "grouped",
        }
    }
}

/// A grouped table's members: which of its rows are in which groups.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Members {
    /// Schema-qualified and quoted.
    pub relation: String,
    /// Its columns that hold the member's key, in the grouped table's key
    /// order.
    pub row: Vec<String>,
    /// Its columns that name the group, in the order of the groups' columns
    /// they point at.
    pub group: Vec<String>,
    /// The table of groups both group tables point at, schema-qualified
    /// and quoted.
    pub groups: String,
}

/// The groups given to replicas.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Assignments {
    /// Schema-qualified and quoted.
    pub relation: String,
    /// Its columns that name the group, in the order of `Members::group`.
    pub group: Vec<String>,
    /// Its column of replica ids.
    pub replica: String,
}

/// A foreign key from a declared table to a declared table (itself
/// included): a row travels with the row it points at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reference {
    /// The foreign key's name.
    pub constraint: String,
    /// The child's columns that hold the parent's key, in the parent's key
    /// order. With partitions, the partition column both share is left out
    /// (unless the parent's key holds it).
    pub columns: Vec<String>,
    /// The parent, as replicas know it.
    pub parent: String,
    /// The parent's key columns, in its key order.
    pub parent_columns: Vec<String>,
    /// The parent's key types, in its key order.
    pub key_types: Vec<KeyType>,
}

/// One declared table.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Declared {
    /// The name replicas know it by.
    pub name: String,
    /// Schema-qualified and quoted: safe to write into SQL as it is.
    pub relation: String,
    pub mirror: Mirror,
    /// For a table that goes down; `Rule::None` for one that goes up.
    pub rule: Rule,
    /// The key, in the order the declaration gives it (the primary key's
    /// columns).
    pub key_columns: Vec<String>,
    pub key_types: Vec<KeyType>,
    /// The columns that travel (every column but the unmirrored ones), with
    /// their types as `format_type` writes them.
    pub columns: Vec<String>,
    pub column_types: Vec<String>,
    /// Its foreign keys to declared tables, by constraint name: the order
    /// of a note's `parents_before`.
    pub references: Vec<Reference>,
    /// The partition column, when the replicas are partitioned: every table
    /// that goes down has it; one that goes up when it has the column.
    pub partition: Option<String>,
    /// The column of the replica a row belongs to (a table keyed by its
    /// replica): uuid.
    pub origin: Option<String>,
    /// The column that orders a record's or a setting's versions: an
    /// integer or timestamptz.
    pub version: Option<String>,
    /// A record's column written once.
    pub created: Option<String>,
    /// A setting's columns the server may wish other values.
    pub desired: Vec<String>,
    /// A setting's way with wishes.
    pub apply: Option<Apply>,
    /// A table written on both sides: the columns the replica owns. A
    /// change to only these is not noted.
    pub replica_owned: Vec<String>,
    /// Columns that do not travel (left out of `columns`).
    pub unmirrored: Vec<String>,
    /// The view of the rows that travel for their own sake,
    /// schema-qualified and quoted; None: every row of the table.
    pub active: Option<String>,
    /// Whether the engine writes its triggers (false: the user's
    /// migrations do, from `sync.triggers()`).
    pub install: bool,
    /// Whether the engine creates the indexes its lookups need.
    pub indexes: bool,
    /// Parents before children: the order tables are sent in.
    pub position: i32,
}

impl Declared {
    /// The relation rows travel from for their own sake: the active view,
    /// or the table.
    pub fn source(&self) -> &str {
        self.active.as_deref().unwrap_or(&self.relation)
    }

    /// The reference a `follows` rule follows.
    pub fn followed(&self) -> Option<&Reference> {
        match self.rule {
            Rule::Follows { reference, .. } => self.references.get(reference),
            _ => None,
        }
    }

    /// The columns a change of which alone is not noted.
    /// With an active view, a column that does not travel may still decide
    /// whether a row is in the view (an archive date): its changes are noted.
    pub fn unnoted(&self) -> Vec<&str> {
        let unmirrored = if self.active.is_some() {
            &[][..]
        } else {
            &self.unmirrored[..]
        };
        self.replica_owned
            .iter()
            .chain(unmirrored)
            .map(String::as_str)
            .collect()
    }
}

/// Where the replicas are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Replicas {
    /// Schema-qualified and quoted.
    pub relation: String,
    pub id_column: String,
    /// SQL: the condition a replica that should receive anything meets.
    pub live: String,
    /// The column that splits rows and replicas into partitions.
    pub partition: Option<String>,
}

pub fn key_type_from_name(name: &str) -> KeyType {
    match name {
        "integer" => KeyType::Integer,
        _ => KeyType::Uuid,
    }
}

/// The replicas' declaration, if there is one.
pub fn replicas() -> Option<Replicas> {
    Spi::connect(|client| {
        let mut rows = client
            .select(
                "SELECT relation, id_column, live, partition_column FROM sync.replica_source",
                Some(1),
                &[],
            )
            .expect("reads sync.replica_source");
        rows.next().map(|row| Replicas {
            relation: row.get(1).ok().flatten().unwrap_or_default(),
            id_column: row.get(2).ok().flatten().unwrap_or_default(),
            live: row.get(3).ok().flatten().unwrap_or_default(),
            partition: row.get(4).ok().flatten(),
        })
    })
}

/// Every declared table, parents first.
pub fn declared_tables() -> Vec<Declared> {
    let rows: Vec<Value> = Spi::connect(|client| {
        client
            .select("SELECT sync_internal.declarations()", None, &[])
            .expect("reads sync.tables")
            .filter_map(|row| row.get::<pgrx::JsonB>(1).ok().flatten().map(|j| j.0))
            .collect()
    });
    rows.iter().map(from_json).collect()
}

// ---------------------------------------------------------------------------
// A declaration to and from JSON: how sync.tables and its companions are
// read in one query (sync_internal.declarations()), and how declare.rs
// writes them.

fn text(value: &Value, field: &str) -> String {
    value[field].as_str().unwrap_or_default().to_owned()
}

fn optional(value: &Value, field: &str) -> Option<String> {
    value[field].as_str().map(str::to_owned)
}

fn list(value: &Value, field: &str) -> Vec<String> {
    value[field]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|i| i.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn key_types(value: &Value, field: &str) -> Vec<KeyType> {
    list(value, field)
        .iter()
        .map(|t| key_type_from_name(t))
        .collect()
}

/// A declaration as `sync_internal.declarations()` answers it.
pub fn from_json(value: &Value) -> Declared {
    let references: Vec<Reference> = value["references"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .map(|r| Reference {
                    constraint: text(r, "constraint_name"),
                    columns: list(r, "columns"),
                    parent: text(r, "parent"),
                    parent_columns: list(r, "parent_columns"),
                    key_types: key_types(r, "parent_key_types"),
                })
                .collect()
        })
        .unwrap_or_default();
    let rule_columns = list(value, "rule_columns");
    let rule = match value["rule"].as_str().unwrap_or_default() {
        "broadcast" => Rule::Broadcast,
        "assigned" => Rule::Assigned {
            column: rule_columns.first().cloned().unwrap_or_default(),
        },
        "follows" => Rule::Follows {
            reference: followed(&references, &rule_columns),
            columns: rule_columns,
        },
        "grouped" => {
            let g = &value["group"];
            Rule::Grouped {
                members: Members {
                    relation: text(g, "members"),
                    row: list(g, "member_row"),
                    group: list(g, "member_group"),
                    groups: text(g, "groups"),
                },
                assigned: Assignments {
                    relation: text(g, "assigned"),
                    group: list(g, "assigned_group"),
                    replica: text(g, "assigned_replica"),
                },
            }
        }
        _ => Rule::None,
    };
    Declared {
        name: text(value, "name"),
        relation: text(value, "relation"),
        mirror: Mirror::from_name(&text(value, "mirror")).unwrap_or_default(),
        rule,
        key_columns: list(value, "key_columns"),
        key_types: key_types(value, "key_types"),
        columns: list(value, "columns"),
        column_types: list(value, "column_types"),
        references,
        partition: optional(value, "partition_column"),
        origin: optional(value, "origin"),
        version: optional(value, "version"),
        created: optional(value, "created"),
        desired: list(value, "desired"),
        apply: optional(value, "apply").and_then(|a| Apply::from_name(&a)),
        replica_owned: list(value, "replica_owned"),
        unmirrored: list(value, "unmirrored"),
        active: optional(value, "active"),
        install: value["install"].as_bool().unwrap_or(true),
        indexes: value["indexes"].as_bool().unwrap_or(true),
        position: value["position"].as_i64().unwrap_or_default() as i32,
    }
}

/// The reference whose columns a follows rule names (as a set).
pub fn followed(references: &[Reference], columns: &[String]) -> usize {
    references
        .iter()
        .position(|r| {
            let mut a = r.columns.clone();
            let mut b = columns.to_vec();
            a.sort();
            b.sort();
            a == b
        })
        .unwrap_or(usize::MAX)
}

/// The digest of the declarations, which the relay compares with the one
/// it last ran with: a different one provisions every live replica again.
pub fn declarations_digest() -> String {
    crate::catalog::digest::digest(replicas().as_ref(), &declared_tables())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_declaration_reads_back_from_its_json() {
        let declared = from_json(&json!({
            "name": "nutrition", "relation": "\"shop\".\"nutrition\"", "mirror": "catalog",
            "rule": "follows", "rule_columns": ["product_id"],
            "key_columns": ["product_id"], "key_types": ["uuid"],
            "columns": ["product_id", "calories"], "column_types": ["uuid", "integer"],
            "references": [{"constraint_name": "nutrition_product_id_fkey",
                            "columns": ["product_id"], "parent": "products",
                            "parent_columns": ["id"], "parent_key_types": ["uuid"]}],
            "install": true, "indexes": false, "position": 2
        }));
        assert_eq!(declared.mirror, Mirror::Catalog);
        assert_eq!(
            declared.rule,
            Rule::Follows {
                columns: vec!["product_id".into()],
                reference: 0
            }
        );
        assert_eq!(declared.references[0].parent, "products");
        assert_eq!(declared.references[0].key_types, vec![KeyType::Uuid]);
        assert!(declared.install && !declared.indexes);
        assert_eq!(declared.position, 2);
        assert_eq!(declared.partition, None);
    }

    #[test]
    fn a_grouped_rule_reads_back_with_its_group_tables() {
        let declared = from_json(&json!({
            "name": "customers", "mirror": "catalog", "rule": "grouped",
            "group": {"members": "m", "member_row": ["customer_id"], "member_group": ["list_id"],
                      "groups": "g", "assigned": "a", "assigned_group": ["list_id"],
                      "assigned_replica": "register_id"}
        }));
        let Rule::Grouped { members, assigned } = declared.rule else {
            panic!("not grouped")
        };
        assert_eq!(members.row, ["customer_id"]);
        assert_eq!(assigned.replica, "register_id");
    }

    #[test]
    fn only_catalogs_and_two_way_tables_go_down() {
        assert!(Mirror::Catalog.goes_down() && Mirror::Both.goes_down());
        assert!(!Mirror::Record.goes_down() && !Mirror::Setting.goes_down());
    }
}

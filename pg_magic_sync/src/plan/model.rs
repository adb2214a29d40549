//! What the planner knows of each declared table: which replicas its rules
//! send its rows to, what its rows point at, and what follows them.

use magic_sync_proto::key::KeyType;

use crate::catalog::{self, Declared};

/// Which replicas a table's rules send its rows to, for their own sake.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rule {
    /// Every live replica (of the row's partition).
    Broadcast,
    /// The replica the column names.
    Assigned { column: String },
    /// Wherever the row the reference points at goes.
    Follows { reference: usize },
    /// Every replica given a group the row is a member of.
    Grouped {
        members: Members,
        assigned: Assignments,
    },
    /// None: the table reaches a replica only as a parent of rows it holds.
    None,
}

/// A grouped table's members: which rows are in which groups.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Members {
    /// Schema-qualified and quoted.
    pub relation: String,
    /// The columns that hold the member's key, in the grouped table's key
    /// order.
    pub row: Vec<String>,
    /// The columns that name the group.
    pub group: Vec<String>,
}

/// The groups given to replicas.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Assignments {
    /// Schema-qualified and quoted.
    pub relation: String,
    /// The columns that name the group, in the order of `Members::group`.
    pub group: Vec<String>,
    /// The column of replica ids.
    pub replica: String,
}

/// A foreign key from one declared table to another.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reference {
    /// The parent, as replicas know it.
    pub parent: String,
    /// The child's columns that hold the parent's key, in the parent's key
    /// order (a partition column the two share is left out).
    pub columns: Vec<String>,
    /// The parent's key types, in its key order.
    pub key_types: Vec<KeyType>,
}

/// One table, as the planner sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanTable {
    pub name: String,
    /// Schema-qualified and quoted.
    pub relation: String,
    /// The relation rows travel from for their own sake: an active view, or
    /// the table itself. Schema-qualified and quoted.
    pub source: String,
    pub key_columns: Vec<String>,
    pub key_types: Vec<KeyType>,
    /// Whether the server sends its rows (a catalog, or a table written on
    /// both sides).
    pub goes_down: bool,
    pub rule: Rule,
    /// The column that says which partition a row is in.
    pub partition: Option<String>,
    pub references: Vec<Reference>,
    /// Parents before children.
    pub position: i32,
}

impl PlanTable {
    /// The reference a `follows` rule follows.
    pub fn followed(&self) -> Option<&Reference> {
        match self.rule {
            Rule::Follows { reference } => self.references.get(reference),
            _ => None,
        }
    }
}

impl PlanTable {
    /// The planner's view of a declared table.
    pub fn from_declared(table: &Declared) -> PlanTable {
        PlanTable {
            name: table.name.clone(),
            relation: table.relation.clone(),
            source: table.source().to_owned(),
            key_columns: table.key_columns.clone(),
            key_types: table.key_types.clone(),
            goes_down: table.mirror.goes_down(),
            rule: rule_of(&table.rule),
            partition: table.partition.clone(),
            references: table
                .references
                .iter()
                .map(|r| Reference {
                    parent: r.parent.clone(),
                    columns: r.columns.clone(),
                    key_types: r.key_types.clone(),
                })
                .collect(),
            position: table.position,
        }
    }
}

fn rule_of(rule: &catalog::Rule) -> Rule {
    match rule {
        catalog::Rule::None => Rule::None,
        catalog::Rule::Broadcast => Rule::Broadcast,
        catalog::Rule::Assigned { column } => Rule::Assigned {
            column: column.clone(),
        },
        catalog::Rule::Follows { reference, .. } => Rule::Follows {
            reference: *reference,
        },
        catalog::Rule::Grouped { members, assigned } => Rule::Grouped {
            members: Members {
                relation: members.relation.clone(),
                row: members.row.clone(),
                group: members.group.clone(),
            },
            assigned: Assignments {
                relation: assigned.relation.clone(),
                group: assigned.group.clone(),
                replica: assigned.replica.clone(),
            },
        },
    }
}

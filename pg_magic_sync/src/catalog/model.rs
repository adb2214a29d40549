//! The declarations as the engine works with them: where the replicas are
//! (`Replicas`), and each declared table (`Declared`) with its rule, its
//! references and its columns. How they are kept in the engine's tables is
//! store.rs's business; nothing here reads or writes SQL.

use magic_sync_proto::key::KeyType;

// Which way a table's rows travel, and how a setting takes a wish: the
// words both halves declare tables with.
pub use magic_sync_proto::mirror::{Apply, Mirror};

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
    /// The engine's table of wishes only (catalog/wishes.rs): the settings
    /// whose wishes it carries, to encode each wish's row as its setting's.
    /// Empty for every declared table.
    pub wishes_of: Vec<Declared>,
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

/// The reference whose columns a follows rule names (as a set): its index
/// in `references`, or `usize::MAX` when none has them.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_catalogs_and_two_way_tables_go_down() {
        assert!(Mirror::Catalog.goes_down() && Mirror::Both.goes_down());
        assert!(!Mirror::Record.goes_down() && !Mirror::Setting.goes_down());
    }
}

//! How the declarations are kept in the engine's tables (sql/declarations.sql):
//! sync.replica_source, sync.tables, sync.table_references and sync.groups.
//!
//! Each table has a row type whose fields are its columns, by name
//! (`ReplicaSourceRow`, `TableRow`, `ReferenceRow`, `GroupRow`), and this
//! file is the one mapping between those rows and the model (`Replicas`,
//! `Declared`), both ways. Rows travel to and from SQL as jsonb keyed by
//! column name: written with `jsonb_populate_recordset`, one statement per
//! table, read with `to_jsonb` (the queries are in sql/catalog/).
//!
//! What the engine reads back from its own tables it wrote itself: a NULL
//! where a value must be, or a value it does not know (a mirror, a rule, an
//! apply, a key type), is an engine fault, raised as one, never read as a
//! default.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use magic_sync_proto::key::KeyType;

use crate::catalog::model::{
    followed, Apply, Assignments, Declared, Members, Mirror, Reference, Replicas, Rule,
};
use crate::error::Error;
use crate::spi;

const DECLARATIONS: &str = include_str!("../../../sql/catalog/declarations.sql");
const REPLICA_SOURCE: &str = include_str!("../../../sql/catalog/replica_source.sql");
const WRITE_REPLICA_SOURCE: &str = include_str!("../../../sql/catalog/write_replica_source.sql");
const WRITE_TABLES: &str = include_str!("../../../sql/catalog/write_tables.sql");
const WRITE_TABLE_REFERENCES: &str =
    include_str!("../../../sql/catalog/write_table_references.sql");
const WRITE_GROUPS: &str = include_str!("../../../sql/catalog/write_groups.sql");

/// The detail of a fault in what the engine wrote itself.
const WRITTEN_BY_THE_ENGINE: &str =
    "The engine writes these tables itself: they were changed by hand, or this is a bug.";

/// The row of sync.replica_source, less `only_one` and `declared_at`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaSourceRow {
    pub relation: String,
    pub id_column: String,
    pub live: String,
    pub partition_column: Option<String>,
}

impl From<&Replicas> for ReplicaSourceRow {
    fn from(replicas: &Replicas) -> ReplicaSourceRow {
        ReplicaSourceRow {
            relation: replicas.relation.clone(),
            id_column: replicas.id_column.clone(),
            live: replicas.live.clone(),
            partition_column: replicas.partition.clone(),
        }
    }
}

impl From<ReplicaSourceRow> for Replicas {
    fn from(row: ReplicaSourceRow) -> Replicas {
        Replicas {
            relation: row.relation,
            id_column: row.id_column,
            live: row.live,
            partition: row.partition_column,
        }
    }
}

/// A row of sync.tables, less `declared_at` (which the SQL keeps).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableRow {
    pub name: String,
    pub relation: String,
    /// `Mirror::name`.
    pub mirror: String,
    /// `Rule::kind`.
    pub rule: String,
    /// assigned: its column; follows: the columns it follows; else empty.
    pub rule_columns: Vec<String>,
    pub key_columns: Vec<String>,
    /// `KeyType::name`, in key order.
    pub key_types: Vec<String>,
    pub columns: Vec<String>,
    pub column_types: Vec<String>,
    pub partition_column: Option<String>,
    pub origin: Option<String>,
    pub version: Option<String>,
    pub created: Option<String>,
    pub desired: Vec<String>,
    /// `Apply::name`.
    pub apply: Option<String>,
    pub replica_owned: Vec<String>,
    pub unmirrored: Vec<String>,
    pub active: Option<String>,
    pub install: bool,
    pub indexes: bool,
    /// The table as declared (`Shape`): not part of `Declared`.
    pub table_columns: Vec<String>,
    pub table_types: Vec<String>,
    pub table_not_null: Vec<bool>,
    pub position: i32,
    /// The options as given (`resolve::Request::to_json`): not part of
    /// `Declared`.
    pub request: Value,
}

/// A row of sync.table_references.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReferenceRow {
    pub table_name: String,
    /// From 1, in the order of `Declared::references`.
    pub position: i32,
    pub constraint_name: String,
    pub columns: Vec<String>,
    pub parent: String,
    pub parent_columns: Vec<String>,
    /// `KeyType::name`, in the parent's key order.
    pub parent_key_types: Vec<String>,
}

/// A row of sync.groups: a grouped table's `Members` and `Assignments`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupRow {
    pub table_name: String,
    pub groups: String,
    pub members: String,
    pub member_row: Vec<String>,
    pub member_group: Vec<String>,
    pub assigned: String,
    pub assigned_group: Vec<String>,
    pub assigned_replica: String,
}

/// Every column of a declared table as it was when declared, with its type
/// (as `format_type` writes it) and whether it is NOT NULL: what the
/// relay's check holds the table against.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Shape {
    pub columns: Vec<String>,
    pub types: Vec<String>,
    pub not_null: Vec<bool>,
}

/// One declared table as the engine's tables keep it: its row of
/// sync.tables, its references, and its groups when it is grouped. As
/// jsonb, what sql/catalog/declarations.sql answers for each table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableRows {
    pub table: TableRow,
    pub references: Vec<ReferenceRow>,
    pub group: Option<GroupRow>,
}

impl TableRows {
    /// The rows that record `table`, declared over `shape` with the
    /// options `request`.
    pub fn of(table: &Declared, shape: Shape, request: Value) -> TableRows {
        let rule_columns = match &table.rule {
            Rule::Assigned { column } => vec![column.clone()],
            Rule::Follows { columns, .. } => columns.clone(),
            Rule::None | Rule::Broadcast | Rule::Grouped { .. } => Vec::new(),
        };
        let group = match &table.rule {
            Rule::Grouped { members, assigned } => Some(GroupRow {
                table_name: table.name.clone(),
                groups: members.groups.clone(),
                members: members.relation.clone(),
                member_row: members.row.clone(),
                member_group: members.group.clone(),
                assigned: assigned.relation.clone(),
                assigned_group: assigned.group.clone(),
                assigned_replica: assigned.replica.clone(),
            }),
            _ => None,
        };
        let references = table
            .references
            .iter()
            .enumerate()
            .map(|(i, r)| ReferenceRow {
                table_name: table.name.clone(),
                position: i as i32 + 1,
                constraint_name: r.constraint.clone(),
                columns: r.columns.clone(),
                parent: r.parent.clone(),
                parent_columns: r.parent_columns.clone(),
                parent_key_types: key_type_names(&r.key_types),
            })
            .collect();
        TableRows {
            table: TableRow {
                name: table.name.clone(),
                relation: table.relation.clone(),
                mirror: table.mirror.name().to_owned(),
                rule: table.rule.kind().to_owned(),
                rule_columns,
                key_columns: table.key_columns.clone(),
                key_types: key_type_names(&table.key_types),
                columns: table.columns.clone(),
                column_types: table.column_types.clone(),
                partition_column: table.partition.clone(),
                origin: table.origin.clone(),
                version: table.version.clone(),
                created: table.created.clone(),
                desired: table.desired.clone(),
                apply: table.apply.map(|a| a.name().to_owned()),
                replica_owned: table.replica_owned.clone(),
                unmirrored: table.unmirrored.clone(),
                active: table.active.clone(),
                install: table.install,
                indexes: table.indexes,
                table_columns: shape.columns,
                table_types: shape.types,
                table_not_null: shape.not_null,
                position: table.position,
                request,
            },
            references,
            group,
        }
    }

    /// The rows as sql/catalog/declarations.sql answers them; a row that
    /// does not read (a NULL where a value must be) is an engine fault.
    pub fn from_json(value: Value) -> Result<TableRows, Error> {
        let what = match value["table"]["name"].as_str() {
            Some(name) => format!("the declaration of {name}"),
            None => "a declaration".to_owned(),
        };
        from_json(value, &what)
    }

    /// The declaration the rows record. What the engine cannot read in
    /// them is an engine fault.
    pub fn into_declared(self) -> Result<Declared, Error> {
        let TableRows {
            table,
            mut references,
            group,
        } = self;
        let TableRow {
            name,
            relation,
            mirror,
            rule,
            rule_columns,
            key_columns,
            key_types,
            columns,
            column_types,
            partition_column,
            origin,
            version,
            created,
            desired,
            apply,
            replica_owned,
            unmirrored,
            active,
            install,
            indexes,
            table_columns: _,
            table_types: _,
            table_not_null: _,
            position,
            request: _,
        } = table;
        let of = |column: &str| format!("sync.tables.{column} of {name}");
        let mirror =
            Mirror::from_name(&mirror).ok_or_else(|| Error::unknown(&of("mirror"), &mirror))?;
        let apply = apply
            .map(|a| Apply::from_name(&a).ok_or_else(|| Error::unknown(&of("apply"), &a)))
            .transpose()?;
        let key_types = key_types_of(&key_types, &of("key_types"))?;
        same_length(&of("key_types"), key_types.len(), key_columns.len())?;
        same_length(&of("column_types"), column_types.len(), columns.len())?;
        references.sort_by_key(|r| r.position);
        let references = references
            .into_iter()
            .map(|r| {
                let what = format!(
                    "sync.table_references.parent_key_types of {name} ({})",
                    r.constraint_name
                );
                Ok(Reference {
                    key_types: key_types_of(&r.parent_key_types, &what)?,
                    constraint: r.constraint_name,
                    columns: r.columns,
                    parent: r.parent,
                    parent_columns: r.parent_columns,
                })
            })
            .collect::<Result<Vec<Reference>, Error>>()?;
        let rule = rule_of(&name, &rule, rule_columns, &references, group)?;
        Ok(Declared {
            name,
            relation,
            mirror,
            rule,
            key_columns,
            key_types,
            columns,
            column_types,
            references,
            partition: partition_column,
            origin,
            version,
            created,
            desired,
            apply,
            replica_owned,
            unmirrored,
            active,
            install,
            indexes,
            position,
            wishes_of: Vec::new(),
        })
    }
}

/// One declaration, from the JSON sql/catalog/declarations.sql answers.
#[cfg(test)]
pub fn declared_from_json(value: Value) -> Result<Declared, Error> {
    TableRows::from_json(value)?.into_declared()
}

/// The rule of a table, from its row (`rule`, `rule_columns`), its
/// references and its row of sync.groups.
fn rule_of(
    name: &str,
    rule: &str,
    rule_columns: Vec<String>,
    references: &[Reference],
    group: Option<GroupRow>,
) -> Result<Rule, Error> {
    let rule = match (rule, group) {
        ("grouped", Some(g)) => Rule::Grouped {
            members: Members {
                relation: g.members,
                row: g.member_row,
                group: g.member_group,
                groups: g.groups,
            },
            assigned: Assignments {
                relation: g.assigned,
                group: g.assigned_group,
                replica: g.assigned_replica,
            },
        },
        ("grouped", None) => {
            return Err(Error::engine(
                format!("magic_sync: sync.groups has no row for the grouped table {name}"),
                WRITTEN_BY_THE_ENGINE,
            ))
        }
        (rule, Some(_)) => {
            return Err(Error::engine(
                format!("magic_sync: sync.groups has a row for {name}, whose rule is {rule:?}"),
                WRITTEN_BY_THE_ENGINE,
            ))
        }
        ("none", None) => Rule::None,
        ("broadcast", None) => Rule::Broadcast,
        ("assigned", None) => match <[String; 1]>::try_from(rule_columns) {
            Ok([column]) => Rule::Assigned { column },
            Err(columns) => {
                return Err(Error::engine(
                    format!(
                        "magic_sync: the assigned rule of {name} names {} columns in sync.tables.rule_columns, not one",
                        columns.len()
                    ),
                    WRITTEN_BY_THE_ENGINE,
                ))
            }
        },
        ("follows", None) => {
            let reference = followed(references, &rule_columns);
            if reference == usize::MAX {
                return Err(Error::engine(
                    format!(
                        "magic_sync: {name} follows ({}), none of its references in sync.table_references",
                        rule_columns.join(", ")
                    ),
                    WRITTEN_BY_THE_ENGINE,
                ));
            }
            Rule::Follows {
                columns: rule_columns,
                reference,
            }
        }
        (other, None) => return Err(Error::unknown(&format!("sync.tables.rule of {name}"), other)),
    };
    Ok(rule)
}

/// A key type by the name a declaration stores (`KeyType::name`).
pub fn key_type_from_name(name: &str) -> Option<KeyType> {
    [KeyType::Uuid, KeyType::Integer]
        .into_iter()
        .find(|k| k.name() == name)
}

fn key_type_names(types: &[KeyType]) -> Vec<String> {
    types.iter().map(|k| k.name().to_owned()).collect()
}

fn key_types_of(names: &[String], what: &str) -> Result<Vec<KeyType>, Error> {
    names
        .iter()
        .map(|n| key_type_from_name(n).ok_or_else(|| Error::unknown(what, n)))
        .collect()
}

/// Two lists the engine writes side by side, which must be as long.
fn same_length(what: &str, found: usize, expected: usize) -> Result<(), Error> {
    if found == expected {
        return Ok(());
    }
    Err(Error::engine(
        format!("magic_sync: {what} holds {found} values for {expected} columns"),
        WRITTEN_BY_THE_ENGINE,
    ))
}

/// A row type from its jsonb; one that does not read is an engine fault,
/// with the row in the detail.
fn from_json<T: DeserializeOwned>(value: Value, what: &str) -> Result<T, Error> {
    T::deserialize(&value).map_err(|e| {
        Error::engine(
            format!("magic_sync: {what} cannot be read from the engine's tables: {e}"),
            value.to_string(),
        )
    })
}

fn jsonb<T: Serialize>(value: &T) -> pgrx::JsonB {
    match serde_json::to_value(value) {
        Ok(v) => pgrx::JsonB(v),
        // The row types are strings, lists, numbers and JSON: nothing that
        // does not serialize.
        Err(e) => Error::engine(
            format!("magic_sync: a declaration cannot be written as JSON: {e}"),
            std::any::type_name::<T>(),
        )
        .raise(),
    }
}

/// Each row a query answers, its one column a jsonb that reads as `T`.
fn read_rows<T: DeserializeOwned>(sql: &'static str, what: &str) -> Result<Vec<T>, Error> {
    let values: Vec<Value> = spi::select_fixed(sql, |rows| {
        rows.map(|row| spi::column::<pgrx::JsonB>(&row, 1, what).0)
            .collect()
    });
    values.into_iter().map(|v| from_json(v, what)).collect()
}

/// The replicas' declaration, if there is one.
pub fn replicas() -> Option<Replicas> {
    let rows: Vec<ReplicaSourceRow> =
        read_rows(REPLICA_SOURCE, "the row of sync.replica_source").unwrap_or_else(|e| e.raise());
    rows.into_iter().next().map(Replicas::from)
}

/// The rows of every declared table, parents first.
pub fn table_rows() -> Vec<TableRows> {
    let values: Vec<Value> = spi::select_fixed(DECLARATIONS, |rows| {
        rows.map(|row| spi::column::<pgrx::JsonB>(&row, 1, "a declaration").0)
            .collect()
    });
    values
        .into_iter()
        .map(|v| TableRows::from_json(v).unwrap_or_else(|e| e.raise()))
        .collect()
}

/// Every declared table, parents first.
pub fn declared_tables() -> Vec<Declared> {
    table_rows()
        .into_iter()
        .map(|rows| rows.into_declared().unwrap_or_else(|e| e.raise()))
        .collect()
}

/// Declares the replicas, in place of the declaration there.
pub fn write_replicas(replicas: &Replicas) {
    spi::run_with(
        WRITE_REPLICA_SOURCE,
        &[jsonb(&ReplicaSourceRow::from(replicas)).into()],
    );
}

/// Writes the declared tables in place of those there: a table no longer
/// among them is forgotten. `touched`: the relation just declared, whose
/// declared_at is stamped; every other table keeps its own.
pub fn write_tables(tables: &[TableRows], touched: Option<&str>) {
    let relations: Vec<String> = tables.iter().map(|t| t.table.relation.clone()).collect();
    spi::run_with(
        "DELETE FROM sync.tables WHERE relation <> ALL($1)",
        &[relations.into()],
    );
    spi::run("DELETE FROM sync.table_references");
    spi::run("DELETE FROM sync.groups");
    // Names move between tables only through a moment without either.
    spi::run("UPDATE sync.tables SET name = '#' || relation");
    let rows: Vec<&TableRow> = tables.iter().map(|t| &t.table).collect();
    spi::run_with(WRITE_TABLES, &[jsonb(&rows).into(), touched.into()]);
    let references: Vec<&ReferenceRow> = tables.iter().flat_map(|t| &t.references).collect();
    spi::run_with(WRITE_TABLE_REFERENCES, &[jsonb(&references).into()]);
    let groups: Vec<&GroupRow> = tables.iter().filter_map(|t| t.group.as_ref()).collect();
    spi::run_with(WRITE_GROUPS, &[jsonb(&groups).into()]);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// As `jsonb` writes it, without the path that raises a PostgreSQL
    /// error: a plain test runs outside a backend.
    fn to_json<T: Serialize>(value: &T) -> Value {
        serde_json::to_value(value).unwrap()
    }
    use serde_json::json;

    /// A row of sync.tables as sql/catalog/declarations.sql answers it,
    /// with `fields` in place of its own.
    fn table_json(fields: Value) -> Value {
        let mut table = json!({
            "name": "products", "relation": "\"shop\".\"products\"", "mirror": "catalog",
            "rule": "broadcast", "rule_columns": [],
            "key_columns": ["id"], "key_types": ["uuid"],
            "columns": ["id"], "column_types": ["uuid"],
            "partition_column": null, "origin": null, "version": null, "created": null,
            "desired": [], "apply": null, "replica_owned": [], "unmirrored": [], "active": null,
            "install": true, "indexes": true,
            "table_columns": ["id"], "table_types": ["uuid"], "table_not_null": [true],
            "position": 1, "request": {"relation": "shop.products"}
        });
        for (k, v) in fields.as_object().into_iter().flatten() {
            table[k] = v.clone();
        }
        table
    }

    #[test]
    fn a_declaration_reads_back_from_its_json() -> Result<(), Error> {
        let declared = declared_from_json(json!({
            "table": table_json(json!({
                "name": "nutrition", "relation": "\"shop\".\"nutrition\"", "mirror": "catalog",
                "rule": "follows", "rule_columns": ["product_id"],
                "key_columns": ["product_id"], "key_types": ["uuid"],
                "columns": ["product_id", "calories"], "column_types": ["uuid", "integer"],
                "install": true, "indexes": false, "position": 2
            })),
            "references": [{"table_name": "nutrition", "position": 1,
                            "constraint_name": "nutrition_product_id_fkey",
                            "columns": ["product_id"], "parent": "products",
                            "parent_columns": ["id"], "parent_key_types": ["uuid"]}],
            "group": null
        }))?;
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
        Ok(())
    }

    #[test]
    fn a_grouped_rule_reads_back_with_its_group_tables() -> Result<(), Error> {
        let declared = declared_from_json(json!({
            "table": table_json(json!({"name": "customers", "mirror": "catalog", "rule": "grouped"})),
            "references": [],
            "group": {"table_name": "customers", "members": "m", "member_row": ["customer_id"],
                      "member_group": ["list_id"], "groups": "g", "assigned": "a",
                      "assigned_group": ["list_id"], "assigned_replica": "register_id"}
        }))?;
        let Rule::Grouped { members, assigned } = declared.rule else {
            panic!("not grouped")
        };
        assert_eq!(members.row, ["customer_id"]);
        assert_eq!(assigned.replica, "register_id");
        Ok(())
    }

    fn a_setting_with_everything() -> Declared {
        Declared {
            name: "lines".into(),
            relation: "\"shop\".\"lines\"".into(),
            mirror: Mirror::Setting,
            rule: Rule::Follows {
                columns: vec!["order_id".into()],
                reference: 1,
            },
            key_columns: vec!["order_id".into(), "line".into()],
            key_types: vec![KeyType::Uuid, KeyType::Integer],
            columns: vec!["order_id".into(), "line".into(), "note".into()],
            column_types: vec!["uuid".into(), "integer".into(), "text".into()],
            references: vec![
                Reference {
                    constraint: "lines_register_fkey".into(),
                    columns: vec!["register_id".into()],
                    parent: "registers".into(),
                    parent_columns: vec!["id".into()],
                    key_types: vec![KeyType::Uuid],
                },
                Reference {
                    constraint: "lines_order_fkey".into(),
                    columns: vec!["order_id".into()],
                    parent: "orders".into(),
                    parent_columns: vec!["id".into()],
                    key_types: vec![KeyType::Uuid],
                },
            ],
            partition: Some("company_id".into()),
            origin: Some("register_id".into()),
            version: Some("updated_at".into()),
            created: Some("created_at".into()),
            desired: vec!["note".into()],
            apply: Some(Apply::IfUnchanged),
            replica_owned: vec!["seen".into()],
            unmirrored: vec!["secret".into()],
            active: Some("\"shop\".\"open_lines\"".into()),
            install: false,
            indexes: true,
            position: 3,
            wishes_of: Vec::new(),
        }
    }

    /// Written as rows, through their JSON, and read back.
    fn round_trip(table: &Declared) -> Result<Declared, Error> {
        let rows = TableRows::of(table, Shape::default(), json!({}));
        declared_from_json(to_json(&rows))
    }

    #[test]
    fn a_declaration_written_as_rows_reads_back_the_same() -> Result<(), Error> {
        let setting = a_setting_with_everything();
        assert_eq!(round_trip(&setting)?, setting);
        let grouped = Declared {
            mirror: Mirror::Catalog,
            rule: Rule::Grouped {
                members: Members {
                    relation: "\"shop\".\"members\"".into(),
                    row: vec!["customer_id".into()],
                    group: vec!["list_id".into()],
                    groups: "\"shop\".\"lists\"".into(),
                },
                assigned: Assignments {
                    relation: "\"shop\".\"assigned\"".into(),
                    group: vec!["list_id".into()],
                    replica: "register_id".into(),
                },
            },
            apply: None,
            ..a_setting_with_everything()
        };
        assert_eq!(round_trip(&grouped)?, grouped);
        let assigned = Declared {
            rule: Rule::Assigned {
                column: "register_id".into(),
            },
            ..Declared::default()
        };
        assert_eq!(round_trip(&assigned)?, assigned);
        assert_eq!(round_trip(&Declared::default())?, Declared::default());
        let replicas = Replicas {
            relation: "\"shop\".\"registers\"".into(),
            id_column: "id".into(),
            live: "active".into(),
            partition: Some("company_id".into()),
        };
        let row: ReplicaSourceRow =
            from_json(to_json(&ReplicaSourceRow::from(&replicas)), "replicas")?;
        assert_eq!(Replicas::from(row), replicas);
        Ok(())
    }

    fn refusal(value: Value) -> String {
        match declared_from_json(value) {
            Ok(declared) => panic!("read as {declared:?}"),
            Err(Error::Engine { message, .. }) => message,
            Err(other) => panic!("not an engine fault: {other}"),
        }
    }

    #[test]
    fn an_unknown_mirror_read_back_is_refused() {
        let message = refusal(json!({
            "table": table_json(json!({"mirror": "sideways"})),
            "references": [], "group": null
        }));
        assert!(
            message.contains("sync.tables.mirror of products"),
            "{message}"
        );
        assert!(message.contains("sideways"), "{message}");
    }

    #[test]
    fn a_null_or_an_unknown_value_read_back_is_refused_not_defaulted() {
        let with =
            |fields: Value| json!({"table": table_json(fields), "references": [], "group": null});
        assert!(refusal(with(json!({"relation": null}))).contains("products"));
        assert!(refusal(with(json!({"name": null}))).contains("a declaration"));
        assert!(refusal(with(json!({"install": null}))).contains("products"));
        assert!(refusal(with(json!({"rule": "sometimes"}))).contains("sync.tables.rule"));
        assert!(refusal(with(json!({"apply": "never"}))).contains("sync.tables.apply"));
        assert!(refusal(with(json!({"key_types": ["text"]}))).contains("sync.tables.key_types"));
        assert!(refusal(with(json!({"rule": "grouped"}))).contains("sync.groups"));
        assert!(refusal(with(json!({"rule": "assigned"}))).contains("not one"));
        assert!(
            refusal(with(json!({"rule": "follows", "rule_columns": ["x"]}))).contains("follows")
        );
    }

    /// The columns an INSERT of sql/catalog/ names, in order.
    fn inserted_columns(sql: &str) -> Vec<String> {
        let start = sql
            .find("INSERT INTO")
            .unwrap_or_else(|| panic!("no INSERT"));
        let list = &sql[start..];
        let open = list.find('(').unwrap_or_else(|| panic!("no column list"));
        let close = list.find(')').unwrap_or_else(|| panic!("no column list"));
        list[open + 1..close]
            .split(',')
            .map(|c| c.trim().to_owned())
            .collect()
    }

    fn field_names<T: Serialize>(row: &T) -> Vec<String> {
        match serde_json::to_value(row) {
            Ok(Value::Object(fields)) => fields.keys().cloned().collect(),
            other => panic!("not an object: {other:?}"),
        }
    }

    #[test]
    fn every_field_of_a_row_is_a_column_its_statement_writes() {
        let rows = TableRows::of(&a_setting_with_everything(), Shape::default(), json!({}));
        let group = TableRows::of(
            &Declared {
                rule: Rule::Grouped {
                    members: Members::default(),
                    assigned: Assignments::default(),
                },
                ..Declared::default()
            },
            Shape::default(),
            json!({}),
        )
        .group
        .unwrap_or_else(|| panic!("no group"));
        let replicas = ReplicaSourceRow {
            relation: String::new(),
            id_column: String::new(),
            live: String::new(),
            partition_column: None,
        };
        let sorted = |mut v: Vec<String>| {
            v.sort();
            v
        };
        for (sql, fields) in [
            (WRITE_TABLES, field_names(&rows.table)),
            (WRITE_TABLE_REFERENCES, field_names(&rows.references[0])),
            (WRITE_GROUPS, field_names(&group)),
            (WRITE_REPLICA_SOURCE, field_names(&replicas)),
        ] {
            assert_eq!(sorted(inserted_columns(sql)), sorted(fields), "{sql}");
        }
    }
}

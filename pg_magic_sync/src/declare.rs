//! Declarations, from the user's migrations: where the replicas are, and
//! which tables travel and how.

use pgrx::prelude::*;

use magic_sync_proto::key::KeyType;

use crate::catalog::{self, Declared, Mirror};
use crate::db::{self, refuse};
use crate::table_sql::{qualified, quote_literal};

/// A relation found in the catalog.
struct Relation {
    oid: pg_sys::Oid,
    /// Schema-qualified and quoted, for SQL.
    qualified: String,
    /// Schema-qualified, for messages.
    shown: String,
    name: String,
    kind: String,
}

/// Looks a relation up by the name the user gave, as `to_regclass` reads it.
fn find_relation(name: &str) -> Option<Relation> {
    Spi::connect(|client| {
        let mut rows = client
            .select(
                "SELECT c.oid, n.nspname::text, c.relname::text, c.relkind::text \
                 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
                 WHERE c.oid = to_regclass($1)",
                Some(1),
                &[name.into()],
            )
            .expect("reads pg_class");
        rows.next().map(|row| {
            let schema: String = row.get(2).ok().flatten().unwrap_or_default();
            let table: String = row.get(3).ok().flatten().unwrap_or_default();
            Relation {
                oid: row.get(1).ok().flatten().expect("an oid"),
                qualified: qualified(&schema, &table),
                shown: format!("{schema}.{table}"),
                name: table,
                kind: row.get(4).ok().flatten().unwrap_or_default(),
            }
        })
    })
}

/// A relation's columns, in order, with their types as `format_type` writes
/// them.
fn columns_of(relation: pg_sys::Oid) -> Vec<(String, String)> {
    Spi::connect(|client| {
        client
            .select(
                "SELECT attname::text, format_type(atttypid, atttypmod) FROM pg_attribute \
                 WHERE attrelid = $1 AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
                None,
                &[relation.into()],
            )
            .expect("reads pg_attribute")
            .map(|row| {
                (
                    row.get(1).ok().flatten().unwrap_or_default(),
                    row.get(2).ok().flatten().unwrap_or_default(),
                )
            })
            .collect()
    })
}

/// A table's primary key columns, in key order.
fn primary_key_of(relation: pg_sys::Oid) -> Vec<String> {
    Spi::connect(|client| {
        client
            .select(
                "SELECT a.attname::text FROM pg_index i \
                 CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord) \
                 JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum \
                 WHERE i.indrelid = $1 AND i.indisprimary ORDER BY k.ord",
                None,
                &[relation.into()],
            )
            .expect("reads pg_index")
            .map(|row| row.get(1).ok().flatten().unwrap_or_default())
            .collect()
    })
}

/// The key text form's type for a column of this SQL type, if a key may be
/// of it.
fn key_type_of(sql_type: &str) -> Option<KeyType> {
    match sql_type {
        "uuid" => Some(KeyType::Uuid),
        "smallint" | "integer" | "bigint" => Some(KeyType::Integer),
        _ => None,
    }
}

/// The error of a condition run against the relation, or None when it runs.
fn condition_error(relation: &str, condition: &str) -> Option<String> {
    db::one::<String>(
        "SELECT sync.check_condition($1, $2)",
        &[relation.into(), condition.into()],
    )
}

/// `sync.declare_replicas(relation, live, id)`: the table or view that lists
/// the replicas, the condition a replica that should receive anything meets,
/// and its column of replica ids.
#[pg_extern(volatile)]
fn declare_replicas(
    relation: &str,
    live: default!(&str, "'true'"),
    id: default!(&str, "'id'"),
    partitioned_by: default!(Option<&str>, "NULL"),
) {
    if partitioned_by.is_some() {
        refuse(
            "magic_sync: partitioned_by is not supported yet",
            "Declare the replicas without partitions for now.",
        );
    }
    let Some(found) = find_relation(relation) else {
        refuse(
            format!("magic_sync: the replicas' relation {relation} does not exist"),
            "Create the table or view that lists the replicas first, then declare it.",
        );
    };
    let columns = columns_of(found.oid);
    match columns.iter().find(|(name, _)| name == id) {
        None => refuse(
            format!("magic_sync: {} has no column {id}", found.shown),
            "Name the column of replica ids with id => '...'.",
        ),
        Some((_, ty)) if ty != "uuid" => refuse(
            format!(
                "magic_sync: the column {id} of {} is {ty}, and replica ids are uuid",
                found.shown
            ),
            "Replicas are identified by a UUID.",
        ),
        Some(_) => {}
    }
    if let Some(error) = condition_error(&found.qualified, live) {
        refuse(
            format!(
                "magic_sync: the live condition ({live}) does not run on {}: {error}",
                found.shown
            ),
            "live => is an SQL condition over the replicas' columns, such as 'active'.",
        );
    }
    db::run_with(
        "INSERT INTO sync.replica_source (relation, id_column, live) VALUES ($1, $2, $3) \
         ON CONFLICT (only_one) DO UPDATE SET relation = excluded.relation, \
         id_column = excluded.id_column, live = excluded.live, declared_at = now()",
        &[found.qualified.as_str().into(), id.into(), live.into()],
    );
}

/// `sync.declare_table(relation, mirror, sync, ...)`: declares a table whose
/// rows travel, checks it, and installs its triggers.
#[allow(clippy::too_many_arguments)]
#[pg_extern(volatile)]
fn declare_table(
    relation: &str,
    mirror: default!(&str, "'catalog'"),
    sync: default!(Option<&str>, "NULL"),
    name: default!(Option<&str>, "NULL"),
    key: default!(Option<Vec<String>>, "NULL"),
    origin: default!(Option<&str>, "NULL"),
    version: default!(Option<&str>, "NULL"),
    created: default!(Option<&str>, "NULL"),
    desired: default!(Option<Vec<String>>, "NULL"),
    apply: default!(Option<&str>, "NULL"),
    replica_owned: default!(Option<Vec<String>>, "NULL"),
    active: default!(Option<&str>, "NULL"),
    unmirrored: default!(Option<Vec<String>>, "NULL"),
) {
    let Some(found) = find_relation(relation) else {
        refuse(
            format!("magic_sync: the table {relation} does not exist"),
            "Create the table first, then declare it.",
        );
    };
    if found.kind != "r" {
        refuse(
            format!("magic_sync: {} is not a table", found.shown),
            "Declare the table itself; a view of what travels is declared with active => later.",
        );
    }
    let mirror = parse_mirror(mirror);
    for (option, given) in [
        ("origin", origin.is_some()),
        ("version", version.is_some()),
        ("created", created.is_some()),
        ("desired", desired.is_some()),
        ("apply", apply.is_some()),
        ("replica_owned", replica_owned.is_some()),
        ("active", active.is_some()),
        ("unmirrored", unmirrored.is_some()),
    ] {
        if given {
            refuse(
                format!("magic_sync: the option {option} is not supported yet"),
                "This version declares catalog tables sent with sync => 'broadcast'.",
            );
        }
    }
    parse_rule(sync);
    let columns = columns_of(found.oid);
    let key_columns = key_of(&found, &columns, key);
    let key_types = key_columns
        .iter()
        .map(|column| {
            let ty = &columns.iter().find(|(c, _)| c == column).expect("a key column").1;
            key_type_of(ty).unwrap_or_else(|| {
                refuse(
                    format!(
                        "magic_sync: the key column {column} of {} is {ty}; a key is made of uuid and integer columns",
                        found.shown
                    ),
                    "Key the table by a uuid or an integer column.",
                )
            })
        })
        .collect();
    let name = name.unwrap_or(&found.name).to_owned();
    if name.starts_with("sync_") {
        refuse(
            format!("magic_sync: the name {name} begins with sync_, which is the engine's"),
            "Give the table another name with name => '...'.",
        );
    }
    let declared = Declared {
        name,
        relation: found.qualified.clone(),
        mirror,
        key_columns,
        key_types,
        columns: columns.iter().map(|(c, _)| c.clone()).collect(),
        column_types: columns.iter().map(|(_, t)| t.clone()).collect(),
        position: 0,
    };
    record_declaration(&declared);
    install_triggers(&declared);
}

/// Writes a declared table's triggers anew, replacing any of the same name.
fn install_triggers(table: &Declared) {
    for (_, ddl) in trigger_ddl(table) {
        db::run(&ddl.replacen("CREATE TRIGGER", "CREATE OR REPLACE TRIGGER", 1));
    }
}

fn parse_mirror(mirror: &str) -> Mirror {
    match mirror {
        "catalog" => Mirror::Catalog,
        "record" | "both" | "setting" => refuse(
            format!("magic_sync: mirror => '{mirror}' is not supported yet"),
            "This version declares catalog tables (mirror => 'catalog').",
        ),
        other => refuse(
            format!("magic_sync: mirror => '{other}' is none of catalog, record, both, setting"),
            "mirror says which way a table's rows travel.",
        ),
    }
}

fn parse_rule(sync: Option<&str>) {
    match sync {
        Some("broadcast") => {}
        None => refuse(
            "magic_sync: a catalog table needs a sync rule",
            "Say which replicas hold its rows: sync => 'broadcast' sends them to every live replica.",
        ),
        Some(other) => refuse(
            format!("magic_sync: the sync rule '{other}' is not supported yet"),
            "This version sends catalog tables with sync => 'broadcast'.",
        ),
    }
}

/// The table's key: its primary key, which `key =>`, when given, must name.
fn key_of(found: &Relation, columns: &[(String, String)], key: Option<Vec<String>>) -> Vec<String> {
    let primary = primary_key_of(found.oid);
    if primary.is_empty() {
        refuse(
            format!("magic_sync: {} has no primary key", found.shown),
            "A row travels under its primary key: give the table one.",
        );
    }
    if let Some(key) = key {
        if let Some(missing) = key.iter().find(|k| !columns.iter().any(|(c, _)| c == *k)) {
            refuse(
                format!("magic_sync: {} has no column {missing}", found.shown),
                "key => names the columns of the table's primary key.",
            );
        }
        if key != primary {
            refuse(
                format!(
                    "magic_sync: key => ({}) is not the primary key of {} ({})",
                    key.join(", "),
                    found.shown,
                    primary.join(", ")
                ),
                "key => names the columns of the table's primary key, in its order.",
            );
        }
    }
    primary
}

/// Writes the declaration into sync.tables, keeping a table's place in the
/// order when it is declared again.
fn record_declaration(table: &Declared) {
    let clash: Option<String> = db::one(
        "SELECT relation FROM sync.tables WHERE name = $1 AND relation <> $2",
        &[table.name.as_str().into(), table.relation.as_str().into()],
    );
    if let Some(other) = clash {
        refuse(
            format!("magic_sync: the name {} is taken by {other}", table.name),
            "Give the table another name with name => '...'.",
        );
    }
    let key_types: Vec<String> = table
        .key_types
        .iter()
        .map(|t| catalog::key_type_name(*t).to_owned())
        .collect();
    db::run_with(
        "INSERT INTO sync.tables (name, relation, mirror, rule, key_columns, key_types, \
         columns, column_types, position) \
         VALUES ($1, $2, $3, 'broadcast', $4, $5, $6, $7, \
         (SELECT coalesce(max(position), 0) + 1 FROM sync.tables)) \
         ON CONFLICT (relation) DO UPDATE SET name = excluded.name, mirror = excluded.mirror, \
         rule = excluded.rule, key_columns = excluded.key_columns, key_types = excluded.key_types, \
         columns = excluded.columns, column_types = excluded.column_types, declared_at = now()",
        &[
            table.name.as_str().into(),
            table.relation.as_str().into(),
            table.mirror.name().into(),
            table.key_columns.clone().into(),
            key_types.into(),
            table.columns.clone().into(),
            table.column_types.clone().into(),
        ],
    );
}

/// The triggers of a declared table, by name: a row trigger noting every
/// change, and one refusing TRUNCATE.
pub fn trigger_ddl(table: &Declared) -> Vec<(&'static str, String)> {
    let noting = crate::noting::RowNoting {
        table: &table.name,
        partition: None,
        key: table.key_columns.iter().map(String::as_str).collect(),
        references: vec![],
        unnoted: vec![],
    };
    let args: Vec<String> = noting
        .arguments()
        .iter()
        .map(|a| quote_literal(a))
        .collect();
    let on = &table.relation;
    vec![
        (
            "sync_note_row",
            format!(
                "CREATE TRIGGER sync_note_row AFTER INSERT OR UPDATE OR DELETE ON {on} \
                 FOR EACH ROW EXECUTE FUNCTION sync.note_row({});",
                args.join(", ")
            ),
        ),
        (
            "sync_refuse_truncate",
            format!(
                "CREATE TRIGGER sync_refuse_truncate BEFORE TRUNCATE ON {on} \
                 FOR EACH STATEMENT EXECUTE FUNCTION sync.refuse_truncate();"
            ),
        ),
    ]
}

/// `sync.triggers()`: the triggers every declared table needs, for users who
/// keep them in their own migrations.
#[pg_extern(stable)]
fn triggers() -> SetOfIterator<'static, String> {
    let ddl: Vec<String> = catalog::declared_tables()
        .iter()
        .flat_map(|table| trigger_ddl(table).into_iter().map(|(_, ddl)| ddl))
        .collect();
    SetOfIterator::new(ddl)
}

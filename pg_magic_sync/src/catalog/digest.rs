//! The digest of the declarations: what decides which rows each replica
//! holds — the replicas' relation and partition column, and per table its
//! name, relation, mirror, key, rule and groups, references, active view,
//! partition and the columns that travel. The relay keeps the digest it
//! last ran with, whole and per table, each table's in aspects (`parts`,
//! `aspects`); a pass that finds another sends the difference, table by
//! table, as the aspects that changed say (relay/redeclared.rs).
//!
//! Written as a canonical text, tables by name, then hashed (SHA-256, hex):
//! declaring the same thing again gives the same digest. What does not
//! change what replicas hold (the live condition, origin, version, the
//! install options, the order) is left out.

use sha2::{Digest, Sha256};

use crate::catalog::{Declared, Replicas, Rule};

fn line(out: &mut String, parts: &[&str]) {
    // Each part as a JSON string: no separator can be forged by a name.
    let quoted: Vec<String> = parts
        .iter()
        .map(|p| serde_json::Value::from(*p).to_string())
        .collect();
    out.push_str(&quoted.join(" "));
    out.push('\n');
}

fn joined(items: &[String]) -> String {
    serde_json::Value::from(items.to_vec()).to_string()
}

/// The canonical text the digest is of.
pub fn canonical(replicas: Option<&Replicas>, tables: &[Declared]) -> String {
    let mut out = replicas_text(replicas);
    let mut sorted: Vec<&Declared> = tables.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    for t in sorted {
        out.push_str(&table_text(t));
    }
    out
}

/// The digest in parts, as `{"replicas": digest, "tables": {name: digest}}`:
/// what a pass compares with the last one's to tell a table declared for
/// the first time from a change to what was declared (relay/redeclared.rs).
pub fn parts(replicas: Option<&Replicas>, tables: &[Declared]) -> serde_json::Value {
    let digests: serde_json::Map<String, serde_json::Value> = tables
        .iter()
        .map(|t| (t.name.clone(), hashed(&table_text(t)).into()))
        .collect();
    let aspects: serde_json::Map<String, serde_json::Value> = tables
        .iter()
        .map(|t| (t.name.clone(), aspects(t)))
        .collect();
    serde_json::json!({
        "replicas": hashed(&replicas_text(replicas)),
        "tables": digests,
        "aspects": aspects,
    })
}

/// What of one table a change may be to, each part hashed apart: how the
/// relay tells a change of which rows each replica holds (`rule`,
/// `references`, `mirror`) from one of their bytes (`columns`) and from
/// one it cannot plan as a difference (`key`: the relation, the key, the
/// partition column). `parents` names the tables its references point at,
/// whose rows a change of references concerns as well.
pub fn aspects(t: &Declared) -> serde_json::Value {
    let key_types: Vec<String> = t.key_types.iter().map(|k| k.name().to_owned()).collect();
    let mut key = String::new();
    line(
        &mut key,
        &[
            &t.relation,
            &joined(&t.key_columns),
            &joined(&key_types),
            t.partition.as_deref().unwrap_or(""),
        ],
    );
    let mut columns = String::new();
    line(
        &mut columns,
        &[&joined(&t.columns), &joined(&t.column_types)],
    );
    let mut rule = rule_text(t);
    line(&mut rule, &["active", t.active.as_deref().unwrap_or("")]);
    let mut parents: Vec<String> = t.references.iter().map(|r| r.parent.clone()).collect();
    parents.sort();
    parents.dedup();
    serde_json::json!({
        "mirror": t.mirror.name(),
        "key": hashed(&key),
        "columns": hashed(&columns),
        "rule": hashed(&rule),
        "references": hashed(&references_text(t)),
        "parents": parents,
    })
}

fn hashed(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn replicas_text(replicas: Option<&Replicas>) -> String {
    let mut out = String::new();
    match replicas {
        Some(r) => line(
            &mut out,
            &[
                "replicas",
                &r.relation,
                &r.id_column,
                r.partition.as_deref().unwrap_or(""),
            ],
        ),
        None => line(&mut out, &["replicas"]),
    }
    out
}

/// One table's lines of the canonical text.
fn table_text(t: &Declared) -> String {
    let mut out = String::new();
    let key_types: Vec<String> = t.key_types.iter().map(|k| k.name().to_owned()).collect();
    line(
        &mut out,
        &[
            "table",
            &t.name,
            &t.relation,
            t.mirror.name(),
            &joined(&t.key_columns),
            &joined(&key_types),
            t.active.as_deref().unwrap_or(""),
            t.partition.as_deref().unwrap_or(""),
        ],
    );
    line(
        &mut out,
        &["columns", &joined(&t.columns), &joined(&t.column_types)],
    );
    out.push_str(&rule_text(t));
    out.push_str(&references_text(t));
    out
}

/// A table's rule, as a line of the canonical text.
fn rule_text(t: &Declared) -> String {
    let mut out = String::new();
    match &t.rule {
        Rule::Assigned { column } => line(&mut out, &["rule", "assigned", column]),
        Rule::Follows { columns, .. } => line(&mut out, &["rule", "follows", &joined(columns)]),
        Rule::Grouped { members, assigned } => line(
            &mut out,
            &[
                "rule",
                "grouped",
                &members.relation,
                &joined(&members.row),
                &joined(&members.group),
                &members.groups,
                &assigned.relation,
                &joined(&assigned.group),
                &assigned.replica,
            ],
        ),
        other => line(&mut out, &["rule", other.kind()]),
    }
    out
}

/// A table's references, as a line of the canonical text.
fn references_text(t: &Declared) -> String {
    let mut out = String::new();
    let mut references: Vec<String> = t
        .references
        .iter()
        .map(|r| {
            format!(
                "{} -> {} {}",
                joined(&r.columns),
                r.parent,
                joined(&r.parent_columns)
            )
        })
        .collect();
    references.sort();
    line(&mut out, &["references", &joined(&references)]);
    out
}

pub fn digest(replicas: Option<&Replicas>, tables: &[Declared]) -> String {
    let hash = Sha256::digest(canonical(replicas, tables).as_bytes());
    hash.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Mirror;

    fn products() -> Declared {
        Declared {
            name: "products".into(),
            relation: "\"shop\".\"products\"".into(),
            mirror: Mirror::Catalog,
            rule: Rule::Broadcast,
            key_columns: vec!["id".into()],
            columns: vec!["id".into(), "name".into()],
            column_types: vec!["uuid".into(), "text".into()],
            ..Declared::default()
        }
    }

    fn registers() -> Replicas {
        Replicas {
            relation: "\"shop\".\"registers\"".into(),
            id_column: "id".into(),
            live: "active".into(),
            partition: None,
        }
    }

    #[test]
    fn the_same_declarations_give_the_same_digest_whatever_their_order() {
        let receipts = Declared {
            name: "receipts".into(),
            mirror: Mirror::Record,
            position: 2,
            ..products()
        };
        assert_eq!(
            digest(Some(&registers()), &[products(), receipts.clone()]),
            digest(Some(&registers()), &[receipts, products()])
        );
    }

    #[test]
    fn what_decides_which_rows_a_replica_holds_changes_the_digest() {
        let base = digest(Some(&registers()), &[products()]);
        let with_column = Declared {
            columns: vec!["id".into(), "name".into(), "sku".into()],
            column_types: vec!["uuid".into(), "text".into(), "text".into()],
            ..products()
        };
        let assigned = Declared {
            rule: Rule::Assigned {
                column: "register_id".into(),
            },
            ..products()
        };
        let partitioned = Replicas {
            partition: Some("company_id".into()),
            ..registers()
        };
        assert_ne!(base, digest(Some(&registers()), &[with_column]));
        assert_ne!(base, digest(Some(&registers()), &[assigned]));
        assert_ne!(base, digest(Some(&partitioned), &[products()]));
        assert_ne!(base, digest(None, &[products()]));
        assert_ne!(base, digest(Some(&registers()), &[]));
    }

    #[test]
    fn what_does_not_decide_it_leaves_the_digest_alone() {
        let base = digest(Some(&registers()), &[products()]);
        let live = Replicas {
            live: "true".into(),
            ..registers()
        };
        let other = Declared {
            install: true,
            position: 9,
            origin: Some("register_id".into()),
            ..products()
        };
        assert_eq!(base, digest(Some(&live), &[other]));
    }

    #[test]
    fn a_table_declared_for_the_first_time_leaves_the_other_parts_as_they_were() {
        let shelves = Declared {
            name: "shelves".into(),
            relation: "\"shop\".\"shelves\"".into(),
            ..products()
        };
        let before = parts(Some(&registers()), &[products()]);
        let after = parts(Some(&registers()), &[products(), shelves]);
        assert_eq!(before["replicas"], after["replicas"]);
        assert_eq!(before["tables"]["products"], after["tables"]["products"]);
        assert!(before["tables"].get("shelves").is_none());
        assert!(after["tables"]["shelves"].is_string());
        let with_column = Declared {
            columns: vec!["id".into(), "name".into(), "sku".into()],
            column_types: vec!["uuid".into(), "text".into(), "text".into()],
            ..products()
        };
        assert_ne!(
            before["tables"]["products"],
            parts(Some(&registers()), &[with_column])["tables"]["products"]
        );
    }

    #[test]
    fn a_change_shows_in_the_aspect_it_is_of_and_in_no_other() {
        let base = aspects(&products());
        let changed = |t: Declared| -> Vec<&'static str> {
            let a = aspects(&t);
            ["mirror", "key", "columns", "rule", "references"]
                .into_iter()
                .filter(|k| a[k] != base[k])
                .collect()
        };
        let with_column = Declared {
            columns: vec!["id".into(), "name".into(), "sku".into()],
            column_types: vec!["uuid".into(), "text".into(), "text".into()],
            ..products()
        };
        assert_eq!(changed(with_column), ["columns"]);
        let assigned = Declared {
            rule: Rule::Assigned {
                column: "register_id".into(),
            },
            ..products()
        };
        assert_eq!(changed(assigned), ["rule"]);
        let active = Declared {
            active: Some("\"shop\".\"cheap\"".into()),
            ..products()
        };
        assert_eq!(changed(active), ["rule"]);
        let elsewhere = Declared {
            relation: "\"shop\".\"products_v2\"".into(),
            ..products()
        };
        assert_eq!(changed(elsewhere), ["key"]);
        let both = Declared {
            mirror: Mirror::Both,
            ..products()
        };
        assert_eq!(changed(both), ["mirror"]);
    }
}

//! The text of a sync rule, as `declare_table(..., sync => ...)` takes it:
//!
//! - `broadcast`, `none`;
//! - `assigned(column)`: the column holds the id of the replica the row goes
//!   to;
//! - `follows(column)` (or several columns): the foreign key whose parent
//!   the row goes with;
//! - `grouped(members => relation, assigned => relation)`, `=` also
//!   accepted; `assigned => relation(column)` names its column of replica
//!   ids when it cannot be told.
//!
//! Column names are spelled as in the table (double quotes allowed, never
//! folded); relation names as SQL reads them. Pure Rust: tested without a
//! backend.

use crate::error::Error;

/// A sync rule as written, before it is resolved against the tables.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RuleText {
    None,
    Broadcast,
    Assigned(String),
    Follows(Vec<String>),
    Grouped {
        members: String,
        assigned: String,
        replica: Option<String>,
    },
}

/// Splits at top-level commas: not inside double quotes or parentheses.
fn split_top(text: &str) -> Vec<String> {
    let mut parts = vec![String::new()];
    let (mut quoted, mut depth) = (false, 0);
    for c in text.chars() {
        match c {
            '"' => quoted = !quoted,
            '(' if !quoted => depth += 1,
            ')' if !quoted => depth -= 1,
            ',' if !quoted && depth == 0 => {
                parts.push(String::new());
                continue;
            }
            _ => {}
        }
        parts.last_mut().expect("a part").push(c);
    }
    parts.iter().map(|p| p.trim().to_owned()).collect()
}

/// `name(inside)`: the name and what is inside the outer parentheses.
fn call(text: &str) -> Option<(&str, &str)> {
    let open = text.find('(')?;
    let inside = text[open + 1..].strip_suffix(')')?;
    Some((text[..open].trim(), inside))
}

/// A column name: bare, or in double quotes.
fn column(text: &str) -> Result<String, Error> {
    let text = text.trim();
    if let Some(inner) = text.strip_prefix('"').and_then(|t| t.strip_suffix('"')) {
        if inner.is_empty() {
            return Err(Error::bad_input("an empty column name", ""));
        }
        return Ok(inner.replace("\"\"", "\""));
    }
    if text.is_empty() || text.contains(['"', '(', ')', ',', ' ']) {
        return Err(Error::bad_input(
            format!("'{text}' is not a column name"),
            "",
        ));
    }
    Ok(text.to_owned())
}

/// A relation, optionally followed by `(column)`.
fn relation_and_column(text: &str) -> Result<(String, Option<String>), Error> {
    let text = text.trim();
    // The column's parentheses come last, outside any quotes.
    if text.ends_with(')') {
        let mut quoted = false;
        let mut open = None;
        for (i, c) in text.char_indices() {
            match c {
                '"' => quoted = !quoted,
                '(' if !quoted => open = Some(i),
                _ => {}
            }
        }
        if let Some(open) = open {
            let relation = text[..open].trim();
            let inner = &text[open + 1..text.len() - 1];
            if relation.is_empty() {
                return Err(Error::bad_input(format!("'{text}' names no relation"), ""));
            }
            return Ok((relation.to_owned(), Some(column(inner)?)));
        }
    }
    if text.is_empty() {
        return Err(Error::bad_input("a relation is missing", ""));
    }
    Ok((text.to_owned(), None))
}

/// Reads a rule; the error says what is wrong with it.
pub fn parse(text: &str) -> Result<RuleText, Error> {
    let text = text.trim();
    match text {
        "broadcast" => return Ok(RuleText::Broadcast),
        "none" => return Ok(RuleText::None),
        _ => {}
    }
    let Some((name, inside)) = call(text) else {
        return Err(Error::bad_input(
            "it is none of broadcast, none, assigned(...), follows(...), grouped(...)",
            "",
        ));
    };
    match name {
        "assigned" => {
            let parts = split_top(inside);
            match parts.as_slice() {
                [one] => Ok(RuleText::Assigned(column(one)?)),
                _ => Err(Error::bad_input("assigned(...) names one column", "")),
            }
        }
        "follows" => {
            let columns = split_top(inside)
                .iter()
                .map(|c| column(c))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(RuleText::Follows(columns))
        }
        "grouped" => {
            let (mut members, mut assigned, mut replica) = (None, None, None);
            for part in split_top(inside) {
                let (key, value) = part
                    .split_once("=>")
                    .or_else(|| part.split_once('='))
                    .ok_or_else(|| {
                        Error::bad_input(
                            format!("'{part}' is not members => ... or assigned => ..."),
                            "",
                        )
                    })?;
                match key.trim() {
                    "members" => members = Some(relation_and_column(value)?.0),
                    "assigned" => {
                        let (relation, column) = relation_and_column(value)?;
                        assigned = Some(relation);
                        replica = column;
                    }
                    other => {
                        return Err(Error::bad_input(
                            format!("grouped(...) takes members and assigned, not {other}"),
                            "",
                        ))
                    }
                }
            }
            match (members, assigned) {
                (Some(members), Some(assigned)) => Ok(RuleText::Grouped {
                    members,
                    assigned,
                    replica,
                }),
                _ => Err(Error::bad_input(
                    "grouped(...) needs both members => ... and assigned => ...",
                    "",
                )),
            }
        }
        other => Err(Error::bad_input(
            format!("{other}(...) is none of assigned, follows, grouped"),
            "",
        )),
    }
}

/// A column name as a rule writes it: bare when that reads back the same.
fn show_column(name: &str) -> String {
    if name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && !name.is_empty()
    {
        name.to_owned()
    } else {
        format!("\"{}\"", name.replace('"', "\"\""))
    }
}

impl RuleText {
    /// The rule written back, in the form `parse` reads.
    pub fn text(&self) -> String {
        match self {
            RuleText::None => "none".to_owned(),
            RuleText::Broadcast => "broadcast".to_owned(),
            RuleText::Assigned(c) => format!("assigned({})", show_column(c)),
            RuleText::Follows(cs) => format!(
                "follows({})",
                cs.iter()
                    .map(|c| show_column(c))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            RuleText::Grouped {
                members,
                assigned,
                replica,
            } => format!(
                "grouped(members => {members}, assigned => {assigned}{})",
                replica
                    .as_ref()
                    .map(|r| format!("({})", show_column(r)))
                    .unwrap_or_default()
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_simple_rules_read() {
        assert_eq!(parse("broadcast"), Ok(RuleText::Broadcast));
        assert_eq!(parse(" none "), Ok(RuleText::None));
        assert_eq!(
            parse("assigned(register_id)"),
            Ok(RuleText::Assigned("register_id".into()))
        );
        assert_eq!(
            parse("assigned( \"Register Id\" )"),
            Ok(RuleText::Assigned("Register Id".into()))
        );
        assert_eq!(
            parse("follows(company_id, region_id)"),
            Ok(RuleText::Follows(vec![
                "company_id".into(),
                "region_id".into()
            ]))
        );
    }

    #[test]
    fn a_grouped_rule_reads_with_arrows_or_equals_and_an_optional_replica_column() {
        assert_eq!(
            parse("grouped(members => list_members, assigned => register_lists)"),
            Ok(RuleText::Grouped {
                members: "list_members".into(),
                assigned: "register_lists".into(),
                replica: None
            })
        );
        assert_eq!(
            parse(
                "grouped(members = shop.list_members, assigned = \"shop\".\"a, b\"(register_id))"
            ),
            Ok(RuleText::Grouped {
                members: "shop.list_members".into(),
                assigned: "\"shop\".\"a, b\"".into(),
                replica: Some("register_id".into())
            })
        );
    }

    #[test]
    fn a_rule_reads_back_as_it_is_written() {
        for text in [
            "broadcast",
            "none",
            "assigned(register_id)",
            "assigned(\"Register\")",
            "follows(a, b)",
            "grouped(members => \"shop\".\"m\", assigned => \"shop\".\"a\"(register_id))",
        ] {
            assert_eq!(parse(text).unwrap().text(), text);
        }
    }

    #[test]
    fn what_is_no_rule_says_why() {
        assert!(parse("everywhere")
            .unwrap_err()
            .to_string()
            .contains("none of broadcast"));
        assert!(parse("assigned(a, b)")
            .unwrap_err()
            .to_string()
            .contains("one column"));
        assert!(parse("grouped(members => m)")
            .unwrap_err()
            .to_string()
            .contains("both"));
        assert!(parse("grouped(groups => g, assigned => a)")
            .unwrap_err()
            .to_string()
            .contains("not groups"));
        assert!(parse("sent(x)")
            .unwrap_err()
            .to_string()
            .contains("sent(...)"));
        assert!(parse("assigned()").is_err());
    }
}

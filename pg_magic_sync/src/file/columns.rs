//! The columns a replica's build holds of each table the server sends it
//! (`Up.columns`, said once per open beside where it stands;
//! docs/src/protocol.md, "A column added").
//!
//! The server keeps what each replica last said, per table
//! (`sync.replica_columns`). A table whose columns grew since, by one the
//! server sends, is a build that added the column after the server began
//! sending it: what the replica holds of the table lacks its values. It is
//! noted in `sync.columns_gained`, and the next pass sends the replica the
//! rows of that table it holds again, once (relay/columns_gained.rs).
//! A column gained that the server does not send yet asks nothing: the
//! server's own migration sends every replica that holds the table its
//! rows again when it declares it (relay/redeclared.rs).
//!
//! What a replica says the first time is where it starts: nothing is sent
//! for it, as nothing tells what an earlier build held (a replica new to
//! the server holds nothing yet; one whose earlier build never said its
//! columns, a 0.1.0 register, is taken as holding what it says now).
//! A table the server does not send the replica is skipped, and an Up that
//! says a table's columns twice is malformed: none of its columns is taken.

use std::collections::BTreeSet;

use magic_sync_proto::wire::TableColumns;
use serde_json::{json, Map, Value};
use uuid::Uuid;

use crate::catalog::Declared;
use crate::spi::{self, to_pg};
use crate::statements::file::columns::{GAINED, KEEP, SAID_BEFORE};

/// Column names as both sides match them: a replica's database (SQLite)
/// names columns case-blind.
fn folded<'a>(names: impl IntoIterator<Item = &'a String>) -> BTreeSet<String> {
    names.into_iter().map(|n| n.to_lowercase()).collect()
}

/// The columns the server sends of `table` that `now` holds and `before`
/// did not.
pub fn gained(table: &Declared, before: &[String], now: &[String]) -> Vec<String> {
    let (before, now) = (folded(before), folded(now));
    table
        .columns
        .iter()
        .filter(|c| {
            let c = c.to_lowercase();
            now.contains(&c) && !before.contains(&c)
        })
        .cloned()
        .collect()
}

/// Keeps what the replica said of its columns, and notes the tables whose
/// columns the server sends grew; answers the verdict: per table, `kept`,
/// `first said`, the columns gained, or why it was skipped.
pub fn take(replica: Uuid, said: &[TableColumns], tables: &[Declared]) -> Value {
    let mut seen = BTreeSet::new();
    if let Some(twice) = said.iter().find(|t| !seen.insert(t.table.as_str())) {
        pgrx::log!(
            "magic_sync: an Up from {replica} says the columns of {} twice: none of its columns taken",
            twice.table
        );
        return json!(format!(
            "malformed: the columns of {} said twice, none taken",
            twice.table
        ));
    }
    let mut verdict = Map::new();
    for said in said {
        let Some(table) = tables
            .iter()
            .find(|t| t.name == said.table && t.mirror.goes_down())
        else {
            verdict.insert(
                said.table.clone(),
                json!("skipped: not a table the server sends"),
            );
            continue;
        };
        let id = to_pg(replica);
        let before =
            spi::one::<Vec<Option<String>>>(SAID_BEFORE, &[id.into(), said.table.as_str().into()])
                .map(|columns| columns.into_iter().flatten().collect::<Vec<String>>());
        spi::run_with(
            KEEP,
            &[
                id.into(),
                said.table.as_str().into(),
                said.columns.clone().into(),
            ],
        );
        let answer = match before {
            None => json!("first said"),
            Some(before) => {
                let gained = gained(table, &before, &said.columns);
                if gained.is_empty() {
                    json!("kept")
                } else {
                    spi::run_with(
                        GAINED,
                        &[id.into(), said.table.as_str().into(), gained.clone().into()],
                    );
                    json!({ "gained": gained })
                }
            }
        };
        verdict.insert(said.table.clone(), answer);
    }
    Value::Object(verdict)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn products() -> Declared {
        Declared {
            name: "products".into(),
            columns: ["id", "name", "vat_rate"].map(String::from).to_vec(),
            ..Declared::default()
        }
    }

    fn names(n: &[&str]) -> Vec<String> {
        n.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_column_the_server_sends_that_the_build_holds_now_and_did_not_before_is_gained() {
        assert_eq!(
            gained(
                &products(),
                &names(&["id", "name"]),
                &names(&["id", "name", "vat_rate"])
            ),
            names(&["vat_rate"])
        );
    }

    #[test]
    fn a_column_the_server_does_not_send_or_held_before_is_not() {
        let now = names(&["id", "name", "vat_rate", "shelf"]);
        assert!(gained(&products(), &now, &now).is_empty());
        assert_eq!(
            gained(&products(), &names(&["id", "name", "vat_rate"]), &now),
            Vec::<String>::new(),
            "shelf is a column the server does not send"
        );
    }

    #[test]
    fn columns_are_matched_case_blind_as_the_replica_names_them() {
        assert!(gained(
            &products(),
            &names(&["ID", "Name", "VAT_RATE"]),
            &names(&["id", "name", "vat_rate"])
        )
        .is_empty());
    }
}

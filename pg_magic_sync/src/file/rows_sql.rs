//! The statements that file a part of an upload, written from the table's
//! declaration. Each is one statement over all the part's rows (`$1`, a
//! jsonb array of rows, or of keys for deletes) and answers how many it
//! filed; `sql/filing.sql` runs it in a savepoint, and again a row at a
//! time when the database refuses the whole, so only the rows at fault are
//! kept back.
//!
//! Rows are read with `jsonb_populate_record`, which takes a JSON string
//! through the column type's own input (a 64-bit integer as its decimal
//! text, an instant as RFC 3339), as the JSON row conventions write them.
//! Only the columns the rows carry are written: an insert gives the others
//! their defaults, an update leaves them as they are.
//!
//! Every identifier is quoted (catalog/table_sql.rs): nothing a user named reaches
//! SQL unquoted.

use crate::catalog::table_sql::{key_matches, quote_ident};
use crate::catalog::Declared;

/// The part's rows as records of the table, one `jsonb_populate_record`
/// per element (measured, in this statement, about twice as fast as
/// `jsonb_populate_recordset` over the array).
fn rows_as_records(table: &Declared) -> String {
    format!(
        "(SELECT r.* FROM jsonb_array_elements($1) AS e(row) \
         CROSS JOIN LATERAL jsonb_populate_record(NULL::{rel}, e.row) AS r)",
        rel = table.relation
    )
}

fn list(columns: &[&str], prefix: &str) -> String {
    columns
        .iter()
        .map(|c| format!("{prefix}{}", quote_ident(c)))
        .collect::<Vec<_>>()
        .join(", ")
}

fn counted(statement: String) -> String {
    format!("WITH filed AS ({statement} RETURNING 1) SELECT count(*) FROM filed")
}

/// How a record's or a setting's row meets the one the server has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Over {
    /// A record without a version: kept from its first delivery.
    Never,
    /// A version: only over an older one.
    Older,
    /// A re-stated row: whatever the version.
    Always,
}

/// Inserts the rows of a record or setting, `columns` being those they
/// carry. A row already there is taken as `over` says, and only when it is
/// the sender's own (its origin); its key and its created column are never
/// changed.
pub fn insert_rows(table: &Declared, columns: &[&str], over: Over) -> String {
    let keys: Vec<&str> = table.key_columns.iter().map(String::as_str).collect();
    let kept_as_they_are: Vec<&str> = keys
        .iter()
        .copied()
        .chain(table.origin.as_deref())
        .chain(table.created.as_deref())
        .collect();
    let changing: Vec<&str> = columns
        .iter()
        .copied()
        .filter(|c| !kept_as_they_are.contains(c))
        .collect();
    let on_conflict = if over == Over::Never || changing.is_empty() {
        "DO NOTHING".to_owned()
    } else {
        let set = changing
            .iter()
            .map(|c| format!("{0} = excluded.{0}", quote_ident(c)))
            .collect::<Vec<_>>()
            .join(", ");
        let mut conditions = Vec::new();
        if let Some(origin) = &table.origin {
            conditions.push(format!(
                "t.{0} IS NOT DISTINCT FROM excluded.{0}",
                quote_ident(origin)
            ));
        }
        if over == Over::Older {
            if let Some(version) = &table.version {
                conditions.push(format!(
                    "(t.{0} IS NULL OR t.{0} < excluded.{0})",
                    quote_ident(version)
                ));
            }
        }
        let when = if conditions.is_empty() {
            String::new()
        } else {
            format!(" WHERE {}", conditions.join(" AND "))
        };
        format!("DO UPDATE SET {set}{when}")
    };
    counted(format!(
        "INSERT INTO {rel} AS t ({cols}) SELECT {values} FROM {rows} AS r \
         ON CONFLICT ({keys}) {on_conflict}",
        rel = table.relation,
        cols = list(columns, ""),
        values = list(columns, "r."),
        rows = rows_as_records(table),
        keys = list(&keys, ""),
    ))
}

/// Takes a replica's edit of a two-way row: the columns it owns that the
/// rows carry, and nothing else.
pub fn update_owned(table: &Declared, owned: &[&str]) -> String {
    let set = owned
        .iter()
        .map(|c| format!("{0} = r.{0}", quote_ident(c)))
        .collect::<Vec<_>>()
        .join(", ");
    let same_key = table
        .key_columns
        .iter()
        .map(|c| format!("t.{0} = r.{0}", quote_ident(c)))
        .collect::<Vec<_>>()
        .join(" AND ");
    counted(format!(
        "UPDATE {rel} AS t SET {set} FROM {rows} AS r WHERE {same_key}",
        rel = table.relation,
        rows = rows_as_records(table),
    ))
}

/// Deletes the sender's own rows by key (`$1`, a jsonb array of keys; `$2`
/// the sender).
pub fn delete_own(table: &Declared) -> String {
    let origin = table
        .origin
        .as_deref()
        .expect("only a table keyed by its replica takes deletes");
    counted(format!(
        "DELETE FROM {rel} AS t USING jsonb_array_elements_text($1) AS k(key) \
         WHERE {matches} AND t.{origin} = $2",
        rel = table.relation,
        matches = key_matches(table, "t", "k.key"),
        origin = quote_ident(origin),
    ))
}

/// Of these keys (`$1`, text[]), those of rows there that belong to
/// another replica than `$2`.
pub fn keys_of_others(table: &Declared) -> String {
    let origin = table.origin.as_deref().unwrap_or_default();
    format!(
        "SELECT k.key FROM unnest($1::text[]) AS k(key) \
         WHERE EXISTS (SELECT 1 FROM {rel} AS t WHERE {matches} \
                       AND t.{origin} IS DISTINCT FROM $2)",
        rel = table.relation,
        matches = key_matches(table, "t", "k.key"),
        origin = quote_ident(origin),
    )
}

/// Of these keys (`$1`, text[]), those whose rows the server has.
pub fn keys_present(table: &Declared) -> String {
    format!(
        "SELECT k.key FROM unnest($1::text[]) AS k(key) \
         WHERE EXISTS (SELECT 1 FROM {rel} AS t WHERE {matches})",
        rel = table.relation,
        matches = key_matches(table, "t", "k.key"),
    )
}

/// A note of these rows (`$1`, text[]) of a table that goes down, as its
/// trigger would write one: a reason for the planner to compare them again
/// (a delete the server's database refused keeps a row the replica no
/// longer holds, which it is then sent again).
pub fn note_rows(table: &Declared) -> String {
    let partition = table
        .partition
        .as_ref()
        .map_or("NULL::text".to_owned(), |p| {
            format!("(t.{})::text", quote_ident(p))
        });
    format!(
        "INSERT INTO sync.notes (table_name, key, partition) \
         SELECT $2, k.key, {partition} FROM unnest($1::text[]) AS k(key) \
         JOIN {rel} AS t ON {matches}",
        rel = table.relation,
        matches = key_matches(table, "t", "k.key"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::table_sql::qualified;
    use crate::catalog::Mirror;
    use magic_sync_proto::key::KeyType;

    fn receipts() -> Declared {
        Declared {
            name: "receipts".into(),
            relation: qualified("shop", "receipts"),
            mirror: Mirror::Record,
            key_columns: vec!["id".into()],
            key_types: vec![KeyType::Uuid],
            columns: vec![
                "id".into(),
                "register_id".into(),
                "total".into(),
                "made_at".into(),
            ],
            column_types: vec![
                "uuid".into(),
                "uuid".into(),
                "bigint".into(),
                "timestamp with time zone".into(),
            ],
            origin: Some("register_id".into()),
            created: Some("made_at".into()),
            ..Declared::default()
        }
    }

    #[test]
    fn a_record_without_a_version_is_kept_from_its_first_delivery() {
        let sql = insert_rows(&receipts(), &["id", "register_id", "total"], Over::Never);
        assert!(
            sql.contains(
                "INSERT INTO \"shop\".\"receipts\" AS t (\"id\", \"register_id\", \"total\")"
            ),
            "{sql}"
        );
        assert!(sql.contains("ON CONFLICT (\"id\") DO NOTHING"), "{sql}");
        assert!(
            sql.contains("jsonb_populate_record(NULL::\"shop\".\"receipts\", e.row)"),
            "{sql}"
        );
    }

    #[test]
    fn a_version_is_taken_only_over_an_older_one_of_the_senders_own_row() {
        let counters = Declared {
            version: Some("changed_at".into()),
            ..receipts()
        };
        let sql = insert_rows(
            &counters,
            &["id", "register_id", "total", "made_at", "changed_at"],
            Over::Older,
        );
        assert!(
            sql.contains("DO UPDATE SET \"total\" = excluded.\"total\", \"changed_at\" = excluded.\"changed_at\" \
                          WHERE t.\"register_id\" IS NOT DISTINCT FROM excluded.\"register_id\" \
                          AND (t.\"changed_at\" IS NULL OR t.\"changed_at\" < excluded.\"changed_at\")"),
            "{sql}"
        );
        let restated = insert_rows(
            &counters,
            &["id", "register_id", "changed_at"],
            Over::Always,
        );
        assert!(!restated.contains("<"), "{restated}");
        assert!(
            !restated.contains("\"made_at\" ="),
            "the created column is written once: {restated}"
        );
    }

    #[test]
    fn an_edit_of_a_two_way_row_sets_only_the_columns_the_replica_owns() {
        let sql = update_owned(&receipts(), &["total"]);
        assert!(
            sql.starts_with(
                "WITH filed AS (UPDATE \"shop\".\"receipts\" AS t SET \"total\" = r.\"total\""
            ),
            "{sql}"
        );
        assert!(sql.contains("WHERE t.\"id\" = r.\"id\""), "{sql}");
    }

    #[test]
    fn a_delete_takes_only_the_senders_own_rows() {
        let sql = delete_own(&receipts());
        assert!(
            sql.contains("t.\"id\" = (k.key)::uuid AND t.\"register_id\" = $2"),
            "{sql}"
        );
    }

    #[test]
    fn identifiers_that_need_quoting_are_quoted() {
        let odd = Declared {
            relation: qualified("My Shop", "Odd\"Table"),
            key_columns: vec!["Key".into()],
            ..receipts()
        };
        let sql = insert_rows(&odd, &["Key"], Over::Never);
        assert!(sql.contains("\"My Shop\".\"Odd\"\"Table\""), "{sql}");
        assert!(sql.contains("ON CONFLICT (\"Key\")"), "{sql}");
    }
}

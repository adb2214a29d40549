//! Step 2 of a pass: every row the plan sends, read once and encoded once,
//! however many replicas get it (`sync_pass_rows`).

use crate::catalog::Declared;
use crate::db;
use crate::table_sql::{key_matches, quote_literal, row_json};

const ROWS: &str = "\
    CREATE TEMP TABLE sync_pass_rows ( \
        table_name text NOT NULL, key text NOT NULL, bytes bytea NOT NULL, \
        PRIMARY KEY (table_name, key)) ON COMMIT DROP";

/// Encodes the rows of every table the plan sends, as JSON.
pub fn load(tables: &[Declared]) {
    db::run(ROWS);
    for table in tables {
        db::run(&format!(
            "INSERT INTO sync_pass_rows \
             SELECT {name}, k.key, convert_to(({json})::text, 'UTF8') \
             FROM (SELECT DISTINCT key FROM sync_pass_plan WHERE table_name = {name} AND op = 'u') AS k \
             JOIN {rel} AS t ON {matches}",
            name = quote_literal(&table.name),
            json = row_json(table, "t"),
            rel = table.relation,
            matches = key_matches(table, "t", "k.key"),
        ));
    }
}

//! A step of a pass, after the cohorts: every row sent to more than one cohort, read once and
//! encoded once, however many replicas get it (`sync_pass_rows`). A row only
//! one cohort is sent is encoded as that cohort's messages are packed: it is
//! read once all the same.

use crate::catalog::table_sql::{key_matches, key_of, quote_literal};
use crate::catalog::Declared;
use crate::message::row::sql::row_bytes;
use crate::relay::scratch;
use crate::spi;

/// Encodes, as JSON, the rows of every table that more than one cohort is
/// sent. Answers how many it encoded.
pub fn load(tables: &[Declared], cohorts: i64) -> i64 {
    if cohorts < 2 {
        return 0;
    }
    for table in tables {
        spi::run(&format!(
            "INSERT INTO sync_pass_rows \
             SELECT {name}, k.key, {bytes} \
             FROM (SELECT p.key FROM sync_pass_plan p \
                   JOIN sync_pass_representatives r ON r.replica = p.replica \
                   WHERE p.table_name = {name} AND p.op = 'u' \
                   GROUP BY p.key HAVING count(*) > 1) AS k \
             JOIN {rel} AS t ON {matches}",
            name = quote_literal(&table.name),
            bytes = row_bytes(table, "t"),
            rel = table.relation,
            matches = key_matches(table, "t", "k.key"),
        ));
    }
    // A table sent whole to more than one cohort: every row of it, once.
    for table in tables {
        spi::run(&format!(
            "INSERT INTO sync_pass_rows \
             SELECT {name}, {key}, {bytes} FROM {rel} AS t \
             WHERE (SELECT count(DISTINCT r.cohort) FROM sync_pass_whole w \
                    JOIN sync_pass_representatives r ON r.replica = w.replica \
                    WHERE w.table_name = {name}) > 1",
            name = quote_literal(&table.name),
            key = key_of(table, "t"),
            bytes = row_bytes(table, "t"),
            rel = table.relation,
        ));
    }
    scratch::analyze(&["sync_pass_rows"]);
    spi::one::<i64>("SELECT count(*) FROM sync_pass_rows", &[]).unwrap_or(0)
}

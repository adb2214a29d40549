//! The SQL that reads a cohort's rows: a part of its representative's plan,
//! or a table sent whole, in key order, each row's bytes loaded or encoded.

use crate::catalog::table_sql::{key_matches, key_of, quote_ident, quote_literal};
use crate::catalog::Declared;
use crate::message::pack::Op;
use crate::message::row::sql::row_bytes;
use crate::spi::{self};
use magic_sync_proto::key::KeyType;

/// Every row of a table sent whole (of the replica's partition), in key
/// order, at version 0: a note still pending sends it again later, which
/// only ever repeats a row, never misses one.
///
/// The table's own columns are sorted, and each row encoded after: sorting
/// the encoded rows, several times wider, costs more than encoding them.
/// The order is what makes recording cheap (what is held is written in the
/// order of its index), not what makes it right.
pub(super) fn rows_of_whole(table: &Declared, partition: Option<&Option<String>>) -> String {
    let within = match (&table.partition, partition.cloned().flatten()) {
        (Some(column), Some(value)) => format!(
            " WHERE (t.{})::text = {}",
            quote_ident(column),
            quote_literal(&value)
        ),
        (Some(column), None) => format!(" WHERE t.{} IS NULL", quote_ident(column)),
        (None, _) => String::new(),
    };
    let order = match table.key_types.as_slice() {
        // A UUID's text sorts as the UUID does, and the UUID sorts faster.
        [KeyType::Uuid] => format!("t.{}", quote_ident(&table.key_columns[0])),
        _ => format!("({}) COLLATE \"C\"", key_of(table, "t")),
    };
    let columns: Vec<String> = table
        .columns
        .iter()
        .chain(
            table
                .key_columns
                .iter()
                .filter(|k| !table.columns.contains(k)),
        )
        .map(|c| format!("t.{}", quote_ident(c)))
        .collect();
    format!(
        "SELECT {key}, 0::bigint, \
                CASE WHEN w.bytes IS NOT NULL THEN w.bytes \
                     ELSE {bytes} END \
         FROM (SELECT {columns} FROM {rel} AS t{within} ORDER BY {order} OFFSET 0) AS t \
         LEFT JOIN sync_pass_rows w ON w.table_name = {name} AND w.key = {key}",
        key = key_of(table, "t"),
        bytes = row_bytes(table, "t"),
        columns = columns.join(", "),
        rel = table.relation,
        name = quote_literal(&table.name),
    )
}

/// The rows of one part of a cohort's plan, as the plan of its
/// representative (`$1`) has them: keys to delete, or keys, notes and bytes
/// to upsert (encoded here, unless loaded already because more than one
/// cohort is sent them). In key order: what is recorded of them is then
/// written in the order of the index that holds it, which is much the
/// cheapest.
pub(super) fn rows_of_part(table: &Declared, op: Op) -> String {
    let name = quote_literal(&table.name);
    match op {
        Op::Delete | Op::Recorded => format!(
            "SELECT p.key, p.note, NULL::bytea FROM sync_pass_plan p \
             WHERE p.replica = $1 AND p.table_name = {name} AND p.op = {code} \
             ORDER BY p.key",
            code = quote_literal(op.code()),
        ),
        Op::Upsert => format!(
            "SELECT p.key, p.note, \
                    CASE WHEN w.bytes IS NOT NULL THEN w.bytes \
                         ELSE {bytes} END \
             FROM sync_pass_plan p \
             JOIN {rel} AS t ON {matches} \
             LEFT JOIN sync_pass_rows w ON w.table_name = {name} AND w.key = p.key \
             WHERE p.replica = $1 AND p.table_name = {name} AND p.op = 'u' \
             ORDER BY p.key",
            bytes = row_bytes(table, "t"),
            rel = table.relation,
            matches = key_matches(table, "t", "p.key"),
        ),
    }
}

/// A planned row, as the cursor reads it.
pub(super) struct Planned {
    pub(super) table: String,
    pub(super) op: Op,
    pub(super) key: String,
    pub(super) note: i64,
    pub(super) bytes: Option<Vec<u8>>,
}

impl Planned {
    pub(super) fn read(table: &str, op: Op, row: &pgrx::spi::SpiHeapTupleData) -> Planned {
        Planned {
            table: table.to_owned(),
            op,
            key: spi::column(row, 1, "a planned row's key"),
            note: spi::column(row, 2, "a planned row's note"),
            bytes: spi::nullable(row, 3, "a planned row's bytes"),
        }
    }
}

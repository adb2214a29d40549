//! Snapshots (protocol §4.2): while one is in progress the replica
//! remembers every key its messages carried; at its end it lets go of every
//! row of the tables it covered that it did not name.

use magic_sync_proto::wire::EndSnapshot;
use rusqlite::types::{Value as SqlValue, ValueRef};
use rusqlite::{params, Connection};

use crate::apply::{Context, Spot, Stop};
use crate::let_go::{self, Doomed};
use crate::outcome::Outcome;
use crate::reject;
use crate::row_json::key_of_sql;
use crate::shape::Shape;
use crate::sql::quote;

/// The snapshot in progress named this row.
pub(crate) fn remember(conn: &Connection, table: &str, key: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT OR IGNORE INTO sync_snapshot_keys (table_name, key) VALUES (?1, ?2)",
    )?
    .execute(params![table, key])?;
    Ok(())
}

fn named(conn: &Connection, table: &str, key: &str) -> rusqlite::Result<bool> {
    conn.prepare_cached(
        "SELECT count(*) > 0 FROM sync_snapshot_keys WHERE table_name = ?1 AND key = ?2",
    )?
    .query_row(params![table, key], |row| row.get(0))
}

/// The end of the snapshot: sweeps the tables it covered, children first
/// (the reverse of the order listed), and forgets the rejections of those
/// tables recorded before it began.
pub(crate) fn end(ctx: &Context<'_>, end: &EndSnapshot) -> Result<Outcome, Stop> {
    let mut outcome = Outcome::default();
    for table in end.tables.iter().rev() {
        match ctx.shape(table) {
            Some(shape) if shape.mirror.written_by_server() => sweep(ctx, shape, &mut outcome)?,
            _ => log::warn!("the snapshot covered table `{table}`, which the replica does not hold from the server"),
        }
    }
    for table in &end.tables {
        reject::forget_before_snapshot(ctx.conn, table, ctx.head.epoch, ctx.snapshot_began)?;
    }
    reject::forget_other_epochs(ctx.conn, ctx.head.epoch, |table| {
        ctx.shape(table)
            .is_some_and(|s| s.mirror.written_by_server())
    })?;
    Ok(outcome)
}

/// Lets go of every row of the table the snapshot did not name.
fn sweep(ctx: &Context<'_>, shape: &Shape, outcome: &mut Outcome) -> Result<(), Stop> {
    let mut rows = Vec::new();
    let mut told_keys = Vec::new();
    for (key, values) in unnamed(ctx.conn, shape)? {
        // A row whose key is no key of the table's types is no row the
        // server sent: it was not named, and goes too.
        let told = key.is_some();
        let key = key.unwrap_or_else(|| format!("{values:?}"));
        let spot = Spot::Swept {
            table: shape.name.clone(),
            key: key.clone(),
        };
        match ctx.plan.verdict(&spot) {
            Some(why) if told => outcome.rejected(&shape.name, &key, parse(shape, &key), why),
            Some(why) => log::warn!("kept {key} of {}: {why}", shape.name),
            None => {
                rows.push(Doomed { key, values });
                told_keys.push(told);
            }
        }
    }
    let whole = Spot::Sweep {
        table: shape.name.clone(),
    };
    let one_at_a_time = ctx.plan.one_at_a_time.contains(&whole);
    let fates =
        let_go::let_go(ctx.conn, shape, &rows, one_at_a_time).map_err(|stop| match stop {
            let_go::Stop::Storage(e) => Stop::Storage(e),
            let_go::Stop::TransactionLost(None, why) => Stop::TransactionLost(whole.clone(), why),
            let_go::Stop::TransactionLost(Some(i), why) => Stop::TransactionLost(
                Spot::Swept {
                    table: shape.name.clone(),
                    key: rows[i].key.clone(),
                },
                why,
            ),
        })?;
    for ((told, row), fate) in told_keys.iter().zip(&rows).zip(fates) {
        match fate {
            let_go::Fate::Gone if *told => outcome.let_go(&shape.name, &row.key),
            let_go::Fate::Gone => {}
            let_go::Fate::Kept(why) if *told => outcome.rejected(
                &shape.name,
                &row.key,
                parse(shape, &row.key),
                format!("the database refused to let go of the row: {why}"),
            ),
            let_go::Fate::Kept(why) => log::warn!("kept {} of {}: {why}", row.key, shape.name),
        }
    }
    Ok(())
}

fn parse(shape: &Shape, key: &str) -> Option<Vec<magic_sync_proto::key::KeyPart>> {
    magic_sync_proto::key::parse(key, &shape.key_types).ok()
}

/// The rows the snapshot did not name: each one's key text (`None` when it
/// cannot be told) and the values its key columns hold.
fn unnamed(
    conn: &Connection,
    shape: &Shape,
) -> rusqlite::Result<Vec<(Option<String>, Vec<SqlValue>)>> {
    let sql = format!("SELECT {} FROM {}", shape.key_list(), quote(&shape.name));
    let mut statement = conn.prepare(&sql)?;
    let mut rows = statement.query([])?;
    let mut found = Vec::new();
    while let Some(row) = rows.next()? {
        let refs: Vec<ValueRef<'_>> = (0..shape.key.len())
            .map(|i| row.get_ref(i))
            .collect::<rusqlite::Result<_>>()?;
        let key = key_of_sql(shape, &refs);
        if let Some(key) = &key {
            if named(conn, &shape.name, key)? {
                continue;
            }
        }
        found.push((key, refs.into_iter().map(SqlValue::from).collect()));
    }
    Ok(found)
}

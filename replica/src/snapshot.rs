//! Snapshots (protocol §4.2): while one is in progress the replica
//! remembers every key its messages carried; at its end it lets go of every
//! row of the tables it covered that it did not name.
//!
//! The sweep compares keys in SQL (each stored row's key text against the
//! keys remembered), so only the rows it lets go of come back to Rust.

use magic_sync_proto::wire::EndSnapshot;
use rusqlite::types::Value as SqlValue;
use rusqlite::{params, Connection};

use crate::apply::{settle, Context, Spot, Stop};
use crate::let_go::{self, Doomed};
use crate::outcome::Outcome;
use crate::shape::Shape;
use crate::sql::quote;
use crate::{key_sql, reject};

/// The snapshot in progress named this row.
pub(crate) fn remember(conn: &Connection, table: &str, key: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT OR IGNORE INTO sync_snapshot_keys (table_name, key) VALUES (?1, ?2)",
    )?
    .execute(params![table, key])?;
    Ok(())
}

/// The snapshot in progress let go of this row: its last word on it.
pub(crate) fn forget(conn: &Connection, table: &str, key: &str) -> rusqlite::Result<()> {
    conn.prepare_cached("DELETE FROM sync_snapshot_keys WHERE table_name = ?1 AND key = ?2")?
        .execute(params![table, key])?;
    Ok(())
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
    let mut told = Vec::new();
    for (key, values) in unnamed(ctx.conn, shape)? {
        // A row whose key is no key of the table's types is no row the
        // server sent: it was not named, and goes too, unreported.
        let parts = parse(shape, &key);
        let spot = Spot::Swept {
            table: shape.name.clone(),
            key: key.clone(),
        };
        match ctx.plan.verdict(&spot) {
            Some(why) if parts.is_some() => outcome.rejected(&shape.name, &key, parts, why),
            Some(why) => log::warn!("kept {key} of {}: {why}", shape.name),
            None => {
                if ctx.plan.find_faults {
                    ctx.tracker
                        .borrow_mut()
                        .before(ctx.conn, ctx.links, shape, &values, spot)?;
                }
                told.push(parts);
                rows.push(Doomed { key, values });
            }
        }
    }
    let whole = Spot::Sweep {
        table: shape.name.clone(),
    };
    let one_at_a_time = ctx.plan.one_at_a_time.contains(&whole);
    let fates =
        let_go::let_go(&ctx.world(), shape, &rows, one_at_a_time).map_err(|stop| match stop {
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
    for ((parts, row), fate) in told.into_iter().zip(&rows).zip(fates) {
        match (parts, fate) {
            (Some(parts), fate) => settle(ctx, outcome, shape, row, Some(parts), fate)?,
            (None, let_go::Fate::Kept(why)) => {
                log::warn!("kept {} of {}: {why}", row.key, shape.name)
            }
            (None, _) => {}
        }
    }
    Ok(())
}

fn parse(shape: &Shape, key: &str) -> Option<Vec<magic_sync_proto::key::KeyPart>> {
    magic_sync_proto::key::parse(key, &shape.key_types)
        .ok()
        .filter(|parts| magic_sync_proto::key::join(parts) == key)
}

/// The rows the snapshot did not name: each one's key text and the values
/// its key columns hold.
fn unnamed(conn: &Connection, shape: &Shape) -> rusqlite::Result<Vec<(String, Vec<SqlValue>)>> {
    let key = key_sql::key(shape, "t");
    let sql = format!(
        "SELECT {key}, {} FROM {} t WHERE {key} NOT IN
         (SELECT key FROM sync_snapshot_keys WHERE table_name = ?1)",
        shape
            .key_columns()
            .map(|c| format!("t.{}", quote(&c.name)))
            .collect::<Vec<_>>()
            .join(", "),
        quote(&shape.name)
    );
    let mut statement = conn.prepare(&sql)?;
    let mut rows = statement.query([&shape.name])?;
    let mut found = Vec::new();
    while let Some(row) = rows.next()? {
        let key: String = row.get(0)?;
        let values = (0..shape.key.len())
            .map(|i| row.get::<_, SqlValue>(i + 1))
            .collect::<rusqlite::Result<_>>()?;
        found.push((key, values));
    }
    Ok(found)
}

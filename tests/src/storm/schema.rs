//! The storm's schema: the planner's walk (walk.rs), every rule of it, and
//! what the registers write — receipts (records of their own) and the
//! battery of their state row (a two-way row: the head office writes its
//! note, the register its battery). A register's products refuse one
//! named 'Forbidden' until a "deploy" drops the trigger that refuses it.

use std::collections::BTreeSet;

use magic_sync_replica::{Table, Tables};
use postgres::Client;
use uuid::Uuid;

use crate::walk;

/// What the storm's server adds to the walk's schema.
pub const SERVER_MORE: &str = "
    CREATE TABLE shop.receipts (
        id uuid PRIMARY KEY, register_id uuid NOT NULL, total_cents bigint NOT NULL);
    CREATE TABLE shop.register_state (
        id uuid PRIMARY KEY, register_id uuid NOT NULL,
        note text NOT NULL DEFAULT '', battery integer);
    SELECT sync.declare_table('shop.receipts', mirror => 'record', origin => 'register_id');
    SELECT sync.declare_table('shop.register_state', mirror => 'both',
                              sync => 'assigned(register_id)', origin => 'register_id',
                              replica_owned => '{battery}');
";

/// What a register adds to the walk's tables.
pub const REGISTER_MORE: &str = "
    CREATE TABLE IF NOT EXISTS receipts (
        id BLOB PRIMARY KEY NOT NULL, register_id BLOB NOT NULL,
        total_cents INTEGER NOT NULL);
    CREATE TABLE IF NOT EXISTS register_state (
        id BLOB PRIMARY KEY NOT NULL, register_id BLOB NOT NULL,
        note TEXT NOT NULL DEFAULT '', battery INTEGER, retired_at TEXT);
";

/// The register's own check, which the deploy drops: a product named
/// 'Forbidden' is refused. (A trigger, since SQLite cannot drop a CHECK
/// without making the table again.)
pub const REFUSING: &str = "
    CREATE TRIGGER IF NOT EXISTS no_forbidden BEFORE INSERT ON products
    WHEN NEW.name = 'Forbidden' BEGIN SELECT RAISE(ABORT, 'forbidden here'); END;
";

pub const DEPLOY: &str = "DROP TRIGGER IF EXISTS no_forbidden";

/// The tables that come down, as sync.held names them.
pub const DOWN_TABLES: [&str; 6] = [
    "categories",
    "products",
    "orders",
    "order_notes",
    "customers",
    "register_state",
];

/// The storm's server schema, whole.
pub fn server() -> String {
    format!("{}{SERVER_MORE}", walk::SERVER)
}

/// A register's schema, whole; with its own check until the deploy.
pub fn register(deployed: bool) -> String {
    let refusing = if deployed { "" } else { REFUSING };
    format!("{}{REGISTER_MORE}{refusing}", walk::REGISTER)
}

pub fn tables() -> Tables {
    let mut list: Vec<Table> = walk::TABLES.iter().map(|t| Table::catalog(*t)).collect();
    list.push(Table::record("receipts").origin("register_id"));
    list.push(
        Table::both("register_state")
            .replica_owned(&["battery"])
            .origin("register_id")
            .retired("retired_at"),
    );
    Tables::new(list)
}

/// What a register should hold: the walk's reference, and its state row.
pub fn should_hold(pg: &mut Client, register: Uuid) -> BTreeSet<(String, String)> {
    let mut rows = walk::should_hold(pg, register);
    for row in pg
        .query(
            "SELECT id::text FROM shop.register_state WHERE register_id = $1",
            &[&register],
        )
        .unwrap()
    {
        rows.insert(("register_state".to_owned(), row.get(0)));
    }
    rows
}

/// What the server records a register holding: rows applied, not being
/// let go of, not refused.
pub fn recorded(pg: &mut Client, register: Uuid) -> BTreeSet<(String, String)> {
    pg.query(
        "SELECT table_name, key FROM sync.held \
          WHERE replica = $1 AND leaving IS NULL AND refused IS NULL \
            AND table_name = ANY($2)",
        &[&register, &DOWN_TABLES.to_vec()],
    )
    .unwrap()
    .iter()
    .map(|r| (r.get(0), r.get(1)))
    .collect()
}

//! The end-to-end tests' shop, written once. At the head office: registers,
//! each with a name, and products sent to every live one; on a register:
//! its copy of the products. `tests/tests/common/mod.rs` opens it as it is;
//! the shop that files what registers send up
//! (`tests/tests/common/filing_shop.rs`) adds its own tables to the head
//! office's, through `head_office!`, since `concat!` takes literals only.
//! (The console demo, `examples/shop`, keeps a shop of its own in one
//! file, for a reader to see whole.)
//! And what a register's file holds, read the same way by the filing
//! shop's tests and the gateway's (`product_names_where`).

/// The text of [`HEAD_OFFICE`], for a shop that adds to it with `concat!`.
#[macro_export]
macro_rules! head_office {
    () => {
        "
    CREATE SCHEMA shop;
    CREATE TABLE shop.registers (
        id     uuid PRIMARY KEY,
        name   text NOT NULL,
        active boolean NOT NULL DEFAULT true);
    CREATE TABLE shop.products (
        id          uuid PRIMARY KEY,
        name        text NOT NULL,
        price_cents bigint NOT NULL,
        updated_at  timestamptz NOT NULL DEFAULT now());
    SELECT sync.declare_replicas('shop.registers', live => 'active');
    SELECT sync.declare_table('shop.products', sync => 'broadcast');
"
    };
}

/// The shop at the head office: its schema and declarations.
pub const HEAD_OFFICE: &str = head_office!();

/// A register's copy of the shop's products (`Table::catalog("products")`).
pub const REGISTER: &str = "
    CREATE TABLE IF NOT EXISTS products (
        id          BLOB PRIMARY KEY NOT NULL,
        name        TEXT NOT NULL,
        price_cents INTEGER NOT NULL,
        updated_at  TEXT NOT NULL);
";

/// The names of the products a register's file holds whose rows meet
/// `condition` (SQL: `true` for every row), sorted, read through a
/// connection of its own (beside a device loop that holds the replica's).
pub fn product_names_where(file: &std::path::Path, condition: &str) -> Vec<String> {
    let conn = rusqlite::Connection::open(file).unwrap();
    let mut names: Vec<String> = conn
        .prepare(&format!("SELECT name FROM products WHERE {condition}"))
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    names.sort();
    names
}

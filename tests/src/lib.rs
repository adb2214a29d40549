//! What magic_sync's end-to-end tests, benchmarks and the shop demo run on:
//! a throwaway PostgreSQL cluster with the extension installed, and a
//! throwaway nats-server. (The transports' clients are the replica
//! library's, features `pg-queue` and `nats`.) For the benchmarks of the
//! relay worker: the shop with its worker running over a transport
//! (`worker_shop`), and registers running the device loop that stamp
//! their commits (`registers`). For fuzzing both receives: the mutation
//! engine and the replica's half of the harness (`fuzz`). The end-to-end
//! tests' shop, on both sides (`shop`). A copy of PostgreSQL of a test's
//! own, to run another build's library in (`private_postgres`).

pub mod args;
pub mod bench_shop;
pub mod cluster;
pub mod figures;
pub mod fuzz;
pub mod killed_register;
pub mod nats;
pub mod pgbench;
pub mod private_postgres;
pub mod registers;
pub mod relaying;
pub mod shop;
pub mod storm;
pub mod walk;
pub mod worker_shop;

/// The benchmarks' shop: registers, and products sent to every live one.
pub const BROADCAST_SHOP: &str = "
    CREATE SCHEMA shop;
    CREATE TABLE shop.registers (id uuid PRIMARY KEY, active boolean NOT NULL DEFAULT true);
    CREATE TABLE shop.products (
        id uuid PRIMARY KEY, name text NOT NULL, price_cents bigint NOT NULL,
        updated_at timestamptz NOT NULL DEFAULT now());
    SELECT sync.declare_replicas('shop.registers', live => 'active');
    SELECT sync.declare_table('shop.products', sync => 'broadcast');
";

/// Adds `count` products to a shop (the benchmarks' or the tests'), named
/// 'Product 1' to 'Product `count`', each priced its number.
pub fn add_products(pg: &mut postgres::Client, count: usize) {
    pg.execute(
        "INSERT INTO shop.products (id, name, price_cents) \
         SELECT gen_random_uuid(), 'Product ' || i, i FROM generate_series(1, $1::int) AS i",
        &[&(count as i32)],
    )
    .unwrap();
}

pub use cluster::Cluster;

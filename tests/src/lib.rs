//! What magic_sync's end-to-end tests, benchmarks and the shop demo run on:
//! a throwaway PostgreSQL cluster with the extension installed. (The default
//! transport's client is the replica library's, feature `pg-queue`.)

pub mod args;
pub mod cluster;
pub mod relaying;

pub use cluster::Cluster;

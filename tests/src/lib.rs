//! What magic_sync's end-to-end tests and the shop demo run on: a throwaway
//! PostgreSQL cluster with the extension installed, and the default
//! transport's client.

pub mod cluster;
pub mod queue;

pub use cluster::Cluster;

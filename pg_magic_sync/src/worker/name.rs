//! The worker's name: what `pg_stat_activity.backend_type` shows, and what
//! every line it logs begins with.

pub const NAME: &str = "magic_sync relay";

//! Publishing what a pass recorded: the relay worker that runs passes by
//! itself, and the transports that carry the outbox to replicas. The
//! default is the queue inside PostgreSQL.

pub mod queue;
pub mod worker;

//! Publishing what a pass recorded: the transports that carry the outbox to
//! replicas. The default is the queue inside PostgreSQL.

pub mod queue;

//! Publishing what a pass recorded: the relay worker that runs passes by
//! itself, and the transports that carry the outbox to replicas. The
//! default is the queue inside PostgreSQL; with nats the worker pushes
//! each replica's messages to JetStream and files the Ups it consumes.

pub mod queue;
pub mod outbox;
pub mod nats;
pub mod transaction;
pub mod push;
pub mod stalls;
pub mod worker;

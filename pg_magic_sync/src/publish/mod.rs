//! Publishing what a pass recorded: the transports that carry the outbox
//! to replicas. The default is the queue inside PostgreSQL, which devices
//! take from themselves; with nats the relay worker (worker/push.rs)
//! publishes each replica's messages to JetStream and files the Ups it
//! consumes, through `nats` and what the outbox says is due (`outbox`).

pub mod queue;
pub mod outbox;
pub mod nats;

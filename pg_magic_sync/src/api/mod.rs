//! Every SQL function of the extension written in Rust, one file per
//! chapter of docs/src/server.md. Each is thin: it takes SQL values, calls
//! the stage that does the work, and turns the answer into SQL values.

mod declaring;
mod queue;
mod receiving;
mod relaying;

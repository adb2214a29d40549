//! The storm (the book's "How it is tested", third bullet): the planner's
//! walk of server writes (walk.rs) through the real relay worker and the
//! queue, registers on SQLite files driven a call at a time, while faults
//! are injected. The parts: `schema` (both sides, what a register should
//! hold and what the server records it holding), `register` (a device and
//! the faults it brings), `faults` (the tallies, and what explains each
//! provisioning), `run` (the walk, the settling and the checks).

pub mod faults;
pub mod register;
pub mod run;
pub mod schema;

pub use run::{Run, Storm};

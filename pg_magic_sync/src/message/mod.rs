//! A message as it travels: its envelope (the bytes a transport carries,
//! assembled from a replica's head and a shared body), the packing of
//! planned rows into bodies under the limits, and a row's bytes (`row`).
//! Its seal is crate::seal, which the epochs keep the secret of.

pub mod envelope;
pub mod pack;
pub mod row;

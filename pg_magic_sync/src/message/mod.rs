//! A message as it travels: its envelope (the bytes a transport carries,
//! assembled from a replica's head and a shared body), its seal, and the
//! packing of planned rows into bodies under the limits.

pub mod envelope;
pub mod seal;
pub mod pack;

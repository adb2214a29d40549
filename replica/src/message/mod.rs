//! What the server sends, before it is applied: a message decoded and
//! checked (`check`, public as `magic_sync_replica::check`), a `Down` read
//! in one pass over its bytes (`wire`).

pub mod check;
mod wire;

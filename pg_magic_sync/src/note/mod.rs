//! Noting: the triggers that write, in the writing transaction, a note of
//! every change to a table that goes down, and of every change to a group.
//!
//! Both are C-language row triggers (`sync.note_row`, `sync.note_group`):
//! a row trigger in PL/pgSQL, or a statement trigger reading transition
//! tables, costs more than the change it notes; these read the few columns
//! they need straight from the row and insert the note with a saved plan.
//! (`sync.refuse_truncate`, which declared tables run too, is PL/pgSQL:
//! sql/noting.sql.)
//!
//! What a trigger notes is said by its arguments, written from the
//! declaration by [`RowNoting::arguments`] and [`GroupNoting::arguments`],
//! each list after its length, so that `sync.triggers()` prints everything
//! the trigger does.
//!
//! The files, bottom up:
//! - arguments.rs: what a trigger notes, written from the declaration and
//!   read back from its arguments;
//! - columns.rs: a version of a row, read from the trigger's slot: its key
//!   text form, and whether columns changed;
//! - call.rs: what PostgreSQL hands a trigger function: checking it runs
//!   as an AFTER ROW trigger, its arguments, the row's versions;
//! - sink.rs: writing a note as catalog rows are written, or through SPI
//!   when the engine's table is not the shape this build knows;
//! - row.rs: `sync.note_row`, the notes of a table's row;
//! - group.rs: `sync.note_group`, the notes of a group table's row;
//! - wake.rs: a commit that noted wakes the database's relay worker.
//!
//! All the unsafe code of the write path is here; each block says why it
//! is sound.

mod arguments;
mod columns;
mod call;
mod sink;
mod row;
mod group;

pub use arguments::{GroupNoting, RowNoting};

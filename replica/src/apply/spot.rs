//! Places in a message: a row, or a group of rows let go of together.
//! Applying, the sweep at a snapshot's end and the search for the rows at
//! fault all name rows by their spot.

/// A place in a message: a row, or a group of rows let go of together.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Spot {
    Upsert {
        part: usize,
        row: usize,
    },
    Delete {
        part: usize,
        row: usize,
    },
    /// A part's deletes, let go of together.
    Deletes {
        part: usize,
    },
    /// A row a snapshot's end lets go of.
    Swept {
        table: String,
        key: String,
    },
    /// A table a snapshot's end sweeps, together.
    Sweep {
        table: String,
    },
}

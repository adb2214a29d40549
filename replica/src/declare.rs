//! Declaring the tables a device holds: what the device program writes.
//!
//! A declaration says how each table is shared with the server. What the
//! table looks like (its columns, their types, its key) is read from SQLite
//! itself when the replica opens (see `shape`), so the two cannot disagree.

/// How a table is shared with the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mirror {
    /// The server writes it; the replica holds a copy.
    Catalog,
    /// The replica writes it; its rows go up to the server. The engine never
    /// writes it: rows the server sends for it are rejected.
    Record,
    /// Written on both sides: the server owns the row, the replica some
    /// columns of it. Not supported yet.
    Both,
    /// A value the replica holds and acts on, which the server may wish
    /// otherwise. Not supported yet.
    Setting,
}

impl Mirror {
    pub fn name(self) -> &'static str {
        match self {
            Mirror::Catalog => "catalog",
            Mirror::Record => "record",
            Mirror::Both => "both",
            Mirror::Setting => "setting",
        }
    }

    /// Whether this build can hold a table shared this way.
    pub(crate) fn supported(self) -> bool {
        matches!(self, Mirror::Catalog | Mirror::Record)
    }

    /// Whether the server writes rows of such a table on the replica.
    pub(crate) fn written_by_server(self) -> bool {
        matches!(self, Mirror::Catalog | Mirror::Both)
    }
}

/// One table the device holds, as the device program declares it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Table {
    pub(crate) name: String,
    pub(crate) mirror: Mirror,
    pub(crate) key: Option<Vec<String>>,
    pub(crate) retired: Option<String>,
    pub(crate) origin: Option<String>,
}

impl Table {
    pub fn new(name: impl Into<String>, mirror: Mirror) -> Table {
        Table {
            name: name.into(),
            mirror,
            key: None,
            retired: None,
            origin: None,
        }
    }

    /// A table the server writes and the replica holds a copy of.
    pub fn catalog(name: impl Into<String>) -> Table {
        Table::new(name, Mirror::Catalog)
    }

    /// A table the replica writes and sends up.
    pub fn record(name: impl Into<String>) -> Table {
        Table::new(name, Mirror::Record)
    }

    /// A table written on both sides (not supported yet).
    pub fn both(name: impl Into<String>) -> Table {
        Table::new(name, Mirror::Both)
    }

    /// A setting (not supported yet).
    pub fn setting(name: impl Into<String>) -> Table {
        Table::new(name, Mirror::Setting)
    }

    /// The key's columns, in key order. Without it, the key is the SQLite
    /// table's primary key. Another set of columns needs a unique index.
    pub fn key(mut self, columns: &[&str]) -> Table {
        self.key = Some(columns.iter().map(|c| (*c).to_owned()).collect());
        self
    }

    /// The column the replica marks a row retired by (when it must let go of
    /// a row its own rows still point at). The replica owns it: an upsert
    /// sets it back to NULL.
    pub fn retired(mut self, column: impl Into<String>) -> Table {
        self.retired = Some(column.into());
        self
    }

    /// The column that names the replica a row belongs to.
    pub fn origin(mut self, column: impl Into<String>) -> Table {
        self.origin = Some(column.into());
        self
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn mirror(&self) -> Mirror {
        self.mirror
    }
}

/// Every table the device holds, parents first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tables {
    pub(crate) list: Vec<Table>,
}

impl Tables {
    pub fn new(list: Vec<Table>) -> Tables {
        Tables { list }
    }

    pub fn iter(&self) -> impl Iterator<Item = &Table> {
        self.list.iter()
    }

    pub fn get(&self, name: &str) -> Option<&Table> {
        self.list.iter().find(|t| t.name == name)
    }
}

//! How a table is shared between the server and its replicas, and how a
//! setting takes the server's wishes: the words both halves declare tables
//! with (`mirror => ...`, `apply => ...` on the server, `Table::catalog` and
//! its siblings on a replica).

/// Which way a table's rows travel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Mirror {
    /// Written on the server, held by replicas.
    #[default]
    Catalog,
    /// Written by a replica, filed on the server. Without a version it is
    /// history, written once; with one, its rows may change.
    Record,
    /// Written on the server, held by replicas, which write their own
    /// columns of it (the replica-owned ones) back.
    Both,
    /// A replica's own row, which it acts on, and whose desired columns the
    /// server may wish other values.
    Setting,
}

impl Mirror {
    pub const ALL: [Mirror; 4] = [
        Mirror::Catalog,
        Mirror::Record,
        Mirror::Both,
        Mirror::Setting,
    ];

    /// The name a declaration gives it.
    pub fn name(self) -> &'static str {
        match self {
            Mirror::Catalog => "catalog",
            Mirror::Record => "record",
            Mirror::Both => "both",
            Mirror::Setting => "setting",
        }
    }

    pub fn from_name(name: &str) -> Option<Mirror> {
        Mirror::ALL.into_iter().find(|m| m.name() == name)
    }

    /// Whether the server sends its rows down to replicas (and notes its
    /// changes to do so).
    pub fn goes_down(self) -> bool {
        matches!(self, Mirror::Catalog | Mirror::Both)
    }

    /// Whether a replica's writes of it go up to the server.
    pub fn goes_up(self) -> bool {
        !matches!(self, Mirror::Catalog)
    }
}

/// How a setting takes a wish.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Apply {
    /// Every wish is carried out.
    Always,
    /// A wish is carried out only while the row is at the version it is
    /// based on.
    IfUnchanged,
}

impl Apply {
    pub const ALL: [Apply; 2] = [Apply::Always, Apply::IfUnchanged];

    /// The name a declaration gives it.
    pub fn name(self) -> &'static str {
        match self {
            Apply::Always => "always",
            Apply::IfUnchanged => "if_unchanged",
        }
    }

    pub fn from_name(name: &str) -> Option<Apply> {
        Apply::ALL.into_iter().find(|a| a.name() == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_reads_back_as_what_wrote_it() {
        for m in Mirror::ALL {
            assert_eq!(Mirror::from_name(m.name()), Some(m));
        }
        for a in Apply::ALL {
            assert_eq!(Apply::from_name(a.name()), Some(a));
        }
        assert_eq!(Mirror::from_name("Catalog"), None);
        assert_eq!(Apply::from_name("sometimes"), None);
    }

    #[test]
    fn only_catalogs_and_two_way_tables_go_down_and_all_but_catalogs_go_up() {
        let down: Vec<Mirror> = Mirror::ALL.into_iter().filter(|m| m.goes_down()).collect();
        let up: Vec<Mirror> = Mirror::ALL.into_iter().filter(|m| m.goes_up()).collect();
        assert_eq!(down, [Mirror::Catalog, Mirror::Both]);
        assert_eq!(up, [Mirror::Record, Mirror::Both, Mirror::Setting]);
    }
}

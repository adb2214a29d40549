//! The foreign keys of the whole database, read from SQLite: which rows
//! point at a row the server lets go of, so that one a row of the
//! replica's own points at is retired rather than deleted (protocol §4.3),
//! and a retired row is let go of once nothing points at it.

use rusqlite::Connection;

use crate::sql::quote;

/// One foreign key: `child (from...)` points at `parent (to...)`.
#[derive(Clone, Debug)]
pub(crate) struct Link {
    /// The key's id among its child's (`pragma_foreign_key_list`).
    pub id: i64,
    pub child: String,
    pub from: Vec<String>,
    pub parent: String,
    pub to: Vec<String>,
}

impl Link {
    /// `c."a" = p."x" AND c."b" = p."y"`: a child row `c` points at `p`.
    pub(crate) fn joins(&self, child: &str, parent: &str) -> String {
        self.from
            .iter()
            .zip(&self.to)
            .map(|(f, t)| format!("{child}.{} = {parent}.{}", quote(f), quote(t)))
            .collect::<Vec<_>>()
            .join(" AND ")
    }
}

/// Every foreign key between tables of the database (the engine's left out).
pub(crate) fn read(conn: &Connection) -> rusqlite::Result<Vec<Link>> {
    let tables: Vec<String> = conn
        .prepare(
            "SELECT name FROM sqlite_schema WHERE type = 'table'
             AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' AND name NOT LIKE 'sync\\_%' ESCAPE '\\'",
        )?
        .query_map([], |row| row.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let mut links = Vec::new();
    let mut keys = conn.prepare(
        "SELECT id, \"table\", \"from\", \"to\" FROM pragma_foreign_key_list(?1) ORDER BY id, seq",
    )?;
    for child in &tables {
        let mut rows = keys.query([child])?;
        let mut current: Option<(i64, Link, bool)> = None;
        while let Some(row) = rows.next()? {
            let id: i64 = row.get(0)?;
            let parent: String = row.get(1)?;
            let from: String = row.get(2)?;
            let to: Option<String> = row.get(3)?;
            if current.as_ref().map(|c| c.0) != Some(id) {
                if let Some((_, link, implicit)) = current.take() {
                    links.push(resolve(conn, link, implicit)?);
                }
                current = Some((
                    id,
                    Link {
                        id,
                        child: child.clone(),
                        from: Vec::new(),
                        parent,
                        to: Vec::new(),
                    },
                    to.is_none(),
                ));
            }
            let (_, link, _) = current.as_mut().expect("set above");
            link.from.push(from);
            if let Some(to) = to {
                link.to.push(to);
            }
        }
        if let Some((_, link, implicit)) = current.take() {
            links.push(resolve(conn, link, implicit)?);
        }
    }
    // A key pointing at a table that does not exist points at nothing.
    links.retain(|l| {
        tables.iter().any(|t| t.eq_ignore_ascii_case(&l.parent)) && l.from.len() == l.to.len()
    });
    Ok(links)
}

/// A foreign key that names no parent columns points at the parent's
/// primary key.
fn resolve(conn: &Connection, mut link: Link, implicit: bool) -> rusqlite::Result<Link> {
    if implicit {
        link.to = conn
            .prepare("SELECT name FROM pragma_table_info(?1) WHERE pk > 0 ORDER BY pk")?
            .query_map([&link.parent], |row| row.get(0))?
            .collect::<rusqlite::Result<_>>()?;
    }
    Ok(link)
}

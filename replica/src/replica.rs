//! The replica: one SQLite database kept in sync with the server, and the
//! calls a device program makes on it (open, receive, next_up, sent...).

use rusqlite::Connection;
use uuid::Uuid;

use crate::apply::upsert;
use crate::apply::{self, Received};
use crate::engine::{pragmas, schema, state, triggers};
use crate::error::Error;
use crate::model::declare::{self, Lane, Tables};
use crate::model::links::{self, Link};
use crate::model::shape::{self, Shape};
use crate::settings::Settings;
use crate::sql;
use crate::upload::backlog::TableBacklog;
use crate::upload::{self, Narrowed, Refusal, Upload};
use crate::wishes::{self, Answered, Wishes};

/// The statements the connection keeps prepared: the engine's own for a
/// message, its report and the wait between, the upserts of each table,
/// and room for the rarer ones (a snapshot's, a narrowing's).
const STATEMENTS_CACHED: usize = 128;

/// The last message applied, as it carried its numbers, and the gap.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Applied {
    /// Empty, with sequence 0, before anything was applied.
    pub epoch: String,
    pub sequence: u64,
    pub nonce: u64,
    pub mac: Vec<u8>,
    /// The newest message the replica could not follow; 0 for no gap.
    pub gap: u64,
    /// The snapshot in progress, if any.
    pub snapshot: Option<String>,
}

/// A replica: one SQLite database kept in sync with the server.
pub struct Replica {
    conn: Connection,
    tables: Tables,
    shapes: Vec<Shape>,
    links: Vec<Link>,
    /// Indices into `shapes` of the tables that go up, parents first.
    up_order: Vec<usize>,
    me: Uuid,
    settings: Settings,
    /// The database's triggers, set aside on this connection while only
    /// the engine writes through it.
    quiet: triggers::Quiet,
    /// The text of the upsert statements made so far.
    texts: upsert::Texts,
    /// Opened, and not yet said where it stands (what it applied, its
    /// backlog): the first lane's next Up says it, even with nothing else
    /// to say. Once per open.
    owes_standing: bool,
    /// What the transport took of the replica's news, beyond what its
    /// database says (`upload::sent`): since this open only, as what it
    /// owes on opening makes up for the rest.
    said: i64,
    /// The handlers of wishes still running past their timeout.
    running: wishes::Running,
}

impl Replica {
    /// Opens the replica on a connection whose database has the engine's
    /// tables and triggers (see [`install`](crate::engine::schema::install)).
    /// Refuses a connection set up so that it could lose or half-apply a
    /// message, tables that do not match their declaration, triggers that
    /// are not exactly the engine's,
    /// lanes that do not place every table that goes up on one lane, a
    /// setting with no handler of its wishes (`Settings::wishes`), and a
    /// database that belongs to another replica.
    ///
    /// From then on the database knows `me`: its triggers refuse what the
    /// replica must not write. Rows set aside by an earlier run are tried
    /// again. Its first Up says at once where it stands (see
    /// [`next_up`](Replica::next_up)): so the server finds out a database
    /// put back to an older copy, or a device set up again under its id.
    pub fn open(
        conn: Connection,
        tables: Tables,
        me: Uuid,
        settings: Settings,
    ) -> Result<Replica, Error> {
        pragmas::check(&conn)?;
        // A message, its report and the wait between run more statements
        // than rusqlite's cache holds by default (16): prepared anew each
        // time, they cost a register more CPU than the rows it writes.
        conn.set_prepared_statement_cache_capacity(STATEMENTS_CACHED);
        schema::check_installed(&conn)?;
        let shapes = shape::read_all(&conn, &tables)?;
        triggers::check_shapes(&conn, &shapes)?;
        let unhandled = settings.wishes.problems(&tables);
        if !unhandled.is_empty() {
            return Err(Error::declaration(unhandled.join("; ")));
        }
        let lanes = settings.lanes_placed(&shapes)?;
        let links = links::read(&conn)?;
        let up_order = up_order(&shapes, &links);
        remember_who(&conn, &tables, me, &lanes)?;
        Ok(Replica {
            conn,
            tables,
            shapes,
            links,
            up_order,
            me,
            settings,
            quiet: triggers::Quiet::default(),
            texts: upsert::Texts::default(),
            owes_standing: true,
            said: 0,
            running: wishes::Running::default(),
        })
    }

    /// Opens a replica from what its database recorded: the declarations
    /// and lanes of the program that last opened it, and its id. For tools
    /// that look after a device without its program's code: given no
    /// handlers, it holds wishes and carries none out (the program's
    /// handlers do).
    pub fn open_recorded(conn: Connection, mut settings: Settings) -> Result<Replica, Error> {
        if settings.wishes.tables().next().is_none() {
            settings.wishes = Wishes::none_carried_out();
        }
        schema::check_installed(&conn)?;
        let (tables, lanes) = schema::recorded_declarations(&conn)?;
        let me = state::me(&conn)?;
        let me = Uuid::try_parse(&me).map_err(|_| {
            Error::Schema("no program opened this replica knowing its id yet".to_owned())
        })?;
        let mut named: Vec<Lane> = Vec::new();
        for (table, lane) in lanes {
            match named.iter_mut().find(|l| l.name == lane) {
                Some(l) => l.tables.push(table),
                None => named.push(Lane {
                    name: lane,
                    tables: vec![table],
                }),
            }
        }
        let first = named.first().map(|l| l.name.clone());
        settings.lanes = named;
        if settings.lanes.is_empty() || first.is_none() {
            settings.lanes = vec![Lane::new("main", &[])];
        }
        Replica::open(conn, tables, me, settings)
    }

    /// Takes one message the transport delivered. `Ok`: it is committed (or
    /// changed nothing); acknowledge it. `Err`: do not acknowledge it; it
    /// will be delivered again.
    ///
    /// Once a message that changed a wish (or ended a snapshot) committed,
    /// the wishes due are offered to their handlers, with no transaction
    /// open; what they were answered is in the `Received`. Trouble there
    /// is logged and tried again later: the message stands.
    pub fn receive(&mut self, bytes: &[u8]) -> Result<Received, Error> {
        let mut received = self.take(bytes)?;
        if let Some(answered) = changes_wishes(&mut received) {
            match self.offer_wishes() {
                Ok(answers) => *answered = answers,
                Err(e) => log::warn!("offering wishes failed, and is tried again later: {e}"),
            }
        }
        Ok(received)
    }

    fn take(&mut self, bytes: &[u8]) -> Result<Received, Error> {
        apply::message(
            &apply::Replicating {
                conn: &self.conn,
                shapes: &self.shapes,
                links: &self.links,
                limits: &self.settings.limits,
                quiet: &self.quiet,
                texts: &self.texts,
            },
            bytes,
        )
    }

    /// Carries out every wish due — not answered, or answered waiting —
    /// one at a time, each offered to its setting's handler (protocol
    /// 4.5), and answers what it answered. Call it when what a handler
    /// waited for is back (the hardware answers again); the device loop
    /// calls it at start and every `wishes_every` while one waits. Nothing
    /// while a snapshot is in progress.
    pub fn offer_wishes(&mut self) -> Result<Vec<Answered>, Error> {
        let offering = offering(
            &self.conn,
            &self.shapes,
            self.me,
            &self.settings,
            &self.quiet,
        );
        Ok(wishes::offer(&offering, &mut self.running)?)
    }

    /// Makes the next `Up` of the first lane say where the replica stands
    /// (its last applied message, its gap, its backlog), even with nothing
    /// else to say, as the first after `open` does. The device loop calls
    /// it each time it connects again after a failure: a replica whose
    /// messages cannot be taken is then still heard, and the server sees
    /// it alive and not moving.
    pub fn say_where_it_stands(&mut self) {
        self.owes_standing = true;
    }

    /// How many wishes wait to be carried out: not answered yet, or
    /// answered waiting.
    pub fn wishes_due(&self) -> Result<usize, Error> {
        let offering = offering(
            &self.conn,
            &self.shapes,
            self.me,
            &self.settings,
            &self.quiet,
        );
        Ok(wishes::due_count(&offering)?)
    }

    fn uploading(&self) -> upload::Uploading<'_> {
        upload::Uploading {
            conn: &self.conn,
            shapes: &self.shapes,
            order: &self.up_order,
            settings: &self.settings,
            opening: self.owes_standing,
            said: self.said,
        }
    }

    /// The next `Up` to send, on any lane (the first lane first), when
    /// there is something the server has not heard: rows written, a
    /// message applied or delivered again, a wider gap, a rejection,
    /// digests or a backlog due. The first after [`open`](Replica::open)
    /// says where the replica stands, even with nothing else to say: its
    /// last applied message (sequence 0 when it applied nothing), its gap
    /// and its backlog, on the first lane; once it was `sent`, it is not
    /// offered again for that alone. Call [`sent`](Replica::sent) or
    /// [`refused`](Replica::refused) with it before asking for the next
    /// one of its lane.
    pub fn next_up(&mut self) -> Result<Option<Upload>, Error> {
        upload::next(&self.uploading(), None)
    }

    /// The next `Up` of one lane.
    pub fn next_up_on(&mut self, lane: &str) -> Result<Option<Upload>, Error> {
        if !self.settings.lanes.iter().any(|l| l.name == lane) {
            return Err(Error::declaration(format!("no lane `{lane}`")));
        }
        upload::next(&self.uploading(), Some(lane))
    }

    /// The transport took this `Up`.
    pub fn sent(&mut self, upload: &Upload) -> Result<(), Error> {
        upload::sent(&self.conn, upload, &mut self.said)?;
        if upload.standing {
            self.owes_standing = false;
        }
        Ok(())
    }

    /// The transport refused this `Up`: for now (its rows go again), or
    /// for good (it is narrowed down to the row at fault).
    pub fn refused(&mut self, upload: &Upload, refusal: Refusal) -> Result<Narrowed, Error> {
        upload::refused(&self.conn, upload, refusal)
    }

    /// Per table that goes up: rows not sent yet, sent and not filed, and
    /// set aside.
    pub fn progress(&self) -> Result<Vec<TableBacklog>, Error> {
        Ok(upload::progress(&self.uploading())?)
    }

    /// Where the replica stands.
    pub fn last_applied(&self) -> Result<Applied, Error> {
        let state = state::read(&self.conn)?;
        Ok(Applied {
            snapshot: state.in_snapshot().then(|| state.snapshot.clone()),
            epoch: state.epoch,
            sequence: state.sequence,
            nonce: state.nonce,
            mac: state.mac,
            gap: state.gap,
        })
    }

    /// The database, to read what the replica holds and write its own
    /// tables: the triggers note those writes, and refuse the ones the
    /// replica must not make.
    pub fn connection(&self) -> &Connection {
        self.run_triggers();
        &self.conn
    }

    /// Closes the replica, giving the connection back.
    pub fn into_connection(self) -> Connection {
        self.run_triggers();
        self.conn
    }

    /// The triggers the engine set aside while only it wrote run again:
    /// the program may write now.
    fn run_triggers(&self) {
        if let Err(error) = self.quiet.run(&self.conn) {
            // SQLite refuses this only for a setting it does not know.
            panic!("magic_sync: could not run the database's triggers again: {error}");
        }
    }

    pub fn tables(&self) -> &Tables {
        &self.tables
    }

    /// The replica's own id, as the server knows it.
    pub fn me(&self) -> Uuid {
        self.me
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }
}

/// What offering wishes needs of a replica.
fn offering<'a>(
    conn: &'a Connection,
    shapes: &'a [Shape],
    me: Uuid,
    settings: &'a Settings,
    quiet: &'a triggers::Quiet,
) -> wishes::Offering<'a> {
    wishes::Offering {
        conn,
        shapes,
        me,
        wishes: &settings.wishes,
        timeout: settings.wishes_timeout,
        quiet,
    }
}

/// Where a message changed a wish (its rows of `sync_wishes`, or the end of
/// a snapshot, which may have let go of some): the answers it is to carry.
fn changes_wishes(received: &mut Received) -> Option<&mut Vec<Answered>> {
    match received {
        Received::Applied { tables, wishes, .. }
            if tables.iter().any(|t| t.table == declare::WISHES) =>
        {
            Some(wishes)
        }
        Received::Ended { wishes, .. } => Some(wishes),
        _ => None,
    }
}

/// The tables that go up, parents before the tables that point at them
/// (by their foreign keys), in declaration order where nothing says.
fn up_order(shapes: &[Shape], links: &[Link]) -> Vec<usize> {
    let up: Vec<usize> = (0..shapes.len())
        .filter(|&i| shapes[i].mirror.goes_up())
        .collect();
    let mut order = Vec::new();
    let mut left = up.clone();
    while !left.is_empty() {
        let ready = left.iter().position(|&i| {
            !left.iter().any(|&j| {
                j != i
                    && links.iter().any(|l| {
                        l.child.eq_ignore_ascii_case(&shapes[i].name)
                            && l.parent.eq_ignore_ascii_case(&shapes[j].name)
                    })
            })
        });
        // A cycle: declaration order decides.
        let at = ready.unwrap_or(0);
        order.push(left.remove(at));
    }
    order
}

/// Keeps the replica's id in its database (refusing one that belongs to
/// another replica), and the declarations it was opened with.
fn remember_who(
    conn: &Connection,
    tables: &Tables,
    me: Uuid,
    lanes: &[(String, String)],
) -> Result<(), Error> {
    let mine = me.hyphenated().to_string();
    let known = state::me(conn)?;
    if !known.is_empty() && known != mine {
        return Err(Error::Schema(format!(
            "this database belongs to replica {known}, not {mine}"
        )));
    }
    let (recorded, recorded_lanes) = schema::recorded_declarations(conn)?;
    let set_aside: bool = conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM sync_notes WHERE set_aside IS NOT NULL)
             OR EXISTS (SELECT 1 FROM sync_narrowing)",
        [],
        |r| r.get(0),
    )?;
    if known.is_empty() || &recorded != tables || recorded_lanes != lanes || set_aside {
        let tx = sql::Transaction::begin(conn)?;
        state::set_me(conn, &mine)?;
        schema::record_declarations(conn, tables, lanes)?;
        // A run of a build that may send them: rows set aside go again.
        conn.execute(
            "UPDATE sync_notes SET set_aside = NULL, pending = 1 WHERE set_aside IS NOT NULL",
            [],
        )?;
        conn.execute("DELETE FROM sync_narrowing", [])?;
        tx.commit()?;
    }
    Ok(())
}

//! How the replica runs: its settings, and the check that its lanes place
//! every table that goes up on exactly one of them.

use std::time::Duration;

use magic_sync_proto::limits::Limits;

use crate::error::Error;
use crate::model::declare::Lane;
use crate::model::shape::Shape;
use crate::wishes::Wishes;

/// How the replica runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// The most one message carries: the server's limits, or more. Every
    /// Up is kept within them too.
    pub limits: Limits,
    /// The lanes Ups go on; the first carries every table no other names,
    /// and everything the engine says (what it applied, rejections,
    /// digests, the backlog). One lane, `main`, unless said.
    pub lanes: Vec<Lane>,
    /// How often digests are said (hourly unless said).
    pub digests_every: Duration,
    /// An upload the transport took and the server has not answered goes
    /// again after this long.
    pub resend_after: Duration,
    /// A backlog that changed (and did not empty) is said at most this
    /// often...
    pub backlog_every: Duration,
    /// ...and one that is not empty is said again this often.
    pub backlog_again: Duration,
    /// The handler of each setting's wishes: every setting needs one.
    pub wishes: Wishes,
    /// How often the device loop offers wishes again while one waits.
    pub wishes_every: Duration,
    /// How long a handler may take before its wish waits.
    pub wishes_timeout: Duration,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            limits: Limits::DEFAULT,
            lanes: vec![Lane::new("main", &[])],
            digests_every: Duration::from_secs(60 * 60),
            resend_after: Duration::from_secs(5 * 60),
            backlog_every: Duration::from_secs(60),
            backlog_again: Duration::from_secs(10 * 60),
            wishes: Wishes::new(),
            wishes_every: Duration::from_secs(60),
            wishes_timeout: Duration::from_secs(30),
        }
    }
}

impl Settings {
    /// Each table that goes up on exactly one lane: (table, lane) for those a
    /// lane names.
    pub(crate) fn lanes_placed(&self, shapes: &[Shape]) -> Result<Vec<(String, String)>, Error> {
        let mut problems = Vec::new();
        let mut placed: Vec<(String, String)> = Vec::new();
        if self.lanes.is_empty() {
            problems.push("no lane: an Up needs one".to_owned());
        }
        for (i, lane) in self.lanes.iter().enumerate() {
            if self.lanes[..i].iter().any(|l| l.name == lane.name) {
                problems.push(format!("lane `{}` is named twice", lane.name));
            }
            for table in &lane.tables {
                match shapes.iter().find(|s| &s.name == table) {
                    None => problems.push(format!(
                        "lane `{}` names table `{table}`, which is not declared",
                        lane.name
                    )),
                    Some(s) if !s.mirror.goes_up() => problems.push(format!(
                        "lane `{}` names table `{table}`, which does not go up",
                        lane.name
                    )),
                    Some(_) => {}
                }
                if let Some((_, other)) = placed.iter().find(|(t, _)| t == table) {
                    problems.push(format!(
                        "table `{table}` is on two lanes, `{other}` and `{}`",
                        lane.name
                    ));
                } else {
                    placed.push((table.clone(), lane.name.clone()));
                }
            }
        }
        if problems.is_empty() {
            Ok(placed)
        } else {
            Err(Error::declaration(problems.join("; ")))
        }
    }
}

//! The faults the storm injects, counted by kind, and the provisionings
//! (snapshots begun) each explains. A provisioning is put down to a cause
//! the register was owed one for — its first, its coming back live, a
//! message lost, its file put back, the server's database put back — and one nothing explains is counted
//! as such: the storm asserts there is none.

use std::collections::BTreeMap;
use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Fault {
    /// A message taken and acknowledged, never applied.
    Lost,
    /// A message applied twice.
    Duplicated,
    /// Only some of what waited taken.
    Partial,
    /// Applied, then the device died before acknowledging.
    DiedBeforeAck,
    /// Its storage busy: the message not taken this round.
    Busy,
    /// Not heard from (nothing taken or sent) for some rounds.
    Unheard,
    /// A row the register's own check refuses, until the deploy.
    Refused,
    /// A relay pass's backend terminated while the pass ran.
    RelayTerminated,
    /// The relay worker killed (SIGKILL) wherever it was.
    WorkerKilled,
    /// PostgreSQL stopped immediately and started again.
    ServerRestarted,
    /// A register's file put back to an older copy.
    FileRestored,
    /// The server's database restored from an older dump.
    DumpRestored,
    /// A deploy changed a declaration: a rule, or the columns that travel.
    Redeclared,
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            Fault::Lost => "lost",
            Fault::Duplicated => "duplicated",
            Fault::Partial => "partial take",
            Fault::DiedBeforeAck => "died before ack",
            Fault::Busy => "storage busy",
            Fault::Unheard => "unheard",
            Fault::Refused => "refused until deploy",
            Fault::RelayTerminated => "relay terminated mid-pass",
            Fault::WorkerKilled => "worker killed",
            Fault::ServerRestarted => "postgres stopped immediately",
            Fault::FileRestored => "file restored from a copy",
            Fault::DumpRestored => "server restored from a dump",
            Fault::Redeclared => "a declaration changed",
        };
        f.write_str(name)
    }
}

/// Why a register was provisioned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Cause {
    /// Its first provisioning.
    First,
    /// It became live again.
    LiveAgain,
    /// A message of its was lost: the gap cure, or the unconfirmed check.
    Lost,
    /// Its file was put back to an older copy.
    FileRestored,
    /// The server's database was restored from an older dump: a new
    /// epoch, every replica provisioned again.
    ServerRestored,
    /// Nothing the storm did explains it.
    Unexplained,
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            Cause::First => "first",
            Cause::LiveAgain => "live again",
            Cause::Lost => "lost message",
            Cause::FileRestored => "file restored",
            Cause::ServerRestored => "server restored",
            Cause::Unexplained => "unexplained",
        };
        f.write_str(name)
    }
}

/// The tallies of one storm.
#[derive(Default)]
pub struct Tally {
    pub faults: BTreeMap<Fault, usize>,
    pub provisionings: BTreeMap<Cause, usize>,
    /// Causes owed per register, not yet spent on a provisioning.
    owed: BTreeMap<uuid::Uuid, Vec<Cause>>,
    /// Times each cause was owed.
    pub owed_total: BTreeMap<Cause, usize>,
}

impl Tally {
    pub fn fault(&mut self, fault: Fault) {
        *self.faults.entry(fault).or_default() += 1;
    }

    /// The register may be provisioned once for `cause`.
    pub fn owe(&mut self, register: uuid::Uuid, cause: Cause) {
        self.owed.entry(register).or_default().push(cause);
        *self.owed_total.entry(cause).or_default() += 1;
    }

    /// A snapshot began at the register: put down to the cause it was owed
    /// last (a snapshot for it covers what was owed before), or counted as
    /// unexplained.
    pub fn provisioned(&mut self, register: uuid::Uuid) -> Cause {
        let owed = self.owed.entry(register).or_default();
        let cause = owed.pop().unwrap_or(Cause::Unexplained);
        *self.provisionings.entry(cause).or_default() += 1;
        cause
    }

    /// The system settled: what was owed and not spent is forgiven (a
    /// lost message a snapshot already covered costs nothing more), but by
    /// registers away (not live): nothing is sent them, so a file restored
    /// meanwhile is found out only once they are back.
    pub fn settled(&mut self, away: &std::collections::BTreeSet<uuid::Uuid>) {
        self.owed.retain(|register, _| away.contains(register));
    }

    pub fn provisionings_for(&self, cause: Cause) -> usize {
        self.provisionings.get(&cause).copied().unwrap_or(0)
    }
}

impl fmt::Display for Tally {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "faults injected:")?;
        for (fault, n) in &self.faults {
            writeln!(f, "  {fault:<30} {n}")?;
        }
        writeln!(f, "provisionings (snapshots begun), by cause (owed):")?;
        for (cause, n) in &self.provisionings {
            let owed = self.owed_total.get(cause).copied().unwrap_or(0);
            writeln!(f, "  {cause:<30} {n} ({owed})")?;
        }
        Ok(())
    }
}

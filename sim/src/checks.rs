//! The simulator's checkers and the one typed failure each reports.
//!
//! While a run goes on, three watches look at what the machines do
//! (`Checks`): the margin monitor (a mutation posted inside its attempt's
//! last margin: [`MarginBreach`], `engine::attempt`), the I4 watch (an entry
//! marked for recycling while an index word names it, or linked while
//! marked: [`MarkedLinked`], `engine_audit`) and the corrupt-state watch (a
//! machine answering `Error::Corrupt`: [`CorruptState`]). When it ends, the
//! final sweep ([`SweepFailure`]), Cell's recovery ([`RecoveryFailure`]) and
//! tree audit ([`UnreachableMeganode`]) and the data-table audit
//! ([`crate::DteAudit`]) report theirs. A swarm case's verdict names one
//! [`CaseFailure`]: the first checker, in the verdict's order
//! ([`crate::swarm::verdict_of`]), that found something, with its first
//! finding and how many there were.
//!
//! Each finding is a type with the fields that locate it; its `Display` is
//! the sentence the swarm prints, and it serialises as that sentence (a
//! report's JSON keeps its shape).

use std::fmt;

use nessie_cell::region::RegionState;
use nessie_cell::RegionId;
use nessie_protocol::{ClientId, Corruption, DteAddr, Error, NodeId, RemoteAddr};
use serde::{Serialize, Serializer};

/// How many findings a watch keeps (the first ones; a run that breaks a
/// rule once usually breaks it many times).
pub const KEPT: usize = 16;

/// One watch's findings, the first [`KEPT`].
pub(crate) struct Watch<T> {
    found: Vec<T>,
}

impl<T> Default for Watch<T> {
    fn default() -> Self {
        Watch { found: Vec::new() }
    }
}

impl<T> Watch<T> {
    /// Whether a finding would still be kept (a watch that is full need
    /// not look).
    pub(crate) fn wants_more(&self) -> bool {
        self.found.len() < KEPT
    }

    /// Keeps `finding` if fewer than [`KEPT`] are kept.
    pub(crate) fn record(&mut self, finding: T) {
        if self.wants_more() {
            self.found.push(finding);
        }
    }

    /// The findings, leaving the watch empty.
    pub(crate) fn take(&mut self) -> Vec<T> {
        std::mem::take(&mut self.found)
    }

    /// The findings so far.
    #[cfg(test)]
    pub(crate) fn found(&self) -> &[T] {
        &self.found
    }
}

/// The watches of a running simulation.
#[derive(Default)]
pub(crate) struct Checks {
    /// The margin monitor.
    pub(crate) margin: Watch<MarginBreach>,
    /// The I4 watch ([`crate::audit`]).
    pub(crate) marked_linked: Watch<MarkedLinked>,
    /// The corrupt-state watch.
    pub(crate) corrupt: Watch<CorruptState>,
}

/// Serialises a finding as its sentence.
macro_rules! serialize_as_sentence {
    ($($t:ty),*) => {$(
        impl Serialize for $t {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }
    )*};
}

serialize_as_sentence!(
    MarginBreach,
    MarkedLinked,
    CorruptState,
    SweepFailure,
    RecoveryFailure,
    UnreachableMeganode
);

/// The mutations the margin rule bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Mutation {
    /// A CAS of a data entry's state word to valid or deleted.
    CommitCas,
    /// Another CAS of a data entry's state word.
    StateCas,
    /// A CAS of an index table entry.
    IndexCas,
    /// An RDMA WRITE.
    Write,
}

impl fmt::Display for Mutation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mutation::CommitCas => "a commit CAS",
            Mutation::StateCas => "a state CAS",
            Mutation::IndexCas => "an index CAS",
            Mutation::Write => "a WRITE",
        })
    }
}

/// The margin rule broken: a client posted a mutation inside the last
/// margin before its attempt's deadline (docs/protocol.md, A2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MarginBreach {
    /// The client (its number in the run).
    pub client: usize,
    /// What it posted.
    pub mutation: Mutation,
    /// Where to.
    pub addr: RemoteAddr,
    /// How long before the deadline it posted it (ns; negative: after).
    pub before_deadline_ns: i64,
    /// The margin (ns).
    pub margin_ns: u64,
}

impl fmt::Display for MarginBreach {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "client {} posted {} to {:?} {} ns before its attempt's deadline (margin {} ns)",
            self.client, self.mutation, self.addr, self.before_deadline_ns, self.margin_ns
        )
    }
}

/// I4's first step broken ([`crate::audit`]): an entry marked for recycling
/// while linked, or linked while marked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MarkedLinked {
    /// A recycle mark landed on an entry an index table entry names.
    Marked {
        /// The entry.
        entry: DteAddr,
        /// When (virtual ns).
        at: u64,
    },
    /// An index CAS linked an entry marked for recycling.
    Linked {
        /// The entry.
        entry: DteAddr,
        /// When (virtual ns).
        at: u64,
    },
}

impl fmt::Display for MarkedLinked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MarkedLinked::Marked { entry, at } => write!(
                f,
                "entry {entry} was marked for recycling at {at} ns while an index table entry names it"
            ),
            MarkedLinked::Linked { entry, at } => write!(
                f,
                "an index CAS linked entry {entry} at {at} ns, which is marked for recycling"
            ),
        }
    }
}

/// A machine answered that it met a corrupt state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CorruptState {
    /// The client whose machine answered it.
    pub client: ClientId,
    /// What it met.
    pub corruption: Corruption,
}

impl fmt::Display for CorruptState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.client, self.corruption)
    }
}

/// An operation of the final sweep (a lone client, after the faults, writes
/// and reads back every key) that did not succeed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SweepFailure {
    /// The operation's name.
    pub op: &'static str,
    /// Its key's number.
    pub key: u64,
    /// Its error (`None`: it never finished).
    pub error: Option<Error>,
}

impl fmt::Display for SweepFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} of key {} by a lone client after the faults stopped",
            self.op, self.key
        )?;
        match &self.error {
            Some(e) => write!(f, ": {e}"),
            None => f.write_str(" never finished"),
        }
    }
}

/// Cell's recovery of a failed server went wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecoveryFailure {
    /// A recovery ended with an error.
    Failed {
        /// The node that ran it.
        node: usize,
        /// When it ended (virtual ns).
        at: u64,
        /// Its error.
        error: Error,
    },
    /// A server failed and no recovery took its regions over.
    NotTakenOver {
        /// The failed server.
        server: usize,
        /// When it failed (virtual ns).
        failed_at: u64,
    },
}

impl fmt::Display for RecoveryFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecoveryFailure::Failed { node, at, error } => {
                write!(f, "the recovery node {node} ran at {at} ns failed: {error}")
            }
            RecoveryFailure::NotTakenOver { server, failed_at } => write!(
                f,
                "server {server} failed at {failed_at} ns and no recovery took its regions over"
            ),
        }
    }
}

/// Cell's tree at quiescence does not reach a meganode its directory lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnreachableMeganode {
    /// The word naming the root could not be read: nothing is reachable.
    RootUnreadable,
    /// A listed region the tree does not reach (an orphan holding its slot).
    Orphan {
        /// The region.
        region: RegionId,
        /// Its state in the directory.
        state: RegionState,
        /// The server holding it.
        node: NodeId,
        /// Its slot there.
        slot: u32,
    },
}

impl fmt::Display for UnreachableMeganode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UnreachableMeganode::RootUnreadable => f.write_str("the root word is unreadable"),
            UnreachableMeganode::Orphan {
                region,
                state,
                node,
                slot,
            } => write!(f, "{region} ({state:?} on {node} slot {slot})"),
        }
    }
}

/// Why a swarm case fails: the first checker, in the verdict's order, that
/// found something ([`crate::swarm::verdict_of`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CaseFailure {
    /// Operations still running at the horizon, past every deadline the
    /// protocol promises to return by.
    Stuck {
        /// How many.
        operations: u64,
    },
    /// Cell's recovery went wrong.
    Recovery {
        /// The first failure.
        first: RecoveryFailure,
        /// How many.
        count: usize,
    },
    /// The final sweep could not write or read back a key.
    Sweep {
        /// The first failure.
        first: SweepFailure,
        /// How many.
        count: usize,
    },
    /// The margin monitor saw a mutation inside an attempt's last margin.
    MarginRule {
        /// The first breach.
        first: MarginBreach,
        /// How many (the first few are kept).
        count: usize,
    },
    /// The I4 watch saw a linked entry marked for recycling.
    MarkedLinked {
        /// The first breach.
        first: MarkedLinked,
        /// How many (the first few are kept).
        count: usize,
    },
    /// An operation answered that it met a corrupt state.
    Corrupt {
        /// The first one.
        first: CorruptState,
        /// How many (the first few are kept).
        count: usize,
    },
    /// Cell's directory lists meganodes its tree does not reach.
    UnreachableMeganode {
        /// The first one.
        first: UnreachableMeganode,
        /// How many.
        count: usize,
    },
    /// The history lost operations that ended (or scans): its check would
    /// prove nothing.
    TruncatedHistory {
        /// Operations the history holds.
        held: usize,
        /// Operations that ended.
        ended: u64,
    },
    /// Nothing was checked: an empty history is no pass.
    NothingChecked,
    /// The history is not linearizable.
    NotLinearizable(nessie_check::Violation),
    /// The recorded history is malformed (a recorder's bug).
    MalformedHistory(String),
    /// The history with Cell's range scans as single operations is not
    /// linearizable.
    ScansNotLinearizable(nessie_check::ordered::Violation),
    /// The data-table audit found index words of an earlier incarnation
    /// linking reused entries.
    StaleLinks {
        /// How many at quiescence.
        count: u64,
        /// Each one, described.
        stale: Vec<String>,
    },
    /// The data-table audit found more entries leaked than the protocol
    /// admits.
    Leaked {
        /// Entries neither named nor reusable at quiescence.
        leaked: u64,
        /// What the protocol admits.
        admitted: u64,
        /// Leaks the operations counted.
        counted: u64,
        /// Admitted per crash.
        per_crash: u64,
        /// Crashes (and operations given up).
        crashes: u64,
        /// Each leaked entry, described.
        leaks: Vec<String>,
    },
}

impl fmt::Display for CaseFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CaseFailure::Stuck { operations } => write!(
                f,
                "{operations} operation(s) never finished: still running at the horizon, \
                 past every deadline the protocol promises to return by"
            ),
            CaseFailure::Recovery { first, count } => {
                write!(f, "{first} ({count} recovery failure(s))")
            }
            CaseFailure::Sweep { first, count } => {
                write!(f, "{first} ({count} sweep operation(s) failed)")
            }
            CaseFailure::MarginRule { first, count } => {
                write!(f, "the margin rule is broken: {first} ({count} breach(es))")
            }
            CaseFailure::MarkedLinked { first, count } => write!(
                f,
                "a linked entry was marked for recycling (I4): {first} ({count} in all)"
            ),
            CaseFailure::Corrupt { first, count } => write!(
                f,
                "an operation reported a corrupt state ({count} in all): {first}"
            ),
            CaseFailure::UnreachableMeganode { first, count } => write!(
                f,
                "a meganode is listed but unreachable in the tree at quiescence: {first} \
                 ({count} in all)"
            ),
            CaseFailure::TruncatedHistory { held, ended } => write!(
                f,
                "the history holds {held} operations but {ended} ended: it is truncated, and its \
                 check would prove nothing"
            ),
            CaseFailure::NothingChecked => {
                f.write_str("no operation was checked: an empty history is no pass")
            }
            CaseFailure::NotLinearizable(v) => write!(f, "not linearizable: {v}"),
            CaseFailure::MalformedHistory(m) => {
                write!(f, "the recorded history is malformed: {m}")
            }
            CaseFailure::ScansNotLinearizable(v) => {
                write!(f, "not linearizable with its range scans: {v}")
            }
            CaseFailure::StaleLinks { count, stale } => write!(
                f,
                "index words of an earlier incarnation link reused entries: {count} at \
                 quiescence: {}",
                stale.join("; ")
            ),
            CaseFailure::Leaked {
                leaked,
                admitted,
                counted,
                per_crash,
                crashes,
                leaks,
            } => write!(
                f,
                "data table entries leaked: {leaked} neither named nor reusable at quiescence, \
                 {admitted} admitted ({counted} counted by the operations, {per_crash} per crash \
                 x {crashes}): {}",
                leaks.join("; ")
            ),
        }
    }
}

impl CaseFailure {
    /// The failure `findings` show, `make` naming it from the first and how
    /// many there are (`None`: nothing found).
    pub(crate) fn first_of<T: Clone>(
        findings: &[T],
        make: impl FnOnce(T, usize) -> CaseFailure,
    ) -> Option<CaseFailure> {
        findings.first().map(|f| make(f.clone(), findings.len()))
    }
}

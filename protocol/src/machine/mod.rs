//! The operations as sans-IO state machines.
//!
//! A machine never blocks, sleeps or reads a clock. A driver calls
//! [`Machine::poll`] with the current time; the machine answers with work
//! requests to post, `Pending` while completions are outstanding, or its
//! result. Completions go back through [`Machine::complete`]. Each call to
//! `poll` after a round completes makes exactly one protocol step, so a model
//! checker can interleave machines one fabric operation at a time.
//!
//! - [`GetMachine`][]: GET.
//! - [`PutMachine`] / [`DeleteMachine`]: PUT and DELETE (one logic, two kinds),
//!   including candidate choice, MIGRATE and recovery of abandoned entries.
//! - [`GrowMachine`]: one step of a growth's sweep.
//! - [`RenewMachine`], [`TakeShareMachine`]: a client without storage's
//!   lease renewal, and the taking of its share.

mod alloc_step;
pub(crate) mod context;
mod get;
pub(crate) mod io;
mod lease;
mod migrate;
mod pure_round;
mod recover;
mod search;
mod sweep;
mod write;

pub use crate::addr::ClientId;
pub use context::{ClientState, Cx};
pub use get::GetLogic;
pub use io::Poll;
pub use lease::{ReleaseLogic, RenewLogic, TakeShareLogic};
pub use search::MAX_FRONTIER;
pub use sweep::{GrowLogic, Swept};
pub use write::{WriteKind, WriteLogic};

use crate::error::{CorruptionKind, Error};
use crate::fabric::Completion;
use crate::stats::OpStats;
use crate::time::Nanos;
use io::Io;
pub use io::Results;

/// A sans-IO operation: poll it with the time, post what it asks, feed back
/// completions, until it is done.
pub trait Machine {
    /// What the operation returns.
    type Output;

    /// Takes one step at time `now` (the time on the client's node).
    fn poll(&mut self, client: &mut ClientState, now: Nanos) -> Poll<Result<Self::Output, Error>>;

    /// Hands the machine the completion of one of its work requests.
    fn complete(&mut self, completion: Completion);

    /// What the operation has issued so far.
    fn stats(&self) -> OpStats;

    /// When the machine, having answered [`Poll::Pending`], wants to be
    /// polled again even if no completion arrives: the first instant at
    /// which it gives up the completions its round still misses (as
    /// quinn-proto's `Connection::poll_timeout`). `None`: only a completion
    /// moves it. A driver waits for completions until then and no longer
    /// ([`crate::time::wait_for`]).
    ///
    /// Required, with no default: a machine that forgot it would answer
    /// "never" and a driver would wait on a completion that a lost request
    /// never brings.
    fn poll_timeout(&self, client: &ClientState) -> Option<Nanos>;
}

/// The protocol logic of one operation attempt, driven by [`OpMachine`].
pub trait Logic {
    /// What the operation returns.
    type Output;

    /// Consumes the results of the last round (empty at the start) and either
    /// issues the next round through `cx` (returning `None`) or finishes.
    #[doc(hidden)]
    fn advance(&mut self, cx: &mut Cx<'_>, results: Results)
        -> Option<Result<Self::Output, Error>>;

    /// The key the operation is about, if it is about one (what an
    /// unreachable node was needed for: [`crate::Needed`]).
    #[doc(hidden)]
    fn key(&self) -> Option<&[u8]> {
        None
    }
}

/// One attempt of an operation: its logic, its rounds and its deadline (the
/// time of its first step plus the expiration period).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OpMachine<L> {
    logic: L,
    io: Io,
    deadline: Option<Nanos>,
    /// When the current round was handed out.
    round_posted_at: Nanos,
    done: bool,
    /// Where the attempt is with its preamble: before its first step it
    /// reads the directory word when the client's view of the index is
    /// behind (docs/protocol.md §2.5), and a client without storage whose
    /// heartbeat is overdue beats (§2.4), both in one round.
    preamble: Preamble,
}

/// An attempt's preamble round.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Preamble {
    /// Not yet decided (before the first step).
    Unstarted,
    /// The round is out: the directory READ (when `directory`), then the
    /// heartbeat CAS (when `beat`).
    Out {
        /// The directory word is read.
        directory: bool,
        /// The heartbeat is advanced.
        beat: bool,
    },
    /// The logic runs.
    Done,
}

/// A GET attempt.
pub type GetMachine = OpMachine<GetLogic>;
/// A PUT attempt (output: whether the key existed before).
pub type PutMachine = OpMachine<WriteLogic>;
/// A DELETE attempt (output: whether the key existed before).
pub type DeleteMachine = OpMachine<WriteLogic>;
/// One step of a growth's sweep (docs/protocol.md §2.5).
pub type GrowMachine = OpMachine<GrowLogic>;
/// A client without storage's lease renewal (docs/protocol.md §2.4).
pub type RenewMachine = OpMachine<RenewLogic>;
/// A client without storage's taking of its share (docs/protocol.md §2.4).
pub type TakeShareMachine = OpMachine<TakeShareLogic>;
/// A client without storage's release of its share ([`ReleaseLogic`]).
pub type ReleaseMachine = OpMachine<ReleaseLogic>;

impl<L: Logic> OpMachine<L> {
    /// Wraps the logic of one attempt.
    pub fn new(logic: L) -> Self {
        let mut io = Io::default();
        io.stats.attempts = 1;
        OpMachine {
            logic,
            io,
            deadline: None,
            round_posted_at: Nanos::ZERO,
            done: false,
            preamble: Preamble::Unstarted,
        }
    }

    /// The attempt's deadline, once started.
    pub fn deadline(&self) -> Option<Nanos> {
        self.deadline
    }

    /// The time after which a poll gives up the completions still missing
    /// from the current round (the deadline, or one `margin` after the round
    /// was handed out if that is later); `None` before the first poll.
    pub fn gives_up_after(&self, margin: std::time::Duration) -> Option<Nanos> {
        self.deadline
            .map(|d| d.max(self.round_posted_at.plus(margin)))
    }
}

impl GetMachine {
    /// A GET of `key`.
    pub fn get(key: &[u8]) -> GetMachine {
        OpMachine::new(GetLogic::new(key.to_vec()))
    }
}

impl GrowMachine {
    /// One step of the growth's sweep: seals a chunk of the old generation,
    /// or ends the growth once every chunk is sealed.
    pub fn grow_step() -> GrowMachine {
        OpMachine::new(GrowLogic::step())
    }
}

impl RenewMachine {
    /// A renewal of the client's lease (its heartbeat).
    pub fn renew() -> RenewMachine {
        OpMachine::new(RenewLogic::default())
    }
}

impl ReleaseMachine {
    /// A release of the client's share.
    pub fn release() -> ReleaseMachine {
        OpMachine::new(ReleaseLogic::default())
    }
}

impl TakeShareMachine {
    /// The taking of the client's share, and the keys of its windows.
    pub fn take_share() -> TakeShareMachine {
        OpMachine::new(TakeShareLogic::default())
    }
}

impl PutMachine {
    /// A PUT of `key` = `value`.
    pub fn put(key: &[u8], value: &[u8]) -> PutMachine {
        OpMachine::new(WriteLogic::new(
            key.to_vec(),
            WriteKind::Put(value.to_vec()),
        ))
    }

    /// A DELETE of `key`.
    pub fn delete(key: &[u8]) -> DeleteMachine {
        OpMachine::new(WriteLogic::new(key.to_vec(), WriteKind::Delete))
    }
}

impl<L: Logic> Machine for OpMachine<L> {
    type Output = L::Output;

    fn poll(&mut self, client: &mut ClientState, now: Nanos) -> Poll<Result<L::Output, Error>> {
        if self.done {
            return Poll::Done(Err(Error::corrupt(
                CorruptionKind::Bug,
                "machine polled after it finished",
            )));
        }
        let deadline = *self
            .deadline
            .get_or_insert_with(|| now.plus(client.cfg.expiration));
        if self.io.has_outbox() {
            self.round_posted_at = now;
            return Poll::Post(self.io.take_outbox(client.home()));
        }
        if !self.io.round_complete() {
            // Every wait ends by the attempt's deadline (a round posted later,
            // i.e. the CAS that settles a lost commit, gets one margin, within
            // which A2 has it land): past it, the missing completions are given
            // up on (reported as `NoCompletion`: "may have executed") and the
            // logic decides what it can say.
            let give_up = deadline.max(self.round_posted_at.plus(client.cfg.deadline_margin));
            if now <= give_up || client.faults.ignore_deadline {
                return Poll::Pending;
            }
            tracing::debug!(
                missing = self.io.outstanding(),
                "completions missing at the deadline"
            );
            self.io.stats.lost_completions += self.io.outstanding() as u64;
        }
        match self.preamble {
            Preamble::Unstarted => {
                // A client that met a growth seal its view did not expect
                // reads the directory first (the logic then runs in the view
                // it names); one whose heartbeat is overdue beats; both in
                // one round.
                let directory = client.view_stale;
                let term = crate::time::duration_nanos(client.cfg.lease_term);
                let beat = !client.faults.pure_beats_only_on_writes
                    && client
                        .pure
                        .as_ref()
                        .is_some_and(|p| p.beat_overdue(now.0, term));
                if directory || beat {
                    if directory {
                        self.io.issue(crate::growth::read_directory(&client.cfg));
                    }
                    if beat {
                        Cx {
                            io: &mut self.io,
                            client,
                            now,
                            deadline,
                        }
                        .beat();
                    }
                    self.preamble = Preamble::Out { directory, beat };
                    self.round_posted_at = now;
                    return Poll::Post(self.io.take_outbox(client.home()));
                }
            }
            Preamble::Out { directory, beat } => {
                let results = self.io.take_results();
                if beat {
                    // A beat that found another count: the agent took the
                    // share back, which the client's next write learns
                    // from its lease block (`LeaseLost`); the operation goes
                    // on (a GET needs no lease).
                    if let Some(r) = results.get(usize::from(directory)) {
                        let mut cx = Cx {
                            io: &mut self.io,
                            client,
                            now,
                            deadline,
                        };
                        let _ = cx.on_beat(r);
                    }
                }
                if now > deadline && !client.faults.ignore_deadline {
                    // Given up at the deadline: nothing was done.
                    self.done = true;
                    return Poll::Done(Err(Error::Timeout));
                }
                if directory {
                    match results.first().map(io::word) {
                        Some(Ok(w)) => {
                            // The word only moves forward; so does the view.
                            client.view = client.view.max(crate::growth::IndexView::decode(w));
                            client.view_stale = false;
                        }
                        Some(Err(e)) => {
                            self.done = true;
                            return Poll::Done(Err(self.io.unreachable_because(
                                client,
                                self.logic.key(),
                                e,
                            )));
                        }
                        None => {
                            self.done = true;
                            return Poll::Done(Err(Error::Timeout));
                        }
                    }
                }
            }
            Preamble::Done => {}
        }
        self.preamble = Preamble::Done;
        // A step may decide without issuing anything (e.g. a cache hit); keep
        // stepping until it issues a round or finishes.
        for _ in 0..1024 {
            let results = self.io.take_results();
            let mut cx = Cx {
                io: &mut self.io,
                client,
                now,
                deadline,
            };
            if let Some(result) = self.logic.advance(&mut cx, results) {
                if let Err(e) = &result {
                    tracing::trace!(error = %e, "attempt failed");
                }
                self.done = true;
                return Poll::Done(
                    result.map_err(|e| self.io.unreachable_because(client, self.logic.key(), e)),
                );
            }
            if self.io.has_outbox() {
                self.round_posted_at = now;
                return Poll::Post(self.io.take_outbox(client.home()));
            }
        }
        self.done = true;
        Poll::Done(Err(Error::corrupt(
            CorruptionKind::Bug,
            "state machine made no progress",
        )))
    }

    fn complete(&mut self, completion: Completion) {
        self.io.complete(completion);
    }

    fn stats(&self) -> OpStats {
        self.io.stats
    }

    fn poll_timeout(&self, client: &ClientState) -> Option<Nanos> {
        if self.done || self.io.has_outbox() || self.io.round_complete() {
            return None;
        }
        // `poll` gives up once `now` is past this instant.
        self.gives_up_after(client.cfg.deadline_margin)
            .map(|t| Nanos(t.0.saturating_add(1)))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::addr::NodeId;
    use crate::config::Config;

    #[test]
    fn a_pending_round_asks_to_be_polled_the_instant_it_gives_up() {
        let cfg = Arc::new(Config::default());
        let id = ClientId {
            node: NodeId(0),
            index: 0,
        };
        let mut st = ClientState::new(cfg.clone(), id).unwrap();
        let mut m = GetMachine::get(b"key");
        assert_eq!(m.poll_timeout(&st), None, "not started");
        let t0 = Nanos(1_000_000_000);
        assert!(matches!(m.poll(&mut st, t0), Poll::Post(w) if !w.is_empty()));
        let at = m.poll_timeout(&st).expect("a round is out");
        let give_up = m.gives_up_after(cfg.deadline_margin).unwrap();
        assert_eq!(at, Nanos(give_up.0 + 1));
        // No completion arrives: waiting is all a poll does until that
        // instant, and at it the machine decides (the round given up).
        assert!(matches!(m.poll(&mut st, give_up), Poll::Pending));
        assert!(!matches!(m.poll(&mut st, at), Poll::Pending));
    }
}

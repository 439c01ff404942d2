//! The run's clock and its event queue ([`Events`]): what happens next, in
//! (time, sequence) order, so that a run is a function of its spec.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// What can happen in a run: each an `Engine` handler (`Engine::handle`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ev {
    Poll(usize),
    /// Look again at a round whose completions may never come (client,
    /// round).
    Wake(usize, u64),
    Restart(usize),
    NodeDown(usize),
    NodeUp(usize),
    Arrive(usize),
    Land(usize),
    Back(usize),
    Complete(usize),
    /// A client's wait (back-off, response) is over (client, round).
    KvDue(usize, u64),
    /// A server worker steps.
    WorkerPoll(usize),
    /// A server worker's wait is over (worker, round).
    WorkerDue(usize, u64),
    /// A server worker's round may be past its deadline with completions
    /// missing (worker, round).
    WorkerWake(usize, u64),
    /// A crashed server worker's replacement starts.
    WorkerRestart(usize),
    /// The preload of a server-driven system is done: the measured
    /// workload starts.
    Measure,
    /// A Cell server node fails for good.
    ServerFail(usize),
    /// A Cell server node's failure is detected: a survivor recovers.
    Detect(usize),
    /// A node's agent makes a pass over its lease blocks.
    Agent(usize),
}

#[derive(Debug, PartialEq, Eq)]
struct Scheduled {
    at: u64,
    seq: u64,
    ev: Ev,
}

impl Ord for Scheduled {
    fn cmp(&self, o: &Self) -> Ordering {
        // A min-heap on (time, sequence).
        (o.at, o.seq).cmp(&(self.at, self.seq))
    }
}

impl PartialOrd for Scheduled {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

/// The run's virtual time and the events still to come.
pub(crate) struct Events {
    queue: BinaryHeap<Scheduled>,
    /// Numbers the events scheduled: events of one instant come in the
    /// order they were scheduled.
    seq: u64,
    /// Events processed so far.
    pub(crate) count: u64,
    /// Virtual time of the last event processed.
    pub(crate) now: u64,
    /// When the measured workload ends (no operation arrives after it).
    pub(crate) end: u64,
    /// No event after this instant is processed.
    pub(crate) horizon: u64,
}

impl Events {
    /// Nothing scheduled; time stands at `now`, the workload ends at `end`.
    pub(crate) fn new(now: u64, end: u64) -> Events {
        Events {
            queue: BinaryHeap::new(),
            seq: 0,
            count: 0,
            now,
            end,
            horizon: u64::MAX,
        }
    }

    /// `ev` happens at `at`, after every event already scheduled for `at`.
    pub(crate) fn schedule(&mut self, at: u64, ev: Ev) {
        self.seq += 1;
        self.queue.push(Scheduled {
            at,
            seq: self.seq,
            ev,
        });
    }

    /// The next event due by the horizon, taken off the queue (`None`: the
    /// queue is empty or the horizon has come; an event past the horizon
    /// stays queued, and time stands at the horizon).
    pub(crate) fn next(&mut self) -> Option<(u64, Ev)> {
        match self.queue.peek() {
            Some(s) if s.at <= self.horizon => self.queue.pop().map(|s| (s.at, s.ev)),
            Some(_) => {
                self.now = self.horizon;
                None
            }
            None => None,
        }
    }

    /// Whether some scheduled event is not one `pred` accepts.
    pub(crate) fn any_but(&self, pred: impl Fn(&Ev) -> bool) -> bool {
        self.queue.iter().any(|s| !pred(&s.ev))
    }

    /// Time moves to `at`, where an event is processed.
    pub(crate) fn advance(&mut self, at: u64) {
        self.now = at;
        self.count += 1;
    }

    /// Drops every scheduled event but those `keep` accepts, which are
    /// brought forward to now at the latest (each keeping its place among
    /// events of its instant).
    pub(crate) fn keep_only(&mut self, keep: impl Fn(&Ev) -> bool) {
        let now = self.now;
        let kept: Vec<Scheduled> = std::mem::take(&mut self.queue)
            .into_iter()
            .filter(|s| keep(&s.ev))
            .map(|s| Scheduled {
                at: s.at.min(now),
                ..s
            })
            .collect();
        self.queue.extend(kept);
    }
}

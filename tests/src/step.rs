//! Stepping a state machine one round at a time, so that tests can interleave
//! clients exactly (stall an owner between its CAS and its commit, run a
//! MIGRATE in the middle of a GET's forward pass, let time pass between a
//! round's completions and the step that processes them, ...).
//!
//! Every wait is bounded: a completion that never arrives (an injected lost
//! completion) leaves the machine waiting, which [`Stepper::step`] reports
//! instead of blocking; advance the clock past the attempt's deadline and step
//! again, and the machine gives the round up.

use std::time::Duration;

use nessie_fabric_sim::SimEndpoint;
use nessie_protocol::{ClientState, Completion, Endpoint, Error, Machine, Op, Poll, WorkRequest};

/// A machine, its client state and endpoint, advanced round by round.
pub struct Stepper<M: Machine> {
    machine: M,
    /// The client's protocol state (fault switches live here).
    pub state: ClientState,
    ep: SimEndpoint,
    next: Option<Vec<WorkRequest>>,
    result: Option<Result<M::Output, Error>>,
    /// Completions delivered to the machine and not processed yet.
    delivered: bool,
}

impl<M: Machine> Stepper<M> {
    /// Prepares `machine` for the client `state` on `ep`.
    pub fn new(machine: M, state: ClientState, ep: SimEndpoint) -> Stepper<M> {
        Stepper {
            machine,
            state,
            ep,
            next: None,
            result: None,
            delivered: false,
        }
    }

    /// Polls the machine (at the endpoint's current time) for its next round
    /// or result, unless one is already known. A machine still waiting for a
    /// lost completion stays waiting.
    fn fill(&mut self) {
        if self.next.is_some() || self.result.is_some() {
            return;
        }
        self.delivered = false;
        match self.machine.poll(&mut self.state, self.ep.now()) {
            Poll::Post(wrs) => self.next = Some(wrs),
            Poll::Done(r) => self.result = Some(r),
            Poll::Pending => {}
        }
    }

    /// Whether the machine waits for a completion that has not arrived (it
    /// gives the round up once the clock passes its deadline).
    pub fn waiting(&mut self) -> bool {
        self.fill();
        self.next.is_none() && self.result.is_none()
    }

    /// The endpoint (its clock, counters).
    pub fn endpoint(&self) -> &SimEndpoint {
        &self.ep
    }

    /// The operations the machine will post next (none once it is done).
    pub fn peek(&mut self) -> &[WorkRequest] {
        self.fill();
        self.next.as_deref().unwrap_or(&[])
    }

    /// Posts the next round and feeds back all its completions, without
    /// letting the machine process them: time may pass before the next
    /// [`Stepper::step`] (or [`Stepper::peek`]) does. Returns whether a round
    /// was posted.
    pub fn deliver(&mut self) -> bool {
        self.fill();
        let Some(wrs) = self.next.take() else {
            return false;
        };
        let n = wrs.len();
        for wr in wrs {
            let id = wr.id;
            if let Err(e) = self.ep.post(wr) {
                self.machine.complete(Completion { id, result: Err(e) });
            }
        }
        let mut got = Vec::new();
        // Bounded: at most n waits, and none once nothing is outstanding (a
        // lost completion is never outstanding at the endpoint).
        for _ in 0..n {
            if got.len() >= n || self.ep.outstanding() == 0 {
                break;
            }
            self.ep.wait(&mut got, Duration::from_millis(100));
        }
        for c in got {
            self.machine.complete(c);
        }
        self.delivered = true;
        true
    }

    /// Posts the next round, feeds back all its completions and lets the
    /// machine process them. Returns whether the machine is still running
    /// (it may be waiting for a lost completion: see [`Stepper::waiting`]).
    pub fn step(&mut self) -> bool {
        if !self.delivered {
            self.deliver();
        }
        self.fill();
        self.result.is_none()
    }

    /// Steps until the next round contains an operation matching `pred`
    /// (which is not posted). Returns false if the machine finished first.
    pub fn run_until(&mut self, pred: impl Fn(&Op) -> bool) -> bool {
        loop {
            if self.peek().iter().any(|wr| pred(&wr.op)) {
                return true;
            }
            if !self.step() {
                return false;
            }
        }
    }

    /// Runs to completion (bounded: a machine that waits for a lost
    /// completion without the clock passing its deadline is a test bug and
    /// fails loudly instead of hanging).
    pub fn finish(mut self) -> (Result<M::Output, Error>, M, ClientState) {
        for _ in 0..100_000 {
            if !self.step() {
                break;
            }
            assert!(
                !self.waiting(),
                "the machine waits for a lost completion: advance the clock past its deadline"
            );
        }
        self.fill();
        let r = self.result.take().expect("finished machine has a result");
        (r, self.machine, self.state)
    }
}

/// Whether `op` is a CAS on an index table entry.
pub fn is_index_cas(op: &Op) -> bool {
    matches!(op, Op::Cas { addr, .. } if addr.region == nessie_protocol::Region::Index)
}

/// Whether `op` is a CAS on a data table entry's state word (a commit or an abort),
/// or the CPU store the broken variant uses instead.
pub fn is_state_flip(op: &Op) -> bool {
    matches!(op, Op::Cas { addr, .. } if addr.region == nessie_protocol::Region::Data)
        || matches!(op, Op::LocalWrite { data, .. } if data.len() == 8)
}

/// Whether `op` reads an index table entry.
pub fn is_index_read(op: &Op) -> bool {
    matches!(op, Op::Read { addr, .. } if addr.region == nessie_protocol::Region::Index)
}

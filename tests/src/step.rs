//! Stepping a state machine one round at a time, so that tests can interleave
//! clients exactly (stall an owner between its CAS and its commit, run a
//! MIGRATE in the middle of a GET's forward pass, ...).

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
        }
    }

    fn fill(&mut self) {
        if self.next.is_some() || self.result.is_some() {
            return;
        }
        match self.machine.poll(&mut self.state, self.ep.now()) {
            Poll::Post(wrs) => self.next = Some(wrs),
            Poll::Done(r) => self.result = Some(r),
            Poll::Pending => unreachable!("a stepper never leaves completions outstanding"),
        }
    }

    /// The operations the machine will post next (none once it is done).
    pub fn peek(&mut self) -> &[WorkRequest] {
        self.fill();
        self.next.as_deref().unwrap_or(&[])
    }

    /// Posts the next round and feeds back all its completions. Returns
    /// whether the machine is still running.
    pub fn step(&mut self) -> bool {
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
        let mut seen = 0;
        while seen < n {
            let before = got.len();
            self.ep.wait(&mut got, Duration::from_millis(100));
            seen += got.len() - before;
            if got.len() == before && self.ep.outstanding() == 0 {
                break;
            }
        }
        for c in got {
            self.machine.complete(c);
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

    /// Runs to completion.
    pub fn finish(mut self) -> (Result<M::Output, Error>, M, ClientState) {
        while self.step() {}
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

//! An endpoint that hands one completion in late, deterministically: it
//! holds back the completion of the first request matching one rule, lets
//! the holder's deadline pass (on a manual clock, every wait that returns
//! nothing moves the fabric's clock by the wait's timeout), and hands the
//! held completion in right after the first later request matching another
//! rule is posted, ahead of that request's own completion. This is the
//! schedule of a completion that outlives its attempt and arrives while a
//! later attempt or operation waits for a request of the same number
//! (issue 24, hole 2).
//!
//! The simulator's own `TransportFault::LateCompletion` injection holds a
//! completion until a count of later posts or a time
//! (`nessie_fabric_sim::Later`), but picks its request by target node and
//! kind only, and a blocking `Client` on a manual clock never reaches its
//! deadline by itself; this wrapper around [`SimEndpoint`] picks requests
//! by a rule, moves the clock on every empty wait, and runs code at the
//! back-off (what other clients do meanwhile).

use std::collections::VecDeque;
use std::time::Duration;

use nessie_fabric_sim::SimEndpoint;
use nessie_protocol::{
    ClientClaim, ClientId, Completion, Endpoint, FabricError, Nanos, NodeId, Op, OpId, Topology,
    WorkRequest,
};

/// Which requests a rule picks.
pub type Rule = fn(&Op) -> bool;

enum Plan {
    /// Nothing held, nothing armed.
    Idle,
    /// The next request matching `hold` has its completion held back.
    Armed { hold: Rule, release: Rule },
    /// The completion of `id` is (or will be) held until a request matching
    /// `release` is posted.
    Holding { id: OpId, release: Rule },
}

/// A [`SimEndpoint`] (on a manual clock, without latency) that holds one
/// completion back (module docs).
pub struct LateEndpoint {
    inner: SimEndpoint,
    plan: Plan,
    held: Option<Completion>,
    /// Completions ready to be returned before the inner endpoint's.
    ready: VecDeque<Completion>,
    on_backoff: Option<Box<dyn FnOnce() + Send>>,
    /// Completions handed in late so far.
    pub released: usize,
}

impl LateEndpoint {
    /// Wraps `inner`, whose fabric must run on a manual clock without
    /// latency.
    pub fn new(inner: SimEndpoint) -> LateEndpoint {
        LateEndpoint {
            inner,
            plan: Plan::Idle,
            held: None,
            ready: VecDeque::new(),
            on_backoff: None,
            released: 0,
        }
    }

    /// Holds back the completion of the next request matching `hold`, and
    /// hands it in right after the next request matching `release` posted
    /// after it.
    pub fn hold(&mut self, hold: Rule, release: Rule) {
        self.plan = Plan::Armed { hold, release };
    }

    /// Runs `f` at the next back-off between two attempts (once): what other
    /// clients do while this one waits to retry.
    pub fn on_backoff(&mut self, f: impl FnOnce() + Send + 'static) {
        self.on_backoff = Some(Box::new(f));
    }

    /// Whether a completion is held back right now.
    pub fn holding(&self) -> bool {
        matches!(self.plan, Plan::Holding { .. })
    }

    /// Moves the inner endpoint's completions that have arrived into
    /// `out`, keeping the held one back.
    fn drain_inner(&mut self, out: &mut Vec<Completion>) {
        let mut got = Vec::new();
        self.inner.poll(&mut got);
        for c in got {
            match self.plan {
                Plan::Holding { id, .. } if id == c.id => self.held = Some(c),
                _ => out.push(c),
            }
        }
    }
}

impl Endpoint for LateEndpoint {
    fn node(&self) -> NodeId {
        self.inner.node()
    }

    fn post(&mut self, wr: WorkRequest) -> Result<(), FabricError> {
        let (id, op) = (wr.id, wr.op.clone());
        let release_now = match self.plan {
            Plan::Armed { hold, release } if hold(&op) => {
                self.plan = Plan::Holding { id, release };
                false
            }
            // (Under machine-local ids the releasing request may carry the
            // held one's very id: that is the hazard.)
            Plan::Holding { release, .. } => release(&op),
            _ => false,
        };
        if release_now {
            // Take the held completion out of the inner queue if it is
            // still there, so that it goes ahead of the new request's.
            let mut early = Vec::new();
            self.drain_inner(&mut early);
            self.ready.extend(early);
            if let Some(c) = self.held.take() {
                self.ready.push_back(c);
                self.released += 1;
            }
            self.plan = Plan::Idle;
        }
        self.inner.post(wr)
    }

    fn poll(&mut self, out: &mut Vec<Completion>) {
        out.extend(self.ready.drain(..));
        self.drain_inner(out);
    }

    /// Returns what has arrived (the fabric has no latency: everything not
    /// held is ready at once); when nothing has (a held completion is all
    /// that is outstanding), the fabric's manual clock moves by `timeout`,
    /// the time the wait would have taken.
    fn wait(&mut self, out: &mut Vec<Completion>, timeout: Duration) {
        let before = out.len();
        self.poll(out);
        if out.len() == before {
            self.inner.fabric().advance(timeout);
        }
    }

    fn now(&self) -> Nanos {
        self.inner.now()
    }

    fn backoff(&mut self, d: Duration) {
        if let Some(f) = self.on_backoff.take() {
            f();
        }
        self.inner.backoff(d);
    }

    fn topology(&self) -> Option<Topology> {
        self.inner.topology()
    }

    fn claim_client(&self, id: ClientId) -> Option<ClientClaim> {
        self.inner.claim_client(id)
    }
}

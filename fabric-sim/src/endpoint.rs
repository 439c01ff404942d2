//! [`SimEndpoint`], a client's connection to the simulated fabric (post work
//! requests, poll delayed completions, read the node's clock, hand in the
//! completions a [`TransportFault::LateCompletion`](nessie_protocol::TransportFault::LateCompletion) held back), and
//! [`Gate`], the handle that freezes a client's posts from another thread.

use std::collections::VecDeque;
use std::fmt;
use std::time::{Duration, Instant};

use nessie_protocol::{
    ChainLink, ClientClaim, ClientId, Completion, Endpoint, Fabric, FabricError, Nanos, NodeId,
    Topology, TransportError, WorkRequest,
};

use crate::counters::OpCounters;
use crate::fabric::{Blocked, Delivery, Later, SimFabric};
use crate::sync::{self, Arc, Condvar, Mutex};

/// The longest a wait sleeps before it looks at completions held until a
/// time again.
const TIMED_NAP: Duration = Duration::from_millis(1);

/// A completion waiting for its ready time.
#[derive(Debug)]
struct Pending {
    ready: Instant,
    completion: Completion,
}

/// A completion held back by a [`TransportFault::LateCompletion`](nessie_protocol::TransportFault::LateCompletion).
#[derive(Debug)]
struct Held {
    completion: Completion,
    until: Until,
}

/// When a held completion is handed in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Until {
    /// On [`SimEndpoint::release_late`] only.
    Request,
    /// Right after this many more posts, plus one.
    Posts(u64),
    /// Once the fabric's unskewed clock reads this.
    Time(Nanos),
}

/// A client's endpoint on a [`SimFabric`].
///
/// `post` performs the data transfer at once (word by word, see
/// `memory`) and queues the completion, ready after the fabric's
/// latency for NIC operations (wall clock, whatever the clock mode) or
/// immediately for LocalRead/LocalWrite. Several posted operations therefore
/// overlap their latency. Completions are returned in order of readiness
/// (ties in posting order). A completion an injected
/// [`TransportFault::LateCompletion`](nessie_protocol::TransportFault::LateCompletion) hit is held apart until its
/// [`Later`] comes.
pub struct SimEndpoint {
    fabric: SimFabric,
    node: NodeId,
    /// Sorted by ready time, ties in posting order.
    pending: VecDeque<Pending>,
    /// Completions held back, in posting order.
    held: Vec<Held>,
    counters: OpCounters,
    gate: Gate,
}

impl fmt::Debug for SimEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimEndpoint")
            .field("node", &self.node)
            .field("outstanding", &self.pending.len())
            .field("held", &self.held.len())
            .field("counters", &self.counters)
            .finish_non_exhaustive()
    }
}

impl SimEndpoint {
    pub(crate) fn new(fabric: SimFabric, node: NodeId) -> Self {
        SimEndpoint {
            fabric,
            node,
            pending: VecDeque::new(),
            held: Vec::new(),
            counters: OpCounters::default(),
            gate: Gate::new(),
        }
    }

    /// The fabric this endpoint belongs to.
    pub fn fabric(&self) -> &SimFabric {
        &self.fabric
    }

    /// Counters of the operations this endpoint posted (same rules as the
    /// per-node counters; operations rejected by `post` are not counted).
    pub fn counters(&self) -> OpCounters {
        self.counters
    }

    /// Number of posted operations whose completion has not been returned
    /// yet (held completions included; lost ones are not: they will never be
    /// returned).
    pub fn outstanding(&self) -> usize {
        self.pending.len() + self.held.len()
    }

    /// Number of completions held back by a
    /// [`TransportFault::LateCompletion`](nessie_protocol::TransportFault::LateCompletion) and not handed in yet.
    pub fn held_late(&self) -> usize {
        self.held.len()
    }

    /// Hands every held completion in now, whatever its schedule, in posting
    /// order (the next poll returns them); returns how many.
    pub fn release_late(&mut self) -> usize {
        let n = self.held.len();
        let now = Instant::now();
        for h in std::mem::take(&mut self.held) {
            self.enqueue(now, h.completion);
        }
        n
    }

    /// A post is about to happen: held completions whose count of posts is
    /// over are handed in (ahead of the new request's completion), the
    /// others count it.
    fn count_post(&mut self) {
        if self.held.is_empty() {
            return;
        }
        let now = Instant::now();
        let mut k = 0;
        while k < self.held.len() {
            match self.held[k].until {
                Until::Posts(0) => {
                    let h = self.held.remove(k);
                    self.enqueue(now, h.completion);
                }
                Until::Posts(n) => {
                    self.held[k].until = Until::Posts(n - 1);
                    k += 1;
                }
                Until::Request | Until::Time(_) => k += 1,
            }
        }
    }

    /// Held completions whose time has come are handed in.
    fn release_timed(&mut self) {
        if !self.held.iter().any(|h| matches!(h.until, Until::Time(_))) {
            return;
        }
        let clock = self.fabric.base_now();
        let now = Instant::now();
        let mut k = 0;
        while k < self.held.len() {
            match self.held[k].until {
                Until::Time(t) if t <= clock => {
                    let h = self.held.remove(k);
                    self.enqueue(now, h.completion);
                }
                _ => k += 1,
            }
        }
    }

    /// A handle to this endpoint's gate: while it is closed, `post` blocks.
    pub fn gate(&self) -> Gate {
        self.gate.clone()
    }

    fn enqueue(&mut self, ready: Instant, completion: Completion) {
        let at = self.pending.partition_point(|p| p.ready <= ready);
        self.pending.insert(at, Pending { ready, completion });
    }

    /// [`Endpoint::post`] and [`Endpoint::post_unsignaled`]: the operation
    /// is performed at once; its completion is queued unless it succeeded
    /// and `signaled` is false.
    fn post_as(&mut self, wr: WorkRequest, signaled: bool) -> Result<(), FabricError> {
        self.gate.pass();
        if self.fabric.node_state(self.node)?.is_down() {
            return Err(FabricError::NodeDown(self.node));
        }
        self.execute(wr, signaled).map(|_| ())
    }

    /// Performs `wr` now and queues its completion (unless it succeeded
    /// and `signaled` is false); what its fate means for requests chained
    /// behind it.
    fn execute(&mut self, wr: WorkRequest, signaled: bool) -> Result<Option<Blocked>, FabricError> {
        self.count_post();
        let posted = Instant::now();
        let (kind, bytes, nic) = (wr.op.kind(), wr.op.bytes(), wr.op.remote_addr().is_some());
        // The fabric is borrowed, not cloned: a clone per post made every
        // client thread write the one shared reference count, and the cache
        // line it sits on bounced between cores on the quiet path.
        let fabric = &self.fabric;
        let done = fabric.execute(self.node, &wr.op);
        let blocks = done.blocks();
        let (result, delivery) = (done.result, done.delivery);
        let ok = result.is_ok();
        self.counters.record(kind, bytes, ok);
        if let Some(target) = done.target {
            target.counters.record(kind, bytes, ok);
        }
        if !ok {
            tracing::trace!(node = %self.node, id = wr.id.0, ?result, "sim endpoint: operation failed");
        }
        if ok && !signaled {
            return Ok(blocks);
        }
        let until = match delivery {
            Delivery::Now => None,
            Delivery::Never => {
                tracing::trace!(node = %self.node, id = wr.id.0, "sim endpoint: completion lost (injected)");
                return Ok(blocks);
            }
            Delivery::Late(Later::OnRequest) => Some(Until::Request),
            Delivery::Late(Later::AfterOps(n)) => Some(Until::Posts(n)),
            // The fabric's clock is read only here (the operation executed at
            // once, so this is still the instant it was posted): reading it
            // on every post cost the quiet path a clock read.
            Delivery::Late(Later::AfterTime(d)) => Some(Until::Time(fabric.base_now().plus(d))),
        };
        if let Some(until) = until {
            tracing::trace!(node = %self.node, id = wr.id.0, ?until, "sim endpoint: completion held (injected)");
            self.held.push(Held {
                completion: Completion { id: wr.id, result },
                until,
            });
            return Ok(blocks);
        }
        self.complete_after_latency(
            posted,
            nic.then_some(bytes),
            Completion { id: wr.id, result },
        );
        Ok(blocks)
    }

    /// Queues `completion`, ready the fabric's latency for a NIC operation
    /// of `nic_bytes` after `posted` (a CPU access, `None`: at once).
    fn complete_after_latency(
        &mut self,
        posted: Instant,
        nic_bytes: Option<u64>,
        completion: Completion,
    ) {
        let delay = nic_bytes.map_or(Duration::ZERO, |b| self.fabric.config().latency.delay(b));
        let ready = posted.checked_add(delay).unwrap_or(posted);
        self.enqueue(ready, completion);
    }

    /// A chained request behind a failure: flushed, or executed (or parked
    /// to land) behind it, reporting the queue pair's failure
    /// ([`Endpoint::post_chain`]). What it leaves for the requests behind
    /// it.
    fn behind(
        &mut self,
        node: NodeId,
        (wr, link): (WorkRequest, ChainLink),
        blocked: Blocked,
    ) -> Blocked {
        self.count_post();
        let posted = Instant::now();
        let (kind, bytes) = (wr.op.kind(), wr.op.bytes());
        let (result, blocked) = match (blocked, link) {
            (Blocked::NotExecuted, _)
            | (Blocked::Failed | Blocked::Lands(_), ChainLink::Fenced) => (
                Err(FabricError::Transport(TransportError::Flushed)),
                Blocked::NotExecuted,
            ),
            (Blocked::Failed, ChainLink::Ordered) => {
                (self.fabric.execute_behind(node, &wr.op, None), blocked)
            }
            (Blocked::Lands(later), ChainLink::Ordered) => (
                self.fabric.execute_behind(node, &wr.op, Some(later)),
                blocked,
            ),
        };
        self.counters.record(kind, bytes, false);
        tracing::trace!(node = %self.node, id = wr.id.0, ?blocked, "sim endpoint: chained behind a failure");
        self.complete_after_latency(posted, Some(bytes), Completion { id: wr.id, result });
        blocked
    }
}

impl Endpoint for SimEndpoint {
    fn node(&self) -> NodeId {
        self.node
    }

    /// With a [`SimConfig::schedule_point`](crate::SimConfig::schedule_point)
    /// hook, backing off is one call of the hook (a scheduling point for the
    /// harness); otherwise the default sleep or yield.
    fn backoff(&mut self, d: Duration) {
        match self.fabric.config().schedule_point {
            Some(hook) => hook(),
            None if d >= Duration::from_micros(50) => std::thread::sleep(d),
            None => crate::sync::yield_now(),
        }
    }

    /// Blocks while the endpoint's [`Gate`] is closed; then fails with
    /// [`FabricError::NodeDown`] if this endpoint's own node is down, and
    /// otherwise performs the operation and queues its completion (which
    /// carries any error of the operation itself).
    fn post(&mut self, wr: WorkRequest) -> Result<(), FabricError> {
        self.post_as(wr, true)
    }

    /// The chain executes at once, in order, as posted; a fault of one
    /// request decides the fate of those behind it as the trait says
    /// (`Blocked`): flushed, executed behind an executed failure, or parked
    /// to land right after a request that lands later.
    fn post_chain(
        &mut self,
        chain: Vec<(WorkRequest, ChainLink)>,
        _issued: Nanos,
    ) -> Result<(), FabricError> {
        let Some(node) = nessie_protocol::chain_node(&chain)? else {
            return Ok(());
        };
        self.gate.pass();
        if self.fabric.node_state(self.node)?.is_down() {
            return Err(FabricError::NodeDown(self.node));
        }
        let mut blocked = None;
        for (wr, link) in chain {
            blocked = match blocked {
                None => self.execute(wr, true)?,
                Some(b) => Some(self.behind(node, (wr, link), b)),
            };
        }
        Ok(())
    }

    /// As [`Endpoint::post`], but a successful operation queues no
    /// completion (a failed one queues its error, after the latency, as
    /// usual; an injected lost completion stays lost).
    fn post_unsignaled(&mut self, wr: WorkRequest) -> Result<(), FabricError> {
        self.post_as(wr, false)
    }

    /// Returns the completions whose latency has passed, and the held ones
    /// whose time has come ([`Later::AfterTime`]).
    fn poll(&mut self, out: &mut Vec<Completion>) {
        self.release_timed();
        if self.pending.is_empty() {
            return;
        }
        let now = Instant::now();
        while self.pending.front().is_some_and(|p| p.ready <= now) {
            if let Some(p) = self.pending.pop_front() {
                out.push(p.completion);
            }
        }
    }

    /// Returns as soon as at least one completion was appended, when
    /// `timeout` has passed, or immediately if no completion could arrive
    /// meanwhile (nothing outstanding, or only completions held until a
    /// later post or [`SimEndpoint::release_late`]). A completion held until
    /// a time is looked at every millisecond at most (the fabric's clock may
    /// be advanced by another thread).
    fn wait(&mut self, out: &mut Vec<Completion>, timeout: Duration) {
        let start = out.len();
        let deadline = Instant::now().checked_add(timeout);
        loop {
            self.poll(out);
            if out.len() > start {
                return;
            }
            let timed = self.held.iter().any(|h| matches!(h.until, Until::Time(_)));
            if self.pending.is_empty() && !timed {
                return;
            }
            let now = Instant::now();
            let nap = now.checked_add(TIMED_NAP).unwrap_or(now);
            let next = match self.pending.front().map(|p| p.ready) {
                Some(next) if timed => Some(next.min(nap)),
                Some(next) => Some(next),
                None if timed => Some(nap),
                None => None,
            };
            let Some(next) = next else {
                return;
            };
            if deadline.is_some_and(|d| now >= d) {
                return;
            }
            let target = deadline.map_or(next, |d| next.min(d));
            let nap = target.saturating_duration_since(now);
            if nap.is_zero() {
                sync::yield_now();
            } else {
                // Wall-clock latency only exists outside model checking, so a
                // real sleep (not part of the sync shim) is what we want here.
                std::thread::sleep(nap);
            }
        }
    }

    fn now(&self) -> Nanos {
        // The endpoint's node exists (checked by `open`), so this cannot fail.
        self.fabric
            .now(self.node)
            .unwrap_or_else(|_| self.fabric.base_now())
    }

    /// The simulated cluster's shape.
    fn topology(&self) -> Option<Topology> {
        Some(self.fabric.topology())
    }

    /// Claims `id` in the fabric's registry ([`SimFabric::claim_client`]).
    fn claim_client(&self, id: ClientId) -> Option<ClientClaim> {
        self.fabric.claim_client(id)
    }
}

/// State behind a [`Gate`].
#[derive(Debug, Default)]
struct GateState {
    closed: bool,
    /// Posts currently blocked at the gate.
    blocked: usize,
}

#[derive(Debug, Default)]
struct GateInner {
    state: Mutex<GateState>,
    opened: Condvar,
}

/// Freezes a client: while the gate is closed, `post` on its endpoint blocks
/// until another thread opens it. Clonable, `Send + Sync`; open by default.
#[derive(Clone, Debug)]
pub struct Gate {
    inner: Arc<GateInner>,
}

impl Gate {
    fn new() -> Self {
        Gate {
            inner: Arc::new(GateInner {
                state: Mutex::new(GateState::default()),
                opened: Condvar::new(),
            }),
        }
    }

    /// Closes the gate: subsequent posts block (a post already past the gate
    /// completes normally).
    pub fn close(&self) {
        sync::lock(&self.inner.state).closed = true;
    }

    /// Opens the gate, releasing every blocked post.
    pub fn open(&self) {
        sync::lock(&self.inner.state).closed = false;
        self.inner.opened.notify_all();
    }

    /// Whether the gate is closed.
    pub fn is_closed(&self) -> bool {
        sync::lock(&self.inner.state).closed
    }

    /// How many posts are blocked at the gate right now (lets a test wait
    /// until the client it froze has actually reached the gate).
    pub fn blocked(&self) -> usize {
        sync::lock(&self.inner.state).blocked
    }

    /// Blocks while the gate is closed.
    fn pass(&self) {
        let mut state = sync::lock(&self.inner.state);
        if !state.closed {
            return;
        }
        state.blocked += 1;
        while state.closed {
            state = sync::wait(&self.inner.opened, state);
        }
        state.blocked -= 1;
    }
}

/// The simulated fabric as a [`Fabric`]: its topology, and endpoints
/// opened on its nodes.
impl Fabric for SimFabric {
    type Endpoint = SimEndpoint;

    fn topology(&self) -> Topology {
        self.config().topology()
    }

    /// Opens an endpoint for a client on `node`: [`FabricError::UnknownNode`]
    /// if there is no such node, [`FabricError::NodeDown`] if it is down.
    fn open(&self, node: NodeId) -> Result<SimEndpoint, FabricError> {
        if self.node_state(node)?.is_down() {
            return Err(FabricError::NodeDown(node));
        }
        Ok(SimEndpoint::new(self.clone(), node))
    }
}

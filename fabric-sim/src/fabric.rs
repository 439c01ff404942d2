//! [`SimFabric`]: the shared state of a simulated cluster (every node's memory,
//! clock skew, up/down state, injected faults and the requests they parked,
//! counters and the client ids in use), its [`Fabric`] implementation, fault
//! and clock controls, and inspection helpers for tests.
//!
//! Faults are the project's one vocabulary, [`TransportFault`], armed per
//! target node by an [`Injection`]; their deferred parts (a landing after
//! the error completion, a duplicate, a late completion) happen at a
//! [`Later`].

use std::fmt;
use std::time::{Duration, Instant};

use nessie_protocol::internals::duration_nanos;
use nessie_protocol::registry::ClaimTable;
use nessie_protocol::{
    BackendError, ClientClaim, ClientId, EndpointRefusal, FabricError, Nanos, NodeId, Op, OpKind,
    OpOutput, Region, TransportError, TransportFault,
};

use crate::config::{ClockMode, SimConfig, SimConfigError, TransferOrder, MANUAL_CLOCK_START};
use crate::counters::{AtomicCounters, OpCounters};
use crate::memory::{NodeMemory, WordOrder};
use crate::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use crate::sync::{self, Arc, Mutex};
use crate::window::Windows;

/// When the deferred part of an injected fault happens: the landing of an
/// [`TransportFault::ErrorThenLand`] request or of a
/// [`TransportFault::DuplicateWrite`]'s second copy (both *parked* at their
/// target node until then), or the delivery of a
/// [`TransportFault::LateCompletion`]'s completion (held by the endpoint
/// until then).
///
/// Everything happens inside calls on the fabric (it has no thread of its
/// own), so a test that drives one client from one thread sees the same
/// order every run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Later {
    /// Only when the test asks: [`SimFabric::land_parked`] lands parked
    /// requests, [`SimEndpoint::release_late`](crate::SimEndpoint::release_late) hands held completions in.
    OnRequest,
    /// After `n` more operations. A parked request lands right before the
    /// (`n`+1)-th NIC operation that reaches its target node (up) after the
    /// faulted one, whatever that operation's own fate: `AfterOps(0)` lands
    /// it just before the next one, which then sees it. A held completion
    /// is handed in right after the (`n`+1)-th request its endpoint posts
    /// after the faulted one, ahead of that request's own completion (the
    /// schedule of a completion that outlives its round and arrives while a
    /// later round waits, issue 24 hole 2).
    AfterOps(u64),
    /// A held completion becomes ready once the fabric's unskewed clock
    /// ([`SimFabric::base_now`]) reads at least this much past the time the
    /// request was posted: with [`ClockMode::Manual`] the test decides, by
    /// [`SimFabric::advance`], whether that is before or after the
    /// requester's deadline. Not available for landings: memory has no
    /// clock to watch (a landing happens at an operation), so injecting
    /// `ErrorThenLand` or `DuplicateWrite` with it is refused
    /// ([`InjectError::Unsupported`]).
    AfterTime(Duration),
}

impl Later {
    /// The default for faults that defer something: right after the next
    /// operation.
    pub const DEFAULT: Later = Later::AfterOps(0);
}

/// Which operations an injected fault hits: the `count` operations after the
/// first `skip` that target the node, match `only` (any kind if `None`) and
/// are of a kind the fault applies to ([`TransportFault::applies_to`]: a
/// `DuplicateWrite` injection lets READs and CASes through uncounted).
///
/// What a hit does, per fault (the project's one vocabulary,
/// [`TransportFault`]):
///
/// | fault | memory | completion |
/// |---|---|---|
/// | `FailBeforeExecuting` | untouched | `error`, after the latency |
/// | `FailAfterExecuting` | changed as usual | `error`, after the latency |
/// | `ErrorThenLand` | untouched now; the request is parked and lands whole at `later` | `error`, after the latency |
/// | `LoseCompletion` | changed as usual | never |
/// | `Vanish` | untouched | never |
/// | `LateCompletion` | changed as usual | the true result, held until `later` |
/// | `DuplicateWrite` | written now, and the same WRITE again at `later` | the true result, after the latency |
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Injection {
    /// What happens to a hit operation.
    pub fault: TransportFault,
    /// The error a failing completion carries.
    pub error: FabricError,
    /// Restrict to one kind of operation.
    pub only: Option<OpKind>,
    /// Matching operations to let through first.
    pub skip: u64,
    /// Matching operations to hit after those.
    pub count: u64,
    /// When the deferred part happens, for the faults that defer one
    /// (`ErrorThenLand`, `DuplicateWrite`, `LateCompletion`); `None`:
    /// [`Later::DEFAULT`]. Setting it for a fault that defers nothing is
    /// refused ([`InjectError::NothingDeferred`]), not ignored.
    pub later: Option<Later>,
}

impl Injection {
    /// Hits the next `count` NIC operations of any kind the fault applies to.
    pub fn next(fault: TransportFault, count: u64) -> Injection {
        Injection {
            fault,
            error: FabricError::Transport(TransportError::Injected(fault)),
            only: None,
            skip: 0,
            count,
            later: None,
        }
    }

    /// Hits only operations of `kind`.
    pub fn only(mut self, kind: OpKind) -> Injection {
        self.only = Some(kind);
        self
    }

    /// Lets the first `skip` matching operations through.
    pub fn after(mut self, skip: u64) -> Injection {
        self.skip = skip;
        self
    }

    /// Failing completions carry `error` (e.g. `FabricError::Timeout`, what a
    /// NIC reports when its retries ran out).
    pub fn with_error(mut self, error: FabricError) -> Injection {
        self.error = error;
        self
    }

    /// The deferred part happens at `later` ([`Injection::later`]).
    pub fn later(mut self, later: Later) -> Injection {
        self.later = Some(later);
        self
    }

    /// When the deferred part happens.
    fn when(&self) -> Later {
        self.later.unwrap_or(Later::DEFAULT)
    }

    /// Checks that the injection can do what it says.
    fn validate(&self) -> Result<(), InjectError> {
        if self.count == 0 {
            return Ok(());
        }
        let fault = self.fault;
        if let Some(kind) = self.only {
            if !fault.applies_to(kind) {
                return Err(InjectError::NeverApplies { fault, kind });
            }
        }
        let defers = matches!(
            fault,
            TransportFault::ErrorThenLand
                | TransportFault::DuplicateWrite
                | TransportFault::LateCompletion
        );
        match self.later {
            Some(_) if !defers => Err(InjectError::NothingDeferred { fault }),
            Some(later @ Later::AfterTime(_)) if fault.executes_later() => {
                Err(InjectError::Unsupported { fault, later })
            }
            _ => Ok(()),
        }
    }
}

/// Why [`SimFabric::inject`] refused an injection.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InjectError {
    /// The node does not exist.
    #[error(transparent)]
    Fabric(#[from] FabricError),
    /// The injection is restricted to a kind of operation the fault never
    /// hits (a duplicate of a READ or a CAS; a fault of a CPU access).
    #[error("{fault} never applies to {kind:?} operations")]
    NeverApplies {
        /// The fault.
        fault: TransportFault,
        /// The kind it was restricted to.
        kind: OpKind,
    },
    /// A time was set for a fault that defers nothing.
    #[error("{fault} defers nothing: it takes no `later`")]
    NothingDeferred {
        /// The fault.
        fault: TransportFault,
    },
    /// The fabric cannot defer this fault's part that way.
    #[error("the simulated fabric cannot defer {fault} by {later:?}: a landing happens at an operation, not at a time")]
    Unsupported {
        /// The fault.
        fault: TransportFault,
        /// The refused schedule.
        later: Later,
    },
}

/// How an operation's completion is delivered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Delivery {
    /// After the latency, as usual.
    Now,
    /// Never.
    Never,
    /// Held by the endpoint until `later`.
    Late(Later),
}

/// What the simulator decided for one operation.
pub(crate) struct Executed<'a> {
    /// The node the operation targeted, for counters.
    pub target: Option<&'a NodeState>,
    /// Its outcome, as its completion reports it.
    pub result: Result<OpOutput, FabricError>,
    /// How its completion is delivered.
    pub delivery: Delivery,
    /// The injected fault that hit it, and when its deferred part happens.
    pub fault: Option<(TransportFault, Later)>,
}

impl Executed<'_> {
    /// What this request's fate means for the requests chained behind it
    /// ([`nessie_protocol::Endpoint::post_chain`]): `None` if it executed
    /// and completes normally (late, or with a duplicated WRITE's copy to
    /// land later, maybe behind the chain).
    pub(crate) fn blocks(&self) -> Option<Blocked> {
        match (&self.result, self.fault) {
            (_, Some((TransportFault::ErrorThenLand, later))) => Some(Blocked::Lands(later)),
            (_, Some((TransportFault::FailAfterExecuting | TransportFault::LoseCompletion, _))) => {
                Some(Blocked::Failed)
            }
            (_, Some((TransportFault::FailBeforeExecuting | TransportFault::Vanish, _))) => {
                Some(Blocked::NotExecuted)
            }
            (Ok(_), _) => None,
            // Refused before executing (its node down, out of range).
            (Err(_), _) => Some(Blocked::NotExecuted),
        }
    }
}

/// What a failure ahead in a chain does to the requests behind it
/// ([`nessie_protocol::Endpoint::post_chain`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Blocked {
    /// Something ahead did not execute: everything behind is flushed.
    NotExecuted,
    /// Something ahead executed and then failed (or lost its completion):
    /// a fenced request is flushed, an ordered one executes and reports
    /// the queue pair's failure.
    Failed,
    /// Something ahead reported an error and lands later: a fenced request
    /// is flushed, an ordered one lands after it and reports the failure.
    Lands(Later),
}

/// A request parked at its target node, to land later.
#[derive(Debug)]
struct Parked {
    /// The fault that parked it (`ErrorThenLand` or `DuplicateWrite`).
    fault: TransportFault,
    op: Op,
    /// Operations at the node still to come before it lands (`None`: only
    /// on request).
    left: Option<u64>,
}

/// A parked request that landed ([`SimFabric::land_parked`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Landed {
    /// The node it landed at.
    pub node: NodeId,
    /// The fault that parked it.
    pub fault: TransportFault,
    /// The operation.
    pub op: Op,
    /// What it did (nobody receives this: its completion was delivered
    /// when the fault hit).
    pub result: Result<OpOutput, FabricError>,
}

/// [`NodeState::faults`]: an injection is pending.
const ARMED: u64 = 1;
/// [`NodeState::faults`]: one parked request.
const PARKED: u64 = 2;

/// Everything the simulator keeps about one node.
#[derive(Debug)]
pub(crate) struct NodeState {
    pub(crate) memory: NodeMemory,
    down: AtomicBool,
    /// Bit 0: an injection is pending; the bits above: how many requests
    /// are parked. Changed only under the lock of what it counts; the fast
    /// path of every NIC operation loads only this (one atomic access, as
    /// loom counts them).
    faults: AtomicU64,
    /// The pending injection.
    injection: Mutex<Option<Injection>>,
    /// Requests parked here, to land later, in the order they were parked.
    parked: Mutex<Vec<Parked>>,
    /// The node's memory windows.
    windows: Windows,
    /// Clock skew in nanoseconds, an `i64` stored as its bit pattern.
    skew: AtomicU64,
    pub(crate) counters: AtomicCounters,
}

impl NodeState {
    pub(crate) fn is_down(&self) -> bool {
        self.down.load(Ordering::SeqCst)
    }

    /// Whether no injection is pending and nothing is parked.
    fn quiet(&self) -> bool {
        self.faults.load(Ordering::SeqCst) == 0
    }

    /// Whether an injection is pending.
    fn armed(&self) -> bool {
        self.faults.load(Ordering::SeqCst) & ARMED != 0
    }

    /// How many requests are parked.
    fn parked_len(&self) -> usize {
        (self.faults.load(Ordering::SeqCst) / PARKED) as usize
    }

    /// The injected fault that hits an operation of `kind`, if any (consumes
    /// it): the fault, the error a failing completion carries, and when its
    /// deferred part happens.
    fn take_fault(&self, kind: OpKind) -> Option<(TransportFault, FabricError, Later)> {
        let mut slot = sync::lock(&self.injection);
        let inj = slot.as_mut()?;
        if inj.only.is_some_and(|k| k != kind) || !inj.fault.applies_to(kind) {
            return None;
        }
        if inj.skip > 0 {
            inj.skip -= 1;
            return None;
        }
        let fault = (inj.fault, inj.error.clone(), inj.when());
        inj.count = inj.count.saturating_sub(1);
        if inj.count == 0 {
            *slot = None;
            self.faults.fetch_and(!ARMED, Ordering::SeqCst);
        }
        Some(fault)
    }

    /// Parks `op`, to land at `later`.
    fn park(&self, fault: TransportFault, op: Op, later: Later) {
        let left = match later {
            Later::AfterOps(n) => Some(n),
            Later::OnRequest | Later::AfterTime(_) => None,
        };
        let mut parked = sync::lock(&self.parked);
        parked.push(Parked { fault, op, left });
        self.faults.fetch_add(PARKED, Ordering::SeqCst);
    }

    /// A NIC operation reaches this node: takes out the parked requests
    /// that land before it (their countdown is over), in parking order,
    /// and counts the operation against the others.
    fn due(&self) -> Vec<Parked> {
        let mut parked = sync::lock(&self.parked);
        let mut due = Vec::new();
        let mut k = 0;
        while k < parked.len() {
            match parked[k].left {
                Some(0) => due.push(parked.remove(k)),
                Some(ref mut n) => {
                    *n -= 1;
                    k += 1;
                }
                None => k += 1,
            }
        }
        self.faults
            .fetch_sub(PARKED * due.len() as u64, Ordering::SeqCst);
        due
    }

    /// Takes out every parked request.
    fn take_parked(&self) -> Vec<Parked> {
        let mut parked = sync::lock(&self.parked);
        self.faults
            .fetch_sub(PARKED * parked.len() as u64, Ordering::SeqCst);
        std::mem::take(&mut *parked)
    }
}

#[derive(Debug)]
struct Inner {
    config: SimConfig,
    nodes: Box<[NodeState]>,
    created: Instant,
    /// Nanoseconds added to every clock by [`SimFabric::advance`].
    advanced: AtomicU64,
    /// Transfers so far (seeds [`TransferOrder::Random`]).
    transfers: AtomicU64,
    /// Processes named so far ([`SimFabric::another_process`]).
    processes: AtomicU64,
}

/// A simulated RDMA fabric connecting `config.nodes` nodes in one process.
///
/// Cheap to clone: clones are handles to the same cluster. Endpoints opened
/// with [`Fabric::open`](nessie_protocol::Fabric::open) execute each
/// operation's data transfer when it is posted (the `memory` module has the
/// exact memory semantics) and deliver its completion after the configured
/// latency. Clones are the same process; [`SimFabric::another_process`] is
/// a handle as another process on the cluster sees it.
#[derive(Clone)]
pub struct SimFabric {
    inner: Arc<Inner>,
    /// The process this handle is: its client ids and registry name.
    process: ClaimTable,
}

impl fmt::Debug for SimFabric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimFabric")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

impl SimFabric {
    /// Builds a cluster with zeroed memory, all nodes up.
    pub fn new(config: SimConfig) -> Result<SimFabric, SimConfigError> {
        config.validate()?;
        let topology = config.topology();
        let nodes = (0..config.nodes)
            .map(|n| {
                Ok(NodeState {
                    memory: NodeMemory::new(NodeId(n), &topology)?,
                    down: AtomicBool::new(false),
                    faults: AtomicU64::new(0),
                    injection: Mutex::new(None),
                    parked: Mutex::new(Vec::new()),
                    windows: Windows::default(),
                    skew: AtomicU64::new(0),
                    counters: AtomicCounters::new(),
                })
            })
            .collect::<Result<Vec<_>, SimConfigError>>()?
            .into_boxed_slice();
        let inner = Inner {
            config,
            nodes,
            created: Instant::now(),
            advanced: AtomicU64::new(0),
            transfers: AtomicU64::new(0),
            processes: AtomicU64::new(1),
        };
        Ok(SimFabric {
            inner: Arc::new(inner),
            process: ClaimTable::new(1),
        })
    }

    /// A handle on the same cluster as another process has it: its own
    /// name in the registry words and its own in-process registry of client
    /// ids, so that a client id it claims is refused while a client of this
    /// process holds it (and the other way round), by the node's registry
    /// word alone (docs/protocol.md §2.3).
    pub fn another_process(&self) -> SimFabric {
        let n = self.inner.processes.fetch_add(1, Ordering::SeqCst) + 1;
        SimFabric {
            inner: self.inner.clone(),
            process: ClaimTable::new(n as u32),
        }
    }

    /// The configuration the fabric was built with.
    pub fn config(&self) -> &SimConfig {
        &self.inner.config
    }

    pub(crate) fn node_state(&self, node: NodeId) -> Result<&NodeState, FabricError> {
        self.inner
            .nodes
            .get(usize::from(node.0))
            .ok_or(FabricError::UnknownNode(node))
    }

    // ----- client ids ---------------------------------------------------------

    /// Claims the client id `id` for as long as the returned claim lives, or
    /// `None` if a live claim holds it already (the registry behind
    /// `Endpoint::claim_client`: two clients with one id would share one
    /// data table share and lose writes). Dropping the claim releases it.
    pub fn claim_client(&self, id: ClientId) -> Option<ClientClaim> {
        self.process.claim(id)
    }

    /// Whether a live claim of this process holds the client id `id`.
    pub fn client_in_use(&self, id: ClientId) -> bool {
        self.process.holds(id)
    }

    // ----- clocks -------------------------------------------------------------

    /// The unskewed protocol time shared by all nodes.
    pub fn base_now(&self) -> Nanos {
        let base = match self.inner.config.clock {
            ClockMode::Real => duration_nanos(self.inner.created.elapsed()),
            ClockMode::Manual => MANUAL_CLOCK_START.0,
        };
        Nanos(base.saturating_add(self.inner.advanced.load(Ordering::SeqCst)))
    }

    /// The protocol time on `node`'s clock: the shared time plus its skew
    /// (saturating at zero and `u64::MAX`).
    pub fn now(&self, node: NodeId) -> Result<Nanos, FabricError> {
        let skew = self.node_state(node)?.skew.load(Ordering::SeqCst) as i64;
        Ok(Nanos(self.base_now().0.saturating_add_signed(skew)))
    }

    /// Moves every node's clock forward by `d`. This is the only way a
    /// [`ClockMode::Manual`] clock moves; on a real clock it jumps ahead.
    pub fn advance(&self, d: Duration) {
        let nanos = duration_nanos(d);
        // A single fetch_update keeps concurrent advances additive and saturating.
        let _ = self
            .inner
            .advanced
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |a| {
                Some(a.saturating_add(nanos))
            });
    }

    /// Sets `node`'s clock skew: `nanos` (possibly negative) is added to the
    /// shared time whenever that node reads its clock.
    pub fn set_clock_skew(&self, node: NodeId, nanos: i64) -> Result<(), FabricError> {
        self.node_state(node)?
            .skew
            .store(nanos as u64, Ordering::SeqCst);
        Ok(())
    }

    // ----- faults -------------------------------------------------------------

    /// Marks `node` down (crashed or partitioned) or back up. While down,
    /// operations targeting it complete with [`FabricError::NodeDown`] without
    /// touching memory, its own endpoints cannot post, and it cannot be
    /// opened. Its memory survives (bring it back up to model a partition
    /// healing).
    pub fn set_node_down(&self, node: NodeId, down: bool) -> Result<(), FabricError> {
        self.node_state(node)?.down.store(down, Ordering::SeqCst);
        tracing::debug!(%node, down, "sim fabric: node state changed");
        Ok(())
    }

    /// Whether `node` is marked down.
    pub fn is_node_down(&self, node: NodeId) -> Result<bool, FabricError> {
        Ok(self.node_state(node)?.is_down())
    }

    /// Makes the next `n` NIC operations (READ, WRITE, CAS) targeting `node`
    /// complete with `TransportError::Injected(FailBeforeExecuting)` without
    /// touching memory. Replaces any injection still pending; `0` cancels.
    pub fn fail_next_ops(&self, node: NodeId, n: u64) -> Result<(), FabricError> {
        let n = Injection::next(TransportFault::FailBeforeExecuting, n);
        self.inject(node, n).map_err(|e| match e {
            InjectError::Fabric(e) => e,
            // A failure of every kind of NIC operation with the default
            // schedule is always valid.
            other => FabricError::Transport(TransportError::Endpoint(EndpointRefusal::Backend(
                BackendError::new(other),
            ))),
        })
    }

    /// Arms `injection` for NIC operations targeting `node`, replacing any
    /// injection still pending (a count of 0 cancels). Refused, with the
    /// injection not armed, if `node` does not exist or the injection cannot
    /// do what it says ([`InjectError`]).
    pub fn inject(&self, node: NodeId, injection: Injection) -> Result<(), InjectError> {
        let n = self.node_state(node)?;
        injection.validate()?;
        let mut slot = sync::lock(&n.injection);
        tracing::debug!(%node, ?injection, "sim fabric: injecting faults");
        *slot = (injection.count > 0).then_some(injection);
        match slot.is_some() {
            true => n.faults.fetch_or(ARMED, Ordering::SeqCst),
            false => n.faults.fetch_and(!ARMED, Ordering::SeqCst),
        };
        Ok(())
    }

    /// Whether an injection armed on `node` has not been used up yet.
    pub fn injection_pending(&self, node: NodeId) -> bool {
        self.node_state(node).map(NodeState::armed).unwrap_or(false)
    }

    /// How many requests are parked, to land later, on every node
    /// ([`TransportFault::ErrorThenLand`] requests and
    /// [`TransportFault::DuplicateWrite`] copies).
    pub fn parked(&self) -> usize {
        self.inner.nodes.iter().map(NodeState::parked_len).sum()
    }

    /// Lands every parked request now, node by node and in parking order on
    /// each, whatever its schedule, and reports what each did. Requests
    /// parked at a node that is down stay parked (a packet cannot reach a
    /// node that is down); they land once it is back up.
    pub fn land_parked(&self) -> Vec<Landed> {
        let mut landed = Vec::new();
        for (i, n) in self.inner.nodes.iter().enumerate() {
            if n.is_down() {
                continue;
            }
            let node = NodeId(i as u16);
            for p in n.take_parked() {
                landed.push(self.land(node, n, p));
            }
        }
        landed
    }

    /// Executes a parked request at its node (no fault, no counters: it was
    /// counted when it was posted).
    fn land(&self, node: NodeId, n: &NodeState, p: Parked) -> Landed {
        tracing::debug!(%node, fault = %p.fault, op = ?p.op.kind(), "sim fabric: a parked request lands");
        let result = self.perform(n, &p.op);
        Landed {
            node,
            fault: p.fault,
            op: p.op,
            result,
        }
    }

    /// The word order of the next transfer.
    fn word_order(&self) -> WordOrder {
        match self.inner.config.transfer_order {
            TransferOrder::Ascending => WordOrder::Ascending,
            TransferOrder::Descending => WordOrder::Descending,
            TransferOrder::Random => {
                let n = self.inner.transfers.fetch_add(1, Ordering::SeqCst);
                WordOrder::Shuffled(self.inner.config.seed ^ n.wrapping_mul(0x2545_f491_4f6c_dd1d))
            }
        }
    }

    // ----- counters -----------------------------------------------------------

    /// Counters of the operations that targeted `node` (all zero for an
    /// unknown node). LocalRead/LocalWrite count on the endpoint's own node.
    pub fn node_counters(&self, node: NodeId) -> OpCounters {
        self.node_state(node)
            .map(|n| n.counters.snapshot())
            .unwrap_or_default()
    }

    /// The sum of every node's counters.
    pub fn total_counters(&self) -> OpCounters {
        self.inner
            .nodes
            .iter()
            .fold(OpCounters::default(), |acc, n| acc + n.counters.snapshot())
    }

    /// Sets every node's counters back to zero (endpoint counters are kept).
    pub fn reset_counters(&self) {
        for n in self.inner.nodes.iter() {
            n.counters.reset();
        }
    }

    // ----- inspection ---------------------------------------------------------
    //
    // These bypass the NIC: no node-down check, no faults, no counters.

    /// Loads the 8-byte aligned word at `offset` of `node`'s `region`.
    pub fn read_word(&self, node: NodeId, region: Region, offset: u64) -> Result<u64, FabricError> {
        self.node_state(node)?
            .memory
            .region(region)
            .load_word(offset)
    }

    /// Stores `value` into the 8-byte aligned word at `offset`, as a CPU store
    /// (not serialised with NIC CAS: it can be lost inside a CAS window).
    pub fn write_word(
        &self,
        node: NodeId,
        region: Region,
        offset: u64,
        value: u64,
    ) -> Result<(), FabricError> {
        self.node_state(node)?
            .memory
            .region(region)
            .store_word(offset, value)
    }

    /// Reads `len` bytes at `offset`, word by word like an RDMA READ.
    pub fn read_bytes(
        &self,
        node: NodeId,
        region: Region,
        offset: u64,
        len: u64,
    ) -> Result<Vec<u8>, FabricError> {
        self.node_state(node)?
            .memory
            .region(region)
            .read(offset, len, None, WordOrder::Ascending)
    }

    /// Writes `data` at `offset`, word by word like an RDMA WRITE.
    pub fn write_bytes(
        &self,
        node: NodeId,
        region: Region,
        offset: u64,
        data: &[u8],
    ) -> Result<(), FabricError> {
        self.node_state(node)?
            .memory
            .region(region)
            .write(offset, data, None, WordOrder::Ascending)
    }

    /// A snapshot of every word of `node`'s `region` (empty for an unknown
    /// node). Words are loaded one by one, so the snapshot is not atomic.
    pub fn region_words(&self, node: NodeId, region: Region) -> Vec<u64> {
        self.node_state(node)
            .map(|n| n.memory.region(region).snapshot())
            .unwrap_or_default()
    }

    /// Size in bytes of `node`'s `region`.
    pub fn region_size(&self, node: NodeId, region: Region) -> Result<u64, FabricError> {
        Ok(self.node_state(node)?.memory.region(region).size())
    }

    // ----- execution ----------------------------------------------------------

    /// Performs `op` posted by a client on `from`: the node it targeted (for
    /// counters), its outcome and how its completion is delivered. The
    /// caller has checked that `from` is up. A NIC operation that reaches
    /// its target first lands the parked requests due before it
    /// ([`Later::AfterOps`]).
    pub(crate) fn execute(&self, from: NodeId, op: &Op) -> Executed<'_> {
        let target_id = op.remote_addr().map_or(from, |a| a.node);
        let target = match self.node_state(target_id) {
            Ok(t) => t,
            Err(e) => {
                return Executed {
                    target: None,
                    result: Err(e),
                    delivery: Delivery::Now,
                    fault: None,
                }
            }
        };
        let nic = op.remote_addr().is_some();
        if !nic {
            return Executed {
                target: Some(target),
                result: self.perform(target, op),
                delivery: Delivery::Now,
                fault: None,
            };
        }
        if target.is_down() {
            return Executed {
                target: Some(target),
                result: Err(FabricError::NodeDown(target_id)),
                delivery: Delivery::Now,
                fault: None,
            };
        }
        let fault = match target.quiet() {
            true => None,
            false => {
                for p in target.due() {
                    self.land(target_id, target, p);
                }
                target.take_fault(op.kind())
            }
        };
        let Some((fault, error, later)) = fault else {
            return Executed {
                target: Some(target),
                result: self.perform(target, op),
                delivery: Delivery::Now,
                fault: None,
            };
        };
        tracing::trace!(node = %target_id, %fault, op = ?op.kind(), "sim fabric: injected fault hits");
        let (result, delivery) = match fault {
            TransportFault::FailBeforeExecuting => (Err(error), Delivery::Now),
            TransportFault::FailAfterExecuting => {
                let _ = self.perform(target, op);
                (Err(error), Delivery::Now)
            }
            TransportFault::ErrorThenLand => {
                target.park(fault, op.clone(), later);
                (Err(error), Delivery::Now)
            }
            TransportFault::LoseCompletion => (self.perform(target, op), Delivery::Never),
            TransportFault::Vanish => (Err(error), Delivery::Never),
            TransportFault::LateCompletion => (self.perform(target, op), Delivery::Late(later)),
            TransportFault::DuplicateWrite => {
                let result = self.perform(target, op);
                target.park(fault, op.clone(), later);
                (result, Delivery::Now)
            }
        };
        Executed {
            target: Some(target),
            result,
            delivery,
            fault: Some((fault, later)),
        }
    }

    /// A chained request behind a failure ([`Blocked`]): executes `op` at
    /// `node` now, with no fault of its own (it was on the wire), or parks it
    /// to land `later`, behind the request that failed ahead of it. Its
    /// completion reports the queue pair's failure either way.
    pub(crate) fn execute_behind(
        &self,
        node: NodeId,
        op: &Op,
        later: Option<Later>,
    ) -> Result<OpOutput, FabricError> {
        let target = self.node_state(node)?;
        match later {
            Some(later) => target.park(TransportFault::ErrorThenLand, op.clone(), later),
            None if !target.is_down() => {
                let _ = self.perform(target, op);
            }
            None => {}
        }
        Err(FabricError::Transport(TransportError::QueuePairFailed))
    }

    /// Executes `op` on `target`'s memory (a NIC operation on the region it
    /// names, a CPU access on the data table).
    fn perform(&self, target: &NodeState, op: &Op) -> Result<OpOutput, FabricError> {
        let hook = self.inner.config.schedule_point;
        match op {
            Op::LocalRead { offset, len } => target
                .memory
                .region(Region::Data)
                .read(*offset, u64::from(*len), hook, self.word_order())
                .map(OpOutput::Read),
            Op::LocalWrite { offset, data } => target
                .memory
                .region(Region::Data)
                .write(*offset, data, hook, self.word_order())
                .map(|()| OpOutput::Written),
            Op::Read { addr, len } => target
                .memory
                .region(addr.region)
                .read(addr.offset, u64::from(*len), hook, self.word_order())
                .map(OpOutput::Read),
            Op::Write { addr, data } => target
                .memory
                .region(addr.region)
                .write(addr.offset, data, hook, self.word_order())
                .map(|()| OpOutput::Written),
            Op::Cas { addr, expect, new } => {
                if let Some(h) = hook {
                    h();
                }
                target
                    .memory
                    .nic_cas(
                        addr.region,
                        addr.offset,
                        *expect,
                        *new,
                        self.inner.config.yield_inside_cas,
                    )
                    .map(|previous| OpOutput::Cas { previous })
            }
            Op::Windowed { window, key, op } => target
                .windows
                .through(*window, *key, op, |op| self.perform(target, op)),
            Op::BindWindow { index, offset, len } => {
                let data = target.memory.region(Region::Data);
                target
                    .windows
                    .bind(data.node(), *index, *offset, *len, data.size())
                    .map(|key| OpOutput::Bound { key })
            }
        }
    }
}

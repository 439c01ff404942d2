//! [`SimFabric`]: the shared state of a simulated cluster (every node's memory,
//! clock skew, up/down state, injected faults, counters and the client ids
//! in use), its [`Fabric`] implementation, fault and clock controls, and
//! inspection helpers for tests.

use std::collections::HashSet;
use std::fmt;
use std::time::{Duration, Instant};

use nessie_protocol::time::duration_nanos;
use nessie_protocol::{
    ClientClaim, ClientId, Fabric, FabricError, Nanos, NodeId, Op, OpKind, OpOutput, Region,
    Topology,
};

use crate::config::{ClockMode, SimConfig, SimConfigError, TransferOrder, MANUAL_CLOCK_START};
use crate::counters::{AtomicCounters, OpCounters};
use crate::endpoint::SimEndpoint;
use crate::memory::{NodeMemory, WordOrder};
use crate::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use crate::sync::{self, Arc, Mutex};

/// A fault the simulator can inject into NIC operations (READ, WRITE, CAS)
/// targeting a node: every combination of "did the operation execute" and
/// "what did its completion say".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InjectedFault {
    /// Not executed; completes with a transport error.
    FailUnexecuted,
    /// Executed (memory changed as usual); the completion nevertheless
    /// carries a transport error, as a real NIC's can after the responder
    /// executed the request.
    FailAfterExecuting,
    /// Executed; the completion is never delivered.
    LoseCompletion,
    /// Not executed and no completion is ever delivered.
    Vanish,
}

impl InjectedFault {
    /// Whether the operation takes effect.
    pub fn executes(self) -> bool {
        matches!(
            self,
            InjectedFault::FailAfterExecuting | InjectedFault::LoseCompletion
        )
    }

    /// Whether a completion is delivered.
    pub fn delivers(self) -> bool {
        matches!(
            self,
            InjectedFault::FailUnexecuted | InjectedFault::FailAfterExecuting
        )
    }
}

/// Which operations an injected fault hits: the `count` operations after the
/// first `skip` that target the node and match `only` (any kind if `None`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Injection {
    /// What happens to a hit operation.
    pub fault: InjectedFault,
    /// The error a failing completion carries.
    pub error: FabricError,
    /// Restrict to one kind of operation.
    pub only: Option<OpKind>,
    /// Matching operations to let through first.
    pub skip: u64,
    /// Matching operations to hit after those.
    pub count: u64,
}

impl Injection {
    /// Hits the next `count` NIC operations of any kind.
    pub fn next(fault: InjectedFault, count: u64) -> Injection {
        Injection {
            fault,
            error: FabricError::Transport("injected fault".into()),
            only: None,
            skip: 0,
            count,
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
}

/// What the simulator decided for one operation.
pub(crate) struct Executed<'a> {
    /// The node the operation targeted, for counters.
    pub target: Option<&'a NodeState>,
    /// Its outcome, as its completion reports it.
    pub result: Result<OpOutput, FabricError>,
    /// Whether the completion is delivered.
    pub deliver: bool,
}

/// Everything the simulator keeps about one node.
#[derive(Debug)]
pub(crate) struct NodeState {
    pub(crate) memory: NodeMemory,
    down: AtomicBool,
    /// Whether an injection is pending (the fast path checks only this).
    armed: AtomicBool,
    /// The pending injection.
    injection: Mutex<Option<Injection>>,
    /// Clock skew in nanoseconds, an `i64` stored as its bit pattern.
    skew: AtomicU64,
    pub(crate) counters: AtomicCounters,
}

impl NodeState {
    pub(crate) fn is_down(&self) -> bool {
        self.down.load(Ordering::SeqCst)
    }

    /// The injected fault that hits an operation of `kind`, if any (consumes it).
    fn take_fault(&self, kind: OpKind) -> Option<(InjectedFault, FabricError)> {
        if !self.armed.load(Ordering::SeqCst) {
            return None;
        }
        let mut slot = sync::lock(&self.injection);
        let inj = slot.as_mut()?;
        if inj.only.is_some_and(|k| k != kind) {
            return None;
        }
        if inj.skip > 0 {
            inj.skip -= 1;
            return None;
        }
        let fault = (inj.fault, inj.error.clone());
        inj.count = inj.count.saturating_sub(1);
        if inj.count == 0 {
            *slot = None;
            self.armed.store(false, Ordering::SeqCst);
        }
        Some(fault)
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
    /// Client ids held by live clients ([`SimFabric::claim_client`]).
    clients: Mutex<HashSet<ClientId>>,
}

/// A simulated RDMA fabric connecting `config.nodes` nodes in one process.
///
/// Cheap to clone: clones are handles to the same cluster. Endpoints opened
/// with [`Fabric::open`] execute each operation's data transfer when it is
/// posted (see [`crate::memory`] for the exact memory semantics) and deliver
/// its completion after the configured latency.
#[derive(Clone)]
pub struct SimFabric {
    inner: Arc<Inner>,
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
                    armed: AtomicBool::new(false),
                    injection: Mutex::new(None),
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
            clients: Mutex::new(HashSet::new()),
        };
        Ok(SimFabric {
            inner: Arc::new(inner),
        })
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
        if !sync::lock(&self.inner.clients).insert(id) {
            return None;
        }
        let fabric = self.clone();
        Some(ClientClaim::new(move || {
            sync::lock(&fabric.inner.clients).remove(&id);
        }))
    }

    /// Whether a live claim holds the client id `id`.
    pub fn client_in_use(&self, id: ClientId) -> bool {
        sync::lock(&self.inner.clients).contains(&id)
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
    /// complete with `FabricError::Transport("injected fault")` without
    /// touching memory. Replaces any injection still pending; `0` cancels.
    pub fn fail_next_ops(&self, node: NodeId, n: u64) -> Result<(), FabricError> {
        self.inject(node, Injection::next(InjectedFault::FailUnexecuted, n))
    }

    /// Arms `injection` for NIC operations targeting `node`, replacing any
    /// injection still pending (a count of 0 cancels).
    pub fn inject(&self, node: NodeId, injection: Injection) -> Result<(), FabricError> {
        let n = self.node_state(node)?;
        let mut slot = sync::lock(&n.injection);
        tracing::debug!(%node, ?injection, "sim fabric: injecting faults");
        *slot = (injection.count > 0).then_some(injection);
        n.armed.store(slot.is_some(), Ordering::SeqCst);
        Ok(())
    }

    /// Whether an injection armed on `node` has not been used up yet.
    pub fn injection_pending(&self, node: NodeId) -> bool {
        self.node_state(node)
            .map(|n| n.armed.load(Ordering::SeqCst))
            .unwrap_or(false)
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
    /// counters), its outcome and whether its completion is delivered. The
    /// caller has checked that `from` is up.
    pub(crate) fn execute(&self, from: NodeId, op: &Op) -> Executed<'_> {
        let target_id = op.remote_addr().map_or(from, |a| a.node);
        let target = match self.node_state(target_id) {
            Ok(t) => t,
            Err(e) => {
                return Executed {
                    target: None,
                    result: Err(e),
                    deliver: true,
                }
            }
        };
        let hook = self.inner.config.schedule_point;
        let nic = op.remote_addr().is_some();
        let (fault, injected_error) = match nic && !target.is_down() {
            true => match target.take_fault(op.kind()) {
                Some((f, e)) => (Some(f), Some(e)),
                None => (None, None),
            },
            false => (None, None),
        };
        let executes = fault.is_none_or(InjectedFault::executes);
        let result = match op {
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
            _ if target.is_down() => Err(FabricError::NodeDown(target_id)),
            _ if !executes => Err(injected_error
                .clone()
                .unwrap_or_else(|| FabricError::Transport("injected fault".into()))),
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
        };
        let result = match (fault, injected_error) {
            (Some(InjectedFault::FailAfterExecuting), Some(e)) => Err(e),
            _ => result,
        };
        Executed {
            target: Some(target),
            result,
            deliver: fault.is_none_or(InjectedFault::delivers),
        }
    }
}

impl Fabric for SimFabric {
    type Endpoint = SimEndpoint;

    fn topology(&self) -> Topology {
        self.inner.config.topology()
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

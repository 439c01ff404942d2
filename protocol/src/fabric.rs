//! The `Fabric` trait: one-sided RDMA as the protocol needs it.
//!
//! A client owns an [`Endpoint`] (in RDMA terms: its queue pairs to every node,
//! including a loopback queue pair to its own node, and one completion queue).
//! It posts [`WorkRequest`]s and later polls [`Completion`]s, so that several
//! independent operations overlap in one round trip. Besides the three NIC
//! verbs (READ, WRITE and 8-byte compare-and-swap) an endpoint offers the CPU
//! path to the node's own data table ([`Op::LocalRead`], [`Op::LocalWrite`]),
//! which the paper uses for local data table entries. Index table entries are
//! only ever touched through the NIC: NIC CAS is atomic against other NIC
//! operations, not against CPU stores.

use std::time::Duration;

use crate::addr::{ClientId, NodeId, Region, RemoteAddr};
use crate::refusal::EndpointRefusal;
use crate::time::Nanos;

/// Identifies a posted work request so that its completion can be matched.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OpId(pub u64);

/// One operation a state machine asks the fabric to perform.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// RDMA READ of `len` bytes at `addr`.
    Read {
        /// Where to read.
        addr: RemoteAddr,
        /// How many bytes.
        len: u32,
    },
    /// RDMA WRITE of `data` at `addr`.
    Write {
        /// Where to write.
        addr: RemoteAddr,
        /// The bytes to write.
        data: Vec<u8>,
    },
    /// RDMA 64-bit compare-and-swap at the 8-byte aligned `addr`: if the word
    /// equals `expect` it becomes `new`. The completion carries the previous
    /// word either way (the caller compares it with `expect`).
    Cas {
        /// The 8-byte aligned word.
        addr: RemoteAddr,
        /// The value the word must hold.
        expect: u64,
        /// The value it is swapped to.
        new: u64,
    },
    /// CPU read of `len` bytes of the endpoint's own node's data table.
    LocalRead {
        /// Byte offset within the local data table.
        offset: u64,
        /// How many bytes.
        len: u32,
    },
    /// CPU write of `data` into the endpoint's own node's data table.
    LocalWrite {
        /// Byte offset within the local data table.
        offset: u64,
        /// The bytes to write.
        data: Vec<u8>,
    },
    /// A WRITE or CAS (`op`) through memory window `window` under `key`
    /// (an RDMA memory window's rkey): it changes a word only if, when that
    /// word lands, the window is bound under `key` and covers the word;
    /// otherwise it is refused ([`FabricError::WindowRefused`]), however
    /// late it lands. A WRITE of several words checks each word as it lands,
    /// so one that meets a rebind half-way lands torn (the packets before
    /// the revocation, as on a NIC). Anything but a WRITE or CAS on the
    /// window's node's data region is refused.
    Windowed {
        /// The window the request goes through.
        window: WindowId,
        /// The key it carries.
        key: WindowKey,
        /// The WRITE or CAS.
        op: Box<Op>,
    },
    /// The memory node's agent (the CPU of the endpoint's own node) revokes
    /// window `index` of the node and binds it again, under a fresh key,
    /// over `len` bytes at `offset` of its data region: from the completion
    /// on, every request carrying an earlier key is refused, wherever it is
    /// on its way. Never faults; completes with [`OpOutput::Bound`].
    BindWindow {
        /// The window's index on the node.
        index: u32,
        /// First byte of the data region it covers.
        offset: u64,
        /// How many bytes it covers.
        len: u64,
    },
}

/// A memory window of a node's data region ([`Op::Windowed`],
/// [`Op::BindWindow`]): a range its memory node's agent binds under a key
/// and revokes by binding it again, so that writers whose key was revoked
/// can no longer change it, whenever their requests land.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WindowId {
    /// The node whose data region the window covers.
    pub node: NodeId,
    /// The window's index on that node.
    pub index: u32,
}

impl std::fmt::Display for WindowId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:window{}", self.node, self.index)
    }
}

/// The key a window is bound under (an RDMA memory window's rkey). Each
/// bind of a window gives it a key it never had before (0 is never a key:
/// an unbound window refuses everything). On a NIC the key is the rkey's
/// low 8 bits, so a key recurs after 256 binds of one window; the
/// simulated fabrics count further, and a protocol that relies on keys
/// keeps binds of a window at least a lease apart (docs/protocol.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WindowKey(pub u32);

/// A bound window as a fabric keeps it: its key and the range it covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BoundWindow {
    /// The key it is bound under (0: never bound).
    pub key: WindowKey,
    /// First byte of the data region it covers.
    pub offset: u64,
    /// How many bytes it covers.
    pub len: u64,
}

impl BoundWindow {
    /// A window never bound: it refuses everything.
    pub const UNBOUND: BoundWindow = BoundWindow {
        key: WindowKey(0),
        offset: 0,
        len: 0,
    };

    /// The window bound again over `offset..offset + len` under the next key.
    pub fn rebound(self, offset: u64, len: u64) -> BoundWindow {
        BoundWindow {
            key: WindowKey(self.key.0.wrapping_add(1).max(1)),
            offset,
            len,
        }
    }

    /// Whether a word (8 bytes at `offset`) of a request carrying `key` may
    /// land: the key is the current one and the window covers the word.
    pub fn admits(&self, key: WindowKey, offset: u64) -> bool {
        self.key.0 != 0
            && key == self.key
            && offset >= self.offset
            && offset.saturating_add(8) <= self.offset.saturating_add(self.len)
    }
}

/// Whether a windowed request's inner operation is one a window carries: a
/// WRITE or CAS on the window's own node's data region.
pub fn window_carries(window: WindowId, op: &Op) -> bool {
    match op {
        Op::Write { addr, .. } | Op::Cas { addr, .. } => {
            addr.node == window.node && addr.region == Region::Data
        }
        _ => false,
    }
}

impl Op {
    /// Which kind of operation this is, for counters.
    pub fn kind(&self) -> OpKind {
        match self {
            Op::Read { .. } => OpKind::Read,
            Op::Write { .. } => OpKind::Write,
            Op::Cas { .. } => OpKind::Cas,
            Op::LocalRead { .. } => OpKind::LocalRead,
            Op::LocalWrite { .. } | Op::BindWindow { .. } => OpKind::LocalWrite,
            Op::Windowed { op, .. } => op.kind(),
        }
    }

    /// Payload bytes the operation moves (read or written).
    pub fn bytes(&self) -> u64 {
        match self {
            Op::Read { len, .. } | Op::LocalRead { len, .. } => u64::from(*len),
            Op::Write { data, .. } | Op::LocalWrite { data, .. } => data.len() as u64,
            Op::Cas { .. } => 8,
            Op::Windowed { op, .. } => op.bytes(),
            Op::BindWindow { .. } => 0,
        }
    }

    /// The remote address of a NIC operation, `None` for the CPU path.
    pub fn remote_addr(&self) -> Option<RemoteAddr> {
        match self {
            Op::Read { addr, .. } | Op::Write { addr, .. } | Op::Cas { addr, .. } => Some(*addr),
            Op::LocalRead { .. } | Op::LocalWrite { .. } | Op::BindWindow { .. } => None,
            Op::Windowed { op, .. } => op.remote_addr(),
        }
    }

    /// The operation a window carries (`self` when it goes through none).
    pub fn unwindowed(&self) -> &Op {
        match self {
            Op::Windowed { op, .. } => op.unwindowed(),
            op => op,
        }
    }
}

/// The kinds of fabric operation, as counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OpKind {
    /// RDMA READ.
    Read,
    /// RDMA WRITE.
    Write,
    /// RDMA compare-and-swap.
    Cas,
    /// CPU read of the local data table.
    LocalRead,
    /// CPU write of the local data table.
    LocalWrite,
}

/// A work request: an operation tagged with the id its completion will carry.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct WorkRequest {
    /// Matches the completion to the request.
    pub id: OpId,
    /// What to do.
    pub op: Op,
}

/// What a successful operation returns.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum OpOutput {
    /// The bytes a READ (or local read) returned.
    Read(Vec<u8>),
    /// A WRITE (or local write) completed.
    Written,
    /// A CAS completed; `previous` is the word before the operation (the swap
    /// happened exactly when `previous == expect`).
    Cas {
        /// The word as the NIC found it.
        previous: u64,
    },
    /// A window was bound ([`Op::BindWindow`]) under `key`.
    Bound {
        /// The window's new key.
        key: WindowKey,
    },
}

/// The completion of one work request.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Completion {
    /// The id of the work request.
    pub id: OpId,
    /// Its outcome.
    pub result: Result<OpOutput, FabricError>,
}

/// Errors reported by a fabric for one operation or endpoint
/// (`#[non_exhaustive]`: a new backend may report new ones).
#[derive(Clone, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum FabricError {
    /// The node id is not part of the cluster.
    #[error("unknown node {0}")]
    UnknownNode(NodeId),
    /// The node does not answer (crashed, partitioned, or administratively down).
    #[error("{0} is unreachable")]
    NodeDown(NodeId),
    /// The access falls outside the registered region.
    #[error(
        "access of {len} bytes at {offset:#x} is outside {node}'s {region} region of {size} bytes"
    )]
    OutOfRange {
        /// Node addressed.
        node: NodeId,
        /// Region addressed.
        region: Region,
        /// Byte offset of the access.
        offset: u64,
        /// Length of the access.
        len: u64,
        /// Size of the region.
        size: u64,
    },
    /// A CAS address that is not 8-byte aligned.
    #[error("compare-and-swap at {0} is not 8-byte aligned")]
    Misaligned(RemoteAddr),
    /// The operation did not complete in time (e.g. RDMA retry count exceeded).
    #[error("operation timed out on the fabric")]
    Timeout,
    /// The remote NIC refused the access (rights, rkey, registration, or a
    /// request it does not allow): the device's status, from `node`.
    #[error("{node} refused the access: {status}")]
    RemoteAccess {
        /// The node whose NIC refused it.
        node: NodeId,
        /// The completion status the device reported.
        status: DeviceStatus,
    },
    /// Another transport failure ([`TransportError`] says which, and what
    /// it implies about the request's execution).
    #[error("transport error: {0}")]
    Transport(TransportError),
    /// No completion arrived by the attempt's deadline: the operation may or
    /// may not have executed (the driver stopped waiting for it).
    #[error("no completion arrived by the attempt's deadline")]
    NoCompletion,
    /// A request through a memory window ([`Op::Windowed`]) was refused: the
    /// window had been bound again under another key (or never bound), or
    /// does not cover the address, or carries no such request. The words
    /// before the first refused one landed (none, unless a rebind met a
    /// WRITE half-way); on a NIC the queue pair also fails
    /// (`IBV_WC_REM_ACCESS_ERR`), flushing what was posted behind it.
    #[error("{window} refused a request carrying key {key:?} (revoked, uncovered or not a WRITE or CAS)")]
    WindowRefused {
        /// The window.
        window: WindowId,
        /// The key the request carried.
        key: WindowKey,
    },
}

/// A completion status a device reported (`ibv_wc_status`): its code, its
/// name and the vendor's syndrome.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DeviceStatus {
    /// The status code.
    pub code: u32,
    /// Its name (`IBV_WC_REM_ACCESS_ERR`, ...).
    pub name: &'static str,
    /// The vendor's error syndrome.
    pub vendor: u32,
}

impl std::fmt::Display for DeviceStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (vendor error {:#x})", self.name, self.vendor)
    }
}

/// What went wrong with a request on its way ([`FabricError::Transport`]),
/// with what each says about whether it executed.
#[derive(Clone, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum TransportError {
    /// Posted to, or waiting on, a queue pair in the error state after an
    /// earlier failure: flushed. It never executed.
    #[error("flushed: the queue pair is in the error state (the request never executed)")]
    Flushed,
    /// The queue pair failed after the request was sent and gave no good
    /// completion for it: it may have executed.
    #[error("the queue pair failed after the request was sent (it may have executed)")]
    QueuePairFailed,
    /// A WRITE or CAS not sent: its landing window (from when the protocol
    /// issued it) passed before it could be posted. It never executed.
    #[error("not sent: its landing window passed before it could be posted (it never executed)")]
    LandingWindowPassed,
    /// No completion within the landing deadline: its queue pair was moved
    /// to the error state, so the request took effect within the deadline
    /// margin or never will (its outcome is unknown to the requester).
    #[error(
        "no completion within the landing deadline: the queue pair was failed, so the request \
         took effect within the margin or never will (outcome unknown)"
    )]
    LandingDeadline,
    /// A fault a simulated fabric or a test injected: which one.
    #[error("injected fault: {0:?}")]
    Injected(TransportFault),
    /// The device reported an error status for the request.
    #[error("{0}")]
    Device(DeviceStatus),
    /// A transfer longer than the port's largest message: not posted.
    #[error("a transfer of {len} bytes exceeds the port's largest message ({max})")]
    MessageTooLarge {
        /// Bytes asked for.
        len: u32,
        /// The port's largest message.
        max: u32,
    },
    /// The endpoint's staging buffers could not hold the transfer: not
    /// posted.
    #[error("the endpoint's staging buffers could not hold the transfer")]
    Staging,
    /// The endpoint refused the request before posting it (no connection
    /// to the node, a full send queue, a failed device call, the backend's
    /// own error): not posted. [`EndpointRefusal`] says why.
    #[error(transparent)]
    Endpoint(EndpointRefusal),
    /// A completion that does not answer its request (a driver's bug, or a
    /// harness's): nothing can be said of the request.
    #[error("a completion that does not answer its request")]
    Mismatch,
    /// A chain whose requests do not all go to one remote node: nothing of
    /// it was posted.
    #[error("a chain's requests must all go to one remote node (nothing was posted)")]
    ChainAcrossNodes,
    /// The endpoint does not post chains ([`Endpoint::post_chain`]):
    /// nothing of the chain was posted.
    #[error("this endpoint does not post ordered chains (nothing was posted)")]
    ChainsUnsupported,
    /// The endpoint does not carry memory windows ([`Op::Windowed`],
    /// [`Op::BindWindow`]): nothing was posted.
    #[error("this endpoint does not carry memory windows (nothing was posted)")]
    WindowsUnsupported,
}

/// The one remote node every request of `chain` goes to
/// ([`Endpoint::post_chain`]); `Ok(None)` for an empty chain.
///
/// # Errors
///
/// [`TransportError::ChainAcrossNodes`] if the requests go to several
/// nodes, or one of them to local memory.
pub fn chain_node(chain: &[(WorkRequest, ChainLink)]) -> Result<Option<NodeId>, FabricError> {
    let node = chain
        .first()
        .and_then(|(wr, _)| wr.op.remote_addr())
        .map(|a| a.node);
    if chain
        .iter()
        .any(|(wr, _)| node.is_none() || wr.op.remote_addr().map(|a| a.node) != node)
    {
        return Err(FabricError::Transport(TransportError::ChainAcrossNodes));
    }
    Ok(node)
}

/// How a request of a chain follows the request before it
/// ([`Endpoint::post_chain`]; the first request's link is ignored).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ChainLink {
    /// Executes after its predecessor executed, on the same queue pair,
    /// without waiting for its completion (RC's order: WRITEs in a row, a
    /// CAS releasing a lock behind the WRITEs it guards). Since it may be on
    /// the wire before its predecessor fails, it may execute although it
    /// reports an error.
    Ordered,
    /// `IBV_SEND_FENCE`: sent only once every earlier request of the chain
    /// has completed; if one failed, it is flushed and never executes (a
    /// READ of the rows a lock's CAS just took).
    Fenced,
}

impl FabricError {
    /// The node an error names as unreachable, if any.
    pub fn unreachable_node(&self) -> Option<NodeId> {
        match self {
            FabricError::NodeDown(n) | FabricError::UnknownNode(n) => Some(*n),
            _ => None,
        }
    }
}

/// What a transport can do to one posted request besides executing it and
/// completing normally: the project's one vocabulary of NIC faults, used by
/// `fabric-sim`'s injections, the stateright model's fault actions, the
/// cluster simulator's chaos and the verbs conformance suite. Each variant is
/// something a real RDMA transport produces (RC queue pairs on RoCE or
/// InfiniBand); each checker says which of them it injects
/// (docs/verification.md, "the fault vocabulary").
///
/// A request held by a paused fabric (PFC) is not a fate of its own: it is a
/// landing delay, which every world bounds by the landing bound (timing
/// assumption A2, docs/protocol.md §4) or, where it drops A2, leaves
/// unbounded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TransportFault {
    /// Never executes; the completion reports an error. (A request flushed
    /// from a queue pair in the error state before it was sent.)
    FailBeforeExecuting,
    /// Executes; the completion nevertheless reports an error. (The responder
    /// executed it but the acknowledgement was lost until the requester's
    /// retry count ran out.)
    FailAfterExecuting,
    /// The completion reports an error first; the request executes later,
    /// within the landing bound or, where a world drops A2, at any time.
    /// (The requester moved the queue pair to the error state, or its retry
    /// count ran out, while the packet was still queued in a switch or held
    /// by a paused priority: the error transition does not recall it, and an
    /// RC responder executes whatever arrives.)
    ErrorThenLand,
    /// Executes; no completion ever arrives (the requester gives the round up
    /// at its deadline).
    LoseCompletion,
    /// Never executes and no completion ever arrives.
    Vanish,
    /// Executes; its completion arrives after the requester gave the round
    /// up, when a later round, attempt or operation may be running on the
    /// same endpoint (a descheduled poller, a slow completion queue).
    LateCompletion,
    /// A WRITE executes twice, the second time later (a retransmitted copy
    /// held in the fabric). READs are harmless to repeat and RC responders
    /// answer a duplicate atomic from their replay cache, so only WRITEs are
    /// duplicated.
    DuplicateWrite,
}

impl TransportFault {
    /// Every fault, in declaration order.
    pub const ALL: [TransportFault; 7] = [
        TransportFault::FailBeforeExecuting,
        TransportFault::FailAfterExecuting,
        TransportFault::ErrorThenLand,
        TransportFault::LoseCompletion,
        TransportFault::Vanish,
        TransportFault::LateCompletion,
        TransportFault::DuplicateWrite,
    ];

    /// Whether the request executes at the moment the fault hits it (before
    /// any completion is delivered).
    pub fn executes_now(self) -> bool {
        matches!(
            self,
            TransportFault::FailAfterExecuting
                | TransportFault::LoseCompletion
                | TransportFault::LateCompletion
                | TransportFault::DuplicateWrite
        )
    }

    /// Whether the request executes later, after its completion (or the
    /// requester's giving up) no longer says anything about it.
    pub fn executes_later(self) -> bool {
        matches!(
            self,
            TransportFault::ErrorThenLand | TransportFault::DuplicateWrite
        )
    }

    /// Whether an error completion is delivered when the fault hits.
    pub fn delivers_error(self) -> bool {
        matches!(
            self,
            TransportFault::FailBeforeExecuting
                | TransportFault::FailAfterExecuting
                | TransportFault::ErrorThenLand
        )
    }

    /// Whether the fault applies to a request of this kind (duplicates hit
    /// only WRITEs; CPU accesses never fault).
    pub fn applies_to(self, kind: OpKind) -> bool {
        match kind {
            OpKind::LocalRead | OpKind::LocalWrite => false,
            OpKind::Write => true,
            OpKind::Read | OpKind::Cas => self != TransportFault::DuplicateWrite,
        }
    }

    /// Its name on command lines and in reports.
    pub fn name(self) -> &'static str {
        match self {
            TransportFault::FailBeforeExecuting => "fail-before-executing",
            TransportFault::FailAfterExecuting => "fail-after-executing",
            TransportFault::ErrorThenLand => "error-then-land",
            TransportFault::LoseCompletion => "lose-completion",
            TransportFault::Vanish => "vanish",
            TransportFault::LateCompletion => "late-completion",
            TransportFault::DuplicateWrite => "duplicate-write",
        }
    }
}

impl std::fmt::Display for TransportFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The shape of the cluster a fabric connects: how many nodes, and the size of
/// each node's registered regions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Topology {
    /// Number of nodes; node ids are `0..nodes`.
    pub nodes: u16,
    /// Index table entries per node.
    pub index_slots_per_node: u32,
    /// Bytes of data table per node.
    pub data_bytes_per_node: u64,
}

impl std::fmt::Display for Topology {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} nodes of {} index table entries and {} data table bytes",
            self.nodes, self.index_slots_per_node, self.data_bytes_per_node
        )
    }
}

impl Topology {
    /// Whether a fabric of this shape has every node and every byte that a
    /// deployment of shape `needed` addresses.
    pub fn covers(&self, needed: &Topology) -> bool {
        self.nodes >= needed.nodes
            && self.index_slots_per_node >= needed.index_slots_per_node
            && self.data_bytes_per_node >= needed.data_bytes_per_node
    }
}

/// A client id held on a fabric for as long as the claim lives
/// ([`Endpoint::claim_client`]); dropping it releases the id. It names the
/// holder this process writes into the id's registry word
/// ([`crate::registry`]): the fabric's, the same for every claim of the
/// process, so that the next client of the id in this process takes the
/// word the last one left.
pub struct ClientClaim {
    holder: u32,
    release: Option<Box<dyn FnOnce() + Send + Sync>>,
}

impl ClientClaim {
    /// A claim that nothing records (an endpoint whose fabric keeps no
    /// registry of ids in use), under the process's name: such a fabric
    /// does not tell two clients of one id in the process apart (the
    /// conformance suite rejects it), while the node's registry word still
    /// refuses the id to another process.
    pub fn unrecorded() -> ClientClaim {
        static PROCESS: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
        ClientClaim {
            holder: *PROCESS.get_or_init(crate::pure::draw_nonce),
            release: None,
        }
    }

    /// A claim of the process named `holder` (24 bits, not 0) that calls
    /// `release` when dropped (which gives the id back to the fabric's
    /// registry).
    pub fn new(holder: u32, release: impl FnOnce() + Send + Sync + 'static) -> ClientClaim {
        ClientClaim {
            holder: (holder & crate::pure::MAX_NONCE).max(1),
            release: Some(Box::new(release)),
        }
    }

    /// The holder name its registry word carries.
    pub fn holder(&self) -> u32 {
        self.holder
    }
}

impl Drop for ClientClaim {
    fn drop(&mut self) {
        if let Some(release) = self.release.take() {
            release();
        }
    }
}

impl std::fmt::Debug for ClientClaim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientClaim")
            .field("holder", &self.holder)
            .field("recorded", &self.release.is_some())
            .finish()
    }
}

/// A fabric: a set of nodes whose registered memory clients reach through
/// endpoints.
pub trait Fabric: Send + Sync {
    /// A client's connection to the fabric.
    type Endpoint: Endpoint;

    /// The nodes and region sizes this fabric connects.
    fn topology(&self) -> Topology;

    /// Opens an endpoint for a client running on `node`.
    fn open(&self, node: NodeId) -> Result<Self::Endpoint, FabricError>;
}

/// A client's connection: post work requests, poll completions, reach the
/// local data table by CPU, read the node's clock.
pub trait Endpoint: Send {
    /// The node this endpoint's client runs on.
    fn node(&self) -> NodeId;

    /// Posts one work request. An error here means it was not posted (no
    /// completion will follow); errors of a posted request arrive as its
    /// completion.
    fn post(&mut self, wr: WorkRequest) -> Result<(), FabricError>;

    /// Posts one fire-and-forget work request (in RDMA terms: without
    /// `IBV_SEND_SIGNALED`), such as a server's response WRITE, whose
    /// success nobody waits for.
    ///
    /// The contract, for callers and implementations:
    /// - An error here means it was not posted (no completion will follow),
    ///   as with [`Endpoint::post`].
    /// - Once posted, it executes exactly as if [`Endpoint::post`] had posted
    ///   it: same effect, same order relative to the endpoint's other
    ///   requests to the same node, same deadlines.
    /// - A successful completion *need not* be delivered: an implementation
    ///   may suppress it. The default implementation just calls
    ///   [`Endpoint::post`], which delivers it, so callers must ignore (match
    ///   by id and drop) completions of their unsignaled requests.
    /// - A failure *is* delivered, as a completion carrying the request's id
    ///   and the error (an unsignaled RDMA request that fails produces an
    ///   error completion; so do the requests flushed behind it).
    /// - The endpoint reclaims what the request holds (buffers, send queue
    ///   slots) by itself during later [`Endpoint::poll`] and
    ///   [`Endpoint::wait`] calls, so a caller posting many keeps polling;
    ///   any number may be posted in a row.
    fn post_unsignaled(&mut self, wr: WorkRequest) -> Result<(), FabricError> {
        self.post(wr)
    }

    /// [`Endpoint::post`], saying when the protocol issued `wr`: `issued`
    /// is the clock reading ([`Endpoint::now`]) the machine decided on. The
    /// protocol's deadline margin budgets a mutation's landing from that
    /// reading; an endpoint that enforces landing deadlines (the verbs
    /// backend) counts them from `issued`, not from this call, so that a
    /// thread descheduled between its clock reading and the post cannot
    /// stretch the window. Every driver posts through this. The default
    /// ignores `issued` (a fabric without deadlines of its own).
    fn post_issued(&mut self, wr: WorkRequest, issued: Nanos) -> Result<(), FabricError> {
        let _ = issued;
        self.post(wr)
    }

    /// [`Endpoint::post_unsignaled`], saying when the protocol issued `wr`
    /// (as [`Endpoint::post_issued`]).
    fn post_unsignaled_issued(
        &mut self,
        wr: WorkRequest,
        issued: Nanos,
    ) -> Result<(), FabricError> {
        let _ = issued;
        self.post_unsignaled(wr)
    }

    /// Posts `chain`, requests to one node, to execute in order on one
    /// queue pair, each after its predecessor as its [`ChainLink`] says; the
    /// protocol issued them at `issued` (as [`Endpoint::post_issued`]).
    /// Every request completes as if posted alone, and what a fault of one
    /// does to the requests behind it is the fault vocabulary's chain
    /// meaning (docs/verification.md, "Chains"):
    /// - not executed (failed before executing, vanished, its node down):
    ///   everything behind it is flushed ([`TransportError::Flushed`]);
    /// - executed, then failed or its completion lost or late: a fenced
    ///   request behind it is flushed; an ordered one executes and reports
    ///   [`TransportError::QueuePairFailed`], as does everything behind it;
    /// - an error first, landing later: a fenced request behind it is
    ///   flushed; an ordered one lands after it, later, and reports
    ///   [`TransportError::QueuePairFailed`];
    /// - a duplicated WRITE: its copy may land after the requests behind it
    ///   (RC's go-back-N retransmission).
    ///
    /// An error here means nothing of the chain was posted. The default
    /// refuses every chain ([`TransportError::ChainsUnsupported`]).
    fn post_chain(
        &mut self,
        chain: Vec<(WorkRequest, ChainLink)>,
        issued: Nanos,
    ) -> Result<(), FabricError> {
        let _ = (chain, issued);
        Err(FabricError::Transport(TransportError::ChainsUnsupported))
    }

    /// Appends the completions that have arrived to `out` without blocking.
    fn poll(&mut self, out: &mut Vec<Completion>);

    /// Blocks until at least one completion is available (appending all that
    /// are) or `timeout` passes.
    fn wait(&mut self, out: &mut Vec<Completion>, timeout: Duration);

    /// The current time on this node's clock.
    fn now(&self) -> Nanos;

    /// The shape of this endpoint's fabric, if the endpoint knows it (the
    /// simulator's does). [`Client::new`](crate::Client::new) and
    /// [`Pipeline::new`](crate::pipeline::Pipeline::new) refuse a
    /// configuration that addresses more than it offers. The default, `None`,
    /// skips that check.
    fn topology(&self) -> Option<Topology> {
        None
    }

    /// Claims the client id `id` on this endpoint's fabric for as long as the
    /// returned claim lives, or `None` if a live claim already holds it: two
    /// clients with one id would allocate from one data table share and lose
    /// each other's writes, so [`Client::new`](crate::Client::new) and
    /// [`Pipeline::new`](crate::pipeline::Pipeline::new) refuse the second.
    ///
    /// This registry is the fabric's, within one process; across processes
    /// the node's registry word holds the id ([`crate::registry::claim_id`],
    /// which every system's client calls). The default records nothing and
    /// always succeeds ([`ClientClaim::unrecorded`]).
    fn claim_client(&self, id: ClientId) -> Option<ClientClaim> {
        let _ = id;
        Some(ClientClaim::unrecorded())
    }

    /// Waits `d` between attempts (back-off). The default sleeps the thread;
    /// a simulated endpoint under a model checker yields to its scheduler.
    fn backoff(&mut self, d: Duration) {
        if d >= Duration::from_micros(50) {
            std::thread::sleep(d);
        } else {
            std::thread::yield_now();
        }
    }
}

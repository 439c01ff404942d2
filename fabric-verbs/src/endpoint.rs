//! [`VerbsEndpoint`]: one client's connection to the cluster.
//!
//! Each endpoint owns its completion queue, a registered staging buffer and
//! one RC queue pair to every node, its own node included (the loopback QP
//! through which even local index entries are CASed). Nothing is shared
//! between endpoints, so no locks sit on the posting path; each client
//! thread owns one endpoint.
//!
//! Posting: the address is checked and translated ([`crate::remote`]), a
//! staging slice is reserved (WRITE data copied in), CAS operands are put in
//! the responder's atomic byte order, and the request joins its queue pair's
//! batch. The batch is posted at the next `poll`/`wait` as one chain of work
//! requests (one doorbell for a whole round to a node), with a fence where
//! [`crate::policy::needs_fence`] asks for one; a full send queue keeps the
//! rest for later. Requests live in a slab indexed by `wr_id` (no hash map,
//! no allocation per request once warm). Polling maps each `ibv_wc` back to
//! the protocol's [`Completion`] (READ bytes copied out, CAS previous value
//! normalised, errors typed by [`crate::status::map_status`]).
//!
//! Deadlines (A2 enforced by the requester): every posted request has one,
//! the cluster file's landing deadline for a WRITE or CAS and its READ
//! deadline for a READ, counted from the protocol's clock reading that
//! issued it (`Endpoint::post_issued`: every driver passes the `now` its
//! machine decided on, so a thread descheduled between that reading and
//! the post has used part of the window; a plain `post` counts from the
//! call), not from `ibv_post_send` (a request that waited in the software
//! backlog, behind a full send queue or a client thread descheduled before
//! its next poll, used part of its window there too). One whose window passed while it waited
//! is never handed to the NIC, so it never executes, and completes with an
//! error ([`crate::policy::backlog_verdict`]). When one passes, the queue pair is moved to the
//! error state (`ibv_modify_qp(IBV_QPS_ERR)`): nothing more is (re)sent on
//! it, so the mutation took effect within the deadline (plus the packet
//! lifetime, inside the deadline margin) or never will; its completion
//! carries an error saying so, and the requests behind it flush. For the
//! caller's requests this happens at the deadline whether or not this
//! endpoint is polled: the process's [`crate::watchdog`] thread trips the
//! queue pair (the endpoint publishes each queue pair's earliest deadline
//! after polling), so a client thread descheduled past a deadline no longer
//! reports a mutation that executed after it as a success; the endpoint's
//! own check at `poll` remains for what the watchdog does not watch
//! (unsignaled runs, probes, flushes that never come). Should the
//! flushes not come within a second, the queue pair is destroyed and the
//! requests complete with errors anyway: no provider quirk or stuck
//! responder can keep a client waiting.
//!
//! Failures and (re)connection: a queue pair fails on an error completion,
//! on a deadline, or on an `rdma_cm` DISCONNECTED/UNREACHABLE event (a
//! crashed node's connection manager tears its connections down, which is
//! seen long before the transport's retries run out). A failed queue pair
//! drains (its requests complete with errors), then the node is dialled
//! again by the node's dialer of that peer (a background thread shared by
//! the node's endpoints: [`crate::dialer`]), so a re-dial never blocks
//! operations to live nodes; meanwhile posts to the node fail at once with
//! `NodeDown`. Re-dials of a node that stays down back off from 200 ms to
//! 5 s; after a permanent refusal (another cluster file or version, a clock
//! beyond `clock_skew_ms`, a wrong address) the node is not dialled for 30 s.
//! [`VerbsEndpoint::open`] dials every node at once and returns when all
//! answered or `connect_timeout_ms` passed: nodes still down are connected
//! lazily later.
//!
//! Unsignaled requests ([`Endpoint::post_unsignaled`], e.g. a server's
//! response WRITEs) are posted without `IBV_SEND_SIGNALED`, except every
//! k-th of a queue pair's run of them ([`crate::policy::signal_every`]: a
//! quarter of the send queue, at most 64), whose completion the endpoint
//! swallows: a send queue slot is reclaimed only by a signaled completion,
//! and on an RC queue pair completions come in posting order, so a
//! completion retires every unsignaled request posted before it as done.
//! A run left without a later signaled request (the caller stopped
//! posting) is closed by a probe: a quarter of a deadline after the run
//! began, the endpoint posts its own signaled 8-byte READ of the node's
//! data region, with the landing deadline, whose completion retires the run
//! (and is swallowed). Unsignaled requests keep their deadlines (A2): one
//! not known to be done by then fails its queue pair like any other; but
//! one whose deadline passed before the endpoint could probe (it was not
//! polled in time: its thread was off the CPU) is probed at once and given
//! one more landing deadline for the probe's answer, rather than failed for
//! a question nobody asked. A failed unsignaled request still completes,
//! with its id and error (the NIC reports errors and flushes of unsignaled
//! requests too); a successful one never does.
//!
//! `LocalRead`/`LocalWrite` are CPU copies of the node's own data region
//! (word-wise atomics) and complete at once.

use std::collections::VecDeque;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nessie_protocol::{
    ChainLink, ClientClaim, ClientId, Completion, Endpoint, EndpointRefusal, FabricError, Nanos,
    NodeId, Op, OpId, OpOutput, Region, RemoteAddr, TransportError, WindowId, WindowKey,
    WorkRequest,
};
use rdma_sys::{ibv_post_send, ibv_send_wr, ibv_sge, rdma_cm_event_type as Ev};

mod windows;

use crate::byteorder::{operand, previous, Endian};
use crate::clock::NodeClock;
use crate::dialer::{self, DialDone, DialJob};
use crate::error::VerbsError;
use crate::ffi::cm::{CmId, EventChannel};
use crate::ffi::cq::{Cq, Wc};
use crate::ffi::memory::Mr;
use crate::node::NodeShared;
use crate::policy::{
    backlog_verdict, effective_send_depth, jitter_draw, jittered, needs_fence, signal_every,
    BacklogVerdict, NicOp, Outstanding, RegionKind,
};
use crate::remote::{check_range, AddressBook};
use crate::staging::Arena;
use crate::status::map_status;
use crate::watchdog::{EndpointWatch, QpHandle, Watchdog};
use crate::wire::WireError;
use crate::wr::{cas_wr, read_wr, write_wr, LocalSlice, RemoteSlice, SendWr};

/// How soon a failed node is dialled again (doubling after each failed
/// re-dial, up to [`REDIAL_MAX_INTERVAL`]).
const REDIAL_INTERVAL: Duration = Duration::from_millis(200);
/// The longest wait between re-dials of a node that stays down.
const REDIAL_MAX_INTERVAL: Duration = Duration::from_secs(5);
/// How long one re-dial may take (in the background).
const REDIAL_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a node that refused for a permanent reason is left alone.
pub const PERMANENT_HOLD_OFF: Duration = Duration::from_secs(30);
/// How long the flushed completions of a failed queue pair may take before
/// the endpoint destroys it and completes its requests itself.
const FLUSH_GRACE: Duration = Duration::from_secs(1);
/// How often the `rdma_cm` events of the endpoint's connections are read.
const EVENT_CHECK_INTERVAL: Duration = Duration::from_millis(1);

/// How long after the first of a run of unsignaled requests the endpoint
/// probes the queue pair, if no signaled request followed: a quarter of the
/// shortest deadline, leaving the probe three quarters of it to complete
/// before the first of the run's deadlines passes.
fn probe_after(t: &crate::cluster::Timing) -> Duration {
    t.landing_deadline.min(t.read_deadline) / 4
}

/// A request's window: a probe answers for the mutations before it, so it
/// has their landing deadline; a WRITE, CAS or window bind the landing
/// deadline; a READ the READ deadline.
fn window(f: &InFlight, t: &crate::cluster::Timing) -> Duration {
    match (f.signal, f.nic) {
        (Signal::Probe, _) | (_, NicOp::Write | NicOp::Cas | NicOp::Bind) => t.landing_deadline,
        (_, NicOp::Read) => t.read_deadline,
    }
}

/// How long after a failed re-dial the next may start, given how many
/// re-dials of the node failed in a row (before the jitter the endpoint
/// adds: [`crate::policy::jittered`]).
pub fn redial_interval(failures: u32) -> Duration {
    REDIAL_INTERVAL
        .saturating_mul(1u32 << failures.min(16))
        .min(REDIAL_MAX_INTERVAL)
}

/// The state of the queue pair to one node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Link {
    /// Connected: requests are posted.
    Up,
    /// In the error state, its requests draining.
    Failed,
    /// A background dial is under way.
    Dialing,
    /// Not connected; dialled again on the next post after `retry_at`.
    Down,
}

/// The queue pair to one node and what is in flight on it.
struct Peer {
    conn: Option<CmId>,
    link: Link,
    /// Requests posted and not completed.
    posted: u32,
    out: Outstanding,
    /// Requests accepted but not yet posted (the next doorbell's batch).
    backlog: VecDeque<u64>,
    /// Requests posted, in posting order.
    sent: VecDeque<u64>,
    retry_at: Instant,
    dial_failures: u32,
    failed_at: Option<Instant>,
    /// In the list of peers whose batch waits for a doorbell.
    dirty: bool,
    /// Unsignaled requests posted since the last signaled one.
    unsignaled_run: u32,
    /// When the first of them was posted (a probe is due half a deadline
    /// later, unless a signaled request follows).
    run_since: Option<Instant>,
    /// A probe is accepted or posted and not completed.
    probing: bool,
    /// In the list of peers whose earliest deadline the watchdog must be
    /// told again.
    watch_dirty: bool,
}

impl Peer {
    /// The queue pair is new or gone: nothing of it is in flight.
    fn reset_run(&mut self) {
        self.out = Outstanding::default();
        self.unsignaled_run = 0;
        self.run_since = None;
    }
}

/// Who wants a request's completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Signal {
    /// [`Endpoint::post`]: the caller, whatever its outcome.
    Caller,
    /// [`Endpoint::post_unsignaled`]: the caller, only if it failed.
    Unsignaled,
    /// The endpoint's probe closing a run of unsignaled requests: nobody.
    Probe,
}

/// Where a request's local bytes live.
enum Buf {
    /// A slice of the staging arena.
    Arena { offset: u64, len: u64 },
    /// A temporary registration (the arena was full).
    Temp(Mr),
}

/// A request accepted and not yet completed.
struct InFlight {
    id: OpId,
    node: NodeId,
    nic: NicOp,
    len: u32,
    buf: Buf,
    remote: RemoteSlice,
    compare: u64,
    swap: u64,
    stores: Endian,
    /// When the caller posted it (its window runs from here:
    /// [`crate::policy::backlog_verdict`]).
    accepted: Instant,
    /// Set when handed to the NIC: by then it must complete.
    deadline: Option<Instant>,
    /// Its deadline passed and its queue pair was failed for it.
    expired: bool,
    /// Who wants its completion.
    signal: Signal,
    /// Posted with `IBV_SEND_SIGNALED` (a completion will come for it).
    signaled: bool,
    /// Unsignaled, its deadline passed before anything asked whether it
    /// was done, and it was given one more landing deadline for a probe.
    extended: bool,
    /// Posted with `IBV_SEND_FENCE` whatever the queue pair's outstanding
    /// requests (a fenced link of a chain, `Endpoint::post_chain`).
    fenced: bool,
    /// The memory window a WRITE or CAS goes through and the key it
    /// carries (its rkey), or the window a bind binds and its new key.
    window: Option<(WindowId, WindowKey)>,
}

impl InFlight {
    /// Request `id` of `nic` to `node` of `len` bytes in `buf`, accepted
    /// at `accepted` for `signal`, not yet posted; its remote slice and
    /// operands are set by the caller that has them.
    fn new(
        (id, node, nic): (OpId, NodeId, NicOp),
        (len, buf): (u32, Buf),
        (signal, accepted): (Signal, Instant),
    ) -> InFlight {
        InFlight {
            id,
            node,
            nic,
            len,
            buf,
            remote: RemoteSlice { addr: 0, rkey: 0 },
            compare: 0,
            swap: 0,
            stores: Endian::HOST,
            accepted,
            deadline: None,
            expired: false,
            signal,
            signaled: true,
            extended: false,
            fenced: false,
            window: None,
        }
    }
}

/// One slot of the request slab; `gen` tells a reused slot's requests apart.
struct Slot {
    gen: u32,
    f: Option<InFlight>,
}

/// Reusable arrays for one chain of work requests (their pointers are only
/// used during `ibv_post_send`).
struct Chain {
    wrs: Vec<ibv_send_wr>,
    sges: Vec<ibv_sge>,
    ids: Vec<u64>,
    /// Whether each request is signaled.
    signaled: Vec<bool>,
}

impl Chain {
    fn new() -> Chain {
        Chain {
            wrs: Vec::new(),
            sges: Vec::new(),
            ids: Vec::new(),
            signaled: Vec::new(),
        }
    }
}

// SAFETY: the raw pointers inside are only set up and used within one
// `ring` call on the owning thread; between calls the vectors are cleared.
unsafe impl Send for Chain {}

/// A client's endpoint on the verbs fabric. Field order is drop order: the
/// queue pairs go before the buffers they reference, the CQ and channel last.
pub struct VerbsEndpoint {
    peers: Vec<Peer>,
    slots: Vec<Slot>,
    free: Vec<u32>,
    in_use: usize,
    staging: Mr,
    arena: Arena,
    dirty: Vec<u16>,
    chain: Chain,
    done_tx: Sender<DialDone>,
    done_rx: Receiver<DialDone>,
    events: Arc<EventChannel>,
    cq: Arc<Cq>,
    node: Arc<NodeShared>,
    book: AddressBook,
    ready: VecDeque<Completion>,
    wcs: Vec<Wc>,
    send_depth: u32,
    /// The longest run of unsignaled requests on one queue pair.
    signal_every: u32,
    /// Test-only fault: never signal an unsignaled request, never probe.
    skip_signals: bool,
    clock: NodeClock,
    /// The node the protocol's client of this endpoint belongs to: the
    /// hosted node, or for a client host's endpoint the node holding its
    /// client's share ([`VerbsEndpoint::open_for`]).
    me: NodeId,
    next_check: Option<Instant>,
    next_events: Instant,
    /// What the process's deadline watchdog watches of this endpoint.
    watch: Arc<EndpointWatch>,
    /// Peers whose earliest deadline changed since it was last published.
    watch_touched: Vec<u16>,
}

impl VerbsEndpoint {
    /// Opens an endpoint on `node`: dials every node of the cluster (its own
    /// included) at once and waits until all answered or the cluster file's
    /// `connect_timeout_ms` passed. Nodes not reached by then are dialled
    /// again lazily (posts to them fail with `NodeDown` meanwhile); only
    /// failing to reach the endpoint's own node is an error.
    pub fn open(node: Arc<NodeShared>) -> Result<VerbsEndpoint, VerbsError> {
        let me = node.id;
        VerbsEndpoint::open_for(node, me)
    }

    /// [`VerbsEndpoint::open`] for a client of node `me`, on a process's
    /// device state `node`: a hosted node's (`me` is that node), or a
    /// `node::ClientHost`'s, for a client without storage whose
    /// share `me` holds. The connection to `me` must come up; a client
    /// host's endpoint has no data region of its own (`LocalRead`,
    /// `LocalWrite` and window binds are refused).
    pub fn open_for(node: Arc<NodeShared>, me: NodeId) -> Result<VerbsEndpoint, VerbsError> {
        let n = node.cluster.topology().nodes;
        let plan = node.plan;
        let send_depth = effective_send_depth(&plan, n);
        let cq = Cq::new(&node.ctx, plan.cq_entries)?;
        let events = EventChannel::new()?;
        let staging = Mr::alloc_with(
            &node.pd,
            node.cluster.tuning.staging_bytes,
            RegionKind::Staging,
            node.cluster.tuning.huge_pages,
        )?;
        let arena = Arena::new(staging.len());
        let (done_tx, done_rx) = mpsc::channel();
        let now = Instant::now();
        let mut ep = VerbsEndpoint {
            peers: (0..n)
                .map(|_| Peer {
                    conn: None,
                    link: Link::Down,
                    posted: 0,
                    out: Outstanding::default(),
                    backlog: VecDeque::new(),
                    sent: VecDeque::new(),
                    retry_at: now,
                    dial_failures: 0,
                    failed_at: None,
                    dirty: false,
                    unsignaled_run: 0,
                    run_since: None,
                    probing: false,
                    watch_dirty: false,
                })
                .collect(),
            slots: Vec::new(),
            free: Vec::new(),
            in_use: 0,
            staging,
            arena,
            dirty: Vec::new(),
            chain: Chain::new(),
            done_tx,
            done_rx,
            events,
            cq,
            book: AddressBook::new(n),
            ready: VecDeque::new(),
            wcs: Vec::new(),
            send_depth,
            signal_every: signal_every(send_depth),
            skip_signals: false,
            clock: node.clock,
            node,
            me,
            next_check: None,
            next_events: now,
            watch: Watchdog::global()?.watch(usize::from(n)),
            watch_touched: Vec::new(),
        };
        let timeout = Duration::from_millis(ep.node.cluster.tuning.connect_timeout_ms);
        for target in 0..n {
            ep.start_dial(NodeId(target), timeout)?;
        }
        let deadline = Instant::now() + timeout + REDIAL_TIMEOUT;
        let mut own_error = None;
        while ep.peers.iter().any(|p| p.link == Link::Dialing) {
            let left = deadline.saturating_duration_since(Instant::now());
            match ep.done_rx.recv_timeout(left) {
                Ok(d) => {
                    if d.node == ep.me {
                        if let Err(e) = &d.result {
                            own_error = Some(e.to_string());
                        }
                    }
                    ep.apply_dial(d);
                }
                Err(_) => break,
            }
        }
        let me = usize::from(ep.me.0);
        if ep.peers.get(me).is_none_or(|p| p.link != Link::Up) {
            return Err(VerbsError::Timeout {
                what: format!(
                    "the connection to {} ({})",
                    ep.me,
                    own_error.unwrap_or_else(|| "no answer".into())
                ),
                waited_ms: timeout.as_millis() as u64,
            });
        }
        let down: Vec<u16> = (0..n)
            .filter(|&i| ep.peers[usize::from(i)].link != Link::Up)
            .collect();
        if !down.is_empty() {
            tracing::warn!(
                node = ep.me.0,
                ?down,
                "endpoint opened with nodes unreachable; they are dialled again lazily"
            );
        }
        Ok(ep)
    }

    /// The inline data the queue pair to `node` accepts per WRITE (`None`
    /// while it is not connected): WRITEs up to this size go
    /// `IBV_SEND_INLINE` (`[tuning] max_inline_data`, as the device granted).
    pub fn max_inline(&self, node: NodeId) -> Option<u32> {
        let p = self.peers.get(usize::from(node.0))?;
        (p.link == Link::Up)
            .then_some(())
            .and(p.conn.as_ref().map(CmId::max_inline))
    }

    /// Test-only fault switch: when `on`, unsignaled requests are never
    /// signaled (not every k-th) and runs of them are never probed, so their
    /// send queue slots are never reclaimed (the queue fills, requests wait,
    /// deadlines pass). For showing that the conformance suite catches it.
    #[doc(hidden)]
    pub fn set_skip_signals(&mut self, on: bool) {
        self.skip_signals = on;
    }

    /// Whether the queue pair to `node` is connected.
    pub fn is_connected(&self, node: NodeId) -> bool {
        self.peers
            .get(usize::from(node.0))
            .is_some_and(|p| p.link == Link::Up)
    }

    /// Hands a dial of `target` to the node's dialer of it
    /// ([`crate::dialer`]); the result comes back on `done_rx`.
    fn start_dial(&mut self, target: NodeId, timeout: Duration) -> Result<(), VerbsError> {
        dialer::submit(DialJob {
            node: self.node.clone(),
            target,
            cq: self.cq.clone(),
            events: self.events.clone(),
            send_depth: self.send_depth,
            timeout,
            queued: Instant::now(),
            done: self.done_tx.clone(),
        })?;
        self.peers[usize::from(target.0)].link = Link::Dialing;
        Ok(())
    }

    /// Takes in a finished dial.
    fn apply_dial(&mut self, d: DialDone) {
        let now = Instant::now();
        let target = d.node;
        let result = d.result.and_then(|dialed| {
            let peer = format!("{target}");
            let regions = dialed.welcome.regions().ok_or(VerbsError::Wire {
                peer: peer.clone(),
                source: WireError::BadOrder(0),
            })?;
            self.book
                .set(target, regions)
                .map_err(|_| VerbsError::Wire {
                    peer,
                    source: WireError::BadOrder(0),
                })?;
            Ok(dialed.id)
        });
        let p = &mut self.peers[usize::from(target.0)];
        match result {
            Ok(id) => {
                if p.dial_failures > 0 {
                    crate::transport_stats::redialled();
                    tracing::warn!(node = self.node.id.0, %target, "reconnected");
                }
                self.watch
                    .set_qp(usize::from(target.0), Some(QpHandle(id.qp())));
                p.conn = Some(id);
                p.link = Link::Up;
                p.reset_run();
                p.dial_failures = 0;
                p.failed_at = None;
            }
            Err(e) => {
                crate::transport_stats::dial_failed();
                p.dial_failures = p.dial_failures.saturating_add(1);
                let wait = if e.is_permanent() {
                    PERMANENT_HOLD_OFF
                } else {
                    jittered(redial_interval(p.dial_failures - 1), jitter_draw())
                };
                p.retry_at = now + wait;
                p.link = Link::Down;
                if e.is_permanent() {
                    tracing::warn!(node = self.node.id.0, %target, error = %e, "not dialling it again for {wait:?}");
                } else if p.dial_failures == 1 {
                    // The first failure of a run of them is the news; the
                    // re-dials after it (backing off) are counted.
                    tracing::warn!(node = self.node.id.0, %target, error = %e, "dial failed; re-dialling with back-off");
                } else {
                    tracing::debug!(node = self.node.id.0, %target, error = %e, "dial failed");
                }
            }
        }
    }

    /// Whether requests may be posted to `node` now; starts a background
    /// re-dial of a node that is down and due.
    fn ensure_up(&mut self, node: NodeId) -> Result<(), FabricError> {
        while let Ok(d) = self.done_rx.try_recv() {
            self.apply_dial(d);
        }
        let p = &self.peers[usize::from(node.0)];
        match p.link {
            Link::Up => Ok(()),
            Link::Down if p.posted == 0 && Instant::now() >= p.retry_at => {
                if let Err(e) = self.start_dial(node, REDIAL_TIMEOUT) {
                    tracing::warn!(%node, error = %e, "cannot re-dial");
                }
                Err(FabricError::NodeDown(node))
            }
            _ => Err(FabricError::NodeDown(node)),
        }
    }

    fn insert(&mut self, f: InFlight) -> u64 {
        self.in_use += 1;
        let idx = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(Slot { gen: 0, f: None });
                (self.slots.len() - 1) as u32
            }
        };
        let s = &mut self.slots[idx as usize];
        s.gen = s.gen.wrapping_add(1);
        s.f = Some(f);
        (u64::from(s.gen) << 32) | u64::from(idx)
    }

    fn slot(&self, wr_id: u64) -> Option<&InFlight> {
        let s = self.slots.get(wr_id as u32 as usize)?;
        (u64::from(s.gen) == wr_id >> 32).then_some(())?;
        s.f.as_ref()
    }

    fn slot_mut(&mut self, wr_id: u64) -> Option<&mut InFlight> {
        let s = self.slots.get_mut(wr_id as u32 as usize)?;
        (u64::from(s.gen) == wr_id >> 32).then_some(())?;
        s.f.as_mut()
    }

    fn take(&mut self, wr_id: u64) -> Option<InFlight> {
        let idx = wr_id as u32;
        let s = self.slots.get_mut(idx as usize)?;
        if u64::from(s.gen) != wr_id >> 32 {
            return None;
        }
        let f = s.f.take()?;
        self.free.push(idx);
        self.in_use -= 1;
        Some(f)
    }

    fn alloc(&mut self, len: u32) -> Result<(Buf, LocalSlice), FabricError> {
        let len64 = u64::from(len.max(8));
        if let Some(offset) = self.arena.alloc(len64) {
            let slice = LocalSlice {
                addr: self.staging.addr() + offset,
                len,
                lkey: self.staging.lkey(),
            };
            return Ok((Buf::Arena { offset, len: len64 }, slice));
        }
        let mr = Mr::alloc(&self.node.pd, len64, RegionKind::Staging).map_err(|e| {
            tracing::warn!(error = %e, "staging buffer exhausted and a temporary one failed");
            FabricError::Transport(TransportError::Staging)
        })?;
        let slice = LocalSlice {
            addr: mr.addr(),
            len,
            lkey: mr.lkey(),
        };
        Ok((Buf::Temp(mr), slice))
    }

    fn slice_of(&self, f: &InFlight) -> LocalSlice {
        match &f.buf {
            Buf::Arena { offset, .. } => LocalSlice {
                addr: self.staging.addr() + offset,
                len: f.len,
                lkey: self.staging.lkey(),
            },
            Buf::Temp(mr) => LocalSlice {
                addr: mr.addr(),
                len: f.len,
                lkey: mr.lkey(),
            },
        }
    }

    fn read_buf(&self, f: &InFlight, len: usize) -> Option<Vec<u8>> {
        match &f.buf {
            Buf::Arena { offset, .. } => self.staging.read(*offset, len),
            Buf::Temp(mr) => mr.read(0, len),
        }
    }

    fn release(&mut self, f: InFlight) {
        if let Buf::Arena { offset, len } = f.buf {
            self.arena.free(offset, len);
        }
    }

    /// The typed refusals of a NIC operation that need no connection: its
    /// range and alignment in the node's regions, and the port's largest
    /// message.
    fn check_transfer(&self, addr: RemoteAddr, len: u32, cas: bool) -> Result<(), FabricError> {
        self.book.resolve(addr, u64::from(len), cas)?;
        let max = self.node.info.limits.max_msg_sz;
        if max > 0 && len > max {
            return Err(FabricError::Transport(TransportError::MessageTooLarge {
                len,
                max,
            }));
        }
        Ok(())
    }

    /// The length of a WRITE of `data` at `addr`, as a work request
    /// carries it (at most `u32::MAX` bytes).
    fn write_len(addr: RemoteAddr, data: &[u8]) -> Result<u32, FabricError> {
        u32::try_from(data.len()).map_err(|_| FabricError::OutOfRange {
            node: addr.node,
            region: addr.region,
            offset: addr.offset,
            len: data.len() as u64,
            size: u64::from(u32::MAX),
        })
    }

    /// Accepts a NIC operation into its queue pair's next batch.
    #[allow(clippy::too_many_arguments)]
    fn nic(
        &mut self,
        id: OpId,
        addr: RemoteAddr,
        nic: NicOp,
        len: u32,
        data: Option<&[u8]>,
        cas: (u64, u64),
        (signal, accepted): (Signal, Instant),
    ) -> Result<u64, FabricError> {
        // Typed range/alignment errors first (no connection needed for them)...
        self.check_transfer(addr, len, nic == NicOp::Cas)?;
        self.ensure_up(addr.node)?;
        // ...then translate with what the node advertised on the connection we
        // post on: a re-dial (e.g. after the node restarted) replaces its
        // addresses and rkeys.
        let remote = self.book.resolve(addr, u64::from(len), nic == NicOp::Cas)?;
        let stores = self.book.get(addr.node).map_or(Endian::HOST, |p| p.stores);
        let (buf, _) = self.alloc(len)?;
        let f = InFlight {
            remote,
            compare: operand(cas.0, stores),
            swap: operand(cas.1, stores),
            stores,
            ..InFlight::new((id, addr.node, nic), (len, buf), (signal, accepted))
        };
        if let Some(data) = data {
            let ok = match &f.buf {
                Buf::Arena { offset, .. } => self.staging.write(*offset, data),
                Buf::Temp(mr) => mr.write(0, data),
            };
            if ok.is_none() {
                self.release(f);
                return Err(FabricError::Transport(TransportError::Staging));
            }
        }
        let wr_id = self.insert(f);
        let p = &mut self.peers[usize::from(addr.node.0)];
        p.backlog.push_back(wr_id);
        if !p.dirty {
            p.dirty = true;
            self.dirty.push(addr.node.0);
        }
        Ok(wr_id)
    }

    /// Hands `f`'s outcome to the caller if it is the caller's (see
    /// [`Signal`]) and releases its buffer.
    fn finish(
        &mut self,
        f: InFlight,
        result: Result<OpOutput, FabricError>,
        out: &mut Vec<Completion>,
    ) {
        match f.signal {
            Signal::Caller => out.push(Completion { id: f.id, result }),
            Signal::Unsignaled if result.is_err() => out.push(Completion { id: f.id, result }),
            Signal::Unsignaled => {}
            Signal::Probe => self.peers[usize::from(f.node.0)].probing = false,
        }
        self.release(f);
    }

    /// A request of the queue pair to peer `i` is done: it no longer counts
    /// against the send queue or the fences.
    fn account_done(&mut self, i: usize, nic: NicOp) {
        self.touch(i);
        let p = &mut self.peers[i];
        p.posted = p.posted.saturating_sub(1);
        match nic {
            NicOp::Read => p.out.reads = p.out.reads.saturating_sub(1),
            NicOp::Write => p.out.writes = p.out.writes.saturating_sub(1),
            NicOp::Cas => p.out.atomics = p.out.atomics.saturating_sub(1),
            NicOp::Bind => {}
        }
    }

    /// A completion of `wr_id` arrived on the queue pair to peer `i`: the
    /// unsignaled requests posted before it are done (an RC queue pair
    /// completes in posting order; one that had failed would have produced
    /// its own error completion first), successfully and silently.
    fn retire_before(&mut self, i: usize, wr_id: u64) {
        while let Some(&front) = self.peers[i].sent.front() {
            if front == wr_id || self.slot(front).is_none_or(|f| f.signaled) {
                return;
            }
            self.peers[i].sent.pop_front();
            if let Some(f) = self.take(front) {
                self.account_done(i, f.nic);
                self.release(f);
            }
        }
    }

    /// Accepts the probe that closes the run of unsignaled requests to
    /// `node`: a signaled 8-byte READ of its data region, nobody's.
    fn probe(&mut self, node: NodeId) {
        let i = usize::from(node.0);
        if self.peers[i].probing || self.peers[i].link != Link::Up {
            return;
        }
        let addr = RemoteAddr::data(node, 0);
        match self.nic(
            OpId(0),
            addr,
            NicOp::Read,
            8,
            None,
            (0, 0),
            (Signal::Probe, Instant::now()),
        ) {
            Ok(_) => self.peers[i].probing = true,
            Err(e) => tracing::debug!(%node, error = %e, "cannot probe"),
        }
    }

    /// Posts every peer's batch (one `ibv_post_send` per queue pair).
    fn ring(&mut self, out: &mut Vec<Completion>) {
        while let Some(n) = self.dirty.pop() {
            self.peers[usize::from(n)].dirty = false;
            self.drain_backlog(NodeId(n), out);
        }
    }

    /// Completes with an error, unposted, every request in the backlog of
    /// peer `i` whose window passed while it waited
    /// ([`crate::policy::backlog_verdict`]): never handed to the NIC, it
    /// never executes.
    fn expire_backlog(&mut self, i: usize, out: &mut Vec<Completion>) {
        let now = Instant::now();
        let timing = self.node.timing;
        let mut k = 0;
        while k < self.peers[i].backlog.len() {
            let wr_id = self.peers[i].backlog[k];
            let expired = self.slot(wr_id).is_some_and(|f| {
                backlog_verdict(f.accepted, window(f, &timing), now) == BacklogVerdict::Expired
            });
            if !expired {
                k += 1;
                continue;
            }
            self.peers[i].backlog.remove(k);
            if let Some(f) = self.take(wr_id) {
                let e = match f.nic {
                    NicOp::Read => FabricError::Timeout,
                    NicOp::Write | NicOp::Cas | NicOp::Bind => {
                        tracing::debug!(window = ?timing.landing_deadline, "not sent: its landing window passed");
                        FabricError::Transport(TransportError::LandingWindowPassed)
                    }
                };
                tracing::debug!(node = %f.node, id = f.id.0, "backlogged request expired unposted");
                self.finish(f, Err(e), out);
            }
        }
    }

    /// Posts the backlog of `node` while its send queue has room, as one chain.
    fn drain_backlog(&mut self, node: NodeId, out: &mut Vec<Completion>) {
        let i = usize::from(node.0);
        if self.peers[i].link != Link::Up {
            // Never posted, so never executed.
            while let Some(wr_id) = self.peers[i].backlog.pop_front() {
                if let Some(f) = self.take(wr_id) {
                    self.finish(f, Err(FabricError::NodeDown(node)), out);
                }
            }
            return;
        }
        self.expire_backlog(i, out);
        let room = self.send_depth.saturating_sub(self.peers[i].posted) as usize;
        let take = room.min(self.peers[i].backlog.len());
        if take == 0 {
            return;
        }
        let mut chain = std::mem::replace(&mut self.chain, Chain::new());
        chain.wrs.clear();
        chain.sges.clear();
        chain.ids.clear();
        chain.signaled.clear();
        let mut out_kinds = self.peers[i].out;
        let mut run = self.peers[i].unsignaled_run;
        let max_inline = self.peers[i].conn.as_ref().map_or(0, CmId::max_inline);
        for k in 0..take {
            let wr_id = self.peers[i].backlog[k];
            let Some(f) = self.slot(wr_id) else { continue };
            let local = self.slice_of(f);
            let fence = f.fenced || needs_fence(f.nic, out_kinds);
            let wr: SendWr = match f.nic {
                NicOp::Read => read_wr(wr_id, local, f.remote, fence),
                NicOp::Write => write_wr(wr_id, local, f.remote, fence).inline(max_inline),
                NicOp::Cas => cas_wr(
                    wr_id,
                    LocalSlice { len: 8, ..local },
                    f.remote,
                    f.compare,
                    f.swap,
                    fence,
                ),
                // Binds are posted at once (`bind_window`), never batched.
                NicOp::Bind => continue,
            };
            match f.nic {
                NicOp::Read => out_kinds.reads += 1,
                NicOp::Write => out_kinds.writes += 1,
                NicOp::Cas => out_kinds.atomics += 1,
                NicOp::Bind => {}
            }
            // Every k-th request of a run of unsignaled ones is signaled.
            let signaled = f.signal != Signal::Unsignaled
                || (!self.skip_signals && run + 1 >= self.signal_every);
            run = if signaled { 0 } else { run + 1 };
            let wr = wr.with_signal(signaled);
            chain.signaled.push(signaled);
            let mut sge = wr.sge();
            chain.sges.push(sge);
            chain.wrs.push(wr.raw(&mut sge));
            chain.ids.push(wr_id);
        }
        let count = chain.wrs.len();
        // Link the chain now that the vectors no longer move.
        for k in 0..count {
            chain.wrs[k].sg_list = &mut chain.sges[k];
            chain.wrs[k].next = if k + 1 < count {
                &mut chain.wrs[k + 1]
            } else {
                std::ptr::null_mut()
            };
        }
        let mut posted_count = 0;
        let mut err = None;
        if count > 0 {
            let qp = self.peers[i].conn.as_ref().map(CmId::qp);
            match qp {
                Some(qp) if !qp.is_null() => {
                    let mut bad: *mut ibv_send_wr = std::ptr::null_mut();
                    // SAFETY: the QP is live (owned by the peer's id); the
                    // chain and its scatter entries live until the call
                    // returns; every local slice lies in registered memory
                    // kept until the request completes.
                    let ret = unsafe { ibv_post_send(qp, chain.wrs.as_mut_ptr(), &mut bad) };
                    if ret == 0 {
                        posted_count = count;
                    } else {
                        posted_count = if bad.is_null() {
                            0
                        } else {
                            // SAFETY: `bad` points into `chain.wrs`.
                            (unsafe { bad.offset_from(chain.wrs.as_ptr()) })
                                .clamp(0, count as isize) as usize
                        };
                        err = Some(EndpointRefusal::Call {
                            call: "ibv_post_send",
                            node,
                            errno: ret.abs(),
                        });
                    }
                }
                _ => err = Some(EndpointRefusal::NoConnection(node)),
            }
        }
        let now = Instant::now();
        for (k, &wr_id) in chain.ids.iter().enumerate() {
            self.peers[i].backlog.pop_front();
            if k < posted_count {
                self.mark_posted(i, wr_id, chain.signaled[k], now);
            } else if let Some(f) = self.take(wr_id) {
                let e = FabricError::Transport(TransportError::Endpoint(
                    err.clone().unwrap_or(EndpointRefusal::NoConnection(node)),
                ));
                self.finish(f, Err(e), out);
            }
        }
        self.chain = chain;
        if !self.peers[i].backlog.is_empty() && self.peers[i].posted < self.send_depth {
            // Requests skipped above (none in practice) or room left: ring again later.
            let p = &mut self.peers[i];
            if !p.dirty {
                p.dirty = true;
                self.dirty.push(node.0);
            }
        }
    }

    /// Request `wr_id` was handed to the NIC on the queue pair to peer `i`
    /// at `now` (with `IBV_SEND_SIGNALED` or not): its deadline runs from
    /// the caller's post, and it counts against the send queue, the fences
    /// and the run of unsignaled requests.
    fn mark_posted(&mut self, i: usize, wr_id: u64, signaled: bool, now: Instant) {
        let timing = self.node.timing;
        let Some(f) = self.slot_mut(wr_id) else {
            return;
        };
        // Expired ones were taken out of the backlog before posting.
        let deadline = match backlog_verdict(f.accepted, window(f, &timing), now) {
            BacklogVerdict::Post { deadline } => deadline,
            BacklogVerdict::Expired => now,
        };
        f.deadline = Some(deadline);
        f.signaled = signaled;
        let nic = f.nic;
        self.touch(i);
        self.next_check = Some(self.next_check.map_or(deadline, |d| d.min(deadline)));
        let p = &mut self.peers[i];
        p.sent.push_back(wr_id);
        p.posted += 1;
        match nic {
            NicOp::Read => p.out.reads += 1,
            NicOp::Write => p.out.writes += 1,
            NicOp::Cas => p.out.atomics += 1,
            NicOp::Bind => {}
        }
        if signaled {
            p.unsignaled_run = 0;
            p.run_since = None;
        } else {
            p.unsignaled_run += 1;
            let since = *p.run_since.get_or_insert(now);
            let due = since + probe_after(&timing);
            self.next_check = Some(self.next_check.map_or(due, |d| d.min(due)));
        }
    }

    /// Moves the queue pair to `node` to the error state (its requests flush).
    fn fail(&mut self, node: NodeId, why: &str) {
        let i = usize::from(node.0);
        if self.peers[i].link != Link::Up {
            return;
        }
        crate::transport_stats::qp_failed();
        tracing::warn!(me = self.node.id.0, %node, why, "queue pair failed");
        self.touch(i);
        let p = &mut self.peers[i];
        p.link = Link::Failed;
        p.failed_at = Some(Instant::now());
        if let Some(c) = &p.conn {
            if let Err(e) = c.fail_qp() {
                tracing::warn!(%node, error = %e, "moving the queue pair to the error state");
            }
        }
        self.settle(node);
    }

    /// A failed queue pair with nothing left in flight is released: the node
    /// is dialled again on the next post.
    fn settle(&mut self, node: NodeId) {
        let i = usize::from(node.0);
        self.touch(i);
        let p = &mut self.peers[i];
        if p.link == Link::Failed && p.posted == 0 {
            // The watchdog lets go of the queue pair before it is destroyed.
            self.watch.set_qp(i, None);
            p.conn = None;
            p.link = Link::Down;
            p.reset_run();
            p.failed_at = None;
            p.retry_at = Instant::now();
            if !p.backlog.is_empty() && !p.dirty {
                p.dirty = true;
                self.dirty.push(node.0);
            }
        }
    }

    /// Peer `i`'s earliest deadline must be published again.
    fn touch(&mut self, i: usize) {
        let p = &mut self.peers[i];
        if !p.watch_dirty {
            p.watch_dirty = true;
            self.watch_touched.push(i as u16);
        }
    }

    /// Tells the watchdog the earliest deadline of the caller's requests
    /// outstanding on each queue pair that changed (see
    /// [`crate::watchdog`]; unsignaled requests and probes are not
    /// watched, and neither are requests already expired).
    fn publish_deadlines(&mut self) {
        while let Some(n) = self.watch_touched.pop() {
            let i = usize::from(n);
            self.peers[i].watch_dirty = false;
            let earliest = if self.peers[i].link == Link::Up {
                self.peers[i]
                    .sent
                    .iter()
                    .filter_map(|&w| self.slot(w))
                    .filter(|f| f.signal == Signal::Caller && !f.expired)
                    .filter_map(|f| f.deadline)
                    .min()
            } else {
                None
            };
            self.watch.publish(i, earliest);
        }
    }

    /// Takes in the queue pairs the watchdog moved to the error state: the
    /// caller's requests whose deadline had passed by then complete with the
    /// expired-deadline error (their outcome unknown), whether their
    /// completion is the trip's flush or a success that came in between,
    /// and the queue pair fails as after any error.
    fn take_watchdog_trips(&mut self) {
        for (i, at) in self.watch.take_trips() {
            for k in 0..self.peers[i].sent.len() {
                let wr_id = self.peers[i].sent[k];
                if let Some(f) = self.slot_mut(wr_id) {
                    if f.signal == Signal::Caller && f.deadline.is_some_and(|d| d <= at) {
                        f.expired = true;
                    }
                }
            }
            self.fail(
                NodeId(i as u16),
                "the watchdog failed it: a request passed its deadline",
            );
        }
    }

    /// Test-only fault switch: when `on` is false the process's watchdog
    /// leaves this endpoint alone, so deadlines are enforced only when it is
    /// polled (as before the watchdog). For showing that a test catches it.
    #[doc(hidden)]
    pub fn set_watchdog(&mut self, on: bool) {
        self.watch.set_enabled(on);
    }

    /// The error of a request whose deadline passed.
    fn expired_error(&self, f: &InFlight) -> FabricError {
        let t = &self.node.timing;
        match f.nic {
            NicOp::Read => FabricError::Timeout,
            NicOp::Write | NicOp::Cas | NicOp::Bind => {
                tracing::debug!(node = %f.node, deadline = ?t.landing_deadline, nic = ?f.nic, "no completion within the landing deadline");
                FabricError::Transport(TransportError::LandingDeadline)
            }
        }
    }

    /// Fails the queue pairs of requests past their deadline, and abandons
    /// failed queue pairs whose flushes do not come.
    fn check_deadlines(&mut self, now: Instant, out: &mut Vec<Completion>) {
        if self.next_check.is_none_or(|d| now < d) {
            return;
        }
        let mut next: Option<Instant> = None;
        let landing = self.node.timing.landing_deadline;
        let lenient = !self.skip_signals;
        for n in 0..self.peers.len() {
            let mut expire = false;
            let mut late = false;
            // The trailing run: unsignaled requests with no signaled one
            // posted after them, whose completion nothing has asked for yet.
            let tail = self.peers[n]
                .sent
                .iter()
                .rposition(|&w| self.slot(w).is_none_or(|f| f.signaled))
                .map_or(0, |k| k + 1);
            for k in 0..self.peers[n].sent.len() {
                let wr_id = self.peers[n].sent[k];
                let Some(f) = self.slot_mut(wr_id) else {
                    continue;
                };
                match f.deadline {
                    Some(d) if d <= now && !f.expired => {
                        if lenient && k >= tail && !f.extended {
                            // The endpoint was not polled in time to probe
                            // (its thread was off the CPU): probe now and
                            // give the probe one landing deadline.
                            f.extended = true;
                            f.deadline = Some(now + landing);
                            late = true;
                            next = Some(next.map_or(now + landing, |x| x.min(now + landing)));
                        } else {
                            f.expired = true;
                            expire = true;
                        }
                    }
                    Some(d) if !f.expired => next = Some(next.map_or(d, |x| x.min(d))),
                    _ => {}
                }
            }
            let node = NodeId(n as u16);
            if expire {
                self.fail(node, "a request passed its deadline");
            } else if late {
                tracing::debug!(%node, "unsignaled requests past their deadline unasked: probing");
                self.probe(node);
            }
            if let Some(since) = self.peers[n].run_since.filter(|_| !self.skip_signals) {
                let due = since + probe_after(&self.node.timing);
                if due <= now {
                    self.probe(node);
                } else {
                    next = Some(next.map_or(due, |x| x.min(due)));
                }
            }
            let p = &self.peers[n];
            if p.link == Link::Failed && p.posted > 0 {
                let since = p.failed_at.unwrap_or(now);
                if now.duration_since(since) >= FLUSH_GRACE {
                    self.abandon(node, out);
                } else {
                    let d = since + FLUSH_GRACE;
                    next = Some(next.map_or(d, |x| x.min(d)));
                }
            }
        }
        self.next_check = next;
    }

    /// Destroys the failed queue pair to `node` whose flushed completions did
    /// not come, completing its requests with errors (the NIC no longer
    /// touches their buffers once the QP is gone).
    fn abandon(&mut self, node: NodeId, out: &mut Vec<Completion>) {
        let i = usize::from(node.0);
        tracing::warn!(%node, "no flushed completions within {FLUSH_GRACE:?}: destroying the queue pair");
        self.watch.set_qp(i, None);
        self.peers[i].conn = None;
        while let Some(wr_id) = self.peers[i].sent.pop_front() {
            if let Some(f) = self.take(wr_id) {
                let err = if f.expired {
                    self.expired_error(&f)
                } else {
                    FabricError::Transport(TransportError::QueuePairFailed)
                };
                self.finish(f, Err(err), out);
            }
        }
        self.peers[i].posted = 0;
        self.settle(node);
    }

    /// Reads the `rdma_cm` events of the connections: a peer that
    /// disconnected or became unreachable fails its queue pair at once.
    fn check_events(&mut self, now: Instant) {
        if now < self.next_events {
            return;
        }
        self.next_events = now + EVENT_CHECK_INTERVAL;
        loop {
            let ev = match self.events.next(Duration::ZERO) {
                Ok(Some(ev)) => ev,
                Ok(None) => return,
                Err(e) => {
                    tracing::warn!(error = %e, "rdma_cm events");
                    return;
                }
            };
            let broken = matches!(
                ev.kind,
                Ev::RDMA_CM_EVENT_DISCONNECTED
                    | Ev::RDMA_CM_EVENT_UNREACHABLE
                    | Ev::RDMA_CM_EVENT_CONNECT_ERROR
                    | Ev::RDMA_CM_EVENT_DEVICE_REMOVAL
                    | Ev::RDMA_CM_EVENT_REJECTED
            );
            if !broken {
                continue;
            }
            let Some(n) = self
                .peers
                .iter()
                .position(|p| p.conn.as_ref().is_some_and(|c| c.is(ev.id)))
            else {
                continue;
            };
            self.fail(NodeId(n as u16), "rdma_cm reported the connection lost");
        }
    }

    /// Turns one work completion into the protocol's completion.
    fn complete(&mut self, wc: Wc, out: &mut Vec<Completion>) {
        let Some(f) = self.take(wc.wr_id) else {
            // A request of an abandoned queue pair, already completed.
            return;
        };
        let node = f.node;
        let i = usize::from(node.0);
        self.retire_before(i, wc.wr_id);
        let p = &mut self.peers[i];
        if p.sent.front() == Some(&wc.wr_id) {
            p.sent.pop_front();
        } else if let Some(k) = p.sent.iter().position(|&w| w == wc.wr_id) {
            p.sent.remove(k);
        }
        self.account_done(i, f.nic);
        let result = if f.expired {
            Err(self.expired_error(&f))
        } else {
            match map_status(wc.status, wc.vendor_err, node) {
                Ok(()) => match f.nic {
                    NicOp::Read => self
                        .read_buf(&f, f.len as usize)
                        .map(OpOutput::Read)
                        .ok_or(FabricError::Transport(TransportError::Staging)),
                    NicOp::Write => Ok(OpOutput::Written),
                    NicOp::Bind => f
                        .window
                        .map(|(_, key)| OpOutput::Bound { key })
                        .ok_or(FabricError::Transport(TransportError::Staging)),
                    NicOp::Cas => self
                        .read_buf(&f, 8)
                        .map(|b| {
                            let mut w = [0u8; 8];
                            w.copy_from_slice(&b);
                            OpOutput::Cas {
                                previous: previous(w, self.node.atomic_order().returns, f.stores),
                            }
                        })
                        .ok_or(FabricError::Transport(TransportError::Staging)),
                },
                Err(e) => {
                    // The provider moved the QP to the error state.
                    self.fail(node, "an error completion");
                    match f.window {
                        // The responder refused the window's rkey: bound
                        // again since (or never), or not covering the range.
                        Some((window, key))
                            if f.nic != NicOp::Bind
                                && wc.status == rdma_sys::ibv_wc_status::IBV_WC_REM_ACCESS_ERR =>
                        {
                            Err(FabricError::WindowRefused { window, key })
                        }
                        _ => Err(e),
                    }
                }
            }
        };
        self.finish(f, result, out);
        self.settle(node);
        let p = &mut self.peers[i];
        if !p.backlog.is_empty() && !p.dirty {
            p.dirty = true;
            self.dirty.push(node.0);
        }
    }

    fn local(
        &mut self,
        id: OpId,
        offset: u64,
        len: u64,
        data: Option<Vec<u8>>,
        signal: Signal,
    ) -> Result<(), FabricError> {
        if !self.node.hosted {
            return Err(FabricError::Transport(TransportError::Endpoint(
                EndpointRefusal::NoLocalRegion,
            )));
        }
        let region = &self.node.data;
        check_range(self.node.id, Region::Data, offset, len, region.len())?;
        let result = match data {
            None => region.read(offset, len as usize).map(OpOutput::Read),
            Some(d) => region.write(offset, &d).map(|()| OpOutput::Written),
        }
        .ok_or(FabricError::OutOfRange {
            node: self.node.id,
            region: Region::Data,
            offset,
            len,
            size: region.len(),
        })?;
        if signal == Signal::Caller {
            self.ready.push_back(Completion {
                id,
                result: Ok(result),
            });
        }
        Ok(())
    }

    /// Accepts `wr` for `signal`.
    /// The instant the protocol issued a request at its clock reading
    /// `issued` (this endpoint's [`NodeClock`]): as long before now as the
    /// reading is before the clock's now (never after now).
    fn issued_instant(&self, issued: Nanos) -> Instant {
        let now = Instant::now();
        let age = self.clock.now().0.saturating_sub(issued.0);
        now.checked_sub(Duration::from_nanos(age)).unwrap_or(now)
    }

    /// Accepts `wr`, issued by the protocol at `issued`: its deadline (a
    /// NIC operation's) counts from then.
    fn accept(
        &mut self,
        wr: WorkRequest,
        signal: Signal,
        issued: Instant,
    ) -> Result<(), FabricError> {
        let posting = (signal, issued);
        match wr.op {
            Op::Read { addr, len } => self
                .nic(wr.id, addr, NicOp::Read, len, None, (0, 0), posting)
                .map(drop),
            Op::Write { addr, data } => {
                let len = Self::write_len(addr, &data)?;
                self.nic(wr.id, addr, NicOp::Write, len, Some(&data), (0, 0), posting)
                    .map(drop)
            }
            Op::Cas { addr, expect, new } => self
                .nic(wr.id, addr, NicOp::Cas, 8, None, (expect, new), posting)
                .map(drop),
            Op::LocalRead { offset, len } => {
                self.local(wr.id, offset, u64::from(len), None, signal)
            }
            Op::LocalWrite { offset, data } => {
                let len = data.len() as u64;
                self.local(wr.id, offset, len, Some(data), signal)
            }
            Op::Windowed { window, key, op } => self.windowed(wr.id, (window, key), *op, posting),
            Op::BindWindow { index, offset, len } => {
                self.bind_window(wr.id, index, (offset, len), posting)
            }
        }
    }

    /// Requests accepted (posted or waiting for the doorbell) and not yet completed.
    pub fn in_flight(&self) -> usize {
        self.in_use
    }
}

impl Drop for VerbsEndpoint {
    fn drop(&mut self) {
        // The watchdog lets go of every queue pair before they are destroyed
        // (it may hold this endpoint's watch a moment longer).
        for i in 0..self.peers.len() {
            self.watch.set_qp(i, None);
        }
    }
}

impl Endpoint for VerbsEndpoint {
    fn node(&self) -> NodeId {
        self.me
    }

    /// Claims `id` in this process's registry of the node's clients
    /// (`NodeShared::claims`), under the process's registry name.
    fn claim_client(&self, id: ClientId) -> Option<ClientClaim> {
        self.node.claims.claim(id)
    }

    fn post(&mut self, wr: WorkRequest) -> Result<(), FabricError> {
        self.accept(wr, Signal::Caller, Instant::now())
    }

    /// Posted without `IBV_SEND_SIGNALED` (every k-th of a run signaled for
    /// the send queue's sake, its completion swallowed); see the module
    /// documentation.
    fn post_unsignaled(&mut self, wr: WorkRequest) -> Result<(), FabricError> {
        self.accept(wr, Signal::Unsignaled, Instant::now())
    }

    /// Its deadline counts from `issued`, the protocol's clock reading.
    fn post_issued(&mut self, wr: WorkRequest, issued: Nanos) -> Result<(), FabricError> {
        let at = self.issued_instant(issued);
        self.accept(wr, Signal::Caller, at)
    }

    fn post_unsignaled_issued(
        &mut self,
        wr: WorkRequest,
        issued: Nanos,
    ) -> Result<(), FabricError> {
        let at = self.issued_instant(issued);
        self.accept(wr, Signal::Unsignaled, at)
    }

    /// Requests of one round to a node already go in posting order on its
    /// queue pair, with the fences the policy asks for (module
    /// documentation); a chain adds `IBV_SEND_FENCE` on its fenced links.
    /// It is checked whole first (one remote node, ranges, message sizes),
    /// so a refusal posted nothing; a request that cannot be accepted after
    /// that (staging buffers) completes with its error, and those behind it
    /// are flushed, as the queue pair would flush them.
    fn post_chain(
        &mut self,
        chain: Vec<(WorkRequest, ChainLink)>,
        issued: Nanos,
    ) -> Result<(), FabricError> {
        let node = nessie_protocol::chain_node(&chain)?;
        // Every request of a chain is remote (`chain_node`): the checks
        // `nic` makes before it accepts one, for all of them first.
        for (wr, _) in &chain {
            let (addr, len, cas) = match wr.op.unwindowed() {
                Op::Read { addr, len } => (*addr, *len, false),
                Op::Write { addr, data } => (*addr, Self::write_len(*addr, data)?, false),
                Op::Cas { addr, .. } => (*addr, 8, true),
                Op::LocalRead { .. } | Op::LocalWrite { .. } | Op::BindWindow { .. } => continue,
                Op::Windowed { .. } => continue,
            };
            self.check_transfer(addr, len, cas)?;
        }
        let at = self.issued_instant(issued);
        let mut failed = false;
        for (k, (wr, link)) in chain.into_iter().enumerate() {
            let id = wr.id;
            if failed {
                self.ready.push_back(Completion {
                    id,
                    result: Err(FabricError::Transport(TransportError::Flushed)),
                });
                continue;
            }
            match self.accept(wr, Signal::Caller, at) {
                Ok(()) if k > 0 && link == ChainLink::Fenced => {
                    let node = node.map_or(0, |n| usize::from(n.0));
                    if let Some(&wr_id) = self.peers[node].backlog.back() {
                        if let Some(f) = self.slot_mut(wr_id) {
                            f.fenced = true;
                        }
                    }
                }
                Ok(()) => {}
                Err(e) => {
                    failed = true;
                    self.ready.push_back(Completion { id, result: Err(e) });
                }
            }
        }
        Ok(())
    }

    fn poll(&mut self, out: &mut Vec<Completion>) {
        out.extend(self.ready.drain(..));
        let now = Instant::now();
        while let Ok(d) = self.done_rx.try_recv() {
            self.apply_dial(d);
        }
        self.check_events(now);
        // Before posting (nothing more goes to a tripped queue pair) and
        // before the completion queue (the flushes the trip produced then
        // carry the expired-deadline error, outcome unknown, and so does a
        // success that came after the request's deadline).
        self.take_watchdog_trips();
        self.ring(out);
        if self.in_use == 0 {
            self.publish_deadlines();
            return;
        }
        loop {
            let mut wcs = std::mem::take(&mut self.wcs);
            wcs.clear();
            let n = match self.cq.poll(&mut wcs) {
                Ok(n) => n,
                Err(e) => {
                    tracing::error!(error = %e, "ibv_poll_cq");
                    0
                }
            };
            for wc in wcs.drain(..) {
                self.complete(wc, out);
            }
            self.wcs = wcs;
            if n < 32 {
                break;
            }
        }
        self.check_deadlines(now, out);
        self.ring(out);
        self.publish_deadlines();
    }

    fn wait(&mut self, out: &mut Vec<Completion>, timeout: Duration) {
        let start = Instant::now();
        let before = out.len();
        let mut spins = 0u32;
        loop {
            self.poll(out);
            if out.len() > before || self.in_use == 0 || start.elapsed() >= timeout {
                return;
            }
            // Busy-poll briefly (completions arrive within microseconds), then
            // yield, then sleep a little (a loaded or emulated machine needs
            // the CPU for the completions to arrive at all).
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else if spins < 512 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(20));
            }
        }
    }

    fn now(&self) -> Nanos {
        self.clock.now()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redials_of_a_node_that_stays_down_back_off() {
        assert_eq!(redial_interval(0), Duration::from_millis(200));
        assert_eq!(redial_interval(1), Duration::from_millis(400));
        assert_eq!(redial_interval(3), Duration::from_millis(1600));
        assert_eq!(redial_interval(5), REDIAL_MAX_INTERVAL);
        assert_eq!(redial_interval(u32::MAX), REDIAL_MAX_INTERVAL);
        assert!(PERMANENT_HOLD_OFF >= Duration::from_secs(30));
    }
}

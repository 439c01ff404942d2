//! [`VerbsEndpoint`]: one client's connection to the cluster.
//!
//! Each endpoint owns its completion queue, an `rdma_cm` event channel, a
//! registered staging buffer and one RC queue pair to every node, its own
//! node included (the loopback QP through which even local index entries are
//! CASed). Nothing is shared between endpoints, so no locks sit on the
//! posting path; each client thread owns one endpoint.
//!
//! Posting: the address is checked and translated ([`crate::remote`]), a
//! staging slice is reserved (WRITE data copied in), CAS operands are put in
//! the responder's atomic byte order, and the request is posted with a fence
//! where [`crate::policy::needs_fence`] asks for one. A full send queue
//! queues requests in a per-peer backlog. Polling maps each `ibv_wc` back to
//! the protocol's [`Completion`] (READ bytes copied out, CAS previous value
//! normalised, errors typed by [`crate::status::map_status`]).
//!
//! After an error completion the QP is in the error state: its remaining
//! requests flush, and once drained the next request to that node dials it
//! again (at most every 200 ms; meanwhile posts fail with `NodeDown`).
//!
//! `LocalRead`/`LocalWrite` are CPU copies of the node's own data region
//! (word-wise atomics) and complete at once.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nessie_protocol::{
    Completion, Endpoint, FabricError, Nanos, NodeId, Op, OpId, OpOutput, Region, RemoteAddr,
    WorkRequest,
};

use crate::byteorder::{operand, previous, Endian};
use crate::clock::NodeClock;
use crate::connect::{dial, post, Dial};
use crate::error::VerbsError;
use crate::ffi::cm::{CmId, EventChannel};
use crate::ffi::cq::{Cq, Wc};
use crate::ffi::memory::Mr;
use crate::node::NodeShared;
use crate::policy::{effective_send_depth, needs_fence, NicOp, Outstanding, RegionKind};
use crate::remote::{check_range, AddressBook};
use crate::staging::Arena;
use crate::status::map_status;
use crate::wire::{Hello, WireError};
use crate::wr::{cas_wr, read_wr, write_wr, LocalSlice, RemoteSlice, SendWr};

/// How soon a failed node is dialled again (doubling after each failed
/// re-dial, up to [`REDIAL_MAX_INTERVAL`]).
const REDIAL_INTERVAL: Duration = Duration::from_millis(200);
/// The longest wait between re-dials of a node that stays down.
const REDIAL_MAX_INTERVAL: Duration = Duration::from_secs(5);
/// How long a re-dial may take.
const REDIAL_TIMEOUT: Duration = Duration::from_secs(1);

/// The queue pair to one node and what is in flight on it.
struct Peer {
    conn: Option<CmId>,
    posted: u32,
    out: Outstanding,
    backlog: VecDeque<u64>,
    broken: bool,
    last_dial: Option<Instant>,
    /// Re-dials that failed in a row (backs the next one off).
    dial_failures: u32,
}

/// How long after a re-dial attempt the next may start, given how many
/// re-dials of the node failed in a row. A re-dial blocks the posting client
/// for up to `REDIAL_TIMEOUT`, so a node that stays down must not be
/// re-dialled at a fixed short interval (that would stall the client's
/// operations on every other node most of the time).
pub fn redial_interval(failures: u32) -> Duration {
    REDIAL_INTERVAL
        .saturating_mul(1u32 << failures.min(16))
        .min(REDIAL_MAX_INTERVAL)
}

/// Where a request's local bytes live.
enum Buf {
    /// A slice of the staging arena.
    Arena { offset: u64, len: u64 },
    /// A temporary registration (the arena was full).
    Temp(Mr),
}

/// A request posted or backlogged.
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
}

/// A client's endpoint on the verbs fabric. Field order is drop order: the
/// queue pairs go before the buffers they reference, the CQ and channel last.
pub struct VerbsEndpoint {
    peers: Vec<Peer>,
    inflight: HashMap<u64, InFlight>,
    staging: Mr,
    arena: Arena,
    cq: Arc<Cq>,
    channel: Arc<EventChannel>,
    node: Arc<NodeShared>,
    book: AddressBook,
    ready: VecDeque<Completion>,
    wcs: Vec<Wc>,
    next_wr: u64,
    send_depth: u32,
    clock: NodeClock,
}

impl VerbsEndpoint {
    /// Opens an endpoint on `node`: dials every node of the cluster (its own
    /// included), waiting up to the cluster file's `connect_timeout_ms` for
    /// nodes that are not up yet.
    pub fn open(node: Arc<NodeShared>) -> Result<VerbsEndpoint, VerbsError> {
        let n = node.cluster.topology().nodes;
        let plan = node.plan;
        let send_depth = effective_send_depth(&plan, n);
        let cq = Cq::new(&node.ctx, plan.cq_entries)?;
        let channel = EventChannel::new()?;
        let staging = Mr::alloc(
            &node.pd,
            node.cluster.tuning.staging_bytes,
            RegionKind::Staging,
        )?;
        let arena = Arena::new(staging.len());
        let mut ep = VerbsEndpoint {
            peers: Vec::new(),
            inflight: HashMap::new(),
            staging,
            arena,
            cq,
            channel,
            book: AddressBook::new(n),
            ready: VecDeque::new(),
            wcs: Vec::new(),
            next_wr: 1,
            send_depth,
            clock: node.clock,
            node,
        };
        let timeout = Duration::from_millis(ep.node.cluster.tuning.connect_timeout_ms);
        for target in 0..n {
            let id = ep.dial(NodeId(target), timeout)?;
            ep.peers.push(Peer {
                conn: Some(id),
                posted: 0,
                out: Outstanding::default(),
                backlog: VecDeque::new(),
                broken: false,
                last_dial: None,
                dial_failures: 0,
            });
        }
        Ok(ep)
    }

    /// Dials `target` and records its regions.
    fn dial(&mut self, target: NodeId, timeout: Duration) -> Result<CmId, VerbsError> {
        let node = &self.node;
        let dst = node.cluster.addr(target)?;
        let dialed = dial(&Dial {
            channel: &self.channel,
            pd: &node.pd,
            cq: &self.cq,
            plan: &node.plan,
            send_depth: self.send_depth,
            src: node.addr,
            dst,
            port: node.cluster.port,
            hello: Hello {
                from: node.id.0,
                to: target.0,
                probe: false,
                fingerprint: node.cluster.fingerprint(),
            },
            fingerprint: node.cluster.fingerprint(),
            timeout,
        })?;
        let peer = format!("{target} at {dst}");
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
    }

    /// Makes sure the QP to `node` is usable, re-dialling a failed one once drained.
    fn ensure_connected(&mut self, node: NodeId) -> Result<(), FabricError> {
        let p = &mut self.peers[usize::from(node.0)];
        if p.conn.is_some() && !p.broken {
            return Ok(());
        }
        let wait = redial_interval(p.dial_failures);
        if p.posted > 0 || p.last_dial.is_some_and(|t| t.elapsed() < wait) {
            return Err(FabricError::NodeDown(node));
        }
        p.last_dial = Some(Instant::now());
        p.conn = None;
        match self.dial(node, REDIAL_TIMEOUT) {
            Ok(id) => {
                let p = &mut self.peers[usize::from(node.0)];
                p.conn = Some(id);
                p.broken = false;
                p.out = Outstanding::default();
                p.dial_failures = 0;
                Ok(())
            }
            Err(e) => {
                tracing::debug!(%node, error = %e, "re-dial failed");
                let p = &mut self.peers[usize::from(node.0)];
                p.broken = true;
                p.dial_failures = p.dial_failures.saturating_add(1);
                Err(FabricError::NodeDown(node))
            }
        }
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
            FabricError::Transport(format!(
                "staging buffer exhausted and a temporary one failed: {e}"
            ))
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

    /// Queues a NIC operation for posting.
    fn nic(
        &mut self,
        id: OpId,
        addr: RemoteAddr,
        nic: NicOp,
        len: u32,
        data: Option<&[u8]>,
        cas: (u64, u64),
    ) -> Result<(), FabricError> {
        // Typed range/alignment errors first (no connection needed for them)...
        self.book.resolve(addr, u64::from(len), nic == NicOp::Cas)?;
        let max = self.node.info.limits.max_msg_sz;
        if max > 0 && len > max {
            return Err(FabricError::Transport(format!(
                "a transfer of {len} bytes exceeds the port's largest message ({max})"
            )));
        }
        self.ensure_connected(addr.node)?;
        // ...then translate with what the node advertised on the connection we
        // post on: a re-dial (e.g. after the node restarted) replaces its
        // addresses and rkeys, and the stale ones would fail the new QP with
        // IBV_WC_REM_ACCESS_ERR (or, if reused, hit the wrong memory).
        let remote = self.book.resolve(addr, u64::from(len), nic == NicOp::Cas)?;
        let stores = self.book.get(addr.node).map_or(Endian::HOST, |p| p.stores);
        let (buf, _) = self.alloc(len)?;
        let f = InFlight {
            id,
            node: addr.node,
            nic,
            len,
            buf,
            remote,
            compare: operand(cas.0, stores),
            swap: operand(cas.1, stores),
            stores,
        };
        if let Some(data) = data {
            let ok = match &f.buf {
                Buf::Arena { offset, .. } => self.staging.write(*offset, data),
                Buf::Temp(mr) => mr.write(0, data),
            };
            if ok.is_none() {
                self.release(f);
                return Err(FabricError::Transport("staging copy out of range".into()));
            }
        }
        let wr_id = self.next_wr;
        self.next_wr += 1;
        self.inflight.insert(wr_id, f);
        let p = &self.peers[usize::from(addr.node.0)];
        if p.posted < self.send_depth && p.backlog.is_empty() {
            if let Err(e) = self.post_now(wr_id) {
                if let Some(f) = self.inflight.remove(&wr_id) {
                    self.release(f);
                }
                return Err(e);
            }
        } else {
            self.peers[usize::from(addr.node.0)]
                .backlog
                .push_back(wr_id);
        }
        Ok(())
    }

    /// Posts the in-flight request `wr_id` on its peer's QP.
    fn post_now(&mut self, wr_id: u64) -> Result<(), FabricError> {
        let f = self
            .inflight
            .get(&wr_id)
            .ok_or_else(|| FabricError::Transport("lost request".into()))?;
        let node = f.node;
        let local = self.slice_of(f);
        let p = &self.peers[usize::from(node.0)];
        let fence = needs_fence(f.nic, p.out);
        let wr: SendWr = match f.nic {
            NicOp::Read => read_wr(wr_id, local, f.remote, fence),
            NicOp::Write => write_wr(wr_id, local, f.remote, fence),
            NicOp::Cas => cas_wr(
                wr_id,
                LocalSlice { len: 8, ..local },
                f.remote,
                f.compare,
                f.swap,
                fence,
            ),
        };
        let nic = f.nic;
        let conn = p.conn.as_ref().ok_or(FabricError::NodeDown(node))?;
        post(conn, &wr).map_err(|ret| {
            FabricError::Transport(format!(
                "ibv_post_send to {node}: {}",
                std::io::Error::from_raw_os_error(ret)
            ))
        })?;
        let p = &mut self.peers[usize::from(node.0)];
        p.posted += 1;
        match nic {
            NicOp::Read => p.out.reads += 1,
            NicOp::Write => p.out.writes += 1,
            NicOp::Cas => p.out.atomics += 1,
        }
        Ok(())
    }

    /// Turns one work completion into the protocol's completion.
    fn complete(&mut self, wc: Wc, out: &mut Vec<Completion>) {
        let Some(f) = self.inflight.remove(&wc.wr_id) else {
            tracing::warn!(wr_id = wc.wr_id, "completion of an unknown request");
            return;
        };
        let node = f.node;
        let p = &mut self.peers[usize::from(node.0)];
        p.posted = p.posted.saturating_sub(1);
        match f.nic {
            NicOp::Read => p.out.reads = p.out.reads.saturating_sub(1),
            NicOp::Write => p.out.writes = p.out.writes.saturating_sub(1),
            NicOp::Cas => p.out.atomics = p.out.atomics.saturating_sub(1),
        }
        let result = match map_status(wc.status, wc.vendor_err, node) {
            Ok(()) => match f.nic {
                NicOp::Read => self
                    .read_buf(&f, f.len as usize)
                    .map(OpOutput::Read)
                    .ok_or_else(|| FabricError::Transport("staging read out of range".into())),
                NicOp::Write => Ok(OpOutput::Written),
                NicOp::Cas => self
                    .read_buf(&f, 8)
                    .map(|b| {
                        let mut w = [0u8; 8];
                        w.copy_from_slice(&b);
                        OpOutput::Cas {
                            previous: previous(w, self.node.atomic_order().returns, f.stores),
                        }
                    })
                    .ok_or_else(|| FabricError::Transport("staging read out of range".into())),
            },
            Err(e) => {
                self.peers[usize::from(node.0)].broken = true;
                Err(e)
            }
        };
        out.push(Completion { id: f.id, result });
        self.release(f);
        self.drain_backlog(node, out);
    }

    /// Posts backlogged requests of `node` while its send queue has room.
    fn drain_backlog(&mut self, node: NodeId, out: &mut Vec<Completion>) {
        loop {
            let p = &mut self.peers[usize::from(node.0)];
            if p.posted >= self.send_depth {
                return;
            }
            let Some(wr_id) = p.backlog.pop_front() else {
                return;
            };
            let err = if p.broken {
                Some(FabricError::Transport(format!(
                    "flushed: the queue pair to {node} failed before this request was posted"
                )))
            } else {
                self.post_now(wr_id).err()
            };
            if let Some(e) = err {
                if let Some(f) = self.inflight.remove(&wr_id) {
                    out.push(Completion {
                        id: f.id,
                        result: Err(e),
                    });
                    self.release(f);
                }
            }
        }
    }

    fn local(
        &mut self,
        id: OpId,
        offset: u64,
        len: u64,
        data: Option<Vec<u8>>,
    ) -> Result<(), FabricError> {
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
        self.ready.push_back(Completion {
            id,
            result: Ok(result),
        });
        Ok(())
    }

    /// Requests posted or backlogged and not yet completed.
    pub fn in_flight(&self) -> usize {
        self.inflight.len()
    }
}

impl Endpoint for VerbsEndpoint {
    fn node(&self) -> NodeId {
        self.node.id
    }

    fn post(&mut self, wr: WorkRequest) -> Result<(), FabricError> {
        match wr.op {
            Op::Read { addr, len } => self.nic(wr.id, addr, NicOp::Read, len, None, (0, 0)),
            Op::Write { addr, data } => {
                let len = u32::try_from(data.len()).map_err(|_| FabricError::OutOfRange {
                    node: addr.node,
                    region: addr.region,
                    offset: addr.offset,
                    len: data.len() as u64,
                    size: u64::from(u32::MAX),
                })?;
                self.nic(wr.id, addr, NicOp::Write, len, Some(&data), (0, 0))
            }
            Op::Cas { addr, expect, new } => {
                self.nic(wr.id, addr, NicOp::Cas, 8, None, (expect, new))
            }
            Op::LocalRead { offset, len } => self.local(wr.id, offset, u64::from(len), None),
            Op::LocalWrite { offset, data } => {
                let len = data.len() as u64;
                self.local(wr.id, offset, len, Some(data))
            }
        }
    }

    fn poll(&mut self, out: &mut Vec<Completion>) {
        out.extend(self.ready.drain(..));
        if self.inflight.is_empty() {
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
                return;
            }
        }
    }

    fn wait(&mut self, out: &mut Vec<Completion>, timeout: Duration) {
        let start = Instant::now();
        let before = out.len();
        let mut spins = 0u32;
        loop {
            self.poll(out);
            if out.len() > before || self.inflight.is_empty() || start.elapsed() >= timeout {
                return;
            }
            // Busy-poll briefly (completions arrive within microseconds), then yield.
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
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
        // A blocked re-dial then costs at most REDIAL_TIMEOUT per interval.
        assert!(redial_interval(10) > REDIAL_TIMEOUT);
    }
}

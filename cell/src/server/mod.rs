//! Cell's servers: the state one server node keeps ([`ServerNode`]: the
//! meganodes it holds, their allocators and write gates, its node locks),
//! and [`Srv`], the context its sans-IO logic runs in (node and extent I/O
//! on the node's own memory by CPU, on other servers' memory by RDMA READ).
//!
//! - [`tree`]: Sagiv's search, insert and delete within and across the
//!   meganodes a server holds, node splits, range scans.
//! - [`split`]: meganode splits (§2.2) and the requests they send to other
//!   servers (copy, new root, parent entry, open).
//! - [`runtime`]: server workers on `nessie-exec`'s request slots and the
//!   per-node maintenance thread that runs meganode splits.
//! - [`alloc`]: node pools, extent heaps and write gates.

pub mod alloc;
pub mod runtime;
pub mod split;
pub mod tree;

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock};
use std::time::Duration;

use nessie_protocol::{CorruptionKind, Error, NodeId, Op, RemoteAddr};

use crate::config::{CellConfig, Layout, ROOT_WORD_OFFSET};
use crate::directory::RegionTable;
use crate::log::{LogRecord, LogSink};
use crate::machine::{read_bytes, written, Io, OpClass};
use crate::node::Node;
use crate::ptr::{ExtentPtr, NodePtr, RegionId, ROOT_REGION};
use crate::region::RegionInfo;
use alloc::{Gate, GateMode, Heap, NodePool};

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The allocators of a hosted meganode.
#[derive(Debug)]
pub struct RegionAlloc {
    /// Its node pool.
    pub nodes: NodePool,
    /// Its extent heap.
    pub heap: Heap,
}

/// A meganode held by this server.
#[derive(Debug)]
pub struct Hosted {
    /// The region.
    pub id: RegionId,
    /// Its slot on this server.
    pub slot: u32,
    /// Offset of the region in the node's data region.
    pub base: u64,
    /// Node pool and heap.
    pub alloc: Mutex<RegionAlloc>,
    /// Write gate.
    pub gate: Mutex<Gate>,
    /// Levels of the meganode's local tree (root level + 1).
    pub height: AtomicU32,
    /// Its creator (a split's copy, a new root) is still writing it.
    pub creating: AtomicBool,
}

/// Background work of a server node's maintenance thread.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Job {
    /// Split a meganode that is filling up.
    Split(RegionId),
    /// Insert the parent entry of a finished split (`below` split at `key` into `child`).
    LinkParent {
        /// The meganode that was split.
        below: RegionId,
        /// The split key.
        key: Vec<u8>,
        /// The new meganode.
        child: RegionId,
    },
    /// Open a new meganode for writes (a split finished by recovery).
    Open(RegionId),
    /// Drop the orphaned meganode held by another server (recovery found
    /// it): a `DropRegion` request to its holder, asked again until
    /// answered, then its log deleted.
    Drop(RegionId),
    /// Move the root word from meganode `below`'s root to the complete new
    /// root meganode `root` made over it (a parent link recovery rolls
    /// forward), or retire `root` if the root word is neither.
    SetRoot {
        /// The meganode that was the root.
        below: RegionId,
        /// The new root meganode.
        root: RegionId,
    },
}

/// Counters of a server node.
#[derive(Debug, Default)]
pub struct ServerCounters {
    /// Node splits.
    pub node_splits: AtomicU64,
    /// Meganode splits finished.
    pub meganode_splits: AtomicU64,
    /// Meganode splits abandoned.
    pub split_aborts: AtomicU64,
    /// Requests answered `Busy`.
    pub busy: AtomicU64,
    /// Torn node reads by the server's own lock-free searches.
    pub torn: AtomicU64,
}

/// One server node's Cell state, shared by its workers and maintenance thread.
#[derive(Debug)]
pub struct ServerNode {
    /// The node.
    pub node: NodeId,
    /// The deployment's configuration.
    pub cfg: Arc<CellConfig>,
    /// Where things live.
    pub layout: Layout,
    /// The region directory.
    pub dir: RegionTable,
    /// Region logs, if logging.
    pub log: Option<Arc<LogSink>>,
    /// Counters.
    pub counters: ServerCounters,
    hosted: RwLock<HashMap<RegionId, Arc<Hosted>>>,
    /// Regions retired here (orphans dropped): never held again.
    retired: Mutex<HashSet<RegionId>>,
    locks: Mutex<HashSet<NodePtr>>,
    jobs: Mutex<VecDeque<Job>>,
    jobs_cv: Condvar,
}

impl ServerNode {
    /// The state of server `node`.
    pub fn new(
        node: NodeId,
        cfg: Arc<CellConfig>,
        dir: impl Into<RegionTable>,
        log: Option<Arc<LogSink>>,
    ) -> ServerNode {
        ServerNode {
            node,
            layout: cfg.layout(),
            cfg,
            dir: dir.into(),
            log,
            counters: ServerCounters::default(),
            hosted: RwLock::new(HashMap::new()),
            retired: Mutex::new(HashSet::new()),
            locks: Mutex::new(HashSet::new()),
            jobs: Mutex::new(VecDeque::new()),
            jobs_cv: Condvar::new(),
        }
    }

    /// The meganode `region`, if this server holds it.
    pub fn hosted(&self, region: RegionId) -> Option<Arc<Hosted>> {
        self.hosted
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&region)
            .cloned()
    }

    /// Every meganode this server holds.
    pub fn hosted_regions(&self) -> Vec<Arc<Hosted>> {
        self.hosted
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect()
    }

    fn hosted_entry(
        &self,
        region: RegionId,
        slot: u32,
        alloc: RegionAlloc,
        gate: GateMode,
        height: u32,
        creating: bool,
    ) -> Arc<Hosted> {
        Arc::new(Hosted {
            id: region,
            slot,
            base: self.layout.slot_base(slot),
            alloc: Mutex::new(alloc),
            gate: Mutex::new(Gate::new(gate)),
            height: AtomicU32::new(height),
            creating: AtomicBool::new(creating),
        })
    }

    /// Starts holding `region` in `slot` with the given allocators and gate.
    pub fn host(
        &self,
        region: RegionId,
        slot: u32,
        alloc: RegionAlloc,
        gate: GateMode,
        height: u32,
    ) -> Arc<Hosted> {
        let h = self.hosted_entry(region, slot, alloc, gate, height, false);
        self.hosted
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(region, h.clone());
        h
    }

    /// Starts holding the new meganode `region` for its creator (marked
    /// [`Hosted::creating`] until the creator clears it), unless it was
    /// retired here: an orphan dropped before a late request to create it
    /// ran. The check and the insertion are one step against
    /// [`ServerNode::retire_mark`].
    pub fn host_new(
        &self,
        region: RegionId,
        slot: u32,
        alloc: RegionAlloc,
        gate: GateMode,
        height: u32,
    ) -> Option<Arc<Hosted>> {
        let mut hosted = self.hosted.write().unwrap_or_else(|e| e.into_inner());
        if lock(&self.retired).contains(&region) {
            return None;
        }
        let h = self.hosted_entry(region, slot, alloc, gate, height, true);
        hosted.insert(region, h.clone());
        Some(h)
    }

    /// Marks `region` retired (never held here again) and returns it if it
    /// is held now; its creator, if still running, stops at its next step.
    pub fn retire_mark(&self, region: RegionId) -> Option<Arc<Hosted>> {
        let hosted = self.hosted.write().unwrap_or_else(|e| e.into_inner());
        lock(&self.retired).insert(region);
        hosted.get(&region).cloned()
    }

    /// Whether `region` was retired here.
    pub fn is_retired(&self, region: RegionId) -> bool {
        lock(&self.retired).contains(&region)
    }

    /// Stops holding `region`.
    pub fn unhost(&self, region: RegionId) {
        self.hosted
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&region);
    }

    /// Empty allocators for a new meganode (node 0 taken).
    pub fn fresh_alloc(&self) -> RegionAlloc {
        RegionAlloc {
            nodes: NodePool::new(self.cfg.meganode_nodes, &[true]),
            heap: Heap::new(self.cfg.heap_bytes as u32),
        }
    }

    fn try_lock(&self, p: NodePtr) -> bool {
        lock(&self.locks).insert(p)
    }

    fn unlock(&self, p: NodePtr) {
        lock(&self.locks).remove(&p);
    }

    /// Queues background work for the maintenance thread (once).
    pub fn push_job(&self, job: Job) {
        let mut q = lock(&self.jobs);
        if !q.contains(&job) {
            q.push_back(job);
            self.jobs_cv.notify_one();
        }
    }

    /// The next job, waiting up to `timeout`.
    pub fn next_job(&self, timeout: Duration) -> Option<Job> {
        let mut q = lock(&self.jobs);
        if q.is_empty() {
            q = self
                .jobs_cv
                .wait_timeout(q, timeout)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        q.pop_front()
    }

    /// Jobs waiting.
    pub fn pending_jobs(&self) -> usize {
        lock(&self.jobs).len()
    }

    /// Queues a split of `h` if it passed the threshold (and splits are automatic).
    pub fn maybe_split(&self, h: &Hosted) {
        if !self.cfg.auto_split {
            return;
        }
        let a = lock(&h.alloc);
        let nodes = f64::from(a.nodes.used()) / f64::from(a.nodes.total());
        let heap = a.heap.used() as f64 / a.heap.cap() as f64;
        drop(a);
        if nodes >= self.cfg.split_at || heap >= self.cfg.split_at {
            self.push_job(Job::Split(h.id));
        }
    }
}

/// Holds a node lock; unlocks when dropped.
#[derive(Debug)]
pub(crate) struct NodeLock {
    st: Arc<ServerNode>,
    ptr: NodePtr,
}

impl Drop for NodeLock {
    fn drop(&mut self) {
        self.st.unlock(self.ptr);
    }
}

/// A write admitted by a meganode's gate; leaves it when dropped.
#[derive(Debug)]
pub(crate) struct GatePass {
    h: Arc<Hosted>,
}

impl GatePass {
    pub(crate) fn enter(h: &Arc<Hosted>, key: &[u8]) -> Option<GatePass> {
        lock(&h.gate).enter(key).then(|| GatePass { h: h.clone() })
    }
}

impl Drop for GatePass {
    fn drop(&mut self) {
        lock(&self.h.gate).exit();
    }
}

/// Nodes reserved for a write's splits; unused ones return when dropped.
#[derive(Debug)]
pub(crate) struct Reservation {
    h: Arc<Hosted>,
    left: u32,
}

impl Reservation {
    pub(crate) fn take(
        h: &Arc<Hosted>,
        n: u32,
        now: nessie_protocol::Nanos,
    ) -> Option<Reservation> {
        lock(&h.alloc).nodes.reserve(n, now).then(|| Reservation {
            h: h.clone(),
            left: n,
        })
    }

    pub(crate) fn node(&mut self) -> Result<NodePtr, Error> {
        if self.left == 0 {
            return Err(Error::corrupt(
                CorruptionKind::Resource,
                "node reservation exhausted",
            ));
        }
        let i = lock(&self.h.alloc)
            .nodes
            .take_reserved()
            .ok_or_else(|| Error::corrupt(CorruptionKind::Bug, "reserved node missing"))?;
        self.left -= 1;
        Ok(NodePtr::new(self.h.id, i))
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        lock(&self.h.alloc).nodes.unreserve(self.left);
    }
}

/// How long a server keeps re-reading a node a writer has half written
/// (the writer may be descheduled on a loaded machine) before it gives up.
const TORN_PATIENCE: Duration = Duration::from_secs(2);

/// The context of a server machine: its I/O handle and its node's state.
#[derive(Clone, Debug)]
pub struct Srv {
    /// I/O of the machine.
    pub io: Io,
    /// The node's state.
    pub st: Arc<ServerNode>,
}

/// Where a node's bytes are.
enum Place {
    Local(u64),
    Remote(RemoteAddr),
}

impl Srv {
    /// The context of a machine on `st`.
    pub fn new(io: Io, st: Arc<ServerNode>) -> Srv {
        Srv { io, st }
    }

    fn nb(&self) -> usize {
        self.st.layout.node_bytes as usize
    }

    pub(crate) fn is_local(&self, region: RegionId) -> bool {
        self.st.hosted(region).is_some()
    }

    /// Where `region` lives (from the directory: a fabric directory's last
    /// snapshot if it names the region, else a fresh one).
    pub(crate) async fn region(&self, region: RegionId) -> Result<Option<RegionInfo>, Error> {
        self.st.dir.lookup(&self.io, region).await
    }

    async fn place(&self, region: RegionId, offset: u64) -> Result<Place, Error> {
        if let Some(h) = self.st.hosted(region) {
            return Ok(Place::Local(h.base + offset));
        }
        let info = self.region(region).await?.ok_or_else(|| {
            Error::corrupt(CorruptionKind::Memory, format!("unknown region {region}"))
        })?;
        Ok(Place::Remote(RemoteAddr::data(
            info.node,
            self.st.layout.slot_base(info.slot) + offset,
        )))
    }

    async fn read_at(
        &self,
        region: RegionId,
        offset: u64,
        len: u32,
        class: OpClass,
    ) -> Result<Vec<u8>, Error> {
        let op = match self.place(region, offset).await? {
            Place::Local(off) => Op::LocalRead { offset: off, len },
            Place::Remote(addr) => Op::Read { addr, len },
        };
        let r = self.io.round(vec![op], class).await;
        Ok(read_bytes(&r[0])?.to_vec())
    }

    /// Reads node `ptr` (by CPU if held here, else by RDMA READ), re-reading
    /// while a concurrent writer tears it.
    pub(crate) async fn read_node(&self, ptr: NodePtr) -> Result<Node, Error> {
        let off = self.st.layout.node_offset(ptr.index);
        let start = self.io.now();
        loop {
            let b = self
                .read_at(ptr.region, off, self.nb() as u32, OpClass::Node)
                .await?;
            match Node::decode(&b, true) {
                Ok(n) => return Ok(n),
                Err(_) => {
                    self.st.counters.torn.fetch_add(1, Ordering::Relaxed);
                    if self.io.now().since(start) > TORN_PATIENCE {
                        // A writer stalled mid-write: the client retries later.
                        return Err(Error::Conflict);
                    }
                    self.io.backoff(Duration::ZERO).await;
                }
            }
        }
    }

    /// The version word of a node.
    pub(crate) async fn read_version(&self, ptr: NodePtr) -> Result<u64, Error> {
        let b = self
            .read_at(
                ptr.region,
                self.st.layout.node_offset(ptr.index),
                8,
                OpClass::Other,
            )
            .await?;
        Ok(u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
    }

    /// Locks node `ptr` (spinning with back-off on a held lock).
    pub(crate) async fn lock(&self, ptr: NodePtr) -> NodeLock {
        while !self.st.try_lock(ptr) {
            self.io.backoff(Duration::ZERO).await;
        }
        NodeLock {
            st: self.st.clone(),
            ptr,
        }
    }

    /// Appends to a region's log (nothing if not logging).
    pub(crate) async fn log(&self, region: RegionId, records: Vec<LogRecord>) -> Result<(), Error> {
        if self.st.log.is_none() || records.is_empty() {
            return Ok(());
        }
        self.io.log(region, records).await
    }

    fn local_base(&self, region: RegionId) -> Result<u64, Error> {
        self.st.hosted(region).map(|h| h.base).ok_or_else(|| {
            Error::corrupt(
                CorruptionKind::Bug,
                format!("{region} is not held by {}", self.st.node),
            )
        })
    }

    /// Writes `node` to `ptr` (held here, locked by the caller, currently at
    /// version `old`) by the three-step protocol; returns the new version.
    pub(crate) async fn write_node(
        &self,
        ptr: NodePtr,
        node: &Node,
        old: u64,
    ) -> Result<u64, Error> {
        let nb = self.nb();
        let at = self.local_base(ptr.region)? + self.st.layout.node_offset(ptr.index);
        let (odd, even) = (old + 1 + (old % 2), old + 2 + (old % 2));
        let v = |x: u64| x.to_le_bytes().to_vec();
        let steps = [
            vec![
                Op::LocalWrite {
                    offset: at,
                    data: v(odd),
                },
                Op::LocalWrite {
                    offset: at + nb as u64 - 8,
                    data: v(odd),
                },
            ],
            vec![Op::LocalWrite {
                offset: at + 8,
                data: node.encode_body(nb),
            }],
            vec![
                Op::LocalWrite {
                    offset: at + nb as u64 - 8,
                    data: v(even),
                },
                Op::LocalWrite {
                    offset: at,
                    data: v(even),
                },
            ],
        ];
        for ops in steps {
            for r in self.io.round(ops, OpClass::Other).await {
                written(&r)?;
            }
        }
        self.log(
            ptr.region,
            vec![LogRecord::Write {
                offset: self.st.layout.node_offset(ptr.index),
                bytes: node.encode(even, nb),
            }],
        )
        .await?;
        Ok(even)
    }

    /// Writes `node` to a node this write just took (or one the caller holds
    /// the lock of without having read it): reads its version word first so
    /// that versions never go back, even across reuse.
    pub(crate) async fn write_fresh(&self, ptr: NodePtr, node: &Node) -> Result<u64, Error> {
        let old = self.read_version(ptr).await?;
        self.write_node(ptr, node, old).await
    }

    /// Writes an extent into `h`'s heap; `None` if the heap is full.
    pub(crate) async fn write_extent(
        &self,
        h: &Hosted,
        bytes: &[u8],
    ) -> Result<Option<ExtentPtr>, Error> {
        let Some(off) = lock(&h.alloc).heap.alloc(bytes.len() as u32) else {
            return Ok(None);
        };
        let at = self.st.layout.heap_offset(off);
        let r = self
            .io
            .round(
                vec![Op::LocalWrite {
                    offset: h.base + at,
                    data: bytes.to_vec(),
                }],
                OpClass::Other,
            )
            .await;
        written(&r[0])?;
        self.log(
            h.id,
            vec![LogRecord::Write {
                offset: at,
                bytes: bytes.to_vec(),
            }],
        )
        .await?;
        Ok(Some(crate::extent::pointer(h.id, off, bytes)))
    }

    /// Reads the extent `e` points to (local or remote).
    pub(crate) async fn read_extent(&self, e: &ExtentPtr) -> Result<Vec<u8>, Error> {
        self.read_at(
            e.region,
            self.st.layout.heap_offset(e.offset),
            e.len,
            OpClass::Extent,
        )
        .await
    }

    /// Reads several extents in one round.
    pub(crate) async fn read_extents(&self, es: &[ExtentPtr]) -> Result<Vec<Vec<u8>>, Error> {
        let mut ops = Vec::with_capacity(es.len());
        for e in es {
            ops.push(
                match self
                    .place(e.region, self.st.layout.heap_offset(e.offset))
                    .await?
                {
                    Place::Local(off) => Op::LocalRead {
                        offset: off,
                        len: e.len,
                    },
                    Place::Remote(addr) => Op::Read { addr, len: e.len },
                },
            );
        }
        let rs = self.io.round(ops, OpClass::Extent).await;
        rs.iter()
            .map(|r| read_bytes(r).map(<[u8]>::to_vec))
            .collect()
    }

    /// The root word (region 1 holds it).
    pub(crate) async fn root_word(&self) -> Result<NodePtr, Error> {
        let b = self
            .read_at(ROOT_REGION, ROOT_WORD_OFFSET, 8, OpClass::Other)
            .await?;
        Ok(NodePtr::decode(u64::from_le_bytes(
            b.try_into().unwrap_or([0; 8]),
        )))
    }

    /// Waits until no write is inside `h`'s gate.
    pub(crate) async fn drain(&self, h: &Hosted) {
        while lock(&h.gate).writers > 0 {
            self.io.backoff(Duration::from_micros(20)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::region::Directory;

    #[test]
    fn a_retired_region_is_never_held_again_and_its_creator_is_seen() {
        let cfg = Arc::new(CellConfig::default());
        let st = ServerNode::new(NodeId(0), cfg, Arc::new(Directory::new(4)), None);
        let r = RegionId(5);
        let h = st
            .host_new(r, 0, st.fresh_alloc(), GateMode::Frozen, 1)
            .expect("not retired");
        assert!(h.creating.load(Ordering::SeqCst));
        let held = st.retire_mark(r).expect("held");
        assert!(Arc::ptr_eq(&held, &h), "the retirer sees the creation");
        assert!(st.is_retired(r));
        st.unhost(r);
        assert!(
            st.host_new(r, 1, st.fresh_alloc(), GateMode::Frozen, 1)
                .is_none(),
            "a late request cannot create it again"
        );
        assert!(st.hosted(r).is_none());
        // Retiring a region never held here still refuses it later.
        assert!(st.retire_mark(RegionId(6)).is_none());
        assert!(st
            .host_new(RegionId(6), 2, st.fresh_alloc(), GateMode::Open, 1)
            .is_none());
    }
}

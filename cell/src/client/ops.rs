//! The client's operations as sans-IO logic (§2.3): get, search, put,
//! delete and range scan. A search goes one meganode at a time; for each,
//! the mode (or the locality selector) decides whether the server searches
//! it (one `Search` RPC, answered with the value or the pointer where the
//! server's meganodes end) or the client does, by RDMA READs of its nodes:
//!
//! - a READ whose two versions differ or are odd is read again;
//! - an invalid node, or one whose min is above the key (reused), restarts
//!   the search from the top, dropping the cached entries it used;
//! - a key at or above a node's max follows the right link, and the cached
//!   parent is dropped;
//! - at the leaf, the extent READ must match the CRC64 in the leaf's pointer
//!   (and the key), else the attempt restarts.
//!
//! Writes go to the server holding the leaf (with the leaf as a hint when
//! the client found it). A scan collects leaves left to right (server parts
//! and client parts alike), then re-reads the version of every leaf it used:
//! if none changed, all held their contents at one instant (a double
//! collect), and the scan is linearizable.

use std::sync::{Arc, Mutex, MutexGuard};

use nessie_protocol::{
    ClientId, ConfigError, CorruptionKind, Error, FabricError, Nanos, Needed, NodeId, Op, OpOutput,
    RemoteAddr, UnknownOutcome, UnknownStep,
};

use super::cache::{NodeCache, RangeCache};
use super::selector::{Method, Selector};
use crate::config::{CellConfig, CellFaults, Layout, SearchMode, ROOT_WORD_OFFSET};
use crate::directory::FabricDirectory;
use crate::extent::{self, ExtentRead};
use crate::machine::{Io, OpClass};
use crate::node::{Cover, Entry, Node};
use crate::ptr::{ExtentPtr, NodePtr, RegionId, ROOT_REGION};
use crate::region::RegionMap;
use crate::wire::{CellRequest, CellResponse, RestartCause};

/// Bound on meganodes (or nodes) one attempt visits.
const MAX_STEPS: usize = 4096;
/// Bound on re-reads of one torn node.
const TORN_REREADS: usize = 16;

/// Counters of one client, cumulative.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CellStats {
    /// Meganodes searched by their server.
    pub server_searches: u64,
    /// Meganodes searched by the client.
    pub client_searches: u64,
    /// Node READs.
    pub node_reads: u64,
    /// Extent READs.
    pub extent_reads: u64,
    /// Node READs that were torn (and read again).
    pub torn_reads: u64,
    /// Restarts on an invalidated node.
    pub invalid_restarts: u64,
    /// Restarts on a node that did not cover the key (or broke a scan's chain).
    pub minmax_restarts: u64,
    /// Extents whose CRC64 did not match.
    pub crc_mismatches: u64,
    /// Retries after a `Busy` server.
    pub busy_retries: u64,
    /// Attempts that passed their deadline.
    pub deadline_restarts: u64,
    /// Scans whose validation found a changed leaf.
    pub scan_retries: u64,
    /// Other restarts (unknown region, unreachable server, structure).
    pub other_restarts: u64,
    /// Right links followed.
    pub right_moves: u64,
    /// Node cache hits.
    pub node_cache_hits: u64,
    /// Searches started from the meganode range cache.
    pub range_cache_hits: u64,
}

/// What a client keeps between operations.
#[derive(Debug)]
pub struct ClientCore {
    /// Who it is.
    pub id: ClientId,
    /// The deployment's configuration.
    pub cfg: Arc<CellConfig>,
    /// Where things live.
    pub layout: Layout,
    /// Its directory snapshot.
    pub regions: Arc<RegionMap>,
    /// Where fresh snapshots come from: the directory over the fabric, or
    /// (`None`) the driver (the [`crate::machine::Effect::Regions`] effect,
    /// answered from a directory shared in the process).
    pub directory: Option<Arc<FabricDirectory>>,
    /// The root, once read.
    pub root: Option<NodePtr>,
    /// Nodes near the root.
    pub nodes: NodeCache,
    /// Leaf-level meganode ranges.
    pub ranges: RangeCache,
    /// The locality selector.
    pub selector: Selector,
    /// How it searches.
    pub mode: SearchMode,
    /// Test-only broken variants.
    pub faults: CellFaults,
    /// Counters.
    pub stats: CellStats,
    /// A server did not answer in time: the snapshot may name a server
    /// that failed (its regions moved, or about to), so the next attempt
    /// reads a fresh one first.
    regions_stale: bool,
    rng: u64,
}

impl ClientCore {
    /// The state of client `id`.
    pub fn new(cfg: Arc<CellConfig>, id: ClientId, regions: Arc<RegionMap>) -> ClientCore {
        ClientCore {
            id,
            layout: cfg.layout(),
            regions,
            directory: None,
            root: None,
            nodes: NodeCache::new(cfg.cache.nodes, cfg.cache.min_level),
            ranges: RangeCache::new(cfg.cache.ranges),
            selector: {
                let mut s = Selector::new(cfg.selector);
                s.old_window_rule = cfg.faults.selector_resets_per_history;
                s
            },
            mode: cfg.mode,
            faults: cfg.faults,
            stats: CellStats::default(),
            regions_stale: false,
            rng: cfg.seed
                ^ (u64::from(id.node.0) << 32)
                ^ u64::from(id.index)
                ^ 0x9e37_79b9_7f4a_7c15,
            cfg,
        }
    }

    /// A uniform random number in [0, 1).
    pub fn coin(&mut self) -> f64 {
        nessie_protocol::rng::unit(nessie_protocol::rng::xorshift64(&mut self.rng))
    }
}

/// What a failed READ means for the attempt: a restart if its node is
/// unreachable, else the operation's error.
fn read_failed<T>(e: &FabricError) -> Result<Result<T, Why>, Error> {
    match e.unreachable_node() {
        Some(n) => Ok(Err(Why::Unreachable(n))),
        None => Err(e.clone().into()),
    }
}

/// Why an attempt restarts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Why {
    Torn,
    Invalid,
    MinMax,
    Crc,
    Busy,
    Deadline,
    Changed,
    Region,
    Unreachable(NodeId),
    Timeout,
    Structure,
}

impl From<RestartCause> for Why {
    fn from(c: RestartCause) -> Why {
        match c {
            RestartCause::Invalid => Why::Invalid,
            RestartCause::MinMax => Why::MinMax,
            RestartCause::Structure => Why::Structure,
        }
    }
}

/// An attempt's outcome.
pub(crate) enum Try<T> {
    Done(T),
    Retry(Why),
}

/// Where a client-side search of one meganode ended.
enum Reach {
    Leaf(NodePtr, Arc<Node>),
    Cross {
        next: NodePtr,
        lo: Vec<u8>,
        hi: Option<Vec<u8>>,
        right: bool,
    },
    Retry(Why),
}

/// Where an attempt starts and what it used.
#[derive(Default)]
struct Trail {
    /// Cached nodes used.
    used: Vec<NodePtr>,
    /// The range cache entry the attempt started from.
    range_lo: Option<Vec<u8>>,
    /// The attempt started from the cached root.
    from_root: bool,
    /// The key range of the meganode being entered, if known from its parent.
    range: Option<(Vec<u8>, Option<Vec<u8>>)>,
    /// The last node whose child pointer the search followed (possibly in
    /// another meganode): dropped from the cache when a right link follows.
    parent: Option<NodePtr>,
}

/// A client operation's context: its I/O and the client's state.
#[derive(Clone)]
pub(crate) struct Cl {
    pub io: Io,
    pub core: Arc<Mutex<ClientCore>>,
}

impl Cl {
    fn core(&self) -> MutexGuard<'_, ClientCore> {
        self.core.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn cfg(&self) -> Arc<CellConfig> {
        self.core().cfg.clone()
    }

    fn place(&self, region: RegionId, offset: u64) -> Option<(NodeId, RemoteAddr)> {
        let c = self.core();
        let info = c.regions.get(region)?;
        Some((
            info.node,
            RemoteAddr::data(info.node, c.layout.slot_base(info.slot) + offset),
        ))
    }

    fn host(&self, region: RegionId) -> Option<NodeId> {
        self.core().regions.get(region).map(|i| i.node)
    }

    /// Replaces the client's directory snapshot by a fresh one; keeps the
    /// old one if the directory cannot be read (its node down), so that
    /// regions the client knows stay reachable.
    /// Refreshes the snapshot if a server did not answer in time since
    /// the last refresh (`ClientCore::regions_stale`).
    async fn refresh_if_stale(&self) {
        if std::mem::take(&mut self.core().regions_stale) {
            self.refresh_regions().await;
        }
    }

    async fn refresh_regions(&self) {
        let dir = self.core().directory.clone();
        let fresh = match dir {
            Some(d) => match d.snapshot(&self.io).await {
                Ok(m) => Some(m),
                Err(e) => {
                    tracing::debug!(error = %e, "no fresh directory snapshot");
                    None
                }
            },
            None => self.io.regions().await,
        };
        if let Some(m) = fresh {
            let mut c = self.core();
            if m.epoch >= c.regions.epoch {
                c.regions = m;
            }
        }
    }

    fn choose(&self, host: NodeId) -> Method {
        let now = self.io.now();
        let mut c = self.core();
        let coin = c.coin();
        let m = match c.mode {
            SearchMode::ServerOnly => Method::Server,
            SearchMode::ClientOnly => Method::Client,
            SearchMode::Fixed(p) => {
                if coin * 100.0 < p {
                    Method::Server
                } else {
                    Method::Client
                }
            }
            SearchMode::Selector => c.selector.choose(host, now, coin),
        };
        match m {
            Method::Server => c.stats.server_searches += 1,
            Method::Client => c.stats.client_searches += 1,
        }
        m
    }

    fn start(&self, key: &[u8]) -> (NodePtr, Trail) {
        let mut c = self.core();
        let mut t = Trail::default();
        if let Some((lo, p)) = c.ranges.lookup(key) {
            c.stats.range_cache_hits += 1;
            t.range_lo = Some(lo);
            return (p, t);
        }
        match c.root {
            Some(r) => {
                t.from_root = true;
                (r, t)
            }
            None => (NodePtr::NULL, t),
        }
    }

    /// Drops what a failed attempt relied on.
    fn forget(&self, t: &Trail, why: Why) {
        let mut c = self.core();
        for p in &t.used {
            c.nodes.remove(*p);
        }
        if let Some(lo) = &t.range_lo {
            c.ranges.remove(lo);
        }
        if t.from_root && matches!(why, Why::Invalid | Why::MinMax | Why::Structure) {
            c.root = None;
        }
    }

    /// Records the range of the bottom meganode an attempt ended in.
    fn learn(&self, t: &Trail, region: RegionId) {
        if let Some((lo, hi)) = &t.range {
            self.core()
                .ranges
                .insert(lo.clone(), hi.clone(), NodePtr::root_of(region));
        }
    }

    /// Counts a restart, refreshes the directory if needed, backs off, and
    /// fails with `Timeout` once the operation has run out of time, or with
    /// `Unreachable(node)` once one node has stayed unreachable for
    /// `unreachable_grace` (`unreachable`: since when, across attempts).
    async fn retry(
        &self,
        why: Why,
        start: Nanos,
        backoff: &mut std::time::Duration,
        unreachable: &mut Option<(NodeId, Nanos)>,
    ) -> Result<(), Error> {
        let cfg = self.cfg();
        {
            let mut c = self.core();
            let s = &mut c.stats;
            match why {
                Why::Invalid => s.invalid_restarts += 1,
                Why::MinMax => s.minmax_restarts += 1,
                Why::Crc => s.crc_mismatches += 1,
                Why::Busy => s.busy_retries += 1,
                Why::Deadline => s.deadline_restarts += 1,
                Why::Changed => s.scan_retries += 1,
                Why::Torn | Why::Region | Why::Unreachable(_) | Why::Timeout | Why::Structure => {
                    s.other_restarts += 1
                }
            }
        }
        self.io.count(|s| s.attempts += 1);
        if matches!(why, Why::Region | Why::Unreachable(_)) {
            self.refresh_regions().await;
        }
        let now = self.io.now();
        match (why, *unreachable) {
            // The same node, still named by the refreshed directory, for
            // longer than the grace: it is down, and no recovery moved its
            // meganodes. Nothing was executed (no request reached it).
            (Why::Unreachable(n), Some((m, since)))
                if n == m && now.since(since) > cfg.unreachable_grace =>
            {
                return Err(Error::Unreachable(n, Needed::Request));
            }
            (Why::Unreachable(n), Some((m, _))) if n == m => {}
            (Why::Unreachable(n), _) => *unreachable = Some((n, now)),
            _ => *unreachable = None,
        }
        if now.since(start) > cfg.op_timeout {
            return Err(Error::Timeout);
        }
        let jitter = self.core().coin();
        let d = backoff.mul_f64(0.5 + jitter / 2.0);
        self.io.backoff(d).await;
        *backoff = (*backoff * 2).min(cfg.max_backoff);
        Ok(())
    }

    async fn root(&self) -> Result<Result<NodePtr, Why>, Error> {
        let known = self.core().root;
        if let Some(r) = known {
            return Ok(Ok(r));
        }
        let Some((_, addr)) = self.place(ROOT_REGION, ROOT_WORD_OFFSET) else {
            return Ok(Err(Why::Region));
        };
        let r = self
            .io
            .round(vec![Op::Read { addr, len: 8 }], OpClass::Other)
            .await;
        match &r[0] {
            Ok(OpOutput::Read(b)) if b.len() == 8 => {
                let p = NodePtr::decode(u64::from_le_bytes(
                    b.as_slice().try_into().unwrap_or([0; 8]),
                ));
                if p.is_null() {
                    return Ok(Err(Why::Structure));
                }
                self.core().root = Some(p);
                Ok(Ok(p))
            }
            Err(e) => read_failed(e),
            Ok(o) => Err(Error::corrupt(
                CorruptionKind::Completion,
                format!("root word read returned {o:?}"),
            )),
        }
    }

    /// Reads node `p` (from the cache when near the root), re-reading torn copies.
    async fn fetch(
        &self,
        p: NodePtr,
        used: &mut Vec<NodePtr>,
    ) -> Result<Result<Arc<Node>, Why>, Error> {
        let cached = self.core().nodes.get(p);
        if let Some(n) = cached {
            self.core().stats.node_cache_hits += 1;
            used.push(p);
            return Ok(Ok(n));
        }
        let (nb, check) = {
            let c = self.core();
            (c.layout.node_bytes as u32, !c.faults.skip_version_check)
        };
        let off = self.core().layout.node_offset(p.index);
        let Some((host, addr)) = self.place(p.region, off) else {
            return Ok(Err(Why::Region));
        };
        for _ in 0..TORN_REREADS {
            let t0 = self.io.now();
            let r = self
                .io
                .round(vec![Op::Read { addr, len: nb }], OpClass::Node)
                .await;
            let t1 = self.io.now();
            let bytes = match &r[0] {
                Ok(OpOutput::Read(b)) => b,
                Err(e) => return read_failed(e),
                Ok(o) => {
                    return Err(Error::corrupt(
                        CorruptionKind::Completion,
                        format!("node read returned {o:?}"),
                    ))
                }
            };
            let mut c = self.core();
            c.selector
                .record_rdma(host, t1.since(t0).as_nanos() as f64, t1);
            c.stats.node_reads += 1;
            match Node::decode(bytes, check) {
                Ok(n) => {
                    let n = Arc::new(n);
                    c.nodes.insert(p, &n);
                    return Ok(Ok(n));
                }
                Err(_) => c.stats.torn_reads += 1,
            }
        }
        Ok(Err(Why::Torn))
    }

    /// Client-side search of the meganode `start` belongs to.
    async fn walk(
        &self,
        start: NodePtr,
        key: &[u8],
        deadline: Nanos,
        t: &mut Trail,
    ) -> Result<Reach, Error> {
        let region = start.region;
        let skip_minmax = self.core().faults.skip_minmax_check;
        let mut ptr = start;
        let mut first = true;
        for _ in 0..MAX_STEPS {
            if self.io.now() > deadline {
                return Ok(Reach::Retry(Why::Deadline));
            }
            let node = match self.fetch(ptr, &mut t.used).await? {
                Ok(n) => n,
                Err(w) => return Ok(Reach::Retry(w)),
            };
            if first && ptr.index == 0 {
                self.core()
                    .selector
                    .observe_height(u32::from(node.level) + 1);
            }
            first = false;
            if !node.valid {
                return Ok(Reach::Retry(Why::Invalid));
            }
            match node.cover(key) {
                Cover::Left if !skip_minmax => return Ok(Reach::Retry(Why::MinMax)),
                Cover::Right => {
                    if node.right.is_null() {
                        return Ok(Reach::Retry(Why::Structure));
                    }
                    let mut c = self.core();
                    if let Some(p) = t.parent.take() {
                        c.nodes.remove(p);
                    }
                    c.stats.right_moves += 1;
                    drop(c);
                    let next = node.right;
                    if next.region != region {
                        return Ok(Reach::Cross {
                            next,
                            lo: node.max.clone().unwrap_or_default(),
                            hi: None,
                            right: true,
                        });
                    }
                    ptr = next;
                    continue;
                }
                _ => {}
            }
            if node.leaf {
                return Ok(Reach::Leaf(ptr, node));
            }
            let Some((child, lo, hi)) = node.child_for(key) else {
                return Ok(Reach::Retry(Why::Structure));
            };
            t.parent = Some(ptr);
            if child.region != region {
                return Ok(Reach::Cross {
                    next: child,
                    lo,
                    hi,
                    right: false,
                });
            }
            ptr = child;
        }
        Ok(Reach::Retry(Why::Structure))
    }

    /// Follows a crossing into the next meganode.
    fn cross(&self, t: &mut Trail, lo: Vec<u8>, hi: Option<Vec<u8>>, right: bool, first_hop: bool) {
        if right {
            // The meganode we started from ends before the key: a stale start.
            if first_hop {
                if let Some(l) = t.range_lo.take() {
                    self.core().ranges.remove(&l);
                }
                if t.from_root {
                    self.core().root = None;
                }
            }
            t.range = None;
        } else {
            t.range = Some((lo, hi));
        }
    }

    /// Reads extents (one round) and checks each against its pointer and key.
    async fn read_extents(
        &self,
        es: &[(Vec<u8>, ExtentPtr)],
    ) -> Result<Result<Vec<Vec<u8>>, Why>, Error> {
        let mut ops = Vec::with_capacity(es.len());
        for (_, e) in es {
            let off = self.core().layout.heap_offset(e.offset);
            let Some((_, addr)) = self.place(e.region, off) else {
                return Ok(Err(Why::Region));
            };
            ops.push(Op::Read { addr, len: e.len });
        }
        let rs = self.io.round(ops, OpClass::Extent).await;
        let skip = self.core().faults.skip_crc_check;
        self.core().stats.extent_reads += es.len() as u64;
        let mut out = Vec::with_capacity(es.len());
        for ((key, e), r) in es.iter().zip(&rs) {
            let b = match r {
                Ok(OpOutput::Read(b)) => b,
                Err(err) => return read_failed(err),
                Ok(o) => {
                    return Err(Error::corrupt(
                        CorruptionKind::Completion,
                        format!("extent read returned {o:?}"),
                    ))
                }
            };
            match extent::verify(b, e, key, skip) {
                ExtentRead::Value(v) => out.push(v),
                ExtentRead::Mismatch => return Ok(Err(Why::Crc)),
            }
        }
        Ok(Ok(out))
    }

    fn rpc_failed<T>(&self, e: Error, write: bool) -> Result<Try<T>, Error> {
        if matches!(e, Error::Timeout) {
            // A server that does not answer may have failed for good: its
            // regions are (or will be) elsewhere. The write's outcome is
            // unknown all the same; the next attempt, of this operation or
            // the next, looks the regions up afresh.
            self.core().regions_stale = true;
        }
        match e {
            Error::Unreachable(n, _) => Ok(Try::Retry(Why::Unreachable(n))),
            Error::Timeout if write => {
                Err(UnknownOutcome::new(UnknownStep::ServerSilent, None).into())
            }
            Error::Timeout => Ok(Try::Retry(Why::Timeout)),
            other => Err(other),
        }
    }

    /// A get (`want` the value) or search (presence only) attempt.
    async fn get_attempt(
        &self,
        key: &[u8],
        want: bool,
        deadline: Nanos,
    ) -> Result<Try<Option<Vec<u8>>>, Error> {
        let (mut ptr, mut t) = self.start(key);
        for hop in 0..MAX_STEPS {
            if self.io.now() > deadline {
                self.forget(&t, Why::Deadline);
                return Ok(Try::Retry(Why::Deadline));
            }
            let region = if ptr.is_null() {
                ROOT_REGION
            } else {
                ptr.region
            };
            let Some(host) = self.host(region) else {
                return Ok(Try::Retry(Why::Region));
            };
            match self.choose(host) {
                Method::Server => {
                    let t0 = self.io.now();
                    let r = self
                        .io
                        .rpc(
                            host,
                            CellRequest::Search {
                                start: ptr,
                                key: key.to_vec(),
                                value: want,
                            },
                        )
                        .await;
                    let t1 = self.io.now();
                    let resp = match r {
                        Ok(x) => x,
                        Err(e) => return self.rpc_failed(e, false),
                    };
                    self.core()
                        .selector
                        .record_server(host, t1.since(t0).as_nanos() as f64, t1);
                    match resp {
                        CellResponse::Found(v) => {
                            self.learn(&t, region);
                            return Ok(Try::Done(Some(v)));
                        }
                        CellResponse::Present => {
                            self.learn(&t, region);
                            return Ok(Try::Done(Some(Vec::new())));
                        }
                        CellResponse::Absent => {
                            self.learn(&t, region);
                            return Ok(Try::Done(None));
                        }
                        CellResponse::Continue { next, lo, hi } => {
                            t.range = Some((lo, hi));
                            ptr = next;
                        }
                        CellResponse::Restart(c) => {
                            self.forget(&t, c.into());
                            return Ok(Try::Retry(c.into()));
                        }
                        CellResponse::Busy => return Ok(Try::Retry(Why::Busy)),
                        other => {
                            return Err(other.failure(host).unwrap_or_else(|| {
                                Error::corrupt(
                                    CorruptionKind::Reply,
                                    format!("unexpected reply to a search: {other:?}"),
                                )
                            }))
                        }
                    }
                }
                Method::Client => {
                    if ptr.is_null() {
                        ptr = match self.root().await? {
                            Ok(r) => r,
                            Err(w) => return Ok(Try::Retry(w)),
                        };
                    }
                    match self.walk(ptr, key, deadline, &mut t).await? {
                        Reach::Retry(w) => {
                            self.forget(&t, w);
                            return Ok(Try::Retry(w));
                        }
                        Reach::Cross {
                            next,
                            lo,
                            hi,
                            right,
                        } => {
                            self.cross(&mut t, lo, hi, right, hop == 0);
                            ptr = next;
                        }
                        Reach::Leaf(lp, node) => {
                            self.learn(&t, lp.region);
                            let Some(e) = node.find(key).and_then(Entry::extent) else {
                                return Ok(Try::Done(None));
                            };
                            if !want {
                                return Ok(Try::Done(Some(Vec::new())));
                            }
                            return Ok(match self.read_extents(&[(key.to_vec(), e)]).await? {
                                Ok(mut v) => Try::Done(v.pop()),
                                Err(w) => Try::Retry(w),
                            });
                        }
                    }
                }
            }
        }
        Ok(Try::Retry(Why::Structure))
    }

    /// A put (`Some` value) or delete attempt: whether the key existed.
    async fn write_attempt(
        &self,
        key: &[u8],
        value: &Option<Vec<u8>>,
        deadline: Nanos,
    ) -> Result<Try<bool>, Error> {
        let (mut ptr, mut t) = self.start(key);
        for hop in 0..MAX_STEPS {
            if self.io.now() > deadline {
                self.forget(&t, Why::Deadline);
                return Ok(Try::Retry(Why::Deadline));
            }
            let region = if ptr.is_null() {
                ROOT_REGION
            } else {
                ptr.region
            };
            let Some(host) = self.host(region) else {
                return Ok(Try::Retry(Why::Region));
            };
            let target = match self.choose(host) {
                Method::Server => ptr,
                Method::Client => {
                    if ptr.is_null() {
                        ptr = match self.root().await? {
                            Ok(r) => r,
                            Err(w) => return Ok(Try::Retry(w)),
                        };
                    }
                    match self.walk(ptr, key, deadline, &mut t).await? {
                        Reach::Retry(w) => {
                            self.forget(&t, w);
                            return Ok(Try::Retry(w));
                        }
                        Reach::Cross {
                            next,
                            lo,
                            hi,
                            right,
                        } => {
                            self.cross(&mut t, lo, hi, right, hop == 0);
                            ptr = next;
                            continue;
                        }
                        Reach::Leaf(lp, _) => lp,
                    }
                }
            };
            let region = if target.is_null() {
                ROOT_REGION
            } else {
                target.region
            };
            let Some(host) = self.host(region) else {
                return Ok(Try::Retry(Why::Region));
            };
            let r = self
                .io
                .rpc(
                    host,
                    CellRequest::Write {
                        start: target,
                        key: key.to_vec(),
                        value: value.clone(),
                    },
                )
                .await;
            let resp = match r {
                Ok(x) => x,
                Err(e) => return self.rpc_failed(e, true),
            };
            match resp {
                CellResponse::Written { existed } => {
                    self.learn(&t, region);
                    return Ok(Try::Done(existed));
                }
                CellResponse::Continue { next, lo, hi } => {
                    t.range = Some((lo, hi));
                    ptr = next;
                }
                CellResponse::Restart(c) => {
                    self.forget(&t, c.into());
                    return Ok(Try::Retry(c.into()));
                }
                CellResponse::Busy => return Ok(Try::Retry(Why::Busy)),
                other => {
                    return Err(other.failure(host).unwrap_or_else(|| {
                        Error::corrupt(
                            CorruptionKind::Reply,
                            format!("unexpected reply to a write: {other:?}"),
                        )
                    }))
                }
            }
        }
        Ok(Try::Retry(Why::Structure))
    }

    /// A scan attempt: entries of `from..to`, at most `limit`.
    async fn scan_attempt(
        &self,
        from: &[u8],
        to: Option<&[u8]>,
        limit: usize,
        deadline: Nanos,
    ) -> Result<Try<Vec<(Vec<u8>, Vec<u8>)>>, Error> {
        let skip_minmax = self.core().faults.skip_minmax_check;
        let mut entries: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        let mut leaves: Vec<(NodePtr, u64)> = Vec::new();
        let mut cursor = from.to_vec();
        let mut contiguous = false;
        let (mut ptr, mut t) = self.start(from);
        let (mut server_parts, mut client_leaves) = (0usize, 0usize);
        'outer: for hop in 0..MAX_STEPS {
            if self.io.now() > deadline {
                self.forget(&t, Why::Deadline);
                return Ok(Try::Retry(Why::Deadline));
            }
            let region = if ptr.is_null() {
                ROOT_REGION
            } else {
                ptr.region
            };
            let Some(host) = self.host(region) else {
                return Ok(Try::Retry(Why::Region));
            };
            match self.choose(host) {
                Method::Server => {
                    let t0 = self.io.now();
                    let r = self
                        .io
                        .rpc(
                            host,
                            CellRequest::Scan {
                                start: ptr,
                                from: cursor.clone(),
                                to: to.map(<[u8]>::to_vec),
                                limit: (limit - entries.len()) as u32,
                                contiguous,
                            },
                        )
                        .await;
                    let t1 = self.io.now();
                    let resp = match r {
                        Ok(x) => x,
                        Err(e) => return self.rpc_failed(e, false),
                    };
                    // The selector's server-side samples are per meganode
                    // search; a server-side scan part that also collected
                    // L leaves counts as the search it contains, its latency
                    // scaled by m / (m - 1 + L), the nodes a client-side
                    // search and collection would READ (without any sample
                    // from scans, a scan-only workload never learns l_s and
                    // stays on the server).
                    let latency = t1.since(t0).as_nanos() as f64;
                    let leaves_read = match &resp {
                        CellResponse::Scanned { leaves, .. } => Some(leaves.len().max(1)),
                        CellResponse::Continue { .. } => Some(1),
                        _ => None,
                    };
                    if let Some(l) = leaves_read {
                        let mut c = self.core();
                        let m = c.selector.height().max(1.0);
                        let sample = latency * m / (m - 1.0 + l as f64);
                        c.selector.record_server(host, sample, t1);
                    }
                    match resp {
                        CellResponse::Scanned {
                            entries: es,
                            leaves: ls,
                            next,
                        } => {
                            server_parts += 1;
                            entries.extend(es);
                            leaves.extend(ls);
                            match next {
                                Some((p, c)) if entries.len() < limit => {
                                    ptr = p;
                                    cursor = c;
                                    contiguous = true;
                                    t.range = None;
                                }
                                _ => break 'outer,
                            }
                        }
                        CellResponse::Continue { next, lo, hi } => {
                            t.range = Some((lo, hi));
                            ptr = next;
                        }
                        CellResponse::Restart(c) => {
                            self.forget(&t, c.into());
                            return Ok(Try::Retry(c.into()));
                        }
                        CellResponse::Busy => return Ok(Try::Retry(Why::Busy)),
                        other => {
                            return Err(other.failure(host).unwrap_or_else(|| {
                                Error::corrupt(
                                    CorruptionKind::Reply,
                                    format!("unexpected reply to a scan: {other:?}"),
                                )
                            }))
                        }
                    }
                }
                Method::Client => {
                    if ptr.is_null() {
                        ptr = match self.root().await? {
                            Ok(r) => r,
                            Err(w) => return Ok(Try::Retry(w)),
                        };
                    }
                    let (mut lp, mut node) = match self.walk(ptr, &cursor, deadline, &mut t).await?
                    {
                        Reach::Retry(w) => {
                            self.forget(&t, w);
                            return Ok(Try::Retry(w));
                        }
                        Reach::Cross {
                            next,
                            lo,
                            hi,
                            right,
                        } => {
                            self.cross(&mut t, lo, hi, right, hop == 0);
                            ptr = next;
                            continue 'outer;
                        }
                        Reach::Leaf(lp, node) => (lp, node),
                    };
                    loop {
                        if !node.valid {
                            return Ok(Try::Retry(Why::Invalid));
                        }
                        if contiguous && !skip_minmax && node.min != cursor {
                            return Ok(Try::Retry(Why::MinMax));
                        }
                        leaves.push((lp, node.version));
                        client_leaves += 1;
                        let want: Vec<(Vec<u8>, ExtentPtr)> = node
                            .entries
                            .iter()
                            .filter(|e| e.key.as_slice() >= cursor.as_slice())
                            .filter(|e| to.is_none_or(|t| e.key.as_slice() < t))
                            .filter_map(|e| Some((e.key.clone(), e.extent()?)))
                            .take(limit - entries.len())
                            .collect();
                        let values = match self.read_extents(&want).await? {
                            Ok(v) => v,
                            Err(w) => return Ok(Try::Retry(w)),
                        };
                        entries.extend(want.into_iter().map(|(k, _)| k).zip(values));
                        let ended = match (&node.max, to) {
                            (None, _) => true,
                            (Some(m), Some(t)) => m.as_slice() >= t,
                            (Some(_), None) => false,
                        };
                        if entries.len() >= limit || ended || node.right.is_null() {
                            break 'outer;
                        }
                        cursor = node.max.clone().unwrap_or_default();
                        contiguous = true;
                        let next = node.right;
                        if next.region != lp.region {
                            ptr = next;
                            t.range = None;
                            continue 'outer;
                        }
                        if self.io.now() > deadline {
                            return Ok(Try::Retry(Why::Deadline));
                        }
                        node = match self.fetch(next, &mut t.used).await? {
                            Ok(n) => n,
                            Err(w) => return Ok(Try::Retry(w)),
                        };
                        if !node.leaf {
                            return Ok(Try::Retry(Why::Structure));
                        }
                        lp = next;
                    }
                }
            }
        }
        // Validation: unnecessary for one leaf read by the client or one
        // part validated by its server; otherwise every leaf's version again.
        let single =
            (server_parts == 1 && client_leaves == 0) || (server_parts == 0 && client_leaves <= 1);
        let skip = self.core().faults.skip_scan_validation;
        if !single && !skip && !self.validate(&leaves).await? {
            return Ok(Try::Retry(Why::Changed));
        }
        Ok(Try::Done(entries))
    }

    /// Whether every leaf still has its version: RDMA READs of the version
    /// words, or (server-side only clients) `Validate` RPCs per server.
    async fn validate(&self, leaves: &[(NodePtr, u64)]) -> Result<bool, Error> {
        if leaves.iter().any(|(p, _)| self.host(p.region).is_none()) {
            self.refresh_regions().await;
        }
        let server_only = self.core().mode == SearchMode::ServerOnly;
        if server_only {
            let mut by_host: std::collections::BTreeMap<NodeId, Vec<(NodePtr, u64)>> =
                Default::default();
            for &(p, v) in leaves {
                let Some(h) = self.host(p.region) else {
                    return Ok(false);
                };
                by_host.entry(h).or_default().push((p, v));
            }
            for (h, ls) in by_host {
                match self.io.rpc(h, CellRequest::Validate { leaves: ls }).await {
                    Ok(CellResponse::Valid(true)) => {}
                    Ok(_) => return Ok(false),
                    Err(Error::Unreachable(..) | Error::Timeout) => return Ok(false),
                    Err(e) => return Err(e),
                }
            }
            return Ok(true);
        }
        let mut ops = Vec::with_capacity(leaves.len());
        for (p, _) in leaves {
            let off = self.core().layout.node_offset(p.index);
            let Some((_, addr)) = self.place(p.region, off) else {
                return Ok(false);
            };
            ops.push(Op::Read { addr, len: 8 });
        }
        let rs = self.io.round(ops, OpClass::Other).await;
        for ((_, v), r) in leaves.iter().zip(&rs) {
            match r {
                Ok(OpOutput::Read(b))
                    if u64::from_le_bytes(b.as_slice().try_into().unwrap_or([1; 8])) == *v => {}
                Ok(_) => return Ok(false),
                Err(e) if e.unreachable_node().is_some() => return Ok(false),
                Err(e) => return Err(e.clone().into()),
            }
        }
        Ok(true)
    }

    /// get (`want`) or search, with retries.
    pub(crate) async fn get(self, key: Vec<u8>, want: bool) -> Result<Option<Vec<u8>>, Error> {
        let cfg = self.cfg();
        let start = self.io.now();
        let mut backoff = cfg.backoff;
        let mut down = None;
        loop {
            self.refresh_if_stale().await;
            let deadline = self.io.now().plus(cfg.attempt_deadline);
            match self.get_attempt(&key, want, deadline).await? {
                Try::Done(v) => return Ok(v),
                Try::Retry(w) => self.retry(w, start, &mut backoff, &mut down).await?,
            }
        }
    }

    /// put (`Some`) or delete, with retries.
    pub(crate) async fn write(self, key: Vec<u8>, value: Option<Vec<u8>>) -> Result<bool, Error> {
        let cfg = self.cfg();
        let start = self.io.now();
        let mut backoff = cfg.backoff;
        let mut down = None;
        loop {
            self.refresh_if_stale().await;
            let deadline = self.io.now().plus(cfg.attempt_deadline);
            match self.write_attempt(&key, &value, deadline).await? {
                Try::Done(v) => return Ok(v),
                Try::Retry(w) => self.retry(w, start, &mut backoff, &mut down).await?,
            }
        }
    }

    /// scan, with retries.
    pub(crate) async fn scan(
        self,
        from: Vec<u8>,
        to: Option<Vec<u8>>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>, Error> {
        let cfg = self.cfg();
        if limit == 0 || limit > cfg.scan_page as usize {
            return Err(Error::Config(ConfigError::OutOfRange {
                field: "scan limit",
                value: limit.to_string(),
                reason: "1 to scan_page entries",
            }));
        }
        let start = self.io.now();
        let mut backoff = cfg.backoff;
        let mut down = None;
        loop {
            self.refresh_if_stale().await;
            let deadline = self.io.now().plus(cfg.attempt_deadline);
            match self
                .scan_attempt(&from, to.as_deref(), limit, deadline)
                .await?
            {
                Try::Done(v) => return Ok(v),
                Try::Retry(w) => self.retry(w, start, &mut backoff, &mut down).await?,
            }
        }
    }
}

//! The region directory over the fabric: what Cell's node processes use
//! instead of a shared in-process [`crate::region::Directory`], since on
//! RDMA they share nothing but the fabric. The paper keeps the region table
//! in an external service such as ZooKeeper (§2.1, §2.6); here it lives in
//! a small registered area of one node's data region (the directory node,
//! node 0 by default; layout in [`table`]) and is read and written by RDMA
//! alone, as sans-IO logic over the machine's [`Io`], so that it runs under
//! every driver (threads on fabric-sim or verbs, the cluster simulator).
//!
//! **Copy-on-write with a CAS commit, no lock.** The area holds a *current
//! word* (which copy of the table is current, and its version) and two
//! copies of the table per server node. A server updating the directory
//! (allocate, publish, relocate, remove, set-failed):
//!
//! 1. reads a consistent snapshot (below): the current word `(c, v)` and
//!    copy `c`;
//! 2. applies its update to it ([`RegionMap::apply`]), recording the
//!    update's sequence number in its own slot of the table;
//! 3. writes the new table, version `v + 1`, into whichever of *its own*
//!    two copies is not `c`: both versions odd, then the body, then both
//!    versions even (three rounds, each awaited);
//! 4. commits by one NIC CAS of the current word from `(c, v)` to
//!    `(its copy, v + 1)`. A CAS that finds another word lost a race with
//!    another server's commit: it reads again and retries.
//!
//! A server that dies anywhere in this holds nothing: until its CAS the
//! current word points at a complete copy, and nobody waits for it. There
//! is no lock to recover, hence no lease and no timing assumption for
//! mutual exclusion. A late WRITE (A2, docs/protocol.md §4: a posted
//! mutation lands within `landing_margin` or never) can only land in its
//! writer's own copy; a copy becomes current only by its writer's CAS,
//! posted after every WRITE to it completed. The one way a late WRITE could
//! still hit a current copy is an earlier attempt of the same server whose
//! copy WRITE failed (its completion an error, the WRITE itself perhaps
//! still in flight) followed by an attempt that rewrites and commits that
//! copy; so a server whose copy WRITE failed waits out `landing_margin`
//! before it writes again ("fence what you restore", here by the bound).
//! A commit CAS whose completion is lost is settled the same way: wait out
//! the bound, read the table, and look for the update's sequence number.
//!
//! **Readers** (clients and servers refreshing their snapshot) READ the
//! current word, then the copy it names, in one READ, and accept it only if
//! its head and tail versions both equal `2v` (a seqlock, the technique of
//! Cell's own nodes, §2.3; it relies, as they do, on a READ observing the
//! copy in address order): a copy being rewritten by its owner (a reader
//! with a stale current word) is odd at both ends or differs between them,
//! and the reader starts again. Readers retry with back-off for at most
//! `op_timeout`.
//!
//! **When the directory node is down** every read and update fails at once
//! with [`Error::Unreachable`] naming it (a client keeps its last snapshot,
//! so operations on regions it knows go on; a meganode split aborts); so
//! does a read before the directory node has initialised the table.

pub mod table;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nessie_exec::word;
use nessie_exec::{cas_previous, read_bytes, written};
use nessie_protocol::{
    ConfigError, CorruptionKind, Error, Needed, NodeId, Op, RemoteAddr, UnknownOutcome, UnknownStep,
};

use crate::config::{CellConfig, CellFaults, DirectoryPlace};
use crate::machine::{Io, OpClass};
use crate::ptr::RegionId;
use crate::region::{Applied, Directory, RegionInfo, RegionMap, Update};
pub use table::{Current, DirLayout, Table};

/// Counters of one [`FabricDirectory`] handle.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DirCounters {
    /// Snapshots taken.
    pub snapshots: u64,
    /// Copies read while being rewritten (read again).
    pub torn: u64,
    /// Updates committed.
    pub commits: u64,
    /// Commit CASes that lost to another server's.
    pub lost_races: u64,
    /// Commit CASes whose outcome had to be read back.
    pub unknown_commits: u64,
}

#[derive(Debug, Default)]
struct Counters {
    snapshots: AtomicU64,
    torn: AtomicU64,
    commits: AtomicU64,
    lost_races: AtomicU64,
    unknown_commits: AtomicU64,
}

/// A handle on the region directory on the directory node, for one
/// process: a reader, or the writer of one server node.
#[derive(Debug)]
pub struct FabricDirectory {
    layout: DirLayout,
    writer: Option<NodeId>,
    slots_per_node: u32,
    landing: Duration,
    round_timeout: Duration,
    give_up: Duration,
    faults: CellFaults,
    writing: AtomicBool,
    last: Mutex<Arc<RegionMap>>,
    counters: Counters,
}

/// Releases the process's writer flag when an update ends (or its machine
/// is dropped).
struct Writing<'a>(&'a AtomicBool);

impl Drop for Writing<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

fn v2(version: u64) -> Vec<u8> {
    (2 * version).to_le_bytes().to_vec()
}

fn v2_odd(version: u64) -> Vec<u8> {
    (2 * version + 1).to_le_bytes().to_vec()
}

impl FabricDirectory {
    /// The directory of `cfg` (whose [`CellConfig::directory`] must place it
    /// on a node), as seen by a reader (`writer: None`: a client) or by
    /// server node `writer`.
    pub fn new(cfg: &CellConfig, writer: Option<NodeId>) -> Result<FabricDirectory, Error> {
        cfg.validate()?;
        let Some(layout) = cfg.dir_layout() else {
            return Err(Error::Config(ConfigError::OutOfRange {
                field: "directory",
                value: format!("{:?}", cfg.directory),
                reason: "a directory over the fabric needs directory = DirectoryPlace::Node(n)",
            }));
        };
        if let Some(w) = writer {
            if w.0 >= cfg.server_nodes {
                return Err(Error::Config(ConfigError::OutOfRange {
                    field: "directory writer",
                    value: w.to_string(),
                    reason: "only server nodes update the directory",
                }));
            }
        }
        Ok(FabricDirectory {
            layout,
            writer,
            slots_per_node: cfg.regions_per_node,
            landing: cfg.landing_margin,
            round_timeout: cfg.rpc_timeout,
            give_up: cfg.op_timeout,
            faults: cfg.faults,
            writing: AtomicBool::new(false),
            last: Mutex::new(Arc::new(RegionMap::default())),
            counters: Counters::default(),
        })
    }

    /// Where the table lives.
    pub fn layout(&self) -> DirLayout {
        self.layout
    }

    /// The node holding the table.
    pub fn node(&self) -> NodeId {
        self.layout.node
    }

    /// The last table this handle read or committed (empty before any).
    pub fn last(&self) -> Arc<RegionMap> {
        self.last.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn remember(&self, map: RegionMap) -> Arc<RegionMap> {
        let m = Arc::new(map);
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        if m.epoch >= last.epoch {
            *last = m.clone();
        }
        m
    }

    /// The counters so far.
    pub fn counters(&self) -> DirCounters {
        let c = &self.counters;
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        DirCounters {
            snapshots: l(&c.snapshots),
            torn: l(&c.torn),
            commits: l(&c.commits),
            lost_races: l(&c.lost_races),
            unknown_commits: l(&c.unknown_commits),
        }
    }

    fn addr(&self, offset: u64) -> RemoteAddr {
        RemoteAddr::data(self.layout.node, offset)
    }

    /// A consistent snapshot of the table.
    pub async fn snapshot(&self, io: &Io) -> Result<Arc<RegionMap>, Error> {
        let (_, t) = self.read_current(io).await?;
        Ok(self.remember(t.map))
    }

    /// The current word and the table it names, read until consistent (at
    /// most `op_timeout`).
    async fn read_current(&self, io: &Io) -> Result<(Current, Table), Error> {
        self.counters.snapshots.fetch_add(1, Ordering::Relaxed);
        let start = io.now();
        let mut pause = Duration::from_micros(1);
        loop {
            let r = io
                .round_within(
                    vec![Op::Read {
                        addr: self.addr(self.layout.current_at()),
                        len: 8,
                    }],
                    OpClass::Other,
                    self.round_timeout,
                )
                .await;
            let Some(cur) = Current::decode(word(read_bytes(&r[0])?, 0)) else {
                tracing::debug!(node = %self.layout.node, "the region directory is not initialised yet");
                return Err(Error::Unreachable(self.layout.node, Needed::Directory));
            };
            if cur.copy >= self.layout.copies() {
                return Err(Error::corrupt(
                    CorruptionKind::Memory,
                    format!(
                        "the directory's current word names copy {} of {}",
                        cur.copy,
                        self.layout.copies()
                    ),
                ));
            }
            let r = io
                .round_within(
                    vec![Op::Read {
                        addr: self.addr(self.layout.copy_at(cur.copy)),
                        len: self.layout.copy_bytes as u32,
                    }],
                    OpClass::Other,
                    self.round_timeout,
                )
                .await;
            match self.check(read_bytes(&r[0])?, cur)? {
                Some(t) => return Ok((cur, t)),
                None => {
                    self.counters.torn.fetch_add(1, Ordering::Relaxed);
                }
            }
            if io.now().since(start) > self.give_up {
                return Err(Error::Timeout);
            }
            io.backoff(pause).await;
            pause = (pause * 2).min(Duration::from_millis(1));
        }
    }

    /// The table a copy read for `cur` holds; `None` if it was being
    /// rewritten (versions odd or not `2v` at both ends).
    fn check(&self, b: &[u8], cur: Current) -> Result<Option<Table>, Error> {
        let n = b.len();
        if n < 16 {
            return Err(Error::corrupt(
                CorruptionKind::Memory,
                format!("a directory copy of {n} bytes"),
            ));
        }
        let (head, tail) = (word(b, 0), word(b, n - 8));
        let checked = !self.faults.directory_skip_version_check;
        if checked && (head != 2 * cur.version || tail != head) {
            return Ok(None);
        }
        match Table::decode(&b[8..n - 8], &self.layout) {
            Ok(t) if !checked || t.map.epoch == cur.version => Ok(Some(t)),
            Ok(_) => Ok(None),
            Err(why) => Err(Error::corrupt(
                CorruptionKind::Memory,
                format!(
                    "directory copy {} (version {}): {why}",
                    cur.copy, cur.version
                ),
            )),
        }
    }

    /// Writes `t` as version `version` into copy `copy`: versions odd, body,
    /// versions even, each round awaited.
    async fn write_copy(&self, io: &Io, copy: u32, version: u64, t: &Table) -> Result<(), Error> {
        let body = t.encode(&self.layout).ok_or_else(|| {
            Error::corrupt(
                CorruptionKind::Resource,
                format!(
                    "the directory table of {} regions does not fit its area",
                    t.map.regions.len()
                ),
            )
        })?;
        let at = self.layout.copy_at(copy);
        let tail = at + self.layout.copy_bytes - 8;
        let write = |offset: u64, data: Vec<u8>| Op::Write {
            addr: self.addr(offset),
            data,
        };
        let rounds = [
            vec![write(at, v2_odd(version)), write(tail, v2_odd(version))],
            vec![write(at + 8, body)],
            vec![write(tail, v2(version)), write(at, v2(version))],
        ];
        for ops in rounds {
            for r in io
                .round_within(ops, OpClass::Other, self.round_timeout)
                .await
            {
                written(&r)?;
            }
        }
        Ok(())
    }

    /// Writes the first table (version 1) and points the current word at
    /// it: what the directory node does once, before anyone uses the
    /// directory. Refused if the table was initialised already.
    pub async fn initialise(&self, io: &Io) -> Result<(), Error> {
        let me = self.writer_node()?;
        if me != self.layout.node {
            return Err(Error::Config(ConfigError::OutOfRange {
                field: "directory",
                value: me.to_string(),
                reason: "only the directory node initialises the directory",
            }));
        }
        let copy = self.layout.copies_of(me)[0];
        let first = Table::first(&self.layout);
        self.write_copy(io, copy, 1, &first).await?;
        let cur = Current { copy, version: 1 };
        let prev = self.cas_current(io, 0, cur).await?;
        if prev != 0 {
            return Err(Error::corrupt(
                CorruptionKind::Setup,
                format!("the directory on {me} was initialised already (current word {prev:#x})"),
            ));
        }
        self.remember(first.map);
        Ok(())
    }

    fn writer_node(&self) -> Result<NodeId, Error> {
        self.writer.ok_or_else(|| {
            Error::Config(ConfigError::OutOfRange {
                field: "directory writer",
                value: "none".into(),
                reason: "a reader's handle cannot update the directory",
            })
        })
    }

    async fn cas_current(&self, io: &Io, expect: u64, new: Current) -> Result<u64, Error> {
        let r = io
            .round_within(
                vec![Op::Cas {
                    addr: self.addr(self.layout.current_at()),
                    expect,
                    new: new.encode(),
                }],
                OpClass::Other,
                self.round_timeout,
            )
            .await;
        cas_previous(&r[0])
    }

    /// Applies `u` to the directory (module documentation). `Ok`: it took
    /// effect (or, for a refused allocation, changed nothing); an error
    /// other than [`Error::OutcomeUnknown`]: it did not and never will.
    pub async fn update(&self, io: &Io, u: Update) -> Result<Applied, Error> {
        let me = self.writer_node()?;
        while self.writing.swap(true, Ordering::Acquire) {
            io.backoff(Duration::from_micros(20)).await;
        }
        let _writing = Writing(&self.writing);
        let start = io.now();
        let mut pause = Duration::from_micros(5);
        let mine = self.layout.copies_of(me);
        loop {
            let (cur, t) = self.read_current(io).await?;
            let mut next = t.clone();
            let applied = next.map.apply(u, self.slots_per_node);
            if !applied.changed() {
                self.remember(t.map);
                return Ok(applied);
            }
            let version = cur.version + 1;
            next.map.epoch = version;
            let seq = t.applied[usize::from(me.0)] + 1;
            next.applied[usize::from(me.0)] = seq;
            let copy = if self.faults.directory_in_place {
                cur.copy
            } else if mine[0] == cur.copy {
                mine[1]
            } else {
                mine[0]
            };
            if let Err(e) = self.write_copy(io, copy, version, &next).await {
                // A failed WRITE may still land (A2): let it, before this
                // server writes that copy again.
                if !self.faults.directory_skip_landing_wait {
                    io.backoff(self.landing).await;
                }
                return Err(e);
            }
            let new = Current { copy, version };
            match self.cas_current(io, cur.encode(), new).await {
                Ok(prev) if prev == cur.encode() => {
                    self.counters.commits.fetch_add(1, Ordering::Relaxed);
                    self.remember(next.map);
                    return Ok(applied);
                }
                Ok(_) => {
                    self.counters.lost_races.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => {
                    // The CAS lands within the margin or never (A2): wait it
                    // out, then the table says whether it did.
                    self.counters
                        .unknown_commits
                        .fetch_add(1, Ordering::Relaxed);
                    io.backoff(self.landing).await;
                    match self.read_current(io).await {
                        Ok((_, now)) if now.applied[usize::from(me.0)] >= seq => {
                            self.counters.commits.fetch_add(1, Ordering::Relaxed);
                            self.remember(now.map);
                            return Ok(applied);
                        }
                        Ok(_) => {}
                        Err(e2) => {
                            tracing::debug!(update = ?u, commit = %e, "reading a failed commit back failed");
                            return Err(
                                UnknownOutcome::new(UnknownStep::DirectoryUpdate, e2).into()
                            );
                        }
                    }
                }
            }
            if io.now().since(start) > self.give_up {
                return Err(Error::Timeout);
            }
            io.backoff(pause).await;
            pause = (pause * 2).min(Duration::from_millis(2));
        }
    }
}

impl CellConfig {
    /// Where the fabric directory lives, if [`CellConfig::directory`] puts
    /// it on a node.
    pub fn dir_layout(&self) -> Option<DirLayout> {
        match self.directory {
            DirectoryPlace::Process => None,
            DirectoryPlace::Node(n) => Some(DirLayout::new(
                n,
                self.layout().directory_base,
                self.nodes,
                self.server_nodes,
                self.regions_per_node,
            )),
        }
    }
}

/// The region table as server logic sees it: the process's shared
/// [`Directory`], or the table on the directory node read and written over
/// the fabric ([`FabricDirectory`]). Reads and updates are async logic
/// over the machine's [`Io`], so they run under every driver; a shared
/// table answers at once, a fabric one in rounds of RDMA work requests.
#[derive(Clone, Debug)]
pub enum RegionTable {
    /// One table in this process's memory.
    Shared(Arc<Directory>),
    /// The table on the directory node, over the fabric.
    Fabric(Arc<FabricDirectory>),
}

impl From<Arc<Directory>> for RegionTable {
    fn from(d: Arc<Directory>) -> RegionTable {
        RegionTable::Shared(d)
    }
}

impl From<Arc<FabricDirectory>> for RegionTable {
    fn from(d: Arc<FabricDirectory>) -> RegionTable {
        RegionTable::Fabric(d)
    }
}

impl RegionTable {
    /// A fresh snapshot (a consistent read of the fabric table).
    pub async fn snapshot(&self, io: &Io) -> Result<Arc<RegionMap>, Error> {
        match self {
            RegionTable::Shared(d) => Ok(d.snapshot()),
            RegionTable::Fabric(d) => d.snapshot(io).await,
        }
    }

    /// Where `region` lives: from the last snapshot of a fabric table if it
    /// names the region (regions move only by recovery, which node
    /// processes do not run), else from a fresh one.
    pub async fn lookup(&self, io: &Io, region: RegionId) -> Result<Option<RegionInfo>, Error> {
        match self {
            RegionTable::Shared(d) => Ok(d.snapshot().get(region)),
            RegionTable::Fabric(d) => match d.last().get(region) {
                Some(i) => Ok(Some(i)),
                None => Ok(d.snapshot(io).await?.get(region)),
            },
        }
    }

    /// The last snapshot known without I/O (a shared table's current one).
    pub fn last(&self) -> Arc<RegionMap> {
        match self {
            RegionTable::Shared(d) => d.snapshot(),
            RegionTable::Fabric(d) => d.last(),
        }
    }

    /// Applies `u`. On a fabric table an error means the update did not
    /// take effect, except [`Error::OutcomeUnknown`].
    pub async fn update(&self, io: &Io, u: Update) -> Result<Applied, Error> {
        match self {
            RegionTable::Shared(d) => Ok(d.update(u)),
            RegionTable::Fabric(d) => d.update(io, u).await,
        }
    }

    /// [`Update::Allocate`]: a new region and its slot on `node`, allocated
    /// by server `by`, or `None` when `node` has no free slot.
    pub async fn allocate(
        &self,
        io: &Io,
        node: NodeId,
        by: NodeId,
    ) -> Result<Option<(RegionId, u32)>, Error> {
        match self.update(io, Update::Allocate { on: node, by }).await? {
            Applied::Allocated(a) => Ok(a),
            Applied::Relocated(_) | Applied::Done => Ok(None),
        }
    }

    /// [`Update::Publish`].
    pub async fn publish(&self, io: &Io, region: RegionId) -> Result<(), Error> {
        self.update(io, Update::Publish(region)).await.map(|_| ())
    }
}

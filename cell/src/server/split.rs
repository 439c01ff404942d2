//! Meganode splits (§2.2), by the paper's protocol:
//!
//! 1. Pick the split key `s` (the middle entry of the meganode X's root),
//!    close X's write gate and wait for the writes inside it to finish.
//!    The paper locks only X_right (keys `s` and up) and lets X_left's
//!    writes go on; here all of X's writes wait (answered `Busy`, retried)
//!    for the few milliseconds a split takes, because an X_left write can
//!    split X's root, which moves `s` out of the root the copy and the
//!    relink work from.
//! 2. Copy X_right to a new meganode Y on the least loaded server (local
//!    or remote): the splitter allocates Y there and logs `SplitStart`
//!    naming it; that server reads X_right's nodes and extents (by RDMA
//!    READ, or by CPU when local) and writes them into Y, whose writes stay
//!    frozen; the splitter logs `SplitCopied`. A copy the splitter gives up
//!    on is settled (`Srv::abandon`): removed from the directory if it
//!    never ran, retired where it is held if its outcome is unknown.
//! 3. Relink: at every level the X_left node that ends at `s` gets a right
//!    link to Y's root;
//!    X's root drops its entries from `s` up and ends at `s`, its right link
//!    to Y's root.
//! 4. Invalidate X_right's nodes (the valid flag, by the three-step node
//!    write), free them (reusable after the grace period) and their
//!    extents, log the split's end and reopen X's gate; then open Y's.
//! 5. Insert `s` -> Y into the parent meganode (a separate operation, as in
//!    Sagiv's algorithm), or make a new root meganode over X and Y (also
//!    allocated first and named in X's log, `SplitNewRoot`), then log
//!    `SplitLinked`.
//!
//! Requests to other servers are claimed (a request its sender gave up on
//! either never runs or is reported `OutcomeUnknown`); recovery settles a
//! split whose splitter died from these records (`crate::recovery`).
//!
//! Searches never wait: before the relink they reach X_right (frozen, still
//! valid), after it Y; a search holding a stale pointer into X_right meets
//! an invalid node, or, once the node is reused, a node whose min and max do
//! not cover its key (§2.4).

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use nessie_protocol::{CorruptionKind, Error, NodeId, Op, UnknownOutcome, UnknownStep};

use super::alloc::{GateMode, NodePool};
use super::tree::{Descent, Goal};
use super::{lock, GatePass, RegionAlloc, Reservation, Srv};
use crate::config::{header_word, ROOT_WORD_OFFSET};
use crate::extent;
use crate::log::LogRecord;
use crate::machine::{written, OpClass};
use crate::node::{Entry, Node, Payload};
use crate::ptr::{NodePtr, RegionId, ROOT_REGION};
use crate::region::Update;
use crate::wire::{CellRequest, CellResponse, Refusal, RestartCause};

/// How a split attempt ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SplitOutcome {
    /// X split at `split` into X and `new`.
    Split {
        /// The split key.
        split: Vec<u8>,
        /// The new meganode.
        new: RegionId,
    },
    /// The meganode is too small to split (a single root node).
    NotSplittable,
    /// The copy failed; the split was abandoned and X reopened.
    Aborted(SplitAbort),
}

/// Why a split's copy failed, so that the split was abandoned
/// ([`SplitOutcome::Aborted`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SplitAbort {
    /// The target server had no free region slot for the copy.
    #[error("no free region slot on {0}")]
    NoFreeSlot(NodeId),
    /// The copy's region could not be allocated in the directory.
    #[error("allocating the copy on {target}: {error}")]
    Allocate {
        /// The server that was to hold the copy.
        target: NodeId,
        /// Why.
        error: Error,
    },
    /// The split's start could not be logged.
    #[error("logging the split's start: {0}")]
    LogStart(Error),
    /// The target server answered the copy request otherwise than with
    /// the new meganode.
    #[error("the copy to {target} was answered {answer:?}")]
    CopyRefused {
        /// The server that was to hold the copy.
        target: NodeId,
        /// Its answer.
        answer: CellResponse,
    },
    /// The copy request failed on its way.
    #[error("the copy to {target} failed: {error}")]
    CopyFailed {
        /// The server that was to hold the copy.
        target: NodeId,
        /// Why.
        error: Error,
    },
    /// The finished copy could not be logged.
    #[error("logging the copy: {0}")]
    LogCopy(Error),
}

/// Extents copied per round.
const EXTENT_BATCH: usize = 32;

/// Marks a meganode under creation here; clears [`super::Hosted::creating`]
/// when the creation ends, however it ends.
struct Creating(Arc<super::Hosted>);

impl Drop for Creating {
    fn drop(&mut self) {
        self.0.creating.store(false, Ordering::SeqCst);
    }
}

impl Srv {
    fn set_gate(&self, region: RegionId, mode: GateMode) {
        if let Some(h) = self.st.hosted(region) {
            lock(&h.gate).mode = mode;
        }
    }

    /// The server a new meganode goes to: the one holding the fewest
    /// regions (this one on ties) that has a free slot.
    ///
    /// This server itself when the directory cannot be read (the copy's
    /// allocation then fails the same way, and the split aborts).
    pub(crate) async fn choose_target(&self) -> NodeId {
        let m = match self.st.dir.snapshot(&self.io).await {
            Ok(m) => m,
            Err(e) => {
                tracing::debug!(error = %e, "no directory snapshot to place a meganode");
                return self.st.node;
            }
        };
        let load = m.load(self.st.cfg.server_nodes);
        let own = load
            .iter()
            .find(|(n, _)| *n == self.st.node)
            .map_or(usize::MAX, |(_, c)| *c);
        let slots = self.st.cfg.regions_per_node;
        load.into_iter()
            .filter(|(n, _)| m.free_slot(*n, slots).is_some())
            .min_by_key(|(n, c)| (*c, *n != self.st.node))
            .filter(|(_, c)| *c < own)
            .map_or(self.st.node, |(n, _)| n)
    }

    /// Splits meganode `x`, held here (steps 1-4 of the module
    /// documentation), copying X_right to `onto` (`None`: the least loaded
    /// server, [`Srv::choose_target`]); the parent link (step 5) is the
    /// caller's.
    pub(crate) async fn split_meganode(
        &self,
        x: RegionId,
        onto: Option<NodeId>,
    ) -> Result<SplitOutcome, Error> {
        let h = self.st.hosted(x).ok_or_else(|| {
            Error::corrupt(
                CorruptionKind::Bug,
                format!("{x} is not held by {}", self.st.node),
            )
        })?;
        let root = self.read_node(NodePtr::root_of(x)).await?;
        if root.leaf || root.entries.len() < 2 {
            return Ok(SplitOutcome::NotSplittable);
        }
        let split = root.entries[root.entries.len() / 2].key.clone();
        // 1. Lock X (see the module documentation: X_left's writes wait too).
        self.set_gate(x, GateMode::Closed);
        self.drain(&h).await;
        let target = match onto {
            Some(t) => t,
            None => self.choose_target().await,
        };
        // 2. Copy it. Until the relink starts, any failure just reopens X
        //    (after settling Y: removed, or retired where it is held).
        let y = match self.copy_phase(x, &split, target).await {
            Ok(y) => y,
            Err(why) => {
                let logged = self.log(x, vec![LogRecord::SplitAbort]).await;
                self.set_gate(x, GateMode::Open);
                self.st
                    .counters
                    .split_aborts
                    .fetch_add(1, Ordering::Relaxed);
                logged?;
                return Ok(SplitOutcome::Aborted(why));
            }
        };
        // 3. Relink X_left.
        let right = self.relink(x, &split, y).await?;
        // 4. Invalidate X_right, reopen X.
        self.invalidate(&h, &right).await?;
        self.log(x, vec![LogRecord::SplitFinish { new: y }]).await?;
        self.set_gate(x, GateMode::Open);
        self.st
            .counters
            .meganode_splits
            .fetch_add(1, Ordering::Relaxed);
        self.open_remote(y).await?;
        Ok(SplitOutcome::Split { split, new: y })
    }

    /// Allocates Y on `target`, logs the split's start (naming Y), has
    /// `target` copy X_right into Y, logs the copy. On failure Y is settled
    /// (see [`Srv::abandon`]) and the reason returned; the caller logs the
    /// abort.
    async fn copy_phase(
        &self,
        x: RegionId,
        split: &[u8],
        target: NodeId,
    ) -> Result<RegionId, SplitAbort> {
        let (y, slot) = match self.st.dir.allocate(&self.io, target, self.st.node).await {
            Ok(Some(a)) => a,
            Ok(None) => return Err(SplitAbort::NoFreeSlot(target)),
            Err(error) => return Err(SplitAbort::Allocate { target, error }),
        };
        let start = LogRecord::SplitStart {
            split: split.to_vec(),
            target,
            new: y,
        };
        if let Err(e) = self.log(x, vec![start]).await {
            self.abandon(y, Ok(CellResponse::Failed(Refusal::NotSent)))
                .await;
            return Err(SplitAbort::LogStart(e));
        }
        let req = CellRequest::CopyMeganode {
            source: x,
            split: split.to_vec(),
            new: y,
            slot,
        };
        let copied = self.io.rpc(target, req).await;
        if copied != Ok(CellResponse::Region(y)) {
            let why = match &copied {
                Ok(answer) => SplitAbort::CopyRefused {
                    target,
                    answer: answer.clone(),
                },
                Err(error) => SplitAbort::CopyFailed {
                    target,
                    error: error.clone(),
                },
            };
            self.abandon(y, copied).await;
            return Err(why);
        }
        if let Err(e) = self.log(x, vec![LogRecord::SplitCopied { new: y }]).await {
            self.abandon(
                y,
                Err(UnknownOutcome::new(UnknownStep::SplitCopy, None).into()),
            )
            .await;
            return Err(SplitAbort::LogCopy(e));
        }
        Ok(y)
    }

    /// Settles a meganode this server allocated for a creation (a split's
    /// copy, a new root) that it gives up, given how the creating request
    /// ended: if it certainly never ran, or its server answered (a server
    /// that fails a creation stops holding what it made), the directory
    /// entry is removed; otherwise (the outcome is unknown: it may still be
    /// running) the region is retired where it is held (`DropRegion`). If
    /// that cannot be done either, the region stays listed: the log of the
    /// split names it, and the recovery of its holder drops it.
    pub(crate) async fn abandon(&self, region: RegionId, how: Result<CellResponse, Error>) {
        let never_ran = match &how {
            Ok(CellResponse::Region(_)) => false,
            Ok(_) => true,
            Err(e) => e.outcome() == nessie_protocol::Outcome::NotCommitted,
        };
        if never_ran {
            if let Err(e) = self.st.dir.update(&self.io, Update::Remove(region)).await {
                tracing::warn!(error = %e, %region, "could not remove an abandoned meganode");
            }
            return;
        }
        for _ in 0..10 {
            let holder = match self.region(region).await {
                Ok(Some(i)) => i.node,
                Ok(None) => return,
                Err(_) => {
                    self.io.backoff(Duration::from_millis(1)).await;
                    continue;
                }
            };
            match self
                .io
                .rpc(holder, CellRequest::DropRegion { region })
                .await
            {
                Ok(CellResponse::Done) => return,
                Err(Error::Unreachable(..)) => {
                    // Its holder is down: its recovery drops it.
                    return;
                }
                _ => self.io.backoff(Duration::from_millis(1)).await,
            }
        }
        tracing::warn!(%region, "an abandoned meganode could not be retired");
    }

    /// Retires `region` here: marks it so that no late request creates it
    /// again, waits for a creation of it still running here to stop, and
    /// stops holding it. The caller removes it from the directory.
    pub(crate) async fn retire(&self, region: RegionId) {
        if let Some(h) = self.st.retire_mark(region) {
            while h.creating.load(Ordering::SeqCst) {
                self.io.backoff(Duration::from_micros(20)).await;
            }
            self.st.unhost(region);
        }
    }

    /// `DropRegion`: retires an orphan and removes it from the directory.
    pub(crate) async fn drop_region(&self, region: RegionId) -> Result<CellResponse, Error> {
        self.retire(region).await;
        self.st.dir.update(&self.io, Update::Remove(region)).await?;
        Ok(CellResponse::Done)
    }

    /// Opens meganode `y` for writes on whichever server holds it.
    pub(crate) async fn open_remote(&self, y: RegionId) -> Result<(), Error> {
        for _ in 0..1000 {
            let info = match self.region(y).await {
                Ok(Some(info)) => info,
                Ok(None) => return Ok(()),
                Err(_) => {
                    self.io.backoff(Duration::from_millis(1)).await;
                    continue;
                }
            };
            match self
                .io
                .rpc(info.node, CellRequest::OpenRegion { region: y })
                .await
            {
                Ok(CellResponse::Done) => return Ok(()),
                _ => self.io.backoff(Duration::from_millis(1)).await,
            }
        }
        Err(Error::Timeout)
    }

    /// Step 3: points X_left's right ends at Y's root; returns X_right's
    /// nodes (top level first), which the relink took out of X.
    pub(crate) async fn relink(
        &self,
        x: RegionId,
        split: &[u8],
        y: RegionId,
    ) -> Result<Vec<NodePtr>, Error> {
        let root_ptr = NodePtr::root_of(x);
        let y_root = NodePtr::root_of(y);
        let root_guard = self.lock(root_ptr).await;
        let mut root = self.read_node(root_ptr).await?;
        let i = root
            .entries
            .iter()
            .position(|e| e.key.as_slice() == split)
            .ok_or_else(|| {
                Error::corrupt(
                    CorruptionKind::Memory,
                    format!("split key left the root of {x}"),
                )
            })?;
        let mut left = root.entries[i - 1].child();
        let mut first_right = root.entries[i].child();
        let mut right_nodes = Vec::new();
        for _level in (0..root.level).rev() {
            let (Some(mut b), Some(fr)) = (left, first_right) else {
                return Err(Error::corrupt(
                    CorruptionKind::Memory,
                    "relink: missing child",
                ));
            };
            // X_right at this level: from its first node rightwards within X.
            let mut p = fr;
            let mut first_node = None;
            while !p.is_null() && p.region == x {
                let n = self.read_node(p).await?;
                right_nodes.push(p);
                let r = n.right;
                if first_node.is_none() {
                    first_node = Some(n);
                }
                p = r;
            }
            // The X_left node ending at the split key.
            let mut n = self.read_node(b).await?;
            while n.max.as_deref() != Some(split) {
                if n.right.is_null() || n.right.region != x {
                    return Err(Error::corrupt(
                        CorruptionKind::Memory,
                        format!("relink: no boundary in {x}"),
                    ));
                }
                b = n.right;
                n = self.read_node(b).await?;
            }
            let g = self.lock(b).await;
            let mut n = self.read_node(b).await?;
            n.right = y_root;
            self.write_node(b, &n, n.version).await?;
            drop(g);
            left = n.entries.last().and_then(Entry::child);
            first_right = first_node.and_then(|f| f.entries.first().and_then(Entry::child));
        }
        let keep: Vec<Entry> = root.entries.drain(..i).collect();
        root.entries = keep;
        root.max = Some(split.to_vec());
        root.right = y_root;
        self.write_node(root_ptr, &root, root.version).await?;
        drop(root_guard);
        Ok(right_nodes)
    }

    /// Step 4: clears the valid flag of `nodes`, frees them (after the
    /// grace) and the extents their leaves held.
    async fn invalidate(
        &self,
        h: &std::sync::Arc<super::Hosted>,
        nodes: &[NodePtr],
    ) -> Result<(), Error> {
        let grace = if self.st.cfg.faults.reuse_at_once {
            Duration::ZERO
        } else {
            self.st.cfg.node_reuse_grace
        };
        for &p in nodes {
            let g = self.lock(p).await;
            let mut n = self.read_node(p).await?;
            if !n.valid {
                continue;
            }
            n.valid = false;
            self.write_node(p, &n, n.version).await?;
            drop(g);
            let mut a = lock(&h.alloc);
            a.nodes.free(p.index, self.io.now(), grace);
            if n.leaf {
                for e in n.entries.iter().filter_map(Entry::extent) {
                    if e.region == h.id {
                        a.heap.free(e.offset, e.len);
                    }
                }
            }
        }
        Ok(())
    }

    /// `CopyMeganode` (step 2, on the new meganode's server): copies the
    /// part of `source` from `split` up into the new meganode `y`, which the
    /// splitter allocated in slot `slot` here. A failure leaves nothing held
    /// (the splitter then removes `y` from the directory); a `y` retired
    /// here (the split was abandoned: [`Srv::retire`]) is not created, or
    /// its creation stops at its next write.
    pub(crate) async fn copy_meganode(
        &self,
        source: RegionId,
        split: &[u8],
        y: RegionId,
        slot: u32,
    ) -> Result<CellResponse, Error> {
        if self.st.is_retired(y) {
            return Ok(CellResponse::Failed(Refusal::Retired(y)));
        }
        let src_root = self.read_node(NodePtr::root_of(source)).await?;
        let Some(i) = src_root
            .entries
            .iter()
            .position(|e| e.key.as_slice() == split)
        else {
            return Ok(CellResponse::Failed(Refusal::NotSeparator(source)));
        };
        // Read X_right level by level, top down.
        let mut levels: Vec<Vec<(u32, Node)>> = Vec::new();
        let mut first = src_root.entries[i].child();
        for level in (0..src_root.level).rev() {
            let mut list = Vec::new();
            let mut p = first
                .ok_or_else(|| Error::corrupt(CorruptionKind::Memory, "copy: missing child"))?;
            while !p.is_null() && p.region == source {
                let n = self.read_node(p).await?;
                if !n.valid {
                    return Ok(CellResponse::Failed(Refusal::InvalidNode(p)));
                }
                let r = n.right;
                list.push((p.index, n));
                p = r;
            }
            if level > 0 {
                first = list
                    .first()
                    .and_then(|(_, n)| n.entries.first())
                    .and_then(Entry::child);
            }
            levels.push(list);
        }
        let count: usize = levels.iter().map(Vec::len).sum();
        if count + 1 > self.st.cfg.meganode_nodes as usize {
            return Ok(CellResponse::Failed(Refusal::CopyTooLarge));
        }
        let mut used = vec![false; self.st.cfg.meganode_nodes as usize];
        used[..=count].iter_mut().for_each(|u| *u = true);
        let Some(h) = self.st.host_new(
            y,
            slot,
            RegionAlloc {
                nodes: NodePool::new(self.st.cfg.meganode_nodes, &used),
                heap: super::alloc::Heap::new(self.st.cfg.heap_bytes as u32),
            },
            GateMode::Frozen,
            u32::from(src_root.level) + 1,
        ) else {
            return Ok(CellResponse::Failed(Refusal::Retired(y)));
        };
        let _creating = Creating(h.clone());
        let r = self
            .fill_copy(&h, source, split, &src_root, i, levels)
            .await;
        self.created(&h, r).await
    }

    /// Ends the creation of `h`: publishes it if `r` says it is complete
    /// and it was not retired meanwhile; otherwise stops holding it.
    async fn created(
        &self,
        h: &Arc<super::Hosted>,
        r: Result<bool, Error>,
    ) -> Result<CellResponse, Error> {
        match r {
            Ok(true) if !self.st.is_retired(h.id) => {
                if let Err(e) = self.st.dir.publish(&self.io, h.id).await {
                    self.st.unhost(h.id);
                    return Err(e);
                }
                Ok(CellResponse::Region(h.id))
            }
            Ok(_) => {
                self.st.unhost(h.id);
                Ok(CellResponse::Failed(Refusal::Retired(h.id)))
            }
            Err(e) => {
                self.st.unhost(h.id);
                Err(e)
            }
        }
    }

    /// Writes the copy of X_right into `h` (node 0 last); false if `h` was
    /// retired meanwhile.
    async fn fill_copy(
        &self,
        h: &Arc<super::Hosted>,
        source: RegionId,
        split: &[u8],
        src_root: &Node,
        i: usize,
        levels: Vec<Vec<(u32, Node)>>,
    ) -> Result<bool, Error> {
        let y = h.id;
        self.log(
            y,
            vec![LogRecord::Created {
                source: Some(source),
            }],
        )
        .await?;
        self.write_header(h).await?;
        let mut map = HashMap::new();
        let mut next = 1u32;
        for list in &levels {
            for (old, _) in list {
                map.insert(*old, next);
                next += 1;
            }
        }
        let remap = |p: NodePtr| -> NodePtr {
            if p.region == source {
                map.get(&p.index)
                    .map_or(NodePtr::NULL, |&i| NodePtr::new(y, i))
            } else {
                p
            }
        };
        let mut root = src_root.clone();
        root.entries = src_root.entries[i..].to_vec();
        root.min = split.to_vec();
        let mut nodes: Vec<(NodePtr, Node)> = vec![(NodePtr::root_of(y), root)];
        for list in levels {
            for (old, n) in list {
                nodes.push((NodePtr::new(y, map[&old]), n));
            }
        }
        for (_, n) in &mut nodes {
            if self.st.is_retired(y) {
                return Ok(false);
            }
            n.right = remap(n.right);
            for e in &mut n.entries {
                if let Payload::Child(c) = &mut e.payload {
                    *c = remap(*c);
                }
            }
            if n.leaf {
                self.copy_extents(h, n).await?;
            }
        }
        // Node 0 last: the meganode is complete once its root is written.
        nodes.rotate_left(1);
        for (p, n) in &nodes {
            if self.st.is_retired(y) {
                return Ok(false);
            }
            self.write_fresh(*p, n).await?;
        }
        Ok(true)
    }

    /// Copies a leaf's extents into `h`'s heap and repoints its entries.
    async fn copy_extents(&self, h: &super::Hosted, leaf: &mut Node) -> Result<(), Error> {
        for chunk in leaf.entries.chunks_mut(EXTENT_BATCH) {
            let ptrs: Vec<_> = chunk.iter().filter_map(Entry::extent).collect();
            let bytes = self.read_extents(&ptrs).await?;
            for ((e, p), b) in chunk.iter_mut().zip(&ptrs).zip(bytes) {
                if extent::verify(&b, p, &e.key, false) == extent::ExtentRead::Mismatch {
                    return Err(Error::corrupt(
                        CorruptionKind::Memory,
                        format!("copy: extent of {:?} fails its CRC", e.key),
                    ));
                }
                let np = self.write_extent(h, &b).await?.ok_or_else(|| {
                    Error::corrupt(
                        CorruptionKind::Resource,
                        "copy: the new meganode's heap is full",
                    )
                })?;
                e.payload = Payload::Extent(np);
            }
        }
        Ok(())
    }

    /// Writes a region's header word (and, for region 1, nothing else: the
    /// root word is written by its owner).
    pub(crate) async fn write_header(&self, h: &super::Hosted) -> Result<(), Error> {
        let w = header_word(h.id).to_le_bytes().to_vec();
        let r = self
            .io
            .round(
                vec![Op::LocalWrite {
                    offset: h.base,
                    data: w.clone(),
                }],
                OpClass::Other,
            )
            .await;
        written(&r[0])?;
        self.log(
            h.id,
            vec![LogRecord::Write {
                offset: 0,
                bytes: w,
            }],
        )
        .await
    }

    /// `NewRoot`: the new root meganode `p` (allocated by the caller in
    /// slot `slot` here) over `left` and `right`; as for a copy, a failure
    /// leaves nothing held and a retired `p` is not created.
    pub(crate) async fn new_root(
        &self,
        left: NodePtr,
        split: &[u8],
        right: NodePtr,
        p: RegionId,
        slot: u32,
    ) -> Result<CellResponse, Error> {
        let Some(h) = self
            .st
            .host_new(p, slot, self.st.fresh_alloc(), GateMode::Open, 1)
        else {
            return Ok(CellResponse::Failed(Refusal::Retired(p)));
        };
        let _creating = Creating(h.clone());
        let r = self.fill_new_root(&h, left, split, right).await;
        self.created(&h, r).await
    }

    /// Writes the new root meganode `h` over `left` and `right`.
    async fn fill_new_root(
        &self,
        h: &Arc<super::Hosted>,
        left: NodePtr,
        split: &[u8],
        right: NodePtr,
    ) -> Result<bool, Error> {
        self.log(h.id, vec![LogRecord::Created { source: None }])
            .await?;
        self.write_header(h).await?;
        let mut root = Node::empty(false, false, 0, Vec::new(), None);
        root.entries = vec![
            Entry {
                key: Vec::new(),
                payload: Payload::Child(left),
            },
            Entry {
                key: split.to_vec(),
                payload: Payload::Child(right),
            },
        ];
        if self.st.is_retired(h.id) {
            return Ok(false);
        }
        self.write_fresh(NodePtr::root_of(h.id), &root).await?;
        Ok(true)
    }

    /// `SetRoot`: replaces the root word if it is still `expect`: `Done` if
    /// the root word is `new` (now, or already), `Restart(Structure)` if it
    /// is neither.
    pub(crate) async fn set_root(
        &self,
        expect: NodePtr,
        new: NodePtr,
    ) -> Result<CellResponse, Error> {
        let Some(h) = self.st.hosted(ROOT_REGION) else {
            return Ok(CellResponse::Failed(Refusal::RootNotHeld));
        };
        let _g = self.lock(NodePtr::NULL).await;
        let cur = self.root_word().await?;
        if cur == new {
            // Already done (a retried request, or a recovery's roll-forward).
            return Ok(CellResponse::Done);
        }
        if cur != expect {
            return Ok(CellResponse::Restart(RestartCause::Structure));
        }
        let data = new.encode().to_le_bytes().to_vec();
        let r = self
            .io
            .round(
                vec![Op::LocalWrite {
                    offset: h.base + ROOT_WORD_OFFSET,
                    data: data.clone(),
                }],
                OpClass::Other,
            )
            .await;
        written(&r[0])?;
        self.log(
            ROOT_REGION,
            vec![LogRecord::Write {
                offset: ROOT_WORD_OFFSET,
                bytes: data,
            }],
        )
        .await?;
        Ok(CellResponse::Done)
    }

    /// `InsertChild`: the parent entry `key` -> `child` above meganode `below`.
    pub(crate) async fn insert_child(
        &self,
        start: NodePtr,
        key: &[u8],
        child: NodePtr,
        below: RegionId,
    ) -> Result<CellResponse, Error> {
        let goal = Goal::ParentOf {
            below,
            child: child.region,
        };
        let (ptr, path) = match self.descend(start, key, goal).await? {
            Descent::Found { ptr, path, .. } => (ptr, path),
            Descent::Remote { next, lo, hi } => return Ok(CellResponse::Continue { next, lo, hi }),
            Descent::Restart(c) => return Ok(CellResponse::Restart(c)),
        };
        let Some(h) = self.st.hosted(ptr.region) else {
            return Ok(CellResponse::Restart(RestartCause::Structure));
        };
        let Some(_pass) = GatePass::enter(&h, key) else {
            return Ok(self.busy());
        };
        let need = h.height.load(Ordering::Relaxed) + 2;
        let Some(mut res) = Reservation::take(&h, need, self.io.now()) else {
            self.st.push_job_split(&h);
            return Ok(self.busy());
        };
        let guard = self.lock(ptr).await;
        let mut node = self.read_node(ptr).await?;
        // (node 0 may have grown a level since the descent read it)
        if !node.valid || node.level != 0 || node.cover(key) != crate::node::Cover::Inside {
            return Ok(CellResponse::Restart(RestartCause::Structure));
        }
        if node.find(key).and_then(Entry::child) == Some(child) {
            return Ok(CellResponse::Done);
        }
        match node.child_for(key) {
            Some((c, _, _)) if c.region == below => {}
            _ => return Ok(CellResponse::Restart(RestartCause::Structure)),
        }
        node.upsert(Entry {
            key: key.to_vec(),
            payload: Payload::Child(child),
        });
        self.store(&h, ptr, node, guard, &path, &mut res).await?;
        self.st.maybe_split(&h);
        Ok(CellResponse::Done)
    }

    /// `OpenRegion`: lets writes into a meganode a split created.
    pub(crate) async fn open_region(&self, region: RegionId) -> Result<CellResponse, Error> {
        let Some(h) = self.st.hosted(region) else {
            return Ok(CellResponse::Failed(Refusal::NotHeld(region)));
        };
        let was_frozen = {
            let mut g = lock(&h.gate);
            let f = g.mode == GateMode::Frozen;
            if f {
                g.mode = GateMode::Open;
            }
            f
        };
        if was_frozen {
            self.log(region, vec![LogRecord::Opened]).await?;
        }
        Ok(CellResponse::Done)
    }

    /// Step 5: inserts `key` -> `child` into the parent of `below`, or makes
    /// a new root meganode if `below` is the root; then logs
    /// [`LogRecord::SplitLinked`] in `below`'s log (a recovery that finds a
    /// finished split without it links the parent again: every step here
    /// is idempotent).
    pub(crate) async fn link_parent(
        &self,
        below: RegionId,
        key: &[u8],
        child: RegionId,
    ) -> Result<(), Error> {
        self.link_parent_once(below, key, child).await?;
        self.log(below, vec![LogRecord::SplitLinked { new: child }])
            .await
    }

    async fn link_parent_once(
        &self,
        below: RegionId,
        key: &[u8],
        child: RegionId,
    ) -> Result<(), Error> {
        let child_root = NodePtr::root_of(child);
        for _ in 0..10_000 {
            let root = self.read_root_anywhere().await?;
            if root.region == below {
                if self.new_root_over(below, key, child_root).await? {
                    return Ok(());
                }
                self.io.backoff(Duration::from_millis(1)).await;
                continue;
            }
            let mut start = root;
            loop {
                let node = self.holder(start.region).await?;
                let r = self
                    .io
                    .rpc(
                        node,
                        CellRequest::InsertChild {
                            start,
                            key: key.to_vec(),
                            child: child_root,
                            below,
                        },
                    )
                    .await;
                match r {
                    Ok(CellResponse::Done) => return Ok(()),
                    Ok(CellResponse::Continue { next, .. }) => start = next,
                    _ => {
                        self.io.backoff(Duration::from_millis(1)).await;
                        break;
                    }
                }
            }
        }
        Err(Error::Timeout)
    }

    /// Makes a new root meganode P over `below` (the root meganode) and
    /// `right`, split at `key`, and moves the root word to it: P is
    /// allocated on the least loaded server and named in `below`'s log
    /// (`SplitNewRoot`) before it is made, so that it is never lost track
    /// of. True once the root word names P; false if this attempt was
    /// given up (P settled: removed or retired) and the caller should look
    /// at the root again.
    async fn new_root_over(
        &self,
        below: RegionId,
        key: &[u8],
        right: NodePtr,
    ) -> Result<bool, Error> {
        let target = self.choose_target().await;
        let Some((p, slot)) = self.st.dir.allocate(&self.io, target, self.st.node).await? else {
            return Ok(false);
        };
        if let Err(e) = self
            .log(
                below,
                vec![LogRecord::SplitNewRoot {
                    root: p,
                    new: right.region,
                }],
            )
            .await
        {
            self.abandon(p, Ok(CellResponse::Failed(Refusal::NotSent)))
                .await;
            return Err(e);
        }
        let left = NodePtr::root_of(below);
        let made = self
            .io
            .rpc(
                target,
                CellRequest::NewRoot {
                    left,
                    split: key.to_vec(),
                    right,
                    new: p,
                    slot,
                },
            )
            .await;
        if made != Ok(CellResponse::Region(p)) {
            self.abandon(p, made).await;
            return Ok(false);
        }
        self.set_root_to(left, p).await
    }

    /// Moves the root word from `left` to the root of the complete new root
    /// meganode `p`, asking again while the answer is unknown (the request
    /// is idempotent). True once the root word names `p`; false if it names
    /// neither (`p` can then never become the root: it is retired).
    pub(crate) async fn set_root_to(&self, left: NodePtr, p: RegionId) -> Result<bool, Error> {
        for _ in 0..1000 {
            let holder = match self.holder(ROOT_REGION).await {
                Ok(h) => h,
                Err(_) => {
                    self.io.backoff(Duration::from_millis(1)).await;
                    continue;
                }
            };
            let req = CellRequest::SetRoot {
                expect: left,
                new: NodePtr::root_of(p),
            };
            match self.io.rpc(holder, req).await {
                Ok(CellResponse::Done) => return Ok(true),
                Ok(CellResponse::Restart(_)) => {
                    self.abandon(p, Ok(CellResponse::Region(p))).await;
                    return Ok(false);
                }
                _ => self.io.backoff(Duration::from_millis(1)).await,
            }
        }
        Err(Error::Timeout)
    }

    async fn holder(&self, region: RegionId) -> Result<NodeId, Error> {
        self.region(region).await?.map(|i| i.node).ok_or_else(|| {
            Error::corrupt(CorruptionKind::Memory, format!("unknown region {region}"))
        })
    }

    /// The root word, read wherever region 1 is.
    pub(crate) async fn read_root_anywhere(&self) -> Result<NodePtr, Error> {
        self.root_word().await
    }
}

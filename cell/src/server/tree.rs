//! Server-side B-link tree operations (§2.2), following Sagiv: searches take
//! no locks and follow right links; an insert or delete locks one node at a
//! time (the leaf, moving right under the lock as needed); a split writes
//! the new right half, then the shrunk left half with its right link to it,
//! unlocks, and inserts the separator into the parent as a separate step,
//! which may split the parent in turn. The root of a meganode stays at node
//! 0: when it splits, both halves move to new nodes and node 0 becomes their
//! parent, so pointers to a meganode never change.
//!
//! A server searches across every meganode it holds and answers
//! `Continue` with the pointer where its meganodes end.

use nessie_protocol::{CorruptionKind, Error, Op};

use super::{lock, GatePass, Hosted, NodeLock, Reservation, Srv};
use crate::extent::{self, ExtentRead};
use crate::machine::OpClass;
use crate::node::{below, Cover, Entry, Node, Payload};
use crate::ptr::{NodePtr, RegionId};
use crate::wire::{CellResponse, RestartCause};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Bound on the nodes one descent visits.
const MAX_STEPS: usize = 4096;
/// Bound on the attempts of a server-side read that meets concurrent writes.
const ATTEMPTS: usize = 64;

/// Where a descent stops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Goal {
    /// At the leaf covering the key.
    Leaf,
    /// At the level-0 node of an upper meganode whose entry for the key
    /// leads into meganode `below` (or already to `child`).
    ParentOf {
        /// The meganode that was split.
        below: RegionId,
        /// The new meganode.
        child: RegionId,
    },
}

/// Where a descent ended.
#[derive(Clone, Debug)]
pub enum Descent {
    /// The goal: its pointer, its content, and the node visited at each
    /// level of its meganode (null where none was).
    Found {
        /// The node.
        ptr: NodePtr,
        /// Its content.
        node: Node,
        /// Path within the node's meganode, by level.
        path: Vec<NodePtr>,
    },
    /// The search leaves this server's meganodes.
    Remote {
        /// Where it continues.
        next: NodePtr,
        /// Lowest key of the entry that led there.
        lo: Vec<u8>,
        /// Its bound.
        hi: Option<Vec<u8>>,
    },
    /// The path met an invalidated or reused node: restart from the top.
    Restart(RestartCause),
}

fn set_path(path: &mut Vec<NodePtr>, level: u8, p: NodePtr) {
    let l = level as usize;
    if path.len() <= l {
        path.resize(l + 1, NodePtr::NULL);
    }
    path[l] = p;
}

impl Srv {
    /// Descends from `start` (null: the root word) towards `key`.
    pub(crate) async fn descend(
        &self,
        start: NodePtr,
        key: &[u8],
        goal: Goal,
    ) -> Result<Descent, Error> {
        let mut ptr = if start.is_null() {
            if !self.is_local(crate::ptr::ROOT_REGION) {
                return Ok(Descent::Restart(RestartCause::Structure));
            }
            self.root_word().await?
        } else {
            start
        };
        let (mut lo, mut hi) = (Vec::new(), None);
        let mut path = Vec::new();
        let mut path_region = ptr.region;
        for _ in 0..MAX_STEPS {
            if ptr.is_null() {
                return Ok(Descent::Restart(RestartCause::Structure));
            }
            if !self.is_local(ptr.region) {
                return Ok(Descent::Remote { next: ptr, lo, hi });
            }
            if ptr.region != path_region {
                path.clear();
                path_region = ptr.region;
            }
            let node = self.read_node(ptr).await?;
            if !node.valid {
                return Ok(Descent::Restart(RestartCause::Invalid));
            }
            match node.cover(key) {
                Cover::Left => return Ok(Descent::Restart(RestartCause::MinMax)),
                Cover::Right => {
                    lo = node.max.clone().unwrap_or_default();
                    hi = None;
                    ptr = node.right;
                    continue;
                }
                Cover::Inside => {}
            }
            set_path(&mut path, node.level, ptr);
            if node.leaf {
                return Ok(match goal {
                    Goal::Leaf => Descent::Found { ptr, node, path },
                    Goal::ParentOf { .. } => Descent::Restart(RestartCause::Structure),
                });
            }
            let (child, clo, chi) = node.child_for(key).ok_or_else(|| {
                Error::corrupt(
                    CorruptionKind::Memory,
                    format!("inner node {ptr} has no entries"),
                )
            })?;
            if let Goal::ParentOf { below, child: new } = goal {
                if node.level == 0 && !node.bottom && (child.region == below || child.region == new)
                {
                    return Ok(Descent::Found { ptr, node, path });
                }
            }
            lo = clo;
            hi = chi;
            ptr = child;
        }
        Err(Error::corrupt(
            CorruptionKind::Memory,
            "descent did not converge",
        ))
    }

    /// `Search`: the value (or presence) of `key`, or where to continue.
    pub(crate) async fn search(
        &self,
        start: NodePtr,
        key: &[u8],
        want: bool,
    ) -> Result<CellResponse, Error> {
        for _ in 0..ATTEMPTS {
            let node = match self.descend(start, key, Goal::Leaf).await? {
                Descent::Found { node, .. } => node,
                Descent::Remote { next, lo, hi } => {
                    return Ok(CellResponse::Continue { next, lo, hi })
                }
                Descent::Restart(c) => return Ok(CellResponse::Restart(c)),
            };
            let Some(e) = node.find(key).and_then(Entry::extent) else {
                return Ok(CellResponse::Absent);
            };
            if !want {
                return Ok(CellResponse::Present);
            }
            let bytes = self.read_extent(&e).await?;
            // A concurrent update may have freed and reused the extent since
            // the leaf was read: its CRC tells.
            if let ExtentRead::Value(v) = extent::verify(&bytes, &e, key, false) {
                return Ok(CellResponse::Found(v));
            }
        }
        Ok(CellResponse::Busy)
    }

    /// Locks the node of `start`'s level covering `key`, moving right under
    /// the lock; `Err(next)` when the key lies beyond this meganode.
    async fn lock_covering(
        &self,
        start: NodePtr,
        key: &[u8],
        level: u8,
    ) -> Result<Result<(NodePtr, Node, NodeLock), Result<NodePtr, RestartCause>>, Error> {
        let mut ptr = start;
        let mut guard = self.lock(ptr).await;
        loop {
            let node = self.read_node(ptr).await?;
            if !node.valid {
                return Ok(Err(Err(RestartCause::Invalid)));
            }
            if node.level != level {
                // A meganode's root (node 0) grew a level since it was read:
                // start again from it.
                return Ok(Err(Ok(ptr)));
            }
            match node.cover(key) {
                Cover::Left => return Ok(Err(Err(RestartCause::MinMax))),
                Cover::Inside => return Ok(Ok((ptr, node, guard))),
                Cover::Right => {
                    let next = node.right;
                    if next.is_null() || next.region != ptr.region {
                        return Ok(Err(Ok(next)));
                    }
                    drop(guard);
                    ptr = next;
                    guard = self.lock(ptr).await;
                }
            }
        }
    }

    /// `Write`: stores `value` under `key` (or deletes it) at its leaf.
    pub(crate) async fn write(
        &self,
        start: NodePtr,
        key: &[u8],
        value: Option<&[u8]>,
    ) -> Result<CellResponse, Error> {
        let mut start = start;
        for _ in 0..ATTEMPTS {
            let (leaf, path) = match self.descend(start, key, Goal::Leaf).await? {
                Descent::Found { ptr, path, .. } => (ptr, path),
                Descent::Remote { next, lo, hi } => {
                    return Ok(CellResponse::Continue { next, lo, hi })
                }
                Descent::Restart(c) => return Ok(CellResponse::Restart(c)),
            };
            let Some(h) = self.st.hosted(leaf.region) else {
                return Ok(CellResponse::Restart(RestartCause::Structure));
            };
            let Some(pass) = GatePass::enter(&h, key) else {
                return Ok(self.busy());
            };
            let need = h.height.load(Ordering::Relaxed) + 2;
            let Some(mut res) = Reservation::take(&h, need, self.io.now()) else {
                self.st.push_job_split(&h);
                return Ok(self.busy());
            };
            let (ptr, mut node, guard) = match self.lock_covering(leaf, key, 0).await? {
                Ok(x) => x,
                Err(Ok(next)) => {
                    start = next;
                    continue;
                }
                Err(Err(c)) => return Ok(CellResponse::Restart(c)),
            };
            let (existed, old) = match value {
                Some(v) => {
                    let bytes = extent::encode(key, v);
                    let Some(e) = self.write_extent(&h, &bytes).await? else {
                        self.st.push_job_split(&h);
                        return Ok(self.busy());
                    };
                    let old = node.upsert(Entry {
                        key: key.to_vec(),
                        payload: Payload::Extent(e),
                    });
                    (old.is_some(), old.and_then(|e| e.extent()))
                }
                None => match node.remove(key) {
                    Some(e) => (true, e.extent()),
                    None => return Ok(CellResponse::Written { existed: false }),
                },
            };
            self.store(&h, ptr, node, guard, &path, &mut res).await?;
            if let Some(old) = old {
                lock(&h.alloc).heap.free(old.offset, old.len);
            }
            drop(res);
            drop(pass);
            self.st.maybe_split(&h);
            return Ok(CellResponse::Written { existed });
        }
        Ok(self.busy())
    }

    pub(crate) fn busy(&self) -> CellResponse {
        self.st.counters.busy.fetch_add(1, Ordering::Relaxed);
        CellResponse::Busy
    }

    /// Writes `node` (changed under `guard`) back to `ptr`, splitting it if
    /// it no longer fits and inserting separators upwards as needed.
    pub(crate) async fn store(
        &self,
        h: &Arc<Hosted>,
        ptr: NodePtr,
        node: Node,
        guard: NodeLock,
        path: &[NodePtr],
        res: &mut Reservation,
    ) -> Result<(), Error> {
        let mut up = self.store_one(h, ptr, node, guard, res).await?;
        while let Some((level, key, child)) = up {
            up = self
                .insert_separator(h, level, key, child, path, res)
                .await?;
        }
        Ok(())
    }

    /// Writes one node, splitting it if needed; returns the separator to
    /// insert one level up, if any.
    async fn store_one(
        &self,
        h: &Arc<Hosted>,
        ptr: NodePtr,
        mut node: Node,
        guard: NodeLock,
        res: &mut Reservation,
    ) -> Result<Option<(u8, Vec<u8>, NodePtr)>, Error> {
        let nb = self.st.layout.node_bytes as usize;
        if node.fits(nb) {
            self.write_node(ptr, &node, node.version).await?;
            drop(guard);
            return Ok(None);
        }
        self.st.counters.node_splits.fetch_add(1, Ordering::Relaxed);
        if ptr.index == 0 {
            // The meganode's root splits in place: both halves move out and
            // node 0 becomes their parent, one level up.
            let version = node.version;
            let (old_max, old_right) = (node.max.clone(), node.right);
            let mut left = node.clone();
            left.version = 0;
            let right = left.split_off();
            let l = res.node()?;
            let r = res.node()?;
            left.right = r;
            self.write_fresh(r, &right).await?;
            self.write_fresh(l, &left).await?;
            let root = Node {
                version,
                valid: true,
                leaf: false,
                bottom: node.bottom,
                level: node.level + 1,
                min: node.min.clone(),
                max: old_max,
                right: old_right,
                entries: vec![
                    Entry {
                        key: left.min.clone(),
                        payload: Payload::Child(l),
                    },
                    Entry {
                        key: right.min.clone(),
                        payload: Payload::Child(r),
                    },
                ],
            };
            self.write_node(ptr, &root, version).await?;
            h.height.store(u32::from(root.level) + 1, Ordering::Relaxed);
            drop(guard);
            return Ok(None);
        }
        let version = node.version;
        let right = node.split_off();
        let r = res.node()?;
        node.right = r;
        self.write_fresh(r, &right).await?;
        self.write_node(ptr, &node, version).await?;
        drop(guard);
        Ok(Some((node.level + 1, right.min, r)))
    }

    /// Inserts `key` -> `child` at `level` of `h`'s meganode, starting from
    /// the path hint or the meganode's root; returns the next separator up.
    async fn insert_separator(
        &self,
        h: &Arc<Hosted>,
        level: u8,
        key: Vec<u8>,
        child: NodePtr,
        path: &[NodePtr],
        res: &mut Reservation,
    ) -> Result<Option<(u8, Vec<u8>, NodePtr)>, Error> {
        let root = NodePtr::root_of(h.id);
        let mut hint = path
            .get(level as usize)
            .copied()
            .filter(|p| !p.is_null())
            .unwrap_or(root);
        for _ in 0..ATTEMPTS {
            let Some(ptr) = self.find_level(h, level, &key, hint).await? else {
                return Err(Error::corrupt(
                    CorruptionKind::Memory,
                    format!("no level {level} in meganode {}", h.id),
                ));
            };
            match self.lock_covering(ptr, &key, level).await? {
                Ok((ptr, mut node, guard)) => {
                    node.upsert(Entry {
                        key,
                        payload: Payload::Child(child),
                    });
                    return self.store_one(h, ptr, node, guard, res).await;
                }
                // The node changed level (node 0 grew): find the level again.
                Err(Ok(_)) => hint = root,
                Err(Err(_)) => {
                    return Err(Error::corrupt(
                        CorruptionKind::Memory,
                        format!("no node for a separator in {}", h.id),
                    ))
                }
            }
        }
        Err(Error::Conflict)
    }

    /// The node at `level` of `h`'s meganode covering `key` (lock-free),
    /// from `hint` or the meganode's root.
    async fn find_level(
        &self,
        h: &Arc<Hosted>,
        level: u8,
        key: &[u8],
        hint: NodePtr,
    ) -> Result<Option<NodePtr>, Error> {
        let root = NodePtr::root_of(h.id);
        let mut ptr = hint;
        for _ in 0..MAX_STEPS {
            let n = self.read_node(ptr).await?;
            if !n.valid || n.level < level || n.cover(key) == Cover::Left {
                if ptr == root {
                    return Ok(None);
                }
                ptr = root;
                continue;
            }
            if n.cover(key) == Cover::Right {
                if n.right.is_null() || n.right.region != h.id {
                    return Err(Error::corrupt(
                        CorruptionKind::Memory,
                        format!("separator beyond meganode {}", h.id),
                    ));
                }
                ptr = n.right;
                continue;
            }
            if n.level == level {
                return Ok(Some(ptr));
            }
            let (c, _, _) = n.child_for(key).ok_or_else(|| {
                Error::corrupt(CorruptionKind::Memory, "inner node without entries")
            })?;
            ptr = c;
        }
        Ok(None)
    }

    /// `Scan`: entries of `from..to`, at most `limit`, from the leaves this
    /// server holds, validated by re-reading their versions (a double
    /// collect); `next` says where the scan continues.
    pub(crate) async fn scan(
        &self,
        start: NodePtr,
        from: &[u8],
        to: Option<&[u8]>,
        limit: usize,
        contiguous: bool,
    ) -> Result<CellResponse, Error> {
        let max_leaves = self.st.cfg.scan_page as usize + 8;
        'attempt: for _ in 0..ATTEMPTS {
            let (mut ptr, mut node) = match self.descend(start, from, Goal::Leaf).await? {
                Descent::Found { ptr, node, .. } => (ptr, node),
                Descent::Remote { next, lo, hi } => {
                    return Ok(CellResponse::Continue { next, lo, hi })
                }
                Descent::Restart(c) => return Ok(CellResponse::Restart(c)),
            };
            if contiguous && node.min != from {
                continue 'attempt;
            }
            let mut entries = Vec::new();
            let mut leaves = Vec::new();
            let mut next = None;
            loop {
                leaves.push((ptr, node.version));
                let want: Vec<&Entry> = node
                    .entries
                    .iter()
                    .filter(|e| e.key.as_slice() >= from && to.is_none_or(|t| e.key.as_slice() < t))
                    .take(limit - entries.len())
                    .collect();
                let ptrs: Vec<_> = want.iter().filter_map(|e| e.extent()).collect();
                let bytes = self.read_extents(&ptrs).await?;
                for ((e, p), b) in want.iter().zip(&ptrs).zip(&bytes) {
                    match extent::verify(b, p, &e.key, false) {
                        ExtentRead::Value(v) => entries.push((e.key.clone(), v)),
                        ExtentRead::Mismatch => continue 'attempt,
                    }
                }
                let ended = match (&node.max, to) {
                    (None, _) => true,
                    (Some(m), Some(t)) => m.as_slice() >= t,
                    (Some(_), None) => false,
                };
                if entries.len() >= limit || ended {
                    break;
                }
                let cursor = node.max.clone().unwrap_or_default();
                let r = node.right;
                if r.is_null() {
                    break;
                }
                if !self.is_local(r.region) || leaves.len() >= max_leaves {
                    next = Some((r, cursor));
                    break;
                }
                match self.descend(r, &cursor, Goal::Leaf).await? {
                    Descent::Found {
                        ptr: p, node: n, ..
                    } if n.min == cursor => {
                        ptr = p;
                        node = n;
                    }
                    Descent::Found { .. } | Descent::Restart(_) => continue 'attempt,
                    Descent::Remote { next: nx, .. } => {
                        next = Some((nx, cursor));
                        break;
                    }
                }
            }
            if !self.validate(&leaves).await? {
                continue 'attempt;
            }
            return Ok(CellResponse::Scanned {
                entries,
                leaves,
                next,
            });
        }
        Ok(self.busy())
    }

    /// Whether every leaf still has the version it was read at.
    pub(crate) async fn validate(&self, leaves: &[(NodePtr, u64)]) -> Result<bool, Error> {
        let mut ops = Vec::with_capacity(leaves.len());
        for (p, _) in leaves {
            let Some(h) = self.st.hosted(p.region) else {
                return Ok(false);
            };
            ops.push(Op::LocalRead {
                offset: h.base + self.st.layout.node_offset(p.index),
                len: 8,
            });
        }
        let rs = self.io.round(ops, OpClass::Other).await;
        for ((_, v), r) in leaves.iter().zip(&rs) {
            let b = crate::machine::read_bytes(r)?;
            if u64::from_le_bytes(b.try_into().unwrap_or([0; 8])) != *v {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

impl super::ServerNode {
    /// Queues a split of `h` (it is full), if splits are automatic.
    pub(crate) fn push_job_split(&self, h: &Hosted) {
        if self.cfg.auto_split {
            self.push_job(super::Job::Split(h.id));
        }
    }
}

/// Whether `key` is below the optional bound `to`.
pub fn before(key: &[u8], to: Option<&[u8]>) -> bool {
    below(key, &to.map(<[u8]>::to_vec))
}

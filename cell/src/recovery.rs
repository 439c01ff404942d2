//! Failure recovery (§2.6), as far as the paper's prototype: when a server
//! fails, the survivors take over its regions in turn, each rebuilding a
//! region from the region's log into one of its free region slots, and the
//! directory moves the region (pointers name regions, so nothing in the tree
//! changes). A rebuilt meganode's allocators come from its contents: the
//! nodes reachable from its root, the extents its valid leaves point to.
//!
//! Splits the failure interrupted are settled from the logs' split records:
//! a split of a recovered meganode X that logged its start but not its end is
//! finished if X's root already points at the new meganode Y (invalidate
//! what is left of X_right, open Y, link Y's parent), and undone otherwise
//! (Y is an orphan: dropped, X reopened). A recovered meganode that a split
//! created but never opened is opened if its source logged the split's end,
//! and dropped as an orphan if its source never logged the copy.

use std::collections::HashSet;
use std::sync::Arc;

use nessie_protocol::{Error, Fabric, NodeId, Op};

use crate::deployment::CellDeployment;
use crate::log::LogRecord;
use crate::machine::{written, OpClass};
use crate::ptr::{NodePtr, RegionId};
use crate::server::alloc::{GateMode, Heap, NodePool};
use crate::server::{lock, Job, RegionAlloc, ServerNode, Srv};

/// Bytes replayed per round.
const REPLAY_BATCH: usize = 64;

/// What a recovery did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Regions rebuilt, and where.
    pub moved: Vec<(RegionId, NodeId)>,
    /// Interrupted splits finished.
    pub finished_splits: Vec<RegionId>,
    /// Orphaned meganodes dropped.
    pub orphans: Vec<RegionId>,
    /// Split-created meganodes opened.
    pub opened: Vec<RegionId>,
    /// New meganodes of finished splits whose parent link recovery queued
    /// (the split's log had no `SplitLinked`).
    pub linked: Vec<RegionId>,
}

/// How far a recovery has got, for [`CellDeployment::recover_nodes`]'s
/// observer (a test interleaves client operations there).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecoveryStage {
    /// Every lost region is rebuilt on a survivor and the directory names
    /// its new holder; no interrupted split is settled yet.
    Rebuilt,
}

/// The split a log leaves open: its key and the new meganode, if copied.
fn open_split(records: &[LogRecord]) -> Option<(Vec<u8>, Option<RegionId>)> {
    let mut open: Option<(Vec<u8>, Option<RegionId>)> = None;
    for r in records {
        match r {
            LogRecord::SplitStart { split, .. } => open = Some((split.clone(), None)),
            LogRecord::SplitCopied { new } => {
                if let Some(o) = open.as_mut() {
                    o.1 = Some(*new);
                }
            }
            LogRecord::SplitFinish { .. } | LogRecord::SplitAbort => open = None,
            _ => {}
        }
    }
    open
}

/// The splits a log shows finished but not linked into the parent: each
/// split key and new meganode.
fn unlinked_splits(records: &[LogRecord]) -> Vec<(Vec<u8>, RegionId)> {
    let mut key = None;
    let mut out: Vec<(Vec<u8>, RegionId)> = Vec::new();
    for r in records {
        match r {
            LogRecord::SplitStart { split, .. } => key = Some(split.clone()),
            LogRecord::SplitAbort => key = None,
            LogRecord::SplitFinish { new } => {
                if let Some(k) = key.take() {
                    out.push((k, *new));
                }
            }
            LogRecord::SplitLinked { new } => out.retain(|(_, y)| y != new),
            _ => {}
        }
    }
    out
}

impl Srv {
    /// Replays `records`' writes into region slot `slot` and starts holding
    /// `region` there with allocators rebuilt from its contents.
    async fn rebuild(
        &self,
        region: RegionId,
        slot: u32,
        records: &[LogRecord],
        gate: GateMode,
    ) -> Result<(), Error> {
        let base = self.st.layout.slot_base(slot);
        let writes: Vec<Op> = records
            .iter()
            .filter_map(|r| match r {
                LogRecord::Write { offset, bytes } => Some(Op::LocalWrite {
                    offset: base + offset,
                    data: bytes.clone(),
                }),
                _ => None,
            })
            .collect();
        for chunk in writes.chunks(REPLAY_BATCH) {
            for r in self.io.round(chunk.to_vec(), OpClass::Other).await {
                written(&r)?;
            }
        }
        let h = self.st.host(region, slot, self.st.fresh_alloc(), gate, 1);
        // Reachable nodes and live extents.
        let total = self.st.cfg.meganode_nodes;
        let mut used = vec![false; total as usize];
        let mut extents = Vec::new();
        let mut todo = vec![NodePtr::root_of(region)];
        let mut seen = HashSet::new();
        let mut height = 1;
        while let Some(p) = todo.pop() {
            if p.is_null() || p.region != region || p.index >= total || !seen.insert(p) {
                continue;
            }
            let n = self.read_node(p).await?;
            if !n.valid {
                continue;
            }
            used[p.index as usize] = true;
            if p.index == 0 {
                height = u32::from(n.level) + 1;
            }
            todo.push(n.right);
            for e in &n.entries {
                match (e.child(), e.extent()) {
                    (Some(c), _) => todo.push(c),
                    (_, Some(x)) if x.region == region => extents.push((x.offset, x.len)),
                    _ => {}
                }
            }
        }
        *lock(&h.alloc) = RegionAlloc {
            nodes: NodePool::new(total, &used),
            heap: Heap::rebuilt(self.st.cfg.heap_bytes as u32, extents),
        };
        h.height.store(height, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// Finishes the split of `x` at `split` into `y` if X was relinked;
    /// returns whether it was.
    async fn finish_split(&self, x: RegionId, split: &[u8], y: RegionId) -> Result<bool, Error> {
        let root = self.read_node(NodePtr::root_of(x)).await?;
        if root.right != NodePtr::root_of(y) || root.max.as_deref() != Some(split) {
            return Ok(false);
        }
        // X_right is no longer reachable from X's root, so the rebuilt
        // allocators already count its nodes and extents free; what is left
        // is to clear their valid flags.
        for i in 1..self.st.cfg.meganode_nodes {
            let p = NodePtr::new(x, i);
            let n = self.read_node(p).await?;
            if !n.valid || n.min.as_slice() < split {
                continue;
            }
            let _g = self.lock(p).await;
            let mut n = self.read_node(p).await?;
            n.valid = false;
            self.write_node(p, &n, n.version).await?;
        }
        self.log(x, vec![LogRecord::SplitFinish { new: y }]).await?;
        Ok(true)
    }
}

fn run<F: Fabric, T: 'static, Fut>(
    d: &CellDeployment<F>,
    st: &Arc<ServerNode>,
    make: impl FnOnce(Srv) -> Fut,
) -> Result<T, Error>
where
    F::Endpoint: 'static,
    Fut: std::future::Future<Output = Result<T, Error>> + 'static,
{
    let (_, mut mio) = d.maintenance_io(st.node)?;
    let mut m = mio.machine(st, make);
    mio.run(st, &mut m)
}

impl<F: Fabric> CellDeployment<F>
where
    F::Endpoint: 'static,
{
    /// Rebuilds the regions of the failed server `failed` on the survivors
    /// from their logs and settles the splits the failure interrupted.
    /// Needs logging (`log_dir`).
    pub fn recover(&mut self, failed: NodeId) -> Result<RecoveryReport, Error> {
        self.recover_nodes(&[failed], |_, _| {})
    }

    /// Rebuilds the regions of every server in `failed` on the survivors
    /// and settles the splits the failures interrupted (several servers
    /// lost at once, e.g. the holders of both halves of a split), calling
    /// `observe` at each [`RecoveryStage`] with the deployment as it is
    /// then. Needs logging (`log_dir`).
    pub fn recover_nodes(
        &mut self,
        failed: &[NodeId],
        mut observe: impl FnMut(RecoveryStage, &Self),
    ) -> Result<RecoveryReport, Error> {
        let logs = self
            .logs()
            .cloned()
            .ok_or_else(|| Error::Corrupt("recovery needs region logs (log_dir)".into()))?;
        for &f in failed {
            self.directory().set_failed(f, true);
        }
        let survivors: Vec<Arc<ServerNode>> = self
            .live_servers()
            .into_iter()
            .filter(|s| !failed.contains(&s.node))
            .collect();
        let Some(&first) = failed.first() else {
            return Ok(RecoveryReport::default());
        };
        if survivors.is_empty() {
            return Err(Error::Unreachable(first));
        }
        let snapshot = self.directory().snapshot();
        let lost: Vec<RegionId> = failed.iter().flat_map(|&f| snapshot.held_by(f)).collect();
        let mut report = RecoveryReport::default();
        let mut recovered = Vec::new();
        for (i, &r) in lost.iter().enumerate() {
            let st = survivors[i % survivors.len()].clone();
            let slot = self.directory().free_slot(st.node).ok_or_else(|| {
                Error::Corrupt(format!("no free region slot on {} for {r}", st.node))
            })?;
            let records = logs.read(r)?;
            let created_by = records.iter().find_map(|x| match x {
                LogRecord::Created { source } => *source,
                _ => None,
            });
            let opened = records.contains(&LogRecord::Opened);
            // A region whose log shows an unsettled step takes no write
            // until recovery has settled it: a new meganode not yet opened
            // stays frozen, a meganode whose split is open stays closed (a
            // client holding a stale path into X_right would otherwise
            // write into a node the split then invalidates).
            let gate = if created_by.is_some() && !opened {
                GateMode::Frozen
            } else if open_split(&records).is_some() && !self.config().faults.recovery_opens_early {
                GateMode::Closed
            } else {
                GateMode::Open
            };
            let recs = records.clone();
            run(self, &st, move |srv| {
                Box::pin(async move { srv.rebuild(r, slot, &recs, gate).await })
            })?;
            self.directory().relocate(r, st.node, slot);
            report.moved.push((r, st.node));
            recovered.push((r, st, records, created_by, opened));
        }
        observe(RecoveryStage::Rebuilt, self);
        // Splits of recovered meganodes left open.
        for (x, st, records, _, _) in &recovered {
            let Some((split, new)) = open_split(records) else {
                continue;
            };
            let finished = match new {
                Some(y) => {
                    let (x, y, split2) = (*x, y, split.clone());
                    run(self, st, move |srv| {
                        Box::pin(async move { srv.finish_split(x, &split2, y).await })
                    })?
                }
                None => false,
            };
            match (finished, new) {
                (true, Some(y)) => {
                    report.finished_splits.push(*x);
                    st.push_job(Job::Open(y));
                    st.push_job(Job::LinkParent {
                        below: *x,
                        key: split,
                        child: y,
                    });
                }
                _ => {
                    if let Some(y) = new {
                        self.drop_region(y)?;
                        report.orphans.push(y);
                    }
                    logs.append(*x, &[LogRecord::SplitAbort])?;
                }
            }
            if let Some(h) = st.hosted(*x) {
                lock(&h.gate).mode = GateMode::Open;
            }
        }
        // Splits of recovered meganodes that their logs show finished but
        // not linked: X's server died after `SplitFinish`, before it opened
        // Y (wherever Y is) or linked Y's parent. Open Y (unless its holder
        // is down too: Y's own recovery opens it) and link the parent.
        if !self.config().faults.recovery_forgets_finished_splits {
            let snapshot = self.directory().snapshot();
            for (x, st, records, _, _) in &recovered {
                for (key, y) in unlinked_splits(records) {
                    let opened = logs.read(y)?.contains(&LogRecord::Opened);
                    let holder_up = snapshot
                        .get(y)
                        .is_some_and(|i| !snapshot.failed.contains(&i.node));
                    if !opened && holder_up {
                        st.push_job(Job::Open(y));
                        report.opened.push(y);
                    }
                    st.push_job(Job::LinkParent {
                        below: *x,
                        key,
                        child: y,
                    });
                    report.linked.push(y);
                }
            }
        }
        // Recovered meganodes a split created but never opened.
        for (r, st, _, created_by, opened) in &recovered {
            let (Some(x), false) = (created_by, opened) else {
                continue;
            };
            if report.orphans.contains(r) {
                continue;
            }
            let src = logs.read(*x)?;
            let finished = src.contains(&LogRecord::SplitFinish { new: *r });
            let copied = src.contains(&LogRecord::SplitCopied { new: *r });
            if finished {
                st.push_job(Job::Open(*r));
                report.opened.push(*r);
            } else if !copied || open_split(&src).is_none() {
                self.drop_region(*r)?;
                report.orphans.push(*r);
            }
        }
        Ok(report)
    }

    /// Drops an orphaned meganode wherever it is held.
    fn drop_region(&self, r: RegionId) -> Result<(), Error> {
        if let Some(n) = self.holder(r) {
            if let Some(st) = self.server(n) {
                st.unhost(r);
            }
        }
        self.directory().remove(r);
        if let Some(l) = self.logs() {
            l.remove(r)?;
        }
        Ok(())
    }
}

//! Failure recovery (§2.6): when servers fail, the survivors take over
//! their regions, each rebuilding a region from the region's log into one
//! of its free region slots, and the directory moves the region (pointers
//! name regions, so nothing in the tree changes). A rebuilt meganode's
//! allocators come from its contents: the nodes reachable from its root,
//! the extents its valid leaves point to.
//!
//! Then recovery settles what the failures interrupted, from the logs'
//! split records (see `docs/cell.md`, "Recovery as built"):
//!
//! 1. Every lost region is rebuilt with its write gate *frozen* if it is a
//!    meganode a split created and never opened (or one whose creation never
//!    completed), *closed* if its log shows a split left open (no write may
//!    land in X_right before the split is settled), open otherwise.
//! 2. The open split of a recovered meganode X (its splitter is dead) is
//!    rolled forward if its log shows the copy done (`SplitCopied`: Y is
//!    complete and durable): the relink is done again if X's root still
//!    holds the split key (it is idempotent), every node of X at or above
//!    the split key is invalidated (reusable after the grace), `SplitFinish`
//!    is logged; otherwise it is undone (`SplitAbort`, Y dropped if it was
//!    allocated). X's gate opens.
//! 3. Every finished split of a recovered X without `SplitLinked` (X's
//!    server died between `SplitFinish` and the parent link) gets Y opened
//!    and its parent linked; a new root meganode that was being made for it
//!    is rolled forward if complete (the root word moves to it), dropped
//!    otherwise.
//! 4. The new meganodes of aborted splits still listed are dropped.
//! 5. A recovered meganode a split created but never opened is opened if its
//!    source logged the split's end, left frozen if its source is alive and
//!    its split still open (the live splitter settles it), dropped
//!    otherwise; one whose creation never completed is dropped.
//!
//! Dropping a meganode retires it where it is held (a late request to
//! create it is refused, a creation still running stops), removes it from
//! the directory and deletes its log.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use nessie_protocol::{Error, Fabric, NodeId, Op};

use crate::deployment::CellDeployment;
use crate::log::LogRecord;
use crate::machine::{written, OpClass};
use crate::ptr::{NodePtr, RegionId};
use crate::region::RegionState;
use crate::server::alloc::{GateMode, Heap, NodePool};
use crate::server::{lock, Hosted, Job, RegionAlloc, ServerNode, Srv};

/// Bytes replayed per round.
const REPLAY_BATCH: usize = 64;

/// What a recovery did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Regions rebuilt, and where.
    pub moved: Vec<(RegionId, NodeId)>,
    /// Interrupted splits finished (rolled forward), by their meganode X.
    pub finished_splits: Vec<RegionId>,
    /// Interrupted splits undone, by their meganode X.
    pub undone_splits: Vec<RegionId>,
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

/// A split a log leaves open.
#[derive(Clone, Debug, PartialEq, Eq)]
struct OpenSplit {
    key: Vec<u8>,
    new: RegionId,
    copied: bool,
}

/// A split a log shows finished but not linked into the parent.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Unlinked {
    key: Vec<u8>,
    new: RegionId,
    /// New root meganodes made for it, in order (the last may be in use).
    roots: Vec<RegionId>,
}

/// What a region's log says about its splits.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Splits {
    open: Option<OpenSplit>,
    finished: Vec<RegionId>,
    unlinked: Vec<Unlinked>,
    aborted: Vec<RegionId>,
}

fn read_splits(records: &[LogRecord]) -> Splits {
    let mut s = Splits::default();
    for r in records {
        match r {
            LogRecord::SplitStart { split, new, .. } => {
                s.open = Some(OpenSplit {
                    key: split.clone(),
                    new: *new,
                    copied: false,
                });
            }
            LogRecord::SplitCopied { new } => {
                if let Some(o) = s.open.as_mut().filter(|o| o.new == *new) {
                    o.copied = true;
                }
            }
            LogRecord::SplitFinish { new } => {
                s.finished.push(*new);
                if let Some(o) = s.open.take() {
                    s.unlinked.push(Unlinked {
                        key: o.key,
                        new: *new,
                        roots: Vec::new(),
                    });
                }
            }
            LogRecord::SplitAbort => {
                if let Some(o) = s.open.take() {
                    s.aborted.push(o.new);
                }
            }
            LogRecord::SplitNewRoot { root, new } => {
                if let Some(u) = s.unlinked.iter_mut().find(|u| u.new == *new) {
                    u.roots.push(*root);
                }
            }
            LogRecord::SplitLinked { new } => s.unlinked.retain(|u| u.new != *new),
            _ => {}
        }
    }
    s
}

/// A region rebuilt by this recovery.
struct Recovered {
    region: RegionId,
    st: Arc<ServerNode>,
    created_by: Option<RegionId>,
    opened: bool,
    /// Its creation never completed (still `Creating` in the directory).
    incomplete: bool,
    splits: Splits,
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
        self.recount(&h, &[]).await
    }

    /// Sets `h`'s allocators from its contents (the nodes reachable from
    /// its root are taken, the extents its valid leaves point to are live),
    /// with the nodes `quarantined` reusable only after the reuse grace.
    async fn recount(&self, h: &Arc<Hosted>, quarantined: &[u32]) -> Result<(), Error> {
        let region = h.id;
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
        let mut nodes = NodePool::new(total, &used);
        let grace = if self.st.cfg.faults.reuse_at_once {
            Duration::ZERO
        } else {
            self.st.cfg.node_reuse_grace
        };
        for &i in quarantined {
            if !used.get(i as usize).copied().unwrap_or(true) {
                nodes.quarantine(i, self.io.now(), grace);
            }
        }
        *lock(&h.alloc) = RegionAlloc {
            nodes,
            heap: Heap::rebuilt(self.st.cfg.heap_bytes as u32, extents),
        };
        h.height.store(height, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// Whether X's root already ends at `split` with its right link to Y's
    /// root (the relink's last write).
    async fn relinked(&self, x: RegionId, split: &[u8], y: RegionId) -> Result<bool, Error> {
        let root = self.read_node(NodePtr::root_of(x)).await?;
        Ok(root.right == NodePtr::root_of(y) && root.max.as_deref() == Some(split))
    }

    /// Rolls the split of `x` at `split` into the complete `y` forward:
    /// the relink again unless it is done, then every node of X at or
    /// above the split key invalidated (and reusable only after the
    /// grace), then `SplitFinish`.
    async fn settle_forward(&self, x: RegionId, split: &[u8], y: RegionId) -> Result<(), Error> {
        let h = self
            .st
            .hosted(x)
            .ok_or_else(|| Error::Corrupt(format!("{x} is not held by {}", self.st.node)))?;
        if !self.relinked(x, split, y).await? {
            self.relink(x, split, y).await?;
        }
        // Whatever of X_right is still valid: X_left holds only keys below
        // the split key, so these are exactly X_right's nodes.
        let mut gone = Vec::new();
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
            gone.push(i);
        }
        self.recount(&h, &gone).await?;
        self.log(x, vec![LogRecord::SplitFinish { new: y }]).await
    }

    /// The old rule (`recovery_undoes_copied_splits`): finishes the split
    /// of `x` at `split` into `y` only if X's root was relinked; returns
    /// whether it was.
    async fn finish_if_relinked(
        &self,
        x: RegionId,
        split: &[u8],
        y: RegionId,
    ) -> Result<bool, Error> {
        if !self.relinked(x, split, y).await? {
            return Ok(false);
        }
        self.settle_forward(x, split, y).await?;
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
        let faults = self.config().faults;
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
        let lost: Vec<(RegionId, RegionState)> = failed
            .iter()
            .flat_map(|&f| snapshot.held_by(f))
            .filter_map(|r| snapshot.get(r).map(|i| (r, i.state)))
            .collect();
        let mut report = RecoveryReport::default();
        let mut recovered: Vec<Recovered> = Vec::new();
        // 1. Rebuild every lost region on a survivor.
        for (i, &(r, state)) in lost.iter().enumerate() {
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
            let incomplete = state == RegionState::Creating;
            let splits = read_splits(&records);
            // A region whose log shows an unsettled step takes no write
            // until recovery has settled it: a new meganode not yet opened
            // (or not even complete) stays frozen, a meganode whose split
            // is open stays closed (a client holding a stale path into
            // X_right would otherwise write into a node the split then
            // invalidates).
            let gate = if incomplete || (created_by.is_some() && !opened) {
                GateMode::Frozen
            } else if splits.open.is_some() && !faults.recovery_opens_early {
                GateMode::Closed
            } else {
                GateMode::Open
            };
            run(self, &st, move |srv| {
                Box::pin(async move { srv.rebuild(r, slot, &records, gate).await })
            })?;
            self.directory().relocate(r, st.node, slot);
            report.moved.push((r, st.node));
            recovered.push(Recovered {
                region: r,
                st,
                created_by,
                opened,
                incomplete,
                splits,
            });
        }
        observe(RecoveryStage::Rebuilt, self);
        let lost_ids: HashSet<RegionId> = lost.iter().map(|(r, _)| *r).collect();
        // 2. Splits of recovered meganodes left open: their splitter is dead.
        let mut rolled: Vec<(RegionId, Arc<ServerNode>, Unlinked)> = Vec::new();
        for rec in &recovered {
            let Some(o) = rec.splits.open.clone() else {
                continue;
            };
            let x = rec.region;
            let (key, y) = (o.key.clone(), o.new);
            let forward = if !o.copied {
                false
            } else if faults.recovery_undoes_copied_splits {
                run(self, &rec.st, move |srv| {
                    Box::pin(async move { srv.finish_if_relinked(x, &key, y).await })
                })?
            } else {
                run(self, &rec.st, move |srv| {
                    Box::pin(async move { srv.settle_forward(x, &key, y).await })
                })?;
                true
            };
            if forward {
                report.finished_splits.push(x);
                rolled.push((
                    x,
                    rec.st.clone(),
                    Unlinked {
                        key: o.key,
                        new: y,
                        roots: Vec::new(),
                    },
                ));
            } else {
                logs.append(x, &[LogRecord::SplitAbort])?;
                report.undone_splits.push(x);
                self.drop_orphan(y, &lost_ids, &mut report)?;
            }
            if let Some(h) = rec.st.hosted(x) {
                lock(&h.gate).mode = GateMode::Open;
            }
        }
        // 3. Finished splits without their parent link (X's server died
        //    after `SplitFinish`): open Y, settle a new root being made,
        //    link the parent.
        let mut unlinked = rolled;
        if !faults.recovery_forgets_finished_splits {
            for rec in &recovered {
                for u in &rec.splits.unlinked {
                    unlinked.push((rec.region, rec.st.clone(), u.clone()));
                }
            }
        }
        for (x, st, u) in unlinked {
            let y = u.new;
            self.settle_new_roots(x, &st, &u.roots, &lost_ids, &mut report)?;
            let opened = logs.read(y)?.contains(&LogRecord::Opened);
            if !opened && self.holder(y).is_some() {
                st.push_job(Job::Open(y));
                if !report.opened.contains(&y) {
                    report.opened.push(y);
                }
            }
            st.push_job(Job::LinkParent {
                below: x,
                key: u.key,
                child: y,
            });
            report.linked.push(y);
        }
        // 4. New meganodes of aborted splits still listed.
        for rec in &recovered {
            for &y in &rec.splits.aborted {
                self.drop_orphan(y, &lost_ids, &mut report)?;
            }
        }
        // 5. Recovered meganodes a split created but never opened.
        for rec in &recovered {
            let r = rec.region;
            if report.orphans.contains(&r) || self.holder(r).is_none() {
                continue;
            }
            if rec.incomplete {
                // Its creation never completed: no one can have used it.
                self.drop_orphan(r, &lost_ids, &mut report)?;
                continue;
            }
            let (Some(x), false) = (rec.created_by, rec.opened) else {
                continue;
            };
            let src = read_splits(&logs.read(x)?);
            if src.finished.contains(&r) {
                rec.st.push_job(Job::Open(r));
                if !report.opened.contains(&r) {
                    report.opened.push(r);
                }
                continue;
            }
            let open_here = src.open.as_ref().filter(|o| o.new == r);
            let keep = match open_here {
                // X was recovered too: step 2 settled it.
                Some(_) if lost_ids.contains(&x) => true,
                // X's server lives: its splitter settles Y.
                Some(o) => o.copied || !faults.recovery_ignores_live_splitter,
                None => false,
            };
            if !keep {
                self.drop_orphan(r, &lost_ids, &mut report)?;
            }
        }
        Ok(report)
    }

    /// The new root meganodes made for one unlinked split of `x` (`roots`,
    /// in order): the last is rolled forward if it is complete (a job on
    /// `st` moves the root word to it, or finds it there already), every
    /// other one still listed is dropped. No server can still move the
    /// root word to one of those: only the last can have been named in a
    /// `SetRoot`.
    fn settle_new_roots(
        &self,
        x: RegionId,
        st: &Arc<ServerNode>,
        roots: &[RegionId],
        rebuilt: &HashSet<RegionId>,
        report: &mut RecoveryReport,
    ) -> Result<(), Error> {
        let Some((&last, older)) = roots.split_last() else {
            return Ok(());
        };
        for &p in older {
            self.drop_orphan(p, rebuilt, report)?;
        }
        let complete = self
            .directory()
            .snapshot()
            .get(last)
            .is_some_and(|i| i.state == RegionState::Live);
        if complete {
            st.push_job(Job::SetRoot {
                below: x,
                root: last,
            });
        } else {
            self.drop_orphan(last, rebuilt, report)?;
        }
        Ok(())
    }

    /// Drops the orphan `r` (see [`CellDeployment::drop_region`]) and
    /// reports it, unless `keep_orphans` (the test-only switch) and `r` is
    /// not among the regions this recovery rebuilt.
    fn drop_orphan(
        &self,
        r: RegionId,
        rebuilt: &HashSet<RegionId>,
        report: &mut RecoveryReport,
    ) -> Result<(), Error> {
        if self.config().faults.recovery_keeps_orphans && !rebuilt.contains(&r) {
            return Ok(());
        }
        if self.holder(r).is_some() && !report.orphans.contains(&r) {
            self.drop_region(r)?;
            report.orphans.push(r);
        }
        Ok(())
    }

    /// Drops an orphaned meganode: retires it where it is held (no late
    /// request creates it again; a creation still running stops), removes
    /// it from the directory, deletes its log.
    fn drop_region(&self, r: RegionId) -> Result<(), Error> {
        if let Some(n) = self.holder(r) {
            if let Some(st) = self.server(n).cloned() {
                run(self, &st, move |srv| {
                    Box::pin(async move {
                        srv.retire(r).await;
                        Ok(())
                    })
                })?;
            }
        }
        self.directory().remove(r);
        if let Some(l) = self.logs() {
            l.remove(r)?;
        }
        Ok(())
    }
}

//! Failure recovery (§2.6): when servers fail, a survivor takes over their
//! regions, rebuilding each from the region's log into a region slot of its
//! own, and the directory moves the region (pointers name regions, so
//! nothing in the tree changes). It runs as one sans-IO job
//! ([`Srv::recover`]) that sends no request. A rebuilt meganode's
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
//! 6. A region a failed server allocated (the directory records each
//!    creation's creator until it is published) that is still being
//!    created on a survivor and that no recovered log names is dropped:
//!    its creator died between the allocation and the record that would
//!    have named it, or, a recovery's placeholder, before its region moved
//!    in; nothing else would ever free its slot.
//!
//! Dropping a meganode retires it where it is held (a late request to
//! create it is refused, a creation still running stops; on another server
//! by a queued [`Job::Drop`]), removes it from the directory and deletes
//! its log.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use nessie_protocol::{CorruptionKind, Error, Fabric, Needed, NodeId, Op};

use crate::deployment::CellDeployment;
use crate::log::LogRecord;
use crate::machine::{written, OpClass};
use crate::ptr::{NodePtr, RegionId};
use crate::region::{Applied, RegionState, Update};
use crate::server::alloc::{GateMode, Heap, NodePool};
use crate::server::{lock, Hosted, Job, RegionAlloc, Srv};
use crate::wire::{CellRequest, CellResponse};

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

impl Splits {
    /// Every region these records name (copies, new roots).
    fn names(&self) -> Vec<RegionId> {
        let mut v: Vec<RegionId> = self.open.iter().map(|o| o.new).collect();
        v.extend(&self.finished);
        v.extend(&self.aborted);
        for u in &self.unlinked {
            v.push(u.new);
            v.extend(&u.roots);
        }
        v
    }
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
#[derive(Debug)]
struct Recovered {
    region: RegionId,
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
        let h = self.st.hosted(x).ok_or_else(|| {
            Error::corrupt(
                CorruptionKind::Bug,
                format!("{x} is not held by {}", self.st.node),
            )
        })?;
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

/// What step 1 of a recovery left for the settling: the regions it
/// rebuilt, with what their logs say, and its report so far.
#[derive(Debug)]
pub struct Rebuilt {
    recovered: Vec<Recovered>,
    lost: HashSet<RegionId>,
    /// The failed servers this recovery covers.
    failed: std::collections::BTreeSet<NodeId>,
    report: RecoveryReport,
}

impl Rebuilt {
    /// The report of step 1 (the regions moved).
    pub fn report(&self) -> &RecoveryReport {
        &self.report
    }
}

impl Srv {
    /// Recovers every region held by a server the directory marks failed:
    /// rebuilds them here ([`Srv::rebuild_lost`]) and settles what the
    /// failures interrupted ([`Srv::settle`]). Sends no request (what
    /// needs one is queued as this server's maintenance jobs), so it runs
    /// beside the maintenance thread, never behind a job that waits for
    /// the regions it recovers: on a thread of its own
    /// ([`crate::server::runtime::recovery_machine`]), or driven by
    /// [`CellDeployment::recover_nodes`]; needs the region logs. A
    /// recovery cut short (its own server failing) is run again by
    /// another survivor: every region it moved here is lost again with
    /// this server, and every step is decided from the logs afresh.
    pub async fn recover(&self) -> Result<RecoveryReport, Error> {
        let rebuilt = self.rebuild_lost().await?;
        let report = self.settle(rebuilt).await?;
        tracing::debug!(node = %self.st.node, ?report, "recovery");
        Ok(report)
    }

    /// Step 1: every region a failed server held is rebuilt from its log
    /// into a slot of this server, reserved first (a placeholder
    /// allocation, so that no split takes the slot meanwhile), and the
    /// directory moves it here in one step with the placeholder's removal.
    pub async fn rebuild_lost(&self) -> Result<Rebuilt, Error> {
        let faults = self.st.cfg.faults;
        let snapshot = self.st.dir.snapshot(&self.io).await?;
        if snapshot.failed.contains(&self.st.node) {
            return Err(Error::Unreachable(self.st.node, Needed::Request));
        }
        let lost: Vec<(RegionId, RegionState)> = snapshot
            .regions
            .iter()
            .filter(|(_, i)| snapshot.failed.contains(&i.node))
            .map(|(r, i)| (*r, i.state))
            .collect();
        let mut report = RecoveryReport::default();
        let mut recovered = Vec::new();
        for &(r, state) in &lost {
            let records = self.io.read_log(r).await?;
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
            let Some((placeholder, slot)) = self
                .st
                .dir
                .allocate(&self.io, self.st.node, self.st.node)
                .await?
            else {
                return Err(Error::corrupt(
                    CorruptionKind::Bug,
                    format!("no free region slot on {} for {r}", self.st.node),
                ));
            };
            if let Err(e) = self.rebuild(r, slot, &records, gate).await {
                self.st.unhost(r);
                self.drop_placeholder(placeholder).await;
                return Err(e);
            }
            let moved = self
                .st
                .dir
                .update(
                    &self.io,
                    Update::Relocate {
                        region: r,
                        placeholder,
                    },
                )
                .await;
            match moved {
                Ok(Applied::Relocated(true)) => {}
                Ok(_) => {
                    // Removed meanwhile (the splitter that abandoned its
                    // creation dropped it): the relocation dropped the
                    // placeholder, and there is nothing to hold.
                    self.st.unhost(r);
                    continue;
                }
                Err(e) => {
                    if e.outcome() == nessie_protocol::Outcome::NotCommitted {
                        self.st.unhost(r);
                        self.drop_placeholder(placeholder).await;
                    }
                    return Err(e);
                }
            }
            report.moved.push((r, self.st.node));
            recovered.push(Recovered {
                region: r,
                created_by,
                opened,
                incomplete,
                splits,
            });
        }
        Ok(Rebuilt {
            recovered,
            lost: lost.iter().map(|(r, _)| *r).collect(),
            failed: snapshot.failed.clone(),
            report,
        })
    }

    /// Removes a slot reservation a recovery cut short will not use (best
    /// effort: a failed recovery is reported, and run again).
    async fn drop_placeholder(&self, placeholder: RegionId) {
        if let Err(e) = self
            .st
            .dir
            .update(&self.io, Update::Remove(placeholder))
            .await
        {
            tracing::warn!(error = %e, %placeholder, "could not drop a recovery's slot reservation");
        }
    }

    /// Steps 2 to 5: settles the splits the failures interrupted, from the
    /// logs of the regions step 1 rebuilt here (module documentation).
    /// The parent links, openings and root moves it decides are queued as
    /// jobs of this server.
    pub async fn settle(&self, rebuilt: Rebuilt) -> Result<RecoveryReport, Error> {
        let faults = self.st.cfg.faults;
        let Rebuilt {
            recovered,
            lost,
            failed,
            mut report,
        } = rebuilt;
        // 2. Splits of recovered meganodes left open: their splitter is dead.
        let mut unlinked: Vec<(RegionId, Unlinked)> = Vec::new();
        for rec in &recovered {
            let Some(o) = rec.splits.open.clone() else {
                continue;
            };
            let x = rec.region;
            let y = o.new;
            let forward = if !o.copied {
                false
            } else if faults.recovery_undoes_copied_splits {
                self.finish_if_relinked(x, &o.key, y).await?
            } else {
                self.settle_forward(x, &o.key, y).await?;
                true
            };
            if forward {
                report.finished_splits.push(x);
                unlinked.push((
                    x,
                    Unlinked {
                        key: o.key,
                        new: y,
                        roots: Vec::new(),
                    },
                ));
            } else {
                self.io.log(x, vec![LogRecord::SplitAbort]).await?;
                report.undone_splits.push(x);
                self.drop_orphan(y, &lost, &mut report).await?;
            }
            if let Some(h) = self.st.hosted(x) {
                lock(&h.gate).mode = GateMode::Open;
            }
        }
        // 3. Finished splits without their parent link (X's server died
        //    after `SplitFinish`): open Y, settle a new root being made,
        //    link the parent.
        if !faults.recovery_forgets_finished_splits {
            for rec in &recovered {
                for u in &rec.splits.unlinked {
                    unlinked.push((rec.region, u.clone()));
                }
            }
        }
        for (x, u) in unlinked {
            let y = u.new;
            self.settle_new_roots(x, &u.roots, &lost, &mut report)
                .await?;
            let opened = self.io.read_log(y).await?.contains(&LogRecord::Opened);
            if !opened && self.holder_now(y).await?.is_some() {
                self.st.push_job(Job::Open(y));
                if !report.opened.contains(&y) {
                    report.opened.push(y);
                }
            }
            self.st.push_job(Job::LinkParent {
                below: x,
                key: u.key,
                child: y,
            });
            report.linked.push(y);
        }
        // 4. New meganodes of aborted splits still listed.
        for rec in &recovered {
            for &y in &rec.splits.aborted {
                self.drop_orphan(y, &lost, &mut report).await?;
            }
        }
        // 5. Recovered meganodes a split created but never opened.
        for rec in &recovered {
            let r = rec.region;
            if report.orphans.contains(&r) || self.holder_now(r).await?.is_none() {
                continue;
            }
            if rec.incomplete {
                // Its creation never completed: no one can have used it.
                self.drop_orphan(r, &lost, &mut report).await?;
                continue;
            }
            let (Some(x), false) = (rec.created_by, rec.opened) else {
                continue;
            };
            let src = read_splits(&self.io.read_log(x).await?);
            if src.finished.contains(&r) {
                self.st.push_job(Job::Open(r));
                if !report.opened.contains(&r) {
                    report.opened.push(r);
                }
                continue;
            }
            let open_here = src.open.as_ref().filter(|o| o.new == r);
            let keep = match open_here {
                // X was recovered too: step 2 settled it.
                Some(_) if lost.contains(&x) => true,
                // X's server lives: its splitter settles Y.
                Some(o) => o.copied || !faults.recovery_ignores_live_splitter,
                None => false,
            };
            if !keep {
                self.drop_orphan(r, &lost, &mut report).await?;
            }
        }
        // 6. Creations a failed server began that no log names: a region it
        //    allocated (a split's copy or new root, a recovery's
        //    placeholder), still being created on a survivor, whose
        //    creator died before the record that would have named it
        //    (`SplitStart`, `SplitNewRoot`) or, a placeholder, before its
        //    region moved in.
        let named: HashSet<RegionId> = recovered
            .iter()
            .flat_map(|rec| rec.splits.names())
            .collect();
        let map = self.st.dir.snapshot(&self.io).await?;
        let unnamed: Vec<RegionId> = map
            .regions
            .iter()
            .filter(|(r, i)| {
                i.state == RegionState::Creating
                    && i.creator.is_some_and(|c| failed.contains(&c))
                    && !lost.contains(r)
                    && !named.contains(r)
            })
            .map(|(r, _)| *r)
            .collect();
        for r in unnamed {
            self.drop_orphan(r, &lost, &mut report).await?;
        }
        Ok(report)
    }

    /// Where `region` is now, from a fresh directory snapshot.
    async fn holder_now(&self, region: RegionId) -> Result<Option<NodeId>, Error> {
        Ok(self
            .st
            .dir
            .snapshot(&self.io)
            .await?
            .get(region)
            .map(|i| i.node))
    }

    /// The new root meganodes made for one unlinked split of `x` (`roots`,
    /// in order): the last is rolled forward if it is complete (a job here
    /// moves the root word to it, or finds it there already), every other
    /// one still listed is dropped. No server can still move the root word
    /// to one of those: only the last can have been named in a `SetRoot`.
    async fn settle_new_roots(
        &self,
        x: RegionId,
        roots: &[RegionId],
        rebuilt: &HashSet<RegionId>,
        report: &mut RecoveryReport,
    ) -> Result<(), Error> {
        let Some((&last, older)) = roots.split_last() else {
            return Ok(());
        };
        for &p in older {
            self.drop_orphan(p, rebuilt, report).await?;
        }
        let complete = self
            .st
            .dir
            .snapshot(&self.io)
            .await?
            .get(last)
            .is_some_and(|i| i.state == RegionState::Live);
        if complete {
            self.st.push_job(Job::SetRoot {
                below: x,
                root: last,
            });
        } else {
            self.drop_orphan(last, rebuilt, report).await?;
        }
        Ok(())
    }

    /// Drops the orphan `r` (see [`Srv::drop_orphan_region`]) and reports
    /// it, unless `keep_orphans` (the test-only switch) and `r` is not
    /// among the regions this recovery rebuilt.
    async fn drop_orphan(
        &self,
        r: RegionId,
        rebuilt: &HashSet<RegionId>,
        report: &mut RecoveryReport,
    ) -> Result<(), Error> {
        if self.st.cfg.faults.recovery_keeps_orphans && !rebuilt.contains(&r) {
            return Ok(());
        }
        if self.holder_now(r).await?.is_some() && !report.orphans.contains(&r) {
            self.drop_orphan_region(r).await?;
            report.orphans.push(r);
        }
        Ok(())
    }

    /// Drops an orphaned meganode: retires it here and removes it from the
    /// directory (no late request creates it again; a creation still
    /// running stops) if it is held here or by a server that failed since
    /// this recovery began, and deletes its log; if another server holds
    /// it, queues [`Job::Drop`] on this server's maintenance thread (a
    /// recovery sends no request itself).
    async fn drop_orphan_region(&self, r: RegionId) -> Result<(), Error> {
        let map = self.st.dir.snapshot(&self.io).await?;
        let Some(info) = map.get(r) else {
            return self.io.remove_log(r).await;
        };
        if info.node == self.st.node || map.failed.contains(&info.node) {
            self.retire(r).await;
            self.st.dir.update(&self.io, Update::Remove(r)).await?;
            return self.io.remove_log(r).await;
        }
        self.st.push_job(Job::Drop(r));
        Ok(())
    }

    /// [`Job::Drop`]: asks the holder of the orphan `r` to drop it
    /// (`DropRegion`, claimed) until it answers or `r` has left the
    /// directory, then deletes `r`'s log. A holder that failed meanwhile
    /// leaves `r` to the recovery of its regions.
    pub(crate) async fn drop_remote(&self, r: RegionId) -> Result<(), Error> {
        let start = self.io.now();
        loop {
            let map = self.st.dir.snapshot(&self.io).await?;
            let Some(info) = map.get(r) else {
                break;
            };
            if map.failed.contains(&info.node) {
                return Ok(());
            }
            match self
                .io
                .rpc(info.node, CellRequest::DropRegion { region: r })
                .await
            {
                Ok(CellResponse::Done) => break,
                _ if self.io.now().since(start) > self.st.cfg.op_timeout => {
                    return Err(Error::Timeout);
                }
                _ => self.io.backoff(Duration::from_millis(1)).await,
            }
        }
        self.io.remove_log(r).await
    }
}

impl<F: Fabric> CellDeployment<F>
where
    F::Endpoint: 'static,
{
    /// Rebuilds the regions of the failed server `failed` on a survivor
    /// from their logs and settles the splits the failure interrupted.
    /// Needs logging (`log_dir`).
    pub fn recover(&mut self, failed: NodeId) -> Result<RecoveryReport, Error> {
        self.recover_nodes(&[failed], |_, _| {})
    }

    /// Marks every server in `failed` failed in the directory and runs
    /// [`Srv::recover`] on the first survivor, on the calling thread
    /// (several servers lost at once, e.g. the holders of both halves of a
    /// split), calling `observe` at each [`RecoveryStage`] with the
    /// deployment as it is then. Needs logging (`log_dir`).
    pub fn recover_nodes(
        &mut self,
        failed: &[NodeId],
        mut observe: impl FnMut(RecoveryStage, &Self),
    ) -> Result<RecoveryReport, Error> {
        if self.logs().is_none() {
            return Err(Error::corrupt(
                CorruptionKind::Bug,
                "recovery needs region logs (log_dir)",
            ));
        }
        let Some(&first) = failed.first() else {
            return Ok(RecoveryReport::default());
        };
        for &f in failed {
            self.directory().set_failed(f, true);
        }
        let Some(st) = self
            .live_servers()
            .into_iter()
            .find(|s| !failed.contains(&s.node))
        else {
            return Err(Error::Unreachable(first, Needed::Request));
        };
        let (_, mut mio) = self.maintenance_io(st.node)?;
        let mut m = mio.machine(&st, |srv| Box::pin(async move { srv.rebuild_lost().await }));
        let rebuilt = mio.run(&st, &mut m)?;
        observe(RecoveryStage::Rebuilt, self);
        let mut m = mio.machine(&st, move |srv| {
            Box::pin(async move { srv.settle(rebuilt).await })
        });
        mio.run(&st, &mut m)
    }
}

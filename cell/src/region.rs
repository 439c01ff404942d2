//! The directory of regions: which server holds each region (meganode) and
//! in which of its region slots (§2.1: "all clients and servers maintain a
//! cache of the global region table"; §2.6: the region-to-server map lives in
//! an external service such as ZooKeeper, so that recovery moves a region by
//! updating the map alone).
//!
//! The table itself is [`RegionMap`], changed only by [`RegionMap::apply`]
//! of an [`Update`], whichever service keeps it:
//!
//! - [`Directory`]: one shared, linearizable table in the memory of the
//!   process (an in-process deployment, [`crate::CellDeployment`], and the
//!   cluster simulator), standing in for the paper's external service;
//! - [`crate::directory::FabricDirectory`]: the table in a registered area
//!   of one node's memory, read and written over the fabric itself by RDMA
//!   (node processes on RDMA, which share nothing but the fabric).
//!
//! The directory's `RegionTable` is the one handle server logic goes
//! through, for either.
//! Clients and servers work from [`RegionMap`] snapshots and refresh them
//! when a region is unknown or its server does not answer.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, RwLock};

use nessie_protocol::NodeId;

use crate::ptr::RegionId;

/// Whether a region serves the tree yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RegionState {
    /// Being filled by a meganode split (not reachable from the tree yet).
    Creating,
    /// Part of the tree.
    Live,
}

/// Where one region lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RegionInfo {
    /// The server holding it.
    pub node: NodeId,
    /// Its region slot on that server.
    pub slot: u32,
    /// Live or being created.
    pub state: RegionState,
    /// While it is being created: the server that allocated it (a split's
    /// splitter, a recovery's placeholder), so that the recovery of that
    /// server, should it die before a log names the region, drops it
    /// instead of leaving its slot taken for good. `None` once live.
    pub creator: Option<NodeId>,
}

/// A snapshot of the directory.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RegionMap {
    /// The directory's epoch when the snapshot was taken (changes with every
    /// update).
    pub epoch: u64,
    /// Every region.
    pub regions: BTreeMap<RegionId, RegionInfo>,
    /// Servers known to have failed.
    pub failed: BTreeSet<NodeId>,
    /// The id the next allocated region gets (ids are never reused).
    pub next_id: u32,
}

/// A change to the directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Update {
    /// Reserve a new region id and a free slot on server `on` for server
    /// `by` (the region starts as [`RegionState::Creating`], `by` its
    /// [`RegionInfo::creator`]); refused on a failed server.
    Allocate {
        /// The server the region goes to.
        on: NodeId,
        /// The server allocating it.
        by: NodeId,
    },
    /// Mark a region live.
    Publish(RegionId),
    /// Move a region into the slot an allocation reserved for it
    /// (recovery, §2.6: `placeholder`, allocated on the new server before
    /// the region was rebuilt there, so that no split could take the slot
    /// meanwhile), dropping the placeholder: one step. If the region is
    /// gone (removed meanwhile: the splitter that abandoned a creation
    /// dropped it), the placeholder alone is dropped, so that its slot is
    /// not lost to a reservation nothing will ever use; nothing changes if
    /// the placeholder is unknown.
    Relocate {
        /// The region.
        region: RegionId,
        /// The allocation holding its new slot.
        placeholder: RegionId,
    },
    /// Drop a region (an orphan, or a failed creation).
    Remove(RegionId),
    /// Record that a server failed (or came back).
    SetFailed {
        /// The server.
        node: NodeId,
        /// Failed (or back).
        failed: bool,
    },
}

/// What applying an [`Update`] gave.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Applied {
    /// An allocation: the new region and its slot, or `None` when the
    /// server had no free slot (nothing changed).
    Allocated(Option<(RegionId, u32)>),
    /// A relocation: whether the region moved into the placeholder's slot
    /// (false: the region or the placeholder was unknown).
    Relocated(bool),
    /// Any other update.
    Done,
}

impl Applied {
    /// Whether the update changed the table (everything but a refused
    /// allocation does).
    pub fn changed(self) -> bool {
        self != Applied::Allocated(None)
    }
}

impl RegionMap {
    /// An empty directory (epoch 0; the first region allocated is region 1).
    pub fn empty() -> RegionMap {
        RegionMap {
            next_id: 1,
            ..RegionMap::default()
        }
    }

    /// Where `region` lives.
    pub fn get(&self, region: RegionId) -> Option<RegionInfo> {
        self.regions.get(&region).copied()
    }

    /// Regions held by `node`.
    pub fn held_by(&self, node: NodeId) -> Vec<RegionId> {
        self.regions
            .iter()
            .filter(|(_, i)| i.node == node)
            .map(|(r, _)| *r)
            .collect()
    }

    /// A slot of `node` that no region uses, among `slots_per_node`.
    pub fn free_slot(&self, node: NodeId, slots_per_node: u32) -> Option<u32> {
        let used: BTreeSet<u32> = self
            .regions
            .values()
            .filter(|i| i.node == node)
            .map(|i| i.slot)
            .collect();
        (0..slots_per_node).find(|s| !used.contains(s))
    }

    /// Regions per server node among `0..servers` that has not failed (for
    /// placing new meganodes).
    pub fn load(&self, servers: u16) -> Vec<(NodeId, usize)> {
        (0..servers)
            .map(NodeId)
            .filter(|n| !self.failed.contains(n))
            .map(|n| (n, self.regions.values().filter(|i| i.node == n).count()))
            .collect()
    }

    /// Applies `u` to the table of servers with `slots_per_node` region
    /// slots. Every update but a refused allocation advances the epoch.
    pub fn apply(&mut self, u: Update, slots_per_node: u32) -> Applied {
        let applied = match u {
            Update::Allocate { on: node, by } => {
                // Never on a server known to have failed: its recovery has
                // taken (or is taking) the regions it held, and would miss
                // one allocated after it began.
                if self.failed.contains(&node) {
                    return Applied::Allocated(None);
                }
                let Some(slot) = self.free_slot(node, slots_per_node) else {
                    return Applied::Allocated(None);
                };
                let id = RegionId(self.next_id.max(1));
                self.next_id = id.0 + 1;
                self.regions.insert(
                    id,
                    RegionInfo {
                        node,
                        slot,
                        state: RegionState::Creating,
                        creator: Some(by),
                    },
                );
                Applied::Allocated(Some((id, slot)))
            }
            Update::Publish(region) => {
                if let Some(i) = self.regions.get_mut(&region) {
                    i.state = RegionState::Live;
                    i.creator = None;
                }
                Applied::Done
            }
            Update::Relocate {
                region,
                placeholder,
            } => match self.regions.get(&placeholder).copied() {
                Some(p) => {
                    self.regions.remove(&placeholder);
                    match self.regions.get_mut(&region) {
                        Some(i) => {
                            i.node = p.node;
                            i.slot = p.slot;
                            Applied::Relocated(true)
                        }
                        None => Applied::Relocated(false),
                    }
                }
                None => Applied::Relocated(false),
            },
            Update::Remove(region) => {
                self.regions.remove(&region);
                Applied::Done
            }
            Update::SetFailed { node, failed } => {
                if failed {
                    self.failed.insert(node);
                } else {
                    self.failed.remove(&node);
                }
                Applied::Done
            }
        };
        self.epoch += 1;
        applied
    }
}

/// The shared region table of an in-process deployment.
#[derive(Debug)]
pub struct Directory {
    inner: RwLock<RegionMap>,
    slots_per_node: u32,
}

impl Directory {
    /// An empty directory for servers with `slots_per_node` region slots.
    pub fn new(slots_per_node: u32) -> Directory {
        Directory {
            inner: RwLock::new(RegionMap::empty()),
            slots_per_node,
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, RegionMap> {
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Applies `u` (one linearizable step).
    pub fn update(&self, u: Update) -> Applied {
        self.inner
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .apply(u, self.slots_per_node)
    }

    /// A snapshot.
    pub fn snapshot(&self) -> Arc<RegionMap> {
        Arc::new(self.read().clone())
    }

    /// The current epoch (changes with every update).
    pub fn epoch(&self) -> u64 {
        self.read().epoch
    }

    /// Reserves a new region id and a free slot on `node`, for `node`
    /// itself (the region starts as [`RegionState::Creating`]); `None` if
    /// the node has no free slot.
    pub fn allocate(&self, node: NodeId) -> Option<(RegionId, u32)> {
        self.allocate_for(node, node)
    }

    /// [`Directory::allocate`] on `node` by server `by`.
    pub fn allocate_for(&self, node: NodeId, by: NodeId) -> Option<(RegionId, u32)> {
        match self.update(Update::Allocate { on: node, by }) {
            Applied::Allocated(a) => a,
            Applied::Relocated(_) | Applied::Done => None,
        }
    }

    /// Marks `region` live.
    pub fn publish(&self, region: RegionId) {
        self.update(Update::Publish(region));
    }

    /// Moves `region` into the slot `placeholder` holds (recovery, §2.6);
    /// whether it moved ([`Update::Relocate`]).
    pub fn relocate(&self, region: RegionId, placeholder: RegionId) -> bool {
        self.update(Update::Relocate {
            region,
            placeholder,
        }) == Applied::Relocated(true)
    }

    /// Drops `region` (an orphan, or a failed creation).
    pub fn remove(&self, region: RegionId) {
        self.update(Update::Remove(region));
    }

    /// Records that `node` failed (or came back, with `failed = false`).
    pub fn set_failed(&self, node: NodeId, failed: bool) {
        self.update(Update::SetFailed { node, failed });
    }

    /// Live regions per server node among `0..servers` (for placing new
    /// meganodes).
    pub fn load(&self, servers: u16) -> Vec<(NodeId, usize)> {
        self.read().load(servers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_allocated_per_node_and_freed_by_removal() {
        let d = Directory::new(2);
        let (a, sa) = d.allocate(NodeId(0)).unwrap();
        assert_eq!(a, RegionId(1), "ids start at 1");
        let (b, sb) = d.allocate(NodeId(0)).unwrap();
        assert_ne!(a, b);
        assert_ne!(sa, sb);
        let e = d.epoch();
        assert!(d.allocate(NodeId(0)).is_none());
        assert_eq!(d.epoch(), e, "a refused allocation changes nothing");
        let e0 = d.epoch();
        d.remove(a);
        assert!(d.epoch() > e0);
        let (c, sc) = d.allocate(NodeId(0)).unwrap();
        assert_eq!(sc, sa);
        assert!(c.0 > b.0, "ids are never reused");
        assert_eq!(d.snapshot().get(b).unwrap().state, RegionState::Creating);
        d.publish(b);
        assert_eq!(d.snapshot().get(b).unwrap().state, RegionState::Live);
    }

    #[test]
    fn a_relocation_takes_its_placeholders_slot_in_one_step() {
        let d = Directory::new(2);
        let (x, _) = d.allocate(NodeId(0)).unwrap();
        d.publish(x);
        let (p, ps) = d.allocate(NodeId(1)).unwrap();
        assert!(d.relocate(x, p));
        let m = d.snapshot();
        assert!(m.get(p).is_none(), "the placeholder is gone");
        let i = m.get(x).unwrap();
        assert_eq!(
            (i.node, i.slot, i.state),
            (NodeId(1), ps, RegionState::Live)
        );
        let e = d.epoch();
        assert!(!d.relocate(x, RegionId(99)));
        assert_eq!(d.snapshot().get(x), Some(i), "no placeholder, no move");
        assert!(d.epoch() > e);
    }

    #[test]
    fn relocating_a_region_removed_meanwhile_frees_its_placeholders_slot() {
        // Recovery reserves a slot for a lost region while the splitter
        // that abandoned the region's creation removes it (seed 106,512 of
        // the Cell swarm): the reservation must not outlive the move.
        let d = Directory::new(1);
        let (y, _) = d.allocate(NodeId(0)).unwrap();
        let (p, _) = d.allocate(NodeId(1)).unwrap();
        d.remove(y);
        assert!(!d.relocate(y, p), "nothing to move");
        let m = d.snapshot();
        assert!(m.get(p).is_none() && m.get(y).is_none());
        assert!(d.allocate(NodeId(1)).is_some(), "the slot is free again");
    }

    #[test]
    fn load_leaves_out_failed_servers() {
        let mut m = RegionMap::empty();
        m.apply(
            Update::Allocate {
                on: NodeId(1),
                by: NodeId(1),
            },
            4,
        );
        m.apply(
            Update::Allocate {
                on: NodeId(1),
                by: NodeId(1),
            },
            4,
        );
        m.apply(
            Update::Allocate {
                on: NodeId(0),
                by: NodeId(0),
            },
            4,
        );
        assert_eq!(
            m.load(3),
            vec![(NodeId(0), 1), (NodeId(1), 2), (NodeId(2), 0)]
        );
        m.apply(
            Update::SetFailed {
                node: NodeId(2),
                failed: true,
            },
            4,
        );
        assert_eq!(m.load(3).len(), 2);
        assert_eq!(m.free_slot(NodeId(1), 4), Some(2));
        let e = m.epoch;
        assert_eq!(
            m.apply(
                Update::Allocate {
                    on: NodeId(2),
                    by: NodeId(2)
                },
                4
            ),
            Applied::Allocated(None),
            "no allocation on a failed server"
        );
        assert_eq!(m.epoch, e);
    }
}

//! The directory of regions: which server holds each region (meganode) and
//! in which of its region slots (§2.1: "all clients and servers maintain a
//! cache of the global region table"; §2.6: the region-to-server map lives in
//! an external service such as ZooKeeper, so that recovery moves a region by
//! updating the map alone).
//!
//! [`Directory`] stands in for that external service: one shared,
//! linearizable table per deployment. Clients and servers work from
//! [`RegionMap`] snapshots and refresh them when a region is unknown or its
//! server does not answer.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
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
}

/// A snapshot of the directory.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RegionMap {
    /// The directory's epoch when the snapshot was taken.
    pub epoch: u64,
    /// Every region.
    pub regions: BTreeMap<RegionId, RegionInfo>,
    /// Servers known to have failed.
    pub failed: BTreeSet<NodeId>,
}

impl RegionMap {
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
}

/// The shared region table of a deployment.
#[derive(Debug)]
pub struct Directory {
    inner: RwLock<RegionMap>,
    next_id: AtomicU64,
    slots_per_node: u32,
}

impl Directory {
    /// An empty directory for servers with `slots_per_node` region slots.
    pub fn new(slots_per_node: u32) -> Directory {
        Directory {
            inner: RwLock::new(RegionMap::default()),
            next_id: AtomicU64::new(1),
            slots_per_node,
        }
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, RegionMap> {
        self.inner.write().unwrap_or_else(|e| e.into_inner())
    }

    /// A snapshot.
    pub fn snapshot(&self) -> Arc<RegionMap> {
        Arc::new(self.inner.read().unwrap_or_else(|e| e.into_inner()).clone())
    }

    /// The current epoch (changes with every update).
    pub fn epoch(&self) -> u64 {
        self.inner.read().unwrap_or_else(|e| e.into_inner()).epoch
    }

    /// Reserves a new region id and a free slot on `node` (the region starts
    /// as [`RegionState::Creating`]); `None` if the node has no free slot.
    pub fn allocate(&self, node: NodeId) -> Option<(RegionId, u32)> {
        let mut m = self.write();
        let used: BTreeSet<u32> = m
            .regions
            .values()
            .filter(|i| i.node == node)
            .map(|i| i.slot)
            .collect();
        let slot = (0..self.slots_per_node).find(|s| !used.contains(s))?;
        let id = RegionId(self.next_id.fetch_add(1, Ordering::SeqCst) as u32);
        m.regions.insert(
            id,
            RegionInfo {
                node,
                slot,
                state: RegionState::Creating,
            },
        );
        m.epoch += 1;
        Some((id, slot))
    }

    /// Marks `region` live.
    pub fn publish(&self, region: RegionId) {
        let mut m = self.write();
        if let Some(i) = m.regions.get_mut(&region) {
            i.state = RegionState::Live;
        }
        m.epoch += 1;
    }

    /// Moves `region` to `slot` of `node` (recovery, §2.6).
    pub fn relocate(&self, region: RegionId, node: NodeId, slot: u32) {
        let mut m = self.write();
        if let Some(i) = m.regions.get_mut(&region) {
            i.node = node;
            i.slot = slot;
        }
        m.epoch += 1;
    }

    /// Reserves a free slot on `node` for a region being moved there.
    pub fn free_slot(&self, node: NodeId) -> Option<u32> {
        let m = self.inner.read().unwrap_or_else(|e| e.into_inner());
        let used: BTreeSet<u32> = m
            .regions
            .values()
            .filter(|i| i.node == node)
            .map(|i| i.slot)
            .collect();
        (0..self.slots_per_node).find(|s| !used.contains(s))
    }

    /// Drops `region` (an orphan, or a failed creation).
    pub fn remove(&self, region: RegionId) {
        let mut m = self.write();
        m.regions.remove(&region);
        m.epoch += 1;
    }

    /// Records that `node` failed (or came back, with `failed = false`).
    pub fn set_failed(&self, node: NodeId, failed: bool) {
        let mut m = self.write();
        if failed {
            m.failed.insert(node);
        } else {
            m.failed.remove(&node);
        }
        m.epoch += 1;
    }

    /// Live regions per server node among `0..servers` (for placing new
    /// meganodes).
    pub fn load(&self, servers: u16) -> Vec<(NodeId, usize)> {
        let m = self.inner.read().unwrap_or_else(|e| e.into_inner());
        (0..servers)
            .map(NodeId)
            .filter(|n| !m.failed.contains(n))
            .map(|n| (n, m.regions.values().filter(|i| i.node == n).count()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_allocated_per_node_and_freed_by_removal() {
        let d = Directory::new(2);
        let (a, sa) = d.allocate(NodeId(0)).unwrap();
        let (b, sb) = d.allocate(NodeId(0)).unwrap();
        assert_ne!(a, b);
        assert_ne!(sa, sb);
        assert!(d.allocate(NodeId(0)).is_none());
        let e0 = d.epoch();
        d.remove(a);
        assert!(d.epoch() > e0);
        assert_eq!(d.allocate(NodeId(0)).unwrap().1, sa);
        assert_eq!(d.snapshot().get(b).unwrap().state, RegionState::Creating);
        d.publish(b);
        assert_eq!(d.snapshot().get(b).unwrap().state, RegionState::Live);
    }
}

//! Cell's tree at quiescence: after the final sweep, every meganode the
//! region directory lists must be reachable in the tree (from the root word
//! by child and right links through valid nodes), read from the simulated
//! memory as it is then. A meganode listed but unreachable is an orphan
//! (an abandoned split's copy, a new root never installed, a recovery's
//! placeholder) that holds a region slot for good, which no history shows.

use std::collections::{BTreeSet, HashSet};

use nessie_cell::node::Node;
use nessie_cell::ROOT_WORD_OFFSET;
use nessie_cell::{NodePtr, RegionId, ROOT_REGION};
use nessie_protocol::Region;

use crate::checks::UnreachableMeganode;
use crate::engine::Engine;

impl Engine {
    /// The meganodes Cell's directory lists that its tree does not reach
    /// now, each with where it is held (empty for another system).
    pub(crate) fn unreachable_meganodes(&self) -> Vec<UnreachableMeganode> {
        let (Some(dir), Some(st)) = (
            self.server_side.dir.as_ref(),
            self.server_side.cell_servers.first(),
        ) else {
            return Vec::new();
        };
        let map = dir.snapshot();
        let layout = st.layout;
        let bytes = |region: RegionId, offset: u64, len: u64| {
            let info = map.get(region)?;
            let at = layout.slot_base(info.slot) + offset;
            self.cluster.mem.read(info.node, Region::Data, at, len).ok()
        };
        let node = |p: NodePtr| {
            let b = bytes(p.region, layout.node_offset(p.index), layout.node_bytes)?;
            Node::decode(&b, true).ok()
        };
        let Some(root) = bytes(ROOT_REGION, ROOT_WORD_OFFSET, 8)
            .and_then(|b| b.try_into().ok())
            .map(|w| NodePtr::decode(u64::from_le_bytes(w)))
        else {
            return vec![UnreachableMeganode::RootUnreadable];
        };
        let mut reached = BTreeSet::from([ROOT_REGION]);
        let mut todo = vec![root];
        let mut seen = HashSet::new();
        while let Some(p) = todo.pop() {
            if p.is_null() || !seen.insert(p) {
                continue;
            }
            let Some(n) = node(p).filter(|n| n.valid) else {
                continue;
            };
            reached.insert(p.region);
            todo.push(n.right);
            todo.extend(n.entries.iter().filter_map(|e| e.child()));
        }
        map.regions
            .iter()
            .filter(|(r, _)| !reached.contains(r))
            .map(|(&region, i)| UnreachableMeganode::Orphan {
                region,
                state: i.state,
                node: i.node,
                slot: i.slot,
            })
            .collect()
    }
}

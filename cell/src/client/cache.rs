//! A client's caches (§2.2-2.3, §3): copies of B-link tree nodes near the
//! root, and the key ranges of leaf-level meganodes (the paper's cache of
//! server-side traversal paths). Both are advisory: a stale entry only makes
//! a search start too far left, and right links (or a restart) correct it.
//! A search that follows a right link away from a cached node's child drops
//! the cached parent, as the paper prescribes; a search that restarts drops
//! every cached entry it used.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use crate::node::Node;
use crate::ptr::NodePtr;

/// Copies of nodes near the root, first in, first out.
#[derive(Clone, Debug)]
pub struct NodeCache {
    cap: usize,
    min_level: u8,
    map: HashMap<NodePtr, Arc<Node>>,
    order: VecDeque<NodePtr>,
    /// Lookups answered from the cache.
    pub hits: u64,
}

impl NodeCache {
    /// A cache of `cap` nodes keeping nodes of bottom meganodes only at
    /// `min_level` or above.
    pub fn new(cap: usize, min_level: u8) -> NodeCache {
        NodeCache {
            cap,
            min_level,
            map: HashMap::new(),
            order: VecDeque::new(),
            hits: 0,
        }
    }

    /// Whether `node` is near enough the root to be cached.
    pub fn wants(&self, node: &Node) -> bool {
        self.cap > 0 && node.valid && !node.leaf && (!node.bottom || node.level >= self.min_level)
    }

    /// The cached copy of `p`.
    pub fn get(&mut self, p: NodePtr) -> Option<Arc<Node>> {
        let n = self.map.get(&p).cloned();
        if n.is_some() {
            self.hits += 1;
        }
        n
    }

    /// Whether `p` is cached (not counted as a hit).
    pub fn contains(&self, p: NodePtr) -> bool {
        self.map.contains_key(&p)
    }

    /// Caches `node` read at `p` (if it is near the root).
    pub fn insert(&mut self, p: NodePtr, node: &Arc<Node>) {
        if !self.wants(node) {
            return;
        }
        if self.map.insert(p, node.clone()).is_none() {
            self.order.push_back(p);
            while self.map.len() > self.cap {
                match self.order.pop_front() {
                    Some(old) => {
                        self.map.remove(&old);
                    }
                    None => break,
                }
            }
        }
    }

    /// Drops `p`.
    pub fn remove(&mut self, p: NodePtr) {
        if self.map.remove(&p).is_some() {
            self.order.retain(|&q| q != p);
        }
    }

    /// Cached nodes.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

/// Key ranges of leaf-level meganodes: `lo..hi` -> the meganode's root.
#[derive(Clone, Debug)]
pub struct RangeCache {
    cap: usize,
    map: BTreeMap<Vec<u8>, (Option<Vec<u8>>, NodePtr)>,
    order: VecDeque<Vec<u8>>,
    /// Searches started from a cached range.
    pub hits: u64,
}

impl RangeCache {
    /// A cache of `cap` ranges.
    pub fn new(cap: usize) -> RangeCache {
        RangeCache {
            cap,
            map: BTreeMap::new(),
            order: VecDeque::new(),
            hits: 0,
        }
    }

    /// The cached meganode whose range holds `key`: (lo, its root).
    pub fn lookup(&mut self, key: &[u8]) -> Option<(Vec<u8>, NodePtr)> {
        let (lo, (hi, p)) = self.map.range(..=key.to_vec()).next_back()?;
        if hi.as_ref().is_some_and(|h| key >= h.as_slice()) {
            return None;
        }
        self.hits += 1;
        Some((lo.clone(), *p))
    }

    /// Records that the meganode rooted at `root` covers `lo..hi`.
    pub fn insert(&mut self, lo: Vec<u8>, hi: Option<Vec<u8>>, root: NodePtr) {
        if self.cap == 0 {
            return;
        }
        if self.map.insert(lo.clone(), (hi, root)).is_none() {
            self.order.push_back(lo);
            while self.map.len() > self.cap {
                match self.order.pop_front() {
                    Some(old) => {
                        self.map.remove(&old);
                    }
                    None => break,
                }
            }
        }
    }

    /// Drops the range starting at `lo`.
    pub fn remove(&mut self, lo: &[u8]) {
        if self.map.remove(lo).is_some() {
            self.order.retain(|k| k.as_slice() != lo);
        }
    }

    /// Cached ranges.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ptr::RegionId;

    #[test]
    fn ranges_are_found_by_key_and_evicted_in_order() {
        let mut c = RangeCache::new(2);
        let p = |r| NodePtr::root_of(RegionId(r));
        c.insert(b"a".to_vec(), Some(b"m".to_vec()), p(2));
        c.insert(b"m".to_vec(), None, p(3));
        assert_eq!(c.lookup(b"c"), Some((b"a".to_vec(), p(2))));
        assert_eq!(c.lookup(b"z"), Some((b"m".to_vec(), p(3))));
        assert_eq!(c.lookup(b"0"), None);
        c.insert(b"0".to_vec(), Some(b"a".to_vec()), p(4));
        assert_eq!(c.len(), 2);
        assert_eq!(c.lookup(b"c"), None);
        c.remove(b"m");
        assert_eq!(c.lookup(b"z"), None);
    }

    #[test]
    fn only_nodes_near_the_root_are_cached() {
        let mut c = NodeCache::new(8, 1);
        let leaf = Arc::new(Node::empty(true, true, 0, Vec::new(), None));
        let inner = Arc::new(Node::empty(false, true, 1, Vec::new(), None));
        let upper = Arc::new(Node::empty(false, false, 0, Vec::new(), None));
        let p = |i| NodePtr::new(RegionId(1), i);
        c.insert(p(1), &leaf);
        c.insert(p(2), &inner);
        c.insert(p(3), &upper);
        assert!(c.get(p(1)).is_none());
        assert!(c.get(p(2)).is_some() && c.get(p(3)).is_some());
        c.remove(p(2));
        assert_eq!(c.len(), 1);
    }
}

//! A hosted meganode's bookkeeping on its server: the free nodes of its
//! pool (with the reuse grace of invalidated nodes), its extent heap, and its
//! write gate (how a meganode split holds writes off, §2.2).

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use nessie_protocol::Nanos;

/// The node pool of one meganode.
#[derive(Debug)]
pub struct NodePool {
    free: Vec<u32>,
    quarantine: VecDeque<(u32, Nanos)>,
    reserved: u32,
    total: u32,
}

impl NodePool {
    /// A pool of `total` nodes of which `used` are taken (node 0, the root,
    /// is never free).
    pub fn new(total: u32, used: &[bool]) -> NodePool {
        let free = (1..total)
            .rev()
            .filter(|&i| !used.get(i as usize).copied().unwrap_or(false))
            .collect();
        NodePool {
            free,
            quarantine: VecDeque::new(),
            reserved: 0,
            total,
        }
    }

    fn release_expired(&mut self, now: Nanos) {
        while let Some(&(i, at)) = self.quarantine.front() {
            if at > now {
                break;
            }
            self.quarantine.pop_front();
            self.free.push(i);
        }
    }

    /// Reserves `n` nodes for a write that may split up to `n` nodes.
    pub fn reserve(&mut self, n: u32, now: Nanos) -> bool {
        self.release_expired(now);
        if self.free.len() as u32 >= self.reserved + n {
            self.reserved += n;
            true
        } else {
            false
        }
    }

    /// Returns `n` unused reserved nodes.
    pub fn unreserve(&mut self, n: u32) {
        self.reserved = self.reserved.saturating_sub(n);
    }

    /// Takes a reserved node.
    pub fn take_reserved(&mut self) -> Option<u32> {
        if self.reserved == 0 {
            return None;
        }
        self.reserved -= 1;
        self.free.pop()
    }

    /// Frees an invalidated node: reusable after `grace` (at once if zero).
    pub fn free(&mut self, i: u32, now: Nanos, grace: Duration) {
        if grace.is_zero() {
            self.free.push(i);
        } else {
            self.quarantine.push_back((i, now.plus(grace)));
        }
    }

    /// Puts node `i` (free now, e.g. counted free by a rebuild) under the
    /// reuse grace: reusable only after `grace` from `now`.
    pub fn quarantine(&mut self, i: u32, now: Nanos, grace: Duration) {
        self.free.retain(|&f| f != i);
        self.free(i, now, grace);
    }

    /// Nodes in use (neither free nor waiting out the grace).
    pub fn used(&self) -> u32 {
        self.total - self.free.len() as u32 - self.quarantine.len() as u32
    }

    /// Nodes in the pool.
    pub fn total(&self) -> u32 {
        self.total
    }

    /// Nodes free now or after their grace.
    pub fn available(&self) -> u32 {
        self.free.len() as u32 + self.quarantine.len() as u32
            - self.reserved.min(self.free.len() as u32)
    }
}

/// Granularity of extent allocations.
pub const GRANULE: u32 = 8;

/// A meganode's extent heap: a bump pointer and exact-size free lists.
/// Freed extents are reusable at once: readers verify extents by their CRC64
/// (the paper's design, §2.3).
#[derive(Debug)]
pub struct Heap {
    bump: u32,
    cap: u32,
    free: BTreeMap<u32, Vec<u32>>,
    used: u64,
}

fn round(len: u32) -> u32 {
    len.div_ceil(GRANULE).max(1) * GRANULE
}

impl Heap {
    /// An empty heap of `cap` bytes.
    pub fn new(cap: u32) -> Heap {
        Heap {
            bump: 0,
            cap,
            free: BTreeMap::new(),
            used: 0,
        }
    }

    /// A heap of `cap` bytes in which the extents `live` (offset, length) are taken.
    pub fn rebuilt(cap: u32, mut live: Vec<(u32, u32)>) -> Heap {
        live.sort_unstable();
        let mut h = Heap::new(cap);
        let mut at = 0;
        for (off, len) in live {
            if off > at {
                h.free.entry(off - at).or_default().push(at);
            }
            at = at.max(off + round(len));
            h.used += u64::from(round(len));
        }
        h.bump = at;
        h
    }

    /// Space for `len` bytes: an offset, or `None` if the heap is full.
    pub fn alloc(&mut self, len: u32) -> Option<u32> {
        let size = round(len);
        let off = if let Some(list) = self.free.get_mut(&size) {
            let off = list.pop();
            if list.is_empty() {
                self.free.remove(&size);
            }
            off
        } else {
            None
        };
        let off = match off {
            Some(o) => o,
            None if self.bump + size <= self.cap => {
                self.bump += size;
                self.bump - size
            }
            None => {
                // Split a larger free block.
                let (&big, _) = self.free.range(size..).next()?;
                let list = self.free.get_mut(&big)?;
                let o = list.pop()?;
                if list.is_empty() {
                    self.free.remove(&big);
                }
                if big > size {
                    self.free.entry(big - size).or_default().push(o + size);
                }
                o
            }
        };
        self.used += u64::from(size);
        Some(off)
    }

    /// Frees the extent of `len` bytes at `off`.
    pub fn free(&mut self, off: u32, len: u32) {
        let size = round(len);
        self.used = self.used.saturating_sub(u64::from(size));
        self.free.entry(size).or_default().push(off);
    }

    /// Bytes in use.
    pub fn used(&self) -> u64 {
        self.used
    }

    /// Capacity in bytes.
    pub fn cap(&self) -> u64 {
        u64::from(self.cap)
    }
}

/// How a meganode admits writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GateMode {
    /// Writes go ahead.
    Open,
    /// A split is under way: every new write is refused.
    Closed,
    /// A new meganode whose source still holds its keys: writes wait.
    Frozen,
}

/// A meganode's write gate.
#[derive(Debug)]
pub struct Gate {
    /// The mode.
    pub mode: GateMode,
    /// Writes in progress.
    pub writers: u32,
}

impl Gate {
    /// A gate in `mode`.
    pub fn new(mode: GateMode) -> Gate {
        Gate { mode, writers: 0 }
    }

    /// Admits a write of `key`; false: the writer must back off (`Busy`).
    pub fn enter(&mut self, _key: &[u8]) -> bool {
        let ok = match &self.mode {
            GateMode::Open => true,
            GateMode::Closed | GateMode::Frozen => false,
        };
        if ok {
            self.writers += 1;
        }
        ok
    }

    /// A write is over.
    pub fn exit(&mut self) {
        self.writers = self.writers.saturating_sub(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_nodes_and_the_grace() {
        let mut p = NodePool::new(4, &[true]);
        assert_eq!(p.used(), 1);
        assert!(p.reserve(3, Nanos(0)));
        assert!(!p.reserve(1, Nanos(0)));
        let a = p.take_reserved().unwrap();
        p.unreserve(2);
        p.free(a, Nanos(10), Duration::from_nanos(5));
        assert!(!p.reserve(3, Nanos(14)));
        assert!(p.reserve(3, Nanos(15)));
    }

    #[test]
    fn heap_reuses_freed_extents_and_rebuilds() {
        let mut h = Heap::new(64);
        let a = h.alloc(10).unwrap();
        let b = h.alloc(20).unwrap();
        assert_eq!((a, b), (0, 16));
        h.free(a, 10);
        assert_eq!(h.alloc(16), Some(0));
        assert_eq!(h.alloc(40), None);
        let r = Heap::rebuilt(64, vec![(16, 20)]);
        assert_eq!(r.used(), 24);
        let mut r = r;
        assert_eq!(r.alloc(16), Some(0));
        assert_eq!(r.alloc(8), Some(40));
    }

    #[test]
    fn the_gate_admits_by_mode() {
        let mut g = Gate::new(GateMode::Open);
        assert!(g.enter(b"a"));
        assert_eq!(g.writers, 1);
        g.mode = GateMode::Closed;
        assert!(!g.enter(b"a"));
        g.exit();
        assert_eq!(g.writers, 0);
        g.mode = GateMode::Frozen;
        assert!(!g.enter(b"a"));
    }
}

//! The local cache of remote data table entries, keyed by index table entry.
//!
//! Only committed entries are cached (their contents never change until they
//! are recycled). An index table entry word names one data table entry
//! uniquely for the expiration period T, so a cached entry stays correct for T
//! from the time its index table entry was read: each cache entry carries that
//! expiration, a lookup that finds it expired treats it as a miss and evicts it,
//! and a hit (which follows a fresh read of the same index entry) extends it.
//! Eviction beyond the capacity is least-recently-used.

use std::collections::BTreeMap;

use crate::time::Nanos;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Slot {
    bytes: Vec<u8>,
    expires: Nanos,
    tick: u64,
}

/// An LRU cache of committed data table entries with expiration.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct DteCache {
    capacity: usize,
    map: BTreeMap<u64, Slot>,
    lru: BTreeMap<u64, u64>,
    tick: u64,
    hits: u64,
    misses: u64,
}

impl DteCache {
    /// A cache of at most `capacity` entries (0 disables it).
    pub fn new(capacity: usize) -> DteCache {
        DteCache {
            capacity,
            ..DteCache::default()
        }
    }

    /// Looks up the entry behind index-entry word `ite` at `now`. On a hit the
    /// expiration is moved to `extend_to` (T after the index entry was read).
    pub fn get(&mut self, ite: u64, now: Nanos, extend_to: Nanos) -> Option<&[u8]> {
        if self.capacity == 0 {
            return None;
        }
        let expired = match self.map.get(&ite) {
            None => {
                self.misses += 1;
                return None;
            }
            Some(s) => s.expires <= now,
        };
        if expired {
            self.remove(ite);
            self.misses += 1;
            return None;
        }
        self.hits += 1;
        self.tick += 1;
        let tick = self.tick;
        let slot = self.map.get_mut(&ite)?;
        self.lru.remove(&slot.tick);
        slot.tick = tick;
        slot.expires = slot.expires.max(extend_to);
        self.lru.insert(tick, ite);
        Some(&slot.bytes)
    }

    /// Caches the committed entry `bytes` found behind `ite`, valid until `expires`.
    pub fn insert(&mut self, ite: u64, bytes: Vec<u8>, expires: Nanos) {
        if self.capacity == 0 {
            return;
        }
        self.remove(ite);
        while self.map.len() >= self.capacity {
            match self.lru.pop_first() {
                Some((_, victim)) => {
                    self.map.remove(&victim);
                }
                None => break,
            }
        }
        self.tick += 1;
        self.lru.insert(self.tick, ite);
        self.map.insert(
            ite,
            Slot {
                bytes,
                expires,
                tick: self.tick,
            },
        );
    }

    fn remove(&mut self, ite: u64) {
        if let Some(s) = self.map.remove(&ite) {
            self.lru.remove(&s.tick);
        }
    }

    /// Entries currently cached.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Lookups that hit and missed so far.
    pub fn hit_miss(&self) -> (u64, u64) {
        (self.hits, self.misses)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expired_entries_miss_and_are_evicted() {
        let mut c = DteCache::new(4);
        c.insert(7, vec![1, 2], Nanos(100));
        assert!(!c.is_empty());
        assert_eq!(c.get(7, Nanos(99), Nanos(0)), Some(&[1u8, 2][..]));
        assert_eq!(c.get(7, Nanos(100), Nanos(0)), None);
        assert!(c.is_empty());
        assert_eq!(c.hit_miss(), (1, 1));
        // An entry never cached is a miss too.
        assert_eq!(c.get(8, Nanos(0), Nanos(0)), None);
        assert_eq!(c.hit_miss(), (1, 2));
    }

    #[test]
    fn a_hit_extends_expiration() {
        let mut c = DteCache::new(4);
        c.insert(7, vec![1], Nanos(100));
        assert!(c.get(7, Nanos(50), Nanos(150)).is_some());
        assert!(c.get(7, Nanos(120), Nanos(0)).is_some());
        assert!(c.get(7, Nanos(150), Nanos(0)).is_none());
    }

    #[test]
    fn least_recently_used_is_evicted_at_capacity() {
        let mut c = DteCache::new(2);
        c.insert(1, vec![1], Nanos(1_000));
        c.insert(2, vec![2], Nanos(1_000));
        assert!(c.get(1, Nanos(0), Nanos(0)).is_some());
        c.insert(3, vec![3], Nanos(1_000));
        assert_eq!(c.len(), 2);
        assert!(c.get(2, Nanos(0), Nanos(0)).is_none());
        assert!(c.get(1, Nanos(0), Nanos(0)).is_some());
        assert!(c.get(3, Nanos(0), Nanos(0)).is_some());
    }

    #[test]
    fn capacity_zero_disables() {
        let mut c = DteCache::new(0);
        c.insert(1, vec![1], Nanos(1_000));
        assert!(c.get(1, Nanos(0), Nanos(0)).is_none());
        assert_eq!(c.hit_miss(), (0, 0));
    }
}

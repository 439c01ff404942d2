//! Allocation and recycling of a client's data table entries.
//!
//! Each client owns a contiguous share of its node's data table, so clients of
//! one node never contend for entries. Entries are handed out never-used first;
//! once those run out the client scans its share for entries whose recycle flag
//! is set and whose expiration time (plus the clock-skew allowance) has passed.
//! An entry whose index-entry CAS failed was never published and is reusable at
//! once. The allocator is sans-IO: the scan's reads are issued by the state
//! machine that needs an entry, and their results are fed to [`DteAllocator::collect`].

use std::time::Duration;

use crate::addr::DteAddr;
use crate::layout::{DataEntryHeader, DteState};
use crate::time::{duration_nanos, Nanos};

/// A client's allocator over its share of a data table.
#[derive(Clone, Debug)]
pub struct DteAllocator {
    table: u16,
    first: u32,
    count: u32,
    fresh_next: u32,
    free: Vec<u32>,
    in_free: Vec<bool>,
}

impl DteAllocator {
    /// An allocator for entries `first..first + count` of data table `table`.
    pub fn new(table: u16, first: u32, count: u32) -> DteAllocator {
        DteAllocator {
            table,
            first,
            count,
            fresh_next: 0,
            free: Vec::new(),
            in_free: vec![false; count as usize],
        }
    }

    /// The entries this allocator owns.
    pub fn owned(&self) -> impl Iterator<Item = DteAddr> + '_ {
        (self.first..self.first + self.count).map(|index| DteAddr { table: self.table, index })
    }

    /// Takes a free entry, if one is known.
    pub fn allocate(&mut self) -> Option<DteAddr> {
        if let Some(i) = self.free.pop() {
            self.in_free[i as usize] = false;
            return Some(self.addr(i));
        }
        if self.fresh_next < self.count {
            self.fresh_next += 1;
            return Some(self.addr(self.fresh_next - 1));
        }
        None
    }

    fn addr(&self, rel: u32) -> DteAddr {
        DteAddr { table: self.table, index: self.first + rel }
    }

    fn rel(&self, dte: DteAddr) -> Option<u32> {
        (dte.table == self.table && dte.index >= self.first && dte.index < self.first + self.count)
            .then(|| dte.index - self.first)
    }

    /// Returns an entry that was allocated but never published (its index
    /// entry CAS failed): no one can have seen it, so it is free at once.
    pub fn release_unpublished(&mut self, dte: DteAddr) {
        if let Some(rel) = self.rel(dte) {
            self.push_free(rel);
        }
    }

    fn push_free(&mut self, rel: u32) {
        if !self.in_free[rel as usize] {
            self.in_free[rel as usize] = true;
            self.free.push(rel);
        }
    }

    /// The entries a recycling scan should inspect: every used entry not
    /// already known to be free.
    pub fn scan_targets(&self) -> Vec<DteAddr> {
        (0..self.fresh_next)
            .filter(|&r| !self.in_free[r as usize])
            .map(|r| self.addr(r))
            .collect()
    }

    /// Whether an entry with this header may be reused at `now`: it was
    /// marked for recycling and its expiration time plus the clock-skew
    /// allowance has passed.
    pub fn reusable(header: &DataEntryHeader, now: Nanos, skew: Duration) -> bool {
        header.recycle.recycle
            && header.state.state != DteState::Writing
            && header.recycle.expires_at.saturating_add(duration_nanos(skew)) <= now.0
    }

    /// Feeds one scanned header; returns whether the entry became free.
    pub fn collect(&mut self, dte: DteAddr, header: &DataEntryHeader, now: Nanos, skew: Duration) -> bool {
        match self.rel(dte) {
            Some(rel) if Self::reusable(header, now, skew) => {
                self.push_free(rel);
                true
            }
            _ => false,
        }
    }

    /// Entries known to be free right now (never used or collected).
    pub fn available(&self) -> u32 {
        (self.count - self.fresh_next) + self.free.len() as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{RecycleWord, StateWord};

    fn header(recycle: bool, expires_at: u64, state: DteState) -> DataEntryHeader {
        DataEntryHeader {
            state: StateWord { state, kind: None, src: 0, dst: 0, key_len: 1, value_len: 1 },
            deadline: 0,
            recycle: RecycleWord { recycle, expires_at },
            prev: 0,
        }
    }

    #[test]
    fn hands_out_each_owned_entry_once_then_runs_dry() {
        let mut a = DteAllocator::new(2, 10, 3);
        let got: Vec<u32> = (0..3).map(|_| a.allocate().unwrap().index).collect();
        assert_eq!(got, vec![10, 11, 12]);
        assert_eq!(a.allocate(), None);
        assert_eq!(a.scan_targets().len(), 3);
    }

    #[test]
    fn no_reuse_before_expiration_plus_skew() {
        let mut a = DteAllocator::new(0, 0, 1);
        let d = a.allocate().unwrap();
        let skew = Duration::from_nanos(50);
        let h = header(true, 1_000, DteState::Valid);
        assert!(!a.collect(d, &h, Nanos(999), skew));
        assert!(!a.collect(d, &h, Nanos(1_049), skew));
        assert_eq!(a.allocate(), None);
        assert!(a.collect(d, &h, Nanos(1_050), skew));
        assert_eq!(a.allocate(), Some(d));
    }

    #[test]
    fn unmarked_or_in_progress_entries_are_never_collected() {
        let mut a = DteAllocator::new(0, 0, 1);
        let d = a.allocate().unwrap();
        assert!(!a.collect(d, &header(false, 0, DteState::Valid), Nanos(u64::MAX), Duration::ZERO));
        assert!(!a.collect(d, &header(true, 0, DteState::Writing), Nanos(u64::MAX), Duration::ZERO));
    }

    #[test]
    fn unpublished_entries_are_free_at_once_and_only_once() {
        let mut a = DteAllocator::new(0, 0, 2);
        let d = a.allocate().unwrap();
        a.release_unpublished(d);
        a.release_unpublished(d);
        assert_eq!(a.available(), 2);
        assert_eq!(a.allocate(), Some(d));
        assert_eq!(a.allocate().unwrap().index, 1);
        assert_eq!(a.allocate(), None);
    }

    #[test]
    fn foreign_entries_are_ignored() {
        let mut a = DteAllocator::new(1, 0, 2);
        a.release_unpublished(DteAddr { table: 2, index: 0 });
        a.release_unpublished(DteAddr { table: 1, index: 7 });
        assert_eq!(a.available(), 2);
    }
}

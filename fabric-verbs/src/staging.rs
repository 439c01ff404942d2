//! The staging allocator: slices of an endpoint's registered buffer for READ
//! targets, WRITE sources and CAS results.
//!
//! First fit over a sorted free list, 8-byte aligned (CAS results must be
//! aligned), coalescing on free. A handful of requests are in flight at a
//! time, so the linear scans are cheap. When the buffer is exhausted the
//! endpoint registers a temporary buffer for that one request instead.

/// A first-fit allocator of byte ranges within `[0, size)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Arena {
    size: u64,
    /// Free ranges `(offset, len)`, sorted, non-adjacent.
    free: Vec<(u64, u64)>,
}

/// Allocation granularity and alignment.
pub const ALIGN: u64 = 8;

fn round(len: u64) -> u64 {
    len.max(1).div_ceil(ALIGN) * ALIGN
}

impl Arena {
    /// An arena of `size` bytes, all free.
    pub fn new(size: u64) -> Arena {
        let size = size / ALIGN * ALIGN;
        Arena {
            size,
            free: if size > 0 {
                vec![(0, size)]
            } else {
                Vec::new()
            },
        }
    }

    /// Reserves `len` bytes (rounded up to [`ALIGN`]); the offset, or `None`
    /// if no free range is large enough.
    pub fn alloc(&mut self, len: u64) -> Option<u64> {
        let want = round(len);
        let i = self.free.iter().position(|&(_, l)| l >= want)?;
        let (off, l) = self.free[i];
        if l == want {
            self.free.remove(i);
        } else {
            self.free[i] = (off + want, l - want);
        }
        Some(off)
    }

    /// Returns the `len` bytes at `offset` (as passed to and returned by `alloc`).
    pub fn free(&mut self, offset: u64, len: u64) {
        let len = round(len);
        let i = self.free.partition_point(|&(o, _)| o < offset);
        self.free.insert(i, (offset, len));
        // Coalesce with the next, then with the previous.
        if i + 1 < self.free.len() && self.free[i].0 + self.free[i].1 == self.free[i + 1].0 {
            self.free[i].1 += self.free[i + 1].1;
            self.free.remove(i + 1);
        }
        if i > 0 && self.free[i - 1].0 + self.free[i - 1].1 == self.free[i].0 {
            self.free[i - 1].1 += self.free[i].1;
            self.free.remove(i);
        }
    }

    /// Bytes currently free.
    #[cfg(test)]
    pub fn free_bytes(&self) -> u64 {
        self.free.iter().map(|&(_, l)| l).sum()
    }

    /// Total size.
    #[cfg(test)]
    pub fn size(&self) -> u64 {
        self.size
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocations_are_aligned_disjoint_and_reusable() {
        let mut a = Arena::new(64);
        let x = a.alloc(13).unwrap();
        let y = a.alloc(8).unwrap();
        let z = a.alloc(1).unwrap();
        assert_eq!((x, y, z), (0, 16, 24));
        assert!(a.alloc(40).is_none(), "only 32 bytes left");
        a.free(y, 8);
        assert_eq!(a.alloc(8), Some(16), "first fit reuses the hole");
        a.free(x, 13);
        a.free(16, 8);
        a.free(z, 1);
        assert_eq!(a.free_bytes(), 64);
        assert_eq!(a.free, vec![(0, 64)], "fully coalesced");
        assert_eq!(a.alloc(64), Some(0));
        assert_eq!(a.alloc(1), None);
    }

    #[test]
    fn out_of_order_frees_coalesce() {
        let mut a = Arena::new(4096);
        let offs: Vec<u64> = (0..10).map(|_| a.alloc(100).unwrap()).collect();
        for &o in offs.iter().rev().step_by(2) {
            a.free(o, 100);
        }
        for &o in offs.iter().step_by(2) {
            a.free(o, 100);
        }
        assert_eq!(a.free, vec![(0, 4096)]);
        assert_eq!(Arena::new(7).alloc(1), None);
        assert_eq!(Arena::new(15).size(), 8);
    }
}

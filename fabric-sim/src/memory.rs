//! A node's registered memory: regions of 64-bit atomic words with
//! byte-addressed, word-at-a-time access, and the NIC's compare-and-swap.
//!
//! Layout: word `w` of a region holds bytes `8w..8w+8`, little-endian
//! (`u64::to_le_bytes`). Every word access is `SeqCst`, so the accesses of all
//! threads form one total order; what the simulator deliberately does *not*
//! give is atomicity of anything larger than a word:
//!
//! - A multi-word READ or WRITE moves one word at a time, by default in
//!   ascending address order ([`TransferOrder`](crate::TransferOrder) chooses
//!   descending or a random permutation per transfer instead: real NICs
//!   promise no order within a transfer), so a concurrent reader can observe a
//!   torn buffer (part of a new write and the rest of an old one), but never a
//!   word that mixes bytes of two writes.
//! - An unaligned edge is read by loading the whole word and written by a
//!   compare-exchange loop on that word alone (bytes outside the access are
//!   preserved even under concurrent writes to them).
//!
//! # The NIC CAS is not a CPU atomic
//!
//! The NIC compare-and-swap (`NodeMemory::nic_cas`) models an RDMA NIC's
//! atomic unit: a per-node mutex held while it does `load; compare; store`.
//! NIC CASes on the same node are therefore atomic with respect to each
//! other, but **not** with respect to CPU stores (LocalWrite,
//! `SimFabric::write_word`) or RDMA WRITEs to the same word: such a store
//! landing between the NIC's load and its store is simply lost (overwritten),
//! exactly like on NICs whose atomics are not serialised with host memory
//! traffic. The protocol must therefore never mix CAS with plain stores on an
//! index table entry. `SimConfig::yield_inside_cas` widens that window.

use nessie_protocol::{FabricError, NodeId, Region, RemoteAddr, Topology};

use crate::config::SimConfigError;
use crate::sync::atomic::{AtomicU64, Ordering};
use crate::sync::{self, Mutex};

/// Ordering of every simulated memory access.
const ORD: Ordering = Ordering::SeqCst;

/// One piece of a transfer: (word index, first byte in the word, end byte in
/// the word, position in the caller's buffer).
type Piece = (usize, usize, usize, usize);

/// The order in which one transfer moves its words (see
/// [`TransferOrder`](crate::TransferOrder), which chooses it per transfer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WordOrder {
    /// Lowest address first.
    Ascending,
    /// Highest address first.
    Descending,
    /// A permutation drawn from this seed.
    Shuffled(u64),
}

impl WordOrder {
    /// The pieces in this order (ascending transfers allocate nothing).
    fn arrange<I: Iterator<Item = Piece>>(self, pieces: I) -> Arranged<I> {
        let mut v: Vec<Piece> = match self {
            WordOrder::Ascending => return Arranged::InOrder(pieces),
            _ => pieces.collect(),
        };
        match self {
            WordOrder::Ascending => {}
            WordOrder::Descending => v.reverse(),
            WordOrder::Shuffled(mut seed) => {
                // Fisher-Yates with splitmix64.
                for i in (1..v.len()).rev() {
                    let z = nessie_protocol::rng::splitmix64(&mut seed);
                    v.swap(i, (z % (i as u64 + 1)) as usize);
                }
            }
        }
        Arranged::Reordered(v.into_iter())
    }
}

/// The pieces of a transfer in the order they are moved.
enum Arranged<I> {
    InOrder(I),
    Reordered(std::vec::IntoIter<Piece>),
}

impl<I: Iterator<Item = Piece>> Iterator for Arranged<I> {
    type Item = Piece;

    fn next(&mut self) -> Option<Piece> {
        match self {
            Arranged::InOrder(i) => i.next(),
            Arranged::Reordered(i) => i.next(),
        }
    }
}

/// One registered region: zero-initialised 64-bit words.
#[derive(Debug)]
pub(crate) struct RegionMemory {
    node: NodeId,
    region: Region,
    /// Size in bytes (the last word may be only partly addressable).
    size: u64,
    words: Box<[AtomicU64]>,
}

impl RegionMemory {
    /// A zeroed region of `size` bytes.
    pub(crate) fn new(node: NodeId, region: Region, size: u64) -> Result<Self, SimConfigError> {
        let n = usize::try_from(size.div_ceil(8)).map_err(|_| SimConfigError::RegionTooLarge {
            region,
            bytes: size,
        })?;
        let words = (0..n).map(|_| AtomicU64::new(0)).collect();
        Ok(RegionMemory {
            node,
            region,
            size,
            words,
        })
    }

    /// The node whose region this is.
    pub(crate) fn node(&self) -> NodeId {
        self.node
    }

    /// Size of the region in bytes.
    pub(crate) fn size(&self) -> u64 {
        self.size
    }

    fn out_of_range(&self, offset: u64, len: u64) -> FabricError {
        FabricError::OutOfRange {
            node: self.node,
            region: self.region,
            offset,
            len,
            size: self.size,
        }
    }

    /// Checks that `offset..offset + len` lies inside the region.
    fn check(&self, offset: u64, len: u64) -> Result<(), FabricError> {
        match offset.checked_add(len) {
            Some(end) if end <= self.size => Ok(()),
            _ => Err(self.out_of_range(offset, len)),
        }
    }

    /// The 8-byte aligned word at byte `offset`.
    fn word(&self, offset: u64) -> Result<&AtomicU64, FabricError> {
        if offset & 7 != 0 {
            return Err(FabricError::Misaligned(RemoteAddr {
                node: self.node,
                region: self.region,
                offset,
            }));
        }
        self.check(offset, 8)?;
        usize::try_from(offset / 8)
            .ok()
            .and_then(|i| self.words.get(i))
            .ok_or_else(|| self.out_of_range(offset, 8))
    }

    /// Splits `offset..offset + len` into per-word pieces
    /// `(word index, first byte in word, end byte in word, position in buffer)`,
    /// in ascending address order. The range must have been checked.
    fn pieces(offset: u64, len: u64) -> impl Iterator<Item = Piece> {
        let end = offset + len;
        let mut pos = offset;
        std::iter::from_fn(move || {
            if pos >= end {
                return None;
            }
            let base = pos & !7;
            let lo = (pos - base) as usize;
            let hi = (end - base).min(8) as usize;
            let piece = ((base / 8) as usize, lo, hi, (pos - offset) as usize);
            pos = base + hi as u64;
            Some(piece)
        })
    }

    /// Reads `len` bytes at `offset`, one word at a time in `order`.
    pub(crate) fn read(
        &self,
        offset: u64,
        len: u64,
        hook: Option<fn()>,
        order: WordOrder,
    ) -> Result<Vec<u8>, FabricError> {
        self.check(offset, len)?;
        let mut out = vec![0u8; len as usize];
        for (w, lo, hi, at) in order.arrange(Self::pieces(offset, len)) {
            if let Some(h) = hook {
                h();
            }
            let bytes = self.words[w].load(ORD).to_le_bytes();
            out[at..at + (hi - lo)].copy_from_slice(&bytes[lo..hi]);
        }
        Ok(out)
    }

    /// Writes `data` at `offset`, one word at a time in `order`; a partial
    /// edge word is updated by a compare-exchange loop on that word.
    pub(crate) fn write(
        &self,
        offset: u64,
        data: &[u8],
        hook: Option<fn()>,
        order: WordOrder,
    ) -> Result<(), FabricError> {
        self.check(offset, data.len() as u64)?;
        for (w, lo, hi, at) in order.arrange(Self::pieces(offset, data.len() as u64)) {
            if let Some(h) = hook {
                h();
            }
            let chunk = &data[at..at + (hi - lo)];
            let word = &self.words[w];
            if lo == 0 && hi == 8 {
                let mut bytes = [0u8; 8];
                bytes.copy_from_slice(chunk);
                word.store(u64::from_le_bytes(bytes), ORD);
                continue;
            }
            let mut current = word.load(ORD);
            loop {
                let mut bytes = current.to_le_bytes();
                bytes[lo..hi].copy_from_slice(chunk);
                match word.compare_exchange(current, u64::from_le_bytes(bytes), ORD, ORD) {
                    Ok(_) => break,
                    Err(actual) => current = actual,
                }
            }
        }
        Ok(())
    }

    /// Loads the aligned word at `offset`.
    pub(crate) fn load_word(&self, offset: u64) -> Result<u64, FabricError> {
        Ok(self.word(offset)?.load(ORD))
    }

    /// Stores `value` into the aligned word at `offset` (a plain CPU store).
    pub(crate) fn store_word(&self, offset: u64, value: u64) -> Result<(), FabricError> {
        self.word(offset)?.store(value, ORD);
        Ok(())
    }

    /// A copy of every word, loaded in ascending order.
    pub(crate) fn snapshot(&self) -> Vec<u64> {
        self.words.iter().map(|w| w.load(ORD)).collect()
    }
}

/// A node's two registered regions and its NIC's atomic unit.
#[derive(Debug)]
pub(crate) struct NodeMemory {
    index: RegionMemory,
    data: RegionMemory,
    /// Held by the NIC for the whole load-compare-store of a CAS.
    atomic_unit: Mutex<()>,
}

impl NodeMemory {
    /// Zeroed regions sized by `topology`.
    pub(crate) fn new(node: NodeId, topology: &Topology) -> Result<Self, SimConfigError> {
        let index_bytes = u64::from(topology.index_slots_per_node) * 8;
        Ok(NodeMemory {
            index: RegionMemory::new(node, Region::Index, index_bytes)?,
            data: RegionMemory::new(node, Region::Data, topology.data_bytes_per_node)?,
            atomic_unit: Mutex::new(()),
        })
    }

    /// One of the node's regions.
    pub(crate) fn region(&self, region: Region) -> &RegionMemory {
        match region {
            Region::Index => &self.index,
            Region::Data => &self.data,
        }
    }

    /// The NIC compare-and-swap at the 8-byte aligned `offset` of `region`:
    /// returns the previous word, having stored `new` iff it equalled `expect`.
    ///
    /// Atomic only against other NIC CASes on this node (see the module
    /// documentation): a CPU store or RDMA WRITE to the word between the load
    /// and the store is lost. With `yield_between` the NIC yields the thread
    /// inside that window.
    pub(crate) fn nic_cas(
        &self,
        region: Region,
        offset: u64,
        expect: u64,
        new: u64,
        yield_between: bool,
    ) -> Result<u64, FabricError> {
        let word = self.region(region).word(offset)?;
        let _unit = sync::lock(&self.atomic_unit);
        let previous = word.load(ORD);
        if previous == expect {
            if yield_between {
                sync::yield_now();
            }
            word.store(new, ORD);
        }
        Ok(previous)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn region(size: u64) -> RegionMemory {
        RegionMemory::new(NodeId(0), Region::Data, size).expect("region")
    }

    #[test]
    fn little_endian_word_layout() {
        let r = region(16);
        r.write(0, &[1, 2, 3, 4, 5, 6, 7, 8, 9], None, WordOrder::Ascending)
            .expect("write");
        assert_eq!(
            r.load_word(0).expect("w0"),
            u64::from_le_bytes([1, 2, 3, 4, 5, 6, 7, 8])
        );
        assert_eq!(r.load_word(8).expect("w1"), 9);
    }

    #[test]
    fn unaligned_edges_preserve_neighbours() {
        let r = region(32);
        r.write(0, &[0xAA; 32], None, WordOrder::Ascending)
            .expect("fill");
        r.write(
            5,
            &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14],
            None,
            WordOrder::Ascending,
        )
        .expect("write");
        let all = r.read(0, 32, None, WordOrder::Ascending).expect("read");
        assert_eq!(&all[..5], &[0xAA; 5]);
        assert_eq!(
            &all[5..19],
            &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14]
        );
        assert_eq!(&all[19..], &[0xAA; 13]);
        assert_eq!(
            r.read(6, 3, None, WordOrder::Ascending).expect("mid"),
            vec![2, 3, 4]
        );
        assert_eq!(
            r.read(3, 0, None, WordOrder::Ascending).expect("empty"),
            Vec::<u8>::new()
        );
        // Within a single word, not touching either edge.
        r.write(25, &[7, 7], None, WordOrder::Ascending)
            .expect("inner");
        assert_eq!(
            r.read(24, 4, None, WordOrder::Ascending)
                .expect("inner read"),
            vec![0xAA, 7, 7, 0xAA]
        );
    }

    #[test]
    fn odd_sized_region_range() {
        let r = region(12);
        r.write(8, &[1, 2, 3, 4], None, WordOrder::Ascending)
            .expect("tail");
        assert_eq!(
            r.read(8, 4, None, WordOrder::Ascending).expect("tail"),
            vec![1, 2, 3, 4]
        );
        assert!(matches!(
            r.read(8, 5, None, WordOrder::Ascending),
            Err(FabricError::OutOfRange { size: 12, .. })
        ));
        assert!(matches!(
            r.load_word(8),
            Err(FabricError::OutOfRange { .. })
        ));
        assert!(matches!(
            r.read(u64::MAX, 2, None, WordOrder::Ascending),
            Err(FabricError::OutOfRange { .. })
        ));
    }

    #[test]
    fn every_word_order_moves_the_same_bytes() {
        for order in [
            WordOrder::Ascending,
            WordOrder::Descending,
            WordOrder::Shuffled(1),
            WordOrder::Shuffled(77),
        ] {
            let r = region(40);
            r.write(0, &[0xAA; 40], None, order).expect("fill");
            let data: Vec<u8> = (1..=27).collect();
            r.write(3, &data, None, order).expect("write");
            let all = r.read(0, 40, None, order).expect("read");
            assert_eq!(&all[..3], &[0xAA; 3], "{order:?}");
            assert_eq!(&all[3..30], &data[..], "{order:?}");
            assert_eq!(&all[30..], &[0xAA; 10], "{order:?}");
            assert_eq!(
                r.read(5, 9, None, order).expect("mid"),
                data[2..11].to_vec()
            );
        }
    }

    #[test]
    fn pieces_cover_range_in_order() {
        let pieces: Vec<_> = RegionMemory::pieces(6, 12).collect();
        assert_eq!(pieces, vec![(0, 6, 8, 0), (1, 0, 8, 2), (2, 0, 2, 10)]);
    }
}

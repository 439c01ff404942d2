//! The 64-bit index table entry (ITE).
//!
//! ```text
//!  63  62            48 47             32 31                              0
//! +---+----------------+-----------------+---------------------------------+
//! | P |  filter bits   |  data-table id  |        DTE index                |
//! +---+----------------+-----------------+---------------------------------+
//! ```
//!
//! `P` (present) is 1 when the entry refers to a data table entry. An empty
//! entry has `P = 0` and keeps the other 63 bits of the last reference it held
//! (a never-used entry is all zero). The data-table id field holds the node
//! number plus one, so that no emptied word equals the never-used word 0 (the
//! emptied word of entry 0 of node 0 with filter 0 would otherwise be 0).
//!
//! Because a data table entry is never reused within the expiration period of
//! being unlinked, and an entry that is emptied (or rolled back from an
//! uncommitted entry over an empty word) always names the entry it last held,
//! an empty word never recurs within that period, and a present word recurs
//! only when an uncommitted entry is rolled back to exactly the committed
//! entry it replaced (docs/protocol.md §2.1).

use crate::addr::DteAddr;

/// Most filter bits an entry can carry.
pub const MAX_FILTER_BITS: u8 = 15;

const PRESENT: u64 = 1 << 63;
const FILTER_SHIFT: u32 = 48;
const FILTER_MASK: u64 = (1 << MAX_FILTER_BITS) - 1;
const TABLE_SHIFT: u32 = 32;
/// The bits that name a data table entry (its table id and index).
const ENTRY_MASK: u64 = (0xffff << TABLE_SHIFT) | 0xffff_ffff;

/// A decoded index table entry (the raw word is kept; fields are views of it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IndexEntry(pub u64);

impl IndexEntry {
    /// The never-used empty entry.
    pub const NEVER_USED: IndexEntry = IndexEntry(0);

    /// An entry referring to `dte`, carrying `filter` bits of its key's hash.
    /// (Data table ids are below `u16::MAX`: node ids are.)
    pub fn new(dte: DteAddr, filter: u16) -> IndexEntry {
        IndexEntry(
            PRESENT
                | ((u64::from(filter) & FILTER_MASK) << FILTER_SHIFT)
                | (u64::from(dte.table.wrapping_add(1)) << TABLE_SHIFT)
                | u64::from(dte.index),
        )
    }

    /// Whether the entry refers to a data table entry.
    pub fn is_present(self) -> bool {
        self.0 & PRESENT != 0
    }

    /// Whether the entry is empty.
    pub fn is_empty(self) -> bool {
        !self.is_present()
    }

    /// The empty entry that remembers this reference (used when unlinking).
    pub fn emptied(self) -> IndexEntry {
        IndexEntry(self.0 & !PRESENT)
    }

    /// Whether the two words name the same data table entry, present or
    /// emptied, whatever their filter bits (the never-used word names none
    /// that exists: its table id field is 0).
    pub fn names_same_entry(self, other: IndexEntry) -> bool {
        self.0 & ENTRY_MASK == other.0 & ENTRY_MASK
    }

    /// The emptied word naming the same entry, its filter bits one more
    /// (wrapping): a MIGRATE fence's next seal over this word, so that the
    /// fencers of one copy only ever move its destination forward, never
    /// back to a word a pending install expects (docs/protocol.md §5.6).
    pub fn next_seal(self) -> IndexEntry {
        let count = (self.filter() + 1) & FILTER_MASK as u16;
        IndexEntry(
            (self.0 & !PRESENT & !(FILTER_MASK << FILTER_SHIFT))
                | (u64::from(count) << FILTER_SHIFT),
        )
    }

    /// The data table entry referred to, if present.
    pub fn dte(self) -> Option<DteAddr> {
        self.is_present().then_some(DteAddr {
            table: (((self.0 >> TABLE_SHIFT) & 0xffff) as u16).wrapping_sub(1),
            index: (self.0 & 0xffff_ffff) as u32,
        })
    }

    /// The filter bits stored in the entry.
    pub fn filter(self) -> u16 {
        ((self.0 >> FILTER_SHIFT) & FILTER_MASK) as u16
    }

    /// Whether a key with filter bits `filter` (already masked to the
    /// configured width) may be stored behind this entry.
    pub fn filter_matches(self, filter: u16) -> bool {
        self.filter() == filter
    }
}

impl std::fmt::Display for IndexEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.dte() {
            Some(d) => write!(f, "[{d} filter={:#x}]", self.filter()),
            None if self.0 == 0 => f.write_str("[empty]"),
            None => write!(f, "[empty, was {}]", IndexEntry(self.0 | PRESENT)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn never_used_entry_is_empty_and_zero() {
        assert!(IndexEntry::NEVER_USED.is_empty());
        assert_eq!(IndexEntry::NEVER_USED.dte(), None);
        assert_eq!(IndexEntry::NEVER_USED.0, 0);
    }

    #[test]
    fn fields_at_their_limits_round_trip() {
        let dte = DteAddr {
            table: u16::MAX - 1,
            index: u32::MAX,
        };
        let e = IndexEntry::new(dte, 0x7fff);
        assert_eq!(e.dte(), Some(dte));
        assert_eq!(e.filter(), 0x7fff);
        assert_eq!(e.0, u64::MAX);
        let zero = IndexEntry::new(DteAddr { table: 0, index: 0 }, 0);
        assert!(zero.is_present());
        assert_eq!(zero.dte(), Some(DteAddr { table: 0, index: 0 }));
    }

    /// A fence's seals name the copy's entry, stay empty, and grow by one
    /// in the filter bits (wrapping): none is the never-used word, and a
    /// run of seals returns to a word only after 2^15 of them.
    #[test]
    fn seals_name_the_copy_and_only_move_forward() {
        let copy = IndexEntry::new(DteAddr { table: 0, index: 6 }, 0x7ffe);
        let other = IndexEntry::new(DteAddr { table: 0, index: 7 }, 0x7ffe);
        assert!(copy.names_same_entry(copy.emptied()));
        assert!(!copy.names_same_entry(other.emptied()));
        assert!(!copy.names_same_entry(IndexEntry::NEVER_USED));
        let mut seal = copy;
        let mut seen = std::collections::HashSet::new();
        for _ in 0..(1 << MAX_FILTER_BITS) {
            seal = seal.next_seal();
            assert!(seal.is_empty() && seal != IndexEntry::NEVER_USED);
            assert!(seal.names_same_entry(copy));
            assert!(seen.insert(seal), "a seal came back early");
        }
        assert_eq!(seal, copy.emptied(), "back after 2^15 seals");
    }

    #[test]
    fn no_emptied_word_is_the_never_used_word() {
        // The corner that once collided: entry 0 of node 0, filter 0.
        let first = IndexEntry::new(DteAddr { table: 0, index: 0 }, 0);
        assert_ne!(first.emptied(), IndexEntry::NEVER_USED);
        for table in [0, 1, 7, u16::MAX - 1] {
            for index in [0, 1, u32::MAX] {
                for filter in [0, 1, 0x7fff] {
                    let e = IndexEntry::new(DteAddr { table, index }, filter);
                    assert_ne!(
                        e.emptied(),
                        IndexEntry::NEVER_USED,
                        "{table} {index} {filter}"
                    );
                }
            }
        }
    }

    #[test]
    fn emptied_entry_is_distinct_from_never_used_and_from_its_reference() {
        let e = IndexEntry::new(DteAddr { table: 3, index: 9 }, 5);
        let gone = e.emptied();
        assert!(gone.is_empty());
        assert_ne!(gone, IndexEntry::NEVER_USED);
        assert_ne!(gone, e);
        assert_eq!(gone.dte(), None);
    }

    proptest! {
        #[test]
        fn round_trip(table in 0..u16::MAX, index in any::<u32>(), filter in 0u16..=0x7fff) {
            let e = IndexEntry::new(DteAddr { table, index }, filter);
            prop_assert_eq!(e.dte(), Some(DteAddr { table, index }));
            prop_assert_eq!(e.filter(), filter);
            prop_assert!(e.filter_matches(filter));
        }
    }
}

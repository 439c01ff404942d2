//! The 64-bit index table entry (ITE).
//!
//! ```text
//!  63  62         56 55        48 47             32 31                   0
//! +---+-------------+------------+-----------------+---------------------+
//! | P | incarnation | filter bits|  data-table id  |      DTE index      |
//! +---+-------------+------------+-----------------+---------------------+
//! ```
//!
//! `P` (present) is 1 when the entry refers to a data table entry. An empty
//! entry has `P = 0` and keeps the other 63 bits of the last reference it held
//! (a never-used entry is all zero). The data-table id field holds the
//! table's id plus one (its node in the low 10 bits, its size class in the
//! high 6: [`DteAddr`]; node ids are at most 1,022, so the one never carries
//! into the class), so that no emptied word equals the never-used word 0
//! (the emptied word of entry 0 of node 0 with filter 0 would otherwise be
//! 0).
//!
//! The **incarnation** (7 bits) is the data table entry's reuse count
//! (modulo 128), which its state word carries too: each reuse of an entry
//! links it under a word, present or emptied, that none of its previous 127
//! incarnations had. So a CAS that expects a word it read can match again
//! only after the entry it names was reused 128 times, each reuse at least T
//! after the last unlink: a posted CAS has 127 expiration periods to land
//! instead of its attempt's deadline plus the skew (issue 39; docs/protocol.md
//! §2.1 and §4, A2′). Within one incarnation, an empty word never recurs and a
//! present word recurs only when an uncommitted entry is rolled back to
//! exactly the committed entry it replaced (docs/protocol.md §2.1).

use crate::addr::DteAddr;

/// Most filter bits an entry can carry.
pub const MAX_FILTER_BITS: u8 = 8;

/// Bits of the incarnation field: incarnations count modulo
/// `1 << INCARNATION_BITS`.
pub const INCARNATION_BITS: u8 = 7;

/// The largest incarnation; the one after it is 0.
pub const MAX_INCARNATION: u8 = (1 << INCARNATION_BITS) - 1;

const PRESENT: u64 = 1 << 63;
const INCARNATION_SHIFT: u32 = 56;
const INCARNATION_MASK: u64 = MAX_INCARNATION as u64;
const FILTER_SHIFT: u32 = 48;
const FILTER_MASK: u64 = (1 << MAX_FILTER_BITS) - 1;
const TABLE_SHIFT: u32 = 32;
/// The bits that name one incarnation of a data table entry (its
/// incarnation, table id and index).
const ENTRY_MASK: u64 =
    (INCARNATION_MASK << INCARNATION_SHIFT) | (0xffff << TABLE_SHIFT) | 0xffff_ffff;

/// The incarnation after `incarnation` (wrapping at [`MAX_INCARNATION`]).
pub fn next_incarnation(incarnation: u8) -> u8 {
    incarnation.wrapping_add(1) & MAX_INCARNATION
}

/// A decoded index table entry (the raw word is kept; fields are views of it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IndexEntry(pub u64);

impl IndexEntry {
    /// The never-used empty entry.
    pub const NEVER_USED: IndexEntry = IndexEntry(0);

    /// An entry referring to incarnation `incarnation` of `dte` (the
    /// entry's state word says which), carrying `filter` bits of its key's
    /// hash. (Data table ids are below `u16::MAX`: node ids are.)
    pub fn new(dte: DteAddr, incarnation: u8, filter: u16) -> IndexEntry {
        IndexEntry(
            PRESENT
                | ((u64::from(incarnation) & INCARNATION_MASK) << INCARNATION_SHIFT)
                | ((u64::from(filter) & FILTER_MASK) << FILTER_SHIFT)
                | (u64::from(dte.table.wrapping_add(1)) << TABLE_SHIFT)
                | u64::from(dte.index),
        )
    }

    /// The growth seal: the word every entry of an index generation the
    /// index grew out of holds for good (docs/protocol.md §2.5). Neither
    /// present nor empty: nothing is linked there and nothing may be. Its
    /// table field is 0, which no word naming an entry has (ids are stored
    /// plus one), and its index is all ones, which no fence's seal over the
    /// never-used word has.
    pub const GROWTH_SEAL: IndexEntry = IndexEntry(
        (INCARNATION_MASK << INCARNATION_SHIFT) | (FILTER_MASK << FILTER_SHIFT) | 0xffff_ffff,
    );

    /// Whether this is the [growth seal](IndexEntry::GROWTH_SEAL).
    pub fn is_growth_seal(self) -> bool {
        self == IndexEntry::GROWTH_SEAL
    }

    /// Whether the entry refers to a data table entry.
    pub fn is_present(self) -> bool {
        self.0 & PRESENT != 0
    }

    /// Whether the entry is empty: it links nothing and may link a key (a
    /// growth seal is not empty).
    pub fn is_empty(self) -> bool {
        !self.is_present() && !self.is_growth_seal()
    }

    /// The empty entry that remembers this reference (used when unlinking).
    pub fn emptied(self) -> IndexEntry {
        IndexEntry(self.0 & !PRESENT)
    }

    /// Whether the two words name the same incarnation of one data table
    /// entry, present or emptied, whatever their filter bits (the never-used
    /// word names none that exists: its table id field is 0).
    pub fn names_same_entry(self, other: IndexEntry) -> bool {
        self.0 & ENTRY_MASK == other.0 & ENTRY_MASK
    }

    /// The emptied word naming the same entry, its filter bits one more
    /// (wrapping): a MIGRATE fence's seal over this word, so that every
    /// fence CAS moves a destination forward, never back to a word a
    /// pending install expects (docs/protocol.md §5.6).
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

    /// The incarnation of the data table entry named (present or emptied).
    pub fn incarnation(self) -> u8 {
        ((self.0 >> INCARNATION_SHIFT) & INCARNATION_MASK) as u8
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
            Some(d) if self.incarnation() == 0 => write!(f, "[{d} filter={:#x}]", self.filter()),
            Some(d) => write!(
                f,
                "[{d}#{} filter={:#x}]",
                self.incarnation(),
                self.filter()
            ),
            None if self.0 == 0 => f.write_str("[empty]"),
            None if self.is_growth_seal() => f.write_str("[sealed by growth]"),
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
        let e = IndexEntry::new(dte, MAX_INCARNATION, 0xff);
        assert_eq!(e.dte(), Some(dte));
        assert_eq!(e.filter(), 0xff);
        assert_eq!(e.incarnation(), MAX_INCARNATION);
        assert_eq!(e.0, u64::MAX);
        let zero = IndexEntry::new(DteAddr { table: 0, index: 0 }, 0, 0);
        assert!(zero.is_present());
        assert_eq!(zero.dte(), Some(DteAddr { table: 0, index: 0 }));
    }

    /// A fence's seals name the copy's entry, stay empty, and grow by one
    /// in the filter bits (wrapping): none is the never-used word, and a
    /// run of seals returns to a word only after 2^8 of them. Another
    /// incarnation of the copy's entry is another entry.
    #[test]
    fn seals_name_the_copy_and_only_move_forward() {
        let at = DteAddr { table: 0, index: 6 };
        let copy = IndexEntry::new(at, 3, 0xfe);
        let other = IndexEntry::new(DteAddr { table: 0, index: 7 }, 3, 0xfe);
        assert!(copy.names_same_entry(copy.emptied()));
        assert!(!copy.names_same_entry(other.emptied()));
        assert!(!copy.names_same_entry(IndexEntry::new(at, 2, 0xfe).emptied()));
        assert!(!copy.names_same_entry(IndexEntry::NEVER_USED));
        let mut seal = copy;
        let mut seen = std::collections::HashSet::new();
        for _ in 0..(1 << MAX_FILTER_BITS) {
            seal = seal.next_seal();
            assert!(seal.is_empty() && seal != IndexEntry::NEVER_USED);
            assert!(seal.names_same_entry(copy));
            assert!(seen.insert(seal), "a seal came back early");
        }
        assert_eq!(seal, copy.emptied(), "back after 2^8 seals");
    }

    /// Every reuse of an entry is linked under words, present and emptied,
    /// that none of its previous 127 incarnations had.
    #[test]
    fn an_entry_reused_127_times_never_repeats_a_word() {
        let at = DteAddr {
            table: 2,
            index: 41,
        };
        let mut seen = std::collections::HashSet::new();
        let mut incarnation = 5;
        for _ in 0..=MAX_INCARNATION {
            let w = IndexEntry::new(at, incarnation, 0x3c);
            assert!(seen.insert(w) && seen.insert(w.emptied()), "{w}");
            incarnation = next_incarnation(incarnation);
        }
        assert_eq!(incarnation, 5, "the 128th reuse repeats the first");
    }

    #[test]
    fn no_emptied_word_is_the_never_used_word() {
        // The corner that once collided: entry 0 of node 0, filter 0.
        let first = IndexEntry::new(DteAddr { table: 0, index: 0 }, 0, 0);
        assert_ne!(first.emptied(), IndexEntry::NEVER_USED);
        for table in [0, 1, 7, u16::MAX - 1] {
            for index in [0, 1, u32::MAX] {
                for filter in [0, 1, 0xff] {
                    let e = IndexEntry::new(DteAddr { table, index }, 0, filter);
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
        let e = IndexEntry::new(DteAddr { table: 3, index: 9 }, 1, 5);
        let gone = e.emptied();
        assert!(gone.is_empty());
        assert_ne!(gone, IndexEntry::NEVER_USED);
        assert_ne!(gone, e);
        assert_eq!(gone.dte(), None);
    }

    proptest! {
        #[test]
        fn round_trip(
            table in 0..u16::MAX,
            index in any::<u32>(),
            incarnation in 0..=MAX_INCARNATION,
            filter in 0u16..=0xff,
        ) {
            let e = IndexEntry::new(DteAddr { table, index }, incarnation, filter);
            prop_assert_eq!(e.dte(), Some(DteAddr { table, index }));
            prop_assert_eq!(e.incarnation(), incarnation);
            prop_assert_eq!(e.emptied().incarnation(), incarnation);
            prop_assert_eq!(e.filter(), filter);
            prop_assert!(e.filter_matches(filter));
        }
    }
}

//! A node's data region: one data table per **size class**, laid end to end.
//!
//! A size class is a data table of entries of one size, whose payload (key
//! and value, each padded to 8 bytes) holds what fits (issue 41: values of
//! any size in one deployment without reserving the largest value for every
//! key). Class 0 is the main table (entries for any key up to
//! `Config::max_key_len` with any value up to `Config::max_value_len`,
//! `Config::dtes_per_node` of them), at offset 0 of the data region, so that
//! a deployment of one class is laid out exactly as before classes; classes
//! 1.. are the smaller ones (`Config::size_classes`, ascending), each after
//! the one before. A PUT writes its entry in the smallest class its key and
//! value fit.
//!
//! A class is named by the data-table id an index word carries
//! ([`DteAddr::table`]): its low [`NODE_BITS`] bits are the node, its high
//! bits the class (docs/protocol.md §2.1).

use crate::addr::{DteAddr, NodeId};
use crate::layout::DataLayout;

/// Bits of a data-table id that name the node (the rest name the class).
pub const NODE_BITS: u32 = 10;

/// Most nodes a deployment can have (ids 0 to 1,022): the index word
/// stores the node plus one in [`NODE_BITS`] bits.
pub const MAX_NODES: u16 = (1 << NODE_BITS) - 1;

/// Most size classes (the 6 class bits of the data-table id).
pub const MAX_CLASSES: usize = 1 << (16 - NODE_BITS);

/// One size class: the size of its entries and their number on each node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SizeClass {
    /// Bytes of each entry: the 32-byte header and a payload for the key
    /// and the value, each padded to 8 (a multiple of 8, at least 40).
    pub entry_bytes: u32,
    /// Entries of the class on each node (each client owns an equal share).
    pub dtes_per_node: u32,
}

/// Where each class's table lies in a node's data region, and its entries'
/// geometry: a view of a configuration's classes (it allocates nothing, so
/// checkers may ask it for every entry they decode).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DataTables<'a> {
    max_key: u32,
    main: SizeClass,
    smaller: &'a [SizeClass],
}

impl<'a> DataTables<'a> {
    /// The tables for keys up to `max_key` bytes of the main class `main`
    /// (class 0) and the classes `smaller` (classes 1.., in order), laid out
    /// one after the other.
    pub fn new(max_key: u32, main: SizeClass, smaller: &'a [SizeClass]) -> DataTables<'a> {
        DataTables {
            max_key,
            main,
            smaller,
        }
    }

    /// Number of classes.
    pub fn len(&self) -> usize {
        1 + self.smaller.len()
    }

    /// Whether there is no class (never: the main class always exists).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Class `class`, if it exists.
    pub fn class(&self, class: u8) -> Option<SizeClass> {
        match class {
            0 => Some(self.main),
            c => self.smaller.get(usize::from(c) - 1).copied(),
        }
    }

    /// Every class, class 0 first.
    pub fn classes(&self) -> impl Iterator<Item = (u8, SizeClass)> + 'a {
        std::iter::once(self.main)
            .chain(self.smaller.iter().copied())
            .enumerate()
            .map(|(i, c)| (i as u8, c))
    }

    fn geometry(&self, c: SizeClass) -> DataLayout {
        DataLayout {
            max_key: self.max_key,
            payload: c
                .entry_bytes
                .saturating_sub(crate::layout::HEADER_BYTES as u32),
        }
    }

    fn table_bytes(&self, c: SizeClass) -> u64 {
        self.geometry(c)
            .entry_bytes()
            .saturating_mul(u64::from(c.dtes_per_node))
    }

    /// The geometry of class `class`'s entries (class 0's for a class that
    /// does not exist: no index word of a deployment names one, and a reader
    /// that follows a word of another deployment finds a key that is not its
    /// own).
    pub fn layout(&self, class: u8) -> DataLayout {
        self.geometry(self.class(class).unwrap_or(self.main))
    }

    /// The geometry of `dte`'s entry (its class's).
    pub fn layout_of(&self, dte: DteAddr) -> DataLayout {
        self.layout(dte.class())
    }

    /// Byte offset of class `class`'s table in the data region (0 for a
    /// class that does not exist, as [`DataTables::layout`]).
    pub fn table_offset(&self, class: u8) -> u64 {
        if self.class(class).is_none() {
            return 0;
        }
        self.classes()
            .take(usize::from(class))
            .fold(0u64, |at, (_, c)| at.saturating_add(self.table_bytes(c)))
    }

    /// Byte offset of `dte` in its node's data region.
    pub fn entry_offset(&self, dte: DteAddr) -> u64 {
        self.table_offset(dte.class()) + self.layout_of(dte).entry_offset(dte.index)
    }

    /// The smallest class whose entries hold a key of `key_len` and a value
    /// of `value_len` bytes.
    pub fn class_for(&self, key_len: usize, value_len: usize) -> Option<u8> {
        self.classes()
            .filter(|&(_, c)| self.geometry(c).fits(key_len, value_len))
            .min_by_key(|(_, c)| c.entry_bytes)
            .map(|(i, _)| i)
    }

    /// Bytes of one node's data region (every class's table; saturated at
    /// `u64::MAX`, which a validated configuration never reaches).
    pub fn region_bytes(&self) -> u64 {
        self.checked_region_bytes().unwrap_or(u64::MAX)
    }

    /// Bytes of one node's data region, if they fit in 64 bits.
    pub fn checked_region_bytes(&self) -> Option<u64> {
        self.classes().try_fold(0u64, |at, (_, c)| {
            self.geometry(c)
                .entry_bytes()
                .checked_mul(u64::from(c.dtes_per_node))
                .and_then(|b| at.checked_add(b))
        })
    }

    /// The entry that begins at byte `offset` of `node`'s data region, if
    /// one does.
    pub fn entry_at(&self, node: NodeId, offset: u64) -> Option<DteAddr> {
        let mut at = 0u64;
        for (class, c) in self.classes() {
            let bytes = self.table_bytes(c);
            if offset < at.saturating_add(bytes) {
                let entry = self.geometry(c).entry_bytes();
                let rel = offset - at;
                if entry == 0 || !rel.is_multiple_of(entry) {
                    return None;
                }
                return Some(DteAddr::new(node, class, u32::try_from(rel / entry).ok()?));
            }
            at = at.saturating_add(bytes);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALLER: [SizeClass; 2] = [
        SizeClass {
            entry_bytes: 64,
            dtes_per_node: 10,
        },
        SizeClass {
            entry_bytes: 128,
            dtes_per_node: 6,
        },
    ];

    fn tables() -> DataTables<'static> {
        let main = SizeClass {
            entry_bytes: 32 + 8 + 1024,
            dtes_per_node: 4,
        };
        DataTables::new(8, main, &SMALLER)
    }

    /// Class 0 sits at offset 0 with the one-class geometry; the others
    /// follow it, each after the one before.
    #[test]
    fn classes_lie_end_to_end_from_the_main_table() {
        let t = tables();
        let main = (32 + 8 + 1024) * 4;
        assert_eq!(t.table_offset(0), 0);
        assert_eq!(t.table_offset(1), main);
        assert_eq!(t.table_offset(2), main + 64 * 10);
        assert_eq!(t.region_bytes(), main + 64 * 10 + 128 * 6);
        let d = DteAddr::new(NodeId(5), 2, 3);
        assert_eq!(t.entry_offset(d), t.table_offset(2) + 3 * 128);
        assert_eq!(t.entry_at(NodeId(5), t.entry_offset(d)), Some(d));
        assert_eq!(t.entry_at(NodeId(5), t.entry_offset(d) + 8), None);
        assert_eq!(t.entry_at(NodeId(5), t.region_bytes()), None);
    }

    /// Key and value share a class's payload: the class a write takes
    /// depends on both.
    #[test]
    fn a_write_goes_to_the_smallest_class_its_key_and_value_fit() {
        let t = tables();
        assert_eq!(t.class_for(8, 0), Some(1));
        assert_eq!(t.class_for(8, 24), Some(1));
        assert_eq!(t.class_for(1, 25), Some(2));
        assert_eq!(t.class_for(8, 88), Some(2));
        assert_eq!(t.class_for(8, 89), Some(0));
        assert_eq!(t.class_for(8, 1024), Some(0));
        assert_eq!(t.class_for(8, 1025), None);
        assert_eq!(t.class_for(9, 0), None);
    }
}

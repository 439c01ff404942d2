//! Bit-exact layouts of the two kinds of table entry.
//!
//! - [`IndexEntry`]: the 64-bit index table entry (ITE) of the cuckoo index.
//! - [`DataEntryHeader`] and friends: the data table entry (DTE) that holds a
//!   key, a value and the metadata the protocol coordinates on.
//!
//! Both are documented with bit diagrams in `docs/protocol.md`.

mod data_entry;
mod index_entry;
mod tables;

pub use data_entry::{
    DataEntryHeader, DataLayout, DteKind, DteState, RecycleWord, StateWord, HEADER_BYTES,
    MAX_CANDIDATE_POSITION, MAX_KEY_LEN_FIELD, MAX_VALUE_LEN_FIELD,
};
pub use index_entry::{
    next_incarnation, IndexEntry, INCARNATION_BITS, MAX_FILTER_BITS, MAX_INCARNATION,
};
pub use tables::{DataTables, SizeClass, MAX_CLASSES, MAX_NODES, NODE_BITS};

/// Largest value length a data table entry can describe.
pub fn data_entry_max_value() -> u32 {
    MAX_VALUE_LEN_FIELD
}

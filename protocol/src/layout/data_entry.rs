//! The data table entry (DTE): header, key and value.
//!
//! ```text
//! byte 0   state word     (compare-and-swapped by NICs only)
//!           63          36 35      24 23       17 16   11 10    5 4  3 2   0
//!          +--------------+----------+-----------+-------+-------+----+-----+
//!          |  value len   | key len  |incarnation|  dst  |  src  |kind|state|
//!          +--------------+----------+-----------+-------+-------+----+-----+
//! byte 8   owner deadline (ns): after it, any client may reclaim the entry
//! byte 16  recycle word:  bit 63 recycle flag | bits 0-62 expiration time (ns)
//! byte 24  previous version: the index table entry this entry replaced
//! byte 32  key   (key len, padded to 8 bytes)
//!  ...     value (value len, padded to 8 bytes), right after the key
//!  ...     the rest of the size class's payload, unused
//! ```
//!
//! The metadata is 32 bytes. Header and key come first, so a client can read
//! them without the value (the paper's "multiple reads"). `src`/`dst` are used
//! by MIGRATE copies: candidate positions (in the key's list of candidate
//! slots: N buckets of B slots, so up to 64 positions) of the source and
//! destination index table entries. `incarnation` is the entry's reuse count
//! modulo 128, which every index word naming the entry
//! carries too ([`crate::layout::IndexEntry`]): a commit or abort CAS that
//! expects one incarnation's `Writing` word cannot match the next
//! incarnation's. Keys are at most [`MAX_KEY_LEN_FIELD`] (4,095) bytes.

use crate::layout::MAX_INCARNATION;

/// Bytes of metadata in front of the key.
pub const HEADER_BYTES: u64 = 32;

/// Lifecycle state of a data table entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DteState {
    /// Never written since the table was created (or garbage).
    Free,
    /// Written by an operation that has not committed ("invalid" in the paper).
    Writing,
    /// Committed value ("valid" in the paper).
    Valid,
    /// Committed deletion: the key is absent (a DELETE's tombstone).
    Deleted,
    /// Aborted by its owner or reclaimed by another client; never becomes valid.
    Aborted,
}

impl DteState {
    fn code(self) -> u64 {
        match self {
            DteState::Free => 0,
            DteState::Writing => 1,
            DteState::Valid => 2,
            DteState::Deleted => 3,
            DteState::Aborted => 4,
        }
    }

    fn from_code(c: u64) -> DteState {
        match c {
            1 => DteState::Writing,
            2 => DteState::Valid,
            3 => DteState::Deleted,
            4 => DteState::Aborted,
            _ => DteState::Free,
        }
    }

    /// Committed states are final: the entry's contents will not change again
    /// until it is recycled.
    pub fn is_committed(self) -> bool {
        matches!(self, DteState::Valid | DteState::Deleted)
    }

    /// Uncommitted entries (writing or aborted) stand for their previous version.
    pub fn is_uncommitted(self) -> bool {
        matches!(self, DteState::Writing | DteState::Aborted)
    }
}

/// Which operation wrote a data table entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DteKind {
    /// A PUT's new value.
    Put,
    /// A DELETE's tombstone (no value).
    Delete,
    /// A MIGRATE's copy of another entry.
    Migrate,
}

impl DteKind {
    fn code(self) -> u64 {
        match self {
            DteKind::Put => 1,
            DteKind::Delete => 2,
            DteKind::Migrate => 3,
        }
    }

    fn from_code(c: u64) -> Option<DteKind> {
        match c {
            1 => Some(DteKind::Put),
            2 => Some(DteKind::Delete),
            3 => Some(DteKind::Migrate),
            _ => None,
        }
    }
}

/// The first word of a data table entry. Its transitions out of `Writing` are
/// made only by NIC compare-and-swap, so that the owner's commit and a
/// reclaimer's abort cannot both succeed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StateWord {
    /// Lifecycle state.
    pub state: DteState,
    /// Writing operation (None for a free entry).
    pub kind: Option<DteKind>,
    /// MIGRATE copies: candidate position of the source entry.
    pub src: u8,
    /// MIGRATE copies: candidate position of the destination entry.
    pub dst: u8,
    /// The entry's incarnation: its reuse count modulo 128
    /// ([`crate::layout::MAX_INCARNATION`]), named by every index word that
    /// links it.
    pub incarnation: u8,
    /// Key length in bytes.
    pub key_len: u16,
    /// Value length in bytes (at most 2^28 - 1).
    pub value_len: u32,
}

/// Largest value length the state word can describe.
pub const MAX_VALUE_LEN_FIELD: u32 = (1 << 28) - 1;

/// Largest key length the state word can describe.
pub const MAX_KEY_LEN_FIELD: u16 = (1 << 12) - 1;

/// Largest candidate position (`src`, `dst`) the state word can describe:
/// N candidate buckets of B slots each, N and B at most 8.
pub const MAX_CANDIDATE_POSITION: u8 = (1 << 6) - 1;

impl StateWord {
    /// Encodes the word.
    pub fn encode(self) -> u64 {
        self.state.code()
            | (self.kind.map_or(0, DteKind::code) << 3)
            | ((u64::from(self.src) & u64::from(MAX_CANDIDATE_POSITION)) << 5)
            | ((u64::from(self.dst) & u64::from(MAX_CANDIDATE_POSITION)) << 11)
            | ((u64::from(self.incarnation) & u64::from(MAX_INCARNATION)) << 17)
            | ((u64::from(self.key_len) & u64::from(MAX_KEY_LEN_FIELD)) << 24)
            | ((u64::from(self.value_len) & u64::from(MAX_VALUE_LEN_FIELD)) << 36)
    }

    /// Decodes the word.
    pub fn decode(w: u64) -> StateWord {
        StateWord {
            state: DteState::from_code(w & 0x7),
            kind: DteKind::from_code((w >> 3) & 0x3),
            src: ((w >> 5) & u64::from(MAX_CANDIDATE_POSITION)) as u8,
            dst: ((w >> 11) & u64::from(MAX_CANDIDATE_POSITION)) as u8,
            incarnation: ((w >> 17) & u64::from(MAX_INCARNATION)) as u8,
            key_len: ((w >> 24) & u64::from(MAX_KEY_LEN_FIELD)) as u16,
            value_len: ((w >> 36) & u64::from(MAX_VALUE_LEN_FIELD)) as u32,
        }
    }

    /// The same word in another state.
    pub fn with_state(self, state: DteState) -> StateWord {
        StateWord { state, ..self }
    }
}

/// The recycle word: flag, who marked it, and a time.
///
/// Unmarked, the time is the entry's **incarnation stamp**: the deadline of
/// the attempt that wrote it, which differs between any two incarnations of
/// one entry (an entry is reused only T after its mark, so the next writer's
/// deadline is later). A remote recycle mark is a CAS that expects the
/// unmarked word the marker read with the entry's header: a mark that lands
/// late, or twice, finds another incarnation's word and changes nothing
/// (docs/protocol.md §5.7). Marked, the time is the expiration by the
/// marker's clock; a mark made by another client (`remote`) is reused only
/// T after the owner's own sweep first saw it, by the owner's clock
/// ([`crate::alloc::DteAllocator`]): the marker's stamp then only informs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RecycleWord {
    /// Set once the entry has been unlinked from every index table entry.
    pub recycle: bool,
    /// Set with `recycle` when the mark was made by a client other than the
    /// entry's owner (a NIC CAS, stamped by another clock).
    pub remote: bool,
    /// When set: the entry may be reused once this time (plus clock skew)
    /// has passed (a local mark). When clear: the incarnation stamp.
    pub expires_at: u64,
}

/// The recycle word's time field (62 bits, ns: 146 years).
const RECYCLE_TIME_MASK: u64 = (1 << 62) - 1;

impl RecycleWord {
    /// The word of a freshly written entry: unmarked, stamped with its
    /// incarnation (the writing attempt's deadline, ns).
    pub fn unmarked(stamp: u64) -> RecycleWord {
        RecycleWord {
            recycle: false,
            remote: false,
            expires_at: stamp,
        }
    }

    /// The word of an entry its owner marked, reusable from `expires_at`
    /// (plus skew).
    pub fn marked(expires_at: u64) -> RecycleWord {
        RecycleWord {
            recycle: true,
            remote: false,
            expires_at,
        }
    }

    /// The word of an entry another client marked (its clock's expiration
    /// `expires_at`, which the owner does not trust).
    pub fn marked_remotely(expires_at: u64) -> RecycleWord {
        RecycleWord {
            recycle: true,
            remote: true,
            expires_at,
        }
    }

    /// Encodes the word.
    pub fn encode(self) -> u64 {
        (u64::from(self.recycle) << 63)
            | (u64::from(self.remote) << 62)
            | (self.expires_at & RECYCLE_TIME_MASK)
    }

    /// Decodes the word.
    pub fn decode(w: u64) -> RecycleWord {
        RecycleWord {
            recycle: w >> 63 == 1,
            remote: (w >> 62) & 1 == 1,
            expires_at: w & RECYCLE_TIME_MASK,
        }
    }
}

/// The decoded 32-byte header of a data table entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DataEntryHeader {
    /// State, kind and lengths.
    pub state: StateWord,
    /// The owner's operation deadline (ns).
    pub deadline: u64,
    /// Recycle flag and expiration.
    pub recycle: RecycleWord,
    /// Previous version: the index table entry word this entry replaced.
    pub prev: u64,
}

impl DataEntryHeader {
    /// Decodes a header from the first 32 bytes of `bytes`; `None` if short.
    pub fn decode(bytes: &[u8]) -> Option<DataEntryHeader> {
        let word = |i: usize| -> Option<u64> {
            let b: [u8; 8] = bytes.get(i * 8..i * 8 + 8)?.try_into().ok()?;
            Some(u64::from_le_bytes(b))
        };
        Some(DataEntryHeader {
            state: StateWord::decode(word(0)?),
            deadline: word(1)?,
            recycle: RecycleWord::decode(word(2)?),
            prev: word(3)?,
        })
    }

    /// Whether the header is all zero: the entry was never written.
    pub fn is_never_written(&self) -> bool {
        self.encode() == [0u8; 32]
    }

    /// Encodes the header as 32 bytes.
    pub fn encode(&self) -> [u8; 32] {
        let mut out = [0u8; 32];
        for (i, w) in [
            self.state.encode(),
            self.deadline,
            self.recycle.encode(),
            self.prev,
        ]
        .into_iter()
        .enumerate()
        {
            out[i * 8..i * 8 + 8].copy_from_slice(&w.to_le_bytes());
        }
        out
    }
}

/// Sizes and offsets of the data table entries of one table (one size
/// class): a 32-byte header, then the key and the value, each padded to 8
/// bytes, in the entry's **payload** of fixed size. The value begins right
/// after the entry's own key, so a class's payload is shared between key
/// and value (issue 41: a short key leaves its room to the value).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DataLayout {
    /// Largest key in bytes (of the deployment).
    pub max_key: u32,
    /// Bytes after the header: the key and the value, each padded to 8.
    pub payload: u32,
}

fn pad8(n: u64) -> u64 {
    n.div_ceil(8) * 8
}

impl DataLayout {
    /// The layout of entries that hold any key up to `max_key` bytes with
    /// any value up to `max_value` bytes (the main table's).
    pub fn for_sizes(max_key: u32, max_value: u32) -> DataLayout {
        let payload = pad8(u64::from(max_key)) + pad8(u64::from(max_value));
        DataLayout {
            max_key,
            payload: u32::try_from(payload).unwrap_or(u32::MAX),
        }
    }

    /// Whether an entry of this layout holds a key of `key_len` and a value
    /// of `value_len` bytes.
    pub fn fits(&self, key_len: usize, value_len: usize) -> bool {
        key_len <= self.max_key as usize
            && pad8(key_len as u64) + pad8(value_len as u64) <= u64::from(self.payload)
    }

    /// Bytes a read of the header and a key of unknown length fetches: the
    /// header and the longest key, within the entry.
    pub fn header_and_key_bytes(&self) -> u64 {
        (HEADER_BYTES + pad8(u64::from(self.max_key))).min(self.entry_bytes())
    }

    /// Where the value of an entry whose key is `key_len` bytes begins,
    /// from the entry's start.
    pub fn value_start(&self, key_len: usize) -> u64 {
        HEADER_BYTES + pad8(key_len as u64)
    }

    /// Bytes of one whole entry.
    pub fn entry_bytes(&self) -> u64 {
        HEADER_BYTES + u64::from(self.payload)
    }

    /// Offset of entry `index` within its data table.
    pub fn entry_offset(&self, index: u32) -> u64 {
        u64::from(index) * self.entry_bytes()
    }

    /// Encodes a whole entry (header, key, value) ready to be written: only
    /// as many bytes as the key and value take (the rest of the entry is
    /// never read as part of them).
    pub fn encode_entry(&self, header: &DataEntryHeader, key: &[u8], value: &[u8]) -> Vec<u8> {
        let start = self.value_start(key.len()) as usize;
        let mut out = Vec::with_capacity(start + pad8(value.len() as u64) as usize);
        out.extend_from_slice(&header.encode());
        out.extend_from_slice(key);
        out.resize(start, 0);
        out.extend_from_slice(value);
        out.resize(start + pad8(value.len() as u64) as usize, 0);
        out
    }

    /// The key of an entry read into `bytes` (header first), if well-formed.
    pub fn key<'a>(&self, header: &DataEntryHeader, bytes: &'a [u8]) -> Option<&'a [u8]> {
        let len = usize::from(header.state.key_len);
        if len > self.max_key as usize || pad8(len as u64) > u64::from(self.payload) {
            return None;
        }
        bytes.get(HEADER_BYTES as usize..HEADER_BYTES as usize + len)
    }

    /// The value of an entry read into `bytes` (header first), if well-formed
    /// and fully read.
    pub fn value<'a>(&self, header: &DataEntryHeader, bytes: &'a [u8]) -> Option<&'a [u8]> {
        let key_len = usize::from(header.state.key_len);
        let len = header.state.value_len as usize;
        if !self.fits(key_len, len) {
            return None;
        }
        let start = self.value_start(key_len) as usize;
        bytes.get(start..start + len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn all_states() -> [DteState; 5] {
        [
            DteState::Free,
            DteState::Writing,
            DteState::Valid,
            DteState::Deleted,
            DteState::Aborted,
        ]
    }

    #[test]
    fn state_word_fields_at_their_limits_round_trip() {
        for state in all_states() {
            for kind in [
                None,
                Some(DteKind::Put),
                Some(DteKind::Delete),
                Some(DteKind::Migrate),
            ] {
                let w = StateWord {
                    state,
                    kind,
                    src: MAX_CANDIDATE_POSITION,
                    dst: MAX_CANDIDATE_POSITION - 1,
                    incarnation: MAX_INCARNATION,
                    key_len: MAX_KEY_LEN_FIELD,
                    value_len: MAX_VALUE_LEN_FIELD,
                };
                assert_eq!(StateWord::decode(w.encode()), w);
            }
        }
        let zero = StateWord::decode(0);
        assert_eq!(zero.state, DteState::Free);
        assert_eq!(zero.kind, None);
        assert_eq!(zero.incarnation, 0);
    }

    /// Two incarnations of one entry, in the same state with the same
    /// lengths, have different state words: a commit or abort CAS of one
    /// cannot land on the other.
    #[test]
    fn the_next_incarnation_has_another_state_word() {
        let w = StateWord {
            state: DteState::Writing,
            kind: Some(DteKind::Put),
            src: 0,
            dst: 0,
            incarnation: MAX_INCARNATION,
            key_len: 8,
            value_len: 8,
        };
        let next = StateWord {
            incarnation: crate::layout::next_incarnation(w.incarnation),
            ..w
        };
        assert_eq!(next.incarnation, 0);
        assert_ne!(w.encode(), next.encode());
    }

    #[test]
    fn only_valid_and_deleted_are_committed() {
        for s in all_states() {
            assert_eq!(
                s.is_committed(),
                matches!(s, DteState::Valid | DteState::Deleted)
            );
            assert_eq!(
                s.is_uncommitted(),
                matches!(s, DteState::Writing | DteState::Aborted)
            );
        }
    }

    #[test]
    fn recycle_word_at_its_limits() {
        let max = RecycleWord {
            recycle: true,
            remote: true,
            expires_at: (1 << 62) - 1,
        };
        assert_eq!(RecycleWord::decode(max.encode()), max);
        assert_eq!(RecycleWord::decode(0), RecycleWord::unmarked(0));
        let remote = RecycleWord::marked_remotely(7);
        assert_eq!(RecycleWord::decode(remote.encode()), remote);
        assert_ne!(remote.encode(), RecycleWord::marked(7).encode());
    }

    #[test]
    fn layout_keeps_header_and_key_before_value() {
        let l = DataLayout::for_sizes(13, 100);
        assert_eq!(l.header_and_key_bytes(), 32 + 16);
        assert_eq!(l.entry_bytes(), 32 + 16 + 104);
        assert_eq!(l.entry_offset(2), 2 * 152);
        assert_eq!(l.value_start(13), 48);
        // A shorter key leaves its room to the value.
        assert_eq!(l.value_start(3), 40);
        assert!(l.fits(3, 112) && !l.fits(3, 113) && !l.fits(13, 105));
        // A small class's payload: a header-and-key read stays in the entry.
        let small = DataLayout {
            max_key: 13,
            payload: 16,
        };
        assert_eq!(small.header_and_key_bytes(), 48);
        assert!(small.fits(8, 8) && !small.fits(9, 1) && !small.fits(14, 0));
    }

    proptest! {
        #[test]
        fn entries_round_trip(key in proptest::collection::vec(any::<u8>(), 0..=24),
                              value in proptest::collection::vec(any::<u8>(), 0..=64),
                              deadline in any::<u64>(), prev in any::<u64>(),
                              expires in 0u64..(1 << 62), recycle in any::<bool>(),
                              remote in any::<bool>()) {
            let l = DataLayout::for_sizes(24, 64);
            let h = DataEntryHeader {
                state: StateWord { state: DteState::Writing, kind: Some(DteKind::Put), src: 1, dst: 2,
                                   incarnation: 9, key_len: key.len() as u16, value_len: value.len() as u32 },
                deadline, prev, recycle: RecycleWord { recycle, remote: remote && recycle, expires_at: expires },
            };
            let bytes = l.encode_entry(&h, &key, &value);
            let back = DataEntryHeader::decode(&bytes).unwrap();
            prop_assert_eq!(back, h);
            prop_assert_eq!(l.key(&back, &bytes).unwrap(), &key[..]);
            prop_assert_eq!(l.value(&back, &bytes).unwrap(), &value[..]);
        }
    }
}

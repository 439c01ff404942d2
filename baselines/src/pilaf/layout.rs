//! Where Pilaf keeps things in a node's data region, and the byte formats of
//! its self-verifying hash table entries and key-value extents.
//!
//! ```text
//! data region: | request/response slots | move epoch | hash table entries | extents |
//! hash table entry (32 bytes):
//!   w0 = flags (bits 0-7, IN_USE = 1) | key_len (bits 16-31) | value_len (bits 32-63)
//!   w1 = extent offset (bytes from the start of the data region)
//!   w2 = CRC64 of the extent's key ++ value  (the self-verifying pointer)
//!   w3 = CRC64 of w0 ++ w1 ++ w2             (the self-verifying root object)
//! extent (round8(max_key + max_value) bytes): | key | value | pad |
//! ```
//!
//! An all-zero entry is empty (the table starts zeroed and DELETE zeroes an
//! entry); any other entry is valid only if its checksum matches, so a reader
//! that sees a mix of an old and a new entry (or of an entry and zeroes)
//! rejects it as torn.

use nessie_protocol::{hash::Hasher, Config, NodeId};

use crate::coupled::{home_node, home_slots};
use nessie_exec::mailbox::{MailboxLayout, CRC64};
use nessie_exec::{round8, word};

/// Bytes of one hash table entry.
pub const ENTRY_BYTES: u64 = 32;

/// Pilaf's hashing is 3-way cuckoo (the paper's choice, section 3.4),
/// whatever Nessie's `Config::candidates` says.
pub const WAYS: u8 = 3;

const IN_USE: u64 = 1;

/// Where everything lives in a node's data region, and how keys hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PilafLayout {
    /// The request and response slots (PUT and DELETE requests).
    pub mailbox: MailboxLayout,
    /// Offset of the move-epoch word (odd while a cuckoo move is under way).
    pub epoch: u64,
    /// Offset of the first hash table entry.
    pub table_base: u64,
    /// Hash table entries per node.
    pub slots: u32,
    /// Offset of the first extent.
    pub extent_base: u64,
    /// Extents per node.
    pub extents: u32,
    /// Bytes per extent.
    pub extent_bytes: u64,
    /// Largest key.
    pub max_key: u32,
    /// Largest value.
    pub max_value: u32,
    /// Nodes.
    pub nodes: u16,
    /// The key's candidate entries on its home node (3-way, one node).
    pub hasher: Hasher,
}

impl PilafLayout {
    /// The layout for `cfg`: `index_slots_per_node` hash table entries and
    /// `dtes_per_node` extents per node, sized by the key and value limits.
    pub fn new(cfg: &Config) -> PilafLayout {
        let clients_total = u32::from(cfg.nodes) * u32::from(cfg.clients_per_node);
        let mailbox = MailboxLayout::new(0, clients_total, cfg.max_key_len, cfg.max_value_len);
        let epoch = mailbox.bytes();
        let table_base = epoch + 8;
        let extent_base = table_base + ENTRY_BYTES * u64::from(cfg.index_slots_per_node);
        let ways = u32::from(WAYS).min(cfg.index_slots_per_node.max(1)) as u8;
        PilafLayout {
            mailbox,
            epoch,
            table_base,
            slots: cfg.index_slots_per_node,
            extent_base,
            extents: cfg.dtes_per_node,
            extent_bytes: round8(u64::from(cfg.max_key_len) + u64::from(cfg.max_value_len)),
            max_key: cfg.max_key_len,
            max_value: cfg.max_value_len,
            nodes: cfg.nodes,
            hasher: Hasher {
                seed: cfg.hash_seed,
                candidates: ways,
                bucket_slots: 1,
                nodes: 1,
                slots_per_node: cfg.index_slots_per_node,
                filter_bits: 0,
            },
        }
    }

    /// Bytes of data region each node needs.
    pub fn region_bytes(&self) -> u64 {
        self.extent_base + u64::from(self.extents) * self.extent_bytes
    }

    /// The key's home node.
    pub fn home(&self, key: &[u8]) -> NodeId {
        home_node(self.hasher.seed, self.nodes, key)
    }

    /// The key's candidate hash table entries (slot numbers on its home
    /// node), in the order a GET probes them.
    pub fn candidates(&self, key: &[u8]) -> Vec<u32> {
        home_slots(&self.hasher, key)
    }

    /// Offset of hash table entry `slot`.
    pub fn entry_offset(&self, slot: u32) -> u64 {
        self.table_base + ENTRY_BYTES * u64::from(slot)
    }

    /// Offset of extent `i`.
    pub fn extent_offset(&self, i: u32) -> u64 {
        self.extent_base + u64::from(i) * self.extent_bytes
    }

    /// The extent number at `offset`, if `offset` is the start of one.
    pub fn extent_index(&self, offset: u64) -> Option<u32> {
        let rel = offset.checked_sub(self.extent_base)?;
        let i = rel / self.extent_bytes;
        (rel % self.extent_bytes == 0 && i < u64::from(self.extents)).then_some(i as u32)
    }

    /// Decodes an entry read from the table. With `verify` off (a test-only
    /// fault switch) the entry checksum is not compared; the plausibility
    /// checks (lengths within the limits, offset at an extent) always run.
    pub fn decode_entry(&self, bytes: &[u8], verify: bool) -> EntryRead {
        if bytes.len() < ENTRY_BYTES as usize {
            return EntryRead::Torn;
        }
        let w0 = word(bytes, 0);
        if w0 & IN_USE == 0 {
            let all_zero = bytes[..ENTRY_BYTES as usize].iter().all(|&b| b == 0);
            return if all_zero || !verify {
                EntryRead::Empty
            } else {
                EntryRead::Torn
            };
        }
        if verify && CRC64.checksum(&bytes[..24]) != word(bytes, 24) {
            return EntryRead::Torn;
        }
        let e = HashEntry {
            key_len: ((w0 >> 16) & 0xffff) as u32,
            value_len: (w0 >> 32) as u32,
            extent: word(bytes, 8),
            extent_crc: word(bytes, 16),
        };
        let plausible = e.key_len >= 1
            && e.key_len <= self.max_key
            && e.value_len <= self.max_value
            && self.extent_index(e.extent).is_some();
        if plausible {
            EntryRead::Used(e)
        } else {
            EntryRead::Torn
        }
    }
}

/// A hash table entry in use: a self-verifying pointer to a key-value extent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HashEntry {
    /// Offset of the extent in the data region.
    pub extent: u64,
    /// Bytes of key at the start of the extent.
    pub key_len: u32,
    /// Bytes of value after the key.
    pub value_len: u32,
    /// CRC64 of the extent's key and value.
    pub extent_crc: u64,
}

impl HashEntry {
    /// The entry of `key` and `value` stored in the extent at `extent`.
    pub fn new(extent: u64, key: &[u8], value: &[u8]) -> HashEntry {
        HashEntry {
            extent,
            key_len: key.len() as u32,
            value_len: value.len() as u32,
            extent_crc: extent_crc(key, value),
        }
    }

    /// The 32 bytes stored in the table, checksum included.
    pub fn encode(&self) -> Vec<u8> {
        let w0 = IN_USE | (u64::from(self.key_len) << 16) | (u64::from(self.value_len) << 32);
        let mut b = Vec::with_capacity(ENTRY_BYTES as usize);
        b.extend_from_slice(&w0.to_le_bytes());
        b.extend_from_slice(&self.extent.to_le_bytes());
        b.extend_from_slice(&self.extent_crc.to_le_bytes());
        let crc = CRC64.checksum(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        b
    }

    /// Bytes a READ of the extent fetches (key and value, padded to words).
    pub fn extent_read_len(&self) -> u32 {
        round8(u64::from(self.key_len) + u64::from(self.value_len)) as u32
    }

    /// Splits an extent read whole into key and value, if it matches the
    /// checksum this entry holds (or `verify` is off, a test-only switch).
    pub fn verify_extent<'a>(&self, bytes: &'a [u8], verify: bool) -> Option<(&'a [u8], &'a [u8])> {
        let (k, v) = (self.key_len as usize, self.value_len as usize);
        let kv = bytes.get(..k + v)?;
        if verify && CRC64.checksum(kv) != self.extent_crc {
            return None;
        }
        Some(kv.split_at(k))
    }
}

/// What a READ of a hash table entry saw.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EntryRead {
    /// No key.
    Empty,
    /// A consistent entry.
    Used(HashEntry),
    /// A checksum mismatch or an implausible entry: read while being written.
    Torn,
}

/// The CRC64 of an extent holding `key` and `value`.
pub fn extent_crc(key: &[u8], value: &[u8]) -> u64 {
    let mut d = CRC64.digest();
    d.update(key);
    d.update(value);
    d.finalize()
}

/// The bytes of an extent holding `key` and `value` (padded to words).
pub fn encode_extent(key: &[u8], value: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(round8((key.len() + value.len()) as u64) as usize);
    b.extend_from_slice(key);
    b.extend_from_slice(value);
    b.resize(round8((key.len() + value.len()) as u64) as usize, 0);
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> PilafLayout {
        PilafLayout::new(&Config {
            index_slots_per_node: 16,
            dtes_per_node: 8,
            max_key_len: 16,
            max_value_len: 40,
            ..Config::default()
        })
    }

    #[test]
    fn an_entry_round_trips_and_any_flipped_bit_is_torn() {
        let l = layout();
        let e = HashEntry::new(l.extent_offset(3), b"key", b"value");
        let b = e.encode();
        assert_eq!(l.decode_entry(&b, true), EntryRead::Used(e));
        for i in 0..b.len() * 8 {
            let mut t = b.clone();
            t[i / 8] ^= 1 << (i % 8);
            assert_eq!(l.decode_entry(&t, true), EntryRead::Torn, "bit {i}");
        }
        assert_eq!(l.decode_entry(&[0; 32], true), EntryRead::Empty);
        // Half an old entry, half zeroes (a DELETE or an insert in flight).
        let mut half = b.clone();
        half[8..].fill(0);
        assert_eq!(l.decode_entry(&half, true), EntryRead::Torn);
        half = vec![0; 32];
        half[8..].copy_from_slice(&b[8..]);
        assert_eq!(l.decode_entry(&half, true), EntryRead::Torn);
    }

    #[test]
    fn an_extent_verifies_against_its_entry() {
        let l = layout();
        let e = HashEntry::new(l.extent_offset(0), b"k", b"");
        let x = encode_extent(b"k", b"");
        assert_eq!(x.len(), 8);
        assert_eq!(e.verify_extent(&x, true), Some((&b"k"[..], &b""[..])));
        assert_eq!(e.verify_extent(&encode_extent(b"j", b""), true), None);
        assert_eq!(l.extent_index(l.extent_offset(7)), Some(7));
        assert_eq!(l.extent_index(l.extent_offset(8)), None);
        assert_eq!(l.extent_index(l.extent_offset(1) + 8), None);
    }
}

//! Where RCuckoo keeps things on a node, the byte formats of its rows and
//! entries, and its dependent hashing (Grant and Snoeren, USENIX ATC 2025,
//! §3.1 and §3.3).
//!
//! ```text
//! index region: lock table, one word per lock (0: free; else the holder's
//!               acquisition word: its node, index and acquisition number)
//! data region:  | rows | extents: client 0's share | client 1's | ... |
//! row:   8 entries | version word (bits 0-7) | CRC64 of everything before it
//! entry: header word | key (the longest key, padded to 8) | type word | value word
//!   header: 0 empty; else bit 0 set, bits 8-19 key length, bits 48-63 a
//!           check over the header and the key (the low bits of a CRC64)
//!   inline: type 0; value word: bit 63 set, bits 56-58 the length, the
//!           value (at most 7 bytes) in bits 0-55
//!   extent: type: the extent's live header word (RACE's KV block format,
//!           `crate::race::layout`, never 0); value word: bit 63 clear,
//!           node (bits 48-62) | offset (bits 0-47)
//! ```
//!
//! A key's entry never changes its header and key while it holds the key:
//! an update changes the type word and then the value word (a row WRITE
//! lands in ascending order). An inline value replaces an inline value in
//! one word; every other state a WRITE torn between the two words leaves
//! is recognisable (the type and the value word disagree, or the extent's
//! header word is not the type word), and a repairer restores the entry it
//! replaced from what the value word still names (§4.3's repair, for
//! entries wider than the paper's 8 bytes, which a torn WRITE can split).
//!
//! A key's **home** node is a hash of the key (RCuckoo shards its table
//! over memory servers, §3: "straightforward to shard"); on it, its two
//! rows are `L1 = h1 mod T` and `L2 = (L1 + (h2 mod ⌊f^(f + Z(h3))⌋)) mod T`
//! with `Z` the trailing zeros and `f` the locality (2.3, the paper's
//! setting), so that a key's rows are usually close and one lock, or two
//! neighbouring ones, covers both.

use nessie_protocol::{hash::stable_hash, Config, ConfigError, NodeId, RemoteAddr};

use crate::race::layout::{BlockArea, BLOCK_UNIT};
use nessie_exec::mailbox::CRC64;
use nessie_exec::{round8, word};

/// Entries in a row (the paper's setting), unless the store's
/// `bucket_slots` asks for rows of its own width (a row is RCuckoo's
/// bucket; the swarm's tight tables use rows of 2 so that a few keys fill
/// them and cuckoo paths run).
pub const ENTRIES_PER_ROW: usize = 8;
/// Rows one lock covers (the paper's setting, §3.4).
pub const ROWS_PER_LOCK: u32 = 16;
/// The locality `f` of the dependent hashing (the paper's setting, §3.3).
pub const LOCALITY: f64 = 2.3;
/// Values of at most this many bytes are stored in their entry (with
/// their length, in one word, so that an update replaces them at once).
pub const INLINE_MAX: usize = 7;

const HOME_SEED: u64 = 0x7263_7563_686f_6d65;
const H1_SEED: u64 = 0x7263_7563_0000_0001;
const H2_SEED: u64 = 0x7263_7563_0000_0002;
const H3_SEED: u64 = 0x7263_7563_0000_0003;

/// Where everything lives on a node, and how keys hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RcuckooLayout {
    /// Nodes (each holds one shard of the table).
    pub nodes: u16,
    /// Rows per node.
    pub rows: u32,
    /// Entries per row.
    pub entries_per_row: usize,
    /// Bytes of an entry's key field (the longest key, padded to 8).
    pub key_field: u64,
    /// Where the extents lie in the data region.
    pub extents: BlockArea,
    /// Clients per node (extent shares per node).
    pub clients_per_node: u16,
    /// The deployment's hash seed.
    pub seed: u64,
}

/// A key's place: its home node and its two rows there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyRows {
    /// The node holding the key's shard.
    pub home: NodeId,
    /// The key's rows (equal when its second location is its first).
    pub rows: [u32; 2],
}

/// A decoded entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    /// An empty entry.
    Empty,
    /// A key with its value in the entry.
    Inline {
        /// The key.
        key: Vec<u8>,
        /// The value.
        value: Vec<u8>,
    },
    /// A key with its value in an extent.
    Extent {
        /// The key.
        key: Vec<u8>,
        /// Where the extent is.
        node: NodeId,
        /// Its offset in that node's data region.
        offset: u64,
        /// The extent's header word while it is live.
        header: u64,
    },
}

impl Entry {
    /// The entry's key (`None`: empty).
    pub fn key(&self) -> Option<&[u8]> {
        match self {
            Entry::Empty => None,
            Entry::Inline { key, .. } | Entry::Extent { key, .. } => Some(key),
        }
    }
}

/// A row as read: its entries and version, or torn.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    /// Its entries.
    pub entries: Vec<Entry>,
    /// Its version (bumped by every write).
    pub version: u8,
}

impl Row {
    /// An empty row of `entries` entries (never written).
    pub fn empty(entries: usize) -> Row {
        Row {
            entries: vec![Entry::Empty; entries],
            version: 0,
        }
    }

    /// The position of `key` in the row.
    pub fn find(&self, key: &[u8]) -> Option<usize> {
        self.entries.iter().position(|e| e.key() == Some(key))
    }

    /// Every position holding `key` (more than one only where a writer died
    /// between adding a key's new entry and emptying its old one).
    pub fn find_all(&self, key: &[u8]) -> Vec<usize> {
        (0..self.entries.len())
            .filter(|&p| self.entries[p].key() == Some(key))
            .collect()
    }

    /// The first empty position.
    pub fn free(&self) -> Option<usize> {
        self.entries.iter().position(|e| *e == Entry::Empty)
    }
}

impl RcuckooLayout {
    /// The layout for `cfg`: as many entries per node as Nessie's index
    /// has (`index_slots_per_node`, in rows of 8, or of `bucket_slots` when
    /// it is above 1), and `dtes_per_node` extents per node shared by its
    /// clients.
    pub fn new(cfg: &Config) -> RcuckooLayout {
        let entries_per_row = match cfg.bucket_slots {
            0 | 1 => ENTRIES_PER_ROW,
            b => usize::from(b),
        };
        let rows = (cfg.index_slots_per_node as usize / entries_per_row).max(2) as u32;
        let key_field = round8(u64::from(cfg.max_key_len));
        let mut l = RcuckooLayout {
            nodes: cfg.nodes,
            rows,
            entries_per_row,
            key_field,
            extents: BlockArea::new(cfg, 0),
            clients_per_node: cfg.clients_per_node.max(1),
            seed: cfg.hash_seed,
        };
        l.extents.base = (u64::from(rows) * l.row_bytes()).div_ceil(BLOCK_UNIT) * BLOCK_UNIT;
        l
    }

    /// Bytes of an entry.
    pub fn entry_bytes(&self) -> u64 {
        24 + self.key_field
    }

    /// Bytes of a row: its entries, its version word and its CRC word.
    pub fn row_bytes(&self) -> u64 {
        self.entries_per_row as u64 * self.entry_bytes() + 16
    }

    /// Locks per node.
    pub fn locks(&self) -> u32 {
        self.rows.div_ceil(ROWS_PER_LOCK)
    }

    /// Bytes of each node's data region.
    pub fn region_bytes(&self) -> u64 {
        self.extents.base + self.extents.bytes(self.clients_per_node)
    }

    /// Refuses a layout whose extent pointers do not fit (at most 65,536
    /// nodes, regions below 2^48 bytes).
    ///
    /// # Errors
    ///
    /// [`ConfigError::OutOfRange`] naming the layout.
    pub fn check(&self) -> Result<(), ConfigError> {
        if self.region_bytes() < 1 << 48 {
            return Ok(());
        }
        Err(ConfigError::OutOfRange {
            field: "rcuckoo layout",
            value: format!("{self:?}"),
            reason: "an extent pointer addresses regions below 2^48 bytes",
        })
    }

    /// Where `key` lives: §3.3's dependent hashing within its home shard.
    pub fn place(&self, key: &[u8]) -> KeyRows {
        let home = NodeId((stable_hash(self.seed ^ HOME_SEED, key) % u64::from(self.nodes)) as u16);
        let t = u64::from(self.rows);
        let l1 = stable_hash(self.seed ^ H1_SEED, key) % t;
        let h2 = stable_hash(self.seed ^ H2_SEED, key);
        let z = stable_hash(self.seed ^ H3_SEED, key).trailing_zeros();
        let range = LOCALITY.powf(LOCALITY + f64::from(z)).floor();
        // Past the table's size the range wraps the whole shard.
        let range = if range >= t as f64 {
            t
        } else {
            (range as u64).max(1)
        };
        let l2 = (l1 + h2 % range) % t;
        KeyRows {
            home,
            rows: [l1 as u32, l2 as u32],
        }
    }

    /// The address of row `row` on `node`.
    pub fn row_addr(&self, node: NodeId, row: u32) -> RemoteAddr {
        RemoteAddr::data(node, u64::from(row) * self.row_bytes())
    }

    /// The lock covering row `row`.
    pub fn lock_of(&self, row: u32) -> u32 {
        row / ROWS_PER_LOCK
    }

    /// The rows lock `lock` covers.
    pub fn rows_of(&self, lock: u32) -> std::ops::Range<u32> {
        lock * ROWS_PER_LOCK..((lock + 1) * ROWS_PER_LOCK).min(self.rows)
    }

    /// The address of lock `lock`'s word on `node`.
    pub fn lock_addr(&self, node: NodeId, lock: u32) -> RemoteAddr {
        RemoteAddr::index(node, u64::from(lock) * 8)
    }

    /// The bytes of `row` (its version as given; the CRC computed).
    pub fn encode_row(&self, row: &Row) -> Vec<u8> {
        let mut b = Vec::with_capacity(self.row_bytes() as usize);
        for e in &row.entries {
            self.encode_entry(e, &mut b);
        }
        b.extend_from_slice(&u64::from(row.version).to_le_bytes());
        let crc = CRC64.checksum(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        b
    }

    fn encode_entry(&self, e: &Entry, b: &mut Vec<u8>) {
        let start = b.len();
        let (key, words): (&[u8], [u64; 2]) = match e {
            Entry::Empty => (&[], [0, 0]),
            Entry::Inline { key, value } => {
                let mut v = [0u8; 8];
                v[..value.len()].copy_from_slice(value);
                let w = (word(&v, 0) & ((1 << 56) - 1)) | ((value.len() as u64) << 56) | (1 << 63);
                (key, [0, w])
            }
            Entry::Extent {
                key,
                node,
                offset,
                header,
            } => (
                key,
                [
                    *header,
                    ((u64::from(node.0) & 0x7fff) << 48) | (offset & ((1 << 48) - 1)),
                ],
            ),
        };
        let header = match e {
            Entry::Empty => 0,
            _ => key_header(key),
        };
        b.extend_from_slice(&header.to_le_bytes());
        b.extend_from_slice(key);
        b.resize(start + 8 + self.key_field as usize, 0);
        b.extend_from_slice(&words[0].to_le_bytes());
        b.extend_from_slice(&words[1].to_le_bytes());
    }

    /// Decodes a row read back; `None` if its CRC does not match (a row
    /// torn by a concurrent write, or one whose writer died mid-write).
    pub fn decode_row(&self, bytes: &[u8]) -> Option<Row> {
        let n = self.row_bytes() as usize;
        if bytes.len() < n {
            return None;
        }
        let body = &bytes[..n - 8];
        let crc = word(bytes, n - 8);
        // A never-written row is all zero: empty, version 0.
        if crc != CRC64.checksum(body) && !bytes[..n].iter().all(|&b| b == 0) {
            return None;
        }
        let e = self.entry_bytes() as usize;
        let entries = (0..self.entries_per_row)
            .map(|i| self.decode_entry(&bytes[i * e..(i + 1) * e]))
            .collect::<Option<Vec<_>>>()?;
        Some(Row {
            entries,
            version: word(bytes, n - 16) as u8,
        })
    }

    /// Decodes a row whose CRC may not match (a repairer's view of a row
    /// torn by a writer that died): each entry as it reads
    /// ([`EntryRead`]).
    pub fn decode_row_lenient(&self, bytes: &[u8]) -> (Vec<EntryRead>, u8) {
        let e = self.entry_bytes() as usize;
        let n = self.row_bytes() as usize;
        let entries = (0..self.entries_per_row)
            .map(|i| {
                bytes
                    .get(i * e..(i + 1) * e)
                    .map_or(EntryRead::Broken, |b| self.read_entry(b))
            })
            .collect();
        let version = if bytes.len() >= n {
            word(bytes, n - 16) as u8
        } else {
            0
        };
        (entries, version)
    }

    fn decode_entry(&self, b: &[u8]) -> Option<Entry> {
        match self.read_entry(b) {
            EntryRead::Whole(e) => Some(e),
            _ => None,
        }
    }

    fn read_entry(&self, b: &[u8]) -> EntryRead {
        let header = word(b, 0);
        if header == 0 {
            return EntryRead::Whole(Entry::Empty);
        }
        let klen = ((header >> 8) & 0xfff) as usize;
        if klen as u64 > self.key_field || b.len() < 24 + self.key_field as usize {
            return EntryRead::Broken;
        }
        let key = b[8..8 + klen].to_vec();
        if key_header(&key) != header {
            return EntryRead::Broken;
        }
        let p = 8 + self.key_field as usize;
        let (kind, value) = (word(b, p), word(b, p + 8));
        let inline = value >> 63 == 1;
        match (kind, inline) {
            (0, true) => {
                let len = ((value >> 56) & 0x7) as usize;
                EntryRead::Whole(Entry::Inline {
                    key,
                    value: value.to_le_bytes()[..len].to_vec(),
                })
            }
            (h, false) if h != 0 => {
                let (node, offset) = extent_of(value);
                EntryRead::Whole(Entry::Extent {
                    key,
                    node,
                    offset,
                    header: h,
                })
            }
            _ => EntryRead::Split { key, kind, value },
        }
    }
}

/// An entry as a repairer reads it from a row that may be torn.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EntryRead {
    /// Whole (its type and value words agree; an extent's block is still
    /// to be checked).
    Whole(Entry),
    /// Its header or key was being written (an insert or a move into it):
    /// it held no committed key, or one whose copy is in its other row.
    Broken,
    /// A WRITE torn between its type and value words: the key, and the two
    /// words as they are.
    Split {
        /// The key.
        key: Vec<u8>,
        /// The type word.
        kind: u64,
        /// The value word.
        value: u64,
    },
}

/// The extent an extent entry's value word names: its node and offset.
pub fn extent_of(value: u64) -> (NodeId, u64) {
    (
        NodeId(((value >> 48) & 0x7fff) as u16),
        value & ((1 << 48) - 1),
    )
}

/// The header word of an entry holding `key`: its length and a check over
/// both.
fn key_header(key: &[u8]) -> u64 {
    let h = 1 | ((key.len() as u64 & 0xfff) << 8);
    let mut d = CRC64.digest();
    d.update(&h.to_le_bytes());
    d.update(key);
    h | ((d.finalize() & 0xffff) << 48)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> RcuckooLayout {
        let cfg = Config {
            nodes: 3,
            index_slots_per_node: 8 * 1024,
            dtes_per_node: 64,
            max_key_len: 20,
            max_value_len: 100,
            ..Config::default()
        };
        RcuckooLayout::new(&cfg)
    }

    #[test]
    fn rows_decode_what_they_encode_and_reject_tearing() {
        let l = layout();
        let mut row = Row::empty(8);
        row.version = 9;
        row.entries[0] = Entry::Inline {
            key: b"short".to_vec(),
            value: b"seven!!".to_vec(),
        };
        row.entries[5] = Entry::Extent {
            key: b"a longer key, 20 B..".to_vec(),
            node: NodeId(2),
            offset: 4096,
            header: 0x1_01,
        };
        let b = l.encode_row(&row);
        assert_eq!(b.len() as u64, l.row_bytes());
        assert_eq!(l.decode_row(&b), Some(row.clone()));
        let mut torn = b.clone();
        torn[10] ^= 1;
        assert_eq!(l.decode_row(&torn), None);
        // A repairer reads the torn key as broken, the others as written.
        let (lenient, _) = l.decode_row_lenient(&torn);
        assert_eq!(lenient[0], EntryRead::Broken);
        assert_eq!(lenient[5], EntryRead::Whole(row.entries[5].clone()));
        // A WRITE torn between an entry's type and value words.
        let e = l.entry_bytes() as usize;
        let mut split = b.clone();
        let type_word = 5 * e + 8 + l.key_field as usize;
        split[type_word..type_word + 8].copy_from_slice(&0u64.to_le_bytes());
        let (lenient, _) = l.decode_row_lenient(&split);
        assert!(
            matches!(lenient[5], EntryRead::Split { kind: 0, .. }),
            "{:?}",
            lenient[5]
        );
        assert_eq!(
            l.decode_row(&vec![0; l.row_bytes() as usize]),
            Some(Row::empty(8))
        );
    }

    #[test]
    fn a_keys_rows_are_usually_close_on_one_home_node() {
        let l = layout();
        assert_eq!(l.rows, 1024);
        let mut within_5 = 0;
        for k in 0..10_000u32 {
            let p = l.place(&k.to_le_bytes());
            assert!(p.home.0 < 3 && p.rows.iter().all(|&r| r < l.rows));
            let d = (p.rows[1] + l.rows - p.rows[0]) % l.rows;
            within_5 += u32::from(d <= 5);
        }
        // The paper: 68 % of keys have their rows within 5 rows (f = 2.3).
        assert!((6_000..7_600).contains(&within_5), "{within_5}");
    }
}

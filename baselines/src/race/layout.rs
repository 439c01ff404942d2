//! Where RACE hashing keeps things in a node's data region, and the byte
//! formats of its slots and KV blocks (Zuo et al., USENIX ATC 2021, §3.1,
//! Figures 3 and 4).
//!
//! ```text
//! data region: | bucket groups | KV blocks: client 0's share | client 1's | ... |
//! bucket group (192 bytes): | main bucket 0 | overflow bucket | main bucket 1 |
//! bucket (64 bytes):        | header word | 7 slots |
//! slot (8 bytes):  fingerprint (8 bits) | block length in 64-byte units (8) |
//!                  node (8) | byte offset of the KV block (40)     0: empty
//! KV block (a multiple of 64 bytes, written once, never in place):
//!   w0 = sequence number (bits 8-39) | state (bits 0-7: 0 never written,
//!        1 live, 2 freed)
//!   w1 = key length (bits 0-31) | value length (bits 32-63)
//!   w2 = CRC64 of w1 ++ key ++ value
//!   key (padded to 8) | value (padded to 8)
//! ```
//!
//! A key's **home** node is a hash of the key (RACE places a subtable on one
//! memory node and finds it through the directory's hash suffix; without
//! resizing the directory is one subtable per node). On it, two hash
//! functions name two bucket groups and, in each, one of its two main
//! buckets; a main bucket and the overflow bucket beside it form a
//! **combined bucket** (128 contiguous bytes, one READ). The key's 28
//! **candidate positions** are, in order: the first combined bucket's main
//! bucket, its overflow bucket, then the second's. Readers take the first
//! position holding the key, and insert's duplicate check keeps the first
//! (§3.3 "the client keeps the first and deletes the others").

use nessie_protocol::{hash::stable_hash, Config, ConfigError, NodeId, RemoteAddr};

use nessie_exec::mailbox::CRC64;
use nessie_exec::{round8, word};

/// Slots in a bucket (RACE: 7, after an 8-byte header).
pub const SLOTS_PER_BUCKET: usize = 7;
/// Bytes of one bucket.
pub const BUCKET_BYTES: u64 = 64;
/// Bytes of one bucket group (two main buckets and their overflow bucket).
pub const GROUP_BYTES: u64 = 3 * BUCKET_BYTES;
/// Bytes of a combined bucket (a main bucket and its overflow bucket).
pub const COMBINED_BYTES: u32 = 2 * BUCKET_BYTES as u32;
/// A key's candidate positions: two combined buckets of two buckets.
pub const POSITIONS: usize = 4 * SLOTS_PER_BUCKET;
/// The unit a slot counts a block's length in.
pub const BLOCK_UNIT: u64 = 64;
/// Bytes of a KV block's header.
pub const BLOCK_HEADER: u64 = 24;

const HOME_SEED: u64 = 0x7261_6365_686f_6d65;
const H1_SEED: u64 = 0x7261_6365_0000_0001;
const H2_SEED: u64 = 0x7261_6365_0000_0002;
const FP_SEED: u64 = 0x7261_6365_0000_00f9;

/// A block's state (its header word's low byte).
pub const NEVER_WRITTEN: u8 = 0;
/// A block written by its owner (linked, or about to be, or lost).
pub const LIVE: u8 = 1;
/// A block unlinked by the client whose CAS removed it: reusable after the
/// quarantine.
pub const FREED: u8 = 2;

/// A block's header word: `seq` and `state`.
pub fn block_word(seq: u32, state: u8) -> u64 {
    (u64::from(seq) << 8) | u64::from(state)
}

/// The sequence number and state of a block's header word.
pub fn split_block_word(w: u64) -> (u32, u8) {
    ((w >> 8) as u32, w as u8)
}

/// Where everything lives in a node's data region, and how keys hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RaceLayout {
    /// Nodes (each holds one subtable).
    pub nodes: u16,
    /// Bucket groups per node.
    pub groups: u32,
    /// Offset of the first KV block.
    pub block_base: u64,
    /// Bytes of every KV block slot of the data region (the largest key
    /// and value, rounded up to the block unit).
    pub block_bytes: u64,
    /// KV blocks of each client's share on its node.
    pub blocks_per_client: u32,
    /// Clients per node (shares per node).
    pub clients_per_node: u16,
    /// Largest key.
    pub max_key: u32,
    /// Largest value.
    pub max_value: u32,
    /// The deployment's hash seed.
    pub seed: u64,
}

/// Where the clients' KV blocks lie in a node's data region: one share
/// per client of the node, each `blocks_per_client` blocks of
/// `block_bytes`, from `base` on. RACE's blocks and RCuckoo's extents
/// ([`crate::rcuckoo`]) are both such blocks, handed out by
/// [`super::alloc::BlockAlloc`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BlockArea {
    /// Offset of the first block.
    pub base: u64,
    /// Bytes of every block (a multiple of [`BLOCK_UNIT`]).
    pub block_bytes: u64,
    /// Blocks of each client's share.
    pub blocks_per_client: u32,
}

impl BlockArea {
    /// The area of `clients_per_node` shares of `dtes_per_node` blocks in
    /// all, each block holding the largest key and value of `cfg`, from
    /// `base` on.
    pub fn new(cfg: &Config, base: u64) -> BlockArea {
        let cpn = cfg.clients_per_node.max(1);
        BlockArea {
            base,
            block_bytes: block_len(cfg.max_key_len as usize, cfg.max_value_len as usize),
            blocks_per_client: (cfg.dtes_per_node / u32::from(cpn)).max(1),
        }
    }

    /// Offset of block `i` of the share of client `index` on its node.
    pub fn block_offset(&self, index: u16, i: u32) -> u64 {
        self.base
            + (u64::from(index) * u64::from(self.blocks_per_client) + u64::from(i))
                * self.block_bytes
    }

    /// Bytes of the area with `clients_per_node` shares.
    pub fn bytes(&self, clients_per_node: u16) -> u64 {
        u64::from(clients_per_node) * u64::from(self.blocks_per_client) * self.block_bytes
    }
}

/// A key's place: its home node, two combined buckets and fingerprint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyPlace {
    /// The node holding the key's subtable.
    pub home: NodeId,
    /// Byte offsets of the two combined buckets.
    pub combined: [u64; 2],
    /// Whether each combined bucket's main bucket comes second (the
    /// group's second main bucket, after the overflow bucket).
    pub main_second: [bool; 2],
    /// The key's 8-bit fingerprint.
    pub fp: u8,
}

impl KeyPlace {
    /// The byte offset of candidate position `p` (0..[`POSITIONS`]) on the
    /// home node: main bucket then overflow bucket of each combined bucket.
    pub fn slot_offset(&self, p: usize) -> u64 {
        let (c, rest) = (p / (2 * SLOTS_PER_BUCKET), p % (2 * SLOTS_PER_BUCKET));
        let (which, slot) = (rest / SLOTS_PER_BUCKET, rest % SLOTS_PER_BUCKET);
        // which 0: the main bucket; 1: the overflow bucket.
        let bucket_in_combined = u64::from((which == 0) == self.main_second[c]);
        self.combined[c] + bucket_in_combined * BUCKET_BYTES + 8 + 8 * slot as u64
    }

    /// The 28 slot words of the two combined-bucket READs, in candidate
    /// order.
    pub fn positions(&self, reads: [&[u8]; 2]) -> [u64; POSITIONS] {
        let mut out = [0u64; POSITIONS];
        for (p, w) in out.iter_mut().enumerate() {
            let c = p / (2 * SLOTS_PER_BUCKET);
            let at = (self.slot_offset(p) - self.combined[c]) as usize;
            *w = word(reads[c], at);
        }
        out
    }
}

/// A decoded slot: where its KV block is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    /// Fingerprint.
    pub fp: u8,
    /// Block length in [`BLOCK_UNIT`]s.
    pub units: u8,
    /// The node holding the block.
    pub node: NodeId,
    /// The block's offset in that node's data region.
    pub offset: u64,
}

impl Slot {
    /// The slot word (never 0: a block is at least one unit).
    pub fn word(&self) -> u64 {
        (u64::from(self.fp) << 56)
            | (u64::from(self.units) << 48)
            | (u64::from(self.node.0 as u8) << 40)
            | (self.offset & ((1 << 40) - 1))
    }

    /// The slot a word holds (`None`: empty).
    pub fn from_word(w: u64) -> Option<Slot> {
        (w != 0).then(|| Slot {
            fp: (w >> 56) as u8,
            units: (w >> 48) as u8,
            node: NodeId(u16::from((w >> 40) as u8)),
            offset: w & ((1 << 40) - 1),
        })
    }

    /// The block's address.
    pub fn addr(&self) -> RemoteAddr {
        RemoteAddr::data(self.node, self.offset)
    }

    /// The bytes of the block to read.
    pub fn read_len(&self) -> u32 {
        u32::from(self.units) * BLOCK_UNIT as u32
    }
}

/// What a KV block read back holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BlockRead<'a> {
    /// A whole block (its checksum matches): its header word, key and value.
    Whole {
        /// The header word (sequence number and state).
        header: u64,
        /// The key.
        key: &'a [u8],
        /// The value.
        value: &'a [u8],
    },
    /// Torn or reused under the reader (lengths or checksum do not match).
    Torn,
}

impl RaceLayout {
    /// The layout for `cfg`: as many slots per node as Nessie's index has
    /// entries (`index_slots_per_node`, in groups of 21), and
    /// `dtes_per_node` KV blocks per node shared by its clients.
    pub fn new(cfg: &Config) -> RaceLayout {
        let slots = u64::from(cfg.index_slots_per_node.max(1));
        let groups = slots.div_ceil(3 * SLOTS_PER_BUCKET as u64).max(2) as u32;
        let blocks = BlockArea::new(cfg, u64::from(groups) * GROUP_BYTES);
        RaceLayout {
            nodes: cfg.nodes,
            groups,
            block_base: blocks.base,
            block_bytes: blocks.block_bytes,
            blocks_per_client: blocks.blocks_per_client,
            clients_per_node: cfg.clients_per_node.max(1),
            max_key: cfg.max_key_len,
            max_value: cfg.max_value_len,
            seed: cfg.hash_seed,
        }
    }

    /// Bytes of each node's data region.
    pub fn region_bytes(&self) -> u64 {
        self.block_base + self.blocks().bytes(self.clients_per_node)
    }

    /// Whether the layout's addresses fit a slot word (at most 256 nodes,
    /// blocks of at most 255 units, regions below 2^40 bytes).
    pub fn fits_slot_words(&self) -> bool {
        self.nodes <= 256 && self.block_bytes / BLOCK_UNIT <= 255 && self.region_bytes() < 1 << 40
    }

    /// Refuses a layout whose addresses do not fit a slot word
    /// ([`RaceLayout::fits_slot_words`]), before anything runs on it.
    ///
    /// # Errors
    ///
    /// [`ConfigError::OutOfRange`] naming the layout.
    pub fn check(&self) -> Result<(), ConfigError> {
        if self.fits_slot_words() {
            return Ok(());
        }
        Err(ConfigError::OutOfRange {
            field: "race layout",
            value: format!("{self:?}"),
            reason: "a slot word addresses at most 256 nodes, blocks of 255 units of 64 bytes \
                     and regions below 2^40 bytes",
        })
    }

    /// Where `key` lives.
    pub fn place(&self, key: &[u8]) -> KeyPlace {
        let home = NodeId((stable_hash(self.seed ^ HOME_SEED, key) % u64::from(self.nodes)) as u16);
        let (h1, h2) = (
            stable_hash(self.seed ^ H1_SEED, key),
            stable_hash(self.seed ^ H2_SEED, key),
        );
        let g = u64::from(self.groups);
        let g1 = h1 % g;
        let mut g2 = h2 % g;
        if g2 == g1 {
            g2 = (g1 + 1) % g;
        }
        let main_second = [(h1 >> 63) == 1, (h2 >> 63) == 1];
        let combined = [
            g1 * GROUP_BYTES + u64::from(main_second[0]) * BUCKET_BYTES,
            g2 * GROUP_BYTES + u64::from(main_second[1]) * BUCKET_BYTES,
        ];
        KeyPlace {
            home,
            combined,
            main_second,
            fp: stable_hash(self.seed ^ FP_SEED, key) as u8,
        }
    }

    /// Offset of block `i` of the share of client `index` on its node.
    pub fn block_offset(&self, index: u16, i: u32) -> u64 {
        self.blocks().block_offset(index, i)
    }

    /// Where the KV blocks lie.
    pub fn blocks(&self) -> BlockArea {
        BlockArea {
            base: self.block_base,
            block_bytes: self.block_bytes,
            blocks_per_client: self.blocks_per_client,
        }
    }

    /// The bytes of a KV block holding `key` and `value` under `header`.
    pub fn encode_block(header: u64, key: &[u8], value: &[u8]) -> Vec<u8> {
        let lens = (key.len() as u64) | ((value.len() as u64) << 32);
        let mut b = Vec::with_capacity(block_len(key.len(), value.len()) as usize);
        b.extend_from_slice(&header.to_le_bytes());
        b.extend_from_slice(&lens.to_le_bytes());
        b.extend_from_slice(&checksum(lens, key, value).to_le_bytes());
        b.extend_from_slice(key);
        b.resize(b.len() + (round8(key.len() as u64) as usize - key.len()), 0);
        b.extend_from_slice(value);
        b.resize(
            b.len() + (round8(value.len() as u64) as usize - value.len()),
            0,
        );
        b
    }

    /// Decodes a block read back, comparing its checksum.
    pub fn decode_block(bytes: &[u8]) -> BlockRead<'_> {
        if bytes.len() < BLOCK_HEADER as usize {
            return BlockRead::Torn;
        }
        let lens = word(bytes, 8);
        let (k, v) = ((lens as u32) as usize, (lens >> 32) as usize);
        let ks = BLOCK_HEADER as usize;
        let vs = ks + round8(k as u64) as usize;
        if vs.checked_add(v).is_none_or(|end| end > bytes.len()) {
            return BlockRead::Torn;
        }
        let (key, value) = (&bytes[ks..ks + k], &bytes[vs..vs + v]);
        if word(bytes, 16) != checksum(lens, key, value) {
            return BlockRead::Torn;
        }
        BlockRead::Whole {
            header: word(bytes, 0),
            key,
            value,
        }
    }
}

/// Bytes of a block holding a key and a value of these lengths, in whole
/// units.
pub fn block_len(key: usize, value: usize) -> u64 {
    (BLOCK_HEADER + round8(key as u64) + round8(value as u64)).div_ceil(BLOCK_UNIT) * BLOCK_UNIT
}

fn checksum(lens: u64, key: &[u8], value: &[u8]) -> u64 {
    let mut d = CRC64.digest();
    d.update(&lens.to_le_bytes());
    d.update(key);
    d.update(value);
    d.finalize()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> RaceLayout {
        let cfg = Config {
            nodes: 3,
            index_slots_per_node: 210,
            dtes_per_node: 64,
            max_key_len: 16,
            max_value_len: 100,
            ..Config::default()
        };
        RaceLayout::new(&cfg)
    }

    #[test]
    fn slots_round_trip_and_are_never_zero() {
        let s = Slot {
            fp: 0,
            units: 1,
            node: NodeId(255),
            offset: (1 << 40) - 8,
        };
        assert_ne!(s.word(), 0);
        assert_eq!(Slot::from_word(s.word()), Some(s));
        assert_eq!(Slot::from_word(0), None);
    }

    #[test]
    fn a_keys_positions_are_28_distinct_slots_of_two_combined_buckets() {
        let l = layout();
        assert_eq!(l.groups, 10);
        for k in 0..200u32 {
            let p = l.place(&k.to_le_bytes());
            let mut offs: Vec<u64> = (0..POSITIONS).map(|i| p.slot_offset(i)).collect();
            for (i, &o) in offs.iter().enumerate() {
                let c = p.combined[i / 14];
                assert!(o >= c + 8 && o < c + u64::from(COMBINED_BYTES), "{k} {i}");
                assert_ne!((o - c) % BUCKET_BYTES, 0, "a header is no slot");
            }
            offs.sort_unstable();
            offs.dedup();
            assert_eq!(offs.len(), POSITIONS);
            assert!(p.home.0 < 3);
        }
    }

    #[test]
    fn blocks_decode_what_they_encode_and_reject_tearing() {
        let b = RaceLayout::encode_block(block_word(7, LIVE), b"key", b"value!");
        assert_eq!(b.len() as u64, BLOCK_HEADER + 8 + 8);
        let mut padded = b.clone();
        padded.resize(block_len(3, 6) as usize, 0);
        assert_eq!(
            RaceLayout::decode_block(&padded),
            BlockRead::Whole {
                header: block_word(7, LIVE),
                key: b"key",
                value: b"value!"
            }
        );
        let mut torn = padded.clone();
        torn[BLOCK_HEADER as usize + 9] ^= 1;
        assert_eq!(RaceLayout::decode_block(&torn), BlockRead::Torn);
        assert_eq!(RaceLayout::decode_block(&[0; 8]), BlockRead::Torn);
    }
}

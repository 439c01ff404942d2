//! Where the fabric directory lives in the directory node's memory and how
//! its table is laid out there ([`DirLayout`], [`Current`], [`Table`]).
//!
//! The area (at [`DirLayout::base`] of the directory node's data region):
//!
//! ```text
//! +0    current word: copy index (bits 48-63) and table version (bits 0-47);
//!       0 until the directory node initialises the table
//! +64   copy 0, copy 1, ... (two per server node: 2n and 2n+1 are server n's)
//! ```
//!
//! A copy holds one whole table with its version at both ends:
//!
//! ```text
//! +0                head: 2v (complete table of version v) or 2v+1 (being written)
//! +8                body: v, next region id (u32), region count (u32),
//!                   per server node the sequence number of its last update (u64),
//!                   the failed servers as a bitmap (u64 words),
//!                   regions, 16 bytes each: id u32, slot u32, node u16, state u8, 0,
//!                   creator + 1 u16 (0: none, once live), 0 0
//! +copy_bytes - 8   tail: the same as the head
//! ```

use std::collections::{BTreeMap, BTreeSet};

use nessie_exec::{round8, word};
use nessie_protocol::NodeId;

use crate::ptr::RegionId;
use crate::region::{RegionInfo, RegionMap, RegionState};

/// Bytes before the first copy (the current word, padded to a cache line).
const HEADER: u64 = 64;
/// Bytes of one region's entry.
const ENTRY: usize = 16;
/// Largest table version (48 bits in the current word).
pub const MAX_VERSION: u64 = (1 << 48) - 1;

/// Where the directory's words are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DirLayout {
    /// The directory node.
    pub node: NodeId,
    /// Offset of the area in the directory node's data region.
    pub base: u64,
    /// Nodes of the cluster (the failed bitmap's width).
    pub nodes: u16,
    /// Server nodes (the writers: two copies each).
    pub servers: u16,
    /// Most regions a table can list (every slot of every server).
    pub max_regions: u32,
    /// Bytes of one copy (head, body, tail).
    pub copy_bytes: u64,
}

impl DirLayout {
    /// The area at `base` of `node` for `nodes` nodes, the first `servers`
    /// holding `slots` region slots each.
    pub fn new(node: NodeId, base: u64, nodes: u16, servers: u16, slots: u32) -> DirLayout {
        let max_regions = u32::from(servers).saturating_mul(slots);
        let body = 16
            + 8 * u64::from(servers)
            + 8 * u64::from(nodes).div_ceil(64)
            + ENTRY as u64 * u64::from(max_regions);
        DirLayout {
            node,
            base,
            nodes,
            servers,
            max_regions,
            copy_bytes: round8(8 + body + 8),
        }
    }

    /// Copies in the area.
    pub fn copies(&self) -> u32 {
        2 * u32::from(self.servers)
    }

    /// Bytes of the whole area.
    pub fn bytes(&self) -> u64 {
        HEADER + u64::from(self.copies()) * self.copy_bytes
    }

    /// Offset of the current word.
    pub fn current_at(&self) -> u64 {
        self.base
    }

    /// Offset of copy `i`.
    pub fn copy_at(&self, i: u32) -> u64 {
        self.base + HEADER + u64::from(i) * self.copy_bytes
    }

    /// The two copies server `writer` writes.
    pub fn copies_of(&self, writer: NodeId) -> [u32; 2] {
        let w = 2 * u32::from(writer.0);
        [w, w + 1]
    }

    fn body_bytes(&self) -> usize {
        (self.copy_bytes - 16) as usize
    }

    fn bitmap_words(&self) -> usize {
        usize::from(self.nodes).div_ceil(64)
    }
}

/// The current word: which copy holds the table and its version.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Current {
    /// The copy.
    pub copy: u32,
    /// The table's version (from 1).
    pub version: u64,
}

impl Current {
    /// The word (never 0: versions start at 1).
    pub fn encode(self) -> u64 {
        (u64::from(self.copy) << 48) | (self.version & MAX_VERSION)
    }

    /// The current word `w`; `None` for 0 (not initialised).
    pub fn decode(w: u64) -> Option<Current> {
        (w != 0).then_some(Current {
            copy: (w >> 48) as u32,
            version: w & MAX_VERSION,
        })
    }
}

/// One version of the directory: the regions and, per server, the
/// sequence number of its last update (which lets a server whose commit
/// CAS lost its completion learn whether it took effect).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Table {
    /// The regions (its epoch is the table's version).
    pub map: RegionMap,
    /// Per server node, the sequence number of its last update.
    pub applied: Vec<u64>,
}

impl Table {
    /// The first table (version 1, no regions).
    pub fn first(l: &DirLayout) -> Table {
        Table {
            map: RegionMap {
                epoch: 1,
                ..RegionMap::empty()
            },
            applied: vec![0; usize::from(l.servers)],
        }
    }

    /// The body bytes (exactly the layout's body size); `None` if the table
    /// does not fit the layout.
    pub fn encode(&self, l: &DirLayout) -> Option<Vec<u8>> {
        if self.map.regions.len() > l.max_regions as usize
            || self.applied.len() != usize::from(l.servers)
        {
            return None;
        }
        let mut b = Vec::with_capacity(l.body_bytes());
        b.extend_from_slice(&self.map.epoch.to_le_bytes());
        b.extend_from_slice(&self.map.next_id.to_le_bytes());
        b.extend_from_slice(&(self.map.regions.len() as u32).to_le_bytes());
        for a in &self.applied {
            b.extend_from_slice(&a.to_le_bytes());
        }
        let mut bits = vec![0u64; l.bitmap_words()];
        for n in &self.map.failed {
            let i = usize::from(n.0);
            if let Some(w) = bits.get_mut(i / 64) {
                *w |= 1 << (i % 64);
            }
        }
        for w in bits {
            b.extend_from_slice(&w.to_le_bytes());
        }
        for (id, i) in &self.map.regions {
            b.extend_from_slice(&id.0.to_le_bytes());
            b.extend_from_slice(&i.slot.to_le_bytes());
            b.extend_from_slice(&i.node.0.to_le_bytes());
            b.push(u8::from(i.state == RegionState::Live));
            b.push(0);
            // The creator, plus one (0: none).
            let creator = i.creator.map_or(0, |n| n.0.saturating_add(1));
            b.extend_from_slice(&creator.to_le_bytes());
            b.extend_from_slice(&[0; 2]);
        }
        b.resize(l.body_bytes(), 0);
        Some(b)
    }

    /// The table a copy's body holds (`body` without head and tail), or why
    /// it cannot be one.
    pub fn decode(body: &[u8], l: &DirLayout) -> Result<Table, String> {
        if body.len() != l.body_bytes() {
            return Err(format!("a body of {} bytes", body.len()));
        }
        let u32_at = |at: usize| u32::from_le_bytes(body[at..at + 4].try_into().unwrap_or([0; 4]));
        let epoch = word(body, 0);
        let next_id = u32_at(8);
        let count = u32_at(12) as usize;
        if count > l.max_regions as usize {
            return Err(format!("{count} regions (at most {})", l.max_regions));
        }
        let mut at = 16;
        let applied = (0..l.servers)
            .map(|i| word(body, at + 8 * usize::from(i)))
            .collect();
        at += 8 * usize::from(l.servers);
        let mut failed = BTreeSet::new();
        for w in 0..l.bitmap_words() {
            let bits = word(body, at + 8 * w);
            for b in 0..64 {
                if bits & (1 << b) != 0 {
                    failed.insert(NodeId((w * 64 + b) as u16));
                }
            }
        }
        at += 8 * l.bitmap_words();
        let mut regions = BTreeMap::new();
        for e in 0..count {
            let p = at + e * ENTRY;
            let id = RegionId(u32_at(p));
            let node = NodeId(u16::from_le_bytes([body[p + 8], body[p + 9]]));
            let state = match body[p + 10] {
                0 => RegionState::Creating,
                1 => RegionState::Live,
                s => return Err(format!("region {id} in state {s}")),
            };
            if id.0 == 0 || id.0 >= next_id || node.0 >= l.servers {
                return Err(format!("region {id} on {node} (next id {next_id})"));
            }
            let creator = u16::from_le_bytes([body[p + 12], body[p + 13]]);
            let info = RegionInfo {
                node,
                slot: u32_at(p + 4),
                state,
                creator: creator.checked_sub(1).map(NodeId),
            };
            if regions.insert(id, info).is_some() {
                return Err(format!("region {id} listed twice"));
            }
        }
        Ok(Table {
            map: RegionMap {
                epoch,
                regions,
                failed,
                next_id,
            },
            applied,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::region::Update;

    fn layout() -> DirLayout {
        DirLayout::new(NodeId(0), 4096, 70, 3, 4)
    }

    #[test]
    fn tables_round_trip_and_copies_do_not_overlap() {
        let l = layout();
        let mut t = Table::first(&l);
        for n in [0, 1, 1, 2] {
            t.map.apply(
                Update::Allocate {
                    on: NodeId(n),
                    by: NodeId((n + 1) % 3),
                },
                4,
            );
        }
        t.map.apply(Update::Publish(RegionId(2)), 4);
        assert_eq!(
            t.map.get(RegionId(1)).and_then(|i| i.creator),
            Some(NodeId(1))
        );
        assert_eq!(
            t.map.get(RegionId(2)).and_then(|i| i.creator),
            None,
            "published"
        );
        t.map.apply(
            Update::SetFailed {
                node: NodeId(66),
                failed: true,
            },
            4,
        );
        t.applied = vec![3, 0, 9];
        let body = t.encode(&l).unwrap();
        assert_eq!(body.len() as u64, l.copy_bytes - 16);
        assert_eq!(Table::decode(&body, &l), Ok(t));
        assert_eq!(l.copy_at(1) - l.copy_at(0), l.copy_bytes);
        assert!(l.copy_at(0) >= l.current_at() + 8);
        assert_eq!(l.copy_at(l.copies()), l.base + l.bytes());
        assert_eq!(l.copies_of(NodeId(2)), [4, 5]);
    }

    #[test]
    fn the_current_word_names_copy_and_version_and_zero_is_uninitialised() {
        let c = Current {
            copy: 5,
            version: 77,
        };
        assert_eq!(Current::decode(c.encode()), Some(c));
        assert_eq!(Current::decode(0), None);
    }

    #[test]
    fn garbage_bodies_are_refused() {
        let l = layout();
        let mut body = Table::first(&l).encode(&l).unwrap();
        body[12] = 200; // more regions than fit
        assert!(Table::decode(&body, &l).is_err());
        assert!(Table::decode(&body[1..], &l).is_err());
        let mut t = Table::first(&l);
        t.applied.pop();
        assert_eq!(t.encode(&l), None);
    }
}

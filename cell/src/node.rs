//! The fixed-size B-link tree node (§2.2-2.3, Fig. 3) and the decisions a
//! search makes at one node, shared by server-side and client-side search.
//!
//! ```text
//! offset 0        version (start)
//! offset 8        meta: valid (bit 0) | leaf (1) | bottom (2) | max = +inf (3)
//!                       | level (bits 8-15) | count (16-31) | min_len (32-47) | max_len (48-63)
//! offset 16       right link (NodePtr; null at the right end of a level)
//! offset 24       min key | max key | entries...
//!                 entry = key_len u16 | key | payload
//!                 payload = child NodePtr (8 bytes, inner) or ExtentPtr (20 bytes, leaf)
//! node_bytes - 8  version (end)
//! ```
//!
//! A node covers the keys `min <= k < max` (an empty min is minus infinity).
//! An inner node's first entry has key `min`; its entry `i` leads to the
//! keys from its key up to the next entry's key. A leaf's entries point to
//! key-value extents. A node of a *bottom* meganode at level 0 is a leaf; a
//! level-0 node of any other meganode is an inner node whose children are
//! the roots of other meganodes.
//!
//! Writers change a node only under its lock, in three steps: both
//! versions to the same odd value, the body, both versions to the next even
//! value (each step a separate round, so that on any fabric the steps land
//! in this order). A READ lands in ascending address order (the simulator's
//! contract, and real NICs', §2.3), so a READ that overlaps a write sees
//! different or odd versions.

use crate::ptr::{ExtentPtr, NodePtr, EXTENT_PTR_BYTES};

/// Bytes before the body (version, meta, right link).
pub const HEADER_BYTES: usize = 24;
/// Bytes of the trailing version.
pub const TRAILER_BYTES: usize = 8;

/// What an entry points to.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Payload {
    /// A child node (inner nodes).
    Child(NodePtr),
    /// A key-value extent (leaves).
    Extent(ExtentPtr),
}

/// One entry of a node.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Entry {
    /// The key (a separator in inner nodes).
    pub key: Vec<u8>,
    /// Where it leads.
    pub payload: Payload,
}

impl Entry {
    fn encoded_len(&self) -> usize {
        2 + self.key.len()
            + match self.payload {
                Payload::Child(_) => 8,
                Payload::Extent(_) => EXTENT_PTR_BYTES,
            }
    }

    /// The child pointer of an inner entry.
    pub fn child(&self) -> Option<NodePtr> {
        match self.payload {
            Payload::Child(p) => Some(p),
            Payload::Extent(_) => None,
        }
    }

    /// The extent pointer of a leaf entry.
    pub fn extent(&self) -> Option<ExtentPtr> {
        match self.payload {
            Payload::Extent(e) => Some(e),
            Payload::Child(_) => None,
        }
    }
}

/// A decoded node.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Node {
    /// The (even) version it was read at.
    pub version: u64,
    /// Cleared when a meganode split moved the node away (§2.2).
    pub valid: bool,
    /// Entries point to extents.
    pub leaf: bool,
    /// The node belongs to a bottom (leaf-level) meganode.
    pub bottom: bool,
    /// Level within its meganode (0 at the bottom of the meganode).
    pub level: u8,
    /// Smallest key covered (empty: minus infinity).
    pub min: Vec<u8>,
    /// Bound above the keys covered (`None`: plus infinity).
    pub max: Option<Vec<u8>>,
    /// The next node to the right on the same level.
    pub right: NodePtr,
    /// Sorted entries.
    pub entries: Vec<Entry>,
}

/// Where a key lies relative to a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cover {
    /// `min <= key < max`.
    Inside,
    /// `key < min`: the node is not where the search thought (reused, §2.4).
    Left,
    /// `key >= max`: follow the right link.
    Right,
}

/// Why a node READ cannot be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadFault {
    /// The versions differ or are odd: the READ overlapped a write.
    Torn,
    /// The bytes do not decode as a node (a torn READ too, or never written).
    Garbage,
}

fn word(b: &[u8], at: usize) -> u64 {
    b.get(at..at + 8)
        .and_then(|s| s.try_into().ok())
        .map_or(0, u64::from_le_bytes)
}

/// Compares a key with an upper bound (`None`: plus infinity).
pub fn below(key: &[u8], max: &Option<Vec<u8>>) -> bool {
    max.as_ref().is_none_or(|m| key < m.as_slice())
}

impl Node {
    /// An empty node covering `min..max`.
    pub fn empty(leaf: bool, bottom: bool, level: u8, min: Vec<u8>, max: Option<Vec<u8>>) -> Node {
        Node {
            version: 0,
            valid: true,
            leaf,
            bottom,
            level,
            min,
            max,
            right: NodePtr::NULL,
            entries: Vec::new(),
        }
    }

    /// Bytes the encoding takes (without padding to the node size).
    pub fn encoded_len(&self) -> usize {
        HEADER_BYTES
            + self.min.len()
            + self.max.as_ref().map_or(0, Vec::len)
            + self.entries.iter().map(Entry::encoded_len).sum::<usize>()
            + TRAILER_BYTES
    }

    /// Whether the node fits in `node_bytes`.
    pub fn fits(&self, node_bytes: usize) -> bool {
        self.encoded_len() <= node_bytes && self.entries.len() <= u16::MAX as usize
    }

    /// The body (bytes 8 .. node_bytes - 8): meta, right link, keys, entries.
    pub fn encode_body(&self, node_bytes: usize) -> Vec<u8> {
        let mut meta = u64::from(self.valid)
            | (u64::from(self.leaf) << 1)
            | (u64::from(self.bottom) << 2)
            | (u64::from(self.max.is_none()) << 3)
            | (u64::from(self.level) << 8)
            | ((self.entries.len() as u64 & 0xffff) << 16)
            | ((self.min.len() as u64 & 0xffff) << 32);
        if let Some(m) = &self.max {
            meta |= (m.len() as u64 & 0xffff) << 48;
        }
        let mut b = Vec::with_capacity(node_bytes - 16);
        b.extend_from_slice(&meta.to_le_bytes());
        b.extend_from_slice(&self.right.encode().to_le_bytes());
        b.extend_from_slice(&self.min);
        if let Some(m) = &self.max {
            b.extend_from_slice(m);
        }
        for e in &self.entries {
            b.extend_from_slice(&(e.key.len() as u16).to_le_bytes());
            b.extend_from_slice(&e.key);
            match &e.payload {
                Payload::Child(p) => b.extend_from_slice(&p.encode().to_le_bytes()),
                Payload::Extent(x) => x.encode_into(&mut b),
            }
        }
        b.resize(node_bytes - 16, 0);
        b
    }

    /// The whole node image with `version` at both ends.
    pub fn encode(&self, version: u64, node_bytes: usize) -> Vec<u8> {
        let mut b = Vec::with_capacity(node_bytes);
        b.extend_from_slice(&version.to_le_bytes());
        b.extend_from_slice(&self.encode_body(node_bytes));
        b.extend_from_slice(&version.to_le_bytes());
        b
    }

    /// Decodes a node image. With `check_versions`, an image whose two
    /// versions differ or are odd is [`ReadFault::Torn`].
    pub fn decode(b: &[u8], check_versions: bool) -> Result<Node, ReadFault> {
        let n = b.len();
        if n < HEADER_BYTES + TRAILER_BYTES {
            return Err(ReadFault::Garbage);
        }
        let (v0, v1) = (word(b, 0), word(b, n - 8));
        if check_versions && (v0 != v1 || v0 % 2 == 1) {
            return Err(ReadFault::Torn);
        }
        let meta = word(b, 8);
        let count = ((meta >> 16) & 0xffff) as usize;
        let min_len = ((meta >> 32) & 0xffff) as usize;
        let max_len = ((meta >> 48) & 0xffff) as usize;
        let leaf = meta & 2 != 0;
        let max_inf = meta & 8 != 0;
        let mut at = HEADER_BYTES;
        let end = n - TRAILER_BYTES;
        let mut take = |len: usize| -> Result<&[u8], ReadFault> {
            let s = b.get(at..at + len).filter(|_| at + len <= end);
            at += len;
            s.ok_or(ReadFault::Garbage)
        };
        let min = take(min_len)?.to_vec();
        let max = if max_inf {
            None
        } else {
            Some(take(max_len)?.to_vec())
        };
        let mut entries = Vec::with_capacity(count);
        for _ in 0..count {
            let kl = u16::from_le_bytes(take(2)?.try_into().map_err(|_| ReadFault::Garbage)?);
            let key = take(kl as usize)?.to_vec();
            let payload = if leaf {
                Payload::Extent(
                    ExtentPtr::decode(take(EXTENT_PTR_BYTES)?).ok_or(ReadFault::Garbage)?,
                )
            } else {
                Payload::Child(NodePtr::decode(word(take(8)?, 0)))
            };
            entries.push(Entry { key, payload });
        }
        Ok(Node {
            version: v0,
            valid: meta & 1 != 0,
            leaf,
            bottom: meta & 4 != 0,
            level: ((meta >> 8) & 0xff) as u8,
            min,
            max,
            right: NodePtr::decode(word(b, 16)),
            entries,
        })
    }

    /// Where `key` lies relative to this node's range.
    pub fn cover(&self, key: &[u8]) -> Cover {
        if key < self.min.as_slice() {
            Cover::Left
        } else if below(key, &self.max) {
            Cover::Inside
        } else {
            Cover::Right
        }
    }

    /// The index of the entry of an inner node leading to `key` (the last
    /// entry whose key is at most `key`; 0 if none).
    pub fn child_index(&self, key: &[u8]) -> usize {
        self.entries
            .partition_point(|e| e.key.as_slice() <= key)
            .saturating_sub(1)
    }

    /// The child of an inner node leading to `key`, with the key range that
    /// entry stands for.
    pub fn child_for(&self, key: &[u8]) -> Option<(NodePtr, Vec<u8>, Option<Vec<u8>>)> {
        let i = self.child_index(key);
        let e = self.entries.get(i)?;
        let hi = match self.entries.get(i + 1) {
            Some(n) => Some(n.key.clone()),
            None => self.max.clone(),
        };
        Some((e.child()?, e.key.clone(), hi))
    }

    /// The leaf entry for `key`, if present.
    pub fn find(&self, key: &[u8]) -> Option<&Entry> {
        self.entries
            .binary_search_by(|e| e.key.as_slice().cmp(key))
            .ok()
            .map(|i| &self.entries[i])
    }

    /// Inserts or replaces the entry with `entry.key`; returns the replaced one.
    pub fn upsert(&mut self, entry: Entry) -> Option<Entry> {
        match self
            .entries
            .binary_search_by(|e| e.key.as_slice().cmp(&entry.key))
        {
            Ok(i) => Some(std::mem::replace(&mut self.entries[i], entry)),
            Err(i) => {
                self.entries.insert(i, entry);
                None
            }
        }
    }

    /// Removes the entry with `key`; returns it.
    pub fn remove(&mut self, key: &[u8]) -> Option<Entry> {
        match self.entries.binary_search_by(|e| e.key.as_slice().cmp(key)) {
            Ok(i) => Some(self.entries.remove(i)),
            Err(_) => None,
        }
    }

    /// Splits an overfull node in two halves by bytes: `self` keeps the lower
    /// half (its max becomes the split key), the returned node gets the upper
    /// half and the old max and right link. The caller links them.
    pub fn split_off(&mut self) -> Node {
        let total: usize = self.entries.iter().map(Entry::encoded_len).sum();
        let mut acc = 0;
        let mut at = self.entries.len() / 2;
        for (i, e) in self.entries.iter().enumerate() {
            acc += e.encoded_len();
            if acc * 2 >= total {
                at = i + 1;
                break;
            }
        }
        let at = at.clamp(1, self.entries.len().saturating_sub(1).max(1));
        let upper = self.entries.split_off(at);
        let split_key = upper[0].key.clone();
        let right = Node {
            version: 0,
            valid: true,
            leaf: self.leaf,
            bottom: self.bottom,
            level: self.level,
            min: split_key.clone(),
            max: self.max.take(),
            right: self.right,
            entries: upper,
        };
        self.max = Some(split_key);
        right
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ptr::RegionId;

    fn leaf_with(keys: &[&str]) -> Node {
        let mut n = Node::empty(true, true, 0, Vec::new(), None);
        for (i, k) in keys.iter().enumerate() {
            n.upsert(Entry {
                key: k.as_bytes().to_vec(),
                payload: Payload::Extent(ExtentPtr {
                    region: RegionId(1),
                    offset: 8 * i as u32,
                    len: 16,
                    crc: i as u64,
                }),
            });
        }
        n
    }

    #[test]
    fn a_node_round_trips_and_a_torn_image_is_refused() {
        let mut n = leaf_with(&["b", "a", "c"]);
        n.right = NodePtr::new(RegionId(2), 5);
        n.max = Some(b"z".to_vec());
        let img = n.encode(4, 256);
        assert_eq!(img.len(), 256);
        let d = Node::decode(&img, true).unwrap();
        assert_eq!(d.version, 4);
        assert_eq!(d.entries, n.entries);
        assert_eq!((d.right, d.max.clone()), (n.right, n.max.clone()));
        let mut odd = img.clone();
        odd[0] = 5;
        odd[248] = 5;
        assert_eq!(Node::decode(&odd, true), Err(ReadFault::Torn));
        let mut mixed = img.clone();
        mixed[248] = 6;
        assert_eq!(Node::decode(&mixed, true), Err(ReadFault::Torn));
        assert!(Node::decode(&mixed, false).is_ok());
    }

    #[test]
    fn covers_children_and_splits() {
        let mut n = leaf_with(&["a", "b", "c", "d", "e", "f"]);
        n.min = b"a".to_vec();
        assert_eq!(n.cover(b"0"), Cover::Left);
        assert_eq!(n.cover(b"q"), Cover::Inside);
        let right = n.split_off();
        assert_eq!(n.max.as_deref(), Some(&b"d"[..]));
        assert_eq!(right.min, b"d".to_vec());
        assert_eq!(n.cover(b"d"), Cover::Right);
        assert_eq!(right.cover(b"d"), Cover::Inside);
        assert_eq!(right.max, None);
        let mut inner = Node::empty(false, true, 1, b"a".to_vec(), None);
        for (k, i) in [("a", 1), ("m", 2)] {
            inner.upsert(Entry {
                key: k.as_bytes().to_vec(),
                payload: Payload::Child(NodePtr::new(RegionId(1), i)),
            });
        }
        let (c, lo, hi) = inner.child_for(b"k").unwrap();
        assert_eq!((c.index, lo, hi), (1, b"a".to_vec(), Some(b"m".to_vec())));
        assert_eq!(inner.child_for(b"m").unwrap().0.index, 2);
        assert_eq!(inner.child_for(b"zz").unwrap().2, None);
    }
}

//! Pointers of the Cell tree: region ids, pointers to B-link tree nodes and
//! pointers to key-value extents.
//!
//! Every pointer names a *region* by id (§2.1: "all pointers consist of a
//! region ID and offset"), never a machine or an address: the directory
//! ([`crate::region::Directory`]) maps region ids to the server currently
//! holding them, so a region recovered on another server (§2.6) needs no
//! pointer rewritten. A region holds one meganode: its node pool and its
//! extent heap. Node 0 of a region is always the meganode's root, so a
//! pointer to another meganode is a pointer to its node 0.

use std::fmt;

/// A region (one meganode) of the cluster. Ids start at 1; the region with
/// the lowest id holds the word naming the tree's root (§2.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RegionId(pub u32);

impl fmt::Display for RegionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "r{}", self.0)
    }
}

/// The region whose header holds the root word.
pub const ROOT_REGION: RegionId = RegionId(1);

/// A pointer to one B-link tree node: a region and a node index in its pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodePtr {
    /// The region (meganode).
    pub region: RegionId,
    /// The node's index in the region's node pool (0: the meganode's root).
    pub index: u32,
}

impl NodePtr {
    /// The null pointer (no node; region ids start at 1).
    pub const NULL: NodePtr = NodePtr {
        region: RegionId(0),
        index: 0,
    };

    /// Node `index` of `region`.
    pub fn new(region: RegionId, index: u32) -> NodePtr {
        NodePtr { region, index }
    }

    /// The root node of meganode `region`.
    pub fn root_of(region: RegionId) -> NodePtr {
        NodePtr { region, index: 0 }
    }

    /// Whether this is the null pointer.
    pub fn is_null(self) -> bool {
        self.region.0 == 0
    }

    /// The 64-bit encoding stored in nodes: region in the high half.
    pub fn encode(self) -> u64 {
        (u64::from(self.region.0) << 32) | u64::from(self.index)
    }

    /// Decodes [`NodePtr::encode`].
    pub fn decode(w: u64) -> NodePtr {
        NodePtr {
            region: RegionId((w >> 32) as u32),
            index: w as u32,
        }
    }
}

impl fmt::Display for NodePtr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_null() {
            f.write_str("null")
        } else {
            write!(f, "{}#{}", self.region, self.index)
        }
    }
}

/// A leaf's pointer to a key-value extent, carrying the CRC64 of the extent
/// (Pilaf's self-verifying pointer, §2.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ExtentPtr {
    /// The region whose heap holds the extent.
    pub region: RegionId,
    /// Byte offset of the extent from the start of the region's heap.
    pub offset: u32,
    /// Length of the encoded extent in bytes.
    pub len: u32,
    /// CRC64 of the encoded extent.
    pub crc: u64,
}

/// Bytes of an encoded [`ExtentPtr`].
pub const EXTENT_PTR_BYTES: usize = 20;

impl ExtentPtr {
    /// Appends the 20-byte encoding.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.region.0.to_le_bytes());
        out.extend_from_slice(&self.offset.to_le_bytes());
        out.extend_from_slice(&self.len.to_le_bytes());
        out.extend_from_slice(&self.crc.to_le_bytes());
    }

    /// Decodes 20 bytes.
    pub fn decode(b: &[u8]) -> Option<ExtentPtr> {
        let b = b.get(..EXTENT_PTR_BYTES)?;
        Some(ExtentPtr {
            region: RegionId(u32::from_le_bytes(b[0..4].try_into().ok()?)),
            offset: u32::from_le_bytes(b[4..8].try_into().ok()?),
            len: u32::from_le_bytes(b[8..12].try_into().ok()?),
            crc: u64::from_le_bytes(b[12..20].try_into().ok()?),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointers_round_trip() {
        let p = NodePtr::new(RegionId(7), 42);
        assert_eq!(NodePtr::decode(p.encode()), p);
        assert!(NodePtr::decode(0).is_null());
        let e = ExtentPtr {
            region: RegionId(3),
            offset: 96,
            len: 40,
            crc: 0xdead_beef_0bad_cafe,
        };
        let mut b = Vec::new();
        e.encode_into(&mut b);
        assert_eq!(b.len(), EXTENT_PTR_BYTES);
        assert_eq!(ExtentPtr::decode(&b), Some(e));
    }
}

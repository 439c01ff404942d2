//! Address and rkey bookkeeping: where every node's regions are and how a
//! protocol [`RemoteAddr`] becomes a (virtual address, rkey) pair.
//!
//! Every check the NIC would otherwise fail with a queue-pair-breaking error
//! (range, alignment, unknown node) is done here first and reported as the
//! protocol's typed error, without posting anything.

use nessie_protocol::{FabricError, NodeId, Region, RemoteAddr};

use crate::byteorder::Endian;
use crate::wr::RemoteSlice;

/// One registered region of a node, as its owner advertised it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegionInfo {
    /// Virtual address of the first byte.
    pub addr: u64,
    /// Remote key.
    pub rkey: u32,
    /// Length in bytes.
    pub len: u64,
}

/// A node's two regions and its NIC's atomic store order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerRegions {
    /// The index region.
    pub index: RegionInfo,
    /// The data region.
    pub data: RegionInfo,
    /// How the node's NIC lays out CAS words ([`crate::byteorder`]).
    pub stores: Endian,
}

impl PeerRegions {
    /// The region `r`.
    pub fn region(&self, r: Region) -> &RegionInfo {
        match r {
            Region::Index => &self.index,
            Region::Data => &self.data,
        }
    }
}

/// The regions of every node an endpoint is connected to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddressBook {
    peers: Vec<Option<PeerRegions>>,
}

impl AddressBook {
    /// A book for a cluster of `nodes` nodes, none known yet.
    pub fn new(nodes: u16) -> AddressBook {
        AddressBook {
            peers: vec![None; usize::from(nodes)],
        }
    }

    /// Records (or replaces, after a reconnect) what `node` advertised.
    pub fn set(&mut self, node: NodeId, regions: PeerRegions) -> Result<(), FabricError> {
        let slot = self
            .peers
            .get_mut(usize::from(node.0))
            .ok_or(FabricError::UnknownNode(node))?;
        *slot = Some(regions);
        Ok(())
    }

    /// What `node` advertised, if it is known.
    pub fn get(&self, node: NodeId) -> Option<&PeerRegions> {
        self.peers.get(usize::from(node.0)).and_then(|p| p.as_ref())
    }

    /// Translates an access of `len` bytes at `addr` (a CAS when `atomic`)
    /// into the remote virtual address and rkey, checking node, alignment and
    /// range.
    pub fn resolve(
        &self,
        addr: RemoteAddr,
        len: u64,
        atomic: bool,
    ) -> Result<RemoteSlice, FabricError> {
        let peer = self
            .peers
            .get(usize::from(addr.node.0))
            .ok_or(FabricError::UnknownNode(addr.node))?
            .as_ref()
            .ok_or(FabricError::NodeDown(addr.node))?;
        let region = peer.region(addr.region);
        if atomic && (!addr.offset.is_multiple_of(8) || len != 8) {
            return Err(FabricError::Misaligned(addr));
        }
        check_range(addr.node, addr.region, addr.offset, len, region.len)?;
        let vaddr = region.addr + addr.offset;
        if atomic && !vaddr.is_multiple_of(8) {
            // The peer advertised a misaligned base: its NIC would refuse.
            return Err(FabricError::Misaligned(addr));
        }
        Ok(RemoteSlice {
            addr: vaddr,
            rkey: region.rkey,
        })
    }
}

/// Checks that `len` bytes at `offset` lie within a region of `size` bytes.
pub fn check_range(
    node: NodeId,
    region: Region,
    offset: u64,
    len: u64,
    size: u64,
) -> Result<(), FabricError> {
    match offset.checked_add(len) {
        Some(end) if end <= size => Ok(()),
        _ => Err(FabricError::OutOfRange {
            node,
            region,
            offset,
            len,
            size,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn book() -> AddressBook {
        let mut b = AddressBook::new(3);
        b.set(
            NodeId(1),
            PeerRegions {
                index: RegionInfo {
                    addr: 0x10_0000,
                    rkey: 11,
                    len: 64,
                },
                data: RegionInfo {
                    addr: 0x20_0000,
                    rkey: 22,
                    len: 4096,
                },
                stores: Endian::Big,
            },
        )
        .unwrap();
        b
    }

    #[test]
    fn addresses_translate_to_vaddr_and_rkey() {
        let b = book();
        assert_eq!(
            b.resolve(RemoteAddr::index(NodeId(1), 16), 8, true),
            Ok(RemoteSlice {
                addr: 0x10_0010,
                rkey: 11
            })
        );
        assert_eq!(
            b.resolve(RemoteAddr::data(NodeId(1), 131), 13, false),
            Ok(RemoteSlice {
                addr: 0x20_0083,
                rkey: 22
            })
        );
        assert_eq!(b.get(NodeId(1)).unwrap().stores, Endian::Big);
        assert_eq!(b.get(NodeId(0)), None);
    }

    #[test]
    fn ranges_are_checked_to_the_last_byte() {
        let b = book();
        assert!(b
            .resolve(RemoteAddr::data(NodeId(1), 4088), 8, false)
            .is_ok());
        assert_eq!(
            b.resolve(RemoteAddr::data(NodeId(1), 4092), 8, false),
            Err(FabricError::OutOfRange {
                node: NodeId(1),
                region: Region::Data,
                offset: 4092,
                len: 8,
                size: 4096
            })
        );
        assert!(matches!(
            b.resolve(RemoteAddr::index(NodeId(1), 64), 8, true),
            Err(FabricError::OutOfRange {
                region: Region::Index,
                ..
            })
        ));
        assert!(
            matches!(
                b.resolve(RemoteAddr::data(NodeId(1), u64::MAX - 2), 8, false),
                Err(FabricError::OutOfRange { .. })
            ),
            "no overflow"
        );
    }

    #[test]
    fn atomics_must_be_aligned_words() {
        let b = book();
        let a = RemoteAddr::index(NodeId(1), 4);
        assert_eq!(b.resolve(a, 8, true), Err(FabricError::Misaligned(a)));
        let a = RemoteAddr::data(NodeId(1), 8);
        assert_eq!(b.resolve(a, 4, true), Err(FabricError::Misaligned(a)));
        // An unaligned READ is fine.
        assert!(b.resolve(RemoteAddr::index(NodeId(1), 4), 8, false).is_ok());
        // A peer advertising a misaligned base.
        let mut b2 = book();
        let mut p = *b2.get(NodeId(1)).unwrap();
        p.data.addr += 4;
        b2.set(NodeId(1), p).unwrap();
        let a = RemoteAddr::data(NodeId(1), 8);
        assert_eq!(b2.resolve(a, 8, true), Err(FabricError::Misaligned(a)));
    }

    #[test]
    fn unknown_and_unconnected_nodes() {
        let mut b = book();
        let a = RemoteAddr::data(NodeId(3), 0);
        assert_eq!(
            b.resolve(a, 8, false),
            Err(FabricError::UnknownNode(NodeId(3)))
        );
        let a = RemoteAddr::data(NodeId(2), 0);
        assert_eq!(
            b.resolve(a, 8, false),
            Err(FabricError::NodeDown(NodeId(2)))
        );
        let p = *b.get(NodeId(1)).unwrap();
        assert_eq!(
            b.set(NodeId(9), p),
            Err(FabricError::UnknownNode(NodeId(9)))
        );
    }

    #[test]
    fn local_range_check() {
        assert!(check_range(NodeId(0), Region::Data, 0, 4096, 4096).is_ok());
        assert!(check_range(NodeId(0), Region::Data, 1, 4096, 4096).is_err());
    }
}

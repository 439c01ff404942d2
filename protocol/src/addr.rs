//! Addresses on the fabric: nodes, registered regions and byte offsets,
//! and the clients of a node ([`ClientId`]).
//!
//! Every node registers two regions with its NIC: its slice of the global index
//! table ([`Region::Index`], an array of 64-bit index table entries) and its data
//! table ([`Region::Data`], an array of fixed-size data table entries). A
//! [`RemoteAddr`] names one byte in one of them.

use std::fmt;

/// A node of the cluster (one NIC, one index-table slice, one data table).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub u16);

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "node{}", self.0)
    }
}

/// A memory region that a node registers with its NIC.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Region {
    /// The node's slice of the index table: 64-bit index table entries.
    Index,
    /// The node's data table: fixed-size data table entries.
    Data,
}

impl fmt::Display for Region {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Region::Index => f.write_str("index"),
            Region::Data => f.write_str("data"),
        }
    }
}

/// A byte address on the fabric: node, region and offset within the region.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RemoteAddr {
    /// The node whose memory is addressed.
    pub node: NodeId,
    /// The registered region on that node.
    pub region: Region,
    /// Byte offset within the region.
    pub offset: u64,
}

impl RemoteAddr {
    /// An address in `node`'s index region.
    pub fn index(node: NodeId, offset: u64) -> Self {
        RemoteAddr {
            node,
            region: Region::Index,
            offset,
        }
    }

    /// An address in `node`'s data region.
    pub fn data(node: NodeId, offset: u64) -> Self {
        RemoteAddr {
            node,
            region: Region::Data,
            offset,
        }
    }

    /// The address `delta` bytes further on in the same region.
    pub fn offset_by(self, delta: u64) -> Self {
        RemoteAddr {
            offset: self.offset + delta,
            ..self
        }
    }
}

impl fmt::Display for RemoteAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}+{:#x}", self.node, self.region, self.offset)
    }
}

/// The position of one index table entry: a node and a slot in its index region.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IteAddr {
    /// The node holding the entry.
    pub node: NodeId,
    /// Slot number within that node's index region (byte offset = slot * 8).
    pub slot: u32,
}

impl IteAddr {
    /// The fabric address of this entry's 64-bit word.
    pub fn remote(self) -> RemoteAddr {
        RemoteAddr::index(self.node, u64::from(self.slot) * 8)
    }
}

impl fmt::Display for IteAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ITE {}#{}", self.node, self.slot)
    }
}

/// The position of one data table entry: a data-table id and an entry number.
///
/// The data-table id names one table of the deployment: the node holding it
/// (low [`NODE_BITS`](crate::layout::NODE_BITS) bits) and its size class
/// (high bits; class 0 is the main table, docs/protocol.md §2.1 and §2.3).
/// A deployment of one class has data-table id = node, as before classes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DteAddr {
    /// Data-table id (DTI): node and size class.
    pub table: u16,
    /// Entry number within the data table.
    pub index: u32,
}

impl DteAddr {
    /// Entry `index` of the table of size class `class` on `node`.
    pub fn new(node: NodeId, class: u8, index: u32) -> Self {
        DteAddr {
            table: (u16::from(class) << crate::layout::NODE_BITS) | node.0,
            index,
        }
    }

    /// The node that holds this data table entry.
    pub fn node(self) -> NodeId {
        NodeId(self.table & ((1 << crate::layout::NODE_BITS) - 1))
    }

    /// The size class of the entry's table.
    pub fn class(self) -> u8 {
        (self.table >> crate::layout::NODE_BITS) as u8
    }
}

impl fmt::Display for DteAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.class() {
            0 => write!(f, "DTE {}/{}", self.node().0, self.index),
            c => write!(f, "DTE {}/c{c}/{}", self.node().0, self.index),
        }
    }
}

/// Which client this is: its node and its number among that node's clients.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClientId {
    /// The node the client runs on (its data table entries live there).
    pub node: NodeId,
    /// The client's number on its node, below `clients_per_node`.
    pub index: u16,
}

impl fmt::Display for ClientId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "client {}.{}", self.node.0, self.index)
    }
}

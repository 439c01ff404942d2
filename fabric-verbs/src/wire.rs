//! The connection private data exchanged through `rdma_cm`: small,
//! fixed-size, versioned, explicitly little-endian records.
//!
//! - [`Hello`] rides on the connect request (at most 56 bytes of private data
//!   on RoCE/IB): who connects, to whom, and the cluster fingerprint.
//! - [`Welcome`] rides on the accept (at most 196 bytes): the acceptor's
//!   index and data region addresses, rkeys and lengths, and its NIC's atomic
//!   store order.
//!
//! `rdma_cm` may deliver the private data zero-padded to the transport's
//! maximum, so decoders accept (and ignore) trailing bytes.

use crate::byteorder::Endian;
use crate::remote::{PeerRegions, RegionInfo};

/// Version of both records; a peer with another version is refused.
pub const WIRE_VERSION: u16 = 1;
const HELLO_MAGIC: [u8; 4] = *b"NSSH";
const WELCOME_MAGIC: [u8; 4] = *b"NSSW";
/// Encoded size of a [`Hello`].
pub const HELLO_LEN: usize = 20;
/// Encoded size of a [`Welcome`].
pub const WELCOME_LEN: usize = 60;

// rdma_cm private data limits: 56 bytes in a connect request, 196 in an accept.
const _: () = assert!(HELLO_LEN <= 56 && WELCOME_LEN <= 196);

/// Why private data could not be decoded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// Fewer bytes than the record needs.
    #[error("private data of {got} bytes, need {need}")]
    TooShort {
        /// Bytes needed.
        need: usize,
        /// Bytes received.
        got: usize,
    },
    /// Not a Nessie record (another application on the port?).
    #[error("not a Nessie connection record (magic {0:02x?})")]
    BadMagic([u8; 4]),
    /// Another protocol version.
    #[error("wire version {got}, this build speaks {WIRE_VERSION}")]
    Version {
        /// The peer's version.
        got: u16,
    },
    /// An atomic byte-order code that is not defined.
    #[error("unknown atomic byte-order code {0}")]
    BadOrder(u8),
    /// The peer serves another cluster shape.
    #[error("cluster fingerprint {got:#x} differs from ours {ours:#x}: the nodes read different cluster files")]
    Fingerprint {
        /// The peer's fingerprint.
        got: u64,
        /// Ours.
        ours: u64,
    },
}

/// The connect request's private data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hello {
    /// The connecting endpoint's node.
    pub from: u16,
    /// The node it wants to reach.
    pub to: u16,
    /// The start-up byte-order probe (accepted before the node is ready).
    pub probe: bool,
    /// [`crate::cluster::ClusterFile::fingerprint`] of the connecting node.
    pub fingerprint: u64,
}

/// The accept's private data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Welcome {
    /// The accepting node.
    pub node: u16,
    /// Its NIC's atomic store order (`None` only while probing).
    pub stores: Option<Endian>,
    /// Its fingerprint.
    pub fingerprint: u64,
    /// Its index region.
    pub index: RegionInfo,
    /// Its data region.
    pub data: RegionInfo,
}

impl Welcome {
    /// The regions, if the store order is known.
    pub fn regions(&self) -> Option<PeerRegions> {
        Some(PeerRegions {
            index: self.index,
            data: self.data,
            stores: self.stores?,
        })
    }
}

fn header(b: &[u8], magic: [u8; 4], need: usize) -> Result<(), WireError> {
    if b.len() < need {
        return Err(WireError::TooShort { need, got: b.len() });
    }
    let m = [b[0], b[1], b[2], b[3]];
    if m != magic {
        return Err(WireError::BadMagic(m));
    }
    let v = u16::from_le_bytes([b[4], b[5]]);
    if v != WIRE_VERSION {
        return Err(WireError::Version { got: v });
    }
    Ok(())
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

impl Hello {
    /// The 20-byte encoding.
    pub fn encode(&self) -> [u8; HELLO_LEN] {
        let mut b = [0u8; HELLO_LEN];
        b[0..4].copy_from_slice(&HELLO_MAGIC);
        b[4..6].copy_from_slice(&WIRE_VERSION.to_le_bytes());
        b[6..8].copy_from_slice(&self.from.to_le_bytes());
        b[8..10].copy_from_slice(&self.to.to_le_bytes());
        b[10] = u8::from(self.probe);
        b[12..20].copy_from_slice(&self.fingerprint.to_le_bytes());
        b
    }

    /// Decodes (trailing bytes ignored).
    pub fn decode(b: &[u8]) -> Result<Hello, WireError> {
        header(b, HELLO_MAGIC, HELLO_LEN)?;
        Ok(Hello {
            from: u16_at(b, 6),
            to: u16_at(b, 8),
            probe: b[10] & 1 != 0,
            fingerprint: u64_at(b, 12),
        })
    }
}

impl Welcome {
    /// The 60-byte encoding.
    pub fn encode(&self) -> [u8; WELCOME_LEN] {
        let mut b = [0u8; WELCOME_LEN];
        b[0..4].copy_from_slice(&WELCOME_MAGIC);
        b[4..6].copy_from_slice(&WIRE_VERSION.to_le_bytes());
        b[6..8].copy_from_slice(&self.node.to_le_bytes());
        b[8] = self.stores.map_or(0, Endian::code);
        b[12..20].copy_from_slice(&self.fingerprint.to_le_bytes());
        for (at, r) in [(20, &self.index), (40, &self.data)] {
            b[at..at + 8].copy_from_slice(&r.addr.to_le_bytes());
            b[at + 8..at + 12].copy_from_slice(&r.rkey.to_le_bytes());
            b[at + 12..at + 20].copy_from_slice(&r.len.to_le_bytes());
        }
        b
    }

    /// Decodes (trailing bytes ignored).
    pub fn decode(b: &[u8]) -> Result<Welcome, WireError> {
        header(b, WELCOME_MAGIC, WELCOME_LEN)?;
        let stores = match b[8] {
            0 => None,
            c => Some(Endian::from_code(c).ok_or(WireError::BadOrder(c))?),
        };
        let region = |at: usize| RegionInfo {
            addr: u64_at(b, at),
            rkey: u32_at(b, at + 8),
            len: u64_at(b, at + 12),
        };
        Ok(Welcome {
            node: u16_at(b, 6),
            stores,
            fingerprint: u64_at(b, 12),
            index: region(20),
            data: region(40),
        })
    }
}

/// Checks a peer's fingerprint against ours.
pub fn check_fingerprint(got: u64, ours: u64) -> Result<(), WireError> {
    if got == ours {
        Ok(())
    } else {
        Err(WireError::Fingerprint { got, ours })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn welcome() -> Welcome {
        Welcome {
            node: 0x0102,
            stores: Some(Endian::Big),
            fingerprint: 0x1122_3344_5566_7788,
            index: RegionInfo {
                addr: 0x7f00_0000_0000,
                rkey: 0xdead_beef,
                len: 8 << 20,
            },
            data: RegionInfo {
                addr: 0x7f10_0000_0000,
                rkey: 0x0bad_f00d,
                len: 512 << 20,
            },
        }
    }

    #[test]
    fn records_fit_the_cm_private_data_limits() {
        // Also enforced at compile time below the constants.
        assert_eq!((HELLO_LEN, WELCOME_LEN), (20, 60));
    }

    #[test]
    fn hello_round_trips_with_padding() {
        let h = Hello {
            from: 2,
            to: 0x0301,
            probe: true,
            fingerprint: 0xfeed_0000_0000_0001,
        };
        let mut b = h.encode().to_vec();
        assert_eq!(&b[0..4], b"NSSH");
        assert_eq!(&b[4..6], &[1, 0], "version, little-endian");
        assert_eq!(&b[8..10], &[0x01, 0x03], "to, little-endian");
        assert_eq!(Hello::decode(&b), Ok(h));
        b.resize(56, 0);
        assert_eq!(Hello::decode(&b), Ok(h));
        let h2 = Hello { probe: false, ..h };
        assert_eq!(Hello::decode(&h2.encode()), Ok(h2));
    }

    #[test]
    fn welcome_round_trips_with_explicit_layout() {
        let w = welcome();
        let b = w.encode();
        assert_eq!(&b[0..4], b"NSSW");
        assert_eq!(&b[6..8], &[0x02, 0x01]);
        assert_eq!(b[8], 2, "big-endian store order code");
        assert_eq!(&b[28..32], &0xdead_beefu32.to_le_bytes());
        assert_eq!(&b[40..48], &0x7f10_0000_0000u64.to_le_bytes());
        assert_eq!(Welcome::decode(&b), Ok(w));
        let mut padded = b.to_vec();
        padded.resize(196, 0);
        assert_eq!(Welcome::decode(&padded), Ok(w));
        assert_eq!(w.regions().unwrap().data, w.data);
        let probing = Welcome { stores: None, ..w };
        assert_eq!(Welcome::decode(&probing.encode()), Ok(probing));
        assert_eq!(probing.regions(), None);
    }

    #[test]
    fn bad_records_are_typed_errors() {
        let b = welcome().encode();
        assert_eq!(
            Welcome::decode(&b[..59]),
            Err(WireError::TooShort { need: 60, got: 59 })
        );
        assert_eq!(Hello::decode(&b), Err(WireError::BadMagic(*b"NSSW")));
        let mut v = b;
        v[4] = 9;
        assert_eq!(Welcome::decode(&v), Err(WireError::Version { got: 9 }));
        let mut o = b;
        o[8] = 7;
        assert_eq!(Welcome::decode(&o), Err(WireError::BadOrder(7)));
        assert_eq!(
            Hello::decode(&[]),
            Err(WireError::TooShort { need: 20, got: 0 })
        );
        assert!(check_fingerprint(1, 1).is_ok());
        assert_eq!(
            check_fingerprint(1, 2),
            Err(WireError::Fingerprint { got: 1, ours: 2 })
        );
    }
}

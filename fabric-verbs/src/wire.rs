//! The connection private data exchanged through `rdma_cm`: small,
//! fixed-size, versioned, explicitly little-endian records.
//!
//! - [`Hello`] rides on the connect request (at most 56 bytes of private data
//!   on RoCE/IB): who connects, to whom, the cluster fingerprint and the
//!   dialer's clock when it sent the request.
//! - [`Welcome`] rides on the accept (at most 196 bytes): the acceptor's
//!   index and data region addresses, rkeys and lengths, its NIC's atomic
//!   store order and its clock when it accepted (the dialer estimates the
//!   clock offset from the two clocks and the round trip, [`clock_offset`]).
//! - [`Reject`] rides on a refusal (at most 148 bytes): why, so that the
//!   dialer tells a node that is not ready yet (retry) from one that will
//!   never accept it (wrong cluster file, wrong node, other version: not
//!   retried for a while). Its layout is the same in every version.
//!
//! `rdma_cm` may deliver the private data zero-padded to the transport's
//! maximum, so decoders accept (and ignore) trailing bytes.

use crate::byteorder::Endian;
use crate::remote::{PeerRegions, RegionInfo};

/// Version of both records; a peer with another version is refused.
pub const WIRE_VERSION: u16 = 2;
const HELLO_MAGIC: [u8; 4] = *b"NSSH";
const WELCOME_MAGIC: [u8; 4] = *b"NSSW";
const REJECT_MAGIC: [u8; 4] = *b"NSSR";
/// Encoded size of a [`Hello`].
pub const HELLO_LEN: usize = 28;
/// Encoded size of a [`Welcome`].
pub const WELCOME_LEN: usize = 68;
/// Encoded size of a [`Reject`].
pub const REJECT_LEN: usize = 16;

// rdma_cm private data limits: 56 bytes in a connect request, 196 in an
// accept, 148 in a reject.
const _: () = assert!(HELLO_LEN <= 56 && WELCOME_LEN <= 196 && REJECT_LEN <= 148);

/// Why private data could not be decoded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
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
    /// The connecting node's clock (ns) when it sent the request.
    pub clock: u64,
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
    /// The accepting node's clock (ns) when it accepted.
    pub clock: u64,
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
    /// The 28-byte encoding.
    pub fn encode(&self) -> [u8; HELLO_LEN] {
        let mut b = [0u8; HELLO_LEN];
        b[0..4].copy_from_slice(&HELLO_MAGIC);
        b[4..6].copy_from_slice(&WIRE_VERSION.to_le_bytes());
        b[6..8].copy_from_slice(&self.from.to_le_bytes());
        b[8..10].copy_from_slice(&self.to.to_le_bytes());
        b[10] = u8::from(self.probe);
        b[12..20].copy_from_slice(&self.fingerprint.to_le_bytes());
        b[20..28].copy_from_slice(&self.clock.to_le_bytes());
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
            clock: u64_at(b, 20),
        })
    }
}

impl Welcome {
    /// The 68-byte encoding.
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
        b[60..68].copy_from_slice(&self.clock.to_le_bytes());
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
            clock: u64_at(b, 60),
        })
    }
}

/// Why a node refused a connection, as its [`Reject`] says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RejectReason {
    /// The node is still starting (probing its NIC): retry.
    NotReady,
    /// The request was for another node (`detail`: the node reached): a wrong
    /// address in the cluster file.
    WrongNode,
    /// The cluster fingerprints differ (`detail`: the acceptor's).
    Fingerprint,
    /// Another wire version (`detail`: the acceptor's).
    Version,
    /// Not a Nessie request, or a malformed one.
    BadRequest,
    /// The acceptor could not set up the queue pair (resources): retry.
    Resources,
}

impl RejectReason {
    fn code(self) -> u8 {
        match self {
            RejectReason::NotReady => 1,
            RejectReason::WrongNode => 2,
            RejectReason::Fingerprint => 3,
            RejectReason::Version => 4,
            RejectReason::BadRequest => 5,
            RejectReason::Resources => 6,
        }
    }

    fn from_code(c: u8) -> Option<RejectReason> {
        Some(match c {
            1 => RejectReason::NotReady,
            2 => RejectReason::WrongNode,
            3 => RejectReason::Fingerprint,
            4 => RejectReason::Version,
            5 => RejectReason::BadRequest,
            6 => RejectReason::Resources,
            _ => return None,
        })
    }

    /// Whether retrying can help without changing a configuration: a node
    /// still starting or short of resources. The others are permanent.
    pub fn is_transient(self) -> bool {
        matches!(self, RejectReason::NotReady | RejectReason::Resources)
    }
}

/// The reject's private data: a reason and a detail (see [`RejectReason`]).
/// Its layout does not depend on [`WIRE_VERSION`], so that nodes of
/// different versions can tell each other why they refuse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reject {
    /// Why.
    pub reason: RejectReason,
    /// The rejecting node's wire version.
    pub version: u16,
    /// What the reason refers to.
    pub detail: u64,
}

impl Reject {
    /// A reject of this build.
    pub fn new(reason: RejectReason, detail: u64) -> Reject {
        Reject {
            reason,
            version: WIRE_VERSION,
            detail,
        }
    }

    /// The 16-byte encoding.
    pub fn encode(&self) -> [u8; REJECT_LEN] {
        let mut b = [0u8; REJECT_LEN];
        b[0..4].copy_from_slice(&REJECT_MAGIC);
        b[4..6].copy_from_slice(&self.version.to_le_bytes());
        b[6] = self.reason.code();
        b[8..16].copy_from_slice(&self.detail.to_le_bytes());
        b
    }

    /// Decodes (trailing bytes ignored); `None` for anything else (a refusal
    /// by the connection manager itself, or by a foreign listener).
    pub fn decode(b: &[u8]) -> Option<Reject> {
        if b.len() < REJECT_LEN || b[0..4] != REJECT_MAGIC {
            return None;
        }
        Some(Reject {
            reason: RejectReason::from_code(b[6])?,
            version: u16_at(b, 4),
            detail: u64_at(b, 8),
        })
    }
}

impl std::fmt::Display for Reject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.reason {
            RejectReason::NotReady => write!(f, "the node is still starting"),
            RejectReason::WrongNode => write!(
                f,
                "the address belongs to node {}, not the one dialled (the cluster file's addresses are wrong)",
                self.detail
            ),
            RejectReason::Fingerprint => write!(
                f,
                "its cluster fingerprint is {:#x}: the nodes read different cluster files or run different systems",
                self.detail
            ),
            RejectReason::Version => write!(
                f,
                "it speaks wire version {}, this build {WIRE_VERSION}: run the same build everywhere",
                self.version
            ),
            RejectReason::BadRequest => write!(f, "it could not read the connection request"),
            RejectReason::Resources => write!(f, "it could not set up a queue pair"),
        }
    }
}

/// The clock offset of a peer (its clock minus ours, in ns) and the
/// uncertainty of that estimate: we sent at `sent` and received at
/// `received` (our clock), it stamped `theirs` in between, so its clock at
/// our midpoint was `theirs` give or take half the round trip.
pub fn clock_offset(sent: u64, theirs: u64, received: u64) -> (i64, u64) {
    let rtt = received.saturating_sub(sent);
    let mid = sent.saturating_add(rtt / 2);
    let offset = (i128::from(theirs) - i128::from(mid))
        .clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64;
    (offset, rtt / 2 + 1)
}

/// Whether the offset estimate proves the clocks differ by more than `skew`
/// ns (the offset exceeds the skew even at the edge of its uncertainty).
pub fn exceeds_skew(offset: i64, uncertainty: u64, skew: u64) -> bool {
    offset.unsigned_abs().saturating_sub(uncertainty) > skew
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
            clock: 0x0123_4567_89ab_cdef,
        }
    }

    #[test]
    fn records_fit_the_cm_private_data_limits() {
        // Also enforced at compile time below the constants.
        assert_eq!((HELLO_LEN, WELCOME_LEN, REJECT_LEN), (28, 68, 16));
    }

    #[test]
    fn hello_round_trips_with_padding() {
        let h = Hello {
            from: 2,
            to: 0x0301,
            probe: true,
            fingerprint: 0xfeed_0000_0000_0001,
            clock: 77,
        };
        let mut b = h.encode().to_vec();
        assert_eq!(&b[0..4], b"NSSH");
        assert_eq!(&b[4..6], &[2, 0], "version, little-endian");
        assert_eq!(&b[20..28], &77u64.to_le_bytes());
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
            Welcome::decode(&b[..67]),
            Err(WireError::TooShort { need: 68, got: 67 })
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
            Err(WireError::TooShort { need: 28, got: 0 })
        );
        assert!(check_fingerprint(1, 1).is_ok());
        assert_eq!(
            check_fingerprint(1, 2),
            Err(WireError::Fingerprint { got: 1, ours: 2 })
        );
    }

    #[test]
    fn rejects_round_trip_and_say_whether_to_retry() {
        for (reason, transient) in [
            (RejectReason::NotReady, true),
            (RejectReason::Resources, true),
            (RejectReason::WrongNode, false),
            (RejectReason::Fingerprint, false),
            (RejectReason::Version, false),
            (RejectReason::BadRequest, false),
        ] {
            let r = Reject::new(reason, 0xabc);
            let mut b = r.encode().to_vec();
            b.resize(148, 0);
            assert_eq!(Reject::decode(&b), Some(r));
            assert_eq!(reason.is_transient(), transient, "{reason:?}");
            assert!(!r.to_string().is_empty());
        }
        assert_eq!(Reject::decode(&[]), None, "a refusal by the CM itself");
        assert_eq!(Reject::decode(&welcome().encode()), None);
        let mut odd = Reject::new(RejectReason::NotReady, 0).encode();
        odd[6] = 99;
        assert_eq!(Reject::decode(&odd), None);
        let v = Reject::new(RejectReason::Version, 0).to_string();
        assert!(v.contains("same build"), "{v}");
    }

    #[test]
    fn clock_offsets_are_estimated_from_the_round_trip() {
        // Sent at 1000, received at 1100 (our clock); the peer stamped 5050:
        // its clock runs 4000 ahead, +-50.
        assert_eq!(clock_offset(1000, 5050, 1100), (4000, 51));
        assert_eq!(clock_offset(1000, 50, 1100), (-1000, 51));
        // Skew 3000: 4000 - 51 exceeds it; with skew 3950 it might not.
        assert!(exceeds_skew(4000, 51, 3000));
        assert!(!exceeds_skew(4000, 51, 3950));
        assert!(!exceeds_skew(-1000, 51, 1000));
        assert!(exceeds_skew(-1000, 51, 900));
        assert!(!exceeds_skew(0, 0, 0));
    }
}

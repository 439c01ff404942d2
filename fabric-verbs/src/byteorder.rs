//! Atomic byte order: detection and normalisation.
//!
//! The protocol sees a CAS word as a little-endian `u64` in memory (CPU reads
//! of data entries, RDMA READs of index entries and CAS operands must agree).
//! NICs differ: some (older ConnectX generations, some drivers) execute the
//! atomic on the memory word as big-endian, and some write the returned
//! previous value to the local buffer big-endian. Two independent properties:
//!
//! - [`AtomicOrder::stores`]: how the *responder's* NIC interprets the remote
//!   word (what bytes a swap operand `v` leaves in memory);
//! - [`AtomicOrder::returns`]: how the *requester's* NIC writes the previous
//!   value into the local buffer.
//!
//! At start-up a loopback CAS with the asymmetric value [`PROBE`] detects both
//! ([`detect`]); each node advertises its `stores` order to its peers in the
//! connection private data, and the requester combines the responder's
//! `stores` with its own `returns` ([`operand`], [`previous`]).

/// The asymmetric probe value: every byte differs, so any byte swap shows.
pub const PROBE: u64 = 0x0102_0304_0506_0708;

/// A byte order of a 64-bit word in memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Endian {
    /// Least significant byte first (x86, the protocol's order).
    Little,
    /// Most significant byte first (network order).
    Big,
}

impl Endian {
    /// The host CPU's order.
    pub const HOST: Endian = if cfg!(target_endian = "big") {
        Endian::Big
    } else {
        Endian::Little
    };

    /// The bytes of `v` in this order.
    pub fn to_bytes(self, v: u64) -> [u8; 8] {
        match self {
            Endian::Little => v.to_le_bytes(),
            Endian::Big => v.to_be_bytes(),
        }
    }

    /// The value of `b` read in this order.
    pub fn read_bytes(self, b: [u8; 8]) -> u64 {
        match self {
            Endian::Little => u64::from_le_bytes(b),
            Endian::Big => u64::from_be_bytes(b),
        }
    }

    /// Wire code (connection private data).
    pub fn code(self) -> u8 {
        match self {
            Endian::Little => 1,
            Endian::Big => 2,
        }
    }

    /// From a wire code.
    pub fn from_code(c: u8) -> Option<Endian> {
        match c {
            1 => Some(Endian::Little),
            2 => Some(Endian::Big),
            _ => None,
        }
    }
}

/// What the probe found out about one device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AtomicOrder {
    /// How the NIC, as responder, lays the word out in memory.
    pub stores: Endian,
    /// How the NIC, as requester, writes the previous value locally.
    pub returns: Endian,
}

impl AtomicOrder {
    /// A device that behaves like the host CPU in both respects.
    pub const HOST: AtomicOrder = AtomicOrder {
        stores: Endian::HOST,
        returns: Endian::HOST,
    };
}

/// Why the probe could not classify the device.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ByteOrderError {
    /// After swapping in [`PROBE`] the word held neither order of it.
    #[error("atomic byte-order probe: after a CAS of {PROBE:#018x} the word holds {found:02x?}, which is neither byte order of it (the NIC's atomics are broken or the probe raced)")]
    Stored {
        /// The bytes found in memory.
        found: [u8; 8],
    },
    /// The previous value returned was neither order of [`PROBE`].
    #[error("atomic byte-order probe: a CAS over {PROBE:#018x} returned {found:02x?}, which is neither byte order of it")]
    Returned {
        /// The bytes the NIC returned.
        found: [u8; 8],
    },
    /// The first CAS (over a zero word) did not return zero.
    #[error("atomic byte-order probe: a CAS over a zero word returned {found:02x?}")]
    NotZero {
        /// The bytes the NIC returned.
        found: [u8; 8],
    },
}

/// Classifies a device from the probe: `first_returned` is what a CAS
/// (compare 0, swap [`PROBE`]) over a zero word returned, `stored` the bytes
/// of the word after it (CPU read), and `second_returned` what a second CAS
/// over that word (compare and swap [`PROBE`] in the order found) returned.
pub fn detect(
    first_returned: [u8; 8],
    stored: [u8; 8],
    second_returned: [u8; 8],
) -> Result<AtomicOrder, ByteOrderError> {
    if first_returned != [0; 8] {
        return Err(ByteOrderError::NotZero {
            found: first_returned,
        });
    }
    let classify = |b: [u8; 8]| {
        if b == Endian::HOST.to_bytes(PROBE) {
            Some(Endian::HOST)
        } else if b == Endian::Big.to_bytes(PROBE) {
            Some(Endian::Big)
        } else if b == Endian::Little.to_bytes(PROBE) {
            Some(Endian::Little)
        } else {
            None
        }
    };
    // The NIC wrote `PROBE` (as it received it, a host-order u64) in its order.
    let stores = classify(stored).ok_or(ByteOrderError::Stored { found: stored })?;
    let returns = classify(second_returned).ok_or(ByteOrderError::Returned {
        found: second_returned,
    })?;
    Ok(AtomicOrder { stores, returns })
}

/// The operand (compare or swap, as a host `u64` for the work request) that
/// makes a responder storing in `responder_stores` order compare against or
/// leave the protocol's little-endian word `v`.
pub fn operand(v: u64, responder_stores: Endian) -> u64 {
    // The NIC lays the host value `x` out as `responder_stores.to_bytes(x)`;
    // we want the bytes `v.to_le_bytes()`.
    responder_stores.read_bytes(v.to_le_bytes())
}

/// The protocol's previous word from the 8 bytes the local NIC returned.
pub fn previous(returned: [u8; 8], local_returns: Endian, responder_stores: Endian) -> u64 {
    // The value the responder found, as a number in its interpretation...
    let x = local_returns.read_bytes(returned);
    // ...was laid out in memory as these bytes, which are the protocol's LE word.
    u64::from_le_bytes(responder_stores.to_bytes(x))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A simulated NIC: executes the CAS on `mem` in `o.stores` order and
    /// returns the previous value in `o.returns` order.
    fn nic_cas(o: AtomicOrder, mem: &mut [u8; 8], compare: u64, swap: u64) -> [u8; 8] {
        let cur = o.stores.read_bytes(*mem);
        if cur == compare {
            *mem = o.stores.to_bytes(swap);
        }
        o.returns.to_bytes(cur)
    }

    fn all_orders() -> Vec<AtomicOrder> {
        let e = [Endian::Little, Endian::Big];
        e.iter()
            .flat_map(|&s| {
                e.iter().map(move |&r| AtomicOrder {
                    stores: s,
                    returns: r,
                })
            })
            .collect()
    }

    #[test]
    fn endian_round_trips_and_codes() {
        for e in [Endian::Little, Endian::Big] {
            assert_eq!(e.read_bytes(e.to_bytes(PROBE)), PROBE);
            assert_eq!(Endian::from_code(e.code()), Some(e));
        }
        assert_eq!(Endian::from_code(0), None);
        assert_eq!(Endian::Big.to_bytes(PROBE), [1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(Endian::Little.to_bytes(PROBE), [8, 7, 6, 5, 4, 3, 2, 1]);
    }

    #[test]
    fn the_probe_detects_every_device_kind() {
        for o in all_orders() {
            let mut mem = [0u8; 8];
            let first = nic_cas(o, &mut mem, 0, PROBE);
            let stored = mem;
            let second = nic_cas(o, &mut mem, PROBE, PROBE);
            assert_eq!(detect(first, stored, second), Ok(o), "{o:?}");
        }
    }

    #[test]
    fn normalised_cas_behaves_like_a_little_endian_cas_on_every_device() {
        for o in all_orders() {
            let mut mem = [0u8; 8];
            let v = 0x1122_3344_5566_7788u64;
            // Swap 0 -> v.
            let r = nic_cas(o, &mut mem, operand(0, o.stores), operand(v, o.stores));
            assert_eq!(previous(r, o.returns, o.stores), 0, "{o:?}");
            assert_eq!(mem, v.to_le_bytes(), "stored little-endian on {o:?}");
            // A failing CAS returns v and leaves it.
            let r = nic_cas(o, &mut mem, operand(5, o.stores), operand(9, o.stores));
            assert_eq!(previous(r, o.returns, o.stores), v, "{o:?}");
            assert_eq!(mem, v.to_le_bytes());
            // A word the CPU wrote little-endian compares equal.
            let w = 0xdead_beef_0000_0001u64;
            mem = w.to_le_bytes();
            let r = nic_cas(o, &mut mem, operand(w, o.stores), operand(1, o.stores));
            assert_eq!(previous(r, o.returns, o.stores), w);
            assert_eq!(mem, 1u64.to_le_bytes());
        }
    }

    #[test]
    fn mixed_devices_normalise_with_the_responders_order() {
        let requester = AtomicOrder {
            stores: Endian::Little,
            returns: Endian::Big,
        };
        let responder = AtomicOrder {
            stores: Endian::Big,
            returns: Endian::Little,
        };
        let mut mem = 7u64.to_le_bytes();
        let executed = AtomicOrder {
            stores: responder.stores,
            returns: requester.returns,
        };
        let r = nic_cas(
            executed,
            &mut mem,
            operand(7, responder.stores),
            operand(8, responder.stores),
        );
        assert_eq!(previous(r, requester.returns, responder.stores), 7);
        assert_eq!(mem, 8u64.to_le_bytes());
    }

    #[test]
    fn garbage_is_a_typed_error() {
        let good = Endian::Little.to_bytes(PROBE);
        assert!(matches!(
            detect([1; 8], good, good),
            Err(ByteOrderError::NotZero { .. })
        ));
        assert!(matches!(
            detect([0; 8], [9; 8], good),
            Err(ByteOrderError::Stored { .. })
        ));
        assert!(matches!(
            detect([0; 8], good, [0; 8]),
            Err(ByteOrderError::Returned { .. })
        ));
    }
}

//! Key-value extents: `key_len u32 | value_len u32 | key | value`, written
//! out of place into a meganode's extent heap and referenced by a leaf entry
//! whose [`ExtentPtr`] carries the CRC64 of the whole extent (Pilaf's
//! technique, §2.3, with the project's CRC-64/XZ from
//! `nessie_exec::mailbox::CRC64`). Extents have no fixed boundaries, so a
//! reader cannot tell a torn or reused extent by its framing: it recomputes
//! the CRC and compares it with the pointer's.

use nessie_exec::mailbox::CRC64;

use crate::ptr::{ExtentPtr, RegionId};

/// Bytes of an extent's length header.
pub const EXTENT_HEADER_BYTES: usize = 8;

/// The encoded extent of `key` = `value`.
pub fn encode(key: &[u8], value: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(EXTENT_HEADER_BYTES + key.len() + value.len());
    b.extend_from_slice(&(key.len() as u32).to_le_bytes());
    b.extend_from_slice(&(value.len() as u32).to_le_bytes());
    b.extend_from_slice(key);
    b.extend_from_slice(value);
    b
}

/// The CRC64 of an encoded extent.
pub fn crc(bytes: &[u8]) -> u64 {
    CRC64.checksum(bytes)
}

/// The pointer to `bytes` stored at `offset` of `region`'s heap.
pub fn pointer(region: RegionId, offset: u32, bytes: &[u8]) -> ExtentPtr {
    ExtentPtr {
        region,
        offset,
        len: bytes.len() as u32,
        crc: crc(bytes),
    }
}

/// Splits an encoded extent into key and value (no checksum check).
pub fn parse(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    let h = bytes.get(..EXTENT_HEADER_BYTES)?;
    let k = u32::from_le_bytes(h[0..4].try_into().ok()?) as usize;
    let v = u32::from_le_bytes(h[4..8].try_into().ok()?) as usize;
    let key = bytes.get(EXTENT_HEADER_BYTES..EXTENT_HEADER_BYTES + k)?;
    let value = bytes.get(EXTENT_HEADER_BYTES + k..EXTENT_HEADER_BYTES + k + v)?;
    Some((key, value))
}

/// What reading an extent through a leaf pointer found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExtentRead {
    /// The checksum matches (or was not checked) and the key is the one
    /// searched: the value.
    Value(Vec<u8>),
    /// The checksum does not match: torn, or reused since the leaf was read.
    Mismatch,
}

/// Checks an extent read through `ptr` for `key`: its CRC64 against the
/// pointer's (unless `skip_crc`, a test-only fault), then its key.
pub fn verify(bytes: &[u8], ptr: &ExtentPtr, key: &[u8], skip_crc: bool) -> ExtentRead {
    if !skip_crc && (bytes.len() != ptr.len as usize || crc(bytes) != ptr.crc) {
        return ExtentRead::Mismatch;
    }
    match parse(bytes) {
        Some((k, v)) if k == key => ExtentRead::Value(v.to_vec()),
        _ => ExtentRead::Mismatch,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_extent_verifies_and_any_torn_byte_is_caught() {
        let b = encode(b"key", b"value");
        let p = pointer(RegionId(2), 64, &b);
        assert_eq!(
            verify(&b, &p, b"key", false),
            ExtentRead::Value(b"value".to_vec())
        );
        assert_eq!(verify(&b, &p, b"kex", false), ExtentRead::Mismatch);
        for i in 0..b.len() {
            let mut t = b.clone();
            t[i] ^= 1;
            assert_eq!(
                verify(&t, &p, b"key", false),
                ExtentRead::Mismatch,
                "byte {i}"
            );
        }
        // Without the check a torn value byte goes through.
        let mut t = b.clone();
        t[12] ^= 1;
        assert!(matches!(verify(&t, &p, b"key", true), ExtentRead::Value(v) if v != b"value"));
    }
}

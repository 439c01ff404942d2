//! Values unique to each write, for recorded histories.
//!
//! A history checker can only tell which write a GET read if no two writes
//! stored the same bytes: with one shared value (every preloaded key holding
//! `vvvv...`, say), a GET that returns another key's entry looks right. Every
//! recorder of the project therefore writes [`unique_value`]s: the writer,
//! its sequence number and a fingerprint of the key, padded to the
//! configured size.
//!
//! The layout, for a value of `size` bytes:
//! - `<writer>.<seq>@<fingerprint>` (the fingerprint is the key's 32-bit
//!   FNV-1a hash in 8 hex digits) padded with `.` to `size`, when it fits;
//! - cut to `size` when only part of the fingerprint fits (the text up to
//!   and including `@` names the write alone);
//! - when not even `<writer>.<seq>@` fits: the writer and the sequence
//!   number as two LEB128 varints, padded with zero bytes (a prefix code, so
//!   still one value per write; never equal to a text value, whose bytes are
//!   all non-zero ASCII past the two one-byte varints an ASCII prefix would
//!   decode as);
//! - when not even that fits (a value of 1 or 2 bytes, or a huge writer or
//!   sequence number): the varints cut to `size`, and [`write_unique_value`]
//!   says the value is not unique.
//!
//! The value's size is always exactly `size`: sizes are configured (value
//! size sweeps, `max_value_len`), so only the contents say which write it is.

use std::fmt::Write as _;

/// The key's 32-bit FNV-1a hash.
fn fingerprint(key: &[u8]) -> u32 {
    key.iter().fold(0x811c_9dc5_u32, |h, &b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

fn leb128(out: &mut Vec<u8>, mut x: u64) {
    loop {
        let byte = (x & 0x7f) as u8;
        x >>= 7;
        if x == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// Writes write number `seq` of `writer` to `key` into `buf` (replacing its
/// contents): exactly `size` bytes, unique per (writer, seq) (module doc).
/// Returns whether it is: `false` only when `size` cannot hold even the
/// binary form of the two numbers (sizes of 1 or 2 bytes, or sequence
/// numbers too large for the size), when the value is cut and may repeat.
/// Reuses `buf`'s allocation, for workload loops that write a value per
/// operation.
pub fn write_unique_value(
    buf: &mut Vec<u8>,
    key: &[u8],
    writer: u64,
    seq: u64,
    size: usize,
) -> bool {
    buf.clear();
    let mut text = String::with_capacity(40);
    let _ = write!(text, "{writer}.{seq}@");
    if text.len() <= size {
        let _ = write!(text, "{:08x}", fingerprint(key));
        let n = text.len().min(size);
        buf.extend_from_slice(&text.as_bytes()[..n]);
        buf.resize(size, b'.');
        return true;
    }
    leb128(buf, writer);
    leb128(buf, seq);
    let unique = buf.len() <= size;
    buf.resize(size, 0);
    unique
}

/// Write number `seq` of `writer` to `key`: a value of exactly `size` bytes
/// that no other (writer, seq) gets ([`write_unique_value`]; for sizes of 3
/// bytes and more and any writer and sequence number a workload reaches).
pub fn unique_value(key: &[u8], writer: u64, seq: u64, size: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(size);
    write_unique_value(&mut v, key, writer, seq, size);
    v
}

/// The smallest value size a recorded workload should be configured with:
/// at 8 bytes every write of writers numbered below 2^14 with sequence
/// numbers below 2^42 gets a value of its own (the binary form), and larger
/// numbers are out of any run's reach. Configurations that record a
/// history refuse smaller values, naming this reason.
pub const MIN_RECORDED_VALUE_SIZE: usize = 8;

/// The smallest value size at which [`write_unique_value`] keeps every
/// write of `writers` writers of up to `writes` writes each unique: what a
/// workload's configuration can be checked against before it runs.
pub fn min_unique_size(writers: u64, writes: u64) -> usize {
    let mut v = Vec::new();
    leb128(&mut v, writers.saturating_sub(1));
    leb128(&mut v, writes.saturating_sub(1));
    v.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn values_keep_their_size_and_say_who_wrote_them() {
        let v = unique_value(b"key-1", 3, 17, 24);
        assert_eq!(v.len(), 24);
        assert!(v.starts_with(b"3.17@"), "{}", String::from_utf8_lossy(&v));
        assert!(v.ends_with(b"..."));
        // The same write, the same value; another key, another value.
        assert_eq!(v, unique_value(b"key-1", 3, 17, 24));
        assert_ne!(v, unique_value(b"key-2", 3, 17, 24));
        assert_eq!(unique_value(b"k", 0, 0, 0), Vec::<u8>::new());
    }

    #[test]
    fn every_write_gets_its_own_value_at_every_size_from_three_bytes() {
        for size in 3..=16 {
            let mut seen = HashSet::new();
            let mut buf = Vec::new();
            for writer in [0u64, 1, 9, 10, 99, 127, 128, 1000, 20_000] {
                for seq in (0..3000u64).chain([99_999, 1 << 20]) {
                    let unique = write_unique_value(&mut buf, b"k", writer, seq, size);
                    assert_eq!(buf.len(), size);
                    let fits = size >= min_unique_size(writer + 1, seq + 1);
                    if fits {
                        assert!(unique, "size {size} writer {writer} seq {seq}");
                    }
                    if unique {
                        assert!(
                            seen.insert(buf.clone()),
                            "size {size}: writer {writer} seq {seq} repeats {buf:?}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn the_recorded_minimum_holds_what_it_promises() {
        assert_eq!(min_unique_size(1 << 14, 1 << 42), MIN_RECORDED_VALUE_SIZE);
    }

    #[test]
    fn a_size_too_small_is_reported() {
        let mut buf = Vec::new();
        assert!(!write_unique_value(&mut buf, b"k", 200, 300, 2));
        assert_eq!(buf.len(), 2);
        assert_eq!(min_unique_size(1, 1), 2);
        assert_eq!(min_unique_size(200, 1 << 20), 5);
    }
}

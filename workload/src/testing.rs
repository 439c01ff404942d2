//! Test support: a small run the tests of this crate and of its users
//! (the node runners' tests in `nessie-cli`) vary.

use std::time::Duration;

use crate::spec::WorkloadSpec;

/// A small spec: 2 clients, 200 keys of 16 bytes, 32-byte values, 80 %
/// GETs and 5 % DELETEs for 200 ms, preloaded, seed 3.
pub fn spec() -> WorkloadSpec {
    WorkloadSpec {
        clients: 2,
        keys: 200,
        key_size: 16,
        value_size: 32,
        value_mix: crate::ValueMix::Fixed,
        get_pct: 80,
        delete_pct: 5,
        duration: Duration::from_millis(200),
        preload: true,
        seed: 3,
        max_ops: 0,
        think: Duration::ZERO,
        record: false,
        start_at: None,
        scan_pct: 0,
        scan_len: 0,
        ycsb: None,
    }
}

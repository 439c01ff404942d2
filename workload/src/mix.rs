//! Keys and the two [`Source`]s of a mixed-workload run: [`Preload`] (every
//! key PUT once, spread over the client threads) and [`Mix`] (GETs, PUTs,
//! DELETEs and, for an ordered store, range scans of uniformly drawn keys
//! in the spec's proportions). Every PUT, the preload's included, writes a
//! value of its own ([`nessie_check::unique_value`]: the writing thread's
//! history id, a sequence number and the key, at the spec's value size), so
//! that a recorded history names the write each read returned, and a read
//! of another key's entry shows.
//!
//! Keys are `key-<12 digits>` padded with `.` to the key size (the same keys
//! as `nessie bench`'s).

use nessie_check::write_unique_value;
use nessie_protocol::rng::xorshift64;
use nessie_protocol::KvRequest;

use super::driver::{Next, Source};
use super::spec::WorkloadSpec;

/// The bytes of key `i`.
pub fn key_of(i: u64, size: u32) -> Vec<u8> {
    let mut k = Vec::with_capacity(size as usize);
    write_key(&mut k, i, size);
    k
}

/// Writes the bytes of key `i` into `buf` (replacing its contents), so that
/// a client thread can reuse one buffer instead of allocating per operation.
pub fn write_key(buf: &mut Vec<u8>, i: u64, size: u32) {
    use std::io::Write as _;
    buf.clear();
    write!(buf, "key-{i:012}").expect("writing to a Vec cannot fail");
    buf.resize(size as usize, b'.');
}

/// PUTs of keys `first`, `first + step`, ... below the spec's key count,
/// key `i` with write number `i` of the thread (`writer`, its history id):
/// a value of its own.
pub struct Preload {
    next: u64,
    step: u64,
    keys: u64,
    key_size: u32,
    value_size: usize,
    writer: u64,
    key: Vec<u8>,
    value: Vec<u8>,
}

impl Preload {
    /// Client thread `first` of `step` threads preloading `spec`'s keys;
    /// `writer` names the thread in its values (its history id,
    /// `super::history_client`).
    pub fn new(spec: &WorkloadSpec, first: u64, step: u64, writer: u64) -> Preload {
        Preload {
            next: first,
            step: step.max(1),
            keys: u64::from(spec.keys),
            key_size: spec.key_size,
            value_size: spec.value_size as usize,
            writer,
            key: Vec::new(),
            value: Vec::new(),
        }
    }
}

impl Source for Preload {
    fn next(&mut self) -> Option<Next<'_>> {
        if self.next >= self.keys {
            return None;
        }
        write_key(&mut self.key, self.next, self.key_size);
        write_unique_value(
            &mut self.value,
            &self.key,
            self.writer,
            self.next,
            self.value_size,
        );
        self.next += self.step;
        Some(Next {
            op: KvRequest::Put(&self.key, &self.value),
            arrival: None,
        })
    }
}

/// The mixed workload of one client thread: a uniformly drawn key, then a
/// GET, DELETE, scan (of `scan_len` entries from the key on) or PUT by the
/// spec's percentages. A PUT's value is write number `keys + n` of the
/// thread (its operation number `n` past the preload's numbers, which are
/// key indexes) under the thread's history id: no two PUTs of a run, the
/// preload's included, write the same value.
pub struct Mix {
    rng: u64,
    keys: u64,
    key_size: u32,
    get_pct: u32,
    delete_pct: u32,
    scan_pct: u32,
    scan_len: usize,
    value_size: usize,
    writer: u64,
    n: u64,
    key: Vec<u8>,
    value: Vec<u8>,
}

impl Mix {
    /// The generator of client `client` of node `node` (each thread of a run
    /// draws its own sequence from `spec.seed`).
    pub fn new(spec: &WorkloadSpec, node: u16, client: u16) -> Mix {
        let stream = ((u64::from(node) << 16) | u64::from(client)) + 1;
        Mix {
            rng: (spec.seed ^ stream.wrapping_mul(0x9e37_79b9_7f4a_7c15)) | 1,
            keys: u64::from(spec.keys),
            key_size: spec.key_size,
            get_pct: spec.get_pct,
            delete_pct: spec.delete_pct,
            scan_pct: spec.scan_pct,
            scan_len: spec.scan_len as usize,
            value_size: spec.value_size as usize,
            writer: super::history::history_client(
                nessie_protocol::ClientId {
                    node: nessie_protocol::NodeId(node),
                    index: client,
                },
                0,
            ),
            n: 0,
            key: Vec::new(),
            value: Vec::new(),
        }
    }
}

impl Source for Mix {
    fn next(&mut self) -> Option<Next<'_>> {
        let k = xorshift64(&mut self.rng) % self.keys.max(1);
        write_key(&mut self.key, k, self.key_size);
        let dice = (xorshift64(&mut self.rng) % 100) as u32;
        let n = self.n;
        self.n += 1;
        let op = if dice < self.get_pct {
            KvRequest::Get(&self.key)
        } else if dice < self.get_pct + self.delete_pct {
            KvRequest::Delete(&self.key)
        } else if dice < self.get_pct + self.delete_pct + self.scan_pct {
            KvRequest::Scan {
                from: &self.key,
                to: None,
                limit: self.scan_len,
            }
        } else {
            write_unique_value(
                &mut self.value,
                &self.key,
                self.writer,
                self.keys + n,
                self.value_size,
            );
            KvRequest::Put(&self.key, &self.value)
        };
        Some(Next { op, arrival: None })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::spec;

    fn drain(s: &mut dyn Source, n: usize) -> Vec<String> {
        (0..n)
            .map_while(|_| {
                s.next().map(|x| match x.op {
                    KvRequest::Get(k) => format!("get {}", String::from_utf8_lossy(k)),
                    KvRequest::Delete(k) => format!("delete {}", String::from_utf8_lossy(k)),
                    KvRequest::Put(k, v) => format!(
                        "put {} {}",
                        String::from_utf8_lossy(k),
                        String::from_utf8_lossy(v)
                    ),
                    KvRequest::Scan { limit, .. } => format!("scan {limit}"),
                })
            })
            .collect()
    }

    #[test]
    fn keys_are_padded_names() {
        assert_eq!(key_of(42, 20), b"key-000000000042....".to_vec());
        assert_eq!(key_of(42, 8), b"key-0000".to_vec());
    }

    #[test]
    fn the_preload_spreads_every_key_over_the_threads_once() {
        let s = WorkloadSpec { keys: 10, ..spec() };
        let mut all: Vec<String> = (0..3)
            .flat_map(|t| drain(&mut Preload::new(&s, t, 3, t), 100))
            .collect();
        all.sort();
        let mut want: Vec<String> = (0..10)
            .map(|k| {
                let key = key_of(k, 16);
                format!(
                    "put {} {}",
                    String::from_utf8_lossy(&key),
                    String::from_utf8_lossy(&nessie_check::unique_value(&key, k % 3, k, 32))
                )
            })
            .collect();
        want.sort();
        assert_eq!(all, want);
        // Every key a value of its own, at the spec's size.
        let mut values: Vec<&str> = all.iter().map(|p| p.split(' ').nth(2).unwrap()).collect();
        assert!(values.iter().all(|v| v.len() == 32));
        values.sort_unstable();
        values.dedup();
        assert_eq!(values.len(), 10);
    }

    #[test]
    fn the_mix_keeps_its_proportions_and_puts_unique_values() {
        let s = WorkloadSpec {
            get_pct: 60,
            delete_pct: 10,
            ..spec()
        };
        let scans = WorkloadSpec {
            get_pct: 50,
            delete_pct: 10,
            scan_pct: 20,
            scan_len: 7,
            ..spec()
        };
        let with_scans = drain(&mut Mix::new(&scans, 0, 0), 4000);
        let share = with_scans.iter().filter(|o| *o == "scan 7").count() as f64 / 4000.0;
        assert!((share - 0.2).abs() < 0.03, "{share}");
        let ops: Vec<String> = [(0, 0), (0, 1), (1, 0)]
            .iter()
            .flat_map(|&(node, client)| drain(&mut Mix::new(&s, node, client), 4000))
            .collect();
        let count = |p: &str| ops.iter().filter(|o| o.starts_with(p)).count() as f64;
        let n = ops.len() as f64;
        assert!(
            (count("get") / n - 0.6).abs() < 0.03,
            "{}",
            count("get") / n
        );
        assert!((count("delete") / n - 0.1).abs() < 0.02);
        assert!((count("put") / n - 0.3).abs() < 0.03);
        // Every PUT its own value, the preload's of the same threads too.
        let preload: Vec<String> = [(0, 0), (0, 1), (1, 0)]
            .iter()
            .enumerate()
            .flat_map(|(t, &(node, client))| {
                let writer = crate::history_client(
                    nessie_protocol::ClientId {
                        node: nessie_protocol::NodeId(node),
                        index: client,
                    },
                    0,
                );
                drain(&mut Preload::new(&s, t as u64, 3, writer), 1000)
            })
            .collect();
        let mut values: Vec<&str> = ops
            .iter()
            .chain(&preload)
            .filter_map(|o| o.strip_prefix("put "))
            .map(|o| o.split(' ').nth(1).unwrap())
            .collect();
        let puts = values.len();
        values.sort_unstable();
        values.dedup();
        assert_eq!(values.len(), puts, "every PUT writes its own value");
        // Each thread draws its own sequence; one thread its sequence again.
        let a = drain(&mut Mix::new(&s, 0, 0), 50);
        assert_eq!(a, drain(&mut Mix::new(&s, 0, 0), 50));
        assert_ne!(a, drain(&mut Mix::new(&s, 0, 1), 50));
        assert_ne!(a, drain(&mut Mix::new(&s, 1, 0), 50));
    }
}

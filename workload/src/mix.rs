//! Keys and the two [`Source`]s of a mixed-workload run: [`Preload`] (every
//! key PUT once, spread over the client threads) and [`Mix`] (GETs, PUTs,
//! DELETEs and, for an ordered store, range scans of uniformly drawn keys
//! in the spec's proportions, or one of YCSB's core workloads:
//! [`crate::ycsb`]). Every PUT, the preload's included, writes a
//! value of its own ([`nessie_check::unique_value`]: the writing thread's
//! history id, a sequence number and the key, at a size drawn from the
//! spec's value sizes for that write number: [`crate::value_mix`]), so that a
//! recorded history names the write each read returned, and a read of
//! another key's entry shows.
//!
//! Keys are `key-<12 digits>` padded with `.` to the key size (the same keys
//! as `nessie bench`'s).

use nessie_check::write_unique_value;
use nessie_protocol::rng::{unit, xorshift64};
use nessie_protocol::KvRequest;

use super::driver::{Next, Source};
use super::spec::WorkloadSpec;
use super::value_mix::ValueDraw;
use super::ycsb::{YcsbDraw, YcsbGen};

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
    sizes: ValueDraw,
    writer: u64,
    key: Vec<u8>,
    value: Vec<u8>,
}

/// How a thread of `spec` sizes its values: the spec's mix and largest
/// size, at least 8 B when recorded (each value a write of its own), drawn
/// from the spec's seed and the thread's history id `writer`.
fn value_draw(spec: &WorkloadSpec, writer: u64) -> ValueDraw {
    let min = if spec.record {
        nessie_check::MIN_RECORDED_VALUE_SIZE as u32
    } else {
        1
    };
    ValueDraw {
        mix: spec.value_mix,
        max: spec.value_size,
        min,
        seed: spec.seed ^ writer.wrapping_mul(0xd6e8_feb8_6659_fd93),
    }
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
            sizes: value_draw(spec, writer),
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
            self.sizes.size(self.next),
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
    ycsb: Option<YcsbGen>,
    rng: u64,
    keys: u64,
    key_size: u32,
    get_pct: u32,
    delete_pct: u32,
    scan_pct: u32,
    scan_len: usize,
    sizes: ValueDraw,
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
        let writer = super::history::history_client(
            nessie_protocol::ClientId {
                node: nessie_protocol::NodeId(node),
                index: client,
            },
            0,
        );
        Mix {
            ycsb: spec.ycsb.map(|w| {
                // Node and client numbers below 1,024 keep every key number
                // below the key format's 10^12.
                let owner = (u64::from(node) % 1024) * 1024 + u64::from(client) % 1024;
                YcsbGen::new(w, u64::from(spec.keys), owner, spec.scan_len)
            }),
            rng: (spec.seed ^ stream.wrapping_mul(0x9e37_79b9_7f4a_7c15)) | 1,
            keys: u64::from(spec.keys),
            key_size: spec.key_size,
            get_pct: spec.get_pct,
            delete_pct: spec.delete_pct,
            scan_pct: spec.scan_pct,
            scan_len: spec.scan_len as usize,
            sizes: value_draw(spec, writer),
            writer,
            n: 0,
            key: Vec::new(),
            value: Vec::new(),
        }
    }
}

/// What a [`Mix`] drew for its next operation, before its key's bytes and
/// its value.
enum MixDraw {
    Get,
    Delete,
    Scan(usize),
    Put,
}

impl Source for Mix {
    fn next(&mut self) -> Option<Next<'_>> {
        let n = self.n;
        self.n += 1;
        let (draw, k) = match self.ycsb.as_mut() {
            Some(y) => {
                let rng = &mut self.rng;
                match y.next(&mut || unit(xorshift64(rng))) {
                    YcsbDraw::Read(k) => (MixDraw::Get, k),
                    YcsbDraw::Write(k) => (MixDraw::Put, k),
                    YcsbDraw::Scan(k, len) => (MixDraw::Scan(len as usize), k),
                }
            }
            None => {
                let k = xorshift64(&mut self.rng) % self.keys.max(1);
                let dice = (xorshift64(&mut self.rng) % 100) as u32;
                let draw = if dice < self.get_pct {
                    MixDraw::Get
                } else if dice < self.get_pct + self.delete_pct {
                    MixDraw::Delete
                } else if dice < self.get_pct + self.delete_pct + self.scan_pct {
                    MixDraw::Scan(self.scan_len)
                } else {
                    MixDraw::Put
                };
                (draw, k)
            }
        };
        write_key(&mut self.key, k, self.key_size);
        let op = match draw {
            MixDraw::Get => KvRequest::Get(&self.key),
            MixDraw::Delete => KvRequest::Delete(&self.key),
            MixDraw::Scan(limit) => KvRequest::Scan {
                from: &self.key,
                to: None,
                limit,
            },
            MixDraw::Put => {
                write_unique_value(
                    &mut self.value,
                    &self.key,
                    self.writer,
                    self.keys + n,
                    self.sizes.size(self.keys + n),
                );
                KvRequest::Put(&self.key, &self.value)
            }
        };
        Some(Next { op, arrival: None })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::spec;
    use crate::Ycsb;

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

    fn ycsb(w: Ycsb) -> WorkloadSpec {
        WorkloadSpec {
            keys: 1000,
            ycsb: Some(w),
            scan_len: 20,
            ..spec()
        }
    }

    #[test]
    fn ycsb_a_updates_half_the_time_and_its_keys_are_zipfian() {
        let ops = drain(&mut Mix::new(&ycsb(Ycsb::A), 0, 0), 20_000);
        let gets = ops.iter().filter(|o| o.starts_with("get")).count() as f64;
        assert!((gets / 20_000.0 - 0.5).abs() < 0.02, "{gets}");
        // The hottest key takes YCSB's Zipfian share (about 1/zeta: 3.8 %
        // of 10^10 ranks scattered over 1,000 keys, more with collisions),
        // not a uniform 0.1 %.
        let mut counts = std::collections::HashMap::new();
        for o in &ops {
            *counts.entry(o.split(' ').nth(1).unwrap()).or_insert(0) += 1;
        }
        let hottest = *counts.values().max().unwrap() as f64 / 20_000.0;
        assert!(hottest > 0.03, "{hottest}");
    }

    #[test]
    fn ycsb_d_inserts_fresh_keys_and_reads_the_latest_most() {
        let s = ycsb(Ycsb::D);
        let ops = drain(&mut Mix::new(&s, 1, 2), 20_000);
        let inserts: Vec<&String> = ops.iter().filter(|o| o.starts_with("put")).collect();
        let share = inserts.len() as f64 / 20_000.0;
        assert!((share - 0.05).abs() < 0.01, "{share}");
        // Every insert a key of its own, above the preloaded ones.
        let mut keys: Vec<&str> = inserts
            .iter()
            .map(|o| o.split(' ').nth(1).unwrap())
            .collect();
        assert!(keys.iter().all(|k| *k > "key-000000000999"));
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), inserts.len());
        // Another client's inserts are other keys.
        let other: Vec<String> = drain(&mut Mix::new(&s, 1, 3), 2_000)
            .into_iter()
            .filter(|o| o.starts_with("put"))
            .collect();
        assert!(other
            .iter()
            .all(|o| !keys.contains(&o.split(' ').nth(1).unwrap())));
        // Reads favour what was inserted last: in the second half, most
        // reads are of this client's inserts, not of the preloaded keys.
        let late_reads: Vec<&String> = ops[10_000..]
            .iter()
            .filter(|o| o.starts_with("get"))
            .collect();
        let of_inserts = late_reads
            .iter()
            .filter(|o| keys.contains(&o.split(' ').nth(1).unwrap()))
            .count() as f64;
        assert!(of_inserts / late_reads.len() as f64 > 0.5, "{of_inserts}");
    }

    #[test]
    fn ycsb_f_writes_back_every_key_it_read_for_a_read_modify_write() {
        let ops = drain(&mut Mix::new(&ycsb(Ycsb::F), 0, 0), 20_000);
        let puts = ops.iter().filter(|o| o.starts_with("put")).count() as f64;
        // Half the operations are read-modify-writes, two each.
        assert!((puts / 20_000.0 - 1.0 / 3.0).abs() < 0.02, "{puts}");
        for (i, o) in ops.iter().enumerate().skip(1) {
            if let Some(rest) = o.strip_prefix("put ") {
                let key = rest.split(' ').next().unwrap();
                assert_eq!(ops[i - 1], format!("get {key}"), "at {i}");
            }
        }
    }

    #[test]
    fn ycsb_e_scans_one_to_scan_len_entries() {
        let ops = drain(&mut Mix::new(&ycsb(Ycsb::E), 0, 0), 5_000);
        let lens: Vec<usize> = ops
            .iter()
            .filter_map(|o| o.strip_prefix("scan "))
            .map(|l| l.parse().unwrap())
            .collect();
        assert!((lens.len() as f64 / 5_000.0 - 0.95).abs() < 0.02);
        assert!(lens.iter().all(|l| (1..=20).contains(l)));
        assert!(lens.contains(&1) && lens.contains(&20));
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

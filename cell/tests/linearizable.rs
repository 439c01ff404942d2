//! Concurrent clients in every search mode on hot keys, with range scans,
//! while filler inserts split nodes and meganodes underneath them: the
//! recorded history is linearizable, by the project's per-key checker (point
//! operations) and by Cell's range-aware checker (everything).

mod common;

use std::sync::Arc;
use std::thread;

use common::*;
use nessie_cell::check::{check, Call, History, Ret};
use nessie_cell::SearchMode;
use nessie_model::{check_history, Event as KvEvent, KvOp, KvRet};

/// Islands of hot keys: key `island * 40 + j`, j < 6; scans stay inside one.
const ISLANDS: u64 = 10;
const PER_ISLAND: u64 = 6;

fn hot(island: u64, j: u64) -> Vec<u8> {
    key(island * 40 + j)
}

fn run(ops: usize, seed: u64, workers: u16) -> (usize, nessie_cell::TreeShape) {
    let mut cfg = tiny();
    cfg.clients_per_node = 3;
    cfg.server_workers = workers;
    let d = Arc::new(start(cfg));
    let h = Arc::new(History::new());
    let modes = [
        SearchMode::ServerOnly,
        SearchMode::ClientOnly,
        SearchMode::Selector,
    ];
    let mut threads = Vec::new();
    for n in 0..3u16 {
        for i in 0..2u16 {
            let me = (n * 2 + i) as usize;
            let mut c = client(&d, n, i, modes[me % 3]);
            let h = h.clone();
            threads.push(thread::spawn(move || {
                let mut s = seed ^ (me as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
                for op in 0..ops {
                    let isl = xorshift(&mut s) % ISLANDS;
                    let k = hot(isl, xorshift(&mut s) % PER_ISLAND);
                    match xorshift(&mut s) % 20 {
                        0..=6 => h.record(me, Call::Get(k.clone()), || {
                            let r = c.get(&k);
                            (r.as_ref().ok().map(|v| Ret::Get(v.clone())), r.map(|_| ()))
                        }),
                        7..=11 => {
                            let v = format!("v{me}-{op}").into_bytes();
                            h.record(me, Call::Put(k.clone(), v.clone()), || {
                                let r = c.put(&k, &v);
                                (r.as_ref().ok().map(|e| Ret::Put(*e)), r.map(|_| ()))
                            })
                        }
                        12..=14 => h.record(me, Call::Delete(k.clone()), || {
                            let r = c.delete(&k);
                            (r.as_ref().ok().map(|e| Ret::Delete(*e)), r.map(|_| ()))
                        }),
                        _ => {
                            let to = hot(isl, PER_ISLAND);
                            let limit = 1 + (xorshift(&mut s) % 6) as usize;
                            let call = Call::Scan {
                                from: k.clone(),
                                to: Some(to.clone()),
                                limit,
                            };
                            h.record(me, call, || {
                                let r = c.scan(&k, Some(&to), limit);
                                (r.as_ref().ok().map(|v| Ret::Scan(v.clone())), r.map(|_| ()))
                            })
                        }
                    }
                    .unwrap_or_else(|e| panic!("client {me} op {op}: {e}"));
                }
            }));
        }
        // Filler: inserts between the islands, splitting nodes and meganodes.
        let mut c = client(&d, n, 2, modes[n as usize]);
        let h = h.clone();
        threads.push(thread::spawn(move || {
            for f in 0..(ops as u64 / 2) {
                let isl = (f * 7 + u64::from(n)) % ISLANDS;
                let k = key(isl * 40 + PER_ISLAND + 1 + (f / ISLANDS) * 3 + u64::from(n));
                let me = 100 + n as usize;
                h.record(me, Call::Put(k.clone(), b"fill".to_vec()), || {
                    let r = c.put(&k, b"fill");
                    (r.as_ref().ok().map(|e| Ret::Put(*e)), r.map(|_| ()))
                })
                .unwrap_or_else(|e| panic!("filler {n}: {e}"));
            }
        }));
    }
    for t in threads {
        t.join().expect("client thread");
    }
    assert!(d.server_errors().is_empty(), "{:?}", d.server_errors());
    let events = h.events();
    // The per-key checker on the point operations.
    let kv: Vec<KvEvent> = events
        .iter()
        .filter_map(|e| {
            let (key, op, ret) = match (&e.call, &e.ret) {
                (Call::Get(k), Ret::Get(v)) => (k, KvOp::Get, KvRet::Get(v.clone())),
                (Call::Put(k, v), Ret::Put(x)) => (k, KvOp::Put(v.clone()), KvRet::Put(*x)),
                (Call::Delete(k), Ret::Delete(x)) => (k, KvOp::Delete, KvRet::Delete(*x)),
                (Call::Put(k, v), Ret::Unknown) => (k, KvOp::Put(v.clone()), KvRet::Unknown),
                (Call::Delete(k), Ret::Unknown) => (k, KvOp::Delete, KvRet::Unknown),
                _ => return None,
            };
            Some(KvEvent {
                client: e.client,
                key: key.clone(),
                op,
                ret,
                invoke: e.invoke,
                response: e.response,
            })
        })
        .collect();
    if let Err(v) = check_history(&kv, 50_000_000) {
        panic!("per-key checker: {v}");
    }
    let n = match check(&events, 50_000_000) {
        Ok(n) => n,
        Err(v) => panic!("range-aware checker: {v}"),
    };
    (n, d.shape())
}

fn seed() -> u64 {
    std::env::var("CELL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0xce11)
}

#[test]
fn concurrent_gets_puts_deletes_and_scans_across_splits_are_linearizable() {
    let (n, shape) = run(250, seed(), 1);
    assert!(n >= 6 * 250, "{n}");
    // The history ran across node and meganode splits.
    assert!(
        shape.meganode_splits >= 2 && shape.node_splits >= 10,
        "{shape:?}"
    );
}

#[test]
fn with_several_workers_per_server_too() {
    // Two workers per node write into one meganode at once: the server's
    // node locks, not one thread, keep them apart (and node 0 changes level
    // under a writer that read it as a leaf).
    let (n, shape) = run(250, seed() ^ 0x77, 2);
    assert!(n >= 6 * 250, "{n}");
    assert!(
        shape.meganode_splits >= 2 && shape.node_splits >= 10,
        "{shape:?}"
    );
}

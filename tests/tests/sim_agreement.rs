//! The simulator and the real-thread fabric agree exactly on what each GET
//! and PUT costs: the same workload, replayed operation by operation on
//! `fabric-sim` (the NIC the threaded benchmarks use) by the same clients on
//! a manual clock set to each operation's simulated start, issues the same
//! index and data READs, WRITEs, CASes, bytes and round trips, and returns
//! the same results.
//!
//! The same holds for NessieSD, NessieHY and Pilaf: the same sans-IO client
//! and server machines, the simulator's in virtual time, the replay's on a
//! threaded deployment (server worker threads) over `fabric-sim` with a
//! manual clock, agree on every uncontended GET's and PUT's fabric work (the
//! request WRITE and the response the server WRITEs back, a NessieHY or
//! Pilaf GET's READs, bytes, round trips, attempts) and result.
//!
//! Operations whose cost depended on the interleaving are left out of the
//! per-operation comparison (a sequential replay does not reproduce it):
//! those that overlapped in time another operation on a key sharing a
//! candidate index slot (the same key included: a scan may meet the other's
//! entry in progress, a reverse pass its change), those the simulation
//! retried, and every later operation on a key with a candidate slot such a
//! pair shared (the replay may have ordered the pair differently, leaving
//! another client's entry current or the key in another slot). Every
//! operation is still replayed, and the test asserts the left-out ones are
//! few.

use std::time::Duration;

use nessie_baselines::{Deployment, HyOptions, KvSystem, SystemConfig};
use nessie_check::{Event, Ret};
use nessie_fabric_sim::{ClockMode, SimConfig, SimFabric};
use nessie_protocol::KvClient;
use nessie_protocol::{ClientId, NodeId, OpStats};
use nessie_sim::{config, simulate, stamp_ns, SimReport, SimSpec, Tuning};
use nessie_systems::SystemKind;
use nessie_tests::SimCluster;

/// The counters the papers compare designs by.
fn fabric(s: &OpStats) -> [u64; 8] {
    [
        s.index_reads,
        s.data_reads,
        s.writes,
        s.index_cas,
        s.data_cas,
        s.fabric_bytes,
        s.round_trips,
        s.attempts,
    ]
}

fn agree(spec: SimSpec) {
    let report = simulate(&spec).unwrap();
    let cfg = config(&spec).unwrap();
    let cluster = SimCluster::manual_clock(cfg.clone());
    let mut clients = Vec::new();
    for n in 0..spec.nodes {
        for i in 0..spec.clients_per_node {
            clients.push(cluster.client(n, i));
        }
    }
    let start = cluster.fabric.base_now().0;
    let hasher = cfg.hasher();
    let slots: Vec<Vec<(u16, u32)>> = report
        .history
        .iter()
        .map(|e| {
            hasher
                .candidates(e.key())
                .into_iter()
                .map(|a| (a.node.0, a.slot))
                .collect()
        })
        .collect();
    let rules = Rules {
        min_compared: 500,
        max_left_out: 20,
    };
    let [sim_get, real_get, sim_put, real_put] = compare(&report, start, &slots, rules, |_, e| {
        // Preloaded keys (recorded before the workload's first stamp) are
        // written first, at the manual clock's start; the workload at its
        // simulated times.
        if stamp_ns(e.invoke) > start {
            let now = cluster.fabric.base_now().0;
            cluster
                .fabric
                .advance(Duration::from_nanos(stamp_ns(e.invoke).saturating_sub(now)));
        }
        run(&mut clients[e.client], e)
    });
    assert_eq!(fabric(&sim_get), fabric(&real_get));
    assert_eq!(fabric(&sim_put), fabric(&real_put));
    // The workload really exercised remote reads, CASes and writes.
    assert!(
        sim_get.data_reads > 0 && sim_put.index_cas > 0 && sim_put.data_cas + sim_put.writes > 0
    );
}

fn spec(seed: u64) -> SimSpec {
    SimSpec {
        nodes: 3,
        clients_per_node: 2,
        keys: 3_000,
        key_size: 16,
        value_size: 256,
        get_pct: 50,
        seconds: 0.004,
        seed,
        record_history: true,
        ..SimSpec::default()
    }
}

#[test]
fn the_simulator_and_the_threaded_fabric_agree_on_every_operations_cost() {
    agree(spec(1));
}

#[test]
fn they_agree_without_the_cache_with_filters_and_sequential_candidate_reads() {
    agree(SimSpec {
        tuning: Tuning {
            cache_capacity: Some(0),
            filter_bits: Some(8),
            multiple_reads: Some(false),
            ..Tuning::default()
        },
        ..spec(2)
    });
}

#[test]
fn they_agree_on_deletes_and_inserts() {
    agree(SimSpec {
        delete_pct: 20,
        preload_pct: 50,
        ..spec(3)
    });
}

/// What a replayed operation's comparison needs: its result and the
/// client's fabric work of the call.
type Replayed = (Ret, OpStats);

/// Runs history event `e`'s operation on client `c`.
fn run(c: &mut dyn KvClient, e: &Event) -> Replayed {
    let ret = c.call(e.request.borrowed()).unwrap();
    (Ok(ret), c.last_stats())
}

/// How much a comparison must cover: at least `min_compared` operations
/// after time zero, and at most one in `max_left_out` left out.
#[derive(Clone, Copy)]
struct Rules {
    min_compared: usize,
    max_left_out: usize,
}

/// Compares a simulated history with its replay, operation by operation,
/// leaving out those whose cost depended on the interleaving (operations
/// overlapping another on a key that shares a candidate with it, retried
/// ones, and later ones on such a candidate). `slots` names each
/// operation's candidates; `replay` runs operation `i` at its simulated
/// start. Returns the GET and PUT totals (simulated, real).
fn compare(
    report: &SimReport,
    start: u64,
    slots: &[Vec<(u16, u32)>],
    rules: Rules,
    mut replay: impl FnMut(usize, &Event) -> Replayed,
) -> [OpStats; 4] {
    let history = &report.history;
    assert_eq!(history.len(), report.history_stats.len());
    let contend = |i: usize, j: usize| slots[i].iter().any(|a| slots[j].contains(a));
    let mut tainted = std::collections::HashSet::new();
    let (mut compared, mut overlapping, mut workload) = (0usize, 0usize, 0usize);
    let mut totals = [OpStats::default(); 4];
    for (i, e) in history.iter().enumerate() {
        let (ret, real) = replay(i, e);
        let sim = report.history_stats[i];
        let rivals: Vec<usize> = (0..history.len())
            .filter(|&j| {
                let o = &history[j];
                j != i && o.invoke < e.response && e.invoke < o.response && contend(i, j)
            })
            .collect();
        let left_out =
            sim.attempts > 1 || !rivals.is_empty() || slots[i].iter().any(|a| tainted.contains(a));
        for j in rivals
            .into_iter()
            .chain([i])
            .filter(|_| sim.attempts > 1 || left_out)
        {
            tainted.extend(slots[j].iter().copied());
        }
        if left_out {
            overlapping += 1;
            continue;
        }
        compared += 1;
        workload += usize::from(stamp_ns(e.invoke) > start);
        assert_eq!(ret, e.ret, "operation {i} ({e:?}) returned differently");
        let all = |s: &OpStats| {
            let mut f = fabric(s).to_vec();
            f.extend([
                s.server_writes,
                s.local_reads,
                s.local_writes,
                s.local_bytes,
            ]);
            f
        };
        assert_eq!(
            all(&real),
            all(&sim),
            "operation {i} ({:?} by client {} on {:?}): real {real:?} vs simulated {sim:?}",
            e.request,
            e.client,
            String::from_utf8_lossy(e.key())
        );
        let k = usize::from(e.request.is_write()) * 2;
        totals[k] += sim;
        totals[k + 1] += real;
    }
    eprintln!(
        "{compared} operations compared ({workload} after time zero), {overlapping} left out"
    );
    assert!(workload > rules.min_compared, "{workload} compared");
    assert!(
        overlapping * rules.max_left_out < compared,
        "{overlapping} overlapping of {compared}"
    );
    totals
}

/// Simulates a baseline's workload and replays it on a threaded deployment
/// over fabric-sim with a manual clock set to each operation's simulated
/// start.
fn agree_baseline(spec: SimSpec) {
    let report = simulate(&spec).unwrap();
    assert!(
        report.server_errors.is_empty(),
        "{:?}",
        report.server_errors
    );
    let cfg = config(&spec).unwrap();
    let kind = spec.system.kv().expect("a baseline");
    let sys = SystemConfig {
        hy: spec.hy,
        server_workers: spec.server_workers,
        ..SystemConfig::new(kind, cfg.clone())
    };
    let sim = SimConfig::from_topology(sys.topology()).with_clock(ClockMode::Manual);
    let d = Deployment::start(sys.clone(), SimFabric::new(sim).unwrap()).unwrap();
    let mut clients: Vec<Box<dyn KvClient>> = Vec::new();
    for n in 0..spec.nodes {
        for i in 0..cfg.clients_per_node {
            clients.push(
                d.client(ClientId {
                    node: NodeId(n),
                    index: i,
                })
                .unwrap(),
            );
        }
    }
    let start = d.fabric().base_now().0;
    // A key's candidates: its home node's entries.
    let slots: Vec<Vec<(u16, u32)>> = report
        .history
        .iter()
        .map(|e| {
            let (home, cands) = match kind {
                KvSystem::Pilaf => {
                    let l = nessie_baselines::pilaf::PilafLayout::new(&cfg);
                    (l.home(e.key()), l.candidates(e.key()))
                }
                _ => {
                    let l = sys.coupled();
                    (l.home(e.key()), l.candidates(e.key()))
                }
            };
            cands.into_iter().map(|s| (home.0, s)).collect()
        })
        .collect();
    let rules = Rules {
        min_compared: 2_000,
        max_left_out: 20,
    };
    let totals = compare(&report, start, &slots, rules, |_, e| {
        let now = d.fabric().base_now().0;
        d.fabric()
            .advance(Duration::from_nanos(stamp_ns(e.invoke).saturating_sub(now)));
        run(clients[e.client].as_mut(), e)
    });
    let [sim_get, real_get, sim_put, real_put] = totals;
    assert_eq!(fabric(&sim_get), fabric(&real_get));
    assert_eq!(fabric(&sim_put), fabric(&real_put));
    // Remote requests and responses, and for the client-driven GETs, READs.
    assert!(
        sim_put.writes > 0 && sim_put.server_writes > 0,
        "{sim_put:?}"
    );
    if spec.system != SystemKind::NessieSd {
        assert!(
            sim_get.index_reads > 0 && sim_get.data_reads > 0,
            "{sim_get:?}"
        );
    }
}

fn baseline_spec(system: SystemKind, seed: u64) -> SimSpec {
    SimSpec {
        system,
        nodes: 3,
        clients_per_node: 2,
        keys: 1_500,
        key_size: 16,
        value_size: 256,
        get_pct: 50,
        seconds: 0.004,
        delete_pct: 10,
        preload_pct: 80,
        // Sparse tables: a candidate entry that two overlapping operations
        // shared taints few keys.
        load_factor: 0.1,
        seed,
        record_history: true,
        ..SimSpec::default()
    }
}

#[test]
fn nessie_sd_the_simulator_and_the_threaded_fabric_agree_on_every_operations_cost() {
    agree_baseline(baseline_spec(SystemKind::NessieSd, 4));
}

#[test]
fn nessie_hy_the_simulator_and_the_threaded_fabric_agree_with_and_without_its_optimisations() {
    agree_baseline(baseline_spec(SystemKind::NessieHy, 5));
    agree_baseline(SimSpec {
        hy: HyOptions {
            filter_bits: true,
            cache: false,
            multiple_reads: true,
        },
        ..baseline_spec(SystemKind::NessieHy, 6)
    });
}

#[test]
fn pilaf_the_simulator_and_the_threaded_fabric_agree_on_every_operations_cost() {
    agree_baseline(baseline_spec(SystemKind::Pilaf, 7));
}

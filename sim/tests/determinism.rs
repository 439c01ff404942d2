//! The simulator is a function of its specification: the same seed gives
//! the same run event for event, another seed another run; and its figures
//! follow the hardware (a faster profile, lower latencies).

use std::time::Duration;

use nessie_check::time_limit;
use nessie_protocol::Faults;
use nessie_sim::{simulate, SimSpec, MODERN, TPDS};

fn spec(seed: u64) -> SimSpec {
    SimSpec {
        profile: TPDS,
        nodes: 3,
        clients_per_node: 3,
        keys: 500,
        key_size: 16,
        value_size: 1024,
        get_pct: 50,
        seconds: 0.01,
        load_factor: 0.5,
        seed,
        ..SimSpec::default()
    }
}

#[test]
fn the_same_seed_replays_exactly() {
    let _limit = time_limit("the_same_seed_replays_exactly", 7, Duration::from_secs(60));
    let a = simulate(&spec(7)).unwrap();
    let b = simulate(&spec(7)).unwrap();
    assert!(a.ops > 1_000, "{a:?}");
    assert_eq!(a.failures, 0, "{a:?}");
    assert_eq!(a.fingerprint(), b.fingerprint());
    let c = simulate(&spec(8)).unwrap();
    assert_ne!(a.fingerprint(), c.fingerprint());
}

/// The operations each client of a run drew, in its order: kind, key and
/// value.
fn drawn(seed: u64, paired: bool) -> Vec<String> {
    let spec = SimSpec {
        seconds: 0.001,
        record_history: true,
        paired_workload_seeds: paired,
        ..spec(seed)
    };
    let mut history = simulate(&spec).unwrap().history;
    history.sort_by_key(|e| (e.client, e.invoke));
    history
        .iter()
        .map(|e| format!("{} {:?}", e.client, e.request))
        .collect()
}

/// Neighbouring seeds draw different workloads. Until 2026-11-30 each
/// client's generator was seeded with `(seed ^ k C) | 1`, so seeds 2j and
/// 2j + 1 drew the same operations for every client (half the swarm's
/// cases repeated a workload); that seeding, kept only to replay cases
/// printed before (`SimSpec::paired_workload_seeds`), shows the check
/// can fail.
#[test]
fn neighbouring_seeds_draw_different_workloads() {
    for j in [1, 2, 50] {
        let (even, odd) = (drawn(2 * j, false), drawn(2 * j + 1, false));
        assert!(even.len() > 100, "{}", even.len());
        assert_ne!(even, odd, "seeds {} and {}", 2 * j, 2 * j + 1);
        assert_eq!(
            drawn(2 * j, true),
            drawn(2 * j + 1, true),
            "the old seeding: seeds {} and {} drew the same",
            2 * j,
            2 * j + 1
        );
    }
}

#[test]
fn a_faster_fabric_gives_lower_latencies_and_more_operations() {
    let _limit = time_limit(
        "a_faster_fabric_gives_lower_latencies_and_more_operations",
        1,
        Duration::from_secs(60),
    );
    let tpds = simulate(&spec(1)).unwrap();
    let modern = simulate(&SimSpec {
        profile: MODERN,
        ..spec(1)
    })
    .unwrap();
    assert!(
        modern.get_avg_us < tpds.get_avg_us,
        "{modern:?} vs {tpds:?}"
    );
    assert!(modern.ops > tpds.ops, "{modern:?} vs {tpds:?}");
    // A quiet GET costs about one or two round trips, a PUT about three.
    assert!(
        tpds.round_trips_per_op > 1.0 && tpds.round_trips_per_op < 5.0,
        "{tpds:?}"
    );
}

/// A client thread keeping several operations in flight (`depth`) raises
/// throughput until the NICs saturate, and each operation waits longer; the
/// history stays linearizable with the thread's polls sharing one core.
#[test]
fn operations_in_flight_raise_throughput_until_the_nics_saturate() {
    let _limit = time_limit(
        "operations_in_flight_raise_throughput_until_the_nics_saturate",
        4,
        Duration::from_secs(60),
    );
    let at = |depth: u16| {
        simulate(&SimSpec {
            clients_per_node: 1,
            depth,
            seconds: 0.005,
            ..spec(4)
        })
        .unwrap()
    };
    let (one, four, sixteen) = (at(1), at(4), at(16));
    assert!(
        four.ops_per_sec > 1.3 * one.ops_per_sec,
        "{four:?} vs {one:?}"
    );
    assert!(four.get_avg_us > one.get_avg_us);
    // Past saturation, more depth buys queueing, not throughput.
    assert!(
        sixteen.ops_per_sec < 1.2 * four.ops_per_sec,
        "{sixteen:?} vs {four:?}"
    );
    assert!(sixteen.get_avg_us > 2.0 * four.get_avg_us);
    let hot = simulate(&SimSpec {
        keys: 8,
        clients_per_node: 2,
        depth: 4,
        seconds: 0.002,
        record_history: true,
        load_factor: 0.1,
        ..spec(5)
    })
    .unwrap();
    assert!(nessie_check::check_history(&hot.history, 50_000_000).unwrap() > 200);
}

/// Busy background threads on the client cores (Fig. 4's setting): each
/// client thread gets its core one time slice in every b + 1, so throughput
/// falls as b grows.
#[test]
fn background_threads_on_the_client_cores_cut_throughput() {
    let _limit = time_limit(
        "background_threads_on_the_client_cores_cut_throughput",
        6,
        Duration::from_secs(60),
    );
    let at = |background_per_node: u16| {
        simulate(&SimSpec {
            background_per_node,
            seconds: 0.05,
            ..spec(6)
        })
        .unwrap()
    };
    let (none, one, three) = (at(0), at(3), at(9));
    assert!(
        one.ops_per_sec < 0.7 * none.ops_per_sec,
        "{one:?} vs {none:?}"
    );
    assert!(
        three.ops_per_sec < 0.7 * one.ops_per_sec,
        "{three:?} vs {one:?}"
    );
    // Most operations fit in a slice; those that straddle its end wait out
    // the spinners' slices, which the average shows.
    assert!(
        three.get_avg_us > 2.0 * none.get_avg_us,
        "{three:?} vs {none:?}"
    );
}

#[test]
fn bad_specifications_are_typed_errors() {
    assert!(simulate(&SimSpec {
        nodes: 0,
        ..spec(1)
    })
    .is_err());
    assert!(simulate(&SimSpec {
        depth: 0,
        ..spec(1)
    })
    .is_err());
    assert!(simulate(&SimSpec {
        load_factor: 0.99,
        ..spec(1)
    })
    .is_err());
    assert!(simulate(&SimSpec {
        zipf_theta: Some(1.0),
        ..spec(1)
    })
    .is_err());
    assert!(simulate(&SimSpec {
        keys: 10_000_000,
        value_size: 1 << 20,
        ..spec(1)
    })
    .is_err());
}

/// The simulated cluster runs the real machines on hot keys, contending: the
/// history, in virtual time, is linearizable.
#[test]
fn a_contended_simulated_history_is_linearizable() {
    let _limit = time_limit(
        "a_contended_simulated_history_is_linearizable",
        3,
        Duration::from_secs(60),
    );
    let r = simulate(&SimSpec {
        keys: 8,
        clients_per_node: 4,
        seconds: 0.002,
        record_history: true,
        load_factor: 0.1,
        ..spec(3)
    })
    .unwrap();
    assert!(r.puts > 100 && r.gets > 100, "{r:?}");
    let checked = nessie_check::check_history(&r.history, 50_000_000).unwrap();
    assert!(checked > 200, "{checked}");
}

fn small_table(seed: u64, faults: Faults) -> SimSpec {
    SimSpec {
        keys: 2,
        clients_per_node: 4,
        value_size: 64,
        seconds: 0.005,
        // Few entries, so that a marked one is soon wanted again.
        entries_per_client: Some(4),
        record_history: true,
        load_factor: 0.1,
        faults,
        ..spec(seed)
    }
}

/// The same check has teeth: with entries reused as soon as they are marked
/// (`reuse_before_expiry`) and the incarnation tags off (`ignore_incarnations`:
/// with them, the reused entry's index word is new and no cache entry
/// answers for it), a reader's cached copy of an entry is served after the
/// entry was reused, and the simulated history is not linearizable; the
/// correct protocol in the same world waits for the expiration period (its
/// writers see a full data table meanwhile) and stays linearizable.
#[test]
fn reusing_entries_before_they_expire_is_caught_in_the_simulated_history() {
    let _limit = time_limit(
        "reusing_entries_before_they_expire_is_caught_in_the_simulated_history",
        1,
        Duration::from_secs(60),
    );
    let broken = Faults {
        reuse_before_expiry: true,
        ignore_incarnations: true,
        ..Faults::default()
    };
    let r = simulate(&small_table(1, broken)).unwrap();
    // Only a violation counts as a catch (an exhausted search is none).
    assert!(nessie_check::check_history(&r.history, 50_000_000).is_err_and(|e| e.is_violation()));
    let r = simulate(&small_table(1, Faults::default())).unwrap();
    nessie_check::check_history(&r.history, 50_000_000).unwrap();
}

/// Share of the history's operations on its most frequent key.
fn hottest_share(r: &nessie_sim::SimReport) -> f64 {
    let mut counts = std::collections::HashMap::new();
    for e in &r.history {
        *counts.entry(e.key().to_vec()).or_insert(0u64) += 1;
    }
    let max = counts.values().copied().max().unwrap_or(0);
    max as f64 / r.history.len().max(1) as f64
}

/// Zipf keys (YCSB's scrambled Zipfian, theta 0.99) put about 1 / zeta =
/// 3.8 % of the operations on the hottest key; uniform keys about one in
/// the 500 keys (plus chance).
#[test]
fn zipf_keys_concentrate_on_the_hottest_key() {
    let _limit = time_limit(
        "zipf_keys_concentrate_on_the_hottest_key",
        5,
        Duration::from_secs(60),
    );
    let run = |zipf_theta| {
        simulate(&SimSpec {
            zipf_theta,
            record_history: true,
            ..spec(5)
        })
        .unwrap()
    };
    let (zipf, uniform) = (run(Some(0.99)), run(None));
    assert!(zipf.ops > 1_000 && uniform.ops > 1_000);
    let (z, u) = (hottest_share(&zipf), hottest_share(&uniform));
    assert!(z > 0.025 && z < 0.06, "zipf: hottest key {z}");
    assert!(u < 0.01, "uniform: hottest key {u}");
}

/// Open loop: Poisson arrivals at a fifth of what a client does closed
/// loop give about that many operations, and client threads busy only while
/// an operation runs (their busy share is operations x latency / time);
/// closed loop they are always busy.
#[test]
fn open_loop_arrivals_leave_client_threads_idle_between_operations() {
    let _limit = time_limit(
        "open_loop_arrivals_leave_client_threads_idle_between_operations",
        4,
        Duration::from_secs(60),
    );
    let closed = simulate(&spec(4)).unwrap();
    let clients = 9.0;
    let rate = closed.ops_per_sec / clients / 5.0;
    let open = simulate(&SimSpec {
        arrival_rate_per_client: Some(rate),
        ..spec(4)
    })
    .unwrap();
    assert!(closed.client_busy_pct > 99.0, "{closed:?}");
    let expected = rate * clients * 0.01;
    assert!(
        (open.ops as f64 - expected).abs() < 0.1 * expected,
        "{} ops, expected {expected}",
        open.ops
    );
    let lat_us = (open.get_avg_us * open.gets as f64 + open.put_avg_us * open.puts as f64)
        / (open.gets + open.puts) as f64;
    let busy = 100.0 * open.ops_per_sec * lat_us * 1e-6 / clients;
    assert!(
        (open.client_busy_pct - busy).abs() < 0.1 * busy && open.client_busy_pct < 40.0,
        "{} % busy, expected {busy}",
        open.client_busy_pct
    );
    assert!(simulate(&SimSpec {
        arrival_rate_per_client: Some(0.0),
        ..spec(4)
    })
    .is_err());
}

/// Every write of a simulated history, the preload's included, stores a
/// value of its own (`nessie_check::unique_value`, at the configured size),
/// so a GET that returns another key's entry is caught. The preload once
/// gave every key one value: the same wrong read passed.
#[test]
fn every_write_has_a_value_of_its_own_so_a_read_of_another_keys_entry_shows() {
    use nessie_check::check_history;
    use nessie_protocol::{Request, Response};
    use std::collections::{HashMap, HashSet};
    let _limit = time_limit(
        "every_write_has_a_value_of_its_own_so_a_read_of_another_keys_entry_shows",
        9,
        Duration::from_secs(60),
    );
    let keys = 16;
    let r = simulate(&SimSpec {
        keys,
        preload_pct: 100,
        get_pct: 80,
        seconds: 0.002,
        record_history: true,
        load_factor: 0.1,
        ..spec(9)
    })
    .unwrap();
    let puts: Vec<&Vec<u8>> = r
        .history
        .iter()
        .filter_map(|e| match &e.request {
            Request::Put(_, v) => Some(v),
            _ => None,
        })
        .collect();
    assert!(puts.len() > keys as usize, "{r:?}");
    assert!(puts.iter().all(|v| v.len() == 1024), "the configured size");
    let distinct: HashSet<_> = puts.iter().collect();
    assert_eq!(distinct.len(), puts.len(), "every write its own value");
    check_history(&r.history, 50_000_000).unwrap();
    // The preload's writes come first (logical times 0 .. 2 x keys).
    let preload: HashMap<Vec<u8>, Vec<u8>> = r
        .history
        .iter()
        .filter(|e| e.invoke < 2 * keys)
        .filter_map(|e| match &e.request {
            Request::Put(k, v) => Some((k.clone(), v.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(preload.len(), keys as usize);
    // A GET that read its key's preloaded value, made to return another
    // key's preloaded value (what a read of the wrong entry returns).
    let i = r
        .history
        .iter()
        .position(
            |e| matches!(&e.ret, Ok(Response::Get(Some(v))) if preload.get(e.key()) == Some(v)),
        )
        .expect("a GET of a preloaded value");
    let other = preload
        .iter()
        .find(|(k, _)| k.as_slice() != r.history[i].key())
        .map(|(_, v)| v.clone())
        .unwrap();
    let mut wrong = r.history.clone();
    wrong[i].ret = Ok(Response::Get(Some(other)));
    let e = check_history(&wrong, 50_000_000).expect_err("the wrong entry is caught");
    assert!(e.is_violation(), "{e}");
    // The old preload, one value for every key: the same wrong read passes.
    let shared = vec![b'v'; 1024];
    let old = |v: &mut Vec<u8>| {
        if preload.values().any(|p| p == v) {
            *v = shared.clone();
        }
    };
    let mut old_wrong = wrong.clone();
    for e in &mut old_wrong {
        if let Request::Put(_, v) = &mut e.request {
            old(v);
        }
        if let Ok(Response::Get(Some(v))) = &mut e.ret {
            old(v);
        }
    }
    check_history(&old_wrong, 50_000_000).expect("one shared value hides the wrong read");
}

/// The key number a simulated key names (`k` and 15 digits).
fn key_number(key: &[u8]) -> u64 {
    std::str::from_utf8(&key[1..16]).unwrap().parse().unwrap()
}

/// YCSB's workloads run in the simulator on the generator every other
/// command uses (`nessie_workload::ycsb`): D inserts keys above the
/// preloaded ones, F reads every key it then writes, E scans (Cell only,
/// refused elsewhere), and each history is linearizable (E's with its
/// scans, by the range-aware checker).
#[test]
fn ycsb_workloads_run_in_the_simulator_and_their_histories_are_linearizable() {
    use nessie_sim::Ycsb;
    use nessie_systems::SystemKind;
    let _limit = time_limit(
        "ycsb_workloads_run_in_the_simulator_and_their_histories_are_linearizable",
        3,
        Duration::from_secs(120),
    );
    let run = |system, w| {
        simulate(&SimSpec {
            system,
            ycsb: Some(w),
            record_history: true,
            load_factor: 0.3,
            seconds: 0.004,
            ..spec(3)
        })
        .unwrap()
    };
    for system in [SystemKind::Nessie, SystemKind::NessieHy] {
        let d = run(system, Ycsb::D);
        assert!(d.ops > 200, "{system} D: {d:?}");
        let preloaded = spec(3).keys;
        let inserted = d
            .history
            .iter()
            .filter(|e| key_number(e.key()) >= preloaded)
            .count();
        assert!(inserted > 0, "{system} D inserts fresh keys");
        nessie_check::check_history(&d.history, 50_000_000).unwrap();
        let f = run(system, Ycsb::F);
        assert!(f.puts > 0 && f.gets > f.puts, "{system} F: {f:?}");
        nessie_check::check_history(&f.history, 50_000_000).unwrap();
    }
    let e = run(SystemKind::Cell, Ycsb::E);
    assert!(e.scans.len() > 20, "{} scans", e.scans.len());
    let mut events = e.history.clone();
    events.extend(e.scans.iter().cloned());
    nessie_check::ordered::check(&events, 50_000_000).unwrap();
    let refused = simulate(&SimSpec {
        ycsb: Some(Ycsb::E),
        ..spec(3)
    });
    assert!(
        matches!(refused, Err(ref e) if e.to_string().contains("Cell")),
        "{refused:?}"
    );
}

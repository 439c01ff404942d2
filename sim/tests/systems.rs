//! The systems other than Nessie in the simulator: NessieSD, NessieHY,
//! Pilaf and Cell run their real sans-IO machines (clients, server workers
//! polling on their cores, Cell's maintenance threads) in virtual time.
//! Each run is a function of its specification; each system's contended
//! history is linearizable; the history check catches a broken server
//! (one that runs requests its clients cancelled after timing out); and
//! busy background threads that take the workers' cores cut the
//! server-driven designs' throughput far more than Nessie's (Fig. 4).

use std::time::Duration;

use nessie_check::time_limit;
use nessie_sim::{simulate, ServerFaults, SimReport, SimSpec, Tuning};
use nessie_systems::SystemKind;

const OTHERS: [SystemKind; 4] = [
    SystemKind::NessieSd,
    SystemKind::NessieHy,
    SystemKind::Pilaf,
    SystemKind::Cell,
];

fn spec(system: SystemKind, seed: u64) -> SimSpec {
    SimSpec {
        system,
        nodes: 3,
        clients_per_node: 2,
        keys: 400,
        key_size: 16,
        value_size: 128,
        seconds: 0.004,
        seed,
        ..SimSpec::default()
    }
}

/// Hot keys, deletes, inserts: contention at the servers (two workers per
/// node, taking turns at the node's table lock) and on the keys.
fn hot(system: SystemKind, seed: u64) -> SimSpec {
    SimSpec {
        server_workers: 2,
        keys: 8,
        clients_per_node: 3,
        delete_pct: 10,
        preload_pct: 50,
        value_size: 64,
        load_factor: 0.1,
        record_history: true,
        ..spec(system, seed)
    }
}

fn linearizable(r: &SimReport) -> Result<usize, String> {
    nessie_check::check_history(&r.history, 50_000_000).map_err(|e| e.to_string())
}

#[test]
fn each_system_replays_exactly_for_a_seed() {
    let _limit = time_limit(
        "each_system_replays_exactly_for_a_seed",
        7,
        Duration::from_secs(60),
    );
    for system in OTHERS {
        let a = simulate(&spec(system, 7)).unwrap();
        let b = simulate(&spec(system, 7)).unwrap();
        assert!(a.ops > 300, "{system}: {a:?}");
        assert_eq!(a.failures, 0, "{system}: {a:?}");
        assert!(
            a.server_requests > 0 && a.server_errors.is_empty(),
            "{system}: {a:?}"
        );
        assert_eq!(a.fingerprint(), b.fingerprint(), "{system}");
        let c = simulate(&spec(system, 8)).unwrap();
        assert_ne!(a.fingerprint(), c.fingerprint(), "{system}");
    }
}

#[test]
fn each_systems_contended_simulated_history_is_linearizable() {
    let _limit = time_limit(
        "each_systems_contended_simulated_history_is_linearizable",
        1,
        Duration::from_secs(60),
    );
    for system in OTHERS {
        let r = simulate(&hot(system, 1)).unwrap();
        assert!(r.puts > 100 && r.gets > 100, "{system}: {r:?}");
        if system != SystemKind::Cell {
            // The node's two workers took turns at its table lock.
            assert!(r.server_lock_waits > 0, "{system}: {r:?}");
        }
        let checked = linearizable(&r).unwrap_or_else(|e| panic!("{system}: {e}"));
        assert!(checked > 500, "{system}: {checked}");
    }
}

/// Workers preempted by background threads for 3 ms time slices, clients
/// giving up on a request after 1 ms: the clients cancel (their claim CAS)
/// and report a timeout. With claims the history stays linearizable; a
/// server that skips its claim (a test-only fault switch) runs cancelled
/// PUTs when its slice comes, so a "timed out" PUT is read back: caught.
#[test]
fn teeth_a_server_that_runs_cancelled_requests_is_caught_by_the_history_check() {
    let _limit = time_limit(
        "teeth_a_server_that_runs_cancelled_requests_is_caught_by_the_history_check",
        2,
        Duration::from_secs(60),
    );
    for system in [
        SystemKind::NessieSd,
        SystemKind::NessieHy,
        SystemKind::Pilaf,
    ] {
        let preempted = |skip_claims| SimSpec {
            background_per_node: 4,
            tuning: Tuning {
                op_timeout_us: Some(1_000),
                ..Tuning::default()
            },
            seconds: 0.05,
            server_faults: ServerFaults {
                skip_claims,
                ..ServerFaults::default()
            },
            ..hot(system, 2)
        };
        let honest = simulate(&preempted(false)).unwrap();
        assert!(
            honest.failures > 20,
            "{system}: the clients timed out: {honest:?}"
        );
        linearizable(&honest).unwrap_or_else(|e| panic!("{system}: {e}"));
        let broken = simulate(&preempted(true)).unwrap();
        // Only a violation counts as a catch (an exhausted search is none).
        let caught = nessie_check::check_history(&broken.history, 50_000_000)
            .is_err_and(|e| e.is_violation());
        assert!(caught, "{system}: the broken variant must be caught");
    }
}

/// Fig. 4's setting: busy background threads spread over each node's
/// cores take the server workers' cores too. Nessie loses its client
/// threads' share; NessieSD waits for its workers' slices.
#[test]
fn preempted_server_workers_cut_server_driven_throughput_far_more_than_nessies() {
    let _limit = time_limit(
        "preempted_server_workers_cut_server_driven_throughput_far_more_than_nessies",
        3,
        Duration::from_secs(60),
    );
    let ratio = |system| {
        let at = |background_per_node| {
            simulate(&SimSpec {
                background_per_node,
                seconds: 0.03,
                ..spec(system, 3)
            })
            .unwrap()
            .ops_per_sec
        };
        at(4) / at(0)
    };
    let (nessie, sd) = (ratio(SystemKind::Nessie), ratio(SystemKind::NessieSd));
    assert!(nessie > 0.2, "nessie keeps {nessie}");
    assert!(sd < 0.5 * nessie, "nessie-sd keeps {sd}, nessie {nessie}");
}

/// Cell's runs for the paper's figures: with `server_nodes` and
/// `clients_beside_servers: false` the server nodes' clients only preload,
/// and a spike's clients (index 1 and up on their node) invoke operations
/// only within its window, which lies inside the measured one.
#[test]
fn cells_paper_runs_keep_server_nodes_clients_out_and_spike_clients_in_their_window() {
    let window = (0.001, 0.002);
    let s = SimSpec {
        nodes: 3,
        clients_per_node: 2,
        get_pct: 100,
        seconds: 0.003,
        record_history: true,
        arrival_rate_per_client: Some(100_000.0),
        spike: Some(nessie_sim::Spike {
            first_index: 1,
            from_s: window.0,
            until_s: window.1,
        }),
        cell_run: nessie_sim::CellRun {
            server_nodes: Some(1),
            clients_beside_servers: false,
            ..nessie_sim::CellRun::default()
        },
        ..spec(SystemKind::Cell, 7)
    };
    let r = simulate(&s).unwrap();
    let measured: Vec<_> = r
        .history
        .iter()
        .filter(|e| nessie_sim::stamp_ns(e.invoke) >= r.measured_from_ns)
        .collect();
    // Clients are numbered node by node: node 0's are 0 and 1.
    assert!(
        measured.iter().all(|e| e.client >= 2),
        "a server node's client ran"
    );
    let spike: Vec<_> = measured.iter().filter(|e| e.client % 2 == 1).collect();
    assert!(!spike.is_empty());
    for e in spike {
        let at = nessie_sim::stamp_ns(e.invoke) - r.measured_from_ns;
        assert!(
            (1_000_000..2_000_000).contains(&at),
            "a spike client's operation invoked at {at} ns"
        );
    }
    assert!(
        measured.iter().any(|e| e.client % 2 == 0),
        "the base clients ran"
    );
}

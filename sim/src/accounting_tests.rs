//! The hardware model's accounting, exact on hand-computed cases: single
//! requests through idle NICs (READ, CAS, loopback, the CPU path), two
//! large READs contending for one link, and a client thread's time slices
//! next to busy background threads, on the TPDS profile (NIC 500 ns per
//! request or response, 10 Gb/s links, 500 ns wire, 400 ns loopback,
//! 500 ns atomics, 58 header bytes, 5 B/ns copies).

use nessie_protocol::{NodeId, Op, OpId, RemoteAddr, WorkRequest};

use crate::engine::{Engine, Ev};
use crate::spec::SimSpec;
use crate::TPDS;

/// An idle two-node cluster with one client per node (nothing scheduled).
fn idle() -> Engine {
    idle_on(TPDS)
}

/// [`idle`] on hardware `profile`.
fn idle_on(profile: crate::Profile) -> Engine {
    let spec = SimSpec {
        profile,
        nodes: 2,
        clients_per_node: 1,
        keys: 10,
        value_size: 64 * 1024,
        ..SimSpec::default()
    };
    Engine::new(&spec).unwrap()
}

/// Posts `ops` from client 0 at time 0 and returns when each completes.
fn complete_times(ops: Vec<Op>) -> Vec<u64> {
    complete_times_on(TPDS, ops)
}

/// [`complete_times`] on hardware `profile`.
fn complete_times_on(profile: crate::Profile, ops: Vec<Op>) -> Vec<u64> {
    let mut e = idle_on(profile);
    for (i, op) in ops.into_iter().enumerate() {
        let wr = WorkRequest {
            id: OpId(i as u64),
            op,
        };
        e.post(crate::systems::Actor::Client(0), wr, 0);
    }
    let mut done = Vec::new();
    while let Some((at, ev)) = e.next_event() {
        if matches!(ev, Ev::Complete(_)) {
            done.push(at);
        }
        e.handle(at, ev);
    }
    done
}

fn read(node: u16, len: u32) -> Op {
    Op::Read {
        addr: RemoteAddr::data(NodeId(node), 0),
        len,
    }
}

#[test]
fn wire_time_counts_headers_at_link_speed_rounded_up() {
    // (16 + 58) B x 8 / 10 Gb/s = 59.2 ns -> 60.
    assert_eq!(TPDS.wire_time(16), 60);
    // (64 KiB + 58) B x 8 / 10 = 52,475.2 ns -> 52,476.
    assert_eq!(TPDS.wire_time(65_536), 52_476);
    assert_eq!(TPDS.copy_time(4096), 820);
}

#[test]
fn a_small_remote_read_takes_the_hand_computed_time() {
    // Out: NIC 500 + 16 B request 60, wire 500 -> arrives 1,060.
    // Responder NIC 500 -> executes at 1,560.
    // Back: NIC 500 + 8 B response (66 B: 52.8 -> 53), wire 500 -> 2,613.
    // Requester NIC 500 -> completes at 3,113.
    assert_eq!(complete_times(vec![read(1, 8)]), vec![3_113]);
}

#[test]
fn a_cas_pays_the_atomic_at_the_responder() {
    let cas = Op::Cas {
        addr: RemoteAddr::data(NodeId(1), 0),
        expect: 0,
        new: 1,
    };
    // Out: 500 + 24 B (82 B: 65.6 -> 66) + 500 = 1,066; responder 500 + 500
    // atomic = 2,066; back 500 + 53 + 500 = 3,119; requester 500 -> 3,619.
    assert_eq!(complete_times(vec![cas]), vec![3_619]);
}

#[test]
fn a_loopback_read_crosses_the_nic_twice_but_no_wire() {
    // As the remote READ with 400 ns loopback for each 500 ns wire.
    assert_eq!(complete_times(vec![read(0, 8)]), vec![2_913]);
}

#[test]
fn the_cpu_path_costs_a_copy_only() {
    let local = Op::LocalRead {
        offset: 0,
        len: 4096,
    };
    assert_eq!(complete_times(vec![local]), vec![820]);
}

#[test]
fn two_large_reads_share_the_responders_link() {
    // Requests: the second leaves 560 ns after the first (one transmit
    // queue): arrive 1,060 and 1,620, execute 1,560 and 2,120.
    // Responses (64 KiB: 500 + 52,476 each) leave one after the other:
    // 1,560 + 52,976 = 54,536 (+500 wire, +500 NIC -> 55,536), then
    // 54,536 + 52,976 = 107,512 (-> 108,512): link bound.
    let big = 64 * 1024;
    assert_eq!(
        complete_times(vec![read(1, big), read(1, big)]),
        vec![55_536, 108_512]
    );
}

#[test]
fn a_client_thread_runs_one_slice_in_b_plus_one() {
    let e = Engine::new(&SimSpec {
        profile: TPDS,
        nodes: 1,
        clients_per_node: 2,
        background_per_node: 3,
        keys: 10,
        ..SimSpec::default()
    })
    .unwrap();
    let ms = 1_000_000;
    // Core 0 shares with two spinners (period 9 ms, its slice first),
    // core 1 with one (period 6 ms, its slice second: offset 3 ms).
    assert_eq!(e.running_at(0, 0), 0);
    assert_eq!(e.running_at(0, 2 * ms), 2 * ms);
    assert_eq!(e.running_at(0, 3 * ms), 9 * ms);
    assert_eq!(e.running_at(0, 8 * ms), 9 * ms);
    assert_eq!(e.running_at(0, 9 * ms + 1), 9 * ms + 1);
    assert_eq!(e.running_at(1, 0), 3 * ms);
    assert_eq!(e.running_at(1, 4 * ms), 4 * ms);
    assert_eq!(e.running_at(1, 6 * ms), 9 * ms);
}

/// One server-driven request, hand-computed on the TPDS profile: a
/// NessieSD GET of an absent key homed on the other node (1 client and 1
/// server worker per node, so each worker polls 2 slots).
#[test]
fn one_server_driven_request_takes_the_hand_computed_time() {
    use nessie_systems::SystemKind;
    let spec = SimSpec {
        system: SystemKind::NessieSd,
        nodes: 2,
        clients_per_node: 1,
        keys: 1,
        key_size: 16,
        value_size: 8,
        get_pct: 100,
        preload_pct: 0,
        ..SimSpec::default()
    };
    let mut e = Engine::new(&spec).unwrap();
    e.start_servers();
    // The client on the node that is not the key's home.
    let home = nessie_baselines::coupled::home_node(
        e.cfg.hash_seed,
        2,
        &crate::engine::key_of(0, spec.key_size),
    );
    let c = usize::from(1 - home.0);
    let t0 = crate::engine::EPOCH + 10_000;
    e.events.schedule(t0, Ev::Poll(c));
    while e.workload.tally.get_lat.is_empty() {
        let (at, ev) = e.next_event().expect("the GET finishes");
        e.handle(at, ev);
    }
    // Client: one protocol step (300), the 40-byte request WRITE (16 B key
    // + 24 B trailer) out: NIC 500 + (40 + 58) B at 10 Gb/s 79, wire 500,
    // responder NIC 500: lands at 1,879.
    // Worker (idle, 2 slots): notices it 100 + 10 x 2 / 2 = 110 later
    // (1,989), takes it: 300 + the request's CRC64 40 / 1.5 = 27 (2,316);
    // reads it back by CPU: trailer 24 B (copy 5 + miss 100: 2,421), message
    // 40 B (8 + 100: 2,529); records it taken in the slot's served word, 8 B
    // (2 + 100: 2,631); the key's 3 candidate entries, empty (3 x (2 +
    // 100): 2,937); seals the 24-byte response (CRC 16: 2,953) and WRITEs it
    // unsignaled: NIC 500 + (24 + 58) B 66, wire 500, NIC 500: lands at 4,519.
    // Meanwhile the request WRITE's completion reached the client (node 1's
    // NIC 500 + 47, wire 500, node 0's NIC 500: 3,426), its step (300)
    // found no response yet, so the landing wakes it: 4,519 + 100 (its miss
    // on the control word) = 4,619, one step (300) and the response read
    // back by CPU (24 B twice: 5 + 5, no step after a CPU access): 4,929.
    assert_eq!(e.workload.tally.get_lat, vec![4_929]);
    let busy: u64 = e
        .server_side
        .servers
        .as_ref()
        .unwrap()
        .workers
        .iter()
        .map(|w| w.busy_ns)
        .sum();
    // The request's CPU, plus each worker's reads, as it starts, of its 2
    // slots' served and claim words (4 x 102 each).
    assert_eq!(busy, 327 + 105 + 108 + 102 + 3 * 102 + 16 + 2 * 4 * 102);
    // The idle worker's scan before it took the request: 110.
    let scan: u64 = e
        .server_side
        .servers
        .as_ref()
        .unwrap()
        .workers
        .iter()
        .map(|w| w.scan_ns)
        .sum();
    assert_eq!(scan, 110);
}

/// Two 64 KiB READs posted in the measured window: each NIC's busy time is
/// split into per-request processing (500 ns per request or response) and
/// bytes at link speed (the 16-byte requests 60 ns each, the responses
/// 52,476 ns each), and the receive queues' 500 ns per arrival; posted
/// before the window (time 0), nothing is counted.
#[test]
fn nic_busy_time_splits_processing_from_bytes_in_the_measured_window() {
    let busy = |at: u64| {
        let mut e = idle();
        for i in 0..2 {
            let wr = WorkRequest {
                id: OpId(i),
                op: read(1, 65_536),
            };
            e.post(crate::systems::Actor::Client(0), wr, at);
        }
        while let Some((t, ev)) = e.next_event() {
            e.handle(t, ev);
        }
        e.net
            .nics
            .iter()
            .map(|n| (n.tx_op_ns, n.tx_wire_ns, n.rx_ns))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        busy(crate::engine::EPOCH),
        vec![(1_000, 120, 1_000), (1_000, 104_952, 1_000)]
    );
    assert_eq!(busy(0), vec![(0, 0, 0), (0, 0, 0)]);
}

/// A resource's busy share counts the time it served in the measured
/// window, not the work that arrived there: 2,000 READs posted 10 µs
/// before the window ends keep the TPDS NICs (one server per direction,
/// 500 ns a request) busy for a millisecond, and only the 10 µs within the
/// window count. (Counted on arrival, a saturated receive queue reported
/// 111 % busy in `nessie papers`' which-store table.)
#[test]
fn a_saturated_nic_counts_only_the_busy_time_inside_the_window() {
    let mut e = idle();
    let end = e.events.end;
    for i in 0..2_000 {
        let wr = WorkRequest {
            id: OpId(i),
            op: read(1, 8),
        };
        e.post(crate::systems::Actor::Client(0), wr, end - 10_000);
    }
    while let Some((t, ev)) = e.next_event() {
        e.handle(t, ev);
    }
    // TPDS: one server per direction, processing and bytes together.
    for n in &e.net.nics {
        assert!(
            n.tx_op_ns + n.tx_wire_ns <= 10_000,
            "tx {} + {}",
            n.tx_op_ns,
            n.tx_wire_ns
        );
        assert!(n.rx_ns <= 10_000, "rx {}", n.rx_ns);
    }
    let sender = &e.net.nics[0];
    assert!(
        sender.tx_op_ns + sender.tx_wire_ns >= 9_000,
        "the window's last 10 µs were busy: {} + {}",
        sender.tx_op_ns,
        sender.tx_wire_ns
    );
}

/// The modern profile's NIC (issue 43's calibration): 16 processing units
/// per direction, so 32 small READs posted at once overlap (one unit would
/// take 32 x 100 ns per direction for them); CASes on independent words
/// go through the atomic unit 20 ns apart, and CASes on one word 330 ns
/// apart (about 50 M and 3 M a second: docs/simulation.md).
#[test]
fn the_modern_nic_processes_in_parallel_and_caps_atomics_per_unit_and_per_word() {
    let spread = |ops: Vec<Op>| {
        let t = complete_times_on(crate::MODERN, ops);
        t.iter().max().unwrap() - t.iter().min().unwrap()
    };
    let reads = spread((0..32).map(|_| read(1, 8)).collect());
    assert!(reads < 16 * 100, "32 READs spread over {reads} ns");
    let cas = |word: u64| Op::Cas {
        addr: RemoteAddr::index(NodeId(1), 8 * word),
        expect: 0,
        new: 1,
    };
    let one_word = spread((0..32).map(|_| cas(0)).collect());
    assert!(one_word >= 31 * 330, "one word: {one_word} ns");
    let many_words = spread((0..32).map(cas).collect());
    assert!(
        many_words >= 31 * 20 && many_words < one_word / 4,
        "independent words: {many_words} ns (one word: {one_word})"
    );
}

/// Clients without storage on hosts of their own (`pure_client_hosts`):
/// one application host per node follows the nodes' NICs, and a pure
/// client's requests leave from and come back to its host's NIC; without
/// hosts they leave from their share's node, and there are no host NICs.
#[test]
fn clients_without_storage_on_hosts_of_their_own_use_the_hosts_nics() {
    let run = |hosts: bool| {
        let mut spec = SimSpec {
            profile: TPDS,
            nodes: 2,
            clients_per_node: 2,
            keys: 20,
            value_size: 64,
            seconds: 0.001,
            ..SimSpec::default()
        };
        spec.tuning.pure_clients = Some(true);
        spec.tuning.pure_client_hosts = hosts.then_some(true);
        let mut e = Engine::new(&spec).unwrap();
        let pure: Vec<usize> = (0..e.clients.len())
            .filter(|&c| e.clients[c].state.pure.is_some())
            .collect();
        assert!(!pure.is_empty());
        for &c in &pure {
            let node = usize::from(e.clients[c].state.id.node.0);
            let want = if hosts { 2 + node } else { node };
            assert_eq!(e.client_nic(c), want);
        }
        // Every client reads a key at the window's start (the preload put
        // them in place), and every request is counted.
        e.preload().unwrap();
        for c in 0..e.clients.len() {
            e.events.schedule(crate::engine::EPOCH, Ev::Poll(c));
        }
        for _ in 0..2_000 {
            let Some((t, ev)) = e.next_event() else { break };
            e.handle(t, ev);
        }
        e.net
            .nics
            .iter()
            .map(|n| n.tx_op_ns + n.tx_wire_ns)
            .collect::<Vec<_>>()
    };
    let hosted = run(true);
    assert_eq!(hosted.len(), 4);
    assert!(hosted[2] > 0 && hosted[3] > 0, "{hosted:?}");
    assert_eq!(run(false).len(), 2);
}

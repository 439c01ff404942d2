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
    let spec = SimSpec {
        profile: TPDS,
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
    let mut e = idle();
    for (i, op) in ops.into_iter().enumerate() {
        let wr = WorkRequest {
            id: OpId(i as u64),
            op,
        };
        e.post(0, wr, 0);
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

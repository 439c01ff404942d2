//! Chains on the simulated fabric (`Endpoint::post_chain`): requests to one
//! node executed in order, and what each fault of the vocabulary, hitting
//! the first request, does to the one behind it, fenced or ordered. The two
//! chains are a lock's story: a CAS taking a lock word with a fenced READ of
//! the row it guards behind it, and a WRITE of the row with the CAS
//! releasing the lock ordered behind it.

use std::time::Duration;

use nessie_protocol::{
    ChainLink, Completion, Endpoint, Fabric, FabricError, Nanos, NodeId, Op, OpId, OpOutput,
    Region, RemoteAddr, TransportError, TransportFault, WorkRequest,
};

use crate::{Injection, Later, SimConfig, SimEndpoint, SimFabric};

const N0: NodeId = NodeId(0);
const N1: NodeId = NodeId(1);
/// The lock word (index region of node 1).
const LOCK: u64 = 0;
/// The row it guards (data region of node 1).
const ROW: u64 = 64;

fn fabric() -> SimFabric {
    SimFabric::new(SimConfig::new(2, 64, 4096)).expect("valid config")
}

fn lock() -> RemoteAddr {
    RemoteAddr::index(N1, LOCK)
}

fn row() -> RemoteAddr {
    RemoteAddr::data(N1, ROW)
}

/// Posts `ops` as one chain (ids 1, 2, ...) and collects every completion
/// that comes, in id order.
fn chain(ep: &mut SimEndpoint, ops: Vec<(Op, ChainLink)>) -> Vec<Completion> {
    let wrs = ops
        .into_iter()
        .enumerate()
        .map(|(i, (op, link))| {
            let id = OpId(i as u64 + 1);
            (WorkRequest { id, op }, link)
        })
        .collect();
    ep.post_chain(wrs, Nanos(0)).expect("posted");
    let mut out = Vec::new();
    ep.wait(&mut out, Duration::from_millis(20));
    ep.poll(&mut out);
    out.sort_by_key(|c| c.id.0);
    out
}

/// The lock's CAS with a fenced READ of the row behind it.
fn take_and_read() -> Vec<(Op, ChainLink)> {
    vec![
        (
            Op::Cas {
                addr: lock(),
                expect: 0,
                new: 1,
            },
            ChainLink::Ordered,
        ),
        (
            Op::Read {
                addr: row(),
                len: 8,
            },
            ChainLink::Fenced,
        ),
    ]
}

/// The row's WRITE with the lock's release ordered behind it.
fn write_and_release(value: u8) -> Vec<(Op, ChainLink)> {
    vec![
        (
            Op::Write {
                addr: row(),
                data: vec![value; 8],
            },
            ChainLink::Ordered,
        ),
        (
            Op::Cas {
                addr: lock(),
                expect: 1,
                new: 0,
            },
            ChainLink::Ordered,
        ),
    ]
}

fn lock_word(f: &SimFabric) -> u64 {
    f.read_word(N1, Region::Index, LOCK).expect("lock word")
}

fn row_word(f: &SimFabric) -> u64 {
    f.read_word(N1, Region::Data, ROW).expect("row word")
}

/// The completion of the chain's second request.
fn second<'a>(out: &'a [Completion], what: &str) -> &'a Completion {
    out.iter()
        .find(|c| c.id == OpId(2))
        .unwrap_or_else(|| panic!("{what}"))
}

fn flushed() -> Result<OpOutput, FabricError> {
    Err(FabricError::Transport(TransportError::Flushed))
}

fn failed() -> Result<OpOutput, FabricError> {
    Err(FabricError::Transport(TransportError::QueuePairFailed))
}

fn hit_first(f: &SimFabric, fault: TransportFault) {
    f.inject(N1, Injection::next(fault, 1)).expect("inject");
}

#[test]
fn a_quiet_chain_executes_in_order_and_each_request_completes() {
    let f = fabric();
    let mut ep = f.open(N0).expect("open");
    f.write_word(N1, Region::Data, ROW, 7).expect("row");
    let out = chain(&mut ep, take_and_read());
    assert_eq!(out[0].result, Ok(OpOutput::Cas { previous: 0 }));
    assert_eq!(
        out[1].result,
        Ok(OpOutput::Read(7u64.to_le_bytes().to_vec()))
    );
    let out = chain(&mut ep, write_and_release(9));
    assert_eq!(out[0].result, Ok(OpOutput::Written));
    assert_eq!(out[1].result, Ok(OpOutput::Cas { previous: 1 }));
    assert_eq!(
        (lock_word(&f), row_word(&f)),
        (0, u64::from_le_bytes([9; 8]))
    );
}

#[test]
fn a_request_that_never_executed_flushes_everything_behind_it() {
    for fault in [TransportFault::FailBeforeExecuting, TransportFault::Vanish] {
        let f = fabric();
        let mut ep = f.open(N0).expect("open");
        hit_first(&f, fault);
        let out = chain(&mut ep, take_and_read());
        let behind = second(&out, "the READ completes");
        assert_eq!(behind.result, flushed(), "{fault:?}");
        assert_eq!(lock_word(&f), 0, "{fault:?}: the CAS never ran");
        f.write_word(N1, Region::Index, LOCK, 1).expect("lock held");
        hit_first(&f, fault);
        let out = chain(&mut ep, write_and_release(9));
        let behind = second(&out, "the CAS completes");
        assert_eq!(behind.result, flushed(), "{fault:?}");
        assert_eq!(
            (lock_word(&f), row_word(&f)),
            (1, 0),
            "{fault:?}: nothing ran"
        );
    }
}

#[test]
fn behind_an_executed_failure_a_fenced_request_is_flushed_and_an_ordered_one_runs() {
    for fault in [
        TransportFault::FailAfterExecuting,
        TransportFault::LoseCompletion,
    ] {
        let f = fabric();
        let mut ep = f.open(N0).expect("open");
        hit_first(&f, fault);
        let out = chain(&mut ep, take_and_read());
        let behind = second(&out, "the READ completes");
        assert_eq!(
            behind.result,
            flushed(),
            "{fault:?}: the fence never opened"
        );
        assert_eq!(lock_word(&f), 1, "{fault:?}: the lock was taken");
        hit_first(&f, fault);
        let out = chain(&mut ep, write_and_release(9));
        let behind = second(&out, "the CAS completes");
        assert_eq!(behind.result, failed(), "{fault:?}");
        assert_eq!(
            (lock_word(&f), row_word(&f)),
            (0, u64::from_le_bytes([9; 8])),
            "{fault:?}: the release ran behind the WRITE although both report errors"
        );
    }
}

#[test]
fn behind_a_request_that_lands_later_an_ordered_one_lands_after_it() {
    let f = fabric();
    let mut ep = f.open(N0).expect("open");
    f.write_word(N1, Region::Index, LOCK, 1).expect("lock held");
    hit_first(&f, TransportFault::ErrorThenLand);
    let out = chain(&mut ep, write_and_release(9));
    assert!(out[0].result.is_err() && out[1].result == failed());
    assert_eq!((lock_word(&f), row_word(&f)), (1, 0), "neither landed yet");
    let landed = f.land_parked();
    assert_eq!(landed.len(), 2);
    assert!(
        matches!(landed[0].op, Op::Write { .. }),
        "the WRITE lands first"
    );
    assert_eq!(landed[1].result, Ok(OpOutput::Cas { previous: 1 }));
    assert_eq!(
        (lock_word(&f), row_word(&f)),
        (0, u64::from_le_bytes([9; 8]))
    );
    // A fenced request behind it is flushed: it never lands.
    hit_first(&f, TransportFault::ErrorThenLand);
    let out = chain(&mut ep, take_and_read());
    assert_eq!(out[1].result, flushed());
    assert_eq!(f.land_parked().len(), 1, "only the CAS lands");
}

#[test]
fn a_late_completion_holds_nothing_behind_it() {
    let f = fabric();
    let mut ep = f.open(N0).expect("open");
    hit_first(&f, TransportFault::LateCompletion);
    let out = chain(&mut ep, take_and_read());
    let behind = second(&out, "the READ completes");
    assert!(behind.result.is_ok(), "{:?}", behind.result);
    assert_eq!(lock_word(&f), 1);
}

#[test]
fn a_duplicated_write_can_land_again_after_the_release_behind_it() {
    let f = fabric();
    let mut ep = f.open(N0).expect("open");
    f.write_word(N1, Region::Index, LOCK, 1).expect("lock held");
    // The copy is held until the test lands it (`Later::OnRequest`).
    let copy = Injection::next(TransportFault::DuplicateWrite, 1).later(Later::OnRequest);
    f.inject(N1, copy).expect("inject");
    let out = chain(&mut ep, write_and_release(9));
    assert_eq!(out[0].result, Ok(OpOutput::Written));
    assert_eq!(out[1].result, Ok(OpOutput::Cas { previous: 1 }));
    // Another writer takes the lock and writes the row...
    f.write_word(N1, Region::Index, LOCK, 1)
        .expect("taken again");
    f.write_word(N1, Region::Data, ROW, 5).expect("rewritten");
    // ...and the retransmitted copy of the first WRITE lands over it: the
    // hazard a lock-then-WRITE design must survive.
    f.land_parked();
    assert_eq!(row_word(&f), u64::from_le_bytes([9; 8]));
}

#[test]
fn a_chain_across_nodes_or_to_local_memory_is_refused_whole() {
    let f = fabric();
    let mut ep = f.open(N0).expect("open");
    let across = vec![
        (
            WorkRequest {
                id: OpId(1),
                op: Op::Read {
                    addr: row(),
                    len: 8,
                },
            },
            ChainLink::Ordered,
        ),
        (
            WorkRequest {
                id: OpId(2),
                op: Op::Read {
                    addr: RemoteAddr::data(N0, ROW),
                    len: 8,
                },
            },
            ChainLink::Fenced,
        ),
    ];
    assert_eq!(
        ep.post_chain(across, Nanos(0)),
        Err(FabricError::Transport(TransportError::ChainAcrossNodes))
    );
    let local = vec![(
        WorkRequest {
            id: OpId(3),
            op: Op::LocalRead { offset: 0, len: 8 },
        },
        ChainLink::Ordered,
    )];
    assert_eq!(
        ep.post_chain(local, Nanos(0)),
        Err(FabricError::Transport(TransportError::ChainAcrossNodes))
    );
    let mut out = Vec::new();
    ep.poll(&mut out);
    assert!(out.is_empty(), "nothing was posted");
}

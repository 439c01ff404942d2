//! Memory windows on the simulated fabric ([`Op::Windowed`],
//! [`Op::BindWindow`]): a request carrying a window's key changes memory
//! only while the window is bound under that key and covers what it
//! changes, and each fault of the vocabulary that lets a request land
//! after its completion (an error first and the landing later, a
//! duplicated WRITE's copy) finds the window rebound and changes nothing.
//! The negative control: the same late landings without a window do
//! overwrite what was written after them.

use std::time::Duration;

use nessie_protocol::{
    Completion, Endpoint, Fabric, FabricError, NodeId, Op, OpId, OpOutput, Region, RemoteAddr,
    TransportFault, WindowId, WindowKey, WorkRequest,
};

use crate::{Injection, Later, SimConfig, SimEndpoint, SimFabric};

const N0: NodeId = NodeId(0);
const N1: NodeId = NodeId(1);
/// The window's range on node 1's data region.
const START: u64 = 1024;
const LEN: u64 = 512;
const WINDOW: WindowId = WindowId { node: N1, index: 0 };

fn fabric() -> SimFabric {
    SimFabric::new(SimConfig::new(2, 64, 4096)).expect("valid config")
}

/// Runs `op` on `ep` and returns its completion's result (`None` if no
/// completion came).
fn run(ep: &mut SimEndpoint, op: Op) -> Option<Result<OpOutput, FabricError>> {
    ep.post(WorkRequest { id: OpId(1), op }).expect("posted");
    let mut out: Vec<Completion> = Vec::new();
    ep.wait(&mut out, Duration::from_millis(20));
    out.pop().map(|c| c.result)
}

/// The agent on node 1 binds the window again; returns its new key.
fn bind(f: &SimFabric) -> WindowKey {
    let mut agent = f.open(N1).expect("agent");
    match run(
        &mut agent,
        Op::BindWindow {
            index: 0,
            offset: START,
            len: LEN,
        },
    ) {
        Some(Ok(OpOutput::Bound { key })) => key,
        other => panic!("bind: {other:?}"),
    }
}

fn write(offset: u64, value: u64) -> Op {
    Op::Write {
        addr: RemoteAddr::data(N1, offset),
        data: value.to_le_bytes().to_vec(),
    }
}

fn through(key: WindowKey, op: Op) -> Op {
    Op::Windowed {
        window: WINDOW,
        key,
        op: Box::new(op),
    }
}

fn word(f: &SimFabric, offset: u64) -> u64 {
    f.read_word(N1, Region::Data, offset).expect("word")
}

fn refused(key: WindowKey) -> Option<Result<OpOutput, FabricError>> {
    Some(Err(FabricError::WindowRefused {
        window: WINDOW,
        key,
    }))
}

#[test]
fn a_rebind_revokes_the_old_key_and_the_new_one_writes() {
    let f = fabric();
    let mut ep = f.open(N0).expect("open");
    let k1 = bind(&f);
    assert_ne!(k1, WindowKey(0), "0 is never a key");
    assert_eq!(
        run(&mut ep, through(k1, write(START, 5))),
        Some(Ok(OpOutput::Written))
    );
    let cas = Op::Cas {
        addr: RemoteAddr::data(N1, START),
        expect: 5,
        new: 6,
    };
    assert_eq!(
        run(&mut ep, through(k1, cas.clone())),
        Some(Ok(OpOutput::Cas { previous: 5 }))
    );
    let k2 = bind(&f);
    assert_ne!(k1, k2, "each bind a new key");
    assert_eq!(run(&mut ep, through(k1, write(START, 9))), refused(k1));
    assert_eq!(run(&mut ep, through(k1, cas)), refused(k1));
    assert_eq!(word(&f, START), 6, "nothing of the old key landed");
    assert_eq!(
        run(&mut ep, through(k2, write(START, 9))),
        Some(Ok(OpOutput::Written))
    );
    assert_eq!(word(&f, START), 9);
}

#[test]
fn a_window_refuses_what_it_does_not_cover_or_carry() {
    let f = fabric();
    let mut ep = f.open(N0).expect("open");
    let never = WindowKey(1);
    assert_eq!(
        run(&mut ep, through(never, write(START, 1))),
        refused(never),
        "an unbound window refuses everything"
    );
    let k = bind(&f);
    let straddling = Op::Write {
        addr: RemoteAddr::data(N1, START + LEN - 8),
        data: vec![7; 16],
    };
    for op in [
        write(START - 8, 1),
        write(START + LEN, 1),
        straddling,
        Op::Read {
            addr: RemoteAddr::data(N1, START),
            len: 8,
        },
        Op::Write {
            addr: RemoteAddr::index(N1, 0),
            data: vec![1; 8],
        },
    ] {
        assert_eq!(run(&mut ep, through(k, op.clone())), refused(k), "{op:?}");
    }
    assert_eq!(
        word(&f, START + LEN - 8),
        0,
        "a straddling WRITE landed nothing"
    );
    assert_eq!(
        f.read_word(N1, Region::Index, 0).expect("index"),
        0,
        "nothing reached the index region"
    );
    let elsewhere = Op::Windowed {
        window: WindowId { node: N0, index: 0 },
        key: k,
        op: Box::new(write(START, 1)),
    };
    assert!(
        matches!(
            run(&mut ep, elsewhere),
            Some(Err(FabricError::WindowRefused { .. }))
        ),
        "a window of another node carries nothing to node 1"
    );
    let too_long = Op::BindWindow {
        index: 1,
        offset: 4000,
        len: 200,
    };
    let mut agent = f.open(N1).expect("agent");
    assert!(matches!(
        run(&mut agent, too_long),
        Some(Err(FabricError::OutOfRange { .. }))
    ));
}

/// One fault hits a WRITE of 0xA; the window is rebound; 0xB is written
/// under the new key; then whatever was parked lands. Returns the word
/// after each step: (after the faulted WRITE, at the end).
fn fault_then_rebind(fault: TransportFault, windowed: bool) -> (u64, u64) {
    let f = fabric();
    let mut ep = f.open(N0).expect("open");
    let k1 = bind(&f);
    let injection = Injection::next(fault, 1);
    let defers = matches!(
        fault,
        TransportFault::ErrorThenLand
            | TransportFault::DuplicateWrite
            | TransportFault::LateCompletion
    );
    f.inject(
        N1,
        if defers {
            injection.later(Later::OnRequest)
        } else {
            injection
        },
    )
    .expect("inject");
    let first = if windowed {
        through(k1, write(START, 0xA))
    } else {
        write(START, 0xA)
    };
    let _ = run(&mut ep, first);
    let after_fault = word(&f, START);
    let k2 = bind(&f);
    let second = if windowed {
        through(k2, write(START, 0xB))
    } else {
        write(START, 0xB)
    };
    assert_eq!(run(&mut ep, second), Some(Ok(OpOutput::Written)), "{fault}");
    let landed = f.land_parked();
    if windowed {
        for l in &landed {
            assert_eq!(
                l.result,
                Err(FabricError::WindowRefused {
                    window: WINDOW,
                    key: k1
                }),
                "{fault}: a late landing under the revoked key"
            );
        }
    }
    (after_fault, word(&f, START))
}

#[test]
fn no_fault_lets_a_revoked_key_land_after_the_rebind() {
    for fault in TransportFault::ALL {
        let (after_fault, end) = fault_then_rebind(fault, true);
        let executed = if fault.executes_now() { 0xA } else { 0 };
        assert_eq!(after_fault, executed, "{fault}: what ran before the rebind");
        assert_eq!(end, 0xB, "{fault}: the new key's WRITE stays");
    }
}

#[test]
fn without_a_window_the_late_landings_overwrite_what_came_after() {
    // The negative control: the check above can fail.
    for fault in [
        TransportFault::ErrorThenLand,
        TransportFault::DuplicateWrite,
    ] {
        let (_, end) = fault_then_rebind(fault, false);
        assert_eq!(end, 0xA, "{fault}: the late copy lands over 0xB");
    }
}

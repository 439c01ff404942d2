//! Memory windows in the engine ([`Op::Windowed`], [`Op::BindWindow`]),
//! one fault at a time: whatever a windowed WRITE's fate, once its window
//! is rebound (right after the request first changed memory or completed)
//! nothing of it lands any more; without the window, the late landings
//! (an error first and the landing later, a duplicated WRITE's copy) do,
//! which shows the check can fail. The agent's bind runs on its node's CPU
//! path.

use nessie_protocol::{
    FabricError, NodeId, Op, OpId, OpOutput, RemoteAddr, TransportFault, WindowId, WindowKey,
    WorkRequest,
};

use crate::chaos::Chaos;
use crate::engine::{Engine, Ev};
use crate::systems::Actor;
use nessie_systems::SystemKind;

const WINDOW: WindowId = WindowId {
    node: NodeId(1),
    index: 0,
};

fn engine(seed: u64) -> Engine {
    let chaos = Chaos {
        late_landing: true,
        max_delay_ns: 2_000_000,
        ..Chaos::NONE
    };
    crate::fault_tests::engine(SystemKind::Nessie, chaos, seed)
}

fn four_words(key: Option<WindowKey>) -> WorkRequest {
    let write = Op::Write {
        addr: RemoteAddr::data(NodeId(1), 64),
        data: (1..=32).collect(),
    };
    let op = match key {
        Some(key) => Op::Windowed {
            window: WINDOW,
            key,
            op: Box::new(write),
        },
        None => write,
    };
    WorkRequest { id: OpId(1), op }
}

fn data_words(e: &Engine) -> Vec<u64> {
    (0..4)
        .map(|i| {
            e.cluster
                .mem
                .word(NodeId(1), nessie_protocol::Region::Data, 64 + 8 * i)
                .unwrap()
        })
        .collect()
}

/// Posts the WRITE with `fault`, rebinds the window right after the first
/// event that changed memory or completed it, clears the words, and counts
/// the events that changed memory after that.
fn changes_after_the_rebind(fault: TransportFault, seed: u64, windowed: bool) -> usize {
    let mut e = engine(seed);
    let k1 = e.cluster.mem.bind_window(WINDOW, 64, 32).unwrap();
    e.net.forced_fates = [Some(fault)].into_iter().collect();
    e.post(Actor::Client(0), four_words(windowed.then_some(k1)), 0);
    let (mut rebound, mut changes) = (false, 0);
    while let Some((at, ev)) = e.next_event() {
        let before = data_words(&e);
        e.handle(at, ev);
        let changed = data_words(&e) != before;
        if rebound {
            changes += usize::from(changed);
        } else if changed || matches!(ev, Ev::Complete(_)) {
            e.cluster.mem.bind_window(WINDOW, 64, 32).unwrap();
            let mut zero = nessie_check::memory::InFlight::new(
                WorkRequest {
                    id: OpId(9),
                    op: Op::Write {
                        addr: RemoteAddr::data(NodeId(1), 64),
                        data: vec![0; 32],
                    },
                },
                at,
            );
            zero.run_to_end(
                &mut e.cluster.mem,
                NodeId(1),
                nessie_check::memory::WordOrder::Ascending,
            )
            .unwrap();
            rebound = true;
        }
    }
    changes
}

#[test]
fn no_fault_lands_a_revoked_key_after_the_rebind() {
    for fault in TransportFault::ALL {
        for seed in 0..20 {
            assert_eq!(
                changes_after_the_rebind(fault, seed, true),
                0,
                "{fault}, seed {seed}"
            );
        }
    }
}

#[test]
fn without_the_window_late_landings_land_after_it() {
    for fault in [
        TransportFault::ErrorThenLand,
        TransportFault::DuplicateWrite,
    ] {
        let landed: usize = (0..20)
            .map(|seed| changes_after_the_rebind(fault, seed, false))
            .sum();
        assert!(landed > 0, "{fault}: the control lands nothing");
    }
}

#[test]
fn the_agents_bind_runs_on_its_nodes_cpu_and_revokes_the_old_key() {
    let mut e = engine(1);
    let k1 = e.cluster.mem.bind_window(WINDOW, 64, 32).unwrap();
    let bind = WorkRequest {
        id: OpId(2),
        op: Op::BindWindow {
            index: 0,
            offset: 64,
            len: 32,
        },
    };
    e.post(Actor::Client(1), bind, 0);
    let mut results = Vec::new();
    while let Some((at, ev)) = e.next_event() {
        if let Ev::Complete(r) = ev {
            if let Some(q) = e.net.reqs[r].as_ref() {
                results.push(q.result.clone());
            }
        }
        e.handle(at, ev);
    }
    let Some(Some(Ok(OpOutput::Bound { key: k2 }))) = results.first().cloned() else {
        panic!("the bind completes with its key: {results:?}");
    };
    assert_ne!(k1, k2);
    e.post(Actor::Client(0), four_words(Some(k1)), e.events.now);
    let mut refused = false;
    while let Some((at, ev)) = e.next_event() {
        if let Ev::Complete(r) = ev {
            refused |= matches!(
                e.net.reqs[r].as_ref().and_then(|q| q.result.clone()),
                Some(Err(FabricError::WindowRefused { .. }))
            );
        }
        e.handle(at, ev);
    }
    assert!(refused, "the old key is refused");
    assert_eq!(data_words(&e), vec![0; 4]);
}

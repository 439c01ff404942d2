//! Ordered chains in the engine ([`crate::chain`]), one fault at a time on
//! the first link: what the link behind it does, ordered or fenced. The
//! two chains are a lock's story, as on fabric-sim
//! (`fabric-sim/src/chain_tests.rs`): a CAS taking a lock word with a
//! fenced READ of it behind (which must see the lock taken), and a WRITE of
//! a row with an ordered CAS behind that expects the row's new word (which
//! succeeds only if it executes after the WRITE).

use nessie_protocol::{
    ChainLink, FabricError, NodeId, Op, OpId, OpOutput, Region, RemoteAddr, TransportError,
    TransportFault, WorkRequest,
};

use crate::chaos::Chaos;
use crate::engine::{Engine, Ev};
use crate::systems::Actor;
use nessie_systems::SystemKind;

/// A two-node cluster, one client per node (RACE's: completions by round),
/// with `chaos`.
fn engine(chaos: Chaos, seed: u64) -> Engine {
    crate::fault_tests::engine(SystemKind::Race, chaos, seed)
}

const LOCK: u64 = 0;
const ROW: u64 = 64;

fn lock() -> RemoteAddr {
    RemoteAddr::index(NodeId(1), LOCK)
}

fn row() -> RemoteAddr {
    RemoteAddr::data(NodeId(1), ROW)
}

fn wr(id: u64, op: Op) -> WorkRequest {
    WorkRequest { id: OpId(id), op }
}

/// The lock's CAS (0 -> 7) with a READ of the lock word behind it.
fn take_and_read(link: ChainLink) -> Vec<(WorkRequest, ChainLink)> {
    vec![
        (
            wr(
                1,
                Op::Cas {
                    addr: lock(),
                    expect: 0,
                    new: 7,
                },
            ),
            ChainLink::Ordered,
        ),
        (
            wr(
                2,
                Op::Read {
                    addr: lock(),
                    len: 8,
                },
            ),
            link,
        ),
    ]
}

/// A WRITE of the row's first word (5) with a CAS behind it that expects
/// it (5 -> 6).
fn write_and_release(link: ChainLink) -> Vec<(WorkRequest, ChainLink)> {
    vec![
        (
            wr(
                1,
                Op::Write {
                    addr: row(),
                    data: 5u64.to_le_bytes().to_vec(),
                },
            ),
            ChainLink::Ordered,
        ),
        (
            wr(
                2,
                Op::Cas {
                    addr: row(),
                    expect: 5,
                    new: 6,
                },
            ),
            link,
        ),
    ]
}

/// What the requester's NIC saw complete: each request's id and result,
/// in completion order (a lost completion included: the NIC had it).
type Seen = Vec<(u64, Result<OpOutput, FabricError>)>;

/// Runs every event of `e`, and returns `what` of each request whose
/// completion reached its requester's NIC, in that order.
fn completed<T>(e: &mut Engine, what: impl Fn(&crate::nic::NicRequest) -> Option<T>) -> Vec<T> {
    let mut seen = Vec::new();
    while let Some((at, ev)) = e.next_event() {
        if let Ev::Complete(r) = ev {
            if let Some(t) = e.net.reqs[r].as_ref().and_then(&what) {
                seen.push(t);
            }
        }
        e.handle(at, ev);
    }
    seen
}

/// Posts `chain` with the first link hit by `first` (the others by
/// nothing), runs every event, and returns the completions.
fn run_chain(
    e: &mut Engine,
    first: Option<TransportFault>,
    chain: Vec<(WorkRequest, ChainLink)>,
) -> Seen {
    e.net.forced_fates = std::iter::once(first)
        .chain(std::iter::repeat_n(None, chain.len() - 1))
        .collect();
    e.post_chain(Actor::Client(0), chain, 0);
    completed(e, |q| q.result.clone().map(|r| (q.wr.id.0, r)))
}

fn word(e: &Engine, region: Region, offset: u64) -> u64 {
    e.cluster.mem.word(NodeId(1), region, offset).unwrap()
}

fn result_of(seen: &Seen, id: u64) -> Option<&Result<OpOutput, FabricError>> {
    seen.iter().find(|(i, _)| *i == id).map(|(_, r)| r)
}

fn flushed(r: Option<&Result<OpOutput, FabricError>>) -> bool {
    matches!(
        r,
        Some(Err(FabricError::Transport(TransportError::Flushed)))
    )
}

#[test]
fn a_fenced_read_sees_the_lock_its_cas_took_and_an_ordered_cas_sees_the_write() {
    for seed in 0..20 {
        let mut e = engine(Chaos::NONE, seed);
        let seen = run_chain(&mut e, None, take_and_read(ChainLink::Fenced));
        assert_eq!(
            result_of(&seen, 2),
            Some(&Ok(OpOutput::Read(7u64.to_le_bytes().to_vec()))),
            "seed {seed}: {seen:?}"
        );
        assert_eq!(e.chaos.counts.chained, 1);
        let mut e = engine(Chaos::NONE, seed);
        let seen = run_chain(&mut e, None, write_and_release(ChainLink::Ordered));
        assert_eq!(
            result_of(&seen, 2),
            Some(&Ok(OpOutput::Cas { previous: 5 }))
        );
        assert_eq!(word(&e, Region::Data, ROW), 6);
        assert!(e.net.chains.is_empty(), "a settled chain is forgotten");
    }
}

/// Ordered links are sent together; one delayed behind a later one waits
/// at the responder for its predecessor, and still executes after it.
#[test]
fn an_ordered_link_that_arrives_first_waits_for_its_predecessor() {
    let chaos = Chaos {
        delay_permille: 500,
        max_delay_ns: 20_000,
        ..Chaos::NONE
    };
    let mut waited = 0;
    for seed in 0..200 {
        let mut e = engine(chaos, seed);
        let seen = run_chain(&mut e, None, write_and_release(ChainLink::Ordered));
        assert_eq!(
            result_of(&seen, 2),
            Some(&Ok(OpOutput::Cas { previous: 5 })),
            "seed {seed}"
        );
        waited += e.chaos.counts.chain_waits;
    }
    assert!(
        waited > 0,
        "some ordered link arrived before its predecessor"
    );
}

#[test]
fn a_failure_before_executing_flushes_the_link_behind_it_fenced_or_ordered() {
    for link in [ChainLink::Ordered, ChainLink::Fenced] {
        let mut e = engine(Chaos::NONE, 1);
        let first = Some(TransportFault::FailBeforeExecuting);
        let seen = run_chain(&mut e, first, write_and_release(link));
        assert!(flushed(result_of(&seen, 2)), "{link:?}: {seen:?}");
        assert_eq!(word(&e, Region::Data, ROW), 0, "{link:?}: nothing executed");
        assert_eq!(e.chaos.counts.chain_flushed, 1);
    }
}

/// A failure after executing, and a lost completion (the queue pair's
/// failure after the link executed): an ordered link behind executes and
/// reports it, a fenced one is flushed.
#[test]
fn behind_a_failure_after_executing_an_ordered_link_executes_and_a_fenced_one_is_flushed() {
    for fault in [
        TransportFault::FailAfterExecuting,
        TransportFault::LoseCompletion,
    ] {
        let first = Some(fault);
        let mut e = engine(Chaos::NONE, 1);
        let seen = run_chain(&mut e, first, write_and_release(ChainLink::Ordered));
        assert_eq!(
            result_of(&seen, 2),
            Some(&Err(FabricError::Transport(
                TransportError::QueuePairFailed
            ))),
            "{fault:?}"
        );
        assert_eq!(
            word(&e, Region::Data, ROW),
            6,
            "{fault:?}: both executed, in order"
        );
        let mut e = engine(Chaos::NONE, 1);
        let seen = run_chain(&mut e, first, take_and_read(ChainLink::Fenced));
        assert!(flushed(result_of(&seen, 2)), "{fault:?}: {seen:?}");
        assert_eq!(
            word(&e, Region::Index, LOCK),
            7,
            "{fault:?}: the CAS executed"
        );
        if fault == TransportFault::LoseCompletion {
            assert_eq!(e.chaos.counts.lost_completions, 1);
        }
    }
}

/// An error completion whose request lands later: an ordered link lands
/// behind it (so the CAS finds the WRITE's word), reporting the queue
/// pair's failure; a fenced one is flushed, and nothing executes behind.
#[test]
fn behind_an_error_that_lands_later_an_ordered_link_lands_after_it_and_a_fenced_one_is_flushed() {
    let first = Some(TransportFault::ErrorThenLand);
    for seed in 0..20 {
        let mut e = engine(Chaos::NONE, seed);
        let seen = run_chain(&mut e, first, write_and_release(ChainLink::Ordered));
        match result_of(&seen, 2) {
            Some(Err(FabricError::Transport(TransportError::QueuePairFailed))) => {
                assert_eq!(word(&e, Region::Data, ROW), 6, "seed {seed}: in order");
                assert_eq!(e.chaos.counts.orphans_landed, 1);
            }
            // The WRITE was refused at its landing deadline: never executed.
            r if flushed(r) => assert_eq!(e.chaos.counts.landing_deadline_refusals, 1),
            r => panic!("seed {seed}: {r:?}"),
        }
        let mut e = engine(Chaos::NONE, seed);
        let seen = run_chain(&mut e, first, write_and_release(ChainLink::Fenced));
        assert!(flushed(result_of(&seen, 2)), "seed {seed}: {seen:?}");
        assert_ne!(word(&e, Region::Data, ROW), 6, "seed {seed}");
    }
}

/// A late completion is late to the software only: the NIC had it, and
/// the fenced link behind goes.
#[test]
fn a_late_completion_does_not_hold_the_fenced_link_behind_it() {
    let mut e = engine(Chaos::NONE, 1);
    let first = Some(TransportFault::LateCompletion);
    let seen = run_chain(&mut e, first, take_and_read(ChainLink::Fenced));
    assert_eq!(
        result_of(&seen, 2),
        Some(&Ok(OpOutput::Read(7u64.to_le_bytes().to_vec())))
    );
}

#[test]
fn a_vanished_link_never_executes_and_every_link_behind_it_is_flushed() {
    for link in [ChainLink::Ordered, ChainLink::Fenced] {
        let mut e = engine(Chaos::NONE, 1);
        let seen = run_chain(
            &mut e,
            Some(TransportFault::Vanish),
            write_and_release(link),
        );
        assert_eq!(seen.len(), 1, "{link:?}: {seen:?}");
        assert!(flushed(result_of(&seen, 2)), "{link:?}: {seen:?}");
        assert_eq!(word(&e, Region::Data, ROW), 0);
        assert!(e.net.chains.is_empty());
    }
}

/// The hazard a lock-then-WRITE design must survive: the duplicate copy of
/// a WRITE is not a link, and lands after the CAS behind the original.
#[test]
fn a_duplicated_writes_copy_can_land_after_the_link_behind_it() {
    let mut replayed = 0;
    for seed in 0..50 {
        let mut e = engine(Chaos::NONE, seed);
        let first = Some(TransportFault::DuplicateWrite);
        let seen = run_chain(&mut e, first, write_and_release(ChainLink::Ordered));
        assert_eq!(
            result_of(&seen, 2),
            Some(&Ok(OpOutput::Cas { previous: 5 }))
        );
        // The CAS left 6; a copy landing after it wrote 5 again.
        replayed += u64::from(word(&e, Region::Data, ROW) == 5);
    }
    assert!(replayed > 0, "a copy landed after the release");
}

#[test]
fn an_ordered_link_behind_a_torn_write_executes_after_its_last_word() {
    let chaos = Chaos {
        torn_permille: 1_000,
        ..Chaos::NONE
    };
    let mut e = engine(chaos, 1);
    let mut chain = write_and_release(ChainLink::Ordered);
    // Two words: torn.
    chain[0].0.op = Op::Write {
        addr: row(),
        data: [5u64.to_le_bytes(), 9u64.to_le_bytes()].concat(),
    };
    let seen = run_chain(&mut e, None, chain);
    assert_eq!(
        result_of(&seen, 2),
        Some(&Ok(OpOutput::Cas { previous: 5 }))
    );
    assert_eq!(e.chaos.counts.torn, 1);
    assert_eq!(word(&e, Region::Data, ROW + 8), 9);
}

#[test]
fn a_link_to_a_node_that_is_down_flushes_the_links_behind_it() {
    for link in [ChainLink::Ordered, ChainLink::Fenced] {
        let mut e = engine(Chaos::NONE, 1);
        e.cluster.node_down[1] = true;
        let seen = run_chain(&mut e, None, write_and_release(link));
        assert_eq!(result_of(&seen, 1), Some(&Err(FabricError::Timeout)));
        assert!(flushed(result_of(&seen, 2)), "{link:?}: {seen:?}");
        assert!(e.net.chains.is_empty());
    }
}

/// A fenced link sent (or flushed) after its poster gave up the chain's
/// round answers that round, not the poster's next: found by the swarm
/// (RCuckoo, case 7 of its family without duplicated WRITEs), where the
/// late link's completion was counted against the next round, which then
/// waited for ever.
#[test]
fn a_link_sent_after_its_round_was_given_up_answers_that_round() {
    for first in [None, Some(TransportFault::FailBeforeExecuting)] {
        let mut e = engine(Chaos::NONE, 1);
        e.net.forced_fates = [first, None].into_iter().collect();
        let round = e.clients[0].round;
        e.post_chain(Actor::Client(0), take_and_read(ChainLink::Fenced), 0);
        // The poster gives the round up before the CAS completes.
        e.clients[0].round += 1;
        let rounds = completed(&mut e, |q| Some((q.wr.id.0, q.round)));
        assert_eq!(rounds, vec![(1, round), (2, round)], "{first:?}");
    }
}

/// A chain's links meet the faults of the instant it was posted: a fenced
/// link sent later, once faults were switched on (a preload's end), is not
/// hit by them. Found by the swarm (RCuckoo, case 22,671 of its family
/// without duplicated WRITEs): a fenced link of a chain posted in the
/// preload, when no round is watched for lost completions, lost its
/// completion after the faults started, and the round waited for ever.
#[test]
fn a_fenced_link_meets_the_faults_of_the_instant_its_chain_was_posted() {
    let mut e = engine(Chaos::NONE, 1);
    e.post_chain(Actor::Client(0), take_and_read(ChainLink::Fenced), 0);
    e.spec.chaos = Chaos {
        lose_completion_permille: 1_000,
        ..Chaos::NONE
    };
    let fates = completed(&mut e, |q| Some((q.wr.id.0, q.fate)));
    assert_eq!(fates, vec![(1, None), (2, None)]);
    assert_eq!(e.chaos.counts.lost_completions, 0);
}

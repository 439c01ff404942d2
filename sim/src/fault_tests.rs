//! Issue 24's transport faults in the engine, one request at a time: an
//! error-then-land request reports its error first and lands after it, by
//! its landing deadline (or, A2 dropped, later); a late completion is held
//! while its round runs and handed in once a later round is posted (a
//! baseline's is lost instead); and the watch on I4's first step reports a
//! recycle mark on a linked entry and a link of a marked entry. A vanished
//! request neither executes nor completes; a duplicated WRITE completes once
//! and lands again by its landing deadline.

use nessie_protocol::layout::{IndexEntry, RecycleWord};
use nessie_protocol::{DteAddr, NodeId, Op, OpId, Region, RemoteAddr, TransportFault, WorkRequest};

use crate::audit::{watched, Watched};
use crate::chaos::{Chaos, Dice};
use crate::checks::MarkedLinked;
use crate::engine::{Engine, Ev};
use crate::spec::SimSpec;
use crate::systems::Actor;
use crate::TPDS;
use nessie_systems::SystemKind;

/// A two-node cluster, one client per node, with `chaos` (nothing
/// scheduled, nothing preloaded).
pub(crate) fn engine(system: SystemKind, chaos: Chaos, seed: u64) -> Engine {
    let spec = SimSpec {
        profile: TPDS,
        system,
        nodes: 2,
        clients_per_node: 1,
        keys: 4,
        value_size: 64,
        chaos,
        seed,
        ..SimSpec::default()
    };
    Engine::new(&spec).unwrap()
}

fn cas(offset: u64, expect: u64, new: u64) -> Op {
    Op::Cas {
        addr: RemoteAddr::index(NodeId(1), offset),
        expect,
        new,
    }
}

/// Runs every scheduled event, and returns them with their times.
fn run(e: &mut Engine) -> Vec<(u64, Ev)> {
    let mut seen = Vec::new();
    while let Some((at, ev)) = e.next_event() {
        seen.push((at, ev));
        e.handle(at, ev);
    }
    seen
}

fn margin(e: &Engine) -> u64 {
    e.cfg.deadline_margin.as_nanos() as u64
}

#[test]
fn the_dice_draw_each_fault_from_its_own_rate_and_nothing_at_zero() {
    let mut d = Dice::new(1);
    assert!((0..1_000).all(|_| d.fate(&Chaos::NONE).is_none()));
    let each = [
        (
            Chaos {
                fail_after_exec_permille: 1_000,
                ..Chaos::NONE
            },
            TransportFault::FailAfterExecuting,
        ),
        (
            Chaos {
                fail_before_exec_permille: 1_000,
                ..Chaos::NONE
            },
            TransportFault::FailBeforeExecuting,
        ),
        (
            Chaos {
                lose_completion_permille: 1_000,
                ..Chaos::NONE
            },
            TransportFault::LoseCompletion,
        ),
        (
            Chaos {
                error_then_land_permille: 1_000,
                ..Chaos::NONE
            },
            TransportFault::ErrorThenLand,
        ),
        (
            Chaos {
                late_completion_permille: 1_000,
                ..Chaos::NONE
            },
            TransportFault::LateCompletion,
        ),
    ];
    for (chaos, fault) in each {
        assert_eq!(d.fate(&chaos), Some(fault));
        // One kind on, which the shrinker can turn off.
        assert_eq!(chaos.kinds().len(), 1, "{fault}");
        assert_eq!(chaos.without(chaos.kinds()[0]), Chaos::NONE, "{fault}");
    }
}

#[test]
fn an_error_then_land_draw_puts_the_error_first_and_the_landing_by_the_deadline() {
    let (posted, arrives, deadline, soon) = (1_000, 3_000, 101_000, 15_000);
    let mut d = Dice::new(7);
    let (mut soon_seen, mut late_seen) = (false, false);
    for _ in 0..10_000 {
        let (error, land) = d.error_then_land(posted, arrives, deadline, soon, None);
        assert!(error > posted && error <= deadline, "{error}");
        assert!(land >= error && land >= arrives && land <= deadline.max(arrives));
        soon_seen |= land - error.max(arrives) <= soon && error < deadline - soon;
        let (error, land) = d.error_then_land(posted, arrives, deadline, soon, Some(500_000));
        assert!(land >= error.max(arrives) && land <= error.max(arrives) + 500_000);
        late_seen |= land > deadline;
    }
    assert!(soon_seen && late_seen);
}

#[test]
fn an_error_then_land_cas_reports_its_error_then_executes_by_its_landing_deadline() {
    let mut landed_late = 0;
    for seed in 0..200 {
        for late_landing in [false, true] {
            let chaos = Chaos {
                error_then_land_permille: 1_000,
                late_landing,
                max_delay_ns: 2_000_000,
                ..Chaos::NONE
            };
            let mut e = engine(SystemKind::Nessie, chaos, seed);
            let m = margin(&e);
            let wr = WorkRequest {
                id: OpId(1),
                op: cas(8, 0, 42),
            };
            e.post(Actor::Client(0), wr, 0);
            let mut error_at = None;
            let mut land_at = None;
            while let Some((at, ev)) = e.next_event() {
                let before = e.cluster.mem.word(NodeId(1), Region::Index, 8).unwrap();
                e.handle(at, ev);
                let after = e.cluster.mem.word(NodeId(1), Region::Index, 8).unwrap();
                match ev {
                    Ev::Complete(_) => error_at = Some(at),
                    Ev::Land(_) if before != after => land_at = Some(at),
                    _ => {}
                }
            }
            let (error_at, land_at) = (error_at.unwrap(), land_at);
            assert!(error_at <= m, "seed {seed}: the error by the deadline");
            assert_eq!(e.chaos.counts.error_then_land, 1);
            match land_at {
                Some(t) => {
                    assert!(t >= error_at, "seed {seed}: landed before its error");
                    assert_eq!(e.chaos.counts.orphans_landed, 1);
                    if t > m {
                        assert!(late_landing, "seed {seed}: landed past A2 at {t}");
                        landed_late += 1;
                    }
                }
                // Reaching the responder after the deadline: refused (A2).
                None => {
                    assert!(!late_landing);
                    assert_eq!(e.chaos.counts.landing_deadline_refusals, 1);
                }
            }
        }
    }
    assert!(
        landed_late > 10,
        "A2 dropped lets some land late: {landed_late}"
    );
}

#[test]
fn an_error_then_land_read_just_fails() {
    let chaos = Chaos {
        error_then_land_permille: 1_000,
        ..Chaos::NONE
    };
    let mut e = engine(SystemKind::Nessie, chaos, 3);
    let wr = WorkRequest {
        id: OpId(1),
        op: Op::Read {
            addr: RemoteAddr::index(NodeId(1), 0),
            len: 8,
        },
    };
    e.post(Actor::Client(0), wr, 0);
    run(&mut e);
    assert_eq!(e.chaos.counts.error_then_land, 0);
    assert_eq!(e.chaos.counts.failed_before_exec, 1);
}

#[test]
fn a_late_completion_waits_for_a_later_round_and_dies_with_its_process() {
    let chaos = Chaos {
        late_completion_permille: 1_000,
        ..Chaos::NONE
    };
    let mut e = engine(SystemKind::Nessie, chaos, 5);
    let post = |e: &mut Engine| {
        let wr = WorkRequest {
            id: OpId(1),
            op: cas(0, 0, 1),
        };
        e.post(Actor::Client(0), wr, e.events.now);
    };
    post(&mut e);
    run(&mut e);
    assert_eq!(
        e.cluster.mem.word(NodeId(1), Region::Index, 0),
        Ok(1),
        "executed"
    );
    assert_eq!(e.clients[0].late.len(), 1, "held while its round runs");
    assert_eq!(e.chaos.counts.late_completions, 1);
    assert_eq!(e.chaos.counts.stale_completions, 0, "not delivered yet");
    // The client gives the round up and posts another: handed in then.
    e.clients[0].round += 1;
    let t = e.events.now;
    e.release_late(0, t);
    assert!(e.clients[0].late.is_empty());
    run(&mut e);
    assert_eq!(
        e.chaos.counts.stale_completions, 1,
        "delivered after its round"
    );
    // Another, and the client crashes before a later round: dropped.
    post(&mut e);
    run(&mut e);
    assert_eq!(e.clients[0].late.len(), 1);
    let now = e.events.now;
    e.crash(0, now);
    assert!(e.clients[0].late.is_empty());
    e.clients[0].down_since = None;
    e.clients[0].round += 1;
    e.release_late(0, now);
    run(&mut e);
    assert_eq!(
        e.chaos.counts.stale_completions, 1,
        "a crashed process hears nothing"
    );
}

#[test]
fn a_baselines_late_completion_is_a_lost_one() {
    let chaos = Chaos {
        late_completion_permille: 1_000,
        ..Chaos::NONE
    };
    let mut e = engine(SystemKind::Pilaf, chaos, 5);
    let wr = WorkRequest {
        id: OpId(1),
        op: Op::Read {
            addr: RemoteAddr::data(NodeId(1), 0),
            len: 8,
        },
    };
    e.post(Actor::Client(0), wr, 0);
    run(&mut e);
    assert_eq!(e.chaos.counts.lost_completions, 1);
    assert_eq!(e.chaos.counts.late_completions, 0);
    assert!(e.clients[0].late.is_empty());
}

#[test]
fn the_i4_watch_sees_recycle_marks_and_index_cases() {
    let e = engine(SystemKind::Nessie, Chaos::NONE, 1);
    let l = e.cfg.layout();
    let d = DteAddr { table: 1, index: 2 };
    let mark = RecycleWord::marked(9).encode().to_le_bytes().to_vec();
    let at = |offset| Op::Write {
        addr: RemoteAddr::data(NodeId(1), offset),
        data: mark.clone(),
    };
    let offset = l.entry_offset(2) + 16;
    assert!(matches!(watched(&e.cfg, 1, &at(offset)), Some(Watched::Mark(x)) if x == d));
    assert!(
        watched(&e.cfg, 1, &at(offset + 8)).is_none(),
        "not a recycle word"
    );
    let unmark = Op::Write {
        addr: RemoteAddr::data(NodeId(1), offset),
        data: vec![0; 8],
    };
    assert!(watched(&e.cfg, 1, &unmark).is_none(), "no flag, no mark");
    let local = Op::LocalWrite {
        offset,
        data: mark.clone(),
    };
    assert!(matches!(watched(&e.cfg, 1, &local), Some(Watched::Mark(x)) if x == d));
    assert!(matches!(
        watched(&e.cfg, 1, &cas(0, 0, 1)),
        Some(Watched::Link { expect: 0, new: 1 })
    ));
}

#[test]
fn the_i4_watch_reports_a_mark_on_a_linked_entry_and_a_link_of_a_marked_one() {
    let mut e = engine(SystemKind::Nessie, Chaos::NONE, 1);
    let l = e.cfg.layout();
    let d = DteAddr { table: 1, index: 2 };
    let word = IndexEntry::new(d, 0, 0).0;
    let mark = RecycleWord::marked(9).encode().to_le_bytes().to_vec();
    let write = |data: Vec<u8>| WorkRequest {
        id: OpId(1),
        op: Op::Write {
            addr: RemoteAddr::data(NodeId(1), l.entry_offset(2) + 16),
            data,
        },
    };
    // Unlinked: a mark is fine.
    e.post(Actor::Client(0), write(mark.clone()), 0);
    run(&mut e);
    assert!(e.checks.marked_linked.found().is_empty());
    // Linking the marked entry is not.
    let link = WorkRequest {
        id: OpId(2),
        op: cas(0, 0, word),
    };
    let now = e.events.now;
    e.post(Actor::Client(0), link, now);
    run(&mut e);
    let entry = DteAddr { table: 1, index: 2 };
    assert!(
        matches!(e.checks.marked_linked.found(), [MarkedLinked::Linked { entry: d, .. }] if *d == entry),
        "{:?}",
        e.checks.marked_linked.found()
    );
    // Nor marking it while it is linked.
    let now = e.events.now;
    e.post(Actor::Client(0), write(mark), now);
    run(&mut e);
    assert!(
        matches!(e.checks.marked_linked.found(), [_, MarkedLinked::Marked { entry: d, .. }] if *d == entry),
        "{:?}",
        e.checks.marked_linked.found()
    );
}

/// A four-word WRITE to node 1's data region at offset 64.
fn four_words(id: u64) -> WorkRequest {
    WorkRequest {
        id: OpId(id),
        op: Op::Write {
            addr: RemoteAddr::data(NodeId(1), 64),
            data: (1..=32).collect(),
        },
    }
}

fn data_words(e: &Engine) -> Vec<u64> {
    (0..4)
        .map(|i| {
            e.cluster
                .mem
                .word(NodeId(1), Region::Data, 64 + 8 * i)
                .unwrap()
        })
        .collect()
}

#[test]
fn a_torn_write_lands_one_word_at_a_time_in_ascending_order() {
    let chaos = Chaos {
        torn_permille: 1_000,
        ..Chaos::NONE
    };
    let mut e = engine(SystemKind::Nessie, chaos, 5);
    e.post(Actor::Client(0), four_words(1), 0);
    let mut placed = Vec::new();
    while let Some((at, ev)) = e.next_event() {
        let before = data_words(&e);
        e.handle(at, ev);
        let after = data_words(&e);
        if before != after {
            // Exactly one more word, the next in address order.
            let changed: Vec<usize> = (0..4).filter(|&i| before[i] != after[i]).collect();
            assert_eq!(changed, vec![placed.len()], "{before:?} -> {after:?}");
            placed.push(at);
        }
    }
    assert_eq!(placed.len(), 4);
    assert!(placed.windows(2).all(|w| w[0] < w[1]), "{placed:?}");
    assert_eq!(e.chaos.counts.torn, 1);
    assert_eq!(e.chaos.counts.partly_placed, 0);
}

#[test]
fn a_failure_after_executing_stops_a_torn_write_part_placed() {
    let mut stopped_at = std::collections::BTreeSet::new();
    for seed in 0..50 {
        let chaos = Chaos {
            torn_permille: 1_000,
            fail_after_exec_permille: 1_000,
            ..Chaos::NONE
        };
        let mut e = engine(SystemKind::Nessie, chaos, seed);
        e.post(Actor::Client(0), four_words(1), 0);
        run(&mut e);
        let w = data_words(&e);
        let placed = w.iter().take_while(|&&x| x != 0).count();
        assert!((1..4).contains(&placed), "seed {seed}: {w:?}");
        assert!(w[placed..].iter().all(|&x| x == 0), "seed {seed}: {w:?}");
        assert_eq!(e.chaos.counts.partly_placed, 1);
        assert_eq!(e.chaos.counts.failed_after_exec, 1);
        stopped_at.insert(placed);
    }
    assert_eq!(stopped_at.len(), 3, "every prefix occurs: {stopped_at:?}");
}

#[test]
fn a_failed_queue_pair_refuses_its_own_posts_and_no_one_elses() {
    let mut e = engine(SystemKind::Nessie, Chaos::NONE, 1);
    e.net.link_failures.push(crate::nic::LinkFailure {
        actor: Actor::Client(0),
        node: 1,
        at: 0,
        until: 1_000_000,
    });
    // Client 0's WRITE to node 1, posted while its queue pair is down, is
    // refused and never executes; client 1's executes.
    e.post(Actor::Client(0), four_words(1), 10);
    run(&mut e);
    assert_eq!(data_words(&e), vec![0; 4]);
    assert_eq!(e.chaos.counts.link_errors, 1);
    e.post(Actor::Client(1), four_words(2), 20);
    run(&mut e);
    assert_ne!(data_words(&e), vec![0; 4]);
    assert_eq!(e.chaos.counts.link_errors, 1);
}

#[test]
fn requests_outstanding_when_their_queue_pair_fails_complete_with_errors() {
    let (mut flushed, mut executed) = (0, 0);
    for seed in 0..40 {
        let mut e = engine(SystemKind::Nessie, Chaos::NONE, seed);
        // The queue pair fails right after the post, before the request
        // reaches node 1.
        e.net.link_failures.push(crate::nic::LinkFailure {
            actor: Actor::Client(0),
            node: 1,
            at: 1,
            until: 1_000_000,
        });
        e.post(Actor::Client(0), four_words(1), 0);
        run(&mut e);
        assert_eq!(e.chaos.counts.link_errors, 1, "seed {seed}");
        if data_words(&e) == vec![0; 4] {
            flushed += 1;
        } else {
            executed += 1;
        }
    }
    assert!(
        flushed > 5 && executed > 5,
        "{flushed} flushed, {executed} on the wire"
    );
}

#[test]
fn an_event_past_the_horizon_stays_queued() {
    let mut e = engine(SystemKind::Nessie, Chaos::NONE, 1);
    e.events.horizon = 100;
    e.events.schedule(200, Ev::Poll(0));
    assert!(e.next_event().is_none());
    assert_eq!(e.events.now, 100);
    e.events.horizon = 300;
    assert!(matches!(e.next_event(), Some((200, Ev::Poll(0)))));
}

#[test]
fn the_rare_fates_come_from_their_own_rates_and_nothing_at_zero() {
    let mut d = Dice::new(11);
    assert!((0..1_000).all(|_| d.rare_fate(&Chaos::NONE).is_none()));
    for (chaos, fault) in [
        (
            Chaos {
                vanish_permille: 1_000,
                ..Chaos::NONE
            },
            TransportFault::Vanish,
        ),
        (
            Chaos {
                duplicate_write_permille: 1_000,
                ..Chaos::NONE
            },
            TransportFault::DuplicateWrite,
        ),
    ] {
        assert_eq!(d.rare_fate(&chaos), Some(fault));
        // The main dice never draw them.
        assert_eq!(d.fate(&chaos), None, "{fault}");
        assert_eq!(chaos.kinds().len(), 1, "{fault}");
        assert_eq!(chaos.without(chaos.kinds()[0]), Chaos::NONE, "{fault}");
    }
}

#[test]
fn a_vanished_request_never_executes_and_never_completes() {
    let chaos = Chaos {
        vanish_permille: 1_000,
        ..Chaos::NONE
    };
    let mut e = engine(SystemKind::Nessie, chaos, 2);
    let wr = WorkRequest {
        id: OpId(1),
        op: cas(8, 0, 42),
    };
    e.post(Actor::Client(0), wr, 0);
    let events = run(&mut e);
    assert!(events.is_empty(), "{events:?}");
    assert_eq!(e.cluster.mem.word(NodeId(1), Region::Index, 8).unwrap(), 0);
    assert_eq!(e.chaos.counts.vanished, 1);
}

/// A duplicated WRITE executes, completes once, and its copy executes once
/// more after it, by its landing deadline (A2) or, past it, is refused: the
/// test zeroes the words after the original lands, and the copy writes them
/// again.
#[test]
fn a_duplicated_write_completes_once_and_lands_again_by_its_landing_deadline() {
    use nessie_check::memory::{InFlight, WordOrder};
    let (mut again, mut refused) = (0, 0);
    for seed in 0..100 {
        let chaos = Chaos {
            duplicate_write_permille: 1_000,
            ..Chaos::NONE
        };
        let mut e = engine(SystemKind::Nessie, chaos, seed);
        let m = margin(&e);
        e.post(Actor::Client(0), four_words(1), 0);
        let (mut landings, mut completions) = (Vec::new(), 0);
        while let Some((at, ev)) = e.next_event() {
            let before = data_words(&e);
            e.handle(at, ev);
            if matches!(ev, Ev::Complete(_)) {
                completions += 1;
            }
            if data_words(&e) != before {
                landings.push(at);
                // Clear the words so that the copy shows when it lands.
                let zero = WorkRequest {
                    id: OpId(99),
                    op: Op::Write {
                        addr: RemoteAddr::data(NodeId(1), 64),
                        data: vec![0; 32],
                    },
                };
                InFlight::new(zero, at)
                    .run_to_end(&mut e.cluster.mem, NodeId(0), WordOrder::Ascending)
                    .unwrap();
            }
        }
        assert_eq!(completions, 1, "seed {seed}: one completion");
        assert_eq!(e.chaos.counts.duplicate_writes, 1);
        match landings.as_slice() {
            [_, copy] => {
                assert!(*copy <= m, "seed {seed}: the copy landed past A2 at {copy}");
                assert_eq!(e.chaos.counts.duplicates_landed, 1);
                again += 1;
            }
            [_] => {
                assert_eq!(e.chaos.counts.landing_deadline_refusals, 1, "seed {seed}");
                refused += 1;
            }
            other => panic!("seed {seed}: {other:?}"),
        }
    }
    assert!(again > 50, "most copies land: {again} (refused {refused})");
}

#[test]
fn a_duplicated_cas_or_read_executes_once() {
    let chaos = Chaos {
        duplicate_write_permille: 1_000,
        ..Chaos::NONE
    };
    let mut e = engine(SystemKind::Nessie, chaos, 4);
    let wr = WorkRequest {
        id: OpId(1),
        op: cas(8, 0, 42),
    };
    e.post(Actor::Client(0), wr, 0);
    run(&mut e);
    assert_eq!(e.cluster.mem.word(NodeId(1), Region::Index, 8).unwrap(), 42);
    assert_eq!(e.chaos.counts.duplicate_writes, 0);
}

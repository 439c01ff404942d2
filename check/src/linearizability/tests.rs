//! Tests of the checker: small stories, a differential test against a
//! brute-force checker (with the broken reductions it must catch; the
//! generic search of [`crate::wgl`] is held to the same brute force), and
//! large generated histories with a known verdict.

use super::*;

fn ev(client: usize, request: Request, ret: Ret, invoke: u64, response: u64) -> Event {
    Event {
        client,
        request,
        ret,
        invoke,
        response,
    }
}

/// A GET of the stories' key, `k`.
fn get() -> Request {
    Request::Get(b"k".to_vec())
}

/// A DELETE of `k`.
fn del() -> Request {
    Request::Delete(b"k".to_vec())
}

/// A PUT of `v` under `k`.
fn put(v: &str) -> Request {
    Request::Put(b"k".to_vec(), v.as_bytes().to_vec())
}

fn got(v: &str) -> Ret {
    Ok(Response::Get(Some(v.as_bytes().to_vec())))
}

#[test]
fn sequential_history_is_linearizable() {
    let h = vec![
        ev(0, put("a"), Ok(Response::Put(false)), 0, 1),
        ev(0, get(), got("a"), 2, 3),
        ev(0, del(), Ok(Response::Delete(true)), 4, 5),
        ev(0, get(), Ok(Response::Get(None)), 6, 7),
    ];
    assert_eq!(check_history(&h, 10_000), Ok(4));
}

#[test]
fn stale_read_is_caught() {
    let h = vec![
        ev(0, put("a"), Ok(Response::Put(false)), 0, 1),
        ev(0, put("b"), Ok(Response::Put(true)), 2, 3),
        ev(1, get(), got("a"), 4, 5),
    ];
    assert!(check_history(&h, 10_000).is_err());
}

#[test]
fn lost_write_is_caught() {
    let h = vec![
        ev(0, put("a"), Ok(Response::Put(false)), 0, 1),
        ev(1, get(), Ok(Response::Get(None)), 2, 3),
    ];
    assert!(check_history(&h, 10_000).is_err());
}

#[test]
fn value_never_written_is_caught() {
    let h = vec![ev(1, get(), got("zz"), 0, 1)];
    assert!(check_history(&h, 10_000).is_err());
}

#[test]
fn concurrent_operations_may_take_effect_in_either_order() {
    let h = vec![
        ev(0, put("a"), Ok(Response::Put(true)), 0, 5),
        ev(1, put("b"), Ok(Response::Put(false)), 1, 6),
        ev(2, get(), got("a"), 7, 8),
    ];
    assert!(check_history(&h, 10_000).is_ok(), "b then a");
    let h = vec![
        ev(0, put("a"), Ok(Response::Put(false)), 0, 5),
        ev(1, put("b"), Ok(Response::Put(true)), 1, 6),
        ev(2, get(), got("b"), 7, 8),
    ];
    assert!(check_history(&h, 10_000).is_ok(), "a then b");
}

#[test]
fn failed_writes_may_or_may_not_apply() {
    let applied = vec![
        ev(0, put("a"), Err(Failure::Unknown), 0, 1),
        ev(1, get(), got("a"), 2, 3),
    ];
    assert!(check_history(&applied, 10_000).is_ok());
    let not_applied = vec![
        ev(0, put("a"), Err(Failure::Unknown), 0, 1),
        ev(1, get(), Ok(Response::Get(None)), 2, 3),
    ];
    assert!(check_history(&not_applied, 10_000).is_ok());
}

#[test]
fn wrong_existed_flag_is_caught() {
    let h = vec![ev(0, put("a"), Ok(Response::Put(true)), 0, 1)];
    assert!(check_history(&h, 10_000).is_err());
}

#[test]
fn keys_are_checked_independently() {
    let mut h = vec![ev(0, put("a"), Ok(Response::Put(false)), 0, 1)];
    let mut other = ev(1, get(), Ok(Response::Get(None)), 2, 3);
    other.request = Request::Get(b"other".to_vec());
    h.push(other);
    assert_eq!(check_history(&h, 10_000), Ok(2));
}

// ----- unknown outcomes: stories ---------------------------------------------

use super::prepare::{Broken, BROKEN};
use crate::synthetic::{self, Plant, Rng, Spec};

fn unknown(client: usize, op: Request, invoke: u64) -> Event {
    ev(client, op, Err(Failure::Unknown), invoke, invoke + 1)
}

fn with_broken<T>(b: Broken, f: impl FnOnce() -> T) -> T {
    BROKEN.with(|c| c.set(b));
    let out = f();
    BROKEN.with(|c| c.set(Broken::No));
    out
}

#[test]
fn an_unread_unknown_put_can_still_be_what_makes_existed_true() {
    let h = vec![
        unknown(0, put("a"), 0),
        ev(1, del(), Ok(Response::Delete(true)), 2, 3),
    ];
    assert_eq!(check_history(&h, 1000), Ok(2));
    // Teeth: dropping unread unknown PUTs outright rejects this history.
    let broken = with_broken(Broken::DropUnread, || check_history(&h, 1000));
    assert!(broken.is_err_and(|e| e.is_violation()));
}

#[test]
fn an_unknown_write_takes_effect_at_most_once() {
    let h = vec![
        unknown(0, put("a"), 0),
        ev(1, del(), Ok(Response::Delete(true)), 2, 3),
        ev(1, del(), Ok(Response::Delete(true)), 4, 5),
    ];
    assert!(check_history(&h, 1000).is_err_and(|e| e.is_violation()));
    let broken = with_broken(Broken::ReuseMembers, || check_history(&h, 1000));
    assert_eq!(broken, Ok(3), "the broken variant passes it");
    // Two unknown PUTs explain two presences.
    let mut two = h.clone();
    two.push(unknown(2, put("b"), 1));
    assert_eq!(check_history(&two, 1000), Ok(4));
}

#[test]
fn unknown_deletes_explain_not_found_only_after_their_invocation() {
    let ok = vec![
        ev(0, put("a"), Ok(Response::Put(false)), 0, 1),
        unknown(1, del(), 2),
        ev(2, get(), Ok(Response::Get(None)), 4, 5),
    ];
    assert!(check_history(&ok, 1000).is_ok());
    let late = vec![
        ev(0, put("a"), Ok(Response::Put(false)), 0, 1),
        ev(2, get(), Ok(Response::Get(None)), 2, 3),
        unknown(1, del(), 4),
    ];
    assert!(check_history(&late, 1000).is_err_and(|e| e.is_violation()));
}

#[test]
fn a_read_value_pins_its_unknown_write_before_the_read() {
    let h = vec![
        unknown(0, put("a"), 0),
        ev(1, put("b"), Ok(Response::Put(false)), 2, 3),
        ev(2, get(), got("a"), 4, 5),
    ];
    // a after b, before the GET: b saw the key absent, fine.
    assert!(check_history(&h, 1000).is_ok());
    // But a PUT that completed after a's read and before another read of a
    // cannot be skipped.
    let mut stale = h.clone();
    stale.push(ev(1, put("c"), Ok(Response::Put(true)), 6, 7));
    stale.push(ev(2, get(), got("a"), 8, 9));
    assert!(check_history(&stale, 1000).is_err_and(|e| e.is_violation()));
    // A read of a value whose only write was invoked after the read returned.
    let future = vec![ev(2, get(), got("a"), 0, 1), unknown(0, put("a"), 2)];
    let e = check_history(&future, 1000).unwrap_err();
    assert!(e.to_string().contains("before it was invoked"), "{e}");
}

#[test]
fn not_committed_operations_are_left_out_and_so_checked() {
    let h = vec![
        ev(0, put("a"), Err(Failure::NotCommitted), 0, 1),
        ev(1, get(), got("a"), 2, 3),
    ];
    // A write that claimed to commit nothing but was read back.
    assert!(check_history(&h, 1000).is_err_and(|e| e.is_violation()));
    let report = check(&h[..1], &CheckConfig::default());
    assert_eq!((report.not_committed, report.checked), (1, 0));
}

#[test]
fn a_search_out_of_steps_is_inconclusive_not_a_violation() {
    let h = vec![
        ev(0, put("a"), Ok(Response::Put(false)), 0, 10),
        ev(1, put("b"), Ok(Response::Put(true)), 1, 11),
        ev(2, get(), got("b"), 12, 13),
    ];
    let e = check_history(&h, 1).unwrap_err();
    assert!(matches!(e, CheckError::Inconclusive(_)), "{e}");
    assert!(!e.is_violation());
    assert_eq!(check_history(&h, 100), Ok(3));
}

#[test]
fn thousands_of_unknown_writes_on_one_key_are_cheap() {
    // A node down: 3,000 writes of unknown outcome on one key, none of which
    // took effect, between a known PUT and reads of its value.
    let mut h = vec![ev(0, put("before"), Ok(Response::Put(false)), 0, 1)];
    let mut t = 2;
    for i in 0..3000 {
        let op = if i % 3 == 0 {
            del()
        } else {
            put(&format!("lost-{i}"))
        };
        h.push(ev(i % 12, op, Err(Failure::Unknown), t, t + 1));
        t += 2;
    }
    h.push(ev(0, get(), got("before"), t, t + 1));
    h.push(ev(0, put("after"), Ok(Response::Put(true)), t + 2, t + 3));
    let report = check(&h, &CheckConfig::steps(10_000));
    assert!(report.is_linearizable(), "{report}");
    assert_eq!(report.unknown, 3000);
    assert!(report.steps < 100, "{report}");
}

// ----- program order at timestamp ties ---------------------------------------

/// The tie the cluster simulator used to record: client 0's GET starts at
/// the instant its PUT returned. Real time alone calls the two concurrent and
/// accepts the stale read; the client's program order rejects it.
#[test]
fn a_clients_stale_read_of_its_own_write_at_a_tie_is_caught() {
    let own = vec![
        ev(0, put("a"), Ok(Response::Put(false)), 0, 10),
        ev(0, get(), Ok(Response::Get(None)), 10, 20),
    ];
    let err = check_history(&own, 1000).expect_err("read-your-writes at a tie");
    assert!(err.is_violation(), "{err}");
    // The same stamps from two clients are concurrent: no false alarm.
    let other = vec![
        ev(0, put("a"), Ok(Response::Put(false)), 0, 10),
        ev(1, get(), Ok(Response::Get(None)), 10, 20),
    ];
    assert_eq!(check_history(&other, 1000), Ok(2));
    // Ignoring program order (the broken variant) accepts the stale read.
    let blind = with_broken(Broken::NoProgramOrder, || check_history(&own, 1000));
    assert_eq!(blind, Ok(2));
}

/// A DELETE followed at a tie by the same client's GET that still sees the
/// value.
#[test]
fn a_read_after_ones_own_delete_at_a_tie_is_caught() {
    let h = vec![
        ev(0, put("a"), Ok(Response::Put(false)), 0, 5),
        ev(0, del(), Ok(Response::Delete(true)), 5, 10),
        ev(0, get(), got("a"), 10, 10),
    ];
    assert!(check_history(&h, 1000).expect_err("stale").is_violation());
}

/// Two DELETEs that found the key present are twins (only the one that
/// responds first is tried), unless one has a program successor at a tie:
/// here only L (client 2), not X (client 1), can go first, because L's
/// successor, a PUT that found the key absent, must sit between them.
/// Exchanging the tied twin anyway is a false alarm.
#[test]
fn a_twin_with_a_successor_at_a_tie_is_never_exchanged() {
    let h = vec![
        ev(0, put("a"), Ok(Response::Put(false)), 0, 1),
        ev(1, del(), Ok(Response::Delete(true)), 2, 10),
        ev(2, del(), Ok(Response::Delete(true)), 3, 10),
        ev(2, put("b"), Ok(Response::Put(false)), 10, 12),
    ];
    assert!(brute_force(&h));
    assert_eq!(check_history(&h, 1000), Ok(4));
    let swapped = with_broken(Broken::SwapTiedTwins, || check_history(&h, 1000));
    assert!(swapped.is_err(), "the broken exchange rejects it");
}

/// Operations of one client that overlap are a recorder bug: the history is
/// malformed, neither a pass nor a violation.
#[test]
fn overlapping_operations_of_one_client_are_malformed() {
    let h = vec![
        ev(0, put("a"), Ok(Response::Put(false)), 0, 10),
        ev(0, get(), got("a"), 5, 20),
    ];
    let report = check(&h, &CheckConfig::default());
    assert!(
        matches!(report.verdict, Verdict::Malformed(ref m) if m.contains("overlap")),
        "{report}"
    );
    assert!(matches!(
        check_history(&h, 1000),
        Err(CheckError::Malformed(_))
    ));
}

/// A range scan ties keys together, which a per-key check cannot see: a
/// history with one is refused as malformed (it belongs to the range-aware
/// checker, `crate::ordered`), never checked key by key as if it passed.
#[test]
fn a_history_with_a_scan_is_refused_by_the_per_key_checker() {
    let scan = Request::Scan {
        from: b"k".to_vec(),
        to: None,
        limit: 2,
    };
    let h = vec![
        ev(0, put("a"), Ok(Response::Put(false)), 0, 1),
        ev(1, scan, Ok(Response::Scan(vec![])), 2, 3),
    ];
    let report = check(&h, &CheckConfig::default());
    assert!(
        matches!(report.verdict, Verdict::Malformed(ref m) if m.contains("range scan")),
        "{report}"
    );
}

// ----- refused for want of room ------------------------------------------------

/// `TableFull` promises the key was absent and nothing was written: a PUT
/// of a present key that answers "full" is a violation, a refused PUT's
/// value never appears, and a refusal of an absent key passes.
#[test]
fn a_put_refused_as_full_must_have_met_the_key_absent() {
    let refused_present = vec![
        ev(0, put("a"), Ok(Response::Put(false)), 0, 1),
        ev(1, put("b"), Err(Failure::Full), 2, 3),
    ];
    let err = check_history(&refused_present, 1000).expect_err("key present");
    assert!(err.is_violation(), "{err}");
    let excused = with_broken(Broken::FullExcused, || {
        check_history(&refused_present, 1000)
    });
    assert_eq!(excused, Ok(1), "as 'not committed' it was a free pass");
    let wrote_anyway = vec![
        ev(0, put("b"), Err(Failure::Full), 0, 1),
        ev(1, get(), got("b"), 2, 3),
    ];
    assert!(check_history(&wrote_anyway, 1000).is_err());
    let honest = vec![
        ev(0, put("b"), Err(Failure::Full), 0, 1),
        ev(1, get(), Ok(Response::Get(None)), 2, 3),
        ev(1, put("c"), Ok(Response::Put(false)), 4, 5),
    ];
    assert_eq!(check_history(&honest, 1000), Ok(3));
}

// ----- differential test against a brute-force checker -----------------------

/// Whether one key's history is linearizable, by trying every subset of its
/// unknown writes and every order that respects real time.
///
/// Program order: an operation of a client that completed with a known
/// result must follow the client's earlier operations that did (each
/// client's operations, by invocation, are its program).
fn brute_force(events: &[Event]) -> bool {
    let evs: Vec<&Event> = events
        .iter()
        .filter(|e| {
            !matches!(
                (&e.request, &e.ret),
                (Request::Get(_), Err(Failure::Unknown))
            )
        })
        .filter(|e| e.ret != Err(Failure::NotCommitted))
        .collect();
    let unknown: Vec<usize> = (0..evs.len())
        .filter(|&i| evs[i].ret == Err(Failure::Unknown))
        .collect();
    (0u32..1 << unknown.len()).any(|mask| {
        let chosen: Vec<&Event> = (0..evs.len())
            .filter(|i| {
                unknown
                    .iter()
                    .position(|u| u == i)
                    .is_none_or(|b| mask & (1 << b) != 0)
            })
            .map(|i| evs[i])
            .collect();
        orders(&chosen, &mut vec![false; chosen.len()], None)
    })
}

fn orders(ops: &[&Event], placed: &mut Vec<bool>, state: Option<Vec<u8>>) -> bool {
    if placed.iter().all(|&p| p) {
        return true;
    }
    let end = |e: &Event| {
        if e.ret == Err(Failure::Unknown) {
            u64::MAX
        } else {
            e.response
        }
    };
    for x in 0..ops.len() {
        if placed[x] {
            continue;
        }
        let known = |e: &Event| e.ret != Err(Failure::Unknown);
        // (The events are in recording order, which is program order where
        // a client's stamps tie exactly.)
        let program_before = |y: usize, x: usize| {
            let (ey, ex) = (ops[y], ops[x]);
            ey.client == ex.client
                && known(ey)
                && known(ex)
                && (ey.invoke, ey.response, y) < (ex.invoke, ex.response, x)
        };
        let blocked = (0..ops.len())
            .any(|y| y != x && !placed[y] && (end(ops[y]) < ops[x].invoke || program_before(y, x)));
        if blocked {
            continue;
        }
        let next = match (&ops[x].request, &ops[x].ret) {
            (Request::Get(_), Ok(Response::Get(v))) => (*v == state).then(|| state.clone()),
            (Request::Put(..), Err(Failure::Full)) => state.is_none().then_some(None),
            (Request::Put(_, v), Ok(Response::Put(e))) => {
                (*e == state.is_some()).then(|| Some(v.clone()))
            }
            (Request::Delete(_), Ok(Response::Delete(e))) => {
                (*e == state.is_some()).then_some(None)
            }
            (Request::Put(_, v), Err(Failure::Unknown)) => Some(Some(v.clone())),
            (Request::Delete(_), Err(Failure::Unknown)) => Some(None),
            _ => None,
        };
        if let Some(s) = next {
            placed[x] = true;
            let found = orders(ops, placed, s);
            placed[x] = false;
            if found {
                return true;
            }
        }
    }
    false
}

/// A random history of up to 7 operations on one key, over three values
/// (so values repeat): half the time the results of a random execution,
/// perturbed with probability 0.3; otherwise random results.
///
/// Half the histories have one client per operation and distinct stamps;
/// the other half have one to three sequential clients whose stamps tie
/// often (an operation invoked at the instant its client's previous one
/// returned, zero-length operations, other clients' stamps equal), so that
/// program order decides what real time cannot.
fn small_history(rng: &mut Rng) -> Vec<Event> {
    let n = 1 + rng.below(7) as usize;
    let values = ["a", "b", "c"];
    let mut ops: Vec<(Request, u64, u64, bool)> = Vec::new();
    let mut clients: Vec<usize> = Vec::new();
    let sequential = rng.below(2) == 0;
    if sequential {
        let k = 1 + rng.below(3) as usize;
        let mut clock = vec![0u64; k];
        for _ in 0..n {
            let c = rng.below(k as u64) as usize;
            let a = clock[c] + rng.below(2);
            let b = a + rng.below(3);
            clock[c] = b;
            let op = match rng.below(3) {
                0 => get(),
                1 => put(values[rng.below(3) as usize]),
                _ => del(),
            };
            let unknown = op.is_write() && rng.below(100) < 40;
            ops.push((op, a, b, unknown));
            clients.push(c);
        }
    } else {
        let mut times: Vec<u64> = (0..2 * n as u64).collect();
        for i in (1..times.len()).rev() {
            let j = rng.below(i as u64 + 1) as usize;
            times.swap(i, j);
        }
        for i in 0..n {
            let (a, b) = (times[2 * i], times[2 * i + 1]);
            let op = match rng.below(3) {
                0 => get(),
                1 => put(values[rng.below(3) as usize]),
                _ => del(),
            };
            let unknown = op.is_write() && rng.below(100) < 40;
            ops.push((op, a.min(b), a.max(b), unknown));
            clients.push(i);
        }
    }
    // Sort by invocation, keeping each client's program order (stable).
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| ops[i].1);
    let ops: Vec<(Request, u64, u64, bool)> = order.iter().map(|&i| ops[i].clone()).collect();
    let clients: Vec<usize> = order.iter().map(|&i| clients[i]).collect();
    let random_results = rng.below(2) == 0;
    let mut rets = vec![Err(Failure::Unknown); n];
    // An execution: effect points inside the intervals (a zero-length
    // operation at its instant), in program order at ties.
    let mut points: Vec<(u64, usize)> = ops
        .iter()
        .enumerate()
        .map(|(i, o)| (2 * o.1 + rng.below(2 * (o.2 - o.1) + 1), i))
        .collect();
    points.sort_unstable();
    let mut state: Option<Vec<u8>> = None;
    for &(_, i) in &points {
        let (op, _, _, unknown) = &ops[i];
        if *unknown && rng.below(2) == 0 {
            continue;
        }
        let r = match op {
            Request::Get(_) | Request::Scan { .. } => Ok(Response::Get(state.clone())),
            // Now and then a PUT of an absent key is refused: index full.
            Request::Put(..) if state.is_none() && rng.below(8) == 0 => Err(Failure::Full),
            Request::Put(_, v) => Ok(Response::Put(state.replace(v.clone()).is_some())),
            Request::Delete(_) => Ok(Response::Delete(state.take().is_some())),
        };
        if !unknown {
            rets[i] = r;
        }
    }
    for (i, o) in ops.iter().enumerate() {
        if o.3 {
            continue;
        }
        let perturb = random_results || rng.below(10) < 3;
        if perturb {
            rets[i] = match &o.0 {
                Request::Get(_) if rng.below(4) == 0 => Ok(Response::Get(None)),
                Request::Get(_) | Request::Scan { .. } => {
                    Ok(Response::Get(Some(values[rng.below(3) as usize].into())))
                }
                Request::Put(..) if rng.below(6) == 0 => Err(Failure::Full),
                Request::Put(..) => Ok(Response::Put(rng.below(2) == 0)),
                Request::Delete(_) => Ok(Response::Delete(rng.below(2) == 0)),
            };
        }
    }
    ops.into_iter()
        .zip(rets)
        .zip(clients)
        .map(|(((op, a, b, _), ret), c)| ev(c, op, ret, a, b))
        .collect()
}

/// Histories (of `cases`) on which `decide` and brute force disagree, and
/// how many brute force finds linearizable.
fn disagreements_of(cases: usize, seed: u64, decide: impl Fn(&[Event]) -> bool) -> (usize, usize) {
    let mut rng = Rng::new(seed);
    let (mut wrong, mut linearizable) = (0, 0);
    for _ in 0..cases {
        let h = small_history(&mut rng);
        let truth = brute_force(&h);
        linearizable += usize::from(truth);
        if decide(&h) != truth {
            wrong += 1;
        }
    }
    (wrong, linearizable)
}

/// Histories (of `cases`) on which the checker and brute force disagree.
fn disagreements(cases: usize, seed: u64) -> (usize, usize) {
    disagreements_of(cases, seed, |h| match check_history(h, 1_000_000) {
        Ok(_) => true,
        Err(CheckError::NotLinearizable(_)) => false,
        Err(e) => panic!("a 7-operation history is inconclusive: {e}"),
    })
}

#[test]
fn agrees_with_brute_force_on_random_small_histories() {
    let (wrong, linearizable) = disagreements(20_000, 1);
    assert_eq!(wrong, 0);
    assert!(
        (4_000..16_000).contains(&linearizable),
        "both verdicts are exercised: {linearizable} of 20000 linearizable"
    );
}

#[test]
fn teeth_the_differential_test_catches_each_broken_reduction() {
    for b in [
        Broken::DropUnread,
        Broken::ReuseMembers,
        Broken::NoProgramOrder,
        Broken::FullExcused,
    ] {
        let (wrong, _) = with_broken(b, || disagreements(20_000, 1));
        assert!(wrong > 0, "{b:?} must disagree with brute force somewhere");
    }
}

/// One key as a register: the generic search's specification of a key of
/// a key-value history.
struct Register;

impl crate::wgl::Spec for Register {
    type State = Option<Vec<u8>>;
    type Op = Event;
    fn step(&self, state: &Option<Vec<u8>>, e: &Event) -> Option<Option<Vec<u8>>> {
        match (&e.request, &e.ret) {
            (Request::Get(_), Ok(Response::Get(v))) => (v == state).then(|| state.clone()),
            (Request::Put(..), Err(Failure::Full)) => state.is_none().then_some(None),
            (Request::Put(_, v), Ok(Response::Put(existed))) => {
                (*existed == state.is_some()).then(|| Some(v.clone()))
            }
            (Request::Delete(_), Ok(Response::Delete(existed))) => {
                (*existed == state.is_some()).then_some(None)
            }
            (Request::Put(_, v), Err(Failure::Unknown)) => Some(Some(v.clone())),
            (Request::Delete(_), Err(Failure::Unknown)) => Some(None),
            _ => None,
        }
    }
}

/// One key's history decided by the generic search ([`crate::wgl`]) with
/// the register specification; `program_order`: each known operation
/// follows its client's previous known one (the recorder's ties).
fn generic(events: &[Event], program_order: bool) -> bool {
    let evs: Vec<&Event> = events
        .iter()
        .filter(|e| {
            !matches!(
                (&e.request, &e.ret),
                (Request::Get(_), Err(Failure::Unknown))
            )
        })
        .filter(|e| e.ret != Err(Failure::NotCommitted))
        .collect();
    let known = |e: &Event| e.ret != Err(Failure::Unknown);
    let mut timed: Vec<crate::wgl::Timed<'_, Event>> = evs
        .iter()
        .map(|e| crate::wgl::Timed {
            op: *e,
            invoke: e.invoke,
            response: known(e).then_some(e.response),
            after: None,
        })
        .collect();
    if program_order {
        let mut by_client: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for (i, e) in evs.iter().enumerate().filter(|(_, e)| known(e)) {
            by_client.entry(e.client).or_default().push(i);
        }
        for mut idx in by_client.into_values() {
            idx.sort_by_key(|&i| (evs[i].invoke, evs[i].response, i));
            for w in idx.windows(2) {
                timed[w[1]].after = Some(w[0]);
            }
        }
    }
    match crate::wgl::search(&Register, None, &timed, 1_000_000) {
        Ok(_) => true,
        Err(crate::wgl::Failure::NoLinearization) => false,
        Err(e) => panic!("a 7-operation history is inconclusive: {e}"),
    }
}

/// The generic search, with a register for its specification, agrees with
/// brute force too (so the per-key checker, the Cell checker's search and
/// the model's check answer to one reference); without program order it
/// does not (the ties decide).
#[test]
fn the_generic_search_agrees_with_brute_force_and_needs_program_order() {
    let (wrong, _) = disagreements_of(20_000, 1, |h| generic(h, true));
    assert_eq!(wrong, 0);
    let (wrong, _) = disagreements_of(20_000, 1, |h| generic(h, false));
    assert!(
        wrong > 0,
        "ties without program order must disagree somewhere"
    );
}

// ----- large generated histories with a known verdict ------------------------

fn verdict_of(h: &[Event]) -> CheckReport {
    let report = check(h, &CheckConfig::default());
    eprintln!("{report}");
    report
}

#[test]
fn large_histories_with_many_unknown_outcomes_have_known_verdicts() {
    for spec in [
        Spec::node_down(20_000, 16, 3),
        Spec::new(20_000, 16, 10, 4),
        Spec::node_down(20_000, 2, 5),
    ] {
        let h = synthetic::linearizable(&spec);
        let report = verdict_of(&h);
        assert!(report.is_linearizable(), "{spec:?}: {report}");
        assert!(
            report.unknown >= 1_000,
            "{spec:?}: many unknown outcomes: {report}"
        );
        for plant in [Plant::StaleRead, Plant::FutureRead] {
            let mut bad = h.clone();
            let at = synthetic::plant_violation(&mut bad, plant, 9).expect("a place to plant");
            let report = verdict_of(&bad);
            match &report.verdict {
                Verdict::NotLinearizable(v) => {
                    assert_eq!(v.key, bad[at].key(), "{plant:?}: the planted key");
                }
                other => panic!("{spec:?} {plant:?}: {other:?}"),
            }
        }
    }
}

/// With PUT answers free (`CheckConfig::put_existence` off, RACE's
/// histories), two racing inserts that both answer "new" pass, and what
/// the writes did is still held to account: a stale read and a lost write
/// are rejected as before.
#[test]
fn put_answers_free_still_rejects_stale_reads_and_lost_writes() {
    let free = CheckConfig {
        put_existence: false,
        ..CheckConfig::steps(10_000)
    };
    let racing_inserts = vec![
        ev(0, put("a"), Ok(Response::Put(false)), 0, 3),
        ev(1, put("b"), Ok(Response::Put(false)), 1, 4),
        ev(2, get(), got("b"), 5, 6),
    ];
    assert!(check_history(&racing_inserts, 10_000).is_err());
    assert_eq!(check_history_with(&racing_inserts, &free), Ok(3));
    let stale = vec![
        ev(0, put("a"), Ok(Response::Put(false)), 0, 1),
        ev(0, put("b"), Ok(Response::Put(true)), 2, 3),
        ev(1, get(), got("a"), 4, 5),
    ];
    assert!(check_history_with(&stale, &free).is_err_and(|e| e.is_violation()));
    let lost = vec![
        ev(0, put("a"), Ok(Response::Put(false)), 0, 1),
        ev(1, get(), Ok(Response::Get(None)), 2, 3),
    ];
    assert!(check_history_with(&lost, &free).is_err_and(|e| e.is_violation()));
}

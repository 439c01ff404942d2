//! The claim of a registry word, checked exhaustively: a process claims a
//! word, every request of its claim meeting every fate of the fault
//! vocabulary (answered, failed before executing, executed then failed,
//! lost, error first and landing later, duplicated; an 8-byte word cannot
//! tear, and a paused fabric is the interleaving), landing and answering in
//! every order, with time passing between any two steps, while another
//! process's claim may land on the word at any instant. A claim that ends
//! holding the word holds a word that names it (once its own requests
//! landed) and names it for good: only a CAS from free writes the word. As
//! every claimant is this machine, two of them can never both hold one
//! word (the product of two claimants is too large to explore whole; this
//! is the property each contributes). The switch `trust_failed_cas` is
//! shown to break it.

use std::collections::HashSet;
use std::time::Duration;

use super::*;
use crate::addr::NodeId;

const ROUND: u64 = 10;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Fate {
    Answered,
    FailedBefore,
    ExecutedThenFailed,
    Lost,
    Late,
    Duplicated,
}

const FATES: [Fate; 6] = [
    Fate::Answered,
    Fate::FailedBefore,
    Fate::ExecutedThenFailed,
    Fate::Lost,
    Fate::Late,
    Fate::Duplicated,
];

/// A posted request: landings still to come, and its answer once due.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Req {
    who: usize,
    id: OpId,
    op: Op,
    fate: Fate,
    lands_left: u8,
    answer: Option<Result<OpOutput, FabricError>>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct State {
    word: u64,
    /// Whether the other process's claim landed already.
    other_landed: bool,
    now: u64,
    machines: Vec<ClaimMachine>,
    reqs: Vec<Req>,
}

fn word_addr() -> RemoteAddr {
    RemoteAddr {
        node: NodeId(0),
        region: Region::Data,
        offset: 0,
    }
}

fn execute(word: &mut u64, op: &Op) -> OpOutput {
    match op {
        Op::Cas { expect, new, .. } => {
            let previous = *word;
            if previous == *expect {
                *word = *new;
            }
            OpOutput::Cas { previous }
        }
        Op::Read { .. } => OpOutput::Read(word.to_le_bytes().to_vec()),
        other => panic!("a claim posts only CAS and READ, not {other:?}"),
    }
}

fn post(st: &State, who: usize, wr: WorkRequest) -> Vec<State> {
    FATES
        .iter()
        .map(|&fate| {
            let mut s = st.clone();
            let err = Some(Err(FabricError::Timeout));
            let (lands_left, answer) = match fate {
                Fate::Answered | Fate::ExecutedThenFailed => (1, None),
                Fate::FailedBefore | Fate::Late => (u8::from(fate == Fate::Late), err),
                Fate::Lost => (0, None),
                Fate::Duplicated => (2, None),
            };
            s.reqs.push(Req {
                who,
                id: wr.id,
                op: wr.op.clone(),
                fate,
                lands_left,
                answer,
            });
            s
        })
        .collect()
}

/// Every state one step from `st`.
fn successors(st: &State) -> Vec<State> {
    let mut out = Vec::new();
    let now = Nanos(st.now);
    for who in 0..st.machines.len() {
        let mut s = st.clone();
        match s.machines[who].poll(now) {
            ClaimPoll::Post(wr) => out.extend(post(&s, who, wr)),
            // A poll that changed the machine (it gave a round up, or
            // finished) is a step of its own.
            _ if s != *st => out.push(s),
            _ => {}
        }
    }
    for i in 0..st.reqs.len() {
        let r = &st.reqs[i];
        if r.lands_left > 0 {
            let mut s = st.clone();
            let out_put = execute(&mut s.word, &r.op);
            let req = &mut s.reqs[i];
            req.lands_left -= 1;
            let first = match req.fate {
                Fate::Duplicated => req.lands_left == 1,
                _ => true,
            };
            if first {
                match req.fate {
                    Fate::Answered | Fate::Duplicated => req.answer = Some(Ok(out_put)),
                    Fate::ExecutedThenFailed => req.answer = Some(Err(FabricError::Timeout)),
                    _ => {}
                }
            }
            out.push(s);
        }
        if let Some(answer) = r.answer.clone() {
            let mut s = st.clone();
            let (who, id) = (r.who, r.id);
            s.machines[who].complete(Completion { id, result: answer });
            s.reqs[i].answer = None;
            out.push(s);
        }
    }
    if st.word == 0 && !st.other_landed {
        let mut s = st.clone();
        s.word = Registry::held_by(2);
        s.other_landed = true;
        out.push(s);
    }
    if st.machines.iter().any(|m| m.poll_timeout().is_some()) && st.now < 5 * ROUND {
        let mut s = st.clone();
        s.now += ROUND;
        out.push(s);
    }
    for s in &mut out {
        // A request with nothing left to land or answer (a lost one at
        // once) is gone.
        s.reqs.retain(|r| r.lands_left > 0 || r.answer.is_some());
    }
    out
}

/// Explores every state from a claimant of a word that starts as `start`
/// (another process's claim landing on it at any instant); returns the
/// states seen, or the first violation.
fn explore(start: u64, trust_failed_cas: bool) -> Result<usize, String> {
    let machines = (1..=1)
        .map(|holder| {
            let mut m = ClaimMachine::new(
                word_addr(),
                holder,
                Duration::from_nanos(4 * ROUND),
                Duration::from_nanos(ROUND),
            );
            m.set_trust_failed_cas(trust_failed_cas);
            m.set_max_requests(3);
            m
        })
        .collect();
    let first = State {
        word: start,
        other_landed: false,
        now: 0,
        machines,
        reqs: Vec::new(),
    };
    let mut seen = HashSet::new();
    let mut stack = vec![first];
    while let Some(st) = stack.pop() {
        if !seen.insert(st.clone()) {
            continue;
        }
        let held: Vec<u32> = st
            .machines
            .iter()
            .filter(|m| matches!(m.done, Some(Ok(()))))
            .map(|m| m.holder)
            .collect();
        let landings_left = st.reqs.iter().any(|r| r.lands_left > 0);
        if let [h] = held[..] {
            if !landings_left && st.word != Registry::held_by(h) {
                return Err(format!(
                    "holder {h} holds a word that names another: {st:?}"
                ));
            }
        }
        stack.extend(successors(&st));
    }
    Ok(seen.len())
}

#[test]
fn a_claim_of_a_free_word_holds_it_only_when_the_word_names_it() {
    let states = explore(0, false).unwrap();
    assert!(states > 1000, "explored {states} states");
    eprintln!("explored {states} states");
}

#[test]
fn a_word_another_process_holds_is_never_taken() {
    let states = explore(Registry::held_by(3), false).unwrap();
    assert!(states > 100, "explored {states} states");
}

#[test]
fn the_exploration_catches_a_claim_that_trusts_a_failed_cas() {
    let e = explore(Registry::held_by(3), true).unwrap_err();
    assert!(e.contains("holds a word that names another"), "{e}");
    let e = explore(0, true).unwrap_err();
    assert!(e.contains("names another"), "{e}");
}

#[test]
fn a_registry_lays_its_words_after_the_bytes_before_it() {
    let r = Registry::after(13, 3);
    let id = |index| ClientId {
        node: NodeId(2),
        index,
    };
    assert_eq!(r.word(id(0)).map(|a| a.offset), Some(16));
    assert_eq!(r.word(id(2)).map(|a| a.offset), Some(32));
    assert_eq!(r.word(id(3)), None, "past the registry: held otherwise");
    assert_eq!(r.end(), 40);
    assert_eq!(LeaseWord::decode(Registry::held_by(7)).holder, 7);
}

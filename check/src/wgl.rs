//! The one generic linearizability search: Wing and Gong's algorithm with
//! Lowe's memo of (linearized operations, state), the algorithm of
//! Porcupine and Knossos, over any sequential specification ([`Spec`]).
//!
//! Its specifications:
//! - an ordered map with range scans ([`crate::ordered`], Cell's histories:
//!   keys that scans tie together are searched as one map);
//! - a key-value map from a given initial state (the stateright model's
//!   exact check of a world's history, `nessie-model`'s `world_history`);
//! - one register with program order ([`crate::check`]'s
//!   reference in its differential test, beside a brute-force search).
//!
//! The per-key checker of long histories ([`crate::check`]) is
//! the same search specialised to a register: the configurations are
//! compressed (a frontier and a few holes), unknown writes are grouped into
//! interchangeable classes and reads that agree are placed without
//! branching, which is what lets it decide histories of millions of
//! operations; the differential test holds it to this search and to brute
//! force.
//!
//! An operation of unknown outcome (`response: None`) may take effect at
//! any instant after its invocation, or never. Real time orders `a` before
//! `b` when `a` responded strictly before `b` was invoked; `after` adds a
//! program order that real time cannot show (a client's operations whose
//! stamps tie).

use std::collections::HashSet;
use std::hash::Hash;

/// A sequential specification: what one operation does to the state, given
/// what it returned.
pub trait Spec {
    /// The object's state (hashed into the memo).
    type State: Clone + Eq + Hash;
    /// One recorded operation: its call and its result.
    type Op;
    /// The state after `op` takes effect in `state`, or `None` if its
    /// recorded result disagrees with `state` (an operation of unknown
    /// outcome: the effect it would have, for every state it applies in).
    fn step(&self, state: &Self::State, op: &Self::Op) -> Option<Self::State>;
}

/// One operation of a history as the search sees it.
#[derive(Debug)]
pub struct Timed<'a, O> {
    /// The operation.
    pub op: &'a O,
    /// When it was invoked.
    pub invoke: u64,
    /// When it responded (`None`: its outcome is unknown: it may take
    /// effect at any instant after `invoke`, or never).
    pub response: Option<u64>,
    /// An operation (its index in the slice) that must take effect before
    /// this one, beyond what real time says.
    pub after: Option<usize>,
}

/// Why the search found no linearization.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Failure {
    /// Every configuration was explored: none exists.
    #[error("no linearization exists")]
    NoLinearization,
    /// The step budget ran out first: inconclusive, not a verdict.
    #[error("search gave up after {0} steps")]
    Budget(u64),
}

/// Searches for a linearization of `ops` from `init` under `spec`, taking
/// at most `max_steps` steps. Returns the steps taken.
pub fn search<S: Spec>(
    spec: &S,
    init: S::State,
    ops: &[Timed<'_, S::Op>],
    max_steps: u64,
) -> Result<u64, Failure> {
    let n = ops.len();
    let response = |i: usize| ops[i].response.unwrap_or(u64::MAX);
    // Entries: (time, is_return, op). Calls precede returns at equal times
    // (an operation invoked when another responded is concurrent with it).
    let mut entries: Vec<(u64, bool, usize)> = Vec::with_capacity(2 * n);
    for (i, o) in ops.iter().enumerate() {
        entries.push((o.invoke, false, i));
        entries.push((response(i), true, i));
    }
    entries.sort_unstable();
    let m = entries.len();
    if m == 0 {
        return Ok(0);
    }
    // A doubly linked list over the entries, with a head sentinel at `m`;
    // `next == m` past the last entry means the end of the list.
    let end = m;
    let mut next: Vec<usize> = (1..=m).collect();
    next.push(0);
    let mut prev: Vec<usize> = (0..=m)
        .map(|i| if i == 0 || i == m { m } else { i - 1 })
        .collect();
    next[m] = 0;
    prev[0] = m;
    next[m - 1] = end;
    let mut call_at = vec![0usize; n];
    let mut ret_at = vec![0usize; n];
    for (pos, &(_, is_ret, i)) in entries.iter().enumerate() {
        if is_ret {
            ret_at[i] = pos;
        } else {
            call_at[i] = pos;
        }
    }
    let unlink = |next: &mut Vec<usize>, prev: &mut Vec<usize>, p: usize| {
        let (a, b) = (prev[p], next[p]);
        next[a] = b;
        if b != end {
            prev[b] = a;
        }
    };
    let relink = |next: &mut Vec<usize>, prev: &mut Vec<usize>, p: usize| {
        let (a, b) = (prev[p], next[p]);
        next[a] = p;
        if b != end {
            prev[b] = p;
        }
    };
    let mut linearized = Bits::new(n);
    let mut seen: HashSet<(Bits, S::State)> = HashSet::new();
    let mut stack: Vec<(usize, S::State)> = Vec::new();
    let mut state = init;
    let mut cur = next[m];
    let mut steps = 0u64;
    loop {
        steps += 1;
        if steps > max_steps {
            return Err(Failure::Budget(max_steps));
        }
        if cur == end {
            // Every entry left belongs to an operation of unknown outcome.
            return Ok(steps);
        }
        let (_, is_ret, op) = entries[cur];
        if !is_ret {
            let ready = ops[op].after.is_none_or(|p| linearized.get(p));
            let mut lifted = false;
            if let Some(ns) = ready.then(|| spec.step(&state, ops[op].op)).flatten() {
                let mut bits = linearized.clone();
                bits.set(op, true);
                if seen.insert((bits.clone(), ns.clone())) {
                    linearized = bits;
                    stack.push((op, std::mem::replace(&mut state, ns)));
                    unlink(&mut next, &mut prev, call_at[op]);
                    unlink(&mut next, &mut prev, ret_at[op]);
                    cur = next[m];
                    lifted = true;
                }
            }
            if !lifted {
                cur = next[cur];
            }
        } else if ops[op].response.is_none() {
            // An unknown operation's return: it may stay unlinearized.
            cur = next[cur];
        } else {
            // A return whose call is not linearized: backtrack.
            let Some((top, old)) = stack.pop() else {
                return Err(Failure::NoLinearization);
            };
            state = old;
            linearized.set(top, false);
            relink(&mut next, &mut prev, ret_at[top]);
            relink(&mut next, &mut prev, call_at[top]);
            cur = next[call_at[top]];
        }
    }
}

/// The set of linearized operations: one word, without allocating, for the
/// model's histories (at most 64 operations), words beyond.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Bits {
    Word(u64),
    Words(Vec<u64>),
}

impl Bits {
    fn new(n: usize) -> Bits {
        if n <= 64 {
            Bits::Word(0)
        } else {
            Bits::Words(vec![0; n.div_ceil(64)])
        }
    }

    fn get(&self, i: usize) -> bool {
        match self {
            Bits::Word(w) => w & (1 << i) != 0,
            Bits::Words(ws) => ws[i / 64] & (1 << (i % 64)) != 0,
        }
    }

    fn set(&mut self, i: usize, on: bool) {
        let (w, bit) = match self {
            Bits::Word(w) => (w, 1 << i),
            Bits::Words(ws) => (&mut ws[i / 64], 1 << (i % 64)),
        };
        if on {
            *w |= bit;
        } else {
            *w &= !bit;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A register of small integers: `(None, v)` writes `v`, `(Some(r), _)`
    /// reads `r`.
    struct Register;

    impl Spec for Register {
        type State = u8;
        type Op = (Option<u8>, u8);
        fn step(&self, s: &u8, op: &(Option<u8>, u8)) -> Option<u8> {
            match op {
                (None, v) => Some(*v),
                (Some(r), _) => (r == s).then_some(*s),
            }
        }
    }

    fn timed(
        op: &(Option<u8>, u8),
        invoke: u64,
        response: Option<u64>,
    ) -> Timed<'_, (Option<u8>, u8)> {
        Timed {
            op,
            invoke,
            response,
            after: None,
        }
    }

    #[test]
    fn real_time_unknown_outcomes_and_program_order() {
        let (w1, r1, r0) = ((None, 1), (Some(1), 0), (Some(0), 0));
        // A read of 1 after the write of 1 returned: fine; a read of 0 then
        // is stale.
        assert!(search(
            &Register,
            0,
            &[timed(&w1, 0, Some(1)), timed(&r1, 2, Some(3))],
            100
        )
        .is_ok());
        assert_eq!(
            search(
                &Register,
                0,
                &[timed(&w1, 0, Some(1)), timed(&r0, 2, Some(3))],
                100
            ),
            Err(Failure::NoLinearization)
        );
        // Overlapping, the read may come first.
        assert!(search(
            &Register,
            0,
            &[timed(&w1, 0, Some(3)), timed(&r0, 1, Some(2))],
            100
        )
        .is_ok());
        // A write of unknown outcome may have happened, or not.
        assert!(search(
            &Register,
            0,
            &[timed(&w1, 0, None), timed(&r1, 2, Some(3))],
            100
        )
        .is_ok());
        assert!(search(
            &Register,
            0,
            &[timed(&w1, 0, None), timed(&r0, 2, Some(3))],
            100
        )
        .is_ok());
        // Program order: the read tied with the write's response but is
        // the same client's next operation, so the write came first.
        let mut h = [timed(&w1, 0, Some(1)), timed(&r0, 1, Some(2))];
        assert!(search(&Register, 0, &h, 100).is_ok());
        h[1].after = Some(0);
        assert_eq!(search(&Register, 0, &h, 100), Err(Failure::NoLinearization));
        // The budget makes a search inconclusive, not a verdict.
        assert_eq!(search(&Register, 0, &h, 1), Err(Failure::Budget(1)));
    }
}

//! The depth-first search for one key's linearization (Wing and Gong's
//! algorithm with Lowe's memo of explored configurations), over a key
//! prepared by [`super::prepare`].
//!
//! A *configuration* is the set of operations linearized so far, the
//! register's state and, per class of unknown writes, how many members have
//! been used. The set is kept as `g` (every operation at or past index `g`,
//! in invocation order, is not linearized) and the few *holes* below `g`
//! that are not linearized yet; holes are operations concurrent with the
//! latest linearized one, so there are never more than the clients (plus
//! forced writes), and the memo key stays small however long the history.
//!
//! Moves from a configuration:
//! - every GET that is minimal and agrees with the state is linearized at
//!   once, without branching: a linearization that places it later can
//!   place it here instead (it changes no state, and everything that must
//!   precede it already does);
//! - otherwise each minimal operation whose precondition holds is a branch,
//!   and each minimal operation whose precondition a class of unknown writes
//!   can repair is a branch that uses the class's earliest unused member
//!   (see [`super::prepare`] for why nothing else needs trying).
//!
//! Two minimal operations of the same kind (same precondition, same
//! resulting state: e.g. two `PUT -> existed = true` of values no GET
//! returned, or two `DELETE -> existed = true`) are interchangeable except
//! for their intervals, and placing the one that responds first is never
//! worse: in any continuation after the other, swap the two (the later one
//! was minimal already, and leaving the earlier-responding one pending only
//! lowers the bound the operations in between must respect). Only that one
//! is tried.
//!
//! A write is never placed while the key holds a value written only once
//! that some GET returned and that not all its GETs have seen: the value
//! would be gone for good, so that branch is dead (this is what makes a
//! wrong order of concurrent writes fail at once instead of much later).
//!
//! A configuration is skipped if one with the same set and state and no
//! more members used of any class was explored before (it had failed):
//! fewer members used leaves every continuation open.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use super::prepare::{Kind, Prepared, ABSENT, NO_PRED};

/// How a search ended without a linearization.
#[derive(Debug)]
pub(super) enum Failure {
    /// Every configuration was explored: no linearization exists.
    None(Stuck),
    /// The step budget ran out first.
    Budget,
}

/// The configuration that linearized the most operations, for the report.
#[derive(Debug, Default)]
pub(super) struct Stuck {
    /// Operations linearized there.
    pub linearized: usize,
    /// The minimal operations that could not be linearized next (indices
    /// into the prepared operations).
    pub blocked: Vec<u32>,
    /// The register's state there.
    pub state: u32,
}

#[derive(Clone, Copy, Debug)]
enum Move {
    Direct(u32),
    Repair(u32, u32),
}

struct Snapshot {
    g: usize,
    /// Where the holes are saved in [`Search::saved_holes`].
    holes: usize,
    state: u32,
    used_class: Option<u32>,
    trail: usize,
}

struct Level {
    /// This level's moves are `Search::move_stack[start..end]`, the
    /// untried ones from `next`.
    start: usize,
    next: usize,
    end: usize,
    undo: Snapshot,
}

/// The memo's hasher: rustc's Fx hash (multiply and rotate per word). The
/// memo is hashed once per step, and its keys are small integers, not
/// attacker-chosen, so SipHash's protection buys nothing here.
#[derive(Default)]
struct FxHasher(u64);

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(w));
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.add(u64::from(n));
    }
    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }
    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

impl FxHasher {
    fn add(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

/// Explored configurations: the key is `[g, state, holes...]`, the value
/// the class-use vectors explored with it, concatenated (one allocation
/// each, lookups without any).
type Memo = HashMap<Box<[u32]>, Vec<u32>, BuildHasherDefault<FxHasher>>;

/// The search over one prepared key.
pub(super) struct Search<'p> {
    p: &'p Prepared,
    g: usize,
    holes: Vec<u32>,
    state: u32,
    used: Vec<u32>,
    /// GETs of each once-written value not linearized yet.
    reads_left: Vec<u32>,
    /// Values whose `reads_left` was decremented, for undoing.
    trail: Vec<u32>,
    memo: Memo,
    /// Configurations entered.
    pub steps: u64,
    best: Option<(usize, usize, Vec<u32>, u32)>,
    scratch: Vec<u32>,
    /// Reused buffers of [`Search::remember`] and [`Search::moves`].
    key: Vec<u32>,
    wanted: Vec<u32>,
    cands: Vec<Cand>,
    /// The holes of every snapshot on the stack, concatenated.
    saved_holes: Vec<u32>,
    /// The untried moves of every level on the stack, concatenated.
    move_stack: Vec<Move>,
}

/// A candidate move: (priority, kind, class, response, move, whether the
/// operation has a program successor at a tie).
type Cand = (u8, Kind, Option<u32>, u64, Move, bool);

impl<'p> Search<'p> {
    /// A search of `p` from the initial configuration (key absent).
    pub(super) fn new(p: &'p Prepared) -> Search<'p> {
        Search {
            p,
            g: 0,
            holes: Vec::new(),
            state: ABSENT,
            used: vec![0; p.classes.len()],
            reads_left: p.reads.clone(),
            trail: Vec::new(),
            memo: Memo::default(),
            steps: 0,
            best: None,
            scratch: Vec::new(),
            key: Vec::new(),
            wanted: Vec::new(),
            cands: Vec::new(),
            saved_holes: Vec::new(),
            move_stack: Vec::new(),
        }
    }

    /// Runs the search, entering at most `max_steps` configurations.
    pub(super) fn run(&mut self, max_steps: u64) -> Result<(), Failure> {
        let mut stack: Vec<Level> = Vec::new();
        let mut undo = self.snapshot(None);
        self.close();
        loop {
            self.steps += 1;
            if self.steps > max_steps {
                return Err(Failure::Budget);
            }
            if self.g == self.p.ops.len() && self.holes.is_empty() {
                return Ok(());
            }
            let start = self.move_stack.len();
            if self.remember() {
                self.note_progress();
                self.moves();
            }
            stack.push(Level {
                start,
                next: start,
                end: self.move_stack.len(),
                undo,
            });
            // Take the next untried move, backtracking as needed.
            loop {
                let Some(top) = stack.last_mut() else {
                    return Err(Failure::None(self.stuck()));
                };
                if top.next < top.end {
                    let m = self.move_stack[top.next];
                    top.next += 1;
                    undo = self.apply(m);
                    break;
                }
                let level = stack.pop().expect("a level is on the stack");
                self.move_stack.truncate(level.start);
                self.restore(level.undo);
            }
        }
    }

    fn snapshot(&mut self, used_class: Option<u32>) -> Snapshot {
        let holes = self.saved_holes.len();
        self.saved_holes.extend_from_slice(&self.holes);
        Snapshot {
            g: self.g,
            holes,
            state: self.state,
            used_class,
            trail: self.trail.len(),
        }
    }

    fn restore(&mut self, s: Snapshot) {
        self.g = s.g;
        self.holes.clear();
        self.holes.extend_from_slice(&self.saved_holes[s.holes..]);
        self.saved_holes.truncate(s.holes);
        self.state = s.state;
        if let Some(c) = s.used_class {
            self.used[c as usize] -= 1;
        }
        while self.trail.len() > s.trail {
            let v = self.trail.pop().expect("trail is longer than the mark");
            self.reads_left[v as usize] += 1;
        }
    }

    /// The minimal operations (appended to `out`) and the earliest response
    /// among the operations not linearized.
    fn minimal(&self, out: &mut Vec<u32>) -> u64 {
        let ops = &self.p.ops;
        let mut bound = u64::MAX;
        for &h in &self.holes {
            bound = bound.min(ops[h as usize].response);
        }
        let mut end = self.g;
        while end < ops.len() && ops[end].invoke <= bound {
            bound = bound.min(ops[end].response);
            end += 1;
        }
        out.extend(
            self.holes
                .iter()
                .copied()
                .filter(|&h| ops[h as usize].invoke <= bound && self.pred_done(h)),
        );
        out.extend(
            (self.g..end)
                .filter(|&i| ops[i].invoke <= bound && self.pred_done(i as u32))
                .map(|i| i as u32),
        );
        bound
    }

    /// Whether operation `x`'s program predecessor (if any) is linearized.
    fn pred_done(&self, x: u32) -> bool {
        let p = self.p.ops[x as usize].pred;
        p == NO_PRED || ((p as usize) < self.g && !self.holes.contains(&p))
    }

    /// Marks operation `x` (minimal) linearized.
    fn linearize(&mut self, x: u32) {
        let xi = x as usize;
        if let Kind::Get(v) = self.p.ops[xi].kind {
            if self.reads_left[v as usize] > 0 {
                self.reads_left[v as usize] -= 1;
                self.trail.push(v);
            }
        }
        if xi < self.g {
            let at = self
                .holes
                .iter()
                .position(|&h| h == x)
                .expect("a minimal operation below g is a hole");
            self.holes.swap_remove(at);
        } else {
            self.holes.extend(self.g as u32..x);
            self.g = xi + 1;
        }
        self.holes.sort_unstable();
    }

    /// Linearizes every minimal GET that agrees with the state, until none.
    fn close(&mut self) {
        loop {
            let mut cands = std::mem::take(&mut self.scratch);
            cands.clear();
            self.minimal(&mut cands);
            let found = cands.iter().copied().find(|&x| {
                let k = self.p.ops[x as usize].kind;
                matches!(k, Kind::Get(_)) && k.holds(self.state)
            });
            self.scratch = cands;
            match found {
                Some(x) => self.linearize(x),
                None => return,
            }
        }
    }

    /// Records the configuration; false if it (or one that dominates it)
    /// was explored before.
    fn remember(&mut self) -> bool {
        self.key.clear();
        self.key.push(self.g as u32);
        self.key.push(self.state);
        self.key.extend_from_slice(&self.holes);
        let used = &self.used;
        let Some(seen) = self.memo.get_mut(&self.key[..]) else {
            self.memo.insert(self.key.as_slice().into(), used.clone());
            return true;
        };
        let n = used.len();
        if n == 0 {
            return false; // the same configuration, no classes
        }
        if seen
            .chunks(n)
            .any(|u| u.iter().zip(used).all(|(a, b)| a <= b))
        {
            return false;
        }
        let mut kept = Vec::with_capacity(seen.len() + n);
        for u in seen.chunks(n) {
            if !u.iter().zip(used).all(|(a, b)| a >= b) {
                kept.extend_from_slice(u);
            }
        }
        kept.extend_from_slice(used);
        *seen = kept;
        true
    }

    /// Pushes the moves from the current configuration, best first, onto
    /// [`Search::move_stack`].
    fn moves(&mut self) {
        let mut cands = std::mem::take(&mut self.scratch);
        cands.clear();
        let bound = self.minimal(&mut cands);
        let ops = &self.p.ops;
        // Overwriting the state now would lose a value still to be read.
        let stuck_value = self.reads_left[self.state as usize] > 0;
        // Values that waiting GETs want.
        let mut wanted = std::mem::take(&mut self.wanted);
        wanted.clear();
        wanted.extend(cands.iter().filter_map(|&y| match ops[y as usize].kind {
            Kind::Get(v) if v != self.state => Some(v),
            _ => None,
        }));
        // (priority, kind, class, response, move): of several moves with the
        // same kind and class only the one whose operation responds first is
        // kept (see the module documentation).
        let mut kept = std::mem::take(&mut self.cands);
        kept.clear();
        // An operation with a program successor at a tie is never exchanged
        // (moving it later could put it after that successor): it is kept
        // as a move of its own, and keeps no twin from being dropped.
        let mut keep = |m: Cand| match kept
            .iter_mut()
            .find(|k| !m.5 && !k.5 && k.1 == m.1 && k.2 == m.2)
        {
            Some(twin) if twin.3 <= m.3 => {}
            Some(twin) => *twin = m,
            None => kept.push(m),
        };
        for &x in &cands {
            let o = ops[x as usize];
            let k = o.kind;
            if stuck_value && (!matches!(k, Kind::Get(_)) || !k.holds(self.state)) {
                continue; // a repair would be a write too
            }
            // A write that a waiting GET needs is the likeliest next step;
            // then the operation that must be linearized soonest.
            let after = match k {
                Kind::Get(v) => v,
                k => k.after(self.state),
            };
            let priority = if wanted.contains(&after) {
                0
            } else if o.response == bound {
                1
            } else {
                2
            };
            if k.holds(self.state) {
                keep((
                    priority,
                    k,
                    None,
                    o.response,
                    Move::Direct(x),
                    o.tie_successor,
                ));
                continue;
            }
            for (c, class) in self.p.classes.iter().enumerate() {
                let available = class
                    .invokes
                    .get(self.used[c] as usize)
                    .is_some_and(|&t| t <= bound);
                if available && class.effect.repairs(k, self.state) {
                    let m = Move::Repair(x, c as u32);
                    keep((priority, k, Some(c as u32), o.response, m, o.tie_successor));
                }
            }
        }
        self.scratch = cands;
        self.wanted = wanted;
        kept.sort_by_key(|m| (m.0, m.3));
        self.move_stack.extend(kept.iter().map(|m| m.4));
        self.cands = kept;
    }

    fn apply(&mut self, m: Move) -> Snapshot {
        let (x, class) = match m {
            Move::Direct(x) => (x, None),
            Move::Repair(x, c) => (x, Some(c)),
        };
        // The broken variant (tests only) never counts a member as used.
        let reuse = super::prepare::broken() == super::prepare::Broken::ReuseMembers;
        let counted = class.filter(|_| !reuse);
        let undo = self.snapshot(counted);
        if let Some(c) = counted {
            self.used[c as usize] += 1;
        }
        let k = self.p.ops[x as usize].kind;
        self.state = k.after(self.state);
        // A repaired GET sees the value the member wrote (or absence).
        if let (Kind::Get(v), Some(_)) = (k, class) {
            self.state = v;
        }
        self.linearize(x);
        self.close();
        undo
    }

    fn linearized(&self) -> usize {
        self.g - self.holes.len()
    }

    fn note_progress(&mut self) {
        let n = self.linearized();
        if self.best.as_ref().is_none_or(|b| n > b.0) {
            self.best = Some((n, self.g, self.holes.clone(), self.state));
        }
    }

    fn stuck(&mut self) -> Stuck {
        let Some((linearized, g, holes, state)) = self.best.take() else {
            return Stuck::default();
        };
        self.g = g;
        self.holes = holes;
        self.state = state;
        let mut blocked = Vec::new();
        self.minimal(&mut blocked);
        Stuck {
            linearized,
            blocked,
            state,
        }
    }
}

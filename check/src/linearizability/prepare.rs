//! One key's sub-history made ready for the search: values interned,
//! operations that cannot matter left out, and writes of unknown outcome
//! sorted into the few roles they can play.
//!
//! # Which writes of unknown outcome matter, and how
//!
//! The sequential specification is a register per key: its state is
//! *absent* or *holding a value*. The known operations observe it:
//! `GET -> v` needs the state to be exactly `v`, `GET -> not found` needs
//! *absent*; `PUT`/`DELETE -> existed = true` need *present* and
//! `-> existed = false` need *absent*. A write of unknown outcome
//! ([`Failure::Unknown`](crate::Failure::Unknown)) may take effect at any point
//! after its invocation, or not at all, and observes nothing.
//!
//! **Normal form.** Take any linearization `L` of the sub-history and drop,
//! one at a time, every unknown write `u` whose effect nothing observes:
//! `u` is last, or the next operation is another unknown write (which
//! overwrites `u`'s effect unobserved), or the next operation `w` is known
//! and its precondition already holds in the state *before* `u`. Dropping
//! such a `u` keeps `L` valid: a known write's result state does not depend
//! on the state before it, and a GET's result state is the value it
//! returned; the real-time order of the other operations is unchanged; and
//! an unknown write is allowed not to take effect. So if the sub-history is
//! linearizable it has a linearization in which **every unknown write sits
//! immediately before a known operation whose precondition it repairs**:
//!
//! - an unknown `DELETE` repairs a need for *absent* (`GET -> not found`,
//!   `PUT`/`DELETE -> existed = false`) when the key is present;
//! - an unknown `PUT v` repairs a need for *present* (`existed = true`) when
//!   the key is absent, and `GET -> v` when the key holds something else.
//!
//! Hence:
//!
//! 1. An unknown `PUT` of a value that no GET of the key returned (a *junk*
//!    write) matters only as "some value is present"; all junk writes are
//!    interchangeable and form one class. Likewise all unknown `DELETE`s.
//! 2. Within a class, members differ only in their invocation time, and a
//!    member placed at some point may be placed at any later point. So the
//!    search may always use the earliest-invoked unused member (an exchange
//!    argument): a class is a *count* of members used, never a subset, and
//!    members are never ordered against each other.
//! 3. A member invoked after the last response of every known operation it
//!    could repair can never be used: it is **dropped** before the search.
//!    In particular an unknown `PUT` whose value no GET returned is dropped
//!    when no `PUT`/`DELETE -> existed = true` of the key responds after its
//!    invocation, and an unknown `DELETE` is dropped when no
//!    `GET -> not found`, `PUT`/`DELETE -> existed = false` responds after
//!    its invocation. (Dropping a junk `PUT` merely because nobody read its
//!    value would be wrong: it may be what makes a later `existed = true`
//!    true. The tests show the checker would then reject a linearizable
//!    history.)
//! 4. An unknown `PUT v` whose value a GET returned, and which is the only
//!    write of `v`, must have taken effect before the earliest such GET
//!    responded: it becomes an ordinary (*forced*) write whose response is
//!    that GET's response, with no precondition. If that is before its
//!    invocation, the read returned a value from the future: a violation.
//! 5. Unknown `PUT`s of a value that several writes wrote and some GET
//!    returned form a class per value (point 2), usable for a `GET -> v` or
//!    as a presence repair.
//!
//! A search that treats classes as counts, and applies a class member only
//! as a repair immediately before the known operation needing it, is
//! therefore exact: it finds a linearization iff one exists.

use std::collections::HashMap;

use nessie_protocol::{Request, Response};

use crate::history::{Event, Failure};

/// Broken reductions that the tests must catch (a test-only fault switch,
/// per thread).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Broken {
    /// The checker as documented.
    #[allow(dead_code)]
    No,
    /// Drop every unknown PUT whose value no GET returned (ignoring that it
    /// can make a later `existed = true` true).
    #[allow(dead_code)]
    DropUnread,
    /// Let a member of a class repair any number of operations.
    #[allow(dead_code)]
    ReuseMembers,
    /// Ignore program order (order by real time only, ties concurrent).
    #[allow(dead_code)]
    NoProgramOrder,
    /// Exchange twins even when one has a program successor at a tie.
    #[allow(dead_code)]
    SwapTiedTwins,
    /// Leave a PUT refused as full out of the check, as if it were
    /// "not committed".
    #[allow(dead_code)]
    FullExcused,
}

#[cfg(test)]
thread_local! {
    /// The broken reduction in force on this thread (tests only).
    pub(super) static BROKEN: std::cell::Cell<Broken> = const { std::cell::Cell::new(Broken::No) };
}

/// The broken reduction in force (always [`Broken::No`] outside tests).
pub(super) fn broken() -> Broken {
    #[cfg(test)]
    {
        BROKEN.with(|b| b.get())
    }
    #[cfg(not(test))]
    {
        Broken::No
    }
}

/// Value number 0 is "absent".
pub(super) const ABSENT: u32 = 0;

/// Value number 1 stands for every value that no GET of the key returned:
/// such values are only ever observed as "present", so one state is enough
/// (and configurations that differ only in them are one configuration).
pub(super) const JUNK: u32 = 1;

/// What a known (or forced) operation needs and does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    /// A GET that returned this value (or [`ABSENT`]).
    Get(u32),
    /// A PUT of `value` that reported whether the key existed (`None`: a
    /// system whose PUT cannot know, whose answer is not checked:
    /// [`CheckConfig::put_existence`](super::CheckConfig::put_existence)).
    Put { value: u32, existed: Option<bool> },
    /// A DELETE that reported whether the key existed.
    Delete { existed: bool },
    /// An unknown PUT that a read proves took effect (point 4).
    Forced(u32),
}

impl Kind {
    /// Whether the state `s` satisfies the operation's precondition.
    pub(super) fn holds(self, s: u32) -> bool {
        match self {
            Kind::Get(v) => s == v,
            Kind::Put { existed: None, .. } => true,
            Kind::Put {
                existed: Some(existed),
                ..
            }
            | Kind::Delete { existed } => (s != ABSENT) == existed,
            Kind::Forced(_) => true,
        }
    }

    /// The state after the operation (its precondition holding).
    pub(super) fn after(self, s: u32) -> u32 {
        match self {
            Kind::Get(_) => s,
            Kind::Put { value, .. } | Kind::Forced(value) => value,
            Kind::Delete { .. } => ABSENT,
        }
    }
}

/// No program predecessor.
pub(super) const NO_PRED: u32 = u32::MAX;

/// One operation the search places.
#[derive(Clone, Copy, Debug)]
pub(super) struct Op {
    pub invoke: u64,
    pub response: u64,
    pub kind: Kind,
    /// Index into the key's events.
    pub event: usize,
    /// The operation (index into [`Prepared::ops`]) that must be linearized
    /// before this one by program order, or [`NO_PRED`].
    pub pred: u32,
    /// Whether a program successor of this operation was invoked at or
    /// before its response (a tie that real time alone would call
    /// concurrent): such an operation is never exchanged for a twin.
    pub tie_successor: bool,
}

/// What the members of a class of unknown writes do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Effect {
    /// Unknown DELETEs.
    Absent,
    /// Unknown PUTs of values no GET returned.
    Junk,
    /// Unknown PUTs of this value, which a GET returned.
    Value(u32),
}

impl Effect {
    /// Whether a member's effect satisfies the precondition of an
    /// operation of kind `k` (forced writes need nothing).
    pub(super) fn serves(self, k: Kind) -> bool {
        match (self, k) {
            (_, Kind::Forced(_)) => false,
            (Effect::Absent, k) => k.holds(ABSENT),
            // Some value present that no GET returned.
            (Effect::Junk, k) => matches!(
                k,
                Kind::Put {
                    existed: Some(true) | None,
                    ..
                } | Kind::Delete { existed: true }
            ),
            (Effect::Value(v), k) => k.holds(v),
        }
    }

    /// Whether a member placed just before an operation of kind `k` in
    /// state `s` is what makes its precondition hold.
    pub(super) fn repairs(self, k: Kind, s: u32) -> bool {
        !k.holds(s) && self.serves(k)
    }
}

/// A class of interchangeable unknown writes.
#[derive(Clone, Debug)]
pub(super) struct Class {
    pub effect: Effect,
    /// Invocation times of the members kept, ascending.
    pub invokes: Vec<u64>,
}

/// One key's problem, ready for the search.
#[derive(Debug)]
pub(super) struct Prepared {
    /// Known and forced operations, by invocation time.
    pub ops: Vec<Op>,
    /// Classes of unknown writes (members kept).
    pub classes: Vec<Class>,
    /// Per value number: how many GETs returned it, for values written by
    /// exactly one write (0 for the others). Once such a value is
    /// overwritten it never returns, so every GET of it must come first.
    pub reads: Vec<u32>,
    /// Unknown writes made forced (point 4).
    pub forced: usize,
    /// Unknown writes dropped (point 3).
    pub dropped: usize,
}

/// Why a key's history is not linearizable, found before any search.
#[derive(Debug)]
pub(super) struct Obvious {
    pub event: usize,
    pub reason: String,
}

/// Prepares `events` (one key's, failed reads and not-committed operations
/// already left out; `pred[i]` is event `i`'s program predecessor, an index
/// into `events`); `put_existence`: a PUT's answer (whether the key
/// existed) is checked.
pub(super) fn prepare<'a>(
    events: &[&'a Event],
    pred: &[Option<usize>],
    put_existence: bool,
) -> Result<Prepared, Obvious> {
    let mut values: HashMap<&'a [u8], u32> = HashMap::new();
    let intern = |v: &'a [u8], values: &mut HashMap<&'a [u8], u32>| -> u32 {
        let next = values.len() as u32 + 2;
        *values.entry(v).or_insert(next)
    };
    // Values returned by GETs, and how many writes of each value there are.
    let mut read: HashMap<u32, u64> = HashMap::new();
    let mut writers: HashMap<u32, usize> = HashMap::new();
    let mut value_of = vec![ABSENT; events.len()];
    for (i, &e) in events.iter().enumerate() {
        match (&e.request, &e.ret) {
            (Request::Get(_), Ok(Response::Get(Some(v)))) => {
                let id = intern(v, &mut values);
                value_of[i] = id;
                let first = read.entry(id).or_insert(e.response);
                *first = (*first).min(e.response);
            }
            // A refused PUT wrote nothing.
            (Request::Put(..), Err(Failure::Full)) => {}
            (Request::Put(_, v), _) => {
                let id = intern(v, &mut values);
                value_of[i] = id;
                *writers.entry(id).or_default() += 1;
            }
            _ => {}
        }
    }
    // Values no GET returned all become JUNK.
    for (i, &e) in events.iter().enumerate() {
        if matches!(e.request, Request::Put(..))
            && e.ret != Err(Failure::Full)
            && !read.contains_key(&value_of[i])
        {
            value_of[i] = JUNK;
        }
    }
    let mut ops = Vec::new();
    let mut unknown_puts: Vec<(usize, u32)> = Vec::new();
    let mut unknown_deletes: Vec<usize> = Vec::new();
    let mut prepared = Prepared {
        ops: Vec::new(),
        classes: Vec::new(),
        reads: Vec::new(),
        forced: 0,
        dropped: 0,
    };
    for (i, e) in events.iter().enumerate() {
        let kind = match (&e.request, &e.ret) {
            // A PUT refused for want of room saw the key absent and wrote
            // nothing: a read of absence.
            (Request::Get(_), Ok(Response::Get(None))) | (Request::Put(..), Err(Failure::Full)) => {
                Kind::Get(ABSENT)
            }
            (Request::Get(_), Ok(Response::Get(Some(_)))) => {
                if !writers.contains_key(&value_of[i]) {
                    return Err(Obvious {
                        event: i,
                        reason: "a GET returned a value that no PUT of the key wrote".into(),
                    });
                }
                Kind::Get(value_of[i])
            }
            (Request::Put(..), Ok(Response::Put(existed))) => Kind::Put {
                value: value_of[i],
                existed: put_existence.then_some(*existed),
            },
            (Request::Delete(_), Ok(Response::Delete(existed))) => {
                Kind::Delete { existed: *existed }
            }
            (Request::Put(..), Err(Failure::Unknown)) => {
                let v = value_of[i];
                match read.get(&v) {
                    Some(&by) if writers[&v] == 1 => {
                        prepared.forced += 1;
                        if by < e.invoke {
                            return Err(Obvious {
                                event: i,
                                reason: "a GET returned this write's value before it was invoked"
                                    .into(),
                            });
                        }
                        ops.push(Op {
                            invoke: e.invoke,
                            response: by,
                            kind: Kind::Forced(v),
                            event: i,
                            pred: NO_PRED,
                            tie_successor: false,
                        });
                    }
                    _ => unknown_puts.push((i, v)),
                }
                continue;
            }
            (Request::Delete(_), Err(Failure::Unknown)) => {
                unknown_deletes.push(i);
                continue;
            }
            (op, ret) => {
                return Err(Obvious {
                    event: i,
                    reason: format!("malformed event: operation {op:?} with result {ret:?}"),
                })
            }
        };
        ops.push(Op {
            invoke: e.invoke,
            response: e.response,
            kind,
            event: i,
            pred: NO_PRED,
            tie_successor: false,
        });
    }
    ops.sort_by_key(|o| (o.invoke, o.event));
    // Program order, between the operations the search places.
    let mut op_of_event = vec![NO_PRED; events.len()];
    for (x, o) in ops.iter().enumerate() {
        op_of_event[o.event] = x as u32;
    }
    for x in 0..ops.len() {
        let p = match pred[ops[x].event] {
            _ if broken() == Broken::NoProgramOrder => NO_PRED,
            Some(p) if !matches!(ops[x].kind, Kind::Forced(_)) => op_of_event[p],
            _ => NO_PRED,
        };
        ops[x].pred = p;
        if p != NO_PRED
            && ops[x].invoke <= ops[p as usize].response
            && broken() != Broken::SwapTiedTwins
        {
            ops[p as usize].tie_successor = true;
        }
    }
    // The last response of a known operation each effect could repair.
    let mut last_need: HashMap<Effect, u64> = HashMap::new();
    let mut classes: Vec<Effect> = vec![Effect::Junk, Effect::Absent];
    classes.extend(
        unknown_puts
            .iter()
            .filter(|(_, v)| read.contains_key(v))
            .map(|&(_, v)| Effect::Value(v)),
    );
    classes.sort_by_key(|e| match e {
        Effect::Junk => (0, 0),
        Effect::Absent => (1, 0),
        Effect::Value(v) => (2, *v),
    });
    classes.dedup();
    for o in &ops {
        for &c in &classes {
            if c.serves(o.kind) {
                let t = last_need.entry(c).or_insert(0);
                *t = (*t).max(o.response);
            }
        }
    }
    let mut members: HashMap<Effect, Vec<u64>> = HashMap::new();
    for &(i, v) in &unknown_puts {
        let c = if read.contains_key(&v) {
            Effect::Value(v)
        } else {
            Effect::Junk
        };
        members.entry(c).or_default().push(events[i].invoke);
    }
    for &i in &unknown_deletes {
        members
            .entry(Effect::Absent)
            .or_default()
            .push(events[i].invoke);
    }
    for c in classes {
        let mut invokes = members.remove(&c).unwrap_or_default();
        let before = invokes.len();
        let limit = last_need.get(&c).copied();
        invokes.retain(|&t| limit.is_some_and(|l| t <= l));
        if c == Effect::Junk && broken() == Broken::DropUnread {
            invokes.clear();
        }
        prepared.dropped += before - invokes.len();
        if !invokes.is_empty() {
            invokes.sort_unstable();
            prepared.classes.push(Class { effect: c, invokes });
        }
    }
    prepared.reads = vec![0; values.len() + 2];
    for o in &ops {
        if let Kind::Get(v) = o.kind {
            if v != ABSENT && writers.get(&v) == Some(&1) {
                prepared.reads[v as usize] += 1;
            }
        }
    }
    prepared.ops = ops;
    Ok(prepared)
}

//! The history of a world's operations, as the model records it while it
//! explores, and an exact linearizability check of it against a map.
//!
//! Worlds are small (a handful of operations), so the check is a memoised
//! search over the orders that respect real time. The record is compact and
//! part of the model state; the verdict is computed once per return, not
//! once per visited state.
//!
//! Each operation ends in one of three ways, matching the outcome classes of
//! `nessie_protocol::Outcome`:
//! - **returned** (committed): it must be linearized, with its result;
//! - **void** (not committed: an error that promises no effect): it must not
//!   have happened, so it is left out — a "not committed" error whose write
//!   did take effect is then caught by the reads and existed-flags after it;
//! - **pending** (in flight, crashed, given up, or an unknown outcome): it may
//!   or may not have happened, at any time after its invocation.

use std::collections::BTreeMap;

use nessie_check::wgl::{search, Spec, Timed};
use nessie_check::{Failure, Ret};
use nessie_protocol::{Request, Response};

/// A key-value map as the sequential specification sees it.
type KvMap = BTreeMap<Vec<u8>, Vec<u8>>;

/// How an operation ended (so far).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    /// May or may not have taken effect.
    Pending,
    /// Took effect with this result (a PUT refused with `TableFull`,
    /// `Err(Failure::Full)`, valid only if the key was absent); the event
    /// number of its return.
    Returned(Ret, u16),
    /// Did not take effect.
    Void,
}

/// One operation of the history.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Record {
    /// The client that ran it.
    pub client: u8,
    /// Its position in the client's program.
    pub op: u8,
    /// The event number of its invocation.
    pub invoked: u16,
    /// How it ended.
    pub status: Status,
}

/// A world's history: operations with logical invocation and return times.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct WorldHistory {
    events: u16,
    records: Vec<Record>,
}

/// An operation as the checker sees it.
pub struct CheckedOp<'a> {
    /// What it does.
    pub op: &'a Request,
    /// Invocation time.
    pub invoked: u16,
    /// How it ended.
    pub status: &'a Status,
}

impl WorldHistory {
    fn tick(&mut self) -> u16 {
        self.events += 1;
        self.events
    }

    /// Operation `op` of `client` is invoked.
    pub fn invoke(&mut self, client: usize, op: usize) {
        let at = self.tick();
        self.records.push(Record {
            client: client as u8,
            op: op as u8,
            invoked: at,
            status: Status::Pending,
        });
    }

    fn find(&mut self, client: usize, op: usize) -> Option<&mut Record> {
        self.records
            .iter_mut()
            .find(|r| usize::from(r.client) == client && usize::from(r.op) == op)
    }

    /// It returned `ret` (it took effect).
    pub fn returned(&mut self, client: usize, op: usize, ret: Ret) {
        let at = self.tick();
        if let Some(r) = self.find(client, op) {
            r.status = Status::Returned(ret, at);
        }
    }

    /// It failed with an error that promises it had no effect.
    pub fn void(&mut self, client: usize, op: usize) {
        if let Some(r) = self.find(client, op) {
            r.status = Status::Void;
        }
    }

    /// The records.
    pub fn records(&self) -> &[Record] {
        &self.records
    }

    /// The next event number (for final reads appended after everything).
    pub fn now(&self) -> u16 {
        self.events
    }
}

fn apply(state: &BTreeMap<Vec<u8>, Vec<u8>>, op: &Request) -> (BTreeMap<Vec<u8>, Vec<u8>>, Ret) {
    let mut next = state.clone();
    let ret = match op {
        Request::Put(k, v) => Response::Put(next.insert(k.clone(), v.clone()).is_some()),
        Request::Delete(k) => Response::Delete(next.remove(k).is_some()),
        // The model's worlds have no scans.
        Request::Get(k) | Request::Scan { from: k, .. } => Response::Get(state.get(k).cloned()),
    };
    (next, Ok(ret))
}

fn matches(expected: &Ret, got: &Ret, op: &Request, existed: bool) -> bool {
    match expected {
        Err(Failure::Full) => matches!(op, Request::Put(..)) && !existed,
        e => e == got,
    }
}

/// The model's sequential specification: a key-value map, each operation
/// checked against what it returned (a pending write: its effect).
struct KvSpec<'a>(std::marker::PhantomData<CheckedOp<'a>>);

impl<'a> Spec for KvSpec<'a> {
    type State = KvMap;
    type Op = CheckedOp<'a>;
    fn step(&self, state: &KvMap, o: &CheckedOp<'a>) -> Option<KvMap> {
        step(state, o)
    }
}

fn step(state: &KvMap, o: &CheckedOp<'_>) -> Option<KvMap> {
    let existed = state.contains_key(o.op.key());
    let (next, got) = apply(state, o.op);
    match o.status {
        // A refused PUT changes nothing.
        Status::Returned(Err(Failure::Full), _) => {
            matches(&Err(Failure::Full), &got, o.op, existed).then(|| state.clone())
        }
        Status::Returned(ret, _) => matches(ret, &got, o.op, existed).then_some(next),
        _ => Some(next),
    }
}

/// Whether the operations have a linearization starting from `initial`:
/// the generic search of `nessie_check::wgl`, with a key-value map for its
/// specification.
pub fn linearizable(initial: &BTreeMap<Vec<u8>, Vec<u8>>, ops: &[CheckedOp<'_>]) -> bool {
    let timed: Vec<Timed<'_, CheckedOp<'_>>> = ops
        .iter()
        .filter(|o| match o.status {
            Status::Void => false,
            Status::Pending => o.op.is_write(),
            Status::Returned(..) => true,
        })
        .map(|o| Timed {
            op: o,
            invoke: u64::from(o.invoked),
            response: match o.status {
                Status::Returned(_, at) => Some(u64::from(*at)),
                _ => None,
            },
            after: None,
        })
        .collect();
    search(
        &KvSpec(std::marker::PhantomData),
        initial.clone(),
        &timed,
        u64::MAX,
    )
    .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op<'a>(op: &'a Request, invoked: u16, status: &'a Status) -> CheckedOp<'a> {
        CheckedOp {
            op,
            invoked,
            status,
        }
    }

    #[test]
    fn a_void_write_must_not_have_happened() {
        let put = Request::Put(b"k".to_vec(), b"v".to_vec());
        let get = Request::Get(b"k".to_vec());
        let void = Status::Void;
        let saw = Status::Returned(Ok(Response::Get(Some(b"v".to_vec()))), 4);
        let none = Status::Returned(Ok(Response::Get(None)), 4);
        let pending = Status::Pending;
        let empty = BTreeMap::new();
        assert!(!linearizable(
            &empty,
            &[op(&put, 1, &void), op(&get, 3, &saw)]
        ));
        assert!(linearizable(
            &empty,
            &[op(&put, 1, &void), op(&get, 3, &none)]
        ));
        assert!(linearizable(
            &empty,
            &[op(&put, 1, &pending), op(&get, 3, &saw)]
        ));
        assert!(linearizable(
            &empty,
            &[op(&put, 1, &pending), op(&get, 3, &none)]
        ));
    }

    #[test]
    fn real_time_order_is_respected() {
        let (a, b) = (
            Request::Put(b"k".to_vec(), b"a".to_vec()),
            Request::Put(b"k".to_vec(), b"b".to_vec()),
        );
        let get = Request::Get(b"k".to_vec());
        let pa = Status::Returned(Ok(Response::Put(false)), 2);
        let pb = Status::Returned(Ok(Response::Put(true)), 4);
        let stale = Status::Returned(Ok(Response::Get(Some(b"a".to_vec()))), 6);
        let empty = BTreeMap::new();
        let h = [op(&a, 1, &pa), op(&b, 3, &pb), op(&get, 5, &stale)];
        assert!(!linearizable(&empty, &h), "a stale read after b returned");
        let fresh = Status::Returned(Ok(Response::Get(Some(b"b".to_vec()))), 6);
        let h = [op(&a, 1, &pa), op(&b, 3, &pb), op(&get, 5, &fresh)];
        assert!(linearizable(&empty, &h));
    }
}

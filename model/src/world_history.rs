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

use nessie_check::history::KvOp;
use nessie_check::wgl::{search, Spec, Timed};

/// A key-value map as the sequential specification sees it.
type KvMap = BTreeMap<Vec<u8>, Vec<u8>>;

/// What an operation returned, as the model records it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ModelRet {
    /// A GET's answer.
    Get(Option<Vec<u8>>),
    /// A PUT's "existed before".
    Put(bool),
    /// A DELETE's "existed before".
    Delete(bool),
    /// A PUT refused with `TableFull` (valid only if the key was absent).
    Full,
}

/// How an operation ended (so far).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    /// May or may not have taken effect.
    Pending,
    /// Took effect with this result; the event number of its return.
    Returned(ModelRet, u16),
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
    /// Its key.
    pub key: &'a [u8],
    /// What it does.
    pub op: &'a KvOp,
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
    pub fn returned(&mut self, client: usize, op: usize, ret: ModelRet) {
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

fn apply(
    state: &BTreeMap<Vec<u8>, Vec<u8>>,
    key: &[u8],
    op: &KvOp,
) -> (BTreeMap<Vec<u8>, Vec<u8>>, ModelRet) {
    let mut next = state.clone();
    let ret = match op {
        KvOp::Get => ModelRet::Get(state.get(key).cloned()),
        KvOp::Put(v) => ModelRet::Put(next.insert(key.to_vec(), v.clone()).is_some()),
        KvOp::Delete => ModelRet::Delete(next.remove(key).is_some()),
    };
    (next, ret)
}

fn matches(expected: &ModelRet, got: &ModelRet, op: &KvOp, existed: bool) -> bool {
    match expected {
        ModelRet::Full => matches!(op, KvOp::Put(_)) && !existed,
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
    let existed = state.contains_key(o.key);
    let (next, got) = apply(state, o.key, o.op);
    match o.status {
        // A refused PUT changes nothing.
        Status::Returned(ModelRet::Full, _) => {
            matches(&ModelRet::Full, &got, o.op, existed).then(|| state.clone())
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
            Status::Pending => !matches!(o.op, KvOp::Get),
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

    fn op<'a>(key: &'a [u8], op: &'a KvOp, invoked: u16, status: &'a Status) -> CheckedOp<'a> {
        CheckedOp {
            key,
            op,
            invoked,
            status,
        }
    }

    #[test]
    fn a_void_write_must_not_have_happened() {
        let put = KvOp::Put(b"v".to_vec());
        let get = KvOp::Get;
        let void = Status::Void;
        let saw = Status::Returned(ModelRet::Get(Some(b"v".to_vec())), 4);
        let none = Status::Returned(ModelRet::Get(None), 4);
        let pending = Status::Pending;
        let empty = BTreeMap::new();
        assert!(!linearizable(
            &empty,
            &[op(b"k", &put, 1, &void), op(b"k", &get, 3, &saw)]
        ));
        assert!(linearizable(
            &empty,
            &[op(b"k", &put, 1, &void), op(b"k", &get, 3, &none)]
        ));
        assert!(linearizable(
            &empty,
            &[op(b"k", &put, 1, &pending), op(b"k", &get, 3, &saw)]
        ));
        assert!(linearizable(
            &empty,
            &[op(b"k", &put, 1, &pending), op(b"k", &get, 3, &none)]
        ));
    }

    #[test]
    fn real_time_order_is_respected() {
        let (a, b) = (KvOp::Put(b"a".to_vec()), KvOp::Put(b"b".to_vec()));
        let get = KvOp::Get;
        let pa = Status::Returned(ModelRet::Put(false), 2);
        let pb = Status::Returned(ModelRet::Put(true), 4);
        let stale = Status::Returned(ModelRet::Get(Some(b"a".to_vec())), 6);
        let empty = BTreeMap::new();
        let h = [
            op(b"k", &a, 1, &pa),
            op(b"k", &b, 3, &pb),
            op(b"k", &get, 5, &stale),
        ];
        assert!(!linearizable(&empty, &h), "a stale read after b returned");
        let fresh = Status::Returned(ModelRet::Get(Some(b"b".to_vec())), 6);
        let h = [
            op(b"k", &a, 1, &pa),
            op(b"k", &b, 3, &pb),
            op(b"k", &get, 5, &fresh),
        ];
        assert!(linearizable(&empty, &h));
    }
}

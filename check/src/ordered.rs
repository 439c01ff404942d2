//! A linearizability checker for ordered-store histories with range scans
//! (Cell's, `nessie-cell`).
//!
//! The project's checker ([`crate::check`]) treats keys as
//! independent registers and checks each key alone. A range scan reads many
//! keys at one instant, so it ties their histories together: a scan that
//! sees a later insert of `a` but not an earlier delete of `b`'s absence is
//! wrong although each key alone looks fine. This checker therefore splits a
//! history into groups of keys that scans connect (keys no scan connects
//! stay alone, as in the per-key checker) and runs the generic
//! Wing-Gong-Lowe search ([`crate::wgl`]) per group, its specification an
//! ordered map with scans over the group's whole map state.
//!
//! A scan `from..to` with a limit `n` that returned `n` entries constrains
//! the keys from `from` up to its last entry (the store may have had more
//! keys after it); one that returned fewer constrains all of `from..to`.
//! The history is the one every checker takes ([`crate::history::Event`]).
//! Writes whose outcome is unknown may take effect at any time after their
//! invocation, or never; failed reads, and failures that committed nothing
//! (a write that took effect after all is then caught), are left out.

use std::collections::{BTreeMap, BTreeSet};

use nessie_protocol::{Request, Response};

use crate::history::{Event, Failure};
use crate::wgl::{search, Spec, Timed};

/// Why a history is not linearizable (or could not be shown to be).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The keys of the group that failed.
    pub keys: Vec<Vec<u8>>,
    /// Its operations.
    pub ops: Vec<Event>,
    /// What went wrong.
    pub reason: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let show = |k: &[u8]| String::from_utf8_lossy(k).into_owned();
        writeln!(
            f,
            "{} (keys {:?})",
            self.reason,
            self.keys
                .iter()
                .take(8)
                .map(|k| show(k))
                .collect::<Vec<_>>()
        )?;
        for e in self.ops.iter().take(60) {
            let r = if e.response == u64::MAX {
                "?".into()
            } else {
                e.response.to_string()
            };
            writeln!(
                f,
                "  [{:>6} .. {:>6}] client {:>2} {:?} -> {:?}",
                e.invoke, r, e.client, e.request, e.ret
            )?;
        }
        Ok(())
    }
}

type State = BTreeMap<Vec<u8>, Vec<u8>>;

/// The keys a call constrains, among `universe`.
fn touched(e: &Event, universe: &BTreeSet<Vec<u8>>) -> Vec<Vec<u8>> {
    match (&e.request, &e.ret) {
        (Request::Get(k) | Request::Put(k, _) | Request::Delete(k), _) => vec![k.clone()],
        (Request::Scan { from, to, limit }, Ok(Response::Scan(got))) => {
            let upper: Option<Vec<u8>> = if got.len() >= *limit {
                got.last().map(|(k, _)| {
                    let mut k = k.clone();
                    k.push(0);
                    k
                })
            } else {
                to.clone()
            };
            universe
                .range(from.clone()..)
                .take_while(|k| upper.as_ref().is_none_or(|u| *k < u))
                .cloned()
                .collect()
        }
        _ => Vec::new(),
    }
}

fn apply(state: &State, e: &Event) -> Option<State> {
    match (&e.request, &e.ret) {
        (Request::Get(k), Ok(Response::Get(v))) => {
            (state.get(k) == v.as_ref()).then(|| state.clone())
        }
        (Request::Put(k, v), Ok(Response::Put(existed))) => (state.contains_key(k) == *existed)
            .then(|| {
                let mut s = state.clone();
                s.insert(k.clone(), v.clone());
                s
            }),
        (Request::Delete(k), Ok(Response::Delete(existed))) => (state.contains_key(k) == *existed)
            .then(|| {
                let mut s = state.clone();
                s.remove(k);
                s
            }),
        (Request::Put(k, v), Err(Failure::Unknown)) => {
            let mut s = state.clone();
            s.insert(k.clone(), v.clone());
            Some(s)
        }
        (Request::Delete(k), Err(Failure::Unknown)) => {
            let mut s = state.clone();
            s.remove(k);
            Some(s)
        }
        (Request::Scan { from, to, limit }, Ok(Response::Scan(got))) => {
            let want: Vec<(Vec<u8>, Vec<u8>)> = state
                .range(from.clone()..)
                .take_while(|(k, _)| to.as_ref().is_none_or(|t| *k < t))
                .take(*limit)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            (&want == got).then(|| state.clone())
        }
        _ => None,
    }
}

fn find(parent: &mut [usize], x: usize) -> usize {
    let mut r = x;
    while parent[r] != r {
        r = parent[r];
    }
    let mut y = x;
    while parent[y] != r {
        let n = parent[y];
        parent[y] = r;
        y = n;
    }
    r
}

/// Checks a history; `max_steps` bounds the search per group. Returns the
/// number of operations checked.
pub fn check(events: &[Event], max_steps: u64) -> Result<usize, Violation> {
    let events: Vec<Event> = events
        .iter()
        .filter(|e| match &e.ret {
            // Nothing was written (so a write that took effect after all
            // is caught): left out, as by the per-key checker.
            Err(Failure::NotCommitted | Failure::Full) => false,
            Err(Failure::Unknown) => e.request.is_write(),
            Ok(_) => true,
        })
        .cloned()
        .map(|mut e| {
            if e.ret == Err(Failure::Unknown) {
                e.response = u64::MAX;
            }
            e
        })
        .collect();
    let universe: BTreeSet<Vec<u8>> = events
        .iter()
        .filter_map(|e| match &e.request {
            Request::Get(k) | Request::Put(k, _) | Request::Delete(k) => Some(k.clone()),
            Request::Scan { .. } => None,
        })
        .chain(events.iter().flat_map(|e| match &e.ret {
            Ok(Response::Scan(got)) => got.iter().map(|(k, _)| k.clone()).collect(),
            _ => Vec::new(),
        }))
        .collect();
    let index: BTreeMap<&Vec<u8>, usize> =
        universe.iter().enumerate().map(|(i, k)| (k, i)).collect();
    let mut parent: Vec<usize> = (0..universe.len()).collect();
    let touches: Vec<Vec<usize>> = events
        .iter()
        .map(|e| touched(e, &universe).iter().map(|k| index[k]).collect())
        .collect();
    for t in &touches {
        for w in t.windows(2) {
            let (a, b) = (find(&mut parent, w[0]), find(&mut parent, w[1]));
            parent[a] = b;
        }
    }
    let mut groups: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    let mut empty_scans = Vec::new();
    for (i, t) in touches.iter().enumerate() {
        match t.first() {
            Some(&k) => {
                let g = find(&mut parent, k);
                groups.entry(g).or_default().push(i);
            }
            None => empty_scans.push(i),
        }
    }
    // A scan that touches no key of the history must have returned nothing.
    for &i in &empty_scans {
        if apply(&State::new(), &events[i]).is_none() {
            return Err(Violation {
                keys: Vec::new(),
                ops: vec![events[i].clone()],
                reason: "a scan returned entries no write stored".into(),
            });
        }
    }
    let mut checked = empty_scans.len();
    for (_, ops) in groups {
        let mut group: Vec<Event> = ops.iter().map(|&i| events[i].clone()).collect();
        group.sort_by_key(|e| e.invoke);
        if let Err(reason) = wgl(&group, max_steps) {
            let mut keys: BTreeSet<Vec<u8>> = BTreeSet::new();
            for e in &group {
                keys.extend(touched(e, &universe));
            }
            return Err(Violation {
                keys: keys.into_iter().collect(),
                ops: group,
                reason,
            });
        }
        checked += group.len();
    }
    Ok(checked)
}

/// The sequential specification of an ordered map with range scans.
struct OrderedMap;

impl Spec for OrderedMap {
    type State = State;
    type Op = Event;
    fn step(&self, state: &State, e: &Event) -> Option<State> {
        apply(state, e)
    }
}

/// The generic search over one group's operations (sorted by invocation),
/// from the empty map.
fn wgl(ops: &[Event], max_steps: u64) -> Result<(), String> {
    let timed: Vec<Timed<'_, Event>> = ops
        .iter()
        .map(|e| Timed {
            op: e,
            invoke: e.invoke,
            response: (e.ret != Err(Failure::Unknown)).then_some(e.response),
            after: None,
        })
        .collect();
    search(&OrderedMap, State::new(), &timed, max_steps)
        .map(|_| ())
        .map_err(|f| f.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::Ret;

    fn ev(client: usize, request: Request, ret: Ret, invoke: u64, response: u64) -> Event {
        Event {
            client,
            request,
            ret,
            invoke,
            response,
        }
    }
    fn k(s: &str) -> Vec<u8> {
        s.as_bytes().to_vec()
    }
    fn scan(from: &str, to: &str) -> Request {
        Request::Scan {
            from: k(from),
            to: Some(k(to)),
            limit: 10,
        }
    }

    #[test]
    fn a_scan_consistent_with_one_instant_passes() {
        // put a; put b; scan sees both, while a delete of a overlaps it.
        let h = vec![
            ev(
                0,
                Request::Put(k("a"), k("1")),
                Ok(Response::Put(false)),
                0,
                1,
            ),
            ev(
                0,
                Request::Put(k("b"), k("2")),
                Ok(Response::Put(false)),
                2,
                3,
            ),
            ev(
                1,
                scan("a", "z"),
                Ok(Response::Scan(vec![(k("a"), k("1")), (k("b"), k("2"))])),
                4,
                7,
            ),
            ev(0, Request::Delete(k("a")), Ok(Response::Delete(true)), 5, 6),
        ];
        assert_eq!(check(&h, 1_000_000), Ok(4));
        // ... or sees only b, if linearized after the delete.
        let mut h2 = h.clone();
        h2[2].ret = Ok(Response::Scan(vec![(k("b"), k("2"))]));
        assert!(check(&h2, 1_000_000).is_ok());
    }

    #[test]
    fn a_scan_that_saw_no_single_instant_is_caught() {
        // Sequentially: b is deleted, then a is inserted. A scan overlapping
        // both that sees neither a nor b... is fine (between them). One that
        // sees both a and b cannot be: b was gone before a arrived.
        let h = vec![
            ev(
                0,
                Request::Put(k("b"), k("2")),
                Ok(Response::Put(false)),
                0,
                1,
            ),
            ev(
                1,
                scan("a", "z"),
                Ok(Response::Scan(vec![(k("a"), k("1")), (k("b"), k("2"))])),
                2,
                7,
            ),
            ev(0, Request::Delete(k("b")), Ok(Response::Delete(true)), 3, 4),
            ev(
                0,
                Request::Put(k("a"), k("1")),
                Ok(Response::Put(false)),
                5,
                6,
            ),
        ];
        let v = check(&h, 1_000_000).unwrap_err();
        assert!(v.reason.contains("no linearization"), "{v}");
        // Per key, each of a and b alone is linearizable: only the group
        // check sees it.
        let mut neither = h.clone();
        neither[1].ret = Ok(Response::Scan(vec![]));
        assert!(check(&neither, 1_000_000).is_ok());
    }

    #[test]
    fn limits_unknown_writes_and_stray_entries() {
        let h = vec![
            ev(
                0,
                Request::Put(k("a"), k("1")),
                Ok(Response::Put(false)),
                0,
                1,
            ),
            ev(0, Request::Put(k("b"), k("2")), Err(Failure::Unknown), 2, 3),
            ev(
                1,
                Request::Scan {
                    from: k("a"),
                    to: None,
                    limit: 1,
                },
                Ok(Response::Scan(vec![(k("a"), k("1"))])),
                4,
                5,
            ),
            ev(
                1,
                Request::Get(k("b")),
                Ok(Response::Get(Some(k("2")))),
                6,
                7,
            ),
            ev(
                1,
                Request::Get(k("b")),
                Ok(Response::Get(Some(k("2")))),
                8,
                9,
            ),
        ];
        assert!(check(&h, 1_000_000).is_ok());
        let stray = vec![ev(
            0,
            scan("a", "z"),
            Ok(Response::Scan(vec![(k("q"), k("9"))])),
            0,
            1,
        )];
        assert!(check(&stray, 1000).is_err());
        // A value never written.
        let bad = vec![
            ev(
                0,
                Request::Put(k("a"), k("1")),
                Ok(Response::Put(false)),
                0,
                1,
            ),
            ev(
                1,
                Request::Get(k("a")),
                Ok(Response::Get(Some(k("x")))),
                2,
                3,
            ),
        ];
        assert!(check(&bad, 1000).is_err());
    }

    /// A write whose error promised that nothing was committed is left
    /// out, as by the per-key checker: read back, it is caught; one whose
    /// outcome is unknown may explain the read.
    #[test]
    fn a_write_that_promised_nothing_but_was_read_back_is_caught() {
        let h = |failure| {
            vec![
                ev(0, Request::Put(k("a"), k("1")), Err(failure), 0, 1),
                ev(
                    1,
                    scan("a", "z"),
                    Ok(Response::Scan(vec![(k("a"), k("1"))])),
                    2,
                    3,
                ),
            ]
        };
        assert!(check(&h(Failure::Unknown), 1000).is_ok());
        assert!(check(&h(Failure::NotCommitted), 1000).is_err());
    }
}

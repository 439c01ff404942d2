//! A Wing-Gong-Lowe linearizability checker for key-value histories.
//!
//! Keys are independent registers, so a history is linearizable iff each key's
//! sub-history is (locality); each is checked on its own. The search walks the
//! history's call/return events, tentatively linearizing any pending call whose
//! result agrees with the sequential map, and backtracks on a return whose call
//! was not linearized; states already explored (set of linearized operations
//! plus the register's value) are cached, as in Lowe's refinement.
//!
//! Failed writes (`KvRet::Unknown`) may be linearized anywhere after their
//! invocation or not at all; failed reads are dropped.

use std::collections::{BTreeMap, HashSet};

use crate::history::{Event, KvOp, KvRet};

/// Why a history is not (or could not be shown) linearizable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The key whose sub-history failed.
    pub key: Vec<u8>,
    /// Its operations, in invocation order.
    pub ops: Vec<Event>,
    /// What went wrong.
    pub reason: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "key {:?}: {}",
            String::from_utf8_lossy(&self.key),
            self.reason
        )?;
        for e in self.ops.iter().take(60) {
            writeln!(
                f,
                "  [{:>6} .. {:>6}] client {:>2} {:?} -> {:?}",
                e.invoke,
                if e.response == u64::MAX {
                    "?".to_string()
                } else {
                    e.response.to_string()
                },
                e.client,
                short_op(&e.op),
                short_ret(&e.ret)
            )?;
        }
        if self.ops.len() > 60 {
            writeln!(f, "  ... {} more", self.ops.len() - 60)?;
        }
        Ok(())
    }
}

fn short(v: &[u8]) -> String {
    String::from_utf8_lossy(&v[..v.len().min(24)]).into_owned()
}

fn short_op(op: &KvOp) -> String {
    match op {
        KvOp::Get => "GET".into(),
        KvOp::Put(v) => format!("PUT {}", short(v)),
        KvOp::Delete => "DELETE".into(),
    }
}

fn short_ret(r: &KvRet) -> String {
    match r {
        KvRet::Get(Some(v)) => short(v),
        KvRet::Get(None) => "not found".into(),
        KvRet::Put(e) | KvRet::Delete(e) => format!("existed={e}"),
        KvRet::Unknown => "unknown".into(),
    }
}

/// Checks every key's sub-history; `max_steps` bounds the search per key.
pub fn check_history(events: &[Event], max_steps: u64) -> Result<usize, Violation> {
    let mut per_key: BTreeMap<Vec<u8>, Vec<Event>> = BTreeMap::new();
    for e in events {
        if matches!((&e.op, &e.ret), (KvOp::Get, KvRet::Unknown)) {
            continue;
        }
        let mut e = e.clone();
        if e.ret == KvRet::Unknown {
            e.response = u64::MAX;
        }
        per_key.entry(e.key.clone()).or_default().push(e);
    }
    let mut checked = 0;
    for (key, mut ops) in per_key {
        ops.sort_by_key(|e| e.invoke);
        if let Err(reason) = check_key(&ops, max_steps) {
            return Err(Violation { key, ops, reason });
        }
        checked += ops.len();
    }
    Ok(checked)
}

type State = Option<Vec<u8>>;

fn apply(state: &State, e: &Event) -> Option<State> {
    match (&e.op, &e.ret) {
        (KvOp::Get, KvRet::Get(v)) => (v == state).then(|| state.clone()),
        (KvOp::Put(v), KvRet::Put(existed)) => {
            (*existed == state.is_some()).then(|| Some(v.clone()))
        }
        (KvOp::Delete, KvRet::Delete(existed)) => (*existed == state.is_some()).then_some(None),
        (KvOp::Put(v), KvRet::Unknown) => Some(Some(v.clone())),
        (KvOp::Delete, KvRet::Unknown) => Some(None),
        _ => None,
    }
}

#[derive(Clone, Copy)]
struct Entry {
    op: usize,
    call: bool,
}

fn check_key(ops: &[Event], max_steps: u64) -> Result<(), String> {
    // Events sorted by time; calls and returns have distinct logical times
    // except failed writes, whose returns sit at the end.
    let mut entries: Vec<(u64, u8, Entry)> = Vec::with_capacity(ops.len() * 2);
    for (i, e) in ops.iter().enumerate() {
        entries.push((e.invoke, 0, Entry { op: i, call: true }));
        entries.push((e.response, 1, Entry { op: i, call: false }));
    }
    entries.sort_by_key(|&(t, c, en)| (t, c, en.op));
    let n = entries.len();
    // Doubly linked list over entries, index n = head sentinel.
    let mut next: Vec<usize> = (1..=n).collect();
    next.push(0);
    let mut prev: Vec<usize> = vec![n; n + 1];
    for (i, p) in prev.iter_mut().enumerate().take(n).skip(1) {
        *p = i - 1;
    }
    next[n] = if n > 0 { 0 } else { usize::MAX };
    for p in next.iter_mut().take(n) {
        if *p == n {
            *p = usize::MAX;
        }
    }
    let mut call_pos = vec![0usize; ops.len()];
    let mut ret_pos = vec![0usize; ops.len()];
    for (pos, (_, _, en)) in entries.iter().enumerate() {
        if en.call {
            call_pos[en.op] = pos;
        } else {
            ret_pos[en.op] = pos;
        }
    }
    let unlink = |next: &mut Vec<usize>, prev: &mut Vec<usize>, p: usize| {
        let (a, b) = (prev[p], next[p]);
        next[a] = b;
        if b != usize::MAX {
            prev[b] = a;
        }
    };
    let relink = |next: &mut Vec<usize>, prev: &mut Vec<usize>, p: usize| {
        let (a, b) = (prev[p], next[p]);
        next[a] = p;
        if b != usize::MAX {
            prev[b] = p;
        }
    };
    let words = ops.len().div_ceil(64);
    let mut linearized = vec![0u64; words];
    let mut cache: HashSet<(Vec<u64>, State)> = HashSet::new();
    let mut stack: Vec<(usize, State)> = Vec::new();
    let mut state: State = None;
    let mut cur = next[n];
    let mut steps = 0u64;
    loop {
        steps += 1;
        if steps > max_steps {
            return Err(format!("search exceeded {max_steps} steps (inconclusive)"));
        }
        if cur == usize::MAX {
            return Ok(());
        }
        let en = entries[cur].2;
        if en.call {
            let e = &ops[en.op];
            match apply(&state, e) {
                Some(new_state) => {
                    let mut lin = linearized.clone();
                    lin[en.op / 64] |= 1 << (en.op % 64);
                    if cache.insert((lin.clone(), new_state.clone())) {
                        stack.push((en.op, std::mem::replace(&mut state, new_state)));
                        linearized = lin;
                        unlink(&mut next, &mut prev, call_pos[en.op]);
                        unlink(&mut next, &mut prev, ret_pos[en.op]);
                        cur = next[n];
                        continue;
                    }
                    cur = next[cur];
                }
                None => cur = next[cur],
            }
        } else {
            if ops[en.op].ret == KvRet::Unknown {
                // Only failed writes remain pending: they need not take effect.
                return Ok(());
            }
            let Some((op, old)) = stack.pop() else {
                let e = &ops[en.op];
                return Err(format!(
                    "no linearization: client {} {} -> {} cannot take effect",
                    e.client,
                    short_op(&e.op),
                    short_ret(&e.ret)
                ));
            };
            state = old;
            linearized[op / 64] &= !(1 << (op % 64));
            relink(&mut next, &mut prev, ret_pos[op]);
            relink(&mut next, &mut prev, call_pos[op]);
            cur = next[call_pos[op]];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(client: usize, op: KvOp, ret: KvRet, invoke: u64, response: u64) -> Event {
        Event {
            client,
            key: b"k".to_vec(),
            op,
            ret,
            invoke,
            response,
        }
    }

    fn put(v: &str) -> KvOp {
        KvOp::Put(v.as_bytes().to_vec())
    }

    fn got(v: &str) -> KvRet {
        KvRet::Get(Some(v.as_bytes().to_vec()))
    }

    #[test]
    fn sequential_history_is_linearizable() {
        let h = vec![
            ev(0, put("a"), KvRet::Put(false), 0, 1),
            ev(0, KvOp::Get, got("a"), 2, 3),
            ev(0, KvOp::Delete, KvRet::Delete(true), 4, 5),
            ev(0, KvOp::Get, KvRet::Get(None), 6, 7),
        ];
        assert_eq!(check_history(&h, 10_000), Ok(4));
    }

    #[test]
    fn stale_read_is_caught() {
        let h = vec![
            ev(0, put("a"), KvRet::Put(false), 0, 1),
            ev(0, put("b"), KvRet::Put(true), 2, 3),
            ev(1, KvOp::Get, got("a"), 4, 5),
        ];
        assert!(check_history(&h, 10_000).is_err());
    }

    #[test]
    fn lost_write_is_caught() {
        let h = vec![
            ev(0, put("a"), KvRet::Put(false), 0, 1),
            ev(1, KvOp::Get, KvRet::Get(None), 2, 3),
        ];
        assert!(check_history(&h, 10_000).is_err());
    }

    #[test]
    fn value_never_written_is_caught() {
        let h = vec![ev(1, KvOp::Get, got("zz"), 0, 1)];
        assert!(check_history(&h, 10_000).is_err());
    }

    #[test]
    fn concurrent_operations_may_take_effect_in_either_order() {
        let h = vec![
            ev(0, put("a"), KvRet::Put(true), 0, 5),
            ev(1, put("b"), KvRet::Put(false), 1, 6),
            ev(2, KvOp::Get, got("a"), 7, 8),
        ];
        assert!(check_history(&h, 10_000).is_ok(), "b then a");
        let h = vec![
            ev(0, put("a"), KvRet::Put(false), 0, 5),
            ev(1, put("b"), KvRet::Put(true), 1, 6),
            ev(2, KvOp::Get, got("b"), 7, 8),
        ];
        assert!(check_history(&h, 10_000).is_ok(), "a then b");
    }

    #[test]
    fn failed_writes_may_or_may_not_apply() {
        let applied = vec![
            ev(0, put("a"), KvRet::Unknown, 0, 1),
            ev(1, KvOp::Get, got("a"), 2, 3),
        ];
        assert!(check_history(&applied, 10_000).is_ok());
        let not_applied = vec![
            ev(0, put("a"), KvRet::Unknown, 0, 1),
            ev(1, KvOp::Get, KvRet::Get(None), 2, 3),
        ];
        assert!(check_history(&not_applied, 10_000).is_ok());
    }

    #[test]
    fn wrong_existed_flag_is_caught() {
        let h = vec![ev(0, put("a"), KvRet::Put(true), 0, 1)];
        assert!(check_history(&h, 10_000).is_err());
    }

    #[test]
    fn keys_are_checked_independently() {
        let mut h = vec![ev(0, put("a"), KvRet::Put(false), 0, 1)];
        let mut other = ev(1, KvOp::Get, KvRet::Get(None), 2, 3);
        other.key = b"other".to_vec();
        h.push(other);
        assert_eq!(check_history(&h, 10_000), Ok(2));
    }
}

//! GET: forward pass over the candidates, previous versions, reverse pass.
//!
//! Steps (docs/protocol.md, "GET"):
//! 1. For each candidate index table entry in order: read it (a bucket's B
//!    entries come in one READ, posted when the pass reaches the bucket);
//!    skip it if empty or its filter bits differ; otherwise get its data
//!    table entry (local cache, local data table by CPU, or RDMA READ).
//! 2. Key differs: next candidate. `Valid`: return the value (with
//!    `multiple_reads`, read it now: header and key came first; the whole
//!    entry is then cached like any other). `Deleted`: not found.
//!    `Writing`/`Aborted`: fall back to the previous version; if that is empty,
//!    remember the entry and go on.
//! 3. No answer after all candidates: re-read the state words of the remembered
//!    in-progress entries (any change: conflict), then re-read every candidate
//!    bucket, last first (any changed entry: conflict). Otherwise: not found.

use crate::addr::{DteAddr, IteAddr};
use crate::error::{CorruptionKind, Error};
use crate::layout::{DteState, IndexEntry};
use crate::machine::context::{Cx, DteView};
use crate::machine::io::{bucket_of, buckets_unchanged, bytes, word, Results};
use crate::machine::Logic;
use crate::time::Nanos;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Phase {
    Start,
    AwaitIte,
    AwaitDte,
    AwaitValue(DteView),
    AwaitPrev(DteAddr),
    AwaitStates,
    AwaitReverse,
}

/// The logic of one GET attempt.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GetLogic {
    key: Vec<u8>,
    cands: Vec<IteAddr>,
    filter: u16,
    i: usize,
    words: Vec<IndexEntry>,
    posted_at: Nanos,
    uncommitted: Vec<(DteAddr, u64)>,
    phase: Phase,
}

type Out = Option<Result<Option<Vec<u8>>, Error>>;

impl GetLogic {
    /// A GET of `key`.
    pub fn new(key: Vec<u8>) -> GetLogic {
        GetLogic {
            key,
            cands: Vec::new(),
            filter: 0,
            i: 0,
            words: Vec::new(),
            posted_at: Nanos::ZERO,
            uncommitted: Vec::new(),
            phase: Phase::Start,
        }
    }

    fn read_candidate(&mut self, cx: &mut Cx<'_>) -> Out {
        if self.i >= self.cands.len() {
            return self.reverse_pass(cx);
        }
        if let Some(&w) = self.words.get(self.i) {
            // A later slot of the bucket the last READ brought.
            return self.on_word(cx, w);
        }
        self.posted_at = cx.now;
        cx.read_bucket(self.cands[self.i]);
        self.phase = Phase::AwaitIte;
        None
    }

    /// Follows candidate `self.i`, whose index word is `w`.
    fn on_word(&mut self, cx: &mut Cx<'_>, w: IndexEntry) -> Out {
        if cx.behind(self.i, w) {
            // The index grew past this client's view: read the directory
            // and look again (nothing was answered).
            return Some(Err(Error::Conflict));
        }
        let Some(dte) = w.dte().filter(|_| w.filter_matches(self.filter)) else {
            return self.next(cx);
        };
        let read_at = self.read_at(cx, cx.client.faults.get_hit_time_from_completion);
        if let Some(v) = cx.cached_view(w, read_at) {
            return self.evaluate(cx, v, read_at);
        }
        cx.read_dte(dte, !cx.cfg().multiple_reads);
        self.phase = Phase::AwaitDte;
        None
    }

    fn next(&mut self, cx: &mut Cx<'_>) -> Out {
        self.i += 1;
        self.read_candidate(cx)
    }

    /// The time the GET stamps a cache entry with: when the READ of the
    /// index entry was posted, or (a broken variant, `broken`) when the
    /// completion at hand is processed.
    fn read_at(&self, cx: &Cx<'_>, broken: bool) -> Nanos {
        if broken {
            cx.now
        } else {
            self.posted_at
        }
    }

    /// Decides on the entry `v` read through `self.words[self.i]`; a whole
    /// committed entry is cached (again) valid from `read_at`.
    fn evaluate(&mut self, cx: &mut Cx<'_>, v: DteView, read_at: Nanos) -> Out {
        if v.key != self.key {
            return self.next(cx);
        }
        match v.header.state.state {
            DteState::Valid => match &v.value {
                Some(value) => {
                    cx.cache_insert(self.words[self.i], &v, read_at);
                    Some(Ok(Some(value.clone())))
                }
                None => {
                    let state = v.header.state;
                    let (key_len, value_len) =
                        (usize::from(state.key_len), state.value_len as usize);
                    if !cx
                        .cfg()
                        .data_tables()
                        .layout_of(v.addr)
                        .fits(key_len, value_len)
                    {
                        // A committed header whose lengths do not fit its
                        // class: reading on would return its neighbours.
                        return Some(Err(Error::corrupt(CorruptionKind::Memory, format!(
                            "{}: a value of {value_len} B after a key of {key_len} B does not fit its class",
                            v.addr
                        ))));
                    }
                    cx.read_value(v.addr, key_len, value_len);
                    self.phase = Phase::AwaitValue(v);
                    None
                }
            },
            DteState::Deleted => Some(Ok(None)),
            DteState::Writing | DteState::Aborted => {
                if !cx.cfg().previous_versions {
                    return Some(Err(Error::Conflict));
                }
                let prev = IndexEntry(v.header.prev);
                match prev.dte() {
                    Some(p) => {
                        cx.read_dte(p, true);
                        self.phase = Phase::AwaitPrev(p);
                        None
                    }
                    None => {
                        self.uncommitted.push((v.addr, v.header.state.encode()));
                        self.next(cx)
                    }
                }
            }
            DteState::Free => Some(Err(Error::Conflict)),
        }
    }

    fn reverse_pass(&mut self, cx: &mut Cx<'_>) -> Out {
        if cx.client.faults.skip_get_reverse_pass {
            return Some(Ok(None));
        }
        if self.uncommitted.is_empty() {
            return self.reverse_ites(cx);
        }
        for &(addr, _) in &self.uncommitted {
            cx.read_state(addr);
        }
        self.phase = Phase::AwaitStates;
        None
    }

    fn reverse_ites(&mut self, cx: &mut Cx<'_>) -> Out {
        let buckets = cx.all_buckets_reversed(&self.cands);
        cx.read_buckets(&self.cands, &buckets);
        self.phase = Phase::AwaitReverse;
        None
    }
}

impl Logic for GetLogic {
    fn key(&self) -> Option<&[u8]> {
        Some(&self.key)
    }

    type Output = Option<Vec<u8>>;

    fn advance(
        &mut self,
        cx: &mut Cx<'_>,
        results: Results,
    ) -> Option<Result<Self::Output, Error>> {
        if !matches!(self.phase, Phase::Start) && cx.overran() {
            return Some(Err(Error::Timeout));
        }
        match std::mem::replace(&mut self.phase, Phase::Start) {
            Phase::Start => {
                if let Err(e) = cx.client.check_key(&self.key) {
                    return Some(Err(e));
                }
                self.cands = cx.candidates(&self.key);
                self.filter = cx.filter(&self.key);
                self.read_candidate(cx)
            }
            Phase::AwaitIte => {
                match bucket_of(&results[0], cx.bucket_len()) {
                    Ok(ws) => self.words.extend(ws),
                    Err(e) => return Some(Err(e)),
                }
                let w = self.words[self.i];
                self.on_word(cx, w)
            }
            Phase::AwaitDte => {
                let dte = self.words[self.i].dte()?;
                let read_at = self.read_at(cx, cx.client.faults.get_insert_time_from_completion);
                match cx.view(dte, &results[0]) {
                    Ok(v) => self.evaluate(cx, v, read_at),
                    Err(e) => Some(Err(e)),
                }
            }
            Phase::AwaitValue(mut v) => match bytes(&results[0]) {
                Ok(b) => {
                    let len = v.header.state.value_len as usize;
                    let Some(value) = b.get(..len).map(<[u8]>::to_vec) else {
                        return Some(Err(Error::corrupt(
                            CorruptionKind::Completion,
                            "short value read",
                        )));
                    };
                    // The entry is committed (hence immutable): the two reads
                    // together are its header, key and value, which the
                    // cache may keep.
                    let layout = cx.cfg().data_tables().layout_of(v.addr);
                    v.raw
                        .truncate(layout.value_start(usize::from(v.header.state.key_len)) as usize);
                    v.raw.extend_from_slice(b);
                    v.value = Some(value.clone());
                    let broken = cx.client.faults.get_value_insert_time_from_completion;
                    let read_at = self.read_at(cx, broken);
                    cx.cache_insert(self.words[self.i], &v, read_at);
                    Some(Ok(Some(value)))
                }
                Err(e) => Some(Err(e)),
            },
            Phase::AwaitPrev(p) => self.on_prev(cx, &results, p),
            Phase::AwaitStates => {
                for (r, &(_, expected)) in results.iter().zip(&self.uncommitted) {
                    match word(r) {
                        Ok(w) if w == expected => {}
                        Ok(_) => return Some(Err(Error::Conflict)),
                        Err(e) => return Some(Err(e)),
                    }
                }
                self.reverse_ites(cx)
            }
            Phase::AwaitReverse => {
                let buckets = cx.all_buckets_reversed(&self.cands);
                match buckets_unchanged(&buckets, &results, &self.words, cx.bucket_len(), None) {
                    Ok(true) => Some(Ok(None)),
                    Ok(false) => Some(Err(Error::Conflict)),
                    Err(e) => Some(Err(e)),
                }
            }
        }
    }
}

impl GetLogic {
    fn on_prev(&mut self, cx: &mut Cx<'_>, results: &Results, p: DteAddr) -> Out {
        let raw = match bytes(&results[0]) {
            Ok(b) => b,
            Err(e) => return Some(Err(e)),
        };
        let header = crate::layout::DataEntryHeader::decode(raw);
        let Some(header) = header else {
            return Some(Err(Error::Conflict));
        };
        let l = cx.cfg().data_tables().layout_of(p);
        let key_ok = l.key(&header, raw) == Some(&self.key[..]);
        match header.state.state {
            DteState::Valid if key_ok => Some(
                l.value(&header, raw)
                    .map(|v| Some(v.to_vec()))
                    .ok_or(Error::Conflict),
            ),
            DteState::Deleted if key_ok => Some(Ok(None)),
            _ => Some(Err(Error::Conflict)),
        }
    }
}

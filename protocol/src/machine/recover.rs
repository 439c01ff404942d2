//! Aborting an uncommitted data table entry and restoring the index.
//!
//! Used in two roles, with the same steps:
//! - the **owner** aborting its own entry (a PUT whose verification failed, a
//!   MIGRATE whose install failed);
//! - a **reclaimer**: any client that meets an in-progress entry whose owner's
//!   deadline (plus clock skew) has passed, or an aborted entry still linked.
//!
//! Steps (docs/protocol.md, "Recovery"):
//! 1. CAS the entry's state word `Writing -> Aborted` through the NIC. Exactly
//!    one of this and the owner's commit CAS (`Writing -> Valid/Deleted`) wins.
//!    If the entry is already `Aborted`, go on; if it committed, stop.
//! 2. Restore the index: a PUT/DELETE entry's index table entry goes back to the
//!    entry's previous version; a MIGRATE copy's source goes back to the
//!    previous version and its destination becomes empty. Each is one CAS that
//!    fails harmlessly if someone else already did it.
//! 3. If one of our CASes unlinked the entry, mark it for recycling.

use crate::addr::{DteAddr, IteAddr};
use crate::error::Error;
use crate::layout::{DataEntryHeader, DteKind, DteState, IndexEntry, StateWord};
use crate::machine::context::{Cx, DteView};
use crate::machine::io::{cas_previous, written, Results};

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Phase {
    Start,
    AwaitAbort,
    AwaitRestore,
    AwaitMark,
}

/// The abort-and-restore sub-machine.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Recover {
    found_at: IteAddr,
    word: IndexEntry,
    addr: DteAddr,
    header: DataEntryHeader,
    key: Vec<u8>,
    owner: bool,
    phase: Phase,
}

impl Recover {
    /// A reclaimer's recovery of the entry `view`, found through `word` at `found_at`.
    pub fn reclaim(found_at: IteAddr, word: IndexEntry, view: &DteView) -> Recover {
        Recover {
            found_at,
            word,
            addr: view.addr,
            header: view.header,
            key: view.key.clone(),
            owner: false,
            phase: Phase::Start,
        }
    }

    /// The owner aborting its own entry `addr`, linked as `word` at `found_at`.
    pub fn owner_abort(
        found_at: IteAddr,
        word: IndexEntry,
        addr: DteAddr,
        header: DataEntryHeader,
        key: Vec<u8>,
    ) -> Recover {
        Recover {
            found_at,
            word,
            addr,
            header,
            key,
            owner: true,
            phase: Phase::Start,
        }
    }

    /// Advances; `Some(Ok(()))` when the entry is no longer uncommitted-and-linked
    /// as far as this client's CASes can tell.
    pub fn advance(&mut self, cx: &mut Cx<'_>, results: Results) -> Option<Result<(), Error>> {
        match self.phase {
            Phase::Start => match self.header.state.state {
                DteState::Writing => {
                    if !self.owner && !cx.owner_expired(self.header.deadline) {
                        return Some(Err(Error::Conflict));
                    }
                    if !cx.may_mutate() {
                        return Some(Err(Error::Timeout));
                    }
                    let cur = self.header.state;
                    cx.cas_state(
                        self.addr,
                        cur.encode(),
                        cur.with_state(DteState::Aborted).encode(),
                    );
                    self.phase = Phase::AwaitAbort;
                    None
                }
                DteState::Aborted => {
                    cx.io.stats.recoveries += 1;
                    self.restore(cx)
                }
                _ => Some(Ok(())),
            },
            Phase::AwaitAbort => {
                let prev = match cas_previous(&results[0]) {
                    Ok(p) => p,
                    Err(e) => return Some(Err(e)),
                };
                let found = StateWord::decode(prev);
                if prev == self.header.state.encode() || found.state == DteState::Aborted {
                    tracing::debug!(dte = %self.addr, owner = self.owner, "aborted uncommitted entry");
                    if !self.owner {
                        cx.io.stats.recoveries += 1;
                    }
                    self.restore(cx)
                } else {
                    // The owner committed first: nothing to undo.
                    Some(Ok(()))
                }
            }
            Phase::AwaitRestore => {
                let mut unlinked = false;
                for r in &results {
                    match cas_previous(r) {
                        Ok(prev) if prev == self.word.0 => unlinked = true,
                        Ok(_) => {}
                        Err(e) => return Some(Err(e)),
                    }
                }
                if unlinked && cx.may_mutate() {
                    cx.mark_recycle(self.addr);
                    self.phase = Phase::AwaitMark;
                    None
                } else {
                    Some(Ok(()))
                }
            }
            Phase::AwaitMark => Some(written(&results[0])),
        }
    }

    fn restore(&mut self, cx: &mut Cx<'_>) -> Option<Result<(), Error>> {
        if !cx.may_mutate() {
            return Some(Err(Error::Timeout));
        }
        let prev = IndexEntry(self.header.prev);
        match self.header.state.kind {
            Some(DteKind::Migrate) => {
                let cands = cx.candidates(&self.key);
                let (Some(&src), Some(&dst)) = (
                    cands.get(usize::from(self.header.state.src)),
                    cands.get(usize::from(self.header.state.dst)),
                ) else {
                    return Some(Err(Error::Corrupt(format!(
                        "{}: migrate positions out of range",
                        self.addr
                    ))));
                };
                cx.cas_ite(src, self.word, prev);
                cx.cas_ite(dst, self.word, self.word.emptied());
            }
            _ => {
                cx.cas_ite(self.found_at, self.word, prev);
            }
        }
        self.phase = Phase::AwaitRestore;
        None
    }
}

//! Aborting an uncommitted data table entry and restoring the index.
//!
//! Used in two roles, with the same steps:
//! - the **owner** aborting its own entry (a PUT whose verification failed, a
//!   MIGRATE whose install failed, or either after a completion that left the
//!   outcome of its last CAS unknown);
//! - a **reclaimer**: any client that meets an in-progress entry whose owner's
//!   deadline (plus clock skew) has passed, or an aborted entry still linked.
//!
//! Steps (docs/protocol.md §5.6):
//! 1. CAS the entry's state word `Writing -> Aborted` through the NIC. Exactly
//!    one of this and the owner's commit CAS (`Writing -> Valid/Deleted`) wins.
//!    If the entry is already `Aborted`, go on; if it committed, stop.
//! 2. A MIGRATE copy whose install may have been posted: **fence the
//!    destination** first. CAS it from the copy to a seal; if the CAS finds
//!    an empty word instead (the install has not landed yet, or another
//!    fencer sealed it), CAS that word to a seal; and if a CAS finds the
//!    copy (the install landed in between), CAS the copy again. The seal is
//!    always the found word's next seal (the emptied word naming the same
//!    entry and incarnation, its filter bits one more), so every fence CAS,
//!    of whichever copy, moves the destination forward and none moves it
//!    back to a word it held, which a pending install may expect (two
//!    fencers that flipped between two seals once handed a pending install
//!    its word back: the swarm's case 48,969; two fencers of one copy that
//!    both wrote its emptied word around another copy's seal did so again:
//!    case 26,582). The fence ends once one of its own
//!    CASes replaced the word it expected, or the destination holds another
//!    present word. Each CAS's result says exactly what the destination
//!    holds; only then may the copy be unlinked at its source and marked.
//! 3. Restore the index: a PUT/DELETE entry's index table entry goes back to
//!    its previous version if that is present, else to the entry's own
//!    emptied word; a MIGRATE copy's source goes back to its previous version
//!    (only now, after the destination is fenced, may writers of the key
//!    proceed). A CAS that fails means someone else already restored it.
//! 4. If our restore CAS unlinked the entry's last reference, mark it for
//!    recycling.
//!
//! Where it cannot mark an entry it unlinked (the margin has passed, or the
//! restore CAS's outcome is unknown), it counts the entry as leaked
//! (`OpStats::leaked`), and so does an owner that stops short of unlinking
//! its own entry when it does not know whether the CAS that would have
//! linked it (a PUT's install, a MIGRATE's lock) ever executed: if it did
//! not, nobody else will ever meet the entry.

use crate::addr::{DteAddr, IteAddr};
use crate::error::{CorruptionKind, Error};
use crate::layout::{DataEntryHeader, DteKind, DteState, IndexEntry, StateWord};
use crate::machine::context::{Cx, DteView};
use crate::machine::io::{cas_previous, written, Results};

/// Whether a MIGRATE copy may be linked at its destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Destination {
    /// The install may have been posted (always assumed by reclaimers).
    MayHoldCopy,
    /// The owner knows its install never executed (not posted, or failed).
    NotInstalled,
}

/// Fence CASes tried before giving up (each failure means another client
/// changed the destination in between; a bound keeps the step finite).
const FENCE_TRIES: u8 = 4;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Phase {
    Start,
    AwaitAbort,
    AwaitFence { expect: IndexEntry, tries: u8 },
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
    dst: Destination,
    /// The owner does not know whether its entry was ever linked.
    link_unknown: bool,
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
            dst: Destination::MayHoldCopy,
            link_unknown: false,
            phase: Phase::Start,
        }
    }

    /// The owner aborting its own entry `addr`, linked as `word` at `found_at`
    /// (for a MIGRATE copy: its source); `dst` says whether its install may
    /// have executed, `link_unknown` whether the CAS that linked it at
    /// `found_at` may not have executed (its completion failed).
    pub fn owner_abort(
        found_at: IteAddr,
        word: IndexEntry,
        addr: DteAddr,
        header: DataEntryHeader,
        key: Vec<u8>,
        dst: Destination,
        link_unknown: bool,
    ) -> Recover {
        Recover {
            found_at,
            word,
            addr,
            header,
            key,
            owner: true,
            dst,
            link_unknown,
            phase: Phase::Start,
        }
    }

    /// Stops with `e` before unlinking the entry: if it may never have been
    /// linked, nobody else will ever meet it, so it is counted as leaked.
    fn give_up(&self, cx: &mut Cx<'_>, e: Error) -> Option<Result<(), Error>> {
        if self.link_unknown {
            cx.io.stats.leaked += 1;
        }
        Some(Err(e))
    }

    /// Advances; `Some(Ok(()))` when the entry is no longer uncommitted-and-linked
    /// as far as this client's CASes can tell.
    pub fn advance(&mut self, cx: &mut Cx<'_>, results: Results) -> Option<Result<(), Error>> {
        match self.phase.clone() {
            Phase::Start => match self.header.state.state {
                DteState::Writing => {
                    if !self.owner && !cx.owner_expired(self.header.deadline) {
                        return Some(Err(Error::Conflict));
                    }
                    if !cx.may_mutate() {
                        return self.give_up(cx, Error::Timeout);
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
                    self.unlink(cx)
                }
                _ => Some(Ok(())),
            },
            Phase::AwaitAbort => {
                let prev = match cas_previous(&results[0]) {
                    Ok(p) => p,
                    Err(e) => return self.give_up(cx, e),
                };
                let found = StateWord::decode(prev);
                if prev == self.header.state.encode() || found.state == DteState::Aborted {
                    tracing::debug!(dte = %self.addr, owner = self.owner, "aborted uncommitted entry");
                    if !self.owner {
                        cx.io.stats.recoveries += 1;
                    }
                    self.unlink(cx)
                } else {
                    // The owner committed first: nothing to undo.
                    Some(Ok(()))
                }
            }
            Phase::AwaitFence { expect, tries } => {
                let found = match cas_previous(&results[0]) {
                    Ok(p) => IndexEntry(p),
                    Err(e) => return self.give_up(cx, e),
                };
                let stops_early = cx.client.faults.fence_stops_at_present_word;
                if found == self.word && found != expect && !stops_early {
                    // The install landed between two fence tries (it was
                    // posted before the abort and held, or it completed with
                    // an error first and executed later): the copy is linked
                    // at the destination. Fence it too: the copy may be
                    // restored away from the source and marked only once the
                    // destination does not hold it.
                    if tries >= FENCE_TRIES {
                        return Some(Err(Error::Conflict));
                    }
                    return self.fence(cx, found, tries + 1);
                }
                if found == expect || found.is_present() || found.is_growth_seal() {
                    // Our CAS sealed the destination (with a word other than
                    // the one it replaced, so not what a pending install
                    // expects, or over the copy, whose install has landed),
                    // or it holds another key's or version's word: restore
                    // the source.
                    return self.restore_source(cx);
                }
                // An empty word this fence did not write: fence that one,
                // even if it looks like the seal. The copy's emptied word can
                // be the destination's word from before the install (the
                // copy's data table entry was unlinked from there in an
                // earlier incarnation: index words name an entry, not its
                // incarnation), and a pending install expects exactly that.
                if tries >= FENCE_TRIES {
                    return self.give_up(cx, Error::Conflict);
                }
                self.fence(cx, found, tries + 1)
            }
            Phase::AwaitRestore => {
                let mut unlinked = false;
                for r in &results {
                    match cas_previous(r) {
                        Ok(prev) if prev == self.word.0 => unlinked = true,
                        Ok(_) => {}
                        Err(e) => {
                            // Our restore may have unlinked the entry, and
                            // then nobody marks it: counted as leaked.
                            cx.io.stats.leaked += 1;
                            return Some(Err(e));
                        }
                    }
                }
                if unlinked && cx.may_mutate() {
                    cx.mark_recycle(self.addr, self.header.recycle);
                    self.phase = Phase::AwaitMark;
                    None
                } else {
                    if unlinked || self.link_unknown {
                        // Unlinked by us, too late to mark it; or our own
                        // entry that was maybe never linked (if it was,
                        // whoever unlinked it marks it): counted as leaked.
                        cx.io.stats.leaked += 1;
                    }
                    Some(Ok(()))
                }
            }
            Phase::AwaitMark => {
                if written(&results[0]).is_err() {
                    cx.io.stats.leaked += 1;
                }
                Some(Ok(()))
            }
        }
    }

    /// The candidate entries of a MIGRATE copy: (source, destination). A
    /// copy whose positions lie in a generation the client's view does not
    /// hold is a growth's the view is behind: the client reads the
    /// directory again (a conflict; nothing of the copy was changed past
    /// its abort, which is the reclaimer's to make at any time).
    fn copy_positions(&self, cx: &mut Cx<'_>) -> Result<(IteAddr, IteAddr), Error> {
        let cands = cx.candidates(&self.key);
        let (src, dst) = (self.header.state.src, self.header.state.dst);
        match (cx.position_of(src), cx.position_of(dst)) {
            (Some(s), Some(d)) => match (cands.get(s), cands.get(d)) {
                (Some(&src), Some(&dst)) => Ok((src, dst)),
                _ => Err(Error::corrupt(
                    CorruptionKind::Memory,
                    format!("{}: migrate positions out of range", self.addr),
                )),
            },
            _ if cx.cfg().index_generations > 1 => {
                cx.note_behind();
                Err(Error::Conflict)
            }
            _ => Err(Error::corrupt(
                CorruptionKind::Memory,
                format!("{}: migrate positions out of range", self.addr),
            )),
        }
    }

    /// The entry is aborted: take it out of the index.
    fn unlink(&mut self, cx: &mut Cx<'_>) -> Option<Result<(), Error>> {
        if !cx.may_mutate() {
            return self.give_up(cx, Error::Timeout);
        }
        let prev = IndexEntry(self.header.prev);
        if self.header.state.kind != Some(DteKind::Migrate) {
            // A rollback over an empty word leaves the entry's own emptied
            // word, so that empty words never recur (a fenced destination
            // stays fenced). The broken variant restores the old word exactly.
            let back = if prev.is_present() || cx.client.faults.unfenced_migrate_install {
                prev
            } else {
                self.word.emptied()
            };
            cx.cas_ite(self.found_at, self.word, back);
            self.phase = Phase::AwaitRestore;
            return None;
        }
        let (src, dst) = match self.copy_positions(cx) {
            Ok(p) => p,
            Err(e) => return self.give_up(cx, e),
        };
        let faults = cx.client.faults;
        if faults.unfenced_migrate_install || faults.rollback_destination_to_previous {
            // The landed protocol: source and destination in one round, the
            // destination only cleared if the install has already landed.
            let dst_back = if faults.rollback_destination_to_previous {
                prev
            } else {
                self.word.emptied()
            };
            cx.cas_ite(src, self.word, prev);
            cx.cas_ite(dst, self.word, dst_back);
            self.phase = Phase::AwaitRestore;
            return None;
        }
        match self.dst {
            Destination::NotInstalled => self.restore_source(cx),
            Destination::MayHoldCopy => self.fence(cx, self.word, 1),
        }
    }

    /// One fence CAS on the copy's destination: `expect ->` the seal.
    fn fence(
        &mut self,
        cx: &mut Cx<'_>,
        expect: IndexEntry,
        tries: u8,
    ) -> Option<Result<(), Error>> {
        if !cx.may_mutate() {
            return self.give_up(cx, Error::Timeout);
        }
        let dst = match self.copy_positions(cx) {
            Ok((_, dst)) => dst,
            Err(e) => return self.give_up(cx, e),
        };
        // The seal is the word found's next seal: the emptied word naming
        // the same entry (or none, over the never-used word), its filter
        // bits one more. Every fence CAS, whichever copy it fences, moves
        // the destination forward from the word it found, never back to a
        // word the destination held before, so no pending install (of this
        // copy or another) ever finds its expected word again. (The first
        // broken variant flips between the copy's emptied word and the
        // never-used word; the second writes the copy's emptied word over
        // a word naming another entry, which two fencers of one copy then
        // both write, with another copy's seal between them.)
        let seal = if cx.client.faults.fence_seal_flips {
            if expect == self.word.emptied() {
                IndexEntry::NEVER_USED
            } else {
                self.word.emptied()
            }
        } else if cx.client.faults.fence_seals_with_copy_word && !expect.names_same_entry(self.word)
        {
            self.word.emptied()
        } else {
            expect.next_seal()
        };
        cx.cas_ite(dst, expect, seal);
        self.phase = Phase::AwaitFence { expect, tries };
        None
    }

    /// Puts the copy's source back to its previous version.
    fn restore_source(&mut self, cx: &mut Cx<'_>) -> Option<Result<(), Error>> {
        if !cx.may_mutate() {
            return self.give_up(cx, Error::Timeout);
        }
        let src = match self.copy_positions(cx) {
            Ok((src, _)) => src,
            Err(e) => return self.give_up(cx, e),
        };
        cx.cas_ite(src, self.word, IndexEntry(self.header.prev));
        self.phase = Phase::AwaitRestore;
        None
    }
}

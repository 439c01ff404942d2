//! Allocation and recycling of a client's data table entries.
//!
//! Each client owns a contiguous share of its node's data table, so clients of
//! one node never contend for entries. The allocator trusts nothing it has not
//! read: it sweeps its share lazily, a batch of headers at a time, and an entry
//! becomes free only if its header is all zero (never written) or its recycle
//! flag is set and it has expired: an entry the owner marked itself once its
//! expiration time plus the clock-skew allowance has passed; an entry another
//! client marked (stamped by that client's clock) once T has passed since
//! this allocator's sweep first saw the mark, by its own clock, so that no
//! clock but the owner's decides the reuse (safe whatever the skew between
//! the two: docs/protocol.md §4).
//! So a client that restarts after a crash never overwrites an entry that is
//! still linked. An entry whose index-entry CAS failed was never published and
//! is reusable at once, in the same incarnation. Each entry's next
//! incarnation (its reuse count modulo 128, which its state word and every
//! index word naming it carry) is one more than the swept header's: the
//! allocator hands it out with the entry ([`DteAllocator::incarnation`]).
//! The allocator is sans-IO: the sweep's header reads are
//! issued by the state machine that needs an entry, and their results are fed
//! to [`DteAllocator::collect`].
//!
//! A client owns one share of each size class's table
//! (docs/protocol.md §2.3): [`Allocator`] keeps a [`DteAllocator`] per class
//! and hands each entry to the share it belongs to.

use std::collections::VecDeque;
use std::time::Duration;

use crate::addr::{ClientId, DteAddr};
use crate::config::Config;
use crate::layout::{next_incarnation, DataEntryHeader, DteState, StateWord};
use crate::time::{duration_nanos, Nanos};

/// Headers read per sweep batch.
pub const SWEEP_BATCH: u32 = 256;

/// A client's allocator over its shares of every size class's table, one
/// [`DteAllocator`] per class (class 0 first).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Allocator {
    shares: Vec<DteAllocator>,
}

impl Allocator {
    /// The allocator of client `id` under `cfg`: of each class's entries on
    /// its node, the `id.index`-th of `shares_per_node` equal shares (the
    /// node's clients', then its clients without storage's).
    pub fn new(cfg: &Config, id: ClientId) -> Allocator {
        let shares = cfg
            .data_tables()
            .classes()
            .map(|(class, _)| {
                let (first, count) = cfg.share_entries(id, class).unwrap_or((0, 0));
                DteAllocator::new(DteAddr::new(id.node, class, 0).table, first, count)
            })
            .collect();
        Allocator { shares }
    }

    /// The allocator of client without storage `id`: as [`Allocator::new`],
    /// with each share in generations ([`DteAllocator::pure`]).
    pub fn new_pure(cfg: &Config, id: ClientId) -> Allocator {
        let mut a = Allocator::new(cfg, id);
        a.shares.iter_mut().for_each(|s| s.pure = true);
        a
    }

    /// Starts a new window generation in every share
    /// ([`DteAllocator::begin_generation`]).
    pub fn begin_generation(&mut self) {
        self.shares
            .iter_mut()
            .for_each(DteAllocator::begin_generation);
    }

    /// Whether a new window generation would free entries of class `class`
    /// ([`DteAllocator::spent_in_generation`]).
    pub fn spent_in_generation(&self, class: u8) -> bool {
        self.share(class)
            .is_some_and(DteAllocator::spent_in_generation)
    }

    /// The state and recycle words `dte` holds, as this allocator last knew
    /// them ([`DteAllocator::claim_words`]).
    pub fn claim_words(&self, dte: DteAddr) -> (u64, u64) {
        self.share(dte.class())
            .map_or((0, 0), |s| s.claim_words(dte))
    }

    /// How many entries only this allocator knows to be free of writes
    /// never linked: those set aside for the next generation
    /// ([`DteAllocator::quarantine`]) and those it freed that still hold
    /// their never-linked `Writing` word. What a client without storage
    /// leaves behind if its process ends now: no sweep of another process
    /// can tell them from an entry in progress (the others a later sweep
    /// frees). A node's client's allocator has none of either.
    pub fn set_aside(&self) -> u64 {
        self.shares.iter().map(DteAllocator::set_aside).sum()
    }

    /// Returns an entry handed out and never written
    /// ([`DteAllocator::release_unwritten`]).
    pub fn release_unwritten(&mut self, dte: DteAddr) {
        if let Some(s) = self.share_of(dte) {
            s.release_unwritten(dte);
        }
    }

    /// Sets entry `dte` aside until the next generation
    /// ([`DteAllocator::quarantine`]).
    pub fn quarantine(&mut self, dte: DteAddr) {
        if let Some(s) = self.share_of(dte) {
            s.quarantine(dte);
        }
    }

    /// The share of class `class`, if the deployment has that class.
    pub fn share(&self, class: u8) -> Option<&DteAllocator> {
        self.shares.get(usize::from(class))
    }

    /// The share of class `class`, mutably.
    pub fn share_mut(&mut self, class: u8) -> Option<&mut DteAllocator> {
        self.shares.get_mut(usize::from(class))
    }

    /// The share `dte` belongs to, mutably.
    fn share_of(&mut self, dte: DteAddr) -> Option<&mut DteAllocator> {
        self.share_mut(dte.class())
    }

    /// Marks every owned entry of every class free without reading it
    /// ([`DteAllocator::assume_zeroed`]).
    pub fn assume_zeroed(&mut self) {
        self.shares.iter_mut().for_each(DteAllocator::assume_zeroed);
    }

    /// Every entry this client owns, class by class.
    pub fn owned(&self) -> impl Iterator<Item = DteAddr> + '_ {
        self.shares.iter().flat_map(DteAllocator::owned)
    }

    /// Whether `dte` is one of this client's entries.
    pub fn owns(&self, dte: DteAddr) -> bool {
        self.share(dte.class())
            .is_some_and(|s| s.rel(dte).is_some())
    }

    /// Takes a free entry of class `class`, if its share has one.
    pub fn allocate(&mut self, class: u8) -> Option<DteAddr> {
        self.share_mut(class)?.allocate()
    }

    /// The incarnation an entry handed out carries
    /// ([`DteAllocator::incarnation`]).
    pub fn incarnation(&self, dte: DteAddr) -> u8 {
        self.share(dte.class()).map_or(0, |s| s.incarnation(dte))
    }

    /// Returns an entry that was never published
    /// ([`DteAllocator::release_unpublished`]).
    pub fn release_unpublished(&mut self, dte: DteAddr) {
        if let Some(s) = self.share_of(dte) {
            s.release_unpublished(dte);
        }
    }

    /// The next entries of class `class` to sweep
    /// ([`DteAllocator::next_sweep`]).
    pub fn next_sweep(&mut self, class: u8) -> Vec<DteAddr> {
        self.share_mut(class)
            .map_or_else(Vec::new, DteAllocator::next_sweep)
    }

    /// Feeds one swept header to its share ([`DteAllocator::collect`]).
    pub fn collect(
        &mut self,
        dte: DteAddr,
        header: &DataEntryHeader,
        now: Nanos,
        skew: Duration,
        expiration: Duration,
    ) -> bool {
        self.share_of(dte)
            .is_some_and(|s| s.collect(dte, header, now, skew, expiration))
    }

    /// Frees an entry regardless of its expiration
    /// ([`DteAllocator::collect_hastily`], the broken variant).
    pub fn collect_hastily(&mut self, dte: DteAddr, header: &DataEntryHeader) {
        if let Some(s) = self.share_of(dte) {
            s.collect_hastily(dte, header);
        }
    }

    /// Whether `dte` is known free ([`DteAllocator::is_known_free`]).
    pub fn is_known_free(&self, dte: DteAddr) -> bool {
        self.share(dte.class())
            .is_some_and(|s| s.is_known_free(dte))
    }
}

/// A client's allocator over its share of one data table (one size class
/// of its node).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct DteAllocator {
    table: u16,
    first: u32,
    count: u32,
    cursor: u32,
    fruitless: u32,
    free: VecDeque<u32>,
    in_free: Vec<bool>,
    /// For each entry: when (this allocator's clock, ns) a sweep first saw it
    /// marked by another client; 0: not seen so.
    remote_seen: Vec<u64>,
    /// For each entry: the incarnation its next (or current) use carries.
    incarnations: Vec<u8>,
    /// The share of a client without storage, used in generations of its
    /// windows (docs/protocol.md §2.4): an entry written in a generation is
    /// never reused before the next one (a duplicate of its WRITE may land
    /// until the window is bound again).
    pure: bool,
    /// For each entry: its state and recycle words as last swept (what a
    /// pure client's claim CASes expect).
    claim_words: Vec<(u64, u64)>,
    /// For each entry: handed out in the current generation (pure only).
    in_generation: Vec<bool>,
    /// For each entry: handed out and never linked (its data round or its
    /// install failed): free at the first sweep of the next generation,
    /// whatever its header says (pure only).
    never_linked: Vec<bool>,
}

impl DteAllocator {
    /// An allocator for entries `first..first + count` of data table `table`
    /// (a data-table id: [`DteAddr::table`]).
    pub fn new(table: u16, first: u32, count: u32) -> DteAllocator {
        DteAllocator {
            table,
            first,
            count,
            cursor: 0,
            fruitless: 0,
            free: VecDeque::new(),
            in_free: vec![false; count as usize],
            remote_seen: vec![0; count as usize],
            incarnations: vec![0; count as usize],
            pure: false,
            claim_words: vec![(0, 0); count as usize],
            in_generation: vec![false; count as usize],
            never_linked: vec![false; count as usize],
        }
    }

    /// Starts a new window generation (pure shares): the window was bound
    /// again, so nothing written under the old key lands any more, and
    /// entries handed out in the old generation follow the usual rules
    /// again; the next sweep looks at every entry.
    pub fn begin_generation(&mut self) {
        self.in_generation.iter_mut().for_each(|g| *g = false);
        self.fruitless = 0;
    }

    /// Whether a new generation would let a sweep free entries: some entry
    /// was handed out in this one (pure shares; never for others).
    pub fn spent_in_generation(&self) -> bool {
        self.pure && self.in_generation.iter().any(|&g| g)
    }

    /// How many of its entries only this allocator knows to be free of
    /// writes never linked ([`Allocator::set_aside`]).
    pub fn set_aside(&self) -> u64 {
        (0..self.count as usize)
            .filter(|&r| {
                self.never_linked[r]
                    || (self.pure
                        && self.in_free[r]
                        && StateWord::decode(self.claim_words[r].0).state == DteState::Writing)
            })
            .count() as u64
    }

    /// The state and recycle words `dte` held when it was last found free
    /// (zero for a never-written entry).
    pub fn claim_words(&self, dte: DteAddr) -> (u64, u64) {
        self.rel(dte)
            .map_or((0, 0), |rel| self.claim_words[rel as usize])
    }

    /// Returns an entry handed out and never written (nothing was posted
    /// to it): free at once, in its incarnation and with its words, even in
    /// a pure share's generation.
    pub fn release_unwritten(&mut self, dte: DteAddr) {
        if let Some(rel) = self.rel(dte) {
            self.in_generation[rel as usize] = false;
            if !self.in_free[rel as usize] {
                self.in_free[rel as usize] = true;
                self.free.push_front(rel);
            }
        }
    }

    /// Sets aside an entry handed out whose data round failed (its words
    /// unknown) or that was never linked: a pure share frees it at the
    /// first sweep of the next generation, which reads its words.
    pub fn quarantine(&mut self, dte: DteAddr) {
        if let Some(rel) = self.rel(dte) {
            self.never_linked[rel as usize] = true;
        }
    }

    /// Marks every owned entry free without reading it. Only for a share
    /// known to be all zero (a freshly booted cluster); a restarted client
    /// must sweep instead.
    pub fn assume_zeroed(&mut self) {
        for rel in 0..self.count {
            self.push_free(rel);
        }
    }

    /// The entries this allocator owns.
    pub fn owned(&self) -> impl Iterator<Item = DteAddr> + '_ {
        (self.first..self.first + self.count).map(|index| DteAddr {
            table: self.table,
            index,
        })
    }

    /// Takes an entry known to be free, if any (oldest-freed first).
    pub fn allocate(&mut self) -> Option<DteAddr> {
        let i = self.free.pop_front()?;
        self.in_free[i as usize] = false;
        self.remote_seen[i as usize] = 0;
        self.in_generation[i as usize] = self.pure;
        // What was set aside of an earlier use says nothing of this one
        // (left set, a sweep of a later generation would free the entry
        // while this use links it: the pure swarm's case 32).
        self.never_linked[i as usize] = false;
        Some(self.addr(i))
    }

    /// The incarnation an entry this allocator handed out carries: one more
    /// than the incarnation its header had when a sweep found it reusable (0
    /// for a never-written entry), kept when it comes back unpublished.
    pub fn incarnation(&self, dte: DteAddr) -> u8 {
        self.rel(dte)
            .map_or(0, |rel| self.incarnations[rel as usize])
    }

    /// Records the incarnation after the one `header` (found reusable)
    /// names.
    fn advance(&mut self, rel: u32, header: &DataEntryHeader) {
        self.incarnations[rel as usize] = if header.is_never_written() {
            0
        } else {
            next_incarnation(header.state.incarnation)
        };
    }

    fn addr(&self, rel: u32) -> DteAddr {
        DteAddr {
            table: self.table,
            index: self.first + rel,
        }
    }

    fn rel(&self, dte: DteAddr) -> Option<u32> {
        (dte.table == self.table && dte.index >= self.first && dte.index < self.first + self.count)
            .then(|| dte.index - self.first)
    }

    /// Returns an entry that was allocated but never published (its index
    /// entry CAS failed): no one can have seen it, so it is free at once, and
    /// its next use keeps its incarnation (no word naming that incarnation
    /// exists; advancing it would let failed installs, which need no T
    /// between them, run through the 128 incarnations quickly).
    pub fn release_unpublished(&mut self, dte: DteAddr) {
        if self.pure {
            // Its WRITEs may still land again until the window is bound
            // anew: free in the next generation.
            return self.quarantine(dte);
        }
        if let Some(rel) = self.rel(dte) {
            if !self.in_free[rel as usize] {
                // Reused first: it is warm in the cache and known to be free.
                self.in_free[rel as usize] = true;
                self.free.push_front(rel);
            }
        }
    }

    fn push_free(&mut self, rel: u32) {
        if !self.in_free[rel as usize] {
            self.in_free[rel as usize] = true;
            self.free.push_back(rel);
        }
    }

    /// The next entries to sweep (up to [`SWEEP_BATCH`]), or none when a whole
    /// sweep of the share found nothing free (the share is full).
    pub fn next_sweep(&mut self) -> Vec<DteAddr> {
        if self.fruitless >= self.count {
            self.fruitless = 0;
            return Vec::new();
        }
        let mut out = Vec::new();
        let mut looked = 0;
        while out.len() < SWEEP_BATCH as usize && looked < self.count {
            let rel = self.cursor;
            self.cursor = (self.cursor + 1) % self.count;
            looked += 1;
            if !self.in_free[rel as usize] {
                out.push(self.addr(rel));
            }
        }
        out
    }

    /// Whether an entry with this header may be reused at `now` by its
    /// header alone: never written, or marked for recycling by its owner with
    /// its expiration time plus the clock-skew allowance passed, or marked by
    /// another client (then reusable T after its owner's sweep first sees it:
    /// [`DteAllocator::collect`]; the simulator's data-table audit counts
    /// such an entry as reusable, not leaked).
    pub fn reusable(header: &DataEntryHeader, now: Nanos, skew: Duration) -> bool {
        if header.is_never_written() {
            return true;
        }
        header.recycle.recycle
            && header.state.state != DteState::Writing
            && (header.recycle.remote
                || header
                    .recycle
                    .expires_at
                    .saturating_add(duration_nanos(skew))
                    <= now.0)
    }

    /// Feeds one swept header, read no later than `now` (this client's
    /// clock); returns whether the entry became free. An entry marked by
    /// another client becomes free only at a sweep at least `expiration`
    /// after the first sweep that saw it marked.
    pub fn collect(
        &mut self,
        dte: DteAddr,
        header: &DataEntryHeader,
        now: Nanos,
        skew: Duration,
        expiration: Duration,
    ) -> bool {
        let Some(rel) = self.rel(dte) else {
            return false;
        };
        self.fruitless += 1;
        let r = rel as usize;
        if self.pure && self.in_generation[r] {
            return false;
        }
        if self.pure && header.state.encode() == 0 && !header.is_never_written() {
            // A pure share's entry whose state word was never claimed (a
            // data round of an ended process that landed in part): no index
            // word ever named it, in any incarnation.
            self.claim_words[r] = (0, header.recycle.encode());
            self.incarnations[r] = 0;
            self.fruitless = 0;
            self.push_free(rel);
            return true;
        }
        if self.never_linked[r] {
            // No index word names it: free at once in its incarnation, to
            // be claimed from the words it holds now.
            self.never_linked[r] = false;
            self.claim_words[r] = (header.state.encode(), header.recycle.encode());
            self.fruitless = 0;
            self.push_free(rel);
            return true;
        }
        let seen = &mut self.remote_seen[rel as usize];
        let remote = header.recycle.recycle && header.recycle.remote;
        if !remote {
            *seen = 0;
        }
        let free = Self::reusable(header, now, skew)
            && (!remote || {
                if *seen == 0 {
                    *seen = now.0.max(1);
                }
                now.0 >= seen.saturating_add(duration_nanos(expiration))
            });
        if free {
            self.fruitless = 0;
            self.advance(rel, header);
            if self.pure {
                // Only a pure share claims by CAS (a node's client writes
                // by CPU), and its model state should not tell apart what
                // it never uses.
                self.claim_words[r] = (header.state.encode(), header.recycle.encode());
            }
            self.push_free(rel);
        }
        free
    }

    /// Frees an entry regardless of its expiration (only the broken
    /// `reuse_before_expiry` variant does this).
    pub fn collect_hastily(&mut self, dte: DteAddr, header: &DataEntryHeader) {
        if let Some(rel) = self.rel(dte) {
            if !self.in_free[rel as usize] {
                self.advance(rel, header);
            }
            self.push_free(rel);
        }
    }

    /// Entries known to be free right now.
    pub fn available(&self) -> u32 {
        self.free.len() as u32
    }

    /// Whether `dte` is one of this allocator's entries known to be free
    /// (swept and found reusable, or returned unpublished), i.e. the next
    /// allocations will hand it out. Such an entry's header need not say so:
    /// an unpublished entry keeps the header of the write that never got
    /// linked; or, in a pure share, one set aside for the next generation
    /// ([`DteAllocator::quarantine`]), which the first sweep of that
    /// generation frees. (The simulator's data-table audit asks this.)
    pub fn is_known_free(&self, dte: DteAddr) -> bool {
        self.rel(dte)
            .is_some_and(|rel| self.in_free[rel as usize] || self.never_linked[rel as usize])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{DteKind, RecycleWord, StateWord, MAX_INCARNATION};

    fn header(recycle: bool, expires_at: u64, state: DteState) -> DataEntryHeader {
        DataEntryHeader {
            state: StateWord {
                state,
                kind: Some(DteKind::Put),
                src: 0,
                dst: 0,
                incarnation: 0,
                key_len: 1,
                value_len: 1,
            },
            deadline: 7,
            recycle: RecycleWord {
                recycle,
                remote: false,
                expires_at,
            },
            prev: 0,
        }
    }

    fn zero() -> DataEntryHeader {
        DataEntryHeader::decode(&[0u8; 32]).unwrap()
    }

    fn sweep_all(a: &mut DteAllocator, h: impl Fn(DteAddr) -> DataEntryHeader, now: Nanos) {
        for d in a.next_sweep() {
            a.collect(d, &h(d), now, Duration::ZERO, Duration::ZERO);
        }
    }

    #[test]
    fn nothing_is_free_until_swept() {
        let mut a = DteAllocator::new(2, 10, 3);
        assert_eq!(a.allocate(), None);
        sweep_all(&mut a, |_| zero(), Nanos(0));
        let mut got: Vec<u32> = (0..3).map(|_| a.allocate().unwrap().index).collect();
        got.sort();
        assert_eq!(got, vec![10, 11, 12]);
        assert_eq!(a.allocate(), None);
    }

    #[test]
    fn a_restarted_client_never_reuses_a_written_entry() {
        let mut a = DteAllocator::new(0, 0, 2);
        let live = header(false, 0, DteState::Valid);
        let writing = header(false, 0, DteState::Writing);
        sweep_all(
            &mut a,
            |d| if d.index == 0 { live } else { writing },
            Nanos(u64::MAX),
        );
        assert_eq!(a.allocate(), None);
        assert!(
            a.next_sweep().is_empty(),
            "a fruitless whole sweep reports the share full"
        );
    }

    #[test]
    fn no_reuse_before_expiration_plus_skew() {
        let mut a = DteAllocator::new(0, 0, 1);
        let d = DteAddr { table: 0, index: 0 };
        let skew = Duration::from_nanos(50);
        let h = header(true, 1_000, DteState::Valid);
        let t = Duration::from_nanos(1_000);
        assert!(!a.collect(d, &h, Nanos(999), skew, t));
        assert!(!a.collect(d, &h, Nanos(1_049), skew, t));
        assert_eq!(a.allocate(), None);
        assert!(a.collect(d, &h, Nanos(1_050), skew, t));
        assert_eq!(a.allocate(), Some(d));
    }

    /// Each reuse carries the incarnation after the swept header's (0
    /// for a never-written entry, and after the largest); an entry that
    /// comes back unpublished keeps the incarnation it was handed out with.
    #[test]
    fn a_reused_entry_carries_the_next_incarnation() {
        let d = DteAddr { table: 0, index: 0 };
        let mut a = DteAllocator::new(0, 0, 1);
        assert!(a.collect(d, &zero(), Nanos(0), Duration::ZERO, Duration::ZERO));
        assert_eq!((a.allocate(), a.incarnation(d)), (Some(d), 0));
        let mut h = header(true, 0, DteState::Valid);
        for (was, next) in [(0, 1), (5, 6), (MAX_INCARNATION, 0)] {
            h.state.incarnation = was;
            assert!(a.collect(d, &h, Nanos(10), Duration::ZERO, Duration::ZERO));
            assert_eq!((a.allocate(), a.incarnation(d)), (Some(d), next));
        }
        a.release_unpublished(d);
        assert_eq!((a.allocate(), a.incarnation(d)), (Some(d), 0));
    }

    /// A mark made by another client carries that client's clock: the
    /// owner ignores its stamp and reuses the entry T after its own sweep
    /// first saw the mark, by its own clock, whatever the stamp says.
    #[test]
    fn a_remote_mark_is_reused_t_after_the_owner_first_sees_it() {
        let mut a = DteAllocator::new(0, 0, 1);
        let d = DteAddr { table: 0, index: 0 };
        let (skew, t) = (Duration::from_nanos(50), Duration::from_nanos(1_000));
        let mut h = header(true, 0, DteState::Valid);
        h.recycle = RecycleWord::marked_remotely(10);
        // Stamped long expired by the marker's clock: not reusable yet.
        assert!(!a.collect(d, &h, Nanos(5_000), skew, t));
        assert!(!a.collect(d, &h, Nanos(5_999), skew, t));
        assert!(a.collect(d, &h, Nanos(6_000), skew, t));
        assert_eq!(a.allocate(), Some(d));
        // Reused and marked remotely again: T from the new first sighting.
        assert!(!a.collect(d, &h, Nanos(7_000), skew, t));
        assert!(a.collect(d, &h, Nanos(8_000), skew, t));
        // A sighting is forgotten once the entry is seen unmarked.
        let mut b = DteAllocator::new(0, 0, 1);
        assert!(!b.collect(d, &h, Nanos(1_000), skew, t));
        assert!(!b.collect(d, &header(false, 0, DteState::Valid), Nanos(1_500), skew, t));
        assert!(!b.collect(d, &h, Nanos(2_000), skew, t));
        assert!(!b.collect(d, &h, Nanos(2_999), skew, t));
        assert!(b.collect(d, &h, Nanos(3_000), skew, t));
    }

    #[test]
    fn unmarked_or_in_progress_entries_are_never_collected() {
        let mut a = DteAllocator::new(0, 0, 1);
        let d = DteAddr { table: 0, index: 0 };
        assert!(!a.collect(
            d,
            &header(false, 0, DteState::Valid),
            Nanos(u64::MAX),
            Duration::ZERO,
            Duration::ZERO
        ));
        assert!(!a.collect(
            d,
            &header(true, 0, DteState::Writing),
            Nanos(u64::MAX),
            Duration::ZERO,
            Duration::ZERO
        ));
    }

    #[test]
    fn known_free_entries_are_those_the_next_allocations_hand_out() {
        let mut a = DteAllocator::new(0, 10, 3);
        let d = |index| DteAddr { table: 0, index };
        assert!(!a.is_known_free(d(11)), "nothing is free until swept");
        a.release_unpublished(d(11));
        assert!(a.is_known_free(d(11)));
        assert!(!a.is_known_free(d(12)));
        let mut z = DteAllocator::new(0, 10, 3);
        z.assume_zeroed();
        assert_eq!(z.available(), 3);
        assert!(z.is_known_free(d(10)) && z.is_known_free(d(12)));
    }

    #[test]
    fn a_sweep_of_a_small_share_reads_each_entry_once() {
        let mut a = DteAllocator::new(0, 10, 3);
        let batch = a.next_sweep();
        assert_eq!(batch, a.owned().collect::<Vec<_>>());
    }

    #[test]
    fn unpublished_entries_are_free_at_once_and_only_once() {
        let mut a = DteAllocator::new(0, 0, 2);
        let d = DteAddr { table: 0, index: 1 };
        a.release_unpublished(d);
        a.release_unpublished(d);
        assert_eq!(a.available(), 1);
        assert_eq!(a.allocate(), Some(d));
        assert_eq!(a.allocate(), None);
    }

    #[test]
    fn sweeps_proceed_in_batches_and_wrap() {
        let mut a = DteAllocator::new(0, 0, SWEEP_BATCH + 10);
        assert_eq!(a.next_sweep().len(), SWEEP_BATCH as usize);
        let second = a.next_sweep();
        assert_eq!(second.len(), SWEEP_BATCH as usize);
        assert_eq!(second[0].index, SWEEP_BATCH);
        assert_eq!(second[10].index, 0, "wraps around");
    }

    #[test]
    fn foreign_entries_are_ignored() {
        let mut a = DteAllocator::new(1, 0, 2);
        a.release_unpublished(DteAddr { table: 2, index: 0 });
        a.release_unpublished(DteAddr { table: 1, index: 7 });
        // One past the share: not this allocator's either.
        a.release_unpublished(DteAddr { table: 1, index: 2 });
        assert!(!a.is_known_free(DteAddr { table: 1, index: 2 }));
        assert!(!a.collect(
            DteAddr { table: 2, index: 0 },
            &zero(),
            Nanos(0),
            Duration::ZERO,
            Duration::ZERO
        ));
        assert_eq!(a.available(), 0);
    }
}

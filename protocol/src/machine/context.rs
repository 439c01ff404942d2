//! A client's protocol state and the per-step context machines work in.
//!
//! [`ClientState`] is what a client keeps between operations (configuration,
//! allocator, cache). [`Cx`] bundles it with the round being built, the time
//! passed in by the driver and the attempt's deadline, and offers the fabric
//! operations of the protocol by name (read an index table entry, CAS a data
//! table entry's state word, mark an entry for recycling, ...).

use std::sync::Arc;

use crate::addr::{ClientId, DteAddr, IteAddr, RemoteAddr};
use crate::alloc::Allocator;
use crate::cache::DteCache;
use crate::config::Config;
use crate::error::{CorruptionKind, Error};
use crate::fabric::Op;
use crate::faults::Faults;
use crate::growth::{crosses_generations, IndexView};
use crate::hash::Hasher;
use crate::layout::{DataEntryHeader, DteKind, IndexEntry, RecycleWord, StateWord, HEADER_BYTES};
use crate::machine::io::{bytes, written, Io, Results};
use crate::pure::PureWindows;
use crate::time::{duration_nanos, Nanos};

/// What a client keeps between operations.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ClientState {
    /// Who this client is.
    pub id: ClientId,
    /// The deployment's configuration (validated).
    pub cfg: Arc<Config>,
    /// Allocator over the client's shares of its node's data tables (one
    /// per size class).
    pub alloc: Allocator,
    /// Local cache of remote committed data table entries.
    pub cache: DteCache,
    /// Test-only protocol fault switches (all off by default).
    pub faults: Faults,
    /// A client without storage's windows (`None` for a client of a node).
    pub pure: Option<PureWindows>,
    /// The index generations as this client last read the directory
    /// (docs/protocol.md §2.5; generation 0, stable, until it meets a seal).
    pub view: IndexView,
    /// The client met a growth seal its view did not expect: its next
    /// attempt reads the directory first. A new client of an index that
    /// may grow starts so (the index may have grown before it started; a
    /// process that restarts would otherwise spend an attempt to learn it).
    pub view_stale: bool,
    /// A write found no room for its key but had no time left to grow the
    /// index: the next write grows it first.
    pub growth_wanted: bool,
    /// A write's step of the sweep took more than a quarter of its attempt
    /// (or all of it): the next write does not help, so that it has its
    /// whole attempt for its own work.
    pub skip_next_help: bool,
    pub(crate) hasher: Hasher,
}

impl ClientState {
    /// The state of client `id` under `cfg` (validated here).
    pub fn new(cfg: Arc<Config>, id: ClientId) -> Result<ClientState, Error> {
        cfg.validate()?;
        id.check_in(cfg.nodes, cfg.shares_per_node())?;
        let pure = cfg.is_pure(id);
        Ok(ClientState {
            id,
            alloc: if pure {
                Allocator::new_pure(&cfg, id)
            } else {
                Allocator::new(&cfg, id)
            },
            cache: DteCache::new(cfg.cache_capacity),
            faults: Faults::default(),
            pure: pure.then(|| PureWindows::new(crate::pure::draw_nonce())),
            view: IndexView::default(),
            view_stale: cfg.index_generations > 1,
            growth_wanted: false,
            skip_next_help: false,
            hasher: cfg.hasher(),
            cfg,
        })
    }

    /// When a client without storage should renew its lease next (its
    /// clock): a third of the lease term after its last heartbeat; `None`
    /// for a client with storage, or one that holds no share yet. Past this
    /// instant its next write beats in its data round; past another third,
    /// any operation beats first ([`crate::Client::renew_lease`] beats
    /// alone).
    pub fn lease_renewal_due(&self) -> Option<Nanos> {
        self.pure
            .as_ref()
            .filter(|p| p.holds_keys())
            .map(|p| Nanos(p.beat_due))
    }

    /// The node this client runs on: its id's node, or `None` for a client
    /// without storage (it runs on no node; its id's node hosts its share).
    pub fn home(&self) -> Option<crate::addr::NodeId> {
        self.pure.is_none().then_some(self.id.node)
    }

    /// Checks a key against the configuration ([`Config::check_key`]).
    pub fn check_key(&self, key: &[u8]) -> Result<(), Error> {
        self.cfg.check_key(key)
    }

    /// Checks a value against the configuration ([`Config::check_value`]).
    pub fn check_value(&self, value: &[u8]) -> Result<(), Error> {
        self.cfg.check_value(value)
    }
}

/// A data table entry as read: header, key and (when read) value.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct DteView {
    pub addr: DteAddr,
    pub header: DataEntryHeader,
    pub key: Vec<u8>,
    pub value: Option<Vec<u8>>,
    pub raw: Vec<u8>,
}

/// The context of one step of one machine (opaque outside the crate).
pub struct Cx<'a> {
    pub(crate) io: &'a mut Io,
    pub(crate) client: &'a mut ClientState,
    pub(crate) now: Nanos,
    pub(crate) deadline: Nanos,
}

impl Cx<'_> {
    pub(crate) fn cfg(&self) -> &Config {
        &self.client.cfg
    }

    /// The key's candidates in the client's view of the index: its entries
    /// in each generation of the view, oldest first (docs/protocol.md §2.5).
    pub(crate) fn candidates(&self, key: &[u8]) -> Vec<IteAddr> {
        self.client.view.candidates(&self.client.hasher, key)
    }

    /// Candidate entries per key in one generation (N x B).
    pub(crate) fn per_generation(&self) -> usize {
        usize::from(self.cfg().candidates) * self.bucket_len()
    }

    fn grows(&self) -> bool {
        self.cfg().index_generations > 1
    }

    /// Whether candidate position `pos` lies in an old generation of a
    /// growing index: a key may be found there and moved out, never put
    /// there.
    pub(crate) fn is_old(&self, pos: usize) -> bool {
        self.client.view.is_old(pos, self.per_generation())
    }

    /// Whether a key may be put (installed, or moved by a MIGRATE) at
    /// candidate position `pos`.
    pub(crate) fn is_target(&self, pos: usize) -> bool {
        !self.is_old(pos)
    }

    /// Whether the client's view is behind the index: `w`, read at candidate
    /// position `pos`, is a growth seal where the view expects none (its
    /// newest generation). Then the client's
    /// next attempt reads the directory first, and this one ends as a
    /// conflict, having changed nothing.
    pub(crate) fn behind(&mut self, pos: usize, w: IndexEntry) -> bool {
        w.is_growth_seal() && !self.is_old(pos) && self.fell_behind()
    }

    /// A growth seal was met where the client's view expects none: its
    /// next attempt reads the directory first. `false` (nothing noted)
    /// under the switch `ignore-growth-seals`.
    pub(crate) fn fell_behind(&mut self) -> bool {
        if self.client.faults.ignore_growth_seals {
            return false;
        }
        self.note_behind();
        true
    }

    /// Notes that the client's view is behind the index: its next attempt
    /// reads the directory first.
    pub(crate) fn note_behind(&mut self) {
        self.client.view_stale = true;
        self.io.stats.stale_views += 1;
    }

    /// Whether any of `words` (the key's candidates, in order) says the
    /// view is behind ([`Cx::behind`]).
    pub(crate) fn any_behind(&mut self, words: &[IndexEntry]) -> bool {
        let mut behind = false;
        for (i, &w) in words.iter().enumerate() {
            behind |= self.behind(i, w);
        }
        behind
    }

    /// The 6-bit form a MIGRATE copy records candidate position `pos` in.
    pub(crate) fn stored_position(&self, pos: usize) -> u8 {
        self.client
            .view
            .stored_position(pos, self.per_generation(), self.grows())
    }

    /// The candidate position a MIGRATE copy's recorded position names in
    /// the client's view (`None`: a generation the view does not hold).
    pub(crate) fn position_of(&self, stored: u8) -> Option<usize> {
        self.client
            .view
            .position_of(stored, self.per_generation(), self.grows())
    }

    /// The word that finishes a committed MIGRATE copy `st`, linked as `w`
    /// at its source: the growth seal for a move between generations (a
    /// growth's), else the emptied word.
    pub(crate) fn finished_source(&self, st: &StateWord, w: IndexEntry) -> IndexEntry {
        if crosses_generations(st.src, st.dst, self.grows())
            && !self.client.faults.growth_move_empties_source
        {
            IndexEntry::GROWTH_SEAL
        } else {
            w.emptied()
        }
    }

    /// Whether `st` is a committed MIGRATE copy's state whose source is
    /// candidate position `pos`.
    pub(crate) fn copy_at_source(&self, st: &StateWord, pos: usize) -> bool {
        st.kind == Some(DteKind::Migrate)
            && st.state.is_committed()
            && self.position_of(st.src) == Some(pos)
    }

    pub(crate) fn filter(&self, key: &[u8]) -> u16 {
        self.client.hasher.filter(key)
    }

    pub(crate) fn is_local(&self, dte: DteAddr) -> bool {
        self.client.pure.is_none() && dte.node() == self.client.id.node
    }

    /// The longest chain of moves an insert's search makes room with:
    /// `growth_depth` while the client's view can still grow (an insert
    /// that needs more grows the index instead), else `max_migrate_depth`.
    pub(crate) fn insert_depth(&self) -> u8 {
        let c = self.cfg();
        if self.client.view.newest.saturating_add(1) < c.index_generations {
            c.growth_depth.min(c.max_migrate_depth)
        } else {
            c.max_migrate_depth
        }
    }

    /// Whether the attempt may still start a mutation: its deadline minus the
    /// margin has not passed.
    pub(crate) fn may_mutate(&self) -> bool {
        self.client.faults.ignore_deadline
            || self
                .now
                .0
                .saturating_add(duration_nanos(self.cfg().deadline_margin))
                < self.deadline.0
    }

    /// Whether the attempt has overrun its deadline (reads are no longer
    /// guaranteed to see unrecycled entries).
    pub(crate) fn overran(&self) -> bool {
        !self.client.faults.ignore_deadline && self.now > self.deadline
    }

    /// Whether an entry whose owner's deadline is `deadline` may be reclaimed.
    pub(crate) fn owner_expired(&self, deadline: u64) -> bool {
        self.now.0 > deadline.saturating_add(duration_nanos(self.cfg().clock_skew))
    }

    fn dte_op(&self, dte: DteAddr, offset: u64, len: u64) -> Op {
        let base = self.client.cfg.data_tables().entry_offset(dte) + offset;
        if self.is_local(dte) {
            Op::LocalRead {
                offset: base,
                len: len as u32,
            }
        } else {
            Op::Read {
                addr: RemoteAddr::data(dte.node(), base),
                len: len as u32,
            }
        }
    }

    /// Whether candidate positions `i` and `j` are slots of one bucket.
    pub(crate) fn same_bucket(&self, i: usize, j: usize) -> bool {
        self.client.hasher.same_bucket(i, j)
    }

    /// Slots per candidate bucket (B).
    pub(crate) fn bucket_len(&self) -> usize {
        self.client.hasher.bucket_len()
    }

    /// Reads candidate buckets `buckets` (bucket numbers: bucket `k` is
    /// positions `k*B .. k*B+B` of `cands`, the key's candidate list), one
    /// READ of B words each, in the order given;
    /// [`bucket_words`](crate::machine::io::bucket_words) reads the results.
    pub(crate) fn read_buckets(&mut self, cands: &[IteAddr], buckets: &[usize]) {
        let b = self.bucket_len();
        for &k in buckets {
            if let Some(&first) = cands.get(k * b) {
                self.read_bucket(first);
            }
        }
    }

    /// Every candidate bucket number of `cands`, in order.
    pub(crate) fn all_buckets(&self, cands: &[IteAddr]) -> std::ops::Range<usize> {
        0..cands.len().div_ceil(self.bucket_len())
    }

    /// Every candidate bucket number of `cands`, last first (the order of
    /// every re-reading pass).
    pub(crate) fn all_buckets_reversed(&self, cands: &[IteAddr]) -> Vec<usize> {
        self.all_buckets(cands).rev().collect()
    }

    /// The candidate buckets of `cands` (numbers, in order) holding a
    /// candidate other than position `pos`: all of them, but `pos`'s own
    /// when it holds nothing else (one-entry buckets) or `skip_own`.
    pub(crate) fn buckets_beside(
        &self,
        cands: &[IteAddr],
        pos: usize,
        skip_own: bool,
    ) -> Vec<usize> {
        let b = self.bucket_len();
        self.all_buckets(cands)
            .filter(|&k| k != pos / b || (b > 1 && !skip_own))
            .collect()
    }

    /// Reads the bucket whose first slot is `first`: its B index words in
    /// one READ.
    pub(crate) fn read_bucket(&mut self, first: IteAddr) -> usize {
        let len = 8 * self.bucket_len() as u32;
        self.io.issue(Op::Read {
            addr: first.remote(),
            len,
        })
    }

    pub(crate) fn read_ite(&mut self, ite: IteAddr) -> usize {
        self.io.issue(Op::Read {
            addr: ite.remote(),
            len: 8,
        })
    }

    /// Reads an entry: header and key, plus the value when `with_value`.
    pub(crate) fn read_dte(&mut self, dte: DteAddr, with_value: bool) -> usize {
        let l = self.client.cfg.data_tables().layout_of(dte);
        let len = if with_value {
            l.entry_bytes()
        } else {
            l.header_and_key_bytes()
        };
        let op = self.dte_op(dte, 0, len);
        self.io.issue(op)
    }

    /// Reads the value of an entry whose header and key were read: exactly
    /// its `value_len` bytes (padded to 8), after its key of `key_len`.
    pub(crate) fn read_value(&mut self, dte: DteAddr, key_len: usize, value_len: usize) -> usize {
        let l = self.client.cfg.data_tables().layout_of(dte);
        let op = self.dte_op(
            dte,
            l.value_start(key_len),
            (value_len as u64).div_ceil(8) * 8,
        );
        self.io.issue(op)
    }

    /// Reads the 32-byte header of an entry.
    pub(crate) fn read_header(&mut self, dte: DteAddr) -> usize {
        let op = self.dte_op(dte, 0, HEADER_BYTES);
        self.io.issue(op)
    }

    /// Reads just the state word of an entry.
    pub(crate) fn read_state(&mut self, dte: DteAddr) -> usize {
        let op = self.dte_op(dte, 0, 8);
        self.io.issue(op)
    }

    pub(crate) fn cas_ite(&mut self, ite: IteAddr, expect: IndexEntry, new: IndexEntry) -> usize {
        self.io.issue(Op::Cas {
            addr: ite.remote(),
            expect: expect.0,
            new: new.0,
        })
    }

    /// CASes an entry's state word through the NIC (loopback when local): the
    /// owner's commit and a reclaimer's abort must be serialised by one atomic unit.
    pub(crate) fn cas_state(&mut self, dte: DteAddr, expect: u64, new: u64) -> usize {
        let offset = self.client.cfg.data_tables().entry_offset(dte);
        if self.client.faults.cpu_state_flip && self.is_local(dte) {
            // Broken variant: the owner flips its own entry with a plain CPU
            // store, which a concurrent NIC CAS does not serialise against.
            return self.io.issue(Op::LocalWrite {
                offset,
                data: new.to_le_bytes().to_vec(),
            });
        }
        self.io.issue(Op::Cas {
            addr: RemoteAddr::data(dte.node(), offset),
            expect,
            new,
        })
    }

    /// The incarnation a fresh entry `dte` from this client's allocator is
    /// written and linked with (always 0 with the test-only switch
    /// `ignore_incarnations`: every reuse repeats its words, as before
    /// issue 39).
    pub(crate) fn incarnation(&self, dte: DteAddr) -> u8 {
        if self.client.faults.ignore_incarnations {
            0
        } else {
            self.client.alloc.incarnation(dte)
        }
    }

    /// Writes a fresh entry of this client's share: by CPU into the local
    /// data table, or through its windows for a client without storage
    /// ([`Cx::write_pure_dte`]). [`Cx::dte_written`] checks the round's
    /// results.
    ///
    /// # Errors
    ///
    /// As [`Cx::write_pure_dte`] (a node's client's CPU write cannot fail).
    pub(crate) fn write_dte(&mut self, dte: DteAddr, data: Vec<u8>) -> Result<(), Error> {
        if self.client.pure.is_some() {
            return self.write_pure_dte(dte, data);
        }
        let offset = self.client.cfg.data_tables().entry_offset(dte);
        self.io.issue(Op::LocalWrite { offset, data });
        Ok(())
    }

    /// Whether the round of [`Cx::write_dte`] wrote entry `dte` whole (a
    /// client without storage's: [`Cx::pure_dte_written`]).
    pub(crate) fn dte_written(&mut self, dte: DteAddr, results: &Results) -> Result<(), Error> {
        if self.client.pure.is_some() {
            return self.pure_dte_written(dte, results);
        }
        results.first().map_or(Err(Error::Conflict), written)
    }

    /// Marks an entry for recycling: reusable T after now. Only called by the
    /// client that unlinked the entry's last reference; `seen` is the recycle
    /// word it read with the entry's header. A remote mark is a NIC CAS that
    /// expects `seen`, so that a mark landing late or twice, after the entry
    /// was reused, finds the new incarnation's word and changes nothing (no
    /// landing bound needed); a local mark is a CPU store, which cannot be
    /// late.
    pub(crate) fn mark_recycle(&mut self, dte: DteAddr, seen: RecycleWord) -> usize {
        let expires = self.now.plus(self.cfg().expiration).0;
        let at = if self.client.faults.mark_by_main_class_offset {
            // Broken variant: the offset rule before size classes.
            self.cfg().layout().entry_offset(dte.index)
        } else {
            self.cfg().data_tables().entry_offset(dte)
        };
        let offset = at + 16;
        if self.is_local(dte) {
            let data = RecycleWord::marked(expires).encode().to_le_bytes().to_vec();
            return self.io.issue(Op::LocalWrite { offset, data });
        }
        // Stamped by this client's clock, which the owner's need not agree
        // with: marked remote, and the owner counts T from when it sees it
        // (unless the test-only switch has the owner trust the stamp). A
        // client without storage marking its own entry is the owner: its
        // stamp is its own clock's.
        let own = self.client.alloc.owns(dte);
        let word = if self.client.faults.trust_remote_mark_stamp || own {
            RecycleWord::marked(expires)
        } else {
            RecycleWord::marked_remotely(expires)
        }
        .encode();
        if self.client.faults.blind_recycle_mark {
            // Broken variant: whatever the entry holds when this lands.
            let data = word.to_le_bytes().to_vec();
            self.io.issue(Op::Write {
                addr: RemoteAddr::data(dte.node(), offset),
                data,
            })
        } else {
            self.io.issue(Op::Cas {
                addr: RemoteAddr::data(dte.node(), offset),
                expect: seen.encode(),
                new: word,
            })
        }
    }

    /// Decodes a read of an entry at `dte`.
    pub(crate) fn view(
        &self,
        dte: DteAddr,
        r: &Result<crate::fabric::OpOutput, crate::fabric::FabricError>,
    ) -> Result<DteView, Error> {
        let raw = bytes(r)?;
        let header = DataEntryHeader::decode(raw).ok_or_else(|| {
            Error::corrupt(CorruptionKind::Completion, format!("{dte}: short read"))
        })?;
        let l = self.client.cfg.data_tables().layout_of(dte);
        let key = l.key(&header, raw).map(<[u8]>::to_vec).unwrap_or_default();
        // The value, when the read holds all of it (a whole-entry read, or
        // a header-and-key read whose key and value are short enough).
        let value = l.value(&header, raw).map(<[u8]>::to_vec);
        Ok(DteView {
            addr: dte,
            header,
            key,
            value,
            raw: raw.to_vec(),
        })
    }

    /// Decodes a cached entry.
    pub(crate) fn cached_view(&mut self, ite: IndexEntry, ite_read_at: Nanos) -> Option<DteView> {
        let dte = ite.dte()?;
        if self.is_local(dte) {
            return None;
        }
        let extend = ite_read_at.plus(self.cfg().expiration);
        let raw = self.client.cache.get(ite.0, self.now, extend)?.to_vec();
        let header = DataEntryHeader::decode(&raw)?;
        let l = self.client.cfg.data_tables().layout_of(dte);
        let key = l.key(&header, &raw)?.to_vec();
        let value = l.value(&header, &raw).map(<[u8]>::to_vec);
        Some(DteView {
            addr: dte,
            header,
            key,
            value,
            raw,
        })
    }

    /// Caches a committed remote entry read through `ite` at `ite_read_at`.
    pub(crate) fn cache_insert(&mut self, ite: IndexEntry, view: &DteView, ite_read_at: Nanos) {
        if !self.is_local(view.addr)
            && view.header.state.state.is_committed()
            && view.value.is_some()
        {
            let expires = ite_read_at.plus(self.cfg().expiration);
            self.client.cache.insert(ite.0, view.raw.clone(), expires);
        }
    }

    /// The entry bytes for a new entry at `dte`.
    pub(crate) fn encode_entry(
        &self,
        dte: DteAddr,
        header: &DataEntryHeader,
        key: &[u8],
        value: &[u8],
    ) -> Vec<u8> {
        self.client
            .cfg
            .data_tables()
            .layout_of(dte)
            .encode_entry(header, key, value)
    }

    /// The size class a new entry of a key of `key_len` and a value of
    /// `value_len` bytes is written in: the smallest they fit
    /// ([`Error::ValueTooLarge`] past the largest, which `check_value`
    /// refuses before any machine starts).
    pub(crate) fn class_for(&self, key_len: usize, value_len: usize) -> Result<u8, Error> {
        self.client
            .cfg
            .data_tables()
            .class_for(key_len, value_len)
            .ok_or(Error::ValueTooLarge {
                len: value_len,
                max: self.cfg().max_value_len,
            })
    }
}

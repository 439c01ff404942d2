//! The data-table audit at quiescence: no data table entry (DTE) leaks
//! beyond what the protocol admits.
//!
//! Nessie never frees an entry by knowing it is free: an entry becomes
//! reusable only when the client whose CAS unlinked it marks it for
//! recycling and the expiration period (plus the clock-skew allowance) has
//! passed since (docs/protocol.md §5.7). An entry that nothing names and
//! nobody marked is lost for good, and a run shows it at most as a
//! `DataTableFull` much later, which every randomized checker excuses. So
//! at the end of a run with [`SimSpec::final_sweep`](crate::SimSpec::final_sweep)
//! (every fault stopped, a lone client has written every key, nothing in
//! flight), the simulator classifies every entry of every client's share:
//!
//! - **live**: an index table entry names it, or it is the previous version
//!   of a named uncommitted entry (readers may still fall back to it);
//! - **reusable**: [`DteAllocator::reusable`] at a clock reading one
//!   expiration period plus the skew allowance past the last event (as if
//!   the cluster had idled that long; every recycle mark posted by then has
//!   expired), or its owner's allocator holds it as known free (an entry
//!   returned unpublished: its header is that of the write never linked);
//! - **leaked**: neither.
//!
//! The leaks the protocol admits (docs/protocol.md, "Known limitations"):
//! the entries its operations counted as leaked ([`OpStats::leaked`]
//! summed over the run, crashed attempts included), and at most
//! [`leaks_per_crash`] per client crash (or operation given up at the
//! horizon): two with one size class, one more per further class. More leaked entries than admitted fail the case
//! ([`crate::swarm::verdict_of`]), naming them.
//!
//! Only Nessie has data table entries this way: for the other systems (and
//! runs without a final sweep) the audit does not apply
//! ([`SimReport::dtes`](crate::SimReport::dtes) is `None`).
//!
//! While a Nessie run goes on, the simulator also watches I4's first step
//! from outside the protocol (the stateright model's property "no linked
//! entry is marked for recycling"): a recycle mark must not land on an
//! entry an index table entry names, and an index CAS must not link an
//! entry that is marked. Either is the start of a reuse of a linked entry
//! (issue 24's hole 1: a copy that stays linked at its destination while
//! its reclaimer marks it), whose visible consequence (the entry reused
//! for another write while still linked) a short run rarely reaches; a
//! breach fails the case ([`SimReport::marked_linked`](crate::SimReport::marked_linked)).
//!
//! The audit also checks the incarnation tags (issue 39): every present
//! index word names the incarnation its entry's state word carries. A word
//! of an earlier incarnation still linked means an entry was reused under
//! a word that named it before, the very recurrence the tags exist to
//! prevent ([`DteAudit::stale_links`]; a case with any fails).
//!
//! [`OpStats::leaked`]: nessie_protocol::OpStats::leaked

use std::collections::HashSet;
use std::time::Duration;

use nessie_check::memory::Memory;
use nessie_protocol::internals::{Allocator, DteAllocator};
use nessie_protocol::layout::{DataEntryHeader, RecycleWord, HEADER_BYTES};
use nessie_protocol::{ClientId, Config, DteAddr, Nanos, Op, Region};
use serde::Serialize;

/// Entries one client crash may leak, at most, in a deployment of
/// `classes` size classes (docs/verification.md).
///
/// A crash loses what the client would have done next; the requests it had
/// posted still land. What it would have done and nobody else will:
/// - release or publish its own entry written and not yet linked, or mark
///   its own entry that its rollback has just unlinked: one entry, its
///   *own*; and hand out again the entries it returned unpublished (their
///   headers say `Writing`, so a restarted process never reuses them): the
///   allocator hands such an entry out first *within its size class*, so
///   at most one per class is still held, the own entry's class's being the
///   own entry. With one class, one entry in all; with C classes, C;
/// - mark the entries its CASes unlinked since its last recycle-mark round:
///   a PUT's previous version after the commit, a DELETE's previous version
///   and its own tombstone (the own entry above), a MIGRATE's old entry
///   after the copy committed, a cleared tombstone, a reclaimed entry: at
///   most one besides the own entry, since every machine posts the marks of
///   a step's unlinks before it unlinks anything else.
///
/// Hence C + 1: two with one class, as before size classes (the size-class
/// swarm with late landings found the third, seed 26,759: an entry
/// returned unpublished in one class while the client went on writing in
/// another, then crashed; `sim/tests/swarm.rs`).
pub fn leaks_per_crash(classes: usize) -> u64 {
    classes as u64 + 1
}

/// Leaked entries a report names, at most.
const NAMED_LEAKS: usize = 16;

/// One client's share of a data table, as the audit sees it.
#[derive(Clone, Copy, Debug)]
pub struct Share<'a> {
    /// The client.
    pub id: ClientId,
    /// Its allocator: the entries it owns and, if the client is up, those it
    /// knows to be free.
    pub alloc: &'a Allocator,
    /// Whether the client is up (a crashed client's free list died with it).
    pub up: bool,
}

/// What the audit found (see the module documentation).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DteAudit {
    /// Entries named by an index table entry (or the previous version of a
    /// named uncommitted entry).
    pub live: u64,
    /// Entries not named and reusable (by the protocol's own rule, or known
    /// free to their owner's allocator).
    pub reusable: u64,
    /// Entries not named and not reusable: leaked.
    pub leaked: u64,
    /// Leaks the protocol admits: `counted` plus `per_crash` per crash.
    pub admitted: u64,
    /// Leaks the protocol's operations counted ([`OpStats::leaked`] summed).
    ///
    /// [`OpStats::leaked`]: nessie_protocol::OpStats::leaked
    pub counted: u64,
    /// Leaks admitted per crash ([`leaks_per_crash`] of the deployment's
    /// size classes).
    pub per_crash: u64,
    /// Client crashes (and operations given up at the horizon), each
    /// allowed `per_crash`.
    pub crashes: u64,
    /// The leaked entries (the first 16), described.
    pub leaks: Vec<String>,
    /// Present index words whose incarnation is not their entry's (its
    /// state word's): an entry reused while a word of an earlier
    /// incarnation still linked it.
    pub stale_links: u64,
    /// The stale links (the first 16), described.
    pub stale: Vec<String>,
}

impl DteAudit {
    /// Leaked entries beyond those admitted (0 when the audit passes).
    pub fn unexplained(&self) -> u64 {
        self.leaked.saturating_sub(self.admitted)
    }

    /// Adds another run's figures (for totals over a swarm; `leaks` is not
    /// kept).
    pub fn add(&mut self, o: &DteAudit) {
        self.live += o.live;
        self.reusable += o.reusable;
        self.leaked += o.leaked;
        self.admitted += o.admitted;
        self.counted += o.counted;
        self.crashes += o.crashes;
        self.per_crash = self.per_crash.max(o.per_crash);
        self.stale_links += o.stale_links;
    }
}

/// The header of `d` as stored (`None` if out of range).
pub(crate) fn header(mem: &Memory, cfg: &Config, d: DteAddr) -> Option<DataEntryHeader> {
    let offset = cfg.data_tables().entry_offset(d);
    let raw = mem
        .read(d.node(), Region::Data, offset, HEADER_BYTES)
        .ok()?;
    DataEntryHeader::decode(&raw)
}

/// Audits every entry of `shares` in `mem` at clock reading `now` (by the
/// protocol's reuse rule with `cfg`'s clock skew). `counted` is the leaks the
/// operations counted, `crashes` the client crashes and operations given up.
pub fn audit(
    mem: &Memory,
    cfg: &Config,
    shares: &[Share<'_>],
    now: Nanos,
    counted: u64,
    crashes: u64,
) -> DteAudit {
    let mut named: HashSet<DteAddr> = HashSet::new();
    let skew: Duration = cfg.clock_skew;
    let per_crash = leaks_per_crash(cfg.data_tables().len());
    let mut a = DteAudit {
        counted,
        crashes,
        per_crash,
        admitted: counted.saturating_add(crashes.saturating_mul(per_crash)),
        ..DteAudit::default()
    };
    for w in mem.index_words() {
        let Some(d) = w.dte() else { continue };
        named.insert(d);
        if let Some(h) = header(mem, cfg, d) {
            if h.state.state.is_uncommitted() {
                if let Some(p) = nessie_protocol::IndexEntry(h.prev).dte() {
                    named.insert(p);
                }
            }
            if h.state.incarnation != w.incarnation() {
                a.stale_links += 1;
                if a.stale.len() < NAMED_LEAKS {
                    a.stale.push(format!(
                        "{w} links {d}, whose state word is of incarnation {} ({:?})",
                        h.state.incarnation, h.state.state
                    ));
                }
            }
        }
    }
    for s in shares {
        for d in s.alloc.owned() {
            if named.contains(&d) {
                a.live += 1;
                continue;
            }
            let h = header(mem, cfg, d);
            let known_free = s.up && s.alloc.is_known_free(d);
            if known_free || h.is_some_and(|h| DteAllocator::reusable(&h, now, skew)) {
                a.reusable += 1;
                continue;
            }
            a.leaked += 1;
            if a.leaks.len() < NAMED_LEAKS {
                a.leaks.push(match h {
                    Some(h) => format!(
                        "{d} ({} share): {:?} {:?}, recycle flag {} (expires {} ns, audit at {} ns)",
                        s.id,
                        h.state.state,
                        h.state.kind,
                        h.recycle.recycle,
                        h.recycle.expires_at,
                        now.0
                    ),
                    None => format!("{d} ({} share): header out of range", s.id),
                });
            }
        }
    }
    a
}

/// A mutation the I4 watch looks at (see the module documentation).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Watched {
    /// A recycle mark of this entry.
    Mark(DteAddr),
    /// An index CAS at this node and offset, from `expect` to `new`.
    Link { expect: u64, new: u64 },
}

/// Offset of the recycle word within an entry's header.
const RECYCLE_WORD: u64 = 16;

/// What the I4 watch looks at in `op`, executed at `node` (the poster's
/// own node for a CPU store), if anything: a recycle mark (an 8-byte WRITE
/// or CPU store of a recycle word with the flag set) or an index CAS.
pub(crate) fn watched(cfg: &Config, node: usize, op: &Op) -> Option<Watched> {
    let (offset, data) = match op.unwindowed() {
        Op::Cas { addr, expect, new } if addr.region == Region::Index => {
            return Some(Watched::Link {
                expect: *expect,
                new: *new,
            })
        }
        Op::Write { addr, data } if addr.region == Region::Data => (addr.offset, data),
        Op::LocalWrite { offset, data } => (*offset, data),
        _ => return None,
    };
    let word: [u8; 8] = data.as_slice().try_into().ok()?;
    if !RecycleWord::decode(u64::from_le_bytes(word)).recycle {
        return None;
    }
    let rel = offset.checked_sub(RECYCLE_WORD)?;
    let node = nessie_protocol::NodeId(u16::try_from(node).ok()?);
    cfg.data_tables().entry_at(node, rel).map(Watched::Mark)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nessie_check::memory::{InFlight, WordOrder};
    use nessie_protocol::layout::{DteKind, DteState, IndexEntry, RecycleWord, StateWord};
    use nessie_protocol::{IteAddr, NodeId, Op, OpId, RemoteAddr, WorkRequest};

    fn cfg() -> Config {
        Config {
            nodes: 1,
            clients_per_node: 1,
            dtes_per_node: 4,
            index_slots_per_node: 4,
            ..Config::default()
        }
    }

    /// The one share of the tests' single client, up or down.
    fn share(alloc: &Allocator, up: bool) -> [Share<'_>; 1] {
        [Share {
            id: ClientId {
                node: NodeId(0),
                index: 0,
            },
            alloc,
            up,
        }]
    }

    /// A PUT's state word in `state`, of incarnation `incarnation`.
    fn put_state(state: DteState, incarnation: u8) -> StateWord {
        StateWord {
            state,
            kind: Some(DteKind::Put),
            src: 0,
            dst: 0,
            incarnation,
            key_len: 8,
            value_len: 1,
        }
    }

    fn write(mem: &mut Memory, addr: RemoteAddr, data: Vec<u8>) {
        let wr = WorkRequest {
            id: OpId(0),
            op: Op::Write { addr, data },
        };
        InFlight::new(wr, 0)
            .run_to_end(mem, NodeId(0), WordOrder::Ascending)
            .unwrap();
    }

    fn put_header(mem: &mut Memory, cfg: &Config, index: u32, state: DteState, mark: Option<u64>) {
        let h = DataEntryHeader {
            state: put_state(state, 0),
            deadline: 5,
            recycle: RecycleWord {
                recycle: mark.is_some(),
                remote: false,
                expires_at: mark.unwrap_or(0),
            },
            prev: 0,
        };
        let at = RemoteAddr::data(NodeId(0), cfg.layout().entry_offset(index));
        write(mem, at, h.encode().to_vec());
    }

    #[test]
    fn entries_are_live_reusable_or_leaked() {
        let cfg = cfg();
        let mut mem = Memory::new(&cfg);
        let d = |index| DteAddr { table: 0, index };
        // 0: named by an index entry; 1: never written; 2: marked, expired;
        // 3: committed, unnamed, unmarked (leaked).
        put_header(&mut mem, &cfg, 0, DteState::Valid, None);
        put_header(&mut mem, &cfg, 2, DteState::Valid, Some(100));
        put_header(&mut mem, &cfg, 3, DteState::Valid, None);
        let ite = IteAddr {
            node: NodeId(0),
            slot: 1,
        };
        write(
            &mut mem,
            ite.remote(),
            IndexEntry::new(d(0), 0, 0).0.to_le_bytes().to_vec(),
        );
        let mut alloc = Allocator::new(
            &cfg,
            ClientId {
                node: NodeId(0),
                index: 0,
            },
        );
        let one = share(&alloc, true);
        let a = audit(&mem, &cfg, &one, Nanos(10_000_000), 0, 0);
        assert_eq!((a.live, a.reusable, a.leaked, a.admitted), (1, 2, 1, 0));
        assert_eq!(a.stale_links, 0);
        assert_eq!(a.unexplained(), 1);
        assert!(a.leaks[0].starts_with("DTE 0/3"), "{:?}", a.leaks);
        // Before its expiration plus skew, the marked entry is not reusable.
        let early = audit(&mem, &cfg, &one, Nanos(100), 0, 0);
        assert_eq!(early.leaked, 2);
        // An entry its owner's allocator holds as free is reusable, unless
        // the owner is down; a crash admits two leaks.
        alloc.release_unpublished(d(3));
        let up = share(&alloc, true);
        assert_eq!(audit(&mem, &cfg, &up, Nanos(10_000_000), 0, 0).leaked, 0);
        let down = share(&alloc, false);
        let a = audit(&mem, &cfg, &down, Nanos(10_000_000), 0, 1);
        assert_eq!((a.leaked, a.admitted, a.unexplained()), (1, 2, 0));
    }

    #[test]
    fn the_previous_version_of_a_named_uncommitted_entry_is_live() {
        let cfg = cfg();
        let mut mem = Memory::new(&cfg);
        let d = |index| DteAddr { table: 0, index };
        put_header(&mut mem, &cfg, 0, DteState::Valid, None);
        // Entry 1 is uncommitted, its previous version entry 0.
        let mut h = DataEntryHeader::decode(&[0u8; 32]).unwrap();
        h.state = put_state(DteState::Writing, 0);
        h.prev = IndexEntry::new(d(0), 0, 0).0;
        let at = RemoteAddr::data(NodeId(0), cfg.layout().entry_offset(1));
        write(&mut mem, at, h.encode().to_vec());
        let ite = IteAddr {
            node: NodeId(0),
            slot: 0,
        };
        write(
            &mut mem,
            ite.remote(),
            IndexEntry::new(d(1), 0, 0).0.to_le_bytes().to_vec(),
        );
        let alloc = Allocator::new(
            &cfg,
            ClientId {
                node: NodeId(0),
                index: 0,
            },
        );
        let a = audit(&mem, &cfg, &share(&alloc, false), Nanos(0), 0, 0);
        assert_eq!((a.live, a.reusable, a.leaked), (2, 2, 0));
    }

    /// A present word that names an earlier incarnation of its entry is a
    /// stale link, named; the word of the entry's own incarnation is not.
    #[test]
    fn a_word_of_an_earlier_incarnation_is_a_stale_link() {
        let cfg = cfg();
        let mut mem = Memory::new(&cfg);
        let d = DteAddr { table: 0, index: 0 };
        let mut h = DataEntryHeader::decode(&[0u8; 32]).unwrap();
        h.state = put_state(DteState::Valid, 5);
        write(
            &mut mem,
            RemoteAddr::data(NodeId(0), cfg.layout().entry_offset(0)),
            h.encode().to_vec(),
        );
        let link = |mem: &mut Memory, slot, incarnation| {
            let ite = IteAddr {
                node: NodeId(0),
                slot,
            };
            let w = IndexEntry::new(d, incarnation, 0);
            write(mem, ite.remote(), w.0.to_le_bytes().to_vec());
        };
        link(&mut mem, 0, 5);
        let alloc = Allocator::new(
            &cfg,
            ClientId {
                node: NodeId(0),
                index: 0,
            },
        );
        let one = share(&alloc, true);
        assert_eq!(audit(&mem, &cfg, &one, Nanos(0), 0, 0).stale_links, 0);
        link(&mut mem, 1, 4);
        let a = audit(&mem, &cfg, &one, Nanos(0), 0, 0);
        assert_eq!(a.stale_links, 1);
        assert!(a.stale[0].contains("incarnation 5"), "{:?}", a.stale);
    }
}

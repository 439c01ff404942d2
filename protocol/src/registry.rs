//! The client registry: identity by lease for the clients of a node, in
//! every system (docs/protocol.md §2.3).
//!
//! Two clients with one id would share what the id names: a share of the
//! node's data tables (Nessie), request and response slots (NessieSD,
//! NessieHY, Pilaf, Cell). So every node keeps, at the end of its data
//! region, one **registry word** per id of a client of the node
//! ([`Registry`]). A client takes its id before it is handed out: one
//! one-sided CAS of the word from free (0) to its holder's name, read back
//! when the CAS's answer is lost (a [`ClaimMachine`], driven by
//! [`claim_id`]). The word is the lease word's layout (`pure::LeaseWord`),
//! the holder in its top 24 bits; the other 40 bits are reserved (0).
//!
//! The holder a word names is a *process* (a fabric handle's
//! [`ClientClaim::holder`]), not one client: within a process the fabric's
//! in-process registry ([`crate::Endpoint::claim_client`]) keeps one live
//! client per id, so a word naming this process is this process's to hand
//! to the next client of the id once the last one dropped, with no write
//! on the way out. A word naming another process is refused
//! ([`Error::ClientIdInUse`]), whatever that process is doing.
//!
//! No clock takes part: a word is never taken back by time. A client of a
//! node runs in the process that hosts its node, so its word is freed when
//! the process ends, with the node's memory (a node starts with a zeroed
//! registry); and a lease term would let a paused holder act after another
//! took its id, which nothing could fence off (a node's clients reach its
//! memory without windows). Clients without storage, which run anywhere,
//! hold their shares by the lease block's word instead (§2.4), whose term
//! the windows make safe; their ids have no registry word.
//!
//! The claim survives every transport fault: the CAS only ever swaps free
//! for this holder, so a duplicate or a late landing writes what a landed
//! one wrote, and a CAS that failed, or whose answer never came, is
//! followed by a READ that tells whether it landed. An unanswered claim
//! that lands after the claim gave up names this process, whose next claim
//! of the id takes it.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::addr::{ClientId, Region, RemoteAddr};
use crate::error::{Error, Needed};
use crate::fabric::WorkRequest;
use crate::fabric::{ClientClaim, Completion, Endpoint, FabricError, Op, OpId, OpOutput};
use crate::pure::LeaseWord;
use crate::time::{wait_for, Nanos};

/// Bytes of one registry word.
pub const WORD_BYTES: u64 = 8;

/// Request ids of a claim: far from the ids the drivers number from 1 and
/// from the blocking driver's polling reads (`1 << 63`), so that a claim's
/// late completion answers nothing else (the drivers drop or log it).
const CLAIM_IDS: u64 = 1 << 62;

/// Whether `id` numbers a request of a claim (a test's fault injector
/// that counts a client's requests leaves the claim's out of its count).
pub fn is_claim_request(id: OpId) -> bool {
    id.0 >= CLAIM_IDS && id.0 < CLAIM_IDS + MAX_REQUESTS
}

/// Most requests one claim posts: a claim whose requests keep failing at
/// once (a fabric that refuses them) gives up after these, not at its time
/// limit.
pub const MAX_REQUESTS: u64 = 8;

/// The longest one wait for a completion blocks before the machine sees
/// the time again.
const WAIT_SLICE: Duration = Duration::from_millis(5);

/// A process's in-process registry of client ids (what a fabric's
/// [`Endpoint::claim_client`] keeps): the ids its live clients hold, and
/// the holder name its claims write into registry words.
#[derive(Clone, Debug)]
pub struct ClaimTable {
    holder: u32,
    ids: Arc<Mutex<HashSet<ClientId>>>,
}

impl ClaimTable {
    /// An empty table of the process named `holder` (24 bits, not 0).
    pub fn new(holder: u32) -> ClaimTable {
        ClaimTable {
            holder: (holder & crate::pure::MAX_NONCE).max(1),
            ids: Arc::default(),
        }
    }

    /// The holder name of its claims.
    pub fn holder(&self) -> u32 {
        self.holder
    }

    /// Claims `id` until the returned claim drops, or `None` if a live
    /// claim holds it.
    pub fn claim(&self, id: ClientId) -> Option<ClientClaim> {
        let mut ids = self.ids.lock().unwrap_or_else(PoisonError::into_inner);
        if !ids.insert(id) {
            return None;
        }
        let table = self.ids.clone();
        Some(ClientClaim::new(self.holder, move || {
            table
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&id);
        }))
    }

    /// Whether a live claim holds `id`.
    pub fn holds(&self, id: ClientId) -> bool {
        self.ids
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(&id)
    }
}

/// Where a node's registry words lie in its data region: one per id of a
/// client of the node, after everything else the system lays out there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Registry {
    base: u64,
    ids: u16,
}

impl Registry {
    /// The registry of `ids` words (ids `0..ids` of each node) after the
    /// first `bytes` bytes of the data region (rounded up to a word).
    pub fn after(bytes: u64, ids: u16) -> Registry {
        Registry {
            base: bytes.next_multiple_of(WORD_BYTES),
            ids,
        }
    }

    /// The first byte past the registry: how large a node's data region
    /// must be.
    pub fn end(&self) -> u64 {
        self.base + u64::from(self.ids) * WORD_BYTES
    }

    /// The registry word of client `id` (`None` for an index past the
    /// registry's: such a client, a client without storage, holds its id
    /// otherwise).
    pub fn word(&self, id: ClientId) -> Option<RemoteAddr> {
        (id.index < self.ids).then(|| RemoteAddr {
            node: id.node,
            region: Region::Data,
            offset: self.base + u64::from(id.index) * WORD_BYTES,
        })
    }

    /// The registry word naming `holder`, as stored.
    pub fn held_by(holder: u32) -> u64 {
        LeaseWord {
            holder,
            requested: 0,
            granted: 0,
        }
        .encode()
    }
}

/// How a claim ended badly.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ClaimRefused {
    /// Another process holds the id (its holder's name).
    Held(u32),
    /// No answer told the word within the claim's time; the last error.
    NoAnswer(Option<FabricError>),
}

/// What a [`ClaimMachine`] asks of its driver.
#[derive(Debug)]
pub enum ClaimPoll {
    /// Post this request.
    Post(WorkRequest),
    /// Wait for a completion, or until [`ClaimMachine::poll_timeout`].
    Pending,
    /// The claim ended: the word names this holder, or it was refused.
    Done(Result<(), ClaimRefused>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Next {
    Cas,
    Read,
}

/// The claim of one registry word (sans-IO: requests out, completions in,
/// time passed in; module documentation).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ClaimMachine {
    word: RemoteAddr,
    holder: u32,
    /// The request to post next.
    next: Next,
    /// The request in flight and when the machine stops waiting for it.
    waiting: Option<(OpId, Nanos)>,
    /// The result once known.
    done: Option<Result<(), ClaimRefused>>,
    posted: u64,
    give_up: Option<Nanos>,
    within: Duration,
    round: Duration,
    last_error: Option<FabricError>,
    max_requests: u64,
    trust_failed_cas: bool,
}

impl ClaimMachine {
    /// The claim of `word` for `holder` (never 0), giving up after
    /// `within`, each request waited for at most `round`.
    pub fn new(word: RemoteAddr, holder: u32, within: Duration, round: Duration) -> ClaimMachine {
        ClaimMachine {
            word,
            holder: holder.max(1),
            next: Next::Cas,
            waiting: None,
            done: None,
            posted: 0,
            give_up: None,
            within,
            round: round.max(Duration::from_nanos(1)),
            last_error: None,
            max_requests: MAX_REQUESTS,
            trust_failed_cas: false,
        }
    }

    /// At most `n` requests instead of [`MAX_REQUESTS`] (an exhaustive
    /// exploration keeps its claims short).
    #[doc(hidden)]
    pub fn set_max_requests(&mut self, n: u64) {
        self.max_requests = n;
    }

    /// Test-only fault switch: a CAS that failed is taken as landed (its
    /// fate unknown, it is believed), instead of being read back. The
    /// exhaustive claim test shows it holding a word that names another
    /// process.
    #[doc(hidden)]
    pub fn set_trust_failed_cas(&mut self, on: bool) {
        self.trust_failed_cas = on;
    }

    /// Takes one step at time `now`.
    pub fn poll(&mut self, now: Nanos) -> ClaimPoll {
        if let Some(done) = &self.done {
            return ClaimPoll::Done(done.clone());
        }
        let give_up = *self.give_up.get_or_insert_with(|| now.plus(self.within));
        if let Some((_, until)) = self.waiting {
            if now < until {
                return ClaimPoll::Pending;
            }
            // No answer in time: its fate is unknown; read the word.
            self.waiting = None;
            self.last_error = Some(FabricError::Timeout);
            self.next = Next::Read;
        }
        let node_down = self
            .last_error
            .as_ref()
            .is_some_and(|e| e.unreachable_node().is_some());
        if now >= give_up || self.posted >= self.max_requests || node_down {
            let refused = ClaimRefused::NoAnswer(self.last_error.clone());
            self.done = Some(Err(refused.clone()));
            return ClaimPoll::Done(Err(refused));
        }
        let id = OpId(CLAIM_IDS + self.posted);
        self.posted += 1;
        self.waiting = Some((id, now.plus(self.round)));
        let op = match self.next {
            Next::Cas => Op::Cas {
                addr: self.word,
                expect: 0,
                new: Registry::held_by(self.holder),
            },
            Next::Read => Op::Read {
                addr: self.word,
                len: WORD_BYTES as u32,
            },
        };
        ClaimPoll::Post(WorkRequest { id, op })
    }

    /// Hands the machine a completion (one not of its request in flight,
    /// a late one of a request it stopped waiting for, is dropped).
    pub fn complete(&mut self, c: Completion) {
        if self.waiting.map(|(id, _)| id) != Some(c.id) || self.done.is_some() {
            return;
        }
        self.waiting = None;
        let mine = Registry::held_by(self.holder);
        let seen = match (self.next, c.result) {
            (Next::Cas, Ok(OpOutput::Cas { previous })) => Some(previous),
            (Next::Read, Ok(OpOutput::Read(bytes))) if bytes.len() == WORD_BYTES as usize => {
                let mut w = [0u8; 8];
                w.copy_from_slice(&bytes);
                Some(u64::from_le_bytes(w))
            }
            (next, Err(e)) => {
                self.last_error = Some(e);
                if next == Next::Cas && self.trust_failed_cas {
                    self.done = Some(Ok(()));
                    return;
                }
                // Its fate unknown (a CAS) or nothing learnt (a READ).
                self.next = Next::Read;
                None
            }
            (_, Ok(_)) => {
                self.next = Next::Read;
                None
            }
        };
        let Some(seen) = seen else {
            return;
        };
        if self.next == Next::Read && seen == 0 {
            // Free: whatever was on its way did not land (yet); swap again.
            self.next = Next::Cas;
        } else if seen == 0 || seen == mine {
            self.done = Some(Ok(()));
        } else {
            self.done = Some(Err(ClaimRefused::Held(LeaseWord::decode(seen).holder)));
        }
    }

    /// When the machine wants to be polled even if no completion comes.
    pub fn poll_timeout(&self) -> Option<Nanos> {
        if self.done.is_some() {
            return None;
        }
        self.waiting.map(|(_, until)| until).or(self.give_up)
    }
}

/// Claims client `id` on `ep`'s fabric: the in-process registry first
/// ([`Endpoint::claim_client`]), then, if `registry` has a word for `id`
/// (a client of a node), that word by a [`ClaimMachine`] under the claim's
/// holder name, waiting at most `within`. Each request is waited for at
/// most a quarter of `within`.
///
/// # Errors
///
/// [`Error::ClientIdInUse`] if a live client of this process holds `id`,
/// or another process's name is in its word; [`Error::Unreachable`]
/// (`Needed::Registry`) when the node does not answer; [`Error::Timeout`]
/// when no answer told the word within `within`. Nothing is held then (a
/// CAS of this claim still on its way names this process, whose next claim
/// takes the word).
pub fn claim_id<E: Endpoint>(
    ep: &mut E,
    id: ClientId,
    registry: Registry,
    within: Duration,
) -> Result<ClientClaim, Error> {
    let claim = ep.claim_client(id).ok_or(Error::ClientIdInUse(id))?;
    let Some(word) = registry.word(id) else {
        return Ok(claim);
    };
    let mut m = ClaimMachine::new(word, claim.holder(), within, within / 4);
    let mut completions = Vec::new();
    let result = loop {
        let now = ep.now();
        match m.poll(now) {
            ClaimPoll::Done(r) => break r,
            ClaimPoll::Post(wr) => {
                let id = wr.id;
                if let Err(e) = ep.post_issued(wr, now) {
                    m.complete(Completion { id, result: Err(e) });
                }
            }
            ClaimPoll::Pending => {
                ep.wait(
                    &mut completions,
                    wait_for(now, m.poll_timeout(), WAIT_SLICE),
                );
                for c in completions.drain(..) {
                    m.complete(c);
                }
            }
        }
    };
    match result {
        Ok(()) => Ok(claim),
        Err(ClaimRefused::Held(_)) => Err(Error::ClientIdInUse(id)),
        Err(ClaimRefused::NoAnswer(e)) => {
            Err(match e.as_ref().and_then(|e| e.unreachable_node()) {
                Some(n) => Error::Unreachable(n, Needed::Registry),
                None => Error::Timeout,
            })
        }
    }
}

#[cfg(test)]
#[path = "registry_tests.rs"]
mod tests;

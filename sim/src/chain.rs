//! Ordered chains in the simulated fabric
//! ([`Endpoint::post_chain`](nessie_protocol::Endpoint::post_chain)): the
//! requests of one round to one node, on one queue pair, executed in the
//! order posted. Each link travels as any request does and draws its own
//! fault from the one vocabulary; the chain adds only what the queue pair
//! orders:
//!
//! - an **ordered** link is sent right behind its predecessor and executes
//!   only once its predecessor executed: one that reaches its responder
//!   first waits there; if its predecessor never executes (failed before
//!   executing, refused at its landing deadline, met a node that was down,
//!   flushed) it is flushed and never executes; if its predecessor executed
//!   and its queue pair failed with it (a failure after executing, an error
//!   completion whose request lands later) it executes behind it, and its
//!   completion reports the queue pair's failure;
//! - a **fenced** link (`IBV_SEND_FENCE`) is sent only once its predecessor's
//!   completion came back to the requester's NIC (a late completion is late
//!   to the software only), and is flushed if that completion is an error;
//!   every link behind a flushed one is flushed.
//!
//! As on fabric-sim (docs/verification.md, "Chains"), a lost completion is
//! its queue pair's failure after the link executed (an ordered link behind
//! executes and reports it, a fenced one is flushed), and a vanished link
//! never executes (every link behind is flushed). A duplicated WRITE's copy
//! is not a link: it lands on its own, possibly after the links behind the
//! original (RC's retransmission replaying a WRITE after the release behind
//! it).

use nessie_protocol::{ChainLink, FabricError, TransportError, WorkRequest};

use crate::engine::{Engine, Ev};
use crate::nic::{Chain, ChainSlot, LinkState};
use crate::systems::Actor;

/// Whether a link may execute now, given its predecessor.
pub(crate) enum Gate {
    /// Go on (`errored`: behind a predecessor whose queue pair failed).
    Go { errored: bool },
    /// Wait at the responder until the predecessor executes.
    Park,
    /// The predecessor never executes: flushed.
    Flush,
}

impl Engine {
    /// Posts `chain` (validated: one remote node) for `actor` at `t`: the
    /// first link and the ordered ones behind it now, each fenced link once
    /// its predecessor completes.
    pub(crate) fn post_chain(
        &mut self,
        actor: Actor,
        chain: Vec<(WorkRequest, ChainLink)>,
        t: u64,
    ) {
        let id = self.net.next_chain;
        self.net.next_chain += 1;
        self.chaos.counts.chained += 1;
        let n = chain.len();
        let (unsent, links) = chain.into_iter().map(|(wr, l)| (Some(wr), l)).unzip();
        let (_, round, incarnation) = self.poster(actor);
        self.net.chains.insert(
            id,
            Chain {
                actor,
                round,
                incarnation,
                chaos: self.spec.chaos,
                links,
                unsent,
                states: vec![LinkState::Pending; n],
                parked: vec![None; n],
            },
        );
        self.send_links(id, 0, t);
    }

    /// Sends link `from` of chain `id` and the ordered links behind it, up
    /// to the next fenced one.
    fn send_links(&mut self, id: u64, from: usize, t: u64) {
        let mut pos = from;
        loop {
            let Some(ch) = self.net.chains.get_mut(&id) else {
                return;
            };
            if pos >= ch.unsent.len() || (pos > from && ch.links[pos] == ChainLink::Fenced) {
                return;
            }
            let actor = ch.actor;
            let Some(wr) = ch.unsent[pos].take() else {
                return;
            };
            self.post_linked(actor, wr, t, Some(ChainSlot { chain: id, pos }));
            pos += 1;
        }
    }

    /// Whether the link in `slot`, at its responder, may execute.
    pub(crate) fn chain_gate(&mut self, slot: ChainSlot, r: usize) -> Gate {
        let Some(ch) = self.net.chains.get_mut(&slot.chain) else {
            return Gate::Go { errored: false };
        };
        if slot.pos == 0 {
            return Gate::Go { errored: false };
        }
        match ch.states[slot.pos - 1] {
            LinkState::Executed { errored } => Gate::Go { errored },
            LinkState::NotExecuted => Gate::Flush,
            LinkState::Pending => {
                ch.parked[slot.pos] = Some(r);
                self.chaos.counts.chain_waits += 1;
                Gate::Park
            }
        }
    }

    /// The link in `slot` executed at `now` (`errored`: its completion
    /// reports a failure of its queue pair): a link waiting behind it goes
    /// on.
    pub(crate) fn link_executed(&mut self, slot: ChainSlot, errored: bool, now: u64) {
        let Some(parked) = self.settle(slot, LinkState::Executed { errored }) else {
            return;
        };
        self.events.schedule(now, Ev::Arrive(parked));
    }

    /// The link in `slot` will never execute: a link waiting behind it is
    /// flushed (a link still on its way is flushed when it arrives, a
    /// fenced one when this link's error completion comes back).
    pub(crate) fn link_not_executed(&mut self, slot: ChainSlot, now: u64) {
        let Some(parked) = self.settle(slot, LinkState::NotExecuted) else {
            return;
        };
        self.flush_link(parked, now);
    }

    /// Flushes request `r`, a link behind one that never executes.
    pub(crate) fn flush_link(&mut self, r: usize, now: u64) {
        self.chaos.counts.chain_flushed += 1;
        self.fail_request(r, now, FabricError::Transport(TransportError::Flushed));
    }

    /// Records what link `slot` came to; returns the link parked behind it,
    /// if any. Forgets a chain whose every link is settled.
    fn settle(&mut self, slot: ChainSlot, state: LinkState) -> Option<usize> {
        let ch = self.net.chains.get_mut(&slot.chain)?;
        if ch.states[slot.pos] != LinkState::Pending {
            return None;
        }
        ch.states[slot.pos] = state;
        let parked = ch.parked.get_mut(slot.pos + 1).and_then(Option::take);
        if ch.states.iter().all(|s| *s != LinkState::Pending) {
            self.net.chains.remove(&slot.chain);
        }
        parked
    }

    /// The completion of link `slot` came back to the requester's NIC at
    /// `now` (`ok`: without an error): a fenced link behind it is sent, or,
    /// after an error, flushed with every link behind it.
    pub(crate) fn link_completed(&mut self, slot: ChainSlot, ok: bool, now: u64) {
        let next = slot.pos + 1;
        let Some(ch) = self.net.chains.get_mut(&slot.chain) else {
            return;
        };
        if ch.links.get(next) != Some(&ChainLink::Fenced) || ch.unsent[next].is_none() {
            return;
        }
        if ok {
            return self.send_links(slot.chain, next, now);
        }
        // Flushed without being sent: each completes with its error.
        let actor = ch.actor;
        let rest: Vec<(usize, WorkRequest)> = (next..ch.unsent.len())
            .filter_map(|pos| ch.unsent[pos].take().map(|wr| (pos, wr)))
            .collect();
        for (pos, wr) in rest {
            let r = self.unsent_request(
                actor,
                wr,
                now,
                ChainSlot {
                    chain: slot.chain,
                    pos,
                },
            );
            self.flush_link(r, now);
        }
    }
}

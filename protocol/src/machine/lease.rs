//! A client without storage's lease on its own (docs/protocol.md §2.4):
//! taking its share before its first write ([`TakeShareLogic`]: an
//! application learns at once whether another process holds it), the
//! heartbeat CAS ([`RenewLogic`]), for a client that runs no operation for a
//! third of the lease term and would otherwise lose its share while it
//! lives, and giving the share back when the client is done
//! ([`ReleaseLogic`]), so that the next process need not wait out the lease
//! term. Every other operation beats by itself when its beat is due (a
//! write in its data round, any operation in its preamble once the beat is
//! overdue).

use crate::error::{Error, UnknownOutcome, UnknownStep};
use crate::machine::alloc_step::AllocStep;
use crate::machine::context::Cx;
use crate::machine::io::{bytes, cas_previous, Results};
use crate::machine::Logic;
use crate::pure::{LeaseBlock, LeaseWord};

/// One attempt of a renewal: advances the heartbeat of a client without
/// storage that holds its share (nothing for any other client).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct RenewLogic {
    /// The heartbeat count its CAS expects, once issued.
    beat: Option<u64>,
}

impl Logic for RenewLogic {
    type Output = ();

    fn advance(&mut self, cx: &mut Cx<'_>, results: Results) -> Option<Result<(), Error>> {
        let Some(before) = self.beat else {
            if cx.client.lease_renewal_due().is_none_or(|due| cx.now < due) {
                // Nothing to renew: a client with storage, a share not
                // taken yet (the first write takes it), or a last beat
                // (this attempt's preamble's, or a write's) less than a
                // third of the lease term old.
                return Some(Ok(()));
            }
            self.beat = cx.client.pure.as_ref().map(|p| p.beat);
            cx.beat();
            return None;
        };
        let id = cx.client.id;
        Some(match results.first().map(|r| cx.on_beat(r)) {
            // The count had moved: the agent took the share back.
            Some(Err(_)) => Err(Error::LeaseLost(id)),
            _ if cx.client.pure.as_ref().is_some_and(|p| p.beat != before) => Ok(()),
            // The CAS failed or went missing: nothing changed; try again.
            _ => Err(Error::Timeout),
        })
    }
}

/// One attempt at taking a client without storage's share: the lease
/// block's READ, and the CAS that takes a free share (asking for a fresh
/// generation of its windows), or the adoption of the keys the agent
/// granted. The write path's own steps (`AllocStep`), stopped before an
/// entry is allocated.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct TakeShareLogic {
    lease: AllocStep,
    started: bool,
}

impl Logic for TakeShareLogic {
    type Output = ();

    fn advance(&mut self, cx: &mut Cx<'_>, results: Results) -> Option<Result<(), Error>> {
        if cx.client.pure.is_none() {
            return Some(Ok(())); // a client with storage holds no share
        }
        let step = if !self.started {
            self.started = true;
            self.lease.take_lease(cx)
        } else {
            self.lease.finish(cx, results)
        };
        match step {
            Ok(_) if self.lease.adopted() => Some(Ok(())),
            Ok(_) => None,
            Err(e) => Some(Err(e)),
        }
    }
}

/// One attempt at giving a client without storage's share back: the lease
/// block's READ, then the CAS of the lease word from naming this client to
/// naming nobody. The generations stay as they are: the next holder asks for
/// one past the last granted, and the node's agent binds its windows again
/// before it grants, so nothing this client posted under its keys lands
/// after the next holder has keys, however late it lands (as after a
/// take-back). Nothing to do for a client with storage or one that holds no
/// share.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ReleaseLogic {
    stage: ReleaseStage,
}

/// Where a release is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
enum ReleaseStage {
    /// Nothing issued yet.
    #[default]
    Start,
    /// The lease block's READ is out.
    Read,
    /// The lease word's CAS is out; it expects this word.
    Cas(LeaseWord),
}

impl ReleaseLogic {
    /// The client no longer holds its share: it takes one anew (a fresh
    /// generation) before its next write.
    fn forget(cx: &mut Cx<'_>) {
        if let Some(p) = cx.client.pure.as_mut() {
            p.held = false;
            p.keys.clear();
            p.want = None;
        }
    }
}

impl Logic for ReleaseLogic {
    type Output = ();

    fn advance(&mut self, cx: &mut Cx<'_>, results: Results) -> Option<Result<(), Error>> {
        let Some(p) = cx.client.pure.as_ref() else {
            return Some(Ok(())); // a client with storage holds no share
        };
        let nonce = p.nonce;
        match self.stage {
            ReleaseStage::Start => {
                if !p.held {
                    return Some(Ok(()));
                }
                cx.read_lease_block();
                self.stage = ReleaseStage::Read;
                None
            }
            ReleaseStage::Read => {
                let block = match results.first().map(bytes) {
                    Some(Ok(b)) => LeaseBlock::decode(b),
                    Some(Err(e)) => return Some(Err(e)),
                    None => None,
                };
                let Some(block) = block else {
                    return Some(Err(Error::Timeout));
                };
                if block.lease.holder != nonce {
                    // Taken back already: nothing left to give.
                    Self::forget(cx);
                    return Some(Ok(()));
                }
                if !cx.may_mutate() {
                    return Some(Err(Error::Timeout));
                }
                let free = LeaseWord {
                    holder: 0,
                    ..block.lease
                };
                cx.cas_lease_word(block.lease, free);
                self.stage = ReleaseStage::Cas(block.lease);
                None
            }
            ReleaseStage::Cas(seen) => match results.first().map(cas_previous) {
                Some(Ok(previous)) if previous == seen.encode() => {
                    Self::forget(cx);
                    Some(Ok(()))
                }
                // The agent granted or took back meanwhile: read again.
                Some(Ok(previous)) if LeaseWord::decode(previous).holder == nonce => {
                    Some(Err(Error::Conflict))
                }
                Some(Ok(_)) => {
                    Self::forget(cx);
                    Some(Ok(()))
                }
                Some(Err(e)) => Some(Err(Error::OutcomeUnknown(UnknownOutcome::new(
                    UnknownStep::LeaseRelease,
                    e,
                )))),
                None => Some(Err(Error::OutcomeUnknown(UnknownOutcome::new(
                    UnknownStep::LeaseRelease,
                    None,
                )))),
            },
        }
    }
}

//! A client without storage's lease on its own (docs/protocol.md §2.4):
//! taking its share before its first write ([`TakeShareLogic`]: an
//! application learns at once whether another process holds it), and the
//! heartbeat CAS ([`RenewLogic`]), for a client that runs no operation for a
//! third of the lease term and would otherwise lose its share while it
//! lives. Every other operation beats by itself when its beat is due (a
//! write in its data round, any operation in its preamble once the beat is
//! overdue).

use crate::error::Error;
use crate::machine::alloc_step::AllocStep;
use crate::machine::context::Cx;
use crate::machine::io::Results;
use crate::machine::Logic;

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

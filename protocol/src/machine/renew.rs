//! A client without storage's lease renewal on its own (docs/protocol.md
//! §2.4): the heartbeat CAS, for a client that runs no operation for a third
//! of the lease term and would otherwise lose its share while it lives.
//! Every other operation beats by itself when its beat is due (a write in
//! its data round, any operation in its preamble once the beat is overdue).

use crate::error::Error;
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
        let now = cx.now.0;
        let Some(p) = cx.client.pure.as_ref() else {
            return Some(Ok(())); // a client with storage holds no lease
        };
        let Some(before) = self.beat else {
            if !p.held || p.keys.is_empty() || now < p.beat_due {
                // Nothing to renew: the share is not taken yet (the first
                // write takes it), or its last beat (this attempt's
                // preamble's, or a write's) is less than a third of the
                // lease term old.
                return Some(Ok(()));
            }
            self.beat = Some(p.beat);
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

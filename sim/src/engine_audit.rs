//! The engine's side of Nessie's audits ([`crate::audit`]): the I4 watch
//! over every executed work request while a run goes on, and the
//! data-table audit of a finished run, read from the engine's memory and
//! clients.

use nessie_protocol::layout::IndexEntry;
use nessie_protocol::{FabricError, Nanos, OpOutput};
use nessie_systems::SystemKind;

use crate::audit::{audit, header, DteAudit, Share, Watched};
use crate::checks::MarkedLinked;
use crate::engine::{nanos, Engine};

impl Engine {
    /// The I4 watch (module documentation): `w` executed with `result`;
    /// records a breach in [`SimReport::marked_linked`](crate::SimReport::marked_linked).
    pub(crate) fn watch_marked_linked(
        &mut self,
        w: Option<Watched>,
        result: &Result<OpOutput, FabricError>,
        now: u64,
    ) {
        if self.spec.system != SystemKind::Nessie
            || !self.checks.marked_linked.wants_more()
            || result.is_err()
        {
            return;
        }
        let breach = match w {
            None => return,
            Some(Watched::Mark(d)) => self
                .cluster
                .mem
                .index_words()
                .any(|w| w.dte() == Some(d))
                .then_some(MarkedLinked::Marked { entry: d, at: now }),
            Some(Watched::Link { expect, new }) => {
                let linked =
                    matches!(result, Ok(OpOutput::Cas { previous }) if *previous == expect);
                IndexEntry(new)
                    .dte()
                    .filter(|&d| {
                        linked
                            && header(&self.cluster.mem, &self.cfg, d)
                                .is_some_and(|h| h.recycle.recycle)
                    })
                    .map(|d| MarkedLinked::Linked { entry: d, at: now })
            }
        };
        if let Some(b) = breach {
            self.checks.marked_linked.record(b);
        }
    }

    /// The audit of a finished run whose last event was at virtual time
    /// `last` (`None` where it does not apply: another system than Nessie,
    /// or no final sweep). `counted` is the leaks the operations counted,
    /// `crashes` the client crashes and operations given up.
    ///
    /// Rather than simulate idle time, the audit reads the reuse rule at a
    /// clock reading past every recycle mark's expiration: a mark posted by
    /// `last` on a clock at most `lead` ahead expires by `last + lead + T`,
    /// and the rule adds the skew allowance.
    pub(crate) fn audit_dtes(&self, last: u64, counted: u64, crashes: u64) -> Option<DteAudit> {
        if self.spec.system != SystemKind::Nessie || !self.spec.final_sweep {
            return None;
        }
        let lead = self
            .clients
            .iter()
            .map(|c| c.clock_offset)
            .max()
            .unwrap_or(0);
        let now = last
            .saturating_add(lead)
            .saturating_add(nanos(self.cfg.expiration))
            .saturating_add(nanos(self.cfg.clock_skew));
        let shares: Vec<Share<'_>> = self
            .clients
            .iter()
            .map(|c| Share {
                id: c.state.id,
                alloc: &c.state.alloc,
                up: c.down_since.is_none(),
            })
            .collect();
        Some(audit(
            &self.cluster.mem,
            &self.cfg,
            &shares,
            Nanos(now),
            counted,
            crashes,
        ))
    }
}

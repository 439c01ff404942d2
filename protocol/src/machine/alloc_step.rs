//! Getting a fresh data table entry, scanning for expired ones when needed.

use crate::addr::DteAddr;
use crate::error::Error;
use crate::layout::DataEntryHeader;
use crate::machine::context::Cx;
use crate::machine::io::{bytes, Results};

/// A pending sweep: the size class asked for and the entries whose
/// headers were requested.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct AllocStep {
    class: u8,
    targets: Vec<DteAddr>,
}

impl AllocStep {
    /// Takes a free entry of size class `class` if the allocator has one
    /// (`Ok(Some)`); otherwise issues a sweep batch of that class's share
    /// (`Ok(None)`: call `finish` with the results).
    pub fn start(&mut self, cx: &mut Cx<'_>, class: u8) -> Result<Option<DteAddr>, Error> {
        self.class = class;
        if let Some(d) = cx.client.alloc.allocate(class) {
            return Ok(Some(d));
        }
        self.sweep(cx)
    }

    fn sweep(&mut self, cx: &mut Cx<'_>) -> Result<Option<DteAddr>, Error> {
        self.targets = cx.client.alloc.next_sweep(self.class);
        if self.targets.is_empty() {
            return Err(Error::DataTableFull {
                node: cx.client.id.node,
                class: self.class,
            });
        }
        for &d in &self.targets {
            cx.read_header(d);
        }
        Ok(None)
    }

    /// Collects the swept headers; allocates, or sweeps the next batch.
    pub fn finish(&mut self, cx: &mut Cx<'_>, results: Results) -> Result<Option<DteAddr>, Error> {
        let (skew, expiration) = (cx.cfg().clock_skew, cx.cfg().expiration);
        let hasty = cx.client.faults.reuse_before_expiry;
        for (&d, r) in self.targets.iter().zip(&results) {
            let Some(h) = bytes(r).ok().and_then(DataEntryHeader::decode) else {
                continue;
            };
            let written = !h.is_never_written();
            if hasty && h.recycle.recycle {
                cx.client.alloc.collect_hastily(d, &h);
                cx.io.stats.recycled += 1;
            } else if cx.client.alloc.collect(d, &h, cx.now, skew, expiration) && written {
                cx.io.stats.recycled += 1;
            }
        }
        match cx.client.alloc.allocate(self.class) {
            Some(d) => Ok(Some(d)),
            None => self.sweep(cx),
        }
    }
}

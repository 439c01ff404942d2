//! Getting a fresh data table entry, scanning for expired ones when needed.

use crate::addr::DteAddr;
use crate::error::Error;
use crate::layout::DataEntryHeader;
use crate::machine::context::Cx;
use crate::machine::io::{bytes, Results};

/// A pending recycling scan: the entries whose headers were requested.
#[derive(Debug, Default)]
pub(crate) struct AllocStep {
    targets: Vec<DteAddr>,
}

impl AllocStep {
    /// Takes a free entry if the allocator has one (`Ok(Some)`); otherwise
    /// issues a scan of the client's used entries (`Ok(None)`: call `finish`
    /// with the results).
    pub fn start(&mut self, cx: &mut Cx<'_>) -> Result<Option<DteAddr>, Error> {
        if let Some(d) = cx.client.alloc.allocate() {
            return Ok(Some(d));
        }
        self.targets = cx.client.alloc.scan_targets();
        if self.targets.is_empty() {
            return Err(Error::DataTableFull { node: cx.client.id.node });
        }
        for &d in &self.targets {
            cx.read_header(d);
        }
        Ok(None)
    }

    /// Collects the scanned headers and allocates.
    pub fn finish(&mut self, cx: &mut Cx<'_>, results: Results) -> Result<DteAddr, Error> {
        let skew = cx.cfg().clock_skew;
        let hasty = cx.client.faults.reuse_before_expiry;
        for (&d, r) in self.targets.iter().zip(&results) {
            let Ok(raw) = bytes(r) else { continue };
            if let Some(h) = DataEntryHeader::decode(raw) {
                if hasty && h.recycle.recycle {
                    cx.client.alloc.release_unpublished(d);
                } else {
                    cx.client.alloc.collect(d, &h, cx.now, skew);
                }
            }
        }
        cx.client.alloc.allocate().ok_or(Error::DataTableFull { node: cx.client.id.node })
    }
}


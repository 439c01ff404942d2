//! Getting a fresh data table entry, scanning for expired ones when needed;
//! for a client without storage, first getting keys of its windows from its
//! lease block (docs/protocol.md §2.4).

use crate::addr::DteAddr;
use crate::error::Error;
use crate::layout::DataEntryHeader;
use crate::machine::context::Cx;
use crate::machine::io::{bytes, Results};
use crate::pure::{LeaseBlock, LeaseWord};

/// A pending allocation: the size class asked for, and what was asked of
/// the fabric last.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct AllocStep {
    class: u8,
    stage: Stage,
    /// Only the lease: once keys are adopted, stop there rather than
    /// allocate an entry ([`AllocStep::take_lease`]).
    lease_only: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
enum Stage {
    /// Nothing was asked.
    #[default]
    Idle,
    /// The headers of these entries were requested.
    Sweep(Vec<DteAddr>),
    /// The lease block was requested.
    Lease,
    /// A newer generation was requested in the lease word.
    Request,
    /// Keys adopted, and only the lease was asked for.
    Adopted,
}

impl AllocStep {
    /// Takes a free entry of size class `class` if the allocator has one
    /// (`Ok(Some)`); otherwise issues a sweep batch of that class's share,
    /// or a client without storage's READ of its lease block (`Ok(None)`:
    /// call `finish` with the results).
    pub fn start(&mut self, cx: &mut Cx<'_>, class: u8) -> Result<Option<DteAddr>, Error> {
        self.class = class;
        if cx.client.pure.as_ref().is_some_and(|p| p.needs_keys()) {
            return self.read_lease(cx);
        }
        if let Some(d) = cx.client.alloc.allocate(class) {
            return Ok(Some(d));
        }
        self.sweep(cx)
    }

    /// A client without storage takes its share and the keys of a
    /// generation, and allocates nothing: reads its lease block (`Ok(None)`:
    /// call `finish` with the results, until [`AllocStep::adopted`]). The
    /// first write of a client that holds its keys does nothing more.
    pub fn take_lease(&mut self, cx: &mut Cx<'_>) -> Result<Option<DteAddr>, Error> {
        self.lease_only = true;
        if !cx.client.pure.as_ref().is_some_and(|p| p.needs_keys()) {
            self.stage = Stage::Adopted;
            return Ok(None);
        }
        self.read_lease(cx)
    }

    /// Whether [`AllocStep::take_lease`] got the keys.
    pub fn adopted(&self) -> bool {
        self.stage == Stage::Adopted
    }

    fn sweep(&mut self, cx: &mut Cx<'_>) -> Result<Option<DteAddr>, Error> {
        let targets = cx.client.alloc.next_sweep(self.class);
        if targets.is_empty() {
            if let Some(p) = cx.client.pure.as_mut() {
                if cx.client.alloc.spent_in_generation(self.class) {
                    // Entries written in this generation are reusable only
                    // in the next one.
                    p.want = Some(p.generation + 1);
                    return self.read_lease(cx);
                }
            }
            return Err(Error::DataTableFull {
                node: cx.client.id.node,
                class: self.class,
            });
        }
        for &d in &targets {
            cx.read_header(d);
        }
        self.stage = Stage::Sweep(targets);
        Ok(None)
    }

    fn read_lease(&mut self, cx: &mut Cx<'_>) -> Result<Option<DteAddr>, Error> {
        cx.read_lease_block();
        self.stage = Stage::Lease;
        Ok(None)
    }

    /// Collects the results of what was issued last; allocates, or issues
    /// the next step.
    pub fn finish(&mut self, cx: &mut Cx<'_>, results: Results) -> Result<Option<DteAddr>, Error> {
        match std::mem::take(&mut self.stage) {
            Stage::Idle | Stage::Adopted => Err(Error::Conflict),
            Stage::Sweep(targets) => self.collect(cx, &targets, results),
            Stage::Lease => self.on_lease(cx, &results),
            // Asked: the agent binds in its own time; a later attempt reads
            // the grant.
            Stage::Request => Err(Error::Timeout),
        }
    }

    fn collect(
        &mut self,
        cx: &mut Cx<'_>,
        targets: &[DteAddr],
        results: Results,
    ) -> Result<Option<DteAddr>, Error> {
        let (skew, expiration) = (cx.cfg().clock_skew, cx.cfg().expiration);
        let hasty = cx.client.faults.reuse_before_expiry;
        for (&d, r) in targets.iter().zip(&results) {
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

    /// The lease block read: take the share if it is free (asking for a
    /// generation with the same CAS), adopt a granted generation the client
    /// waits for, or ask for it, or wait (a retryable timeout: nothing
    /// written). A share another holds is refused (`ClientIdInUse`); a share
    /// this client held and lost (the agent took it back) ends the client
    /// (`LeaseLost`).
    fn on_lease(&mut self, cx: &mut Cx<'_>, results: &Results) -> Result<Option<DteAddr>, Error> {
        let block = results
            .first()
            .and_then(|r| bytes(r).ok())
            .and_then(LeaseBlock::decode);
        let id = cx.client.id;
        let (Some(block), Some(p)) = (block, cx.client.pure.as_mut()) else {
            return Err(Error::Timeout);
        };
        let lease = block.lease;
        if !p.held {
            if lease.holder == p.nonce {
                p.held = true;
            } else if lease.holder == 0 {
                // Take it, asking for a generation past any granted (so
                // that no key an earlier holder had stays good).
                if !cx.may_mutate() {
                    return Err(Error::Timeout);
                }
                // Broken (`take-without-new-generation`): take it in the
                // generation it has, and so the keys of the client that
                // gave it back, still good.
                let want = if cx.client.faults.take_without_new_generation {
                    lease.granted
                } else {
                    lease.granted + 1
                };
                let Some(p) = cx.client.pure.as_mut() else {
                    return Err(Error::Timeout);
                };
                p.want = Some(want);
                let take = LeaseWord {
                    holder: p.nonce,
                    requested: want,
                    granted: lease.granted,
                };
                cx.cas_lease_word(lease, take);
                self.stage = Stage::Request;
                return Ok(None);
            } else {
                return Err(Error::ClientIdInUse(id));
            }
        }
        if lease.holder != p.nonce {
            return Err(Error::LeaseLost(id));
        }
        let want = *p.want.get_or_insert(lease.granted + 1);
        if lease.granted >= want {
            let Some(keys) = block.granted_keys(p.nonce) else {
                // Read while the agent stored it: read again later.
                return Err(Error::Timeout);
            };
            p.generation = lease.granted;
            p.keys = keys;
            p.want = None;
            p.beat = block.beat;
            p.beat_due = 0;
            cx.client.alloc.begin_generation();
            if self.lease_only {
                self.stage = Stage::Adopted;
                return Ok(None);
            }
            return self.start(cx, self.class);
        }
        if lease.requested >= want || !cx.may_mutate() {
            return Err(Error::Timeout);
        }
        let ask = LeaseWord {
            requested: want,
            ..lease
        };
        cx.cas_lease_word(lease, ask);
        self.stage = Stage::Request;
        Ok(None)
    }
}

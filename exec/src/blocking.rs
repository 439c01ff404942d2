//! The threaded driver of the sans-IO machines ([`crate::machine`]): a
//! [`Driver`] owns an endpoint, posts a machine's rounds, waits for their
//! completions, and performs its effects by blocking the calling thread:
//!
//! - a back-off sleeps or yields ([`Endpoint::backoff`]);
//! - a client's wait for its response polls the response slot's control
//!   word by CPU until the awaited sequence number is there or the deadline
//!   passes;
//! - a worker's wait for requests scans the control words of its slots
//!   ([`Driver::scan`]; the server pool's loop adds pausing and stopping);
//! - a wait for the table lock yields until its holder releases it.
//!
//! Between polls it yields the CPU: this machine has 2 cores and more
//! threads than that, and a spinning client would otherwise starve the
//! very worker it waits for. The driver's own polling reads are numbered
//! apart from the machines' work requests and never counted.

use std::future::Future;
use std::pin::pin;
use std::pin::Pin;
use std::time::Duration;

use nessie_protocol::{
    ChainLink, Completion, CorruptionKind, Endpoint, Error, Nanos, Op, OpId, OpOutput, OpStats,
    WorkRequest,
};

use crate::machine::{Effect, Exec, Ext, Io, Machine, Never, Plain, Resolution, Step};
use crate::watch::SlotWatch;
use nessie_protocol::internals::wait_for;

/// The longest one wait for completions blocks before the machine sees the
/// time again, when its own wake-up ([`Exec::poll_timeout`]) is later or
/// none (a clock may move without the driver, as a test's manual one does).
const WAIT_SLICE: Duration = Duration::from_millis(5);

/// How long a polling read waits for its completion (CPU accesses complete
/// at once; one that does not is treated as not seen).
const POLL_READ_WAIT: Duration = Duration::from_millis(5);

/// First id of the driver's own polling reads: far from the machines' ids.
const POLL_IDS: u64 = 1 << 63;

/// The resolver of [`Plain`] machines' own effects (there are none).
pub fn no_ext(e: Never) -> Never {
    match e {}
}

/// A threaded driver on one endpoint (module documentation).
#[derive(Debug)]
pub struct Driver<E: Endpoint> {
    ep: E,
    next_id: u64,
    poll_id: u64,
    buf: Vec<Completion>,
}

impl<E: Endpoint> Driver<E> {
    /// A driver on `ep`.
    pub fn new(ep: E) -> Driver<E> {
        Driver {
            ep,
            next_id: 1,
            poll_id: POLL_IDS,
            buf: Vec::new(),
        }
    }

    /// The endpoint.
    pub fn endpoint(&mut self) -> &mut E {
        &mut self.ep
    }

    /// The node the endpoint is on.
    pub fn node(&self) -> nessie_protocol::NodeId {
        self.ep.node()
    }

    /// The endpoint's clock.
    pub fn now(&self) -> Nanos {
        self.ep.now()
    }

    /// Runs the logic `make` builds (from a fresh machine's [`Io`]) to the
    /// end, its rounds giving up on missing completions `limit` after they
    /// were issued, and performing the system's own effects with `ext`. The
    /// result and what the machine issued.
    pub fn run<T, X, F>(
        &mut self,
        limit: Option<Duration>,
        make: impl FnOnce(Io<X>) -> F,
        ext: &mut dyn FnMut(X::Effect) -> X::Resolution,
    ) -> (Result<T, Error>, OpStats)
    where
        X: Ext,
        F: Future<Output = Result<T, Error>>,
    {
        let (mut exec, io) = Exec::new(self.ep.node(), self.next_id);
        io.set_limit(limit);
        let fut = pin!(make(io));
        let r = self.drive(&mut exec, fut, ext);
        (r, exec.stats())
    }

    /// [`Driver::run`] for a machine without effects of its own.
    pub fn run_plain<T, F>(
        &mut self,
        limit: Option<Duration>,
        make: impl FnOnce(Io<Plain>) -> F,
    ) -> (Result<T, Error>, OpStats)
    where
        F: Future<Output = Result<T, Error>>,
    {
        self.run(limit, make, &mut no_ext)
    }

    /// Drives `fut` (built on `exec`'s handle) to the end.
    pub fn drive<T, X, F>(
        &mut self,
        exec: &mut Exec<X>,
        mut fut: Pin<&mut F>,
        ext: &mut dyn FnMut(X::Effect) -> X::Resolution,
    ) -> Result<T, Error>
    where
        X: Ext,
        F: Future<Output = Result<T, Error>> + ?Sized,
    {
        let r = loop {
            let now = self.ep.now();
            match exec.poll(fut.as_mut(), now) {
                Step::Done(r) => break r,
                Step::Post(wrs) => {
                    self.post(exec, wrs, now);
                    // Nothing to poll for until a completion comes.
                    if exec.outstanding() > 0 {
                        self.wait(exec);
                    }
                }
                Step::PostChain(chain) => {
                    self.post_chain(exec, chain, now);
                    if exec.outstanding() > 0 {
                        self.wait(exec);
                    }
                }
                Step::PostDetached(wrs) => self.post_detached(exec, wrs, now),
                Step::Pending => self.wait(exec),
                Step::Effect(e) => {
                    let r = self.perform(e, ext);
                    exec.resolve(r);
                }
            }
        };
        self.next_id = self.next_id.max(exec.next_id());
        r
    }

    /// Runs a machine that owns its logic to the end.
    pub fn run_machine<T: 'static, X: Ext>(
        &mut self,
        m: &mut Machine<T, X>,
        ext: &mut dyn FnMut(X::Effect) -> X::Resolution,
    ) -> Result<T, Error> {
        let Some((exec, fut)) = m.parts() else {
            return Err(Error::corrupt(
                CorruptionKind::Bug,
                "machine run after it finished",
            ));
        };
        let r = self.drive(exec, fut, ext);
        m.finish();
        r
    }

    /// The id the next machine on this driver numbers its requests from.
    pub fn next_id(&self) -> u64 {
        self.next_id
    }

    /// Notes that a machine driven elsewhere on this endpoint used ids up to
    /// `next` (exclusive).
    pub fn used_ids(&mut self, next: u64) {
        self.next_id = self.next_id.max(next);
    }

    /// Posts a round the machine issued at its clock reading `issued`
    /// ([`Endpoint::post_issued`]); work requests the endpoint refuses
    /// complete with the refusal (they never execute).
    pub fn post<X: Ext>(&mut self, exec: &mut Exec<X>, wrs: Vec<WorkRequest>, issued: Nanos) {
        for wr in wrs {
            let id = wr.id;
            if let Err(e) = self.ep.post_issued(wr, issued) {
                if !exec.refuse(id, e.clone()) {
                    tracing::warn!(error = %e, "a detached post was refused");
                }
            }
        }
        self.next_id = self.next_id.max(exec.next_id());
    }

    /// Posts a machine's chain (`Endpoint::post_chain`). One the endpoint
    /// refuses posted nothing: every request of it fails with the refusal.
    pub fn post_chain<X: Ext>(
        &mut self,
        exec: &mut Exec<X>,
        chain: Vec<(WorkRequest, ChainLink)>,
        issued: Nanos,
    ) {
        let ids: Vec<_> = chain.iter().map(|(wr, _)| wr.id).collect();
        if let Err(e) = self.ep.post_chain(chain, issued) {
            for id in ids {
                exec.refuse(id, e.clone());
            }
        }
        self.next_id = self.next_id.max(exec.next_id());
    }

    /// Posts a detached post unsignaled (a success need not complete; a
    /// failure does, and reaches the machine's driver as a stray
    /// completion, which is logged). One the endpoint refuses never
    /// executes: logged too.
    pub fn post_detached<X: Ext>(
        &mut self,
        exec: &mut Exec<X>,
        wrs: Vec<WorkRequest>,
        issued: Nanos,
    ) {
        for wr in wrs {
            if let Err(e) = self.ep.post_unsignaled_issued(wr, issued) {
                tracing::warn!(error = %e, "a detached post was refused");
            }
        }
        self.next_id = self.next_id.max(exec.next_id());
    }

    /// Waits for completions of the machine's round, until the machine
    /// wants to be polled ([`Exec::poll_timeout`]) and at most one slice.
    pub fn wait<X: Ext>(&mut self, exec: &mut Exec<X>) {
        self.buf.clear();
        let wait = wait_for(self.ep.now(), exec.poll_timeout(), WAIT_SLICE);
        self.ep.wait(&mut self.buf, wait);
        if self.buf.is_empty() {
            // A lost completion leaves nothing to wait for: do not spin.
            std::thread::yield_now();
        }
        for c in self.buf.drain(..) {
            let (id, failed) = (c.id, c.result.as_ref().err().cloned());
            if !exec.complete(c) {
                stray(id, failed);
            }
        }
    }

    /// Performs a shared effect by blocking, and a system's own with `ext`.
    pub fn perform<X: Ext>(
        &mut self,
        e: Effect<X>,
        ext: &mut dyn FnMut(X::Effect) -> X::Resolution,
    ) -> Resolution<X> {
        match e {
            Effect::Backoff(d) => {
                self.ep.backoff(d);
                Resolution::Waited
            }
            Effect::AwaitResponse {
                ctrl,
                seq,
                deadline,
            } => loop {
                if self.local_word(ctrl).is_some_and(|w| w as u32 == seq) {
                    break Resolution::Landed(true);
                }
                if self.ep.now() > deadline {
                    break Resolution::Landed(false);
                }
                std::thread::yield_now();
            },
            Effect::AwaitRequest(watch) => {
                let mut cursor = 0;
                loop {
                    if let Some((index, ctrl)) = self.scan(&watch, &mut cursor) {
                        break Resolution::Request { index, ctrl };
                    }
                    std::thread::yield_now();
                }
            }
            Effect::AwaitLock(lock) => {
                while lock.is_held() {
                    std::thread::yield_now();
                }
                Resolution::Waited
            }
            Effect::Ext(x) => Resolution::Ext(ext(x)),
        }
    }

    /// One pass over `watch`'s slots from `cursor`: the first holding a
    /// request not yet served (its position and control word); the cursor
    /// moves past it, so that the next pass starts with the next slot.
    pub fn scan(&mut self, watch: &SlotWatch, cursor: &mut usize) -> Option<(usize, u64)> {
        let n = watch.slots().len();
        for k in 0..n {
            let i = (*cursor + k) % n;
            let Some(ctrl) = self.local_word(watch.ctrl_offset(i)) else {
                continue;
            };
            if watch.is_new(i, ctrl) {
                *cursor = (i + 1) % n;
                return Some((i, ctrl));
            }
        }
        None
    }

    /// A CPU read of the 8-byte word at `offset` of the node's data region
    /// (not a machine's: never counted); `None` if it failed.
    pub fn local_word(&mut self, offset: u64) -> Option<u64> {
        let id = OpId(self.poll_id);
        self.poll_id = self.poll_id.wrapping_add(1) | POLL_IDS;
        let wr = WorkRequest {
            id,
            op: Op::LocalRead { offset, len: 8 },
        };
        self.ep.post(wr).ok()?;
        let mut got = None;
        let mut buf = std::mem::take(&mut self.buf);
        // A CPU access completes at once: look before timing a wait.
        buf.clear();
        self.ep.poll(&mut buf);
        let mut started = None;
        loop {
            for c in buf.drain(..) {
                if c.id == id {
                    got = Some(c.result);
                } else {
                    stray(c.id, c.result.err());
                }
            }
            if got.is_some() {
                break;
            }
            let start = *started.get_or_insert_with(std::time::Instant::now);
            if start.elapsed() >= POLL_READ_WAIT {
                break;
            }
            self.ep.wait(&mut buf, POLL_READ_WAIT);
        }
        self.buf = buf;
        match got? {
            Ok(OpOutput::Read(b)) => Some(crate::bytes::word(&b, 0)),
            _ => None,
        }
    }
}

/// A completion no machine awaits: a detached post's, or one of a round
/// given up on. Failures are worth a warning (a server's response WRITE
/// that failed means its client times out).
fn stray(id: OpId, failed: Option<nessie_protocol::FabricError>) {
    if let Some(e) = failed {
        tracing::warn!(error = %e, id = id.0, "a work request nobody awaits failed");
    }
}

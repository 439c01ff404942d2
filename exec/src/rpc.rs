//! The client side of the request slots: send a request to a key's home node
//! and await the response in the client's own response slot, as one async
//! sub-machine ([`RpcCall::send`]) that NessieSD, NessieHY, Pilaf and Cell
//! all run inside their machines. [`RpcClient`] is what a client keeps
//! between calls (its sequence numbers and what it knows of its claim
//! words); [`RpcClient::begin`] hands a call out and [`RpcClient::finish`]
//! takes back what the call learnt.
//!
//! **Outcomes.** A GET request commits nothing, so any failure of one is
//! simply returned. A PUT or DELETE request may execute whenever a server
//! worker reads it, so a client that stops waiting must settle it first: it
//! *cancels* the request by a compare-and-swap of its claim word on the home
//! node ([`crate::mailbox`]), which the server must win by its own CAS before
//! it executes anything. If the cancel wins, the request never executes and
//! the client returns its error (`Timeout`, or the fabric error of a request
//! WRITE that failed): nothing was committed, and retrying is safe. If the
//! server had claimed it, the client waits once more for the response (the
//! server is running the request), and if that does not come either, returns
//! [`Error::OutcomeUnknown`]. If the claim word cannot be reached (the home
//! node is down, the CAS completion is lost), the outcome is unknown too. A
//! request that could not even be posted never executes.
//!
//! **No landing time.** None of this rests on when a posted WRITE lands. A
//! request that lands after its cancel finds the word deciding it (or a
//! later request of its process) and is never claimed, so a client whose
//! request WRITE failed cancels at once, whenever the WRITE may land. And a
//! client process *opens* its claim word on a node before its first PUT or
//! DELETE there: a CAS that writes its own incarnation tag into the word
//! (with a decision older than its first request). Workers claim only
//! requests of the word's incarnation (or from a word never used), so every
//! request of a predecessor process, however late it lands, is dead from
//! then on, and no cancel of this process can overwrite a decision its
//! predecessor made. The first process of each client id on memory its
//! deployment zeroed ([`RpcClient::without_predecessor`]: the simulator's
//! first clients, a threaded deployment's first client of each id) has no
//! predecessor and needs no opening: its words start never used. Every wait
//! is bounded: the opening, the request and its response share one timeout,
//! the settle has another, so an operation returns within twice the
//! timeout.
//!
//! Waiting for the response is an effect
//! ([`Effect::AwaitResponse`](crate::machine::Effect::AwaitResponse)): the
//! threaded driver polls the slot, the simulator wakes the machine when the
//! server's WRITE lands.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use nessie_protocol::{
    ClientId, Config, CorruptionKind, Error, FabricError, Nanos, NodeId, Op, OpOutput, RemoteAddr,
    UnknownOutcome, UnknownStep,
};

use crate::bytes::word;
use crate::machine::{read_one, Ext, Io, OpClass};
use crate::mailbox::{
    encode_tagged, read_message, split_ctrl, tag_of, tagged_claim_word, MailboxLayout, Response,
    RpcOp, CANCELLED, CLAIMED, TAG_MASK,
};

/// A client's request channel to every node's server workers.
#[derive(Debug)]
pub struct RpcClient {
    layout: MailboxLayout,
    /// The client's global slot number.
    g: u32,
    seq: u32,
    /// This client process's incarnation tag (24 bits), in its requests'
    /// ctrl words and its cancels.
    tag: u32,
    /// What the client last knew of its claim word on each node.
    claims: Vec<u64>,
    /// How long to wait for a response before settling the request.
    pub timeout: Duration,
    /// A2's landing bound (the protocol's `deadline_margin`): used by the
    /// test-only switch [`RpcFaults::set_settle_by_landing_bound`] alone.
    landing: Duration,
    /// Whether a predecessor process may have used this client's slots: then
    /// the process opens its claim word on a node before its first PUT or
    /// DELETE there (module docs).
    may_have_predecessor: bool,
    /// Test-only fault switches (all off unless a test turns them on).
    pub faults: RpcFaults,
}

/// Test-only fault switches of [`RpcClient`], shared by every client a
/// `nessie_baselines::Deployment` hands out, so that a test can show its
/// outcome checks catch a dishonest client.
#[derive(Clone, Debug, Default)]
pub struct RpcFaults {
    unknown_as_timeout: Arc<AtomicBool>,
    settle_by_landing_bound: Arc<AtomicBool>,
}

impl RpcFaults {
    /// When on, a PUT or DELETE whose outcome is unknown (claimed by the
    /// server but unanswered, or not cancellable) returns the error that
    /// made the client give up (usually `Timeout`, "nothing committed")
    /// instead of [`Error::OutcomeUnknown`]: the lie the outcome tests must catch.
    pub fn set_unknown_as_timeout(&self, on: bool) {
        self.unknown_as_timeout.store(on, Ordering::SeqCst);
    }

    fn unknown_as_timeout(&self) -> bool {
        self.unknown_as_timeout.load(Ordering::Relaxed)
    }

    /// When on, a client settles a PUT or DELETE whose request WRITE failed
    /// as it did before its outcome rested on no landing time: it waits out
    /// the landing bound (A2), reads its slot and, finding some other
    /// request there (or none), reports the WRITE's error ("nothing
    /// committed") without cancelling. A request WRITE held past the bound (a PFC pause) then
    /// lands and runs after its client reported it as not committed: what
    /// the swarm with late landings unbounded must catch.
    pub fn set_settle_by_landing_bound(&self, on: bool) {
        self.settle_by_landing_bound.store(on, Ordering::SeqCst);
    }

    fn settle_by_landing_bound(&self) -> bool {
        self.settle_by_landing_bound.load(Ordering::Relaxed)
    }
}

/// One request in flight: what [`RpcCall::send`] needs, owned, so that a
/// machine may carry it.
#[derive(Clone, Debug)]
pub struct RpcCall {
    layout: MailboxLayout,
    g: u32,
    seq: u32,
    tag: u32,
    home: NodeId,
    op: RpcOp,
    timeout: Duration,
    /// What the client knows of its claim word on `home`.
    claim: u64,
    /// A2's landing bound ([`RpcClient`]; the test-only switch's).
    landing: Duration,
    /// Whether the process must open its claim word on `home` before this
    /// request runs (a PUT or DELETE of a process that may have had a
    /// predecessor, whose word on `home` does not carry its tag yet).
    must_open: bool,
    unknown_as_timeout: bool,
    settle_by_landing_bound: bool,
}

/// How a request that got no response in time was settled.
enum Settled {
    /// The cancel won: the request never executes.
    Cancelled,
    /// The server claimed it and answered within the grace period.
    Answered(Response),
    /// Claimed but no answer, or the claim word could not be reached.
    Unknown(UnknownOutcome),
}

impl RpcClient {
    /// The channel of client `id` under `layout`, waiting `timeout` for a
    /// response, under A2's landing bound `landing` (see
    /// [`RpcClient::with_first_seq`]).
    pub fn new(
        layout: MailboxLayout,
        id: ClientId,
        clients_per_node: u16,
        timeout: Duration,
        landing: Duration,
    ) -> RpcClient {
        let g = u32::from(id.node.0) * u32::from(clients_per_node) + u32::from(id.index);
        // A server skips a slot whose sequence number it has already served,
        // so a client that reuses a slot (a restarted client with the same id)
        // must not start where its predecessor stopped: it starts at a number
        // drawn from the clock (a collision has probability 2^-32), and
        // draws its incarnation tag from it too.
        let clock = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        RpcClient::with_first_seq(layout, g, clock, timeout, landing)
    }

    /// The channel of the client with global slot number `g`, whose sequence
    /// numbers and incarnation tag are drawn from `entropy` (a deterministic
    /// driver passes its seed; [`RpcClient::new`] the wall clock).
    ///
    /// `landing` is A2's landing bound (the protocol's `deadline_margin`);
    /// no outcome rests on it (module docs): only the test-only switch
    /// [`RpcFaults::set_settle_by_landing_bound`] waits it out.
    pub fn with_first_seq(
        layout: MailboxLayout,
        g: u32,
        entropy: u64,
        timeout: Duration,
        landing: Duration,
    ) -> RpcClient {
        let h = nessie_protocol::hash::stable_hash(entropy, &g.to_le_bytes());
        let seq = h as u32;
        let tag = ((h >> 32) as u32 & TAG_MASK).max(1);
        RpcClient {
            layout,
            g,
            seq,
            tag,
            claims: Vec::new(),
            timeout,
            landing,
            may_have_predecessor: true,
            faults: RpcFaults::default(),
        }
    }

    /// This channel for a client process known to have had no predecessor
    /// on its slots (a deterministic driver's first clients, on zeroed
    /// memory): its claim words are never used, so it does not open them.
    pub fn without_predecessor(mut self) -> RpcClient {
        self.may_have_predecessor = false;
        self
    }

    /// The client's global slot number.
    pub fn slot(&self) -> u32 {
        self.g
    }

    /// Starts a request `op` to `home`: the next sequence number, and what
    /// the client knows of its claim word there.
    pub fn begin(&mut self, home: NodeId, op: RpcOp) -> RpcCall {
        self.seq = self.seq.wrapping_add(1).max(1);
        let h = usize::from(home.0);
        let claim = self.claims.get(h).copied().unwrap_or(0);
        let must_open = op != RpcOp::Get && self.may_have_predecessor && tag_of(claim) != self.tag;
        RpcCall {
            layout: self.layout,
            g: self.g,
            seq: self.seq,
            tag: self.tag,
            home,
            op,
            timeout: self.timeout,
            claim,
            landing: self.landing,
            must_open,
            unknown_as_timeout: self.faults.unknown_as_timeout(),
            settle_by_landing_bound: self.faults.settle_by_landing_bound(),
        }
    }

    /// Takes back what `call` learnt about its claim word.
    pub fn finish(&mut self, call: &RpcCall) {
        let h = usize::from(call.home.0);
        if self.claims.len() <= h {
            self.claims.resize(h + 1, 0);
        }
        self.claims[h] = call.claim;
    }
}

impl RpcCall {
    /// The node the request goes to.
    pub fn home(&self) -> NodeId {
        self.home
    }

    /// Sends the request (`key` and `value`) and waits for the response.
    /// Counts the request WRITE (a CPU write when `home` is the machine's
    /// own node), the server's response WRITE (`server_writes`) and the
    /// final CPU read of the response; polling is not counted (it is the
    /// CPU time the benchmark reports). A cancel CAS, when one is needed, is
    /// counted too.
    pub async fn send<X: Ext>(
        &mut self,
        io: &Io<X>,
        key: &[u8],
        value: &[u8],
    ) -> Result<Response, Error> {
        let mutation = self.op != RpcOp::Get;
        // The opening, the request and its response share one timeout (the
        // settle has one of its own): an operation still returns within
        // twice the timeout.
        let deadline = io.now().plus(self.timeout);
        if std::mem::take(&mut self.must_open) {
            self.open(io, deadline).await?;
        }
        let posted_at = io.now();
        let msg = encode_tagged(self.seq, self.op as u8, self.tag, key, value);
        let req_end = self.layout.request_end(self.g);
        let local = self.home == io.own();
        let op = if local {
            Op::LocalWrite {
                offset: req_end - msg.len() as u64,
                data: msg,
            }
        } else {
            Op::Write {
                addr: MailboxLayout::placed(self.home, req_end, msg.len()),
                data: msg,
            }
        };
        let mut sent = io.round_by(vec![op], OpClass::Data, deadline).await;
        let posted = io.unposted() == 0;
        let (cause, landed) = match sent.pop() {
            Some(Ok(_)) => match self.await_response(io, local, deadline).await {
                // A GET commits nothing: its malformed response is just corrupt.
                Some(Err(Error::OutcomeUnknown(why))) if !mutation => {
                    return Err(Error::corrupt(CorruptionKind::Reply, why.to_string()))
                }
                Some(r) => return r,
                None => (Error::Timeout, true),
            },
            Some(Err(e)) if !posted || !mutation => return Err(e.into()),
            Some(Err(e)) => (e.into(), false),
            None => (Error::Timeout, false),
        };
        if !mutation {
            return Err(cause);
        }
        if !landed && self.settle_by_landing_bound {
            // The test-only switch: the settle whose outcome rested on A2.
            // Wait the bound out, then look: no request of this process in
            // the slot was taken to mean "never landed, nothing committed".
            let bound = posted_at.plus(self.landing);
            if io.now() < bound {
                io.backoff(bound.since(io.now())).await;
            }
            match self.read_slot_ctrl(io, local, req_end).await {
                Ok(w) if tag_of(w) == self.tag && split_ctrl(w).0 == self.seq => {}
                Ok(_) => return Err(cause),
                Err(e) => {
                    tracing::debug!(op = ?self.op, home = %self.home, %cause, "its slot could not be read");
                    let step = UnknownStep::ServerRequest { node: self.home };
                    return Err(UnknownOutcome::new(step, e).into());
                }
            }
        }
        // Whether or not the WRITE landed, or will: the cancel decides.
        match self.settle(io, local).await {
            Settled::Cancelled => Err(cause),
            Settled::Answered(r) => Ok(r),
            Settled::Unknown(_) if self.unknown_as_timeout => Err(cause),
            Settled::Unknown(why) => {
                tracing::debug!(op = ?self.op, home = %self.home, %cause, %why, "outcome unknown");
                Err(Error::OutcomeUnknown(why))
            }
        }
    }

    /// Opens this process's claim word on the home node (module docs): a CAS
    /// to a cancelled decision of this process's, numbered just before this
    /// request, from whatever the word holds. From then on no request of
    /// another process is claimed there. Bounded by `deadline` (the
    /// request's); a word that cannot be reached is the error of the last
    /// try (nothing was posted, so nothing was committed).
    async fn open<X: Ext>(&mut self, io: &Io<X>, deadline: Nanos) -> Result<(), Error> {
        let opened = tagged_claim_word(self.seq.wrapping_sub(1), CANCELLED, self.tag);
        let mut backoff = Duration::from_micros(100);
        loop {
            let left = deadline.since(io.now());
            if left.is_zero() {
                return Err(Error::Timeout);
            }
            let expect = self.claim;
            let limit = self.cas_limit(left);
            match self.cas_claim_word(io, opened, limit).await {
                Some(Ok(OpOutput::Cas { previous })) => {
                    // Won, or an earlier try of ours landed (its completion
                    // did not): the word carries this process's tag.
                    if previous == expect || tag_of(previous) == self.tag {
                        self.claim = if previous == expect { opened } else { previous };
                        return Ok(());
                    }
                    self.claim = previous;
                }
                // Not posted (the node is unreachable): it never executes.
                Some(Err(e)) if io.unposted() > 0 || left <= limit => return Err(e.into()),
                _ => {
                    io.backoff(backoff.min(left)).await;
                    backoff = (backoff * 2).min(Duration::from_millis(10));
                }
            }
        }
    }

    /// How long one CAS of the claim word may wait for its completion with
    /// `left` to go: an eighth of the timeout (at least a millisecond), so
    /// that a CAS whose completion is lost leaves time for another.
    fn cas_limit(&self, left: Duration) -> Duration {
        left.min((self.timeout / 8).max(Duration::from_millis(1)))
    }

    /// One compare-and-swap of this client's claim word on the home node,
    /// from what the client knows of it to `new`, waiting `limit` for its
    /// completion: the opening's and the cancel's round alike.
    async fn cas_claim_word<X: Ext>(
        &self,
        io: &Io<X>,
        new: u64,
        limit: Duration,
    ) -> Option<Result<OpOutput, FabricError>> {
        let cas = Op::Cas {
            addr: RemoteAddr::data(self.home, self.layout.claim_offset(self.g)),
            expect: self.claim,
            new,
        };
        io.round_within(vec![cas], OpClass::Data, limit).await.pop()
    }

    /// The control word of this client's request slot on the home node (a
    /// CPU read when the client is on it), bounded by the timeout.
    async fn read_slot_ctrl<X: Ext>(
        &self,
        io: &Io<X>,
        local: bool,
        req_end: u64,
    ) -> Result<u64, Error> {
        if local {
            return io.local_word(req_end - 8).await;
        }
        let read = Op::Read {
            addr: RemoteAddr::data(self.home, req_end - 8),
            len: 8,
        };
        let r = io
            .round_within(vec![read], OpClass::Data, self.timeout)
            .await;
        Ok(word(&read_one(r)?, 0))
    }

    /// Waits for the response slot to receive this request's response until
    /// `deadline`: the decoded response (or the error of a malformed one),
    /// `None` on time-out. CPU reads that fail are retried until the
    /// deadline.
    async fn await_response<X: Ext>(
        &self,
        io: &Io<X>,
        local: bool,
        deadline: nessie_protocol::Nanos,
    ) -> Option<Result<Response, Error>> {
        let resp_end = self.layout.response_end(self.g);
        loop {
            if !io.await_response(resp_end - 8, self.seq, deadline).await {
                return None;
            }
            if let Ok(Some((m, total))) =
                read_message(io, resp_end, self.layout.slot_bytes, true).await
            {
                if m.seq == self.seq {
                    io.count(|s| {
                        s.local_reads += 1;
                        s.local_bytes += total;
                        if !local {
                            s.server_writes += 1;
                            s.fabric_bytes += total;
                        }
                    });
                    // A response only exists once the server ran the
                    // request: a malformed one leaves its outcome open.
                    return Some(Response::from_message(&m).ok_or_else(|| {
                        UnknownOutcome::new(UnknownStep::UnknownStatus { code: m.code }, None)
                            .into()
                    }));
                }
            }
            if io.now() > deadline {
                return None;
            }
        }
    }

    /// Decides the fate of this PUT/DELETE request that got no response:
    /// cancel it, or learn that the server claimed it and wait for its
    /// answer (see the module documentation). Bounded by the timeout.
    async fn settle<X: Ext>(&mut self, io: &Io<X>, local: bool) -> Settled {
        let cancel = tagged_claim_word(self.seq, CANCELLED, self.tag);
        let deadline = io.now().plus(self.timeout);
        let mut backoff = Duration::from_micros(100);
        let mut last_error = None;
        loop {
            let left = deadline.since(io.now());
            if left.is_zero() {
                let step = UnknownStep::ServerRequest { node: self.home };
                return Settled::Unknown(UnknownOutcome::new(step, last_error));
            }
            let expect = self.claim;
            match self.cas_claim_word(io, cancel, self.cas_limit(left)).await {
                Some(Ok(OpOutput::Cas { previous })) if previous == expect => {
                    self.claim = cancel;
                    return Settled::Cancelled;
                }
                Some(Ok(OpOutput::Cas { previous })) => {
                    self.claim = previous;
                    let (s, state) = split_ctrl(previous);
                    let s = if tag_of(previous) == self.tag { s } else { 0 };
                    if s == self.seq && state == CANCELLED {
                        // An earlier cancel of ours landed; its completion did not.
                        return Settled::Cancelled;
                    }
                    if s == self.seq && state == CLAIMED {
                        let step = UnknownStep::ClaimedUnanswered { node: self.home };
                        return match self.await_response(io, local, deadline).await {
                            Some(Ok(r)) => Settled::Answered(r),
                            Some(Err(e)) => Settled::Unknown(UnknownOutcome::new(step, e)),
                            None => Settled::Unknown(UnknownOutcome::new(step, None)),
                        };
                    }
                    if previous != 0 && tag_of(previous) != self.tag {
                        // Another process of this client opened the word
                        // since: this request is dead from then on, but
                        // may have run before.
                        let step = UnknownStep::ClaimTakenOver { node: self.home };
                        return Settled::Unknown(UnknownOutcome::new(step, None));
                    }
                    // The word held an older request's decision than we
                    // knew: try again from it.
                }
                other => {
                    // The CAS may or may not have executed: the next one tells.
                    last_error = Some(match other {
                        Some(Err(e)) => Error::from(e),
                        o => crate::machine::unexpected(o),
                    });
                    io.backoff(backoff.min(left)).await;
                    backoff = (backoff * 2).min(Duration::from_millis(10));
                }
            }
        }
    }
}

/// One operation of a server-driven path, as NessieSD, NessieHY and Pilaf
/// clients issue it: sends `op` on `key` (and `value`) through `call` and
/// turns a failed status into its error. The caller checks the sizes
/// (synchronously, before the machine starts: [`check_sizes`]).
pub async fn request<X: Ext>(
    io: &Io<X>,
    call: &mut RpcCall,
    key: &[u8],
    value: &[u8],
) -> Result<Response, Error> {
    let resp = call.send(io, key, value).await?;
    match resp.error(call.home) {
        Some(e) => Err(e),
        None => Ok(resp),
    }
}

/// Checks a request's key and value against `cfg`'s limits.
pub fn check_sizes(cfg: &Config, key: &[u8], value: &[u8]) -> Result<(), Error> {
    cfg.check_key(key)?;
    cfg.check_value(value)
}

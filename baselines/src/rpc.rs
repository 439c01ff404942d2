//! The client side of the request slots: send a request to a key's home node
//! and wait for the response in the client's own response slot.
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
//! request that could not even be posted never executes. Every wait is
//! bounded: an operation returns within twice the timeout.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nessie_protocol::{ClientId, Config, Endpoint, Error, NodeId, Op, OpStats, RemoteAddr};

use crate::io::{Io, RoundError};
use crate::mailbox::{
    claim_word, encode, split_ctrl, MailboxLayout, Request, Response, RpcOp, CANCELLED, CLAIMED,
};

/// A client's request channel to every node's server workers.
pub struct RpcClient {
    layout: MailboxLayout,
    /// The client's global slot number.
    g: u32,
    seq: u32,
    /// What the client last knew of its claim word on each node.
    claims: Vec<u64>,
    /// How long to wait for a response before settling the request.
    pub timeout: Duration,
    /// Test-only fault switches (all off unless a test turns them on).
    pub faults: RpcFaults,
}

/// Test-only fault switches of [`RpcClient`], shared by every client a
/// [`Deployment`](crate::Deployment) hands out, so that a test can show its
/// outcome checks catch a dishonest client.
#[derive(Clone, Debug, Default)]
pub struct RpcFaults {
    unknown_as_timeout: Arc<AtomicBool>,
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
}

/// How a request that got no response in time was settled.
enum Settled {
    /// The cancel won: the request never executes.
    Cancelled,
    /// The server claimed it and answered within the grace period.
    Answered(Response),
    /// Claimed but no answer, or the claim word could not be reached.
    Unknown(String),
}

impl RpcClient {
    /// The channel of client `id` under `layout`.
    pub fn new(
        layout: MailboxLayout,
        id: ClientId,
        clients_per_node: u16,
        timeout: Duration,
    ) -> RpcClient {
        let g = u32::from(id.node.0) * u32::from(clients_per_node) + u32::from(id.index);
        // A server skips a slot whose sequence number it has already served,
        // so a client that reuses a slot (a restarted client with the same id)
        // must not start where its predecessor stopped: it starts at a number
        // drawn from the clock (a collision has probability 2^-32).
        let clock = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let seq = nessie_protocol::hash::stable_hash(clock, &g.to_le_bytes()) as u32;
        RpcClient {
            layout,
            g,
            seq,
            claims: Vec::new(),
            timeout,
            faults: RpcFaults::default(),
        }
    }

    /// Sends `req` to `home`'s workers and waits for the response. Counts the
    /// request WRITE (a CPU write when `home` is the client's own node), the
    /// server's response WRITE (`server_writes`) and the final CPU read of the
    /// response; polling reads are not counted (they are the CPU time the
    /// benchmark reports). A cancel CAS, when one is needed, is counted too.
    pub fn call<E: Endpoint>(
        &mut self,
        io: &mut Io<E>,
        home: NodeId,
        req: &Request,
        stats: &mut OpStats,
    ) -> Result<Response, Error> {
        self.seq = self.seq.wrapping_add(1).max(1);
        let seq = self.seq;
        let mutation = req.op != RpcOp::Get;
        let start = Instant::now();
        let msg = encode(seq, req.op as u8, &req.key, &req.value);
        let req_end = self.layout.request_end(self.g);
        let local = home == io.node();
        let sent = if local {
            stats.local_writes += 1;
            stats.local_bytes += msg.len() as u64;
            let op = Op::LocalWrite {
                offset: req_end - msg.len() as u64,
                data: msg,
            };
            io.try_round(vec![op], false, &mut OpStats::default(), self.timeout)
        } else {
            let op = Op::Write {
                addr: MailboxLayout::placed(home, req_end, msg.len()),
                data: msg,
            };
            io.try_round(vec![op], false, stats, self.timeout)
        };
        let cause = match sent {
            Ok(_) => match self.await_response(io, seq, local, start + self.timeout, stats) {
                // A GET commits nothing: its malformed response is just corrupt.
                Some(Err(Error::OutcomeUnknown(why))) if !mutation => {
                    return Err(Error::Corrupt(why))
                }
                Some(r) => return r,
                None => Error::Timeout,
            },
            Err(RoundError { error, posted }) if !posted || !mutation => return Err(error),
            Err(RoundError { error, .. }) => error,
        };
        if !mutation {
            return Err(cause);
        }
        match self.settle(io, home, seq, local, stats) {
            Settled::Cancelled => Err(cause),
            Settled::Answered(r) => Ok(r),
            Settled::Unknown(_) if self.faults.unknown_as_timeout() => Err(cause),
            Settled::Unknown(why) => Err(Error::OutcomeUnknown(format!(
                "{:?} request to {home}: {cause}; {why}",
                req.op
            ))),
        }
    }

    /// Polls the response slot for `seq` until `deadline`: the decoded
    /// response (or the error of a malformed one), `None` on time-out. CPU
    /// reads that fail are retried until the deadline.
    fn await_response<E: Endpoint>(
        &mut self,
        io: &mut Io<E>,
        seq: u32,
        local: bool,
        deadline: Instant,
        stats: &mut OpStats,
    ) -> Option<Result<Response, Error>> {
        let resp_end = self.layout.response_end(self.g);
        loop {
            let landed = io
                .local_word(resp_end - 8)
                .is_ok_and(|w| split_ctrl(w).0 == seq);
            if landed {
                if let Ok(Some((m, total))) = io.read_message(resp_end, self.layout.slot_bytes) {
                    if m.seq == seq {
                        stats.local_reads += 1;
                        stats.local_bytes += total;
                        if !local {
                            stats.server_writes += 1;
                            stats.fabric_bytes += total;
                        }
                        // A response only exists once the server ran the
                        // request: a malformed one leaves its outcome open.
                        return Some(Response::from_message(&m).ok_or_else(|| {
                            Error::OutcomeUnknown(format!(
                                "response with unknown status {}",
                                m.code
                            ))
                        }));
                    }
                }
            }
            if Instant::now() > deadline {
                return None;
            }
            // Yield between polls: a machine with fewer cores than client and
            // server threads (this one has 2) would otherwise let a spinning
            // client starve the very worker it waits for.
            std::thread::yield_now();
        }
    }

    /// Decides the fate of PUT/DELETE request `seq` on `home` that got no
    /// response: cancel it, or learn that the server claimed it and wait for
    /// its answer (see the module documentation). Bounded by the timeout.
    fn settle<E: Endpoint>(
        &mut self,
        io: &mut Io<E>,
        home: NodeId,
        seq: u32,
        local: bool,
        stats: &mut OpStats,
    ) -> Settled {
        let h = usize::from(home.0);
        if self.claims.len() <= h {
            self.claims.resize(h + 1, 0);
        }
        let addr = RemoteAddr::data(home, self.layout.claim_offset(self.g));
        let cancel = claim_word(seq, CANCELLED);
        let deadline = Instant::now() + self.timeout;
        let mut backoff = Duration::from_micros(100);
        let mut last_error = None;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Settled::Unknown(match last_error {
                    Some(e) => format!("its claim word could not be reached to cancel it ({e})"),
                    None => "it could not be cancelled in time".into(),
                });
            }
            let expect = self.claims[h];
            // A CAS whose completion is lost must leave time for another.
            let limit = left.min((self.timeout / 8).max(Duration::from_millis(1)));
            match io.cas(addr, expect, cancel, stats, limit) {
                Ok(previous) if previous == expect => {
                    self.claims[h] = cancel;
                    return Settled::Cancelled;
                }
                Ok(previous) => {
                    self.claims[h] = previous;
                    let (s, state) = split_ctrl(previous);
                    if s == seq && state == CANCELLED {
                        // An earlier cancel of ours landed; its completion did not.
                        return Settled::Cancelled;
                    }
                    if s == seq && state == CLAIMED {
                        return match self.await_response(io, seq, local, deadline, stats) {
                            Some(Ok(r)) => Settled::Answered(r),
                            Some(Err(e)) => Settled::Unknown(e.to_string()),
                            None => Settled::Unknown(
                                "the server claimed it but its response did not arrive".into(),
                            ),
                        };
                    }
                    // The word held an older request's decision than we
                    // knew (a restarted client): try again from it.
                }
                Err(e) => {
                    // The CAS may or may not have executed: the next one tells.
                    last_error = Some(e.error);
                    io.backoff(backoff.min(left));
                    backoff = (backoff * 2).min(Duration::from_millis(10));
                }
            }
        }
    }

    /// One operation of a server-driven path, as NessieSD, NessieHY and
    /// Pilaf clients issue it: checks the sizes against `cfg`, sends `op` on
    /// `key` (and `value`) to `home`, sets `last` to the call's fabric work
    /// (one attempt), and turns a failed status into its error. A `tracing`
    /// span named after `system` covers the call.
    #[allow(clippy::too_many_arguments)]
    pub fn request<E: Endpoint>(
        &mut self,
        io: &mut Io<E>,
        system: &'static str,
        cfg: &Config,
        home: NodeId,
        op: RpcOp,
        key: &[u8],
        value: &[u8],
        last: &mut OpStats,
    ) -> Result<Response, Error> {
        cfg.check_key(key)?;
        cfg.check_value(value)?;
        let span = tracing::debug_span!("rpc", system, ?op, home = %home, key_len = key.len());
        let _g = span.enter();
        let mut stats = OpStats {
            attempts: 1,
            ..OpStats::default()
        };
        let req = Request {
            op,
            key: key.to_vec(),
            value: value.to_vec(),
        };
        let r = self.call(io, home, &req, &mut stats);
        *last = stats;
        let resp = r?;
        match resp.error(home) {
            Some(e) => Err(e),
            None => Ok(resp),
        }
    }
}

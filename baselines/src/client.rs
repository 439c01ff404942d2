//! The clients of NessieSD, NessieHY and Pilaf in Nessie's shape: a sans-IO
//! core ([`ClientLogic`]: one attempt of a GET, PUT or DELETE as async logic
//! over a machine's [`Io`]) and drivers outside it that retry. The blocking
//! driver is [`BlockingClient`], a [`KvClient`] over any core; the cluster
//! simulator runs the same cores.
//!
//! Retries follow one rule set ([`RetryBudget`]): an attempt that asks to be
//! retried (a GET that raced a cuckoo move, read a torn extent or ran past
//! its deadline) is tried again after a jittered exponential back-off, until
//! the operation timeout has passed since the first attempt; errors are
//! returned as they are (a server-driven request settles its own outcome,
//! [`nessie_exec::rpc`]).
//!
//! Operations are borrowed ([`nessie_protocol::KvRequest`]: the blocking path copies
//! nothing) and answer in Nessie's pipeline vocabulary
//! ([`nessie_protocol::Response`]), so a driver can run any
//! system's operations side by side.

use std::future::Future;
use std::sync::Arc;

use nessie_protocol::registry::{claim_id, Registry};
use nessie_protocol::{
    ClientClaim, ClientId, Config, CorruptionKind, Endpoint, Error, NodeId, OpStats,
};
use nessie_protocol::{KvRequest, Response};

use crate::retry::{Jitter, RetryBudget};
use nessie_exec::mailbox::{MailboxLayout, RpcOp, Status};
use nessie_exec::rpc::{self, RpcClient};
use nessie_exec::Driver;
use nessie_exec::Io;
use nessie_protocol::KvClient;

/// How one attempt ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Attempt {
    /// The operation's result (no further attempt).
    Done(Result<Response, Error>),
    /// Try again after a back-off (nothing was committed).
    Retry,
    /// Try again after a back-off, but no later than this instant (on the
    /// client's clock): the attempt waits for something due then (RCuckoo:
    /// the instant a stranded lock may be taken over), which a back-off
    /// doubled past it would overshoot. Nothing was committed.
    RetryAt(nessie_protocol::Nanos),
}

impl Attempt {
    /// The instant a retry is to come by ([`Attempt::RetryAt`]), if any.
    pub fn due(&self) -> Option<nessie_protocol::Nanos> {
        match self {
            Attempt::RetryAt(due) => Some(*due),
            _ => None,
        }
    }
}

/// Why a client-driven GET attempt must be retried (it raced a cuckoo move,
/// read a torn extent or ran past its deadline; nothing was returned).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retry;

/// The attempt a client-driven GET attempt's outcome stands for.
pub fn get_outcome(r: Result<Result<Option<Vec<u8>>, Retry>, Error>) -> Attempt {
    match r {
        Ok(Ok(v)) => Attempt::Done(Ok(Response::Get(v))),
        Ok(Err(Retry)) => Attempt::Retry,
        Err(e) => Attempt::Done(Err(e)),
    }
}

/// A system's client as sans-IO logic: what a driver needs to run its
/// operations one attempt at a time.
pub trait ClientLogic: 'static {
    /// The system's name (spans, reports).
    fn system(&self) -> &'static str;

    /// The shape every client of the deployment shares.
    fn config(&self) -> &Arc<Config>;

    /// Where the client's node keeps its registry word, in which the
    /// client takes its id (after everything the system lays out in the
    /// data region: `SystemConfig::topology`).
    fn registry(&self) -> Registry;

    /// Checks `op`'s key and value against the configured limits (and
    /// refuses a range scan: no baseline's index is ordered).
    fn check(&self, op: KvRequest<'_>) -> Result<(), Error> {
        let cfg = self.config();
        match op {
            KvRequest::Get(k) | KvRequest::Delete(k) => cfg.check_key(k),
            KvRequest::Put(k, v) => rpc::check_sizes(cfg, k, v),
            KvRequest::Scan { .. } => Err(Error::Unsupported("scan")),
        }
    }

    /// One attempt of `op` on `io`, within the operation's `budget` (a GET
    /// that re-reads a torn entry within its attempt backs off from it).
    fn attempt<'a>(
        &'a mut self,
        io: &'a Io,
        op: KvRequest<'a>,
        budget: &'a mut RetryBudget,
    ) -> impl Future<Output = Attempt> + 'a;

    /// Cache hits so far (0 for a system without a client cache).
    fn cache_hits(&self) -> u64 {
        0
    }

    /// Sets the test-only fault switches (a core ignores those its design
    /// has no check for).
    fn set_switches(&mut self, switches: CoreSwitches) {
        let _ = switches;
    }
}

/// Test-only fault switches of a baseline's client core: each turns off a
/// check the design needs, so that a test can show it catches what the
/// check prevents.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CoreSwitches {
    /// A client-driven GET reports a key absent after one scan, without the
    /// move-epoch check (NessieHY, Pilaf).
    pub skip_epoch_check: bool,
    /// A client-driven GET does not compare entry and extent checksums
    /// (Pilaf).
    pub skip_checksums: bool,
    /// Freed KV blocks are reused at once, without waiting out T plus the
    /// skew (RACE, and RCuckoo's extents).
    pub reuse_without_hold: bool,
    /// A writer posts its row WRITEs however late its attempt runs, as
    /// RCuckoo is published (§4.4: "a slow client is not fenced"), instead
    /// of giving up once its attempt's deadline passed, after which a
    /// stranded lock may be taken over (RCuckoo).
    pub unfenced_writes: bool,
    /// A repair empties every entry a torn row WRITE left unreadable,
    /// instead of restoring the one an update was replacing (RCuckoo; the
    /// paper's repair, which its 8-byte entries allow, lets a key whose
    /// update tore vanish from our wider entries).
    pub repair_empties_torn: bool,
    /// A GET that finds its key in neither row answers "absent" at once, as
    /// RCuckoo is published, without reading the rows again: its two READs
    /// can straddle a cuckoo move of the key (the copy to the second row
    /// after the first READ, the emptying of the first before the second).
    pub skip_miss_check: bool,
}

/// The limits a one-sided store's operation is held to: its key and value
/// against `cfg`'s (no request message to fit), and no range scan (RACE's
/// and RCuckoo's indexes are not ordered).
pub fn check_one_sided(cfg: &Config, op: KvRequest<'_>) -> Result<(), Error> {
    match op {
        KvRequest::Get(k) | KvRequest::Delete(k) => cfg.check_key(k),
        KvRequest::Put(k, v) => cfg.check_key(k).and_then(|()| cfg.check_value(v)),
        KvRequest::Scan { .. } => Err(Error::Unsupported("scan")),
    }
}

/// The request channel of a baseline's client `id` over `mailbox`, shaped by
/// Nessie's `cfg` (its operation timeout, and its deadline margin as the
/// landing bound); its sequence numbers are drawn from the clock.
pub fn rpc_channel(mailbox: MailboxLayout, id: ClientId, cfg: &Config) -> RpcClient {
    RpcClient::new(
        mailbox,
        id,
        cfg.clients_per_node,
        cfg.retry.op_timeout,
        cfg.deadline_margin,
    )
}

/// Sends `op` through the home node's server workers (one attempt: the
/// request settles its own outcome) and turns the status into the
/// operation's response.
pub async fn server_driven(
    io: &Io,
    rpc: &mut RpcClient,
    home: NodeId,
    op: KvRequest<'_>,
) -> Result<Response, Error> {
    let (rop, value): (RpcOp, &[u8]) = match op {
        KvRequest::Get(_) => (RpcOp::Get, &[]),
        KvRequest::Put(_, v) => (RpcOp::Put, v),
        KvRequest::Delete(_) => (RpcOp::Delete, &[]),
        KvRequest::Scan { .. } => return Err(Error::Unsupported("scan")),
    };
    let mut call = rpc.begin(home, rop);
    let r = rpc::request(io, &mut call, op.key(), value).await;
    rpc.finish(&call);
    let resp = r?;
    let existed = resp.status == Status::Found;
    Ok(match rop {
        RpcOp::Get => Response::Get(existed.then_some(resp.value)),
        RpcOp::Put => Response::Put(existed),
        RpcOp::Delete => Response::Delete(existed),
    })
}

/// A blocking [`KvClient`] over a [`ClientLogic`]: each attempt is a machine
/// run to the end on the client's endpoint, retried by [`RetryBudget`].
pub struct BlockingClient<C: ClientLogic, E: Endpoint> {
    pub(crate) core: C,
    driver: Driver<E>,
    jitter: Jitter,
    last: OpStats,
    /// Its client id, held on the endpoint's fabric while it lives: two
    /// clients with one id would share request and response slots.
    _claim: ClientClaim,
}

impl<C: ClientLogic, E: Endpoint> std::fmt::Debug for BlockingClient<C, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockingClient")
            .field("system", &self.core.system())
            .field("node", &self.driver.node())
            .finish_non_exhaustive()
    }
}

impl<C: ClientLogic, E: Endpoint> BlockingClient<C, E> {
    /// The client `core` of id `id` on endpoint `ep` (its back-offs
    /// jittered by the id). The id is claimed for as long as the client
    /// lives, as Nessie's own clients claim theirs: in the fabric's
    /// in-process registry, then in its node's registry word
    /// ([`nessie_protocol::registry::claim_id`]).
    ///
    /// # Errors
    ///
    /// [`Error::ClientIdInUse`] for an id a live client holds, in this
    /// process or another; [`Error::Unreachable`] or [`Error::Timeout`] when
    /// the node does not answer the claim within the operation timeout.
    pub fn from_core(core: C, id: ClientId, mut ep: E) -> Result<BlockingClient<C, E>, Error> {
        let within = core.config().retry.op_timeout;
        let claim = claim_id(&mut ep, id, core.registry(), within)?;
        Ok(BlockingClient {
            core,
            driver: Driver::new(ep),
            jitter: Jitter::new(id),
            last: OpStats::default(),
            _claim: claim,
        })
    }

    /// The sans-IO core.
    pub fn core(&self) -> &C {
        &self.core
    }

    /// The sans-IO core, mutably (test-only switches).
    pub fn core_mut(&mut self) -> &mut C {
        &mut self.core
    }

    /// Runs `op` to its result: attempts, back-offs, the operation timeout.
    pub fn call(&mut self, op: KvRequest<'_>) -> Result<Response, Error> {
        self.core.check(op)?;
        let span = tracing::debug_span!(
            "op",
            system = self.core.system(),
            op = op.name(),
            key_len = op.key().len()
        );
        let _g = span.enter();
        let policy = self.core.config().retry;
        let mut budget = RetryBudget::new(self.driver.now(), &policy, self.jitter.clone());
        let mut stats = OpStats::default();
        let core = &mut self.core;
        let result = loop {
            let (r, s) = self.driver.run_plain(Some(policy.op_timeout), |io| {
                let (core, budget) = (&mut *core, &mut budget);
                async move {
                    io.count(|s| s.attempts = 1);
                    Ok(core.attempt(&io, op, budget).await)
                }
            });
            stats += s;
            match r {
                Ok(Attempt::Done(r)) => break r,
                Ok(a) => match budget.next_backoff_by(self.driver.now(), a.due()) {
                    Ok(d) => self.driver.endpoint().backoff(d),
                    Err(e) => break Err(e),
                },
                Err(e) => break Err(e),
            }
        };
        self.jitter = budget.into_jitter();
        self.last = stats;
        result
    }
}

impl<C: ClientLogic + Send, E: Endpoint> KvClient for BlockingClient<C, E> {
    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        match self.call(KvRequest::Get(key))? {
            Response::Get(v) => Ok(v),
            other => Err(mismatch(other)),
        }
    }

    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<bool, Error> {
        match self.call(KvRequest::Put(key, value))? {
            Response::Put(e) => Ok(e),
            other => Err(mismatch(other)),
        }
    }

    fn delete(&mut self, key: &[u8]) -> Result<bool, Error> {
        match self.call(KvRequest::Delete(key))? {
            Response::Delete(e) => Ok(e),
            other => Err(mismatch(other)),
        }
    }

    fn last_stats(&self) -> OpStats {
        self.last
    }

    fn cache_hits(&self) -> u64 {
        self.core.cache_hits()
    }
}

fn mismatch(r: Response) -> Error {
    Error::corrupt(
        CorruptionKind::Completion,
        format!("an operation answered {r:?}"),
    )
}

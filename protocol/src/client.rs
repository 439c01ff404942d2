//! The `Client` API: GET, PUT and DELETE with retries, back-off and deadlines.
//!
//! Each call runs attempts (fresh state machines, each with its own deadline
//! of one expiration period) until one succeeds, fails for good, or the
//! client's operation timeout passes. Between attempts that met interference
//! the client backs off exponentially with jitter. Every call is a `tracing`
//! span, and the fabric work of the last call is kept in [`Client::last_stats`].
//!
//! Every request is posted under an id unique on the endpoint (a
//! [`Router`] kept for the client's lifetime), so that a completion arriving
//! after its attempt gave the round up is dropped, never taken for a later
//! attempt's request (docs/protocol.md §4, "Waiting").

use std::sync::Arc;
use std::time::Duration;

use crate::addr::NodeId;
use crate::config::{Config, RetryPolicy};
use crate::driver;
use crate::error::Error;
use crate::fabric::{ClientClaim, Endpoint};
use crate::machine::{
    ClientId, ClientState, GetMachine, GrowLogic, GrowMachine, Logic, Machine, OpMachine,
    PutMachine, Swept,
};
use crate::route::Router;
use crate::stats::OpStats;

/// A Nessie client bound to one endpoint.
///
/// Every error says what it promises about a write ([`Error::outcome`]):
/// only [`Error::OutcomeUnknown`] leaves it open, and such a write is never
/// retried by the client. To learn its fate, read the key (a value unique to
/// the write tells it apart): if it shows the write's value, it took effect;
/// if it shows what the key held before, it has not *yet* (its commit could
/// still land until its pending entry is aborted), and writing the value
/// again settles it (that PUT aborts the pending entry, or finds it
/// committed, before installing its own); if it shows another value,
/// another client wrote the key since. The `outcome_unknown` example of
/// `nessie-fabric-sim` provokes both fates and handles them.
///
/// ```
/// use std::sync::Arc;
/// use nessie_fabric_sim::{SimConfig, SimFabric};
/// use nessie_protocol::{Client, ClientId, Config, Error, Fabric, NodeId, Outcome};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let cfg = Arc::new(Config { nodes: 3, ..Config::default() });
/// let fabric = SimFabric::new(SimConfig::from_topology(cfg.topology()))?;
/// let id = ClientId { node: NodeId(0), index: 0 };
/// let mut client = Client::new(cfg.clone(), id, fabric.open(NodeId(0))?)?;
/// // Two clients with one id would share a data table share: refused.
/// let twin = Client::new(cfg.clone(), id, fabric.open(NodeId(0))?);
/// assert!(matches!(twin, Err(Error::ClientIdInUse(_))));
///
/// match client.put(b"order-17", b"paid") {
///     Ok(existed) => println!("written (the key existed before: {existed})"),
///     Err(e) if e.outcome() == Outcome::Unknown => {
///         // It may have taken effect: read before deciding to write again.
///         let now = client.get(b"order-17")?;
///         println!("outcome unknown; the key now holds {now:?}");
///     }
///     Err(e) => println!("not written, nothing will be: {e}"),
/// }
/// assert_eq!(client.get(b"order-17")?.as_deref(), Some(&b"paid"[..]));
/// println!("that PUT cost {:?}", client.last_stats());
/// # Ok(())
/// # }
/// ```
pub struct Client<E: Endpoint> {
    state: ClientState,
    ep: E,
    router: Router,
    rng: u64,
    last: OpStats,
    total: OpStats,
    /// Holds the client id on the endpoint's fabric until the client drops.
    _claim: ClientClaim,
}

impl<E: Endpoint> Client<E> {
    /// A client `id` using `ep`. Refused at once, with a typed error: an
    /// invalid configuration or id ([`Error::Config`]), an endpoint on
    /// another node than `id.node` ([`Error::EndpointNode`]), a fabric
    /// smaller than the configuration addresses
    /// ([`Error::TopologyMismatch`]), or an id that a live client already
    /// holds, in this process or another ([`Error::ClientIdInUse`];
    /// dropping the client releases it). The topology is checked where the
    /// endpoint can tell ([`Endpoint::topology`]); the id is taken in the
    /// fabric's in-process registry ([`Endpoint::claim_client`]) and, for a
    /// client of a node, in its node's registry word by one CAS
    /// ([`crate::registry::claim_id`]): [`Error::Unreachable`] or
    /// [`Error::Timeout`] when the node does not answer it within the
    /// operation timeout.
    pub fn new(cfg: Arc<Config>, id: ClientId, mut ep: E) -> Result<Client<E>, Error> {
        let state = ClientState::new(cfg, id)?;
        check_endpoint(&ep, id.node, &state.cfg)?;
        let (registry, within) = (state.cfg.registry(), state.cfg.retry.op_timeout);
        let claim = crate::registry::claim_id(&mut ep, id, registry, within)?;
        let rng = 0x9e37_79b9_7f4a_7c15 ^ (u64::from(id.node.0) << 32) ^ u64::from(id.index);
        Ok(Client {
            state,
            ep,
            router: Router::new(1),
            rng,
            last: OpStats::default(),
            total: OpStats::default(),
            _claim: claim,
        })
    }

    /// Reads `key`: its value, or `None` if absent.
    ///
    /// # Errors
    ///
    /// A GET changes nothing, so no error leaves anything to settle:
    /// - [`Error::EmptyKey`], [`Error::KeyTooLarge`]: refused before anything
    ///   was posted.
    /// - [`Error::Unreachable`]: a node holding one of the key's candidates
    ///   (or the data table entry they name) does not answer.
    /// - [`Error::Timeout`]: the client's operation timeout passed while its
    ///   attempts met interference (a writer of the key in progress);
    ///   calling again may succeed.
    /// - [`Error::Fabric`], [`Error::Corrupt`]: the fabric failed otherwise,
    ///   or memory did not decode as this configuration lays it out.
    pub fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        let span = tracing::debug_span!("get", client = %self.state.id, key_len = key.len());
        let _g = span.enter();
        self.retry(|| GetMachine::get(key))
    }

    /// Stores `value` under `key`; returns whether the key existed before.
    ///
    /// # Errors
    ///
    /// Every error but the last means the PUT did not take effect and never
    /// will ([`Error::outcome`] is [`crate::Outcome::NotCommitted`]):
    /// - [`Error::EmptyKey`], [`Error::KeyTooLarge`], [`Error::ValueTooLarge`]
    ///   (`max` is the largest size class's limit): refused before anything
    ///   was posted.
    /// - [`Error::TableFull`]: the key was absent (certified by a re-read of
    ///   every candidate, docs/protocol.md §5.5) and no chain of MIGRATE moves
    ///   within the depth frees a candidate. Retrying finds the same table.
    /// - [`Error::DataTableFull`]: this client's share of the value's size
    ///   class on its node has no free or expired entry; a retry after the
    ///   expiration period may find one.
    /// - [`Error::Unreachable`]: a node holding a candidate does not answer.
    /// - [`Error::Timeout`]: the operation timeout passed; nothing committed.
    /// - [`Error::Fabric`], [`Error::Corrupt`]: as for [`Client::get`].
    /// - [`Error::OutcomeUnknown`]: the commit's completion failed and the
    ///   CAS settling it failed too ([`crate::UnknownStep::Commit`]): the
    ///   value may be stored now or later. Read the key to learn which (see
    ///   [`Client`]); do not retry as if nothing happened (a retry's answer
    ///   "existed" may then be this write's own).
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> Result<bool, Error> {
        let span = tracing::debug_span!("put", client = %self.state.id, key_len = key.len(), value_len = value.len());
        let _g = span.enter();
        self.retry(|| PutMachine::put(key, value))
    }

    /// Deletes `key`; returns whether it existed.
    ///
    /// # Errors
    ///
    /// As [`Client::put`] (a DELETE of a present key writes a tombstone
    /// entry, so it can meet [`Error::DataTableFull`]), except that it never
    /// answers [`Error::ValueTooLarge`] or [`Error::TableFull`]: a DELETE
    /// of an absent key certifies the absence and answers `Ok(false)`.
    pub fn delete(&mut self, key: &[u8]) -> Result<bool, Error> {
        let span = tracing::debug_span!("delete", client = %self.state.id, key_len = key.len());
        let _g = span.enter();
        self.retry(|| PutMachine::delete(key))
    }

    /// Grows the index into its next generation and returns once the growth
    /// is over (docs/protocol.md §2.5): starts a growth if none is under
    /// way, then takes steps of its sweep, each sealing a chunk of the old
    /// generation, until every chunk is sealed and the directory names the
    /// new generation. Other clients go on reading and writing meanwhile
    /// (and help: each write takes a step). A PUT that finds the index full
    /// starts a growth by itself; this is for an operator who grows ahead
    /// of need, or finishes a growth whose sweepers stopped.
    ///
    /// # Errors
    ///
    /// [`Error::IndexAtLimit`] when the index is in its last configured
    /// generation; [`Error::Timeout`] when a step's retries ran out (a key
    /// of the chunk stayed in progress, or the new generation had no room
    /// for a key); transport errors ([`Error::Unreachable`] for a node
    /// whose chunk it sweeps, or node 0, which holds the directory). Every
    /// step leaves the index consistent: call again to go on.
    pub fn grow(&mut self) -> Result<crate::growth::IndexView, Error> {
        self.sweep(true)
    }

    /// Finishes a growth under way, if any (as [`Client::grow`], without
    /// starting one), and returns the index's view then.
    ///
    /// # Errors
    ///
    /// As [`Client::grow`], but never [`Error::IndexAtLimit`].
    pub fn finish_growth(&mut self) -> Result<crate::growth::IndexView, Error> {
        self.sweep(false)
    }

    /// Renews a client without storage's lease on its share (its heartbeat,
    /// docs/protocol.md §2.4), if its last beat is a third of the lease term
    /// old or more. Every operation renews it by itself when due, so only a
    /// client that may run no operation for two thirds of the lease term
    /// calls this, e.g. from a timer every third of it
    /// ([`ClientState::lease_renewal_due`] says when). Nothing to do for a
    /// client with storage, or one whose first write has not taken its share
    /// yet.
    ///
    /// # Errors
    ///
    /// - [`Error::LeaseLost`]: the node's agent took the share back (the
    ///   heartbeat stood still for the lease term): this client's writes are
    ///   refused from now on; make a new client.
    /// - [`Error::Timeout`], [`Error::Unreachable`], [`Error::Fabric`]: the
    ///   heartbeat's CAS did not complete within the operation timeout;
    ///   nothing else changed, call again.
    pub fn renew_lease(&mut self) -> Result<(), Error> {
        self.retry(crate::machine::RenewMachine::renew)
    }

    /// Takes a client without storage's share now (docs/protocol.md §2.4),
    /// as its first write would: its lease (a CAS of the lease word naming
    /// this client) and the keys of a fresh generation of its windows, which
    /// the node's agent grants on its next pass. An application calls it
    /// when it starts, to learn at once whether its share is free. Nothing
    /// to do for a client with storage, or one that holds its keys.
    ///
    /// # Errors
    ///
    /// - [`Error::ClientIdInUse`]: another client (of any process) holds
    ///   the share, and keeps it until its agent takes it back, the lease
    ///   term after its last heartbeat: try another share, or later.
    /// - [`Error::LeaseLost`]: this client held the share and its agent took
    ///   it back: make a new client.
    /// - [`Error::Timeout`]: the agent did not grant within the operation
    ///   timeout (is it running?); the share may be taken: call again.
    /// - [`Error::Unreachable`], [`Error::Fabric`]: the share's node does not
    ///   answer.
    pub fn take_share(&mut self) -> Result<(), Error> {
        self.retry(crate::machine::TakeShareMachine::take_share)
    }

    /// Gives a client without storage's share back (docs/protocol.md §2.4):
    /// the lease word CASed from naming this client to naming nobody, so
    /// that the next process takes the share at once instead of after the
    /// lease term. An application calls it when it is done with the client.
    /// Safe whatever is still on its way: the next holder asks for a newer
    /// generation, whose bind revokes this client's keys before it gets
    /// its own. The client may go on: its next write takes a share anew.
    /// Nothing to do for a client with storage, or one holding no share.
    ///
    /// # Errors
    ///
    /// - [`Error::OutcomeUnknown`] ([`crate::UnknownStep::LeaseRelease`]):
    ///   the CAS went unanswered; the share may be free or still held. Call
    ///   again (a release reads the lease word first) or leave it to the
    ///   lease term.
    /// - [`Error::Timeout`], [`Error::Unreachable`], [`Error::Fabric`]: the
    ///   lease block could not be read; nothing changed.
    pub fn release_share(&mut self) -> Result<(), Error> {
        self.retry(crate::machine::ReleaseMachine::release)
    }

    fn sweep(&mut self, mut start: bool) -> Result<crate::growth::IndexView, Error> {
        loop {
            let step = if start {
                GrowMachine::new(GrowLogic::start())
            } else {
                GrowMachine::grow_step()
            };
            let make = || step.clone();
            match self.retry(make)? {
                Swept::Grown(v) => return Ok(v),
                Swept::Idle(v) if !start => return Ok(v),
                Swept::Idle(_) | Swept::Chunk | Swept::Partial => start = false,
            }
        }
    }

    /// Runs one attempt of a machine, without retries (for tests and tools).
    pub fn run_once<L: Logic>(&mut self, mut m: OpMachine<L>) -> Result<L::Output, Error> {
        let r = driver::run(&mut m, &mut self.state, &mut self.ep, &mut self.router);
        self.last = m.stats();
        self.total += self.last;
        r
    }

    fn retry<L: Logic>(&mut self, make: impl Fn() -> OpMachine<L>) -> Result<L::Output, Error> {
        let start = self.ep.now();
        let policy = self.state.cfg.retry;
        let mut backoff = policy.initial_backoff;
        let mut stats = OpStats::default();
        let mut attempts = 0u32;
        let result = loop {
            attempts += 1;
            let mut m = make();
            let r = driver::run(&mut m, &mut self.state, &mut self.ep, &mut self.router);
            stats += m.stats();
            match r {
                Ok(v) => break Ok(v),
                Err(e) if retries(&policy, &e, attempts, self.ep.now().since(start)) => {
                    tracing::debug!(error = %e, ?backoff, "attempt failed; backing off");
                    let d = crate::rng::jittered(&mut self.rng, backoff);
                    self.ep.backoff(d);
                    backoff = (backoff * 2).min(policy.max_backoff);
                }
                Err(e) => break Err(given_up(e)),
            }
        };
        self.last = stats;
        self.total += stats;
        result
    }

    /// Fabric work of the last call (all its attempts).
    pub fn last_stats(&self) -> OpStats {
        self.last
    }

    /// Fabric work of every call so far.
    pub fn total_stats(&self) -> OpStats {
        self.total
    }

    /// The client's protocol state (allocator, cache, fault switches).
    pub fn state(&self) -> &ClientState {
        &self.state
    }

    /// Mutable access to the protocol state (tests use it for fault switches).
    pub fn state_mut(&mut self) -> &mut ClientState {
        &mut self.state
    }

    /// The endpoint.
    pub fn endpoint(&self) -> &E {
        &self.ep
    }

    /// Mutable access to the endpoint.
    pub fn endpoint_mut(&mut self) -> &mut E {
        &mut self.ep
    }
}

/// Checks that `ep` can serve clients of `node` under `cfg`: it is on `node`
/// ([`Error::EndpointNode`]) and, if it knows its fabric's shape, that shape
/// covers what `cfg` addresses ([`Error::TopologyMismatch`]). Shared by
/// [`Client::new`] and [`Pipeline::new`](crate::pipeline::Pipeline::new).
pub(crate) fn check_endpoint<E: Endpoint>(ep: &E, node: NodeId, cfg: &Config) -> Result<(), Error> {
    if ep.node() != node {
        return Err(Error::EndpointNode {
            endpoint: ep.node(),
            node,
        });
    }
    let needed = cfg.topology();
    match ep.topology() {
        Some(offered) if !offered.covers(&needed) => {
            Err(Error::TopologyMismatch { needed, offered })
        }
        _ => Ok(()),
    }
}

/// Whether an attempt that failed with `e` is tried again under `policy`
/// (the rules of [`Client`], of [`Pipeline`](crate::pipeline::Pipeline) and
/// of the cluster simulator's clients), after `attempts` attempts and
/// `elapsed` since the operation started:
/// retryable errors only, within the attempt limit and the operation timeout.
pub fn retries(policy: &RetryPolicy, e: &Error, attempts: u32, elapsed: Duration) -> bool {
    e.is_retryable()
        && !(policy.max_attempts != 0 && attempts >= policy.max_attempts)
        && elapsed < policy.op_timeout
}

/// The error reported once the retries stop: interference that outlasted
/// them is reported as a timeout.
pub fn given_up(e: Error) -> Error {
    if e == Error::Conflict {
        Error::Timeout
    } else {
        e
    }
}

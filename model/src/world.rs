//! A stateright model of a small Nessie cluster running the real state machines.
//!
//! The state is the fabric memory of every node (word granular, [`Memory`]),
//! each client's real [`ClientState`] and operation machine with the work
//! requests it has posted and not yet seen complete, a global clock (each
//! node reads it with its own fixed skew), and the history so far. Actions:
//! - `Step(c, i)`: one unit of client `c`'s in-flight request `i` lands: one
//!   word of a multi-word READ or WRITE (when `torn`), or a whole CAS or CPU
//!   access. Any in-flight request of a client may go next: requests of one
//!   round go to different queue pairs and complete in any order.
//! - `Poll(c)`: client `c`'s machine takes the completions of its last round
//!   and decides its next one (or finishes). Separate from the step that
//!   delivered the last completion, so that time can pass in between.
//! - `Delay(c, k)`: the clock advances by `k` ticks, then client `c` polls.
//!   Only polls read the clock (landing a request does not), so a tick can
//!   always be moved later, past steps, up to the next poll: letting time pass
//!   only right before a poll reaches every state the free interleaving of
//!   ticks would, with far fewer intermediate states. At most `max_ticks`
//!   ticks per path. Timing assumption A2 is modelled exactly as
//!   docs/protocol.md states it: a posted CAS or WRITE lands within
//!   `deadline_margin` of being posted, so the clock may pass a request's
//!   posting time plus the margin only once it has landed.
//! - `Crash(c)`: client `c` stops for good; requests it had posted may still
//!   land (within A2) or be dropped (`Drop`).
//! - `Fault(c, i, f)`: a [`TransportFault`] of the project's one fault
//!   vocabulary hits NIC request `i` of client `c` (at most `max_faults` per
//!   world, of the kinds in [`World::faults`]). Besides failing or losing
//!   its completion, having executed or not, a request may report an error
//!   and execute later (`ErrorThenLand`: it becomes an *orphan* of its
//!   client, which lands by `Land` within A2, or at any time with
//!   `late_landing`), be duplicated (`DuplicateWrite`: the copy is an
//!   orphan) or execute with its completion held back (`LateCompletion`:
//!   the round is given up at its deadline, and `Deliver` hands the
//!   completion to whatever the client runs by then, through the client's
//!   real [`Router`], which drops it unless the switch
//!   `machine_local_request_ids` reinstates issue 24's hole 2).
//! - `Land(c, i)`: client `c`'s orphan `i` lands, whole.
//! - `Deliver(c, i)`: client `c`'s held completion `i` arrives.
//! - `Agent(n)`: node `n`'s agent makes one pass over its lease blocks
//!   (atomically: its CPU), binding the windows of every client without
//!   storage that asked for a newer generation (docs/protocol.md §2.4).

use std::collections::{BTreeMap, BTreeSet};
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use nessie_check::pure::agent_pass;
use nessie_protocol::growth::IndexView;
use nessie_protocol::internals::Router;
use nessie_protocol::layout::{DteState, IndexEntry};
use nessie_protocol::machine::{ClientState, ReleaseMachine};
use nessie_protocol::pipeline::RequestMachine;
use nessie_protocol::pure::Agent;
use nessie_protocol::{
    ClientId, Completion, Config, CorruptionKind, DteAddr, Error, FabricError, Faults, Machine,
    Nanos, NodeId, Op, OpStats, Poll, Request, Response, TransportFault,
};
use stateright::{Model, Property};

use crate::world_history::{linearizable, CheckedOp, Status, WorldHistory};
use nessie_check::memory::{InFlight, Memory, WordOrder};
use nessie_check::{Failure, Ret};

/// One client of a world: who it is, what it does, how it may misbehave.
#[derive(Clone, Debug)]
pub struct ClientSpec {
    /// Its identity (node and share of the data table).
    pub id: ClientId,
    /// Its operations, run one after another.
    pub program: Vec<Request>,
    /// Broken protocol variants or an overrunning owner.
    pub faults: Faults,
    /// Whether the model may crash it in the middle of an operation.
    pub may_crash: bool,
    /// A client without storage that gives its share back
    /// (`Client::release_share`) the moment its last operation returns,
    /// whatever of its requests is still on its way (the release's own
    /// READ and CAS run atomically: their faults would leave the share
    /// held until its take-back, which other worlds explore).
    pub release: bool,
}

/// Situations a world is expected to reach (checked as `sometimes` properties,
/// so that a world that silently stopped exercising its story fails).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Expect {
    /// A write completed after reclaiming another client's abandoned entry.
    Reclaim,
    /// A write completed that made a MIGRATE at depth 2 or more.
    DeepMigration,
    /// A MIGRATE completed.
    Migration,
    /// A client finished another client's committed MIGRATE copy.
    Help,
    /// A commit whose completion failed or was lost was settled.
    SettledCommit,
    /// An operation ended with an unknown outcome.
    UnknownOutcome,
    /// A round was given up at the deadline (a lost completion).
    LostCompletion,
    /// A GET or PUT was served from the client's cache.
    CacheHit,
    /// An attempt started alone, with every abandoned entry reclaimable (the
    /// progress property applied to it).
    SoloAttempt,
    /// A request landed after its completion had reported an error (or a
    /// duplicated WRITE's copy landed).
    OrphanLanded,
    /// A completion arrived after its round had been given up.
    LateDelivered,
    /// A client without storage wrote in a later generation of its
    /// windows than its first (its agent bound them again on its request).
    NewGeneration,
    /// A client without storage's operation ended because its agent took
    /// its share back (its heartbeat stood still for the lease term).
    LeaseTakenBack,
    /// A client without storage gave its share back.
    ShareReleased,
    /// A client whose view of the index was behind met a growth seal (and
    /// read the directory again).
    StaleView,
    /// An entry of the old generation was sealed by a growth.
    GrowthSeal,
    /// A growth ended: the directory names the next generation.
    GrowthEnded,
}

/// A small cluster and workload to explore.
#[derive(Clone, Debug)]
pub struct World {
    /// Its name, for reports.
    pub name: String,
    /// The deployment configuration.
    pub cfg: Arc<Config>,
    /// The clients.
    pub clients: Vec<ClientSpec>,
    /// Keys stored (sequentially) before the clients start.
    pub preload: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    /// Operations the clients run one after another, each to its end, after
    /// the preload and before the concurrent part (client index, operation):
    /// a client's state (its data table share, its cache) carries on. A
    /// sequential prefix costs no interleavings.
    pub prelude: Vec<(usize, Request)>,
    /// Multi-word READs and WRITEs land one word per step.
    pub torn: bool,
    /// The order of the words of one transfer.
    pub word_order: WordOrder,
    /// How many clock ticks the model may take.
    pub max_ticks: u8,
    /// How many times per path the clock may jump (each [`Action::Delay`]
    /// is one jump of one or more ticks); 0 for no bound beyond
    /// `max_ticks`. Like a preemption bound (CHESS, loom), it bounds the
    /// schedules explored, not the time granularity: a jump may be any
    /// number of ticks, right before any poll.
    pub max_delays: u8,
    /// How far one tick moves the clock.
    pub tick: Duration,
    /// Each node's clock offset from the global clock (ns, each within
    /// `clock_skew` of the others); missing nodes read 0.
    pub clock_offsets: Vec<u64>,
    /// Attempts per operation before a client gives up (the operation then
    /// counts as not committed: it must not have taken effect).
    pub max_attempts: u8,
    /// Injected NIC faults per path.
    pub max_faults: u8,
    /// Which faults of the vocabulary the model injects
    /// ([`CLASSIC_FAULTS`] unless the world says otherwise).
    pub faults: Vec<TransportFault>,
    /// Situations the world must reach.
    pub expect: Vec<Expect>,
    /// Let the clock pass a posted CAS or WRITE that has not landed, i.e.
    /// violate timing assumption A2 (docs/protocol.md §4).
    pub late_landing: bool,
    /// With `late_landing`, a weaker bound in place of A2's margin: every
    /// posted CAS or WRITE lands within this long of being posted (e.g. T:
    /// docs/verification.md shows that is not enough); `None`: no bound.
    pub landing_bound: Option<Duration>,
    /// Every PUT of the world has a chain of moves within the depth limit
    /// that frees one of its candidates, whatever the schedule (no other
    /// client fills the table): a `TableFull` answer is then wrong, since it
    /// means "no chain within the depth limit", not "this attempt cannot
    /// afford one" (issue 24, hole 3).
    pub always_room: bool,
    /// The directory word at the start (docs/protocol.md §2.5): a world
    /// that begins in the middle of a growth.
    pub directory: IndexView,
    /// Clients whose view of the index starts past generation 0, stable
    /// (at `directory`, or behind it but not all the way); the others
    /// start there (behind, when the directory is past it).
    pub views: Vec<(usize, IndexView)>,
}

/// How a client is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Run {
    /// Working through its program.
    Running,
    /// Stopped for good.
    Crashed,
    /// Stopped after an unexpected error.
    GaveUp,
}

/// A client's progress.
///
/// Its `Hash` (which names the state for stateright) renames request ids by
/// rank among the ids still in play (posted, held, orphaned or routed) and
/// leaves out the router's next sequence number: ids are only ever compared
/// for equality, and a new id is always above every id in play, so two runs
/// that differ only in sequence numbers behave alike. Without it, a client
/// that posted a different number of requests on the way would make
/// otherwise equal states distinct (the worlds grew by up to 3.6 times).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientRun {
    /// Its protocol state.
    pub state: ClientState,
    /// Index of its current operation in its program.
    pub next: u8,
    /// Attempts made of the current operation.
    pub attempts: u8,
    /// The running attempt.
    pub machine: Option<RequestMachine>,
    /// Posted requests not yet completed (any may land next).
    pub pending: Vec<InFlight>,
    /// Requests whose completion has been delivered (an error) or given up,
    /// and which will still land ([`TransportFault::ErrorThenLand`],
    /// [`TransportFault::DuplicateWrite`]).
    pub orphans: Vec<InFlight>,
    /// Completions held back ([`TransportFault::LateCompletion`]), under
    /// their endpoint ids.
    pub late: Vec<Completion>,
    /// The client core's routing of request ids on its endpoint (lane 0).
    pub router: Router,
    /// Requests of the current round whose completion will never come.
    pub lost: u8,
    /// Running, crashed or given up.
    pub run: Run,
    /// The running attempt started alone (see `World::solo`).
    pub solo: bool,
}

/// The faults every world injected before the vocabulary grew: failed before
/// or after executing, completion lost after executing, or neither.
pub const CLASSIC_FAULTS: [TransportFault; 4] = [
    TransportFault::FailBeforeExecuting,
    TransportFault::FailAfterExecuting,
    TransportFault::LoseCompletion,
    TransportFault::Vanish,
];

impl std::hash::Hash for ClientRun {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        let mut ids: Vec<u64> = self
            .router
            .routes()
            .map(|(_, id, _)| id)
            .chain(self.pending.iter().map(|f| f.wr.id.0))
            .chain(self.orphans.iter().map(|f| f.wr.id.0))
            .chain(self.late.iter().map(|c| c.id.0))
            .collect();
        ids.sort_unstable();
        ids.dedup();
        let rank = |id: u64| ids.binary_search(&id).unwrap_or(usize::MAX);
        let flight = |f: &InFlight, h: &mut H| {
            rank(f.wr.id.0).hash(h);
            f.wr.op.hash(h);
            f.words.hash(h);
            f.buf.hash(h);
            f.posted_at.hash(h);
        };
        self.state.hash(h);
        self.next.hash(h);
        self.attempts.hash(h);
        self.machine.hash(h);
        self.pending.len().hash(h);
        for f in &self.pending {
            flight(f, h);
        }
        self.orphans.len().hash(h);
        for f in &self.orphans {
            flight(f, h);
        }
        self.late.len().hash(h);
        for c in &self.late {
            rank(c.id.0).hash(h);
            c.result.hash(h);
        }
        for (lane, id, mine) in self.router.routes() {
            (lane, rank(id), mine).hash(h);
        }
        self.router.is_machine_local().hash(h);
        self.lost.hash(h);
        self.run.hash(h);
        self.solo.hash(h);
    }
}

/// Violations and events recorded while stepping (properties read them).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Flags {
    /// The history has no linearization.
    pub nonlinearizable: bool,
    /// An operation failed with an error no fault explains.
    pub unexpected: Option<String>,
    /// Two entries named different committed versions of one key (I1).
    pub two_committed: bool,
    /// An entry was rewritten while an index entry (or a linked entry's
    /// previous version) still named it.
    pub reused_linked: bool,
    /// An index entry named a data table entry marked for recycling (I4's
    /// first step: a linked entry must never be marked).
    pub marked_linked: bool,
    /// At quiescence, memory did not hold what the history says.
    pub lost_at_quiescence: bool,
    /// An attempt that ran alone, with every abandoned entry reclaimable,
    /// ended in a conflict (a liveness failure).
    pub solo_conflict: bool,
    /// A PUT answered `TableFull` in a world where a chain within the depth
    /// limit always exists ([`World::always_room`]).
    pub full_with_room: bool,
    /// Situations reached (for [`Expect`]).
    pub reached: BTreeSet<Expect>,
}

/// The state of a world.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct WorldState {
    /// Every node's memory.
    pub mem: Memory,
    /// The clients.
    pub clients: Vec<ClientRun>,
    /// Global time (ns).
    pub clock: u64,
    /// Ticks taken.
    pub ticks: u8,
    /// Clock jumps taken.
    pub delays: u8,
    /// Injected faults so far.
    pub faults: u8,
    /// The history so far.
    pub history: WorldHistory,
    /// Recorded violations and events.
    pub flags: Flags,
    /// Each node's agent (what it recorded of its clients' heartbeats).
    pub agents: Vec<Agent>,
}

/// What the model may do next.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// One unit of in-flight request `i` of client `c` lands.
    Step(usize, usize),
    /// Client `c` processes its completions (or starts its next operation).
    Poll(usize),
    /// The clock advances by this many ticks, then client `c` polls.
    Delay(usize, u8),
    /// A client crashes.
    Crash(usize),
    /// A crashed client's in-flight request is dropped (never lands).
    Drop(usize, usize),
    /// A NIC fault hits in-flight request `i` of client `c`.
    Fault(usize, usize, TransportFault),
    /// Orphan `i` of client `c` lands.
    Land(usize, usize),
    /// Held completion `i` of client `c` arrives.
    Deliver(usize, usize),
    /// Node `n`'s agent makes one pass over its lease blocks.
    Agent(u16),
}

/// Clock value at the start of every world.
pub const START: u64 = 1_000_000;

/// Runs `op` to completion with every request atomic (for preloads).
fn run_atomically(
    mem: &mut Memory,
    st: &mut ClientState,
    op: &Request,
    now: Nanos,
) -> Result<(), Error> {
    run_machine_atomically(mem, st, RequestMachine::new(op), now).map(|_| ())
}

/// Runs machine `m` to completion with every request atomic.
fn run_machine_atomically<M: Machine>(
    mem: &mut Memory,
    st: &mut ClientState,
    mut m: M,
    now: Nanos,
) -> Result<M::Output, Error> {
    loop {
        match m.poll(st, now) {
            Poll::Done(r) => return r,
            Poll::Pending => {
                return Err(Error::corrupt(CorruptionKind::Bug, "preload machine stuck"))
            }
            Poll::Post(wrs) => {
                for wr in wrs {
                    let id = wr.id;
                    let r = InFlight::new(wr, 0).run_to_end(mem, st.id.node, WordOrder::Ascending);
                    m.complete(Completion { id, result: r });
                }
            }
        }
    }
}

impl World {
    /// The initial memory with the preload applied, and fresh client states.
    pub fn initial_state(&self) -> Result<WorldState, Error> {
        let mut mem = Memory::new(&self.cfg);
        // The preload runs as the last client slot of node 0.
        let loader = ClientId {
            node: NodeId(0),
            index: self.cfg.clients_per_node - 1,
        };
        if !self.preload.is_empty() && self.clients.iter().any(|c| c.id == loader) {
            // Two client states for one id: the world's client would take
            // the loader's entries for free ones.
            return Err(Error::ClientIdInUse(loader));
        }
        let mut st = ClientState::new(self.cfg.clone(), loader)?;
        st.alloc.assume_zeroed();
        for (k, v) in &self.preload {
            let op = match v {
                Some(v) => Request::Put(k.clone(), v.clone()),
                None => Request::Delete(k.clone()),
            };
            run_atomically(&mut mem, &mut st, &op, Nanos(START))?;
        }
        let mut states = Vec::new();
        let mut agents: Vec<Agent> = (0..self.cfg.nodes).map(|n| Agent::new(NodeId(n))).collect();
        for c in &self.clients {
            let mut state = ClientState::new(self.cfg.clone(), c.id)?;
            state.faults = c.faults;
            let nonce = states.len() as u32 + 1;
            let later_holder = states.iter().any(|s: &ClientState| s.id == c.id);
            if state.pure.is_some() && later_holder {
                // A second process of a client without storage: it takes
                // the share once the first holder's lease is taken back,
                // and sweeps it (it knows nothing of it).
                state.pure = Some(nessie_protocol::pure::PureWindows::new(nonce));
                states.push(state);
                continue;
            }
            state.alloc.assume_zeroed();
            if state.pure.is_some() {
                let agent = &mut agents[usize::from(c.id.node.0)];
                let p = nessie_check::pure::boot(&self.cfg, &mut mem, agent, c.id, nonce, START)
                    .map_err(|e| Error::corrupt(CorruptionKind::Bug, e))?;
                state.pure = Some(p);
            }
            states.push(state);
        }
        if self.directory != IndexView::default() {
            let at = nessie_protocol::growth::directory_slot(&self.cfg);
            let wr = nessie_protocol::WorkRequest {
                id: nessie_protocol::OpId(0),
                op: Op::Cas {
                    addr: at.remote(),
                    expect: 0,
                    new: self.directory.encode(),
                },
            };
            InFlight::new(wr, 0)
                .run_to_end(&mut mem, NodeId(0), WordOrder::Ascending)
                .map_err(|e| Error::corrupt(CorruptionKind::Bug, e.to_string()))?;
            // Each client last read the directory at its view (those not
            // named, before the growth): none starts by reading it.
            for st in states.iter_mut() {
                st.view_stale = false;
            }
            for &(c, view) in &self.views {
                if let Some(st) = states.get_mut(c) {
                    st.view = view;
                }
            }
        }
        for (c, op) in &self.prelude {
            let st = states.get_mut(*c).ok_or_else(|| {
                Error::corrupt(CorruptionKind::Bug, format!("prelude names client {c}"))
            })?;
            let now = self.now_at(START, *c);
            run_atomically(&mut mem, st, op, now)?;
        }
        let mut clients = Vec::new();
        for state in states {
            let mut router = Router::new(1);
            router.reinstate_machine_local_ids(state.faults.machine_local_request_ids);
            clients.push(ClientRun {
                state,
                next: 0,
                attempts: 0,
                machine: None,
                pending: Vec::new(),
                orphans: Vec::new(),
                late: Vec::new(),
                router,
                lost: 0,
                run: Run::Running,
                solo: false,
            });
        }
        Ok(WorldState {
            mem,
            clients,
            clock: START,
            ticks: 0,
            delays: 0,
            faults: 0,
            history: WorldHistory::default(),
            flags: Flags::default(),
            agents,
        })
    }

    /// Whether node `n`'s agent has something to do now: a pass would grant
    /// a request or take a share back (it would make more requests than its
    /// read), or record a heartbeat it has not seen.
    fn agent_has_work(&self, s: &WorldState, n: NodeId) -> bool {
        let Some(agent) = s.agents.get(usize::from(n.0)) else {
            return false;
        };
        if !self
            .clients
            .iter()
            .any(|c| c.id.node == n && self.cfg.is_pure(c.id))
        {
            return false;
        }
        let mut mem = s.mem.clone();
        let mut a = agent.clone();
        let now = s.clock + self.offset(n);
        let ops = agent_pass(&self.cfg, &mut mem, &mut a, now);
        ops > 1 || a.records() != agent.records()
    }

    /// The initial map (the preload's effect).
    pub fn initial_map(&self) -> BTreeMap<Vec<u8>, Vec<u8>> {
        let mut m = BTreeMap::new();
        for (k, v) in &self.preload {
            match v {
                Some(v) => m.insert(k.clone(), v.clone()),
                None => m.remove(k),
            };
        }
        for (_, op) in &self.prelude {
            match op {
                Request::Put(k, v) => {
                    m.insert(k.clone(), v.clone());
                }
                Request::Delete(k) => {
                    m.remove(k);
                }
                Request::Get(_) | Request::Scan { .. } => {}
            }
        }
        m
    }

    fn offset(&self, node: NodeId) -> u64 {
        self.clock_offsets
            .get(usize::from(node.0))
            .copied()
            .unwrap_or(0)
    }

    /// Client `c`'s clock.
    pub fn now(&self, s: &WorldState, c: usize) -> Nanos {
        self.now_at(s.clock, c)
    }

    fn now_at(&self, clock: u64, c: usize) -> Nanos {
        Nanos(clock + self.offset(self.clients[c].id.node))
    }

    fn has_work(&self, s: &WorldState, c: usize) -> bool {
        let r = &s.clients[c];
        r.run == Run::Running
            && (r.machine.is_some() || usize::from(r.next) < self.clients[c].program.len())
    }

    /// Whether every client has finished, crashed or given up, and nothing
    /// is in flight (held completions change no memory and do not count).
    pub fn quiescent(&self, s: &WorldState) -> bool {
        (0..s.clients.len()).all(|c| {
            let r = &s.clients[c];
            !self.has_work(s, c) && r.pending.is_empty() && r.orphans.is_empty()
        })
    }

    /// Whether client `c` may poll when the clock reads `clock`.
    fn may_poll_at(&self, s: &WorldState, c: usize, clock: u64) -> bool {
        let r = &s.clients[c];
        if !self.has_work(s, c) || !r.pending.is_empty() {
            return false;
        }
        match (&r.machine, r.lost) {
            (None, _) | (Some(_), 0) => true,
            (Some(m), _) => m
                .gives_up_after(self.cfg.deadline_margin)
                .is_some_and(|t| self.now_at(clock, c) > t),
        }
    }

    fn may_poll(&self, s: &WorldState, c: usize) -> bool {
        self.may_poll_at(s, c, s.clock)
    }

    /// Whether an attempt starting now would run alone: every other client is
    /// done, crashed or given up with nothing in flight, and every
    /// uncommitted entry linked in memory may be reclaimed by client `c`.
    fn solo(&self, s: &WorldState, c: usize) -> bool {
        let others_quiet = (0..s.clients.len()).filter(|&o| o != c).all(|o| {
            !self.has_work(s, o)
                && s.clients[o].pending.is_empty()
                && s.clients[o].orphans.is_empty()
        });
        // Its own requests still to land (an error-then-land) are not alone
        // either: one may take the entry the attempt is about to use.
        if !others_quiet || !s.clients[c].orphans.is_empty() {
            return false;
        }
        let now = self.now(s, c).0;
        let skew = self.cfg.clock_skew.as_nanos() as u64;
        s.mem.index_words().filter_map(IndexEntry::dte).all(|d| {
            s.mem.entry(&self.cfg, d).is_none_or(|(h, _, _)| {
                !h.state.state.is_uncommitted()
                    || h.state.state == DteState::Aborted
                    || now > h.deadline + skew
            })
        })
    }

    fn poll_client(&self, s: &mut WorldState, c: usize) {
        let now = self.now(s, c);
        let program = &self.clients[c].program;
        if s.clients[c].machine.is_none() {
            let solo = self.solo(s, c);
            let r = &mut s.clients[c];
            let op = program[usize::from(r.next)].clone();
            if r.attempts == 0 {
                s.history.invoke(c, usize::from(r.next));
            }
            r.machine = Some(RequestMachine::new(&op));
            r.solo = solo;
        }
        let r = &mut s.clients[c];
        r.lost = 0;
        let Some(m) = r.machine.as_mut() else {
            return;
        };
        match m.poll(&mut r.state, now) {
            Poll::Post(wrs) => {
                let router = &mut r.router;
                r.pending = wrs
                    .into_iter()
                    .map(|wr| InFlight::new(router.outbound(0, wr), s.clock))
                    .collect();
            }
            Poll::Pending => {}
            Poll::Done(result) => {
                let stats = m.stats();
                r.machine = None;
                r.router.retire(0);
                self.finish_attempt(s, c, result, stats);
            }
        }
    }

    fn finish_attempt(
        &self,
        s: &mut WorldState,
        c: usize,
        result: Result<Response, Error>,
        stats: OpStats,
    ) {
        let op_index = usize::from(s.clients[c].next);
        let op = &self.clients[c].program[op_index];
        let solo = s.clients[c].solo;
        let reached = &mut s.flags.reached;
        for (count, e) in [
            (stats.deep_migrations, Expect::DeepMigration),
            (stats.migrations, Expect::Migration),
            (stats.helps, Expect::Help),
            (stats.settled_commits, Expect::SettledCommit),
            (stats.lost_completions, Expect::LostCompletion),
            (u64::from(solo), Expect::SoloAttempt),
            (stats.stale_views, Expect::StaleView),
            (stats.growth_seals, Expect::GrowthSeal),
        ] {
            if count > 0 {
                reached.insert(e);
            }
        }
        // A conflict that sent the client to read the directory again is
        // how a view behind the index ends an attempt, alone or not.
        if solo && matches!(result, Err(Error::Conflict)) && stats.stale_views == 0 {
            s.flags.solo_conflict = true;
        }
        if stats.recoveries > 0 && result.is_ok() && op.is_write() {
            reached.insert(Expect::Reclaim);
        }
        if matches!(result, Err(Error::LeaseLost(_))) {
            reached.insert(Expect::LeaseTakenBack);
        }
        let ret = match result {
            Ok(r) => Ok(Ok(r)),
            Err(Error::TableFull { .. } | Error::IndexAtLimit { .. }) => Ok(Err(Failure::Full)),
            Err(e) => Err(e),
        };
        if self.always_room && matches!(ret, Ok(Err(Failure::Full))) {
            s.flags.full_with_room = true;
        }
        enum Next {
            Returned(Ret),
            Unknown,
            Retry,
            Void,
            Unexpected(String),
        }
        let attempts = s.clients[c].attempts + 1;
        let next = match ret {
            Ok(ret) => Next::Returned(ret),
            // May or may not have happened: stays pending, never retried.
            Err(Error::OutcomeUnknown(_)) => Next::Unknown,
            // Not committed and worth retrying (as the Client does).
            Err(e) if e.is_retryable() && attempts < self.max_attempts => Next::Retry,
            // Not committed: it must not have taken effect.
            Err(
                Error::Conflict
                | Error::Timeout
                | Error::DataTableFull { .. }
                | Error::Fabric(_)
                | Error::Unreachable(..)
                | Error::LeaseLost(_)
                | Error::ClientIdInUse(_),
            ) => Next::Void,
            Err(e) => Next::Unexpected(format!("client {c}: {e}")),
        };
        let r = &mut s.clients[c];
        match next {
            Next::Retry => r.attempts = attempts,
            Next::Unexpected(why) => {
                s.flags.unexpected = Some(why);
                r.run = Run::GaveUp;
            }
            done => {
                r.next += 1;
                r.attempts = 0;
                let last = usize::from(r.next) == self.clients[c].program.len();
                match done {
                    Next::Returned(ret) => s.history.returned(c, op_index, ret),
                    Next::Void => s.history.void(c, op_index),
                    _ => {
                        s.flags.reached.insert(Expect::UnknownOutcome);
                    }
                }
                if last && self.clients[c].release {
                    let now = self.now(s, c);
                    let state = &mut s.clients[c].state;
                    let released = state.pure.as_ref().is_some_and(|p| p.held)
                        && run_machine_atomically(
                            &mut s.mem,
                            state,
                            ReleaseMachine::release(),
                            now,
                        )
                        .is_ok();
                    if released {
                        s.flags.reached.insert(Expect::ShareReleased);
                    }
                }
                self.recheck(s);
            }
        }
    }

    /// Re-checks the history after it changed.
    fn recheck(&self, s: &mut WorldState) {
        if !s.flags.nonlinearizable && !self.linearizable(s, &[]) {
            s.flags.nonlinearizable = true;
        }
    }

    /// Whether the history, plus reads `finals` appended after everything,
    /// is linearizable.
    pub fn linearizable(&self, s: &WorldState, finals: &[(Vec<u8>, Option<Vec<u8>>)]) -> bool {
        let after = s.history.now() + 1;
        let reads: Vec<Request> = finals
            .iter()
            .map(|(k, _)| Request::Get(k.clone()))
            .collect();
        let final_status: Vec<Status> = finals
            .iter()
            .map(|(_, v)| Status::Returned(Ok(Response::Get(v.clone())), after + 1))
            .collect();
        let mut ops: Vec<CheckedOp<'_>> = s
            .history
            .records()
            .iter()
            .map(|r| {
                let op = &self.clients[usize::from(r.client)].program[usize::from(r.op)];
                CheckedOp {
                    op,
                    invoked: r.invoked,
                    status: &r.status,
                }
            })
            .collect();
        for (read, st) in reads.iter().zip(&final_status) {
            ops.push(CheckedOp {
                op: read,
                invoked: after,
                status: st,
            });
        }
        linearizable(&self.initial_map(), &ops)
    }

    /// Every key the world touches.
    pub fn keys(&self) -> BTreeSet<Vec<u8>> {
        let mut keys: BTreeSet<Vec<u8>> = self.preload.iter().map(|(k, _)| k.clone()).collect();
        for c in &self.clients {
            keys.extend(c.program.iter().map(|op| op.key().to_vec()));
        }
        keys
    }

    /// The committed entries of `key` named by its candidates.
    fn committed_versions(&self, mem: &Memory, key: &[u8]) -> BTreeSet<DteAddr> {
        let mut out = BTreeSet::new();
        for c in self.cfg.candidates_in_every_generation(key) {
            if let Some(d) = mem.ite(c).dte() {
                if let Some((h, k, _)) = mem.entry(&self.cfg, d) {
                    if k == key && h.state.state.is_committed() {
                        out.insert(d);
                    }
                }
            }
        }
        out
    }

    /// The abstract value of `key` in memory (docs/protocol.md §3).
    pub fn abstract_value(&self, mem: &Memory, key: &[u8]) -> Option<Vec<u8>> {
        let value_of = |d: DteAddr| -> Option<Vec<u8>> {
            let (h, k, v) = mem.entry(&self.cfg, d)?;
            (k == key && h.state.state == DteState::Valid).then_some(v)
        };
        if let Some(&d) = self.committed_versions(mem, key).iter().next() {
            return value_of(d);
        }
        for c in self.cfg.candidates_in_every_generation(key) {
            let Some(d) = mem.ite(c).dte() else { continue };
            let Some((h, k, _)) = mem.entry(&self.cfg, d) else {
                continue;
            };
            if k == key && h.state.state.is_uncommitted() {
                if let Some(p) = IndexEntry(h.prev).dte() {
                    return value_of(p);
                }
            }
        }
        None
    }

    /// Checks the invariants that read memory, after it changed.
    fn check_memory(&self, s: &mut WorldState) {
        if !s.flags.two_committed
            && self
                .keys()
                .iter()
                .any(|k| self.committed_versions(&s.mem, k).len() > 1)
        {
            s.flags.two_committed = true;
        }
        if !s.flags.marked_linked
            && s.mem.index_words().filter_map(IndexEntry::dte).any(|d| {
                s.mem
                    .entry(&self.cfg, d)
                    .is_some_and(|(h, _, _)| h.recycle.recycle)
            })
        {
            s.flags.marked_linked = true;
        }
        if self.cfg.index_generations > 1 {
            let at = nessie_protocol::growth::directory_slot(&self.cfg);
            if IndexView::decode(s.mem.ite(at).0).oldest > self.directory.oldest {
                s.flags.reached.insert(Expect::GrowthEnded);
            }
        }
    }

    fn check_quiescence(&self, s: &mut WorldState) {
        if s.flags.lost_at_quiescence || !self.quiescent(s) {
            return;
        }
        let finals: Vec<_> = self
            .keys()
            .into_iter()
            .map(|k| {
                let v = self.abstract_value(&s.mem, &k);
                (k, v)
            })
            .collect();
        if !self.linearizable(s, &finals) {
            s.flags.lost_at_quiescence = true;
        }
    }

    fn step(&self, s: &mut WorldState, c: usize, i: usize) {
        let own = self.clients[c].id.node;
        let f = &s.clients[c].pending[i];
        if let Op::LocalWrite { offset, data } = &f.wr.op {
            if data.len() > 8 {
                let d = self.cfg.data_tables().entry_at(own, *offset);
                if d.is_some_and(|d| s.mem.entry_in_use(&self.cfg, d)) {
                    s.flags.reused_linked = true;
                }
            }
        }
        let rewrites = self.cfg.is_pure(self.clients[c].id)
            && self.rewrites_linked(&s.mem, f.wr.op.unwindowed());
        let mutation = f.is_mutation();
        let r = &mut s.clients[c];
        let f = &mut r.pending[i];
        let before = f.words;
        if let Some(result) = f.step(&mut s.mem, own, self.torn, self.word_order) {
            if rewrites && (result.is_ok() || f.words > before) {
                s.flags.reused_linked = true;
            }
            let id = f.wr.id;
            r.pending.swap_remove(i);
            deliver(r, Completion { id, result });
        }
        if mutation {
            self.check_memory(s);
        }
        // Without time in the world nothing can happen between a round's
        // last completion and the step that processes it: merge them.
        if self.max_ticks == 0 && s.clients[c].pending.is_empty() && self.may_poll(s, c) {
            self.poll_client(s, c);
        }
    }

    fn fault(&self, s: &mut WorldState, c: usize, i: usize, fault: TransportFault) {
        s.faults += 1;
        let own = self.clients[c].id.node;
        let r = &mut s.clients[c];
        let mut f = r.pending.swap_remove(i);
        let copy = f.clone();
        let result = fault
            .executes_now()
            .then(|| f.run_to_end(&mut s.mem, own, self.word_order));
        let executed = result.is_some();
        let id = f.wr.id;
        let error = Completion {
            id,
            result: Err(FabricError::Timeout),
        };
        match fault {
            TransportFault::FailBeforeExecuting | TransportFault::FailAfterExecuting => {
                deliver(r, error);
            }
            TransportFault::ErrorThenLand => {
                deliver(r, error);
                r.orphans.push(copy);
            }
            TransportFault::LoseCompletion | TransportFault::Vanish => r.lost += 1,
            TransportFault::LateCompletion => {
                r.lost += 1;
                r.late
                    .extend(result.map(|result| Completion { id, result }));
            }
            TransportFault::DuplicateWrite => {
                if let Some(result) = result {
                    deliver(r, Completion { id, result });
                }
                r.orphans.push(copy);
            }
        }
        if executed {
            self.check_memory(s);
        }
    }

    /// Whether a client without storage's WRITE `op` would change an entry
    /// that an index word still links (a copy of the entry's own WRITE,
    /// landing again with the same bytes, changes nothing).
    fn rewrites_linked(&self, mem: &Memory, op: &Op) -> bool {
        let Op::Write { addr, data } = op else {
            return false;
        };
        if addr.region != nessie_protocol::Region::Data {
            return false;
        }
        let tables = self.cfg.data_tables();
        let Some(d) = tables.entry_at(addr.node, addr.offset) else {
            return false;
        };
        let now = mem.read(addr.node, addr.region, addr.offset, data.len() as u64);
        mem.entry_in_use(&self.cfg, d) && now.is_ok_and(|b| b != *data)
    }

    /// Orphan `i` of client `c` lands, whole.
    fn land(&self, s: &mut WorldState, c: usize, i: usize) {
        let own = self.clients[c].id.node;
        let mut f = s.clients[c].orphans.swap_remove(i);
        let rewrites = self.cfg.is_pure(self.clients[c].id)
            && self.rewrites_linked(&s.mem, f.wr.op.unwindowed());
        let landed = f.run_to_end(&mut s.mem, own, self.word_order).is_ok();
        if rewrites && landed {
            s.flags.reused_linked = true;
        }
        s.flags.reached.insert(Expect::OrphanLanded);
        self.check_memory(s);
    }

    /// Held completion `i` of client `c` arrives: the client core routes it
    /// (or drops it).
    fn deliver_late(&self, s: &mut WorldState, c: usize, i: usize) {
        let r = &mut s.clients[c];
        let completion = r.late.swap_remove(i);
        deliver(r, completion);
        s.flags.reached.insert(Expect::LateDelivered);
    }

    /// Whether `fault` may hit `f` now: a NIC request none of whose words
    /// has landed; an error-then-land only a mutation (for a READ it is a
    /// failure before executing).
    fn may_fault(&self, s: &WorldState, f: &InFlight, fault: TransportFault) -> bool {
        s.faults < self.max_faults
            && f.is_nic()
            && f.words == 0
            && fault.applies_to(f.wr.op.kind())
            && (fault != TransportFault::ErrorThenLand || f.is_mutation())
    }

    /// How many ticks the clock may advance now: within `max_ticks`, and
    /// (A2) not past any posted mutation's posting time plus the margin
    /// (with `late_landing`: plus `landing_bound` if set, else no limit).
    fn ticks_allowed(&self, s: &WorldState) -> u8 {
        let mut left = self.max_ticks.saturating_sub(s.ticks);
        if self.max_delays > 0 && s.delays >= self.max_delays {
            left = 0;
        }
        let bound = match (self.late_landing, self.landing_bound) {
            (false, _) => self.cfg.deadline_margin,
            (true, Some(b)) => b,
            (true, None) => return left,
        };
        let tick = self.tick.as_nanos() as u64;
        let bound = bound.as_nanos() as u64;
        s.clients
            .iter()
            .flat_map(|r| r.pending.iter().chain(&r.orphans))
            .filter(|f| f.is_mutation())
            .map(|f| ((f.posted_at + bound).saturating_sub(s.clock) / tick).min(255) as u8)
            .fold(left, u8::min)
    }
}

impl Model for World {
    type State = WorldState;
    type Action = Action;

    fn init_states(&self) -> Vec<WorldState> {
        match self.initial_state() {
            Ok(s) => vec![s],
            Err(e) => panic!("world {}: preload failed: {e}", self.name),
        }
    }

    fn actions(&self, s: &WorldState, actions: &mut Vec<Action>) {
        for (c, r) in s.clients.iter().enumerate() {
            let crashed = r.run == Run::Crashed;
            for (i, f) in r.pending.iter().enumerate() {
                actions.push(Action::Step(c, i));
                if crashed {
                    actions.push(Action::Drop(c, i));
                } else {
                    for &fault in &self.faults {
                        if self.may_fault(s, f, fault) {
                            actions.push(Action::Fault(c, i, fault));
                        }
                    }
                }
            }
            actions.extend((0..r.orphans.len()).map(|i| Action::Land(c, i)));
            if !crashed {
                actions.extend((0..r.late.len()).map(|i| Action::Deliver(c, i)));
            }
            if self.may_poll(s, c) {
                actions.push(Action::Poll(c));
            }
            let tick = self.tick.as_nanos() as u64;
            for k in 1..=self.ticks_allowed(s) {
                if self.may_poll_at(s, c, s.clock + u64::from(k) * tick) {
                    actions.push(Action::Delay(c, k));
                }
            }
            if self.clients[c].may_crash && r.run == Run::Running && r.machine.is_some() {
                actions.push(Action::Crash(c));
            }
        }
        for n in 0..self.cfg.nodes {
            if self.agent_has_work(s, NodeId(n)) {
                actions.push(Action::Agent(n));
            }
        }
    }

    fn next_state(&self, last: &WorldState, action: Action) -> Option<WorldState> {
        let mut s = last.clone();
        match action {
            Action::Step(c, i) => self.step(&mut s, c, i),
            Action::Poll(c) => self.poll_client(&mut s, c),
            Action::Delay(c, k) => {
                s.clock += u64::from(k) * self.tick.as_nanos() as u64;
                s.ticks += k;
                s.delays += 1;
                self.poll_client(&mut s, c);
            }
            Action::Crash(c) => {
                let r = &mut s.clients[c];
                r.run = Run::Crashed;
                r.machine = None;
                // Requests already posted may still land (within A2); reads
                // and held completions no longer matter.
                r.pending.retain(InFlight::is_mutation);
                r.late.clear();
                r.router.retire(0);
            }
            Action::Drop(c, i) => {
                s.clients[c].pending.swap_remove(i);
            }
            Action::Fault(c, i, f) => self.fault(&mut s, c, i, f),
            Action::Land(c, i) => self.land(&mut s, c, i),
            Action::Deliver(c, i) => self.deliver_late(&mut s, c, i),
            Action::Agent(n) => {
                let now = s.clock + self.offset(NodeId(n));
                if let Some(agent) = s.agents.get_mut(usize::from(n)) {
                    agent_pass(&self.cfg, &mut s.mem, agent, now);
                }
                self.check_memory(&mut s);
            }
        }
        for r in &s.clients {
            let (hits, _) = r.state.cache.hit_miss();
            if hits > 0 {
                s.flags.reached.insert(Expect::CacheHit);
                break;
            }
        }
        if s.clients
            .iter()
            .any(|r| r.state.pure.as_ref().is_some_and(|p| p.generation > 1))
        {
            s.flags.reached.insert(Expect::NewGeneration);
        }
        self.check_quiescence(&mut s);
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut p = vec![
            Property::always("linearizable", |_, s: &WorldState| !s.flags.nonlinearizable),
            Property::always("no unexpected error", |_, s: &WorldState| {
                s.flags.unexpected.is_none()
            }),
            Property::always("one committed version per key", |_, s: &WorldState| {
                !s.flags.two_committed
            }),
            Property::always("no linked entry is reused", |_, s: &WorldState| {
                !s.flags.reused_linked
            }),
            Property::always(
                "no linked entry is marked for recycling",
                |_, s: &WorldState| !s.flags.marked_linked,
            ),
            Property::always(
                "acknowledged writes survive at quiescence",
                |_, s: &WorldState| !s.flags.lost_at_quiescence,
            ),
            Property::always("an attempt running alone succeeds", |_, s: &WorldState| {
                !s.flags.solo_conflict
            }),
            Property::always(
                "TableFull only without a chain within the depth limit",
                |_, s: &WorldState| !s.flags.full_with_room,
            ),
        ];
        p.extend(self.expect.iter().map(|&e| expect_property(e)));
        p
    }
}

/// Hands `c` to `r`'s running machine through its router (which drops a
/// completion whose request belongs to no running machine).
fn deliver(r: &mut ClientRun, c: Completion) {
    if let Some((_, c)) = r.router.inbound(c) {
        if let Some(m) = r.machine.as_mut() {
            m.complete(c);
        }
    }
}

/// The `sometimes` property of an expected situation.
fn expect_property(e: Expect) -> Property<World> {
    macro_rules! reached {
        ($e:expr) => {
            Property::sometimes(expect_name($e), |_, s: &WorldState| {
                s.flags.reached.contains(&$e)
            })
        };
    }
    match e {
        Expect::Reclaim => reached!(Expect::Reclaim),
        Expect::DeepMigration => reached!(Expect::DeepMigration),
        Expect::Migration => reached!(Expect::Migration),
        Expect::Help => reached!(Expect::Help),
        Expect::SettledCommit => reached!(Expect::SettledCommit),
        Expect::UnknownOutcome => reached!(Expect::UnknownOutcome),
        Expect::LostCompletion => reached!(Expect::LostCompletion),
        Expect::CacheHit => reached!(Expect::CacheHit),
        Expect::SoloAttempt => reached!(Expect::SoloAttempt),
        Expect::OrphanLanded => reached!(Expect::OrphanLanded),
        Expect::LateDelivered => reached!(Expect::LateDelivered),
        Expect::NewGeneration => reached!(Expect::NewGeneration),
        Expect::LeaseTakenBack => reached!(Expect::LeaseTakenBack),
        Expect::ShareReleased => reached!(Expect::ShareReleased),
        Expect::StaleView => reached!(Expect::StaleView),
        Expect::GrowthSeal => reached!(Expect::GrowthSeal),
        Expect::GrowthEnded => reached!(Expect::GrowthEnded),
    }
}

/// The property name of an expected situation.
pub fn expect_name(e: Expect) -> &'static str {
    match e {
        Expect::Reclaim => "a write reclaimed an abandoned entry",
        Expect::DeepMigration => "a recursive MIGRATE completed",
        Expect::Migration => "a MIGRATE completed",
        Expect::Help => "a client finished another's MIGRATE",
        Expect::SettledCommit => "a commit with a failed completion was settled",
        Expect::UnknownOutcome => "an operation ended with an unknown outcome",
        Expect::LostCompletion => "a round was given up at the deadline",
        Expect::CacheHit => "a cached entry was used",
        Expect::SoloAttempt => "an attempt ran alone",
        Expect::OrphanLanded => "a request landed after its error completion",
        Expect::LateDelivered => "a completion arrived after its round was given up",
        Expect::NewGeneration => "a client without storage wrote in a later generation",
        Expect::LeaseTakenBack => "a client without storage lost its share to its agent",
        Expect::ShareReleased => "a client without storage gave its share back",
        Expect::StaleView => "a client whose view of the index was behind met a growth seal",
        Expect::GrowthSeal => "a growth sealed an entry of the old generation",
        Expect::GrowthEnded => "a growth ended in the next generation",
    }
}

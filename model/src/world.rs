//! A stateright model of a small Nessie cluster running the real state machines.
//!
//! The state is the fabric memory of every node (index and data regions, word
//! granular), each client's real [`ClientState`] and operation machine with the
//! operations it has posted and not yet completed, an explicit clock, and a
//! linearizability tester over a map. Actions:
//! - `Step(c)`: client `c` performs one unit of fabric work: one word of its
//!   oldest in-flight READ or WRITE (when `torn`), or a whole CAS or CPU access.
//!   Polling its machine for the next round happens inside the same step.
//! - `Tick`: the clock advances by `tick` (at most `max_ticks` times).
//! - `Crash(c)`: client `c` stops for good in the middle of an operation.
//!
//! A client's posted operations execute in posting order (one queue pair);
//! other clients interleave between any two words. See docs/verification.md.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use nessie_protocol::layout::{DataEntryHeader, DteState, IndexEntry};
use nessie_protocol::machine::ClientState;
use nessie_protocol::{
    ClientId, Completion, Config, DteAddr, Error, FabricError, Faults, GetMachine, Machine, Nanos,
    NodeId, Op, OpOutput, Poll, PutMachine, Region, WorkRequest,
};
use stateright::semantics::{ConsistencyTester, LinearizabilityTester, SequentialSpec};
use stateright::{Model, Property};

use crate::history::KvOp;

/// What an operation returned, as the model records it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ModelRet {
    /// A GET's answer.
    Get(Option<Vec<u8>>),
    /// A PUT's "existed before".
    Put(bool),
    /// A DELETE's "existed before".
    Delete(bool),
    /// A PUT refused with `TableFull` (valid only if the key was absent).
    Full,
}

/// The sequential specification: a map from keys to values.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct KvSpec(pub BTreeMap<Vec<u8>, Vec<u8>>);

impl SequentialSpec for KvSpec {
    type Op = (Vec<u8>, KvOp);
    type Ret = ModelRet;

    fn invoke(&mut self, (key, op): &Self::Op) -> ModelRet {
        match op {
            KvOp::Get => ModelRet::Get(self.0.get(key).cloned()),
            KvOp::Put(v) => ModelRet::Put(self.0.insert(key.clone(), v.clone()).is_some()),
            KvOp::Delete => ModelRet::Delete(self.0.remove(key).is_some()),
        }
    }

    fn is_valid_step(&mut self, op: &Self::Op, ret: &ModelRet) -> bool {
        match ret {
            ModelRet::Full => matches!(op.1, KvOp::Put(_)) && !self.0.contains_key(&op.0),
            _ => &self.invoke(op) == ret,
        }
    }
}

/// One client of a world: who it is, what it does, how it may misbehave.
#[derive(Clone, Debug)]
pub struct ClientSpec {
    /// Its identity (node and share of the data table).
    pub id: ClientId,
    /// Its operations, run one after another.
    pub program: Vec<(Vec<u8>, KvOp)>,
    /// Broken protocol variants or an overrunning owner.
    pub faults: Faults,
    /// Whether the model may crash it in the middle of an operation.
    pub may_crash: bool,
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
    /// Multi-word READs and WRITEs land one word per step.
    pub torn: bool,
    /// How many clock ticks the model may take.
    pub max_ticks: u8,
    /// How far one tick moves the clock.
    pub tick: Duration,
    /// Attempts per operation before a client gives up (the operation then
    /// stays in flight in the history: it may or may not have happened).
    pub max_attempts: u8,
    /// Expect (as a `sometimes` property) a write that reclaimed another
    /// client's abandoned entry.
    pub expect_reclaim: bool,
    /// Expect (as a `sometimes` property) a completed recursive MIGRATE.
    pub expect_deep_migration: bool,
    /// Let the clock tick while a posted CAS or WRITE has not landed, i.e.
    /// violate timing assumption A2 (docs/protocol.md §4).
    pub late_landing: bool,
}

/// An operation machine of either kind.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum AnyMachine {
    /// A GET.
    Get(GetMachine),
    /// A PUT or DELETE.
    Write(PutMachine),
}

/// A posted operation and how much of it has landed.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct InFlight {
    /// The work request.
    pub wr: WorkRequest,
    /// Words done so far.
    pub words: u32,
    /// Bytes read so far.
    pub buf: Vec<u8>,
}

/// A client's progress.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ClientRun {
    /// Its protocol state.
    pub state: ClientState,
    /// Index of its current operation in its program.
    pub next: usize,
    /// Attempts made of the current operation.
    pub attempts: u8,
    /// The running attempt.
    pub machine: Option<AnyMachine>,
    /// Posted operations not yet completed, oldest first.
    pub pending: VecDeque<InFlight>,
    /// Crashed: takes no further steps.
    pub crashed: bool,
    /// Stopped after an unexpected error.
    pub gave_up: bool,
    /// Operations abandoned after `max_attempts` failed attempts (they stay in
    /// flight in the history: they may or may not have taken effect).
    pub abandoned: u8,
}

/// Violations and events recorded while stepping.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Flags {
    /// An operation failed with an error other than conflict, timeout or table full.
    pub unexpected: Option<String>,
    /// An entry was rewritten while an index entry (or a linked entry's
    /// previous version) still named it.
    pub reused_linked: bool,
    /// A write completed after reclaiming an abandoned entry.
    pub reclaimed_write: bool,
    /// A write completed that made a MIGRATE at depth 2 or more.
    pub deep_migration: bool,
}

/// The state of a world.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct WorldState {
    /// Memory: index then data region of node 0, then of node 1, ...
    pub mem: Vec<Vec<u64>>,
    /// The clients.
    pub clients: Vec<ClientRun>,
    /// Current time (ns).
    pub clock: u64,
    /// Ticks taken.
    pub ticks: u8,
    /// The history so far.
    pub tester: LinearizabilityTester<usize, KvSpec>,
    /// Recorded violations and events.
    pub flags: Flags,
}

/// What the model may do next.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// One unit of fabric work by a client.
    Step(usize),
    /// The clock advances.
    Tick,
    /// A client crashes.
    Crash(usize),
}

/// Clock value at the start of every world.
pub const START: u64 = 1_000_000;

/// The history's thread id of operation `op` of client `client`: every
/// operation has its own, so that an abandoned operation can stay in flight
/// while its client goes on (real-time order between them is still recorded).
pub fn history_id(client: usize, op: usize) -> usize {
    client * 100 + op
}

fn region_slot(node: NodeId, region: Region) -> usize {
    usize::from(node.0) * 2 + usize::from(region == Region::Data)
}

fn word_at(mem: &[Vec<u64>], slot: usize, byte: u64) -> Result<u64, FabricError> {
    mem.get(slot)
        .and_then(|r| r.get((byte / 8) as usize))
        .copied()
        .ok_or(FabricError::Transport(format!(
            "model: address {byte:#x} out of range"
        )))
}

fn set_word(mem: &mut [Vec<u64>], slot: usize, byte: u64, w: u64) -> Result<(), FabricError> {
    let cell = mem
        .get_mut(slot)
        .and_then(|r| r.get_mut((byte / 8) as usize))
        .ok_or(FabricError::Transport(format!(
            "model: address {byte:#x} out of range"
        )))?;
    *cell = w;
    Ok(())
}

fn read_bytes(
    mem: &[Vec<u64>],
    slot: usize,
    offset: u64,
    len: u64,
) -> Result<Vec<u8>, FabricError> {
    let mut out = Vec::with_capacity(len as usize);
    let mut b = offset;
    while b < offset + len {
        out.extend_from_slice(&word_at(mem, slot, b)?.to_le_bytes());
        b += 8;
    }
    out.truncate(len as usize);
    Ok(out)
}

fn write_bytes(
    mem: &mut [Vec<u64>],
    slot: usize,
    offset: u64,
    data: &[u8],
) -> Result<(), FabricError> {
    for (i, chunk) in data.chunks(8).enumerate() {
        let mut w = [0u8; 8];
        w[..chunk.len()].copy_from_slice(chunk);
        set_word(mem, slot, offset + 8 * i as u64, u64::from_le_bytes(w))?;
    }
    Ok(())
}

/// Executes one unit of `f`; returns its completion once the operation is done.
fn exec_unit(
    mem: &mut [Vec<u64>],
    own: NodeId,
    f: &mut InFlight,
    torn: bool,
) -> Option<Result<OpOutput, FabricError>> {
    match &f.wr.op {
        Op::Cas { addr, expect, new } => {
            let slot = region_slot(addr.node, addr.region);
            Some(word_at(mem, slot, addr.offset).and_then(|prev| {
                if prev == *expect {
                    set_word(mem, slot, addr.offset, *new)?;
                }
                Ok(OpOutput::Cas { previous: prev })
            }))
        }
        Op::LocalRead { offset, len } => Some(
            read_bytes(
                mem,
                region_slot(own, Region::Data),
                *offset,
                u64::from(*len),
            )
            .map(OpOutput::Read),
        ),
        Op::LocalWrite { offset, data } => Some(
            write_bytes(mem, region_slot(own, Region::Data), *offset, data)
                .map(|()| OpOutput::Written),
        ),
        Op::Read { addr, len } => {
            let slot = region_slot(addr.node, addr.region);
            let len = u64::from(*len);
            if !torn {
                return Some(read_bytes(mem, slot, addr.offset, len).map(OpOutput::Read));
            }
            let at = addr.offset + 8 * u64::from(f.words);
            match word_at(mem, slot, at) {
                Ok(w) => f.buf.extend_from_slice(&w.to_le_bytes()),
                Err(e) => return Some(Err(e)),
            }
            f.words += 1;
            (f.buf.len() as u64 >= len).then(|| {
                let mut b = std::mem::take(&mut f.buf);
                b.truncate(len as usize);
                Ok(OpOutput::Read(b))
            })
        }
        Op::Write { addr, data } => {
            let slot = region_slot(addr.node, addr.region);
            if !torn {
                return Some(write_bytes(mem, slot, addr.offset, data).map(|()| OpOutput::Written));
            }
            let i = f.words as usize;
            let end = (8 * (i + 1)).min(data.len());
            if let Err(e) = write_bytes(mem, slot, addr.offset + 8 * i as u64, &data[8 * i..end]) {
                return Some(Err(e));
            }
            f.words += 1;
            (8 * f.words as usize >= data.len()).then_some(Ok(OpOutput::Written))
        }
    }
}

enum Outcome {
    Get(Option<Vec<u8>>),
    Write(bool),
}

fn poll(m: &mut AnyMachine, st: &mut ClientState, now: Nanos) -> Poll<Result<Outcome, Error>> {
    match m {
        AnyMachine::Get(g) => match g.poll(st, now) {
            Poll::Post(w) => Poll::Post(w),
            Poll::Pending => Poll::Pending,
            Poll::Done(r) => Poll::Done(r.map(Outcome::Get)),
        },
        AnyMachine::Write(w) => match w.poll(st, now) {
            Poll::Post(x) => Poll::Post(x),
            Poll::Pending => Poll::Pending,
            Poll::Done(r) => Poll::Done(r.map(Outcome::Write)),
        },
    }
}

fn complete(m: &mut AnyMachine, c: Completion) {
    match m {
        AnyMachine::Get(g) => g.complete(c),
        AnyMachine::Write(w) => w.complete(c),
    }
}

fn machine_for(op: &(Vec<u8>, KvOp)) -> AnyMachine {
    match &op.1 {
        KvOp::Get => AnyMachine::Get(GetMachine::get(&op.0)),
        KvOp::Put(v) => AnyMachine::Write(PutMachine::put(&op.0, v)),
        KvOp::Delete => AnyMachine::Write(PutMachine::delete(&op.0)),
    }
}

/// Runs `op` to completion with every fabric operation atomic (for preloads).
fn run_atomically(
    mem: &mut [Vec<u64>],
    st: &mut ClientState,
    op: &(Vec<u8>, KvOp),
    now: Nanos,
) -> Result<(), Error> {
    let mut m = machine_for(op);
    loop {
        match poll(&mut m, st, now) {
            Poll::Done(r) => return r.map(|_| ()),
            Poll::Pending => return Err(Error::Corrupt("preload machine stuck".into())),
            Poll::Post(wrs) => {
                for wr in wrs {
                    let id = wr.id;
                    let mut f = InFlight {
                        wr,
                        words: 0,
                        buf: Vec::new(),
                    };
                    let r = loop {
                        if let Some(r) = exec_unit(mem, st.id.node, &mut f, false) {
                            break r;
                        }
                    };
                    complete(&mut m, Completion { id, result: r });
                }
            }
        }
    }
}

impl World {
    /// The initial memory with the preload applied, and fresh client states.
    pub fn initial_state(&self) -> Result<WorldState, Error> {
        let topo = self.cfg.topology();
        let mut mem = Vec::new();
        for _ in 0..topo.nodes {
            mem.push(vec![0u64; topo.index_slots_per_node as usize]);
            mem.push(vec![0u64; topo.data_bytes_per_node.div_ceil(8) as usize]);
        }
        // The preload runs as the last client slot of node 0.
        let loader = ClientId {
            node: NodeId(0),
            index: self.cfg.clients_per_node - 1,
        };
        let mut st = ClientState::new(self.cfg.clone(), loader)?;
        st.alloc.assume_zeroed();
        for (k, v) in &self.preload {
            let op = match v {
                Some(v) => (k.clone(), KvOp::Put(v.clone())),
                None => (k.clone(), KvOp::Delete),
            };
            run_atomically(&mut mem, &mut st, &op, Nanos(START))?;
        }
        let mut spec = KvSpec::default();
        for (k, v) in &self.preload {
            match v {
                Some(v) => spec.0.insert(k.clone(), v.clone()),
                None => spec.0.remove(k),
            };
        }
        let mut clients = Vec::new();
        for c in &self.clients {
            let mut state = ClientState::new(self.cfg.clone(), c.id)?;
            state.alloc.assume_zeroed();
            state.faults = c.faults;
            clients.push(ClientRun {
                state,
                next: 0,
                attempts: 0,
                machine: None,
                pending: VecDeque::new(),
                crashed: false,
                gave_up: false,
                abandoned: 0,
            });
        }
        Ok(WorldState {
            mem,
            clients,
            clock: START,
            ticks: 0,
            tester: LinearizabilityTester::new(spec),
            flags: Flags::default(),
        })
    }

    fn runnable(&self, s: &WorldState, c: usize) -> bool {
        let r = &s.clients[c];
        !r.crashed && !r.gave_up && (r.machine.is_some() || r.next < self.clients[c].program.len())
    }

    /// Whether every client has finished, crashed or given up.
    pub fn quiescent(&self, s: &WorldState) -> bool {
        (0..s.clients.len()).all(|c| !self.runnable(s, c))
    }

    fn step(&self, s: &mut WorldState, c: usize) {
        let now = Nanos(s.clock);
        let program = &self.clients[c].program;
        let run = &mut s.clients[c];
        if run.machine.is_none() {
            let op = program[run.next].clone();
            if run.attempts == 0 {
                let _ = s.tester.on_invoke(history_id(c, run.next), op.clone());
            }
            run.machine = Some(machine_for(&op));
        }
        // Execute one unit of the oldest posted operation; when a round is
        // complete, poll the machine for its next round or its result.
        if let Some(f) = run.pending.front_mut() {
            let own = run.state.id.node;
            let is_alloc_write = matches!(&f.wr.op, Op::LocalWrite { data, .. } if data.len() > 8);
            if is_alloc_write {
                if let Op::LocalWrite { offset, .. } = f.wr.op {
                    let index = (offset / self.cfg.layout().entry_bytes()) as u32;
                    if entry_in_use(
                        &self.cfg,
                        &s.mem,
                        DteAddr {
                            table: own.0,
                            index,
                        },
                    ) {
                        s.flags.reused_linked = true;
                    }
                }
            }
            if let Some(result) = exec_unit(&mut s.mem, own, f, self.torn) {
                let id = f.wr.id;
                run.pending.pop_front();
                if let Some(m) = run.machine.as_mut() {
                    complete(m, Completion { id, result });
                }
            }
            if !run.pending.is_empty() {
                return;
            }
        }
        let Some(m) = run.machine.as_mut() else {
            return;
        };
        match poll(m, &mut run.state, now) {
            Poll::Post(wrs) => {
                run.pending = wrs
                    .into_iter()
                    .map(|wr| InFlight {
                        wr,
                        words: 0,
                        buf: Vec::new(),
                    })
                    .collect();
            }
            Poll::Pending => {}
            Poll::Done(r) => {
                let stats = match m {
                    AnyMachine::Get(g) => g.stats(),
                    AnyMachine::Write(w) => w.stats(),
                };
                let recoveries = stats.recoveries;
                if stats.deep_migrations > 0 {
                    s.flags.deep_migration = true;
                }
                run.machine = None;
                let op = &program[run.next];
                let ret = match (r, &op.1) {
                    (Ok(Outcome::Get(v)), _) => Some(ModelRet::Get(v)),
                    (Ok(Outcome::Write(e)), KvOp::Delete) => Some(ModelRet::Delete(e)),
                    (Ok(Outcome::Write(e)), _) => {
                        if recoveries > 0 {
                            s.flags.reclaimed_write = true;
                        }
                        Some(ModelRet::Put(e))
                    }
                    (Err(Error::TableFull { .. }), _) => Some(ModelRet::Full),
                    (Err(Error::Conflict | Error::Timeout | Error::DataTableFull { .. }), _) => {
                        None
                    }
                    (Err(e), _) => {
                        s.flags.unexpected = Some(format!("client {c}: {e}"));
                        run.gave_up = true;
                        None
                    }
                };
                match ret {
                    _ if run.gave_up => {}
                    Some(ret) => {
                        let _ = s.tester.on_return(history_id(c, run.next), ret);
                        run.next += 1;
                        run.attempts = 0;
                    }
                    None => {
                        run.attempts += 1;
                        if run.attempts >= self.max_attempts {
                            run.abandoned += 1;
                            run.next += 1;
                            run.attempts = 0;
                        }
                    }
                }
            }
        }
    }

    /// Every key the world touches.
    pub fn keys(&self) -> BTreeSet<Vec<u8>> {
        let mut keys: BTreeSet<Vec<u8>> = self.preload.iter().map(|(k, _)| k.clone()).collect();
        for c in &self.clients {
            keys.extend(c.program.iter().map(|(k, _)| k.clone()));
        }
        keys
    }
}

/// A data table entry as stored in model memory.
fn entry(
    cfg: &Config,
    mem: &[Vec<u64>],
    d: DteAddr,
) -> Option<(DataEntryHeader, Vec<u8>, Vec<u8>)> {
    let l = cfg.layout();
    let raw = read_bytes(
        mem,
        region_slot(d.node(), Region::Data),
        l.entry_offset(d.index),
        l.entry_bytes(),
    )
    .ok()?;
    let h = DataEntryHeader::decode(&raw)?;
    Some((
        h,
        l.key(&h, &raw)?.to_vec(),
        l.value(&h, &raw).unwrap_or_default().to_vec(),
    ))
}

fn all_index_words(mem: &[Vec<u64>]) -> impl Iterator<Item = IndexEntry> + '_ {
    mem.iter().step_by(2).flatten().map(|&w| IndexEntry(w))
}

/// Whether any index entry names `d`, or names an uncommitted entry whose
/// previous version is `d` (readers may still fall back to it).
fn entry_in_use(cfg: &Config, mem: &[Vec<u64>], d: DteAddr) -> bool {
    all_index_words(mem)
        .filter_map(IndexEntry::dte)
        .any(|linked| {
            linked == d
                || entry(cfg, mem, linked).is_some_and(|(h, _, _)| {
                    h.state.state.is_uncommitted() && IndexEntry(h.prev).dte() == Some(d)
                })
        })
}

/// The committed entries of `key` named by its candidates.
fn committed_versions(cfg: &Config, mem: &[Vec<u64>], key: &[u8]) -> BTreeSet<DteAddr> {
    let mut out = BTreeSet::new();
    for c in cfg.hasher().candidates(key) {
        let w = IndexEntry(mem[region_slot(c.node, Region::Index)][c.slot as usize]);
        if let Some(d) = w.dte() {
            if let Some((h, k, _)) = entry(cfg, mem, d) {
                if k == key && h.state.state.is_committed() {
                    out.insert(d);
                }
            }
        }
    }
    out
}

/// The abstract value of `key` in memory (docs/protocol.md §3), if defined.
pub fn abstract_value(cfg: &Config, mem: &[Vec<u64>], key: &[u8]) -> Option<Vec<u8>> {
    let value_of = |d: DteAddr| -> Option<Option<Vec<u8>>> {
        let (h, k, v) = entry(cfg, mem, d)?;
        (k == key).then_some(())?;
        match h.state.state {
            DteState::Valid => Some(Some(v)),
            DteState::Deleted => Some(None),
            _ => None,
        }
    };
    if let Some(&d) = committed_versions(cfg, mem, key).iter().next() {
        return value_of(d).flatten();
    }
    for c in cfg.hasher().candidates(key) {
        let w = IndexEntry(mem[region_slot(c.node, Region::Index)][c.slot as usize]);
        let Some(d) = w.dte() else { continue };
        let Some((h, k, _)) = entry(cfg, mem, d) else {
            continue;
        };
        if k == key && h.state.state.is_uncommitted() {
            if let Some(p) = IndexEntry(h.prev).dte() {
                return value_of(p).flatten();
            }
        }
    }
    None
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
        for c in 0..s.clients.len() {
            if self.runnable(s, c) {
                actions.push(Action::Step(c));
                if self.clients[c].may_crash && s.clients[c].machine.is_some() {
                    actions.push(Action::Crash(c));
                }
            }
        }
        // Timing assumption A2: a posted CAS or WRITE lands before time moves
        // on (the deadline margin is far below one tick).
        let mutation_in_flight = s.clients.iter().any(|r| {
            r.pending.iter().any(|f| {
                matches!(
                    f.wr.op,
                    Op::Cas { .. } | Op::Write { .. } | Op::LocalWrite { .. }
                )
            })
        });
        if s.ticks < self.max_ticks
            && !self.quiescent(s)
            && (self.late_landing || !mutation_in_flight)
        {
            actions.push(Action::Tick);
        }
    }

    fn next_state(&self, last: &WorldState, action: Action) -> Option<WorldState> {
        let mut s = last.clone();
        match action {
            Action::Step(c) => self.step(&mut s, c),
            Action::Tick => {
                s.clock += u64::try_from(self.tick.as_nanos()).unwrap_or(u64::MAX);
                s.ticks += 1;
            }
            Action::Crash(c) => {
                let r = &mut s.clients[c];
                r.crashed = true;
                r.machine = None;
                r.pending.clear();
            }
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut p = vec![
            Property::always("linearizable", |_, s: &WorldState| {
                s.tester.serialized_history().is_some()
            }),
            Property::always("no unexpected error", |_, s: &WorldState| {
                s.flags.unexpected.is_none()
            }),
            Property::always(
                "one committed version per key",
                |w: &World, s: &WorldState| {
                    w.keys()
                        .iter()
                        .all(|k| committed_versions(&w.cfg, &s.mem, k).len() <= 1)
                },
            ),
            Property::always("no linked entry is reused", |_, s: &WorldState| {
                !s.flags.reused_linked
            }),
            Property::always(
                "acknowledged writes survive at quiescence",
                |w: &World, s: &WorldState| {
                    if !w.quiescent(s) {
                        return true;
                    }
                    let mut t = s.tester.clone();
                    for (i, k) in w.keys().into_iter().enumerate() {
                        let v = abstract_value(&w.cfg, &s.mem, &k);
                        let id = 1_000 + i;
                        let _ = t.on_invoke(id, (k, KvOp::Get));
                        let _ = t.on_return(id, ModelRet::Get(v));
                    }
                    t.serialized_history().is_some()
                },
            ),
        ];
        if self.expect_deep_migration {
            p.push(Property::sometimes(
                "a recursive MIGRATE completed",
                |_, s: &WorldState| s.flags.deep_migration,
            ));
        }
        if self.expect_reclaim {
            p.push(Property::sometimes(
                "a write reclaimed an abandoned entry",
                |_, s: &WorldState| s.flags.reclaimed_write,
            ));
        }
        p
    }
}

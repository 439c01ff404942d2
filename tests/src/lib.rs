//! Shared support for the integration tests: a simulated cluster, recorded
//! client operations and a concurrent workload runner whose history is checked
//! for linearizability.

pub mod conformance;
pub mod late;
pub mod schedules;
pub mod step;

pub use nessie_check::{time_limit, TimeLimit};

use std::sync::Arc;
use std::thread;

use nessie_check::{check, unique_value, CheckConfig, Event, Recorder, Verdict};
use nessie_fabric_sim::{ClockMode, SimConfig, SimEndpoint, SimFabric};
use nessie_protocol::layout::DataEntryHeader;
use nessie_protocol::rng::xorshift64;
use nessie_protocol::{
    Client, ClientId, ClientState, Config, CorruptionKind, Error, Fabric, Faults, IndexEntry,
    KvClient, KvRequest, NodeId, OpStats, Region, Response,
};

/// A simulated cluster: the fabric and the configuration its clients share.
#[derive(Clone)]
pub struct SimCluster {
    /// The simulated NIC of every node.
    pub fabric: SimFabric,
    /// The deployment configuration.
    pub cfg: Arc<Config>,
}

impl SimCluster {
    /// A cluster sized for `cfg`, with real time and no latency.
    pub fn new(cfg: Config) -> SimCluster {
        SimCluster::with_sim(cfg, |s| s)
    }

    /// A cluster on manual time (advanced with `fabric.advance`). Its clients
    /// give up after 1,000 attempts: on a clock that does not move, a key
    /// blocked until a deadline would otherwise make a test spin forever.
    pub fn manual_clock(mut cfg: Config) -> SimCluster {
        if cfg.retry.max_attempts == 0 {
            cfg.retry.max_attempts = 1_000;
        }
        SimCluster::with_sim(cfg, |s| s.with_clock(ClockMode::Manual))
    }

    /// A cluster whose simulator configuration `tweak` may change.
    pub fn with_sim(cfg: Config, tweak: impl FnOnce(SimConfig) -> SimConfig) -> SimCluster {
        cfg.validate().expect("test configuration must be valid");
        let sim = tweak(SimConfig::from_topology(cfg.topology()));
        let fabric = SimFabric::new(sim).expect("simulator configuration must be valid");
        SimCluster {
            fabric,
            cfg: Arc::new(cfg),
        }
    }

    /// The word at index slot `s` of node 0 (see [`slot`]).
    pub fn index_word(&self, s: u32) -> IndexEntry {
        let a = slot(s).remote();
        IndexEntry(
            self.fabric
                .read_word(a.node, a.region, a.offset)
                .expect("the slot is in the index table"),
        )
    }

    /// Whether the data table entry `word` names is marked for recycling.
    pub fn marked_for_recycling(&self, word: IndexEntry) -> bool {
        let dte = word.dte().expect("the word names an entry");
        let header = self
            .fabric
            .read_bytes(
                dte.node(),
                Region::Data,
                self.cfg.data_tables().entry_offset(dte),
                32,
            )
            .expect("the entry is in the data table");
        DataEntryHeader::decode(&header)
            .expect("a data table entry's header")
            .recycle
            .recycle
    }

    /// Client `index` on `node`.
    pub fn client(&self, node: u16, index: u16) -> Client<SimEndpoint> {
        let ep = self.fabric.open(NodeId(node)).expect("node is up");
        Client::new(
            self.cfg.clone(),
            ClientId {
                node: NodeId(node),
                index,
            },
            ep,
        )
        .expect("client")
    }

    /// A fresh protocol state and endpoint for client `index` on `node`, for
    /// driving machines by hand with [`step::Stepper`].
    pub fn parts(&self, node: u16, index: u16) -> (ClientState, SimEndpoint) {
        let id = ClientId {
            node: NodeId(node),
            index,
        };
        let ep = self.fabric.open(NodeId(node)).expect("node is up");
        (
            ClientState::new(self.cfg.clone(), id).expect("client state"),
            ep,
        )
    }

    /// A stepper running `m` as client `index` on `node`.
    pub fn stepper<M: nessie_protocol::Machine>(
        &self,
        node: u16,
        index: u16,
        m: M,
    ) -> step::Stepper<M> {
        let (state, ep) = self.parts(node, index);
        step::Stepper::new(m, state, ep)
    }

    /// Node `node`'s agent serving its clients without storage on a thread
    /// of its own until the guard drops (docs/protocol.md §2.4).
    pub fn agent(&self, node: u16) -> nessie_systems::AgentThread {
        let ep = self.fabric.open(NodeId(node)).expect("agent endpoint");
        nessie_systems::AgentThread::start(self.cfg.clone(), ep, nessie_systems::AGENT_PERIOD)
    }

    /// Every client slot of the cluster, `clients_per_node` on each node.
    pub fn all_clients(&self) -> Vec<Client<SimEndpoint>> {
        let mut out = Vec::new();
        for i in 0..self.cfg.clients_per_node {
            for n in 0..self.cfg.nodes {
                out.push(self.client(n, i));
            }
        }
        out
    }
}

/// A recorded GET: an error recorded by what it promises
/// ([`nessie_check::Failure::of`]; a failed read is ignored by the checker).
pub fn rec_get<C: KvClient + ?Sized>(
    r: &Recorder,
    id: usize,
    c: &mut C,
    key: &[u8],
) -> Result<Option<Vec<u8>>, Error> {
    match r.call(id, c, KvRequest::Get(key))? {
        Response::Get(v) => Ok(v),
        other => Err(answered(other)),
    }
}

/// A recorded PUT: an error recorded by what it promises
/// ([`nessie_check::Failure::of`]: only an unknown outcome may have taken effect).
pub fn rec_put<C: KvClient + ?Sized>(
    r: &Recorder,
    id: usize,
    c: &mut C,
    key: &[u8],
    value: &[u8],
) -> Result<bool, Error> {
    match r.call(id, c, KvRequest::Put(key, value))? {
        Response::Put(e) => Ok(e),
        other => Err(answered(other)),
    }
}

/// A recorded DELETE: an error recorded by what it promises
/// ([`nessie_check::Failure::of`]).
pub fn rec_delete<C: KvClient + ?Sized>(
    r: &Recorder,
    id: usize,
    c: &mut C,
    key: &[u8],
) -> Result<bool, Error> {
    match r.call(id, c, KvRequest::Delete(key))? {
        Response::Delete(e) => Ok(e),
        other => Err(answered(other)),
    }
}

/// A client answered an operation with another operation's response.
fn answered(r: Response) -> Error {
    Error::corrupt(CorruptionKind::Completion, format!("answered with {r:?}"))
}

/// The value size of [`Workload::new`]: room for a unique tag
/// ([`nessie_check::unique_value`]: writer, sequence number, key
/// fingerprint).
pub const WORKLOAD_VALUE_SIZE: usize = 16;

/// A concurrent mixed workload.
#[derive(Clone, Debug)]
pub struct Workload {
    /// Operations per client.
    pub ops_per_client: usize,
    /// Number of distinct keys.
    pub keys: usize,
    /// Percent of GETs.
    pub get_pct: u32,
    /// Percent of DELETEs.
    pub delete_pct: u32,
    /// Seed of the per-client generators.
    pub seed: u64,
    /// Protocol fault switches for every client (tests of the checkers' teeth).
    pub faults: Faults,
    /// Bytes per PUT value (each value unique to its write:
    /// [`nessie_check::unique_value`]).
    pub value_size: usize,
}

impl Workload {
    /// A workload with all fault switches off and values of
    /// [`WORKLOAD_VALUE_SIZE`] bytes.
    pub fn new(
        ops_per_client: usize,
        keys: usize,
        get_pct: u32,
        delete_pct: u32,
        seed: u64,
    ) -> Workload {
        Workload {
            ops_per_client,
            keys,
            get_pct,
            delete_pct,
            seed,
            faults: Faults::default(),
            value_size: WORKLOAD_VALUE_SIZE,
        }
    }
}

/// What a workload run did.
#[derive(Debug)]
pub struct WorkloadReport {
    /// Every operation.
    pub history: Vec<Event>,
    /// Operations that failed, with their error.
    pub errors: Vec<String>,
    /// Fabric work and protocol events summed over all clients.
    pub stats: OpStats,
}

/// Runs `w` on every client of `cluster`, each in its own thread, recording
/// the history. Every value is unique to its write (client `id`, operation
/// number, key: [`nessie_check::unique_value`]), so a read identifies its
/// write, and a read of another key's entry shows.
pub fn run_workload(cluster: &SimCluster, w: &Workload) -> WorkloadReport {
    let recorder = Arc::new(Recorder::new());
    let errors = Arc::new(std::sync::Mutex::new(Vec::new()));
    let handles: Vec<_> = cluster
        .all_clients()
        .into_iter()
        .enumerate()
        .map(|(id, mut c)| {
            let (r, w, errors) = (recorder.clone(), w.clone(), errors.clone());
            thread::spawn(move || {
                c.state_mut().faults = w.faults;
                let mut s = w.seed ^ (id as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
                for n in 0..w.ops_per_client {
                    let key = format!("key-{}", xorshift64(&mut s) % w.keys as u64).into_bytes();
                    let dice = (xorshift64(&mut s) % 100) as u32;
                    let res = if dice < w.get_pct {
                        rec_get(&r, id, &mut c, &key).map(|_| ())
                    } else if dice < w.get_pct + w.delete_pct {
                        rec_delete(&r, id, &mut c, &key).map(|_| ())
                    } else {
                        let value = unique_value(&key, id as u64, n as u64, w.value_size);
                        rec_put(&r, id, &mut c, &key, &value).map(|_| ())
                    };
                    if let Err(e) = res {
                        errors.lock().unwrap().push(format!("client {id}: {e}"));
                    }
                }
                c.total_stats()
            })
        })
        .collect();
    let mut stats = OpStats::default();
    for h in handles {
        stats += h.join().expect("client thread panicked");
    }
    let errors = errors.lock().unwrap().clone();
    WorkloadReport {
        history: recorder.events(),
        errors,
        stats,
    }
}

/// One node, four index entries, two candidates per key, three clients:
/// small enough to pick keys whose candidates collide exactly as a story needs.
pub fn tiny_config() -> Config {
    Config {
        nodes: 1,
        index_slots_per_node: 4,
        candidates: 2,
        clients_per_node: 3,
        ..Config::default()
    }
}

/// Index table entry `s` of node 0.
pub fn slot(s: u32) -> nessie_protocol::IteAddr {
    nessie_protocol::IteAddr {
        node: NodeId(0),
        slot: s,
    }
}

/// Finds a key (`prefix` plus a number) whose candidates satisfy `pred`.
pub fn find_key(
    cfg: &Config,
    prefix: &str,
    pred: impl Fn(&[nessie_protocol::IteAddr]) -> bool,
) -> Vec<u8> {
    let h = cfg.hasher();
    (0..1_000_000)
        .map(|i| format!("{prefix}{i}").into_bytes())
        .find(|k| pred(&h.candidates(k)))
        .expect("a key with the wanted candidates exists")
}

/// The keys of a two-move chain in a node of four entries (`tiny_config`):
/// `[m, g, n, p]` with m's candidates slots 0 and 2, g's 2 and 3, n's 1 and
/// 2, and p's 0 and 1. Once m, g and n are written (in that order: m at 0, g
/// at 2, n at 1), p's candidates are taken and only a chain of two moves (g
/// to slot 3, then m to slot 2) frees one.
pub fn two_move_chain(cfg: &Config) -> [Vec<u8>; 4] {
    [
        find_key(cfg, "m", |k| k == [slot(0), slot(2)]),
        find_key(cfg, "g", |k| k == [slot(2), slot(3)]),
        find_key(cfg, "n", |k| k == [slot(1), slot(2)]),
        find_key(cfg, "p", |k| k == [slot(0), slot(1)]),
    ]
}

/// The keys of a one-move story in a node of four entries (`tiny_config`):
/// `[m, g, p]` with m's candidates slots 0 and 1, g's 2 and 3, and p's 0
/// and 2. Once m (at slot 0) and g (at slot 2) are written, p's insert finds
/// both its candidates taken and MIGRATEs m from slot 0 to slot 1.
pub fn one_move(cfg: &Config) -> [Vec<u8>; 3] {
    [
        find_key(cfg, "m", |k| k == [slot(0), slot(1)]),
        find_key(cfg, "g", |k| k == [slot(2), slot(3)]),
        find_key(cfg, "p", |k| k == [slot(0), slot(2)]),
    ]
}

/// Asserts the history is linearizable, printing the checker's report (and
/// the counterexample if not). An inconclusive search, a malformed history
/// and a history with nothing to check fail too, each as such (none of them
/// could have failed the check). Returns the number of operations checked.
pub fn assert_linearizable(history: &[Event]) -> usize {
    let report = check(history, &CheckConfig::default());
    eprintln!("history check: {report}");
    match report.verdict {
        Verdict::Linearizable if report.checked == 0 => {
            panic!("an empty history is no pass: nothing was checked")
        }
        Verdict::Linearizable => report.checked,
        Verdict::NotLinearizable(v) => panic!("history is not linearizable:\n{v}"),
        Verdict::Inconclusive(i) => panic!("history check gave no verdict: {i}"),
        Verdict::Malformed(m) => panic!("history is malformed: {m}"),
    }
}

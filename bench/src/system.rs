//! The systems under test: each variant (a system and its options) is started
//! on its own simulated fabric, preloaded once by its own clients, and kept
//! with its clients across the measured slices. A variant is one of the
//! key-value systems of `nessie-baselines` (Nessie, NessieSD, NessieHY,
//! Pilaf) or Cell (`nessie-cell`) in one of its search modes.

use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use nessie_baselines::{Deployment, HyOptions, KvSystem, SystemConfig};
use nessie_cell::{CellClient, CellConfig, CellDeployment, SearchMode};
use nessie_fabric_sim::{LatencyModel, SimConfig, SimEndpoint, SimFabric};
use nessie_protocol::pipeline::Pipeline;
use nessie_protocol::KvClient;
use nessie_protocol::{ClientId, Config, Error, Fabric, NodeId, OpStats};
use nessie_protocol::{Request, Response};

use nessie_systems::sizing::Footprint;
use nessie_systems::NodeSetup;

use crate::cell::CellClients;
use crate::error::BenchError;
use crate::pipe::PipeClient;
use crate::workload::{key_of, preloader, Workload};

/// A system with its options and the label reports show.
#[derive(Clone, Debug)]
pub struct Variant {
    /// What reports call it.
    pub label: String,
    /// The system shaped for its store: the systems floor's [`NodeSetup`],
    /// as `nessie node` and `nessie_systems::Connect` are given it.
    pub setup: NodeSetup,
    /// Operations each client thread keeps in flight (Nessie only; above 1
    /// a thread drives a pipeline of that many protocol clients).
    pub depth: u16,
    /// How its clients search and where they run (Cell only).
    pub cell: CellClients,
}

impl Variant {
    /// `kind` shaped by `store` with `server_workers` workers per node,
    /// labelled by the system's name.
    pub fn plain(kind: KvSystem, store: &Config, server_workers: u16) -> Variant {
        let mut sys = SystemConfig::new(kind, store.clone());
        sys.server_workers = server_workers;
        Variant {
            label: kind.name().to_string(),
            setup: NodeSetup::Kv(sys),
            depth: 1,
            cell: CellClients::default(),
        }
    }

    /// Nessie with `depth` operations in flight per client thread, labelled
    /// `nessie-d<depth>`: its store has `depth` protocol clients per thread
    /// (sharing the thread's data table entries, as they share its PUT
    /// rate). Other systems and depth 1 are returned unchanged.
    pub fn pipelined(mut self, depth: u16) -> Variant {
        if depth <= 1 {
            return self;
        }
        if let NodeSetup::Kv(sys) = &mut self.setup {
            if sys.kind != KvSystem::Nessie {
                return self;
            }
            sys.store.clients_per_node = sys.store.clients_per_node.saturating_mul(depth);
            self.label = format!("{}-d{depth}", self.label);
            self.depth = depth;
        }
        self
    }

    /// Cell configured as `cfg`, its clients as `clients`, labelled
    /// `label`.
    pub fn cell(label: &str, cfg: CellConfig, clients: CellClients) -> Variant {
        Variant {
            label: label.to_string(),
            setup: NodeSetup::cell(cfg),
            depth: 1,
            cell: clients,
        }
    }

    /// The variant with a new label, Nessie options and NessieHY options
    /// (key-value systems; a Cell variant is only relabelled).
    pub fn tuned(&self, label: &str, f: impl FnOnce(&mut Config, &mut HyOptions)) -> Variant {
        let mut v = self.clone();
        v.label = label.to_string();
        if let NodeSetup::Kv(sys) = &mut v.setup {
            f(&mut sys.store, &mut sys.hy);
        }
        v
    }

    /// Nodes of the variant's cluster.
    pub fn nodes(&self) -> u16 {
        match &self.setup {
            NodeSetup::Kv(s) => s.store.nodes,
            NodeSetup::Cell(c, _) => c.nodes,
        }
    }

    /// Client ids per node.
    pub fn clients_per_node(&self) -> u16 {
        match &self.setup {
            NodeSetup::Kv(s) => s.store.clients_per_node,
            NodeSetup::Cell(c, _) => c.clients_per_node,
        }
    }

    /// The system's name.
    pub fn system_name(&self) -> &'static str {
        self.setup.kind().name()
    }
}

/// A started system's servers, whatever the system.
pub trait Servers: Send + Sync {
    /// Pauses the server threads (they burn no CPU while another system runs).
    fn pause_servers(&self);
    /// Resumes them.
    fn resume_servers(&self);
    /// CPU time the server threads consumed.
    fn server_cpu_time(&self) -> Duration;
    /// Requests served.
    fn server_requests(&self) -> u64;
    /// Errors the servers met.
    fn server_errors(&self) -> Vec<String>;
    /// Stops the servers.
    fn stop(&mut self);
    /// Waits until background work (Cell's meganode splits) is done.
    fn settle(&self) {}
    /// What Nessie's store holds, read from its memory at rest (`None` for
    /// the other systems, whose layouts differ).
    fn footprint(&self) -> Option<Footprint> {
        None
    }
}

impl Servers for Deployment<SimFabric> {
    fn pause_servers(&self) {
        Deployment::pause_servers(self)
    }
    fn resume_servers(&self) {
        Deployment::resume_servers(self)
    }
    fn server_cpu_time(&self) -> Duration {
        Deployment::server_cpu_time(self)
    }
    fn server_requests(&self) -> u64 {
        Deployment::server_requests(self)
    }
    fn server_errors(&self) -> Vec<String> {
        Deployment::server_errors(self)
            .iter()
            .map(|e| e.to_string())
            .collect()
    }
    fn stop(&mut self) {
        Deployment::stop(self)
    }
    fn footprint(&self) -> Option<Footprint> {
        let sys = self.system();
        (sys.kind == KvSystem::Nessie).then(|| {
            Footprint::measure(&sys.store, |node, region, offset, len| {
                self.fabric().read_bytes(node, region, offset, len).ok()
            })
        })
    }
}

impl Servers for CellDeployment<SimFabric> {
    fn pause_servers(&self) {
        CellDeployment::pause_servers(self)
    }
    fn resume_servers(&self) {
        CellDeployment::resume_servers(self)
    }
    fn server_cpu_time(&self) -> Duration {
        CellDeployment::server_cpu_time(self)
    }
    fn server_requests(&self) -> u64 {
        CellDeployment::server_requests(self)
    }
    fn server_errors(&self) -> Vec<String> {
        CellDeployment::server_errors(self)
            .iter()
            .map(|e| e.to_string())
            .collect()
    }
    fn stop(&mut self) {
        CellDeployment::stop(self)
    }
    fn settle(&self) {
        self.wait_idle(Duration::from_secs(60));
    }
}

/// A client of any system.
pub enum AnyClient {
    /// A key-value system's client.
    Kv(Box<dyn KvClient>),
    /// A Cell client.
    Cell(Box<CellClient<SimEndpoint>>),
    /// A Nessie client thread with several operations in flight.
    Pipe(Box<PipeClient>),
}

impl AnyClient {
    /// GET (or, with `search` and a system that has it, a search): whether
    /// the key was found.
    pub fn get(&mut self, key: &[u8], search: bool) -> Result<bool, Error> {
        match self {
            AnyClient::Kv(c) => c.get(key).map(|v| v.is_some()),
            AnyClient::Cell(c) if search => c.contains(key),
            AnyClient::Cell(c) => c.get(key).map(|v| v.is_some()),
            AnyClient::Pipe(p) => match p.one(Request::Get(key.to_vec()))? {
                Response::Get(v) => Ok(v.is_some()),
                _ => Ok(true),
            },
        }
    }

    /// PUT.
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> Result<bool, Error> {
        match self {
            AnyClient::Kv(c) => c.put(key, value),
            AnyClient::Cell(c) => c.put(key, value),
            AnyClient::Pipe(p) => match p.one(Request::Put(key.to_vec(), value.to_vec()))? {
                Response::Put(existed) => Ok(existed),
                _ => Ok(true),
            },
        }
    }

    /// Whether the client's system has scans (Cell).
    pub fn has_scans(&self) -> bool {
        matches!(self, AnyClient::Cell(_))
    }

    /// A scan of `n` entries from `key`: entries found; `None` for a
    /// system without scans.
    pub fn scan(&mut self, key: &[u8], n: usize) -> Option<Result<usize, Error>> {
        match self {
            AnyClient::Kv(_) | AnyClient::Pipe(_) => None,
            AnyClient::Cell(c) => Some(c.scan(key, None, n).map(|v| v.len())),
        }
    }

    /// Fabric work of the last call.
    pub fn last_stats(&self) -> OpStats {
        match self {
            AnyClient::Kv(c) => c.last_stats(),
            AnyClient::Cell(c) => nessie_protocol::KvClient::last_stats(c.as_ref()),
            AnyClient::Pipe(p) => p.last_stats(),
        }
    }

    /// Cache hits so far.
    pub fn cache_hits(&self) -> u64 {
        match self {
            AnyClient::Kv(c) => c.cache_hits(),
            AnyClient::Cell(c) => c.stats().node_cache_hits,
            AnyClient::Pipe(p) => p.cache_hits(),
        }
    }

    /// Meganode searches done by servers and by the client so far (Cell).
    pub fn searches(&self) -> (u64, u64) {
        match self {
            AnyClient::Kv(_) | AnyClient::Pipe(_) => (0, 0),
            AnyClient::Cell(c) => {
                let s = c.stats();
                (s.server_searches, s.client_searches)
            }
        }
    }

    /// Sets a Cell client's search mode.
    pub fn set_mode(&mut self, mode: SearchMode) {
        if let AnyClient::Cell(c) = self {
            c.set_mode(mode);
        }
    }
}

/// A started, preloaded system.
pub struct Started {
    /// The variant.
    pub variant: Variant,
    /// The deployment on its simulated fabric.
    pub deployment: Box<dyn Servers>,
    /// Its clients, in node-major order.
    pub clients: Vec<(ClientId, AnyClient)>,
    /// Why the preload failed, if it did (the system is then not measured).
    pub failed: Option<String>,
}

impl Started {
    /// Starts `variant` with `latency_us` of simulated NIC latency and all its
    /// clients; servers are left paused.
    pub fn start(variant: Variant, latency_us: f64) -> Result<Started, BenchError> {
        let latency = LatencyModel::per_op(Duration::from_nanos((latency_us * 1000.0) as u64));
        let start_err = |source| BenchError::Start {
            system: variant.label.clone(),
            source,
        };
        let mut clients = Vec::new();
        let deployment: Box<dyn Servers> = match &variant.setup {
            NodeSetup::Kv(sys) => {
                let sim = SimConfig::from_topology(sys.topology()).with_latency(latency);
                let fabric = SimFabric::new(sim).map_err(|e| BenchError::Sim(e.to_string()))?;
                let d = Deployment::start(sys.clone(), fabric).map_err(start_err)?;
                let depth = variant.depth.max(1);
                for n in 0..sys.store.nodes {
                    if depth > 1 {
                        let node = NodeId(n);
                        let cfg = std::sync::Arc::new(sys.store.clone());
                        for t in 0..sys.store.clients_per_node / depth {
                            let ep = d.fabric().open(node).map_err(|e| start_err(e.into()))?;
                            let p = Pipeline::new(cfg.clone(), node, t * depth, depth, ep)
                                .map_err(start_err)?;
                            let id = ClientId {
                                node,
                                index: t * depth,
                            };
                            clients.push((id, AnyClient::Pipe(Box::new(PipeClient::new(p)))));
                        }
                        continue;
                    }
                    for i in 0..sys.store.clients_per_node {
                        let id = ClientId {
                            node: NodeId(n),
                            index: i,
                        };
                        clients.push((id, AnyClient::Kv(d.client(id).map_err(start_err)?)));
                    }
                }
                Box::new(d)
            }
            NodeSetup::Cell(cfg, _) => {
                let spec = &variant.cell;
                let sim = SimConfig::from_topology(cfg.topology()).with_latency(latency);
                let fabric = SimFabric::new(sim).map_err(|e| BenchError::Sim(e.to_string()))?;
                let d = CellDeployment::start(CellConfig::clone(cfg), fabric).map_err(start_err)?;
                for n in spec.client_from..cfg.nodes {
                    for i in 0..cfg.clients_per_node {
                        let id = ClientId {
                            node: NodeId(n),
                            index: i,
                        };
                        let mut c = d.client(id).map_err(start_err)?;
                        c.set_mode(spec.mode);
                        clients.push((id, AnyClient::Cell(Box::new(c))));
                    }
                }
                Box::new(d)
            }
        };
        deployment.pause_servers();
        Ok(Started {
            variant,
            deployment,
            clients,
            failed: None,
        })
    }

    /// Stores every key of `w` once, each by the client `preloader` names
    /// (for Cell, whose clients may run on fewer nodes, by client `k mod n`).
    /// A failure marks the system failed (it is reported, not measured).
    pub fn preload(&mut self, w: &Workload) {
        let nodes = self.variant.nodes();
        let per_node = self.variant.clients_per_node();
        let cell = matches!(self.variant.setup, NodeSetup::Cell(..));
        let depth = self.variant.depth.max(1);
        let total = self.clients.len() as u64;
        self.deployment.resume_servers();
        let abort = AtomicBool::new(false);
        let value = vec![b'v'; w.value_size as usize];
        let errors: Vec<String> = thread::scope(|s| {
            let handles: Vec<_> = self
                .clients
                .iter_mut()
                .enumerate()
                .map(|(ci, (id, c))| {
                    let (abort, value) = (&abort, &value);
                    let id = *id;
                    s.spawn(move || -> Option<String> {
                        let mine = |k: u64| {
                            if cell {
                                k % total.max(1) == ci as u64
                            } else {
                                // A pipeline preloads the keys of its clients.
                                let (n, i) = preloader(w, k, nodes, per_node);
                                n == id.node.0 && i / depth == id.index / depth
                            }
                        };
                        if let AnyClient::Pipe(p) = c {
                            // All at once, so that they spread over the
                            // pipeline's clients (and their data tables).
                            let reqs = (0..w.keys).filter(|&k| mine(k)).map(|k| {
                                let len = w.value_len(w.seed, k);
                                Request::Put(key_of(k, w.key_size), value[..len].to_vec())
                            });
                            return p.run_all(reqs).into_iter().find_map(|r| {
                                r.err().map(|e| {
                                    abort.store(true, Ordering::Relaxed);
                                    format!("preload by {id}: {e}")
                                })
                            });
                        }
                        for k in 0..w.keys {
                            if !mine(k) {
                                continue;
                            }
                            if abort.load(Ordering::Relaxed) {
                                return None;
                            }
                            let len = w.value_len(w.seed, k);
                            if let Err(e) = c.put(&key_of(k, w.key_size), &value[..len]) {
                                abort.store(true, Ordering::Relaxed);
                                let dbg = match c {
                                    AnyClient::Cell(c) => format!("{:?}", c.stats()),
                                    _ => String::new(),
                                };
                                return Some(format!("preload by {id}: {e} {dbg}"));
                            }
                        }
                        None
                    })
                })
                .collect();
            handles
                .into_iter()
                .filter_map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Some("preload thread panicked".into()))
                })
                .collect()
        });
        self.deployment.settle();
        self.deployment.pause_servers();
        if let Some(e) = errors.into_iter().next() {
            self.failed = Some(e);
        }
    }
}

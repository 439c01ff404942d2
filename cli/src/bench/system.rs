//! The systems under test: each variant (a system and its options) is started
//! on its own simulated fabric, preloaded once by its own clients, and kept
//! with its clients across the measured slices. A variant is one of the
//! key-value systems of `nessie-baselines` (Nessie, NessieSD, NessieHY,
//! Pilaf) or Cell (`nessie-cell`) in one of its search modes.

use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use nessie_baselines::{Deployment, HyOptions, KvClient, SystemConfig, SystemKind};
use nessie_cell::{CellClient, CellDeployment, SearchMode};
use nessie_fabric_sim::{LatencyModel, SimConfig, SimEndpoint, SimFabric};
use nessie_protocol::{ClientId, Config, Error, NodeId, OpStats};

use super::cell::CellSpec;
use super::error::BenchError;
use super::workload::{key_of, preloader, Workload};

/// Which system a variant runs.
#[derive(Clone, Debug)]
pub enum SystemSpec {
    /// One of the key-value systems of `nessie-baselines`.
    Kv(SystemConfig),
    /// Cell.
    Cell(Box<CellSpec>),
}

/// A system with its options and the label reports show.
#[derive(Clone, Debug)]
pub struct Variant {
    /// What reports call it.
    pub label: String,
    /// The system and its configuration.
    pub sys: SystemSpec,
}

impl Variant {
    /// `kind` shaped by `store` with `server_workers` workers per node,
    /// labelled by the system's name.
    pub fn plain(kind: SystemKind, store: &Config, server_workers: u16) -> Variant {
        let mut sys = SystemConfig::new(kind, store.clone());
        sys.server_workers = server_workers;
        Variant {
            label: kind.name().to_string(),
            sys: SystemSpec::Kv(sys),
        }
    }

    /// A Cell variant labelled `label`.
    pub fn cell(label: &str, spec: CellSpec) -> Variant {
        Variant {
            label: label.to_string(),
            sys: SystemSpec::Cell(Box::new(spec)),
        }
    }

    /// The variant with a new label, Nessie options and NessieHY options
    /// (key-value systems; a Cell variant is only relabelled).
    pub fn tuned(&self, label: &str, f: impl FnOnce(&mut Config, &mut HyOptions)) -> Variant {
        let mut v = self.clone();
        v.label = label.to_string();
        if let SystemSpec::Kv(sys) = &mut v.sys {
            f(&mut sys.store, &mut sys.hy);
        }
        v
    }

    /// Nodes of the variant's cluster.
    pub fn nodes(&self) -> u16 {
        match &self.sys {
            SystemSpec::Kv(s) => s.store.nodes,
            SystemSpec::Cell(c) => c.cfg.nodes,
        }
    }

    /// The system's name.
    pub fn system_name(&self) -> &'static str {
        match &self.sys {
            SystemSpec::Kv(s) => s.kind.name(),
            SystemSpec::Cell(_) => "cell",
        }
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
}

impl AnyClient {
    /// GET (or, with `search` and a system that has it, a search): whether
    /// the key was found.
    pub fn get(&mut self, key: &[u8], search: bool) -> Result<bool, Error> {
        match self {
            AnyClient::Kv(c) => c.get(key).map(|v| v.is_some()),
            AnyClient::Cell(c) if search => c.contains(key),
            AnyClient::Cell(c) => c.get(key).map(|v| v.is_some()),
        }
    }

    /// PUT.
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> Result<bool, Error> {
        match self {
            AnyClient::Kv(c) => c.put(key, value),
            AnyClient::Cell(c) => c.put(key, value),
        }
    }

    /// A scan of `n` entries from `key`: entries found; `None` for a
    /// system without scans.
    pub fn scan(&mut self, key: &[u8], n: usize) -> Option<Result<usize, Error>> {
        match self {
            AnyClient::Kv(_) => None,
            AnyClient::Cell(c) => Some(c.scan(key, None, n).map(|v| v.len())),
        }
    }

    /// Fabric work of the last call.
    pub fn last_stats(&self) -> OpStats {
        match self {
            AnyClient::Kv(c) => c.last_stats(),
            AnyClient::Cell(c) => nessie_baselines::KvClient::last_stats(c.as_ref()),
        }
    }

    /// Cache hits so far.
    pub fn cache_hits(&self) -> u64 {
        match self {
            AnyClient::Kv(c) => c.cache_hits(),
            AnyClient::Cell(c) => c.stats().node_cache_hits,
        }
    }

    /// Meganode searches done by servers and by the client so far (Cell).
    pub fn searches(&self) -> (u64, u64) {
        match self {
            AnyClient::Kv(_) => (0, 0),
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
        let deployment: Box<dyn Servers> = match &variant.sys {
            SystemSpec::Kv(sys) => {
                let sim = SimConfig::from_topology(sys.topology()).with_latency(latency);
                let fabric = SimFabric::new(sim).map_err(|e| BenchError::Sim(e.to_string()))?;
                let d = Deployment::start(sys.clone(), fabric).map_err(start_err)?;
                for n in 0..sys.store.nodes {
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
            SystemSpec::Cell(spec) => {
                let sim = SimConfig::from_topology(spec.cfg.topology()).with_latency(latency);
                let fabric = SimFabric::new(sim).map_err(|e| BenchError::Sim(e.to_string()))?;
                let d = CellDeployment::start(spec.cfg.clone(), fabric).map_err(start_err)?;
                for n in spec.client_from..spec.cfg.nodes {
                    for i in 0..spec.cfg.clients_per_node {
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

    /// Stores every key of `w` once, each by the client [`preloader`] names
    /// (for Cell, whose clients may run on fewer nodes, by client `k mod n`).
    /// A failure marks the system failed (it is reported, not measured).
    pub fn preload(&mut self, w: &Workload) {
        let nodes = self.variant.nodes();
        let per_node = match &self.variant.sys {
            SystemSpec::Kv(s) => s.store.clients_per_node,
            SystemSpec::Cell(c) => c.cfg.clients_per_node,
        };
        let cell = matches!(self.variant.sys, SystemSpec::Cell(_));
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
                        for k in 0..w.keys {
                            let mine = if cell {
                                k % total.max(1) == ci as u64
                            } else {
                                preloader(w, k, nodes, per_node) == (id.node.0, id.index)
                            };
                            if !mine {
                                continue;
                            }
                            if abort.load(Ordering::Relaxed) {
                                return None;
                            }
                            if let Err(e) = c.put(&key_of(k, w.key_size), value) {
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

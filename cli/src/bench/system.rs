//! The systems under test: each variant (a system and its options) is started
//! on its own simulated fabric, preloaded once by its own clients, and kept
//! with its clients across the measured slices.

use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use nessie_baselines::{Deployment, HyOptions, KvClient, SystemConfig, SystemKind};
use nessie_fabric_sim::{LatencyModel, SimConfig, SimFabric};
use nessie_protocol::{ClientId, Config, NodeId};

use super::error::BenchError;
use super::workload::{key_of, preloader, Workload};

/// A system with its options and the label reports show.
#[derive(Clone, Debug)]
pub struct Variant {
    /// What reports call it.
    pub label: String,
    /// The system and its configuration.
    pub sys: SystemConfig,
}

impl Variant {
    /// `kind` shaped by `store` with `server_workers` workers per node,
    /// labelled by the system's name.
    pub fn plain(kind: SystemKind, store: &Config, server_workers: u16) -> Variant {
        let mut sys = SystemConfig::new(kind, store.clone());
        sys.server_workers = server_workers;
        Variant {
            label: kind.name().to_string(),
            sys,
        }
    }

    /// The variant with a new label, Nessie options and NessieHY options.
    pub fn tuned(&self, label: &str, f: impl FnOnce(&mut Config, &mut HyOptions)) -> Variant {
        let mut v = self.clone();
        v.label = label.to_string();
        f(&mut v.sys.store, &mut v.sys.hy);
        v
    }
}

/// A started, preloaded system.
pub struct Started {
    /// The variant.
    pub variant: Variant,
    /// The deployment on its simulated fabric.
    pub deployment: Deployment<SimFabric>,
    /// One client per (node, index), in node-major order.
    pub clients: Vec<(ClientId, Box<dyn KvClient>)>,
    /// Why the preload failed, if it did (the system is then not measured).
    pub failed: Option<String>,
}

impl Started {
    /// Starts `variant` with `latency_us` of simulated NIC latency and all its
    /// clients; servers are left paused.
    pub fn start(variant: Variant, latency_us: f64) -> Result<Started, BenchError> {
        let latency = LatencyModel::per_op(Duration::from_nanos((latency_us * 1000.0) as u64));
        let sim = SimConfig::from_topology(variant.sys.topology()).with_latency(latency);
        let fabric = SimFabric::new(sim).map_err(|e| BenchError::Sim(e.to_string()))?;
        let start_err = |source| BenchError::Start {
            system: variant.label.clone(),
            source,
        };
        let deployment = Deployment::start(variant.sys.clone(), fabric).map_err(start_err)?;
        let cfg = &variant.sys.store;
        let mut clients = Vec::new();
        for n in 0..cfg.nodes {
            for i in 0..cfg.clients_per_node {
                let id = ClientId {
                    node: NodeId(n),
                    index: i,
                };
                clients.push((id, deployment.client(id).map_err(start_err)?));
            }
        }
        deployment.pause_servers();
        Ok(Started {
            variant,
            deployment,
            clients,
            failed: None,
        })
    }

    /// Stores every key of `w` once, each by the client [`preloader`] names.
    /// A failure marks the system failed (it is reported, not measured).
    pub fn preload(&mut self, w: &Workload) {
        let cfg = self.variant.sys.store.clone();
        self.deployment.resume_servers();
        let abort = AtomicBool::new(false);
        let value = vec![b'v'; w.value_size as usize];
        let errors: Vec<String> = thread::scope(|s| {
            let handles: Vec<_> = self
                .clients
                .iter_mut()
                .map(|(id, c)| {
                    let (abort, value) = (&abort, &value);
                    let id = *id;
                    s.spawn(move || -> Option<String> {
                        for k in 0..w.keys {
                            if preloader(w, k, cfg.nodes, cfg.clients_per_node)
                                != (id.node.0, id.index)
                            {
                                continue;
                            }
                            if abort.load(Ordering::Relaxed) {
                                return None;
                            }
                            if let Err(e) = c.put(&key_of(k, w.key_size), value) {
                                abort.store(true, Ordering::Relaxed);
                                return Some(format!("preload by {id}: {e}"));
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
        self.deployment.pause_servers();
        if let Some(e) = errors.into_iter().next() {
            self.failed = Some(e);
        }
    }
}

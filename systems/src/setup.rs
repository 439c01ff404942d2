//! [`NodeSetup`]: one of the six systems shaped for a cluster's store, as
//! every node of a deployment is given it alike, and what one node's
//! process does with it on any fabric: start its server side
//! ([`NodeSetup::start`]: a key-value system's server workers, or Cell's
//! server node) and run the workload through its clients
//! ([`NodeSetup::run`]). `nessie node` (feature `verbs`) is this over the
//! verbs fabric; the tests below are this over the simulated one, for every
//! [`SystemKind`].

use std::sync::Arc;
use std::time::Duration;

use nessie_baselines::{HyOptions, KvSystem, SystemConfig};
use nessie_cell::{CellConfig, CellNode};
use nessie_exec::ServerPool;
use nessie_protocol::{Config, Error, Fabric, NodeId, Topology};
use nessie_workload::{ServerLoad, WorkloadError, WorkloadReport, WorkloadSpec};

use crate::agent::{AgentThread, AGENT_PERIOD};
use crate::cell::{cell_config, run_cell, start_cell_node, CellShape};
use crate::kind::SystemKind;
use crate::node::{run_system, start_node_servers, SystemError};

/// A system shaped for a cluster's store (module documentation).
#[derive(Clone, Debug)]
pub enum NodeSetup {
    /// One of the key-value systems of `nessie-baselines`.
    Kv(SystemConfig),
    /// Cell, with the shape every node is given alike.
    Cell(Arc<CellConfig>, CellShape),
}

impl NodeSetup {
    /// `kind` on the cluster whose protocol configuration is `store`, with
    /// `server_workers` per node, NessieHY's options `hy` (NessieHY's only)
    /// and Cell's `shape` (Cell's only; its `server_workers` is replaced).
    pub fn new(
        kind: SystemKind,
        store: Config,
        server_workers: u16,
        hy: HyOptions,
        shape: CellShape,
    ) -> Result<NodeSetup, SystemError> {
        if server_workers == 0 {
            return Err(SystemError::Store(Error::Config(
                nessie_protocol::ConfigError::OutOfRange {
                    field: "server_workers",
                    value: "0".into(),
                    reason: "at least 1",
                },
            )));
        }
        let Some(kv) = kind.kv() else {
            let shape = CellShape {
                server_workers,
                ..shape
            };
            let cfg = cell_config(&store, &shape);
            cfg.validate()?;
            return Ok(NodeSetup::Cell(Arc::new(cfg), shape));
        };
        let sys = SystemConfig {
            server_workers,
            hy,
            ..SystemConfig::new(kv, store)
        };
        sys.validate()?;
        Ok(NodeSetup::Kv(sys))
    }

    /// Cell configured whole, as the benchmark and the simulator size it
    /// for a known workload (`nessie_cell::Sizing`), its shape read back
    /// from the configuration.
    pub fn cell(cfg: CellConfig) -> NodeSetup {
        let shape = CellShape {
            meganode_nodes: cfg.meganode_nodes,
            regions_per_node: cfg.regions_per_node,
            server_workers: cfg.server_workers,
        };
        NodeSetup::Cell(Arc::new(cfg), shape)
    }

    /// The system.
    pub fn kind(&self) -> SystemKind {
        match self {
            NodeSetup::Kv(s) => s.kind.into(),
            NodeSetup::Cell(..) => SystemKind::Cell,
        }
    }

    /// The regions every node registers for it.
    pub fn topology(&self) -> Topology {
        match self {
            NodeSetup::Kv(s) => s.topology(),
            NodeSetup::Cell(c, _) => c.topology(),
        }
    }

    /// What the nodes' fingerprint carries of it (nodes with different
    /// tags refuse each other): the system and the options that change its
    /// memory layout (NessieHY's filter bits, Cell's shape); `None` for
    /// Nessie, whose cluster file is its own.
    pub fn tag(&self) -> Option<String> {
        match self {
            NodeSetup::Kv(s) if s.kind == KvSystem::Nessie => None,
            NodeSetup::Kv(s) if s.kind == KvSystem::NessieHy && s.hy.filter_bits => {
                Some(format!("{}+filter-bits", s.kind))
            }
            NodeSetup::Kv(s) => Some(s.kind.to_string()),
            NodeSetup::Cell(_, shape) => Some(shape.tag()),
        }
    }

    /// Endpoints this node's server threads keep open beside its clients'
    /// (each with a queue pair to every node): none for Nessie and RACE,
    /// one per worker for NessieSD, NessieHY and Pilaf, and for Cell one
    /// per worker and its maintenance thread's.
    pub fn server_endpoints(&self) -> u16 {
        match self {
            NodeSetup::Kv(s) if !s.kind.has_servers() => 0,
            NodeSetup::Kv(s) => s.server_workers,
            NodeSetup::Cell(c, _) => c.server_workers.saturating_add(1),
        }
    }

    /// Server worker threads per node (none for Nessie and RACE).
    pub fn server_workers(&self) -> u16 {
        match self {
            NodeSetup::Kv(s) if !s.kind.has_servers() => 0,
            NodeSetup::Kv(s) => s.server_workers,
            NodeSetup::Cell(c, _) => c.server_workers,
        }
    }

    /// Checks `spec` against the system's limits (before anything dials
    /// the other nodes).
    pub fn check(&self, spec: &WorkloadSpec) -> Result<(), WorkloadError> {
        match self {
            NodeSetup::Kv(s) => nessie_workload::check(spec, &s.store),
            NodeSetup::Cell(c, _) => nessie_workload::check(spec, &**c),
        }
    }

    /// Checks `fabric` and starts `node`'s server side: a server-driven
    /// system's workers (none for Nessie), or Cell's server node (node 0
    /// also initialises the region directory).
    pub fn start<F>(&self, fabric: &F, node: NodeId) -> Result<NodeServers, SystemError>
    where
        F: Fabric,
        F::Endpoint: 'static,
    {
        Ok(match self {
            NodeSetup::Kv(s) if s.kind == KvSystem::Nessie && s.store.pure_clients_per_node > 0 => {
                // Check the regions as for any system, then the agent.
                start_node_servers(s, fabric, node)?;
                let ep = fabric.open(node).map_err(Error::Fabric)?;
                let cfg = Arc::new(s.store.clone());
                NodeServers::Agent(AgentThread::start(cfg, ep, AGENT_PERIOD))
            }
            NodeSetup::Kv(s) => NodeServers::Kv(start_node_servers(s, fabric, node)?),
            NodeSetup::Cell(c, _) => NodeServers::Cell(start_cell_node(c, fabric, node)?),
        })
    }

    /// Runs `spec` from `node` through the system's clients; `servers`
    /// (this process's, from [`NodeSetup::start`]) enter the report's CPU
    /// time and requests.
    pub fn run<F>(
        &self,
        fabric: &F,
        node: NodeId,
        spec: &WorkloadSpec,
        servers: &NodeServers,
    ) -> Result<WorkloadReport, SystemError>
    where
        F: Fabric,
        F::Endpoint: 'static,
    {
        let mine = servers.load();
        match self {
            NodeSetup::Kv(s) => run_system(fabric, node, s, spec, &mine),
            NodeSetup::Cell(c, _) => run_cell(fabric, node, c, spec, &mine),
        }
    }
}

/// The server side one node's process runs for its system.
pub enum NodeServers {
    /// A server-driven system's workers (`None`: Nessie has none).
    Kv(Option<ServerPool>),
    /// A Nessie node's agent for its clients without storage (it serves no
    /// request: it binds their windows and takes back their shares).
    Agent(AgentThread),
    /// Cell's server node: workers and maintenance thread.
    Cell(CellNode),
}

/// What a node's server threads did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ServerSummary {
    /// Their CPU time.
    pub cpu: Duration,
    /// Requests served.
    pub requests: u64,
    /// Errors the handlers reported (the first 64).
    pub errors: Vec<Error>,
}

impl NodeServers {
    /// The server threads, as the workload's report counts them.
    pub fn load(&self) -> Vec<&dyn ServerLoad> {
        match self {
            NodeServers::Kv(p) => p.iter().map(|p| p as &dyn ServerLoad).collect(),
            NodeServers::Agent(_) => Vec::new(),
            NodeServers::Cell(c) => vec![c as &dyn ServerLoad],
        }
    }

    /// What they did so far (`None`: no server thread runs here).
    pub fn summary(&self) -> Option<ServerSummary> {
        match self {
            NodeServers::Kv(None) | NodeServers::Agent(_) => None,
            NodeServers::Kv(Some(p)) => Some(ServerSummary {
                cpu: p.cpu_time(),
                requests: p.requests(),
                errors: p.errors(),
            }),
            NodeServers::Cell(c) => Some(ServerSummary {
                cpu: c.cpu_time(),
                requests: c.requests(),
                errors: c.errors(),
            }),
        }
    }

    /// Cell's server node, if this is one.
    pub fn cell(&self) -> Option<&CellNode> {
        match self {
            NodeServers::Cell(c) => Some(c),
            NodeServers::Kv(_) | NodeServers::Agent(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    //! Every system through the one setup, on the simulated fabric: what a
    //! node process does, for each [`SystemKind`].

    use super::*;
    use nessie_fabric_sim::{SimConfig, SimFabric};
    use nessie_workload::testing::spec;

    use crate::testing::small_store as store;

    fn shape() -> CellShape {
        CellShape {
            meganode_nodes: 16,
            ..CellShape::default()
        }
    }

    #[test]
    fn every_system_starts_and_runs_the_workload_through_one_setup() {
        for kind in SystemKind::ALL {
            let setup = NodeSetup::new(kind, store(), 1, HyOptions::default(), shape()).unwrap();
            assert_eq!(setup.kind(), kind);
            assert_eq!(setup.tag().is_none(), kind == SystemKind::Nessie, "{kind}");
            let f = SimFabric::new(SimConfig::from_topology(setup.topology())).unwrap();
            let servers: Vec<NodeServers> = (0..2)
                .map(|n| setup.start(&f, NodeId(n)).unwrap())
                .collect();
            assert_eq!(servers[0].summary().is_some(), kind.has_servers(), "{kind}");
            assert_eq!(setup.server_endpoints() > 0, kind.has_servers(), "{kind}");
            let s = WorkloadSpec {
                clients: 1,
                keys: 8,
                max_ops: 20,
                ..spec()
            };
            setup.check(&s).unwrap();
            let r = setup.run(&f, NodeId(0), &s, &servers[0]).unwrap();
            let ops: u64 = r.kinds.iter().map(|k| k.ops).sum();
            assert_eq!(ops, 20, "{kind}: {r}");
            assert_eq!(r.system, kind.name());
        }
    }

    #[test]
    fn every_system_runs_ycsbs_workloads_and_refuses_scans_it_has_not() {
        use nessie_workload::Ycsb;
        for kind in SystemKind::ALL {
            let setup = NodeSetup::new(kind, store(), 1, HyOptions::default(), shape()).unwrap();
            let f = SimFabric::new(SimConfig::from_topology(setup.topology())).unwrap();
            let servers: Vec<NodeServers> = (0..2)
                .map(|n| setup.start(&f, NodeId(n)).unwrap())
                .collect();
            for w in Ycsb::ALL {
                let s = WorkloadSpec {
                    clients: 1,
                    keys: 16,
                    max_ops: 30,
                    ycsb: Some(w),
                    scan_len: 5,
                    ..spec()
                };
                if w.scans() && kind != SystemKind::Cell {
                    assert!(setup.check(&s).is_err(), "{kind} {w}: no range scans");
                    continue;
                }
                setup.check(&s).unwrap();
                let r = setup.run(&f, NodeId(0), &s, &servers[0]).unwrap();
                let ops: u64 = r.kinds.iter().map(|k| k.ops).sum();
                assert_eq!(ops, 30, "{kind} {w}: {r}");
                assert!(r.errors.is_empty(), "{kind} {w}: {r}");
            }
        }
    }

    #[test]
    fn options_of_the_wrong_shape_are_refused_and_tags_name_the_layout() {
        let zero = NodeSetup::new(SystemKind::Pilaf, store(), 0, HyOptions::default(), shape());
        assert!(zero.is_err(), "no server workers");
        let tiny = CellShape {
            meganode_nodes: 4,
            ..shape()
        };
        assert!(NodeSetup::new(SystemKind::Cell, store(), 1, HyOptions::default(), tiny).is_err());
        let filter = HyOptions {
            filter_bits: true,
            ..HyOptions::default()
        };
        let hy = NodeSetup::new(SystemKind::NessieHy, store(), 1, filter, shape()).unwrap();
        assert_eq!(hy.tag().as_deref(), Some("nessie-hy+filter-bits"));
        let cell = NodeSetup::new(SystemKind::Cell, store(), 3, HyOptions::default(), shape());
        let cell = cell.unwrap();
        assert_eq!(cell.server_workers(), 3);
        assert_eq!(
            cell.server_endpoints(),
            4,
            "three workers and the maintenance thread"
        );
        assert_eq!(cell.tag(), Some(shape().tag()));
    }
}

//! [`Deployment`]: one of the four compared systems started on a fabric, with
//! the server workers of the server-driven designs, handing out
//! [`KvClient`]s. Every system takes its shape from Nessie's [`Config`]
//! (nodes, clients per node, index table entries and data table entries per
//! node, key and value limits, candidates, filter bits, expiration, timeouts),
//! so that a comparison changes the design and nothing else.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use nessie_protocol::{Client, ClientId, Config, Error, Fabric, NodeId, OpStats, Topology};

use crate::client::ClientLogic;
use crate::coupled::{CoupledLayout, CoupledTable};
use crate::hy::{HyClient, HyOptions};
use crate::pilaf::{PilafClient, PilafLayout, PilafTable};
use crate::sd::SdClient;
use nessie_exec::rpc::RpcFaults;
use nessie_exec::server::ServerPool;
use nessie_protocol::KvClient;

/// The four key-value systems a [`Deployment`] starts: Nessie and the
/// Nessie papers' three baselines. The one name of "which system" above
/// this crate, Cell included, is `nessie_systems::SystemKind`; this is the
/// part of it this crate deploys.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum KvSystem {
    /// Nessie: fully client-driven, decoupled index and data tables.
    Nessie,
    /// NessieSD: server-driven (HERD-like), partially coupled.
    NessieSd,
    /// NessieHY: client-driven GETs, server-driven PUT/DELETE (FaRM-like).
    NessieHy,
    /// Pilaf: self-verifying cuckoo hash, client GETs, server PUT/DELETE.
    Pilaf,
}

impl KvSystem {
    /// All four, in the order reports list them.
    pub const ALL: [KvSystem; 4] = [
        KvSystem::Nessie,
        KvSystem::NessieSd,
        KvSystem::NessieHy,
        KvSystem::Pilaf,
    ];

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            KvSystem::Nessie => "nessie",
            KvSystem::NessieSd => "nessie-sd",
            KvSystem::NessieHy => "nessie-hy",
            KvSystem::Pilaf => "pilaf",
        }
    }

    /// Whether the system runs server workers.
    pub fn has_servers(self) -> bool {
        self != KvSystem::Nessie
    }
}

impl fmt::Display for KvSystem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which system to start, shaped by a Nessie [`Config`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SystemConfig {
    /// The system.
    pub kind: KvSystem,
    /// The shape shared by all systems (and Nessie's own options).
    pub store: Config,
    /// Server worker threads per node (server-driven systems).
    pub server_workers: u16,
    /// NessieHY's GET optimisations.
    pub hy: HyOptions,
}

impl SystemConfig {
    /// `kind` shaped by `store`, one server worker per node, HY options off.
    pub fn new(kind: KvSystem, store: Config) -> SystemConfig {
        SystemConfig {
            kind,
            store,
            server_workers: 1,
            hy: HyOptions::default(),
        }
    }

    /// The partially-coupled layout (NessieSD and NessieHY).
    pub fn coupled(&self) -> CoupledLayout {
        let filter = match self.kind {
            KvSystem::NessieHy if !self.hy.filter_bits => 0,
            _ => self.store.filter_bits,
        };
        CoupledLayout::new(&self.store, filter)
    }

    /// The regions a fabric must provide for this system.
    pub fn topology(&self) -> Topology {
        match self.kind {
            KvSystem::Nessie => self.store.topology(),
            KvSystem::NessieSd | KvSystem::NessieHy => Topology {
                nodes: self.store.nodes,
                index_slots_per_node: 1,
                data_bytes_per_node: self.coupled().region_bytes(),
            },
            KvSystem::Pilaf => Topology {
                nodes: self.store.nodes,
                index_slots_per_node: 1,
                data_bytes_per_node: PilafLayout::new(&self.store).region_bytes(),
            },
        }
    }

    /// Starts the server workers of one `node` on `fabric` (`None` for
    /// Nessie, which has none). A deployment with one process per machine
    /// calls this in each node's process; [`Deployment`] calls it for every
    /// node in one process.
    pub fn start_node_servers<F>(
        &self,
        fabric: &F,
        node: NodeId,
    ) -> Result<Option<ServerPool>, Error>
    where
        F: Fabric,
        F::Endpoint: 'static,
    {
        let cfg = &self.store;
        let (workers, cpn) = (self.server_workers, cfg.clients_per_node);
        let pool = match self.kind {
            KvSystem::Nessie => return Ok(None),
            KvSystem::NessieSd | KvSystem::NessieHy => {
                let layout = self.coupled();
                let table = Arc::new(CoupledTable::new(layout, node, cfg));
                ServerPool::start(fabric, node, workers, layout.mailbox, cpn, table)?
            }
            KvSystem::Pilaf => {
                let layout = PilafLayout::new(cfg);
                let table = Arc::new(PilafTable::new(layout, node, cfg));
                ServerPool::start(fabric, node, workers, layout.mailbox, cpn, table)?
            }
        };
        Ok(Some(pool))
    }

    /// A client `id` of this system on `fabric` (in any process whose fabric
    /// reaches the cluster). Each id must be used by one client at a time.
    pub fn client<F>(&self, fabric: &F, id: ClientId) -> Result<Box<dyn KvClient>, Error>
    where
        F: Fabric,
        F::Endpoint: 'static,
    {
        self.client_with(fabric, id, &RpcFaults::default())
    }

    /// [`SystemConfig::client`] whose request channel obeys `faults`.
    fn client_with<F>(
        &self,
        fabric: &F,
        id: ClientId,
        faults: &RpcFaults,
    ) -> Result<Box<dyn KvClient>, Error>
    where
        F: Fabric,
        F::Endpoint: 'static,
    {
        let cfg = Arc::new(self.store.clone());
        id.check_in(cfg.nodes, cfg.clients_per_node)?;
        let ep = fabric.open(id.node)?;
        Ok(match self.kind {
            KvSystem::Nessie => Box::new(Client::new(cfg, id, ep)?),
            KvSystem::NessieSd => {
                let mut c = SdClient::new(cfg, self.coupled(), id, ep);
                c.core_mut().rpc_mut().faults = faults.clone();
                Box::new(c)
            }
            KvSystem::NessieHy => {
                let mut c = HyClient::new(cfg, self.coupled(), self.hy, id, ep);
                c.core_mut().rpc_mut().faults = faults.clone();
                Box::new(c)
            }
            KvSystem::Pilaf => {
                let layout = PilafLayout::new(&cfg);
                let mut c = PilafClient::new(cfg, layout, id, ep);
                c.core_mut().rpc_mut().faults = faults.clone();
                Box::new(c)
            }
        })
    }
}

/// A started system: its fabric, its server workers, and clients on demand.
pub struct Deployment<F: Fabric> {
    sys: SystemConfig,
    fabric: F,
    servers: Vec<ServerPool>,
    rpc_faults: RpcFaults,
}

impl<F: Fabric> fmt::Debug for Deployment<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Deployment")
            .field("system", &self.sys.kind)
            .field("servers", &self.servers)
            .finish_non_exhaustive()
    }
}

impl<F: Fabric> Deployment<F>
where
    F::Endpoint: 'static,
{
    /// Starts `sys` on `fabric`, whose regions must be zeroed and at least as
    /// large as [`SystemConfig::topology`] asks.
    pub fn start(sys: SystemConfig, fabric: F) -> Result<Deployment<F>, Error> {
        sys.store.validate()?;
        let need = sys.topology();
        let have = fabric.topology();
        if have.nodes < need.nodes
            || have.index_slots_per_node < need.index_slots_per_node
            || have.data_bytes_per_node < need.data_bytes_per_node
        {
            return Err(Error::Config(nessie_protocol::ConfigError::OutOfRange {
                field: "fabric topology",
                value: format!("{have:?} (needed: {need:?})"),
                reason: "the fabric's regions are smaller than the system needs",
            }));
        }
        let mut servers = Vec::new();
        for n in 0..sys.store.nodes {
            servers.extend(sys.start_node_servers(&fabric, NodeId(n))?);
        }
        Ok(Deployment {
            sys,
            fabric,
            servers,
            rpc_faults: RpcFaults::default(),
        })
    }

    /// The system's configuration.
    pub fn system(&self) -> &SystemConfig {
        &self.sys
    }

    /// The fabric.
    pub fn fabric(&self) -> &F {
        &self.fabric
    }

    /// A client `id` (node and number below `clients_per_node`). Each id
    /// must be used by at most one client at a time.
    pub fn client(&self, id: ClientId) -> Result<Box<dyn KvClient>, Error> {
        self.sys.client_with(&self.fabric, id, &self.rpc_faults)
    }

    /// Test-only fault switches of the request channels of every client
    /// this deployment hands out (see [`RpcFaults`]).
    pub fn rpc_faults(&self) -> &RpcFaults {
        &self.rpc_faults
    }

    /// CPU time consumed by all server workers so far.
    pub fn server_cpu_time(&self) -> Duration {
        self.servers.iter().map(ServerPool::cpu_time).sum()
    }

    /// Requests served by all server workers so far.
    pub fn server_requests(&self) -> u64 {
        self.servers.iter().map(ServerPool::requests).sum()
    }

    /// Fabric work of all server workers' responses so far.
    pub fn server_stats(&self) -> OpStats {
        let mut s = OpStats::default();
        for p in &self.servers {
            s += p.stats();
        }
        s
    }

    /// Errors server workers met (none in a healthy run).
    pub fn server_errors(&self) -> Vec<Error> {
        self.servers.iter().flat_map(ServerPool::errors).collect()
    }

    /// Pauses the server workers (see [`ServerPool::pause`]).
    pub fn pause_servers(&self) {
        self.servers.iter().for_each(ServerPool::pause);
    }

    /// Test-only fault switch: server workers run PUT and DELETE requests
    /// without claiming them (see [`ServerPool::set_skip_claims`]).
    pub fn set_skip_claims(&self, on: bool) {
        self.servers.iter().for_each(|p| p.set_skip_claims(on));
    }

    /// Resumes the server workers.
    pub fn resume_servers(&self) {
        self.servers.iter().for_each(ServerPool::resume);
    }

    /// Stops the server workers (also done on drop).
    pub fn stop(&mut self) {
        for p in &mut self.servers {
            p.stop();
        }
    }
}

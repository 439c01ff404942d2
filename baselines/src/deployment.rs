//! [`Deployment`]: one of the four compared systems started on a fabric, with
//! the server workers of the server-driven designs, handing out
//! [`KvClient`]s. Every system takes its shape from Nessie's [`Config`]
//! (nodes, clients per node, index table entries and data table entries per
//! node, key and value limits, candidates, filter bits, expiration, timeouts),
//! so that a comparison changes the design and nothing else.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use nessie_protocol::{Client, ClientId, Config, Error, Fabric, NodeId, OpStats, Topology};

use crate::client::ClientLogic;
use crate::coupled::{CoupledLayout, CoupledTable};
use crate::hy::HyClient;
use crate::pilaf::{PilafClient, PilafLayout, PilafTable};
use crate::rpc::RpcFaults;
use crate::sd::SdClient;
use crate::server::ServerPool;
use nessie_protocol::KvClient;

/// The systems compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SystemKind {
    /// Nessie: fully client-driven, decoupled index and data tables.
    Nessie,
    /// NessieSD: server-driven (HERD-like), partially coupled.
    NessieSd,
    /// NessieHY: client-driven GETs, server-driven PUT/DELETE (FaRM-like).
    NessieHy,
    /// Pilaf: self-verifying cuckoo hash, client GETs, server PUT/DELETE.
    Pilaf,
}

impl SystemKind {
    /// All four, in the order reports list them.
    pub const ALL: [SystemKind; 4] = [
        SystemKind::Nessie,
        SystemKind::NessieSd,
        SystemKind::NessieHy,
        SystemKind::Pilaf,
    ];

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            SystemKind::Nessie => "nessie",
            SystemKind::NessieSd => "nessie-sd",
            SystemKind::NessieHy => "nessie-hy",
            SystemKind::Pilaf => "pilaf",
        }
    }

    /// Whether the system runs server workers.
    pub fn has_servers(self) -> bool {
        self != SystemKind::Nessie
    }
}

impl fmt::Display for SystemKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A system name that is not one of [`SystemKind::ALL`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown system {0:?} (expected one of: nessie, nessie-sd, nessie-hy, pilaf)")]
pub struct UnknownSystem(pub String);

impl FromStr for SystemKind {
    type Err = UnknownSystem;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        SystemKind::ALL
            .into_iter()
            .find(|k| {
                k.name().eq_ignore_ascii_case(s)
                    || (s.eq_ignore_ascii_case("sd") && *k == SystemKind::NessieSd)
                    || (s.eq_ignore_ascii_case("hy") && *k == SystemKind::NessieHy)
            })
            .ok_or_else(|| UnknownSystem(s.to_string()))
    }
}

/// NessieHY's optional GET optimisations (all off by default, as in the paper).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct HyOptions {
    /// Filter bits in index table entries (the count is `Config::filter_bits`).
    pub filter_bits: bool,
    /// Cache of remote data table entries (`Config::cache_capacity` entries).
    pub cache: bool,
    /// Read header and key first, the value only on a match.
    pub multiple_reads: bool,
}

/// Which system to start, shaped by a Nessie [`Config`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SystemConfig {
    /// The system.
    pub kind: SystemKind,
    /// The shape shared by all systems (and Nessie's own options).
    pub store: Config,
    /// Server worker threads per node (server-driven systems).
    pub server_workers: u16,
    /// NessieHY's GET optimisations.
    pub hy: HyOptions,
}

impl SystemConfig {
    /// `kind` shaped by `store`, one server worker per node, HY options off.
    pub fn new(kind: SystemKind, store: Config) -> SystemConfig {
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
            SystemKind::NessieHy if !self.hy.filter_bits => 0,
            _ => self.store.filter_bits,
        };
        CoupledLayout::new(&self.store, filter)
    }

    /// The regions a fabric must provide for this system.
    pub fn topology(&self) -> Topology {
        match self.kind {
            SystemKind::Nessie => self.store.topology(),
            SystemKind::NessieSd | SystemKind::NessieHy => Topology {
                nodes: self.store.nodes,
                index_slots_per_node: 1,
                data_bytes_per_node: self.coupled().region_bytes(),
            },
            SystemKind::Pilaf => Topology {
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
            SystemKind::Nessie => return Ok(None),
            SystemKind::NessieSd | SystemKind::NessieHy => {
                let layout = self.coupled();
                let table = Arc::new(CoupledTable::new(layout, node, cfg));
                ServerPool::start(fabric, node, workers, layout.mailbox, cpn, table)?
            }
            SystemKind::Pilaf => {
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
            SystemKind::Nessie => Box::new(Client::new(cfg, id, ep)?),
            SystemKind::NessieSd => {
                let mut c = SdClient::new(cfg, self.coupled(), id, ep);
                c.core_mut().rpc_mut().faults = faults.clone();
                Box::new(c)
            }
            SystemKind::NessieHy => {
                let mut c = HyClient::new(cfg, self.coupled(), self.hy, id, ep);
                c.core_mut().rpc_mut().faults = faults.clone();
                Box::new(c)
            }
            SystemKind::Pilaf => {
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

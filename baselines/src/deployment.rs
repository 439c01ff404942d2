//! [`Deployment`]: one of the five key-value systems started on a fabric, with
//! the server workers of the server-driven designs, handing out
//! [`KvClient`]s. Every system takes its shape from Nessie's [`Config`]
//! (nodes, clients per node, index table entries and data table entries per
//! node, key and value limits, candidates, filter bits, expiration, timeouts),
//! so that a comparison changes the design and nothing else.

use std::collections::HashSet;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nessie_protocol::registry::Registry;
use nessie_protocol::{Client, ClientId, Config, Error, Fabric, NodeId, OpStats, Topology};

use crate::client::{rpc_channel, BlockingClient, ClientLogic, CoreSwitches};
use crate::coupled::{CoupledLayout, CoupledTable};
use crate::design::{AnyCore, AnyTable};
use crate::hy::{HyCore, HyOptions};
use crate::pilaf::client::PilafCore;
use crate::pilaf::{PilafLayout, PilafTable};
use crate::race::{RaceCore, RaceLayout};
use crate::rcuckoo::{RcuckooCore, RcuckooLayout};
use crate::sd::SdCore;
use nessie_exec::mailbox::MailboxLayout;
use nessie_exec::ServerPool;
use nessie_exec::{RpcClient, RpcFaults};
use nessie_protocol::KvClient;

/// The five key-value systems a [`Deployment`] starts: Nessie, the Nessie
/// papers' three baselines and RACE hashing. The one name of "which system" above
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
    /// RACE hashing (ATC'21): client-driven, associative buckets with
    /// overflow, lock-free CAS on out-of-place KV blocks.
    Race,
    /// RCuckoo (ATC'25): client-driven, dependent cuckoo hashing over rows
    /// read lock-free, writes under locks taken by CAS.
    Rcuckoo,
}

impl KvSystem {
    /// All six, in the order reports list them.
    pub const ALL: [KvSystem; 6] = [
        KvSystem::Nessie,
        KvSystem::NessieSd,
        KvSystem::NessieHy,
        KvSystem::Pilaf,
        KvSystem::Race,
        KvSystem::Rcuckoo,
    ];

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            KvSystem::Nessie => "nessie",
            KvSystem::NessieSd => "nessie-sd",
            KvSystem::NessieHy => "nessie-hy",
            KvSystem::Pilaf => "pilaf",
            KvSystem::Race => "race",
            KvSystem::Rcuckoo => "rcuckoo",
        }
    }

    /// Whether the system runs server workers.
    pub fn has_servers(self) -> bool {
        !matches!(self, KvSystem::Nessie | KvSystem::Race | KvSystem::Rcuckoo)
    }

    /// Whether a PUT's answer (whether the key existed) is one its history
    /// is held to: RACE's insert cannot know it when a concurrent insert of
    /// the key races it (docs/baselines.md), so its histories are checked
    /// with `nessie_check::CheckConfig::put_existence` off.
    pub fn put_answers_existence(self) -> bool {
        self != KvSystem::Race
    }

    /// Whether the system places keys in rows of entries it reads whole
    /// (RCuckoo's rows of `bucket_slots`, its buckets): a test that wants
    /// cuckoo paths in a small table shrinks the rows too.
    pub fn places_in_rows(self) -> bool {
        self == KvSystem::Rcuckoo
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

    /// Refuses a store this system cannot run on, before anything starts:
    /// an invalid store, or (RACE) a layout whose addresses do not fit its
    /// slot words ([`RaceLayout::check`]).
    ///
    /// # Errors
    ///
    /// [`Error::Config`] saying which.
    pub fn validate(&self) -> Result<(), Error> {
        self.store.validate()?;
        match self.kind {
            KvSystem::Race => RaceLayout::new(&self.store).check()?,
            KvSystem::Rcuckoo => RcuckooLayout::new(&self.store).check()?,
            _ => {}
        }
        Ok(())
    }

    /// The partially-coupled layout (NessieSD and NessieHY).
    pub fn coupled(&self) -> CoupledLayout {
        let filter = match self.kind {
            KvSystem::NessieHy if !self.hy.filter_bits => 0,
            _ => self.store.filter_bits,
        };
        CoupledLayout::new(&self.store, filter)
    }

    /// The regions a fabric must provide for this system: its layout, and
    /// the registry words of each node's clients closing the data region
    /// (as Nessie's close it: `Config::registry`).
    pub fn topology(&self) -> Topology {
        let (index_slots_per_node, layout_bytes) = match self.kind {
            KvSystem::Nessie => return self.store.topology(),
            KvSystem::NessieSd | KvSystem::NessieHy => (1, self.coupled().region_bytes()),
            KvSystem::Pilaf => (1, PilafLayout::new(&self.store).region_bytes()),
            KvSystem::Race => (1, RaceLayout::new(&self.store).region_bytes()),
            // The lock table in the index region, one word per lock.
            KvSystem::Rcuckoo => {
                let l = RcuckooLayout::new(&self.store);
                (l.locks(), l.region_bytes())
            }
        };
        Topology {
            nodes: self.store.nodes,
            index_slots_per_node,
            data_bytes_per_node: Registry::after(layout_bytes, self.store.clients_per_node).end(),
        }
    }

    /// The request mailbox of the server-driven systems (`None` for Nessie
    /// and RACE).
    pub fn mailbox(&self) -> Option<MailboxLayout> {
        match self.kind {
            KvSystem::Nessie | KvSystem::Race | KvSystem::Rcuckoo => None,
            KvSystem::NessieSd | KvSystem::NessieHy => Some(self.coupled().mailbox),
            KvSystem::Pilaf => Some(PilafLayout::new(&self.store).mailbox),
        }
    }

    /// The offset of each node's move-epoch word in its data region (two
    /// increments per cuckoo path moved; `None` for Nessie and RACE).
    pub fn epoch(&self) -> Option<u64> {
        match self.kind {
            KvSystem::Nessie | KvSystem::Race | KvSystem::Rcuckoo => None,
            KvSystem::NessieSd | KvSystem::NessieHy => Some(self.coupled().epoch),
            KvSystem::Pilaf => Some(PilafLayout::new(&self.store).epoch),
        }
    }

    /// One `node`'s tables, the handler of its server workers (`None` for
    /// Nessie and RACE, which have no server side).
    pub fn node_table(&self, node: NodeId) -> Option<AnyTable> {
        let cfg = &self.store;
        match self.kind {
            KvSystem::Nessie | KvSystem::Race | KvSystem::Rcuckoo => None,
            KvSystem::NessieSd | KvSystem::NessieHy => {
                Some(AnyTable::new(CoupledTable::new(self.coupled(), node, cfg)))
            }
            KvSystem::Pilaf => Some(AnyTable::new(PilafTable::new(
                PilafLayout::new(cfg),
                node,
                cfg,
            ))),
        }
    }

    /// The core of client `id`, its requests going through `rpc` (the
    /// server-driven systems': `None` for Nessie, whose client is the
    /// protocol crate's own, and for a server-driven system given no
    /// channel), its test-only switches set to `switches`. The threaded
    /// client and the cluster simulator run the same core.
    pub fn core(
        &self,
        id: ClientId,
        rpc: Option<RpcClient>,
        switches: CoreSwitches,
    ) -> Option<AnyCore> {
        let cfg = Arc::new(self.store.clone());
        let mut core: AnyCore = match (self.kind, rpc) {
            (KvSystem::Nessie, _) => return None,
            (KvSystem::Race, _) => Box::new(RaceCore::new(cfg, RaceLayout::new(&self.store), id)),
            (KvSystem::Rcuckoo, _) => {
                Box::new(RcuckooCore::new(cfg, RcuckooLayout::new(&self.store), id))
            }
            (_, None) => return None,
            (KvSystem::NessieSd, Some(rpc)) => Box::new(SdCore::new(cfg, self.coupled(), rpc)),
            (KvSystem::NessieHy, Some(rpc)) => {
                Box::new(HyCore::new(cfg, self.coupled(), self.hy, rpc))
            }
            (KvSystem::Pilaf, Some(rpc)) => {
                Box::new(PilafCore::new(cfg, PilafLayout::new(&self.store), rpc))
            }
        };
        core.set_switches(switches);
        Some(core)
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
        let (Some(table), Some(mailbox)) = (self.node_table(node), self.mailbox()) else {
            return Ok(None);
        };
        let (workers, cpn) = (self.server_workers, self.store.clients_per_node);
        let pool = ServerPool::start(fabric, node, workers, mailbox, cpn, Arc::new(table))?;
        Ok(Some(pool))
    }

    /// A client `id` of this system on `fabric` (in any process whose fabric
    /// reaches the cluster). Each id must be used by one client at a time.
    pub fn client<F>(&self, fabric: &F, id: ClientId) -> Result<Box<dyn KvClient>, Error>
    where
        F: Fabric,
        F::Endpoint: 'static,
    {
        self.client_with(fabric, id, &RpcFaults::default(), false)
    }

    /// [`SystemConfig::client`] whose request channel obeys `faults`;
    /// `first`: the first process of `id` on memory the caller zeroed, which
    /// has no predecessor (its claim words are never used: it need not open
    /// them, [`nessie_exec::rpc`]).
    fn client_with<F>(
        &self,
        fabric: &F,
        id: ClientId,
        faults: &RpcFaults,
        first: bool,
    ) -> Result<Box<dyn KvClient>, Error>
    where
        F: Fabric,
        F::Endpoint: 'static,
    {
        let cfg = &self.store;
        // Nessie's clients without storage follow a node's own clients.
        let ids = match self.kind {
            KvSystem::Nessie => cfg.shares_per_node(),
            _ => cfg.clients_per_node,
        };
        id.check_in(cfg.nodes, ids)?;
        let ep = fabric.open(id.node)?;
        let rpc = self.mailbox().map(|mailbox| {
            let mut rpc = rpc_channel(mailbox, id, cfg);
            rpc.faults = faults.clone();
            if first {
                rpc = rpc.without_predecessor();
            }
            rpc
        });
        Ok(match self.core(id, rpc, CoreSwitches::default()) {
            Some(core) => Box::new(BlockingClient::from_core(core, id, ep)?),
            None => Box::new(Client::new(Arc::new(cfg.clone()), id, ep)?),
        })
    }
}

/// A started system: its fabric, its server workers, and clients on demand.
pub struct Deployment<F: Fabric> {
    sys: SystemConfig,
    fabric: F,
    servers: Vec<ServerPool>,
    rpc_faults: RpcFaults,
    /// The client ids handed out so far: the first client of each id on
    /// this deployment's fresh memory has no predecessor.
    handed_out: Mutex<HashSet<ClientId>>,
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
        sys.validate()?;
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
            handed_out: Mutex::new(HashSet::new()),
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

    /// A client `id` (node and number below `clients_per_node`). One live
    /// client per id: a second is refused with [`Error::ClientIdInUse`].
    /// The first client of each id runs as a process without predecessor
    /// (the deployment zeroed the memory); a later one, as a restarted
    /// process, opens its claim words before its first PUT or DELETE on
    /// each node.
    pub fn client(&self, id: ClientId) -> Result<Box<dyn KvClient>, Error> {
        let first = {
            let mut ids = self.handed_out.lock().unwrap_or_else(|e| e.into_inner());
            ids.insert(id)
        };
        self.sys
            .client_with(&self.fabric, id, &self.rpc_faults, first)
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

    /// Test-only fault switch: server workers claim a request from a claim
    /// word of another incarnation of its client, as before clients opened
    /// their words (see
    /// [`WorkerCounters::claim_across_incarnations`](nessie_exec::WorkerCounters::claim_across_incarnations)).
    pub fn set_claim_across_incarnations(&self, on: bool) {
        self.servers
            .iter()
            .for_each(|p| p.set_claim_across_incarnations(on));
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

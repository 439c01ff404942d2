//! [`CellDeployment`]: a Cell store started on a fabric in one process,
//! every server node a [`CellNode`] (its polling server workers with
//! [`crate::server::runtime::CellHandler`] and its maintenance thread;
//! node 0 bootstraps region 1, an empty leaf meganode holding the root
//! word) sharing one in-process region [`Directory`]. Clients are handed
//! out on any node. Node processes that share nothing but the fabric start
//! the same [`CellNode`]s one by one ([`CellNode::start_alone`]).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nessie_protocol::{
    ClientId, ConfigError, CorruptionKind, Endpoint, Error, Fabric, Needed, NodeId, OpStats,
    Topology,
};

use crate::client::CellClient;
use crate::cluster::CellNode;
use crate::config::{CellConfig, DirectoryPlace};
use crate::directory::RegionTable;
use crate::log::LogSink;
use crate::machine::{machine, Machine, ID_BASE};
use crate::ptr::RegionId;
use crate::region::Directory;
use crate::server::runtime::{maintenance_channel, MaintenanceIo};
use crate::server::split::SplitOutcome;
use crate::server::{Job, ServerNode, Srv};

/// Shape of the tree, for reports and tests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TreeShape {
    /// Meganodes (regions) in the directory.
    pub meganodes: usize,
    /// Meganodes per server node.
    pub per_node: Vec<usize>,
    /// Node splits so far (all servers).
    pub node_splits: u64,
    /// Meganode splits so far.
    pub meganode_splits: u64,
    /// Meganode splits abandoned.
    pub split_aborts: u64,
    /// Requests answered `Busy`.
    pub busy: u64,
}

impl TreeShape {
    /// The shape of `map`'s regions over `server_nodes` servers, with the
    /// counters of the servers `states` added up.
    pub fn of<'a>(
        map: &crate::region::RegionMap,
        server_nodes: u16,
        states: impl IntoIterator<Item = &'a Arc<ServerNode>>,
    ) -> TreeShape {
        let mut t = TreeShape {
            meganodes: map.regions.len(),
            per_node: (0..server_nodes)
                .map(|n| map.held_by(NodeId(n)).len())
                .collect(),
            ..TreeShape::default()
        };
        for st in states {
            let c = &st.counters;
            t.node_splits += c.node_splits.load(Ordering::Relaxed);
            t.meganode_splits += c.meganode_splits.load(Ordering::Relaxed);
            t.split_aborts += c.split_aborts.load(Ordering::Relaxed);
            t.busy += c.busy.load(Ordering::Relaxed);
        }
        t
    }
}

/// A Cell store on a fabric.
pub struct CellDeployment<F: Fabric> {
    cfg: Arc<CellConfig>,
    fabric: F,
    dir: Arc<Directory>,
    log: Option<Arc<LogSink>>,
    servers: Vec<Option<CellNode>>,
}

impl<F: Fabric> std::fmt::Debug for CellDeployment<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CellDeployment")
            .field("nodes", &self.cfg.nodes)
            .field("servers", &self.cfg.server_nodes)
            .finish_non_exhaustive()
    }
}

impl CellConfig {
    /// The regions a fabric must provide for this deployment.
    pub fn topology(&self) -> Topology {
        Topology {
            nodes: self.nodes,
            index_slots_per_node: 1,
            data_bytes_per_node: self.registry().end(),
        }
    }

    /// Checks that a fabric of topology `have` holds what this
    /// configuration needs.
    pub fn check_topology(&self, have: Topology) -> Result<(), Error> {
        let need = self.topology();
        if have.nodes < need.nodes || have.data_bytes_per_node < need.data_bytes_per_node {
            return Err(Error::Config(ConfigError::OutOfRange {
                field: "fabric topology",
                value: format!("{have:?} (needed: {need:?})"),
                reason: "the fabric's regions are smaller than Cell needs",
            }));
        }
        Ok(())
    }
}

/// The machine that creates region 1 (an empty leaf meganode holding the
/// root word) on server `st` (node 0), its work requests numbered from
/// `first_id`: what starting a deployment runs first, on any driver.
pub fn bootstrap_machine(st: &Arc<ServerNode>, first_id: u64) -> Machine<()> {
    let s = st.clone();
    machine(st.node, first_id, None, move |io| async move {
        Srv::new(io, s).bootstrap().await
    })
}

impl<F: Fabric> CellDeployment<F>
where
    F::Endpoint: 'static,
{
    /// Starts Cell as `cfg` describes on `fabric` (zeroed regions at least
    /// as large as [`CellConfig::topology`]), every server node in this
    /// process, sharing one directory ([`DirectoryPlace::Process`]; node
    /// processes with a directory over the fabric start [`CellNode`]s).
    pub fn start(cfg: CellConfig, fabric: F) -> Result<CellDeployment<F>, Error> {
        cfg.validate()?;
        if cfg.directory != DirectoryPlace::Process {
            return Err(Error::Config(ConfigError::OutOfRange {
                field: "directory",
                value: format!("{:?}", cfg.directory),
                reason: "an in-process deployment shares one directory (DirectoryPlace::Process); \
                         node processes start CellNode::start_alone",
            }));
        }
        cfg.check_topology(fabric.topology())?;
        let log = match &cfg.log_dir {
            Some(d) => Some(Arc::new(LogSink::new(d, cfg.log_sync)?)),
            None => None,
        };
        let cfg = Arc::new(cfg);
        let dir = Arc::new(Directory::new(cfg.regions_per_node));
        let mut d = CellDeployment {
            cfg: cfg.clone(),
            fabric,
            dir,
            log,
            servers: Vec::new(),
        };
        for n in 0..cfg.server_nodes {
            let node = CellNode::start(
                cfg.clone(),
                &d.fabric,
                NodeId(n),
                RegionTable::Shared(d.dir.clone()),
                d.log.clone(),
            )?;
            d.servers.push(Some(node));
        }
        Ok(d)
    }

    /// The configuration.
    pub fn config(&self) -> &Arc<CellConfig> {
        &self.cfg
    }

    /// The fabric.
    pub fn fabric(&self) -> &F {
        &self.fabric
    }

    /// The region directory.
    pub fn directory(&self) -> &Arc<Directory> {
        &self.dir
    }

    /// The region logs, if logging.
    pub fn logs(&self) -> Option<&Arc<LogSink>> {
        self.log.as_ref()
    }

    /// The state of server `node` (while it runs).
    pub fn server(&self, node: NodeId) -> Option<&Arc<ServerNode>> {
        self.servers
            .get(node.0 as usize)?
            .as_ref()
            .map(CellNode::state)
    }

    /// Client `id` on an endpoint opened on its node.
    pub fn client(&self, id: ClientId) -> Result<CellClient<F::Endpoint>, Error> {
        let ep = self.fabric.open(id.node)?;
        CellClient::new(self.cfg.clone(), self.dir.clone(), id, ep)
    }

    /// Client `id` on a given endpoint (e.g. a test wrapper around one of
    /// this fabric's endpoints on `id.node`).
    pub fn client_on<E: Endpoint>(&self, id: ClientId, ep: E) -> Result<CellClient<E>, Error> {
        CellClient::new(self.cfg.clone(), self.dir.clone(), id, ep)
    }

    fn running(&self) -> impl Iterator<Item = &CellNode> {
        self.servers.iter().flatten()
    }

    /// Pauses server workers and maintenance threads (requests wait).
    pub fn pause_servers(&self) {
        self.running().for_each(CellNode::pause);
    }

    /// Resumes them.
    pub fn resume_servers(&self) {
        self.running().for_each(CellNode::resume);
    }

    /// Pauses server `node`'s workers and maintenance thread (requests to
    /// it wait; its memory stays reachable by RDMA).
    pub fn pause_server(&self, node: NodeId) {
        if let Some(Some(s)) = self.servers.get(node.0 as usize) {
            s.pause();
        }
    }

    /// Resumes server `node`.
    pub fn resume_server(&self, node: NodeId) {
        if let Some(Some(s)) = self.servers.get(node.0 as usize) {
            s.resume();
        }
    }

    /// CPU time of all server workers and maintenance threads.
    pub fn server_cpu_time(&self) -> Duration {
        self.running().map(CellNode::cpu_time).sum()
    }

    /// Requests served.
    pub fn server_requests(&self) -> u64 {
        self.running().map(CellNode::requests).sum()
    }

    /// Fabric work of the workers' responses.
    pub fn server_stats(&self) -> OpStats {
        let mut t = OpStats::default();
        for s in self.running() {
            t += s.stats();
        }
        t
    }

    /// Errors of workers and maintenance jobs.
    pub fn server_errors(&self) -> Vec<Error> {
        self.running().flat_map(CellNode::errors).collect()
    }

    /// The tree's shape and the servers' counters.
    pub fn shape(&self) -> TreeShape {
        TreeShape::of(
            &self.dir.snapshot(),
            self.cfg.server_nodes,
            self.running().map(CellNode::state),
        )
    }

    /// Waits (up to `timeout`) until no maintenance job is queued or running.
    pub fn wait_idle(&self, timeout: Duration) -> bool {
        let t = Instant::now();
        let mut quiet = 0;
        while t.elapsed() < timeout {
            let busy = self.running().any(CellNode::busy);
            quiet = if busy { 0 } else { quiet + 1 };
            if quiet >= 3 {
                return true;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        false
    }

    /// A maintenance context on `node` (for driving machines by hand).
    pub fn maintenance_io(
        &self,
        node: NodeId,
    ) -> Result<(Arc<ServerNode>, MaintenanceIo<F::Endpoint>), Error> {
        let st = self
            .server(node)
            .ok_or(Error::Unreachable(node, Needed::Request))?
            .clone();
        let mio = MaintenanceIo::new(&st, self.fabric.open(node)?);
        Ok((st, mio))
    }

    /// The holder of `region`.
    pub fn holder(&self, region: RegionId) -> Option<NodeId> {
        self.dir.snapshot().get(region).map(|i| i.node)
    }

    /// The split of meganode `region` as a machine, to be stepped by hand
    /// (with [`CellDeployment::maintenance_io`] of its holder); it does not
    /// link the parent.
    pub fn split_machine(
        &self,
        region: RegionId,
    ) -> Result<(Arc<ServerNode>, Machine<SplitOutcome>), Error> {
        self.split_machine_onto(region, None)
    }

    /// [`CellDeployment::split_machine`] copying the new meganode to
    /// server `onto` (`None`: the least loaded server, as servers choose),
    /// so that a test can place both halves of a split.
    pub fn split_machine_onto(
        &self,
        region: RegionId,
        onto: Option<NodeId>,
    ) -> Result<(Arc<ServerNode>, Machine<SplitOutcome>), Error> {
        let node = self
            .holder(region)
            .ok_or_else(|| Error::corrupt(CorruptionKind::Memory, format!("unknown {region}")))?;
        let st = self
            .server(node)
            .ok_or(Error::Unreachable(node, Needed::Request))?
            .clone();
        let s = st.clone();
        let m = machine(
            node,
            ID_BASE,
            Some(maintenance_channel(&st)),
            move |io| async move { Srv::new(io, s).split_meganode(region, onto).await },
        );
        Ok((st, m))
    }

    /// Splits meganode `region` now (and links its parent), on the calling
    /// thread.
    pub fn split(&self, region: RegionId) -> Result<SplitOutcome, Error> {
        self.split_onto(region, None)
    }

    /// [`CellDeployment::split`] copying the new meganode to server `onto`
    /// (`None`: the least loaded server).
    pub fn split_onto(
        &self,
        region: RegionId,
        onto: Option<NodeId>,
    ) -> Result<SplitOutcome, Error> {
        let (st, mut m) = self.split_machine_onto(region, onto)?;
        let (_, mut mio) = self.maintenance_io(st.node)?;
        let out = mio.run(&st, &mut m)?;
        if let SplitOutcome::Split { split, new } = &out {
            mio.run_job(
                &st,
                Job::LinkParent {
                    below: region,
                    key: split.clone(),
                    child: *new,
                },
            )?;
        }
        Ok(out)
    }

    /// Stops server `node`'s workers and maintenance thread (a crash: its
    /// memory is gone for the tree; the caller also takes the node down on
    /// the fabric) and records the failure in the directory.
    pub fn fail_node(&mut self, node: NodeId) {
        if let Some(slot) = self.servers.get_mut(node.0 as usize) {
            if let Some(mut rt) = slot.take() {
                rt.stop();
            }
        }
        self.dir.set_failed(node, true);
    }

    /// Stops every server (also done on drop).
    pub fn stop(&mut self) {
        self.servers.iter_mut().flatten().for_each(CellNode::stop);
    }

    pub(crate) fn live_servers(&self) -> Vec<Arc<ServerNode>> {
        self.running().map(|s| s.state().clone()).collect()
    }
}

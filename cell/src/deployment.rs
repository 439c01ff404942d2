//! [`CellDeployment`]: a Cell store started on a fabric. Every server node
//! runs the baselines' polling server workers (with [`CellHandler`]) and a
//! maintenance thread; node 0 bootstraps region 1, an empty leaf meganode
//! holding the root word. Clients are handed out on any node.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nessie_baselines::server::ServerPool;
use nessie_protocol::{
    ClientId, ConfigError, Endpoint, Error, Fabric, NodeId, Op, OpStats, Topology,
};

use crate::client::CellClient;
use crate::config::{CellConfig, ROOT_WORD_OFFSET};
use crate::log::{LogRecord, LogSink};
use crate::machine::{machine, written, Machine, OpClass, ID_BASE};
use crate::node::Node;
use crate::ptr::{NodePtr, RegionId, ROOT_REGION};
use crate::region::Directory;
use crate::server::alloc::GateMode;
use crate::server::runtime::{maintenance_channel, CellHandler, Maintenance, MaintenanceIo};
use crate::server::split::SplitOutcome;
use crate::server::{Job, ServerNode, Srv};

/// One server node's running parts.
struct ServerRuntime {
    st: Arc<ServerNode>,
    pool: ServerPool,
    maint: Maintenance,
}

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

/// A Cell store on a fabric.
pub struct CellDeployment<F: Fabric> {
    cfg: Arc<CellConfig>,
    fabric: F,
    dir: Arc<Directory>,
    log: Option<Arc<LogSink>>,
    servers: Vec<Option<ServerRuntime>>,
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
            data_bytes_per_node: self.layout().data_bytes(),
        }
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

impl Srv {
    /// Creates region 1 (an empty leaf meganode holding the root word).
    async fn bootstrap(&self) -> Result<(), Error> {
        let Some((id, slot)) = self.st.dir.allocate(self.st.node) else {
            return Err(Error::Corrupt(
                "no region slot for the first meganode".into(),
            ));
        };
        if id != ROOT_REGION {
            return Err(Error::Corrupt(format!(
                "the first region is {id}, not {ROOT_REGION}"
            )));
        }
        let h = self
            .st
            .host(id, slot, self.st.fresh_alloc(), GateMode::Open, 1);
        self.log(id, vec![LogRecord::Created { source: None }])
            .await?;
        self.write_header(&h).await?;
        let root = NodePtr::root_of(id).encode().to_le_bytes().to_vec();
        let r = self
            .io
            .round(
                vec![Op::LocalWrite {
                    offset: h.base + ROOT_WORD_OFFSET,
                    data: root.clone(),
                }],
                OpClass::Other,
            )
            .await;
        written(&r[0])?;
        self.log(
            id,
            vec![LogRecord::Write {
                offset: ROOT_WORD_OFFSET,
                bytes: root,
            }],
        )
        .await?;
        let leaf = Node::empty(true, true, 0, Vec::new(), None);
        self.write_fresh(NodePtr::root_of(id), &leaf).await?;
        self.st.dir.publish(id);
        Ok(())
    }
}

impl<F: Fabric> CellDeployment<F>
where
    F::Endpoint: 'static,
{
    /// Starts Cell as `cfg` describes on `fabric` (zeroed regions at least
    /// as large as [`CellConfig::topology`]).
    pub fn start(cfg: CellConfig, fabric: F) -> Result<CellDeployment<F>, Error> {
        cfg.validate()?;
        let need = cfg.topology();
        let have = fabric.topology();
        if have.nodes < need.nodes || have.data_bytes_per_node < need.data_bytes_per_node {
            return Err(Error::Config(ConfigError::OutOfRange {
                field: "fabric topology",
                value: format!("{have:?} (needed: {need:?})"),
                reason: "the fabric's regions are smaller than Cell needs",
            }));
        }
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
            let st = Arc::new(ServerNode::new(
                NodeId(n),
                cfg.clone(),
                d.dir.clone(),
                d.log.clone(),
            ));
            if n == 0 {
                let mut mio = MaintenanceIo::new(&st, d.fabric.open(NodeId(0))?);
                let mut m = mio.machine(&st, |srv| async move { srv.bootstrap().await });
                mio.run(&st, &mut m)?;
            }
            d.servers.push(Some(d.start_runtime(st)?));
        }
        Ok(d)
    }

    fn start_runtime(&self, st: Arc<ServerNode>) -> Result<ServerRuntime, Error> {
        let handler = Arc::new(CellHandler::new(st.clone()));
        let pool = ServerPool::start(
            &self.fabric,
            st.node,
            self.cfg.server_workers,
            self.cfg.layout().mailbox,
            self.cfg.slots_per_node(),
            handler,
        )?;
        let maint = Maintenance::start(st.clone(), self.fabric.open(st.node)?)?;
        Ok(ServerRuntime { st, pool, maint })
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
        self.servers.get(node.0 as usize)?.as_ref().map(|r| &r.st)
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

    fn running(&self) -> impl Iterator<Item = &ServerRuntime> {
        self.servers.iter().flatten()
    }

    /// Pauses server workers and maintenance threads (requests wait).
    pub fn pause_servers(&self) {
        for s in self.running() {
            s.pool.pause();
            s.maint.pause();
        }
    }

    /// Resumes them.
    pub fn resume_servers(&self) {
        for s in self.running() {
            s.pool.resume();
            s.maint.resume();
        }
    }

    /// CPU time of all server workers and maintenance threads.
    pub fn server_cpu_time(&self) -> Duration {
        self.running()
            .map(|s| s.pool.cpu_time() + s.maint.cpu_time())
            .sum()
    }

    /// Requests served.
    pub fn server_requests(&self) -> u64 {
        self.running().map(|s| s.pool.requests()).sum()
    }

    /// Fabric work of the workers' responses.
    pub fn server_stats(&self) -> OpStats {
        let mut t = OpStats::default();
        for s in self.running() {
            t += s.pool.stats();
        }
        t
    }

    /// Errors of workers and maintenance jobs.
    pub fn server_errors(&self) -> Vec<Error> {
        self.running()
            .flat_map(|s| s.pool.errors().into_iter().chain(s.maint.errors()))
            .collect()
    }

    /// The tree's shape and the servers' counters.
    pub fn shape(&self) -> TreeShape {
        let m = self.dir.snapshot();
        let mut t = TreeShape {
            meganodes: m.regions.len(),
            per_node: (0..self.cfg.server_nodes)
                .map(|n| m.held_by(NodeId(n)).len())
                .collect(),
            ..TreeShape::default()
        };
        for s in self.running() {
            let c = &s.st.counters;
            t.node_splits += c.node_splits.load(Ordering::Relaxed);
            t.meganode_splits += c.meganode_splits.load(Ordering::Relaxed);
            t.split_aborts += c.split_aborts.load(Ordering::Relaxed);
            t.busy += c.busy.load(Ordering::Relaxed);
        }
        t
    }

    /// Waits (up to `timeout`) until no maintenance job is queued or running.
    pub fn wait_idle(&self, timeout: Duration) -> bool {
        let t = Instant::now();
        let mut quiet = 0;
        while t.elapsed() < timeout {
            let busy = self
                .running()
                .any(|s| s.st.pending_jobs() > 0 || s.maint.busy());
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
        let st = self.server(node).ok_or(Error::Unreachable(node))?.clone();
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
        let node = self
            .holder(region)
            .ok_or_else(|| Error::Corrupt(format!("unknown {region}")))?;
        let st = self.server(node).ok_or(Error::Unreachable(node))?.clone();
        let s = st.clone();
        let m = machine(
            node,
            ID_BASE,
            Some(maintenance_channel(&st)),
            move |io| async move { Srv::new(io, s).split_meganode(region).await },
        );
        Ok((st, m))
    }

    /// Splits meganode `region` now (and links its parent), on the calling
    /// thread.
    pub fn split(&self, region: RegionId) -> Result<SplitOutcome, Error> {
        let (st, mut m) = self.split_machine(region)?;
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
                rt.pool.stop();
                rt.maint.stop();
            }
        }
        self.dir.set_failed(node, true);
    }

    /// Stops every server (also done on drop).
    pub fn stop(&mut self) {
        for s in self.servers.iter_mut().flatten() {
            s.pool.stop();
            s.maint.stop();
        }
    }

    pub(crate) fn live_servers(&self) -> Vec<Arc<ServerNode>> {
        self.running().map(|s| s.st.clone()).collect()
    }
}

impl<F: Fabric> Drop for CellDeployment<F> {
    fn drop(&mut self) {
        for s in self.servers.iter_mut().flatten() {
            s.pool.stop();
            s.maint.stop();
        }
    }
}

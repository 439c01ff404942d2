//! One node of a Cell cluster, [`CellNode`]: what a server node runs,
//! whether all nodes share one process ([`crate::CellDeployment`]) or each
//! is its own (`nessie node serve --system cell` on RDMA, sharing nothing
//! but the fabric). A server node runs `nessie-exec`'s polling server
//! workers with Cell's handler and one maintenance thread; the directory
//! node (with a directory over the fabric) first initialises the region
//! table, and node 0 bootstraps the tree: region 1, an empty leaf meganode
//! holding the root word.
//!
//! A client needs no server state at all: [`crate::CellClient::over_fabric`]
//! reads the directory over the fabric like everything else.

use std::sync::Arc;
use std::time::Duration;

use nessie_exec::ServerPool;
use nessie_protocol::{ConfigError, CorruptionKind, Error, Fabric, NodeId, Op, OpStats};

use crate::config::{CellConfig, DirectoryPlace, ROOT_WORD_OFFSET};
use crate::directory::RegionTable;
use crate::directory::{DirCounters, FabricDirectory};
use crate::log::{LogRecord, LogSink};
use crate::machine::{written, OpClass};
use crate::node::Node;
use crate::ptr::{NodePtr, ROOT_REGION};
use crate::server::alloc::GateMode;
use crate::server::runtime::{CellHandler, Maintenance, MaintenanceIo};
use crate::server::{ServerNode, Srv};

/// How long node 0 waits for a directory on another node to be initialised.
const DIRECTORY_WAIT: Duration = Duration::from_secs(60);

impl Srv {
    /// Creates region 1 (an empty leaf meganode holding the root word).
    pub(crate) async fn bootstrap(&self) -> Result<(), Error> {
        let start = self.io.now();
        let (id, slot) = loop {
            match self
                .st
                .dir
                .allocate(&self.io, self.st.node, self.st.node)
                .await
            {
                Ok(Some(a)) => break a,
                Ok(None) => {
                    return Err(Error::corrupt(
                        CorruptionKind::Setup,
                        "no region slot for the first meganode",
                    ))
                }
                // A directory node whose process has not initialised the
                // table yet.
                Err(Error::Unreachable(n, _))
                    if n != self.st.node && self.io.now().since(start) < DIRECTORY_WAIT =>
                {
                    self.io.backoff(Duration::from_millis(20)).await;
                }
                Err(e) => return Err(e),
            }
        };
        if id != ROOT_REGION {
            return Err(Error::corrupt(
                CorruptionKind::Setup,
                format!("the first region is {id}, not {ROOT_REGION}"),
            ));
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
        self.st.dir.publish(&self.io, id).await
    }
}

/// A server node of Cell, running: its state, server workers and
/// maintenance thread. Dropping it stops them.
pub struct CellNode {
    st: Arc<ServerNode>,
    pool: ServerPool,
    maint: Maintenance,
}

impl std::fmt::Debug for CellNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CellNode")
            .field("node", &self.st.node)
            .field("dir", &self.st.dir)
            .finish_non_exhaustive()
    }
}

impl CellNode {
    /// Starts server node `node` of `cfg` on `fabric` with the region table
    /// `dir`: initialises the table first if it is a fabric directory on
    /// this node, bootstraps the tree if this is node 0, then starts the
    /// node's server workers and maintenance thread.
    pub fn start<F>(
        cfg: Arc<CellConfig>,
        fabric: &F,
        node: NodeId,
        dir: RegionTable,
        log: Option<Arc<LogSink>>,
    ) -> Result<CellNode, Error>
    where
        F: Fabric,
        F::Endpoint: 'static,
    {
        cfg.validate()?;
        if !cfg.is_server(node) {
            return Err(Error::Config(ConfigError::OutOfRange {
                field: "node",
                value: node.to_string(),
                reason: "only nodes below server_nodes run Cell's servers",
            }));
        }
        let st = Arc::new(ServerNode::new(node, cfg.clone(), dir.clone(), log));
        if let RegionTable::Fabric(d) = &dir {
            if d.node() == node {
                let mut mio = MaintenanceIo::new(&st, fabric.open(node)?);
                let d = d.clone();
                let mut m = mio.machine(&st, move |srv| async move { d.initialise(&srv.io).await });
                mio.run(&st, &mut m)?;
            }
        }
        if node.0 == 0 {
            let mut mio = MaintenanceIo::new(&st, fabric.open(node)?);
            let mut m = mio.machine(&st, |srv| async move { srv.bootstrap().await });
            mio.run(&st, &mut m)?;
        }
        let handler = Arc::new(CellHandler::new(st.clone()));
        let pool = ServerPool::start(
            fabric,
            node,
            cfg.server_workers,
            cfg.layout().mailbox,
            cfg.slots_per_node(),
            handler,
        )?;
        let maint = Maintenance::start(st.clone(), fabric.open(node)?)?;
        Ok(CellNode { st, pool, maint })
    }

    /// Starts server node `node` as a process of its own: its handle on the
    /// directory over the fabric is its own ([`CellConfig::directory`] must
    /// place the directory on a node), and nothing but `fabric` is shared
    /// with the other nodes.
    pub fn start_alone<F>(
        cfg: Arc<CellConfig>,
        fabric: &F,
        node: NodeId,
        log: Option<Arc<LogSink>>,
    ) -> Result<CellNode, Error>
    where
        F: Fabric,
        F::Endpoint: 'static,
    {
        let dir = Arc::new(FabricDirectory::new(&cfg, Some(node))?);
        CellNode::start(cfg, fabric, node, RegionTable::Fabric(dir), log)
    }

    /// The node's state.
    pub fn state(&self) -> &Arc<ServerNode> {
        &self.st
    }

    /// The node.
    pub fn node(&self) -> NodeId {
        self.st.node
    }

    /// The fabric directory's counters, if the node uses one.
    pub fn directory_counters(&self) -> Option<DirCounters> {
        match &self.st.dir {
            RegionTable::Fabric(d) => Some(d.counters()),
            RegionTable::Shared(_) => None,
        }
    }

    /// Pauses the server workers and the maintenance thread (requests wait).
    pub fn pause(&self) {
        self.pool.pause();
        self.maint.pause();
    }

    /// Resumes them.
    pub fn resume(&self) {
        self.pool.resume();
        self.maint.resume();
    }

    /// CPU time of the server workers and the maintenance thread.
    pub fn cpu_time(&self) -> Duration {
        self.pool.cpu_time() + self.maint.cpu_time()
    }

    /// The server workers (for a report of their CPU time and requests).
    pub fn pool(&self) -> &ServerPool {
        &self.pool
    }

    /// Requests served.
    pub fn requests(&self) -> u64 {
        self.pool.requests()
    }

    /// Fabric work of the workers' responses.
    pub fn stats(&self) -> OpStats {
        self.pool.stats()
    }

    /// Errors of the workers and of maintenance jobs.
    pub fn errors(&self) -> Vec<Error> {
        self.pool
            .errors()
            .into_iter()
            .chain(self.maint.errors())
            .collect()
    }

    /// Whether maintenance work is queued or running.
    pub fn busy(&self) -> bool {
        self.st.pending_jobs() > 0 || self.maint.busy()
    }

    /// Stops the workers and the maintenance thread (also done on drop).
    pub fn stop(&mut self) {
        self.pool.stop();
        self.maint.stop();
    }
}

impl Drop for CellNode {
    fn drop(&mut self) {
        self.stop();
    }
}

impl CellConfig {
    /// The configuration with the region table on `node` (over the fabric).
    pub fn with_directory_on(mut self, node: NodeId) -> CellConfig {
        self.directory = DirectoryPlace::Node(node);
        self
    }
}

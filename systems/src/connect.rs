//! [`Connect`]: the one front door to every system. A builder names the
//! system and the store's shape and yields a [`Cluster`]: either a whole
//! cluster in this process on the simulated fabric ([`Connect::in_process`])
//! or the nodes this process hosts on any fabric, such as a node of an RDMA
//! cluster started from its cluster file ([`Connect::hosting`]). A cluster
//! hands out clients of its system ([`Cluster::client`]), each a
//! [`KvClient`] with an id of its own: the next one no live client on that
//! node holds, claimed on the fabric so that no two clients ever act as one
//! (two would share request slots or data table entries and lose writes).
//!
//! It is the systems floor's [`NodeSetup`] (what `nessie node` runs) with
//! its clients: one implementation of each system, used alike by the
//! bench, the simulator, `nessie node` and this door.
//!
//! ```
//! use nessie_protocol::{KvClient, NodeId};
//! use nessie_systems::{Connect, SystemKind};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! for kind in SystemKind::ALL {
//!     let cluster = Connect::new(kind).in_process()?;
//!     let mut alice = cluster.client(NodeId(0))?;
//!     let mut bob = cluster.client(NodeId(1))?;
//!     alice.put(b"greeting", b"hello")?;
//!     assert_eq!(bob.get(b"greeting")?.as_deref(), Some(&b"hello"[..]), "{kind}");
//! }
//! # Ok(())
//! # }
//! ```

use nessie_baselines::HyOptions;
use nessie_cell::CellClient;
use nessie_fabric_sim::{SimConfig, SimFabric};
use nessie_protocol::{ClientId, Config, Error, Fabric, KvClient, NodeId};
use nessie_workload::{Blocking, Worker, WorkloadReport, WorkloadSpec};

use crate::cell::CellShape;
use crate::kind::SystemKind;
use crate::node::SystemError;
use crate::setup::{NodeServers, NodeSetup};

/// What a cluster is to be: the system, the store's shape and the system's
/// options (module documentation).
#[derive(Clone, Debug)]
pub struct Connect {
    kind: SystemKind,
    store: Config,
    server_workers: u16,
    hy: HyOptions,
    shape: CellShape,
}

impl Connect {
    /// `kind` on a store of three nodes with the protocol's defaults
    /// (`Config::default()` otherwise), one server worker per node where
    /// the system has servers, NessieHY's default options and Cell's
    /// default shape.
    pub fn new(kind: SystemKind) -> Connect {
        Connect {
            kind,
            store: Config {
                nodes: 3,
                ..Config::default()
            },
            server_workers: 1,
            hy: HyOptions::default(),
            shape: CellShape::default(),
        }
    }

    /// The store's shape: nodes, table sizes, key and value limits, clients
    /// per node (the ids a node can hand out), timing.
    pub fn store(mut self, store: Config) -> Connect {
        self.store = store;
        self
    }

    /// Server worker threads per node (systems with servers only).
    pub fn server_workers(mut self, workers: u16) -> Connect {
        self.server_workers = workers;
        self
    }

    /// NessieHY's options (NessieHY only).
    pub fn hy(mut self, hy: HyOptions) -> Connect {
        self.hy = hy;
        self
    }

    /// Cell's tree shape (Cell only).
    pub fn cell_shape(mut self, shape: CellShape) -> Connect {
        self.shape = shape;
        self
    }

    /// The shaped system, as every node of a deployment is given it.
    ///
    /// # Errors
    ///
    /// [`SystemError::Store`] with [`Error::Config`]: an invalid store or
    /// option (no server workers, a Cell shape the store cannot hold).
    pub fn setup(&self) -> Result<NodeSetup, SystemError> {
        self.store.validate().map_err(Error::from)?;
        NodeSetup::new(
            self.kind,
            self.store.clone(),
            self.server_workers,
            self.hy,
            self.shape,
        )
    }

    /// A whole cluster in this process: a simulated fabric shaped for the
    /// system, every node's server side started.
    ///
    /// # Errors
    ///
    /// As [`Connect::setup`]; [`SystemError::SimFabric`] if the simulated
    /// fabric refuses the shape; [`SystemError::Store`] if a node's server
    /// side cannot start (a thread that cannot be spawned).
    pub fn in_process(self) -> Result<Cluster<SimFabric>, SystemError> {
        let setup = self.setup()?;
        let fabric = SimFabric::new(SimConfig::from_topology(setup.topology()))?;
        let nodes: Vec<NodeId> = (0..self.store.nodes).map(NodeId).collect();
        Cluster::start(setup, self.store, fabric, &nodes)
    }

    /// The nodes `hosted` of a cluster whose memory `fabric` reaches (in
    /// RDMA terms: this process registered those nodes' regions and
    /// connected to the others, e.g. `VerbsFabric::start_file` of
    /// `nessie-fabric-verbs`): their server side is started here; the other
    /// nodes' processes start theirs. A node's clients run on hosted nodes;
    /// clients without storage anywhere, so `hosted` may be empty: a
    /// process hosting no node (`VerbsFabric::client_only`) hands out
    /// [`Cluster::pure_client`]s and runs [`Cluster::run_without_storage`].
    ///
    /// # Errors
    ///
    /// As [`Connect::setup`]; [`SystemError::RegionsTooSmall`] if the
    /// fabric's regions do not fit the system.
    pub fn hosting<F>(self, fabric: F, hosted: &[NodeId]) -> Result<Cluster<F>, SystemError>
    where
        F: Fabric,
        F::Endpoint: 'static,
    {
        let setup = self.setup()?;
        Cluster::start(setup, self.store, fabric, hosted)
    }
}

/// A system's nodes as this process has them: the fabric, the server side
/// of the hosted nodes, and the clients it hands out (module documentation).
/// Dropping it stops the hosted nodes' servers; clients already handed out
/// then fail their requests to them.
pub struct Cluster<F: Fabric> {
    setup: NodeSetup,
    store: Config,
    hosted: Vec<NodeId>,
    // Declared before the fabric, so that the servers stop first.
    servers: Vec<NodeServers>,
    fabric: F,
}

impl<F> Cluster<F>
where
    F: Fabric,
    F::Endpoint: 'static,
{
    fn start(
        setup: NodeSetup,
        store: Config,
        fabric: F,
        hosted: &[NodeId],
    ) -> Result<Cluster<F>, SystemError> {
        let servers = hosted
            .iter()
            .map(|&n| setup.start(&fabric, n))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Cluster {
            setup,
            store,
            hosted: hosted.to_vec(),
            servers,
            fabric,
        })
    }

    /// A client on `node` with the first id no live client holds there.
    ///
    /// # Errors
    ///
    /// [`Error::ClientIdInUse`] naming the node's last id when every one
    /// of its `clients_per_node` ids is held; [`Error::Config`] if `node`
    /// is not hosted here (its clients write into its memory);
    /// [`Error::Unreachable`] and fabric errors opening the endpoint.
    pub fn client(&self, node: NodeId) -> Result<Box<dyn KvClient>, Error> {
        let per_node = self.store().clients_per_node.max(1);
        let mut last = None;
        for index in 0..per_node {
            match self.client_with_id(ClientId { node, index }) {
                Err(Error::ClientIdInUse(id)) => last = Some(id),
                other => return other,
            }
        }
        Err(Error::ClientIdInUse(
            last.unwrap_or(ClientId { node, index: 0 }),
        ))
    }

    /// A client without storage whose share is on `node` (docs/protocol.md
    /// §2.4): the first of the node's `pure_clients_per_node` shares that no
    /// live client holds, in this process or another. It takes the share by
    /// its lease before it is handed out (`KvClient::take_share`: the lease
    /// word CASed to name it, and the keys of a fresh generation of the
    /// windows the node's agent binds), and keeps it while it runs (its
    /// operations renew the lease).
    ///
    /// # Errors
    ///
    /// [`Error::Unsupported`] for another system than Nessie or a store
    /// with no client without storage; [`Error::ClientIdInUse`] naming the
    /// node's last share when every one is held (here, or by a client of
    /// another process whose lease stands); [`Error::Timeout`] when the
    /// node's agent granted no keys within the operation timeout; otherwise
    /// as [`Cluster::client`].
    pub fn pure_client(&self, node: NodeId) -> Result<Box<dyn KvClient>, Error> {
        self.take_pure_client(node).map(|(_, client)| client)
    }

    /// [`Cluster::pure_client`], with the id of the share it took.
    fn take_pure_client(&self, node: NodeId) -> Result<(ClientId, Box<dyn KvClient>), Error> {
        let store = self.store();
        if self.kind() != SystemKind::Nessie || store.pure_clients_per_node == 0 {
            return Err(Error::Unsupported(
                "clients without storage (Nessie with pure_clients_per_node > 0)",
            ));
        }
        let mut last = None;
        for index in store.clients_per_node..store.shares_per_node() {
            let id = ClientId { node, index };
            match self.client_with_id(id) {
                Err(Error::ClientIdInUse(id)) => last = Some(id),
                Ok(mut client) => match client.take_share() {
                    // Another process's client holds it.
                    Err(Error::ClientIdInUse(_)) => last = Some(id),
                    Ok(()) => return Ok((id, client)),
                    Err(e) => return Err(e),
                },
                Err(e) => return Err(e),
            }
        }
        Err(Error::ClientIdInUse(last.unwrap_or(ClientId {
            node,
            index: store.clients_per_node,
        })))
    }

    /// Runs `spec` through `spec.clients` clients without storage whose
    /// shares `node` holds ([`Cluster::pure_client`] each), as
    /// `NodeSetup::run` runs a node's own clients: what a process hosting
    /// no node runs (`nessie node run --without-storage`).
    ///
    /// # Errors
    ///
    /// [`SystemError::Workload`] for a workload the store cannot hold or a
    /// failed run; [`SystemError::Store`] when a client cannot be had (as
    /// [`Cluster::pure_client`]: every share held, no grant in time).
    pub fn run_without_storage(
        &self,
        node: NodeId,
        spec: &WorkloadSpec,
    ) -> Result<WorkloadReport, SystemError> {
        nessie_workload::check(spec, self.store())?;
        let mut workers = Vec::new();
        for _ in 0..spec.clients {
            let (id, client) = self.take_pure_client(node)?;
            workers.push(Worker {
                id,
                issuer: Blocking::new(client),
            });
        }
        Ok(nessie_workload::run_workers(
            self.kind().name(),
            workers,
            spec,
            &[],
        )?)
    }

    /// A client with the id `id` (tests and tools pick ids by hand; the
    /// same check applies: an id a live client holds is refused). A client
    /// of a node runs on a node this process hosts; a client without
    /// storage (`Config::is_pure`) runs anywhere the fabric reaches its
    /// node, such as a process hosting no node
    /// (`VerbsFabric::client_only` of `nessie-fabric-verbs`).
    ///
    /// # Errors
    ///
    /// [`Error::ClientIdInUse`] if a live client holds `id`; otherwise as
    /// [`Cluster::client`].
    pub fn client_with_id(&self, id: ClientId) -> Result<Box<dyn KvClient>, Error> {
        let pure = self.kind() == SystemKind::Nessie && self.store.is_pure(id);
        if !pure && !self.hosted.contains(&id.node) {
            return Err(Error::Config(nessie_protocol::ConfigError::OutOfRange {
                field: "client node",
                value: id.node.to_string(),
                reason: "a client runs on a node this process hosts",
            }));
        }
        self.open_client(id)
    }

    /// A client with the id `id`, wherever it runs (the checks of
    /// [`Cluster::client_with_id`] done).
    fn open_client(&self, id: ClientId) -> Result<Box<dyn KvClient>, Error> {
        match &self.setup {
            NodeSetup::Kv(sys) => sys.client(&self.fabric, id),
            NodeSetup::Cell(cfg, _) => {
                let ep = self.fabric.open(id.node)?;
                Ok(Box::new(CellClient::over_fabric(cfg.clone(), id, ep)?))
            }
        }
    }

    /// The system.
    pub fn kind(&self) -> SystemKind {
        self.setup.kind()
    }

    /// The store's shape.
    pub fn store(&self) -> &Config {
        &self.store
    }

    /// The nodes this process hosts.
    pub fn hosted(&self) -> &[NodeId] {
        &self.hosted
    }

    /// The fabric (the simulated one's fault switches, counters and nodes
    /// going down are on it).
    pub fn fabric(&self) -> &F {
        &self.fabric
    }

    /// The hosted nodes' server side, in [`Cluster::hosted`]'s order.
    pub fn servers(&self) -> &[NodeServers] {
        &self.servers
    }
}

#[cfg(test)]
mod tests {
    //! The front door's story: every system through one builder, clients
    //! that take the next free id, and ids that are never handed out twice.

    use super::*;
    use crate::testing::small_store as small;

    fn cluster(kind: SystemKind) -> Cluster<SimFabric> {
        Connect::new(kind)
            .store(small())
            .cell_shape(CellShape {
                meganode_nodes: 16,
                ..CellShape::default()
            })
            .in_process()
            .unwrap()
    }

    #[test]
    fn every_system_serves_a_put_and_a_get_through_one_door() {
        for kind in SystemKind::ALL {
            let c = cluster(kind);
            assert_eq!(c.kind(), kind);
            let mut a = c.client(NodeId(0)).unwrap();
            let mut b = c.client(NodeId(1)).unwrap();
            assert!(!a.put(b"k", b"v1").unwrap(), "{kind}: the key was new");
            assert_eq!(b.get(b"k").unwrap().as_deref(), Some(&b"v1"[..]), "{kind}");
            assert!(b.delete(b"k").unwrap(), "{kind}");
            assert_eq!(a.get(b"k").unwrap(), None, "{kind}");
        }
    }

    #[test]
    fn clients_take_the_next_free_id_and_no_id_is_handed_out_twice() {
        for kind in SystemKind::ALL {
            let c = cluster(kind);
            let first = c.client(NodeId(0)).unwrap();
            let by_hand = c.client_with_id(ClientId {
                node: NodeId(0),
                index: 0,
            });
            assert!(
                matches!(by_hand, Err(Error::ClientIdInUse(_))),
                "{kind}: a held id was handed out again"
            );
            let second = c.client(NodeId(0)).unwrap();
            let third = c.client(NodeId(0));
            assert!(
                matches!(third, Err(Error::ClientIdInUse(_))),
                "{kind}: two ids per node, three clients"
            );
            drop(first);
            assert!(c.client(NodeId(0)).is_ok(), "{kind}: a dropped client's id");
            drop(second);
        }
    }

    /// Identity by lease for a node's clients, in every system: two
    /// processes on one cluster, the second (hosting no node) running
    /// clients of node 0 as if it hosted it too, as a misconfigured
    /// deployment would. An id a client of one process holds is refused to
    /// the other by the node's registry word alone (their in-process
    /// registries know nothing of each other), the other takes the next
    /// id, and a dropped client's id goes to the next client of its own
    /// process, not to the other's.
    #[test]
    fn a_node_client_id_one_process_holds_is_refused_to_another() {
        let connect = |kind| {
            Connect::new(kind).store(small()).cell_shape(CellShape {
                meganode_nodes: 16,
                ..CellShape::default()
            })
        };
        let id = |index| ClientId {
            node: NodeId(0),
            index,
        };
        for kind in SystemKind::ALL {
            let topo = connect(kind).setup().unwrap().topology();
            let fabric = SimFabric::new(SimConfig::from_topology(topo)).unwrap();
            let a = connect(kind)
                .hosting(fabric.clone(), &[NodeId(0), NodeId(1)])
                .unwrap();
            let b = connect(kind)
                .hosting(fabric.another_process(), &[])
                .unwrap();
            let first = a.client_with_id(id(0)).unwrap();
            assert!(
                matches!(b.open_client(id(0)), Err(Error::ClientIdInUse(_))),
                "{kind}: another process's client took a held id"
            );
            let other = b.open_client(id(1)).unwrap();
            assert!(
                matches!(a.client_with_id(id(1)), Err(Error::ClientIdInUse(_))),
                "{kind}: the other process's id was handed out here"
            );
            drop(first);
            assert!(
                matches!(b.open_client(id(0)), Err(Error::ClientIdInUse(_))),
                "{kind}: a dropped client's id went to another process"
            );
            let mut again = a.client_with_id(id(0)).unwrap();
            again.put(b"k", b"v").unwrap();
            assert_eq!(
                again.get(b"k").unwrap().as_deref(),
                Some(&b"v"[..]),
                "{kind}"
            );
            drop(other);
        }
    }

    /// Identity by lease across processes: a client without storage takes
    /// its share before it is handed out, so a share whose lease a client
    /// of another process holds (here: a client dropped without a word, its
    /// lease standing until the agent takes it back) is skipped for the
    /// next one, and a node whose every share is held says so.
    #[test]
    fn a_client_without_storage_takes_a_share_no_other_process_holds() {
        let store = nessie_protocol::Config {
            pure_clients_per_node: 2,
            ..small()
        };
        let c = Connect::new(SystemKind::Nessie)
            .store(store.clone())
            .in_process()
            .unwrap();
        let mut first = c.pure_client(NodeId(1)).unwrap();
        first.put(b"k", b"1").unwrap();
        // Gone without releasing its share: as a process that died, its
        // lease stands (this process's registry forgets it).
        drop(first);
        let mut second = c.pure_client(NodeId(1)).unwrap();
        assert_eq!(second.get(b"k").unwrap().as_deref(), Some(&b"1"[..]));
        second.put(b"k", b"2").unwrap();
        second.renew_lease().expect("its lease stands");
        let by_hand = c.client_with_id(ClientId {
            node: NodeId(1),
            index: store.clients_per_node,
        });
        let mut by_hand = by_hand.expect("no live client of this process holds it");
        assert_eq!(
            by_hand.take_share(),
            Err(Error::ClientIdInUse(ClientId {
                node: NodeId(1),
                index: store.clients_per_node
            })),
            "the dead process's lease stands"
        );
        drop(by_hand);
        assert!(
            matches!(c.pure_client(NodeId(1)), Err(Error::ClientIdInUse(_))),
            "both shares are held"
        );
    }

    #[test]
    fn a_client_on_a_node_not_hosted_here_is_refused() {
        let setup = Connect::new(SystemKind::Nessie).store(small());
        let topo = setup.setup().unwrap().topology();
        let fabric = SimFabric::new(SimConfig::from_topology(topo)).unwrap();
        let c = setup.hosting(fabric, &[NodeId(1)]).unwrap();
        assert!(matches!(c.client(NodeId(0)), Err(Error::Config(_))));
        let mut b = c.client(NodeId(1)).unwrap();
        b.put(b"k", b"v").unwrap();
        assert_eq!(b.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
    }

    /// A process hosting no node (a cluster of `hosting(fabric, &[])` on
    /// the fabric another process's nodes serve) has no client of a node,
    /// but runs clients without storage: their shares taken by lease, a
    /// workload run through them, its writes seen by the nodes' clients.
    #[test]
    fn a_process_hosting_no_node_runs_clients_without_storage() {
        let store = nessie_protocol::Config {
            pure_clients_per_node: 2,
            ..small()
        };
        let door = Connect::new(SystemKind::Nessie).store(store.clone());
        let fabric =
            SimFabric::new(SimConfig::from_topology(door.setup().unwrap().topology())).unwrap();
        let nodes: Vec<NodeId> = (0..store.nodes).map(NodeId).collect();
        let served = door.clone().hosting(fabric.clone(), &nodes).unwrap();
        let app = door.hosting(fabric, &[]).unwrap();
        assert!(matches!(app.client(NodeId(0)), Err(Error::Config(_))));
        let spec = WorkloadSpec {
            clients: 2,
            keys: 16,
            max_ops: 40,
            get_pct: 50,
            preload: false,
            ..nessie_workload::testing::spec()
        };
        let report = app.run_without_storage(NodeId(1), &spec).unwrap();
        let ops: u64 = report.kinds.iter().map(|k| k.ops).sum();
        assert_eq!(ops, 80, "{report}");
        assert!(report.errors.is_empty(), "{report}");
        let mut pure = app.pure_client(NodeId(0)).unwrap();
        pure.put(b"from the app", b"v").unwrap();
        let mut local = served.client(NodeId(0)).unwrap();
        assert_eq!(
            local.get(b"from the app").unwrap().as_deref(),
            Some(&b"v"[..])
        );
    }

    /// Clients without storage waiting at a start barrier longer than
    /// their lease term keep their shares: the workload's client threads
    /// renew their leases while they wait (`Issuer::keep_alive`). Without
    /// it, every write of the measured phase failed `LeaseLost` (seen in
    /// the soft-RoCE guest, and here).
    #[test]
    fn clients_without_storage_keep_their_shares_across_a_long_start_barrier() {
        let term = std::time::Duration::from_millis(150);
        let store = nessie_protocol::Config {
            pure_clients_per_node: 2,
            lease_term: term,
            ..small()
        };
        let c = Connect::new(SystemKind::Nessie)
            .store(store)
            .in_process()
            .unwrap();
        let spec = WorkloadSpec {
            clients: 2,
            keys: 8,
            max_ops: 20,
            get_pct: 20,
            delete_pct: 0,
            preload: false,
            start_at: Some(nessie_workload::StartAt::Instant(
                std::time::SystemTime::now() + 4 * term,
            )),
            ..nessie_workload::testing::spec()
        };
        let report = c.run_without_storage(NodeId(1), &spec).unwrap();
        assert!(report.errors.is_empty(), "{report}");
    }

    #[test]
    fn an_invalid_store_is_refused_before_anything_starts() {
        let bad = Config {
            nodes: 0,
            ..small()
        };
        let r = Connect::new(SystemKind::Nessie).store(bad).in_process();
        assert!(matches!(r, Err(SystemError::Store(Error::Config(_)))));
    }
}

//! Running one of the compared systems (Nessie, NessieSD, NessieHY, Pilaf;
//! see `nessie-baselines`) from one node's process, as `nessie node
//! --system` does, on any fabric: the fabric's regions are checked against
//! what the system needs before that node's server workers start
//! ([`start_node_servers`]), and the node's client threads run the mixed
//! workload through the system's clients ([`run_system`]).
//!
//! On hardware the cluster file is turned into the system's deployment by
//! `nessie-cli`'s `node::cluster` (feature `verbs`), which sizes the regions; the check
//! here catches a fabric built any other way (and is what the simulator
//! tests use).

use nessie_baselines::SystemConfig;
use nessie_exec::ServerPool;
use nessie_protocol::{ClientId, Error, Fabric, NodeId, Topology};

use nessie_workload::{
    self, Blocking, ServerLoad, Worker, WorkloadError, WorkloadReport, WorkloadSpec,
};

/// Why a system cannot run on a fabric.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SystemError {
    /// The fabric's cluster or regions do not fit the system.
    #[error(
        "{system} needs {needed_nodes} nodes with regions of at least {needed_index} index \
         slots and {needed_data} data bytes per node; the fabric has {have_nodes} nodes with \
         {have_index} index slots and {have_data} data bytes per node (start every node with \
         the same --system so that the regions are sized for it)"
    )]
    RegionsTooSmall {
        /// The system (its name and layout options).
        system: String,
        /// Nodes the system is shaped for.
        needed_nodes: u16,
        /// Index slots per node it needs.
        needed_index: u32,
        /// Data bytes per node it needs.
        needed_data: u64,
        /// Nodes of the fabric.
        have_nodes: u16,
        /// Index slots per node of the fabric.
        have_index: u32,
        /// Data bytes per node of the fabric.
        have_data: u64,
    },
    /// The store failed (invalid shape, a fabric error, a worker that could
    /// not be spawned).
    #[error(transparent)]
    Store(#[from] Error),
    /// The workload was refused or failed.
    #[error(transparent)]
    Workload(#[from] WorkloadError),
    /// The in-process simulated fabric refused the system's shape.
    #[error(transparent)]
    SimFabric(#[from] nessie_fabric_sim::SimConfigError),
}

/// Checks that a fabric of topology `have` can host `sys`: the same number
/// of nodes, and regions at least as large as [`SystemConfig::topology`].
pub fn check_regions(sys: &SystemConfig, have: Topology) -> Result<(), SystemError> {
    region_check(&sys.kind.to_string(), sys.topology(), have)
}

/// Checks that a fabric of topology `have` holds what `system` needs
/// (`need`): the same number of nodes, regions at least as large.
pub fn region_check(system: &str, need: Topology, have: Topology) -> Result<(), SystemError> {
    if have.nodes != need.nodes
        || have.index_slots_per_node < need.index_slots_per_node
        || have.data_bytes_per_node < need.data_bytes_per_node
    {
        return Err(SystemError::RegionsTooSmall {
            system: system.to_string(),
            needed_nodes: need.nodes,
            needed_index: need.index_slots_per_node,
            needed_data: need.data_bytes_per_node,
            have_nodes: have.nodes,
            have_index: have.index_slots_per_node,
            have_data: have.data_bytes_per_node,
        });
    }
    Ok(())
}

/// Checks `fabric` against `sys` ([`check_regions`], and the store shape)
/// and starts `node`'s server workers: `None` for Nessie, which has none.
/// Dropping the pool stops them.
pub fn start_node_servers<F>(
    sys: &SystemConfig,
    fabric: &F,
    node: NodeId,
) -> Result<Option<ServerPool>, SystemError>
where
    F: Fabric,
    F::Endpoint: 'static,
{
    sys.store.validate().map_err(Error::Config)?;
    check_regions(sys, fabric.topology())?;
    Ok(sys.start_node_servers(fabric, node)?)
}

/// Runs `spec` with `spec.clients` clients of `sys` on `node` of `fabric`
/// (client ids `node.0` to `node.(clients-1)`), each a client thread of
/// [`nessie_workload::run_workers`].
///
/// The server-driven systems need their server workers running on every
/// node holding keys (started with [`start_node_servers`], in this process
/// or another); `servers` are those of this process, whose CPU time and
/// requests during the measured phase enter the report.
pub fn run_system<F: Fabric>(
    fabric: &F,
    node: NodeId,
    sys: &SystemConfig,
    spec: &WorkloadSpec,
    servers: &[&dyn ServerLoad],
) -> Result<WorkloadReport, SystemError>
where
    F::Endpoint: 'static,
{
    nessie_workload::check(spec, &sys.store)?;
    check_regions(sys, fabric.topology())?;
    let mut workers = Vec::new();
    for index in 0..spec.clients {
        let id = ClientId { node, index };
        workers.push(Worker {
            id,
            issuer: Blocking::new(sys.client(fabric, id)?),
        });
    }
    Ok(nessie_workload::run_workers(
        sys.kind.name(),
        workers,
        spec,
        servers,
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nessie_baselines::KvSystem;
    use nessie_fabric_sim::{SimConfig, SimFabric};
    use nessie_protocol::Config;

    fn store() -> Config {
        Config {
            nodes: 2,
            index_slots_per_node: 256,
            dtes_per_node: 512,
            clients_per_node: 2,
            max_key_len: 16,
            max_value_len: 32,
            ..Config::default()
        }
    }

    #[test]
    fn a_fabric_smaller_than_the_system_needs_is_refused_naming_the_size() {
        for kind in KvSystem::ALL {
            let sys = SystemConfig::new(kind, store());
            let need = sys.topology();
            let short = SimFabric::new(SimConfig::from_topology(Topology {
                data_bytes_per_node: need.data_bytes_per_node - 8,
                ..need
            }))
            .unwrap();
            let err = start_node_servers(&sys, &short, NodeId(0)).expect_err("too small");
            match &err {
                SystemError::RegionsTooSmall {
                    system,
                    needed_data,
                    have_data,
                    ..
                } => {
                    assert_eq!(system, kind.name());
                    assert_eq!(*needed_data, need.data_bytes_per_node);
                    assert_eq!(*have_data, need.data_bytes_per_node - 8);
                }
                other => panic!("{other:?}"),
            }
            let msg = err.to_string();
            assert!(
                msg.contains(kind.name())
                    && msg.contains(&need.data_bytes_per_node.to_string())
                    && msg.contains("--system"),
                "{msg}"
            );
            // Exactly the size needed: servers start for the server-driven
            // systems, none for Nessie.
            let fits = SimFabric::new(SimConfig::from_topology(need)).unwrap();
            let pool = start_node_servers(&sys, &fits, NodeId(1)).unwrap();
            assert_eq!(pool.is_some(), kind.has_servers(), "{kind}");
        }
    }

    #[test]
    fn a_fabric_of_another_cluster_size_is_refused() {
        let sys = SystemConfig::new(KvSystem::NessieSd, store());
        let three = Topology {
            nodes: 3,
            ..sys.topology()
        };
        assert!(matches!(
            check_regions(&sys, three),
            Err(SystemError::RegionsTooSmall {
                needed_nodes: 2,
                have_nodes: 3,
                ..
            })
        ));
        assert!(check_regions(&sys, sys.topology()).is_ok());
    }
}

#[cfg(test)]
mod workload_tests {
    //! The workload of each of the four systems on the simulator, with each
    //! node's server workers started as its own process would.

    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    use super::*;
    use nessie_baselines::KvSystem;
    use nessie_fabric_sim::{SimConfig, SimFabric};
    use nessie_protocol::Config;
    use nessie_workload::testing::spec;
    use nessie_workload::{Announcer, Failed, HistoryRecord, StartAt};

    fn unix_ns(t: SystemTime) -> u64 {
        t.duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64
    }

    fn store(nodes: u16) -> Config {
        Config {
            nodes,
            index_slots_per_node: 1024,
            dtes_per_node: 2048,
            clients_per_node: 2,
            max_key_len: 16,
            max_value_len: 32,
            // Replaced entries are reused after T: a short T keeps the
            // small tables from running out under a PUT-heavy test.
            expiration: Duration::from_millis(50),
            ..Config::default()
        }
    }

    /// `kind` on a simulated cluster of 3 nodes sized by its topology, with
    /// each node's server workers started as its own process would, and the
    /// workload run from node 1 (reporting node 1's servers).
    fn run_kind(kind: KvSystem) -> (WorkloadReport, Vec<ServerPool>) {
        let sys = SystemConfig::new(kind, store(3));
        let f = SimFabric::new(SimConfig::from_topology(sys.topology())).unwrap();
        let mut pools = Vec::new();
        for n in 0..3 {
            pools.extend(start_node_servers(&sys, &f, NodeId(n)).unwrap());
        }
        assert_eq!(pools.len(), if kind.has_servers() { 3 } else { 0 });
        let mine: Vec<&dyn ServerLoad> = pools
            .iter()
            .skip(1)
            .take(1)
            .map(|p| p as &dyn ServerLoad)
            .collect();
        let r = run_system(&f, NodeId(1), &sys, &spec(), &mine).unwrap();
        (r, pools)
    }

    #[test]
    fn the_workload_runs_on_the_simulator_and_counts_fabric_work() {
        let (r, _) = run_kind(KvSystem::Nessie);
        let gets = &r.kinds[0];
        assert!(gets.ops > 0 && r.kinds[1].ops > 0);
        assert_eq!(gets.failures, 0);
        assert!(
            gets.fabric.index_reads >= gets.ops,
            "every GET reads index entries"
        );
        assert!(r.kinds.iter().all(|k| k.fabric.server_writes == 0));
        assert_eq!((r.server_requests, r.server_cpu), (0, Duration::ZERO));
        assert!(r.client_cpu > Duration::ZERO);
        let text = r.to_string();
        assert!(
            text.contains("nessie: ") && text.contains("ops/s") && text.contains("GET"),
            "{text}"
        );
        assert!(
            text.contains("srvWR") && text.contains("CPU: client threads"),
            "{text}"
        );
    }

    /// Asserts what every server-driven run shares: no failures, work done,
    /// this node's servers busy, their errors none.
    fn served_cleanly(kind: KvSystem, r: &WorkloadReport, pools: &[ServerPool]) {
        for (name, k) in ["GET", "PUT", "DELETE"].iter().zip(&r.kinds) {
            assert_eq!(
                k.failures, 0,
                "{kind} {name}: {} of {} failed ({:?})",
                k.failures, k.ops, k.fabric
            );
        }
        assert!(r.kinds[0].ops > 0 && r.kinds[1].ops > 0, "{kind}: {r}");
        assert!(r.server_requests > 0, "{kind}: node 1's servers served");
        assert!(r.client_cpu > Duration::ZERO && r.server_cpu > Duration::ZERO);
        for p in pools {
            assert!(p.errors().is_empty(), "{kind}: {:?}", p.errors());
        }
        assert!(r.to_string().starts_with(kind.name()), "{r}");
    }

    #[test]
    fn nessie_sd_runs_with_per_node_servers_one_write_each_way() {
        let kind = KvSystem::NessieSd;
        let (r, pools) = run_kind(kind);
        served_cleanly(kind, &r, &pools);
        for k in &r.kinds {
            let s = &k.fabric;
            // A remote key: 1 request WRITE + 1 response WRITE; a key of
            // node 1: CPU writes only. No READ, no CAS, ever.
            assert_eq!(s.writes, s.server_writes, "{kind}: {s:?}");
            assert!(
                s.writes <= k.ops && s.reads() == 0 && s.cas() == 0,
                "{kind}: {s:?}"
            );
        }
        // About two thirds of the keys live on nodes 0 and 2.
        let puts = &r.kinds[1];
        assert!(puts.fabric.writes * 3 >= puts.ops, "{:?}", puts.fabric);
    }

    #[test]
    fn nessie_hy_and_pilaf_read_by_rdma_and_write_through_servers() {
        for kind in [KvSystem::NessieHy, KvSystem::Pilaf] {
            let (r, pools) = run_kind(kind);
            served_cleanly(kind, &r, &pools);
            let (gets, puts) = (&r.kinds[0].fabric, &r.kinds[1].fabric);
            assert_eq!(
                (gets.writes, gets.server_writes),
                (0, 0),
                "{kind}: {gets:?}"
            );
            assert!(gets.reads() > 0, "{kind}: client-driven GETs");
            assert_eq!(puts.writes, puts.server_writes, "{kind}: {puts:?}");
            assert!(
                puts.writes > 0 && puts.writes <= r.kinds[1].ops,
                "{kind}: {puts:?}"
            );
        }
    }

    #[test]
    fn the_workload_refuses_a_fabric_too_small_for_the_system() {
        let sys = SystemConfig::new(KvSystem::Pilaf, store(2));
        let need = sys.topology();
        let short = SimFabric::new(SimConfig::from_topology(Topology {
            data_bytes_per_node: need.data_bytes_per_node / 2,
            ..need
        }))
        .unwrap();
        let err = run_system(&short, NodeId(0), &sys, &spec(), &[]).unwrap_err();
        assert!(
            matches!(err, SystemError::RegionsTooSmall { .. }),
            "{err:?}"
        );
    }

    #[test]
    fn nodes_given_one_start_instant_start_measuring_together_and_a_late_one_is_refused() {
        let sys = SystemConfig::new(KvSystem::Nessie, store(2));
        let f = SimFabric::new(SimConfig::from_topology(sys.topology())).unwrap();
        let at = SystemTime::now() + Duration::from_millis(300);
        let s = WorkloadSpec {
            start_at: Some(StartAt::Instant(at)),
            duration: Duration::from_millis(50),
            ..spec()
        };
        // Two "nodes" of one cluster, started 100 ms apart, given one instant.
        let (a, b) = std::thread::scope(|scope| {
            let a = scope.spawn(|| run_system(&f, NodeId(0), &sys, &s, &[]).unwrap());
            std::thread::sleep(Duration::from_millis(100));
            let b = scope.spawn(|| run_system(&f, NodeId(1), &sys, &s, &[]).unwrap());
            (a.join().unwrap(), b.join().unwrap())
        });
        let at_ns = unix_ns(at);
        for r in [&a, &b] {
            assert_eq!(r.start_at_unix_ns, Some(at_ns));
            assert!(r.started_unix_ns >= at_ns, "started before the instant");
            // Generous: test threads share this machine's cores.
            assert!(
                r.started_unix_ns - at_ns < 500_000_000,
                "started late: {r:?}"
            );
        }
        // A node ready after the instant refuses (on a fresh cluster: the
        // runs above used node 0's data table).
        let fresh = SimFabric::new(SimConfig::from_topology(sys.topology())).unwrap();
        let late = WorkloadSpec {
            start_at: Some(StartAt::Instant(SystemTime::now() - Duration::from_secs(1))),
            preload: false,
            ..spec()
        };
        let e = run_system(&fresh, NodeId(0), &sys, &late, &[]).unwrap_err();
        assert!(e.to_string().contains("choose a later --start-at"), "{e}");
    }

    #[test]
    fn nodes_start_together_at_an_instant_announced_once_all_are_ready() {
        let sys = SystemConfig::new(KvSystem::Nessie, store(2));
        let f = SimFabric::new(SimConfig::from_topology(sys.topology())).unwrap();
        // The starter: counts the nodes that asked (they are ready), and
        // once both have, announces one instant 200 ms ahead to both.
        let asked = std::sync::Arc::new((std::sync::Mutex::new(0), std::sync::Condvar::new()));
        let at = std::sync::Arc::new(std::sync::OnceLock::new());
        let announcer = {
            let (asked, at) = (asked.clone(), at.clone());
            Announcer::new(move || {
                let (n, cv) = &*asked;
                let mut n = n.lock().unwrap();
                *n += 1;
                cv.notify_all();
                while *n < 2 {
                    n = cv.wait(n).unwrap();
                }
                Ok(*at.get_or_init(|| SystemTime::now() + Duration::from_millis(200)))
            })
        };
        let s = WorkloadSpec {
            start_at: Some(StartAt::Announced(announcer)),
            duration: Duration::from_millis(50),
            ..spec()
        };
        // Node 1 becomes ready 300 ms after node 0: node 0 waits for it.
        let (a, b) = std::thread::scope(|scope| {
            let a = scope.spawn(|| run_system(&f, NodeId(0), &sys, &s, &[]).unwrap());
            std::thread::sleep(Duration::from_millis(300));
            let b = scope.spawn(|| run_system(&f, NodeId(1), &sys, &s, &[]).unwrap());
            (a.join().unwrap(), b.join().unwrap())
        });
        let at_ns = unix_ns(*at.get().expect("announced"));
        for r in [&a, &b] {
            assert_eq!(r.start_at_unix_ns, Some(at_ns));
            assert!(r.started_unix_ns >= at_ns, "started before the instant");
        }
        // No instant announced: the run is refused, naming why.
        let silent = WorkloadSpec {
            start_at: Some(StartAt::Announced(Announcer::new(|| {
                Err("standard input closed".into())
            }))),
            preload: false,
            ..spec()
        };
        let fresh = SimFabric::new(SimConfig::from_topology(sys.topology())).unwrap();
        let e = run_system(&fresh, NodeId(0), &sys, &silent, &[]).unwrap_err();
        assert!(e.to_string().contains("standard input closed"), "{e}");
    }

    #[test]
    fn recorded_histories_round_trip_as_text_and_are_linearizable_on_the_simulator() {
        let sys = SystemConfig::new(KvSystem::Nessie, store(2));
        let f = SimFabric::new(SimConfig::from_topology(sys.topology())).unwrap();
        let s = WorkloadSpec {
            keys: 4,
            max_ops: 150,
            record: true,
            preload: false,
            duration: Duration::from_secs(20),
            ..spec()
        };
        let r = run_system(&f, NodeId(1), &sys, &s, &[]).unwrap();
        assert_eq!(r.history.len(), 300, "max_ops per client");
        assert!(r.kinds[0].misses > 0 || r.kinds[1].ops > 0);
        for h in &r.history {
            assert_eq!(HistoryRecord::parse_line(&h.to_line()).as_ref(), Some(h));
            assert!(h.invoke <= h.response);
            assert!(h.client == 1000 || h.client == 1001);
        }
        let failed = HistoryRecord {
            ret: Err(Failed::of(&nessie_protocol::Error::Unreachable(
                NodeId(2),
                nessie_protocol::Needed::Candidate,
            ))),
            request: nessie_protocol::Request::Get(Vec::new()),
            ..r.history[0].clone()
        };
        assert_eq!(HistoryRecord::parse_line(&failed.to_line()), Some(failed));
        // A healthy simulated cluster fails nothing: every record is an answer.
        use nessie_check::{check_history, Event};
        use nessie_protocol::Response;
        assert!(r.history.iter().all(|h| h.ret.is_ok()));
        let events: Vec<Event> = r.history.iter().map(HistoryRecord::event).collect();
        assert!(check_history(&events, 5_000_000).is_ok());
        // Teeth: a GET answering a value no one wrote is caught.
        let mut broken = events.clone();
        let get = broken
            .iter_mut()
            .find(|e| matches!(e.ret, Ok(Response::Get(Some(_)))))
            .expect("some GET found a value");
        get.ret = Ok(Response::Get(Some(b"never written".to_vec())));
        assert!(check_history(&broken, 5_000_000).is_err_and(|e| e.is_violation()));
    }
}

//! [`VerbsFabric`]: the protocol's `Fabric` over real RDMA.
//!
//! A process hosts one node in a deployment (`nessie node`), or several
//! nodes of one cluster file for tests on a single machine (each with its
//! own PD, regions and listener, on the same device), or none: a client
//! host ([`VerbsFabric::client_only`]) runs clients without storage of a
//! cluster it did not start. `open(node)` gives a client an endpoint on a
//! hosted node, or in a client host an endpoint for a client whose share
//! `node` holds; the endpoint dials every node of the cluster
//! ([`crate::endpoint`]).

use std::fmt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use nessie_protocol::{
    BackendError, EndpointRefusal, Fabric, FabricError, NodeId, Topology, TransportError,
};

use crate::byteorder::AtomicOrder;
use crate::clock_check::{check_now, ClockChecker, ClockLedger};
use crate::cluster::ClusterFile;
use crate::endpoint::VerbsEndpoint;
use crate::error::VerbsError;
use crate::events::EventCounts;
use crate::ffi::device::AtomicCap;
use crate::nic_counters::NicCounters;
use crate::node::{ClientHost, HostedNode};
use crate::policy::{open_file_limit, ConnectionBudget, QpPlan};
use crate::remote::RegionInfo;

/// The verbs backend: the nodes this process hosts.
pub struct VerbsFabric {
    /// Each hosted node's periodic clock check (`None`: turned off), in
    /// the order of `nodes`; stopped before the nodes go.
    clock_checks: Vec<Option<ClockChecker>>,
    nodes: Vec<HostedNode>,
    /// A process hosting no node: its device state (`None` otherwise).
    client_host: Option<ClientHost>,
    cluster: Arc<ClusterFile>,
}

/// What start-up found out about a hosted node (printed by `nessie node`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeReport {
    /// The node.
    pub node: NodeId,
    /// Device name.
    pub device: String,
    /// Firmware version.
    pub fw_ver: String,
    /// Atomic capability.
    pub atomic: AtomicCap,
    /// Probed atomic byte order.
    pub order: AtomicOrder,
    /// Queue-pair sizing.
    pub plan: QpPlan,
    /// Port link layer (1 InfiniBand, 2 Ethernet).
    pub link_layer: u8,
    /// The index region as advertised.
    pub index: RegionInfo,
    /// The data region as advertised.
    pub data: RegionInfo,
    /// Whether the index and data regions lie on huge pages.
    pub huge_pages: bool,
    /// The type of service set on its connections (`None`: not set, the
    /// host's default applies).
    pub traffic_class: Option<u8>,
    /// The host's default type of service for RoCE connections of the
    /// device's port, as configfs holds it now
    /// (`/sys/kernel/config/rdma_cm/<dev>/ports/<port>/default_roce_tos`;
    /// `None`: not readable, configfs not mounted or the device's
    /// directory not created: docs/deploy.md, "Persistent fabric
    /// settings").
    pub host_tos: Option<u8>,
    /// Queue pairs, file descriptors and threads the cluster's shape costs
    /// the node with one endpoint per client.
    pub budget: ConnectionBudget,
    /// The port's active MTU in bytes.
    pub mtu: u32,
    /// What the timing settings imply (`cluster::Timing::implications`).
    pub timing: String,
}

impl fmt::Display for NodeReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let link = match self.link_layer {
            1 => "InfiniBand",
            2 => "Ethernet (RoCE)",
            _ => "unknown link layer",
        };
        let host = match self.host_tos {
            Some(t) => format!("{t}"),
            None => "unreadable in configfs".into(),
        };
        let tos = match self.traffic_class {
            Some(t) => format!("type of service {t} (set; the host's default is {host})"),
            None => format!("type of service: the host's default, {host} (not set)"),
        };
        write!(
            f,
            "{}: device {} (fw {}, {link}), atomics {}, CAS stored {:?}-endian / returned {:?}-endian, \
             QP: {} send WRs, {} outstanding READ/atomic, index {} B rkey {:#x}, data {} B rkey {:#x}, {}, {tos}",
            self.node,
            self.device,
            self.fw_ver,
            self.atomic,
            self.order.stores,
            self.order.returns,
            self.plan.max_send_wr,
            self.plan.initiator_depth,
            self.index.len,
            self.index.rkey,
            self.data.len,
            self.data.rkey,
            if self.huge_pages { "huge pages" } else { "4 KiB pages" }
        )?;
        write!(f, "; {}; MTU {} B; {}", self.budget, self.mtu, self.timing)
    }
}

/// The host's default RoCE type of service for port `port` of `device`,
/// from configfs (`None` if it cannot be read).
pub fn default_roce_tos(device: &str, port: u8) -> Option<u8> {
    let path = format!("/sys/kernel/config/rdma_cm/{device}/ports/{port}/default_roce_tos");
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

impl VerbsFabric {
    /// Starts the `hosted` nodes of `cluster` in this process.
    pub fn start(cluster: ClusterFile, hosted: &[NodeId]) -> Result<VerbsFabric, VerbsError> {
        cluster.validate()?;
        let cluster = Arc::new(cluster);
        let mut nodes = Vec::new();
        for &id in hosted {
            cluster.node(id)?;
            nodes.push(HostedNode::start(cluster.clone(), id)?);
        }
        let every = Duration::from_millis(cluster.tuning.clock_check_interval_ms);
        let clock_checks = nodes
            .iter()
            .map(|n| {
                (!every.is_zero() && cluster.topology().nodes > 1)
                    .then(|| ClockChecker::start(n.shared().clone(), every))
                    .transpose()
            })
            .collect::<Result<_, _>>()?;
        Ok(VerbsFabric {
            clock_checks,
            nodes,
            client_host: None,
            cluster,
        })
    }

    /// A process hosting no node of `cluster` (a client host): its
    /// endpoints are for clients without storage, whose shares the
    /// cluster's nodes hold, dialling every node from `addr` (this host's
    /// address on the RDMA interface and an `rdma_cm` port free there) on
    /// `device` (the cluster file's when `None`).
    pub fn client_only(
        cluster: ClusterFile,
        addr: std::net::SocketAddr,
        device: Option<&str>,
    ) -> Result<VerbsFabric, VerbsError> {
        cluster.validate()?;
        let cluster = Arc::new(cluster);
        let host = ClientHost::start(cluster.clone(), addr, device)?;
        Ok(VerbsFabric {
            clock_checks: Vec::new(),
            nodes: Vec::new(),
            client_host: Some(host),
            cluster,
        })
    }

    /// Reads the cluster file at `path` and starts node `node` of it.
    pub fn start_file(path: &Path, node: NodeId) -> Result<VerbsFabric, VerbsError> {
        let cluster = ClusterFile::load(path)?;
        VerbsFabric::start(cluster, &[node])
    }

    /// The cluster file.
    pub fn cluster(&self) -> &ClusterFile {
        &self.cluster
    }

    /// The nodes this process hosts.
    pub fn hosted(&self) -> Vec<NodeId> {
        self.nodes.iter().map(|n| n.shared().id).collect()
    }

    /// What start-up found out about hosted node `node`.
    pub fn report(&self, node: NodeId) -> Option<NodeReport> {
        let n = self.nodes.iter().find(|n| n.shared().id == node)?.shared();
        Some(NodeReport {
            node,
            device: n.info.name.clone(),
            fw_ver: n.info.fw_ver.clone(),
            atomic: n.info.atomic,
            order: n.atomic_order(),
            plan: n.plan,
            link_layer: n.info.link_layer,
            index: n.index.info(),
            data: n.data.info(),
            huge_pages: n.index.huge_pages() && n.data.huge_pages(),
            traffic_class: self.cluster.tuning.traffic_class,
            host_tos: default_roce_tos(&n.info.name, self.cluster.port),
            budget: ConnectionBudget {
                nodes: self.cluster.nodes.len() as u64,
                endpoints: u64::from(self.cluster.store.clients_per_node),
                fd_limit: open_file_limit(),
            },
            mtu: n.info.active_mtu,
            timing: n.timing.implications(
                self.cluster
                    .protocol_config()
                    .map_or(Duration::ZERO, |c| c.cas_landing_bound()),
            ),
        })
    }

    /// The counters of hosted node `node`'s device port (sysfs; see
    /// [`NicCounters`]).
    pub fn nic_counters(&self, node: NodeId) -> Result<NicCounters, VerbsError> {
        let device = self.cluster.device_of(node)?;
        NicCounters::read(device, self.cluster.port).map_err(|source| VerbsError::Verbs {
            call: "reading the NIC's counters in sysfs",
            source,
        })
    }

    /// The flow-control counters (pause, PFC, ECN, congestion
    /// notifications) of the Ethernet port under hosted node `node`'s RDMA
    /// device, from `ethtool -S` ([`NicCounters::read_ethtool`]); an error
    /// on InfiniBand, without `ethtool`, or when the driver gives none.
    pub fn link_counters(&self, node: NodeId) -> Result<NicCounters, VerbsError> {
        let call = "reading the Ethernet port's flow-control counters (ethtool -S)";
        let netdev = self.netdev(node).map_err(|why| VerbsError::Verbs {
            call,
            source: std::io::Error::new(std::io::ErrorKind::NotFound, why),
        })?;
        NicCounters::read_ethtool(&netdev).map_err(|source| VerbsError::Verbs { call, source })
    }

    /// The flow-control settings of the Ethernet port under hosted node
    /// `node`'s device (`nic_counters::pfc_state`), or why there
    /// is none to read.
    pub fn pfc_state(&self, node: NodeId) -> Vec<String> {
        match self.netdev(node) {
            Ok(netdev) => crate::nic_counters::pfc_state(&netdev),
            Err(why) => vec![format!("PFC: {why}")],
        }
    }

    /// The Ethernet interface under node `node`'s device port, or why
    /// there is none (a node not in the file; InfiniBand).
    fn netdev(&self, node: NodeId) -> Result<String, String> {
        let device = self.cluster.device_of(node).map_err(|e| e.to_string())?;
        crate::nic_counters::netdev_of(device, self.cluster.port).ok_or_else(|| {
            format!(
                "no Ethernet interface under {device} port {} (InfiniBand has none)",
                self.cluster.port
            )
        })
    }

    /// Hosted node `node`'s device events so far, by type (a port going
    /// down or up, a fatal queue pair or device; see `events`).
    pub fn device_events(&self, node: NodeId) -> Option<EventCounts> {
        let n = self.nodes.iter().find(|n| n.shared().id == node)?;
        Some(n.device_events())
    }

    /// What hosted node `node`'s periodic clock checks found so far (see
    /// `clock_check`; `None` when not hosted here or turned off).
    pub fn clock_checks(&self, node: NodeId) -> Option<ClockLedger> {
        let i = self.nodes.iter().position(|n| n.shared().id == node)?;
        self.clock_checks[i].as_ref().map(ClockChecker::ledger)
    }

    /// Probes the clocks of hosted node `node`'s peers once now, each
    /// within `timeout` (`nessie node info`; peers not up answer nothing).
    pub fn check_clocks_now(&self, node: NodeId, timeout: Duration) -> Option<ClockLedger> {
        let n = self.nodes.iter().find(|n| n.shared().id == node)?;
        Some(check_now(n.shared(), timeout))
    }

    /// Whether every hosted node's listener is still running.
    pub fn is_serving(&self) -> bool {
        self.nodes.iter().all(HostedNode::is_listening)
    }

    /// Opens an endpoint, with the full start-up error on failure.
    /// In a client host, an endpoint for a client whose share `node`
    /// holds.
    pub fn open_endpoint(&self, node: NodeId) -> Result<VerbsEndpoint, VerbsError> {
        if let Some(host) = &self.client_host {
            return VerbsEndpoint::open_for(host.shared().clone(), node);
        }
        let n = self
            .nodes
            .iter()
            .find(|n| n.shared().id == node)
            .ok_or(VerbsError::NotHosted(node))?;
        VerbsEndpoint::open(n.shared().clone())
    }
}

impl Fabric for VerbsFabric {
    type Endpoint = VerbsEndpoint;

    fn topology(&self) -> Topology {
        self.cluster.topology()
    }

    fn open(&self, node: NodeId) -> Result<VerbsEndpoint, FabricError> {
        if node.0 >= self.cluster.topology().nodes {
            return Err(FabricError::UnknownNode(node));
        }
        self.open_endpoint(node).map_err(|e| {
            FabricError::Transport(TransportError::Endpoint(EndpointRefusal::Backend(
                BackendError::new(e),
            )))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ffi::device::device_names;

    fn cluster(device: &str) -> ClusterFile {
        ClusterFile::parse(&format!(
            "device = \"{device}\"\n[regions]\nindex_slots_per_node = 64\ndata_bytes_per_node = 1048576\n\
             [[nodes]]\nid = 0\naddress = \"127.0.0.1\"\nport = 20790\n"
        ))
        .expect("valid cluster file")
    }

    #[test]
    fn a_missing_device_is_a_typed_error_naming_the_fix() {
        let err = VerbsFabric::start(cluster("nessie-no-such-device"), &[NodeId(0)])
            .err()
            .expect("no such device");
        assert!(err.is_no_device(), "{err}");
        if device_names().is_empty() {
            // This machine (CI): no RDMA device at all.
            assert!(matches!(err, VerbsError::NoDevice), "{err:?}");
            let msg = err.to_string();
            for needle in [
                "no RDMA device found",
                "rdma-core",
                "rdma link add rxe0 type rxe netdev",
                "docs/deploy.md",
            ] {
                assert!(msg.contains(needle), "`{needle}` missing from: {msg}");
            }
        } else {
            assert!(matches!(err, VerbsError::DeviceNotFound { .. }), "{err:?}");
        }
    }

    #[test]
    fn open_refuses_nodes_outside_the_cluster_and_not_hosted() {
        // A fabric hosting nothing needs no device.
        let f = VerbsFabric::start(cluster("any"), &[]).expect("empty fabric");
        assert_eq!(f.topology().nodes, 1);
        assert!(f.hosted().is_empty());
        assert!(f.report(NodeId(0)).is_none());
        assert!(matches!(
            f.open(NodeId(1)),
            Err(FabricError::UnknownNode(NodeId(1)))
        ));
        let Err(FabricError::Transport(TransportError::Endpoint(EndpointRefusal::Backend(e)))) =
            f.open(NodeId(0))
        else {
            panic!("a node not hosted opened");
        };
        assert!(matches!(
            e.downcast_ref::<VerbsError>(),
            Some(VerbsError::NotHosted(NodeId(0)))
        ));
        assert!(matches!(
            VerbsFabric::start(cluster("any"), &[NodeId(4)]),
            Err(VerbsError::Cluster(
                crate::cluster::ClusterError::UnknownNode(4)
            ))
        ));
    }
}

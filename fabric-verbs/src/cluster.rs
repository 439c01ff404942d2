//! The cluster description file (TOML) and its validation.
//!
//! Every node of a deployment reads the same file: the nodes with their
//! `rdma_cm` addresses and ports, the sizes of the registered regions, the
//! device, port and GID index, the protocol's table shape (`[store]`) and the
//! verbs tuning knobs (`[tuning]`). See `fabric-verbs/examples/cluster.toml`
//! and `docs/deploy.md`.
//!
//! The file describes a Nessie deployment. Running another system on the
//! same file instead ([`ClusterFile::for_system`]; `nessie node --system`
//! runs the papers' baselines that way) keeps the file's `[store]` shape but
//! registers the regions that system needs (a baseline's data region holds
//! request slots and the tables, which may need more than the file's), and
//! adds the system's tag to the [fingerprint](ClusterFile::fingerprint) so
//! that nodes started with different systems refuse each other. This crate
//! knows systems only by that tag and their regions' sizes.

use std::collections::HashSet;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use nessie_protocol::layout::SizeClass;
use nessie_protocol::{Config, ConfigError, NodeId, Topology};
use serde::Deserialize;

/// Why a cluster file was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ClusterError {
    /// The file could not be read.
    #[error("cannot read cluster file {path}: {reason}")]
    Io {
        /// The path given.
        path: String,
        /// The I/O error, printed.
        reason: String,
    },
    /// The file is not valid TOML or has unknown or mistyped fields.
    #[error("cluster file is not valid: {0}")]
    Parse(String),
    /// No `[[nodes]]` entry.
    #[error("cluster file lists no [[nodes]]")]
    NoNodes,
    /// Two nodes share an id.
    #[error("node id {0} appears twice")]
    DuplicateId(u16),
    /// Node ids must be exactly `0..n`.
    #[error("node ids must be 0..{count} (each once); id {id} is out of that range")]
    IdsNotDense {
        /// The number of nodes listed.
        count: usize,
        /// The offending id.
        id: u16,
    },
    /// Two nodes share an address and port.
    #[error("nodes {first} and {second} both use {addr}")]
    DuplicateAddress {
        /// The first node.
        first: u16,
        /// The second node.
        second: u16,
        /// The shared address and port.
        addr: String,
    },
    /// An address is not an IP literal usable by `rdma_cm`.
    #[error("node {id}: address `{address}` is not usable: {reason}")]
    BadAddress {
        /// The node.
        id: u16,
        /// The address as written.
        address: String,
        /// Why.
        reason: &'static str,
    },
    /// A field that must be positive is zero or empty.
    #[error("`{0}` must be positive / non-empty")]
    Zero(&'static str),
    /// A field is outside its allowed range.
    #[error("`{field}` = {value}: {reason}")]
    OutOfRange {
        /// The field.
        field: &'static str,
        /// Its value, printed.
        value: String,
        /// What is allowed.
        reason: &'static str,
    },
    /// The `[store]` section gives an invalid protocol configuration.
    #[error("[store] does not give a valid protocol configuration: {0}")]
    Store(#[from] ConfigError),
    /// `--node` names a node the file does not list.
    #[error("node {0} is not listed in the cluster file")]
    UnknownNode(u16),
    /// A system whose shape is not the one this file gives
    /// ([`ClusterFile::protocol_config`]): another number of nodes, or
    /// another `[store]` shape.
    #[error("the {system} configuration does not match the cluster file's [store] and [regions] (nodes, tables, key and value limits must come from the file)")]
    SystemShape {
        /// The system (its tag).
        system: String,
    },
}

/// One node: its id and the address its `rdma_cm` listener binds.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeEntry {
    /// Node id, `0..n`.
    pub id: u16,
    /// IP address (v4 or v6 literal) of the node's RDMA interface (RoCE
    /// netdev or IPoIB interface).
    pub address: String,
    /// `rdma_cm` port the node listens on.
    pub port: u16,
    /// RDMA device of this node if it differs from the cluster-wide `device`.
    #[serde(default)]
    pub device: Option<String>,
}

/// Sizes of the two regions every node registers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Regions {
    /// 64-bit index table entries per node.
    pub index_slots_per_node: u32,
    /// Bytes of data table per node (a multiple of 8).
    pub data_bytes_per_node: u64,
}

/// The protocol's table shape, identical on every node.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Store {
    /// Largest key in bytes.
    pub max_key_len: u32,
    /// Largest value in bytes.
    pub max_value_len: u32,
    /// Most clients any node runs (each owns an equal share of its data table).
    pub clients_per_node: u16,
    /// Clients without storage whose shares each node holds (0: none):
    /// processes that host no node (`nessie node run --without-storage`)
    /// write their entries into these shares through memory windows the
    /// node's agent binds (docs/protocol.md §2.4). Their lease blocks take
    /// `8 x (2 + size classes)` bytes each at the end of the data region.
    pub pure_clients_per_node: u16,
    /// How long, in milliseconds, a client without storage's heartbeat may
    /// stand still before its node's agent takes its share back (progress
    /// only: safety rests on the windows' binds). Default: 3,000.
    pub lease_term_ms: u64,
    /// Cuckoo candidates per key (candidate buckets).
    pub candidates: u8,
    /// Index table entries per candidate bucket (1: the papers' one entry
    /// per candidate; 4 fills the index past 0.95 with two candidates).
    /// `regions.index_slots_per_node` must be a multiple of it.
    pub bucket_slots: u8,
    /// Seed of the candidate and filter hashes.
    pub hash_seed: u64,
    /// Expiration period T in milliseconds.
    pub expiration_ms: u64,
    /// Largest clock difference between nodes, in milliseconds (A1; checked
    /// when nodes connect, see [`Tuning::clock_skew_action`]).
    pub clock_skew_ms: u64,
    /// The protocol's `deadline_margin` in milliseconds: every posted
    /// mutation must take effect within it (A2). Default: 10 ms, at most a
    /// quarter of `expiration_ms`.
    pub deadline_margin_ms: Option<u64>,
    /// Size classes below the main one (docs/protocol.md §2.3), ascending
    /// by entry size, each taking `percent` of the data region; the main
    /// class (entries for the longest key and the largest value) takes
    /// the rest. Empty: one class, every entry sized for the largest.
    pub size_classes: Vec<ClassShare>,
}

/// Renders as before size classes when there are none (the fingerprint
/// hashes this rendering: a one-class cluster keeps its fingerprint).
impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("Store");
        d.field("max_key_len", &self.max_key_len)
            .field("max_value_len", &self.max_value_len)
            .field("clients_per_node", &self.clients_per_node)
            .field("candidates", &self.candidates)
            .field("bucket_slots", &self.bucket_slots)
            .field("hash_seed", &self.hash_seed)
            .field("expiration_ms", &self.expiration_ms)
            .field("clock_skew_ms", &self.clock_skew_ms)
            .field("deadline_margin_ms", &self.deadline_margin_ms);
        if !self.size_classes.is_empty() {
            d.field("size_classes", &self.size_classes);
        }
        // As size classes: a cluster without clients without storage keeps
        // its fingerprint.
        if self.pure_clients_per_node > 0 {
            d.field("pure_clients_per_node", &self.pure_clients_per_node)
                .field("lease_term_ms", &self.lease_term_ms);
        }
        d.finish()
    }
}

/// One size class of `[store] size_classes`: its entry size and its share
/// of each node's data region.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassShare {
    /// Bytes of each entry (header, key and value; a multiple of 8, at
    /// least 40).
    pub entry_bytes: u32,
    /// Percent of the data region the class's table takes (1 to 99; all
    /// classes together below 100, the main class taking the rest).
    pub percent: u8,
}

impl Default for Store {
    fn default() -> Self {
        let d = Config::default();
        Store {
            max_key_len: 32,
            max_value_len: 256,
            clients_per_node: d.clients_per_node,
            pure_clients_per_node: 0,
            lease_term_ms: d.lease_term.as_millis() as u64,
            candidates: d.candidates,
            bucket_slots: d.bucket_slots,
            hash_seed: d.hash_seed,
            expiration_ms: 200,
            clock_skew_ms: 1,
            deadline_margin_ms: None,
            size_classes: Vec::new(),
        }
    }
}

/// What a node does when the clock check at connection set-up shows a peer's
/// clock further off than `clock_skew_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SkewAction {
    /// Refuse the connection (the peer is treated as down until it is fixed).
    #[default]
    Refuse,
    /// Log a warning and connect anyway.
    Warn,
}

/// The longest `retry_count` accepted: the InfiniBand specification allows
/// 7, but soft-RoCE (`rdma_rxe`) treats 7 as "retry forever", which hangs
/// every client of a dead node.
pub const MAX_RETRY_COUNT: u8 = 6;

/// The duration of the ACK timeout exponent `t` (4.096 us x 2^t), as
/// InfiniBand and RoCE define the QP attribute `timeout`.
pub fn ack_timeout_duration(t: u8) -> Duration {
    Duration::from_nanos(4096u64.saturating_mul(1u64 << u32::from(t.min(40))))
}

/// Verbs tuning; the defaults suit the protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Tuning {
    /// Send-queue depth of each queue pair (capped by the device).
    pub send_queue_depth: u32,
    /// Outstanding RDMA READs/atomics per queue pair (capped by the device).
    pub max_rd_atomic: u8,
    /// How long an endpoint keeps retrying to connect to a node that is not up yet.
    pub connect_timeout_ms: u64,
    /// Registered staging memory per endpoint for READ targets and WRITE sources.
    pub staging_bytes: u64,
    /// Transport retries of an unacknowledged packet before the QP fails
    /// with `IBV_WC_RETRY_EXC_ERR` (at most 6).
    pub retry_count: u8,
    /// ACK timeout exponent: a packet is retransmitted after
    /// 4.096 us x 2^`ack_timeout` without an acknowledgement (1..=31; set on
    /// every dialled QP with `rdma_set_option(RDMA_OPTION_ID_ACK_TIMEOUT)`).
    pub ack_timeout: u8,
    /// Type of service of the connections (`RDMA_OPTION_ID_TOS`): the RoCE
    /// traffic class (DSCP << 2 | ECN); on InfiniBand the subnet manager maps
    /// it to the service level of the path. `None` (the default) sets
    /// nothing, so the host's own default applies (on RoCE the device's
    /// `default_roce_tos` in configfs, which a lossless-class setup
    /// configures); set it only to override that.
    pub traffic_class: Option<u8>,
    /// The fabric's packet lifetime in microseconds: the longest a packet
    /// sent can still arrive (switch buffers, links). A2 needs a bound.
    pub packet_lifetime_us: u64,
    /// How long a posted WRITE or CAS may go without completing before its
    /// queue pair is moved to the error state (so that it lands within the
    /// deadline margin or never), in microseconds. Default: three quarters of
    /// `deadline_margin - packet_lifetime`.
    pub landing_deadline_us: Option<u64>,
    /// How long a posted READ may go without completing before its queue
    /// pair is moved to the error state, in milliseconds.
    pub read_deadline_ms: u64,
    /// What to do when a peer's clock is off by more than `clock_skew_ms`.
    pub clock_skew_action: SkewAction,
    /// How often each hosted node checks its peers' clocks again after
    /// connecting (one short probe connection per peer, in turn, from one
    /// thread: `clock_check`), in milliseconds; 0 turns it off.
    pub clock_check_interval_ms: u64,
    /// Put the index, data and staging regions on 2 MiB huge pages (fewer
    /// NIC address-translation misses on large tables); without huge pages
    /// configured (`vm.nr_hugepages`) the node falls back to ordinary pages
    /// and says so.
    pub huge_pages: bool,
    /// WRITEs of at most this many bytes are posted inline
    /// (`IBV_SEND_INLINE`: the CPU copies them into the work request, the NIC
    /// does not DMA-read them): recycle marks, request and response slots.
    /// Each queue pair asks for this much and uses what the device grants
    /// (a device that refuses any inline data gets none, with a warning);
    /// 0 turns it off.
    pub max_inline_data: u32,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            send_queue_depth: 256,
            max_rd_atomic: 16,
            connect_timeout_ms: 30_000,
            staging_bytes: 4 << 20,
            retry_count: MAX_RETRY_COUNT,
            ack_timeout: 8,
            traffic_class: None,
            packet_lifetime_us: 1_000,
            landing_deadline_us: None,
            read_deadline_ms: 1_000,
            clock_skew_action: SkewAction::Refuse,
            clock_check_interval_ms: 30_000,
            huge_pages: false,
            max_inline_data: 64,
        }
    }
}

/// The transport timing a cluster file gives, checked against A2.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// The protocol's deadline margin.
    pub deadline_margin: Duration,
    /// The fabric's packet lifetime bound.
    pub packet_lifetime: Duration,
    /// How long a mutation may stay unacknowledged before its QP is failed.
    pub landing_deadline: Duration,
    /// How long a READ may stay uncompleted before its QP is failed.
    pub read_deadline: Duration,
    /// One ACK timeout.
    pub ack_timeout: Duration,
    /// Transport retries.
    pub retry_count: u8,
    /// The largest clock difference between nodes.
    pub clock_skew: Duration,
}

impl Timing {
    /// How long the transport itself tries a packet: `(retry_count + 1) x` ACK timeout.
    pub fn transport_give_up(&self) -> Duration {
        self.ack_timeout * (u32::from(self.retry_count) + 1)
    }

    /// The longest the fabric may hold a packet (a PFC pause, a stuck
    /// buffer) without a late CAS landing later than `cas_landing_bound`
    /// after its post ([`Config::cas_landing_bound`]: 127 expiration periods
    /// plus the margin, what Nessie's incarnation tags leave, A2′): its last
    /// packet may leave the NIC as late as the landing deadline (the queue
    /// pair fails then, and nothing more is sent).
    pub fn tolerated_hold(&self, cas_landing_bound: Duration) -> Duration {
        cas_landing_bound.saturating_sub(self.landing_deadline)
    }

    /// What these settings imply, in one paragraph (`nessie node info`).
    pub fn implications(&self, cas_landing_bound: Duration) -> String {
        let tolerated = self.tolerated_hold(cas_landing_bound);
        format!(
            "timing: a WRITE or CAS not acknowledged within {:?} of its post fails its queue pair (the watchdog enforces it; its outcome is then unknown), a READ within {:?}; the transport's own retries end after {:?}; a CAS landing up to {:?} after its post cannot match a word of a reused entry (127 expiration periods plus the margin: Nessie's incarnation tags, A2'), so the fabric may hold a packet up to {tolerated:?}{}",
            self.landing_deadline,
            self.read_deadline,
            self.transport_give_up(),
            cas_landing_bound,
            if tolerated < self.packet_lifetime {
                format!(
                    " (less than the stated packet lifetime {:?}: raise expiration_ms)",
                    self.packet_lifetime
                )
            } else {
                ", a PFC pause included".to_string()
            }
        )
    }
}

/// Settings earlier versions read, and why they are gone (a file that
/// still sets one is refused, with the reason).
const REMOVED: [(&str, &str); 2] = [
    (
        "reuse_hold_ms",
        "the incarnation tags (issue 39) give a posted CAS 127 x expiration_ms to land, so no \
         hold is needed on a PFC fabric; delete the line (docs/deploy.md, \"PFC fabrics\")",
    ),
    (
        "pause_free",
        "Nessie is no longer refused on RoCE without a reuse hold (issue 39's incarnation \
         tags); delete the line",
    ),
];

/// A validated cluster description.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterFile {
    /// RDMA device name (`ibv_devices`), e.g. `mlx5_0` or `rxe0`.
    pub device: String,
    /// Physical port of the device (from 1).
    #[serde(default = "one")]
    pub port: u8,
    /// A GID index of the port, checked to exist at start-up. It does not
    /// select the GID: `rdma_cm` derives the GID from the node's address.
    #[serde(default)]
    pub gid_index: u8,
    /// Region sizes.
    pub regions: Regions,
    /// Protocol table shape.
    #[serde(default)]
    pub store: Store,
    /// Verbs tuning.
    #[serde(default)]
    pub tuning: Tuning,
    /// The nodes.
    #[serde(default)]
    pub nodes: Vec<NodeEntry>,
    /// The system this cluster runs instead of Nessie, if any (set by
    /// [`ClusterFile::for_system`], never read from the file).
    #[serde(skip)]
    system: Option<SystemRegions>,
}

/// Another system's deployment of the file: what all nodes must agree on
/// beyond the file, and the regions it registers.
#[derive(Debug, Clone, PartialEq, Eq)]
struct SystemRegions {
    /// The system and the options that change its memory layout.
    tag: String,
    /// The regions registered: per field, the larger of the file's and the
    /// system's needs.
    regions: Regions,
}

fn one() -> u8 {
    1
}

impl ClusterFile {
    /// Reads and validates the file at `path`.
    pub fn load(path: &Path) -> Result<ClusterFile, ClusterError> {
        let text = std::fs::read_to_string(path).map_err(|e| ClusterError::Io {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        ClusterFile::parse(&text)
    }

    /// Parses and validates TOML text.
    pub fn parse(text: &str) -> Result<ClusterFile, ClusterError> {
        let mut f: ClusterFile = toml::from_str(text).map_err(|e| {
            let mut why = e.to_string();
            if let Some((name, because)) = REMOVED.iter().find(|(n, _)| why.contains(n)) {
                why.push_str(&format!("\n`{name}` was removed: {because}"));
            }
            ClusterError::Parse(why)
        })?;
        f.nodes.sort_by_key(|n| n.id);
        f.validate()?;
        Ok(f)
    }

    /// Checks every field (called by [`ClusterFile::parse`]; call it again
    /// after changing a file built in code).
    pub fn validate(&self) -> Result<(), ClusterError> {
        if self.device.trim().is_empty() {
            return Err(ClusterError::Zero("device"));
        }
        if self.port == 0 {
            return Err(ClusterError::Zero("port"));
        }
        if self.nodes.is_empty() {
            return Err(ClusterError::NoNodes);
        }
        if self.nodes.len() > usize::from(u16::MAX) {
            return Err(ClusterError::OutOfRange {
                field: "nodes",
                value: self.nodes.len().to_string(),
                reason: "at most 65535 nodes",
            });
        }
        let mut ids = HashSet::new();
        let mut addrs: Vec<(SocketAddr, u16)> = Vec::new();
        for n in &self.nodes {
            if !ids.insert(n.id) {
                return Err(ClusterError::DuplicateId(n.id));
            }
            if usize::from(n.id) >= self.nodes.len() {
                return Err(ClusterError::IdsNotDense {
                    count: self.nodes.len(),
                    id: n.id,
                });
            }
            let sa = node_socket_addr(n)?;
            if let Some((_, first)) = addrs.iter().find(|(a, _)| *a == sa) {
                return Err(ClusterError::DuplicateAddress {
                    first: *first,
                    second: n.id,
                    addr: sa.to_string(),
                });
            }
            addrs.push((sa, n.id));
            if matches!(&n.device, Some(d) if d.trim().is_empty()) {
                return Err(ClusterError::Zero("nodes.device"));
            }
        }
        if self.regions.index_slots_per_node == 0 {
            return Err(ClusterError::Zero("regions.index_slots_per_node"));
        }
        if self.regions.data_bytes_per_node == 0 {
            return Err(ClusterError::Zero("regions.data_bytes_per_node"));
        }
        if !self.regions.data_bytes_per_node.is_multiple_of(8) {
            return Err(ClusterError::OutOfRange {
                field: "regions.data_bytes_per_node",
                value: self.regions.data_bytes_per_node.to_string(),
                reason: "must be a multiple of 8",
            });
        }
        let t = &self.tuning;
        if t.send_queue_depth == 0 {
            return Err(ClusterError::Zero("tuning.send_queue_depth"));
        }
        if t.max_rd_atomic == 0 {
            return Err(ClusterError::Zero("tuning.max_rd_atomic"));
        }
        if t.connect_timeout_ms == 0 {
            return Err(ClusterError::Zero("tuning.connect_timeout_ms"));
        }
        if t.staging_bytes < 4096 {
            return Err(ClusterError::OutOfRange {
                field: "tuning.staging_bytes",
                value: t.staging_bytes.to_string(),
                reason: "at least 4096",
            });
        }
        if t.retry_count > MAX_RETRY_COUNT {
            return Err(ClusterError::OutOfRange {
                field: "tuning.retry_count",
                value: t.retry_count.to_string(),
                reason: "at most 6 (soft-RoCE retries forever at 7, so a dead node would hang its clients)",
            });
        }
        if !(1..=31).contains(&t.ack_timeout) {
            return Err(ClusterError::OutOfRange {
                field: "tuning.ack_timeout",
                value: t.ack_timeout.to_string(),
                reason: "1..=31 (4.096 us x 2^ack_timeout; 0 would never time out)",
            });
        }
        if t.read_deadline_ms == 0 {
            return Err(ClusterError::Zero("tuning.read_deadline_ms"));
        }
        self.protocol_config()?.validate()?;
        self.timing()?;
        Ok(())
    }

    /// The transport timing, refused when it cannot honour A2: a mutation
    /// must land within the protocol's `deadline_margin`, so both the
    /// landing deadline (after which the requester fails the queue pair) and
    /// the transport's own retries, `(retry_count + 1) x` ACK timeout, plus
    /// the packet lifetime must fit inside the margin.
    pub fn timing(&self) -> Result<Timing, ClusterError> {
        let cfg = self.protocol_config()?;
        let t = &self.tuning;
        let margin = cfg.deadline_margin;
        let lifetime = Duration::from_micros(t.packet_lifetime_us);
        let Some(budget) = margin.checked_sub(lifetime).filter(|b| !b.is_zero()) else {
            return Err(ClusterError::OutOfRange {
                field: "tuning.packet_lifetime_us",
                value: t.packet_lifetime_us.to_string(),
                reason: "must be shorter than the deadline margin ([store] deadline_margin_ms)",
            });
        };
        let landing = t
            .landing_deadline_us
            .map_or(budget * 3 / 4, Duration::from_micros);
        if landing.is_zero() || landing >= budget {
            return Err(ClusterError::OutOfRange {
                field: "tuning.landing_deadline_us",
                value: landing.as_micros().to_string(),
                reason: "must be positive and shorter than deadline_margin minus packet_lifetime_us (A2)",
            });
        }
        let timing = Timing {
            deadline_margin: margin,
            packet_lifetime: lifetime,
            landing_deadline: landing,
            read_deadline: Duration::from_millis(t.read_deadline_ms),
            ack_timeout: ack_timeout_duration(t.ack_timeout),
            retry_count: t.retry_count,
            clock_skew: cfg.clock_skew,
        };
        if timing.transport_give_up() > budget {
            return Err(ClusterError::OutOfRange {
                field: "tuning.ack_timeout",
                value: t.ack_timeout.to_string(),
                reason: "(retry_count + 1) x ACK timeout must fit inside deadline_margin minus packet_lifetime_us (A2): lower ack_timeout or retry_count, or raise [store] deadline_margin_ms",
            });
        }
        Ok(timing)
    }

    /// The nodes and the sizes of the regions every node registers: the
    /// file's `[regions]`, or for a baseline ([`ClusterFile::for_system`])
    /// the larger of those and the system's needs.
    pub fn topology(&self) -> Topology {
        let r = self.registered_regions();
        Topology {
            nodes: self.nodes.len() as u16,
            index_slots_per_node: r.index_slots_per_node,
            data_bytes_per_node: r.data_bytes_per_node,
        }
    }

    fn registered_regions(&self) -> Regions {
        self.system.as_ref().map_or(self.regions, |s| s.regions)
    }

    /// This cluster running another system than Nessie, named `tag` (the
    /// system and the options that change its memory layout, e.g.
    /// `nessie-hy+filter-bits`), whose regions must hold at least `need`:
    /// the registered regions grow to the larger of the file's and `need`,
    /// field by field (data rounded up to a multiple of 8), and `tag` joins
    /// the fingerprint. The `[store]` shape, and so
    /// [`ClusterFile::protocol_config`], stays the file's. Refused when `need`
    /// is for another number of nodes.
    pub fn for_system(mut self, tag: &str, need: Topology) -> Result<ClusterFile, ClusterError> {
        if usize::from(need.nodes) != self.nodes.len() {
            return Err(ClusterError::SystemShape { system: tag.into() });
        }
        let regions = Regions {
            index_slots_per_node: self
                .regions
                .index_slots_per_node
                .max(need.index_slots_per_node),
            data_bytes_per_node: self
                .regions
                .data_bytes_per_node
                .max(need.data_bytes_per_node.next_multiple_of(8)),
        };
        self.system = Some(SystemRegions {
            tag: tag.into(),
            regions,
        });
        Ok(self)
    }

    /// The system this cluster was set up for by [`ClusterFile::for_system`]
    /// (`None`: Nessie), as its tag enters the fingerprint (e.g.
    /// `nessie-hy+filter-bits`).
    pub fn system_tag(&self) -> Option<&str> {
        self.system.as_ref().map(|s| s.tag.as_str())
    }

    /// The protocol configuration every client of this cluster uses: the
    /// `[store]` shape, with as many data table entries as fit the data region.
    pub fn protocol_config(&self) -> Result<Config, ClusterError> {
        let s = &self.store;
        let mut cfg = Config {
            nodes: self.nodes.len() as u16,
            index_slots_per_node: self.regions.index_slots_per_node,
            clients_per_node: s.clients_per_node,
            pure_clients_per_node: s.pure_clients_per_node,
            lease_term: Duration::from_millis(s.lease_term_ms),
            max_key_len: s.max_key_len,
            max_value_len: s.max_value_len,
            candidates: s.candidates,
            bucket_slots: s.bucket_slots,
            hash_seed: s.hash_seed,
            expiration: Duration::from_millis(s.expiration_ms),
            clock_skew: Duration::from_millis(s.clock_skew_ms),
            ..Config::default()
        };
        cfg.deadline_margin = match s.deadline_margin_ms {
            Some(ms) => Duration::from_millis(ms),
            None => cfg.deadline_margin.min(cfg.expiration / 4),
        };
        // The classes first (their sizes below): the lease blocks of the
        // clients without storage and the registry words of the node's
        // clients close the region (`Config::region_tail_bytes`, which
        // counts the classes); the tables take the rest.
        cfg.size_classes = s
            .size_classes
            .iter()
            .map(|c| SizeClass {
                entry_bytes: c.entry_bytes,
                dtes_per_node: 0,
            })
            .collect();
        let bytes = self
            .regions
            .data_bytes_per_node
            .saturating_sub(cfg.region_tail_bytes())
            / 8
            * 8;
        let taken: u64 = s.size_classes.iter().map(|c| u64::from(c.percent)).sum();
        if s.size_classes.iter().any(|c| c.percent == 0) || taken >= 100 {
            return Err(ClusterError::OutOfRange {
                field: "[store] size_classes",
                value: format!("{taken} percent in all"),
                reason: "each class's percent at least 1, all classes together below 100 \
                         (the main class takes the rest)",
            });
        }
        let entries = |share: u64, entry: u64| {
            (bytes / 100 * share / entry.max(1)).min(u64::from(u32::MAX)) as u32
        };
        for (class, c) in cfg.size_classes.iter_mut().zip(&s.size_classes) {
            class.dtes_per_node = entries(u64::from(c.percent), u64::from(c.entry_bytes));
        }
        cfg.dtes_per_node = if s.size_classes.is_empty() {
            (bytes / cfg.layout().entry_bytes().max(1)).min(u64::from(u32::MAX)) as u32
        } else {
            entries(100 - taken, cfg.layout().entry_bytes())
        };
        Ok(cfg)
    }

    /// The entry of node `id`.
    pub fn node(&self, id: NodeId) -> Result<&NodeEntry, ClusterError> {
        self.nodes
            .iter()
            .find(|n| n.id == id.0)
            .ok_or(ClusterError::UnknownNode(id.0))
    }

    /// The socket address of node `id`.
    pub fn addr(&self, id: NodeId) -> Result<SocketAddr, ClusterError> {
        node_socket_addr(self.node(id)?)
    }

    /// The device node `id` uses.
    pub fn device_of(&self, id: NodeId) -> Result<&str, ClusterError> {
        Ok(self.node(id)?.device.as_deref().unwrap_or(&self.device))
    }

    /// A fingerprint of everything all nodes must agree on (nodes, regions,
    /// store shape, and the system when it is not Nessie: its name, layout
    /// options and registered regions). Peers with another fingerprint are
    /// refused at connect.
    pub fn fingerprint(&self) -> u64 {
        // FNV-1a over a canonical rendering: stable across builds and hosts.
        // A Nessie cluster renders exactly as before systems existed.
        let mut text = format!("{:?}|{:?}", self.regions, self.store);
        for n in &self.nodes {
            text.push_str(&format!("|{}@{}:{}", n.id, n.address, n.port));
        }
        if let Some(s) = &self.system {
            text.push_str(&format!("|system={}|{:?}", s.tag, s.regions));
        }
        text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        })
    }
}

fn node_socket_addr(n: &NodeEntry) -> Result<SocketAddr, ClusterError> {
    let bad = |reason| ClusterError::BadAddress {
        id: n.id,
        address: n.address.clone(),
        reason,
    };
    let ip: IpAddr = n
        .address
        .trim()
        .parse()
        .map_err(|_| bad("not an IPv4 or IPv6 literal (host names are not resolved)"))?;
    if ip.is_unspecified() {
        return Err(bad("the unspecified address cannot be connected to"));
    }
    if ip.is_multicast() {
        return Err(bad("a multicast address"));
    }
    if n.port == 0 {
        return Err(bad("port 0"));
    }
    Ok(SocketAddr::new(ip, n.port))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = include_str!("../examples/cluster.toml");

    fn with_nodes(nodes: &str) -> String {
        format!(
            "device = \"rxe0\"\n[regions]\nindex_slots_per_node = 1024\ndata_bytes_per_node = 1048576\n{nodes}"
        )
    }

    #[test]
    fn the_example_file_is_valid() {
        let f = ClusterFile::parse(GOOD).unwrap();
        assert_eq!(f.nodes.len(), 3);
        assert_eq!(f.topology().nodes, 3);
        assert_eq!(f.port, 1);
        let cfg = f.protocol_config().unwrap();
        cfg.validate().unwrap();
        assert!(cfg.topology().data_bytes_per_node <= f.regions.data_bytes_per_node);
        assert_eq!(
            f.addr(NodeId(2)).unwrap(),
            "192.168.10.3:7471".parse().unwrap()
        );
    }

    /// `[store] bucket_slots` shapes the index in buckets; a bucket size
    /// that does not divide the index table is refused with the field named.
    #[test]
    fn a_bucketed_index_is_configured_and_checked() {
        let node = "[[nodes]]\nid = 0\naddress = \"10.0.0.1\"\nport = 1\n";
        let store = |b: u8| {
            format!(
                "{}[store]\ncandidates = 2\nbucket_slots = {b}\n{node}",
                with_nodes("")
            )
        };
        let f = ClusterFile::parse(&store(4)).unwrap();
        let cfg = f.protocol_config().unwrap();
        assert_eq!((cfg.candidates, cfg.bucket_slots), (2, 4));
        let e = ClusterFile::parse(&store(3)).unwrap_err().to_string();
        assert!(e.contains("index_slots_per_node"), "{e}");
        let e = ClusterFile::parse(&store(9)).unwrap_err().to_string();
        assert!(e.contains("bucket_slots"), "{e}");
    }

    /// `[store] size_classes` splits the data region: each class its
    /// percent, the main class the rest; classes change the fingerprint,
    /// and a file without them renders (and so fingerprints) exactly as
    /// before classes; bad
    /// shares and bad classes are refused, naming the field.
    #[test]
    fn size_classes_split_the_data_region() {
        let node = "[[nodes]]\nid = 0\naddress = \"10.0.0.1\"\nport = 1\n";
        let file = |classes: &str| {
            format!(
                "{}[store]\nmax_value_len = 1000\n{classes}{node}",
                with_nodes("")
            )
        };
        let plain = ClusterFile::parse(&file("")).unwrap();
        let classes = "size_classes = [{ entry_bytes = 64, percent = 40 }, { entry_bytes = 256, percent = 30 }]\n";
        let f = ClusterFile::parse(&file(classes)).unwrap();
        let cfg = f.protocol_config().unwrap();
        cfg.validate().unwrap();
        let bytes = f.regions.data_bytes_per_node;
        assert_eq!(cfg.size_classes.len(), 2);
        assert_eq!(
            u64::from(cfg.size_classes[0].dtes_per_node),
            bytes / 100 * 40 / 64
        );
        assert_eq!(
            u64::from(cfg.size_classes[1].dtes_per_node),
            bytes / 100 * 30 / 256
        );
        assert_eq!(
            u64::from(cfg.dtes_per_node),
            bytes / 100 * 30 / cfg.layout().entry_bytes()
        );
        assert!(cfg.topology().data_bytes_per_node <= bytes);
        assert_ne!(plain.fingerprint(), f.fingerprint());
        let plain_again = ClusterFile::parse(&file("size_classes = []\n")).unwrap();
        assert_eq!(plain.fingerprint(), plain_again.fingerprint());
        assert_eq!(
            format!("{:?}", Store::default()),
            "Store { max_key_len: 32, max_value_len: 256, clients_per_node: 4, candidates: 3, \
             bucket_slots: 1, hash_seed: 86197635606885, expiration_ms: 200, clock_skew_ms: 1, \
             deadline_margin_ms: None }"
        );
        let e = ClusterFile::parse(&file(
            "size_classes = [{ entry_bytes = 64, percent = 100 }]\n",
        ))
        .unwrap_err()
        .to_string();
        assert!(e.contains("size_classes"), "{e}");
        let e = ClusterFile::parse(&file(
            "size_classes = [{ entry_bytes = 60, percent = 10 }]\n",
        ))
        .unwrap_err()
        .to_string();
        assert!(e.contains("size_classes"), "{e}");
    }

    /// `[store] pure_clients_per_node` reserves a lease block per client
    /// without storage at the end of the data region (the tables fit in
    /// front of them, with and without size classes), carries the lease
    /// term to the protocol, and changes the fingerprint only when set.
    #[test]
    fn clients_without_storage_take_lease_blocks_at_the_end_of_the_region() {
        let node = "[[nodes]]\nid = 0\naddress = \"10.0.0.1\"\nport = 1\n";
        let file = |store: &str| format!("{}[store]\n{store}{node}", with_nodes(""));
        let plain = ClusterFile::parse(&file("")).unwrap();
        for classes in ["", "size_classes = [{ entry_bytes = 64, percent = 40 }]\n"] {
            let f = ClusterFile::parse(&file(&format!(
                "pure_clients_per_node = 3\nlease_term_ms = 1500\n{classes}"
            )))
            .unwrap();
            let cfg = f.protocol_config().unwrap();
            cfg.validate().unwrap();
            assert_eq!(cfg.pure_clients_per_node, 3);
            assert_eq!(cfg.lease_term, std::time::Duration::from_millis(1500));
            let end = cfg.data_tables().region_bytes()
                + 3 * cfg.lease_block_bytes()
                + u64::from(cfg.clients_per_node) * nessie_protocol::registry::WORD_BYTES;
            assert!(end <= f.regions.data_bytes_per_node, "{classes}");
            assert_eq!(cfg.topology().data_bytes_per_node, end);
            assert_ne!(plain.fingerprint(), f.fingerprint());
        }
        let none = ClusterFile::parse(&file("pure_clients_per_node = 0\n")).unwrap();
        assert_eq!(plain.fingerprint(), none.fingerprint());
    }

    /// The type of service is set only when configured: unset, the host's
    /// default (`default_roce_tos`) applies (issue 26).
    #[test]
    fn the_type_of_service_is_the_hosts_unless_configured() {
        let node = "[[nodes]]\nid = 0\naddress = \"10.0.0.1\"\nport = 1\n";
        let unset = ClusterFile::parse(&with_nodes(node)).unwrap();
        assert_eq!(unset.tuning.traffic_class, None);
        assert_eq!(Tuning::default().traffic_class, None);
        let set = ClusterFile::parse(&format!(
            "{}[tuning]\ntraffic_class = 106\n{node}",
            with_nodes("")
        ))
        .unwrap();
        assert_eq!(set.tuning.traffic_class, Some(106));
        let zero = ClusterFile::parse(&format!(
            "{}[tuning]\ntraffic_class = 0\n{node}",
            with_nodes("")
        ))
        .unwrap();
        assert_eq!(
            zero.tuning.traffic_class,
            Some(0),
            "0 set explicitly is set"
        );
    }

    #[test]
    fn nodes_may_be_listed_in_any_order_and_share_an_ip() {
        let f = ClusterFile::parse(&with_nodes(
            "[[nodes]]\nid = 1\naddress = \"10.0.0.1\"\nport = 2\n[[nodes]]\nid = 0\naddress = \"10.0.0.1\"\nport = 1\n",
        ))
        .unwrap();
        assert_eq!(f.nodes[0].id, 0);
        assert_eq!(f.device_of(NodeId(1)).unwrap(), "rxe0");
        assert_eq!(f.node(NodeId(5)), Err(ClusterError::UnknownNode(5)));
    }

    #[test]
    fn per_node_device_overrides_the_default() {
        let f = ClusterFile::parse(&with_nodes(
            "[[nodes]]\nid = 0\naddress = \"fe80::1\"\nport = 1\ndevice = \"mlx5_1\"\n",
        ))
        .unwrap();
        assert_eq!(f.device_of(NodeId(0)).unwrap(), "mlx5_1");
    }

    fn err(text: &str) -> ClusterError {
        ClusterFile::parse(text).unwrap_err()
    }

    #[test]
    fn bad_files_are_rejected_with_the_reason() {
        let n = |id: u16, addr: &str, port: u16| {
            format!("[[nodes]]\nid = {id}\naddress = \"{addr}\"\nport = {port}\n")
        };
        assert_eq!(err(&with_nodes("")), ClusterError::NoNodes);
        assert_eq!(
            err(&with_nodes(&(n(0, "10.0.0.1", 1) + &n(0, "10.0.0.2", 1)))),
            ClusterError::DuplicateId(0)
        );
        assert_eq!(
            err(&with_nodes(&(n(0, "10.0.0.1", 1) + &n(2, "10.0.0.2", 1)))),
            ClusterError::IdsNotDense { count: 2, id: 2 }
        );
        assert!(matches!(
            err(&with_nodes(&(n(0, "10.0.0.1", 1) + &n(1, "10.0.0.1", 1)))),
            ClusterError::DuplicateAddress {
                first: 0,
                second: 1,
                ..
            }
        ));
        for bad in ["node-a.example", "0.0.0.0", "224.0.0.1", "10.0.0"] {
            assert!(
                matches!(
                    err(&with_nodes(&n(0, bad, 1))),
                    ClusterError::BadAddress { .. }
                ),
                "{bad}"
            );
        }
        assert!(matches!(
            err(&with_nodes(&n(0, "10.0.0.1", 0))),
            ClusterError::BadAddress { .. }
        ));
    }

    #[test]
    fn zero_sizes_and_fields_are_rejected() {
        let node = "[[nodes]]\nid = 0\naddress = \"10.0.0.1\"\nport = 1\n";
        let file = |dev: &str, port: u8, slots: u32, bytes: u64, extra: &str| {
            format!("device = \"{dev}\"\nport = {port}\n{extra}\n[regions]\nindex_slots_per_node = {slots}\ndata_bytes_per_node = {bytes}\n{node}")
        };
        assert_eq!(err(&file("", 1, 8, 4096, "")), ClusterError::Zero("device"));
        assert_eq!(
            err(&file("rxe0", 0, 8, 4096, "")),
            ClusterError::Zero("port")
        );
        assert_eq!(
            err(&file("rxe0", 1, 0, 4096, "")),
            ClusterError::Zero("regions.index_slots_per_node")
        );
        assert_eq!(
            err(&file("rxe0", 1, 8, 0, "")),
            ClusterError::Zero("regions.data_bytes_per_node")
        );
        assert!(matches!(
            err(&file("rxe0", 1, 8, 4097, "")),
            ClusterError::OutOfRange {
                field: "regions.data_bytes_per_node",
                ..
            }
        ));
        // Too small a data region for two entries per client.
        assert!(matches!(
            err(&file("rxe0", 1, 8, 64, "")),
            ClusterError::Store(_)
        ));
    }

    #[test]
    fn typos_and_wrong_types_are_parse_errors() {
        let base = with_nodes("[[nodes]]\nid = 0\naddress = \"10.0.0.1\"\nport = 1\n");
        assert!(matches!(
            err(&format!("devcie = \"x\"\n{base}")),
            ClusterError::Parse(_)
        ));
        assert!(matches!(
            err(&base.replace("port = 1", "port = \"one\"")),
            ClusterError::Parse(_)
        ));
        assert!(matches!(err("not toml at all ["), ClusterError::Parse(_)));
        assert!(matches!(
            err(&format!("{base}[tuning]\nsend_queue_depth = 0\n")),
            ClusterError::Zero("tuning.send_queue_depth")
        ));
    }

    #[test]
    fn fingerprint_changes_with_the_shape() {
        let a = ClusterFile::parse(GOOD).unwrap();
        let mut b = a.clone();
        assert_eq!(a.fingerprint(), b.fingerprint());
        b.regions.index_slots_per_node += 1;
        assert_ne!(a.fingerprint(), b.fingerprint());
        let mut c = a.clone();
        c.tuning.send_queue_depth = 7; // local tuning may differ
        assert_eq!(a.fingerprint(), c.fingerprint());
    }

    #[test]
    fn another_system_grows_the_regions_keeps_the_store_and_joins_the_fingerprint() {
        let file = ClusterFile::parse(GOOD).unwrap();
        let store = file.protocol_config().unwrap();
        let mine = file.topology();
        assert_eq!(file.system_tag(), None);
        let mut prints = vec![file.fingerprint()];
        // Smaller, larger data, larger index, and two tags of one size.
        for (tag, index, data) in [
            (
                "small",
                mine.index_slots_per_node / 2,
                mine.data_bytes_per_node / 2,
            ),
            (
                "big-data",
                mine.index_slots_per_node,
                mine.data_bytes_per_node * 2 + 3,
            ),
            ("big-index", mine.index_slots_per_node * 2, 8),
            ("big-index+option", mine.index_slots_per_node * 2, 8),
        ] {
            let need = Topology {
                nodes: 3,
                index_slots_per_node: index,
                data_bytes_per_node: data,
            };
            let c = file.clone().for_system(tag, need).unwrap();
            let have = c.topology();
            assert_eq!(
                have.data_bytes_per_node,
                data.next_multiple_of(8).max(mine.data_bytes_per_node),
                "{tag}"
            );
            assert_eq!(
                have.index_slots_per_node,
                index.max(mine.index_slots_per_node),
                "{tag}"
            );
            assert_eq!(have.nodes, 3);
            assert_eq!(
                c.protocol_config().unwrap(),
                store,
                "the shape stays the file's"
            );
            assert_eq!(c.system_tag(), Some(tag));
            prints.push(c.fingerprint());
        }
        let mut unique = prints.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(
            unique.len(),
            prints.len(),
            "every system has its own fingerprint"
        );
    }

    #[test]
    fn a_system_for_another_number_of_nodes_is_rejected() {
        let file = ClusterFile::parse(GOOD).unwrap();
        let need = Topology {
            nodes: 2,
            ..file.topology()
        };
        assert_eq!(
            file.for_system("pilaf", need),
            Err(ClusterError::SystemShape {
                system: "pilaf".into()
            })
        );
    }

    fn with_timing(store: &str, tuning: &str) -> Result<ClusterFile, ClusterError> {
        ClusterFile::parse(&format!(
            "device = \"rxe0\"\n[regions]\nindex_slots_per_node = 1024\ndata_bytes_per_node = 1048576\n\
             [store]\n{store}\n[tuning]\n{tuning}\n[[nodes]]\nid = 0\naddress = \"10.0.0.1\"\nport = 1\n"
        ))
    }

    #[test]
    fn the_default_timing_honours_a2() {
        let f = with_timing("", "").unwrap();
        let t = f.timing().unwrap();
        assert_eq!(t.retry_count, 6);
        assert_eq!(t.deadline_margin, Duration::from_millis(10));
        assert_eq!(t.ack_timeout, Duration::from_nanos(4096 << 8));
        assert!(t.transport_give_up() + t.packet_lifetime <= t.deadline_margin);
        assert!(t.landing_deadline + t.packet_lifetime < t.deadline_margin);
        assert_eq!(t.landing_deadline, Duration::from_micros(6750));
        assert_eq!(ack_timeout_duration(14), Duration::from_nanos(4096 << 14));
    }

    #[test]
    fn timing_that_cannot_honour_a2_is_refused() {
        let field = |r: Result<ClusterFile, ClusterError>| match r {
            Err(ClusterError::OutOfRange { field, .. }) => field,
            other => panic!("{other:?}"),
        };
        // Retry count 7: rxe retries forever.
        assert_eq!(
            field(with_timing("", "retry_count = 7")),
            "tuning.retry_count"
        );
        assert_eq!(
            field(with_timing("", "ack_timeout = 0")),
            "tuning.ack_timeout"
        );
        // 7 x 2.1 ms does not fit a 10 ms margin.
        assert_eq!(
            field(with_timing("", "ack_timeout = 9")),
            "tuning.ack_timeout"
        );
        // ...but fits with 3 retries, or a larger margin.
        assert!(with_timing("", "ack_timeout = 9\nretry_count = 3").is_ok());
        assert!(with_timing(
            "expiration_ms = 2000\ndeadline_margin_ms = 100",
            "ack_timeout = 11"
        )
        .is_ok());
        // The landing deadline and the packet lifetime must fit the margin.
        assert_eq!(
            field(with_timing("", "landing_deadline_us = 9000")),
            "tuning.landing_deadline_us"
        );
        assert!(with_timing("", "landing_deadline_us = 8999").is_ok());
        assert_eq!(
            field(with_timing("", "packet_lifetime_us = 10000")),
            "tuning.packet_lifetime_us"
        );
        // A margin the protocol itself refuses (not below expiration - skew).
        assert!(matches!(
            with_timing("deadline_margin_ms = 200", ""),
            Err(ClusterError::Store(_))
        ));
        let f = with_timing("", "clock_skew_action = \"warn\"").unwrap();
        assert_eq!(f.tuning.clock_skew_action, SkewAction::Warn);
        assert!(matches!(
            with_timing("", "clock_skew_action = \"ignore\""),
            Err(ClusterError::Parse(_))
        ));
    }

    #[test]
    fn missing_file_is_an_io_error() {
        assert!(matches!(
            ClusterFile::load(Path::new("/nonexistent/cluster.toml")),
            Err(ClusterError::Io { .. })
        ));
    }

    /// A file that still sets a removed setting is refused, saying why it
    /// went and what to do.
    #[test]
    fn a_removed_setting_is_refused_with_the_reason() {
        for (section, line) in [
            ("[store]", "reuse_hold_ms = 500"),
            ("[tuning]", "pause_free = true"),
        ] {
            let nodes = "[[nodes]]\nid = 0\naddress = \"10.0.0.1\"\nport = 7471\n";
            let text = with_nodes(&format!("{section}\n{line}\n{nodes}"));
            match ClusterFile::parse(&text) {
                Err(ClusterError::Parse(why)) => {
                    assert!(
                        why.contains("was removed") && why.contains("issue 39"),
                        "{why}"
                    )
                }
                other => panic!("{line}: {other:?}"),
            }
        }
    }

    /// The tags leave a CAS 127 expiration periods plus the margin to land
    /// (25.41 s with the example's 200 ms and 10 ms); a packet may be held
    /// that long less the landing deadline, which `info` says.
    #[test]
    fn the_timing_says_how_long_a_pause_it_tolerates() {
        let file = ClusterFile::parse(GOOD).unwrap();
        let t = file.timing().unwrap();
        let bound = file.protocol_config().unwrap().cas_landing_bound();
        assert_eq!(bound, Duration::from_millis(127 * 200 + 10));
        assert_eq!(t.tolerated_hold(bound), bound - t.landing_deadline);
        let text = t.implications(bound);
        assert!(
            text.contains(&format!("within {:?} of its post", t.landing_deadline)),
            "{text}"
        );
        assert!(text.contains("a PFC pause included"), "{text}");
        let short = t.implications(t.landing_deadline);
        assert!(short.contains("raise expiration_ms"), "{short}");
    }
}

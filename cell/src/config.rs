//! Configuration of a Cell deployment, its validation, the test-only fault
//! switches, and where everything lives in a node's data region.
//!
//! ```text
//! data region of a node:
//!   | request/response slots (`nessie-exec`'s mailbox) | region slot 0 | region slot 1 | ...
//!   | the region directory (only with DirectoryPlace::Node; used on that node) |
//! region (one meganode):
//!   | header (64 B: region id, root word) | node 0 (the meganode's root) | node 1 | ... | extent heap |
//! ```
//!
//! Sizes default to what this 2-core machine can hold and exercise: 1 KiB
//! nodes (the paper's choice, §3), meganodes of 256 nodes instead of the
//! paper's 64 MiB, so that a few thousand keys already make a tree of several
//! meganodes and meganode splits happen in every run.

use std::path::PathBuf;
use std::time::Duration;

use nessie_exec::mailbox::MailboxLayout;
use nessie_protocol::registry::Registry;
use nessie_protocol::{ConfigError, Error, NodeId};

use crate::node::{HEADER_BYTES, TRAILER_BYTES};
use crate::ptr::{RegionId, EXTENT_PTR_BYTES};

/// How a Cell deployment is sized for a workload ([`CellConfig::sized`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sizing {
    /// Nodes in all.
    pub nodes: u16,
    /// Nodes holding regions (the first ones).
    pub server_nodes: u16,
    /// Client ids per node.
    pub clients: u16,
    /// Server worker threads per server node.
    pub workers: u16,
    /// Keys the runs may hold (preloaded and inserted).
    pub keys: u64,
    /// Largest key.
    pub key_size: u32,
    /// Largest value.
    pub value_size: u32,
    /// All keys in one meganode that never splits.
    pub one_meganode: bool,
    /// Client caches on.
    pub caches: bool,
}

/// How a client searches each meganode.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SearchMode {
    /// The locality selector of §2.5 decides per meganode and server.
    Selector,
    /// Every meganode is searched by its server (one RPC each).
    ServerOnly,
    /// Every meganode is searched by the client with RDMA READs.
    ClientOnly,
    /// A fixed share of meganode searches (percent, 0-100) goes to the server,
    /// the rest is client-side (Table 2's "fixed ratio").
    Fixed(f64),
}

impl SearchMode {
    /// A short name for reports.
    pub fn name(&self) -> String {
        match self {
            SearchMode::Selector => "selector".into(),
            SearchMode::ServerOnly => "server-side".into(),
            SearchMode::ClientOnly => "client-side".into(),
            SearchMode::Fixed(p) => format!("fixed {p:.0}% server"),
        }
    }
}

/// The locality selector's constants (§2.5; the paper's values by default).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SelectorConfig {
    /// Samples kept per server and kind (the moving average's window, n).
    pub history: usize,
    /// Samples with `|s - mean| >= k_sigma * sd` are outliers (K).
    pub k_sigma: f64,
    /// Probability of choosing the method estimated worse (p).
    pub explore: f64,
    /// A server's history is dropped after this long without a search.
    pub expiry: Duration,
    /// The meganode height m assumed before any has been observed.
    pub initial_height: f64,
    /// Samples needed before outliers are rejected.
    pub min_samples: usize,
}

impl Default for SelectorConfig {
    fn default() -> Self {
        SelectorConfig {
            history: 100,
            k_sigma: 3.0,
            explore: 0.01,
            expiry: Duration::from_secs(3),
            initial_height: 3.0,
            min_samples: 10,
        }
    }
}

/// The client's caches (§2.2-2.3, §3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheConfig {
    /// Nodes kept in the client's node cache (0: no node cache).
    pub nodes: usize,
    /// Nodes of bottom meganodes are cached only at this level or above
    /// (nodes of upper meganodes always): the paper caches only nodes near
    /// the root.
    pub min_level: u8,
    /// Key ranges of leaf-level meganodes kept (0: none), the paper's cache
    /// of server-side traversal paths.
    pub ranges: usize,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            nodes: 4096,
            min_level: 1,
            ranges: 4096,
        }
    }
}

/// Where the region table (the paper's external service, §2.1, §2.6)
/// lives.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum DirectoryPlace {
    /// In the memory of the process, shared by its servers and clients
    /// ([`crate::region::Directory`]): an in-process deployment, the
    /// cluster simulator.
    #[default]
    Process,
    /// In a registered area of this server node's data region, read and
    /// written over the fabric ([`crate::directory::FabricDirectory`]):
    /// node processes that share nothing but the fabric.
    Node(NodeId),
}

/// Test-only broken variants (all off by default). Each removes one check
/// of §2.3-2.4 (or of the fabric directory) so that the tests can show
/// they catch its absence.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CellFaults {
    /// Client-side searches accept a node whose versions differ or are odd.
    pub skip_version_check: bool,
    /// Client-side searches do not compare the key with a node's min and
    /// max (nor a scanned leaf's min with the previous leaf's max).
    pub skip_minmax_check: bool,
    /// Clients accept an extent whose CRC64 does not match the pointer's.
    pub skip_crc_check: bool,
    /// Servers reuse the nodes a meganode split invalidated at once instead
    /// of after the reuse grace period.
    pub reuse_at_once: bool,
    /// Clients do not re-read the versions of the leaves a scan collected
    /// (no double collect).
    pub skip_scan_validation: bool,
    /// Clients send writes as unclaimed requests (as the request slots'
    /// GETs are), so a server may still run one its client gave up on and
    /// reported as not committed.
    pub unclaimed_writes: bool,
    /// Readers of the fabric directory accept a copy of the table without
    /// checking its versions (a copy being rewritten included).
    pub directory_skip_version_check: bool,
    /// Servers update the fabric directory's current copy in place instead
    /// of writing a copy of their own and committing it by CAS.
    pub directory_in_place: bool,
    /// A server whose WRITE to its directory copy failed writes that copy
    /// again at once, without waiting out `landing_margin`.
    pub directory_skip_landing_wait: bool,
    /// Recovery rebuilds a region whose log shows an open meganode split
    /// with its writes open, before the split is settled (issue 25 hole 1:
    /// a client holding a stale path into X_right gets a write acknowledged
    /// that the split's invalidation then throws away).
    pub recovery_opens_early: bool,
    /// Recovery looks only at the splits a recovered meganode's log leaves
    /// open, not at those it shows finished but whose new meganode was
    /// never opened or linked into its parent (issue 25 hole 2: X's server
    /// dies between `SplitFinish` and opening Y, and Y, on a survivor,
    /// stays frozen for good).
    pub recovery_forgets_finished_splits: bool,
    /// Recovery undoes a split whose log shows the copy done unless X's
    /// root was already relinked, dropping Y even when the relink had begun
    /// (the old rule: X_left nodes relinked before the failure keep right
    /// links to the dropped Y, and scans across the split key time out).
    pub recovery_undoes_copied_splits: bool,
    /// Recovery of Y's server drops a recovered Y whose split's log shows
    /// no `SplitCopied` even though X's server is alive and its split still
    /// open (the old rule: the live splitter goes on, relinks X to the
    /// dropped Y and loses X_right's keys).
    pub recovery_ignores_live_splitter: bool,
    /// Recovery drops orphans only among the regions it rebuilt (the old
    /// rule): the new meganode of an undone split, or a new root meganode
    /// never linked, that lives on a survivor stays listed and held though
    /// nothing in the tree names it.
    pub recovery_keeps_orphans: bool,
    /// The locality selector compares rejected with kept samples on
    /// counters zeroed every `history` kept samples instead of over the
    /// moving period (issue 25 hole 3: the first outlier after a reset
    /// discards a full window of good samples).
    pub selector_resets_per_history: bool,
    /// Servers send their requests to other servers (`CopyMeganode`,
    /// `NewRoot`, `SetRoot`, `InsertChild`, `OpenRegion`, `DropRegion`)
    /// unclaimed, as before issue 25 (hole 4): one that timed out may still
    /// run, so a meganode the splitter gave up on is created after it
    /// settled it (held, and named by no one).
    pub unclaimed_server_requests: bool,
    /// Client rounds wait for their completions without a bound (as before
    /// the swarm found it): a completion the transport loses holds the
    /// operation for good instead of failing its round after `rpc_timeout`.
    pub unbounded_rounds: bool,
}

/// Everything that shapes a Cell deployment.
#[derive(Clone, Debug, PartialEq)]
pub struct CellConfig {
    /// Nodes on the fabric (node ids `0..nodes`).
    pub nodes: u16,
    /// Nodes `0..server_nodes` hold regions and run server workers; the
    /// others only run clients (Fig. 4's separate client machines).
    pub server_nodes: u16,
    /// Client ids per node.
    pub clients_per_node: u16,
    /// Server worker threads per server node (the "server cores").
    pub server_workers: u16,
    /// Largest key.
    pub max_key_len: u32,
    /// Largest value.
    pub max_value_len: u32,
    /// Bytes of a B-link tree node.
    pub node_bytes: u32,
    /// Nodes in a meganode's pool.
    pub meganode_nodes: u32,
    /// Bytes of a meganode's extent heap.
    pub heap_bytes: u64,
    /// Region slots per server node (meganodes it can hold, including those
    /// it takes over when another server fails).
    pub regions_per_node: u32,
    /// A meganode splits once this fraction of its node pool or heap is used.
    pub split_at: f64,
    /// Servers split full meganodes by themselves (tests turn this off to
    /// drive a split step by step).
    pub auto_split: bool,
    /// Most entries one range scan returns (and one server reply carries).
    pub scan_page: u32,
    /// How long a node a meganode split invalidated waits before reuse.
    pub node_reuse_grace: Duration,
    /// A client search attempt restarts once it has run this long, so that
    /// no attempt outlives the reuse grace.
    pub attempt_deadline: Duration,
    /// A client gives up on an operation (all attempts) after this long.
    pub op_timeout: Duration,
    /// How long a client waits for one server reply.
    pub rpc_timeout: Duration,
    /// How long a server (its maintenance thread, a meganode split) waits
    /// for another server's reply before it settles the request (at least
    /// `rpc_timeout`: a copy of a meganode takes longer than a search).
    pub server_rpc_timeout: Duration,
    /// How long an operation keeps retrying while the node its directory
    /// names for a meganode stays unreachable (its regions may be recovered
    /// onto another node meanwhile, which a directory refresh shows); after
    /// that it fails with `Unreachable(node)` instead of waiting out
    /// `op_timeout`.
    pub unreachable_grace: Duration,
    /// First back-off after a failed attempt (doubles up to `max_backoff`).
    pub backoff: Duration,
    /// Largest back-off.
    pub max_backoff: Duration,
    /// The locality selector.
    pub selector: SelectorConfig,
    /// The client caches.
    pub cache: CacheConfig,
    /// How clients search, unless told otherwise per client.
    pub mode: SearchMode,
    /// Directory of the per-region logs (§2.6); `None`: no logging (as in
    /// the paper's measurements).
    pub log_dir: Option<PathBuf>,
    /// fsync every log append (durable against machine failure, slow).
    pub log_sync: bool,
    /// Where the region table lives.
    pub directory: DirectoryPlace,
    /// The fabric's bound on a posted WRITE or CAS landing (A2: it takes
    /// effect within this long or never; the protocol's `deadline_margin`,
    /// which the verbs backend enforces): how long a fabric directory
    /// writer waits before trusting that a failed WRITE or CAS will not land.
    pub landing_margin: Duration,
    /// Seed of the clients' random choices.
    pub seed: u64,
    /// Test-only broken variants.
    pub faults: CellFaults,
}

impl Default for CellConfig {
    fn default() -> Self {
        CellConfig {
            nodes: 3,
            server_nodes: 3,
            clients_per_node: 2,
            server_workers: 1,
            max_key_len: 32,
            max_value_len: 256,
            node_bytes: 1024,
            meganode_nodes: 256,
            heap_bytes: 2 << 20,
            regions_per_node: 16,
            split_at: 0.75,
            auto_split: true,
            scan_page: 64,
            node_reuse_grace: Duration::from_millis(100),
            attempt_deadline: Duration::from_millis(100),
            op_timeout: Duration::from_secs(10),
            rpc_timeout: Duration::from_secs(5),
            server_rpc_timeout: Duration::from_secs(10),
            unreachable_grace: Duration::from_millis(500),
            backoff: Duration::from_micros(5),
            max_backoff: Duration::from_millis(2),
            selector: SelectorConfig::default(),
            cache: CacheConfig::default(),
            mode: SearchMode::Selector,
            log_dir: None,
            log_sync: false,
            directory: DirectoryPlace::Process,
            landing_margin: Duration::from_millis(10),
            seed: 1,
            faults: CellFaults::default(),
        }
    }
}

fn check(
    ok: bool,
    field: &'static str,
    value: impl ToString,
    reason: &'static str,
) -> Result<(), Error> {
    if ok {
        Ok(())
    } else {
        Err(Error::Config(ConfigError::OutOfRange {
            field,
            value: value.to_string(),
            reason,
        }))
    }
}

/// Bytes of a region's header.
pub const REGION_HEADER_BYTES: u64 = 64;
/// Offset of the root word in a region's header (meaningful in region 1).
pub const ROOT_WORD_OFFSET: u64 = 8;

impl CellConfig {
    /// How long a server waits for another server's reply
    /// (`server_rpc_timeout`, at least `rpc_timeout`).
    pub fn server_rpc_wait(&self) -> Duration {
        self.server_rpc_timeout.max(self.rpc_timeout)
    }

    /// The smallest node for keys of up to `max_key_len` bytes: its min
    /// and max keys and four entries, rounded up to a multiple of 8 bytes.
    pub fn smallest_node_bytes(max_key_len: u32) -> u32 {
        let k = max_key_len as usize;
        let four = HEADER_BYTES + 2 * k + 4 * (2 + k + EXTENT_PTR_BYTES) + TRAILER_BYTES;
        four.div_ceil(8) as u32 * 8
    }

    /// Bytes of a tree node for keys of up to `max_key_len` bytes: room for
    /// min, max and eight entries, at least 1 KiB, a power of two.
    pub fn node_bytes_for(max_key_len: u32) -> u32 {
        let k = max_key_len as usize;
        let need = HEADER_BYTES + 2 * k + 8 * (2 + k + EXTENT_PTR_BYTES) + TRAILER_BYTES;
        (need.max(1024)).next_power_of_two() as u32
    }

    /// A deployment sized for a workload (what `nessie bench` and `nessie
    /// sim` run): meganodes of 256 nodes with a heap that fills about when
    /// the node pool does, enough region slots for every key at the fill a
    /// split leaves, twice over; or, with `one_meganode`, all keys in one
    /// meganode that never splits (the paper's Fig. 4).
    pub fn sized(s: &Sizing) -> CellConfig {
        let round8 = |n: u64| n.div_ceil(8) * 8;
        let (k, v) = (u64::from(s.key_size), u64::from(s.value_size));
        let node_bytes = CellConfig::node_bytes_for(s.key_size);
        let extent = round8(8 + k + v);
        // Entries of a leaf, and of a half-full leaf.
        let per_leaf = ((u64::from(node_bytes) - 32 - 2 * k) / (2 + k + 20)).max(4);
        let half = (per_leaf / 2).max(2);
        let keys = s.keys;
        let cache = if s.caches {
            CacheConfig::default()
        } else {
            CacheConfig {
                nodes: 0,
                min_level: 1,
                ranges: 0,
            }
        };
        let base = CellConfig {
            nodes: s.nodes,
            server_nodes: s.server_nodes,
            clients_per_node: s.clients,
            server_workers: s.workers,
            max_key_len: s.key_size,
            max_value_len: s.value_size,
            node_bytes,
            cache,
            op_timeout: Duration::from_secs(30),
            ..CellConfig::default()
        };
        if s.one_meganode {
            let leaves = keys.div_ceil(half);
            return CellConfig {
                meganode_nodes: (leaves + leaves / 4 + 64) as u32,
                heap_bytes: (keys * extent * 2 + 16 * extent).min(u64::from(u32::MAX)),
                regions_per_node: 2,
                auto_split: false,
                ..base
            };
        }
        let meganode_nodes: u32 = 256;
        // A heap that fills about when the node pool does, at least 16 extents.
        let heap = (u64::from(meganode_nodes) * half * extent).max(16 * extent);
        // Regions for every key at the fill a split leaves (half), twice over.
        let regions = (keys * extent * 4).div_ceil(heap) + 4;
        CellConfig {
            meganode_nodes,
            heap_bytes: heap,
            regions_per_node: (regions.div_ceil(u64::from(s.server_nodes)) + 6) as u32,
            ..base
        }
    }

    /// Checks every field.
    pub fn validate(&self) -> Result<(), Error> {
        check(self.nodes >= 1, "nodes", self.nodes, "at least 1")?;
        check(
            (1..=self.nodes).contains(&self.server_nodes),
            "server_nodes",
            self.server_nodes,
            "1 to nodes",
        )?;
        check(
            self.clients_per_node >= 1,
            "clients_per_node",
            self.clients_per_node,
            "at least 1",
        )?;
        check(
            self.server_workers >= 1,
            "server_workers",
            self.server_workers,
            "at least 1",
        )?;
        check(
            (1..=4096).contains(&self.max_key_len),
            "max_key_len",
            self.max_key_len,
            "1 to 4096 bytes",
        )?;
        check(
            self.node_bytes.is_multiple_of(8)
                && self.node_bytes >= CellConfig::smallest_node_bytes(self.max_key_len),
            "node_bytes",
            self.node_bytes,
            "a multiple of 8 holding min, max and four entries of the largest key",
        )?;
        check(
            self.meganode_nodes >= 16,
            "meganode_nodes",
            self.meganode_nodes,
            "at least 16",
        )?;
        check(
            self.heap_bytes >= 8 * self.max_extent_bytes()
                && self.heap_bytes <= u64::from(u32::MAX),
            "heap_bytes",
            self.heap_bytes,
            "at least 8 extents of the largest key and value, below 4 GiB",
        )?;
        check(
            self.regions_per_node >= 2,
            "regions_per_node",
            self.regions_per_node,
            "at least 2",
        )?;
        check(
            self.split_at > 0.1 && self.split_at < 0.95,
            "split_at",
            self.split_at,
            "between 0.1 and 0.95",
        )?;
        check(
            (1..=4096).contains(&self.scan_page),
            "scan_page",
            self.scan_page,
            "1 to 4096 entries",
        )?;
        check(
            self.attempt_deadline <= self.node_reuse_grace || self.faults.reuse_at_once,
            "attempt_deadline",
            format!("{:?}", self.attempt_deadline),
            "at most node_reuse_grace (no search attempt may outlive the grace)",
        )?;
        if let DirectoryPlace::Node(n) = self.directory {
            check(
                n.0 < self.server_nodes,
                "directory",
                n,
                "the directory node must be a server node",
            )?;
        }
        check(
            self.unreachable_grace <= self.op_timeout,
            "unreachable_grace",
            format!("{:?}", self.unreachable_grace),
            "at most op_timeout",
        )?;
        check(
            self.landing_margin <= self.op_timeout,
            "landing_margin",
            format!("{:?}", self.landing_margin),
            "at most op_timeout",
        )?;
        if let SearchMode::Fixed(p) = self.mode {
            check(
                (0.0..=100.0).contains(&p),
                "mode",
                p,
                "a server share of 0 to 100 %",
            )?;
        }
        check(
            self.selector.history >= 2 && self.selector.k_sigma > 0.0,
            "selector",
            format!("{:?}", self.selector),
            "history of at least 2 samples, K above 0",
        )?;
        check(
            (0.0..=1.0).contains(&self.selector.explore),
            "selector.explore",
            self.selector.explore,
            "a probability",
        )?;
        Ok(())
    }

    /// Checks a key against the limits.
    pub fn check_key(&self, key: &[u8]) -> Result<(), Error> {
        if key.is_empty() {
            return Err(Error::EmptyKey {
                max: self.max_key_len,
            });
        }
        if key.len() > self.max_key_len as usize {
            return Err(Error::KeyTooLarge {
                len: key.len(),
                max: self.max_key_len,
            });
        }
        Ok(())
    }

    /// Checks a value against the limits.
    pub fn check_value(&self, value: &[u8]) -> Result<(), Error> {
        if value.len() > self.max_value_len as usize {
            return Err(Error::ValueTooLarge {
                len: value.len(),
                max: self.max_value_len,
            });
        }
        Ok(())
    }

    /// Bytes of the largest extent.
    pub fn max_extent_bytes(&self) -> u64 {
        8 + u64::from(self.max_key_len) + u64::from(self.max_value_len)
    }

    /// Client ids (mailbox identities) per node: the clients plus the
    /// node's maintenance thread.
    pub fn slots_per_node(&self) -> u16 {
        self.clients_per_node + 1
    }

    /// Where each node's clients (and its maintenance thread) take their
    /// ids: one registry word per mailbox identity, closing the data region
    /// (`nessie_protocol::registry`).
    pub fn registry(&self) -> Registry {
        Registry::after(self.layout().data_bytes(), self.slots_per_node())
    }

    /// Where things live.
    pub fn layout(&self) -> Layout {
        let clients_total = u32::from(self.nodes) * u32::from(self.slots_per_node());
        let entry = 12 + u64::from(self.max_key_len) + u64::from(self.max_value_len);
        let leaves = u64::from(self.scan_page) + 8;
        let reply =
            128 + u64::from(self.scan_page) * entry + leaves * 16 + u64::from(self.max_key_len);
        let request = 128 + 3 * u64::from(self.max_key_len) + u64::from(self.max_value_len);
        let mailbox = MailboxLayout::new(0, clients_total, 0, reply.max(request) as u32);
        let regions_base = mailbox.bytes().div_ceil(64) * 64;
        let node_bytes = u64::from(self.node_bytes);
        let heap_base = REGION_HEADER_BYTES + u64::from(self.meganode_nodes) * node_bytes;
        let region_bytes = (heap_base + self.heap_bytes).div_ceil(64) * 64;
        let directory_base = regions_base + u64::from(self.regions_per_node) * region_bytes;
        let directory_bytes = match self.directory {
            DirectoryPlace::Process => 0,
            DirectoryPlace::Node(n) => crate::directory::table::DirLayout::new(
                n,
                directory_base,
                self.nodes,
                self.server_nodes,
                self.regions_per_node,
            )
            .bytes(),
        };
        Layout {
            mailbox,
            regions_base,
            region_bytes,
            node_bytes,
            meganode_nodes: self.meganode_nodes,
            heap_base,
            heap_bytes: self.heap_bytes,
            regions_per_node: self.regions_per_node,
            directory_base,
            directory_bytes,
        }
    }

    /// Whether `node` holds regions and runs servers.
    pub fn is_server(&self, node: NodeId) -> bool {
        node.0 < self.server_nodes
    }
}

/// Byte positions in a node's data region.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Layout {
    /// The request and response slots.
    pub mailbox: MailboxLayout,
    /// Offset of region slot 0.
    pub regions_base: u64,
    /// Bytes of one region slot.
    pub region_bytes: u64,
    /// Bytes of a node.
    pub node_bytes: u64,
    /// Nodes per meganode.
    pub meganode_nodes: u32,
    /// Offset of the extent heap within a region.
    pub heap_base: u64,
    /// Bytes of the extent heap.
    pub heap_bytes: u64,
    /// Region slots per node.
    pub regions_per_node: u32,
    /// Offset of the fabric directory's area (after the region slots).
    pub directory_base: u64,
    /// Bytes of that area (0 unless the directory is on a node).
    pub directory_bytes: u64,
}

impl Layout {
    /// Bytes of data region each node needs.
    pub fn data_bytes(&self) -> u64 {
        self.directory_base + self.directory_bytes
    }

    /// Offset of region slot `slot` in the node's data region.
    pub fn slot_base(&self, slot: u32) -> u64 {
        self.regions_base + u64::from(slot) * self.region_bytes
    }

    /// Offset of node `index` within a region.
    pub fn node_offset(&self, index: u32) -> u64 {
        REGION_HEADER_BYTES + u64::from(index) * self.node_bytes
    }

    /// Offset of heap byte `offset` within a region.
    pub fn heap_offset(&self, offset: u32) -> u64 {
        self.heap_base + u64::from(offset)
    }
}

/// The region id a [`Layout`] header stores, for checks.
pub fn header_word(region: RegionId) -> u64 {
    0x4345_4c4c_0000_0000 | u64::from(region.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validate_and_regions_do_not_overlap() {
        let c = CellConfig::default();
        c.validate().unwrap();
        let l = c.layout();
        assert!(l.regions_base >= l.mailbox.bytes());
        assert_eq!(l.slot_base(1) - l.slot_base(0), l.region_bytes);
        assert!(l.heap_base + l.heap_bytes <= l.region_bytes);
        assert_eq!(CellConfig::node_bytes_for(32), 1024);
        assert_eq!(CellConfig::node_bytes_for(128), 2048);
        let bad = CellConfig {
            node_bytes: 100,
            ..CellConfig::default()
        };
        assert!(bad.validate().is_err());
    }
}

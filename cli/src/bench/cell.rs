//! Cell in `nessie bench`: how a Cell variant is sized from the benchmark's
//! shape, its search mode, and the meter through which a "fixed ratio"
//! variant follows the share of server-side searches the selector variant
//! chose (Table 2's third column, measured online in the same run).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use nessie_cell::{CacheConfig, CellConfig, SearchMode};

use super::workload::Workload;

/// Server-side and client-side meganode searches a variant made.
#[derive(Debug, Default)]
pub struct ShareMeter {
    server: AtomicU64,
    client: AtomicU64,
}

impl ShareMeter {
    /// Adds searches.
    pub fn add(&self, server: u64, client: u64) {
        self.server.fetch_add(server, Ordering::Relaxed);
        self.client.fetch_add(client, Ordering::Relaxed);
    }

    /// Percent of searches done by servers so far (`None` before any).
    pub fn server_pct(&self) -> Option<f64> {
        let (s, c) = (
            self.server.load(Ordering::Relaxed),
            self.client.load(Ordering::Relaxed),
        );
        (s + c > 0).then(|| 100.0 * s as f64 / (s + c) as f64)
    }
}

/// A Cell variant: its configuration, how its clients search, and which
/// nodes run its clients.
#[derive(Clone, Debug)]
pub struct CellSpec {
    /// The deployment.
    pub cfg: CellConfig,
    /// How its clients search.
    pub mode: SearchMode,
    /// Nodes `client_from..cfg.nodes` run clients.
    pub client_from: u16,
    /// The selector variant publishes its choices here...
    pub publish: Option<Arc<ShareMeter>>,
    /// ... and a fixed-ratio variant follows them.
    pub follow: Option<Arc<ShareMeter>>,
}

/// The name `--systems` uses for a search mode.
pub fn mode_name(mode: SearchMode) -> &'static str {
    match mode {
        SearchMode::Selector => "cell",
        SearchMode::ServerOnly => "cell-server",
        SearchMode::ClientOnly => "cell-client",
        SearchMode::Fixed(_) => "cell-fixed",
    }
}

/// The mode `--systems` names, if it names a Cell variant.
pub fn parse_mode(name: &str) -> Option<SearchMode> {
    match name.to_ascii_lowercase().as_str() {
        "cell" => Some(SearchMode::Selector),
        "cell-server" => Some(SearchMode::ServerOnly),
        "cell-client" => Some(SearchMode::ClientOnly),
        _ => None,
    }
}

/// How a Cell deployment for a benchmark is shaped.
#[derive(Clone, Debug)]
pub struct CellShape {
    /// Nodes in all.
    pub nodes: u16,
    /// Nodes holding regions (the first ones).
    pub server_nodes: u16,
    /// Client ids per node.
    pub clients: u16,
    /// Server worker threads per server node.
    pub workers: u16,
    /// All keys in one meganode that never splits (Fig. 4).
    pub one_meganode: bool,
    /// Keys the runs may insert besides the preloaded ones.
    pub inserts: u64,
    /// Client caches on.
    pub caches: bool,
}

fn round8(n: u64) -> u64 {
    n.div_ceil(8) * 8
}

/// The Cell configuration for workload `w` in `shape`.
pub fn cell_config(w: &Workload, shape: &CellShape) -> CellConfig {
    let (k, v) = (u64::from(w.key_size), u64::from(w.value_size));
    let node_bytes = CellConfig::node_bytes_for(w.key_size);
    let extent = round8(8 + k + v);
    // Entries of a leaf, and of a half-full leaf.
    let per_leaf = ((u64::from(node_bytes) - 32 - 2 * k) / (2 + k + 20)).max(4);
    let half = (per_leaf / 2).max(2);
    let keys = w.keys + shape.inserts;
    let cache = if shape.caches {
        CacheConfig::default()
    } else {
        CacheConfig {
            nodes: 0,
            min_level: 1,
            ranges: 0,
        }
    };
    let base = CellConfig {
        nodes: shape.nodes,
        server_nodes: shape.server_nodes,
        clients_per_node: shape.clients,
        server_workers: shape.workers,
        max_key_len: w.key_size,
        max_value_len: w.value_size,
        node_bytes,
        cache,
        op_timeout: Duration::from_secs(30),
        ..CellConfig::default()
    };
    if shape.one_meganode {
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
        regions_per_node: (regions.div_ceil(u64::from(shape.server_nodes)) + 6) as u32,
        ..base
    }
}

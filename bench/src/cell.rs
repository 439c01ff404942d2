//! Cell in `nessie bench`: how a Cell variant is sized from the benchmark's
//! shape, its search mode, and the meter through which a "fixed ratio"
//! variant follows the share of server-side searches the selector variant
//! chose (Table 2's third column, measured online in the same run).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use nessie_cell::Sizing;
use nessie_cell::{CellConfig, SearchMode};

use crate::workload::Workload;

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

/// The Cell configuration for workload `w` in `shape`.
pub fn cell_config(w: &Workload, shape: &CellShape) -> CellConfig {
    CellConfig::sized(&Sizing {
        nodes: shape.nodes,
        server_nodes: shape.server_nodes,
        clients: shape.clients,
        workers: shape.workers,
        keys: w.keys + shape.inserts,
        key_size: w.key_size,
        value_size: w.value_size,
        one_meganode: shape.one_meganode,
        caches: shape.caches,
    })
}

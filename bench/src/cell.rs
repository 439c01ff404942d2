//! Cell in `nessie bench`: how a Cell variant's clients search and where
//! they run, and the meter through which a "fixed ratio"
//! variant follows the share of server-side searches the selector variant
//! chose (Table 2's third column, measured online in the same run).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use nessie_cell::SearchMode;

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

/// How a Cell variant's clients search and where they run (the variant's
/// system is sized by `nessie_cell::Sizing` and started as the systems
/// floor's `NodeSetup`).
#[derive(Clone, Debug)]
pub struct CellClients {
    /// How its clients search.
    pub mode: SearchMode,
    /// Nodes `client_from..` run clients.
    pub client_from: u16,
    /// The selector variant publishes its choices here...
    pub publish: Option<Arc<ShareMeter>>,
    /// ... and a fixed-ratio variant follows them.
    pub follow: Option<Arc<ShareMeter>>,
}

impl Default for CellClients {
    fn default() -> Self {
        CellClients {
            mode: SearchMode::Selector,
            client_from: 0,
            publish: None,
            follow: None,
        }
    }
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

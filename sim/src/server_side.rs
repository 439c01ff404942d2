//! The server side of a run ([`ServerSide`]): a server-driven system's
//! server workers, what restarts its clients, Cell's server nodes and
//! region directory, and the Cell servers failed for good.

use std::sync::Arc;

use crate::failures::Failures;
use crate::systems::{CellMaker, CoreMaker, Servers};

/// The servers of a run (none for Nessie, RACE and RCuckoo, whose clients
/// alone serve requests).
pub(crate) struct ServerSide {
    /// The server workers of a server-driven system.
    pub(crate) servers: Option<Servers>,
    /// Makes a baseline client's core afresh, for a restarted client.
    pub(crate) core_maker: Option<CoreMaker>,
    /// Makes a restarted Cell client's machines.
    pub(crate) cell_maker: Option<CellMaker>,
    /// Cell's server nodes (their counters).
    pub(crate) cell_servers: Vec<Arc<nessie_cell::server::ServerNode>>,
    /// Cell's meganode searches (server-side, client-side) when the
    /// measured workload started.
    pub(crate) cell_searches_before: (u64, u64),
    /// Cell's region directory.
    pub(crate) dir: Option<Arc<nessie_cell::region::Directory>>,
    /// Cell's failed servers and their recovery.
    pub(crate) lost_servers: Failures,
}

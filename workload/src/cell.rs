//! Cell's server node in the driver, as a [`ServerLoad`] (its client comes
//! through `KvClient`, range scans included).

use std::time::Duration;

use nessie_cell::CellNode;

use crate::run::ServerLoad;

impl ServerLoad for CellNode {
    fn cpu_time(&self) -> Duration {
        CellNode::cpu_time(self)
    }
    fn requests(&self) -> u64 {
        CellNode::requests(self)
    }
}

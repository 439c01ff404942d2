//! A hosted node's memory windows ([`NodeWindows`]): one type-1 window per
//! window index the protocol names ([`nessie_protocol::Config::window_of`]:
//! one per client without storage and size class), allocated on its first
//! bind and bound again by the node's agent through
//! [`nessie_protocol::Op::BindWindow`] (the endpoint's loopback queue pair
//! carries the bind: [`crate::endpoint`]).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::ffi::cm::CmId;
use crate::ffi::memory::{Mr, Pd};
use crate::ffi::window::Mw;
use nessie_protocol::{BackendError, EndpointRefusal, FabricError, NodeId, TransportError};

/// The most windows a node allocates (a request for a later index is
/// refused): far more than any cluster's clients without storage times
/// size classes, and far fewer than a NIC's memory windows.
pub const MAX_WINDOWS: u32 = 1 << 16;

/// A node's memory windows, by index.
pub struct NodeWindows {
    windows: Mutex<BTreeMap<u32, Mw>>,
    pd: Arc<Pd>,
}

impl NodeWindows {
    /// No window yet, on `pd`.
    pub fn new(pd: Arc<Pd>) -> NodeWindows {
        NodeWindows {
            windows: Mutex::new(BTreeMap::new()),
            pd,
        }
    }

    /// Posts a bind of window `index` over `len` bytes at `offset` of the
    /// node's data region `data` on `conn`'s queue pair (connected, of the
    /// node's protection domain), completing as `wr_id`; returns the key it
    /// binds under. Nothing is posted on an error.
    pub fn bind(
        &self,
        node: NodeId,
        index: u32,
        (conn, wr_id): (&CmId, u64),
        data: &Mr,
        (offset, len): (u64, u64),
    ) -> Result<u32, FabricError> {
        let refused = |why| FabricError::Transport(TransportError::Endpoint(why));
        if !data.carries_windows() {
            return Err(FabricError::Transport(TransportError::WindowsUnsupported));
        }
        if index >= MAX_WINDOWS {
            return Err(refused(EndpointRefusal::WindowIndex {
                node,
                index,
                max: MAX_WINDOWS,
            }));
        }
        if offset.checked_add(len).is_none_or(|end| end > data.len()) {
            return Err(FabricError::OutOfRange {
                node,
                region: nessie_protocol::Region::Data,
                offset,
                len,
                size: data.len(),
            });
        }
        let mut windows = self.windows.lock().unwrap_or_else(|p| p.into_inner());
        let mw = match windows.entry(index) {
            std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::btree_map::Entry::Vacant(e) => e.insert(
                Mw::alloc(&self.pd)
                    .map_err(|e| refused(EndpointRefusal::Backend(BackendError::new(e))))?,
            ),
        };
        mw.bind(conn, data, offset, len, wr_id)
            .map_err(|e| refused(EndpointRefusal::Backend(BackendError::new(e))))
    }
}

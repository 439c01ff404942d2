//! Memory windows on the endpoint (clients without storage,
//! docs/protocol.md §2.4): a WRITE or CAS through a window carries the
//! window's rkey in place of its region's, so the responder NIC checks the
//! window when the request lands; a node's agent binds a window with
//! `ibv_bind_mw` on its endpoint's loopback queue pair
//! ([`crate::windows::NodeWindows`]).

use std::time::Instant;

use nessie_protocol::{
    window_carries, EndpointRefusal, FabricError, Op, OpId, TransportError, WindowId, WindowKey,
};

use super::{InFlight, Signal, VerbsEndpoint};
use crate::policy::NicOp;

impl VerbsEndpoint {
    /// Accepts a WRITE or CAS through memory window `window` under `key`:
    /// the request goes to the window's node's data region as any other,
    /// carrying the window's rkey instead of the region's, so the
    /// responder checks the window when it lands. Anything else is refused
    /// unposted.
    pub(super) fn windowed(
        &mut self,
        id: OpId,
        (window, key): (WindowId, WindowKey),
        op: Op,
        posting: (Signal, Instant),
    ) -> Result<(), FabricError> {
        if !window_carries(window, &op) {
            return Err(FabricError::WindowRefused { window, key });
        }
        let wr_id = match op {
            Op::Write { addr, data } => {
                let len = Self::write_len(addr, &data)?;
                self.nic(id, addr, NicOp::Write, len, Some(&data), (0, 0), posting)?
            }
            Op::Cas { addr, expect, new } => {
                self.nic(id, addr, NicOp::Cas, 8, None, (expect, new), posting)?
            }
            _ => return Err(FabricError::WindowRefused { window, key }),
        };
        if let Some(f) = self.slot_mut(wr_id) {
            f.remote.rkey = key.0;
            f.window = Some((window, key));
        }
        Ok(())
    }

    /// Binds memory window `index` of this endpoint's node over `len` bytes
    /// at `offset` of its data region: `ibv_bind_mw` on the loopback queue
    /// pair (type-1 windows belong to the node's protection domain, so
    /// every connection to the node honours the bind), completing with the
    /// key the window is bound under. Posted at once, not batched: nothing
    /// orders it against the endpoint's other requests.
    pub(super) fn bind_window(
        &mut self,
        id: OpId,
        index: u32,
        (offset, len): (u64, u64),
        (signal, accepted): (Signal, Instant),
    ) -> Result<(), FabricError> {
        if !self.node.hosted {
            // A client host binds nothing: it has no region.
            return Err(FabricError::Transport(TransportError::WindowsUnsupported));
        }
        let node = self.node.id;
        let i = usize::from(node.0);
        self.ensure_up(node)?;
        if self.peers[i].posted >= self.send_depth {
            return Err(FabricError::Transport(TransportError::Endpoint(
                EndpointRefusal::SendQueueFull(node),
            )));
        }
        let (buf, _) = self.alloc(8)?;
        let wr_id = self.insert(InFlight::new(
            (id, node, NicOp::Bind),
            (0, buf),
            (signal, accepted),
        ));
        let bound = match &self.peers[i].conn {
            Some(conn) => {
                let shared = &self.node;
                shared
                    .windows
                    .bind(node, index, (conn, wr_id), &shared.data, (offset, len))
            }
            None => Err(FabricError::NodeDown(node)),
        };
        let key = match bound {
            Ok(key) => WindowKey(key),
            Err(e) => {
                if let Some(f) = self.take(wr_id) {
                    self.release(f);
                }
                return Err(e);
            }
        };
        if let Some(f) = self.slot_mut(wr_id) {
            f.window = Some((WindowId { node, index }, key));
        }
        self.mark_posted(i, wr_id, true, Instant::now());
        Ok(())
    }
}

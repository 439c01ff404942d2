//! A node's memory windows ([`Op::Windowed`](nessie_protocol::Op::Windowed),
//! [`Op::BindWindow`](nessie_protocol::Op::BindWindow)): the key each window
//! is bound under and the range it covers, as the NIC checks them.
//!
//! A windowed request holds the table's lock while it executes, so a bind
//! takes effect between two windowed requests, never inside one (a NIC that
//! finishes the message in progress before it completes the revocation);
//! the model's fabric (`nessie_check::memory`) lands a rebind between the
//! words of a WRITE as well. Either way a request that lands after the
//! bind's completion carrying an earlier key changes nothing.

use std::collections::BTreeMap;

use nessie_protocol::{
    window_carries, BoundWindow, FabricError, Op, Region, RemoteAddr, WindowId, WindowKey,
};

use crate::sync::{self, Mutex};

/// The windows of one node, by index.
#[derive(Debug, Default)]
pub(crate) struct Windows {
    bound: Mutex<BTreeMap<u32, BoundWindow>>,
}

impl Windows {
    /// Binds window `index` again over `len` bytes at `offset` of a data
    /// region of `size` bytes, under the next key.
    pub(crate) fn bind(
        &self,
        node: nessie_protocol::NodeId,
        index: u32,
        offset: u64,
        len: u64,
        size: u64,
    ) -> Result<WindowKey, FabricError> {
        if offset.checked_add(len).is_none_or(|end| end > size) {
            return Err(FabricError::OutOfRange {
                node,
                region: Region::Data,
                offset,
                len,
                size,
            });
        }
        let mut bound = sync::lock(&self.bound);
        let w = bound.entry(index).or_insert(BoundWindow::UNBOUND);
        *w = w.rebound(offset, len);
        Ok(w.key)
    }

    /// Runs `perform` on `op` if window `window` admits every word of it
    /// under `key`, holding the table so that no bind lands inside it;
    /// refuses it otherwise.
    pub(crate) fn through<T>(
        &self,
        window: WindowId,
        key: WindowKey,
        op: &Op,
        perform: impl FnOnce(&Op) -> Result<T, FabricError>,
    ) -> Result<T, FabricError> {
        let refused = FabricError::WindowRefused { window, key };
        if !window_carries(window, op) {
            return Err(refused);
        }
        let bound = sync::lock(&self.bound);
        let w = bound
            .get(&window.index)
            .copied()
            .unwrap_or(BoundWindow::UNBOUND);
        if !words_of(op).all(|offset| w.admits(key, offset)) {
            return Err(refused);
        }
        perform(op)
    }
}

/// The 8-byte aligned word offsets a WRITE or CAS touches.
pub(crate) fn words_of(op: &Op) -> impl Iterator<Item = u64> {
    let (addr, len): (Option<RemoteAddr>, u64) = match op {
        Op::Write { addr, data } => (Some(*addr), data.len() as u64),
        Op::Cas { addr, .. } => (Some(*addr), 8),
        _ => (None, 0),
    };
    let (first, end) = match addr {
        Some(a) if len > 0 => (a.offset / 8 * 8, a.offset + len),
        _ => (0, 0),
    };
    (first..end).step_by(8)
}

//! Completion queues and the completions read from them.

use std::sync::Arc;

use rdma_sys::{ibv_cq, ibv_create_cq, ibv_destroy_cq, ibv_poll_cq, ibv_wc};

use super::device::Context;
use crate::error::VerbsError;

/// The fields of an `ibv_wc` the backend uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wc {
    /// The work request's id.
    pub wr_id: u64,
    /// `ibv_wc_status`.
    pub status: u32,
    /// Vendor error code (for diagnostics).
    pub vendor_err: u32,
    /// Bytes transferred (READ).
    pub byte_len: u32,
}

/// A completion queue.
pub struct Cq {
    cq: *mut ibv_cq,
    _ctx: Arc<Context>,
}

// SAFETY: a CQ may be polled from any thread (libibverbs serialises); it is
// only destroyed in Drop.
unsafe impl Send for Cq {}
// SAFETY: as above.
unsafe impl Sync for Cq {}

const BATCH: usize = 32;

impl Cq {
    /// Creates a CQ of at least `entries` entries.
    pub fn new(ctx: &Arc<Context>, entries: u32) -> Result<Arc<Cq>, VerbsError> {
        let n = i32::try_from(entries.max(1)).unwrap_or(i32::MAX);
        // SAFETY: ctx is open; no completion channel, vector 0.
        let cq =
            unsafe { ibv_create_cq(ctx.raw(), n, std::ptr::null_mut(), std::ptr::null_mut(), 0) };
        if cq.is_null() {
            return Err(VerbsError::verbs("ibv_create_cq"));
        }
        Ok(Arc::new(Cq {
            cq,
            _ctx: ctx.clone(),
        }))
    }

    /// The raw CQ.
    pub fn raw(&self) -> *mut ibv_cq {
        self.cq
    }

    /// Appends up to 32 available completions to `out`; returns how many.
    pub fn poll(&self, out: &mut Vec<Wc>) -> Result<usize, VerbsError> {
        // SAFETY: all-zero bytes are a valid ibv_wc (integers and a union of integers).
        let mut wcs: [ibv_wc; BATCH] = unsafe { std::mem::zeroed() };
        // SAFETY: `cq` is live and `wcs` has room for BATCH entries.
        let n = unsafe { ibv_poll_cq(self.cq, BATCH as i32, wcs.as_mut_ptr()) };
        if n < 0 {
            return Err(VerbsError::verbs_ret("ibv_poll_cq", n));
        }
        for wc in wcs.iter().take(n as usize) {
            out.push(Wc {
                wr_id: wc.wr_id,
                status: wc.status,
                vendor_err: wc.vendor_err,
                byte_len: wc.byte_len,
            });
        }
        Ok(n as usize)
    }
}

impl Drop for Cq {
    fn drop(&mut self) {
        // SAFETY: every QP using this CQ holds an Arc<Cq>, so none is left.
        unsafe { ibv_destroy_cq(self.cq) };
    }
}

//! Type-1 memory windows ([`Mw`]): a range of a registered region a node's
//! agent binds under a fresh rkey, revoking the previous one.
//!
//! A type-1 window belongs to the protection domain, not to a queue pair,
//! so every queue pair of the node's PD (each client's connection) honours
//! it; it is bound by `ibv_bind_mw`, which the provider turns into a bind
//! work request on the queue pair it is given (the binding endpoint's
//! loopback queue pair). Each bind gives the window's rkey a new low byte
//! (`ibv_inc_rkey`): from the bind's completion on, the responder refuses a
//! request carrying an earlier rkey with a remote access error, however
//! long the fabric held it. soft-RoCE (rxe) carries type-1 windows since
//! Linux 5.13.

use std::sync::Arc;

use rdma_sys::{
    ibv_access_flags, ibv_alloc_mw, ibv_bind_mw, ibv_dealloc_mw, ibv_mw, ibv_mw_bind,
    ibv_mw_bind_info, ibv_mw_type, ibv_send_flags,
};

use super::cm::CmId;
use super::memory::{Mr, Pd};
use crate::error::VerbsError;

/// A type-1 memory window on a protection domain.
pub struct Mw {
    mw: *mut ibv_mw,
    _pd: Arc<Pd>,
}

// SAFETY: a window may be bound from any thread (libibverbs objects are
// thread-safe); it is only freed in Drop.
unsafe impl Send for Mw {}
// SAFETY: as above.
unsafe impl Sync for Mw {}

impl Mw {
    /// Allocates a type-1 window on `pd` (unbound: it grants nothing).
    pub fn alloc(pd: &Arc<Pd>) -> Result<Mw, VerbsError> {
        // SAFETY: `pd` is a live protection domain.
        let mw = unsafe { ibv_alloc_mw(pd.raw(), ibv_mw_type::IBV_MW_TYPE_1) };
        match mw {
            Some(mw) if !mw.is_null() => Ok(Mw {
                mw,
                _pd: pd.clone(),
            }),
            _ => Err(VerbsError::verbs("ibv_alloc_mw (type 1)")),
        }
    }

    /// The rkey it is (or will be, once the last bind completes) bound
    /// under.
    pub fn rkey(&self) -> u32 {
        // SAFETY: `mw` is a live window.
        unsafe { (*self.mw).rkey }
    }

    /// Posts a signaled bind of the window over `len` bytes at `offset` of
    /// `mr` (remote WRITE and atomic access) on `conn`'s queue pair,
    /// completing as `wr_id`; returns the rkey it binds under. The queue
    /// pair must be connected, on the window's protection domain, and `mr`
    /// registered there with `IBV_ACCESS_MW_BIND`.
    pub fn bind(
        &self,
        conn: &CmId,
        mr: &Mr,
        offset: u64,
        len: u64,
        wr_id: u64,
    ) -> Result<u32, std::io::Error> {
        let access =
            ibv_access_flags::IBV_ACCESS_REMOTE_WRITE | ibv_access_flags::IBV_ACCESS_REMOTE_ATOMIC;
        let mut bind = ibv_mw_bind {
            wr_id,
            send_flags: ibv_send_flags::IBV_SEND_SIGNALED.0,
            bind_info: ibv_mw_bind_info {
                mr: mr.raw(),
                addr: mr.addr() + offset,
                length: len,
                mw_access_flags: access.0,
            },
        };
        let qp = conn.qp();
        if qp.is_null() {
            return Err(std::io::Error::from_raw_os_error(libc::ENOTCONN));
        }
        // SAFETY: the queue pair (owned by `conn`), window and registration
        // are live; the provider copies `bind` into a work request before
        // returning.
        let ret = unsafe { ibv_bind_mw(qp, self.mw, &mut bind) };
        if ret != 0 {
            return Err(std::io::Error::from_raw_os_error(ret.abs()));
        }
        Ok(self.rkey())
    }
}

impl Drop for Mw {
    fn drop(&mut self) {
        // SAFETY: `mw` is a live window, freed once; it is dropped before
        // the region it may be bound to (NodeShared's field order).
        unsafe { ibv_dealloc_mw(self.mw) };
    }
}

//! Work-request construction: pure functions from the operation's local
//! buffer slice, remote address and operands to an `ibv_send_wr`.
//!
//! A request is `IBV_SEND_SIGNALED` unless posted without it ([`SendWr::with_signal`]):
//! each protocol operation needs its own completion (an unsignaled request
//! completes silently on success, and the state machines must see every
//! result); only fire-and-forget requests (`Endpoint::post_unsignaled`, e.g.
//! a server's response WRITE) go unsignaled, and the endpoint signals every
//! k-th of them to reclaim its send queue. Errors always complete anyway.
//! A small WRITE may go `IBV_SEND_INLINE` ([`SendWr::inline`]): its bytes are
//! copied into the work request when it is posted, so the NIC does not
//! DMA-read the source.

use rdma_sys::{atomic_t, ibv_send_flags, ibv_send_wr, ibv_sge, ibv_wr_opcode, rdma_t, wr_t};

/// A slice of registered local memory (staging buffer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LocalSlice {
    /// Virtual address.
    pub addr: u64,
    /// Length in bytes.
    pub len: u32,
    /// Local key of its registration.
    pub lkey: u32,
}

/// A remote virtual address and the rkey that grants access to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoteSlice {
    /// Virtual address on the remote node.
    pub addr: u64,
    /// Remote key of the region.
    pub rkey: u32,
}

/// The operation of a send work request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WrKind {
    /// RDMA READ into the local slice.
    Read,
    /// RDMA WRITE from the local slice.
    Write,
    /// 64-bit compare-and-swap; the previous word lands in the local slice.
    Cas {
        /// Compare operand, already in the device's atomic byte order.
        compare: u64,
        /// Swap operand, already in the device's atomic byte order.
        swap: u64,
    },
}

/// A send work request as plain data; [`SendWr::raw`] lays it out for
/// `ibv_post_send`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendWr {
    /// Returned in the completion (`ibv_wc.wr_id`).
    pub wr_id: u64,
    /// What to do.
    pub kind: WrKind,
    /// The local buffer.
    pub local: LocalSlice,
    /// The remote address.
    pub remote: RemoteSlice,
    /// Whether `IBV_SEND_FENCE` is set (see [`crate::policy::needs_fence`]).
    pub fence: bool,
    /// Whether `IBV_SEND_INLINE` is set (WRITEs only: see [`SendWr::inline`]).
    pub inline: bool,
    /// Whether `IBV_SEND_SIGNALED` is set (see [`SendWr::with_signal`]).
    pub signaled: bool,
}

/// An RDMA READ of `local.len` bytes at `remote` into `local`.
pub fn read_wr(wr_id: u64, local: LocalSlice, remote: RemoteSlice, fence: bool) -> SendWr {
    SendWr {
        wr_id,
        kind: WrKind::Read,
        local,
        remote,
        fence,
        inline: false,
        signaled: true,
    }
}

/// An RDMA WRITE of `local` to `remote`.
pub fn write_wr(wr_id: u64, local: LocalSlice, remote: RemoteSlice, fence: bool) -> SendWr {
    SendWr {
        wr_id,
        kind: WrKind::Write,
        local,
        remote,
        fence,
        inline: false,
        signaled: true,
    }
}

/// A compare-and-swap of the 8-byte word at `remote`; the previous word is
/// written to the 8-byte `local` slice. Operands must already be in the
/// device's byte order ([`crate::byteorder::operand`]).
pub fn cas_wr(
    wr_id: u64,
    local: LocalSlice,
    remote: RemoteSlice,
    compare: u64,
    swap: u64,
    fence: bool,
) -> SendWr {
    SendWr {
        wr_id,
        kind: WrKind::Cas { compare, swap },
        local,
        remote,
        fence,
        inline: false,
        signaled: true,
    }
}

impl SendWr {
    /// The request with `IBV_SEND_INLINE` when it is a WRITE of at most
    /// `max_inline` bytes (the queue pair's granted inline size); READs and
    /// CASes never go inline (their local slice is a target, not a source).
    pub fn inline(mut self, max_inline: u32) -> SendWr {
        self.inline = self.kind == WrKind::Write && self.local.len <= max_inline;
        self
    }

    /// The request with `IBV_SEND_SIGNALED` only if `signaled`. Without it
    /// a success produces no completion (an error still does), and the
    /// request's send queue slot is only reclaimed by a later signaled
    /// completion of the queue pair.
    pub fn with_signal(mut self, signaled: bool) -> SendWr {
        self.signaled = signaled;
        self
    }

    /// The `ibv_sge` of the request.
    pub fn sge(&self) -> ibv_sge {
        ibv_sge {
            addr: self.local.addr,
            length: self.local.len,
            lkey: self.local.lkey,
        }
    }

    /// The `ibv_send_flags` of the request.
    pub fn send_flags(&self) -> u32 {
        let mut f = ibv_send_flags(0);
        if self.signaled {
            f |= ibv_send_flags::IBV_SEND_SIGNALED;
        }
        if self.fence {
            f |= ibv_send_flags::IBV_SEND_FENCE;
        }
        if self.inline {
            f |= ibv_send_flags::IBV_SEND_INLINE;
        }
        f.0
    }

    /// The request as `ibv_send_wr`, scattering from/to `sge` (which must
    /// stay alive and unmoved until `ibv_post_send` returns).
    pub fn raw(&self, sge: &mut ibv_sge) -> ibv_send_wr {
        *sge = self.sge();
        let (opcode, wr) = match self.kind {
            WrKind::Read => (
                ibv_wr_opcode::IBV_WR_RDMA_READ,
                wr_t {
                    rdma: rdma_t {
                        remote_addr: self.remote.addr,
                        rkey: self.remote.rkey,
                    },
                },
            ),
            WrKind::Write => (
                ibv_wr_opcode::IBV_WR_RDMA_WRITE,
                wr_t {
                    rdma: rdma_t {
                        remote_addr: self.remote.addr,
                        rkey: self.remote.rkey,
                    },
                },
            ),
            WrKind::Cas { compare, swap } => (
                ibv_wr_opcode::IBV_WR_ATOMIC_CMP_AND_SWP,
                wr_t {
                    atomic: atomic_t {
                        remote_addr: self.remote.addr,
                        compare_add: compare,
                        swap,
                        rkey: self.remote.rkey,
                    },
                },
            ),
        };
        // SAFETY: ibv_send_wr is a plain C struct (integers, raw pointers and
        // unions of them) for which all-zero bytes are a valid value: null
        // `next`, no immediate data, no UD/XRC/MW/TSO fields.
        let mut raw: ibv_send_wr = unsafe { std::mem::zeroed() };
        raw.wr_id = self.wr_id;
        raw.next = std::ptr::null_mut();
        raw.sg_list = sge;
        raw.num_sge = 1;
        raw.opcode = opcode;
        raw.send_flags = self.send_flags();
        raw.wr = wr;
        raw
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOCAL: LocalSlice = LocalSlice {
        addr: 0x7f00_0000_1000,
        len: 40,
        lkey: 0x1234,
    };
    const REMOTE: RemoteSlice = RemoteSlice {
        addr: 0x5500_0000_2040,
        rkey: 0xabcd,
    };

    fn rdma_of(w: &ibv_send_wr) -> rdma_t {
        // SAFETY: READ and WRITE requests initialise the `rdma` member.
        unsafe { w.wr.rdma }
    }

    #[test]
    fn read_request_fields() {
        let mut sge = ibv_sge {
            addr: 0,
            length: 0,
            lkey: 0,
        };
        let w = read_wr(77, LOCAL, REMOTE, false).raw(&mut sge);
        assert_eq!(w.wr_id, 77);
        assert!(w.next.is_null());
        assert_eq!(w.opcode, ibv_wr_opcode::IBV_WR_RDMA_READ);
        assert_eq!(w.num_sge, 1);
        assert_eq!(w.sg_list, &mut sge as *mut ibv_sge);
        assert_eq!((sge.addr, sge.length, sge.lkey), (LOCAL.addr, 40, 0x1234));
        assert_eq!(rdma_of(&w).remote_addr, REMOTE.addr);
        assert_eq!(rdma_of(&w).rkey, REMOTE.rkey);
        assert_eq!(w.send_flags, ibv_send_flags::IBV_SEND_SIGNALED.0);
    }

    #[test]
    fn write_request_fields() {
        let mut sge = ibv_sge {
            addr: 0,
            length: 0,
            lkey: 0,
        };
        let w = write_wr(5, LOCAL, REMOTE, true).raw(&mut sge);
        assert_eq!(w.wr_id, 5);
        assert_eq!(w.opcode, ibv_wr_opcode::IBV_WR_RDMA_WRITE);
        assert_eq!((sge.addr, sge.length, sge.lkey), (LOCAL.addr, 40, 0x1234));
        assert_eq!(rdma_of(&w).remote_addr, REMOTE.addr);
        assert_eq!(rdma_of(&w).rkey, REMOTE.rkey);
        assert_eq!(
            w.send_flags,
            (ibv_send_flags::IBV_SEND_SIGNALED | ibv_send_flags::IBV_SEND_FENCE).0
        );
        assert_eq!(w.send_flags & ibv_send_flags::IBV_SEND_INLINE.0, 0);
    }

    #[test]
    fn cas_request_fields() {
        let local = LocalSlice { len: 8, ..LOCAL };
        let mut sge = ibv_sge {
            addr: 0,
            length: 0,
            lkey: 0,
        };
        let w = cas_wr(9, local, REMOTE, 0x1111, 0x2222, false).raw(&mut sge);
        assert_eq!(w.wr_id, 9);
        assert_eq!(w.opcode, ibv_wr_opcode::IBV_WR_ATOMIC_CMP_AND_SWP);
        assert_eq!(w.num_sge, 1);
        assert_eq!((sge.addr, sge.length, sge.lkey), (LOCAL.addr, 8, 0x1234));
        // SAFETY: a CAS request initialises the `atomic` member.
        let a = unsafe { w.wr.atomic };
        assert_eq!(a.remote_addr, REMOTE.addr);
        assert_eq!(a.rkey, REMOTE.rkey);
        assert_eq!(a.compare_add, 0x1111);
        assert_eq!(a.swap, 0x2222);
        assert_eq!(w.send_flags, ibv_send_flags::IBV_SEND_SIGNALED.0);
    }

    #[test]
    fn only_writes_within_the_inline_size_go_inline() {
        let inline = |w: SendWr| w.send_flags() & ibv_send_flags::IBV_SEND_INLINE.0 != 0;
        // LOCAL is 40 bytes.
        assert!(inline(write_wr(1, LOCAL, REMOTE, false).inline(64)));
        assert!(inline(write_wr(1, LOCAL, REMOTE, false).inline(40)));
        assert!(!inline(write_wr(1, LOCAL, REMOTE, false).inline(39)));
        assert!(!inline(write_wr(1, LOCAL, REMOTE, false).inline(0)));
        assert!(!inline(write_wr(1, LOCAL, REMOTE, false)));
        // A READ's or CAS's local slice is where the answer lands.
        assert!(!inline(read_wr(1, LOCAL, REMOTE, false).inline(64)));
        let local = LocalSlice { len: 8, ..LOCAL };
        assert!(!inline(cas_wr(1, local, REMOTE, 1, 2, false).inline(64)));
        // Inline keeps the completion and the fence.
        let w = write_wr(1, LOCAL, REMOTE, true).inline(64);
        assert_eq!(
            w.send_flags(),
            (ibv_send_flags::IBV_SEND_SIGNALED
                | ibv_send_flags::IBV_SEND_FENCE
                | ibv_send_flags::IBV_SEND_INLINE)
                .0
        );
    }

    #[test]
    fn fence_flag_is_only_set_when_asked() {
        for fence in [false, true] {
            let w = read_wr(1, LOCAL, REMOTE, fence);
            assert_eq!(
                w.send_flags() & ibv_send_flags::IBV_SEND_FENCE.0 != 0,
                fence
            );
            assert_ne!(w.send_flags() & ibv_send_flags::IBV_SEND_SIGNALED.0, 0);
        }
    }

    #[test]
    fn only_requests_made_unsignaled_lose_the_signaled_flag() {
        let w = write_wr(1, LOCAL, REMOTE, true).inline(64);
        assert_eq!(w.with_signal(true), w);
        let quiet = w.with_signal(false);
        assert_eq!(quiet.send_flags() & ibv_send_flags::IBV_SEND_SIGNALED.0, 0);
        assert_eq!(
            quiet.send_flags(),
            (ibv_send_flags::IBV_SEND_FENCE | ibv_send_flags::IBV_SEND_INLINE).0
        );
        let mut sge = quiet.sge();
        assert_eq!(quiet.raw(&mut sge).send_flags, quiet.send_flags());
    }
}

//! Protection domain, pinned memory and memory registrations.
//!
//! Regions are anonymous, zeroed, page-aligned mappings registered with
//! `policy::access_flags`. The CPU touches registered memory only
//! through word-wise atomic copies ([`Mr::read`], [`Mr::write`]): NICs and
//! other threads access the same bytes concurrently, so plain `memcpy` into a
//! Rust slice would be a data race.

use std::sync::atomic::{fence, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

use rdma_sys::{
    ibv_access_flags, ibv_alloc_pd, ibv_dealloc_pd, ibv_dereg_mr, ibv_mr, ibv_pd, ibv_reg_mr,
};

use super::device::Context;
use crate::error::VerbsError;
use crate::policy::{access_flags, RegionKind};
use crate::remote::RegionInfo;

/// A protection domain.
pub struct Pd {
    pd: *mut ibv_pd,
    ctx: Arc<Context>,
}

// SAFETY: a PD may be used from any thread; it is only freed in Drop.
unsafe impl Send for Pd {}
// SAFETY: as above.
unsafe impl Sync for Pd {}

impl Pd {
    /// Allocates a protection domain on `ctx`.
    pub fn new(ctx: Arc<Context>) -> Result<Arc<Pd>, VerbsError> {
        // SAFETY: ctx is an open context.
        let pd = unsafe { ibv_alloc_pd(ctx.raw()) };
        if pd.is_null() {
            return Err(VerbsError::verbs("ibv_alloc_pd"));
        }
        Ok(Arc::new(Pd { pd, ctx }))
    }

    /// The raw PD.
    pub fn raw(&self) -> *mut ibv_pd {
        self.pd
    }

    /// Its context.
    pub fn context(&self) -> &Arc<Context> {
        &self.ctx
    }
}

impl Drop for Pd {
    fn drop(&mut self) {
        // SAFETY: every MR and QP on this PD holds an Arc<Pd>, so none is left.
        unsafe { ibv_dealloc_pd(self.pd) };
    }
}

/// An anonymous, zeroed, page-aligned mapping.
struct Mapping {
    ptr: *mut u8,
    len: usize,
}

/// The size of the huge pages asked for (x86-64 and most ARM servers).
pub const HUGE_PAGE: usize = 2 << 20;

impl Mapping {
    /// Maps `len` zeroed bytes; with `huge`, on 2 MiB huge pages if the
    /// system has them (`vm.nr_hugepages`), else on ordinary pages. Returns
    /// whether huge pages were used.
    fn new(len: usize, huge: bool) -> Result<(Mapping, bool), VerbsError> {
        if huge {
            let hlen = len.max(1).next_multiple_of(HUGE_PAGE);
            // SAFETY: an anonymous private mapping with no address hint; checked below.
            let ptr = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    hlen,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_HUGETLB,
                    -1,
                    0,
                )
            };
            if ptr != libc::MAP_FAILED {
                return Ok((
                    Mapping {
                        ptr: ptr.cast(),
                        len: hlen,
                    },
                    true,
                ));
            }
        }
        let len = len.max(1).next_multiple_of(4096);
        // SAFETY: an anonymous private mapping with no address hint; checked below.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(VerbsError::verbs("mmap of a region"));
        }
        Ok((
            Mapping {
                ptr: ptr.cast(),
                len,
            },
            false,
        ))
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: ptr/len came from mmap; the registration was released first.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// A registered memory region with its own pinned memory.
pub struct Mr {
    mr: *mut ibv_mr,
    len: u64,
    kind: RegionKind,
    huge: bool,
    /// Registered with `IBV_ACCESS_MW_BIND` (memory windows may be bound
    /// over it).
    windows: bool,
    // Dropped after `Drop::drop` deregisters: memory outlives the registration.
    mem: Mapping,
    _pd: Arc<Pd>,
}

// SAFETY: the MR is immutable after registration; CPU accesses to its memory
// go through atomics (read/write below).
unsafe impl Send for Mr {}
// SAFETY: as above.
unsafe impl Sync for Mr {}

impl Mr {
    /// Maps `len` zeroed bytes and registers them for `kind`'s access.
    pub fn alloc(pd: &Arc<Pd>, len: u64, kind: RegionKind) -> Result<Mr, VerbsError> {
        Mr::alloc_with(pd, len, kind, false)
    }

    /// [`Mr::alloc`], on 2 MiB huge pages when `huge` asks for them and the
    /// system has them (else on ordinary pages: [`Mr::huge_pages`] tells).
    pub fn alloc_with(
        pd: &Arc<Pd>,
        len: u64,
        kind: RegionKind,
        huge: bool,
    ) -> Result<Mr, VerbsError> {
        let size = usize::try_from(len).map_err(|_| VerbsError::RegionTooLarge { len })?;
        let (mem, huge) = Mapping::new(size, huge)?;
        let access = access_flags(kind);
        let register = |access: ibv_access_flags| {
            // SAFETY: `mem` is a valid mapping of at least `size` bytes that
            // outlives the registration (see field order and Drop).
            unsafe { ibv_reg_mr(pd.raw(), mem.ptr.cast(), size.max(1), access.0 as i32) }
        };
        let mut mr = register(access);
        let mut windows = access.0 & ibv_access_flags::IBV_ACCESS_MW_BIND.0 != 0;
        if mr.is_null() && windows {
            // A device without memory windows may refuse the bind right:
            // the region serves everything but windows.
            tracing::warn!(
                error = %std::io::Error::last_os_error(),
                "registering the data region for memory windows failed: clients without storage cannot write to this node"
            );
            mr = register(ibv_access_flags(
                access.0 & !ibv_access_flags::IBV_ACCESS_MW_BIND.0,
            ));
            windows = false;
        }
        if mr.is_null() {
            return Err(VerbsError::verbs(
                "ibv_reg_mr (is the memlock limit high enough? `ulimit -l unlimited`, see docs/deploy.md)",
            ));
        }
        Ok(Mr {
            mr,
            len,
            kind,
            huge,
            windows,
            mem,
            _pd: pd.clone(),
        })
    }

    /// The raw registration.
    pub fn raw(&self) -> *mut ibv_mr {
        self.mr
    }

    /// Whether memory windows may be bound over it (registered with
    /// `IBV_ACCESS_MW_BIND`).
    pub fn carries_windows(&self) -> bool {
        self.windows
    }

    /// First byte's virtual address.
    pub fn addr(&self) -> u64 {
        self.mem.ptr as u64
    }

    /// Usable length.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the region is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// What the region is for.
    pub fn kind(&self) -> RegionKind {
        self.kind
    }

    /// Whether the region lies on huge pages.
    pub fn huge_pages(&self) -> bool {
        self.huge
    }

    /// Local key.
    pub fn lkey(&self) -> u32 {
        // SAFETY: `mr` is a live registration.
        unsafe { (*self.mr).lkey }
    }

    /// Remote key.
    pub fn rkey(&self) -> u32 {
        // SAFETY: `mr` is a live registration.
        unsafe { (*self.mr).rkey }
    }

    /// Address, rkey and length, as advertised to peers.
    pub fn info(&self) -> RegionInfo {
        RegionInfo {
            addr: self.addr(),
            rkey: self.rkey(),
            len: self.len,
        }
    }

    fn check(&self, offset: u64, len: usize) -> Option<usize> {
        let end = offset.checked_add(len as u64)?;
        (end <= self.len).then_some(offset as usize)
    }

    /// Copies `len` bytes at `offset` out (acquire, word-wise where aligned);
    /// `None` if out of range.
    pub fn read(&self, offset: u64, len: usize) -> Option<Vec<u8>> {
        let start = self.check(offset, len)?;
        let mut out = vec![0u8; len];
        let mut i = 0;
        while i < len {
            let at = start + i;
            // SAFETY: `at < self.len <= mapping length`; the mapping is page
            // aligned, so `at % 8 == 0` makes the u64 access aligned. Atomic
            // accesses do not race with other threads' atomic accesses.
            unsafe {
                let p = self.mem.ptr.add(at);
                if at % 8 == 0 && len - i >= 8 {
                    let w = (*p.cast::<AtomicU64>()).load(Ordering::Acquire);
                    out[i..i + 8].copy_from_slice(&w.to_ne_bytes());
                    i += 8;
                } else {
                    out[i] = (*p.cast::<AtomicU8>()).load(Ordering::Acquire);
                    i += 1;
                }
            }
        }
        Some(out)
    }

    /// The 8 bytes at `offset`; `None` if out of range.
    pub fn read8(&self, offset: u64) -> Option<[u8; 8]> {
        let v = self.read(offset, 8)?;
        let mut b = [0u8; 8];
        b.copy_from_slice(&v);
        Some(b)
    }

    /// Copies `data` in at `offset` (release, word-wise where aligned);
    /// `None` if out of range.
    pub fn write(&self, offset: u64, data: &[u8]) -> Option<()> {
        let start = self.check(offset, data.len())?;
        let mut i = 0;
        while i < data.len() {
            let at = start + i;
            // SAFETY: as in `read`.
            unsafe {
                let p = self.mem.ptr.add(at);
                if at % 8 == 0 && data.len() - i >= 8 {
                    let mut w = [0u8; 8];
                    w.copy_from_slice(&data[i..i + 8]);
                    (*p.cast::<AtomicU64>()).store(u64::from_ne_bytes(w), Ordering::Release);
                    i += 8;
                } else {
                    (*p.cast::<AtomicU8>()).store(data[i], Ordering::Release);
                    i += 1;
                }
            }
        }
        // Make the stores visible before a later doorbell (ibv_post_send also
        // issues its own device barrier).
        fence(Ordering::SeqCst);
        Some(())
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        // SAFETY: `mr` is a live registration, deregistered once; QPs using
        // it are gone (endpoints and acceptors are dropped first).
        unsafe { ibv_dereg_mr(self.mr) };
    }
}

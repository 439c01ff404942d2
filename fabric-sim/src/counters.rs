//! Operation counters: the plain [`OpCounters`] snapshot type and the atomic
//! per-node tally behind it.
//!
//! Counting rules (the same for per-node and per-endpoint counters):
//! - every posted operation increments the counter of its kind, whether it
//!   succeeds or not;
//! - `bytes_read` / `bytes_written` count payload bytes of *successful*
//!   operations only: READ and LocalRead add their length to `bytes_read`,
//!   WRITE and LocalWrite add theirs to `bytes_written`, and a CAS (successful
//!   swap or not) adds 8 to `bytes_read` — it returns the previous word;
//! - `errors` counts completions that carry an error.

use std::fmt;
use std::ops::{Add, AddAssign};

use nessie_protocol::OpKind;

use crate::sync::atomic::{AtomicU64, Ordering};

/// A snapshot of operation counts and bytes moved.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpCounters {
    /// RDMA READs.
    pub reads: u64,
    /// RDMA WRITEs.
    pub writes: u64,
    /// RDMA compare-and-swaps.
    pub cas: u64,
    /// CPU reads of the local data table.
    pub local_reads: u64,
    /// CPU writes of the local data table.
    pub local_writes: u64,
    /// Payload bytes returned by successful reads (8 per CAS).
    pub bytes_read: u64,
    /// Payload bytes stored by successful writes.
    pub bytes_written: u64,
    /// Operations whose completion carried an error.
    pub errors: u64,
}

impl OpCounters {
    /// Total number of operations of all kinds.
    pub fn ops(&self) -> u64 {
        self.reads
            .saturating_add(self.writes)
            .saturating_add(self.cas)
            .saturating_add(self.local_reads)
            .saturating_add(self.local_writes)
    }

    /// Number of NIC operations (READ, WRITE, CAS).
    pub fn nic_ops(&self) -> u64 {
        self.reads
            .saturating_add(self.writes)
            .saturating_add(self.cas)
    }

    /// Counts one operation of `kind` moving `bytes` payload bytes.
    pub(crate) fn record(&mut self, kind: OpKind, bytes: u64, ok: bool) {
        let d = Self::delta(kind, bytes, ok);
        *self += d;
    }

    /// The counters of a single operation.
    fn delta(kind: OpKind, bytes: u64, ok: bool) -> OpCounters {
        let mut d = OpCounters::default();
        match kind {
            OpKind::Read => d.reads = 1,
            OpKind::Write => d.writes = 1,
            OpKind::Cas => d.cas = 1,
            OpKind::LocalRead => d.local_reads = 1,
            OpKind::LocalWrite => d.local_writes = 1,
        }
        if ok {
            match kind {
                OpKind::Read | OpKind::LocalRead => d.bytes_read = bytes,
                OpKind::Cas => d.bytes_read = 8,
                OpKind::Write | OpKind::LocalWrite => d.bytes_written = bytes,
            }
        } else {
            d.errors = 1;
        }
        d
    }
}

impl Add for OpCounters {
    type Output = OpCounters;

    fn add(self, rhs: OpCounters) -> OpCounters {
        OpCounters {
            reads: self.reads.saturating_add(rhs.reads),
            writes: self.writes.saturating_add(rhs.writes),
            cas: self.cas.saturating_add(rhs.cas),
            local_reads: self.local_reads.saturating_add(rhs.local_reads),
            local_writes: self.local_writes.saturating_add(rhs.local_writes),
            bytes_read: self.bytes_read.saturating_add(rhs.bytes_read),
            bytes_written: self.bytes_written.saturating_add(rhs.bytes_written),
            errors: self.errors.saturating_add(rhs.errors),
        }
    }
}

impl AddAssign for OpCounters {
    fn add_assign(&mut self, rhs: OpCounters) {
        *self = *self + rhs;
    }
}

impl fmt::Display for OpCounters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "reads={} writes={} cas={} local_reads={} local_writes={} bytes_read={} bytes_written={} errors={}",
            self.reads,
            self.writes,
            self.cas,
            self.local_reads,
            self.local_writes,
            self.bytes_read,
            self.bytes_written,
            self.errors
        )
    }
}

/// [`OpCounters`] kept with atomics, shared by every endpoint targeting a node.
///
/// Aligned to two cache lines of their own: every NIC operation writes them,
/// and beside the node's flags (down, faults, skew), which every operation
/// and every clock read loads, each write would evict those flags from the
/// other cores.
#[derive(Debug)]
#[repr(align(128))]
pub(crate) struct AtomicCounters {
    fields: [AtomicU64; 8],
}

impl AtomicCounters {
    /// All counts zero.
    pub(crate) fn new() -> Self {
        AtomicCounters {
            fields: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    /// Counts one operation (see the module documentation for the rules).
    pub(crate) fn record(&self, kind: OpKind, bytes: u64, ok: bool) {
        let d = OpCounters::delta(kind, bytes, ok);
        for (field, v) in self.fields.iter().zip(Self::to_array(&d)) {
            if v != 0 {
                field.fetch_add(v, Ordering::Relaxed);
            }
        }
    }

    /// The current counts.
    pub(crate) fn snapshot(&self) -> OpCounters {
        let [reads, writes, cas, local_reads, local_writes, bytes_read, bytes_written, errors] =
            self.fields.each_ref().map(|f| f.load(Ordering::Relaxed));
        OpCounters {
            reads,
            writes,
            cas,
            local_reads,
            local_writes,
            bytes_read,
            bytes_written,
            errors,
        }
    }

    /// Sets every count back to zero.
    pub(crate) fn reset(&self) {
        for field in &self.fields {
            field.store(0, Ordering::Relaxed);
        }
    }

    fn to_array(c: &OpCounters) -> [u64; 8] {
        [
            c.reads,
            c.writes,
            c.cas,
            c.local_reads,
            c.local_writes,
            c.bytes_read,
            c.bytes_written,
            c.errors,
        ]
    }
}

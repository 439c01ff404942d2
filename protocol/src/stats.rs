//! Per-operation counters of fabric work, the yardstick the papers compare by.

use std::fmt;
use std::ops::AddAssign;

use crate::addr::Region;
use crate::fabric::Op;

/// What one operation (or a sum of operations) cost on the fabric.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct OpStats {
    /// RDMA READs of index table entries.
    pub index_reads: u64,
    /// RDMA READs of data table entries.
    pub data_reads: u64,
    /// RDMA WRITEs issued by the client.
    pub writes: u64,
    /// RDMA WRITEs a server issued on the operation's behalf (responses of
    /// the server-driven baselines; always 0 for Nessie).
    pub server_writes: u64,
    /// RDMA CASes on index table entries.
    pub index_cas: u64,
    /// RDMA CASes on data table entry state words (loopback when local).
    pub data_cas: u64,
    /// CPU reads of the local data table.
    pub local_reads: u64,
    /// CPU writes of the local data table.
    pub local_writes: u64,
    /// Bytes moved by RDMA (read, written, and 8 per CAS).
    pub fabric_bytes: u64,
    /// Bytes moved by the CPU path.
    pub local_bytes: u64,
    /// Rounds that contained an operation to another node (remote round trips).
    pub round_trips: u64,
    /// Rounds whose NIC operations all went to the client's own node (loopback).
    pub loopback_rounds: u64,
    /// Attempts (1 plus retries after conflicts).
    pub attempts: u64,
    /// Key moves completed by MIGRATE.
    pub migrations: u64,
    /// Of those, moves made at recursion depth 2 or more (to free the
    /// destination of another move).
    pub deep_migrations: u64,
    /// Uncommitted entries aborted or restored on another client's behalf.
    pub recoveries: u64,
    /// Committed MIGRATE copies whose source this client unlinked for its owner.
    pub helps: u64,
    /// Operations whose completion had not arrived by the attempt's deadline
    /// (given up on: they may or may not have executed).
    pub lost_completions: u64,
    /// Commits whose completion failed or was lost and whose outcome the
    /// owner then settled with one more compare-and-swap.
    pub settled_commits: u64,
    /// Unlinked entries whose recycle mark failed after the operation
    /// committed: they are never reused (a leak of memory, never of safety).
    pub leaked: u64,
    /// Data table entries this client's allocator found marked for
    /// recycling and expired, and took back for reuse (a written entry used
    /// again: what the expiration period protects).
    pub recycled: u64,
    /// Growth seals this client's attempts met where its view of the index
    /// expected none: each sent it to read the directory again
    /// (docs/protocol.md §2.5).
    pub stale_views: u64,
    /// Entries of an old index generation this client sealed for a growth
    /// (an empty one by CAS, or a key's by finishing its move).
    pub growth_seals: u64,
}

impl OpStats {
    /// Counts one operation.
    pub fn count(&mut self, op: &Op) {
        match op {
            Op::Read { addr, .. } if addr.region == Region::Index => self.index_reads += 1,
            Op::Read { .. } => self.data_reads += 1,
            Op::Write { .. } => self.writes += 1,
            Op::Cas { addr, .. } if addr.region == Region::Index => self.index_cas += 1,
            Op::Cas { .. } => self.data_cas += 1,
            Op::LocalRead { .. } => self.local_reads += 1,
            Op::LocalWrite { .. } | Op::BindWindow { .. } => self.local_writes += 1,
            Op::Windowed { op, .. } => return self.count(op),
        }
        match op {
            Op::LocalRead { .. } | Op::LocalWrite { .. } | Op::BindWindow { .. } => {
                self.local_bytes += op.bytes()
            }
            _ => self.fabric_bytes += op.bytes(),
        }
    }

    /// All RDMA READs.
    pub fn reads(&self) -> u64 {
        self.index_reads + self.data_reads
    }

    /// All RDMA CASes.
    pub fn cas(&self) -> u64 {
        self.index_cas + self.data_cas
    }

    /// All NIC operations.
    pub fn fabric_ops(&self) -> u64 {
        self.reads() + self.writes + self.server_writes + self.cas()
    }
}

impl AddAssign for OpStats {
    fn add_assign(&mut self, o: OpStats) {
        self.index_reads += o.index_reads;
        self.data_reads += o.data_reads;
        self.writes += o.writes;
        self.server_writes += o.server_writes;
        self.index_cas += o.index_cas;
        self.data_cas += o.data_cas;
        self.local_reads += o.local_reads;
        self.local_writes += o.local_writes;
        self.fabric_bytes += o.fabric_bytes;
        self.local_bytes += o.local_bytes;
        self.round_trips += o.round_trips;
        self.loopback_rounds += o.loopback_rounds;
        self.attempts += o.attempts;
        self.migrations += o.migrations;
        self.deep_migrations += o.deep_migrations;
        self.recoveries += o.recoveries;
        self.helps += o.helps;
        self.lost_completions += o.lost_completions;
        self.settled_commits += o.settled_commits;
        self.leaked += o.leaked;
        self.recycled += o.recycled;
        self.stale_views += o.stale_views;
        self.growth_seals += o.growth_seals;
    }
}

impl fmt::Display for OpStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "READ {} (index {}, data {}), WRITE {} (+{} by servers), CAS {} (index {}, data {}), local r/w {}/{}, {} fabric bytes, {} round trips + {} loopback",
            self.reads(),
            self.index_reads,
            self.data_reads,
            self.writes,
            self.server_writes,
            self.cas(),
            self.index_cas,
            self.data_cas,
            self.local_reads,
            self.local_writes,
            self.fabric_bytes,
            self.round_trips,
            self.loopback_rounds
        )
    }
}

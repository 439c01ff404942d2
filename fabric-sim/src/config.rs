//! Configuration of a simulated fabric: cluster shape, latency model, clock
//! mode and the CAS-window knob, plus the errors of an invalid configuration.

use std::time::Duration;

use nessie_protocol::{Nanos, Region, Topology};

/// The protocol time at which a [`ClockMode::Manual`] clock starts.
pub const MANUAL_CLOCK_START: Nanos = Nanos(1_000_000_000);

/// How long a NIC operation takes to complete: `per_op + bytes * per_byte_ns`.
///
/// The delay is measured on the wall clock (`std::time::Instant`), whatever
/// the [`ClockMode`]. The default is zero: completions are ready as soon as
/// the operation is posted.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LatencyModel {
    /// Fixed delay of every NIC operation.
    pub per_op: Duration,
    /// Additional nanoseconds per payload byte.
    pub per_byte_ns: f64,
}

impl LatencyModel {
    /// No latency at all.
    pub const ZERO: LatencyModel = LatencyModel {
        per_op: Duration::ZERO,
        per_byte_ns: 0.0,
    };

    /// A model with both components.
    pub fn new(per_op: Duration, per_byte_ns: f64) -> Self {
        LatencyModel {
            per_op,
            per_byte_ns,
        }
    }

    /// A fixed per-operation delay, independent of size.
    pub fn per_op(per_op: Duration) -> Self {
        LatencyModel {
            per_op,
            per_byte_ns: 0.0,
        }
    }

    /// Whether every operation completes immediately.
    pub fn is_zero(&self) -> bool {
        self.per_op.is_zero() && self.per_byte_ns == 0.0
    }

    /// The delay of an operation moving `bytes` payload bytes.
    pub fn delay(&self, bytes: u64) -> Duration {
        // Float-to-int `as` saturates, so huge or odd products cannot panic.
        let extra = (bytes as f64 * self.per_byte_ns) as u64;
        self.per_op.saturating_add(Duration::from_nanos(extra))
    }
}

/// Where the protocol time returned by `Endpoint::now` comes from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ClockMode {
    /// Nanoseconds since the fabric was created, from `std::time::Instant`
    /// (plus whatever `SimFabric::advance` added).
    #[default]
    Real,
    /// Starts at [`MANUAL_CLOCK_START`] and only moves by `SimFabric::advance`.
    Manual,
}

/// The order in which a multi-word READ or WRITE moves its words.
///
/// Real NICs guarantee no order within one transfer (only that each aligned
/// 8-byte word is written whole), so the protocol must not depend on one; the
/// test suites run under every setting.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum TransferOrder {
    /// Lowest address first (the default).
    #[default]
    Ascending,
    /// Highest address first.
    Descending,
    /// A fresh random permutation of the words for every transfer (seeded:
    /// [`SimConfig::seed`]).
    Random,
}

/// Everything needed to build a `SimFabric`.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// Number of nodes; node ids are `0..nodes`.
    pub nodes: u16,
    /// Index table entries (64-bit words) per node.
    pub index_slots_per_node: u32,
    /// Bytes of data table per node.
    pub data_bytes_per_node: u64,
    /// Delay model of NIC operations.
    pub latency: LatencyModel,
    /// Source of protocol time.
    pub clock: ClockMode,
    /// Word order within a multi-word transfer.
    pub transfer_order: TransferOrder,
    /// Seed of the simulator's own randomness ([`TransferOrder::Random`]).
    pub seed: u64,
    /// Yield between the load and the store of a NIC CAS, widening the window
    /// in which a CPU store or RDMA WRITE to the same word is lost.
    pub yield_inside_cas: bool,
    /// Called before every word a transfer moves, before every CAS, and as the
    /// endpoints' back-off. A schedule-exploring test harness (shuttle) sets it
    /// to its `yield_now` so that every fabric word access is a scheduling point.
    pub schedule_point: Option<fn()>,
}

impl Default for SimConfig {
    /// Three nodes, 1024 index slots and 1 MiB of data table each, no
    /// latency, real clock, ascending transfers, no CAS yield.
    fn default() -> Self {
        SimConfig {
            nodes: 3,
            index_slots_per_node: 1024,
            data_bytes_per_node: 1 << 20,
            latency: LatencyModel::ZERO,
            clock: ClockMode::Real,
            transfer_order: TransferOrder::Ascending,
            seed: 0x5eed,
            yield_inside_cas: false,
            schedule_point: None,
        }
    }
}

impl SimConfig {
    /// A configuration of the given shape, other settings at their defaults.
    pub fn new(nodes: u16, index_slots_per_node: u32, data_bytes_per_node: u64) -> Self {
        SimConfig {
            nodes,
            index_slots_per_node,
            data_bytes_per_node,
            ..SimConfig::default()
        }
    }

    /// A configuration matching `topology`, other settings at their defaults.
    pub fn from_topology(topology: Topology) -> Self {
        Self::new(
            topology.nodes,
            topology.index_slots_per_node,
            topology.data_bytes_per_node,
        )
    }

    /// Sets the number of nodes.
    pub fn with_nodes(mut self, nodes: u16) -> Self {
        self.nodes = nodes;
        self
    }

    /// Sets the index slots per node.
    pub fn with_index_slots(mut self, slots: u32) -> Self {
        self.index_slots_per_node = slots;
        self
    }

    /// Sets the data table bytes per node.
    pub fn with_data_bytes(mut self, bytes: u64) -> Self {
        self.data_bytes_per_node = bytes;
        self
    }

    /// Sets the latency model.
    pub fn with_latency(mut self, latency: LatencyModel) -> Self {
        self.latency = latency;
        self
    }

    /// Sets the clock mode.
    pub fn with_clock(mut self, clock: ClockMode) -> Self {
        self.clock = clock;
        self
    }

    /// Sets the word order within transfers.
    pub fn with_transfer_order(mut self, order: TransferOrder) -> Self {
        self.transfer_order = order;
        self
    }

    /// Sets the seed of the simulator's randomness.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Sets [`SimConfig::schedule_point`].
    pub fn with_schedule_point(mut self, hook: fn()) -> Self {
        self.schedule_point = Some(hook);
        self
    }

    /// Sets [`SimConfig::yield_inside_cas`].
    pub fn with_yield_inside_cas(mut self, yield_inside_cas: bool) -> Self {
        self.yield_inside_cas = yield_inside_cas;
        self
    }

    /// The topology this configuration describes.
    pub fn topology(&self) -> Topology {
        Topology {
            nodes: self.nodes,
            index_slots_per_node: self.index_slots_per_node,
            data_bytes_per_node: self.data_bytes_per_node,
        }
    }

    /// Checks the configuration; `SimFabric::new` calls this.
    pub fn validate(&self) -> Result<(), SimConfigError> {
        if self.nodes == 0 {
            return Err(SimConfigError::NoNodes);
        }
        if !self.latency.per_byte_ns.is_finite() || self.latency.per_byte_ns < 0.0 {
            return Err(SimConfigError::InvalidLatency {
                per_byte_ns: self.latency.per_byte_ns,
            });
        }
        let index_bytes = u64::from(self.index_slots_per_node) * 8;
        for (region, bytes) in [
            (Region::Index, index_bytes),
            (Region::Data, self.data_bytes_per_node),
        ] {
            if usize::try_from(bytes.div_ceil(8)).is_err() {
                return Err(SimConfigError::RegionTooLarge { region, bytes });
            }
        }
        Ok(())
    }
}

/// Why a [`SimConfig`] was rejected.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SimConfigError {
    /// A cluster needs at least one node.
    #[error("a simulated fabric needs at least one node")]
    NoNodes,
    /// The per-byte latency is negative, infinite or NaN.
    #[error("per-byte latency {per_byte_ns} ns is not a finite non-negative number")]
    InvalidLatency {
        /// The offending value.
        per_byte_ns: f64,
    },
    /// A region does not fit in this machine's address space.
    #[error("{region} region of {bytes} bytes per node is too large to simulate")]
    RegionTooLarge {
        /// Which region.
        region: Region,
        /// Its requested size.
        bytes: u64,
    },
}

//! Hardware profiles: the constants of the simulated cluster, each with
//! where it comes from.
//!
//! A profile describes one node's NIC (per direction, one queue that serves
//! one request at a time, a fixed processing cost plus the bytes at link
//! speed; or several processing units in parallel, the link, and an atomic
//! unit with its ceilings), the wire and switch between two NICs, the loopback path a NIC
//! takes for a request to its own node, the extra cost of an atomic at the
//! responder (a PCIe round trip to host memory), and the CPU cost of one
//! protocol step (one poll of a state machine) and of copying bytes; and,
//! for the server-driven systems, what a polling server worker costs: the
//! CPU of one request, of each access to the node's tables and of the
//! message checksums, and how long after a WRITE lands a polling thread
//! notices it.

use serde::Serialize;

/// The constants of one simulated cluster.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Profile {
    /// Its name (`--profile`).
    pub name: &'static str,
    /// NIC processing cost of one request or response, in ns.
    pub nic_op_ns: u64,
    /// Link speed in Gbit/s (each direction).
    pub link_gbps: f64,
    /// One-way wire and switch latency between two NICs, in ns.
    pub wire_ns: u64,
    /// Extra cost of a loopback request (through the NIC to its own node), in ns.
    pub loopback_ns: u64,
    /// Extra responder cost of a CAS (PCIe atomic), in ns.
    pub atomic_ns: u64,
    /// Processing units per direction of a NIC. One: each direction is one
    /// queue serving a request at a time, its processing and its bytes on
    /// the wire together, and a CAS holds the receive queue for its
    /// `atomic_ns` too (the TPDS calibration). More: requests are processed
    /// by the first free unit, in parallel, then their bytes cross the link
    /// one transfer at a time, and a CAS goes on to the atomic unit
    /// (`atomic_unit_ns`, `atomic_word_ns`) while its unit serves others.
    pub nic_units: u32,
    /// With several units: the NIC's atomic unit is busy this long per CAS
    /// (its ceiling for CASes on independent words), in ns.
    pub atomic_unit_ns: u64,
    /// With several units: the least time between two CASes on one word
    /// (the ceiling on one contended word), in ns.
    pub atomic_word_ns: u64,
    /// Header bytes on the wire per request or response (transport headers).
    pub header_bytes: u64,
    /// CPU cost of one protocol step (a poll of a machine), in ns.
    pub cpu_step_ns: u64,
    /// CPU copy bandwidth for the local path, in bytes per ns.
    pub cpu_copy_bytes_per_ns: f64,
    /// The scheduler's time slice when a client thread shares its core with
    /// busy background threads (`SimSpec::background_per_node`), in ns.
    pub time_slice_ns: u64,
    /// Server worker CPU per request besides its table accesses and
    /// checksums (decode, dispatch, claim decision, response header), in ns.
    pub server_request_ns: u64,
    /// Server worker CPU per access to the node's tables, on top of the
    /// copy (a cache miss on the hash table or an entry), in ns.
    pub local_access_ns: u64,
    /// CRC64 throughput of a server checking a request and sealing its
    /// response (the messages' checksum, `docs/baselines.md`), in bytes per ns.
    pub crc_bytes_per_ns: f64,
    /// A polling thread's read of a control word the NIC just wrote (a
    /// cache miss): the delay after which a spinning client sees its
    /// response, and part of a worker's, in ns.
    pub detect_ns: u64,
    /// A server worker's poll of one request slot whose control word did
    /// not change (a cache hit): a worker notices a request half a scan of
    /// its slots (plus `detect_ns`) after the WRITE lands, in ns.
    pub slot_check_ns: u64,
}

/// The TPDS paper's cluster: 15 nodes of 2 x 6-core Xeon E5-2620v2 with
/// Mellanox ConnectX-3 10 GbE (RoCE) NICs.
/// - `link_gbps` 10: the NICs' line rate (paper §6, "10 GbE").
/// - `wire_ns` + 2 x `nic_op_ns` ≈ 1.5 µs per direction: RoCE on ConnectX-3
///   at 10 GbE reads 8 bytes in about 3 µs end to end (the papers' own
///   microbenchmarks put a small READ at 3-4 µs, FaRM and HERD report
///   ~2-3 µs for ConnectX-3 RoCE READs).
/// - `atomic_ns` 500: ConnectX-3 atomics cost about a PCIe round trip more
///   than a READ (Kalia et al., "Design guidelines for high performance RDMA
///   systems", ATC 2016: atomics 2-3x slower per operation on CX-3).
/// - `loopback_ns` 400: a loopback request crosses PCIe twice but no wire.
/// - `cpu_step_ns` 300: one poll of a machine (decode, decide, build the next
///   round) on a 2.1 GHz Ivy Bridge core, measured here as 100-200 ns on a
///   modern core and scaled by clock and IPC.
/// - `time_slice_ns` 3 ms: Linux CFS's default scheduling period (6 ms
///   `sched_latency_ns`) shared by two runnable threads on a core (a client
///   thread and one busy background thread, as in the paper's Fig. 4); with
///   more threads per core CFS stretches the period, which round robin of
///   fixed slices approximates.
/// - Server workers (the papers give no per-request CPU figures; the
///   technical report's Figs 1-2 measure server-driven throughput but their
///   numbers did not survive in the seeds' text, so these are estimates):
///   `server_request_ns` 300, one protocol step's worth (decode, dispatch,
///   response header); `local_access_ns` 100 and `detect_ns` 100, a
///   last-level-cache miss to local DRAM on an Ivy Bridge-EP socket (about
///   80-100 ns by Intel's Memory Latency Checker figures for that
///   generation); `slot_check_ns` 10, a poll of an unchanged control word
///   that hits in cache; `crc_bytes_per_ns` 1.5, the slicing-by-16 CRC64
///   this project's messages use (`crc` crate, `Table<16>`), about 1.4
///   cycles per byte at 2.1 GHz (measured here: 1.5 B/ns on this machine's
///   shared cores, against 0.25 B/ns byte at a time).
pub const TPDS: Profile = Profile {
    name: "tpds",
    nic_op_ns: 500,
    link_gbps: 10.0,
    wire_ns: 500,
    loopback_ns: 400,
    atomic_ns: 500,
    nic_units: 1,
    atomic_unit_ns: 0,
    atomic_word_ns: 0,
    header_bytes: 58,
    cpu_step_ns: 300,
    cpu_copy_bytes_per_ns: 5.0,
    time_slice_ns: 3_000_000,
    server_request_ns: 300,
    local_access_ns: 100,
    crc_bytes_per_ns: 1.5,
    detect_ns: 100,
    slot_check_ns: 10,
};

/// A current cluster for what-if runs: 100 Gb/s NICs (ConnectX-5/6 class).
/// - `nic_op_ns` 100 and `wire_ns` 300: a small READ in about 1.6-2 µs end
///   to end through one switch (vendor figures for CX-6, eRPC's measurements).
/// - `nic_units` 16: 16 processing units of 100 ns each, 160 M requests a
///   second per direction, in the 150-200 M messages a second that
///   ConnectX-5/6 process with their parallel processing units (vendor
///   figures; Kalia et al., ATC'16 "Design guidelines for high performance
///   RDMA systems", §3: NICs process requests on several units in
///   parallel). Until issue 43 the NIC was one 100 ns server, about 10 M
///   requests a second, and bound every run at about 5 M a second per
///   node.
/// - `atomic_ns` 200: atomics still cost a PCIe round trip at the
///   responder; `atomic_unit_ns` 20: the atomic unit's ceiling, about 50 M
///   CASes a second on independent words, and `atomic_word_ns` 330: about
///   3 M a second on one contended word (ATC'16 §3.3 and Fig. 6;
///   RCuckoo's Fig. 1 measures the same two ceilings on ConnectX-5).
/// - `cpu_step_ns` 150: one poll on a current 3 GHz core (this machine's
///   order of magnitude); the server costs scale the same way (estimates:
///   `server_request_ns` 150, `local_access_ns` and `detect_ns` 90, a DRAM
///   miss on a current server; `crc_bytes_per_ns` 2.2, the same 1.4 cycles
///   per byte at 3 GHz).
pub const MODERN: Profile = Profile {
    name: "modern",
    nic_op_ns: 100,
    link_gbps: 100.0,
    wire_ns: 300,
    loopback_ns: 200,
    atomic_ns: 200,
    nic_units: 16,
    atomic_unit_ns: 20,
    atomic_word_ns: 330,
    header_bytes: 58,
    cpu_step_ns: 150,
    cpu_copy_bytes_per_ns: 10.0,
    time_slice_ns: 3_000_000,
    server_request_ns: 150,
    local_access_ns: 90,
    crc_bytes_per_ns: 2.2,
    detect_ns: 90,
    slot_check_ns: 5,
};

/// The profiles by name.
pub const PROFILES: [&Profile; 2] = [&TPDS, &MODERN];

impl Profile {
    /// CASes per second one node's NIC serves when it serves nothing else:
    /// its atomic unit's ceiling, or with none (one server per direction)
    /// its receive queue's, each CAS holding it for `nic_op_ns + atomic_ns`.
    pub fn cas_ceiling_per_node(&self) -> f64 {
        let ns = if self.atomic_unit_ns > 0 {
            self.atomic_unit_ns
        } else {
            self.nic_op_ns + self.atomic_ns
        };
        1e9 / ns.max(1) as f64
    }

    /// The profile called `name`.
    pub fn by_name(name: &str) -> Option<&'static Profile> {
        PROFILES.iter().copied().find(|p| p.name == name)
    }

    /// Time to serialise `bytes` (plus headers) on the link, in ns.
    pub fn wire_time(&self, bytes: u64) -> u64 {
        (((bytes + self.header_bytes) * 8) as f64 / self.link_gbps).ceil() as u64
    }

    /// CPU time to copy `bytes` on the local path, in ns.
    pub fn copy_time(&self, bytes: u64) -> u64 {
        (bytes as f64 / self.cpu_copy_bytes_per_ns).ceil() as u64
    }

    /// CPU time of a server to checksum `bytes` of messages, in ns.
    pub fn crc_time(&self, bytes: u64) -> u64 {
        (bytes as f64 / self.crc_bytes_per_ns).ceil() as u64
    }

    /// How long after a request's WRITE lands a worker polling `slots`
    /// request slots notices it: half a scan, plus the miss on the word.
    pub fn request_detect_ns(&self, slots: u64) -> u64 {
        self.detect_ns + self.slot_check_ns * slots / 2
    }

    /// How long a worker's scan takes to reach a request `examined` slots
    /// on from its cursor (the request's slot included): one check per
    /// slot passed, plus the miss on the request's word.
    pub fn scan_ns(&self, examined: u64) -> u64 {
        self.detect_ns + self.slot_check_ns * examined.saturating_sub(1)
    }
}

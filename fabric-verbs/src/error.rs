//! Typed errors of the verbs backend.
//!
//! [`VerbsError`] covers start-up and connection set-up (device discovery,
//! registration, `rdma_cm`, the byte-order probe). Errors of individual work
//! requests are reported to the protocol as [`nessie_protocol::FabricError`]
//! (see [`crate::status`]).

use std::io;

use nessie_protocol::NodeId;

use crate::byteorder::ByteOrderError;
use crate::cluster::ClusterError;
use crate::wire::{Reject, WireError};

/// The fix printed whenever no RDMA device is usable.
pub const NO_DEVICE_FIX: &str = "install rdma-core (Debian/Ubuntu: `apt install rdma-core \
    ibverbs-providers libibverbs1 librdmacm1`; RHEL: `dnf install rdma-core libibverbs \
    librdmacm`) and load your NIC's driver, or on a workstation set up soft-RoCE with \
    `modprobe rdma_rxe && rdma link add rxe0 type rxe netdev eth0`; see docs/deploy.md";

/// Why the verbs backend could not start, connect or keep running.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VerbsError {
    /// `ibv_get_device_list` found no RDMA device at all.
    #[error("no RDMA device found: {NO_DEVICE_FIX}")]
    NoDevice,
    /// Devices exist, but none has the configured name.
    #[error("RDMA device `{wanted}` not found (available: {available:?}); set `device` in the cluster file to one of them (`ibv_devices` lists them)")]
    DeviceNotFound {
        /// The name in the cluster file.
        wanted: String,
        /// The devices present.
        available: Vec<String>,
    },
    /// The device cannot perform RDMA atomics, which the protocol needs.
    #[error("RDMA device `{device}` reports atomic capability IBV_ATOMIC_NONE; Nessie needs 64-bit compare-and-swap (use a NIC with IBV_ATOMIC_HCA or IBV_ATOMIC_GLOB; soft-RoCE supports it)")]
    NoAtomics {
        /// The device.
        device: String,
    },
    /// The configured port is missing or not active.
    #[error("port {port} of `{device}` is not usable: {reason}")]
    Port {
        /// The device.
        device: String,
        /// The port number.
        port: u8,
        /// What is wrong (state, missing GID...).
        reason: String,
    },
    /// The cluster file was rejected.
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    /// A verbs call failed.
    #[error("{call} failed: {source}")]
    Verbs {
        /// The libibverbs function.
        call: &'static str,
        /// The errno it left.
        #[source]
        source: io::Error,
    },
    /// An `rdma_cm` call failed.
    #[error("{call} failed for {peer}: {source}")]
    Cm {
        /// The librdmacm function.
        call: &'static str,
        /// The node or address concerned.
        peer: String,
        /// The errno it left.
        #[source]
        source: io::Error,
    },
    /// An `rdma_cm` event other than the expected one arrived.
    #[error("rdma_cm: expected {expected} from {peer}, got {got} (status {status}); see docs/deploy.md, troubleshooting")]
    CmEvent {
        /// The event waited for.
        expected: &'static str,
        /// The event received.
        got: String,
        /// Its status field (a negative errno or a reject reason).
        status: i32,
        /// The node or address concerned.
        peer: String,
    },
    /// The peer refused the connection (with its reason when it is a Nessie
    /// node; without one, e.g., when nothing listens on the port yet).
    #[error("{peer} refused the connection: {}", match reject { Some(r) => r.to_string(), None => format!("rdma_cm reject status {status} (is the node up?)") })]
    Rejected {
        /// The node or address concerned.
        peer: String,
        /// The event's status (the CM's reject reason).
        status: i32,
        /// The node's reason, if it gave one.
        reject: Option<Reject>,
    },
    /// The peer's clock is further off than `clock_skew_ms` allows (A1).
    #[error("the clock of {peer} is off by {offset_ns} ns (+-{uncertainty_ns} ns), more than clock_skew ({skew_ns} ns): synchronise the clocks (PTP or NTP), see docs/deploy.md")]
    ClockSkew {
        /// The node concerned.
        peer: String,
        /// Its clock minus ours.
        offset_ns: i64,
        /// Half the round trip of the estimate.
        uncertainty_ns: u64,
        /// The bound.
        skew_ns: u64,
    },
    /// Connection set-up did not finish in time.
    #[error("timed out after {waited_ms} ms waiting for {what}")]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long.
        waited_ms: u64,
    },
    /// The address `rdma_cm` resolved belongs to another device or port than configured.
    #[error("address {address} resolves to device `{got}` port {got_port}, but the cluster file says `{expected}` port {expected_port}")]
    DeviceMismatch {
        /// The address.
        address: String,
        /// The device and port configured.
        expected: String,
        /// The configured port.
        expected_port: u8,
        /// The device `rdma_cm` chose.
        got: String,
        /// The port `rdma_cm` chose.
        got_port: u8,
    },
    /// A peer sent connection private data we cannot use.
    #[error("bad connection data from {peer}: {source}")]
    Wire {
        /// The node or address concerned.
        peer: String,
        /// What was wrong.
        #[source]
        source: WireError,
    },
    /// The atomic byte-order probe failed.
    #[error(transparent)]
    ByteOrder(#[from] ByteOrderError),
    /// `open` named a node that this process does not host.
    #[error("{0} is not hosted by this process")]
    NotHosted(NodeId),
    /// A data entry (from the cluster file's sizes) is longer than the
    /// port's largest message, so no READ could fetch it whole.
    #[error("device limits: a data entry of {entry} bytes exceeds the port's largest message ({max_msg} bytes)")]
    EntryTooLarge {
        /// A data entry's bytes.
        entry: u64,
        /// The port's largest message.
        max_msg: u32,
    },
    /// A memory region larger than this machine's address space.
    #[error("device limits: a region of {len} bytes does not fit this machine's address space")]
    RegionTooLarge {
        /// The region's bytes.
        len: u64,
    },
}

impl VerbsError {
    /// A [`VerbsError::Verbs`] carrying the current `errno`.
    pub(crate) fn verbs(call: &'static str) -> VerbsError {
        VerbsError::Verbs {
            call,
            source: io::Error::last_os_error(),
        }
    }

    /// A [`VerbsError::Verbs`] from a returned error number (verbs calls
    /// that return the errno instead of setting it).
    pub(crate) fn verbs_ret(call: &'static str, ret: i32) -> VerbsError {
        let code = if ret < 0 { -ret } else { ret };
        VerbsError::Verbs {
            call,
            source: io::Error::from_raw_os_error(code),
        }
    }

    /// A [`VerbsError::Cm`] carrying the current `errno`.
    pub(crate) fn cm(call: &'static str, peer: impl Into<String>) -> VerbsError {
        VerbsError::Cm {
            call,
            peer: peer.into(),
            source: io::Error::last_os_error(),
        }
    }

    /// Whether retrying the same dial cannot help until a configuration or
    /// a clock is fixed: a refusal with a permanent reason, a peer with
    /// another cluster file or version, a clock beyond the skew bound, an
    /// address that does not resolve or belongs to another device. Such a
    /// node is not dialled again for `endpoint::PERMANENT_HOLD_OFF`.
    pub fn is_permanent(&self) -> bool {
        match self {
            VerbsError::Rejected { reject, .. } => reject.is_some_and(|r| !r.reason.is_transient()),
            VerbsError::Wire { .. }
            | VerbsError::ClockSkew { .. }
            | VerbsError::DeviceMismatch { .. } => true,
            VerbsError::CmEvent { expected, got, .. } => {
                *expected == "ADDR_RESOLVED" && got.contains("ADDR_ERROR")
            }
            _ => false,
        }
    }

    /// Whether this is the no-device error (the node binary exits with 2).
    pub fn is_no_device(&self) -> bool {
        matches!(
            self,
            VerbsError::NoDevice | VerbsError::DeviceNotFound { .. }
        )
    }
}

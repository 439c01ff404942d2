//! Completion status mapping: every `ibv_wc_status` to the protocol's
//! [`FabricError`].
//!
//! Any error completion moves the queue pair to the error state; the
//! requests still queued on it then complete with `IBV_WC_WR_FLUSH_ERR`. The
//! endpoint reconnects the queue pair once they have drained
//! ([`crate::endpoint`]). `docs/deploy.md` explains each status for operators.

use nessie_protocol::{DeviceStatus, FabricError, NodeId, TransportError};
use rdma_sys::ibv_wc_status as S;

/// Every status `ibv_wc_status` defines (rdma-core), in numeric order.
#[cfg(test)]
pub const ALL_STATUSES: [u32; 24] = [
    S::IBV_WC_SUCCESS,
    S::IBV_WC_LOC_LEN_ERR,
    S::IBV_WC_LOC_QP_OP_ERR,
    S::IBV_WC_LOC_EEC_OP_ERR,
    S::IBV_WC_LOC_PROT_ERR,
    S::IBV_WC_WR_FLUSH_ERR,
    S::IBV_WC_MW_BIND_ERR,
    S::IBV_WC_BAD_RESP_ERR,
    S::IBV_WC_LOC_ACCESS_ERR,
    S::IBV_WC_REM_INV_REQ_ERR,
    S::IBV_WC_REM_ACCESS_ERR,
    S::IBV_WC_REM_OP_ERR,
    S::IBV_WC_RETRY_EXC_ERR,
    S::IBV_WC_RNR_RETRY_EXC_ERR,
    S::IBV_WC_LOC_RDD_VIOL_ERR,
    S::IBV_WC_REM_INV_RD_REQ_ERR,
    S::IBV_WC_REM_ABORT_ERR,
    S::IBV_WC_INV_EECN_ERR,
    S::IBV_WC_INV_EEC_STATE_ERR,
    S::IBV_WC_FATAL_ERR,
    S::IBV_WC_RESP_TIMEOUT_ERR,
    S::IBV_WC_GENERAL_ERR,
    S::IBV_WC_TM_ERR,
    S::IBV_WC_TM_RNDV_INCOMPLETE,
];

/// The rdma-core name of a status (`IBV_WC_...`), for messages.
pub fn status_name(status: u32) -> &'static str {
    match status {
        S::IBV_WC_SUCCESS => "IBV_WC_SUCCESS",
        S::IBV_WC_LOC_LEN_ERR => "IBV_WC_LOC_LEN_ERR",
        S::IBV_WC_LOC_QP_OP_ERR => "IBV_WC_LOC_QP_OP_ERR",
        S::IBV_WC_LOC_EEC_OP_ERR => "IBV_WC_LOC_EEC_OP_ERR",
        S::IBV_WC_LOC_PROT_ERR => "IBV_WC_LOC_PROT_ERR",
        S::IBV_WC_WR_FLUSH_ERR => "IBV_WC_WR_FLUSH_ERR",
        S::IBV_WC_MW_BIND_ERR => "IBV_WC_MW_BIND_ERR",
        S::IBV_WC_BAD_RESP_ERR => "IBV_WC_BAD_RESP_ERR",
        S::IBV_WC_LOC_ACCESS_ERR => "IBV_WC_LOC_ACCESS_ERR",
        S::IBV_WC_REM_INV_REQ_ERR => "IBV_WC_REM_INV_REQ_ERR",
        S::IBV_WC_REM_ACCESS_ERR => "IBV_WC_REM_ACCESS_ERR",
        S::IBV_WC_REM_OP_ERR => "IBV_WC_REM_OP_ERR",
        S::IBV_WC_RETRY_EXC_ERR => "IBV_WC_RETRY_EXC_ERR",
        S::IBV_WC_RNR_RETRY_EXC_ERR => "IBV_WC_RNR_RETRY_EXC_ERR",
        S::IBV_WC_LOC_RDD_VIOL_ERR => "IBV_WC_LOC_RDD_VIOL_ERR",
        S::IBV_WC_REM_INV_RD_REQ_ERR => "IBV_WC_REM_INV_RD_REQ_ERR",
        S::IBV_WC_REM_ABORT_ERR => "IBV_WC_REM_ABORT_ERR",
        S::IBV_WC_INV_EECN_ERR => "IBV_WC_INV_EECN_ERR",
        S::IBV_WC_INV_EEC_STATE_ERR => "IBV_WC_INV_EEC_STATE_ERR",
        S::IBV_WC_FATAL_ERR => "IBV_WC_FATAL_ERR",
        S::IBV_WC_RESP_TIMEOUT_ERR => "IBV_WC_RESP_TIMEOUT_ERR",
        S::IBV_WC_GENERAL_ERR => "IBV_WC_GENERAL_ERR",
        S::IBV_WC_TM_ERR => "IBV_WC_TM_ERR",
        S::IBV_WC_TM_RNDV_INCOMPLETE => "IBV_WC_TM_RNDV_INCOMPLETE",
        _ => "unknown ibv_wc_status",
    }
}

/// Maps the status of a completion of a request to `node` to the protocol's
/// result: `Ok(())` for success, otherwise the typed error.
pub fn map_status(status: u32, vendor_err: u32, node: NodeId) -> Result<(), FabricError> {
    let device = DeviceStatus {
        code: status,
        name: status_name(status),
        vendor: vendor_err,
    };
    let transport = |what: &str| {
        tracing::debug!(%node, status = %device, "{what}");
        Err(FabricError::Transport(TransportError::Device(device)))
    };
    let remote = |what: &str| {
        tracing::debug!(%node, status = %device, "{what}");
        Err(FabricError::RemoteAccess {
            node,
            status: device,
        })
    };
    match status {
        S::IBV_WC_SUCCESS => Ok(()),
        S::IBV_WC_RETRY_EXC_ERR => Err(FabricError::NodeDown(node)),
        S::IBV_WC_RESP_TIMEOUT_ERR => Err(FabricError::Timeout),
        S::IBV_WC_REM_ACCESS_ERR => {
            remote("the remote NIC refused the rkey, the range or the access rights")
        }
        S::IBV_WC_REM_INV_REQ_ERR => {
            remote("the remote NIC rejected the request (misaligned atomic, length beyond the region, or an operation the QP does not allow)")
        }
        S::IBV_WC_REM_OP_ERR => remote("the remote NIC could not complete the operation"),
        S::IBV_WC_REM_INV_RD_REQ_ERR => remote("invalid RDMA READ request"),
        S::IBV_WC_REM_ABORT_ERR => remote("the remote side aborted the operation"),
        // Flushed: the queue pair is in the error state after an earlier
        // failure (it is reconnected when drained); the request never ran.
        S::IBV_WC_WR_FLUSH_ERR => Err(FabricError::Transport(TransportError::Flushed)),
        S::IBV_WC_RNR_RETRY_EXC_ERR => {
            transport("receiver not ready retries exceeded (no receive buffer posted)")
        }
        S::IBV_WC_LOC_LEN_ERR => transport("local length error (the buffer is shorter than the transfer)"),
        S::IBV_WC_LOC_QP_OP_ERR => transport("local queue pair operation error (malformed request)"),
        S::IBV_WC_LOC_EEC_OP_ERR => transport("local EE context operation error"),
        S::IBV_WC_LOC_PROT_ERR => transport("local protection error (buffer not registered or wrong lkey)"),
        S::IBV_WC_MW_BIND_ERR => transport("memory window bind error"),
        S::IBV_WC_BAD_RESP_ERR => transport("unexpected response from the remote NIC"),
        S::IBV_WC_LOC_ACCESS_ERR => transport("local access error (buffer lacks LOCAL_WRITE)"),
        S::IBV_WC_LOC_RDD_VIOL_ERR => transport("local RDD violation"),
        S::IBV_WC_INV_EECN_ERR => transport("invalid EE context number"),
        S::IBV_WC_INV_EEC_STATE_ERR => transport("invalid EE context state"),
        S::IBV_WC_FATAL_ERR => transport("fatal device error"),
        S::IBV_WC_GENERAL_ERR => transport("general error"),
        S::IBV_WC_TM_ERR | S::IBV_WC_TM_RNDV_INCOMPLETE => transport("tag matching error"),
        _ => transport("unknown completion status"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const N: NodeId = NodeId(3);

    #[test]
    fn success_is_ok_and_only_success() {
        assert_eq!(map_status(S::IBV_WC_SUCCESS, 0, N), Ok(()));
        for s in ALL_STATUSES
            .iter()
            .copied()
            .filter(|&s| s != S::IBV_WC_SUCCESS)
        {
            assert!(map_status(s, 0, N).is_err(), "{}", status_name(s));
        }
    }

    #[test]
    fn every_status_has_a_name_and_the_list_is_complete() {
        for (i, s) in ALL_STATUSES.iter().enumerate() {
            assert_eq!(*s as usize, i, "numeric order");
            assert!(status_name(*s).starts_with("IBV_WC_"));
        }
        assert_eq!(status_name(999), "unknown ibv_wc_status");
    }

    #[test]
    fn each_status_maps_to_its_error_kind() {
        use FabricError as F;
        for s in ALL_STATUSES {
            let got = map_status(s, 0x51, N);
            match s {
                S::IBV_WC_SUCCESS => assert_eq!(got, Ok(())),
                S::IBV_WC_RETRY_EXC_ERR => assert_eq!(got, Err(F::NodeDown(N))),
                S::IBV_WC_RESP_TIMEOUT_ERR => assert_eq!(got, Err(F::Timeout)),
                S::IBV_WC_REM_ACCESS_ERR
                | S::IBV_WC_REM_INV_REQ_ERR
                | S::IBV_WC_REM_OP_ERR
                | S::IBV_WC_REM_INV_RD_REQ_ERR
                | S::IBV_WC_REM_ABORT_ERR => match got {
                    Err(F::RemoteAccess { node, status }) => {
                        assert_eq!(node, N);
                        assert_eq!((status.code, status.vendor), (s, 0x51));
                        assert_eq!(status.name, status_name(s));
                    }
                    other => panic!("{}: {other:?}", status_name(s)),
                },
                S::IBV_WC_WR_FLUSH_ERR => {
                    assert_eq!(got, Err(F::Transport(TransportError::Flushed)))
                }
                _ => match got {
                    Err(F::Transport(TransportError::Device(status))) => {
                        assert_eq!((status.code, status.vendor), (s, 0x51));
                        assert_eq!(status.name, status_name(s));
                    }
                    other => panic!("{}: {other:?}", status_name(s)),
                },
            }
        }
    }

    #[test]
    fn flush_says_flushed_and_unknown_is_transport() {
        assert_eq!(
            map_status(S::IBV_WC_WR_FLUSH_ERR, 0, N),
            Err(FabricError::Transport(TransportError::Flushed))
        );
        assert!(matches!(
            map_status(77, 0, N),
            Err(FabricError::Transport(TransportError::Device(d))) if d.name == "unknown ibv_wc_status"
        ));
    }
}

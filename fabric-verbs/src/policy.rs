//! Pure policy: memory access rights, queue-pair sizing and fencing.
//!
//! Everything here is a function of plain values (device limits, the cluster
//! file's tuning, what is in flight), so it is unit tested without a device.

use rdma_sys::ibv_access_flags;

/// The memory a node or endpoint registers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegionKind {
    /// The node's slice of the index table: other NICs READ and CAS it.
    Index,
    /// The node's data table: other NICs READ it, WRITE recycle words
    /// (`mark_recycle` of a remote entry) and CAS entry state words (commit
    /// and abort are serialised by the NIC, `cas_state`).
    Data,
    /// An endpoint's staging buffer: READ targets, WRITE sources, CAS results.
    /// Only the local NIC touches it.
    Staging,
    /// The 8-byte word of the start-up byte-order probe (loopback CAS and READ).
    Probe,
}

/// The access flags of a region: the least the protocol needs.
///
/// Never `IBV_ACCESS_RELAXED_ORDERING`: the protocol relies on a READ seeing
/// the data of a completed WRITE or CAS in order.
pub fn access_flags(kind: RegionKind) -> ibv_access_flags {
    use ibv_access_flags as A;
    match kind {
        RegionKind::Index => {
            A::IBV_ACCESS_LOCAL_WRITE | A::IBV_ACCESS_REMOTE_READ | A::IBV_ACCESS_REMOTE_ATOMIC
        }
        // Memory windows (clients without storage) are bound over it.
        RegionKind::Data => {
            A::IBV_ACCESS_LOCAL_WRITE
                | A::IBV_ACCESS_REMOTE_READ
                | A::IBV_ACCESS_REMOTE_WRITE
                | A::IBV_ACCESS_REMOTE_ATOMIC
                | A::IBV_ACCESS_MW_BIND
        }
        RegionKind::Staging => A::IBV_ACCESS_LOCAL_WRITE,
        RegionKind::Probe => {
            A::IBV_ACCESS_LOCAL_WRITE | A::IBV_ACCESS_REMOTE_READ | A::IBV_ACCESS_REMOTE_ATOMIC
        }
    }
}

/// The device limits the backend sizes itself by (from `ibv_query_device`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceLimits {
    /// Largest work-request count of a queue.
    pub max_qp_wr: u32,
    /// Largest completion-queue size.
    pub max_cqe: u32,
    /// Outstanding READs/atomics a QP can serve as responder.
    pub max_qp_rd_atom: u32,
    /// Outstanding READs/atomics a QP can issue as initiator.
    pub max_qp_init_rd_atom: u32,
    /// Largest message.
    pub max_msg_sz: u32,
}

/// The queue-pair and completion-queue sizes one endpoint uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpPlan {
    /// Send-queue depth of each QP.
    pub max_send_wr: u32,
    /// Receive-queue depth (the protocol posts no receives; providers want 1).
    pub max_recv_wr: u32,
    /// Scatter/gather entries per work request (one: the staging slice).
    pub max_sge: u32,
    /// Outstanding READs/atomics this side issues (`max_rd_atomic`).
    pub initiator_depth: u8,
    /// Outstanding READs/atomics this side serves (`max_dest_rd_atomic`).
    pub responder_resources: u8,
    /// Completion-queue size of an endpoint: every QP's send queue can be full.
    pub cq_entries: u32,
    /// Transport retries before `IBV_WC_RETRY_EXC_ERR` (at most 6: soft-RoCE
    /// treats 7 as infinite).
    pub retry_count: u8,
    /// RNR retries (no receives are used, so never hit; kept finite).
    pub rnr_retry_count: u8,
    /// Inline data asked of each QP: WRITEs up to what the device grants go
    /// `IBV_SEND_INLINE` (0: none).
    pub max_inline_data: u32,
}

/// Sizes an endpoint's QPs for `nodes` peers (including itself) from the
/// device limits and the wanted depth and READ/atomic concurrency.
pub fn plan_qp(
    limits: &DeviceLimits,
    nodes: u16,
    send_queue_depth: u32,
    max_rd_atomic: u8,
) -> QpPlan {
    let max_send_wr = send_queue_depth.clamp(1, limits.max_qp_wr.max(1));
    let cap = |dev: u32| -> u8 { u32::from(max_rd_atomic).min(dev).clamp(1, 255) as u8 };
    let qps = u32::from(nodes.max(1));
    let cq_entries = max_send_wr
        .saturating_mul(qps)
        .saturating_add(16)
        .min(limits.max_cqe.max(1));
    QpPlan {
        max_send_wr,
        max_recv_wr: 1,
        max_sge: 1,
        initiator_depth: cap(limits.max_qp_init_rd_atom),
        responder_resources: cap(limits.max_qp_rd_atom),
        cq_entries,
        retry_count: crate::cluster::MAX_RETRY_COUNT,
        rnr_retry_count: crate::cluster::MAX_RETRY_COUNT,
        max_inline_data: 0,
    }
}

/// The per-QP send-queue depth that keeps the endpoint's CQ from overflowing
/// when the device caps the CQ below `plan.max_send_wr * qps`.
pub fn effective_send_depth(plan: &QpPlan, qps: u16) -> u32 {
    (plan.cq_entries / u32::from(qps.max(1))).clamp(1, plan.max_send_wr)
}

/// The longest run of unsignaled work requests an endpoint posts on one
/// queue pair before it signals one (`Endpoint::post_unsignaled`): a send
/// queue slot is only reclaimed by a signaled completion (of its own request
/// or a later one), so every k-th request is signaled. A quarter of the
/// send queue, at least 1 and at most 64: the queue never fills with
/// unreclaimable requests, and a reclaim frees at most 64 requests at once.
pub fn signal_every(send_depth: u32) -> u32 {
    (send_depth / 4).clamp(1, 64)
}

/// The `rdma_accept` parameters `(responder_resources, initiator_depth)`
/// answering a connect request: never promise more than the requester can use
/// or the device allows.
///
/// The arguments are the connect-request event's fields *as librdmacm reports
/// them*, which are already from the recipient's point of view
/// (`rdma_get_cm_event(3)`): `ev_responder_resources` is the requester's
/// initiator depth (how many READs/atomics it will have outstanding towards
/// us) and `ev_initiator_depth` is the requester's responder resources. Our
/// responder resources become the requester's `max_rd_atomic` at RTS, so they
/// must not exceed its initiator depth (a larger value can exceed its device's
/// `max_qp_init_rd_atom` and fail its transition to RTS).
pub fn accept_depths(
    plan: &QpPlan,
    ev_responder_resources: u8,
    ev_initiator_depth: u8,
) -> (u8, u8) {
    let responder = plan.responder_resources.min(ev_responder_resources).max(1);
    let initiator = plan.initiator_depth.min(ev_initiator_depth);
    (responder, initiator)
}

/// What kinds of work request are outstanding (posted, not completed) on one QP.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Outstanding {
    /// RDMA READs in flight.
    pub reads: u32,
    /// RDMA WRITEs in flight.
    pub writes: u32,
    /// Compare-and-swaps in flight.
    pub atomics: u32,
}

/// The NIC operation a work request performs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NicOp {
    /// RDMA READ.
    Read,
    /// RDMA WRITE.
    Write,
    /// 64-bit compare-and-swap.
    Cas,
    /// A memory window's bind (`ibv_bind_mw` on the loopback queue pair: a
    /// local operation of the send queue, touching no remote memory).
    Bind,
}

/// Whether a work request needs `IBV_SEND_FENCE` (processed only after all
/// earlier READs and atomics of the QP have completed).
///
/// - A WRITE or CAS posted while a READ is outstanding on the same QP: the
///   responder may stream the READ's data after executing the later request,
///   so without the fence the READ could return bytes the later request wrote.
/// - A READ posted while a CAS is outstanding: the READ must not pass the CAS
///   (it is meant to observe the word after it).
///
/// Otherwise no fence: independent READs overlap, and WRITE-then-READ is
/// ordered by the responder. The protocol's rounds complete before the next
/// round is posted, so a fence rarely costs anything.
pub fn needs_fence(op: NicOp, outstanding: Outstanding) -> bool {
    match op {
        NicOp::Read => outstanding.atomics > 0,
        NicOp::Write | NicOp::Cas => outstanding.reads > 0,
        NicOp::Bind => false,
    }
}

/// What the cluster's shape costs one node in queue pairs, file descriptors
/// and threads with the endpoints' connection scheme: every endpoint opens
/// one RC queue pair to every node, its own included, through the node's
/// one dialer per peer (`dialer`: a thread and an `rdma_cm` event
/// channel each, shared by the endpoints), and keeps an event channel of
/// its own for its connections; every node accepts one queue pair from
/// every endpoint of every node, through one listener channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionBudget {
    /// Nodes in the cluster.
    pub nodes: u64,
    /// Endpoints a node opens (its clients; a server-driven system's or
    /// Cell's server threads add theirs).
    pub endpoints: u64,
    /// The process's open-file limit (`RLIMIT_NOFILE`), if known.
    pub fd_limit: Option<u64>,
}

impl ConnectionBudget {
    /// Queue pairs this node's endpoints open (requester side).
    pub fn requester_qps(&self) -> u64 {
        self.endpoints.saturating_mul(self.nodes)
    }

    /// Queue pairs this node accepts from every endpoint of every node
    /// (responder side).
    pub fn responder_qps(&self) -> u64 {
        self.nodes.saturating_mul(self.endpoints)
    }

    /// Queue pairs on this node's NIC.
    pub fn qps(&self) -> u64 {
        self.requester_qps().saturating_add(self.responder_qps())
    }

    /// `rdma_cm` event channels (file descriptors) of one process hosting
    /// the node: one per peer's dialer (shared by the endpoints:
    /// `dialer`) and one per endpoint, plus the listener's and the
    /// clock check's.
    pub fn cm_fds(&self) -> u64 {
        self.nodes.saturating_add(self.endpoints).saturating_add(2)
    }

    /// Dialer threads of one process hosting the node (one per peer).
    pub fn dial_threads(&self) -> u64 {
        self.nodes
    }

    /// Whether the event channels alone leave fewer than 64 descriptors of
    /// the open-file limit for everything else (sockets, logs, the device).
    pub fn fds_short(&self) -> bool {
        self.fd_limit
            .is_some_and(|l| self.cm_fds().saturating_add(64) > l)
    }
}

impl std::fmt::Display for ConnectionBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "connections: {} endpoints x {} nodes: {} RC queue pairs on this NIC ({} requester, {} responder), {} rdma_cm file descriptors and {} dialler threads",
            self.endpoints,
            self.nodes,
            self.qps(),
            self.requester_qps(),
            self.responder_qps(),
            self.cm_fds(),
            self.dial_threads()
        )?;
        match self.fd_limit {
            Some(l) if self.fds_short() => write!(
                f,
                " (open-file limit {l}: too low, raise `ulimit -n`, docs/deploy.md)"
            ),
            Some(l) => write!(f, " (open-file limit {l})"),
            None => Ok(()),
        }
    }
}

/// The process's open-file limit (`RLIMIT_NOFILE`, soft), if it can be read.
pub fn open_file_limit() -> Option<u64> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } == 0;
    ok.then_some(r.rlim_cur)
}

/// The file descriptors this process has open now (`/proc/self/fd`), if
/// it can be read.
pub fn open_fds() -> Option<u64> {
    Some(std::fs::read_dir("/proc/self/fd").ok()?.count() as u64)
}

/// The RDMA queue pairs this process holds now, as the kernel lists them
/// (`rdma -j resource show qp`, iproute2); `None` without the `rdma` tool.
pub fn process_qps() -> Option<u64> {
    let out = std::process::Command::new("rdma")
        .args(["-j", "resource", "show", "qp"])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| count_pid_entries(&String::from_utf8_lossy(&out.stdout), std::process::id()))
}

/// The entries of `rdma -j resource show ...`'s JSON that name process
/// `pid`.
fn count_pid_entries(json: &str, pid: u32) -> u64 {
    let key = format!("\"pid\":{pid}");
    json.match_indices(&key)
        .filter(|(i, _)| {
            // `"pid":12` is not `"pid":123`.
            !json[i + key.len()..].starts_with(|c: char| c.is_ascii_digit())
        })
        .count() as u64
}

/// `base` shortened by a random part of up to half of it (`draw` is a
/// random 64-bit value): re-dials of many endpoints rejected at once (a
/// node's acceptor meeting every dialler after a restart) spread over half
/// an interval instead of retrying in lock-step.
pub fn jittered(base: std::time::Duration, draw: u64) -> std::time::Duration {
    let half = base / 2;
    // draw / 2^64 of the half, in 1/1024 steps.
    half + half.mul_f64((draw >> 54) as f64 / 1024.0)
}

/// A random 64-bit value for [`jittered`] (std's per-process random hash
/// keys, advanced on every call; no cryptographic quality needed).
pub fn jitter_draw() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish()
}

/// What a request posted by the caller at `accepted`, with a window of
/// `within` (the landing deadline of a mutation, the READ deadline of a
/// READ), comes to when the endpoint could hand it to the NIC at `now`.
///
/// The window runs from the caller's post, not from `ibv_post_send`: a
/// request that waited in the endpoint's software backlog (a full send
/// queue, or a client thread descheduled between its post and its next
/// poll) used part of it there, and A2 is counted from the protocol's post.
/// One whose window passed while it waited is never handed to the NIC
/// (so it never executes) and completes with an error instead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BacklogVerdict {
    /// Post it; it must complete by this instant.
    Post {
        /// Its deadline.
        deadline: std::time::Instant,
    },
    /// Its window passed in the backlog: complete it with an error, unposted.
    Expired,
}

/// See [`BacklogVerdict`].
pub fn backlog_verdict(
    accepted: std::time::Instant,
    within: std::time::Duration,
    now: std::time::Instant,
) -> BacklogVerdict {
    let deadline = accepted.checked_add(within).unwrap_or(accepted);
    if now >= deadline {
        BacklogVerdict::Expired
    } else {
        BacklogVerdict::Post { deadline }
    }
}

/// The listener's backlog for a cluster of `nodes`: each node dials
/// through one dialer per peer ([`crate::dialer`]), so at most `nodes`
/// connect requests (and the clock checks' probes) reach a listener at
/// once; twice that, and never below 64.
pub fn listen_backlog(nodes: u16) -> i32 {
    (i32::from(nodes) * 2).max(64)
}

/// What a peer's dialer does with a dial an endpoint queued
/// ([`crate::dialer`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DialVerdict {
    /// Dial.
    Dial,
    /// An earlier dial to the same peer failed (for a passing reason) after
    /// this one was queued: fail it at once with that reason, rather than
    /// spend another whole timeout on a peer just found down.
    FailAtOnce,
}

/// See [`DialVerdict`]: the dial was queued at `queued`; the last dial to
/// the peer failed at `last_failure` (`None`: it succeeded, or none ran).
pub fn dial_verdict(
    queued: std::time::Instant,
    last_failure: Option<std::time::Instant>,
) -> DialVerdict {
    match last_failure {
        Some(failed) if queued <= failed => DialVerdict::FailAtOnce,
        _ => DialVerdict::Dial,
    }
}

/// A watched queue pair's published deadline when none of its caller's
/// requests is outstanding ([`watch_verdict`]).
pub const NO_DEADLINE: u64 = u64::MAX;

/// What the deadline watchdog does about one queue pair
/// ([`crate::watchdog`]), times in nanoseconds since its epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatchVerdict {
    /// Nothing of the caller's is outstanding on it.
    Idle,
    /// Its earliest deadline is still ahead: look again then.
    Wait {
        /// The deadline.
        until: u64,
    },
    /// Its earliest deadline passed: move it to the error state now.
    Trip {
        /// How long ago the deadline passed (the watchdog's own lateness).
        late_by: u64,
    },
}

/// See [`WatchVerdict`]: `deadline` is the earliest deadline of the
/// caller's requests outstanding on the queue pair ([`NO_DEADLINE`] for
/// none). A deadline is due at its instant, not after it, as the endpoint's
/// own check ([`backlog_verdict`]) counts it.
pub fn watch_verdict(deadline: u64, now: u64) -> WatchVerdict {
    if deadline == NO_DEADLINE {
        WatchVerdict::Idle
    } else if now >= deadline {
        WatchVerdict::Trip {
            late_by: now - deadline,
        }
    } else {
        WatchVerdict::Wait { until: deadline }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernels_queue_pairs_are_counted_for_this_process_only() {
        let json = r#"[{"ifindex":3,"ifname":"rxe0","port":1,"lqpn":17,"type":"RC","state":"RTS","pid":123,"comm":"nessie"},{"ifindex":3,"ifname":"rxe0","port":1,"lqpn":18,"type":"RC","state":"RTS","pid":12,"comm":"x"},{"lqpn":19,"pid":123}]"#;
        assert_eq!(count_pid_entries(json, 123), 2);
        assert_eq!(count_pid_entries(json, 12), 1);
        assert_eq!(count_pid_entries(json, 1), 0);
        assert!(open_fds().is_some_and(|n| n >= 3));
    }
    use ibv_access_flags as A;

    #[test]
    fn jitter_spreads_a_wait_over_its_second_half() {
        use std::time::Duration;
        let base = Duration::from_millis(200);
        assert_eq!(jittered(base, 0), Duration::from_millis(100));
        assert!(jittered(base, u64::MAX) < base);
        assert!(jittered(base, u64::MAX) > Duration::from_millis(199));
        let draws: Vec<Duration> = (0..64).map(|_| jittered(base, jitter_draw())).collect();
        assert!(draws.iter().all(|d| *d >= base / 2 && *d < base));
        let distinct: std::collections::BTreeSet<_> = draws.iter().collect();
        assert!(distinct.len() > 32, "not in lock-step: {distinct:?}");
    }

    #[test]
    fn the_connection_budget_of_a_hundred_nodes_fits_the_default_fd_limit() {
        // The issue's example: 100 nodes x 16 endpoints.
        let b = ConnectionBudget {
            nodes: 100,
            endpoints: 16,
            fd_limit: Some(1_024),
        };
        assert_eq!(
            (b.requester_qps(), b.responder_qps(), b.qps()),
            (1_600, 1_600, 3_200)
        );
        // One dialer per peer (shared by the endpoints), one channel per
        // endpoint, the listener's and the clock check's: 118, not the
        // 1,617 of a dialer per endpoint and peer.
        assert_eq!(b.cm_fds(), 100 + 16 + 2);
        assert_eq!(b.dial_threads(), 100);
        assert!(!b.fds_short());
        assert!(!b.to_string().contains("too low"), "{b}");
        // The default limit is met only past 900 nodes now.
        let at = |nodes| ConnectionBudget { nodes, ..b };
        assert!(!at(900).fds_short() && at(950).fds_short());
        assert!(at(950).to_string().contains("too low"));
        let unknown = ConnectionBudget {
            fd_limit: None,
            ..b
        };
        assert!(!unknown.fds_short() && !unknown.to_string().contains("limit"));
        assert!(open_file_limit().is_some_and(|l| l > 0));
    }

    #[test]
    fn a_dial_queued_before_a_failure_to_the_same_peer_fails_at_once() {
        use std::time::{Duration, Instant};
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        assert_eq!(dial_verdict(t0, None), DialVerdict::Dial);
        // Queued at t0, the dial before it failed at t0 + 2 s: fail at once.
        assert_eq!(
            dial_verdict(t0, Some(t0 + ms(2000))),
            DialVerdict::FailAtOnce
        );
        assert_eq!(dial_verdict(t0, Some(t0)), DialVerdict::FailAtOnce);
        // Queued after the failure: the peer may be back, dial.
        assert_eq!(dial_verdict(t0 + ms(1), Some(t0)), DialVerdict::Dial);
    }

    #[test]
    fn a_backlogged_request_keeps_the_window_of_its_post_and_expires_unposted() {
        use std::time::{Duration, Instant};
        let t0 = Instant::now();
        let w = Duration::from_millis(10);
        // Handed to the NIC at once: the whole window.
        assert_eq!(
            backlog_verdict(t0, w, t0),
            BacklogVerdict::Post { deadline: t0 + w }
        );
        // After 7 ms in the backlog: 3 ms left, not a fresh 10.
        assert_eq!(
            backlog_verdict(t0, w, t0 + Duration::from_millis(7)),
            BacklogVerdict::Post { deadline: t0 + w }
        );
        // At or past the end of its window: never posted.
        assert_eq!(backlog_verdict(t0, w, t0 + w), BacklogVerdict::Expired);
        assert_eq!(
            backlog_verdict(t0, w, t0 + Duration::from_secs(1)),
            BacklogVerdict::Expired
        );
    }

    fn has(f: ibv_access_flags, bit: ibv_access_flags) -> bool {
        f.0 & bit.0 != 0
    }

    #[test]
    fn regions_get_least_privilege_and_never_relaxed_ordering() {
        let idx = access_flags(RegionKind::Index);
        assert_eq!(
            idx.0,
            (A::IBV_ACCESS_LOCAL_WRITE | A::IBV_ACCESS_REMOTE_READ | A::IBV_ACCESS_REMOTE_ATOMIC).0
        );
        assert!(
            !has(idx, A::IBV_ACCESS_REMOTE_WRITE),
            "nobody WRITEs index entries"
        );
        let data = access_flags(RegionKind::Data);
        for bit in [
            A::IBV_ACCESS_LOCAL_WRITE,
            A::IBV_ACCESS_REMOTE_READ,
            A::IBV_ACCESS_REMOTE_WRITE,
            A::IBV_ACCESS_REMOTE_ATOMIC,
            A::IBV_ACCESS_MW_BIND,
        ] {
            assert!(has(data, bit));
        }
        assert_eq!(
            access_flags(RegionKind::Staging).0,
            A::IBV_ACCESS_LOCAL_WRITE.0
        );
        assert!(!has(
            access_flags(RegionKind::Probe),
            A::IBV_ACCESS_REMOTE_WRITE
        ));
        for k in [
            RegionKind::Index,
            RegionKind::Data,
            RegionKind::Staging,
            RegionKind::Probe,
        ] {
            let f = access_flags(k);
            for bad in [
                A::IBV_ACCESS_RELAXED_ORDERING,
                A::IBV_ACCESS_ZERO_BASED,
                A::IBV_ACCESS_ON_DEMAND,
            ] {
                assert!(!has(f, bad), "{k:?}");
            }
            // Windows are bound over the data region alone.
            assert_eq!(
                has(f, A::IBV_ACCESS_MW_BIND),
                k == RegionKind::Data,
                "{k:?}"
            );
        }
    }

    fn limits() -> DeviceLimits {
        DeviceLimits {
            max_qp_wr: 16_384,
            max_cqe: 4_194_303,
            max_qp_rd_atom: 16,
            max_qp_init_rd_atom: 16,
            max_msg_sz: 1 << 30,
        }
    }

    #[test]
    fn qp_plan_follows_the_config_within_device_limits() {
        let p = plan_qp(&limits(), 3, 256, 8);
        assert_eq!(p.max_send_wr, 256);
        assert_eq!((p.max_recv_wr, p.max_sge), (1, 1));
        assert_eq!((p.initiator_depth, p.responder_resources), (8, 8));
        assert_eq!(p.cq_entries, 256 * 3 + 16);
        assert_eq!(
            (p.retry_count, p.rnr_retry_count),
            (6, 6),
            "7 is infinite on rxe"
        );
        assert_eq!(effective_send_depth(&p, 3), 256);
    }

    #[test]
    fn qp_plan_is_capped_by_the_device() {
        let small = DeviceLimits {
            max_qp_wr: 64,
            max_cqe: 100,
            max_qp_rd_atom: 4,
            max_qp_init_rd_atom: 2,
            max_msg_sz: 4096,
        };
        let p = plan_qp(&small, 4, 1024, 16);
        assert_eq!(p.max_send_wr, 64);
        assert_eq!((p.initiator_depth, p.responder_resources), (2, 4));
        assert_eq!(p.cq_entries, 100);
        assert_eq!(effective_send_depth(&p, 4), 25, "4 full queues fit the CQ");
        // Degenerate limits still give a usable plan.
        let zero = DeviceLimits {
            max_qp_wr: 0,
            max_cqe: 0,
            max_qp_rd_atom: 0,
            max_qp_init_rd_atom: 0,
            max_msg_sz: 0,
        };
        let p = plan_qp(&zero, 0, 0, 0);
        assert!(p.max_send_wr >= 1 && p.cq_entries >= 1 && p.initiator_depth >= 1);
    }

    #[test]
    fn accept_never_promises_more_than_asked() {
        let p = plan_qp(&limits(), 2, 128, 16);
        assert_eq!(accept_depths(&p, 4, 8), (4, 8));
        assert_eq!(accept_depths(&p, 32, 32), (16, 16));
        assert_eq!(accept_depths(&p, 0, 0), (1, 0));
    }

    #[test]
    fn accept_reads_the_request_from_the_recipients_point_of_view() {
        // A requester whose device issues at most 2 READs/atomics but serves
        // 16: it connects with initiator_depth 2, responder_resources 16, and
        // librdmacm reports the request to us swapped (responder_resources 2,
        // initiator_depth 16). Our responder resources become its
        // max_rd_atomic, so they must be 2, not 16.
        let small_initiator = DeviceLimits {
            max_qp_init_rd_atom: 2,
            ..limits()
        };
        let requester = plan_qp(&small_initiator, 2, 128, 16);
        assert_eq!(
            (requester.initiator_depth, requester.responder_resources),
            (2, 16)
        );
        let (ev_responder_resources, ev_initiator_depth) =
            (requester.initiator_depth, requester.responder_resources);
        let us = plan_qp(&limits(), 2, 128, 16);
        let (responder, initiator) = accept_depths(&us, ev_responder_resources, ev_initiator_depth);
        assert_eq!(responder, 2, "at most the requester's initiator depth");
        assert!(responder <= requester.initiator_depth);
        assert!(initiator <= requester.responder_resources);
        assert_eq!(initiator, 16);
    }

    #[test]
    fn fences_only_where_an_earlier_operation_must_not_be_passed() {
        let none = Outstanding::default();
        let cas = Outstanding { atomics: 1, ..none };
        let read = Outstanding { reads: 2, ..none };
        let write = Outstanding { writes: 3, ..none };
        for op in [NicOp::Read, NicOp::Write, NicOp::Cas] {
            assert!(!needs_fence(op, none), "{op:?} on an idle QP");
            assert!(!needs_fence(op, write), "{op:?} after a WRITE");
        }
        assert!(
            needs_fence(NicOp::Read, cas),
            "a READ must not pass an earlier CAS"
        );
        assert!(!needs_fence(NicOp::Read, read), "independent READs overlap");
        assert!(
            needs_fence(NicOp::Write, read),
            "a WRITE must not overtake a READ"
        );
        assert!(
            needs_fence(NicOp::Cas, read),
            "a CAS must not overtake a READ"
        );
        assert!(
            !needs_fence(NicOp::Cas, cas),
            "atomics are executed in order"
        );
        assert!(!needs_fence(NicOp::Write, cas));
    }

    #[test]
    fn every_run_of_unsignaled_requests_fits_a_quarter_of_the_send_queue() {
        assert_eq!(signal_every(256), 64);
        assert_eq!(signal_every(4096), 64);
        assert_eq!(signal_every(16), 4);
        assert_eq!(signal_every(3), 1);
        assert_eq!(signal_every(0), 1);
        for depth in 1..600 {
            let k = signal_every(depth);
            assert!(k >= 1 && (k <= depth / 4 || k == 1), "{depth}: {k}");
        }
    }

    #[test]
    fn the_watchdog_trips_a_queue_pair_at_its_deadline_never_before() {
        assert_eq!(watch_verdict(NO_DEADLINE, 0), WatchVerdict::Idle);
        assert_eq!(watch_verdict(NO_DEADLINE, u64::MAX - 1), WatchVerdict::Idle);
        assert_eq!(watch_verdict(100, 99), WatchVerdict::Wait { until: 100 });
        assert_eq!(watch_verdict(100, 0), WatchVerdict::Wait { until: 100 });
        assert_eq!(watch_verdict(100, 100), WatchVerdict::Trip { late_by: 0 });
        assert_eq!(watch_verdict(100, 175), WatchVerdict::Trip { late_by: 75 });
    }

    #[test]
    fn the_listener_has_room_for_every_nodes_dialer() {
        assert_eq!(listen_backlog(3), 64);
        assert_eq!(listen_backlog(100), 200);
        assert_eq!(listen_backlog(u16::MAX), 131_070);
    }
}

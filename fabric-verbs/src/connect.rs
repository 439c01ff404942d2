//! The active side of connection set-up: resolve, create the queue pair,
//! connect with a [`Hello`], receive the peer's [`Welcome`].
//!
//! Scheme: every endpoint dials every node of the cluster, its own node
//! included (the loopback queue pair); each node's listener only accepts
//! ([`crate::node`]). Dialling retries peers that are not up yet or refuse
//! for a passing reason until its timeout, so nodes may start in any order;
//! a permanent refusal (another cluster file, version or node, a clock off
//! by more than `clock_skew_ms`, a wrong address) ends it at once
//! ([`VerbsError::is_permanent`]).
//!
//! Each dial sets the connection's type of service and ACK timeout
//! (`rdma_set_option`) and retry count (`rdma_conn_param`), and checks the
//! peer's clock: the [`Hello`] carries our clock, the [`Welcome`] the peer's,
//! and the round trip bounds the estimate ([`crate::wire::clock_offset`]).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdma_sys::{ibv_post_send, ibv_sge, rdma_cm_event_type as Ev, rdma_cm_id};

use crate::clock::NodeClock;
use crate::cluster::SkewAction;
use crate::error::VerbsError;
use crate::ffi::cm::{event_name, CmEvent, CmId, EventChannel};
use crate::ffi::cq::{Cq, Wc};
use crate::ffi::memory::Pd;
use crate::policy::{jitter_draw, jittered, QpPlan};
use crate::wire::{check_fingerprint, clock_offset, exceeds_skew, Hello, Reject, Welcome};
use crate::wr::SendWr;

/// Everything needed to dial one node.
pub struct Dial<'a> {
    /// The endpoint's event channel.
    pub channel: &'a Arc<EventChannel>,
    /// The node's protection domain.
    pub pd: &'a Arc<Pd>,
    /// The endpoint's completion queue.
    pub cq: &'a Arc<Cq>,
    /// QP sizing.
    pub plan: &'a QpPlan,
    /// Send-queue depth.
    pub send_depth: u32,
    /// Our node's address (port ignored): pins the device.
    pub src: SocketAddr,
    /// The peer's listener.
    pub dst: SocketAddr,
    /// The configured port of our device.
    pub port: u8,
    /// What we tell the peer.
    pub hello: Hello,
    /// Our cluster fingerprint.
    pub fingerprint: u64,
    /// How long to keep retrying.
    pub timeout: Duration,
    /// Our node's clock (stamps the hello; the clock check).
    pub clock: NodeClock,
    /// The largest clock difference allowed and what to do beyond it
    /// (`None`: no check, e.g. the loopback probe).
    pub skew: Option<(Duration, SkewAction)>,
    /// Type of service of the connection (`None`: the host's default, not
    /// set).
    pub tos: Option<u8>,
    /// ACK timeout exponent of the queue pair.
    pub ack_timeout: u8,
}

/// A connected queue pair and what the peer advertised.
pub struct Dialed {
    /// The id owning the QP.
    pub id: CmId,
    /// The peer's regions.
    pub welcome: Welcome,
    /// The peer's clock minus ours and the estimate's uncertainty, in ns
    /// ([`crate::wire::clock_offset`] over the handshake).
    pub clock: (i64, u64),
}

fn peer_name(d: &Dial<'_>) -> String {
    format!("node{} at {}", d.hello.to, d.dst)
}

/// Waits for the next event of `id` on `channel` (events of other ids,
/// e.g. a late DISCONNECTED of an earlier connection, are skipped).
pub fn wait_event(
    channel: &EventChannel,
    id: *mut rdma_cm_id,
    expected: &'static str,
    peer: &str,
    deadline: Instant,
) -> Result<CmEvent, VerbsError> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match channel.next(left)? {
            Some(ev) if ev.id == id => return Ok(ev),
            Some(_) => continue,
            None => {
                return Err(VerbsError::Timeout {
                    what: format!("{expected} from {peer}"),
                    waited_ms: 0,
                })
            }
        }
    }
}

fn expect(ev: &CmEvent, kind: u32, expected: &'static str, peer: &str) -> Result<(), VerbsError> {
    if ev.kind == kind {
        Ok(())
    } else if ev.kind == Ev::RDMA_CM_EVENT_REJECTED {
        Err(VerbsError::Rejected {
            peer: peer.to_string(),
            status: ev.status,
            reject: Reject::decode(&ev.private_data),
        })
    } else {
        Err(VerbsError::CmEvent {
            expected,
            got: event_name(ev.kind),
            status: ev.status,
            peer: peer.to_string(),
        })
    }
}

fn dial_once(d: &Dial<'_>, step: Duration) -> Result<Dialed, VerbsError> {
    let peer = peer_name(d);
    let deadline = Instant::now() + step;
    let mut id = CmId::new(d.channel, peer.clone())?;
    let src = SocketAddr::new(d.src.ip(), 0);
    id.resolve_addr(src, d.dst, step)?;
    let ev = wait_event(d.channel, id.raw(), "ADDR_RESOLVED", &peer, deadline)?;
    expect(&ev, Ev::RDMA_CM_EVENT_ADDR_RESOLVED, "ADDR_RESOLVED", &peer)?;
    let (verbs, port) = id.device();
    if verbs != d.pd.context().raw() || port != d.port {
        let got = if verbs.is_null() {
            "none".to_string()
        } else {
            // SAFETY: a resolved id's context and device are valid; the name is copied.
            unsafe { std::ffi::CStr::from_ptr(rdma_sys::ibv_get_device_name((*verbs).device)) }
                .to_string_lossy()
                .into_owned()
        };
        return Err(VerbsError::DeviceMismatch {
            address: d.src.ip().to_string(),
            expected: d.pd.context().name().to_string(),
            expected_port: d.port,
            got,
            got_port: port,
        });
    }
    if let Some(tos) = d.tos {
        id.set_tos(tos)?;
    }
    id.resolve_route(step)?;
    let ev = wait_event(d.channel, id.raw(), "ROUTE_RESOLVED", &peer, deadline)?;
    expect(
        &ev,
        Ev::RDMA_CM_EVENT_ROUTE_RESOLVED,
        "ROUTE_RESOLVED",
        &peer,
    )?;
    id.set_ack_timeout(d.ack_timeout)?;
    id.create_qp(d.pd, d.cq, d.plan, d.send_depth)?;
    let sent = d.clock.now().0;
    let hello = Hello {
        clock: sent,
        ..d.hello
    }
    .encode();
    id.connect(d.plan, &hello)?;
    let ev = wait_event(d.channel, id.raw(), "ESTABLISHED", &peer, deadline)?;
    let received = d.clock.now().0;
    expect(&ev, Ev::RDMA_CM_EVENT_ESTABLISHED, "ESTABLISHED", &peer)?;
    let welcome = Welcome::decode(&ev.private_data)
        .and_then(|w| check_fingerprint(w.fingerprint, d.fingerprint).map(|()| w))
        .map_err(|source| VerbsError::Wire {
            peer: peer.clone(),
            source,
        })?;
    if welcome.node != d.hello.to {
        return Err(VerbsError::Wire {
            peer,
            source: crate::wire::WireError::Fingerprint {
                got: u64::from(welcome.node),
                ours: u64::from(d.hello.to),
            },
        });
    }
    let (offset, uncertainty) = clock_offset(sent, welcome.clock, received);
    if let Some((skew, action)) = d.skew {
        if exceeds_skew(offset, uncertainty, skew.as_nanos() as u64) {
            let e = VerbsError::ClockSkew {
                peer: peer.clone(),
                offset_ns: offset,
                uncertainty_ns: uncertainty,
                skew_ns: skew.as_nanos() as u64,
            };
            match action {
                SkewAction::Refuse => return Err(e),
                SkewAction::Warn => {
                    tracing::warn!("{e} (clock_skew_action = \"warn\": connecting anyway)")
                }
            }
        }
    }
    Ok(Dialed {
        id,
        welcome,
        clock: (offset, uncertainty),
    })
}

/// Dials `d.dst`, retrying rejections and unreachable peers until `d.timeout`.
pub fn dial(d: &Dial<'_>) -> Result<Dialed, VerbsError> {
    let start = Instant::now();
    let mut last;
    loop {
        let left = d.timeout.saturating_sub(start.elapsed());
        let step = left.clamp(Duration::from_millis(10), Duration::from_secs(2));
        match dial_once(d, step) {
            Ok(x) => return Ok(x),
            Err(e) if !e.is_permanent() => last = e,
            Err(e) => return Err(e),
        }
        if start.elapsed() >= d.timeout {
            break;
        }
        // Jittered: every dialler a restarted node's acceptor rejected at
        // once would otherwise come back at once.
        std::thread::sleep(jittered(Duration::from_millis(50), jitter_draw()));
    }
    Err(match last {
        VerbsError::Timeout { what, .. } => VerbsError::Timeout {
            what,
            waited_ms: start.elapsed().as_millis() as u64,
        },
        other => other,
    })
}

/// Posts one work request on `id`'s queue pair.
pub fn post(id: &CmId, wr: &SendWr) -> Result<(), i32> {
    let mut sge = ibv_sge {
        addr: 0,
        length: 0,
        lkey: 0,
    };
    let mut raw = wr.raw(&mut sge);
    let mut bad = std::ptr::null_mut();
    // SAFETY: the QP is live (owned by `id`); `raw` and `sge` outlive the
    // call; the local slice lies in a registered buffer the caller keeps
    // alive until the completion.
    let ret = unsafe { ibv_post_send(id.qp(), &mut raw, &mut bad) };
    if ret == 0 {
        Ok(())
    } else {
        Err(ret)
    }
}

/// Waits (spinning) for one completion on `cq`.
pub fn wait_one(cq: &Cq, timeout: Duration) -> Result<Wc, VerbsError> {
    let deadline = Instant::now() + timeout;
    let mut out = Vec::new();
    loop {
        cq.poll(&mut out)?;
        if let Some(wc) = out.pop() {
            return Ok(wc);
        }
        if Instant::now() >= deadline {
            return Err(VerbsError::Timeout {
                what: "a completion".into(),
                waited_ms: timeout.as_millis() as u64,
            });
        }
        std::thread::yield_now();
    }
}

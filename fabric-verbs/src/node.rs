//! A node hosted by this process: its device, protection domain, registered
//! index and data regions, the `rdma_cm` listener that accepts every
//! endpoint's connection (giving it the regions' addresses and rkeys), and
//! the start-up byte-order probe.
//!
//! Start-up order: open the device and refuse `IBV_ATOMIC_NONE`, check the
//! port and GID, allocate the PD, register the regions, start listening
//! (accepting only the probe), probe the atomic byte order over a loopback
//! queue pair, then accept everyone.
//!
//! Teardown ([`HostedNode`]'s field order): the acceptor thread stops and
//! destroys the accepted queue pairs and the listener, then the shared state
//! releases the regions, then the PD, then the context (each held by `Arc`,
//! so endpoints still open keep them alive until they close).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::Duration;

use nessie_protocol::registry::ClaimTable;
use nessie_protocol::NodeId;
use rdma_sys::rdma_cm_event_type as Ev;

use crate::byteorder::{detect, AtomicOrder, PROBE};
use crate::clock::NodeClock;
use crate::cluster::{ClusterFile, Timing};
use crate::connect::{dial, post, wait_one, Dial};
use crate::error::VerbsError;
use crate::events::{AsyncEvents, EventCounts};
use crate::ffi::cm::{CmEvent, CmId, EventChannel};
use crate::ffi::cq::Cq;
use crate::ffi::device::{Context, DeviceInfo};
use crate::ffi::memory::{Mr, Pd};
use crate::policy::{accept_depths, listen_backlog, plan_qp, QpPlan, RegionKind};
use crate::status::{map_status, status_name};
use crate::windows::NodeWindows;
use crate::wire::{Hello, Reject, RejectReason, Welcome, WireError};
use crate::wr::{cas_wr, LocalSlice, RemoteSlice};

/// What a node's endpoints share. Field order is drop order: memory
/// windows, then regions, then PD, then context.
pub struct NodeShared {
    /// This node (for a [`ClientHost`], an id past the cluster's nodes:
    /// the process hosts none).
    pub id: NodeId,
    /// Whether this is a node of the cluster, its regions served to every
    /// endpoint; `false` for a [`ClientHost`], whose placeholder regions no
    /// peer ever sees.
    pub hosted: bool,
    /// The cluster file.
    pub cluster: Arc<ClusterFile>,
    /// The listener's address (also the source address endpoints dial from).
    pub addr: SocketAddr,
    /// Device attributes.
    pub info: DeviceInfo,
    /// Queue-pair sizing.
    pub plan: QpPlan,
    /// The transport timing (landing and READ deadlines, A1 and A2 bounds).
    pub timing: Timing,
    /// The NIC's atomic byte order, once probed.
    pub order: OnceLock<AtomicOrder>,
    /// This node's clock, anchored once at start-up and shared by all its
    /// endpoints (so every client of the node reads the same clock, even if
    /// the wall clock is stepped between two endpoints' start).
    pub clock: NodeClock,
    /// The memory windows bound over the data region (before it: a window
    /// goes before the region it may be bound to).
    pub windows: NodeWindows,
    /// The index region.
    pub index: Mr,
    /// The data region.
    pub data: Mr,
    /// The protection domain.
    pub pd: Arc<Pd>,
    /// The device context.
    pub ctx: Arc<Context>,
    /// The client ids this process's live clients of the node hold, and
    /// its name in the node's registry words (`Endpoint::claim_client`).
    pub claims: ClaimTable,
}

impl NodeShared {
    /// The state of node `id` (`hosted`), or of a client host, dialling
    /// from `addr` on `device` with the regions `index` and `data` of `pd`.
    fn new(
        (id, hosted, addr): (NodeId, bool, SocketAddr),
        cluster: Arc<ClusterFile>,
        device: Device,
        pd: Arc<Pd>,
        (index, data): (Mr, Mr),
    ) -> Arc<NodeShared> {
        Arc::new(NodeShared {
            id,
            hosted,
            cluster,
            addr,
            info: device.info,
            plan: device.plan,
            timing: device.timing,
            order: OnceLock::new(),
            clock: NodeClock::start(),
            windows: NodeWindows::new(pd.clone()),
            index,
            data,
            pd,
            ctx: device.ctx,
            claims: ClaimTable::new(nessie_protocol::pure::draw_nonce()),
        })
    }

    /// What the listener tells connecting endpoints.
    pub fn welcome(&self) -> Welcome {
        Welcome {
            node: self.id.0,
            stores: self.order.get().map(|o| o.stores),
            fingerprint: self.cluster.fingerprint(),
            index: self.index.info(),
            data: self.data.info(),
            clock: self.clock.now().0,
        }
    }

    /// The probed order (the host's before the probe ran).
    pub fn atomic_order(&self) -> AtomicOrder {
        self.order.get().copied().unwrap_or(AtomicOrder::HOST)
    }

    /// How this node dials `target` (itself included) on `channel`, the
    /// queue pair on `cq` with `send_depth`, retrying for `timeout`. A
    /// `probe` connection (the byte-order probe's, the clock check's) says
    /// so in its hello, is let in before the node is ready when it is the
    /// node's own, and has its peer's clock measured but never refused; an
    /// endpoint's connection is refused beyond `clock_skew_ms` as the
    /// cluster file says.
    pub fn dial_to<'a>(
        &'a self,
        target: NodeId,
        channel: &'a Arc<EventChannel>,
        cq: &'a Arc<Cq>,
        send_depth: u32,
        timeout: Duration,
        probe: bool,
    ) -> Result<Dial<'a>, VerbsError> {
        let t = &self.cluster.tuning;
        Ok(Dial {
            channel,
            pd: &self.pd,
            cq,
            plan: &self.plan,
            send_depth,
            src: self.addr,
            // Its own listener is at `addr` (a client host's is in no
            // cluster file).
            dst: if target == self.id {
                self.addr
            } else {
                self.cluster.addr(target)?
            },
            port: self.cluster.port,
            hello: Hello {
                from: self.id.0,
                to: target.0,
                probe,
                fingerprint: self.cluster.fingerprint(),
                clock: 0,
            },
            fingerprint: self.cluster.fingerprint(),
            timeout,
            clock: self.clock,
            skew: (!probe).then_some((self.timing.clock_skew, t.clock_skew_action)),
            tos: t.traffic_class,
            ack_timeout: t.ack_timeout,
        })
    }
}

/// A device opened for a process's endpoints: its context, attributes,
/// queue-pair sizing and the cluster's transport timing.
struct Device {
    ctx: Arc<Context>,
    info: DeviceInfo,
    plan: QpPlan,
    timing: Timing,
}

impl Device {
    /// Opens `device` for `cluster`: refuses a device without atomics or
    /// without the configured port and GID, sizes the queue pairs.
    fn open(cluster: &ClusterFile, device: &str) -> Result<Device, VerbsError> {
        let ctx = Context::open(device)?;
        let info = ctx.info(cluster.port)?;
        info.atomic.require(device)?;
        ctx.gid(cluster.port, cluster.gid_index)?;
        let mut plan = plan_qp(
            &info.limits,
            cluster.topology().nodes,
            cluster.tuning.send_queue_depth,
            cluster.tuning.max_rd_atomic,
        );
        plan.retry_count = cluster.tuning.retry_count;
        plan.max_inline_data = cluster.tuning.max_inline_data;
        Ok(Device {
            ctx,
            info,
            plan,
            timing: cluster.timing()?,
        })
    }
}

/// A process that hosts no node but runs clients (clients without storage,
/// docs/protocol.md §2.4): the device, protection domain and clock its
/// endpoints share, dialling every node of the cluster from `addr`. It
/// registers no region a peer sees (8-byte placeholders stand in for the
/// index and data regions, which its endpoints refuse to touch) and keeps
/// no listener: one runs only while start-up probes the NIC's atomic byte
/// order over a loopback connection, as a node's does.
pub struct ClientHost {
    shared: Arc<NodeShared>,
}

impl ClientHost {
    /// Starts a client host of `cluster` on `device` (the cluster file's
    /// when `None`), dialling from `addr`: this host's address on the RDMA
    /// interface and an `rdma_cm` port free on it (the byte-order probe
    /// listens there for a moment).
    pub fn start(
        cluster: Arc<ClusterFile>,
        addr: SocketAddr,
        device: Option<&str>,
    ) -> Result<ClientHost, VerbsError> {
        let device = device.unwrap_or(&cluster.device).to_string();
        let device = Device::open(&cluster, &device)?;
        let pd = Pd::new(device.ctx.clone())?;
        let index = Mr::alloc(&pd, 8, RegionKind::Staging)?;
        let data = Mr::alloc(&pd, 8, RegionKind::Staging)?;
        let id = NodeId(cluster.topology().nodes);
        let shared = NodeShared::new((id, false, addr), cluster, device, pd, (index, data));
        let acceptor = start_acceptor(&shared)?;
        let order = probe(&shared)?;
        drop(acceptor);
        tracing::info!(%addr, ?order, "client host started: atomic byte order probed");
        let _ = shared.order.set(order);
        Ok(ClientHost { shared })
    }

    /// The state its endpoints share.
    pub fn shared(&self) -> &Arc<NodeShared> {
        &self.shared
    }
}

/// The listener thread; stopping it (Drop) destroys every accepted QP.
struct Acceptor {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for Acceptor {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A running node: its listener and its shared state (drop order: listener first).
pub struct HostedNode {
    acceptor: Acceptor,
    shared: Arc<NodeShared>,
    /// The reader of its device's asynchronous events (shared with the
    /// process's other nodes on the device).
    events: Arc<AsyncEvents>,
}

impl HostedNode {
    /// Starts node `id` of `cluster` on its configured device.
    pub fn start(cluster: Arc<ClusterFile>, id: NodeId) -> Result<HostedNode, VerbsError> {
        let addr = cluster.addr(id)?;
        let name = cluster.device_of(id)?.to_string();
        let device = Device::open(&cluster, &name)?;
        let max_msg = device.info.limits.max_msg_sz;
        let entry = cluster.protocol_config()?.layout().entry_bytes();
        if max_msg > 0 && entry > u64::from(max_msg) {
            return Err(VerbsError::EntryTooLarge { entry, max_msg });
        }
        let events = AsyncEvents::of(&device.ctx)?;
        let pd = Pd::new(device.ctx.clone())?;
        let topo = cluster.topology();
        let huge = cluster.tuning.huge_pages;
        let index = Mr::alloc_with(
            &pd,
            u64::from(topo.index_slots_per_node) * 8,
            RegionKind::Index,
            huge,
        )?;
        let data = Mr::alloc_with(&pd, topo.data_bytes_per_node, RegionKind::Data, huge)?;
        if huge && !(index.huge_pages() && data.huge_pages()) {
            tracing::warn!(
                node = id.0,
                "huge_pages is set but no 2 MiB huge pages were available (vm.nr_hugepages): the regions use ordinary pages"
            );
        }
        tracing::info!(node = id.0, device = %name, atomic = %device.info.atomic, index_rkey = index.rkey(), data_rkey = data.rkey(), "regions registered");
        let shared = NodeShared::new((id, true, addr), cluster, device, pd, (index, data));
        let acceptor = start_acceptor(&shared)?;
        let node = HostedNode {
            acceptor,
            shared,
            events,
        };
        let order = probe(&node.shared)?;
        tracing::info!(node = id.0, ?order, "atomic byte order probed");
        let _ = node.shared.order.set(order);
        Ok(node)
    }

    /// Its device's asynchronous events so far, by type (since this
    /// process began reading them).
    pub fn device_events(&self) -> EventCounts {
        self.events.counts()
    }

    /// The state endpoints share.
    pub fn shared(&self) -> &Arc<NodeShared> {
        &self.shared
    }

    /// Whether the listener thread is still running.
    pub fn is_listening(&self) -> bool {
        self.acceptor
            .thread
            .as_ref()
            .is_some_and(|t| !t.is_finished())
    }
}

fn start_acceptor(shared: &Arc<NodeShared>) -> Result<Acceptor, VerbsError> {
    let channel = EventChannel::new()?;
    let mut listener = CmId::new(&channel, format!("listener {}", shared.addr))?;
    listener.bind(shared.addr)?;
    let (verbs, _) = listener.device();
    if verbs != shared.ctx.raw() {
        return Err(VerbsError::DeviceMismatch {
            address: shared.addr.to_string(),
            expected: shared.ctx.name().to_string(),
            expected_port: shared.cluster.port,
            got: if verbs.is_null() {
                "no RDMA device".into()
            } else {
                "another device".into()
            },
            got_port: 0,
        });
    }
    // Room for a connect request from every node's dialer at once (one per
    // peer and node, shared by its endpoints: crate::dialer), and more.
    listener.listen(listen_backlog(shared.cluster.topology().nodes))?;
    let responder_cq = Cq::new(&shared.ctx, 16)?;
    let stop = Arc::new(AtomicBool::new(false));
    let (s, st) = (shared.clone(), stop.clone());
    let thread = std::thread::Builder::new()
        .name(format!("nessie-accept-{}", shared.id.0))
        .spawn(move || accept_loop(&s, &channel, listener, &responder_cq, &st))
        .map_err(|e| VerbsError::Verbs {
            call: "spawning the acceptor thread",
            source: e,
        })?;
    Ok(Acceptor {
        stop,
        thread: Some(thread),
    })
}

fn accept_loop(
    shared: &Arc<NodeShared>,
    channel: &Arc<EventChannel>,
    listener: CmId,
    cq: &Arc<Cq>,
    stop: &AtomicBool,
) {
    let mut conns: Vec<CmId> = Vec::new();
    while !stop.load(Ordering::Acquire) {
        match channel.next(Duration::from_millis(100)) {
            Ok(Some(ev)) => on_event(shared, channel, cq, &mut conns, ev),
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(node = shared.id.0, error = %e, "rdma_cm channel");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
    // Accepted QPs first, then the listener; the channel Arc goes last.
    drop(conns);
    drop(listener);
}

fn on_event(
    shared: &Arc<NodeShared>,
    channel: &Arc<EventChannel>,
    cq: &Arc<Cq>,
    conns: &mut Vec<CmId>,
    ev: CmEvent,
) {
    match ev.kind {
        Ev::RDMA_CM_EVENT_CONNECT_REQUEST => {
            // SAFETY: `ev.id` is the new id of a CONNECT_REQUEST on `channel`
            // (accepted ids inherit the listener's channel), owned by no one else.
            let mut id = unsafe {
                CmId::from_request(
                    ev.id,
                    channel,
                    format!("an endpoint connecting to node{}", shared.id.0),
                )
            };
            let ready = shared.order.get().is_some();
            let hello = Hello::decode(&ev.private_data);
            if let Some(reject) = refusal(shared, &hello, ready) {
                tracing::debug!(node = shared.id.0, ?hello, %reject, "connect request rejected");
                id.reject(&reject.encode());
                return;
            }
            let result = id
                .create_qp(&shared.pd, cq, &shared.plan, 1)
                .and_then(|()| {
                    let depths =
                        accept_depths(&shared.plan, ev.responder_resources, ev.initiator_depth);
                    id.accept(&shared.plan, depths, &shared.welcome().encode())
                });
            match result {
                Ok(()) => conns.push(id),
                Err(e) => {
                    tracing::warn!(node = shared.id.0, error = %e, "accept failed");
                    id.reject(&Reject::new(RejectReason::Resources, 0).encode());
                }
            }
        }
        Ev::RDMA_CM_EVENT_DISCONNECTED
        | Ev::RDMA_CM_EVENT_CONNECT_ERROR
        | Ev::RDMA_CM_EVENT_UNREACHABLE
        | Ev::RDMA_CM_EVENT_REJECTED
        | Ev::RDMA_CM_EVENT_DEVICE_REMOVAL => {
            if ev.kind == Ev::RDMA_CM_EVENT_DEVICE_REMOVAL {
                tracing::error!(node = shared.id.0, "RDMA device removed");
            }
            conns.retain(|c| !c.is(ev.id));
        }
        _ => {}
    }
}

/// Why the listener refuses a connect request, if it does.
fn refusal(shared: &NodeShared, hello: &Result<Hello, WireError>, ready: bool) -> Option<Reject> {
    let h = match hello {
        Ok(h) => h,
        Err(WireError::Version { got }) => {
            return Some(Reject::new(RejectReason::Version, u64::from(*got)))
        }
        Err(_) => return Some(Reject::new(RejectReason::BadRequest, 0)),
    };
    let fingerprint = shared.cluster.fingerprint();
    if h.to != shared.id.0 {
        Some(Reject::new(RejectReason::WrongNode, u64::from(shared.id.0)))
    } else if h.fingerprint != fingerprint {
        Some(Reject::new(RejectReason::Fingerprint, fingerprint))
    } else if !(ready || (h.probe && h.from == shared.id.0)) {
        Some(Reject::new(RejectReason::NotReady, 0))
    } else {
        None
    }
}

/// Detects the NIC's atomic byte order with two loopback CASes on a private word.
fn probe(shared: &Arc<NodeShared>) -> Result<AtomicOrder, VerbsError> {
    let word = Mr::alloc(&shared.pd, 8, RegionKind::Probe)?;
    let buf = Mr::alloc(&shared.pd, 16, RegionKind::Staging)?;
    let cq = Cq::new(&shared.ctx, 8)?;
    let channel = EventChannel::new()?;
    let dialed =
        dial(&shared.dial_to(shared.id, &channel, &cq, 4, Duration::from_secs(10), true)?)?;
    let remote = RemoteSlice {
        addr: word.addr(),
        rkey: word.rkey(),
    };
    let slice = |at: u64| LocalSlice {
        addr: buf.addr() + at,
        len: 8,
        lkey: buf.lkey(),
    };
    let cas = |wr_id: u64, at: u64, compare: u64, swap: u64| -> Result<[u8; 8], VerbsError> {
        post(
            &dialed.id,
            &cas_wr(wr_id, slice(at), remote, compare, swap, false),
        )
        .map_err(|ret| VerbsError::verbs_ret("ibv_post_send (byte-order probe)", ret))?;
        let wc = wait_one(&cq, Duration::from_secs(5))?;
        map_status(wc.status, wc.vendor_err, shared.id).map_err(|e| VerbsError::Verbs {
            call: "the loopback CAS of the byte-order probe",
            source: std::io::Error::other(format!("{}: {e}", status_name(wc.status))),
        })?;
        Ok(buf.read8(at).unwrap_or_default())
    };
    let first = cas(1, 0, 0, PROBE)?;
    let stored = word.read8(0).unwrap_or_default();
    // The word holds PROBE in the NIC's own interpretation, so this compares equal.
    let second = cas(2, 8, PROBE, PROBE)?;
    drop(dialed);
    Ok(detect(first, stored, second)?)
}

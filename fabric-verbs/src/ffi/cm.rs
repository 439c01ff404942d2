//! `rdma_cm`: event channels, connection ids, and their events.
//!
//! Channels are non-blocking; [`EventChannel::next`] waits with `poll(2)` so
//! every wait has a timeout. Events are copied out (type, status, ids,
//! private data, depths) and acknowledged at once, so an id can always be
//! destroyed afterwards.

use std::ffi::CStr;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdma_sys::{
    ibv_modify_qp, ibv_qp, ibv_qp_attr, ibv_qp_attr_mask, ibv_qp_init_attr, ibv_qp_state,
    ibv_qp_type, rdma_accept, rdma_ack_cm_event, rdma_bind_addr, rdma_cm_event, rdma_cm_id,
    rdma_conn_param, rdma_connect, rdma_create_event_channel, rdma_create_id, rdma_create_qp,
    rdma_destroy_event_channel, rdma_destroy_id, rdma_destroy_qp, rdma_disconnect,
    rdma_event_channel, rdma_event_str, rdma_get_cm_event, rdma_listen, rdma_migrate_id,
    rdma_port_space, rdma_reject, rdma_resolve_addr, rdma_resolve_route, rdma_set_option,
};

/// `RDMA_OPTION_ID` (librdmacm's anonymous enum, not in the bindings).
const RDMA_OPTION_ID: i32 = 0;
/// `RDMA_OPTION_ID_TOS`: `uint8_t` type of service.
const RDMA_OPTION_ID_TOS: i32 = 0;
/// `RDMA_OPTION_ID_ACK_TIMEOUT`: `uint8_t` ACK timeout exponent.
const RDMA_OPTION_ID_ACK_TIMEOUT: i32 = 3;

use super::cq::Cq;
use super::memory::Pd;
use crate::error::VerbsError;
use crate::policy::QpPlan;

/// A socket address in the C layout `rdma_cm` takes.
pub struct CSockAddr {
    storage: libc::sockaddr_storage,
}

impl CSockAddr {
    /// Converts a Rust socket address.
    pub fn new(addr: SocketAddr) -> CSockAddr {
        // SAFETY: all-zero is a valid sockaddr_storage.
        let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        match addr {
            SocketAddr::V4(a) => {
                let sin = libc::sockaddr_in {
                    sin_family: libc::AF_INET as libc::sa_family_t,
                    sin_port: a.port().to_be(),
                    sin_addr: libc::in_addr {
                        s_addr: u32::from_ne_bytes(a.ip().octets()),
                    },
                    sin_zero: [0; 8],
                };
                // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in.
                unsafe {
                    std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin)
                };
            }
            SocketAddr::V6(a) => {
                let sin6 = libc::sockaddr_in6 {
                    sin6_family: libc::AF_INET6 as libc::sa_family_t,
                    sin6_port: a.port().to_be(),
                    sin6_flowinfo: a.flowinfo().to_be(),
                    sin6_addr: libc::in6_addr {
                        s6_addr: a.ip().octets(),
                    },
                    sin6_scope_id: a.scope_id(),
                };
                // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in6.
                unsafe {
                    std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin6)
                };
            }
        }
        CSockAddr { storage }
    }

    /// The pointer `rdma_cm` calls take (valid while `self` lives).
    pub fn as_mut_ptr(&mut self) -> *mut libc::sockaddr {
        (&mut self.storage as *mut libc::sockaddr_storage).cast()
    }
}

/// The name librdmacm gives an event type.
pub fn event_name(kind: u32) -> String {
    // SAFETY: rdma_event_str returns a static NUL-terminated string.
    unsafe { CStr::from_ptr(rdma_event_str(kind)) }
        .to_string_lossy()
        .into_owned()
}

/// An `rdma_cm` event, copied out and already acknowledged.
#[derive(Debug)]
pub struct CmEvent {
    /// `rdma_cm_event_type`.
    pub kind: u32,
    /// Status (negative errno, or the reject reason).
    pub status: i32,
    /// The id the event is for (for a connect request: the new id).
    pub id: *mut rdma_cm_id,
    /// Connection private data (connect request, established, reject).
    pub private_data: Vec<u8>,
    /// `param.conn.initiator_depth` as librdmacm reports it: for a connect
    /// request, from the recipient's point of view, i.e. the *requester's
    /// responder resources* (`rdma_get_cm_event(3)`).
    pub initiator_depth: u8,
    /// `param.conn.responder_resources` as librdmacm reports it: for a connect
    /// request, the *requester's initiator depth*.
    pub responder_resources: u8,
}

impl CmEvent {
    /// The event's name.
    pub fn name(&self) -> String {
        event_name(self.kind)
    }
}

/// Whether a failed `rdma_get_cm_event` on the non-blocking channel just
/// means "try again": no event yet, or a signal interrupted the read (e.g. the
/// SIGINT/SIGTERM handler `nessie node` installs) — not a channel error.
pub fn retry_errno(errno: Option<i32>) -> bool {
    matches!(errno, Some(e) if e == libc::EAGAIN || e == libc::EWOULDBLOCK || e == libc::EINTR)
}

/// An `rdma_cm` event channel.
pub struct EventChannel {
    ch: *mut rdma_event_channel,
}

// SAFETY: the channel is a file descriptor wrapper usable from any thread.
unsafe impl Send for EventChannel {}
// SAFETY: as above.
unsafe impl Sync for EventChannel {}

impl EventChannel {
    /// Creates a non-blocking channel.
    pub fn new() -> Result<Arc<EventChannel>, VerbsError> {
        // SAFETY: plain constructor; checked for NULL.
        let ch = unsafe { rdma_create_event_channel() };
        if ch.is_null() {
            return Err(VerbsError::cm("rdma_create_event_channel", "local"));
        }
        // SAFETY: `ch` is live; its fd is a valid descriptor.
        let fd = unsafe { (*ch).fd };
        // SAFETY: fcntl on a valid fd.
        let ok = unsafe {
            let fl = libc::fcntl(fd, libc::F_GETFL);
            fl >= 0 && libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK) == 0
        };
        let me = Arc::new(EventChannel { ch });
        if !ok {
            return Err(VerbsError::cm(
                "fcntl(O_NONBLOCK) on the rdma_cm channel",
                "local",
            ));
        }
        Ok(me)
    }

    /// The next event, waiting at most `timeout`; `None` on timeout.
    pub fn next(&self, timeout: Duration) -> Result<Option<CmEvent>, VerbsError> {
        let deadline = Instant::now() + timeout;
        loop {
            let mut ev: *mut rdma_cm_event = std::ptr::null_mut();
            // SAFETY: `ch` is live; non-blocking, so this returns EAGAIN when empty.
            let ret = unsafe { rdma_get_cm_event(self.ch, &mut ev) };
            if ret == 0 && !ev.is_null() {
                // SAFETY: `ev` is a valid event until acknowledged below; the
                // private data pointer/length are valid for the same time.
                let out = unsafe {
                    let e = &*ev;
                    let conn = e.param.conn;
                    let pd = if conn.private_data.is_null() || conn.private_data_len == 0 {
                        Vec::new()
                    } else {
                        std::slice::from_raw_parts(
                            conn.private_data.cast::<u8>(),
                            usize::from(conn.private_data_len),
                        )
                        .to_vec()
                    };
                    CmEvent {
                        kind: e.event,
                        status: e.status,
                        id: e.id,
                        private_data: pd,
                        initiator_depth: conn.initiator_depth,
                        responder_resources: conn.responder_resources,
                    }
                };
                // SAFETY: acknowledges the event retrieved above, once.
                unsafe { rdma_ack_cm_event(ev) };
                return Ok(Some(out));
            }
            let err = std::io::Error::last_os_error();
            if !retry_errno(err.raw_os_error()) {
                return Err(VerbsError::Cm {
                    call: "rdma_get_cm_event",
                    peer: "local".into(),
                    source: err,
                });
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            let mut pfd = libc::pollfd {
                // SAFETY: `ch` is live.
                fd: unsafe { (*self.ch).fd },
                events: libc::POLLIN,
                revents: 0,
            };
            let ms = left.as_millis().clamp(1, 1000) as i32;
            // SAFETY: one valid pollfd.
            unsafe { libc::poll(&mut pfd, 1, ms) };
        }
    }

    /// The raw channel.
    pub fn raw(&self) -> *mut rdma_event_channel {
        self.ch
    }
}

impl Drop for EventChannel {
    fn drop(&mut self) {
        // SAFETY: every id on the channel holds an Arc<EventChannel>, so none is left.
        unsafe { rdma_destroy_event_channel(self.ch) };
    }
}

/// An `rdma_cm` id, with its queue pair once created.
pub struct CmId {
    id: *mut rdma_cm_id,
    peer: String,
    has_qp: bool,
    /// Inline data the queue pair accepts per work request.
    max_inline: u32,
    connected: bool,
    // Held so that the QP is destroyed (in Drop) before its CQ and PD.
    _cq: Option<Arc<Cq>>,
    _pd: Option<Arc<Pd>>,
    _channel: Arc<EventChannel>,
}

// SAFETY: an id is used by one owner at a time; librdmacm calls are thread-safe.
unsafe impl Send for CmId {}

impl CmId {
    /// A new RC (`RDMA_PS_TCP`) id on `channel`; `peer` names it in errors.
    pub fn new(channel: &Arc<EventChannel>, peer: impl Into<String>) -> Result<CmId, VerbsError> {
        let peer = peer.into();
        let mut id = std::ptr::null_mut();
        // SAFETY: channel is live; `id` receives the new id.
        let ret = unsafe {
            rdma_create_id(
                channel.raw(),
                &mut id,
                std::ptr::null_mut(),
                rdma_port_space::RDMA_PS_TCP,
            )
        };
        if ret != 0 || id.is_null() {
            return Err(VerbsError::cm("rdma_create_id", peer));
        }
        Ok(CmId {
            id,
            peer,
            has_qp: false,
            max_inline: 0,
            connected: false,
            _cq: None,
            _pd: None,
            _channel: channel.clone(),
        })
    }

    /// Takes ownership of the id a connect request created.
    ///
    /// # Safety
    /// `id` must be the id of a `CONNECT_REQUEST` event of `channel`, owned by nobody else.
    pub unsafe fn from_request(
        id: *mut rdma_cm_id,
        channel: &Arc<EventChannel>,
        peer: String,
    ) -> CmId {
        CmId {
            id,
            peer,
            has_qp: false,
            max_inline: 0,
            connected: false,
            _cq: None,
            _pd: None,
            _channel: channel.clone(),
        }
    }

    /// The raw id.
    pub fn raw(&self) -> *mut rdma_cm_id {
        self.id
    }

    /// Who this id talks to (for messages).
    pub fn peer(&self) -> &str {
        &self.peer
    }

    fn check(&self, call: &'static str, ret: i32) -> Result<(), VerbsError> {
        if ret == 0 {
            Ok(())
        } else {
            Err(VerbsError::cm(call, self.peer.clone()))
        }
    }

    /// Binds to a local address (listeners).
    pub fn bind(&mut self, addr: SocketAddr) -> Result<(), VerbsError> {
        let mut a = CSockAddr::new(addr);
        // SAFETY: id is live; `a` outlives the call.
        let ret = unsafe { rdma_bind_addr(self.id, a.as_mut_ptr()) };
        self.check("rdma_bind_addr", ret)
    }

    /// Listens for connect requests.
    pub fn listen(&mut self, backlog: i32) -> Result<(), VerbsError> {
        // SAFETY: id is bound.
        let ret = unsafe { rdma_listen(self.id, backlog) };
        self.check("rdma_listen", ret)
    }

    /// Starts address resolution from `src` to `dst` (ADDR_RESOLVED follows).
    pub fn resolve_addr(
        &mut self,
        src: SocketAddr,
        dst: SocketAddr,
        timeout: Duration,
    ) -> Result<(), VerbsError> {
        let (mut s, mut d) = (CSockAddr::new(src), CSockAddr::new(dst));
        let ms = timeout.as_millis().clamp(1, i32::MAX as u128) as i32;
        // SAFETY: id is live; the addresses are copied by librdmacm.
        let ret = unsafe { rdma_resolve_addr(self.id, s.as_mut_ptr(), d.as_mut_ptr(), ms) };
        self.check("rdma_resolve_addr", ret)
    }

    /// Starts route resolution (ROUTE_RESOLVED follows).
    pub fn resolve_route(&mut self, timeout: Duration) -> Result<(), VerbsError> {
        let ms = timeout.as_millis().clamp(1, i32::MAX as u128) as i32;
        // SAFETY: the address is resolved.
        let ret = unsafe { rdma_resolve_route(self.id, ms) };
        self.check("rdma_resolve_route", ret)
    }

    /// The device context and port `rdma_cm` bound the id to (after address
    /// resolution or binding to a specific address).
    pub fn device(&self) -> (*mut rdma_sys::ibv_context, u8) {
        // SAFETY: id is live.
        unsafe { ((*self.id).verbs, (*self.id).port_num) }
    }

    /// Creates the id's RC queue pair on `pd`, completing to `cq`, sized by `plan`.
    pub fn create_qp(
        &mut self,
        pd: &Arc<Pd>,
        cq: &Arc<Cq>,
        plan: &QpPlan,
        send_depth: u32,
    ) -> Result<(), VerbsError> {
        // SAFETY: all-zero is a valid ibv_qp_init_attr (null pointers, zero caps).
        let mut attr: ibv_qp_init_attr = unsafe { std::mem::zeroed() };
        attr.send_cq = cq.raw();
        attr.recv_cq = cq.raw();
        attr.qp_type = ibv_qp_type::IBV_QPT_RC;
        attr.sq_sig_all = 0;
        attr.cap.max_send_wr = send_depth;
        attr.cap.max_recv_wr = plan.max_recv_wr;
        attr.cap.max_send_sge = plan.max_sge;
        attr.cap.max_recv_sge = plan.max_sge;
        attr.cap.max_inline_data = plan.max_inline_data;
        // SAFETY: id is resolved/requested on the PD's context; attr is valid.
        let mut ret = unsafe { rdma_create_qp(self.id, pd.raw(), &mut attr) };
        if ret != 0 && plan.max_inline_data > 0 {
            tracing::warn!(
                asked = plan.max_inline_data,
                "the device refused inline data on a queue pair: WRITEs are not posted inline"
            );
            attr.cap.max_inline_data = 0;
            // SAFETY: as above.
            ret = unsafe { rdma_create_qp(self.id, pd.raw(), &mut attr) };
        }
        self.check("rdma_create_qp", ret)?;
        // The provider writes back what it granted (at least what was asked).
        self.max_inline = attr.cap.max_inline_data;
        self.has_qp = true;
        self._cq = Some(cq.clone());
        self._pd = Some(pd.clone());
        Ok(())
    }

    /// The inline data the queue pair accepts per work request (0 before
    /// `create_qp` or when the device grants none).
    pub fn max_inline(&self) -> u32 {
        self.max_inline
    }

    /// The queue pair (null before `create_qp`).
    pub fn qp(&self) -> *mut ibv_qp {
        // SAFETY: id is live.
        unsafe { (*self.id).qp }
    }

    fn param(plan_depths: (u8, u8), private: &[u8], plan: &QpPlan) -> rdma_conn_param {
        // SAFETY: all-zero is a valid rdma_conn_param.
        let mut p: rdma_conn_param = unsafe { std::mem::zeroed() };
        p.private_data = private.as_ptr().cast();
        p.private_data_len = private.len().min(255) as u8;
        p.responder_resources = plan_depths.0;
        p.initiator_depth = plan_depths.1;
        p.retry_count = plan.retry_count;
        p.rnr_retry_count = plan.rnr_retry_count;
        p
    }

    /// Connects with `private` data (ESTABLISHED or REJECTED follows).
    pub fn connect(&mut self, plan: &QpPlan, private: &[u8]) -> Result<(), VerbsError> {
        let mut p = Self::param(
            (plan.responder_resources, plan.initiator_depth),
            private,
            plan,
        );
        // SAFETY: the route is resolved and the QP created; `private` outlives the call.
        let ret = unsafe { rdma_connect(self.id, &mut p) };
        self.check("rdma_connect", ret)?;
        self.connected = true;
        Ok(())
    }

    /// Accepts a connect request with the given depths and `private` data.
    pub fn accept(
        &mut self,
        plan: &QpPlan,
        depths: (u8, u8),
        private: &[u8],
    ) -> Result<(), VerbsError> {
        let mut p = Self::param(depths, private, plan);
        // SAFETY: the id came from a connect request and has a QP.
        let ret = unsafe { rdma_accept(self.id, &mut p) };
        self.check("rdma_accept", ret)?;
        self.connected = true;
        Ok(())
    }

    /// Rejects a connect request, telling the requester why (`private`).
    pub fn reject(&mut self, private: &[u8]) {
        let len = private.len().min(148) as u8;
        // SAFETY: the id came from a connect request; `private` outlives the call.
        unsafe { rdma_reject(self.id, private.as_ptr().cast(), len) };
    }

    fn set_u8_option(
        &mut self,
        call: &'static str,
        name: i32,
        value: u8,
    ) -> Result<(), VerbsError> {
        let mut v = value;
        // SAFETY: id is live; the option is a uint8_t read during the call.
        let ret = unsafe {
            rdma_set_option(
                self.id,
                RDMA_OPTION_ID,
                name,
                (&mut v as *mut u8).cast(),
                std::mem::size_of::<u8>(),
            )
        };
        self.check(call, ret)
    }

    /// Sets the type of service (RoCE traffic class; on InfiniBand the SM
    /// maps it to the path's service level). Before route resolution.
    pub fn set_tos(&mut self, tos: u8) -> Result<(), VerbsError> {
        self.set_u8_option(
            "rdma_set_option(RDMA_OPTION_ID_TOS)",
            RDMA_OPTION_ID_TOS,
            tos,
        )
    }

    /// Sets the ACK timeout exponent of the id's queue pair (4.096 us x
    /// 2^`t`). Before connecting.
    pub fn set_ack_timeout(&mut self, t: u8) -> Result<(), VerbsError> {
        self.set_u8_option(
            "rdma_set_option(RDMA_OPTION_ID_ACK_TIMEOUT)",
            RDMA_OPTION_ID_ACK_TIMEOUT,
            t,
        )
    }

    /// Moves the id's events to `channel` (which then keeps them coming:
    /// DISCONNECTED and the like).
    pub fn migrate(&mut self, channel: &Arc<EventChannel>) -> Result<(), VerbsError> {
        // SAFETY: id and channel are live; every event of the id on its old
        // channel was acknowledged when it was read.
        let ret = unsafe { rdma_migrate_id(self.id, channel.raw()) };
        self.check("rdma_migrate_id", ret)?;
        self._channel = channel.clone();
        Ok(())
    }

    /// Moves the queue pair to the error state: nothing more is sent on it,
    /// and every outstanding work request completes (flushed) at once.
    pub fn fail_qp(&self) -> Result<(), VerbsError> {
        if !self.has_qp {
            return Ok(());
        }
        // SAFETY: the QP is live (owned by this id).
        unsafe { fail_raw_qp(self.qp()) }
    }

    /// Whether `ptr` is this id.
    pub fn is(&self, ptr: *mut rdma_cm_id) -> bool {
        self.id == ptr
    }
}

impl Drop for CmId {
    fn drop(&mut self) {
        // SAFETY: the id is live and owned; all its retrieved events were
        // acknowledged (CmEvent acknowledges at once). Order: disconnect,
        // destroy the QP, destroy the id; the CQ, PD and channel Arcs are
        // released after this body.
        unsafe {
            if self.connected {
                rdma_disconnect(self.id);
            }
            if self.has_qp {
                rdma_destroy_qp(self.id);
            }
            rdma_destroy_id(self.id);
        }
    }
}

/// Moves queue pair `qp` to the error state (`ibv_modify_qp(IBV_QPS_ERR)`):
/// nothing more is sent on it and its outstanding work requests flush. The
/// verbs calls are thread-safe, so another thread (the deadline watchdog)
/// may do this while the owner posts and polls.
///
/// # Safety
/// `qp` must be a live queue pair for the whole call.
pub unsafe fn fail_raw_qp(qp: *mut ibv_qp) -> Result<(), VerbsError> {
    // SAFETY: all-zero is a valid ibv_qp_attr.
    let mut attr: ibv_qp_attr = unsafe { std::mem::zeroed() };
    attr.qp_state = ibv_qp_state::IBV_QPS_ERR;
    // SAFETY: the caller keeps the QP live; only the state is set.
    let ret = unsafe { ibv_modify_qp(qp, &mut attr, ibv_qp_attr_mask::IBV_QP_STATE.0 as i32) };
    if ret == 0 {
        Ok(())
    } else {
        Err(VerbsError::verbs_ret("ibv_modify_qp(IBV_QPS_ERR)", ret))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_or_interrupted_channel_is_retried_not_an_error() {
        assert!(retry_errno(Some(libc::EAGAIN)));
        assert!(retry_errno(Some(libc::EWOULDBLOCK)));
        assert!(
            retry_errno(Some(libc::EINTR)),
            "a signal is not a channel error"
        );
        assert!(!retry_errno(Some(libc::EBADF)));
        assert!(!retry_errno(Some(libc::ENODATA)));
        assert!(!retry_errno(None));
    }

    #[test]
    fn socket_addresses_are_laid_out_for_rdma_cm() {
        let mut a = CSockAddr::new("192.168.10.2:7471".parse().unwrap());
        // SAFETY: `new` wrote a sockaddr_in for a V4 address.
        let sin = unsafe { *a.as_mut_ptr().cast::<libc::sockaddr_in>() };
        assert_eq!(sin.sin_family, libc::AF_INET as libc::sa_family_t);
        assert_eq!(u16::from_be(sin.sin_port), 7471);
        assert_eq!(sin.sin_addr.s_addr.to_ne_bytes(), [192, 168, 10, 2]);
    }
}

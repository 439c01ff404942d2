//! The device's asynchronous events (issue 26, item 6): a port going down
//! or coming back, a queue pair or the whole device failing. Each hosted
//! node reads its device context's events on a thread of its own
//! ([`AsyncEvents`]), logs them (a port error, a fatal queue pair or device
//! as warnings) and counts them by type for the node's reports.
//!
//! The endpoints do not depend on these events: a queue pair that fails
//! completes its requests with errors, and a port that goes down fails
//! every queue pair over it, which the endpoints see in their completions.
//! The events tell the operator why, and when.

use std::collections::{BTreeMap, HashMap};
use std::ffi::CStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::thread::JoinHandle;

use rdma_sys::{
    ibv_ack_async_event, ibv_async_event, ibv_event_type, ibv_event_type_str, ibv_get_async_event,
};

use crate::error::VerbsError;
use crate::ffi::device::Context;

/// How long one wait for an event blocks before the reader looks at its
/// stop flag.
const POLL_MS: i32 = 100;

/// The name libibverbs gives an event type (`"port error"`, `"local
/// catastrophic error"`, ...).
pub fn event_name(t: ibv_event_type) -> String {
    // SAFETY: ibv_event_type_str returns a static string for every value
    // (or "unknown").
    let p = unsafe { ibv_event_type_str(t) };
    if p.is_null() {
        return format!("{t:?}");
    }
    // SAFETY: a NUL-terminated static string.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// Whether an event of type `t` means something failed.
pub fn is_failure(t: ibv_event_type) -> bool {
    use ibv_event_type as E;
    matches!(
        t,
        E::IBV_EVENT_CQ_ERR
            | E::IBV_EVENT_QP_FATAL
            | E::IBV_EVENT_QP_REQ_ERR
            | E::IBV_EVENT_QP_ACCESS_ERR
            | E::IBV_EVENT_PATH_MIG_ERR
            | E::IBV_EVENT_DEVICE_FATAL
            | E::IBV_EVENT_PORT_ERR
            | E::IBV_EVENT_SRQ_ERR
            | E::IBV_EVENT_WQ_FATAL
    )
}

/// Events seen so far, by libibverbs' name of their type.
pub type EventCounts = BTreeMap<String, u64>;

/// Whether `counts` hold a fatal error of the whole device
/// (`IBV_EVENT_DEVICE_FATAL`, "local catastrophic error"): every queue pair
/// and region of it is gone, and a node on it can serve nothing until the
/// process starts again on a reset device (`nessie node serve` exits).
pub fn device_fatal(counts: &EventCounts) -> bool {
    counts.contains_key(&event_name(ibv_event_type::IBV_EVENT_DEVICE_FATAL))
}

/// The thread reading one device context's asynchronous events.
///
/// One per device context in a process: librdmacm hands every caller the
/// same context of a device, and an event is delivered to one reader, so
/// nodes hosted on one device share the reader ([`AsyncEvents::of`]).
pub struct AsyncEvents {
    counts: Arc<Mutex<EventCounts>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// The readers alive in this process, by context address.
fn readers() -> &'static Mutex<HashMap<usize, Weak<AsyncEvents>>> {
    static READERS: OnceLock<Mutex<HashMap<usize, Weak<AsyncEvents>>>> = OnceLock::new();
    READERS.get_or_init(|| Mutex::new(HashMap::new()))
}

impl AsyncEvents {
    /// The reader of `ctx`'s events: the one already running in this
    /// process, or a new one (which keeps `ctx` open while it runs).
    pub fn of(ctx: &Arc<Context>) -> Result<Arc<AsyncEvents>, VerbsError> {
        let key = ctx.raw() as usize;
        let mut map = readers().lock().unwrap_or_else(|e| e.into_inner());
        if let Some(r) = map.get(&key).and_then(Weak::upgrade) {
            return Ok(r);
        }
        let r = Arc::new(AsyncEvents::start(ctx.clone())?);
        map.retain(|_, w| w.strong_count() > 0);
        map.insert(key, Arc::downgrade(&r));
        Ok(r)
    }

    fn start(ctx: Arc<Context>) -> Result<AsyncEvents, VerbsError> {
        // SAFETY: the context is open while `ctx` lives; async_fd is its
        // event descriptor.
        let fd = unsafe { (*ctx.raw()).async_fd };
        // Non-blocking, so that the reader can wait with a timeout (poll)
        // and notice its stop flag.
        // SAFETY: fcntl on a descriptor the context owns.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
        if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
            return Err(VerbsError::Verbs {
                call: "fcntl(O_NONBLOCK) on the device's async event descriptor",
                source: std::io::Error::last_os_error(),
            });
        }
        let counts = Arc::new(Mutex::new(EventCounts::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (c2, s2) = (counts.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name(format!("nessie-events-{}", ctx.name()))
            .spawn(move || read_events(&ctx, fd, &c2, &s2))
            .map_err(|source| VerbsError::Verbs {
                call: "spawning the async event reader",
                source,
            })?;
        Ok(AsyncEvents {
            counts,
            stop,
            thread: Some(thread),
        })
    }

    /// The events seen so far, by type.
    pub fn counts(&self) -> EventCounts {
        self.counts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl Drop for AsyncEvents {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn read_events(ctx: &Context, fd: i32, counts: &Mutex<EventCounts>, stop: &AtomicBool) {
    let device = ctx.name();
    while !stop.load(Ordering::Relaxed) {
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd.
        let ready = unsafe { libc::poll(&mut pfd, 1, POLL_MS) };
        if ready <= 0 {
            continue;
        }
        // SAFETY: zeroed is a valid (unused) event; ibv_get_async_event
        // fills it, and each event got is acknowledged once below.
        let mut ev: ibv_async_event = unsafe { std::mem::zeroed() };
        if unsafe { ibv_get_async_event(ctx.raw(), &mut ev) } != 0 {
            continue; // EAGAIN: another wake-up, nothing to read
        }
        let t = ev.event_type;
        let name = event_name(t);
        if is_failure(t) {
            tracing::warn!(device, event = %name, "RDMA device event");
        } else {
            tracing::info!(device, event = %name, "RDMA device event");
        }
        *counts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(name)
            .or_insert(0) += 1;
        // SAFETY: acknowledges the event got above, once.
        unsafe { ibv_ack_async_event(&mut ev) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_are_told_apart_from_news() {
        use ibv_event_type as E;
        assert!(is_failure(E::IBV_EVENT_PORT_ERR));
        assert!(is_failure(E::IBV_EVENT_QP_FATAL));
        assert!(is_failure(E::IBV_EVENT_DEVICE_FATAL));
        assert!(!is_failure(E::IBV_EVENT_PORT_ACTIVE));
        assert!(!is_failure(E::IBV_EVENT_GID_CHANGE));
        assert_eq!(event_name(E::IBV_EVENT_PORT_ERR), "port error");
        assert_eq!(event_name(E::IBV_EVENT_PORT_ACTIVE), "port active");
        let mut counts = EventCounts::new();
        counts.insert(event_name(E::IBV_EVENT_PORT_ERR), 1);
        assert!(
            !device_fatal(&counts),
            "a port error is not the device's end"
        );
        counts.insert(event_name(E::IBV_EVENT_DEVICE_FATAL), 1);
        assert!(device_fatal(&counts));
    }
}

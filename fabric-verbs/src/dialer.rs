//! The process's dialers: one thread and one `rdma_cm` event channel per
//! (hosted node, peer), shared by every endpoint of the node.
//!
//! An endpoint dials every node of the cluster, and re-dials a node whose
//! queue pair failed, in the background so that a re-dial never blocks
//! operations to live nodes. Each endpoint used to have a dialer thread of
//! its own per peer, each with its own event channel (a file descriptor):
//! `endpoints x nodes` threads and descriptors, past the default 1,024-file
//! limit at about 60 nodes with 16 endpoints. Now the endpoints of a node
//! hand their dials ([`DialJob`]) to one dialer per peer, which runs them in
//! turn and hands each result back to its endpoint: `nodes` threads and
//! descriptors per hosted node, whatever the number of endpoints.
//!
//! Running the dials to one peer in turn would make a peer that is down
//! cost every endpoint a whole dial timeout, one after the other. So a dial
//! that was queued before an earlier dial to the same peer failed (for a
//! passing reason: no answer, a rejection) fails at once with that reason
//! ([`crate::policy::dial_verdict`]), and its endpoint backs off and
//! re-dials as after any failed dial; a dial queued after it tries again.
//! The established connection's events move to the endpoint's own channel
//! (`rdma_migrate_id`), as before.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use nessie_protocol::NodeId;

use crate::connect::{dial, Dialed};
use crate::error::VerbsError;
use crate::ffi::cm::EventChannel;
use crate::ffi::cq::Cq;
use crate::node::NodeShared;
use crate::policy::{dial_verdict, DialVerdict};

/// One dial an endpoint asks for.
pub struct DialJob {
    /// The endpoint's node.
    pub node: Arc<NodeShared>,
    /// The node to dial.
    pub target: NodeId,
    /// The endpoint's completion queue (the new queue pair's).
    pub cq: Arc<Cq>,
    /// The endpoint's event channel (the connection's events go there).
    pub events: Arc<EventChannel>,
    /// The queue pair's send-queue depth.
    pub send_depth: u32,
    /// How long the dial may keep retrying.
    pub timeout: Duration,
    /// When the endpoint asked.
    pub queued: Instant,
    /// Where the result goes.
    pub done: Sender<DialDone>,
}

/// A finished dial.
pub struct DialDone {
    /// The node dialled.
    pub node: NodeId,
    /// The connection, or why there is none.
    pub result: Result<Dialed, VerbsError>,
}

/// The dialers of a process, by (our address, the peer's address).
type Dialers = Mutex<HashMap<(SocketAddr, SocketAddr), Sender<DialJob>>>;

/// This process's dialers.
fn dialers() -> &'static Dialers {
    static DIALERS: OnceLock<Dialers> = OnceLock::new();
    DIALERS.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Hands `job` to the dialer of its peer, starting it on first use.
pub fn submit(job: DialJob) -> Result<(), VerbsError> {
    let key = (job.node.addr, job.node.cluster.addr(job.target)?);
    let mut map = dialers().lock().unwrap_or_else(|e| e.into_inner());
    let job = match map.get(&key) {
        Some(tx) => match tx.send(job) {
            Ok(()) => return Ok(()),
            // Its thread ended (it cannot, short of a panic): start another.
            Err(mpsc::SendError(job)) => job,
        },
        None => job,
    };
    let (tx, rx) = mpsc::channel::<DialJob>();
    std::thread::Builder::new()
        .name(format!("nessie-dial-{}-{}", job.node.id.0, job.target.0))
        .spawn(move || {
            let channel = EventChannel::new();
            let mut last_failure: Option<(Instant, String)> = None;
            while let Ok(job) = rx.recv() {
                let result = match &channel {
                    Err(e) => Err(VerbsError::Timeout {
                        what: format!(
                            "{}: no rdma_cm event channel for dialling ({e})",
                            job.target
                        ),
                        waited_ms: 0,
                    }),
                    Ok(channel) => run(&job, channel, &mut last_failure),
                };
                let _ = job.done.send(DialDone {
                    node: job.target,
                    result,
                });
            }
        })
        .map_err(|e| VerbsError::Verbs {
            call: "spawning a dialer thread",
            source: e,
        })?;
    tx.send(job).map_err(|_| VerbsError::Timeout {
        what: "a dialer that stopped at once".into(),
        waited_ms: 0,
    })?;
    map.insert(key, tx);
    Ok(())
}

/// Runs one job on the dialer's `channel`.
fn run(
    job: &DialJob,
    channel: &Arc<EventChannel>,
    last_failure: &mut Option<(Instant, String)>,
) -> Result<Dialed, VerbsError> {
    if let (DialVerdict::FailAtOnce, Some((_, why))) = (
        dial_verdict(job.queued, last_failure.as_ref().map(|f| f.0)),
        last_failure.as_ref(),
    ) {
        return Err(VerbsError::Timeout {
            what: format!(
                "{}: a dial of it queued before this one just failed ({why})",
                job.target
            ),
            waited_ms: 0,
        });
    }
    let result = dial_node(job, channel).and_then(|mut d| {
        d.id.migrate(&job.events)?;
        Ok(d)
    });
    match &result {
        Ok(_) => *last_failure = None,
        Err(e) if !e.is_permanent() => *last_failure = Some((Instant::now(), e.to_string())),
        Err(_) => {}
    }
    result
}

/// Dials `job.target` from `job.node` on `channel`, creating the QP on the
/// endpoint's CQ.
fn dial_node(job: &DialJob, channel: &Arc<EventChannel>) -> Result<Dialed, VerbsError> {
    dial(&job.node.dial_to(
        job.target,
        channel,
        &job.cq,
        job.send_depth,
        job.timeout,
        false,
    )?)
}

//! The agent of a Nessie node that hosts clients without storage
//! (docs/protocol.md §2.4), on a thread of its own: a pass over the node's
//! lease blocks every period ([`nessie_protocol::pure::serve_once`]),
//! binding the windows its clients ask for and taking back the shares of
//! clients that stopped. It is the node's CPU, off every request's path;
//! [`crate::NodeSetup::start`] starts it on every Nessie node whose store
//! has clients without storage, alike for `nessie node`, the front door and
//! the tests.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use nessie_protocol::pure::{serve_once, Agent};
use nessie_protocol::{Config, Endpoint};

/// How often the agent makes a pass.
pub const AGENT_PERIOD: Duration = Duration::from_micros(200);

/// How long one step of a pass waits for its requests' completions.
const STEP_WAIT: Duration = Duration::from_millis(100);

/// A node's agent running on a thread; it stops when dropped.
pub struct AgentThread {
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

impl AgentThread {
    /// Starts the agent of the node `ep` is on (an endpoint of that node:
    /// its CPU and its loopback), serving `cfg`'s lease blocks every
    /// `period`. A pass that fails (a request the endpoint refused) is
    /// logged and the next one starts over.
    pub fn start<E>(cfg: Arc<Config>, mut ep: E, period: Duration) -> AgentThread
    where
        E: Endpoint + Send + 'static,
    {
        let stop = Arc::new(AtomicBool::new(false));
        let halt = stop.clone();
        let thread = thread::spawn(move || {
            let mut agent = Agent::new(ep.node());
            while !halt.load(Ordering::Relaxed) {
                if let Err(e) = serve_once(&mut agent, &cfg, &mut ep, STEP_WAIT) {
                    tracing::warn!(node = %ep.node(), error = %e, "agent pass failed");
                }
                thread::sleep(period);
            }
        });
        AgentThread {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for AgentThread {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

//! Nessie with several operations in flight per client thread (`--depth`):
//! a [`Pipeline`] of D protocol clients over the thread's endpoint. Its
//! measured slices run the workload driver's [`Pipelined`] issuer (2 x D
//! operations submitted, each operation's latency measured from submission
//! to its result); the preload runs batches or single requests.

use std::time::Duration;

use nessie_fabric_sim::SimEndpoint;
use nessie_protocol::pipeline::{Finished, Pipeline};
use nessie_protocol::{Error, KvRequest, OpStats, Request, Response};

use nessie_workload::{Done, Issuer, Pipelined};

/// How long one wait for a completion may block.
const WAIT: Duration = Duration::from_millis(1);

/// One client thread's pipeline.
pub struct PipeClient {
    p: Pipelined<SimEndpoint>,
    last: OpStats,
}

impl PipeClient {
    /// A client thread driving `p`.
    pub fn new(p: Pipeline<SimEndpoint>) -> PipeClient {
        PipeClient {
            p: Pipelined::new(p),
            last: OpStats::default(),
        }
    }

    /// Operations in flight at most.
    pub fn depth(&self) -> usize {
        self.p.pipeline().depth()
    }

    /// Runs one request alone (the preload): its result; its fabric work is
    /// kept for [`PipeClient::last_stats`].
    pub fn one(&mut self, req: Request) -> Result<Response, Error> {
        let p = self.p.pipeline_mut();
        p.submit(0, req);
        let mut done: Vec<Finished> = Vec::new();
        loop {
            p.progress(&mut done, WAIT);
            if let Some(f) = done.pop() {
                self.last = f.stats;
                return f.result;
            }
        }
    }

    /// Runs `reqs` with the pipeline's depth in flight (the preload):
    /// their results in order.
    pub fn run_all(
        &mut self,
        reqs: impl IntoIterator<Item = Request>,
    ) -> Vec<Result<Response, Error>> {
        self.p.pipeline_mut().run(reqs)
    }

    /// Cache hits of the pipeline's clients so far.
    pub fn cache_hits(&self) -> u64 {
        self.p.pipeline().cache_hits()
    }

    /// Fabric work of the last [`PipeClient::one`].
    pub fn last_stats(&self) -> OpStats {
        self.last
    }
}

/// The measured slices: the driver keeps 2 x depth operations submitted.
impl Issuer for PipeClient {
    type Output = Response;

    fn window(&self) -> usize {
        self.p.window()
    }

    fn outstanding(&self) -> usize {
        self.p.outstanding()
    }

    fn submit(&mut self, tag: usize, op: KvRequest<'_>) {
        self.p.submit(tag, op);
    }

    fn progress(&mut self, done: &mut Vec<Done<Response>>) {
        self.p.progress(done);
    }
}

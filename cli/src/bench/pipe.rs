//! Nessie with several operations in flight per client thread (`--depth`):
//! a [`Pipeline`] of D protocol clients over the thread's endpoint, driven
//! closed loop with up to 2 x D operations submitted, each operation's
//! latency measured from submission to its result.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use nessie_fabric_sim::SimEndpoint;
use nessie_protocol::pipeline::{Finished, Pipeline, Request, Response};
use nessie_protocol::{Error, OpStats};

use super::stats::KindAcc;
use super::workload::{write_key, OpGen, OpKind, Workload};

/// How long one wait for a completion may block.
const WAIT: Duration = Duration::from_millis(1);

/// One client thread's pipeline.
pub struct PipeClient {
    p: Pipeline<SimEndpoint>,
    last: OpStats,
}

fn found(r: &Result<Response, Error>) -> Result<bool, &Error> {
    match r {
        Ok(Response::Get(v)) => Ok(v.is_some()),
        Ok(_) => Ok(true),
        Err(e) => Err(e),
    }
}

impl PipeClient {
    /// A client thread driving `p`.
    pub fn new(p: Pipeline<SimEndpoint>) -> PipeClient {
        PipeClient {
            p,
            last: OpStats::default(),
        }
    }

    /// Operations in flight at most.
    pub fn depth(&self) -> usize {
        self.p.depth()
    }

    /// Runs one request alone (the preload): its result; its fabric work is
    /// kept for [`PipeClient::last_stats`].
    pub fn one(&mut self, req: Request) -> Result<Response, Error> {
        self.p.submit(0, req);
        let mut done: Vec<Finished> = Vec::new();
        loop {
            self.p.progress(&mut done, WAIT);
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
        self.p.run(reqs)
    }

    /// Cache hits of the pipeline's clients so far.
    pub fn cache_hits(&self) -> u64 {
        self.p.cache_hits()
    }

    /// Fabric work of the last [`PipeClient::one`].
    pub fn last_stats(&self) -> OpStats {
        self.last
    }

    /// The closed loop of one measured slice: keeps 2 x depth operations
    /// submitted until `stop` or `max_ops` submitted, then lets them finish;
    /// records each into `kinds` (GET, PUT).
    pub fn closed_loop(
        &mut self,
        gen: &mut OpGen,
        w: &Workload,
        value: &[u8],
        max_ops: u64,
        stop: &AtomicBool,
        kinds: &mut [KindAcc; 3],
    ) {
        let mut started: HashMap<u64, (usize, Instant)> = HashMap::new();
        let mut done: Vec<Finished> = Vec::new();
        let mut key = Vec::with_capacity(w.key_size as usize);
        let mut submitted = 0u64;
        loop {
            let stopping = stop.load(Ordering::Relaxed) || submitted >= max_ops;
            while !stopping && self.p.outstanding() < 2 * self.p.depth() && submitted < max_ops {
                let (kind, k) = gen.next_op();
                write_key(&mut key, k, w.key_size);
                let (i, req) = match kind {
                    OpKind::Put => (1, Request::Put(key.clone(), value.to_vec())),
                    // Nessie has no scans: a scan reads its first key.
                    OpKind::Get | OpKind::Scan => (0, Request::Get(key.clone())),
                };
                started.insert(submitted, (i, Instant::now()));
                self.p.submit(submitted, req);
                submitted += 1;
            }
            if stopping && self.p.outstanding() == 0 {
                return;
            }
            self.p.progress(&mut done, WAIT);
            for f in done.drain(..) {
                if let Some((i, t)) = started.remove(&f.tag) {
                    kinds[i].record(&f.stats, t.elapsed(), found(&f.result));
                }
            }
        }
    }
}

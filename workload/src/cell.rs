//! Cell in the driver: its client as a [`RunsOne`] (range scans included)
//! and its server node as a [`ServerLoad`].

use std::time::Duration;

use nessie_cell::{CellClient, CellNode};
use nessie_protocol::Response;
use nessie_protocol::{Endpoint, Error, OpStats};

use crate::driver::{Answer, Op, RunsOne};
use crate::run::ServerLoad;

/// A Cell client as the workload loop drives it ([`Blocking`]): one
/// operation at a time, range scans included (from the key to the end of
/// the key space).
impl<E: Endpoint> RunsOne for CellClient<E> {
    type Output = Answer;

    fn run(&mut self, op: Op<'_>) -> (Result<Answer, Error>, OpStats) {
        let result = match op {
            Op::Get(k) => self.get(k).map(|v| Answer::Kv(Response::Get(v))),
            Op::Put(k, v) => self.put(k, v).map(|e| Answer::Kv(Response::Put(e))),
            Op::Delete(k) => self.delete(k).map(|e| Answer::Kv(Response::Delete(e))),
            Op::Scan(k, n) => self.scan(k, None, n).map(Answer::Entries),
        };
        (result, nessie_protocol::KvClient::last_stats(self))
    }
}

impl ServerLoad for CellNode {
    fn cpu_time(&self) -> Duration {
        CellNode::cpu_time(self)
    }
    fn requests(&self) -> u64 {
        CellNode::requests(self)
    }
}

//! Cell's sans-IO machines: `nessie-exec`'s executor
//! ([`nessie_exec::Machine`]) with Cell's own effects.
//!
//! Every Cell operation (a client's get, put, delete, scan or search; a
//! server's handling of one request; a meganode split) is async logic over
//! an [`Io`] handle, run as a machine: the driver polls it with the current
//! time, and it answers with work requests to post, an effect to perform,
//! `Pending` while completions are outstanding, or its result. Cell's own
//! effects ([`Effect`]) are log appends and fresh directory snapshots; the
//! shared ones are back-offs and the waits of the request channel. An RPC
//! to a server is not an effect: it is `nessie-exec`'s RPC sub-machine
//! ([`nessie_exec::RpcCall`]: request WRITE, await the response,
//! settle by cancel CAS) running inside the operation's machine, so a Cell
//! client needs no blocking I/O at all, and the same code runs on the
//! threaded drivers and in the deterministic cluster simulator.
//!
//! Cell's operations (B-link tree descents with right-link moves, node and
//! meganode splits, multi-part scans) have too many states to write out by
//! hand legibly: hence async code, as for the baselines.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use nessie_exec::mailbox::{RpcOp, Status};
use nessie_exec::RpcClient;
use nessie_exec::{self as exec, Ext};
use nessie_protocol::{CorruptionKind, Error, Nanos, NodeId, Op, OpStats};

use crate::log::LogRecord;
use crate::ptr::RegionId;
use crate::region::RegionMap;
use crate::wire::{CellRequest, CellResponse};

pub use nessie_exec::{read_bytes, written, Results};

/// What a round's operations touch, for the counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpClass {
    /// B-link tree nodes (counted as index READs).
    Node,
    /// Key-value extents (counted as data READs).
    Extent,
    /// Anything else (root word, version words, writes).
    Other,
}

impl OpClass {
    fn counted(self) -> exec::OpClass {
        match self {
            OpClass::Node => exec::OpClass::Index,
            OpClass::Extent | OpClass::Other => exec::OpClass::Data,
        }
    }
}

/// Cell's own effects.
#[derive(Clone, Debug, PartialEq)]
pub enum Effect {
    /// Append `records` to `region`'s log (§2.6).
    Log {
        /// The region.
        region: RegionId,
        /// The records, in order.
        records: Vec<LogRecord>,
    },
    /// Read `region`'s log: every intact record, in order (recovery).
    ReadLog {
        /// The region.
        region: RegionId,
    },
    /// Delete `region`'s log (the region was dropped).
    RemoveLog {
        /// The region.
        region: RegionId,
    },
    /// Fetch a fresh directory snapshot.
    Regions,
}

/// The result of an [`Effect`].
#[derive(Clone, Debug)]
pub enum Resolution {
    /// The log append or removal.
    Logged(Result<(), Error>),
    /// A log's records.
    Records(Result<Vec<LogRecord>, Error>),
    /// A directory snapshot.
    Regions(Arc<RegionMap>),
}

/// Cell's extension of the executor.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CellExt;

impl Ext for CellExt {
    type Effect = Effect;
    type Resolution = Resolution;
}

/// What a Cell machine wants next.
pub type Step<T> = exec::Step<Result<T, Error>, CellExt>;

/// A Cell machine that owns its logic.
pub type Machine<T> = exec::Machine<T, CellExt>;

/// The executor's handle, with Cell's effects.
pub type BaseIo = exec::Io<CellExt>;

/// A machine's request channel to the servers: the request slot state it
/// shares with the client (or maintenance thread) that runs it.
#[derive(Clone, Debug)]
pub struct Channel {
    rpc: Arc<Mutex<RpcClient>>,
    /// Whether writes go as claimed requests (cancelled by their client if
    /// it gives up). Off only as a test-only fault switch.
    claimed_writes: bool,
    /// Whether a server's requests that change another server's state go
    /// as claimed requests. Off only as a test-only fault switch.
    claimed_server_requests: bool,
}

impl Channel {
    /// A channel over `rpc`.
    pub fn new(rpc: RpcClient, claimed_writes: bool) -> Channel {
        Channel {
            rpc: Arc::new(Mutex::new(rpc)),
            claimed_writes,
            claimed_server_requests: true,
        }
    }

    /// The same request slot, with writes claimed or not.
    pub fn with_claimed_writes(&self, on: bool) -> Channel {
        Channel {
            rpc: self.rpc.clone(),
            claimed_writes: on,
            claimed_server_requests: self.claimed_server_requests,
        }
    }

    /// The same request slot, with server-to-server requests claimed or not.
    pub fn with_claimed_server_requests(&self, on: bool) -> Channel {
        Channel {
            rpc: self.rpc.clone(),
            claimed_writes: self.claimed_writes,
            claimed_server_requests: on,
        }
    }

    fn rpc(&self) -> std::sync::MutexGuard<'_, RpcClient> {
        self.rpc.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The handle Cell's logic does its I/O through: the executor's handle and
/// the machine's request channel (servers' request workers have none).
#[derive(Clone, Debug)]
pub struct Io {
    base: BaseIo,
    chan: Option<Channel>,
}

impl Io {
    /// `base` with the request channel `chan`.
    pub fn new(base: BaseIo, chan: Option<Channel>) -> Io {
        Io { base, chan }
    }

    /// The executor's handle.
    pub fn base(&self) -> &BaseIo {
        &self.base
    }

    /// The time passed in by the driver at the current step.
    pub fn now(&self) -> Nanos {
        self.base.now()
    }

    /// Adds to the operation's counters.
    pub fn count(&self, f: impl FnOnce(&mut OpStats)) {
        self.base.count(f)
    }

    /// Runs `ops` as one round (posted together, all awaited); results in order.
    pub async fn round(&self, ops: Vec<Op>, class: OpClass) -> Results {
        self.base.round(ops, class.counted()).await
    }

    /// [`Io::round`] whose missing completions count as timed out once
    /// `within` has passed.
    pub async fn round_within(&self, ops: Vec<Op>, class: OpClass, within: Duration) -> Results {
        self.base.round_within(ops, class.counted(), within).await
    }

    /// Sends `request` to node `to`'s server workers through the request
    /// slots and awaits the reply. A write, and every request of a server
    /// that changes another server's state (`CopyMeganode`, `NewRoot`,
    /// `SetRoot`, `InsertChild`, `OpenRegion`, `DropRegion`), is sent as a
    /// claimed request (the slots' PUT), which the server must claim before
    /// it runs it and the sender cancels if it gives up
    /// ([`nessie_exec::rpc`]): such a request that fails with any
    /// error but `OutcomeUnknown` never runs. Searches, scans and
    /// validations change nothing and go unclaimed (the slots' GET).
    pub async fn rpc(&self, to: NodeId, request: CellRequest) -> Result<CellResponse, Error> {
        let Some(chan) = &self.chan else {
            return Err(Error::corrupt(
                CorruptionKind::Bug,
                "server workers do not call other servers",
            ));
        };
        let op = match request {
            CellRequest::Write { .. } if chan.claimed_writes => RpcOp::Put,
            CellRequest::CopyMeganode { .. }
            | CellRequest::NewRoot { .. }
            | CellRequest::SetRoot { .. }
            | CellRequest::InsertChild { .. }
            | CellRequest::OpenRegion { .. }
            | CellRequest::DropRegion { .. }
                if chan.claimed_server_requests =>
            {
                RpcOp::Put
            }
            _ => RpcOp::Get,
        };
        let mut call = chan.rpc().begin(to, op);
        let r = call.send(&self.base, &[], &request.encode()).await;
        chan.rpc().finish(&call);
        let r = r?;
        match r.status {
            Status::Found => CellResponse::decode(&r.value).ok_or_else(|| {
                Error::corrupt(CorruptionKind::Reply, format!("malformed reply from {to}"))
            }),
            other => Err(Error::corrupt(
                CorruptionKind::Reply,
                format!("{to} answered {other:?}"),
            )),
        }
    }

    /// Appends `records` to `region`'s log.
    pub async fn log(&self, region: RegionId, records: Vec<LogRecord>) -> Result<(), Error> {
        match self.base.ext(Effect::Log { region, records }).await? {
            Resolution::Logged(r) => r,
            other => Err(Error::corrupt(
                CorruptionKind::Completion,
                format!("expected a log result, got {other:?}"),
            )),
        }
    }

    /// Every intact record of `region`'s log, in order.
    pub async fn read_log(&self, region: RegionId) -> Result<Vec<LogRecord>, Error> {
        match self.base.ext(Effect::ReadLog { region }).await? {
            Resolution::Records(r) => r,
            other => Err(Error::corrupt(
                CorruptionKind::Completion,
                format!("expected a log's records, got {other:?}"),
            )),
        }
    }

    /// Deletes `region`'s log.
    pub async fn remove_log(&self, region: RegionId) -> Result<(), Error> {
        match self.base.ext(Effect::RemoveLog { region }).await? {
            Resolution::Logged(r) => r,
            other => Err(Error::corrupt(
                CorruptionKind::Completion,
                format!("expected a log result, got {other:?}"),
            )),
        }
    }

    /// Waits `d`.
    pub async fn backoff(&self, d: Duration) {
        self.base.backoff(d).await;
    }

    /// A fresh directory snapshot.
    pub async fn regions(&self) -> Option<Arc<RegionMap>> {
        match self.base.ext(Effect::Regions).await {
            Ok(Resolution::Regions(m)) => Some(m),
            _ => None,
        }
    }
}

/// First work request id of a machine made without a driver at hand.
pub const ID_BASE: u64 = 1 << 62;

/// A machine on node `own` whose work requests are numbered from
/// `first_id`, with request channel `chan`, running the logic `make` builds.
pub fn machine<T: 'static, F>(
    own: NodeId,
    first_id: u64,
    chan: Option<Channel>,
    make: impl FnOnce(Io) -> F,
) -> Machine<T>
where
    F: std::future::Future<Output = Result<T, Error>> + 'static,
{
    Machine::new(own, first_id, move |base: BaseIo| {
        let io = Io::new(base, chan);
        io.count(|s| s.attempts = 1);
        make(io)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use nessie_exec::{Effect as Base, Resolution as Res, Step as S};
    use nessie_protocol::{Completion, OpOutput, RemoteAddr};

    #[test]
    fn a_machine_posts_rounds_and_effects_in_order_and_sees_time() {
        let mut m: Machine<(u64, Nanos)> = machine(NodeId(0), 1, None, |io: Io| async move {
            let r = io
                .round(
                    vec![Op::Read {
                        addr: RemoteAddr::data(NodeId(1), 0),
                        len: 8,
                    }],
                    OpClass::Node,
                )
                .await;
            let b = read_bytes(&r[0])?;
            let snapshot = io.regions().await;
            io.backoff(Duration::from_micros(1)).await;
            Ok((
                u64::from_le_bytes(b.try_into().unwrap()) + u64::from(snapshot.is_some()),
                io.now(),
            ))
        });
        let S::Post(wrs) = m.poll(Nanos(5)) else {
            panic!("expected a round")
        };
        assert_eq!(wrs.len(), 1);
        assert!(matches!(m.poll(Nanos(6)), S::Pending));
        m.complete(Completion {
            id: wrs[0].id,
            result: Ok(OpOutput::Read(7u64.to_le_bytes().to_vec())),
        });
        assert!(matches!(
            m.poll(Nanos(7)),
            S::Effect(Base::Ext(Effect::Regions))
        ));
        m.resolve(Res::Ext(Resolution::Regions(
            Arc::new(RegionMap::default()),
        )));
        assert!(matches!(m.poll(Nanos(8)), S::Effect(Base::Backoff(_))));
        m.resolve(Res::Waited);
        match m.poll(Nanos(9)) {
            S::Done(Ok((8, Nanos(9)))) => {}
            other => panic!("{other:?}"),
        }
        assert_eq!(m.stats().index_reads, 1);
        assert_eq!(m.stats().round_trips, 1);
    }

    #[test]
    fn a_server_machine_has_no_request_channel() {
        let mut m: Machine<CellResponse> = machine(NodeId(0), 1, None, |io: Io| async move {
            io.rpc(
                NodeId(1),
                CellRequest::OpenRegion {
                    region: RegionId(2),
                },
            )
            .await
        });
        assert!(matches!(m.poll(Nanos(1)), S::Done(Err(Error::Corrupt(_)))));
    }
}

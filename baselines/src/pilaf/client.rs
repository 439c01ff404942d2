//! [`PilafClient`]: GETs by RDMA READ of the key's home node's self-verifying
//! hash table, PUT and DELETE as requests served by the home node's workers.
//!
//! A GET attempt probes the key's three candidate entries one READ at a time
//! (as Pilaf probes). An entry whose checksum does not match was read while
//! the server rewrote it: the client counts a torn read, backs off and reads
//! that entry again. An empty entry is skipped; for a used one the client
//! READs the extent it points to, and accepts it only if the extent's CRC64
//! matches the one in the entry and its key is the key looked up. An extent
//! that fails its checksum ends the attempt (its pointer may be stale): the
//! client backs off and starts a new attempt.
//!
//! A miss is confirmed by a second scan between two READs of the home node's
//! move epoch (as NessieHY does): only an unchanged, even epoch proves no
//! cuckoo move overlapped the scan, so a key being moved was not skipped.
//! Every attempt ends within T (`expiration - deadline_margin`) of its start
//! or is retried, and the server quarantines freed extents for T, so an
//! extent is never reused under an attempt's READ. The operation as a whole
//! gives up with [`Error::Timeout`] after `retry.op_timeout`.
//!
//! [`PilafCore`] is the client as sans-IO logic; [`PilafClient`] is its
//! blocking driver.

use std::sync::Arc;

use nessie_protocol::registry::Registry;
use nessie_protocol::{ClientId, Config, Endpoint, Error, Nanos, NodeId, Op, RemoteAddr};

use super::layout::{EntryRead, HashEntry, PilafLayout, ENTRY_BYTES};
use crate::client::{
    get_outcome, rpc_channel, server_driven, Attempt, BlockingClient, ClientLogic, CoreSwitches,
    Retry,
};
use crate::retry::RetryBudget;
use nessie_exec::word;
use nessie_exec::RpcClient;
use nessie_exec::{read_one, Io, OpClass};
use nessie_protocol::KvRequest;

/// Checksum mismatches a client has seen (each one was retried, never
/// returned).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct TornReads {
    /// Hash table entries that failed their checksum (read again).
    pub entries: u64,
    /// Extents that failed the checksum in their entry (attempt retried).
    pub extents: u64,
}

impl TornReads {
    /// Entries and extents together.
    pub fn total(&self) -> u64 {
        self.entries + self.extents
    }
}

/// A Pilaf client's state between operations.
#[derive(Debug)]
pub struct PilafCore {
    cfg: Arc<Config>,
    layout: PilafLayout,
    rpc: RpcClient,
    torn: TornReads,
    skip_checksums: bool,
    skip_epoch_check: bool,
}

impl PilafCore {
    /// A client's core, its request channel `rpc`.
    pub fn new(cfg: Arc<Config>, layout: PilafLayout, rpc: RpcClient) -> PilafCore {
        PilafCore {
            cfg,
            layout,
            rpc,
            torn: TornReads::default(),
            skip_checksums: false,
            skip_epoch_check: false,
        }
    }

    /// Checksum mismatches seen so far (all retried).
    pub fn torn_reads(&self) -> TornReads {
        self.torn
    }

    /// Test-only fault switch: see [`PilafClient::set_skip_checksums`].
    pub fn set_skip_checksums(&mut self, on: bool) {
        self.skip_checksums = on;
    }

    /// Test-only fault switch: see [`PilafClient::set_skip_epoch_check`].
    pub fn set_skip_epoch_check(&mut self, on: bool) {
        self.skip_epoch_check = on;
    }

    async fn read(
        &self,
        io: &Io,
        addr: RemoteAddr,
        len: u32,
        class: OpClass,
    ) -> Result<Vec<u8>, Error> {
        read_one(io.round(vec![Op::Read { addr, len }], class).await)
    }

    /// Reads hash table entry `slot` of `home` until it is consistent.
    async fn read_entry(
        &mut self,
        io: &Io,
        home: NodeId,
        slot: u32,
        op: &mut RetryBudget,
    ) -> Result<Option<HashEntry>, Error> {
        let addr = RemoteAddr::data(home, self.layout.entry_offset(slot));
        loop {
            let bytes = self
                .read(io, addr, ENTRY_BYTES as u32, OpClass::Index)
                .await?;
            match self.layout.decode_entry(&bytes, !self.skip_checksums) {
                EntryRead::Empty => return Ok(None),
                EntryRead::Used(e) => return Ok(Some(e)),
                EntryRead::Torn => {
                    self.torn.entries += 1;
                    tracing::debug!(slot, %home, "pilaf: torn hash table entry, reading again");
                    let d = op.next_backoff(io.now())?;
                    io.backoff(d).await;
                }
            }
        }
    }

    /// One pass over the candidates; `Some(value)` if the key was found.
    async fn scan(
        &mut self,
        io: &Io,
        key: &[u8],
        home: NodeId,
        attempt: Nanos,
        op: &mut RetryBudget,
    ) -> Result<Result<Option<Vec<u8>>, Retry>, Error> {
        let verify = !self.skip_checksums;
        for slot in self.layout.candidates(key) {
            let Some(e) = self.read_entry(io, home, slot, op).await? else {
                continue;
            };
            let bytes = self
                .read(
                    io,
                    RemoteAddr::data(home, e.extent),
                    e.extent_read_len(),
                    OpClass::Data,
                )
                .await?;
            // The extent is only safe if it cannot have been reused under us.
            if io.now().since(attempt) + self.cfg.deadline_margin >= self.cfg.expiration {
                return Ok(Err(Retry));
            }
            let Some((k, v)) = e.verify_extent(&bytes, verify) else {
                self.torn.extents += 1;
                tracing::debug!(slot, %home, "pilaf: extent fails its checksum, retrying");
                return Ok(Err(Retry));
            };
            if k == key {
                return Ok(Ok(Some(v.to_vec())));
            }
        }
        Ok(Ok(None))
    }

    async fn read_epoch(&self, io: &Io, home: NodeId) -> Result<u64, Error> {
        let addr = RemoteAddr::data(home, self.layout.epoch);
        Ok(word(&self.read(io, addr, 8, OpClass::Index).await?, 0))
    }

    async fn get_attempt(
        &mut self,
        io: &Io,
        key: &[u8],
        op: &mut RetryBudget,
    ) -> Result<Result<Option<Vec<u8>>, Retry>, Error> {
        let home = self.layout.home(key);
        let attempt = io.now();
        match self.scan(io, key, home, attempt, op).await? {
            Ok(None) if self.skip_epoch_check => return Ok(Ok(None)),
            Ok(None) => {}
            other => return Ok(other),
        }
        let before = self.read_epoch(io, home).await?;
        if before % 2 == 1 {
            return Ok(Err(Retry));
        }
        match self.scan(io, key, home, attempt, op).await? {
            Ok(None) => {}
            other => return Ok(other),
        }
        let after = self.read_epoch(io, home).await?;
        if after != before {
            return Ok(Err(Retry));
        }
        Ok(Ok(None))
    }
}

impl ClientLogic for PilafCore {
    fn system(&self) -> &'static str {
        "pilaf"
    }

    fn config(&self) -> &Arc<Config> {
        &self.cfg
    }

    fn registry(&self) -> Registry {
        Registry::after(self.layout.region_bytes(), self.cfg.clients_per_node)
    }

    async fn attempt(&mut self, io: &Io, op: KvRequest<'_>, budget: &mut RetryBudget) -> Attempt {
        match op {
            KvRequest::Get(key) => get_outcome(self.get_attempt(io, key, budget).await),
            _ => {
                let home = self.layout.home(op.key());
                Attempt::Done(server_driven(io, &mut self.rpc, home, op).await)
            }
        }
    }

    fn set_switches(&mut self, switches: CoreSwitches) {
        self.skip_epoch_check = switches.skip_epoch_check;
        self.skip_checksums = switches.skip_checksums;
    }
}

/// A Pilaf client (blocking).
pub type PilafClient<E> = BlockingClient<PilafCore, E>;

impl<E: Endpoint> BlockingClient<PilafCore, E> {
    /// Client `id` on endpoint `ep` (an endpoint on `id.node`).
    pub fn new(
        cfg: Arc<Config>,
        layout: PilafLayout,
        id: ClientId,
        ep: E,
    ) -> Result<PilafClient<E>, Error> {
        let rpc = rpc_channel(layout.mailbox, id, &cfg);
        BlockingClient::from_core(PilafCore::new(cfg, layout, rpc), id, ep)
    }

    /// Checksum mismatches seen so far by this client's GETs (all retried).
    /// [`OpStats::attempts`](nessie_protocol::OpStats::attempts) of a GET
    /// also counts each retried attempt, but a torn entry is read again
    /// within its attempt, so only this counter sees every torn read.
    pub fn torn_reads(&self) -> TornReads {
        self.core.torn_reads()
    }

    /// Test-only fault switch: when on, GETs do not compare entry and extent
    /// checksums (plausibility checks remain), so torn or corrupt data can
    /// be returned. It exists to show that the tests detect exactly that.
    pub fn set_skip_checksums(&mut self, on: bool) {
        self.core.set_skip_checksums(on);
    }

    /// Test-only fault switch: when on, a GET reports a key absent after one
    /// scan, without the move-epoch check, so a key moving between probes
    /// can be missed. It exists to show that the tests detect exactly that.
    pub fn set_skip_epoch_check(&mut self, on: bool) {
        self.core.set_skip_epoch_check(on);
    }
}

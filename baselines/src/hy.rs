//! NessieHY, the hybrid baseline (FaRM-like): GETs are client-driven, by RDMA
//! READ of the key's home node's partially-coupled tables
//! ([`crate::coupled`]); PUT and DELETE are requests served by the home
//! node's workers, as in NessieSD.
//!
//! A GET reads the key's candidate index table entries one at a time and, for
//! an entry that may hold the key, its data table entry. As in the paper the
//! optimisations are off by default and each can be switched on
//! ([`HyOptions`]): filter bits (skip entries whose filter differs), a cache
//! of remote data table entries (keyed by the index table entry word, valid
//! for T), and multiple reads (header and key first, the value only on a
//! match). Nessie's fourth optimisation, previous versions, has no
//! counterpart: a server-driven PUT never leaves an uncommitted entry for a
//! reader to step back from.
//!
//! A GET that finds nothing scans again between two READs of the home node's
//! move epoch; only an unchanged, even epoch (no cuckoo move overlapped the
//! scan) lets it report the key absent. Every attempt ends within T of its
//! start (else it retries), so the data table entries it reads are never
//! reused under it.
//!
//! [`HyCore`] is the client as sans-IO logic (a GET attempt is async code
//! over a machine's [`Io`]); [`HyClient`] is its blocking driver.

use std::sync::Arc;

use nessie_protocol::registry::Registry;
use nessie_protocol::{
    ClientId, Config, DteCache, Endpoint, Error, IndexEntry, Nanos, NodeId, Op, RemoteAddr,
};

use crate::client::{
    get_outcome, rpc_channel, server_driven, Attempt, BlockingClient, ClientLogic, CoreSwitches,
    Retry,
};
use crate::coupled::CoupledLayout;
use crate::retry::RetryBudget;
use nessie_exec::word;
use nessie_exec::RpcClient;
use nessie_exec::{read_one, Io, OpClass};
use nessie_protocol::KvRequest;

/// NessieHY's optional GET optimisations (all off by default, as in the paper).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct HyOptions {
    /// Filter bits in index table entries (the count is `Config::filter_bits`).
    pub filter_bits: bool,
    /// Cache of remote data table entries (`Config::cache_capacity` entries).
    pub cache: bool,
    /// Read header and key first, the value only on a match.
    pub multiple_reads: bool,
}

/// A NessieHY client's state between operations.
#[derive(Debug)]
pub struct HyCore {
    cfg: Arc<Config>,
    layout: CoupledLayout,
    opts: HyOptions,
    rpc: RpcClient,
    cache: DteCache,
    skip_epoch_check: bool,
}

impl HyCore {
    /// A client's core with options `opts`, its request channel `rpc`.
    pub fn new(cfg: Arc<Config>, layout: CoupledLayout, opts: HyOptions, rpc: RpcClient) -> HyCore {
        HyCore {
            cache: DteCache::new(if opts.cache { cfg.cache_capacity } else { 0 }),
            cfg,
            layout,
            opts,
            rpc,
            skip_epoch_check: false,
        }
    }

    /// Test-only fault switch: report a key absent after one scan, without
    /// the move-epoch check (a broken variant the tests must catch).
    pub fn set_skip_epoch_check(&mut self, on: bool) {
        self.skip_epoch_check = on;
    }

    /// Reads `len` bytes at `offset` of `home`'s data region: by CPU when
    /// `home` is the client's own node (as the paper's NessieHY does for
    /// same-node data; the server also writes by CPU, so nothing relies on
    /// NIC atomicity here), by RDMA READ otherwise.
    async fn fetch(
        &self,
        io: &Io,
        home: NodeId,
        offset: u64,
        len: u64,
        index: bool,
    ) -> Result<Vec<u8>, Error> {
        let (op, class) = if home == io.own() {
            // Same-node reads count as CPU reads, never as index reads.
            let op = Op::LocalRead {
                offset,
                len: len as u32,
            };
            (op, OpClass::Data)
        } else {
            let op = Op::Read {
                addr: RemoteAddr::data(home, offset),
                len: len as u32,
            };
            (op, if index { OpClass::Index } else { OpClass::Data })
        };
        read_one(io.round(vec![op], class).await)
    }

    async fn read_word(&self, io: &Io, home: NodeId, offset: u64) -> Result<u64, Error> {
        Ok(word(&self.fetch(io, home, offset, 8, true).await?, 0))
    }

    /// One pass over the candidates; `Some(value)` if the key was found.
    async fn scan(
        &mut self,
        io: &Io,
        key: &[u8],
        home: NodeId,
        start: Nanos,
        use_cache: bool,
    ) -> Result<Result<Option<Vec<u8>>, Retry>, Error> {
        let filter = self.layout.filter(key);
        let expiration = self.cfg.expiration;
        for slot in self.layout.candidates(key) {
            let read_at = io.now();
            let ite = IndexEntry(
                self.read_word(io, home, self.layout.index_offset(slot))
                    .await?,
            );
            let Some(dte) = ite.dte() else { continue };
            if self.opts.filter_bits && !ite.filter_matches(filter) {
                continue;
            }
            if use_cache {
                let now = io.now();
                if let Some(bytes) = self.cache.get(ite.0, now, read_at.plus(expiration)) {
                    if self.layout.entry_key(bytes) == Some(key) {
                        return Ok(Ok(self.layout.entry_value(bytes).map(<[u8]>::to_vec)));
                    }
                    continue;
                }
            }
            let at = self.layout.entry_offset(dte.index);
            let entry = if self.opts.multiple_reads {
                let head = self
                    .fetch(io, home, at, self.layout.header_and_key(), false)
                    .await?;
                if self.layout.entry_key(&head) != Some(key) {
                    continue;
                }
                let (k, v) = self.layout.lens(word(&head, 0)).unwrap_or((0, 0));
                let mut entry = head[..8 + k].to_vec();
                if v > 0 {
                    let value = self
                        .fetch(io, home, at + 8 + k as u64, v as u64, false)
                        .await?;
                    entry.extend_from_slice(&value);
                }
                entry
            } else {
                self.fetch(io, home, at, self.layout.entry_bytes, false)
                    .await?
            };
            if self.layout.entry_key(&entry) != Some(key) {
                continue;
            }
            // The entry is only safe if it cannot have been reused under us.
            if io.now().since(start) + self.cfg.deadline_margin >= expiration {
                return Ok(Err(Retry));
            }
            let value = self.layout.entry_value(&entry).map(<[u8]>::to_vec);
            if value.is_none() {
                return Ok(Err(Retry));
            }
            if use_cache {
                self.cache.insert(ite.0, entry, read_at.plus(expiration));
            }
            return Ok(Ok(value));
        }
        Ok(Ok(None))
    }

    /// One GET attempt.
    async fn get_attempt(
        &mut self,
        io: &Io,
        key: &[u8],
    ) -> Result<Result<Option<Vec<u8>>, Retry>, Error> {
        let home = self.layout.home(key);
        let start = io.now();
        match self.scan(io, key, home, start, true).await? {
            Ok(Some(v)) => return Ok(Ok(Some(v))),
            Err(Retry) => return Ok(Err(Retry)),
            Ok(None) if self.skip_epoch_check => return Ok(Ok(None)),
            Ok(None) => {}
        }
        let before = self.read_word(io, home, self.layout.epoch).await?;
        if !before.is_multiple_of(2) {
            return Ok(Err(Retry));
        }
        match self.scan(io, key, home, start, false).await? {
            Ok(Some(v)) => return Ok(Ok(Some(v))),
            Err(Retry) => return Ok(Err(Retry)),
            Ok(None) => {}
        }
        let after = self.read_word(io, home, self.layout.epoch).await?;
        if after != before {
            return Ok(Err(Retry));
        }
        Ok(Ok(None))
    }
}

impl ClientLogic for HyCore {
    fn system(&self) -> &'static str {
        "nessie-hy"
    }

    fn config(&self) -> &Arc<Config> {
        &self.cfg
    }

    fn registry(&self) -> Registry {
        Registry::after(self.layout.region_bytes(), self.cfg.clients_per_node)
    }

    async fn attempt(&mut self, io: &Io, op: KvRequest<'_>, _budget: &mut RetryBudget) -> Attempt {
        match op {
            KvRequest::Get(key) => get_outcome(self.get_attempt(io, key).await),
            _ => {
                let home = self.layout.home(op.key());
                Attempt::Done(server_driven(io, &mut self.rpc, home, op).await)
            }
        }
    }

    fn cache_hits(&self) -> u64 {
        self.cache.hit_miss().0
    }

    fn set_switches(&mut self, switches: CoreSwitches) {
        self.skip_epoch_check = switches.skip_epoch_check;
    }
}

/// A NessieHY client (blocking).
pub type HyClient<E> = BlockingClient<HyCore, E>;

impl<E: Endpoint> BlockingClient<HyCore, E> {
    /// Client `id` on endpoint `ep` (an endpoint on `id.node`).
    pub fn new(
        cfg: Arc<Config>,
        layout: CoupledLayout,
        opts: HyOptions,
        id: ClientId,
        ep: E,
    ) -> Result<HyClient<E>, Error> {
        let rpc = rpc_channel(layout.mailbox, id, &cfg);
        BlockingClient::from_core(HyCore::new(cfg, layout, opts, rpc), id, ep)
    }

    /// Test-only fault switch: report a key absent after one scan, without
    /// the move-epoch check (a broken variant the tests must catch).
    pub fn set_skip_epoch_check(&mut self, on: bool) {
        self.core.set_skip_epoch_check(on);
    }
}

//! Cell's client: [`CellClient`], a blocking driver over the client's
//! sans-IO operations ([`ops`]; their RPCs run inside the machines), with
//! its caches ([`cache`]) and locality selector ([`selector`]). It implements `nessie_protocol::KvClient`, so the
//! benchmark drives Cell like the other systems, and adds what an ordered
//! store offers: range scans and searches.

pub mod cache;
pub mod ops;
pub mod selector;

use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};

use nessie_exec::Driver;
use nessie_exec::RpcClient;
use nessie_protocol::registry::claim_id;
use nessie_protocol::KvClient;
use nessie_protocol::{ClientClaim, ClientId, CorruptionKind, Endpoint, Error, NodeId, OpStats};

use crate::config::{CellConfig, CellFaults, SearchMode};
use crate::directory::FabricDirectory;
use crate::machine::{machine, Channel, Effect, Io, Machine, Resolution};
use crate::region::{Directory, RegionMap};
pub use nessie_protocol::Entries;
use nessie_protocol::{Request, Response};
use ops::Cl;
pub use ops::{CellStats, ClientCore};

/// A Cell client as sans-IO machines: one machine per operation (Cell's
/// operations retry inside), sharing the client's caches, selector and
/// request channel. [`CellClient`] drives them on an endpoint; the cluster
/// simulator (`nessie-sim`) drives the same machines in virtual time.
#[derive(Clone, Debug)]
pub struct CellMachines {
    core: Arc<Mutex<ClientCore>>,
    chan: Channel,
    own: NodeId,
}

impl CellMachines {
    /// Client `id` of the deployment configured by `cfg` whose regions `dir`
    /// lists, sending its requests through `rpc` (its request slot).
    pub fn new(
        cfg: Arc<CellConfig>,
        dir: &Directory,
        id: ClientId,
        rpc: RpcClient,
    ) -> Result<CellMachines, Error> {
        CellMachines::with_snapshot(cfg, dir.snapshot(), None, id, rpc)
    }

    /// Client `id` starting from `snapshot` of the region directory; with
    /// `reader`, it reads the directory over the fabric itself when it meets
    /// a region it does not know (a node process sharing no memory with the
    /// servers: [`CellClient::over_fabric`]).
    pub fn with_snapshot(
        cfg: Arc<CellConfig>,
        snapshot: Arc<RegionMap>,
        reader: Option<Arc<FabricDirectory>>,
        id: ClientId,
        rpc: RpcClient,
    ) -> Result<CellMachines, Error> {
        cfg.validate()?;
        id.check_in(cfg.nodes, cfg.clients_per_node)?;
        let mut core = ClientCore::new(cfg, id, snapshot);
        core.directory = reader;
        Ok(CellMachines {
            core: Arc::new(Mutex::new(core)),
            chan: Channel::new(rpc, true),
            own: id.node,
        })
    }

    /// The client's state (caches, selector, counters, switches).
    pub fn core(&self) -> MutexGuard<'_, ClientCore> {
        self.core.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The node it runs on.
    pub fn node(&self) -> NodeId {
        self.own
    }

    /// The machine running `make`'s logic, its work requests numbered from
    /// `first_id`.
    fn machine<T, F>(&self, first_id: u64, make: impl FnOnce(Cl) -> F) -> Machine<T>
    where
        T: 'static,
        F: Future<Output = Result<T, Error>> + 'static,
    {
        let core = self.core.clone();
        let (claimed, limit) = {
            let c = self.core();
            let f = c.faults;
            (
                !f.unclaimed_writes,
                (!f.unbounded_rounds).then_some(c.cfg.rpc_timeout),
            )
        };
        let chan = self.chan.with_claimed_writes(claimed);
        machine(self.own, first_id, Some(chan), move |io: Io| {
            // A round whose completion never comes (lost by the transport)
            // gives up after the longest wait for one server reply, as its
            // errors, instead of holding the operation for good.
            io.base().set_limit(limit);
            make(Cl { io, core })
        })
    }

    /// A get (`want` the value) or search (presence only) of `key`.
    pub fn get(&self, key: Vec<u8>, want: bool, first_id: u64) -> Machine<Option<Vec<u8>>> {
        self.machine(first_id, move |cl| cl.get(key, want))
    }

    /// A put (`Some(value)`) or delete (`None`) of `key`: whether it existed.
    pub fn write(&self, key: Vec<u8>, value: Option<Vec<u8>>, first_id: u64) -> Machine<bool> {
        self.machine(first_id, move |cl| cl.write(key, value))
    }

    /// A scan of `from <= key < to`, at most `limit` entries.
    pub fn scan(
        &self,
        from: Vec<u8>,
        to: Option<Vec<u8>>,
        limit: usize,
        first_id: u64,
    ) -> Machine<Entries> {
        self.machine(first_id, move |cl| cl.scan(from, to, limit))
    }

    /// The machine of `req`, answering in the pipeline's vocabulary (what a
    /// driver running any system's operations side by side needs).
    pub fn request(&self, req: &Request, first_id: u64) -> Machine<Response> {
        match req.clone() {
            Request::Get(k) => self.machine(first_id, move |cl| async move {
                cl.get(k, true).await.map(Response::Get)
            }),
            Request::Put(k, v) => self.machine(first_id, move |cl| async move {
                cl.write(k, Some(v)).await.map(Response::Put)
            }),
            Request::Delete(k) => self.machine(first_id, move |cl| async move {
                cl.write(k, None).await.map(Response::Delete)
            }),
            Request::Scan { from, to, limit } => self.machine(first_id, move |cl| async move {
                cl.scan(from, to, limit).await.map(Response::Scan)
            }),
        }
    }
}

/// A Cell client on one endpoint.
pub struct CellClient<E: Endpoint> {
    machines: CellMachines,
    driver: Driver<E>,
    dir: Option<Arc<Directory>>,
    last: OpStats,
    /// Its client id, held on the endpoint's fabric while it lives: two
    /// clients with one id would share request and response slots.
    _claim: ClientClaim,
}

impl<E: Endpoint> std::fmt::Debug for CellClient<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CellClient")
            .field("node", &self.machines.own)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl<E: Endpoint> CellClient<E> {
    /// Client `id` of the deployment configured by `cfg` whose regions `dir`
    /// lists, on endpoint `ep` (an endpoint on `id.node`). Its id is taken
    /// as every system's client takes it, in the fabric's in-process
    /// registry and in its node's registry word
    /// ([`nessie_protocol::registry::claim_id`]).
    ///
    /// # Errors
    ///
    /// [`Error::ClientIdInUse`] for an id a live client holds, in this
    /// process or another; [`Error::Unreachable`] or [`Error::Timeout`] when
    /// the node does not answer the claim within `op_timeout`.
    pub fn new(
        cfg: Arc<CellConfig>,
        dir: Arc<Directory>,
        id: ClientId,
        ep: E,
    ) -> Result<CellClient<E>, Error> {
        let snapshot = dir.snapshot();
        CellClient::with_source(cfg, Some(dir), snapshot, None, id, ep)
    }

    /// Client `id` of a deployment whose directory is on a node
    /// ([`CellConfig::directory`]), on endpoint `ep`: it shares no memory
    /// with the servers and reads the directory over the fabric when it
    /// meets a region it does not know (at first, every region).
    pub fn over_fabric(cfg: Arc<CellConfig>, id: ClientId, ep: E) -> Result<CellClient<E>, Error> {
        let reader = Arc::new(FabricDirectory::new(&cfg, None)?);
        let empty = Arc::new(RegionMap::default());
        CellClient::with_source(cfg, None, empty, Some(reader), id, ep)
    }

    fn with_source(
        cfg: Arc<CellConfig>,
        dir: Option<Arc<Directory>>,
        snapshot: Arc<RegionMap>,
        reader: Option<Arc<FabricDirectory>>,
        id: ClientId,
        mut ep: E,
    ) -> Result<CellClient<E>, Error> {
        let claim = claim_id(&mut ep, id, cfg.registry(), cfg.op_timeout)?;
        let layout = cfg.layout();
        let rpc = RpcClient::new(
            layout.mailbox,
            id,
            cfg.slots_per_node(),
            cfg.rpc_timeout,
            cfg.landing_margin,
        );
        Ok(CellClient {
            machines: CellMachines::with_snapshot(cfg, snapshot, reader, id, rpc)?,
            driver: Driver::new(ep),
            dir,
            last: OpStats::default(),
            _claim: claim,
        })
    }

    fn core(&self) -> MutexGuard<'_, ClientCore> {
        self.machines.core()
    }

    /// Sets how this client searches.
    pub fn set_mode(&mut self, mode: SearchMode) {
        self.core().mode = mode;
    }

    /// Sets the test-only fault switches of this client.
    pub fn set_faults(&mut self, faults: CellFaults) {
        let mut c = self.core();
        c.selector.old_window_rule = faults.selector_resets_per_history;
        c.faults = faults;
    }

    /// The client's cumulative counters.
    pub fn stats(&self) -> CellStats {
        self.core().stats
    }

    /// Share of meganode searches the selector sent to servers.
    pub fn server_share(&self) -> f64 {
        let s = self.core().stats;
        let total = s.server_searches + s.client_searches;
        if total == 0 {
            0.0
        } else {
            s.server_searches as f64 / total as f64
        }
    }

    /// The client's state (caches, selector), for inspection.
    pub fn with_core<T>(&self, f: impl FnOnce(&ClientCore) -> T) -> T {
        f(&self.core())
    }

    /// Takes a fresh snapshot of the directory now (what the client does by
    /// itself when it meets a region it does not know or a server that does
    /// not answer), keeping its caches. A client over the fabric keeps its
    /// snapshot (it reads the table itself when it needs to).
    pub fn refresh_directory(&mut self) {
        if let Some(d) = &self.dir {
            self.core().regions = d.snapshot();
        }
    }

    /// The endpoint.
    pub fn endpoint(&mut self) -> &mut E {
        self.driver.endpoint()
    }

    fn run<T: 'static>(
        &mut self,
        name: &'static str,
        make: impl FnOnce(&CellMachines, u64) -> Machine<T>,
    ) -> Result<T, Error> {
        let span = tracing::debug_span!("cell", op = name, node = self.machines.own.0);
        let _g = span.enter();
        let mut m = make(&self.machines, self.driver.next_id());
        let dir = &self.dir;
        let r = self.driver.run_machine(&mut m, &mut |e| {
            // A client over the fabric never asks (it reads the directory
            // itself); an empty snapshot would only make it ask again.
            client_effect(e, || {
                dir.as_ref()
                    .map_or_else(|| Arc::new(RegionMap::default()), |d| d.snapshot())
            })
        });
        self.last = m.stats();
        r
    }

    /// The value of `key`, or `None`.
    pub fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        self.core().cfg.check_key(key)?;
        let key = key.to_vec();
        self.run("get", move |m, id| m.get(key, true, id))
    }

    /// Whether `key` is present (a search: no extent is read).
    pub fn contains(&mut self, key: &[u8]) -> Result<bool, Error> {
        self.core().cfg.check_key(key)?;
        let key = key.to_vec();
        Ok(self
            .run("search", move |m, id| m.get(key, false, id))?
            .is_some())
    }

    /// Stores `value` under `key`; whether the key existed.
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> Result<bool, Error> {
        {
            let c = self.core();
            c.cfg.check_key(key)?;
            c.cfg.check_value(value)?;
        }
        let (key, value) = (key.to_vec(), value.to_vec());
        self.run("put", move |m, id| m.write(key, Some(value), id))
    }

    /// Deletes `key`; whether it existed.
    pub fn delete(&mut self, key: &[u8]) -> Result<bool, Error> {
        self.core().cfg.check_key(key)?;
        let key = key.to_vec();
        self.run("delete", move |m, id| m.write(key, None, id))
    }

    /// The entries with `from <= key < to` (`to = None`: to the end), in key
    /// order, at most `limit` (at most `scan_page`), as of one instant.
    pub fn scan(&mut self, from: &[u8], to: Option<&[u8]>, limit: usize) -> Result<Entries, Error> {
        let (from, to) = (from.to_vec(), to.map(<[u8]>::to_vec));
        self.run("scan", move |m, id| m.scan(from, to, limit, id))
    }
}

impl<E: Endpoint> KvClient for CellClient<E> {
    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        CellClient::get(self, key)
    }
    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<bool, Error> {
        CellClient::put(self, key, value)
    }
    fn delete(&mut self, key: &[u8]) -> Result<bool, Error> {
        CellClient::delete(self, key)
    }
    fn scan(&mut self, from: &[u8], to: Option<&[u8]>, limit: usize) -> Result<Entries, Error> {
        CellClient::scan(self, from, to, limit)
    }
    fn has_scans(&self) -> bool {
        true
    }
    fn last_stats(&self) -> OpStats {
        self.last
    }
    fn cache_hits(&self) -> u64 {
        self.core().stats.node_cache_hits
    }
}

/// Performs a client machine's effect, for every driver: a directory
/// snapshot from `snapshot`; clients neither read nor write logs.
pub fn client_effect(e: Effect, snapshot: impl FnOnce() -> Arc<RegionMap>) -> Resolution {
    match e {
        Effect::Regions => Resolution::Regions(snapshot()),
        Effect::Log { .. } | Effect::RemoveLog { .. } => Resolution::Logged(Err(Error::corrupt(
            CorruptionKind::Bug,
            "clients do not log",
        ))),
        Effect::ReadLog { .. } => Resolution::Records(Err(Error::corrupt(
            CorruptionKind::Bug,
            "clients do not read logs",
        ))),
    }
}

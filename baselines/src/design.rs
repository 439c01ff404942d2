//! Any baseline behind one type: [`AnyCore`] (a client's sans-IO core) and
//! [`AnyTable`] (one node's tables, the server workers' [`Handler`]), made
//! by [`SystemConfig::core`](crate::SystemConfig::core) and
//! [`SystemConfig::node_table`](crate::SystemConfig::node_table).
//!
//! The drivers (the threaded [`Deployment`](crate::Deployment), the cluster
//! simulator) hold these and name no system: a new baseline is its module
//! and its arms in [`SystemConfig`](crate::SystemConfig), nothing in the
//! drivers. The boxing costs one allocation per attempt or request and
//! changes no step of any machine.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use nessie_exec::mailbox::{Request, Status};
use nessie_exec::Handler;
use nessie_exec::{Io, Never, Plain};
use nessie_protocol::registry::Registry;
use nessie_protocol::{Config, Error, KvRequest};

use crate::client::{Attempt, ClientLogic, CoreSwitches};
use crate::retry::RetryBudget;

/// A future borrowed for `'a`, boxed (what the object-safe traits return).
type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// [`ClientLogic`] in a form a trait object can take: every core is one
/// through the blanket impl, and [`AnyCore`] is a [`ClientLogic`] again.
pub trait DynClientLogic: fmt::Debug + Send {
    /// [`ClientLogic::system`].
    fn system(&self) -> &'static str;
    /// [`ClientLogic::config`].
    fn config(&self) -> &Arc<Config>;
    /// [`ClientLogic::registry`].
    fn registry(&self) -> Registry;
    /// [`ClientLogic::attempt`], its future boxed.
    fn attempt_boxed<'a>(
        &'a mut self,
        io: &'a Io,
        op: KvRequest<'a>,
        budget: &'a mut RetryBudget,
    ) -> BoxFuture<'a, Attempt>;
    /// [`ClientLogic::cache_hits`].
    fn cache_hits(&self) -> u64;
    /// [`ClientLogic::set_switches`].
    fn set_switches(&mut self, switches: CoreSwitches);
}

impl<C: ClientLogic + fmt::Debug + Send> DynClientLogic for C {
    fn system(&self) -> &'static str {
        ClientLogic::system(self)
    }

    fn config(&self) -> &Arc<Config> {
        ClientLogic::config(self)
    }

    fn registry(&self) -> Registry {
        ClientLogic::registry(self)
    }

    fn attempt_boxed<'a>(
        &'a mut self,
        io: &'a Io,
        op: KvRequest<'a>,
        budget: &'a mut RetryBudget,
    ) -> BoxFuture<'a, Attempt> {
        Box::pin(ClientLogic::attempt(self, io, op, budget))
    }

    fn cache_hits(&self) -> u64 {
        ClientLogic::cache_hits(self)
    }

    fn set_switches(&mut self, switches: CoreSwitches) {
        ClientLogic::set_switches(self, switches)
    }
}

/// Any baseline's client core (NessieSD's, NessieHY's, Pilaf's, RACE's, or
/// a new one's), made by [`SystemConfig::core`](crate::SystemConfig::core).
pub type AnyCore = Box<dyn DynClientLogic>;

impl ClientLogic for AnyCore {
    fn system(&self) -> &'static str {
        (**self).system()
    }

    fn config(&self) -> &Arc<Config> {
        (**self).config()
    }

    fn registry(&self) -> Registry {
        (**self).registry()
    }

    fn attempt<'a>(
        &'a mut self,
        io: &'a Io,
        op: KvRequest<'a>,
        budget: &'a mut RetryBudget,
    ) -> impl Future<Output = Attempt> + 'a {
        (**self).attempt_boxed(io, op, budget)
    }

    fn cache_hits(&self) -> u64 {
        (**self).cache_hits()
    }

    fn set_switches(&mut self, switches: CoreSwitches) {
        (**self).set_switches(switches)
    }
}

/// A node's tables of a server-driven baseline: its [`Handler`] on plain
/// memory, and how many entries it handed out again after their quarantine.
pub trait NodeTable: Handler<Ext = Plain> {
    /// Entries handed out again after their quarantine, so far.
    fn reused(&self) -> u64;
}

/// [`NodeTable`] in a form a trait object can take.
trait DynNodeTable: Send + Sync {
    fn handle_boxed<'a>(
        &'a self,
        io: &'a Io,
        req: Request,
    ) -> BoxFuture<'a, Result<(Status, Vec<u8>), Error>>;
    fn claim_wait(&self) -> Duration;
    fn reused(&self) -> u64;
}

impl<T: NodeTable> DynNodeTable for T {
    fn handle_boxed<'a>(
        &'a self,
        io: &'a Io,
        req: Request,
    ) -> BoxFuture<'a, Result<(Status, Vec<u8>), Error>> {
        Box::pin(Handler::handle(self, io, req))
    }

    fn claim_wait(&self) -> Duration {
        Handler::claim_wait(self)
    }

    fn reused(&self) -> u64 {
        NodeTable::reused(self)
    }
}

/// Any baseline's tables on one node, made by
/// [`SystemConfig::node_table`](crate::SystemConfig::node_table): the
/// handler of that node's server workers, whichever system it is.
pub struct AnyTable(Box<dyn DynNodeTable>);

impl AnyTable {
    /// `table`, behind the one type.
    pub fn new(table: impl NodeTable) -> AnyTable {
        AnyTable(Box::new(table))
    }

    /// Entries the tables handed out again after their quarantine, so far.
    pub fn reused(&self) -> u64 {
        self.0.reused()
    }
}

impl fmt::Debug for AnyTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnyTable").finish_non_exhaustive()
    }
}

impl Handler for AnyTable {
    type Ext = Plain;

    async fn handle(&self, io: &Io, req: Request) -> Result<(Status, Vec<u8>), Error> {
        self.0.handle_boxed(io, req).await
    }

    fn ext(&self, e: Never) -> Never {
        match e {}
    }

    fn claim_wait(&self) -> Duration {
        self.0.claim_wait()
    }
}

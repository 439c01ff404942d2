//! NessieSD, the server-driven baseline (HERD-like): every GET, PUT and DELETE
//! is a request written into the key's home node's request slot and served
//! there by a server worker on the partially-coupled tables
//! ([`crate::coupled`]). A request to the client's own node is written by CPU
//! and answered by CPU, without the fabric.
//!
//! [`SdCore`] is the client as sans-IO logic (one attempt is one request,
//! `client::server_driven`); [`SdClient`] is its blocking driver.

use std::sync::Arc;

use nessie_protocol::registry::Registry;
use nessie_protocol::{ClientId, Config, Endpoint, Error};

use crate::client::{rpc_channel, server_driven, Attempt, BlockingClient, ClientLogic};
use crate::coupled::CoupledLayout;
use crate::retry::RetryBudget;
use nessie_exec::Io;
use nessie_exec::RpcClient;
use nessie_protocol::KvRequest;

/// A NessieSD client's state between operations.
#[derive(Debug)]
pub struct SdCore {
    cfg: Arc<Config>,
    layout: CoupledLayout,
    rpc: RpcClient,
}

impl SdCore {
    /// Client `id`'s core, its request channel `rpc`.
    pub fn new(cfg: Arc<Config>, layout: CoupledLayout, rpc: RpcClient) -> SdCore {
        SdCore { cfg, layout, rpc }
    }
}

impl ClientLogic for SdCore {
    fn system(&self) -> &'static str {
        "nessie-sd"
    }

    fn config(&self) -> &Arc<Config> {
        &self.cfg
    }

    fn registry(&self) -> Registry {
        Registry::after(self.layout.region_bytes(), self.cfg.clients_per_node)
    }

    async fn attempt(&mut self, io: &Io, op: KvRequest<'_>, _budget: &mut RetryBudget) -> Attempt {
        let home = self.layout.home(op.key());
        Attempt::Done(server_driven(io, &mut self.rpc, home, op).await)
    }
}

/// A NessieSD client (blocking).
pub type SdClient<E> = BlockingClient<SdCore, E>;

impl<E: Endpoint> BlockingClient<SdCore, E> {
    /// Client `id` on endpoint `ep` (an endpoint on `id.node`).
    pub fn new(
        cfg: Arc<Config>,
        layout: CoupledLayout,
        id: ClientId,
        ep: E,
    ) -> Result<SdClient<E>, Error> {
        let rpc = rpc_channel(layout.mailbox, id, &cfg);
        BlockingClient::from_core(SdCore::new(cfg, layout, rpc), id, ep)
    }
}

//! NessieSD, the server-driven baseline (HERD-like): every GET, PUT and DELETE
//! is a request written into the key's home node's request slot and served
//! there by a server worker on the partially-coupled tables
//! ([`crate::coupled`]). A request to the client's own node is written by CPU
//! and answered by CPU, without the fabric.

use std::sync::Arc;

use nessie_protocol::{ClientId, Config, Endpoint, Error, OpStats};

use crate::coupled::CoupledLayout;
use crate::io::Io;
use crate::kv::KvClient;
use crate::mailbox::{RpcOp, Status};
use crate::rpc::RpcClient;

/// A NessieSD client.
pub struct SdClient<E: Endpoint> {
    cfg: Arc<Config>,
    layout: CoupledLayout,
    io: Io<E>,
    pub(crate) rpc: RpcClient,
    last: OpStats,
}

impl<E: Endpoint> SdClient<E> {
    /// Client `id` on endpoint `ep` (an endpoint on `id.node`).
    pub fn new(cfg: Arc<Config>, layout: CoupledLayout, id: ClientId, ep: E) -> SdClient<E> {
        let timeout = cfg.retry.op_timeout;
        SdClient {
            rpc: RpcClient::new(layout.mailbox, id, cfg.clients_per_node, timeout),
            io: Io::new(ep, timeout),
            cfg,
            layout,
            last: OpStats::default(),
        }
    }

    fn call(&mut self, op: RpcOp, key: &[u8], value: &[u8]) -> Result<(Status, Vec<u8>), Error> {
        let home = self.layout.home(key);
        let r = self.rpc.request(
            &mut self.io,
            "nessie-sd",
            &self.cfg,
            home,
            op,
            key,
            value,
            &mut self.last,
        )?;
        Ok((r.status, r.value))
    }
}

impl<E: Endpoint> KvClient for SdClient<E> {
    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        let (status, value) = self.call(RpcOp::Get, key, &[])?;
        Ok((status == Status::Found).then_some(value))
    }

    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<bool, Error> {
        Ok(self.call(RpcOp::Put, key, value)?.0 == Status::Found)
    }

    fn delete(&mut self, key: &[u8]) -> Result<bool, Error> {
        Ok(self.call(RpcOp::Delete, key, &[])?.0 == Status::Found)
    }

    fn last_stats(&self) -> OpStats {
        self.last
    }
}

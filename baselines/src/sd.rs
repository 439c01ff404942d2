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
use crate::mailbox::{Request, RpcOp, Status};
use crate::rpc::RpcClient;

/// Checks a key and value against the configuration, as Nessie's client does.
pub fn check_sizes(cfg: &Config, key: &[u8], value: &[u8]) -> Result<(), Error> {
    if key.is_empty() || key.len() > cfg.max_key_len as usize {
        return Err(Error::KeyTooLarge {
            len: key.len(),
            max: cfg.max_key_len,
        });
    }
    if value.len() > cfg.max_value_len as usize {
        return Err(Error::ValueTooLarge {
            len: value.len(),
            max: cfg.max_value_len,
        });
    }
    Ok(())
}

/// A NessieSD client.
pub struct SdClient<E: Endpoint> {
    cfg: Arc<Config>,
    layout: CoupledLayout,
    io: Io<E>,
    rpc: RpcClient,
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
        check_sizes(&self.cfg, key, value)?;
        let home = self.layout.home(key);
        let span = tracing::debug_span!("sd", ?op, home = %home, key_len = key.len());
        let _g = span.enter();
        let mut stats = OpStats {
            attempts: 1,
            ..OpStats::default()
        };
        let req = Request {
            op,
            key: key.to_vec(),
            value: value.to_vec(),
        };
        let r = self.rpc.call(&mut self.io, home, &req, &mut stats);
        self.last = stats;
        let resp = r?;
        if let Some(e) = resp.error(home) {
            return Err(e);
        }
        Ok((resp.status, resp.value))
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

//! Pilaf (placeholder while it is being written).

use std::sync::Arc;

use nessie_protocol::{ClientId, Config, Endpoint, Error, NodeId, OpStats};

use crate::io::Io;
use crate::kv::KvClient;
use crate::mailbox::{MailboxLayout, Request, Status};
use crate::server::Handler;

/// Pilaf's layout.
#[derive(Clone, Copy, Debug)]
pub struct PilafLayout {
    /// Slots.
    pub mailbox: MailboxLayout,
}
impl PilafLayout {
    /// Layout.
    pub fn new(cfg: &Config) -> PilafLayout {
        PilafLayout {
            mailbox: MailboxLayout::new(
                0,
                u32::from(cfg.nodes) * u32::from(cfg.clients_per_node),
                cfg.max_key_len,
                cfg.max_value_len,
            ),
        }
    }
    /// Bytes.
    pub fn region_bytes(&self) -> u64 {
        self.mailbox.bytes()
    }
}
/// Table.
pub struct PilafTable;
impl PilafTable {
    /// New.
    pub fn new(_l: PilafLayout, _n: NodeId, _c: &Config) -> PilafTable {
        PilafTable
    }
}
impl<E: Endpoint> Handler<E> for PilafTable {
    fn handle(&self, _io: &mut Io<E>, _req: &Request) -> Result<(Status, Vec<u8>), Error> {
        Ok((Status::BadRequest, Vec::new()))
    }
}
/// Client.
pub struct PilafClient;
impl PilafClient {
    /// New.
    pub fn new<E: Endpoint>(
        _c: Arc<Config>,
        _l: PilafLayout,
        _id: ClientId,
        _ep: E,
    ) -> PilafClient {
        PilafClient
    }
}
impl KvClient for PilafClient {
    fn get(&mut self, _key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        Err(Error::Timeout)
    }
    fn put(&mut self, _key: &[u8], _value: &[u8]) -> Result<bool, Error> {
        Err(Error::Timeout)
    }
    fn delete(&mut self, _key: &[u8]) -> Result<bool, Error> {
        Err(Error::Timeout)
    }
    fn last_stats(&self) -> OpStats {
        OpStats::default()
    }
}

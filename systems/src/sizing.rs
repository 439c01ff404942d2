//! How `nessie run` and `nessie bench` size a store: index table entries for
//! a target load factor, and data table entries for the keys a client owns
//! plus the entries that PUTs free and that stay quarantined for the
//! expiration period T before reuse.

use std::time::Duration;

use nessie_protocol::{Config, ConfigError};

/// The shape of a simulated store.
#[derive(Clone, Debug)]
pub struct Shape {
    /// Nodes.
    pub nodes: u16,
    /// Client threads per node.
    pub clients: u16,
    /// Distinct keys stored.
    pub keys: u64,
    /// Largest key.
    pub key_size: u32,
    /// Largest value.
    pub value_size: u32,
    /// Index load factor after the preload.
    pub load_factor: f64,
    /// Recursive MIGRATE depth.
    pub migrate_depth: u8,
    /// The expiration period T.
    pub expiration: Duration,
}

/// Bytes of quarantine headroom each client gets (bounded below and above by
/// entry counts): a PUT frees one entry, which is reusable only after T, so a
/// client needs its PUT rate x T entries on top of the keys it owns.
pub const HEADROOM_BYTES_PER_CLIENT: u64 = 64 << 20;
/// Fewest headroom entries per client (large values).
pub const MIN_HEADROOM: u64 = 1024;
/// Most headroom entries per client (small values).
pub const MAX_HEADROOM: u64 = 32_768;

/// The Nessie configuration (shared by all systems) for `shape`.
pub fn store_config(shape: &Shape) -> Result<Config, ConfigError> {
    let nodes = u64::from(shape.nodes.max(1));
    let clients = u64::from(shape.clients.max(1));
    let slots = (shape.keys as f64 / shape.load_factor / nodes as f64).ceil() as u64;
    let mut cfg = Config {
        nodes: shape.nodes,
        index_slots_per_node: slots.clamp(64, u64::from(u32::MAX)) as u32,
        clients_per_node: shape.clients,
        max_key_len: shape.key_size,
        max_value_len: shape.value_size,
        max_migrate_depth: shape.migrate_depth,
        expiration: shape.expiration,
        deadline_margin: (shape.expiration / 40).max(Duration::from_millis(1)),
        ..Config::default()
    };
    let entry = cfg.layout().entry_bytes().max(1);
    // Keys a client owns after the preload, with slack for the drift of
    // ownership as PUTs move entries to their writers.
    let owned = shape.keys.div_ceil(nodes * clients);
    let headroom = (HEADROOM_BYTES_PER_CLIENT / entry).clamp(MIN_HEADROOM, MAX_HEADROOM);
    let per_client = owned + owned / 2 + 64 + headroom;
    cfg.dtes_per_node = (per_client * clients).min(u64::from(u32::MAX)) as u32;
    cfg.validate()?;
    Ok(cfg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_scale_with_keys_and_values() {
        let mut s = Shape {
            nodes: 3,
            clients: 2,
            keys: 6000,
            key_size: 128,
            value_size: 256,
            load_factor: 0.5,
            migrate_depth: 6,
            expiration: Duration::from_millis(100),
        };
        let small = store_config(&s).unwrap();
        assert_eq!(small.index_slots_per_node, 4000);
        assert!(small.dtes_per_node >= 2 * (1000 + 32_768));
        s.value_size = 128 << 10;
        let big = store_config(&s).unwrap();
        assert_eq!(big.dtes_per_node, 2 * (1000 + 500 + 64 + 1024));
    }
}

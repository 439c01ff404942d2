//! How `nessie run` and `nessie bench` size a store: index table entries for
//! a target load factor, and data table entries for the keys a client owns
//! plus the entries that PUTs free and that stay quarantined for the
//! expiration period T before reuse; with size classes, a ladder of entry
//! sizes provisioned for the run's value sizes ([`class_ladder`]); and what
//! a store's memory holds after a run ([`Footprint`]).

use std::time::Duration;

use nessie_protocol::layout::{DataEntryHeader, IndexEntry, SizeClass, HEADER_BYTES};
use nessie_protocol::{Config, ConfigError, NodeId, Region};
use nessie_workload::size_bits;
use nessie_workload::ValueMix;

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
    /// How value sizes are drawn (at most `value_size`).
    pub value_mix: ValueMix,
    /// Size classes below the main one (a ladder for `value_mix`), or
    /// every entry sized for the largest value.
    pub size_classes: bool,
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
    // Keys a client owns after the preload, with slack for the drift of
    // ownership as PUTs move entries to their writers.
    let owned = shape.keys.div_ceil(nodes * clients);
    let per_node = |per_client: u64| (per_client * clients).min(u64::from(u32::MAX)) as u32;
    if !shape.size_classes {
        let entry = cfg.layout().entry_bytes().max(1);
        let headroom = (HEADROOM_BYTES_PER_CLIENT / entry).clamp(MIN_HEADROOM, MAX_HEADROOM);
        cfg.dtes_per_node = per_node(owned + owned / 2 + 64 + headroom);
        cfg.validate()?;
        return Ok(cfg);
    }
    // Each class gets its share of the entries a client needs (the share
    // of the run's writes that land in it, measured over 100,000 draws),
    // with the same slack and four standard deviations more (a class that
    // takes few writes sees bursts), at least a few entries (2 for classes
    // past 64 KiB, 16 below).
    cfg.size_classes = ladder_classes(cfg.layout().entry_bytes(), 0);
    let shares = class_shares(&cfg, shape.value_mix, shape.key_size, shape.value_size);
    let mean_entry: f64 = shares
        .iter()
        .enumerate()
        .map(|(c, f)| f * cfg.data_tables().layout(c as u8).entry_bytes() as f64)
        .sum();
    let headroom = (HEADROOM_BYTES_PER_CLIENT as f64 / mean_entry.max(1.0))
        .clamp(MIN_HEADROOM as f64, MAX_HEADROOM as f64);
    let need = (owned + owned / 2 + 64) as f64 + headroom;
    let tables = cfg.data_tables();
    let count = |c: u8, share: f64| {
        let floor = if tables.layout(c).entry_bytes() > 64 << 10 {
            2
        } else {
            16
        };
        let mean = need * share;
        per_node(((mean + 4.0 * mean.sqrt()).ceil() as u64).max(floor))
    };
    let counts: Vec<u32> = shares
        .iter()
        .enumerate()
        .map(|(c, &f)| count(c as u8, f))
        .collect();
    cfg.dtes_per_node = counts[0];
    for (class, n) in cfg.size_classes.iter_mut().zip(&counts[1..]) {
        class.dtes_per_node = *n;
    }
    cfg.validate()?;
    Ok(cfg)
}

/// Ratio of one size class's entries to the next smaller one's.
pub const CLASS_RATIO: f64 = 1.25;

/// The smallest size class's entries: the header and 32 bytes of key and
/// value.
pub const SMALLEST_CLASS: u32 = 64;

/// The entry sizes of a ladder of size classes below a main class of
/// `main_entry` bytes: from [`SMALLEST_CLASS`] up by [`CLASS_RATIO`]
/// (rounded up to 8 bytes), each smaller than the main entry; a coarser
/// ratio if that would take more classes than the index word names (63).
pub fn class_ladder(main_entry: u64) -> Vec<u32> {
    let mut ratio = CLASS_RATIO;
    loop {
        let mut out = Vec::new();
        let mut e = f64::from(SMALLEST_CLASS);
        while (e as u64) < main_entry {
            let bytes = ((e.ceil() as u64).div_ceil(8) * 8) as u32;
            if out.last().is_none_or(|&l| bytes > l) && u64::from(bytes) < main_entry {
                out.push(bytes);
            }
            e *= ratio;
        }
        if out.len() < nessie_protocol::layout::MAX_CLASSES {
            return out;
        }
        ratio *= CLASS_RATIO;
    }
}

/// The size classes of [`class_ladder`] below a main entry of `main_entry`
/// bytes, each with `dtes_per_node` entries.
pub fn ladder_classes(main_entry: u64, dtes_per_node: u32) -> Vec<SizeClass> {
    class_ladder(main_entry)
        .into_iter()
        .map(|entry_bytes| SizeClass {
            entry_bytes,
            dtes_per_node,
        })
        .collect()
}

/// The share of writes of keys of `key_size` bytes with values drawn from
/// `sizes` (at most `max`) that each class of `cfg` takes (class 0 first),
/// over 100,000 draws.
pub fn class_shares(cfg: &Config, sizes: ValueMix, key_size: u32, max: u32) -> Vec<f64> {
    const DRAWS: u64 = 100_000;
    let tables = cfg.data_tables();
    let mut counts = vec![0u64; tables.len()];
    for i in 0..DRAWS {
        let v = sizes.size(max, 1, size_bits(0x5112e, i)) as usize;
        if let Some(c) = tables.class_for(key_size as usize, v) {
            counts[usize::from(c)] += 1;
        }
    }
    counts.iter().map(|&n| n as f64 / DRAWS as f64).collect()
}

/// What a store's memory holds: its keys, their bytes, the bytes of the
/// entries that hold them, and the memory it reserved.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Footprint {
    /// Keys linked (present index words naming a committed value).
    pub keys: u64,
    /// Bytes of those keys and their values.
    pub stored: u64,
    /// Bytes of the data table entries that hold them.
    pub in_entries: u64,
    /// Bytes the store reserved: every node's index and data regions.
    pub reserved: u64,
}

impl Footprint {
    /// Reads the footprint of a store of `cfg` whose memory `read` returns
    /// (node, region, offset, length; `None`: unreadable), at rest.
    pub fn measure(
        cfg: &Config,
        read: impl Fn(NodeId, Region, u64, u64) -> Option<Vec<u8>>,
    ) -> Footprint {
        let tables = cfg.data_tables();
        let topo = cfg.topology();
        let mut f = Footprint {
            reserved: u64::from(topo.nodes)
                * (u64::from(topo.index_slots_per_node) * 8 + topo.data_bytes_per_node),
            ..Footprint::default()
        };
        for n in 0..cfg.nodes {
            let node = NodeId(n);
            let Some(index) = read(
                node,
                Region::Index,
                0,
                u64::from(cfg.index_slots_per_node) * 8,
            ) else {
                continue;
            };
            for w in index.chunks_exact(8) {
                let word = IndexEntry(u64::from_le_bytes(w.try_into().unwrap_or_default()));
                let Some(d) = word.dte() else { continue };
                let at = tables.entry_offset(d);
                let Some(h) = read(d.node(), Region::Data, at, HEADER_BYTES)
                    .as_deref()
                    .and_then(DataEntryHeader::decode)
                else {
                    continue;
                };
                if h.state.state != nessie_protocol::DteState::Valid {
                    continue;
                }
                f.keys += 1;
                f.stored += u64::from(h.state.key_len) + u64::from(h.state.value_len);
                f.in_entries += tables.layout_of(d).entry_bytes();
            }
        }
        f
    }

    /// Bytes of entries per byte stored (1.0: no waste).
    pub fn entry_overhead(&self) -> f64 {
        self.in_entries as f64 / self.stored.max(1) as f64
    }

    /// Bytes reserved per byte stored.
    pub fn reserved_overhead(&self) -> f64 {
        self.reserved as f64 / self.stored.max(1) as f64
    }
}

impl std::fmt::Display for Footprint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} keys, {:.1} MiB of keys and values in {:.1} MiB of entries ({:.2} bytes per byte stored); {:.1} MiB reserved ({:.2} per byte stored)",
            self.keys,
            self.stored as f64 / 1048576.0,
            self.in_entries as f64 / 1048576.0,
            self.entry_overhead(),
            self.reserved as f64 / 1048576.0,
            self.reserved_overhead()
        )
    }
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
            value_mix: ValueMix::Fixed,
            size_classes: false,
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

    /// Classes from 64 B up by a quarter, rounded to 8, below the main
    /// entry; a coarser ladder when 63 classes would not reach it.
    #[test]
    fn the_ladder_climbs_by_a_quarter_below_the_main_entry() {
        let l = class_ladder(416);
        assert_eq!(l, vec![64, 80, 104, 128, 160, 200, 248, 312, 384]);
        let huge = class_ladder(1 << 30);
        assert!(huge.len() < 64 && huge.windows(2).all(|w| w[0] < w[1]));
        assert!(*huge.last().unwrap() > 1 << 28);
    }

    /// With classes, the ETC mix's writes spread over the ladder and each
    /// class is provisioned for its share (the small ones most).
    #[test]
    fn classes_are_provisioned_for_the_value_mix() {
        let s = Shape {
            nodes: 3,
            clients: 2,
            keys: 60_000,
            key_size: 32,
            value_size: 1 << 20,
            value_mix: ValueMix::Etc,
            size_classes: true,
            load_factor: 0.5,
            migrate_depth: 6,
            expiration: Duration::from_millis(100),
        };
        let cfg = store_config(&s).unwrap();
        assert!(cfg.size_classes.len() > 30, "{}", cfg.size_classes.len());
        let shares = class_shares(&cfg, ValueMix::Etc, 32, 1 << 20);
        assert!((shares.iter().sum::<f64>() - 1.0).abs() < 1e-9);
        let busiest = (1..shares.len())
            .max_by(|&a, &b| shares[a].total_cmp(&shares[b]))
            .unwrap();
        let entries = cfg.size_classes[busiest - 1].dtes_per_node;
        assert!(
            entries > cfg.dtes_per_node,
            "{entries} vs main {}",
            cfg.dtes_per_node
        );
        assert!(cfg.topology().data_bytes_per_node < 4 << 30);
    }
}

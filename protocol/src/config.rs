//! Configuration of a Nessie deployment and of its clients, validated up front.

use std::time::Duration;

use crate::addr::{ClientId, IteAddr};
use crate::error::{ConfigError, Error};
use crate::fabric::{Topology, WindowId};
use crate::hash::Hasher;
use crate::layout::{
    DataLayout, DataTables, SizeClass, HEADER_BYTES, MAX_CLASSES, MAX_FILTER_BITS, MAX_NODES,
};

/// Exponential back-off with jitter, and the client-level retry budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RetryPolicy {
    /// Back-off before the first retry.
    pub initial_backoff: Duration,
    /// Upper bound of the back-off.
    pub max_backoff: Duration,
    /// The client gives up with `Error::Timeout` once an operation (all its
    /// attempts) has run this long.
    pub op_timeout: Duration,
    /// The client also gives up with `Error::Timeout` after this many attempts
    /// (0: no limit besides `op_timeout`).
    pub max_attempts: u32,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            initial_backoff: Duration::from_micros(2),
            max_backoff: Duration::from_millis(2),
            op_timeout: Duration::from_secs(10),
            max_attempts: 0,
        }
    }
}

/// Everything the protocol needs to know about the deployment.
///
/// All clients of a deployment must use the same values for the fields that
/// shape the tables (nodes, slots, sizes, candidates, filter bits, seed).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Config {
    /// Nodes in the cluster (node ids `0..nodes`).
    pub nodes: u16,
    /// Index table entries per node.
    pub index_slots_per_node: u32,
    /// Data table entries per node.
    pub dtes_per_node: u32,
    /// Clients per node; each owns an equal share of its node's data table.
    pub clients_per_node: u16,
    /// Clients without storage per node (0: none): each holds a share of
    /// the node's data tables, as a client of the node does, but runs
    /// elsewhere and writes its entries over the fabric through memory
    /// windows the node's agent binds, never by CPU (docs/protocol.md §2.4).
    /// Their ids on the node follow the node's own clients':
    /// `clients_per_node .. clients_per_node + pure_clients_per_node`.
    pub pure_clients_per_node: u16,
    /// How long a client without storage's heartbeat may stand still before
    /// its node's agent takes its share back (binding its windows again:
    /// docs/protocol.md §2.4). Safety does not rest on it; it only decides
    /// how soon a dead client's share is reused, and a client that writes
    /// less often than this loses its share (`Error::LeaseLost`).
    pub lease_term: Duration,
    /// Largest key in bytes.
    pub max_key_len: u32,
    /// Largest value in bytes. The main data table (size class 0,
    /// `dtes_per_node` entries per node) holds any key with any value.
    pub max_value_len: u32,
    /// Smaller size classes, ascending by entry size (empty: one class,
    /// every entry sized for the largest key and value). Each is a data
    /// table of its own on every node, after the main one in the data
    /// region; a PUT writes its entry in the smallest class its key and
    /// value fit (docs/protocol.md §2.3).
    pub size_classes: Vec<SizeClass>,
    /// Cuckoo candidates per key (N), 1 to 8: the buckets a key may live in.
    pub candidates: u8,
    /// Index table entries per bucket (B), 1 to 8: a key may live in any slot
    /// of its N buckets, and a bucket is read with one READ of `8 B` bytes.
    /// `index_slots_per_node` is a multiple of it.
    pub bucket_slots: u8,
    /// Index generations each node's index region holds (1 to 16; 1: the
    /// index never grows). Generation *g* has `index_slots_per_node · 2^g`
    /// entries per node; the index starts in generation 0 and grows online,
    /// driven by clients, into each next one (docs/protocol.md §2.5), so the
    /// region is `index_slots_per_node · (2^G - 1)` entries plus the
    /// directory word. Past the last, a full index answers
    /// `Error::IndexAtLimit`.
    pub index_generations: u8,
    /// While the index can still grow (its newest generation is not the
    /// last), the longest chain of moves an insert's breadth-first search
    /// makes room with: an insert that would need a longer one grows the
    /// index instead (docs/protocol.md §2.5, "who grows"), so that a
    /// growing index is grown before its inserts turn into long chains
    /// (with buckets it would otherwise fill to 0.99 first). In the last
    /// generation, and with `index_generations` 1, `max_migrate_depth`
    /// bounds the search.
    pub growth_depth: u8,
    /// Filter bits in index table entries (0 disables them), at most 15.
    pub filter_bits: u8,
    /// Seed of the candidate and filter hashes.
    pub hash_seed: u64,
    /// The expiration period T: an unlinked data table entry is not reused for
    /// T, and every operation attempt ends within T of its start.
    pub expiration: Duration,
    /// Largest difference between two nodes' clocks.
    pub clock_skew: Duration,
    /// An owner does not start a mutation with less than this left before its
    /// deadline (bounds how late a posted operation can land).
    pub deadline_margin: Duration,
    /// Recursive MIGRATE depth at which a PUT gives up with `TableFull`.
    pub max_migrate_depth: u8,
    /// How a PUT whose candidates are all taken looks for a chain of moves.
    pub migrate_search: MigrateSearch,
    /// Entries in each client's local cache of remote data table entries (0: off).
    pub cache_capacity: usize,
    /// GETs fall back to an in-progress entry's previous version.
    pub previous_versions: bool,
    /// GETs read header and key first and the value only on a match.
    pub multiple_reads: bool,
    /// Back-off and retry budget.
    pub retry: RetryPolicy,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            nodes: 3,
            index_slots_per_node: 4096,
            dtes_per_node: 4096,
            clients_per_node: 4,
            pure_clients_per_node: 0,
            lease_term: Duration::from_secs(3),
            max_key_len: 128,
            max_value_len: 256,
            size_classes: Vec::new(),
            candidates: 3,
            bucket_slots: 1,
            index_generations: 1,
            growth_depth: 2,
            filter_bits: 7,
            hash_seed: 0x4e65_7373_6965,
            expiration: Duration::from_secs(1),
            clock_skew: Duration::from_millis(1),
            deadline_margin: Duration::from_millis(10),
            max_migrate_depth: 4,
            migrate_search: MigrateSearch::BreadthFirst,
            cache_capacity: 1024,
            previous_versions: true,
            multiple_reads: false,
            retry: RetryPolicy::default(),
        }
    }
}

/// How a PUT whose candidates are all taken searches the cuckoo graph for a
/// chain of MIGRATEs that frees one of them (docs/protocol.md §5.5).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum MigrateSearch {
    /// Breadth first, two rounds per level whatever its width, for the
    /// shortest chain; bounded by `max_migrate_depth` and by what the
    /// attempt can still afford, then `TableFull` at once (as MemC3 and
    /// libcuckoo search).
    #[default]
    BreadthFirst,
    /// Depth first with backtracking, one entry at a time, moving as it
    /// goes (the first version of this crate, kept for comparison).
    DepthFirst,
}

fn check(
    ok: bool,
    field: &'static str,
    value: impl ToString,
    reason: &'static str,
) -> Result<(), ConfigError> {
    if ok {
        Ok(())
    } else {
        Err(ConfigError::OutOfRange {
            field,
            value: value.to_string(),
            reason,
        })
    }
}

impl Config {
    /// Checks every field; the protocol only runs with a validated configuration.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check(self.nodes >= 1, "nodes", self.nodes, "at least 1")?;
        check(
            self.nodes <= MAX_NODES,
            "nodes",
            self.nodes,
            "at most 1,023 (the index word's 10-bit node field holds the id plus one)",
        )?;
        check(
            self.index_slots_per_node >= 1,
            "index_slots_per_node",
            self.index_slots_per_node,
            "at least 1",
        )?;
        check(
            (1..=8).contains(&self.candidates),
            "candidates",
            self.candidates,
            "1 to 8",
        )?;
        check(
            (1..=8).contains(&self.bucket_slots),
            "bucket_slots",
            self.bucket_slots,
            "1 to 8",
        )?;
        check(
            self.index_slots_per_node
                .is_multiple_of(u32::from(self.bucket_slots.max(1))),
            "index_slots_per_node",
            self.index_slots_per_node,
            "a multiple of `bucket_slots`",
        )?;
        check(
            u64::from(self.nodes) * u64::from(self.index_slots_per_node)
                >= u64::from(self.candidates) * u64::from(self.bucket_slots),
            "index_slots_per_node",
            self.index_slots_per_node,
            "the cluster needs at least `candidates` buckets",
        )?;
        check(
            self.bucket_slots <= 1 || self.migrate_search == MigrateSearch::BreadthFirst,
            "migrate_search",
            format!(
                "{:?} with bucket_slots {}",
                self.migrate_search, self.bucket_slots
            ),
            "breadth first with buckets: the depth-first search (kept for comparison with \
             one-entry candidates) branches B(N-1) ways a move with no budget, so near full a \
             lone PUT's every attempt can run out of time (the bucketed swarm's case 98,439)",
        )?;
        check(
            self.index_generations <= 1 || self.migrate_search == MigrateSearch::BreadthFirst,
            "migrate_search",
            format!(
                "{:?} with index_generations {}",
                self.migrate_search, self.index_generations
            ),
            "breadth first on an index that may grow: the depth-first search has no budget, so \
             in a crowded generation a lone PUT's every attempt can run out of time searching \
             (the growth swarm's seeds 473 and 681, with clients without storage)",
        )?;
        check(
            (1..=crate::growth::MAX_GENERATIONS).contains(&self.index_generations),
            "index_generations",
            self.index_generations,
            "1 to 16",
        )?;
        check(
            self.index_generations <= 1
                || usize::from(self.candidates) * usize::from(self.bucket_slots)
                    <= crate::growth::MAX_GROWING_POSITIONS,
            "index_generations",
            format!(
                "{} with {} candidates of {} slots",
                self.index_generations, self.candidates, self.bucket_slots
            ),
            "an index that grows keeps at most 16 candidate entries per key (N x B): a MIGRATE \
             copy records its positions in 4 bits and the generation modulo 4 in two more",
        )?;
        check(
            u64::from(self.index_slots_per_node)
                .checked_shl(u32::from(self.index_generations))
                .is_some_and(|s| s <= u64::from(u32::MAX)),
            "index_slots_per_node",
            self.index_slots_per_node,
            "the index region of every generation must fit 2^32 entries per node",
        )?;
        check(
            self.filter_bits <= MAX_FILTER_BITS,
            "filter_bits",
            self.filter_bits,
            "at most 15",
        )?;
        check(
            self.shares_per_node() >= 1,
            "clients_per_node",
            self.clients_per_node,
            "at least 1 client per node, with storage or without",
        )?;
        check(
            self.dtes_per_node / u32::from(self.shares_per_node().max(1)) >= 2,
            "dtes_per_node",
            self.dtes_per_node,
            "each client (with storage or without) needs at least 2 data table entries",
        )?;
        check(
            (1..=u32::from(crate::layout::MAX_KEY_LEN_FIELD)).contains(&self.max_key_len),
            "max_key_len",
            self.max_key_len,
            "1 to 4095 bytes",
        )?;
        check(
            self.max_value_len <= crate::layout::data_entry_max_value(),
            "max_value_len",
            self.max_value_len,
            "at most 2^28 - 1 bytes",
        )?;
        check(
            self.layout()
                .entry_bytes()
                .checked_mul(u64::from(self.dtes_per_node))
                .is_some(),
            "dtes_per_node",
            self.dtes_per_node,
            "data table too large",
        )?;
        self.validate_size_classes()?;
        check(
            !self.expiration.is_zero(),
            "expiration",
            format!("{:?}", self.expiration),
            "must be positive",
        )?;
        check(
            self.deadline_margin + self.clock_skew < self.expiration,
            "deadline_margin",
            format!("{:?}", self.deadline_margin),
            "deadline_margin + clock_skew must be shorter than expiration",
        )?;
        check(
            self.max_migrate_depth >= 1,
            "max_migrate_depth",
            self.max_migrate_depth,
            "at least 1",
        )?;
        check(
            self.retry.initial_backoff <= self.retry.max_backoff,
            "retry.initial_backoff",
            format!("{:?}", self.retry.initial_backoff),
            "must not exceed retry.max_backoff",
        )?;
        check(
            !self.retry.op_timeout.is_zero(),
            "retry.op_timeout",
            format!("{:?}", self.retry.op_timeout),
            "must be positive",
        )?;
        Ok(())
    }

    fn validate_size_classes(&self) -> Result<(), ConfigError> {
        let classes = &self.size_classes;
        check(
            classes.len() < MAX_CLASSES,
            "size_classes",
            classes.len(),
            "at most 63 classes besides the main one (the index word's 6-bit class field)",
        )?;
        let main = self.layout().entry_bytes();
        let mut below = 0u32;
        for c in classes {
            check(
                c.entry_bytes.is_multiple_of(8)
                    && u64::from(c.entry_bytes) >= HEADER_BYTES + 8
                    && c.entry_bytes > below,
                "size_classes",
                c.entry_bytes,
                "each class's entry_bytes a multiple of 8, at least 40 (the 32-byte header \
                 and 8 bytes of key) and larger than the class before it",
            )?;
            check(
                u64::from(c.entry_bytes) < main,
                "size_classes",
                c.entry_bytes,
                "each class smaller than the main class's entries (header, longest key, \
                 largest value)",
            )?;
            check(
                c.dtes_per_node / u32::from(self.shares_per_node().max(1)) >= 2,
                "size_classes",
                c.dtes_per_node,
                "each client needs at least 2 data table entries of each class",
            )?;
            below = c.entry_bytes;
        }
        check(
            self.data_tables().checked_region_bytes().is_some(),
            "size_classes",
            classes.len(),
            "data region too large",
        )
    }

    /// Checks a key: 1 to `max_key_len` bytes, else [`Error::EmptyKey`] or
    /// [`Error::KeyTooLarge`].
    pub fn check_key(&self, key: &[u8]) -> Result<(), Error> {
        if key.is_empty() {
            return Err(Error::EmptyKey {
                max: self.max_key_len,
            });
        }
        if key.len() > self.max_key_len as usize {
            return Err(Error::KeyTooLarge {
                len: key.len(),
                max: self.max_key_len,
            });
        }
        Ok(())
    }

    /// Checks a value: at most `max_value_len` bytes, else [`Error::ValueTooLarge`].
    pub fn check_value(&self, value: &[u8]) -> Result<(), Error> {
        if value.len() > self.max_value_len as usize {
            return Err(Error::ValueTooLarge {
                len: value.len(),
                max: self.max_value_len,
            });
        }
        Ok(())
    }

    /// The data tables of every size class, class 0 (the main one) first:
    /// where each lies in a node's data region and its entries' sizes.
    pub fn data_tables(&self) -> DataTables<'_> {
        DataTables::new(
            self.max_key_len,
            SizeClass {
                entry_bytes: u32::try_from(self.layout().entry_bytes()).unwrap_or(u32::MAX),
                dtes_per_node: self.dtes_per_node,
            },
            &self.size_classes,
        )
    }

    /// Entry sizes of the main data table (size class 0; a class's own:
    /// [`DataTables::layout`]).
    pub fn layout(&self) -> DataLayout {
        DataLayout::for_sizes(self.max_key_len, self.max_value_len)
    }

    /// Index table entries each node's index region holds: every
    /// generation's, then (with more than one) the directory word and its
    /// companion (docs/protocol.md §2.5).
    pub fn index_region_slots(&self) -> u32 {
        if self.index_generations <= 1 {
            return self.index_slots_per_node;
        }
        crate::hash::generation_base(self.index_slots_per_node, self.index_generations)
            .saturating_add(crate::growth::DIRECTORY_SLOTS)
    }

    /// Every entry of `key`'s in any generation of the index, generation
    /// by generation (the checkers' view: a key may be linked in two
    /// generations while it grows).
    pub fn candidates_in_every_generation(&self, key: &[u8]) -> Vec<IteAddr> {
        let h = self.hasher();
        (0..self.index_generations.max(1))
            .flat_map(|g| h.candidates_in(key, g))
            .collect()
    }

    /// Candidate and filter hashing.
    pub fn hasher(&self) -> Hasher {
        Hasher {
            seed: self.hash_seed,
            candidates: self.candidates,
            bucket_slots: self.bucket_slots,
            nodes: self.nodes,
            slots_per_node: self.index_slots_per_node,
            filter_bits: self.filter_bits,
        }
    }

    /// Main-class data table entries owned by each client (each class's
    /// table is shared out the same way: [`crate::alloc::Allocator`]).
    pub fn dtes_per_client(&self) -> u32 {
        self.dtes_per_node / u32::from(self.shares_per_node().max(1))
    }

    /// Shares of each data table per node: one per client of the node and
    /// one per client without storage it hosts.
    pub fn shares_per_node(&self) -> u16 {
        self.clients_per_node
            .saturating_add(self.pure_clients_per_node)
    }

    /// Whether `id` is a client without storage: it writes its share
    /// through memory windows, never by CPU (docs/protocol.md §2.4).
    pub fn is_pure(&self, id: ClientId) -> bool {
        id.index >= self.clients_per_node
    }

    /// The memory window through which client without storage `id` writes
    /// its share of size class `class` (`None` for a client of a node):
    /// each pure client of a node has one window per class, bound over
    /// exactly its share ([`Config::share_range`]).
    pub fn window_of(&self, id: ClientId, class: u8) -> Option<WindowId> {
        if !self.is_pure(id) || usize::from(class) >= self.data_tables().len() {
            return None;
        }
        let pure = u32::from(id.index - self.clients_per_node);
        let classes = self.data_tables().len() as u32;
        Some(WindowId {
            node: id.node,
            index: pure * classes + u32::from(class),
        })
    }

    /// Bytes of one lease block (docs/protocol.md §2.4): the lease word,
    /// the heartbeat and one key word per size class.
    pub fn lease_block_bytes(&self) -> u64 {
        8 * (2 + self.data_tables().len() as u64)
    }

    /// Where client without storage `id`'s lease block lies in its node's
    /// data region (after every class's table): its lease word, then the key
    /// of each class's window, which the node's agent writes.
    pub fn lease_block(&self, id: ClientId) -> Option<u64> {
        if !self.is_pure(id) || id.index >= self.shares_per_node() {
            return None;
        }
        let pure = u64::from(id.index - self.clients_per_node);
        Some(self.data_tables().region_bytes() + pure * self.lease_block_bytes())
    }

    /// The bytes of its node's data region that client `id`'s share of size
    /// class `class` occupies: (offset, length).
    pub fn share_range(&self, id: ClientId, class: u8) -> Option<(u64, u64)> {
        let tables = self.data_tables();
        let c = tables.class(class)?;
        let (first, count) = self.share_entries(id, class)?;
        let first = crate::addr::DteAddr::new(id.node, class, first);
        Some((
            tables.entry_offset(first),
            u64::from(count) * u64::from(c.entry_bytes),
        ))
    }

    /// The entries of its node's table of size class `class` that client
    /// `id` owns: (first index, count), the `id.index`-th of
    /// `shares_per_node` equal shares (the node's clients', then its
    /// clients without storage's). The one rule the allocator and the
    /// windows (which must cover exactly the share) both follow.
    pub fn share_entries(&self, id: ClientId, class: u8) -> Option<(u32, u32)> {
        let c = self.data_tables().class(class)?;
        let per = c.dtes_per_node / u32::from(self.shares_per_node().max(1));
        Some((u32::from(id.index) * per, per))
    }

    /// How long a data table entry whose value a PUT replaced stays
    /// unreusable: the expiration period and the clock-skew allowance (a
    /// mark by another client is freed by the owner's sweep that long after
    /// the sweep first sees it: later still).
    pub fn reuse_after(&self) -> Duration {
        self.expiration + self.clock_skew
    }

    /// How late after being posted a CAS may land and still not match a
    /// word it expects on a reused entry: its expected word names one
    /// incarnation of an entry, which recurs only after 128 reuses of the
    /// entry, each at least T after the one before, and the CAS may be
    /// posted up to T minus the margin after it read the word. So 127 T
    /// plus the margin (docs/protocol.md §4, A2′): the only landing bound
    /// safety rests on.
    pub fn cas_landing_bound(&self) -> Duration {
        self.expiration * u32::from(crate::layout::MAX_INCARNATION) + self.deadline_margin
    }

    /// The PUT rate, per second, one client sustains without running out
    /// of data table entries when `live` of its entries hold keys' current
    /// values: its other entries over [`Config::reuse_after`]. A client
    /// writing faster meets `DataTableFull` until reuse catches up.
    pub fn sustained_puts_per_client(&self, live: u64) -> f64 {
        let spare = u64::from(self.dtes_per_client()).saturating_sub(live);
        spare as f64 / self.reuse_after().as_secs_f64().max(1e-9)
    }

    /// The region sizes a fabric must provide for this configuration.
    pub fn topology(&self) -> Topology {
        Topology {
            nodes: self.nodes,
            index_slots_per_node: self.index_region_slots(),
            data_bytes_per_node: self.registry().end(),
        }
    }

    /// Where each node's clients take their ids (docs/protocol.md §2.3):
    /// one registry word per client of the node, closing the data region
    /// after every class's table and the lease blocks of the clients
    /// without storage (which hold their shares by their lease words).
    pub fn registry(&self) -> crate::registry::Registry {
        let before = self
            .data_tables()
            .region_bytes()
            .saturating_add(self.lease_blocks_bytes());
        crate::registry::Registry::after(before, self.clients_per_node)
    }

    /// Bytes of the lease blocks of a node's clients without storage.
    fn lease_blocks_bytes(&self) -> u64 {
        u64::from(self.pure_clients_per_node) * self.lease_block_bytes()
    }

    /// Bytes that close a node's data region after every class's table:
    /// the lease blocks of the clients without storage and the registry
    /// words of the node's clients ([`Config::registry`]). They depend on
    /// the number of size classes, not on their tables' sizes, so a
    /// deployment sizing its tables to fill a region subtracts them first.
    pub fn region_tail_bytes(&self) -> u64 {
        self.lease_blocks_bytes() + u64::from(self.clients_per_node) * crate::registry::WORD_BYTES
    }

    /// Bytes of memory per stored key at index load factor `load` (index
    /// entries divided by the load factor, plus one data table entry).
    pub fn bytes_per_key(&self, load: f64) -> f64 {
        8.0 / load + self.layout().entry_bytes() as f64
    }
}

impl ClientId {
    /// Checks that this client exists in a deployment of `nodes` nodes with
    /// `clients_per_node` clients each (a typed error if not).
    pub fn check_in(self, nodes: u16, clients_per_node: u16) -> Result<(), ConfigError> {
        if self.node.0 >= nodes || self.index >= clients_per_node {
            return Err(ConfigError::OutOfRange {
                field: "client id",
                value: self.to_string(),
                reason: "node must be below nodes and index below clients_per_node",
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_put_rate_a_client_sustains_is_its_spare_entries_over_the_reuse_time() {
        let c = Config {
            dtes_per_node: 4000,
            clients_per_node: 4,
            expiration: Duration::from_millis(999),
            clock_skew: Duration::from_millis(1),
            ..Config::default()
        };
        assert_eq!(c.reuse_after(), Duration::from_secs(1));
        assert_eq!(c.sustained_puts_per_client(0), 1000.0);
        assert_eq!(c.sustained_puts_per_client(600), 400.0);
        assert_eq!(c.sustained_puts_per_client(5000), 0.0);
    }

    /// The tags leave one landing bound: 127 expiration periods plus the
    /// margin (127 s at the default T of 1 s).
    #[test]
    fn a_cas_may_land_127_expiration_periods_late() {
        let c = Config::default();
        assert_eq!(
            c.cas_landing_bound(),
            Duration::from_secs(127) + Duration::from_millis(10)
        );
    }

    #[test]
    fn default_is_valid() {
        Config::default().validate().unwrap();
    }

    #[test]
    fn each_bad_field_is_named() {
        let cases: Vec<(Config, &str)> = vec![
            (
                Config {
                    nodes: 0,
                    ..Config::default()
                },
                "nodes",
            ),
            (
                Config {
                    candidates: 0,
                    ..Config::default()
                },
                "candidates",
            ),
            (
                Config {
                    candidates: 9,
                    ..Config::default()
                },
                "candidates",
            ),
            (
                Config {
                    bucket_slots: 9,
                    ..Config::default()
                },
                "bucket_slots",
            ),
            (
                Config {
                    bucket_slots: 3,
                    ..Config::default()
                },
                "index_slots_per_node",
            ),
            (
                Config {
                    max_key_len: 4096,
                    ..Config::default()
                },
                "max_key_len",
            ),
            (
                Config {
                    bucket_slots: 2,
                    migrate_search: MigrateSearch::DepthFirst,
                    ..Config::default()
                },
                "migrate_search",
            ),
            (
                Config {
                    index_generations: 3,
                    migrate_search: MigrateSearch::DepthFirst,
                    ..Config::default()
                },
                "migrate_search",
            ),
            (
                Config {
                    filter_bits: 16,
                    ..Config::default()
                },
                "filter_bits",
            ),
            (
                Config {
                    nodes: 1,
                    index_slots_per_node: 2,
                    ..Config::default()
                },
                "index_slots_per_node",
            ),
            (
                Config {
                    dtes_per_node: 4,
                    clients_per_node: 4,
                    ..Config::default()
                },
                "dtes_per_node",
            ),
            (
                Config {
                    max_key_len: 0,
                    ..Config::default()
                },
                "max_key_len",
            ),
            (
                Config {
                    max_value_len: 1 << 28,
                    ..Config::default()
                },
                "max_value_len",
            ),
            (
                Config {
                    expiration: Duration::ZERO,
                    ..Config::default()
                },
                "expiration",
            ),
            (
                Config {
                    deadline_margin: Duration::from_secs(2),
                    ..Config::default()
                },
                "deadline_margin",
            ),
            (
                Config {
                    max_migrate_depth: 0,
                    ..Config::default()
                },
                "max_migrate_depth",
            ),
            (
                Config {
                    clients_per_node: 0,
                    ..Config::default()
                },
                "clients_per_node",
            ),
        ];
        for (cfg, field) in cases {
            match cfg.validate() {
                Err(ConfigError::OutOfRange { field: f, .. }) => assert_eq!(f, field),
                Ok(()) => panic!("{field} accepted"),
            }
        }
    }

    #[test]
    fn memory_per_key_at_load_0_4() {
        let cfg = Config {
            max_key_len: 16,
            max_value_len: 64,
            ..Config::default()
        };
        // 8 / 0.4 = 20 bytes of index + 32 header + 16 key + 64 value.
        assert!((cfg.bytes_per_key(0.4) - 132.0).abs() < 1e-9);
    }
}

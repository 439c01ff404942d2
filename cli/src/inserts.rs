//! `nessie inserts`: what an insert costs as the index fills up.
//!
//! One client fills an empty index (on the simulated fabric, no latency:
//! the figures are counts, not times) with new keys until a PUT is refused
//! with `TableFull`, for each number of candidates N, each bucket size B
//! (one-entry buckets as in the papers, and associative buckets) and each
//! MIGRATE search (breadth first, depth first), and reports the round trips of the inserts
//! made just below each index load factor: average, maximum, and how many
//! were refused. The workshop paper's Table 1 (two hash functions) is
//! printed beside N = 2. RACE hashing (`--race`, on by default) fills its
//! own subtables of as many slots the same way: two combined buckets of a
//! main and an overflow bucket of 7 slots each per key, no resizing.

use std::sync::Arc;

use clap::{Args, ValueEnum};
use nessie_baselines::{KvSystem, SystemConfig};
use nessie_fabric_sim::{SimConfig, SimEndpoint, SimFabric};
use nessie_protocol::{
    Client, ClientId, Config, CorruptionKind, Error, Fabric, KvClient, MigrateSearch, NodeId,
};
use serde::Serialize;

/// Options of `nessie inserts`.
#[derive(Args, Debug, Clone)]
pub struct InsertsArgs {
    /// Cuckoo candidates per key to measure, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "2,3,4")]
    pub candidates: Vec<u8>,
    /// Index table entries per bucket (B) to measure, comma separated (1:
    /// the papers' one-entry candidates).
    #[arg(long, value_delimiter = ',', default_value = "1,4")]
    pub bucket_slots: Vec<u8>,
    /// Index load factors to report, comma separated (each row averages the
    /// inserts made while the load was within `--window` below it).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "0.1,0.25,0.5,0.75,0.9,0.95"
    )]
    pub loads: Vec<f64>,
    /// Width of the load window each row averages over.
    #[arg(long, default_value_t = 0.02)]
    pub window: f64,
    /// Nodes (the index is spread over all of them).
    #[arg(long, default_value_t = 3)]
    pub nodes: u16,
    /// Index table entries per node.
    #[arg(long, default_value_t = 2048)]
    pub slots_per_node: u32,
    /// Longest chain of moves (`max_migrate_depth`).
    #[arg(long, default_value_t = 10)]
    pub max_depth: u8,
    /// Searches to compare.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "breadth-first,depth-first"
    )]
    pub search: Vec<SearchArg>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Also fill the one-sided peers' tables, RACE hashing's subtables and
    /// RCuckoo's rows (as many slots per node; `false` to leave them out).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub race: bool,
    /// Grow the index online through this many generations instead
    /// (docs/protocol.md §2.5): generation 0 is `--slots-per-node` entries
    /// a node, each next one twice the one before; one client inserts until
    /// the last refuses a key, and the report gives each generation's
    /// inserts, stable and while growing (0: a fixed index, the default).
    #[arg(long, default_value_t = 0)]
    pub growth: u8,
}

/// A MIGRATE search on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SearchArg {
    /// [`MigrateSearch::BreadthFirst`].
    BreadthFirst,
    /// [`MigrateSearch::DepthFirst`].
    DepthFirst,
}

impl SearchArg {
    /// The protocol's setting.
    pub fn config(self) -> MigrateSearch {
        match self {
            SearchArg::BreadthFirst => MigrateSearch::BreadthFirst,
            SearchArg::DepthFirst => MigrateSearch::DepthFirst,
        }
    }
}

/// One row: the inserts made within a window below one load factor.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// Candidates (buckets) per key.
    pub candidates: u8,
    /// Entries per bucket.
    pub bucket_slots: u8,
    /// The search.
    pub search: SearchArg,
    /// The load factor the window ends at.
    pub load: f64,
    /// Inserts attempted in the window.
    pub inserts: u64,
    /// Average round trips of an insert (refused ones included).
    pub avg_round_trips: f64,
    /// Most round trips of one insert.
    pub max_round_trips: u64,
    /// Inserts refused with `TableFull`.
    pub refused: u64,
    /// Inserts that ran out of time (`Timeout`: every attempt's search was
    /// cut by its budget before the client's operation timeout).
    pub timed_out: u64,
}

/// One fill: a series per (N, search), and the load at the first refusal.
#[derive(Debug, Clone, Serialize)]
pub struct Fill {
    /// The system filled (`nessie` or `race`).
    pub system: &'static str,
    /// Candidates (buckets) per key.
    pub candidates: u8,
    /// Entries per bucket.
    pub bucket_slots: u8,
    /// The search.
    pub search: SearchArg,
    /// Index load when the first insert was refused (`None`: none was, up
    /// to the highest load measured).
    pub first_refusal_load: Option<f64>,
    /// The rows.
    pub rows: Vec<Row>,
}

/// The workshop paper's Table 1 (round trips per write, two hash functions).
pub const WORKSHOP_TABLE_1: [(f64, f64); 5] = [
    (0.1, 2.5),
    (0.25, 3.5),
    (0.5, 5.8),
    (0.75, 9.9),
    (0.9, 13.3),
];

/// Fills one Nessie index and measures it.
pub fn fill(
    args: &InsertsArgs,
    candidates: u8,
    bucket_slots: u8,
    search: SearchArg,
) -> Result<Fill, Error> {
    let entries = u64::from(args.nodes) * u64::from(args.slots_per_node);
    let cfg = Config {
        migrate_search: search.config(),
        ..one_client_config(args, candidates, bucket_slots, entries)?
    };
    let mut client = one_client(cfg)?;
    fill_with(
        args,
        "nessie",
        (candidates, bucket_slots, search),
        &mut client,
    )
}

/// The one client of a fill.
const ONE_CLIENT: ClientId = ClientId {
    node: NodeId(0),
    index: 0,
};

/// The configuration of a fill by one client of an index of `candidates` x
/// `bucket_slots` that may come to hold `entries` index entries: every key
/// lives in the client's data table, with room for the copies moves make
/// (recycled after the expiration period).
pub(crate) fn one_client_config(
    args: &InsertsArgs,
    candidates: u8,
    bucket_slots: u8,
    entries: u64,
) -> Result<Config, Error> {
    Ok(Config {
        nodes: args.nodes,
        index_slots_per_node: args.slots_per_node,
        dtes_per_node: u32::try_from(entries * 4)
            .map_err(|_| Error::corrupt(CorruptionKind::Setup, "data table too large"))?,
        expiration: std::time::Duration::from_millis(50),
        clients_per_node: 1,
        max_key_len: 16,
        max_value_len: 8,
        candidates,
        bucket_slots,
        max_migrate_depth: args.max_depth,
        cache_capacity: 0,
        ..Config::default()
    })
}

/// The one client of a fill, on an in-process fabric shaped for `cfg`.
pub(crate) fn one_client(cfg: Config) -> Result<Client<SimEndpoint>, Error> {
    let cfg = Arc::new(cfg);
    let fabric = SimFabric::new(SimConfig::from_topology(cfg.topology()))
        .map_err(|e| Error::corrupt(CorruptionKind::Setup, e.to_string()))?;
    let ep = fabric.open(NodeId(0))?;
    Client::new(cfg, ONE_CLIENT, ep)
}

/// Fills a one-sided peer's table (RACE's subtables: two combined
/// buckets of 14 slots per key; RCuckoo's rows: two rows of 8 per key) as
/// `fill` does Nessie's, with as many slots per node.
pub fn fill_peer(args: &InsertsArgs, kind: KvSystem) -> Result<Fill, Error> {
    let cfg = Config {
        nodes: args.nodes,
        index_slots_per_node: args.slots_per_node,
        dtes_per_node: u32::from(args.nodes) * args.slots_per_node * 2,
        expiration: std::time::Duration::from_millis(50),
        clients_per_node: 1,
        max_key_len: 16,
        max_value_len: 8,
        ..Config::default()
    };
    let sys = SystemConfig::new(kind, cfg);
    let fabric = SimFabric::new(SimConfig::from_topology(sys.topology()))
        .map_err(|e| Error::corrupt(CorruptionKind::Setup, e.to_string()))?;
    let mut client = sys.client(&fabric, ONE_CLIENT)?;
    let shape = match kind {
        KvSystem::Rcuckoo => (2, 8, SearchArg::BreadthFirst),
        _ => (2, 14, SearchArg::BreadthFirst),
    };
    fill_with(args, kind.name(), shape, client.as_mut())
}

/// Fills the store `client` writes to with new keys, measuring each insert.
fn fill_with(
    args: &InsertsArgs,
    system: &'static str,
    (candidates, bucket_slots, search): (u8, u8, SearchArg),
    client: &mut dyn KvClient,
) -> Result<Fill, Error> {
    let entries = u64::from(args.nodes) * u64::from(args.slots_per_node);
    let mut loads: Vec<f64> = args.loads.clone();
    loads.sort_by(f64::total_cmp);
    let mut rows: Vec<Row> = loads
        .iter()
        .map(|&load| Row {
            candidates,
            bucket_slots,
            search,
            load,
            inserts: 0,
            avg_round_trips: 0.0,
            max_round_trips: 0,
            refused: 0,
            timed_out: 0,
        })
        .collect();
    let top = loads.last().copied().unwrap_or(0.0);
    let mut stored = 0u64;
    let mut first_refusal = None;
    let mut k = 0u64;
    while (stored as f64) < top * entries as f64 && k < entries * 2 {
        let load = stored as f64 / entries as f64;
        let r = client.put(format!("key-{k}").as_bytes(), b"v");
        k += 1;
        let rt = client.last_stats().round_trips;
        let (refused, timed_out) = match r {
            Ok(_) => {
                stored += 1;
                (false, false)
            }
            Err(Error::TableFull { .. }) => {
                first_refusal.get_or_insert(load);
                (true, false)
            }
            // Not a refusal: no attempt could afford its search within the
            // operation timeout (the key may fit; the table is not full).
            Err(Error::Timeout) => (false, true),
            Err(e) => return Err(e),
        };
        for row in rows.iter_mut() {
            if load < row.load && load >= row.load - args.window {
                row.inserts += 1;
                row.avg_round_trips += rt as f64;
                row.max_round_trips = row.max_round_trips.max(rt);
                row.refused += u64::from(refused);
                row.timed_out += u64::from(timed_out);
            }
        }
        if (refused || timed_out) && load < top - args.window {
            // Failures below the last window: keep filling (another key may
            // still fit), but stop once most inserts fail.
            if rows.iter().map(|r| r.refused + r.timed_out).sum::<u64>() > entries / 20 {
                break;
            }
        }
    }
    for row in &mut rows {
        if row.inserts > 0 {
            row.avg_round_trips /= row.inserts as f64;
        }
    }
    Ok(Fill {
        system,
        candidates,
        bucket_slots,
        search,
        first_refusal_load: first_refusal,
        rows,
    })
}

/// Prints `fills` as JSON (`--json`).
pub fn print_json<T: Serialize>(fills: &T) -> Result<(), Error> {
    let json = serde_json::to_string_pretty(fills)
        .map_err(|e| Error::corrupt(CorruptionKind::Bug, e.to_string()))?;
    println!("{json}");
    Ok(())
}

/// Runs every fill and prints the table (or JSON).
pub fn inserts(args: &InsertsArgs) -> Result<(), Error> {
    if args.growth > 0 {
        return crate::growth::report(args);
    }
    let mut fills = Vec::new();
    for &b in &args.bucket_slots {
        for &n in &args.candidates {
            for &s in &args.search {
                if b > 1 && s == SearchArg::DepthFirst {
                    // Refused by the configuration: buckets search breadth first.
                    continue;
                }
                fills.push(fill(args, n, b, s)?);
            }
        }
    }
    if args.race {
        fills.push(fill_peer(args, KvSystem::Race)?);
        fills.push(fill_peer(args, KvSystem::Rcuckoo)?);
    }
    if args.json {
        return print_json(&fills);
    }
    println!(
        "round trips per insert against index load ({} nodes x {} entries, max depth {}, one client, no contention)",
        args.nodes, args.slots_per_node, args.max_depth
    );
    println!(
        "{:>6} {:>4} {:>3} {:>14} {:>6} {:>8} {:>9} {:>7} {:>8} {:>9} {:>10}",
        "system",
        "N",
        "B",
        "search",
        "load",
        "inserts",
        "avg RTs",
        "max",
        "refused",
        "timed out",
        "paper N=2"
    );
    for f in &fills {
        for r in &f.rows {
            let paper = WORKSHOP_TABLE_1
                .iter()
                .find(|(l, _)| {
                    (l - r.load).abs() < 1e-9 && f.candidates == 2 && f.system == "nessie"
                })
                .map(|(_, v)| format!("{v:.1}"))
                .unwrap_or_default();
            let search = match (f.system, f.search) {
                ("race", _) => "-",
                ("rcuckoo", _) => "breadth-first",
                (_, SearchArg::BreadthFirst) => "breadth-first",
                (_, SearchArg::DepthFirst) => "depth-first",
            };
            println!(
                "{:>6} {:>4} {:>3} {:>14} {:>6.2} {:>8} {:>9.1} {:>7} {:>8} {:>9} {:>10}",
                f.system,
                f.candidates,
                f.bucket_slots,
                search,
                r.load,
                r.inserts,
                r.avg_round_trips,
                r.max_round_trips,
                r.refused,
                r.timed_out,
                paper
            );
        }
        match f.first_refusal_load {
            Some(l) => println!(
                "{:>6} {:>4} {:>3} {:>14} first refusal at load {l:.3}",
                "", "", "", ""
            ),
            None => println!("{:>6} {:>4} {:>3} {:>14} no refusal", "", "", "", ""),
        }
    }
    Ok(())
}

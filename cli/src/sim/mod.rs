//! `nessie sim`: the deterministic cluster simulator (`nessie-sim`) from the
//! command line: the systems' real machines (Nessie's, and the sans-IO
//! clients and server workers of NessieSD, NessieHY, Pilaf and Cell) in
//! virtual time over a hardware profile, the same workload for each, side by
//! side, for each cluster size, depth and value size asked, with the
//! simulator's own speed. With `--growth`, Nessie's index growing online
//! instead, before, during and after its growth (`growth.rs`).

mod growth;

use clap::Args;
use nessie_sim::{simulate, Profile, SimError, SimReport, SimSpec};
use nessie_systems::SystemKind;

/// Options of `nessie sim`.
#[derive(Args, Debug, Clone)]
pub struct SimArgs {
    /// Systems to simulate side by side, comma separated: nessie, nessie-sd,
    /// nessie-hy, pilaf, race, rcuckoo, cell (default: the key-value
    /// systems, the Nessie family, RACE hashing and RCuckoo; all but cell).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "nessie,nessie-sd,nessie-hy,pilaf,race,rcuckoo"
    )]
    pub systems: Vec<String>,
    /// Server worker threads per node of the server-driven systems (each
    /// polls on a core of its own).
    #[arg(long, default_value_t = 1)]
    pub server_workers: u16,
    /// Hardware profile: `tpds` (the TPDS paper's 10 GbE cluster) or `modern`
    /// (100 Gb/s).
    #[arg(long, default_value = "tpds")]
    pub profile: String,
    /// Nodes (comma separated: one point per cluster size).
    #[arg(long, value_delimiter = ',', default_value = "3")]
    pub nodes: Vec<u16>,
    /// Client threads per node (one core each).
    #[arg(long, default_value_t = 2)]
    pub clients: u16,
    /// Busy background threads per node sharing the client threads' cores
    /// (comma separated: one point per count; Fig. 4's CPU contention).
    #[arg(long, value_delimiter = ',', default_value = "0")]
    pub background: Vec<u16>,
    /// Operations each client thread keeps in flight (comma separated: one
    /// point per depth); the thread's polls share its core.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    pub depth: Vec<u16>,
    /// Distinct keys (preloaded).
    #[arg(long, default_value_t = 1000)]
    pub keys: u64,
    /// Key size in bytes.
    #[arg(long, default_value_t = 32)]
    pub key_size: u32,
    /// Value sizes in bytes to simulate, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "256")]
    pub value_sizes: Vec<u32>,
    /// Percentage of GETs (the rest are PUTs of existing keys).
    #[arg(long, default_value_t = 50)]
    pub get_pct: u32,
    /// Zipf exponent of key popularity (YCSB's scrambled Zipfian; 0.99 in
    /// the papers' Figs 12-13); uniform keys if absent.
    #[arg(long)]
    pub zipf: Option<f64>,
    /// One of YCSB's core workloads instead of `--get-pct` and `--zipf`
    /// (ycsb-a ... ycsb-f: the generator `nessie run`, `nessie bench` and
    /// `nessie node run` use; ycsb-e's scans need `--systems cell`).
    #[arg(long, value_enum)]
    pub workload: Option<nessie_workload::Ycsb>,
    /// Open loop: operations per simulated second arriving at each client
    /// (Poisson); closed loop (the next as soon as the last ends) if absent.
    #[arg(long)]
    pub arrival_rate: Option<f64>,
    /// Simulated seconds per point.
    #[arg(long, default_value_t = 0.1)]
    pub seconds: f64,
    /// Index load factor.
    #[arg(long, default_value_t = 0.4)]
    pub load_factor: f64,
    /// Seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Cuckoo candidates per key (N) of every cuckoo-hashed system
    /// (default: the protocol's, 3).
    #[arg(long)]
    pub candidates: Option<u8>,
    /// Entries per candidate bucket (B) of Nessie's index (default 1; the
    /// papers' systems keep one entry per candidate).
    #[arg(long)]
    pub bucket_slots: Option<u8>,
    /// How each write's value size is drawn, at most the point's value
    /// size: fixed (every value that size), uniform, or etc (Facebook's ETC
    /// pool).
    #[arg(long, value_enum, default_value_t = nessie_workload::ValueMix::Fixed)]
    pub value_mix: nessie_workload::ValueMix,
    /// Nessie's data tables in size classes (a ladder of entry sizes from
    /// 64 B up by a quarter below the main entry, docs/protocol.md §2.3)
    /// instead of every entry sized for the largest value.
    #[arg(long)]
    pub size_classes: bool,
    /// Half of Nessie's clients (at least one per node) without storage:
    /// they write their shares through memory windows their node's agent
    /// binds (docs/protocol.md §2.4), each on an application host of its
    /// own (one host per node, its NIC serving the clients whose shares that
    /// node holds).
    #[arg(long)]
    pub pure_clients: bool,
    /// Nessie's index growing online (docs/protocol.md §2.5): half the
    /// keys preloaded into a generation 0 they fill to load 0.8, the
    /// workload's PUTs inserting the rest; throughput and latency before,
    /// during and after the growth, next to the same workload on an index
    /// of the grown size that never grows (Nessie only; `--systems` is
    /// ignored).
    #[arg(long)]
    pub growth: bool,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// One point of a sweep.
struct Point {
    system: SystemKind,
    nodes: u16,
    background: u16,
    depth: u16,
    value_size: u32,
}

/// Runs every point and prints them.
pub fn sim(args: &SimArgs) -> Result<(), SimError> {
    let profile: Profile = nessie_sim::Profile::by_name(&args.profile)
        .ok_or_else(|| {
            SimError::Spec(format!("unknown profile {:?} (tpds, modern)", args.profile))
        })?
        .clone();
    let systems = args
        .systems
        .iter()
        .map(|s| s.parse::<SystemKind>())
        .collect::<Result<Vec<_>, _>>()?;
    // Shown in the table's heading; a YCSB workload draws its own mix.
    let (get_pct, zipf) = match args.workload {
        None => (args.get_pct, args.zipf),
        Some(w) => (w.mix().read, Some(nessie_workload::zipf::ZIPFIAN_CONSTANT)),
    };
    let mut points: Vec<(Point, SimReport)> = Vec::new();
    let mut grown: Vec<growth::GrowthPoint> = Vec::new();
    for &nodes in &args.nodes {
        for &background in &args.background {
            for &depth in &args.depth {
                for &v in &args.value_sizes {
                    let systems = if args.growth {
                        &[SystemKind::Nessie][..]
                    } else {
                        &systems[..]
                    };
                    for &system in systems {
                        let mut spec = SimSpec {
                            system,
                            server_workers: args.server_workers,
                            profile: profile.clone(),
                            nodes,
                            clients_per_node: args.clients,
                            depth,
                            background_per_node: background,
                            keys: args.keys,
                            key_size: args.key_size,
                            value_size: v,
                            value_mix: args.value_mix,
                            get_pct,
                            zipf_theta: zipf,
                            ycsb: args.workload,
                            arrival_rate_per_client: args.arrival_rate,
                            seconds: args.seconds,
                            load_factor: args.load_factor,
                            seed: args.seed,
                            ..SimSpec::default()
                        };
                        spec.tuning.candidates = args.candidates;
                        spec.tuning.bucket_slots = args.bucket_slots;
                        spec.tuning.size_classes = args.size_classes.then_some(true);
                        spec.tuning.pure_clients = args.pure_clients.then_some(true);
                        spec.tuning.pure_client_hosts = args.pure_clients.then_some(true);
                        let point = Point {
                            system,
                            nodes,
                            background,
                            depth,
                            value_size: v,
                        };
                        if args.growth {
                            grown.push(growth::growth_point(&spec)?);
                        } else {
                            points.push((point, simulate(&spec)?));
                        }
                    }
                }
            }
        }
    }
    if args.growth {
        if args.json {
            let out: Vec<_> = grown
                .iter()
                .map(|g| {
                    serde_json::json!({
                        "nodes": g.nodes,
                        "grows": g.grows,
                        "fixed": g.fixed,
                    })
                })
                .collect();
            println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
        } else {
            println!(
                "nessie sim --growth: profile {}, {} client threads per node, {} keys (half preloaded into generation 0 at load {}), {} % GET, {} simulated s per run, seed {}",
                profile.name, args.clients, args.keys, growth::START_LOAD, get_pct, args.seconds, args.seed
            );
            growth::print(&grown);
        }
        return Ok(());
    }
    if args.json {
        let out: Vec<_> = points
            .iter()
            .map(|(p, r)| {
                serde_json::json!({
                    "system": p.system.name(),
                    "nodes": p.nodes,
                    "background": p.background,
                    "depth": p.depth,
                    "value_size": p.value_size,
                    "report": r
                })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
        return Ok(());
    }
    println!(
        "nessie sim: profile {}, {} client threads per node, {} server worker(s) per node, {} keys, {} % GET{}, {} simulated s per point, seed {}",
        profile.name, args.clients, args.server_workers, args.keys, get_pct,
        args.workload.map_or(String::new(), |w| format!(" ({w}, Zipfian 0.99)")),
        args.seconds, args.seed
    );
    println!(
        "{:<10} {:>6} {:>5} {:>5} {:>8} {:>11} {:>6} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7} {:>7} {:>6} {:>9} {:>6} {:>13} {:>11} {:>7} {:>11}",
        "system",
        "nodes",
        "bg",
        "depth",
        "value B",
        "ops/s",
        "fail",
        "GET us",
        "GET p99",
        "PUT us",
        "PUT p99",
        "B/op",
        "RTs/op",
        "NIC/op",
        "CAS/op",
        "CAS cap M",
        "srv %",
        "busiest",
        "events",
        "wall s",
        "events/s"
    );
    for (p, r) in &points {
        println!(
            "{:<10} {:>6} {:>5} {:>5} {:>8} {:>11.0} {:>6} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>9.0} {:>7.2} {:>7.2} {:>6.2} {:>9} {:>6.1} {:>13} {:>11} {:>7.2} {:>11.0}",
            p.system.name(),
            p.nodes,
            p.background,
            p.depth,
            p.value_size,
            r.ops_per_sec,
            r.failures,
            r.get_avg_us,
            r.get_p99_us,
            r.put_avg_us,
            r.put_p99_us,
            r.bytes_per_op,
            r.round_trips_per_op,
            r.nic_ops_per_op,
            r.cas_per_op,
            if r.cas_ceiling_ops_per_sec.is_finite() {
                format!("{:.1}", r.cas_ceiling_ops_per_sec / 1e6)
            } else {
                "-".into()
            },
            r.server_busy_pct,
            busiest(r),
            r.events,
            r.wall_seconds,
            r.events_per_wall_sec
        );
    }
    for (p, r) in &points {
        let corrupt = r.corrupt.iter().map(ToString::to_string);
        for e in r.server_errors.iter().cloned().chain(corrupt) {
            println!("warning: {} at {} nodes: {e}", p.system.name(), p.nodes);
        }
        if r.stuck > 0 {
            println!(
                "warning: {} at {} nodes: {} operations still ran at the horizon",
                p.system.name(),
                p.nodes,
                r.stuck
            );
        }
    }
    Ok(())
}

/// The resource a run used most (the busiest node's NIC processing, link
/// bytes or receive queue, or the server workers), as "name pct".
pub fn busiest(r: &SimReport) -> String {
    let (name, pct) = [
        ("nic-tx", r.nic_tx_op_busy_pct),
        ("link", r.link_busy_pct),
        ("nic-rx", r.nic_rx_busy_pct),
        ("workers", r.server_busy_pct),
    ]
    .into_iter()
    .fold(("-", 0.0), |best, x| if x.1 > best.1 { x } else { best });
    format!("{name} {pct:.0}%")
}

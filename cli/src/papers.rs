//! `nessie papers`: the simulator's predictions next to the papers' published
//! numbers, in one command (issue 11 part 3; docs/simulation.md).
//!
//! Each experiment runs `nessie sim`'s machinery (`nessie_sim::simulate`) on
//! the setting the paper states (15 nodes, the paper's client and server
//! worker counts, uniform or Zipf keys, the GET share) and prints markdown
//! tables with, in each cell, the prediction, the published number and their
//! ratio (prediction / paper). The published numbers are below with their
//! sources (the seed papers in `/work/shared/seeds/`). The Cell paper's
//! locality experiments (Fig. 4, Table 2, Fig. 7) are in `papers/cell_locality.rs`.
//! Then the runs beyond the papers: throughput, p99 and the busiest
//! resource from 3 to 1,000 nodes, at depth 1 and 8, on both hardware
//! profiles; and which store to use (`peers.rs`): YCSB's core workloads on
//! every key-value system side by side, and what an insert costs and how
//! full each index gets. `--only` runs some of these parts.

use clap::Args;
use nessie_protocol::Request;
use nessie_sim::{simulate, Profile, SimError, SimReport, SimSpec, Tuning};
use nessie_systems::SystemKind;

use crate::inserts::{self, InsertsArgs, SearchArg, WORKSHOP_TABLE_1};

mod cell_locality;
mod peers;
pub use cell_locality::{CELL_FIG_4_PEAKS, CELL_TABLE_2};

/// Options of `nessie papers`.
#[derive(Args, Debug, Clone)]
pub struct PapersArgs {
    /// Simulated seconds per point of the 15-node experiments.
    #[arg(long, default_value_t = 0.01)]
    pub seconds: f64,
    /// Simulated seconds per point of the scale runs (half of it at 1,000
    /// nodes).
    #[arg(long, default_value_t = 0.002)]
    pub scale_seconds: f64,
    /// Leave out the runs beyond the papers (3 to 1,000 nodes).
    #[arg(long)]
    pub no_scale: bool,
    /// Run only these sections (comma separated: tpds, workshop, pilaf,
    /// cell, scale, peers); all by default.
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
    /// Seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// TPDS Table 1's value sizes, KiB.
pub const TABLE_1_KIB: [u32; 7] = [2, 4, 8, 16, 32, 64, 128];

/// TPDS Table 1 (seed 000, section 6.2): average latencies in µs and bytes
/// sent in GB, per system, for 15 nodes, uniform keys and 50 % GETs.
pub struct Table1 {
    /// GET latency, µs.
    pub get: [f64; 7],
    /// PUT latency, µs.
    pub put: [f64; 7],
    /// All operations' latency, µs.
    pub all: [f64; 7],
    /// Bytes sent, GB (over runs of unstated length).
    pub sent_gb: [f64; 7],
}

/// Table 1's CD (Nessie) rows.
pub const TABLE_1_CD: Table1 = Table1 {
    get: [19.0, 27.0, 46.0, 86.0, 172.0, 391.0, 811.0],
    put: [61.0, 83.0, 133.0, 233.0, 447.0, 858.0, 1533.0],
    all: [40.0, 55.0, 89.0, 159.0, 310.0, 624.0, 1172.0],
    sent_gb: [514.0, 729.0, 877.0, 975.0, 999.0, 989.0, 1053.0],
};

/// Table 1's SD (NessieSD) rows.
pub const TABLE_1_SD: Table1 = Table1 {
    get: [25.0, 43.0, 82.0, 184.0, 412.0, 875.0, 1732.0],
    put: [25.0, 41.0, 77.0, 171.0, 381.0, 816.0, 1602.0],
    all: [25.0, 42.0, 80.0, 178.0, 397.0, 846.0, 1667.0],
    sent_gb: [1245.0, 1503.0, 1590.0, 1439.0, 1291.0, 1212.0, 1230.0],
};

/// Table 1's HY (NessieHY) rows.
pub const TABLE_1_HY: Table1 = Table1 {
    get: [24.0, 47.0, 109.0, 231.0, 524.0, 1193.0, 2455.0],
    put: [42.0, 42.0, 69.0, 129.0, 271.0, 709.0, 1388.0],
    all: [33.0, 45.0, 89.0, 180.0, 398.0, 951.0, 1922.0],
    sent_gb: [957.0, 1287.0, 1461.0, 1445.0, 1314.0, 1219.0, 1208.0],
};

/// Pilaf's Fig. 6 (seed 002, section 3.4): probes per lookup in a 3-way
/// cuckoo table at 75 % fill, average and maximum.
pub const PILAF_FIG_6: (f64, f64) = (1.6, 3.0);

/// One cell: the prediction, the published number (if the paper states
/// one) and their ratio.
fn cell(sim: f64, paper: Option<f64>) -> String {
    match paper {
        Some(p) if p != 0.0 => format!("{} / {} ({:.2})", num(sim), num(p), sim / p),
        _ => num(sim),
    }
}

/// A number as the tables print it: thousands separated, one decimal below
/// 100.
pub(crate) fn num(v: f64) -> String {
    if !v.is_finite() {
        return "-".into();
    }
    if v.abs() >= 100.0 {
        let s = format!("{:.0}", v.abs());
        let mut out = String::new();
        for (i, ch) in s.chars().enumerate() {
            if i > 0 && (s.len() - i) % 3 == 0 {
                out.push(',');
            }
            out.push(ch);
        }
        if v < 0.0 {
            format!("-{out}")
        } else {
            out
        }
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// Ops/s as a short figure (k, M).
fn ops(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.2} M", v / 1e6)
    } else {
        format!("{:.0} k", v / 1e3)
    }
}

/// The average latency over GETs and PUTs of a run, µs.
fn all_avg(r: &SimReport) -> f64 {
    let n = (r.gets + r.puts) as f64;
    if n == 0.0 {
        return f64::NAN;
    }
    (r.gets as f64 * r.get_avg_us + r.puts as f64 * r.put_avg_us) / n
}

/// The 15-node TPDS setting all of the paper's experiments share.
fn tpds_spec(args: &PapersArgs, system: SystemKind, clients: u16, workers: u16) -> SimSpec {
    SimSpec {
        system,
        server_workers: workers,
        profile: nessie_sim::TPDS,
        nodes: 15,
        clients_per_node: clients,
        keys: 5000,
        seconds: args.seconds,
        seed: args.seed,
        ..SimSpec::default()
    }
}

/// The paper's thread split per system at 50 % GETs (section 6.1): Nessie 12
/// client threads; NessieSD 10 and 2 workers at 1 KiB and above; NessieHY 9
/// and 3 up to 32 KiB, 10 and 2 above.
fn split_50(system: SystemKind, value: u32) -> (u16, u16) {
    match system {
        SystemKind::NessieSd => (10, 2),
        SystemKind::NessieHy if value <= 32 << 10 => (9, 3),
        SystemKind::NessieHy => (10, 2),
        _ => (12, 1),
    }
}

/// The split at 90 % and 99 % GETs: NessieHY 11 and 1.
fn split_get_heavy(system: SystemKind) -> (u16, u16) {
    match system {
        SystemKind::NessieSd => (10, 2),
        SystemKind::NessieHy => (11, 1),
        _ => (12, 1),
    }
}

/// The busiest resource of a run and its busy share (%): the busiest
/// node's NIC transmit queue (per-request processing), its link (bytes),
/// its receive queue, or the server workers' cores (their requests' CPU
/// with the scan of their request slots).
pub(crate) fn busiest(r: &SimReport) -> (&'static str, f64) {
    [
        ("NIC tx", r.nic_tx_op_busy_pct),
        ("link", r.link_busy_pct),
        ("NIC rx", r.nic_rx_busy_pct),
        ("worker (with scan)", r.server_busy_pct + r.server_scan_pct),
    ]
    .into_iter()
    .max_by(|a, b| a.1.total_cmp(&b.1))
    .unwrap_or(("-", 0.0))
}

/// Runs `spec`, saying on stderr how fast (`label` names the run).
pub(crate) fn run(spec: &SimSpec, label: &str) -> Result<SimReport, SimError> {
    let r = simulate(spec)?;
    eprintln!(
        "  {label}: {} ops/s, {} events in {:.1} s",
        ops(r.ops_per_sec),
        r.events,
        r.wall_seconds
    );
    if r.stuck > 0 || !r.corrupt.is_empty() || !r.server_errors.is_empty() {
        eprintln!(
            "  warning: {label}: {} stuck, {:?} {:?}",
            r.stuck,
            r.corrupt
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            r.server_errors
        );
    }
    Ok(r)
}

/// Runs every experiment and prints the tables (markdown).
pub fn papers(args: &PapersArgs) -> Result<(), SimError> {
    let start = std::time::Instant::now();
    println!(
        "# The papers' figures side by side (`nessie papers`, {} simulated s per 15-node point, seed {})\n",
        args.seconds, args.seed
    );
    println!("Each cell: prediction / paper (their ratio, prediction / paper); a bare number has no published counterpart.\n");
    const SECTIONS: [&str; 6] = ["tpds", "workshop", "pilaf", "cell", "scale", "peers"];
    if let Some(bad) = args.only.iter().find(|s| !SECTIONS.contains(&s.as_str())) {
        return Err(SimError::Spec(format!(
            "unknown section {bad:?} (expected one of {SECTIONS:?})"
        )));
    }
    let runs = |s: &str| args.only.is_empty() || args.only.iter().any(|o| o == s);
    if runs("tpds") {
        let table1 = table_1(args)?;
        goodput(args, &table1)?;
        let peaks = fig_4(args)?;
        fig_14(args, peaks)?;
        fig_13(args)?;
    }
    if runs("workshop") {
        workshop_table_1()?;
    }
    if runs("pilaf") {
        pilaf_fig_6(args)?;
    }
    if runs("cell") {
        cell_locality::cell_paper(args)?;
    }
    if !args.no_scale && runs("scale") {
        scale(args)?;
    }
    if !args.no_scale && runs("peers") {
        peers::which_store(args)?;
    }
    println!(
        "\nWall time: {:.0} s on this machine.",
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

/// TPDS Table 1: the reports of CD, SD and HY at each value size.
struct Table1Runs {
    cd: Vec<SimReport>,
    sd: Vec<SimReport>,
    hy: Vec<SimReport>,
}

fn table_1(args: &PapersArgs) -> Result<Table1Runs, SimError> {
    eprintln!("TPDS Table 1");
    let mut runs = Table1Runs {
        cd: Vec::new(),
        sd: Vec::new(),
        hy: Vec::new(),
    };
    for kib in TABLE_1_KIB {
        let v = kib << 10;
        for (system, out) in [
            (SystemKind::Nessie, &mut runs.cd),
            (SystemKind::NessieSd, &mut runs.sd),
            (SystemKind::NessieHy, &mut runs.hy),
        ] {
            let (c, w) = split_50(system, v);
            let spec = SimSpec {
                value_size: v,
                ..tpds_spec(args, system, c, w)
            };
            out.push(run(&spec, &format!("{system} {kib} KiB"))?);
        }
    }
    println!(
        "## TPDS Table 1: average latency (µs) and bytes sent, 15 nodes, uniform keys, 50 % GETs\n"
    );
    println!("Threads per node as the paper tuned them: CD 12 clients; SD 10 clients + 2 workers; HY 9 + 3 up to 32 KiB, 10 + 2 above. 5,000 keys.\n");
    print!("| row |");
    for kib in TABLE_1_KIB {
        print!(" {kib} KiB |");
    }
    println!();
    println!("|---|{}", "---|".repeat(TABLE_1_KIB.len()));
    let rows: [(&str, &Vec<SimReport>, &Table1); 3] = [
        ("CD", &runs.cd, &TABLE_1_CD),
        ("SD", &runs.sd, &TABLE_1_SD),
        ("HY", &runs.hy, &TABLE_1_HY),
    ];
    for (what, pick) in [("GET", 0), ("PUT", 1), ("All", 2)] {
        for (name, reps, paper) in rows {
            print!("| {name} {what} |");
            for (i, r) in reps.iter().enumerate() {
                let (sim, p) = match pick {
                    0 => (r.get_avg_us, paper.get[i]),
                    1 => (r.put_avg_us, paper.put[i]),
                    _ => (all_avg(r), paper.all[i]),
                };
                print!(" {} |", cell(sim, Some(p)));
            }
            println!();
        }
    }
    // Bytes: the paper's totals are over runs of unstated (presumably equal)
    // length, so their ratio is a ratio of bytes per second.
    for (name, reps, paper) in [("SD", &runs.sd, &TABLE_1_SD), ("HY", &runs.hy, &TABLE_1_HY)] {
        print!("| {name} / CD bytes sent |");
        for (i, r) in reps.iter().enumerate() {
            let cd = &runs.cd[i];
            let sim = (r.ops_per_sec * r.bytes_per_op) / (cd.ops_per_sec * cd.bytes_per_op);
            print!(
                " {} |",
                cell(sim, Some(paper.sent_gb[i] / TABLE_1_CD.sent_gb[i]))
            );
        }
        println!();
    }
    for (name, reps) in [("CD", &runs.cd), ("SD", &runs.sd), ("HY", &runs.hy)] {
        print!("| {name} B/op (sim) |");
        for r in reps.iter() {
            print!(" {} |", num(r.bytes_per_op));
        }
        println!();
    }
    for (name, reps) in [("CD", &runs.cd), ("SD", &runs.sd), ("HY", &runs.hy)] {
        print!("| {name} ops/s (sim) |");
        for r in reps.iter() {
            print!(" {} |", ops(r.ops_per_sec));
        }
        println!();
    }
    println!();
    Ok(runs)
}

/// Figs 5-7 and 12: Nessie's goodput over NessieSD's where the text states it.
fn goodput(args: &PapersArgs, t1: &Table1Runs) -> Result<(), SimError> {
    eprintln!("Goodput ratios");
    println!(
        "## Goodput, Nessie / NessieSD (TPDS Figs 5-7 and 12, where the text states a ratio)\n"
    );
    println!("| setting | paper's words | CD / SD ops/s: sim / paper (ratio) |");
    println!("|---|---|---|");
    let ratio = |cd: &SimReport, sd: &SimReport| cd.ops_per_sec / sd.ops_per_sec;
    println!(
        "| uniform, 50 % GET, 2 KiB (Fig. 5) | \"Nessie performs 30 % worse\" | {} |",
        cell(ratio(&t1.cd[0], &t1.sd[0]), Some(0.7))
    );
    println!(
        "| uniform, 50 % GET, 128 KiB (Fig. 5) | \"about 70 % higher\" | {} |",
        cell(ratio(&t1.cd[6], &t1.sd[6]), Some(1.7))
    );
    let v = 16 << 10;
    let settings: [(&str, &str, u32, Option<f64>, f64); 4] = [
        (
            "uniform, 90 % GET, 16 KiB (Fig. 6)",
            "GET-heavy at 16 KiB and above: about equal",
            90,
            None,
            1.0,
        ),
        (
            "uniform, 99 % GET, 16 KiB (Fig. 7)",
            "GET-heavy at 16 KiB and above: about equal",
            99,
            None,
            1.0,
        ),
        (
            "Zipf 0.99, 50 % GET, 16 KiB (Fig. 12)",
            "\"an improvement of over 50 %\" (at least)",
            50,
            Some(0.99),
            1.5,
        ),
        (
            "Zipf 0.99, 99 % GET, 16 KiB (Fig. 12)",
            "\"outperforming NessieSD by over 40 %\" (at least)",
            99,
            Some(0.99),
            1.4,
        ),
    ];
    for (label, words, get_pct, zipf, paper) in settings {
        let mut r = Vec::new();
        for system in [SystemKind::Nessie, SystemKind::NessieSd] {
            let (c, w) = split_get_heavy(system);
            let spec = SimSpec {
                value_size: v,
                get_pct,
                zipf_theta: zipf,
                ..tpds_spec(args, system, c, w)
            };
            r.push(run(&spec, &format!("{system} {label}"))?);
        }
        println!(
            "| {label} | {words} | {} |",
            cell(ratio(&r[0], &r[1]), Some(paper))
        );
    }
    println!();
    Ok(())
}

/// Fig. 4: throughput as busy background threads take the nodes' cores.
fn fig_4(args: &PapersArgs) -> Result<[f64; 3], SimError> {
    eprintln!("Fig. 4");
    println!("## Fig. 4: throughput under background threads, 15 nodes, 16 KiB, 90 % GETs\n");
    println!("CD 12 client threads; SD 10 + 2 workers; HY 11 + 1 (the paper's split at 90 % GETs). Ops/s and the ratio to none. The paper gives the trend (SD falls dramatically, HY less, CD little) and \"more than doubling\" CD over SD under contention.\n");
    let bgs = [0u16, 12, 24];
    print!("| system |");
    for b in bgs {
        print!(" {b} background threads per node |");
    }
    println!();
    println!("|---|{}", "---|".repeat(bgs.len()));
    let mut at_max = Vec::new();
    let mut peaks = [0.0; 3];
    for (k, system) in [
        SystemKind::Nessie,
        SystemKind::NessieSd,
        SystemKind::NessieHy,
    ]
    .into_iter()
    .enumerate()
    {
        let (c, w) = split_get_heavy(system);
        print!("| {system} |");
        let mut base = 0.0;
        for (i, &b) in bgs.iter().enumerate() {
            let spec = SimSpec {
                value_size: 16 << 10,
                get_pct: 90,
                background_per_node: b,
                ..tpds_spec(args, system, c, w)
            };
            let r = run(&spec, &format!("{system} background {b}"))?;
            if i == 0 {
                base = r.ops_per_sec;
                peaks[k] = base;
            }
            print!(" {} ({:.2}) |", ops(r.ops_per_sec), r.ops_per_sec / base);
            if i + 1 == bgs.len() {
                at_max.push(r.ops_per_sec);
            }
        }
        println!();
    }
    println!(
        "\nCD / SD at 24 background threads: {} (the paper: \"more than doubling\", at least 2).\n",
        cell(at_max[0] / at_max[1], Some(2.0))
    );
    Ok(peaks)
}

/// Fig. 14's ratios: (SD - CD) / SD of the power over idle at 80 % and 20 %
/// of the maximum throughput (seed 000, section 6.5: 130 W against 121 W,
/// and 113 W against 100 W, over an idle 81 W).
pub const FIG_14: [(f64, f64); 2] = [
    (0.8, (130.0 - 121.0) / (130.0 - 81.0)),
    (0.2, (113.0 - 100.0) / (113.0 - 81.0)),
];

/// Fig. 14: busy cores under open-loop load at a share of each system's peak.
fn fig_14(args: &PapersArgs, peaks: [f64; 3]) -> Result<(), SimError> {
    eprintln!("Fig. 14");
    println!("## Fig. 14: CPU under load, 15 nodes, 16 KiB, 90 % GETs\n");
    println!("Poisson arrivals at 80 % and 20 % of each system's closed-loop peak (Fig. 4's runs with no background threads), spread over its client threads. Busy cores per node: the client threads' share of the window with an operation under way, plus the server workers, which poll and so burn their cores whole. The paper measures power (IPMI); its ratio is (SD - CD) / SD of the power over the idle 81 W, compared here with (SD - CD) / SD of the busy cores.\n");
    println!("| load | CD busy cores / node | SD | HY | (SD - CD) / SD: sim / paper (ratio) |");
    println!("|---|---|---|---|---|");
    for (load, paper) in FIG_14 {
        let mut cores = Vec::new();
        for (k, system) in [
            SystemKind::Nessie,
            SystemKind::NessieSd,
            SystemKind::NessieHy,
        ]
        .into_iter()
        .enumerate()
        {
            let (c, w) = split_get_heavy(system);
            let rate = load * peaks[k] / (15.0 * f64::from(c));
            let spec = SimSpec {
                value_size: 16 << 10,
                get_pct: 90,
                arrival_rate_per_client: Some(rate),
                ..tpds_spec(args, system, c, w)
            };
            let r = run(&spec, &format!("{system} at {:.0} % load", load * 100.0))?;
            let workers = if system.has_servers() {
                f64::from(w)
            } else {
                0.0
            };
            cores.push(f64::from(c) * r.client_busy_pct / 100.0 + workers);
        }
        println!(
            "| {:.0} % | {:.2} | {:.2} | {:.2} | {} |",
            load * 100.0,
            cores[0],
            cores[1],
            cores[2],
            cell((cores[1] - cores[0]) / cores[1], Some(paper))
        );
    }
    println!();
    Ok(())
}

/// Fig. 13: Nessie's optimisations one by one under Zipf load.
fn fig_13(args: &PapersArgs) -> Result<(), SimError> {
    eprintln!("Fig. 13");
    println!("## Fig. 13: Nessie's optimisations, Zipf 0.99, 16 KiB, 15 nodes x 12 clients\n");
    println!("Each step adds one to the previous: filter bits (7), the cache (1,024 entries), previous versions, multiple reads. Ops/s and the ratio to basic; the paper states the total: +60 % at 50 % GETs, +90 % at 99 %.\n");
    let steps: [(&str, Tuning); 5] = {
        let basic = Tuning {
            filter_bits: Some(0),
            cache_capacity: Some(0),
            previous_versions: Some(false),
            multiple_reads: Some(false),
            ..Tuning::default()
        };
        let filter = Tuning {
            filter_bits: Some(7),
            ..basic
        };
        let cache = Tuning {
            cache_capacity: Some(1024),
            ..filter
        };
        let prev = Tuning {
            previous_versions: Some(true),
            ..cache
        };
        let multi = Tuning {
            multiple_reads: Some(true),
            ..prev
        };
        [
            ("basic", basic),
            ("+ filter", filter),
            ("+ caching", cache),
            ("+ prev. vers.", prev),
            ("+ multi. read", multi),
        ]
    };
    println!(
        "| GETs | basic | + filter | + caching | + prev. vers. | + multi. read | order holds |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (get_pct, paper) in [(50u32, 1.6), (99, 1.9)] {
        let mut got = Vec::new();
        for (name, tuning) in steps {
            let spec = SimSpec {
                value_size: 16 << 10,
                get_pct,
                zipf_theta: Some(0.99),
                tuning,
                ..tpds_spec(args, SystemKind::Nessie, 12, 1)
            };
            got.push(run(&spec, &format!("nessie {get_pct} % {name}"))?.ops_per_sec);
        }
        print!("| {get_pct} % |");
        let n = got.len();
        for (i, v) in got.iter().enumerate() {
            let r = v / got[0];
            if i + 1 == n {
                print!(" {} ({}) |", ops(*v), cell(r, Some(paper)));
            } else {
                print!(" {} ({:.2}) |", ops(*v), r);
            }
        }
        let order = got.windows(2).all(|w| w[1] >= w[0] * 0.98);
        println!(" {} |", if order { "yes" } else { "no" });
    }
    println!("\n(\"order holds\": each step at least 98 % of the previous one.)\n");
    Ok(())
}

/// The workshop paper's Table 1: round trips per insert against load.
fn workshop_table_1() -> Result<(), SimError> {
    eprintln!("Workshop Table 1");
    println!("## Workshop paper Table 1: round trips per write against index load factor, two hash functions\n");
    println!("One client inserts new keys into an empty index (3 nodes x 2,048 entries, breadth-first MIGRATE, depth 10; `nessie inserts`), with one entry per bucket as in the paper and with buckets of 4 entries (B = 4: a key may live in any entry of its two buckets); each row averages the inserts made within 0.02 below the load. Refused: inserts refused with `TableFull` in that window.\n");
    let args = InsertsArgs {
        candidates: vec![2],
        bucket_slots: vec![1, 4],
        loads: WORKSHOP_TABLE_1.iter().map(|(l, _)| *l).collect(),
        window: 0.02,
        nodes: 3,
        slots_per_node: 2048,
        max_depth: 10,
        search: vec![SearchArg::BreadthFirst],
        json: false,
        race: false,
        growth: 0,
    };
    let fill = inserts::fill(&args, 2, 1, SearchArg::BreadthFirst)?;
    let buckets = inserts::fill(&args, 2, 4, SearchArg::BreadthFirst)?;
    println!("| load factor | avg RTs: sim / paper (ratio) | max RTs | refused / inserts | B = 4: avg RTs / paper (ratio) | B = 4: max RTs | B = 4: refused / inserts |");
    println!("|---|---|---|---|---|---|---|");
    let avg = |row: &inserts::Row, paper: Option<f64>| {
        if row.inserts == 0 {
            "no insert reached this load".to_string()
        } else {
            cell(row.avg_round_trips, paper)
        }
    };
    for (row, b) in fill.rows.iter().zip(&buckets.rows) {
        let paper = WORKSHOP_TABLE_1
            .iter()
            .find(|(l, _)| (l - row.load).abs() < 1e-9)
            .map(|(_, v)| *v);
        println!(
            "| {:.2} | {} | {} | {} / {} | {} | {} | {} / {} |",
            row.load,
            avg(row, paper),
            row.max_round_trips,
            row.refused,
            row.inserts,
            avg(b, paper),
            b.max_round_trips,
            b.refused,
            b.inserts
        );
    }
    let refusal = |f: &inserts::Fill| match f.first_refusal_load {
        Some(l) => format!("at load {l:.3}"),
        None => "none".to_string(),
    };
    println!(
        "\nFirst refusal: one-entry buckets {}, B = 4 {}.\n",
        refusal(&fill),
        refusal(&buckets)
    );
    Ok(())
}

/// Pilaf's Fig. 6: probes per lookup at 75 % fill.
fn pilaf_fig_6(args: &PapersArgs) -> Result<(), SimError> {
    eprintln!("Pilaf Fig. 6");
    println!("## Pilaf Fig. 6: probes per lookup in 3-way cuckoo hashing at 75 % fill\n");
    let spec = SimSpec {
        system: SystemKind::Pilaf,
        nodes: 3,
        clients_per_node: 2,
        keys: 6000,
        load_factor: 0.75,
        get_pct: 100,
        seconds: 0.01,
        seed: args.seed,
        record_history: true,
        ..SimSpec::default()
    };
    let r = run(&spec, "pilaf at 75 %")?;
    let probes: Vec<u64> = r
        .history
        .iter()
        .zip(&r.history_stats)
        .filter(|(e, _)| matches!(e.request, Request::Get(_)))
        .map(|(_, s)| s.index_reads)
        .collect();
    let avg = probes.iter().sum::<u64>() as f64 / probes.len().max(1) as f64;
    let max = probes.iter().copied().max().unwrap_or(0) as f64;
    println!("3 nodes x 2 clients, 6,000 keys in 8,000 entries, GETs only: {} lookups (entry READs per GET; a torn entry read again would count twice).\n", num(probes.len() as f64));
    println!("| probes | sim / paper (ratio) |");
    println!("|---|---|");
    println!("| average | {} |", cell(avg, Some(PILAF_FIG_6.0)));
    println!("| maximum | {} |\n", cell(max, Some(PILAF_FIG_6.1)));
    Ok(())
}

/// Beyond the papers: 3 to 1,000 nodes, depth 1 and 8, both profiles.
fn scale(args: &PapersArgs) -> Result<(), SimError> {
    eprintln!("Scale");
    println!("## Beyond the papers: 3 to 1,000 nodes, depth 1 and 8, both profiles\n");
    println!(
        "2 client threads per node (NessieSD: 2 clients + 1 worker), 256 B values, 50 % GETs, 20 keys per client thread, uniform; {} simulated s per point up to 100 nodes, half that at 1,000 (NessieSD at depth 8 and 1,000 nodes is left out: its operations take longer than a bounded window). Mops/s, p99 µs, and each resource's busy share in the measured window: the busiest node's NIC transmit queue (per-request processing), its link (bytes), its NIC receive queue, and the server workers' cores (their requests' CPU, and with the scan of their request slots for the next waiting request: from a worker's return, one `slot_check_ns` per slot passed; for an idle worker, half a scan of all the slots it watches, one per client thread in the cluster).\n",
        args.scale_seconds
    );
    println!("| profile | system | nodes | depth | Mops/s | k ops/s per node | GET p99 µs | PUT p99 µs | NIC tx % | link % | NIC rx % | workers %: CPU / with scan | busiest |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for profile in nessie_sim::PROFILES {
        let profile: Profile = profile.clone();
        for system in [SystemKind::Nessie, SystemKind::NessieSd] {
            for nodes in [3u16, 15, 100, 1000] {
                for depth in [1u16, 8] {
                    if system == SystemKind::NessieSd && nodes >= 1000 && depth > 1 {
                        continue;
                    }
                    let seconds = if nodes >= 1000 {
                        args.scale_seconds / 2.0
                    } else {
                        args.scale_seconds
                    };
                    let clients = 2u16;
                    let spec = SimSpec {
                        system,
                        server_workers: 1,
                        profile: profile.clone(),
                        nodes,
                        clients_per_node: clients,
                        depth,
                        keys: u64::from(nodes) * u64::from(clients) * 20,
                        value_size: 256,
                        seconds,
                        seed: args.seed,
                        ..SimSpec::default()
                    };
                    let r = run(
                        &spec,
                        &format!("{} {system} {nodes} nodes depth {depth}", profile.name),
                    )?;
                    let with_scan = r.server_busy_pct + r.server_scan_pct;
                    let workers = if system.has_servers() {
                        format!("{:.0} / {:.0}", r.server_busy_pct, with_scan)
                    } else {
                        "-".into()
                    };
                    println!(
                        "| {} | {system} | {nodes} | {depth} | {:.2} | {:.0} | {} | {} | {:.0} | {:.0} | {:.0} | {workers} | {} |",
                        profile.name,
                        r.ops_per_sec / 1e6,
                        r.ops_per_sec / f64::from(nodes) / 1e3,
                        num(r.get_p99_us),
                        num(r.put_p99_us),
                        r.nic_tx_op_busy_pct,
                        r.link_busy_pct,
                        r.nic_rx_busy_pct,
                        busiest(&r).0,
                    );
                }
            }
        }
    }
    println!();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_print_prediction_paper_and_ratio() {
        assert_eq!(cell(44.8, Some(19.0)), "44.8 / 19.0 (2.36)");
        assert_eq!(cell(1303.5, Some(1533.0)), "1,304 / 1,533 (0.85)");
        assert_eq!(cell(0.5, None), "0.50");
        assert_eq!(num(1_234_567.0), "1,234,567");
    }

    /// Table 1's "All" rows are the average of its GET and PUT rows at 50 %
    /// GETs (to rounding): a typo in a transcribed constant breaks it.
    #[test]
    fn table_1_constants_are_consistent_with_its_50_50_mix() {
        for t in [&TABLE_1_CD, &TABLE_1_SD, &TABLE_1_HY] {
            for (i, kib) in TABLE_1_KIB.iter().enumerate() {
                let mix = (t.get[i] + t.put[i]) / 2.0;
                assert!(
                    (t.all[i] - mix).abs() <= 1.0,
                    "{kib} KiB: all {} against (get + put) / 2 = {mix}",
                    t.all[i]
                );
            }
        }
        // Fig. 14: the paper's own 18 % and 41 %.
        assert_eq!((FIG_14[0].1 * 100.0).round(), 18.0);
        assert_eq!((FIG_14[1].1 * 100.0).round(), 41.0);
    }

    #[test]
    fn the_all_latency_weights_gets_and_puts_by_their_counts() {
        let mut r = simulate(&SimSpec {
            seconds: 0.001,
            ..SimSpec::default()
        })
        .unwrap();
        r.gets = 3;
        r.puts = 1;
        r.get_avg_us = 10.0;
        r.put_avg_us = 30.0;
        assert_eq!(all_avg(&r), 15.0);
    }
}

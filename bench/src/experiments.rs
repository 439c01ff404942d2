//! The experiments: which variants are started (a *group* shares one store
//! shape and one preload) and which points each group measures. Without
//! `--experiment`, one group of the selected systems measured at one point.

use std::collections::BTreeMap;
use std::time::Duration;

use std::sync::Arc;

use nessie_baselines::KvSystem;
use nessie_cell::{CellConfig, SearchMode, Sizing};
use nessie_protocol::Config;

use crate::args::{BenchArgs, Experiment, SystemChoice};
use crate::cell::{mode_name, CellClients, ShareMeter};
use crate::driver::{Budget, PointPlan};
use crate::error::BenchError;
use crate::system::Variant;
use crate::workload::{Distribution, Workload};
use nessie_systems::sizing::{store_config, Shape};
use nessie_systems::SystemKind;

/// Value sizes of the value sweep (the papers' 256 B .. 128 KiB).
pub const SWEEP_VALUES: [u32; 6] = [256, 1 << 10, 4 << 10, 16 << 10, 64 << 10, 128 << 10];
/// GET percentages of the sweeps.
pub const SWEEP_GETS: [f64; 3] = [50.0, 90.0, 99.0];
/// NIC latencies of latency-sweep, in microseconds. The simulator sleeps
/// each delay, and sleeps shorter than ~60 us overshoot on this kind of
/// machine, so the sweep starts there.
pub const SWEEP_LATENCIES_US: [f64; 5] = [0.0, 50.0, 100.0, 200.0, 400.0];
/// Loads of cpu-load, as fractions of each system's peak.
pub const LOADS: [f64; 4] = [0.2, 0.4, 0.6, 0.8];

/// One point of a group.
#[derive(Clone, Debug)]
pub struct Point {
    /// What varies, for the tables.
    pub label: String,
    /// The varying parameters, for JSON and plots.
    pub params: BTreeMap<String, f64>,
    /// How to measure it.
    pub plan: PointPlan,
    /// Open-loop load as a fraction of each system's throughput at the
    /// group's latest closed-loop point (cpu-load).
    pub load: Option<f64>,
    /// Open-loop load, the same for every system: a fraction of the
    /// throughput of variant `.0` at the latest closed-loop point (cell-spike).
    pub load_of: Option<(usize, f64)>,
}

/// Variants sharing a store shape, preloaded once, measured at `points`.
#[derive(Clone, Debug)]
pub struct Group {
    /// The variants, reference first.
    pub variants: Vec<Variant>,
    /// The preload (keys, sizes, which client stores which key).
    pub preload: Workload,
    /// The points.
    pub points: Vec<Point>,
    /// Simulated NIC latency of the group's fabrics (`None`: `--latency-us`).
    pub latency_us: Option<f64>,
}

fn params(kv: &[(&str, f64)]) -> BTreeMap<String, f64> {
    kv.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

/// The base workload and store configuration for values of `value_size`.
fn shape(args: &BenchArgs, value_size: u32) -> Result<(Workload, Config), BenchError> {
    shape_of(args, value_size, args.value_mix, false)
}

/// The workload and store configuration for values of up to `value_size`
/// bytes drawn from `value_mix`, in size classes or not.
fn shape_of(
    args: &BenchArgs,
    value_size: u32,
    value_mix: nessie_workload::ValueMix,
    size_classes: bool,
) -> Result<(Workload, Config), BenchError> {
    let budget = args.data_budget_mib << 20;
    let keys = args
        .keys
        .min((budget / u64::from(value_size)).max(64))
        .max(1);
    let cfg = store_config(&Shape {
        nodes: args.nodes,
        clients: args.clients(),
        keys,
        key_size: args.key_size() as u32,
        value_size,
        value_mix,
        size_classes,
        load_factor: args.load_factor,
        migrate_depth: 6,
        expiration: Duration::from_millis(args.expiration_ms),
    })?;
    let w = Workload {
        keys,
        key_size: args.key_size() as u32,
        value_size,
        value_mix,
        get_pct: args.get_pct,
        distribution: args.distribution(),
        zipf_theta: args.zipf_theta,
        locality_pct: args.locality_pct,
        seed: args.seed,
        scan_pct: 0.0,
        // YCSB's E scans 1 to 100 entries; Cell pages at most its scan
        // page (the bench's Cell keeps the default).
        scan_len: match args.workload {
            Some(y) if y.scans() => nessie_workload::ycsb::MAX_SCAN_LEN
                .min(nessie_cell::CellConfig::default().scan_page),
            _ => 1,
        },
        inserts: false,
        searches: false,
        ycsb: args.workload,
    };
    Ok((w, cfg))
}

fn plan(args: &BenchArgs, w: Workload) -> PointPlan {
    PointPlan {
        workload: w,
        budget: match args.ops {
            Some(n) => Budget::Ops(n),
            None => Budget::Seconds(args.seconds()),
        },
        slice: Duration::from_millis(args.slice_ms),
        background: 0,
        rates: None,
        clients: None,
        cores: None,
    }
}

/// A Cell variant of `mode` sized by `sizing` (clients on nodes
/// `client_from..`).
fn cell_variant(label: &str, mode: SearchMode, sizing: &Sizing, client_from: u16) -> Variant {
    Variant::cell(
        label,
        CellConfig::sized(sizing),
        CellClients {
            mode,
            client_from,
            ..CellClients::default()
        },
    )
}

/// Cell on `nodes` nodes, each a server with `workers` workers and every
/// client `args` asks for, sized for workload `w` and `inserts` keys the
/// runs may add, with client caches.
fn cell_sizing(args: &BenchArgs, w: &Workload, nodes: u16, workers: u16, inserts: u64) -> Sizing {
    Sizing {
        nodes,
        server_nodes: nodes,
        clients: args.clients(),
        workers,
        keys: w.keys + inserts,
        key_size: w.key_size,
        value_size: w.value_size,
        one_meganode: false,
        caches: true,
    }
}

/// Keys the runs of a point may insert (bounds the regions Cell sizes).
fn inserts_bound(args: &BenchArgs) -> u64 {
    match args.ops {
        Some(n) => n,
        None => (150_000.0 * args.seconds()) as u64,
    }
}

/// The variants of `--systems` for a comparison of key-value workloads.
fn plain(kinds: &[SystemChoice], cfg: &Config, w: &Workload, args: &BenchArgs) -> Vec<Variant> {
    let shape = cell_sizing(args, w, args.nodes, args.server_workers, 0);
    kinds
        .iter()
        .flat_map(|&k| match k {
            // Nessie once per --depth (each depth a variant of its own,
            // measured side by side); the other systems once.
            c if c.kind == SystemKind::Nessie => args
                .depths()
                .iter()
                .map(|&d| Variant::plain(KvSystem::Nessie, cfg, args.server_workers).pipelined(d))
                .collect::<Vec<_>>(),
            c => match c.kind.kv() {
                Some(k) => vec![Variant::plain(k, cfg, args.server_workers)],
                None => vec![cell_variant(mode_name(c.search), c.search, &shape, 0)],
            },
        })
        .collect()
}

fn point(label: String, params: BTreeMap<String, f64>, plan: PointPlan) -> Point {
    Point {
        label,
        params,
        plan,
        load: None,
        load_of: None,
    }
}

/// Nessie's and NessieHY's optimisations switched on one after the other.
fn breakdown_variants(kinds: &[SystemChoice], cfg: &Config, args: &BenchArgs) -> Vec<Variant> {
    let mut out = Vec::new();
    if kinds.contains(&SystemChoice::of(SystemKind::Nessie)) {
        let base = Variant::plain(KvSystem::Nessie, cfg, args.server_workers).tuned(
            "nessie basic",
            |c, _| {
                c.filter_bits = 0;
                c.cache_capacity = 0;
                c.previous_versions = false;
                c.multiple_reads = false;
            },
        );
        let filter = base.tuned("nessie +filter", |c, _| c.filter_bits = cfg.filter_bits);
        let cache = filter.tuned("nessie +cache", |c, _| {
            c.cache_capacity = cfg.cache_capacity
        });
        let prev = cache.tuned("nessie +prev", |c, _| c.previous_versions = true);
        let multi = prev.tuned("nessie +multi", |c, _| c.multiple_reads = true);
        out.extend([base, filter, cache, prev, multi]);
    }
    if kinds.contains(&SystemChoice::of(SystemKind::NessieHy)) {
        let base = Variant::plain(KvSystem::NessieHy, cfg, args.server_workers)
            .tuned("hy basic", |_, _| {});
        let filter = base.tuned("hy +filter", |_, h| h.filter_bits = true);
        let cache = filter.tuned("hy +cache", |_, h| h.cache = true);
        let multi = cache.tuned("hy +multi", |_, h| h.multiple_reads = true);
        out.extend([base, filter, cache, multi]);
    }
    out
}

/// The groups of `args`' experiment (or of the single comparison).
pub fn groups(args: &BenchArgs, kinds: &[SystemChoice]) -> Result<Vec<Group>, BenchError> {
    let (w, cfg) = shape(args, args.value_size() as u32)?;
    let one = |variants: Vec<Variant>, points: Vec<Point>| Group {
        variants,
        preload: w.clone(),
        points,
        latency_us: None,
    };
    let at_gets = |w: &Workload, extra: &[(&str, f64)], prefix: &str| -> Vec<Point> {
        SWEEP_GETS
            .iter()
            .map(|&g| {
                let mut w = w.clone();
                w.get_pct = g;
                let mut p = params(extra);
                p.insert("get_pct".into(), g);
                point(format!("{prefix}get={g}%"), p, plan(args, w))
            })
            .collect()
    };
    Ok(match args.experiment {
        None => {
            let mix = match w.ycsb {
                Some(y) => y.to_string(),
                None => format!("{}% GET, {:?}", w.get_pct, w.distribution),
            };
            let label = format!(
                "{} nodes x {} clients, {} keys of {} B, values {} B, {mix}",
                args.nodes,
                args.clients(),
                w.keys,
                w.key_size,
                w.value_size,
            );
            let p = point(
                label,
                params(&[("get_pct", w.get_pct)]),
                plan(args, w.clone()),
            );
            vec![one(plain(kinds, &cfg, &w, args), vec![p])]
        }
        Some(Experiment::ValueSweep) => SWEEP_VALUES
            .iter()
            .map(|&v| {
                let (w, cfg) = shape(args, v)?;
                let points = at_gets(
                    &w,
                    &[("value_size", f64::from(v))],
                    &format!("value={v} B "),
                );
                Ok(Group {
                    variants: plain(kinds, &cfg, &w, args),
                    preload: w,
                    points,
                    latency_us: None,
                })
            })
            .collect::<Result<_, BenchError>>()?,
        Some(Experiment::Zipf) => {
            let mut points = Vec::new();
            for (d, name, code) in [
                (Distribution::Uniform, "uniform", 0.0),
                (Distribution::Zipf, "zipf", 1.0),
            ] {
                let mut wd = w.clone();
                wd.distribution = d;
                points.extend(at_gets(&wd, &[("zipf", code)], &format!("{name} ")));
            }
            vec![one(plain(kinds, &cfg, &w, args), points)]
        }
        Some(Experiment::Breakdown) => {
            let variants = breakdown_variants(kinds, &cfg, args);
            if variants.is_empty() {
                return Err(BenchError::Conflict(
                    "breakdown needs nessie and/or nessie-hy in --systems",
                ));
            }
            vec![one(variants, at_gets(&w, &[], ""))]
        }
        Some(Experiment::CpuContention) => {
            let mut ks: Vec<usize> = vec![0, 1, 2, 4, 8, 16, 32, 64];
            ks.retain(|&k| k <= args.max_background);
            if !ks.contains(&args.max_background) {
                ks.push(args.max_background);
            }
            let points = ks
                .into_iter()
                .map(|k| {
                    let mut p = plan(args, w.clone());
                    p.background = k;
                    point(
                        format!("{k} background threads"),
                        params(&[("background", k as f64)]),
                        p,
                    )
                })
                .collect();
            vec![one(plain(kinds, &cfg, &w, args), points)]
        }
        Some(Experiment::LatencySweep) => SWEEP_LATENCIES_US
            .iter()
            .map(|&l| Group {
                variants: plain(kinds, &cfg, &w, args),
                preload: w.clone(),
                points: at_gets(&w, &[("latency_us", l)], &format!("latency={l} us ")),
                latency_us: Some(l),
            })
            .collect(),
        Some(Experiment::CpuLoad) => {
            let mut points = vec![point(
                "peak (closed loop)".into(),
                params(&[("load", 1.0)]),
                plan(args, w.clone()),
            )];
            for f in LOADS {
                let mut p = point(
                    format!("{:.0}% of peak (Poisson arrivals)", f * 100.0),
                    params(&[("load", f)]),
                    plan(args, w.clone()),
                );
                p.load = Some(f);
                points.push(p);
            }
            vec![one(plain(kinds, &cfg, &w, args), points)]
        }
        Some(Experiment::SizeMix) => size_mix_groups(args, kinds)?,
        Some(e) => cell_groups(args, e, &w),
    })
}

/// size-mix: Facebook's ETC value sizes up to the value size (16 KiB by
/// default) and YCSB's fixed 1 KiB, each a group of Nessie in fixed entries
/// and in size classes (provisioned for the mix) beside the other selected
/// key-value systems in their fixed slots, at `--get-pct`.
fn size_mix_groups(args: &BenchArgs, kinds: &[SystemChoice]) -> Result<Vec<Group>, BenchError> {
    use nessie_workload::ValueMix;
    let mut groups = Vec::new();
    for (sizes, max) in [
        (ValueMix::Etc, args.value_size() as u32),
        (ValueMix::Fixed, 1 << 10),
    ] {
        let (w, fixed) = shape_of(args, max, sizes, false)?;
        let (_, classes) = shape_of(args, max, sizes, true)?;
        let workers = args.server_workers;
        let variants = kinds
            .iter()
            .flat_map(|&k| match k {
                c if c.kind == SystemKind::Nessie => vec![
                    Variant::plain(KvSystem::Nessie, &fixed, workers)
                        .tuned("nessie fixed", |_, _| {}),
                    Variant::plain(KvSystem::Nessie, &classes, workers)
                        .tuned("nessie classes", |_, _| {}),
                ],
                c => c
                    .kind
                    .kv()
                    .map(|k| Variant::plain(k, &fixed, workers))
                    .into_iter()
                    .collect(),
            })
            .collect();
        let label = match sizes {
            ValueMix::Fixed => format!("values of {max} B, {}% GET", w.get_pct),
            _ => format!("{sizes} values up to {max} B, {}% GET", w.get_pct),
        };
        let code = if sizes == ValueMix::Fixed { 0.0 } else { 1.0 };
        let p = point(
            label,
            params(&[("etc", code), ("value_size", f64::from(max))]),
            plan(args, w.clone()),
        );
        groups.push(Group {
            variants,
            preload: w,
            points: vec![p],
            latency_us: None,
        });
    }
    Ok(groups)
}

/// Client counts of cell-clients (Fig. 4: 1 to 12 client processes).
pub const CELL_CLIENTS: [u16; 6] = [1, 2, 4, 6, 8, 12];
/// Server cores per node of cell-cores (Table 2 goes to 8; 2 cores here).
pub const CELL_CORES: [u16; 4] = [1, 2, 3, 4];
/// Scan lengths of cell-scan.
pub const CELL_SCAN_LENGTHS: [u32; 3] = [1, 10, 50];

/// The groups of Cell's experiments.
fn cell_groups(args: &BenchArgs, e: Experiment, w: &Workload) -> Vec<Group> {
    let modes3 = [
        ("cell-server", SearchMode::ServerOnly),
        ("cell-client", SearchMode::ClientOnly),
        ("cell", SearchMode::Selector),
    ];
    let mut searches = w.clone();
    searches.get_pct = 100.0;
    searches.searches = true;
    let shared =
        |nodes: u16, workers: u16, inserts: u64| cell_sizing(args, w, nodes, workers, inserts);
    let group = |variants, preload: &Workload, points| Group {
        variants,
        preload: preload.clone(),
        points,
        latency_us: None,
    };
    match e {
        Experiment::CellClients => {
            // One server node holding one meganode, served by one core; the
            // clients on a second node; no client caches.
            let shape = Sizing {
                nodes: 2,
                server_nodes: 1,
                workers: 1,
                one_meganode: true,
                caches: false,
                ..shared(2, 1, 0)
            };
            let variants = modes3
                .iter()
                .map(|(l, m)| cell_variant(l, *m, &shape, 1))
                .collect();
            let max = args.clients();
            let mut counts: Vec<u16> = CELL_CLIENTS.iter().copied().filter(|&c| c <= max).collect();
            if !counts.contains(&max) {
                counts.push(max);
            }
            let points = counts
                .into_iter()
                .map(|n| {
                    let mut p = plan(args, searches.clone());
                    p.clients = Some(usize::from(n));
                    point(
                        format!("{n} clients"),
                        params(&[("clients", f64::from(n))]),
                        p,
                    )
                })
                .collect();
            vec![group(variants, &searches, points)]
        }
        Experiment::CellCores => CELL_CORES
            .iter()
            .map(|&cores| {
                let shape = shared(args.nodes, cores, 0);
                let meter = Arc::new(ShareMeter::default());
                let mut selector = cell_variant("cell", SearchMode::Selector, &shape, 0);
                let mut fixed = cell_variant("cell-fixed", SearchMode::Fixed(50.0), &shape, 0);
                selector.cell.publish = Some(meter.clone());
                fixed.cell.follow = Some(meter);
                let variants = vec![
                    cell_variant("cell-server", SearchMode::ServerOnly, &shape, 0),
                    selector,
                    fixed,
                ];
                let p = point(
                    format!("{cores} server cores per node"),
                    params(&[("cores", f64::from(cores))]),
                    plan(args, searches.clone()),
                );
                group(variants, &searches, vec![p])
            })
            .collect(),
        Experiment::CellSpike => {
            let shape = shared(args.nodes, args.server_workers, 0);
            let variants = vec![
                cell_variant("cell-server", SearchMode::ServerOnly, &shape, 0),
                cell_variant("cell", SearchMode::Selector, &shape, 0),
            ];
            let mut points = vec![point(
                "peak (closed loop)".into(),
                params(&[("load", 0.0)]),
                plan(args, searches.clone()),
            )];
            for (label, f) in [
                ("base: 45% of server-side peak", 0.45),
                ("spike: 2.5x the base", 0.45 * 2.5),
                ("after the spike: the base again", 0.45),
            ] {
                let mut p = point(
                    label.into(),
                    params(&[("load", f)]),
                    plan(args, searches.clone()),
                );
                p.load_of = Some((0, f));
                points.push(p);
            }
            vec![group(variants, &searches, points)]
        }
        Experiment::CellMixed => {
            let shape = shared(args.nodes, args.server_workers, inserts_bound(args));
            let variants = vec![
                cell_variant("cell-server", SearchMode::ServerOnly, &shape, 0),
                cell_variant("cell", SearchMode::Selector, &shape, 0),
            ];
            let mixes = [
                ("100% get", 100.0, Distribution::Uniform, false),
                ("YCSB-B (95% get, zipf)", 95.0, Distribution::Zipf, false),
                ("YCSB-A (50% get, zipf)", 50.0, Distribution::Zipf, false),
                ("100% update", 0.0, Distribution::Uniform, false),
                ("100% insert", 0.0, Distribution::Uniform, true),
            ];
            let points = mixes
                .iter()
                .map(|&(label, get, dist, inserts)| {
                    let mut m = w.clone();
                    m.get_pct = get;
                    m.distribution = dist;
                    m.inserts = inserts;
                    let p = params(&[("get_pct", get), ("insert", f64::from(u8::from(inserts)))]);
                    point(label.into(), p, plan(args, m))
                })
                .collect();
            vec![group(variants, w, points)]
        }
        Experiment::CellScan => {
            let shape = shared(args.nodes, args.server_workers, inserts_bound(args) / 20);
            let variants = modes3
                .iter()
                .map(|(l, m)| cell_variant(l, *m, &shape, 0))
                .collect();
            let points = CELL_SCAN_LENGTHS
                .iter()
                .map(|&len| {
                    let mut m = w.clone();
                    m.get_pct = 0.0;
                    m.scan_pct = 95.0;
                    m.scan_len = len;
                    m.inserts = true;
                    m.distribution = Distribution::Zipf;
                    let label = format!("scans of {len} (95%), inserts (5%), zipf");
                    point(
                        label,
                        params(&[("scan_len", f64::from(len))]),
                        plan(args, m),
                    )
                })
                .collect();
            vec![group(variants, w, points)]
        }
        _ => Vec::new(),
    }
}

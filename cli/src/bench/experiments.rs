//! The experiments: which variants are started (a *group* shares one store
//! shape and one preload) and which points each group measures. Without
//! `--experiment`, one group of the selected systems measured at one point.

use std::collections::BTreeMap;
use std::time::Duration;

use nessie_baselines::SystemKind;
use nessie_protocol::Config;

use super::args::{BenchArgs, Experiment};
use super::driver::{Budget, PointPlan};
use super::error::BenchError;
use super::system::Variant;
use super::workload::{Distribution, Workload};
use crate::sizing::{store_config, Shape};

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
    let budget = args.data_budget_mib << 20;
    let keys = args
        .keys
        .min((budget / u64::from(value_size)).max(64))
        .max(1);
    let cfg = store_config(&Shape {
        nodes: args.nodes,
        clients: args.clients,
        keys,
        key_size: args.key_size as u32,
        value_size,
        load_factor: args.load_factor,
        migrate_depth: 6,
        expiration: Duration::from_millis(args.expiration_ms),
    })?;
    let w = Workload {
        keys,
        key_size: args.key_size as u32,
        value_size,
        get_pct: args.get_pct,
        distribution: args.distribution(),
        zipf_theta: args.zipf_theta,
        locality_pct: args.locality_pct,
        seed: args.seed,
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
    }
}

fn plain(kinds: &[SystemKind], cfg: &Config, args: &BenchArgs) -> Vec<Variant> {
    kinds
        .iter()
        .map(|&k| Variant::plain(k, cfg, args.server_workers))
        .collect()
}

fn point(label: String, params: BTreeMap<String, f64>, plan: PointPlan) -> Point {
    Point {
        label,
        params,
        plan,
        load: None,
    }
}

/// Nessie's and NessieHY's optimisations switched on one after the other.
fn breakdown_variants(kinds: &[SystemKind], cfg: &Config, args: &BenchArgs) -> Vec<Variant> {
    let mut out = Vec::new();
    if kinds.contains(&SystemKind::Nessie) {
        let base = Variant::plain(SystemKind::Nessie, cfg, args.server_workers).tuned(
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
    if kinds.contains(&SystemKind::NessieHy) {
        let base = Variant::plain(SystemKind::NessieHy, cfg, args.server_workers)
            .tuned("hy basic", |_, _| {});
        let filter = base.tuned("hy +filter", |_, h| h.filter_bits = true);
        let cache = filter.tuned("hy +cache", |_, h| h.cache = true);
        let multi = cache.tuned("hy +multi", |_, h| h.multiple_reads = true);
        out.extend([base, filter, cache, multi]);
    }
    out
}

/// The groups of `args`' experiment (or of the single comparison).
pub fn groups(args: &BenchArgs, kinds: &[SystemKind]) -> Result<Vec<Group>, BenchError> {
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
            let label = format!(
                "{} nodes x {} clients, {} keys of {} B, values {} B, {}% GET, {:?}",
                args.nodes,
                args.clients,
                w.keys,
                w.key_size,
                w.value_size,
                w.get_pct,
                w.distribution
            );
            let p = point(
                label,
                params(&[("get_pct", w.get_pct)]),
                plan(args, w.clone()),
            );
            vec![one(plain(kinds, &cfg, args), vec![p])]
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
                    variants: plain(kinds, &cfg, args),
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
            vec![one(plain(kinds, &cfg, args), points)]
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
            vec![one(plain(kinds, &cfg, args), points)]
        }
        Some(Experiment::LatencySweep) => SWEEP_LATENCIES_US
            .iter()
            .map(|&l| Group {
                variants: plain(kinds, &cfg, args),
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
            vec![one(plain(kinds, &cfg, args), points)]
        }
    })
}

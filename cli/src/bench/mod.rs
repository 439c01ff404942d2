//! `nessie bench`: the systems side by side on the simulated fabric. The
//! benchmark itself (variants, slices, points, the papers' experiments) is
//! the `nessie-bench` crate; this module runs its groups of points with a
//! progress bar, prints them (text or `--json`) and draws the SVG charts
//! ([`plot`]).

pub mod plot;

use std::io::IsTerminal;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;

pub use nessie_bench::{BenchArgs, BenchError, Experiment};

use nessie_bench::report::{self, PointResult, SystemResult};
use nessie_bench::Started;
use nessie_bench::{groups, Group};
use nessie_bench::{measure, rounds};

/// Everything `--json` prints.
#[derive(Debug, Serialize)]
pub struct BenchReport {
    /// The experiment (`null`: a single comparison).
    pub experiment: Option<&'static str>,
    /// Nodes.
    pub nodes: u16,
    /// Client threads per node.
    pub clients_per_node: u16,
    /// Server workers per node.
    pub server_workers: u16,
    /// Simulated NIC latency in microseconds (`null` for latency-sweep,
    /// whose points carry their own in `params`).
    pub latency_us: Option<f64>,
    /// Length of one slice in milliseconds.
    pub slice_ms: u64,
    /// The points.
    pub points: Vec<PointResult>,
    /// Charts written by `--plot`.
    pub plots: Vec<String>,
    /// Wall-clock seconds of the whole run.
    pub wall_seconds: f64,
}

fn progress(args: &BenchArgs, gs: &[Group]) -> ProgressBar {
    let slices: u64 = gs
        .iter()
        .map(|g| g.points.iter().map(|p| rounds(&p.plan)).sum::<u64>() * g.variants.len() as u64)
        .sum();
    let estimate = match args.ops {
        // n operations per system and point (split over its slices); guess
        // 100k operations per second.
        Some(n) => {
            let runs: u64 = gs
                .iter()
                .map(|g| (g.points.len() * g.variants.len()) as u64)
                .sum();
            (n * runs) as f64 / 100_000.0
        }
        None => slices as f64 * args.slice_ms as f64 / 1000.0,
    };
    let show = !args.quiet && std::io::stderr().is_terminal() && estimate > 2.0;
    if !show {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::with_draw_target(Some(slices), ProgressDrawTarget::stderr());
    pb.set_style(
        ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:40} {pos}/{len} slices {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    pb
}

/// Runs one group: starts and preloads its variants, measures its points.
fn run_group(
    args: &BenchArgs,
    g: &Group,
    pb: &ProgressBar,
    out: &mut Vec<PointResult>,
) -> Result<(), BenchError> {
    pb.set_message(format!("starting {} systems", g.variants.len()));
    let mut systems = g
        .variants
        .iter()
        .map(|v| Started::start(v.clone(), g.latency_us.unwrap_or(args.latency_us)))
        .collect::<Result<Vec<_>, _>>()?;
    for s in &mut systems {
        pb.set_message(format!(
            "preloading {} ({} keys)",
            s.variant.label, g.preload.keys
        ));
        s.preload(&g.preload);
    }
    if let Some(split) = g.points.first().and_then(|p| p.plan.cores.as_ref()) {
        // Every server thread of the group's systems exists now (workers and
        // maintenance threads start with their deployment).
        let moved = split.pin_server_threads()?;
        pb.suspend(|| {
            eprintln!(
                "{moved} server threads on core(s) {:?}, client threads on {:?}",
                split.servers(),
                split.clients()
            )
        });
    }
    if systems.iter().all(|s| s.failed.is_some()) {
        let why: Vec<String> = systems
            .iter()
            .map(|s| {
                format!(
                    "{}: {}",
                    s.variant.label,
                    s.failed.clone().unwrap_or_default()
                )
            })
            .collect();
        return Err(BenchError::NothingMeasured(why.join("; ")));
    }
    let mut peaks: Vec<f64> = vec![0.0; systems.len()];
    for p in &g.points {
        pb.set_message(p.label.clone());
        let mut plan = p.plan.clone();
        if let Some(f) = p.load {
            plan.rates = Some(peaks.iter().map(|x| x * f).collect());
        }
        if let Some((i, f)) = p.load_of {
            let r = peaks.get(i).copied().unwrap_or(0.0) * f;
            plan.rates = Some(vec![r; peaks.len()]);
        }
        let accs = measure(&mut systems, &plan, || pb.inc(1));
        let results: Vec<SystemResult> = systems
            .iter()
            .zip(&accs)
            .map(|(s, a)| SystemResult::new(s, a, plan.workload.mean_value_len()))
            .collect();
        if p.load.is_none() && p.load_of.is_none() {
            peaks = results.iter().map(|r| r.throughput).collect();
        }
        let point = PointResult {
            label: p.label.clone(),
            params: p.params.clone(),
            systems: results,
        }
        .with_ratios();
        if !args.json {
            let text = if args.experiment.is_none() {
                report::detailed(&point)
            } else {
                report::compact(&point)
            };
            pb.suspend(|| println!("{text}"));
        }
        out.push(point);
    }
    for s in &mut systems {
        s.deployment.stop();
    }
    Ok(())
}

/// The closing table of an experiment: throughput ratios per point, or for
/// cpu-load the cores busy and CPU time per operation.
fn summary(points: &[PointResult], cpu: bool) -> String {
    let Some(first) = points.first() else {
        return String::new();
    };
    let mut s = if cpu {
        "Summary: cores busy (client + server CPU seconds per second) / CPU us per operation\n"
            .to_string()
    } else {
        format!(
            "Summary: throughput (kops/s) of the reference (the first system measured at the point, normally {}) and every other system's ratio to it\n",
            first.systems[0].label
        )
    };
    s += &format!("{:<40}", "point");
    for r in &first.systems {
        s += &format!(" {:>14}", r.label);
    }
    s += "\n";
    for p in points {
        s += &format!("{:<40}", p.label);
        // The system the ratios are against (as in `PointResult::with_ratios`).
        let reference = p.systems.iter().position(|r| r.error.is_none());
        for (i, r) in p.systems.iter().enumerate() {
            let cell = match r.ratio {
                None => "-".to_string(),
                Some(_) if cpu => format!("{:.2} / {:.1}", r.cores_busy, r.cpu_us_per_op),
                Some(_) if Some(i) == reference => format!("{:.1}k", r.throughput / 1000.0),
                Some(x) => format!("{x:.2}x"),
            };
            s += &format!(" {cell:>14}");
        }
        s += "\n";
    }
    s
}

/// Runs `nessie bench`.
pub fn bench(args: &BenchArgs) -> Result<(), BenchError> {
    let kinds = args.check()?;
    let t0 = Instant::now();
    let mut gs = groups(args, &kinds)?;
    let split = nessie_bench::CoreSplit::new(args.server_cores())?;
    for p in gs.iter_mut().flat_map(|g| g.points.iter_mut()) {
        p.plan.cores = split.clone();
    }
    let latency_us = (args.experiment != Some(Experiment::LatencySweep)).then_some(args.latency_us);
    if !args.json {
        println!(
            "nessie bench{}: {} nodes x {} client threads, {} server worker(s) per node, NIC latency {}, slices of {} ms, {} per system per point",
            args.experiment.map_or(String::new(), |e| format!(" --experiment {}", e.name())),
            args.nodes,
            args.clients(),
            args.server_workers,
            latency_us.map_or("per point".to_string(), |l| format!("{l} us")),
            args.slice_ms,
            args.ops.map_or(format!("{} s", args.seconds()), |n| format!("{n} ops")),
        );
    }
    let pb = progress(args, &gs);
    let mut points = Vec::new();
    for g in &gs {
        run_group(args, g, &pb, &mut points)?;
    }
    pb.finish_and_clear();
    let plots = match &args.plot {
        Some(dir) => plot::write_all(dir, args.experiment, &points)?,
        None => Vec::new(),
    };
    if args.json {
        let r = BenchReport {
            experiment: args.experiment.map(Experiment::name),
            nodes: args.nodes,
            clients_per_node: args.clients(),
            server_workers: args.server_workers,
            latency_us,
            slice_ms: args.slice_ms,
            points,
            plots,
            wall_seconds: t0.elapsed().as_secs_f64(),
        };
        println!(
            "{}",
            serde_json::to_string_pretty(&r).map_err(std::io::Error::other)?
        );
    } else {
        if args.experiment.is_some() {
            println!(
                "{}",
                summary(&points, args.experiment == Some(Experiment::CpuLoad))
            );
        }
        for f in &plots {
            println!("wrote {f}");
        }
        println!("done in {:.1} s", t0.elapsed().as_secs_f64());
    }
    Ok(())
}

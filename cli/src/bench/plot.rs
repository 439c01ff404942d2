//! SVG charts of the results (plotters' SVG backend only: no system font
//! libraries are needed, text is left to the SVG viewer).

use std::path::Path;

use plotters::prelude::*;

use nessie_bench::report::PointResult;
use nessie_bench::BenchError;
use nessie_bench::Experiment;

/// One line of a chart.
pub type Series = (String, Vec<(f64, f64)>);

const COLORS: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// Writes a line chart of `series` to `path`; `log2_x` plots x on a log2 axis.
pub fn line_chart(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    log2_x: bool,
) -> Result<(), String> {
    let tx = |x: f64| if log2_x { x.max(1e-9).log2() } else { x };
    let pts = || series.iter().flat_map(|(_, v)| v.iter());
    let (mut x0, mut x1) = pts().fold((f64::MAX, f64::MIN), |(a, b), p| {
        (a.min(tx(p.0)), b.max(tx(p.0)))
    });
    let y1 = pts().fold(0.0f64, |a, p| a.max(p.1));
    if x0 > x1 {
        (x0, x1) = (0.0, 1.0);
    }
    if x1 - x0 < 1e-9 {
        x1 = x0 + 1.0;
    }
    let y1 = if y1 > 0.0 { y1 * 1.1 } else { 1.0 };
    let root = SVGBackend::new(path, (800, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(x0..x1, 0.0..y1)
        .map_err(|e| e.to_string())?;
    let fmt_x = |x: &f64| {
        if log2_x {
            let v = x.exp2();
            if v >= 1024.0 {
                format!("{:.0}K", v / 1024.0)
            } else {
                format!("{v:.0}")
            }
        } else {
            format!("{x}")
        }
    };
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .x_label_formatter(&fmt_x)
        .draw()
        .map_err(|e| e.to_string())?;
    for (i, (name, v)) in series.iter().enumerate() {
        let c = COLORS[i % COLORS.len()];
        let data: Vec<(f64, f64)> = v.iter().map(|&(x, y)| (tx(x), y)).collect();
        chart
            .draw_series(LineSeries::new(data.clone(), c.stroke_width(2)))
            .map_err(|e| e.to_string())?
            .label(name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
        chart
            .draw_series(data.into_iter().map(|p| Circle::new(p, 3, c.filled())))
            .map_err(|e| e.to_string())?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())
}

/// `y` of every system over the points where `keep` holds, x from `x`.
fn by_system(
    points: &[PointResult],
    keep: impl Fn(&PointResult) -> bool,
    x: impl Fn(&PointResult) -> f64,
    y: impl Fn(&super::report::SystemResult) -> f64,
) -> Vec<Series> {
    let mut out: Vec<Series> = Vec::new();
    for p in points.iter().filter(|p| keep(p)) {
        for s in p.systems.iter().filter(|s| s.error.is_none()) {
            let at = (x(p), y(s));
            match out.iter_mut().find(|(n, _)| *n == s.label) {
                Some((_, v)) => v.push(at),
                None => out.push((s.label.clone(), vec![at])),
            }
        }
    }
    out
}

fn param(p: &PointResult, k: &str) -> f64 {
    p.params.get(k).copied().unwrap_or(0.0)
}

/// Writes the charts of an experiment (or of a single comparison) into `dir`.
pub fn write_all(
    dir: &Path,
    exp: Option<Experiment>,
    points: &[PointResult],
) -> Result<Vec<String>, BenchError> {
    std::fs::create_dir_all(dir)?;
    let mut files = Vec::new();
    let mut chart = |name: &str, title: &str, xl: &str, yl: &str, s: Vec<Series>, log2: bool| {
        let path = dir.join(name);
        line_chart(&path, title, xl, yl, &s, log2).map_err(|reason| BenchError::Plot {
            dir: dir.display().to_string(),
            reason,
        })?;
        files.push(path.display().to_string());
        Ok::<(), BenchError>(())
    };
    let kops = |s: &super::report::SystemResult| s.throughput / 1000.0;
    match exp {
        None => {
            for (op, pick) in [("get", 0usize), ("put", 1)] {
                for (what, idx) in [("reads", 0usize), ("writes", 1), ("cas", 2)] {
                    let mut series = Vec::new();
                    for s in points.iter().flat_map(|p| &p.systems) {
                        let k = if pick == 0 { &s.get } else { &s.put };
                        if let Some(k) = k {
                            let h = [&k.reads_hist, &k.writes_hist, &k.cas_hist][idx];
                            let v = h
                                .iter()
                                .enumerate()
                                .map(|(i, f)| (i as f64, f * 100.0))
                                .collect();
                            series.push((s.label.clone(), v));
                        }
                    }
                    let title = format!("RDMA {what} per {}", op.to_uppercase());
                    chart(
                        &format!("{op}-{what}.svg"),
                        &title,
                        &format!("{what} per operation"),
                        "% of operations",
                        series,
                        false,
                    )?;
                }
            }
        }
        Some(Experiment::ValueSweep) => {
            for g in nessie_bench::SWEEP_GETS {
                let keep = |p: &PointResult| param(p, "get_pct") == g;
                let x = |p: &PointResult| param(p, "value_size");
                chart(
                    &format!("value-sweep-get{g}.svg"),
                    &format!("Throughput, {g}% GETs"),
                    "value bytes (log2)",
                    "kops/s",
                    by_system(points, keep, x, kops),
                    true,
                )?;
                let gp = |s: &super::report::SystemResult| s.goodput_bytes_per_s / 1e6;
                chart(
                    &format!("value-sweep-goodput-get{g}.svg"),
                    &format!("Goodput, {g}% GETs"),
                    "value bytes (log2)",
                    "MB/s",
                    by_system(points, keep, x, gp),
                    true,
                )?;
            }
        }
        Some(Experiment::LatencySweep) => {
            for g in nessie_bench::SWEEP_GETS {
                let keep = |p: &PointResult| param(p, "get_pct") == g;
                chart(
                    &format!("latency-sweep-get{g}.svg"),
                    &format!("Throughput vs NIC latency, {g}% GETs"),
                    "simulated NIC latency (us)",
                    "kops/s",
                    by_system(points, keep, |p| param(p, "latency_us"), kops),
                    false,
                )?;
            }
        }
        Some(Experiment::Zipf) => {
            for (z, name) in [(0.0, "uniform"), (1.0, "zipf")] {
                let keep = |p: &PointResult| param(p, "zipf") == z;
                chart(
                    &format!("zipf-{name}.svg"),
                    &format!("Throughput, {name} keys"),
                    "% GETs",
                    "kops/s",
                    by_system(points, keep, |p| param(p, "get_pct"), kops),
                    false,
                )?;
            }
        }
        Some(Experiment::Breakdown) => {
            chart(
                "breakdown.svg",
                "Optimisation breakdown",
                "% GETs",
                "kops/s",
                by_system(points, |_| true, |p| param(p, "get_pct"), kops),
                false,
            )?;
        }
        Some(Experiment::CpuContention) => {
            chart(
                "cpu-contention.svg",
                "Throughput under CPU contention",
                "background busy threads",
                "kops/s",
                by_system(points, |_| true, |p| param(p, "background"), kops),
                false,
            )?;
        }
        Some(Experiment::CpuLoad) => {
            let keep = |p: &PointResult| param(p, "load") < 1.0;
            let x = |p: &PointResult| param(p, "load") * 100.0;
            chart(
                "cpu-load-cores.svg",
                "CPU busy (clients + servers)",
                "% of peak load",
                "cores",
                by_system(points, keep, x, |s| s.cores_busy),
                false,
            )?;
            chart(
                "cpu-load-per-op.svg",
                "CPU time per operation",
                "% of peak load",
                "us per op",
                by_system(points, keep, x, |s| s.cpu_us_per_op),
                false,
            )?;
        }
        Some(Experiment::CellClients) => {
            let x = |p: &PointResult| param(p, "clients");
            chart(
                "cell-clients-throughput.svg",
                "Searches of one meganode, one server core (Cell Fig. 4)",
                "clients",
                "kops/s",
                by_system(points, |_| true, x, kops),
                false,
            )?;
            let lat =
                |s: &super::report::SystemResult| s.get.as_ref().map_or(0.0, |k| k.latency_us.p50);
            chart(
                "cell-clients-latency.svg",
                "Median search latency (Cell Fig. 4)",
                "clients",
                "us",
                by_system(points, |_| true, x, lat),
                false,
            )?;
        }
        Some(Experiment::CellCores) => {
            chart(
                "cell-cores.svg",
                "Searches vs server cores (Cell Table 2)",
                "server cores per node",
                "kops/s",
                by_system(points, |_| true, |p| param(p, "cores"), kops),
                false,
            )?;
        }
        Some(Experiment::CellSpike) => {
            let lat =
                |s: &super::report::SystemResult| s.get.as_ref().map_or(0.0, |k| k.latency_us.p99);
            chart(
                "cell-spike-p99.svg",
                "p99 search latency at base load and spike (Cell Fig. 7)",
                "offered load (fraction of server-side peak)",
                "us",
                by_system(
                    points,
                    |p| param(p, "load") > 0.0,
                    |p| param(p, "load"),
                    lat,
                ),
                false,
            )?;
        }
        Some(Experiment::CellMixed) => {
            chart(
                "cell-mixed.svg",
                "Get/put mixes (Cell Fig. 9)",
                "% gets",
                "kops/s",
                by_system(
                    points,
                    |p| param(p, "insert") == 0.0,
                    |p| param(p, "get_pct"),
                    kops,
                ),
                false,
            )?;
        }
        Some(Experiment::SizeMix) => {
            chart(
                "size-mix.svg",
                "Value size mixes: fixed entries vs size classes",
                "value mix (0: 1 KiB fixed, 1: ETC)",
                "kops/s",
                by_system(points, |_| true, |p| param(p, "etc"), kops),
                false,
            )?;
        }
        Some(Experiment::CellScan) => {
            chart(
                "cell-scan.svg",
                "Range scans (95%) with inserts",
                "entries per scan",
                "kops/s",
                by_system(points, |_| true, |p| param(p, "scan_len"), kops),
                false,
            )?;
        }
    }
    Ok(files)
}

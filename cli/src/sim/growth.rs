//! `nessie sim --growth`: Nessie's index growing online in the cluster
//! simulator (issue 39, docs/protocol.md §2.5), next to a run whose index
//! needs no growth.
//!
//! Half the keys are preloaded into a generation 0 sized to hold them at
//! [`START_LOAD`]; the workload's PUTs of the other half insert them, so
//! generation 0 fills and a PUT starts a growth into generation 1 (twice the
//! size), which every write then helps to sweep. The report splits the
//! measured workload by where the directory stood when each operation
//! ended: before the growth, during it, after it. The comparison run is the
//! same workload on an index that starts at generation 1's size and cannot
//! grow.

use nessie_sim::{simulate, GrowthPhase, SimError, SimReport, SimSpec};

/// The load at which the preloaded keys fill generation 0.
pub const START_LOAD: f64 = 0.8;

/// Generations the growing index may use (one growth is expected; the
/// others are room for a second one should the first fill).
const GENERATIONS: u8 = 3;

/// A growing run and the run that needs no growth, at one cluster size.
pub struct GrowthPoint {
    /// Nodes.
    pub nodes: u16,
    /// The run whose index grows.
    pub grows: SimReport,
    /// The same workload on an index as large as the grown one from the
    /// start, which never grows.
    pub fixed: SimReport,
}

/// Runs `base` (Nessie's spec at one cluster size) twice: with an index
/// that grows from generation 0, and with one of the grown size.
pub fn growth_point(base: &SimSpec) -> Result<GrowthPoint, SimError> {
    let preloaded = base.keys.div_ceil(2);
    let b = u64::from(base.tuning.bucket_slots.unwrap_or(1).max(1));
    let per_node = ((preloaded as f64 / START_LOAD) / f64::from(base.nodes)).ceil() as u64;
    let slots = u32::try_from(per_node.next_multiple_of(b).max(16))
        .map_err(|_| SimError::Spec("too many keys per node for a growing index".into()))?;
    let mut grows = base.clone();
    grows.preload_pct = 50;
    // Room in every client's share for its keys twice over (a growth's
    // move takes an entry for the key's copy) and for a run longer than the
    // default sizing's spare entries carry at 15 nodes and more, where
    // nearly every update marks another client's entry, reusable only two
    // of its owner's sweeps later: neither run is to meet `DataTableFull`.
    let clients = u64::from(base.nodes) * u64::from(base.clients_per_node);
    grows.entries_per_client = Some(
        u32::try_from(4 * base.keys.div_ceil(clients.max(1)) + 1024)
            .map_err(|_| SimError::Spec("too many keys per client".into()))?,
    );
    grows.tuning.index_slots_per_node = Some(slots);
    grows.tuning.index_generations = Some(GENERATIONS);
    let mut fixed = grows.clone();
    fixed.tuning.index_slots_per_node = Some(nessie_protocol::hash::generation_slots(slots, 1));
    fixed.tuning.index_generations = Some(1);
    Ok(GrowthPoint {
        nodes: base.nodes,
        grows: simulate(&grows)?,
        fixed: simulate(&fixed)?,
    })
}

/// One row of the table: the figures of one phase (or of a whole run).
struct Row<'a> {
    nodes: u16,
    index: &'a str,
    ms: f64,
    ops_per_sec: f64,
    puts: u64,
    failures: u64,
    /// GET p50 and p99, PUT p50 and p99, µs.
    latencies: [f64; 4],
    seals: String,
}

impl Row<'_> {
    fn print(&self) {
        let [g50, g99, p50, p99] = self.latencies;
        println!(
            "{:<6} {:<14} {:>8.2} {:>11.0} {:>8} {:>6} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>8}",
            self.nodes,
            self.index,
            self.ms,
            self.ops_per_sec,
            self.puts,
            self.failures,
            g50,
            g99,
            p50,
            p99,
            self.seals
        );
    }
}

/// Prints the points as a table: each growing run's phases, then the run
/// that needs none.
pub fn print(points: &[GrowthPoint]) {
    println!(
        "{:<6} {:<14} {:>8} {:>11} {:>8} {:>6} {:>8} {:>8} {:>8} {:>8} {:>8}",
        "nodes",
        "index",
        "ms",
        "ops/s",
        "PUTs",
        "fail",
        "GET p50",
        "GET p99",
        "PUT p50",
        "PUT p99",
        "seals"
    );
    for pt in points {
        for ph in &pt.grows.growth_phases {
            Row {
                nodes: pt.nodes,
                index: &format!("grows: {}", ph.phase.name()),
                ms: ph.ms,
                ops_per_sec: ph.ops_per_sec,
                puts: ph.puts,
                failures: ph.failures,
                latencies: [ph.get_p50_us, ph.get_p99_us, ph.put_p50_us, ph.put_p99_us],
                seals: if ph.phase == GrowthPhase::During {
                    pt.grows.growth.seals.to_string()
                } else {
                    "-".into()
                },
            }
            .print();
        }
        let f = &pt.fixed;
        Row {
            nodes: pt.nodes,
            index: "fixed: all",
            ms: (f.ops as f64 / f.ops_per_sec.max(1e-9)) * 1e3,
            ops_per_sec: f.ops_per_sec,
            puts: f.puts,
            failures: f.failures,
            latencies: [f.get_p50_us, f.get_p99_us, f.put_p50_us, f.put_p99_us],
            seals: "-".into(),
        }
        .print();
        for r in [&pt.grows, &pt.fixed] {
            if r.stuck > 0 || !r.corrupt.is_empty() {
                println!(
                    "warning: at {} nodes: {} operations still ran at the horizon, {} corrupt states",
                    pt.nodes,
                    r.stuck,
                    r.corrupt.len()
                );
            }
        }
    }
}

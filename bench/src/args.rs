//! The command line of `nessie bench` and its validation.

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use nessie_systems::SystemKind;

use crate::error::{parse_size, BenchError};
use crate::workload::Distribution;

/// Largest value the benchmark runs (the papers' largest).
pub const MAX_VALUE: u64 = 128 << 10;

/// The papers' figures this command reproduces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Experiment {
    /// Values 256 B .. 128 KiB at 50/90/99 % GETs (Nessie Figs 5-7, Table 1).
    ValueSweep,
    /// Uniform vs Zipf 0.99 keys at 50/90/99 % GETs (Fig. 12).
    Zipf,
    /// Nessie basic/+filter/+cache/+previous versions/+multiple reads and
    /// NessieHY basic/+filter/+cache/+multiple reads (Fig. 13).
    Breakdown,
    /// 0..k background busy-spinning threads (Fig. 4).
    CpuContention,
    /// CPU time at 20/40/60/80 % of each system's peak, Poisson arrivals (Fig. 14).
    CpuLoad,
    /// Simulated NIC latency 0 .. 400 us at 50/90/99 % GETs: where round trips
    /// outweigh CPU, the regime of the papers' small-value results.
    LatencySweep,
    /// Cell Fig. 4: one meganode on one server core, 1 to 12 clients:
    /// server-side vs client-side vs selector searches.
    CellClients,
    /// Cell Table 2: 1 to 4 server cores per node: server-side only, the
    /// selector, and a fixed ratio at the selector's average.
    CellCores,
    /// Cell Fig. 7: open-loop searches at a base load, a 2.5x spike, and back.
    CellSpike,
    /// Cell Fig. 9: get/put mixes (100 % get, YCSB-B, YCSB-A, 100 % update,
    /// 100 % insert), server-side only vs selector.
    CellMixed,
    /// Range scans of 1, 10 and 50 entries with 5 % inserts (YCSB-E-like).
    CellScan,
    /// Values of Facebook's ETC mix (up to 16 KiB) and YCSB's fixed 1 KiB:
    /// Nessie with fixed entries and with size classes beside the other
    /// systems, throughput and memory per byte stored (issue 41).
    SizeMix,
}

impl Experiment {
    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Experiment::ValueSweep => "value-sweep",
            Experiment::Zipf => "zipf",
            Experiment::Breakdown => "breakdown",
            Experiment::CpuContention => "cpu-contention",
            Experiment::CpuLoad => "cpu-load",
            Experiment::LatencySweep => "latency-sweep",
            Experiment::CellClients => "cell-clients",
            Experiment::CellCores => "cell-cores",
            Experiment::CellSpike => "cell-spike",
            Experiment::CellMixed => "cell-mixed",
            Experiment::CellScan => "cell-scan",
            Experiment::SizeMix => "size-mix",
        }
    }

    /// Whether this is one of Cell's experiments (which choose their own
    /// Cell variants and ignore `--systems`).
    pub fn is_cell(self) -> bool {
        matches!(
            self,
            Experiment::CellClients
                | Experiment::CellCores
                | Experiment::CellSpike
                | Experiment::CellMixed
                | Experiment::CellScan
        )
    }
}

/// A system `--systems` names: a [`SystemKind`], and for Cell how its
/// clients search (`cell`: the selector, `cell-server`, `cell-client`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SystemChoice {
    /// The system.
    pub kind: SystemKind,
    /// How Cell's clients search (Cell only; the selector for the others).
    pub search: nessie_cell::SearchMode,
}

impl SystemChoice {
    /// `kind`, searching by the selector if it is Cell.
    pub fn of(kind: SystemKind) -> SystemChoice {
        SystemChoice {
            kind,
            search: nessie_cell::SearchMode::Selector,
        }
    }

    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self.kind {
            SystemKind::Cell => crate::cell::mode_name(self.search),
            kind => kind.name(),
        }
    }
}

/// Options of `nessie bench`.
#[derive(Args, Debug, Clone)]
#[command(after_help = "\
Experiments (--experiment NAME):
  value-sweep     values 256 B..128 KiB at 50/90/99 % GETs (Figs 5-7, Table 1)
  zipf            uniform vs Zipf 0.99 at 50/90/99 % GETs (Fig. 12)
  breakdown       Nessie basic/+filter/+cache/+prev. versions/+multiple reads, NessieHY likewise (Fig. 13)
  cpu-contention  0..k background busy-spinning threads (Fig. 4)
  cpu-load        CPU time at 20/40/60/80 % of each system's peak, Poisson arrivals (Fig. 14)
  latency-sweep   simulated NIC latency 0..400 us at 50/90/99 % GETs (round trips vs CPU)
  cell-clients    Cell Fig. 4: one meganode, one server core, 1..12 clients: server-side vs client-side vs selector
  cell-cores      Cell Table 2: 1..4 server cores per node: server-side only vs selector vs fixed ratio
  cell-spike      Cell Fig. 7: open-loop searches at a base load, a 2.5x load spike, and back
  cell-mixed      Cell Fig. 9: get/put mixes incl. YCSB-A/B and 100 % insert, server-side only vs selector
  cell-scan       Cell range scans of 1/10/50 entries with 5 % inserts (YCSB-E-like)
  size-mix        Facebook's ETC value sizes (up to --value-size, 16 KiB) and YCSB's 1 KiB: Nessie in fixed
                  entries and in size classes beside the others, throughput and memory per byte stored
The cell-* experiments run Cell variants only (--systems does not apply).
Systems: nessie, nessie-sd, nessie-hy, pilaf, race, cell (locality selector), cell-server, cell-client.
Without --experiment: one mixed workload on every selected system.
All systems of a point are measured interleaved, in alternating slices.")]
pub struct BenchArgs {
    /// A named experiment (see below); none: one comparison at the given workload.
    #[arg(long, value_enum)]
    pub experiment: Option<Experiment>,
    /// Systems to compare, the first is the reference of the ratios.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "nessie,nessie-sd,nessie-hy,pilaf,race,rcuckoo"
    )]
    pub systems: Vec<String>,
    /// Nodes in the simulated cluster.
    #[arg(long, default_value_t = 3)]
    pub nodes: u16,
    /// Client threads per node (default 2; 4 for the cell-* experiments,
    /// up to 12 on the one client node of cell-clients).
    #[arg(long)]
    pub clients: Option<u16>,
    /// Server worker threads per node (NessieSD, NessieHY, Pilaf).
    #[arg(long, default_value_t = 1)]
    pub server_workers: u16,
    /// Distinct keys, all preloaded (capped by --data-budget-mib for large values).
    #[arg(long, default_value_t = 10_000)]
    pub keys: u64,
    /// Key size in bytes (default 128; 32 for the cell-* experiments, within
    /// the Cell paper's 8-64 B).
    #[arg(long, value_parser = parse_size)]
    pub key_size: Option<u64>,
    /// Value size (256 B .. 128 KiB; suffixes K, KiB). Default: 256 B, except
    /// 16 KiB for breakdown, cpu-contention and cpu-load (the papers' setting
    /// of Figs 13, 4 and 14).
    #[arg(long, value_parser = parse_size)]
    pub value_size: Option<u64>,
    /// How value sizes are drawn (at most the value size): fixed, uniform,
    /// or etc (Facebook's ETC pool). size-mix sets its own.
    #[arg(long, value_enum, default_value_t = nessie_workload::ValueMix::Fixed)]
    pub value_mix: nessie_workload::ValueMix,
    /// Percent of GETs; the rest are PUTs of existing keys.
    #[arg(long, default_value_t = 90.0)]
    pub get_pct: f64,
    /// One of YCSB's core workloads (ycsb-a ... ycsb-f) instead of
    /// `--get-pct` and `--distribution` (one comparison only; ycsb-e's scans
    /// need Cell: the key-value systems run its scans as GETs of the scan's
    /// first key, as every scan the bench asks of them).
    #[arg(long, value_enum, conflicts_with = "experiment")]
    pub workload: Option<nessie_workload::Ycsb>,
    /// Key distribution. Default: uniform, except zipf for breakdown (the
    /// paper's Fig. 13 is a Zipf workload).
    #[arg(long, value_enum)]
    pub distribution: Option<Distribution>,
    /// Zipf exponent theta.
    #[arg(long, default_value_t = 0.99)]
    pub zipf_theta: f64,
    /// Under --distribution locality: percent of accesses to the node's own working set.
    #[arg(long, default_value_t = 90.0)]
    pub locality_pct: f64,
    /// Measured seconds per system and point (default 2 for one comparison,
    /// 0.4 per point for experiments).
    #[arg(long, conflicts_with = "ops")]
    pub seconds: Option<f64>,
    /// Instead of a duration: exactly this many operations per system and point.
    #[arg(long)]
    pub ops: Option<u64>,
    /// Length of one measured slice; systems alternate slice by slice.
    #[arg(long, default_value_t = 100)]
    pub slice_ms: u64,
    /// Seed of the workload generators.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Simulated latency of every NIC operation, in microseconds (0: none;
    /// delays are slept, so below ~60 us they round up to the timer slack).
    #[arg(long, default_value_t = 0.0)]
    pub latency_us: f64,
    /// Index load factor after the preload.
    #[arg(long, default_value_t = 0.5)]
    pub load_factor: f64,
    /// The expiration period T in milliseconds.
    #[arg(long, default_value_t = 100)]
    pub expiration_ms: u64,
    /// Cap on the preloaded value bytes per system, in MiB (fewer keys for large values).
    #[arg(long, default_value_t = 64)]
    pub data_budget_mib: u64,
    /// Operations each Nessie client thread keeps in flight (comma
    /// separated: one Nessie variant per depth, `nessie-d<D>` above 1,
    /// measured side by side). A thread then drives a pipeline of D protocol
    /// clients. The baselines and Cell run one operation per thread (their
    /// clients are blocking request-response calls). Closed-loop
    /// comparisons only (not cpu-load or the cell-* experiments).
    #[arg(long, value_delimiter = ',', default_value = "1")]
    pub depth: Vec<u16>,
    /// cpu-contention: the largest number of background spinning threads.
    #[arg(long, default_value_t = 4)]
    pub max_background: usize,
    /// Cores kept for the server threads (the server-driven systems' and
    /// Cell's workers, Cell's maintenance threads): the last this many of
    /// the cores the process may use, the client threads on the others
    /// (Linux `sched_setaffinity`); 0: no pinning. Default: 1 for the
    /// cell-* experiments but cell-cores (so that the server-side-only
    /// line does not share its core with polling clients), 0 otherwise
    /// (cell-cores varies the server cores itself).
    #[arg(long)]
    pub server_cores: Option<usize>,
    /// Print JSON on stdout instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Write SVG charts into this directory.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,
}

fn range(
    ok: bool,
    arg: &'static str,
    value: impl ToString,
    reason: &'static str,
) -> Result<(), BenchError> {
    if ok {
        Ok(())
    } else {
        Err(BenchError::OutOfRange {
            arg,
            value: value.to_string(),
            reason,
        })
    }
}

impl BenchArgs {
    /// Cores kept for server threads (`--server-cores`, or its default).
    pub fn server_cores(&self) -> usize {
        let pinned = self
            .experiment
            .is_some_and(|e| e.is_cell() && e != Experiment::CellCores);
        self.server_cores.unwrap_or(usize::from(pinned))
    }

    /// The depths of `--depth`, without repeats, in the order given.
    pub fn depths(&self) -> Vec<u16> {
        let mut v: Vec<u16> = Vec::new();
        for &d in &self.depth {
            if !v.contains(&d) {
                v.push(d);
            }
        }
        if v.is_empty() {
            v.push(1);
        }
        v
    }

    /// Client threads per node: `--clients`, else the experiment's default.
    pub fn clients(&self) -> u16 {
        self.clients.unwrap_or(match self.experiment {
            Some(Experiment::CellClients) => 12,
            Some(e) if e.is_cell() => 4,
            _ => 2,
        })
    }

    /// Key size: `--key-size`, else the experiment's default.
    pub fn key_size(&self) -> u64 {
        self.key_size.unwrap_or(
            if self.experiment.is_some_and(Experiment::is_cell)
                || self.experiment == Some(Experiment::SizeMix)
            {
                32
            } else {
                128
            },
        )
    }

    /// The value size: `--value-size`, else the experiment's paper setting.
    pub fn value_size(&self) -> u64 {
        self.value_size.unwrap_or(match self.experiment {
            Some(
                Experiment::Breakdown
                | Experiment::CpuContention
                | Experiment::CpuLoad
                | Experiment::SizeMix,
            ) => 16 << 10,
            _ => 256,
        })
    }

    /// The key distribution: `--distribution`, else the experiment's paper setting.
    pub fn distribution(&self) -> Distribution {
        self.distribution.unwrap_or(match self.experiment {
            Some(Experiment::Breakdown) => Distribution::Zipf,
            _ => Distribution::Uniform,
        })
    }

    /// The systems named by `--systems`, in order.
    pub fn system_kinds(&self) -> Result<Vec<SystemChoice>, BenchError> {
        let mut out: Vec<SystemChoice> = Vec::new();
        for s in self
            .systems
            .iter()
            .map(|s| s.trim())
            .filter(|s| !s.is_empty())
        {
            let k = match crate::cell::parse_mode(s) {
                Some(search) => SystemChoice {
                    kind: SystemKind::Cell,
                    search,
                },
                None => SystemChoice::of(
                    s.parse::<SystemKind>()
                        .map_err(|_| BenchError::UnknownName(s.to_string()))?,
                ),
            };
            if out.contains(&k) {
                return Err(BenchError::DuplicateSystem(k.name().into()));
            }
            out.push(k);
        }
        if out.is_empty() {
            return Err(BenchError::NoSystems);
        }
        Ok(out)
    }

    /// Measured seconds per system and point.
    pub fn seconds(&self) -> f64 {
        self.seconds
            .unwrap_or(if self.experiment.is_some() { 0.4 } else { 2.0 })
    }

    /// Checks every argument; returns the systems.
    pub fn check(&self) -> Result<Vec<SystemChoice>, BenchError> {
        let kinds = self.system_kinds()?;
        range(
            (1..=64).contains(&self.nodes),
            "nodes",
            self.nodes,
            "1 to 64 nodes",
        )?;
        range(
            (1..=256).contains(&self.clients()),
            "clients",
            self.clients(),
            "1 to 256 client threads per node",
        )?;
        let deep = self.depths().into_iter().max().unwrap_or(1);
        range(
            self.depth.iter().all(|d| (1..=64).contains(d)),
            "depth",
            format!("{:?}", self.depth),
            "1 to 64 operations in flight per client thread",
        )?;
        range(
            u32::from(self.clients()) * u32::from(deep) <= 1024,
            "depth",
            deep,
            "clients x depth at most 1,024 protocol clients per node",
        )?;
        range(
            deep == 1
                || !matches!(self.experiment, Some(Experiment::CpuLoad | Experiment::Breakdown))
                    && !self.experiment.is_some_and(Experiment::is_cell),
            "depth",
            deep,
            "above 1 only for closed-loop comparisons of Nessie (not cpu-load, breakdown or the cell-* experiments)",
        )?;
        range(
            (1..=64).contains(&self.server_workers),
            "server-workers",
            self.server_workers,
            "1 to 64 workers per node",
        )?;
        range(
            self.keys >= 1 && self.keys <= 100_000_000,
            "keys",
            self.keys,
            "1 to 10^8 keys",
        )?;
        range(
            (16..=1024).contains(&self.key_size()),
            "key-size",
            self.key_size(),
            "16 B to 1 KiB (keys are `key-<12 digits>` padded)",
        )?;
        range(
            (1..=MAX_VALUE).contains(&self.value_size()),
            "value-size",
            self.value_size(),
            "1 B to 128 KiB",
        )?;
        range(
            (0.0..=100.0).contains(&self.get_pct),
            "get-pct",
            self.get_pct,
            "0 to 100",
        )?;
        range(
            self.zipf_theta > 0.0 && self.zipf_theta < 1.0,
            "zipf-theta",
            self.zipf_theta,
            "strictly between 0 and 1",
        )?;
        range(
            (0.0..=100.0).contains(&self.locality_pct),
            "locality-pct",
            self.locality_pct,
            "0 to 100",
        )?;
        if let Some(s) = self.seconds {
            range(
                s > 0.0 && s <= 3600.0,
                "seconds",
                s,
                "more than 0, at most 3600",
            )?;
        }
        if let Some(n) = self.ops {
            range(n >= 1, "ops", n, "at least 1")?;
            if self.experiment == Some(Experiment::CpuLoad) {
                return Err(BenchError::Conflict(
                    "--ops does not apply to cpu-load (open-loop arrivals run for --seconds)",
                ));
            }
        }
        range(
            (1..=10_000).contains(&self.slice_ms),
            "slice-ms",
            self.slice_ms,
            "1 to 10000 ms",
        )?;
        range(
            (0.0..=100_000.0).contains(&self.latency_us),
            "latency-us",
            self.latency_us,
            "0 to 100000 us",
        )?;
        range(
            self.load_factor > 0.0 && self.load_factor <= 0.9,
            "load-factor",
            self.load_factor,
            "in (0, 0.9]",
        )?;
        range(
            (5..=10_000).contains(&self.expiration_ms),
            "expiration-ms",
            self.expiration_ms,
            "5 to 10000 ms",
        )?;
        range(
            self.data_budget_mib >= 1,
            "data-budget-mib",
            self.data_budget_mib,
            "at least 1 MiB",
        )?;
        range(
            self.max_background <= 64,
            "max-background",
            self.max_background,
            "0 to 64 threads",
        )?;
        Ok(kinds)
    }
}

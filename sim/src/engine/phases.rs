//! The measured workload split by where the index's online growth stood
//! when each operation ended (docs/protocol.md §2.5): before a growth, while
//! one is under way, and after it (issue 39's figures at 15 and 100 nodes).
//!
//! The engine looks at the directory word in the simulated memory (an
//! observer's look: no request, no time) each time a measured operation
//! ends. The time between two such ends counts to the phase the directory
//! showed at the second, so each phase's throughput is its operations over
//! the virtual time the directory spent in it.

use nessie_protocol::growth::{directory_slot, IndexView};
use serde::Serialize;

use super::report::quantile;
use super::workload::{Ended, Tally};
use super::Engine;

/// Where the index's growth stood.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum GrowthPhase {
    /// Stable in generation 0: no growth yet.
    Before,
    /// Some key may still be in an old generation: a growth is under way.
    During,
    /// Stable in a later generation: every growth so far has ended.
    After,
}

impl GrowthPhase {
    /// The phase a directory view shows.
    pub fn of(view: IndexView) -> GrowthPhase {
        if view.growing() {
            GrowthPhase::During
        } else if view.newest == 0 {
            GrowthPhase::Before
        } else {
            GrowthPhase::After
        }
    }

    /// Every phase, in order.
    pub const ALL: [GrowthPhase; 3] =
        [GrowthPhase::Before, GrowthPhase::During, GrowthPhase::After];

    /// The phase's name.
    pub fn name(self) -> &'static str {
        match self {
            GrowthPhase::Before => "before",
            GrowthPhase::During => "during",
            GrowthPhase::After => "after",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// What the measured workload did in one phase of a growth.
#[derive(Clone, Debug, Serialize)]
pub struct PhaseFigures {
    /// The phase.
    pub phase: GrowthPhase,
    /// Virtual time the directory showed this phase, ms.
    pub ms: f64,
    /// GETs and PUTs that succeeded, and DELETEs, ending in the phase.
    pub ops: u64,
    /// PUTs that succeeded in the phase.
    pub puts: u64,
    /// Operations that failed in the phase.
    pub failures: u64,
    /// Operations per simulated second in the phase.
    pub ops_per_sec: f64,
    /// Median GET latency in the phase, µs.
    pub get_p50_us: f64,
    /// 99th-percentile GET latency in the phase, µs.
    pub get_p99_us: f64,
    /// Median PUT latency in the phase, µs.
    pub put_p50_us: f64,
    /// 99th-percentile PUT latency in the phase, µs.
    pub put_p99_us: f64,
}

/// The phases' tallies while the run goes on.
#[derive(Default)]
pub(crate) struct Phases {
    /// Whether the run's index may grow (more than one generation).
    watching: bool,
    /// When the last measured operation ended (ns; the measured window's
    /// start before the first).
    last_ns: Option<u64>,
    /// Per phase: the time spent, and how its operations ended.
    spent_ns: [u64; 3],
    tallies: [Tally; 3],
}

impl Phases {
    /// Tallies for a run whose index may grow (`watching`) or not.
    pub(crate) fn new(watching: bool) -> Phases {
        Phases {
            watching,
            ..Phases::default()
        }
    }
}

impl Engine {
    /// The phase the directory word in the simulated memory shows now.
    fn growth_phase(&self) -> GrowthPhase {
        let addr = directory_slot(&self.cfg).remote();
        let word = self
            .cluster
            .mem
            .word(addr.node, addr.region, addr.offset)
            .unwrap_or(0);
        GrowthPhase::of(IndexView::decode(word))
    }

    /// Counts a measured operation that ended at `now` to the phase the
    /// directory shows, with the time since the last one.
    pub(super) fn tally_phase(&mut self, ended: Ended, round_trips: u64, now: u64) {
        if !self.workload.phases.watching {
            return;
        }
        let phase = self.growth_phase().index();
        let end = now.min(self.events.end);
        let p = &mut self.workload.phases;
        let last = p.last_ns.unwrap_or(self.workload.measure_from);
        p.spent_ns[phase] += end.saturating_sub(last);
        p.last_ns = Some(end.max(last));
        p.tallies[phase].record(ended, round_trips);
    }

    /// The phases' figures (none for an index that cannot grow).
    pub(super) fn phase_figures(&mut self) -> Vec<PhaseFigures> {
        if !self.workload.phases.watching {
            return Vec::new();
        }
        let p = &mut self.workload.phases;
        GrowthPhase::ALL
            .iter()
            .map(|&phase| {
                let t = &mut p.tallies[phase.index()];
                let ops = (t.get_lat.len() + t.put_lat.len()) as u64 + t.deletes;
                let secs = p.spent_ns[phase.index()] as f64 / 1e9;
                PhaseFigures {
                    phase,
                    ms: secs * 1e3,
                    ops,
                    puts: t.put_lat.len() as u64,
                    failures: t.failures,
                    ops_per_sec: if secs > 0.0 { ops as f64 / secs } else { 0.0 },
                    get_p50_us: quantile(&mut t.get_lat, 0.5),
                    get_p99_us: quantile(&mut t.get_lat, 0.99),
                    put_p50_us: quantile(&mut t.put_lat, 0.5),
                    put_p99_us: quantile(&mut t.put_lat, 0.99),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use crate::{simulate, GrowthPhase, SimSpec};
    use nessie_systems::SystemKind;

    /// A small cluster whose generation 0 the preload fills to load 0.8,
    /// the workload's PUTs inserting the other half of the keys.
    fn growing(generations: u8) -> SimSpec {
        let mut spec = SimSpec {
            system: SystemKind::Nessie,
            keys: 2_000,
            preload_pct: 50,
            seconds: 0.05,
            entries_per_client: Some(4_000),
            ..SimSpec::default()
        };
        spec.tuning.bucket_slots = Some(4);
        spec.tuning.index_slots_per_node = Some(420);
        spec.tuning.index_generations = Some(generations);
        spec
    }

    #[test]
    fn a_run_whose_index_grows_is_split_before_during_and_after_the_growth() {
        let r = simulate(&growing(3)).unwrap();
        let phases: Vec<_> = r.growth_phases.iter().map(|p| p.phase).collect();
        assert_eq!(phases, GrowthPhase::ALL);
        for p in &r.growth_phases {
            assert!(p.ops > 0 && p.ms > 0.0, "{p:?}");
        }
        let ops: u64 = r.growth_phases.iter().map(|p| p.ops).sum();
        assert_eq!(ops, r.ops, "every measured operation is in one phase");
        let ms: f64 = r.growth_phases.iter().map(|p| p.ms).sum();
        assert!(ms <= 50.0 + 1e-6 && ms > 45.0, "the window, split: {ms} ms");
        assert!(r.growth.seals > 0);
        // An index that cannot grow has no phases.
        let fixed = simulate(&growing(1)).unwrap();
        assert!(fixed.growth_phases.is_empty());
    }
}

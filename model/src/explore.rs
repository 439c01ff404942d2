//! Running a world: exhaustively (depth first, keeping only fingerprints of
//! visited states, so memory stays small) or as bounded random walks
//! (simulation, for worlds too big to exhaust), and the report of what each
//! property came to. The CLI and the tests share it, and both report
//! verdicts before state counts.

use std::time::{Duration, Instant};

use std::collections::BTreeSet;

use stateright::{Checker, Expectation, HasDiscoveries, Model, UniformChooser};

use crate::world::{Action, World, WorldState};

/// How to explore.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Every reachable state, depth first.
    Exhaustive,
    /// Every reachable state, breadth first (shortest counterexamples, much
    /// more memory).
    BreadthFirst,
    /// Random walks from the initial state until `budget` has passed.
    Simulation {
        /// Seed of the walks.
        seed: u64,
        /// Wall-clock budget.
        budget: Duration,
    },
}

/// What one property came to.
#[derive(Clone, Debug)]
pub struct Verdict {
    /// The property's name.
    pub property: &'static str,
    /// Whether it is a `sometimes` property (an example is wanted).
    pub sometimes: bool,
    /// The counterexample (or, for `sometimes`, the example) found.
    pub path: Option<Vec<(WorldState, Action)>>,
}

impl Verdict {
    /// Whether the property came out as it should.
    pub fn ok(&self) -> bool {
        self.sometimes == self.path.is_some()
    }
}

/// The outcome of exploring a world.
#[derive(Clone, Debug)]
pub struct Exploration {
    /// The world's name.
    pub world: String,
    /// Distinct states visited (for simulations: states generated).
    pub unique: usize,
    /// States generated.
    pub generated: usize,
    /// Longest path.
    pub max_depth: usize,
    /// Wall-clock seconds.
    pub secs: f64,
    /// Whether every reachable state was visited.
    pub complete: bool,
    /// One verdict per property.
    pub verdicts: Vec<Verdict>,
}

impl Exploration {
    /// Generated states per second.
    pub fn states_per_sec(&self) -> f64 {
        self.generated as f64 / self.secs.max(1e-9)
    }

    /// Properties that did not come out as they should.
    pub fn failures(&self) -> Vec<&'static str> {
        self.verdicts
            .iter()
            .filter(|v| !v.ok())
            .map(|v| v.property)
            .collect()
    }

    /// Properties for which a counterexample (or example) was found.
    pub fn found(&self) -> Vec<&'static str> {
        self.verdicts
            .iter()
            .filter(|v| v.path.is_some())
            .map(|v| v.property)
            .collect()
    }

    /// A one-line summary of the size and speed of the run.
    pub fn summary(&self) -> String {
        format!(
            "{}: {} unique states ({} generated), max depth {}, {:.2} s, {:.0} states/s{}",
            self.world,
            self.unique,
            self.generated,
            self.max_depth,
            self.secs,
            self.states_per_sec(),
            if self.complete {
                ", exhaustive"
            } else {
                ", bounded"
            }
        )
    }
}

/// How a run is bounded and when it may stop early.
#[derive(Clone, Debug)]
pub struct Bounds {
    /// Checker threads.
    pub threads: usize,
    /// Stop after generating this many states (0: no limit).
    pub max_states: usize,
    /// Stop as soon as any of these properties has a discovery (empty: run
    /// to the end). Used to hunt a known counterexample in a broken variant.
    pub stop_at: Vec<&'static str>,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds {
            threads: 2,
            max_states: 0,
            stop_at: Vec::new(),
        }
    }
}

/// Explores `world` within `bounds`.
pub fn explore(world: &World, mode: Mode, bounds: &Bounds) -> Exploration {
    let t = Instant::now();
    let max_states = bounds.max_states;
    let mut b = world.clone().checker().threads(bounds.threads.max(1));
    if max_states > 0 {
        b = b.target_state_count(max_states);
    }
    if !bounds.stop_at.is_empty() {
        let set: BTreeSet<&'static str> = bounds.stop_at.iter().copied().collect();
        b = b.finish_when(HasDiscoveries::AnyOf(set));
    }
    let hunting = !bounds.stop_at.is_empty();
    macro_rules! report {
        ($c:expr, $exhaustive:expr) => {{
            let c = $c;
            let secs = t.elapsed().as_secs_f64();
            let verdicts: Vec<Verdict> = world
                .properties()
                .into_iter()
                .map(|p| Verdict {
                    property: p.name,
                    sometimes: matches!(p.expectation, Expectation::Sometimes),
                    path: c.discovery(p.name).map(|path| {
                        path.into_vec()
                            .into_iter()
                            .filter_map(|(s, a)| a.map(|a| (s, a)))
                            .collect()
                    }),
                })
                .collect();
            let stopped_early = hunting
                && verdicts
                    .iter()
                    .any(|v| v.path.is_some() && bounds.stop_at.contains(&v.property));
            Exploration {
                world: world.name.clone(),
                unique: c.unique_state_count(),
                generated: c.state_count(),
                max_depth: c.max_depth(),
                secs,
                complete: $exhaustive && c.is_done() && max_states == 0 && !stopped_early,
                verdicts,
            }
        }};
    }
    match mode {
        Mode::Exhaustive => report!(b.spawn_dfs().join(), true),
        Mode::BreadthFirst => report!(b.spawn_bfs().join(), true),
        Mode::Simulation { seed, budget } => {
            report!(
                b.timeout(budget)
                    .spawn_simulation(seed, UniformChooser)
                    .join(),
                false
            )
        }
    }
}

//! Shrinking a failing swarm case ([`shrink`]): smaller variants of the
//! case (shorter, fewer faults, fewer clients, nodes or keys), taken
//! greedily while one still fails.

use nessie_protocol::Faults;

use super::{CaseRun, HySwitches, SwarmCase};

impl SwarmCase {
    /// Smaller variants of this case, most promising first.
    fn smaller(&self) -> Vec<SwarmCase> {
        let mut v = Vec::new();
        if self.seconds > 0.0006 {
            v.push(SwarmCase {
                seconds: self.seconds / 2.0,
                ..self.clone()
            });
        }
        for kind in self.chaos.kinds() {
            v.push(SwarmCase {
                chaos: self.chaos.without(kind),
                ..self.clone()
            });
        }
        if self.clients_per_node > 1 {
            v.push(SwarmCase {
                clients_per_node: self.clients_per_node - 1,
                ..self.clone()
            });
        }
        if self.nodes > 1 {
            let mut c = SwarmCase {
                nodes: self.nodes - 1,
                ..self.clone()
            };
            c.chaos.outage_permille = if c.nodes > 1 {
                c.chaos.outage_permille
            } else {
                0
            };
            v.push(c);
        }
        if self.keys > 1 {
            v.push(SwarmCase {
                keys: self.keys - 1,
                ..self.clone()
            });
        }
        if self.delete_pct > 0 {
            v.push(SwarmCase {
                delete_pct: 0,
                ..self.clone()
            });
        }
        if self.depth > 1 {
            v.push(SwarmCase {
                depth: 1,
                ..self.clone()
            });
        }
        if self.background_per_node > 0 {
            v.push(SwarmCase {
                background_per_node: 0,
                ..self.clone()
            });
        }
        if self.server_workers > 1 {
            v.push(SwarmCase {
                server_workers: 1,
                ..self.clone()
            });
        }
        if self.hy != HySwitches::default() {
            v.push(SwarmCase {
                hy: HySwitches::default(),
                ..self.clone()
            });
        }
        v
    }
}

/// Shrinks a failing case greedily: takes any smaller variant that still
/// fails, until none does or `budget` runs are spent. Returns the smallest
/// failing run found (the case itself if nothing smaller fails).
pub fn shrink(failing: CaseRun, faults: Faults, budget: usize) -> CaseRun {
    let mut best = failing;
    let mut spent = 0;
    'outer: while spent < budget {
        for c in best.case.smaller() {
            if spent >= budget {
                break 'outer;
            }
            spent += 1;
            if let Ok(run) = c.run(faults) {
                if run.verdict.is_fail() {
                    best = run;
                    continue 'outer;
                }
            }
        }
        break;
    }
    best
}

//! How long the linearizability checker takes on large generated histories
//! with writes of unknown outcome, each with a known verdict: the
//! linearizable history, then the same history with a planted stale read and
//! with a read from the future. Prints one line per check.
//!
//! ```text
//! cargo run --release -p nessie-check --example checker_scaling [MAX_OPS]
//! ```
//!
//! `MAX_OPS` (default 100000) caps the history sizes tried.

use nessie_check::synthetic::{self, Plant, Spec};
use nessie_check::{check, CheckConfig, CheckReport, Verdict};

fn scenarios(max_ops: usize) -> Vec<(&'static str, Spec)> {
    let mut out = Vec::new();
    for ops in [20_000, 100_000] {
        if ops > max_ops {
            continue;
        }
        out.push(("node down, 16 keys", Spec::node_down(ops, 16, 7)));
        out.push(("node down, 1000 keys", Spec::node_down(ops, 1000, 7)));
        out.push(("node down, 1 hot key", Spec::node_down(ops, 1, 7)));
        out.push(("10 % unknown scattered, 16 keys", Spec::new(ops, 16, 10, 7)));
        out.push((
            "10 % unknown, 1 key, 32 clients, long ops",
            Spec {
                clients: 32,
                max_duration: 60,
                ..Spec::new(ops, 1, 10, 7)
            },
        ));
        out.push((
            "node down, 1 key, 50 % writes unknown effect",
            Spec {
                outage: Some(synthetic::Outage {
                    keys_every: 1,
                    from_pct: 45,
                    to_pct: 55,
                    effect_pct: 50,
                }),
                ..Spec::new(ops, 1, 0, 7)
            },
        ));
    }
    out
}

fn line(what: &str, spec: &Spec, plant: &str, r: &CheckReport) {
    let verdict = match &r.verdict {
        Verdict::Linearizable => "linearizable",
        Verdict::NotLinearizable(_) => "NOT linearizable",
        Verdict::Inconclusive(_) => "INCONCLUSIVE",
        Verdict::Malformed(_) => "MALFORMED",
    };
    println!(
        "{:>7} ops | {:<44} | {:<11} | {:>5.1} % unknown | {:<16} | {:>9} steps | {:>7.3} s",
        spec.ops,
        what,
        plant,
        100.0 * r.unknown as f64 / r.operations.max(1) as f64,
        verdict,
        r.steps,
        r.elapsed.as_secs_f64()
    );
}

fn main() {
    let max_ops = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(100_000);
    let cfg = CheckConfig::default();
    let mut worst = 0f64;
    for (what, spec) in scenarios(max_ops) {
        let h = synthetic::linearizable(&spec);
        let r = check(&h, &cfg);
        line(what, &spec, "none", &r);
        worst = worst.max(r.elapsed.as_secs_f64());
        for (plant, name) in [
            (Plant::StaleRead, "stale read"),
            (Plant::FutureRead, "future read"),
        ] {
            let mut bad = h.clone();
            if synthetic::plant_violation(&mut bad, plant, 1).is_none() {
                println!(
                    "{:>7} ops | {what:<44} | {name:<11} | no place to plant",
                    spec.ops
                );
                continue;
            }
            let r = check(&bad, &cfg);
            line(what, &spec, name, &r);
            worst = worst.max(r.elapsed.as_secs_f64());
        }
    }
    println!("slowest verdict: {worst:.3} s");
}

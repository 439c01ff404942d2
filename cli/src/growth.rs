//! `nessie inserts --growth G`: an index that grows a hundredfold while one
//! client inserts into it (docs/protocol.md §2.5).
//!
//! The index starts in generation 0 (`--slots-per-node` entries a node) and
//! may grow through `G` generations, each twice the one before. One client
//! inserts new keys until the index refuses one at its last generation
//! (`IndexAtLimit`), or its last generation reaches the highest of
//! `--loads`. For each generation the report gives the keys stored
//! when its growth started (and so the load at which the generation was
//! full), the inserts made while it was the newest and stable, and those
//! made while a growth into it was under way (each insert then takes a
//! step of the sweep first), with their round trips. The client writes
//! alone: a growth is swept by its own writes.

use nessie_protocol::growth::IndexView;
use nessie_protocol::{Config, Error};
use serde::Serialize;

use crate::inserts::{one_client, one_client_config, InsertsArgs};

/// The inserts made while one view of the index held.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Phase {
    /// The view (oldest and newest generation).
    pub oldest: u8,
    /// See [`Phase::oldest`].
    pub newest: u8,
    /// Keys stored when the phase began.
    pub keys_at_start: u64,
    /// Index entries of the newest generation.
    pub entries: u64,
    /// Inserts made in the phase.
    pub inserts: u64,
    /// Their round trips, on average.
    pub avg_round_trips: f64,
    /// The most one of them took.
    pub max_round_trips: u64,
    /// Inserts that ran out of time (no attempt could afford its search
    /// within the operation timeout: not a refusal, the key is not stored).
    pub timed_out: u64,
}

/// A growth fill's result.
#[derive(Clone, Debug, Serialize)]
pub struct GrowthFill {
    /// Candidates per key.
    pub candidates: u8,
    /// Entries per bucket.
    pub bucket_slots: u8,
    /// Generations configured.
    pub generations: u8,
    /// Entries of generation 0, all nodes.
    pub first_entries: u64,
    /// Keys stored when the index refused one at its limit.
    pub stored: u64,
    /// Each phase, in order.
    pub phases: Vec<Phase>,
}

/// Fills an index that grows, with `candidates` x `bucket_slots`.
pub fn fill(args: &InsertsArgs, candidates: u8, bucket_slots: u8) -> Result<GrowthFill, Error> {
    let generations = args.growth;
    let first = u64::from(args.nodes) * u64::from(args.slots_per_node);
    let last = first << (generations - 1);
    let cfg = Config {
        index_generations: generations,
        ..one_client_config(args, candidates, bucket_slots, last)?
    };
    let mut client = one_client(cfg)?;
    // Up to the highest load the report asks for (`--loads`), in the last
    // generation: past it an index that cannot grow is full.
    let top = args.loads.iter().copied().fold(0.0, f64::max);
    let mut phases: Vec<Phase> = Vec::new();
    let mut stored = 0u64;
    let mut k = 0u64;
    loop {
        let view = client.state().view;
        if phases
            .last()
            .is_none_or(|p| (p.oldest, p.newest) != (view.oldest, view.newest))
        {
            phases.push(phase(view, stored, args.nodes, args.slots_per_node));
        }
        let r = client.put(format!("key-{k}").as_bytes(), b"v");
        k += 1;
        let rt = client.last_stats().round_trips;
        match r {
            Ok(_) => {
                stored += 1;
                if let Some(p) = phases.last_mut() {
                    p.inserts += 1;
                    p.avg_round_trips += rt as f64;
                    p.max_round_trips = p.max_round_trips.max(rt);
                }
            }
            Err(Error::IndexAtLimit { .. }) => break,
            Err(Error::Timeout) => {
                if let Some(p) = phases.last_mut() {
                    p.timed_out += 1;
                }
                if phases.iter().map(|p| p.timed_out).sum::<u64>() > last / 20 {
                    break;
                }
            }
            Err(e) => return Err(e),
        }
        if k > last * 2 || stored as f64 >= top * last as f64 {
            break;
        }
    }
    for p in &mut phases {
        if p.inserts > 0 {
            p.avg_round_trips /= p.inserts as f64;
        }
    }
    Ok(GrowthFill {
        candidates,
        bucket_slots,
        generations,
        first_entries: first,
        stored,
        phases,
    })
}

fn phase(view: IndexView, keys: u64, nodes: u16, slots: u32) -> Phase {
    Phase {
        oldest: view.oldest,
        newest: view.newest,
        keys_at_start: keys,
        entries: (u64::from(nodes) * u64::from(slots)) << view.newest,
        ..Phase::default()
    }
}

/// Runs a growth fill for each shape and prints the table (or JSON).
pub fn report(args: &InsertsArgs) -> Result<(), Error> {
    let mut fills = Vec::new();
    for &b in &args.bucket_slots {
        for &n in &args.candidates {
            fills.push(fill(args, n, b)?);
        }
    }
    if args.json {
        return crate::inserts::print_json(&fills);
    }
    println!(
        "an index growing online: {} nodes x {} entries in generation 0, {} generations, one client",
        args.nodes, args.slots_per_node, args.growth
    );
    println!(
        "{:>3} {:>3} {:>12} {:>9} {:>10} {:>8} {:>9} {:>7} {:>9}",
        "N", "B", "generations", "entries", "keys then", "inserts", "avg RTs", "max", "timed out"
    );
    for f in &fills {
        for p in &f.phases {
            let gens = if p.oldest == p.newest {
                format!("{}", p.newest)
            } else {
                format!("{} -> {}", p.oldest, p.newest)
            };
            println!(
                "{:>3} {:>3} {:>12} {:>9} {:>10} {:>8} {:>9.1} {:>7} {:>9}",
                f.candidates,
                f.bucket_slots,
                gens,
                p.entries,
                p.keys_at_start,
                p.inserts,
                p.avg_round_trips,
                p.max_round_trips,
                p.timed_out
            );
        }
        let (n, rts) = f.phases.iter().fold((0u64, 0.0), |(n, rts), p| {
            (n + p.inserts, rts + p.avg_round_trips * p.inserts as f64)
        });
        println!(
            "{:>3} {:>3} {} keys stored ({:.0} x generation 0), last generation's load {:.3}, \
             {:.1} round trips per insert over all",
            "",
            "",
            f.stored,
            f.stored as f64 / f.first_entries as f64,
            f.stored as f64 / (f.first_entries << (f.generations - 1)) as f64,
            rts / n.max(1) as f64
        );
    }
    Ok(())
}

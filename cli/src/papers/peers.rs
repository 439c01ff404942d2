//! `nessie papers`' section "Which store": YCSB's core workloads (A, B, C,
//! D and F; E's scans need an ordered store, Cell) on every key-value system
//! side by side, at 3, 15 and 100 nodes of both hardware profiles, with each
//! run's throughput, GET and PUT p50 and p99, round trips and CASes per
//! operation and the NICs' CAS ceiling; then what an insert costs against
//! the load and how full each index gets before its first refusal (`nessie
//! inserts`' fills of Nessie's index and RACE's subtables). Issue 43.

use nessie_baselines::KvSystem;
use nessie_sim::{Profile, SimError, SimSpec};
use nessie_systems::SystemKind;
use nessie_workload::Ycsb;

use super::{busiest, num, run, PapersArgs};
use crate::inserts::{self, InsertsArgs, SearchArg};

/// The key-value systems compared (Cell's ordered store runs E alone).
const SYSTEMS: [SystemKind; 6] = [
    SystemKind::Nessie,
    SystemKind::NessieSd,
    SystemKind::NessieHy,
    SystemKind::Pilaf,
    SystemKind::Race,
    SystemKind::Rcuckoo,
];

/// Prints the section.
pub fn which_store(args: &PapersArgs) -> Result<(), SimError> {
    eprintln!("Which store");
    println!("## Which store: YCSB A-F on every key-value system, 3 to 100 nodes, both profiles\n");
    println!(
        "YCSB's core workloads (Zipfian 0.99; D: 5 % inserts, latest), 2 client threads per node with 4 operations in flight each, one server worker per node for the server-driven systems, 1 KiB values, 200 keys per node, {} simulated s per point. Mops/s; GET and PUT p50 / p99 in µs; round trips per GET and per PUT (updates, and D's inserts); CASes per operation; the cluster's NICs' CAS ceiling (Mops/s if CASes were all they did); the busiest resource. E (scans) needs an ordered store: Cell's figures are in docs/benchmarks.md. The peers' published YCSB figures are not printed beside these: their clusters, NICs and client counts are not yet mapped onto the simulator's settings.\n",
        args.scale_seconds
    );
    println!("| profile | nodes | workload | system | Mops/s | GET p50 / p99 | PUT p50 / p99 | RTs per GET / PUT | CAS/op | CAS cap M | busiest |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for profile in nessie_sim::PROFILES {
        let profile: Profile = profile.clone();
        for nodes in [3u16, 15, 100] {
            for w in Ycsb::ALL.into_iter().filter(|w| !w.scans()) {
                for system in SYSTEMS {
                    let spec = SimSpec {
                        system,
                        server_workers: 1,
                        profile: profile.clone(),
                        nodes,
                        clients_per_node: 2,
                        depth: 4,
                        keys: u64::from(nodes) * 200,
                        value_size: 1024,
                        ycsb: Some(w),
                        seconds: args.scale_seconds,
                        seed: args.seed,
                        ..SimSpec::default()
                    };
                    let label = format!("{} {nodes} nodes {} {system}", profile.name, w.name());
                    let r = run(&spec, &label)?;
                    let (resource, busy) = busiest(&r);
                    let put = if r.puts == 0 {
                        "-".to_string()
                    } else {
                        format!("{} / {}", num(r.put_p50_us), num(r.put_p99_us))
                    };
                    let cap = if r.cas_per_op > 0.0 {
                        format!("{:.0}", r.cas_ceiling_ops_per_sec / 1e6)
                    } else {
                        "-".into()
                    };
                    let rts = if r.puts == 0 {
                        format!("{:.2} / -", r.round_trips_per_get)
                    } else {
                        format!(
                            "{:.2} / {:.2}",
                            r.round_trips_per_get, r.round_trips_per_put
                        )
                    };
                    println!(
                        "| {} | {nodes} | {} | {system} | {:.2} | {} / {} | {put} | {rts} | {:.2} | {cap} | {} {:.0} % |",
                        profile.name,
                        w.name(),
                        r.ops_per_sec / 1e6,
                        num(r.get_p50_us),
                        num(r.get_p99_us),
                        r.cas_per_op,
                        resource,
                        busy,
                    );
                }
            }
        }
    }
    println!();
    inserts_and_fill()
}

/// Round trips per insert against load and the first refusal, for
/// Nessie's index (the papers' one-entry candidates, N = 3, and buckets of
/// four with N = 2) and RACE's subtables.
fn inserts_and_fill() -> Result<(), SimError> {
    eprintln!("Which store: inserts");
    println!("### Round trips per insert and the fill reached\n");
    println!("One client inserts new keys into an empty store (3 nodes x 2,048 slots, `nessie inserts`); average remote round trips of the inserts made within 0.02 below each load, and the load at the first refusal (`TableFull`; none of these stores grows: Nessie's growth is issue 39's, RACE's resizing is not built, RCuckoo's paper defers resizing). The server-driven systems insert by their servers' CPU (one request round trip, whatever the load).\n");
    let args = InsertsArgs {
        candidates: vec![2, 3],
        bucket_slots: vec![1, 4],
        loads: vec![0.1, 0.25, 0.5, 0.75, 0.9, 0.95],
        window: 0.02,
        nodes: 3,
        slots_per_node: 2048,
        max_depth: 10,
        search: vec![SearchArg::BreadthFirst],
        json: false,
        race: true,
        growth: 0,
    };
    let to_sim = |e: nessie_protocol::Error| SimError::Spec(e.to_string());
    let fills = [
        (
            "Nessie, N = 3, B = 1",
            inserts::fill(&args, 3, 1, SearchArg::BreadthFirst).map_err(to_sim)?,
        ),
        (
            "Nessie, N = 2, B = 4",
            inserts::fill(&args, 2, 4, SearchArg::BreadthFirst).map_err(to_sim)?,
        ),
        (
            "RACE",
            inserts::fill_peer(&args, KvSystem::Race).map_err(to_sim)?,
        ),
        (
            "RCuckoo",
            inserts::fill_peer(&args, KvSystem::Rcuckoo).map_err(to_sim)?,
        ),
    ];
    print!("| store |");
    for l in &args.loads {
        print!(" {l:.2} |");
    }
    println!(" first refusal |");
    println!("|---|{}---|", "---|".repeat(args.loads.len()));
    for (name, f) in &fills {
        print!("| {name} |");
        for r in &f.rows {
            if r.inserts == 0 {
                print!(" - |");
            } else {
                print!(" {:.1} |", r.avg_round_trips);
            }
        }
        match f.first_refusal_load {
            Some(l) => println!(" {l:.3} |"),
            None => println!(" none |"),
        }
    }
    println!();
    Ok(())
}

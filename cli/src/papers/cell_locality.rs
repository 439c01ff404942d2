//! The Cell paper's locality experiments in the cluster simulator (issue
//! 25): where a server core is a server core, not a thread sharing two
//! real cores with the polling clients as in the threaded `nessie bench
//! --experiment cell-*`. Fig. 4 (one meganode on one server core, clients
//! searching it server-side, client-side or as the selector chooses) and
//! Table 2 (four servers with 1 to 8 cores: server-side only, the selector,
//! and a fixed ratio at the selector's measured share), with the paper's
//! numbers beside them (seed 003, §4.2 and §4.4.1).

use nessie_cell::SearchMode;
use nessie_sim::{CellRun, CellShape, SimError, SimReport, SimSpec, Spike};
use nessie_systems::SystemKind;

use super::{cell, num, ops, run, PapersArgs};

/// Fig. 4's peaks (§4.2): server-side only 158 K searches/s (the server
/// core saturated), client-side only 305 K, the selector 432 K.
pub const CELL_FIG_4_PEAKS: [f64; 3] = [158e3, 305e3, 432e3];

/// Table 2 (§4.4.1): searches/s of 4 servers with 1 to 8 cores each,
/// server-side only, the selector (its share of server-side searches, %),
/// and a fixed ratio at that share.
pub const CELL_TABLE_2: [(f64, f64, f64, f64); 8] = [
    (505e3, 1842e3, 30.0, 1841e3),
    (991e3, 2142e3, 41.0, 2129e3),
    (1447e3, 2456e3, 53.0, 2366e3),
    (1831e3, 2573e3, 62.0, 2513e3),
    (2145e3, 2687e3, 77.0, 2593e3),
    (2478e3, 2845e3, 88.0, 2768e3),
    (2901e3, 2901e3, 99.0, 2776e3),
    (2543e3, 2812e3, 99.0, 2571e3),
];

/// The three ways to search, as the paper's lines name them.
const MODES: [(&str, SearchMode); 3] = [
    ("server-side only", SearchMode::ServerOnly),
    ("client-side only", SearchMode::ClientOnly),
    ("selector", SearchMode::Selector),
];

/// Runs the Cell experiments and prints their tables.
pub(super) fn cell_paper(args: &PapersArgs) -> Result<(), SimError> {
    fig_4(args)?;
    let one_core = table_2(args)?;
    fig_7(args, one_core)?;
    Ok(())
}

/// A search-only Cell run: `servers` server nodes with `cores` workers
/// each, `client_nodes` more nodes of `clients` client threads each (the
/// server nodes' own clients only preload), searching as `mode`.
fn spec(
    args: &PapersArgs,
    servers: u16,
    cores: u16,
    client_nodes: u16,
    clients: u16,
    mode: SearchMode,
    one_meganode: bool,
) -> SimSpec {
    SimSpec {
        system: SystemKind::Cell,
        server_workers: cores,
        profile: nessie_sim::TPDS,
        nodes: servers + client_nodes,
        clients_per_node: clients,
        keys: if one_meganode { 600 } else { 20_000 },
        key_size: 16,
        value_size: 64,
        get_pct: 100,
        seconds: args.seconds,
        seed: args.seed,
        // Small nodes give Fig. 4's one meganode a tree of the paper's
        // height (5 levels of 1 KiB nodes over 64 MB there, of four-entry
        // nodes over 600 keys here).
        cell: CellShape {
            small_nodes: one_meganode,
            small_meganodes: false,
        },
        cell_run: CellRun {
            mode,
            caches: !one_meganode,
            server_nodes: Some(servers),
            one_meganode,
            clients_beside_servers: false,
        },
        ..SimSpec::default()
    }
}

fn label(r: &SimReport) -> String {
    format!("{} ({} µs)", ops(r.ops_per_sec), num(r.get_avg_us))
}

/// Fig. 4: one meganode, one server core, 1 to 12 clients, no caching.
fn fig_4(args: &PapersArgs) -> Result<(), SimError> {
    eprintln!("Cell Fig. 4");
    println!(
        "## Cell Fig. 4: one meganode on one server core, 1 to 12 clients, no client caching\n"
    );
    println!("Searches/s (average latency) of server-side only, client-side only and the selector (its share of server-side searches), GETs of 600 keys in one meganode of four-entry nodes; 1 server node, clients on 1 or 4 client nodes. The paper gives the peaks: server-side 158 K (its one core saturated), client-side 305 K, the selector 432 K (93 % of the sum).\n");
    println!("| clients | server-side only | client-side only | selector | selector's server share | node READs per client-side search |");
    println!("|---|---|---|---|---|---|");
    let mut peaks = [0.0f64; 3];
    for (client_nodes, per_node) in [(1u16, 1u16), (1, 2), (4, 1), (4, 2), (4, 3)] {
        let clients = client_nodes * per_node;
        print!("| {clients} |");
        let mut share = 0.0;
        let mut reads = 0.0;
        for (i, (name, mode)) in MODES.iter().enumerate() {
            let s = spec(args, 1, 1, client_nodes, per_node, *mode, true);
            let r = run(&s, &format!("cell fig 4 {name} {clients} clients"))?;
            peaks[i] = peaks[i].max(r.ops_per_sec);
            print!(" {} |", label(&r));
            if *mode == SearchMode::Selector {
                share = r.server_search_pct;
            }
            if *mode == SearchMode::ClientOnly {
                reads = r.round_trips_per_op;
            }
        }
        println!(" {} % | {} |", num(share), num(reads));
    }
    println!("\nPeaks, prediction / paper:\n");
    println!("| line | peak searches/s |");
    println!("|---|---|");
    for (i, (name, _)) in MODES.iter().enumerate() {
        println!("| {name} | {} |", cell(peaks[i], Some(CELL_FIG_4_PEAKS[i])));
    }
    println!(
        "| selector / (server-side + client-side) | {} |\n",
        cell(peaks[2] / (peaks[0] + peaks[1]), Some(0.93))
    );
    Ok(())
}

/// Table 2: four servers with 1 to 8 cores each. Returns the server-side
/// only throughput at 1 core.
fn table_2(args: &PapersArgs) -> Result<f64, SimError> {
    eprintln!("Cell Table 2");
    println!("## Cell Table 2: four servers with 1 to 8 cores each\n");
    println!("Searches/s of 4 server nodes and 8 client nodes of 4 client threads, 20,000 keys in meganodes spread over the servers, client caches on: server-side only, the selector (its share of server-side searches), and a fixed share of server-side searches at the selector's measured share.\n");
    println!("| cores | server-side only | selector (server share) | fixed ratio |");
    println!("|---|---|---|---|");
    let mut one_core = 0.0;
    for (i, paper) in CELL_TABLE_2.iter().enumerate() {
        let cores = i as u16 + 1;
        let server = run(
            &spec(args, 4, cores, 8, 4, SearchMode::ServerOnly, false),
            &format!("cell table 2 server-side {cores} cores"),
        )?;
        let selector = run(
            &spec(args, 4, cores, 8, 4, SearchMode::Selector, false),
            &format!("cell table 2 selector {cores} cores"),
        )?;
        let share = selector.server_search_pct;
        if cores == 1 {
            one_core = server.ops_per_sec;
        }
        let fixed = run(
            &spec(args, 4, cores, 8, 4, SearchMode::Fixed(share), false),
            &format!("cell table 2 fixed {cores} cores"),
        )?;
        println!(
            "| {cores} | {} | {} ({} % / {} %) | {} |",
            cell(server.ops_per_sec, Some(paper.0)),
            cell(selector.ops_per_sec, Some(paper.1)),
            num(share),
            num(paper.2),
            cell(fixed.ops_per_sec, Some(paper.3)),
        );
    }
    println!();
    Ok(one_core)
}

/// Fig. 7's base load as a share of the server-side only peak on 1 core
/// per server: the paper's 24 clients searching every 75 µs (320 K/s)
/// against its Table 2's 505 K.
const FIG_7_BASE: f64 = 24.0 * (1e6 / 75.0) / 505e3;

/// Latencies of the GETs invoked in `[from, until)` ns into the measured
/// window: median and 90th percentile, µs, and how many.
fn window(r: &SimReport, from: u64, until: u64) -> (f64, f64, usize) {
    let mut lat: Vec<u64> = r
        .history
        .iter()
        .filter(|e| matches!(e.ret, Ok(nessie_protocol::Response::Get(_))))
        .filter_map(|e| {
            let at = nessie_sim::stamp_ns(e.invoke).checked_sub(r.measured_from_ns)?;
            (from..until).contains(&at).then(|| {
                nessie_sim::stamp_ns(e.response).saturating_sub(nessie_sim::stamp_ns(e.invoke))
            })
        })
        .collect();
    lat.sort_unstable();
    let q = |p: f64| {
        lat.get(((lat.len() as f64 * p) as usize).min(lat.len().saturating_sub(1)))
            .map_or(f64::NAN, |&ns| ns as f64 / 1e3)
    };
    (q(0.5), q(0.9), lat.len())
}

/// Fig. 7: 24 clients searching at a base load on 4 servers of 1 core, 36
/// more joining at the same rate for the middle third of the run;
/// `one_core`: Table 2's server-side only peak at 1 core.
fn fig_7(args: &PapersArgs, one_core: f64) -> Result<(), SimError> {
    eprintln!("Cell Fig. 7");
    let third = args.seconds;
    // The simulated server core is faster than the paper's (see Table 2):
    // the base load keeps the paper's share of the server-side peak.
    let rate = FIG_7_BASE * one_core / 24.0;
    println!("## Cell Fig. 7: a load spike, server-side only against the selector\n");
    println!(
        "4 server nodes of 1 core, 12 client nodes: 2 clients each search every {} µs (open loop, 24 clients: {} % of Table 2's server-side peak at 1 core, the paper's 320 K against 505 K), and 3 more each join at the same rate from {} ms to {} ms (36 clients, 2.5x the load), over a {} ms run. Median and 90th-percentile GET latency (µs, from the start of service: an arrival that waits for its busy client thread is not counted) of the GETs invoked before, during and after the spike. The paper plots the same on a log scale: server-side search's latency climbs during the spike, the selector's stays low, switching most searches to the client.\n",
        num(1e6 / rate),
        num(100.0 * FIG_7_BASE),
        num(third * 1e3),
        num(2.0 * third * 1e3),
        num(3.0 * third * 1e3)
    );
    println!("| search | before: median / p90 | spike: median / p90 | after: median / p90 | server share |");
    println!("|---|---|---|---|---|");
    let ns = |s: f64| (s * 1e9) as u64;
    for (name, mode) in [MODES[0], MODES[2]] {
        let s = SimSpec {
            arrival_rate_per_client: Some(rate),
            spike: Some(Spike {
                first_index: 2,
                from_s: third,
                until_s: 2.0 * third,
            }),
            seconds: 3.0 * third,
            record_history: true,
            ..spec(args, 4, 1, 12, 5, mode, false)
        };
        let r = run(&s, &format!("cell fig 7 {name}"))?;
        print!("| {name} |");
        for k in 0..3u32 {
            let (from, until) = (f64::from(k) * third, f64::from(k + 1) * third);
            let (median, p90, _) = window(&r, ns(from), ns(until));
            print!(" {} / {} |", num(median), num(p90));
        }
        println!(" {} % |", num(r.server_search_pct));
    }
    println!();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> PapersArgs {
        PapersArgs {
            seconds: 0.002,
            scale_seconds: 0.001,
            no_scale: true,
            only: vec!["cell".into()],
            seed: 1,
        }
    }

    fn fig_4_point(clients_per_node: u16, mode: SearchMode) -> SimReport {
        nessie_sim::simulate(&spec(&args(), 1, 1, 4, clients_per_node, mode, true)).unwrap()
    }

    /// Fig. 4's point: once the one server core saturates (12 clients),
    /// the selector sends most meganode searches to the server and serves
    /// more than either line alone.
    #[test]
    fn past_the_server_cores_saturation_the_selector_beats_both_lines() {
        let server = fig_4_point(3, SearchMode::ServerOnly);
        let client = fig_4_point(3, SearchMode::ClientOnly);
        let selector = fig_4_point(3, SearchMode::Selector);
        assert!(
            selector.ops_per_sec > server.ops_per_sec.max(client.ops_per_sec),
            "selector {} server-side {} client-side {}",
            selector.ops_per_sec,
            server.ops_per_sec,
            client.ops_per_sec
        );
        assert!(
            selector.server_search_pct > 50.0,
            "{}",
            selector.server_search_pct
        );
        assert_eq!(server.server_search_pct, 100.0);
        assert_eq!(client.server_search_pct, 0.0);
    }

    /// Below saturation there are no queues: inequality (1) compares the
    /// server's service time with m times no NIC queueing, and the selector
    /// searches on the client (its exploration aside), as the paper's
    /// selector does.
    #[test]
    fn without_queues_inequality_one_searches_on_the_client() {
        let r =
            nessie_sim::simulate(&spec(&args(), 1, 1, 1, 1, SearchMode::Selector, true)).unwrap();
        assert!(r.server_search_pct < 10.0, "{}", r.server_search_pct);
        assert!(r.ops > 0);
    }
}

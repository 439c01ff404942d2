//! What a run reports: throughput, latency, NIC and CPU busy times, the
//! systems' own counters, the history and the faults injected.

use super::*;

/// The `q` quantile of latencies `v` (ns), in µs (0 for none).
pub(super) fn quantile(v: &mut [u64], q: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_unstable();
    v[((v.len() - 1) as f64 * q).round() as usize] as f64 / 1000.0
}

impl Engine {
    /// Cuckoo paths the baselines' servers moved over the run (their
    /// nodes' move epochs advance by two per path).
    /// Meganode searches Cell's clients sent to the server and did
    /// themselves so far ((0, 0) for another system; a restarted client's
    /// count starts again).
    pub(crate) fn cell_searches(&self) -> (u64, u64) {
        self.clients
            .iter()
            .filter_map(|cl| cl.cell.as_ref())
            .map(|m| {
                let s = &m.core().stats;
                (s.server_searches, s.client_searches)
            })
            .fold((0, 0), |(a, b), (s, c)| (a + s, b + c))
    }

    /// The share of the measured workload's meganode searches Cell's
    /// clients sent to the server, % (0 for another system).
    pub(super) fn server_search_pct(&self) -> f64 {
        let (s, c) = self.cell_searches();
        let (s0, c0) = self.server_side.cell_searches_before;
        let (server, client) = (s.saturating_sub(s0), c.saturating_sub(c0));
        100.0 * server as f64 / (server + client).max(1) as f64
    }

    /// A counter of Cell's servers, summed over the nodes (0 for another
    /// system).
    pub(super) fn cell_count(
        &self,
        counter: impl Fn(&nessie_cell::server::ServerCounters) -> &std::sync::atomic::AtomicU64,
    ) -> u64 {
        self.server_side
            .cell_servers
            .iter()
            .map(|st| counter(&st.counters).load(std::sync::atomic::Ordering::Relaxed))
            .sum()
    }

    pub(super) fn cuckoo_moves(&self) -> u64 {
        let Some(epoch) = self.server_side.servers.as_ref().and_then(|sv| sv.epoch) else {
            return 0;
        };
        (0..self.spec.nodes)
            .map(|n| {
                self.cluster
                    .mem
                    .word(NodeId(n), Region::Data, epoch)
                    .unwrap_or(0)
                    / 2
            })
            .sum()
    }

    pub(super) fn report(&mut self, wall: std::time::Duration) -> SimReport {
        fn avg(v: &[u64]) -> f64 {
            if v.is_empty() {
                0.0
            } else {
                v.iter().sum::<u64>() as f64 / v.len() as f64 / 1000.0
            }
        }
        let ops = (self.workload.tally.get_lat.len() + self.workload.tally.put_lat.len()) as u64
            + self.workload.tally.deletes;
        let n = ops.max(1) as f64;
        let lock_waits = self
            .server_side
            .servers
            .as_ref()
            .map_or(0, |sv| sv.lock_waits);
        let (server_ops, busy, scan, workers, server_requests, server_errors) =
            match &self.server_side.servers {
                Some(sv) => (
                    sv.stats.cas(),
                    sv.workers.iter().map(|w| w.busy_ns).sum::<u64>(),
                    sv.workers.iter().map(|w| w.scan_ns).sum::<u64>(),
                    sv.workers.len() as f64,
                    sv.requests,
                    sv.counters
                        .errors
                        .lock()
                        .map(|e| e.iter().take(16).map(|e| e.to_string()).collect())
                        .unwrap_or_default(),
                ),
                None => (0, 0, 0, 0.0, 0, Vec::new()),
            };
        let window = (self.spec.seconds * 1e9).max(1.0);
        // The busiest node's share of the window, per NIC resource (the
        // nodes' NICs: application hosts' follow them).
        let nodes = usize::from(self.spec.nodes);
        let busiest = |f: fn(&Nic) -> u64| {
            100.0 * self.net.nics.iter().take(nodes).map(f).max().unwrap_or(0) as f64 / window
        };
        // A direction's processing is shared by its units.
        let units = f64::from(self.p.nic_units.max(1));
        SimReport {
            system: self.spec.system,
            nic_tx_op_busy_pct: busiest(|n| n.tx_op_ns) / units,
            client_busy_pct: 100.0 * self.workload.client_busy_ns as f64
                / (self.clients.len().max(1) as f64 * window),
            link_busy_pct: busiest(|n| n.tx_wire_ns),
            nic_rx_busy_pct: busiest(|n| n.rx_ns) / units,
            nic_ops_per_op: (self.workload.stats.fabric_ops() + server_ops) as f64 / n,
            cas_per_op: (self.workload.stats.cas() + server_ops) as f64 / n,
            cas_ceiling_ops_per_sec: self.p.cas_ceiling_per_node() * f64::from(self.spec.nodes)
                / ((self.workload.stats.cas() + server_ops) as f64 / n),
            server_busy_pct: if workers > 0.0 {
                100.0 * busy as f64 / (workers * window)
            } else {
                0.0
            },
            server_scan_pct: if workers > 0.0 {
                100.0 * scan as f64 / (workers * window)
            } else {
                0.0
            },
            server_requests,
            server_lock_waits: lock_waits,
            server_errors,
            ops,
            gets: self.workload.tally.get_lat.len() as u64,
            puts: self.workload.tally.put_lat.len() as u64,
            deletes: self.workload.tally.deletes,
            failures: self.workload.tally.failures,
            unknown: self.workload.tally.unknown,
            stuck: self.workload.tally.stuck,
            sweep_failures: std::mem::take(&mut self.workload.sweep.failures),
            recovery_failures: self.recovery_failures(),
            unreachable_meganodes: self.unreachable_meganodes(),
            ops_per_sec: ops as f64 / self.spec.seconds,
            get_avg_us: avg(&self.workload.tally.get_lat),
            get_p50_us: quantile(&mut self.workload.tally.get_lat, 0.5),
            get_p99_us: quantile(&mut self.workload.tally.get_lat, 0.99),
            put_avg_us: avg(&self.workload.tally.put_lat),
            put_p50_us: quantile(&mut self.workload.tally.put_lat, 0.5),
            put_p99_us: quantile(&mut self.workload.tally.put_lat, 0.99),
            round_trips_per_get: self.workload.tally.get_round_trips as f64
                / (self.workload.tally.get_lat.len().max(1)) as f64,
            round_trips_per_put: self.workload.tally.put_round_trips as f64
                / (self.workload.tally.put_lat.len().max(1)) as f64,
            bytes_per_op: self.workload.stats.fabric_bytes as f64 / n,
            round_trips_per_op: self.workload.stats.round_trips as f64 / n,
            migrations: self.workload.stats.migrations
                + self.cuckoo_moves()
                + self.cell_count(|c| &c.meganode_splits),
            node_splits: self.cell_count(|c| &c.node_splits),
            measured_from_ns: self.workload.measure_from,
            server_search_pct: self.server_search_pct(),
            recoveries: self.workload.stats.recoveries,
            growth: crate::spec::GrowthCounts {
                seals: self.workload.stats.growth_seals,
                stale_views: self.workload.stats.stale_views,
            },
            growth_phases: self.phase_figures(),
            events: self.events.count,
            chaos: self.chaos.counts,
            corrupt: self.checks.corrupt.take(),
            margin_breaches: self.checks.margin.take(),
            marked_linked: self.checks.marked_linked.take(),
            wall_seconds: wall.as_secs_f64(),
            events_per_wall_sec: self.events.count as f64 / wall.as_secs_f64().max(1e-9),
            history: std::mem::take(&mut self.workload.rec.history),
            completed_ops: self.workload.rec.completed_ops,
            completed_scans: self.workload.rec.completed_scans,
            scans: std::mem::take(&mut self.workload.rec.scans),
            recycled_in_race: self.workload.recycled_in_race,
            history_stats: std::mem::take(&mut self.workload.rec.history_stats),
            dtes: None,
        }
    }
}

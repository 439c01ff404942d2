//! One report for a multi-node run: each `nessie node run --report FILE`
//! writes its node's results as JSON ([`RunReport`]); `nessie node report
//! FILE...` reads them back and merges them ([`ClusterReport`]): operations
//! and rates summed over nodes, latency quantiles over every operation of
//! every node (each node's HDR histogram, merged: within 0.1 %), fabric work per
//! operation, GET misses apart from GETs that returned a value, failures by
//! kind, CPU time, and how far apart the nodes started measuring (a rate
//! summed over windows that do not overlap would be meaningless, so the
//! report says when they did not).

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};

use nessie_workload::write_kinds;
#[cfg(test)]
use nessie_workload::Latencies;
use nessie_workload::{KindSummary, WorkloadReport};

/// The default start spread above which the merged report warns that the
/// nodes' measured windows do not line up.
pub const START_SPREAD_WARN_US: u64 = 10_000;

/// One node's results, as `nessie node run --report FILE` writes them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    /// The node.
    pub node: u16,
    /// The system run.
    pub system: String,
    /// The start instant the node was given (`--start-at`), ns since the
    /// Unix epoch.
    pub start_at_unix_ns: Option<u64>,
    /// When the node started measuring, ns since the Unix epoch.
    pub started_unix_ns: u64,
    /// Seconds measured.
    pub seconds: f64,
    /// GET, PUT, DELETE, SCAN.
    pub kinds: [KindSummary; 4],
    /// CPU seconds of the client threads.
    pub client_cpu_s: f64,
    /// CPU seconds of the node's server workers.
    pub server_cpu_s: f64,
    /// Requests the node's server workers served.
    pub server_requests: u64,
    /// Failures by error kind.
    pub errors: BTreeMap<String, u64>,
    /// What the node's transport met during the run (queue pairs failed,
    /// re-dials, watchdog trips, device events, the NIC's and the
    /// Ethernet port's counters: their growth; the peers' clocks as last
    /// measured). Absent from reports of nodes that could not read them.
    #[serde(default)]
    pub transport: Option<NodeCounters>,
}

/// A node's transport counters (`nessie node`'s metrics endpoint publishes
/// them as they stand; `--report` holds their growth over the run).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeCounters {
    /// Queue pairs failed (a deadline passed, a completion error).
    pub qp_failures: u64,
    /// Dials of a peer that failed.
    pub dial_failures: u64,
    /// Re-dials that brought a peer back.
    pub redials: u64,
    /// Queue pairs the deadline watchdog failed first.
    pub watchdog_trips: u64,
    /// The watchdog's own worst lateness, µs.
    pub watchdog_max_late_us: u64,
    /// The RDMA device's asynchronous events, by kind.
    pub device_events: BTreeMap<String, u64>,
    /// The NIC's port counters (sysfs: `counters/`, `hw.` for
    /// `hw_counters/`), those not zero.
    pub nic: BTreeMap<String, u64>,
    /// The Ethernet port's flow-control counters (`ethtool -S`: pause, PFC,
    /// ECN, congestion notifications), where readable.
    pub link: BTreeMap<String, u64>,
    /// The peers' clocks, by peer (`node1`, ...).
    pub clocks: BTreeMap<String, PeerClockCounts>,
}

/// What the periodic clock check found of one peer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerClockCounts {
    /// Checks made.
    pub checks: u64,
    /// Checks the peer did not answer.
    pub unanswered: u64,
    /// Checks that proved its clock further off than the skew allows.
    pub beyond_skew: u64,
    /// Its clock's offset from this node's at the last answered check, ns.
    pub last_offset_ns: Option<i64>,
}

/// The growth of each counter of `now` since `before` (one `before` lacks
/// counts whole; one that went back counts from zero).
fn grown(now: &BTreeMap<String, u64>, before: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    now.iter()
        .map(|(k, &v)| {
            let b = before.get(k).copied().unwrap_or(0);
            (k.clone(), v.checked_sub(b).unwrap_or(v))
        })
        .filter(|(_, v)| *v != 0)
        .collect()
}

impl NodeCounters {
    /// How the counters grew from `before` to `self`; the clocks are
    /// `self`'s checks since `before`, with `self`'s last offset.
    pub fn since(&self, before: &NodeCounters) -> NodeCounters {
        NodeCounters {
            qp_failures: self.qp_failures.saturating_sub(before.qp_failures),
            dial_failures: self.dial_failures.saturating_sub(before.dial_failures),
            redials: self.redials.saturating_sub(before.redials),
            watchdog_trips: self.watchdog_trips.saturating_sub(before.watchdog_trips),
            watchdog_max_late_us: self.watchdog_max_late_us,
            device_events: grown(&self.device_events, &before.device_events),
            nic: grown(&self.nic, &before.nic),
            link: grown(&self.link, &before.link),
            clocks: self
                .clocks
                .iter()
                .map(|(peer, c)| {
                    let b = before.clocks.get(peer).copied().unwrap_or_default();
                    let c2 = PeerClockCounts {
                        checks: c.checks.saturating_sub(b.checks),
                        unanswered: c.unanswered.saturating_sub(b.unanswered),
                        beyond_skew: c.beyond_skew.saturating_sub(b.beyond_skew),
                        last_offset_ns: c.last_offset_ns,
                    };
                    (peer.clone(), c2)
                })
                .collect(),
        }
    }

    /// These counters summed with `other`'s (a cluster's; clock offsets
    /// are per node pair and are left out).
    fn add(&mut self, other: &NodeCounters) {
        self.qp_failures += other.qp_failures;
        self.dial_failures += other.dial_failures;
        self.redials += other.redials;
        self.watchdog_trips += other.watchdog_trips;
        self.watchdog_max_late_us = self.watchdog_max_late_us.max(other.watchdog_max_late_us);
        for (into, from) in [
            (&mut self.device_events, &other.device_events),
            (&mut self.nic, &other.nic),
            (&mut self.link, &other.link),
        ] {
            for (k, v) in from {
                *into.entry(k.clone()).or_default() += v;
            }
        }
    }
}

impl fmt::Display for NodeCounters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} queue pairs failed, {} dials failed, {} re-dials, {} watchdog trips (at most {} us late)",
            self.qp_failures,
            self.dial_failures,
            self.redials,
            self.watchdog_trips,
            self.watchdog_max_late_us
        )?;
        for (what, map) in [
            ("device events", &self.device_events),
            ("flow control", &self.link),
        ] {
            if !map.is_empty() {
                let v: Vec<String> = map.iter().map(|(k, v)| format!("{k} {v}")).collect();
                write!(f, "; {what}: {}", v.join(", "))?;
            }
        }
        Ok(())
    }
}

impl RunReport {
    /// The report of `node`'s workload run.
    pub fn of(node: u16, r: &WorkloadReport) -> RunReport {
        RunReport {
            node,
            system: r.system.clone(),
            start_at_unix_ns: r.start_at_unix_ns,
            started_unix_ns: r.started_unix_ns,
            seconds: r.seconds,
            kinds: r.kinds.each_ref().map(KindSummary::of),
            client_cpu_s: r.client_cpu.as_secs_f64(),
            server_cpu_s: r.server_cpu.as_secs_f64(),
            server_requests: r.server_requests,
            errors: r.errors.clone(),
            transport: None,
        }
    }

    /// With what the node's transport met during the run.
    pub fn with_transport(self, transport: NodeCounters) -> RunReport {
        RunReport {
            transport: Some(transport),
            ..self
        }
    }

    /// Operations of every kind.
    pub fn ops(&self) -> u64 {
        self.kinds.iter().map(|k| k.ops).sum()
    }

    /// Operations per second.
    pub fn rate(&self) -> f64 {
        self.ops() as f64 / self.seconds.max(1e-9)
    }

    /// Writes the report as JSON.
    pub fn write(&self, path: &Path) -> Result<(), ReportError> {
        let text = serde_json::to_string(self).map_err(|e| ReportError::Format {
            path: path.display().to_string(),
            why: e.to_string(),
        })?;
        std::fs::write(path, text).map_err(|e| ReportError::Io {
            path: path.display().to_string(),
            why: e.to_string(),
        })
    }

    /// Reads a report written by [`RunReport::write`].
    pub fn read(path: &Path) -> Result<RunReport, ReportError> {
        let text = std::fs::read_to_string(path).map_err(|e| ReportError::Io {
            path: path.display().to_string(),
            why: e.to_string(),
        })?;
        serde_json::from_str(&text).map_err(|e| ReportError::Format {
            path: path.display().to_string(),
            why: e.to_string(),
        })
    }
}

/// Why reports could not be written, read or merged.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A file could not be read or written.
    #[error("{path}: {why}")]
    Io {
        /// The file.
        path: String,
        /// The error.
        why: String,
    },
    /// A file is not a node report.
    #[error("{path} is not a node report: {why}")]
    Format {
        /// The file.
        path: String,
        /// The parser's complaint.
        why: String,
    },
    /// The reports cannot be merged.
    #[error("cannot merge the reports: {0}")]
    Mismatch(String),
}

/// The merged report of a multi-node run.
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterReport {
    /// The nodes' reports, by node.
    pub nodes: Vec<RunReport>,
    /// GET, PUT, DELETE and SCAN over every node.
    pub total: [KindSummary; 4],
    /// The start spread tolerated before the report warns, µs.
    pub max_spread_us: u64,
}

impl ClusterReport {
    /// Merges node reports of one run: one system, each node once.
    pub fn merge(mut nodes: Vec<RunReport>) -> Result<ClusterReport, ReportError> {
        let Some(first) = nodes.first() else {
            return Err(ReportError::Mismatch("no reports".into()));
        };
        let system = first.system.clone();
        if let Some(o) = nodes.iter().find(|n| n.system != system) {
            return Err(ReportError::Mismatch(format!(
                "node {} ran {} and node {} ran {}",
                first.node, system, o.node, o.system
            )));
        }
        nodes.sort_by_key(|n| n.node);
        if let Some(w) = nodes.windows(2).find(|w| w[0].node == w[1].node) {
            return Err(ReportError::Mismatch(format!(
                "node {} reported twice",
                w[0].node
            )));
        }
        let mut total: [KindSummary; 4] = Default::default();
        for n in &nodes {
            for (t, k) in total.iter_mut().zip(&n.kinds) {
                t.merge(k);
            }
        }
        Ok(ClusterReport {
            nodes,
            total,
            max_spread_us: START_SPREAD_WARN_US,
        })
    }

    /// Tolerates a start spread of `us` before warning.
    pub fn with_max_spread_us(mut self, us: u64) -> ClusterReport {
        self.max_spread_us = us;
        self
    }

    /// How far apart the nodes started measuring, µs.
    pub fn start_spread_us(&self) -> u64 {
        let starts = self.nodes.iter().map(|n| n.started_unix_ns);
        let (lo, hi) = (starts.clone().min(), starts.max());
        lo.zip(hi).map_or(0, |(lo, hi)| (hi - lo) / 1000)
    }

    /// Whether every node was given the same start instant and started
    /// measuring within [`ClusterReport::max_spread_us`] of the others.
    pub fn started_together(&self) -> bool {
        let at = self.nodes.first().and_then(|n| n.start_at_unix_ns);
        at.is_some()
            && self.nodes.iter().all(|n| n.start_at_unix_ns == at)
            && self.start_spread_us() <= self.max_spread_us
    }

    /// Operations over every node.
    pub fn ops(&self) -> u64 {
        self.nodes.iter().map(RunReport::ops).sum()
    }

    /// The cluster's rate: the sum of the nodes' rates.
    pub fn rate(&self) -> f64 {
        self.nodes.iter().map(RunReport::rate).sum()
    }
}

impl fmt::Display for ClusterReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let system = self.nodes.first().map_or("", |n| n.system.as_str());
        writeln!(
            f,
            "cluster report: {system} on {} nodes: {} operations, {:.0} ops/s (the nodes' rates summed)",
            self.nodes.len(),
            self.ops(),
            self.rate()
        )?;
        let t0 = self
            .nodes
            .iter()
            .map(|n| n.started_unix_ns)
            .min()
            .unwrap_or(0);
        for n in &self.nodes {
            writeln!(
                f,
                "  node {:>3}: {:>9} operations in {:>6.2} s, {:>10.0} ops/s, started at +{} us",
                n.node,
                n.ops(),
                n.seconds,
                n.rate(),
                (n.started_unix_ns - t0) / 1000
            )?;
        }
        if self.started_together() {
            writeln!(
                f,
                "the nodes started together (within {} us of one another)",
                self.start_spread_us()
            )?;
        } else {
            writeln!(
                f,
                "WARNING: the nodes did not start together (spread {} us{}): the summed rate is over windows that do not line up; use --start-at",
                self.start_spread_us(),
                if self.nodes.iter().any(|n| n.start_at_unix_ns.is_none()) {
                    ", some without --start-at"
                } else {
                    ""
                }
            )?;
        }
        write_kinds(f, &self.total)?;
        let mut errors: BTreeMap<&str, u64> = BTreeMap::new();
        for n in &self.nodes {
            for (e, c) in &n.errors {
                *errors.entry(e).or_default() += c;
            }
        }
        for (e, c) in errors {
            writeln!(f, "errors: {c} x {e}")?;
        }
        let sum = |g: fn(&RunReport) -> f64| self.nodes.iter().map(g).sum::<f64>();
        writeln!(
            f,
            "CPU: client threads {:.3} s, server workers {:.3} s ({} requests served)",
            sum(|n| n.client_cpu_s),
            sum(|n| n.server_cpu_s),
            self.nodes.iter().map(|n| n.server_requests).sum::<u64>()
        )?;
        let with: Vec<&NodeCounters> = self
            .nodes
            .iter()
            .filter_map(|n| n.transport.as_ref())
            .collect();
        if !with.is_empty() {
            let mut total = NodeCounters::default();
            with.iter().for_each(|c| total.add(c));
            writeln!(
                f,
                "transport over the run ({} of {} nodes report it): {total}",
                with.len(),
                self.nodes.len()
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(node: u16, started: u64, gets: u64, misses: u64, lat: Vec<u64>) -> RunReport {
        RunReport {
            node,
            system: "nessie".into(),
            start_at_unix_ns: Some(1_000_000_000),
            started_unix_ns: started,
            seconds: 2.0,
            kinds: [
                KindSummary {
                    ops: gets,
                    misses,
                    index_reads: gets,
                    latencies: Latencies::of(lat),
                    ..KindSummary::default()
                },
                KindSummary::default(),
                KindSummary::default(),
                KindSummary::default(),
            ],
            ..RunReport::default()
        }
    }

    #[test]
    fn reports_merge_into_sums_and_merged_histograms() {
        let a = node(0, 1_000_050_000, 100, 10, vec![1_000, 3_000]);
        let b = node(1, 1_000_020_000, 300, 0, vec![2_000, 4_000]);
        let r = ClusterReport::merge(vec![a, b]).unwrap();
        assert_eq!(r.nodes[0].node, 0);
        assert_eq!(r.ops(), 400);
        assert_eq!(r.rate(), 200.0);
        assert_eq!(r.total[0].misses, 10);
        assert_eq!(
            r.total[0].latencies,
            Latencies::of([1_000, 2_000, 3_000, 4_000])
        );
        assert_eq!(r.total[0].latencies.len(), 4);
        let max = r.total[0].quantile_us(1.0);
        assert!((max - 4.0).abs() <= 0.004, "{max}");
        assert_eq!(r.start_spread_us(), 30);
        assert!(r.started_together());
        let text = r.to_string();
        assert!(text.contains("400 operations"), "{text}");
        assert!(
            text.contains("90 returned a value, 10 found no value"),
            "{text}"
        );
        assert!(text.contains("started together"), "{text}");
    }

    #[test]
    fn nodes_that_did_not_share_a_start_are_flagged() {
        let a = node(0, 1_000_000_000, 1, 0, vec![]);
        let mut b = node(1, 1_500_000_000, 1, 0, vec![]);
        let r = ClusterReport::merge(vec![a.clone(), b.clone()]).unwrap();
        assert!(!r.started_together());
        assert!(r.to_string().contains("WARNING"));
        assert!(r.with_max_spread_us(600_000).started_together());
        b.started_unix_ns = a.started_unix_ns;
        b.start_at_unix_ns = None;
        let r = ClusterReport::merge(vec![a, b]).unwrap();
        assert!(r.to_string().contains("some without --start-at"));
    }

    #[test]
    fn mismatched_reports_are_refused() {
        let a = node(0, 1, 1, 0, vec![]);
        let mut b = node(1, 1, 1, 0, vec![]);
        b.system = "pilaf".into();
        assert!(matches!(
            ClusterReport::merge(vec![a.clone(), b]),
            Err(ReportError::Mismatch(_))
        ));
        assert!(ClusterReport::merge(vec![a.clone(), a]).is_err());
        assert!(ClusterReport::merge(vec![]).is_err());
    }

    #[test]
    fn transport_counters_grow_over_a_run_and_sum_over_the_nodes() {
        let map = |v: &[(&str, u64)]| -> BTreeMap<String, u64> {
            v.iter().map(|(k, n)| (k.to_string(), *n)).collect()
        };
        let before = NodeCounters {
            qp_failures: 2,
            redials: 1,
            nic: map(&[("hw.duplicate_request", 5), ("port_xmit_data", 100)]),
            ..NodeCounters::default()
        };
        let mut clocks = BTreeMap::new();
        clocks.insert(
            "node1".to_string(),
            PeerClockCounts {
                checks: 4,
                last_offset_ns: Some(-300),
                ..PeerClockCounts::default()
            },
        );
        let after = NodeCounters {
            qp_failures: 5,
            redials: 1,
            watchdog_trips: 1,
            nic: map(&[("hw.duplicate_request", 5), ("port_xmit_data", 160)]),
            link: map(&[("rx_prio3_pause", 9)]),
            clocks,
            ..NodeCounters::default()
        };
        let run = after.since(&before);
        assert_eq!(
            (run.qp_failures, run.redials, run.watchdog_trips),
            (3, 0, 1)
        );
        assert_eq!(
            run.nic,
            map(&[("port_xmit_data", 60)]),
            "unchanged ones leave"
        );
        assert_eq!(run.clocks["node1"].last_offset_ns, Some(-300));
        let a = node(0, 1, 1, 0, vec![]).with_transport(run.clone());
        let b = node(1, 1, 1, 0, vec![]).with_transport(run);
        let text = ClusterReport::merge(vec![a, b]).unwrap().to_string();
        assert!(
            text.contains("transport over the run (2 of 2 nodes report it): 6 queue pairs failed, 0 dials failed, 0 re-dials, 2 watchdog trips")
                && text.contains("flow control: rx_prio3_pause 18"),
            "{text}"
        );
        let plain = ClusterReport::merge(vec![node(0, 1, 1, 0, vec![])]).unwrap();
        assert!(!plain.to_string().contains("transport"));
    }

    #[test]
    fn a_report_round_trips_through_its_file() {
        let dir = std::env::temp_dir().join(format!("nessie-report-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("node0.json");
        let a = node(0, 7, 5, 1, vec![10, 20]).with_transport(NodeCounters {
            qp_failures: 1,
            ..NodeCounters::default()
        });
        a.write(&path).unwrap();
        assert_eq!(RunReport::read(&path).unwrap(), a);
        std::fs::write(&path, "not json").unwrap();
        assert!(matches!(
            RunReport::read(&path),
            Err(ReportError::Format { .. })
        ));
        assert!(matches!(
            RunReport::read(&dir.join("missing.json")),
            Err(ReportError::Io { .. })
        ));
        std::fs::remove_dir_all(&dir).ok();
    }
}

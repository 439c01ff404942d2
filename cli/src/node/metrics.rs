//! The node's metrics endpoint (`nessie node serve|run --metrics ADDR`):
//! everything an operator watches, in the Prometheus text format, served
//! by the `metrics-exporter-prometheus` crate's HTTP listener (every path
//! answers with the whole page).
//!
//! Two sources feed it:
//! - the workload's operations, live, as each finishes
//!   ([`nessie_workload::metrics`]: counted by kind and outcome, timed,
//!   their retries);
//! - the node's transport and server threads, read and published here
//!   every [`PUBLISH_EVERY`] by [`Publisher`]: queue pairs failed, dials
//!   failed, re-dials, watchdog trips, device events, the NIC's sysfs
//!   counters, the Ethernet port's pause/PFC/ECN counters (`ethtool -S`),
//!   the peers' clock offsets, and the server workers' requests, errors and
//!   CPU time.
//!
//! The names and what each means are in `docs/deploy.md`, "Metrics".
//! The same transport counters go into `--report`'s JSON
//! ([`NodeCounters`]), and `serve` prints them every
//! [`STATUS_EVERY`] ([`status_line`]).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use metrics::{counter, describe_counter, describe_gauge, describe_histogram, gauge, Unit};
use metrics_exporter_prometheus::{BuildError, Matcher, PrometheusBuilder};
use nessie_fabric_verbs::Watchdog;
use nessie_fabric_verbs::{transport_stats, VerbsFabric};
use nessie_protocol::NodeId;
use nessie_systems::NodeServers;
use nessie_workload::metrics as ops;

use super::report::{NodeCounters, PeerClockCounts};

/// How often the transport and server counters are read and published.
pub const PUBLISH_EVERY: Duration = Duration::from_secs(1);
/// How often `serve` prints its status line.
pub const STATUS_EVERY: Duration = Duration::from_secs(10);

/// The operations' latency buckets, seconds: 2 µs (a loopback READ) to
/// 1 s (an operation that waited out a deadline).
const LATENCY_BUCKETS: [f64; 16] = [
    2e-6, 5e-6, 1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2, 2e-2, 0.1, 0.5, 1.0,
];

/// Installs the exporter: a Prometheus scrape endpoint on `addr` (its own
/// thread), and the recorder every metric of this process goes to. An
/// error if the address cannot be listened on.
pub fn install(addr: SocketAddr) -> Result<(), BuildError> {
    PrometheusBuilder::new()
        .with_http_listener(addr)
        .set_buckets_for_metric(Matcher::Full(ops::LATENCY.into()), &LATENCY_BUCKETS)?
        .install()?;
    describe();
    Ok(())
}

/// The HELP lines of every metric.
fn describe() {
    describe_counter!(
        ops::OPERATIONS,
        "Operations finished, by op and outcome (ok; failed: no effect; unknown: it may have taken effect)"
    );
    describe_histogram!(ops::LATENCY, Unit::Seconds, "Operation latency, by op");
    describe_counter!(ops::RETRIES, "Attempts beyond an operation's first, by op");
    describe_counter!(
        "nessie_qp_failures_total",
        "Queue pairs moved to the error state (a deadline passed, a completion error)"
    );
    describe_counter!("nessie_dial_failures_total", "Dials of a peer that failed");
    describe_counter!("nessie_redials_total", "Re-dials that brought a peer back");
    describe_counter!(
        "nessie_watchdog_trips_total",
        "Queue pairs the deadline watchdog failed before their endpoint did"
    );
    describe_gauge!(
        "nessie_watchdog_max_late_seconds",
        Unit::Seconds,
        "The watchdog's worst lateness past a deadline"
    );
    describe_counter!(
        "nessie_device_events_total",
        "The RDMA device's asynchronous events, by event"
    );
    describe_counter!(
        "nessie_nic_counter",
        "The NIC port's counters (sysfs counters/ and hw_counters/, the latter prefixed hw.)"
    );
    describe_counter!(
        "nessie_link_counter",
        "The Ethernet port's flow-control counters (ethtool -S: pause, PFC, ECN, CNP)"
    );
    describe_gauge!(
        "nessie_clock_offset_seconds",
        Unit::Seconds,
        "A peer's clock offset from this node's at its last answered check"
    );
    describe_counter!("nessie_clock_checks_total", "Clock checks of a peer");
    describe_counter!(
        "nessie_clock_unanswered_total",
        "Clock checks a peer did not answer"
    );
    describe_counter!(
        "nessie_clock_beyond_skew_total",
        "Clock checks that proved a peer further off than clock_skew allows"
    );
    describe_counter!(
        "nessie_server_requests_total",
        "Requests this node's server workers served"
    );
    describe_gauge!(
        "nessie_server_errors",
        "Errors this node's server workers reported (at most 64 are kept)"
    );
    describe_gauge!(
        "nessie_server_cpu_seconds",
        Unit::Seconds,
        "CPU time of this node's server workers"
    );
}

/// Reads node `node`'s transport counters now. `link` says whether to
/// try `ethtool` (a node that found none stops asking).
pub fn read(fabric: &VerbsFabric, node: NodeId, link: bool) -> NodeCounters {
    let t = transport_stats::snapshot();
    let dog = Watchdog::global().map(|d| d.stats()).ok();
    let clocks = fabric
        .clock_checks(node)
        .map(|ledger| {
            ledger
                .peers
                .iter()
                .enumerate()
                .filter(|(peer, c)| *peer != usize::from(node.0) && c.checks > 0)
                .map(|(peer, c)| {
                    let counts = PeerClockCounts {
                        checks: c.checks,
                        unanswered: c.unanswered,
                        beyond_skew: c.beyond_skew,
                        last_offset_ns: c.last.map(|s| s.offset_ns),
                    };
                    (format!("node{peer}"), counts)
                })
                .collect()
        })
        .unwrap_or_default();
    let nonzero = |c: nessie_fabric_verbs::NicCounters| -> BTreeMap<String, u64> {
        c.iter()
            .filter(|(_, v)| *v != 0)
            .map(|(k, v)| (k.to_string(), v))
            .collect()
    };
    NodeCounters {
        qp_failures: t.qp_failures,
        dial_failures: t.dial_failures,
        redials: t.redials,
        watchdog_trips: dog.map_or(0, |d| d.trips),
        watchdog_max_late_us: dog.map_or(0, |d| d.max_late.as_micros() as u64),
        device_events: fabric.device_events(node).unwrap_or_default(),
        nic: fabric.nic_counters(node).map(nonzero).unwrap_or_default(),
        // Every flow-control counter, zeros too: a quiet PFC port is news.
        link: if link {
            fabric
                .link_counters(node)
                .map(|c| c.iter().map(|(k, v)| (k.to_string(), v)).collect())
                .unwrap_or_default()
        } else {
            BTreeMap::new()
        },
        clocks,
    }
}

/// Publishes `c` (as it stands: counters since the process started, or
/// since the device came up for the NIC's) and the server workers'.
pub fn publish(c: &NodeCounters, servers: &NodeServers) {
    counter!("nessie_qp_failures_total").absolute(c.qp_failures);
    counter!("nessie_dial_failures_total").absolute(c.dial_failures);
    counter!("nessie_redials_total").absolute(c.redials);
    counter!("nessie_watchdog_trips_total").absolute(c.watchdog_trips);
    gauge!("nessie_watchdog_max_late_seconds").set(c.watchdog_max_late_us as f64 / 1e6);
    for (event, n) in &c.device_events {
        counter!("nessie_device_events_total", "event" => event.clone()).absolute(*n);
    }
    for (name, n) in &c.nic {
        counter!("nessie_nic_counter", "counter" => name.clone()).absolute(*n);
    }
    for (name, n) in &c.link {
        counter!("nessie_link_counter", "counter" => name.clone()).absolute(*n);
    }
    for (peer, p) in &c.clocks {
        let peer = peer.clone();
        counter!("nessie_clock_checks_total", "peer" => peer.clone()).absolute(p.checks);
        counter!("nessie_clock_unanswered_total", "peer" => peer.clone()).absolute(p.unanswered);
        counter!("nessie_clock_beyond_skew_total", "peer" => peer.clone()).absolute(p.beyond_skew);
        if let Some(o) = p.last_offset_ns {
            gauge!("nessie_clock_offset_seconds", "peer" => peer).set(o as f64 / 1e9);
        }
    }
    if let Some(s) = servers.summary() {
        counter!("nessie_server_requests_total").absolute(s.requests);
        gauge!("nessie_server_errors").set(s.errors.len() as f64);
        gauge!("nessie_server_cpu_seconds").set(s.cpu.as_secs_f64());
    }
}

/// One line of `serve`'s periodic report: the server workers' requests
/// (and their rate since `last`, `elapsed` ago) and the transport's
/// counters.
pub fn status_line(
    c: &NodeCounters,
    servers: &NodeServers,
    last_requests: u64,
    elapsed: Duration,
) -> String {
    let served = servers.summary().map(|s| {
        let rate =
            s.requests.saturating_sub(last_requests) as f64 / elapsed.as_secs_f64().max(1e-9);
        format!(
            "{} requests served ({rate:.0}/s), {} server errors; ",
            s.requests,
            s.errors.len()
        )
    });
    format!("status: {}{c}", served.unwrap_or_default())
}

/// Reads and publishes a node's counters every [`PUBLISH_EVERY`] until
/// stopped; with `status`, prints [`status_line`] every [`STATUS_EVERY`].
pub struct Publisher<'a> {
    /// The fabric.
    pub fabric: &'a VerbsFabric,
    /// The node.
    pub node: NodeId,
    /// Its server threads.
    pub servers: &'a NodeServers,
    /// Whether to publish (an endpoint was installed).
    pub publish: bool,
    /// Whether to print the status line.
    pub status: bool,
}

impl Publisher<'_> {
    /// Runs until `stop` is raised.
    pub fn run(&self, stop: &AtomicBool) {
        let mut link = true;
        let mut last_status = Instant::now();
        let mut last_requests = 0;
        loop {
            let c = read(self.fabric, self.node, link);
            // A port with no flow-control counters (InfiniBand, no ethtool,
            // soft-RoCE's virtual NIC) is not asked again each second.
            link = link && !c.link.is_empty();
            if self.publish {
                publish(&c, self.servers);
            }
            if self.status && last_status.elapsed() >= STATUS_EVERY {
                println!(
                    "{}",
                    status_line(&c, self.servers, last_requests, last_status.elapsed())
                );
                last_requests = self.servers.summary().map_or(0, |s| s.requests);
                last_status = Instant::now();
            }
            let until = Instant::now() + PUBLISH_EVERY;
            while Instant::now() < until {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    use super::*;

    /// One scrape of the endpoint on `addr`, its body (the exporter's
    /// listener answers any path).
    fn scrape(addr: SocketAddr) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
                s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                s.write_all(b"GET /metrics HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
                    .unwrap();
                let mut text = String::new();
                let _ = s.read_to_string(&mut text);
                if text.starts_with("HTTP/1.1 200") {
                    return text;
                }
            }
            assert!(Instant::now() < deadline, "the endpoint never answered");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    #[test]
    fn the_endpoint_serves_the_operations_and_the_transport_counters() {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        install(addr).unwrap();
        ops::record(0, Ok(()), Duration::from_micros(30), 1);
        ops::record(
            1,
            Err(&nessie_protocol::Error::OutcomeUnknown(
                nessie_protocol::UnknownOutcome::new(
                    nessie_protocol::UnknownStep::Unfinished,
                    None,
                ),
            )),
            Duration::from_millis(3),
            3,
        );
        let mut c = NodeCounters {
            qp_failures: 3,
            redials: 1,
            ..NodeCounters::default()
        };
        c.link.insert("rx_prio3_pause".into(), 0);
        c.clocks.insert(
            "node1".into(),
            PeerClockCounts {
                checks: 2,
                last_offset_ns: Some(-1500),
                ..PeerClockCounts::default()
            },
        );
        publish(&c, &NodeServers::Kv(None));
        let text = scrape(addr);
        for line in [
            "nessie_operations_total{op=\"get\",outcome=\"ok\"} 1",
            "nessie_operations_total{op=\"put\",outcome=\"unknown\"} 1",
            "nessie_operation_retries_total{op=\"put\"} 2",
            "nessie_operation_seconds_bucket{op=\"get\",le=\"0.00005\"} 1",
            "nessie_qp_failures_total 3",
            "nessie_redials_total 1",
            "nessie_link_counter{counter=\"rx_prio3_pause\"} 0",
            "nessie_clock_offset_seconds{peer=\"node1\"} -0.0000015",
        ] {
            assert!(text.contains(line), "no `{line}` in:\n{text}");
        }
        // The counters move: a later publication shows the new values.
        c.qp_failures = 5;
        publish(&c, &NodeServers::Kv(None));
        assert!(scrape(addr).contains("nessie_qp_failures_total 5"));
        // A second endpoint in one process is refused, not a panic.
        assert!(install(addr).is_err());
    }

    #[test]
    fn the_status_line_names_the_transports_counters() {
        let c = NodeCounters {
            watchdog_trips: 2,
            ..NodeCounters::default()
        };
        let line = status_line(&c, &NodeServers::Kv(None), 0, Duration::from_secs(10));
        assert!(
            line.starts_with("status: 0 queue pairs failed") && line.contains("2 watchdog trips"),
            "{line}"
        );
    }
}

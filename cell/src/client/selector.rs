//! The locality selector (§2.5): per client and per server, choose between
//! a server-side search of the next meganode (one RPC) and a client-side
//! search (m RDMA READs) by inequality (1),
//!
//! ```text
//!     l_s - RTT  <  m * (l_r - RTT)        => server-side, else client-side
//! ```
//!
//! where `l_s` is the moving average of measured server-side search
//! latencies, `l_r` that of single RDMA READs, RTT the lowest RDMA READ
//! latency measured to that server, and m the average meganode height seen.
//! Refinements, as in the paper: samples further than K standard
//! deviations from the mean are discarded (and a server whose samples are
//! discarded more often than kept in one window loses its history), with
//! probability p the method estimated worse is chosen (exploration), and a
//! server's history expires after a quiet period. With no sample of one
//! kind yet, that kind is tried. The selector is plain state: time and
//! random numbers are passed in.

use std::collections::{HashMap, VecDeque};

use nessie_protocol::{Nanos, NodeId};

use crate::config::SelectorConfig;

/// A search method.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Method {
    /// One RPC to the meganode's server.
    Server,
    /// RDMA READs by the client.
    Client,
}

/// A moving window of latency samples (nanoseconds) with outlier rejection.
#[derive(Clone, Debug, Default)]
pub struct Samples {
    buf: VecDeque<f64>,
    sum: f64,
    sq: f64,
    kept: usize,
    rejected: usize,
}

impl Samples {
    /// Offers a sample; returns whether it was kept.
    pub fn push(&mut self, s: f64, cfg: &SelectorConfig) -> bool {
        if self.buf.len() >= cfg.min_samples {
            let (mean, sd) = (self.mean().unwrap_or(s), self.sd());
            if sd > 0.0 && (s - mean).abs() >= cfg.k_sigma * sd {
                self.rejected += 1;
                if self.rejected > self.kept {
                    // Conditions changed: more rejected than kept in this period.
                    *self = Samples::default();
                }
                return false;
            }
        }
        self.buf.push_back(s);
        self.sum += s;
        self.sq += s * s;
        if self.buf.len() > cfg.history {
            if let Some(old) = self.buf.pop_front() {
                self.sum -= old;
                self.sq -= old * old;
            }
        }
        self.kept += 1;
        if self.kept >= cfg.history {
            self.kept = 0;
            self.rejected = 0;
        }
        true
    }

    /// The mean, if any sample is kept.
    pub fn mean(&self) -> Option<f64> {
        (!self.buf.is_empty()).then(|| self.sum / self.buf.len() as f64)
    }

    /// The standard deviation (0 with fewer than two samples).
    pub fn sd(&self) -> f64 {
        let n = self.buf.len() as f64;
        if n < 2.0 {
            return 0.0;
        }
        let m = self.sum / n;
        (self.sq / n - m * m).max(0.0).sqrt()
    }

    /// Samples kept.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether no sample is kept.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }
}

/// What a client knows about one server.
#[derive(Clone, Debug, Default)]
pub struct ServerView {
    /// Server-side search latencies (l_s).
    pub ls: Samples,
    /// RDMA READ latencies (l_r).
    pub lr: Samples,
    /// Lowest RDMA READ latency seen (RTT).
    pub rtt: Option<f64>,
    /// Last time a search chose this server's meganodes.
    pub last_used: Option<Nanos>,
    /// Searches sent to the server.
    pub server_choices: u64,
    /// Searches done by the client.
    pub client_choices: u64,
}

/// One client's locality selector.
#[derive(Clone, Debug)]
pub struct Selector {
    cfg: SelectorConfig,
    servers: HashMap<NodeId, ServerView>,
    height_sum: f64,
    height_n: f64,
}

impl Selector {
    /// A selector with no history.
    pub fn new(cfg: SelectorConfig) -> Selector {
        Selector {
            cfg,
            servers: HashMap::new(),
            height_sum: 0.0,
            height_n: 0.0,
        }
    }

    /// m: the average meganode height observed (the configured guess before any).
    pub fn height(&self) -> f64 {
        if self.height_n > 0.0 {
            self.height_sum / self.height_n
        } else {
            self.cfg.initial_height
        }
    }

    /// Records the height (in nodes) of a meganode a client-side search crossed.
    pub fn observe_height(&mut self, h: u32) {
        // A moving average over the last ~100 meganodes.
        if self.height_n >= 100.0 {
            self.height_sum *= 99.0 / 100.0;
            self.height_n = 99.0;
        }
        self.height_sum += f64::from(h);
        self.height_n += 1.0;
    }

    fn view(&mut self, server: NodeId, now: Nanos) -> &mut ServerView {
        let expiry = self.cfg.expiry;
        let v = self.servers.entry(server).or_default();
        if v.last_used.is_some_and(|t| now.since(t) > expiry) {
            *v = ServerView::default();
        }
        v
    }

    /// Chooses how to search the next meganode on `server`; `coin` is a
    /// uniform random number in [0, 1).
    pub fn choose(&mut self, server: NodeId, now: Nanos, coin: f64) -> Method {
        let m = self.height();
        let explore = self.cfg.explore;
        let v = self.view(server, now);
        v.last_used = Some(now);
        let method = match (v.ls.mean(), v.lr.mean()) {
            (None, _) => Method::Server,
            (_, None) => Method::Client,
            (Some(ls), Some(lr)) => {
                let rtt = v.rtt.unwrap_or(0.0);
                let server_better = (ls - rtt) < m * (lr - rtt);
                if server_better != (coin < explore) {
                    Method::Server
                } else {
                    Method::Client
                }
            }
        };
        match method {
            Method::Server => v.server_choices += 1,
            Method::Client => v.client_choices += 1,
        }
        method
    }

    /// Records a server-side search latency.
    pub fn record_server(&mut self, server: NodeId, latency_ns: f64, now: Nanos) {
        let cfg = self.cfg;
        self.view(server, now).ls.push(latency_ns, &cfg);
    }

    /// Records an RDMA READ latency.
    pub fn record_rdma(&mut self, server: NodeId, latency_ns: f64, now: Nanos) {
        let cfg = self.cfg;
        let v = self.view(server, now);
        v.rtt = Some(v.rtt.map_or(latency_ns, |r| r.min(latency_ns)));
        v.lr.push(latency_ns, &cfg);
    }

    /// What the selector knows about `server`.
    pub fn server(&self, server: NodeId) -> Option<&ServerView> {
        self.servers.get(&server)
    }

    /// Share of searches sent to servers so far (all servers).
    pub fn server_share(&self) -> f64 {
        let (s, c) = self.servers.values().fold((0u64, 0u64), |(s, c), v| {
            (s + v.server_choices, c + v.client_choices)
        });
        if s + c == 0 {
            0.0
        } else {
            s as f64 / (s + c) as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn cfg() -> SelectorConfig {
        SelectorConfig {
            explore: 0.0,
            ..SelectorConfig::default()
        }
    }

    #[test]
    fn inequality_one_picks_the_shorter_queue() {
        let mut s = Selector::new(cfg());
        let n = NodeId(0);
        let t = Nanos(1);
        // No samples yet: try the server first, then the client.
        assert_eq!(s.choose(n, t, 0.5), Method::Server);
        s.record_server(n, 10_000.0, t);
        assert_eq!(s.choose(n, t, 0.5), Method::Client);
        for _ in 0..20 {
            s.record_rdma(n, 2_000.0, t);
        }
        s.record_rdma(n, 1_000.0, t);
        // l_s - RTT = 9000 vs m (3) * (l_r - RTT ~ 950) ~ 2850: client.
        assert_eq!(s.choose(n, t, 0.5), Method::Client);
        // A loaded NIC (l_r 5000) makes the server better.
        let mut s2 = Selector::new(cfg());
        s2.record_server(n, 10_000.0, t);
        s2.record_rdma(n, 1_000.0, t);
        for _ in 0..20 {
            s2.record_rdma(n, 5_000.0, t);
        }
        assert_eq!(s2.choose(n, t, 0.5), Method::Server);
        // Exploration flips the choice with probability p.
        let mut s3 = Selector::new(SelectorConfig {
            explore: 0.5,
            ..cfg()
        });
        s3.record_server(n, 10_000.0, t);
        s3.record_rdma(n, 1_000.0, t);
        s3.record_rdma(n, 5_000.0, t);
        // l_s - RTT = 9000 vs 3 * (3000 - 1000): client, unless exploring.
        assert_eq!(s3.choose(n, t, 0.9), Method::Client);
        assert_eq!(s3.choose(n, t, 0.1), Method::Server);
    }

    #[test]
    fn outliers_are_rejected_and_history_expires() {
        let c = cfg();
        let mut w = Samples::default();
        for i in 0..20 {
            assert!(w.push(1000.0 + f64::from(i % 3), &c));
        }
        assert!(!w.push(1_000_000.0, &c));
        assert_eq!(w.len(), 20);
        let mut s = Selector::new(c);
        let n = NodeId(1);
        s.record_server(n, 5.0, Nanos(0));
        assert!(s.server(n).unwrap().ls.mean().is_some());
        s.choose(n, Nanos(0), 0.5);
        // Quiet for longer than the expiry: history gone.
        let later = Nanos(0).plus(Duration::from_secs(4));
        assert_eq!(s.choose(n, later, 0.5), Method::Server);
        assert!(s.server(n).unwrap().ls.mean().is_none());
    }

    #[test]
    fn a_changed_regime_discards_the_history() {
        let c = cfg();
        let mut w = Samples::default();
        for i in 0..30 {
            w.push(1000.0 + f64::from(i % 5), &c);
        }
        // The regime changes: every new sample is an outlier; once more are
        // rejected than kept in the period, the history is dropped and the
        // new regime is learnt.
        let mut dropped = false;
        for _ in 0..40 {
            if w.push(50_000.0, &c) && w.mean() == Some(50_000.0) {
                dropped = true;
            }
        }
        assert!(dropped);
    }
}

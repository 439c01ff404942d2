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
//! discarded more often than kept within one moving period, the last n
//! samples offered, loses its history), with
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
///
/// Besides the kept samples (the last `history` kept, for the moving
/// average), it remembers whether each of the last `history` samples
/// offered was kept or rejected: the *moving period* of §2.5. When more of
/// those were rejected than kept, conditions have changed and the history
/// is discarded (the window slides with every sample; it is not a counter
/// reset every `history` samples).
#[derive(Clone, Debug, Default)]
pub struct Samples {
    buf: VecDeque<f64>,
    sum: f64,
    sq: f64,
    /// Kept (true) or rejected (false), for the last `history` samples offered.
    period: VecDeque<bool>,
    rejected_in_period: usize,
    /// The old rule's counters (`selector_resets_per_history`).
    kept: usize,
    rejected: usize,
}

impl Samples {
    /// Offers a sample; returns whether it was kept.
    pub fn push(&mut self, s: f64, cfg: &SelectorConfig) -> bool {
        self.push_by(s, cfg, false)
    }

    /// [`Samples::push`]; `old_rule` (a test-only fault switch) compares
    /// counters zeroed every `history` kept samples instead of the moving
    /// period, so that the first outlier after a reset discards a full
    /// window.
    pub fn push_by(&mut self, s: f64, cfg: &SelectorConfig, old_rule: bool) -> bool {
        let outlier = self.buf.len() >= cfg.min_samples && {
            let (mean, sd) = (self.mean().unwrap_or(s), self.sd());
            sd > 0.0 && (s - mean).abs() >= cfg.k_sigma * sd
        };
        if old_rule {
            return self.push_old(s, cfg, outlier);
        }
        self.period.push_back(!outlier);
        if outlier {
            self.rejected_in_period += 1;
        }
        if self.period.len() > cfg.history.max(1) && self.period.pop_front() == Some(false) {
            self.rejected_in_period -= 1;
        }
        if outlier {
            let kept_in_period = self.period.len() - self.rejected_in_period;
            if self.rejected_in_period > kept_in_period {
                // Conditions changed: more rejected than kept in one period.
                *self = Samples::default();
            }
            return false;
        }
        self.keep(s, cfg);
        true
    }

    fn keep(&mut self, s: f64, cfg: &SelectorConfig) {
        self.buf.push_back(s);
        self.sum += s;
        self.sq += s * s;
        if self.buf.len() > cfg.history {
            if let Some(old) = self.buf.pop_front() {
                self.sum -= old;
                self.sq -= old * old;
            }
        }
    }

    /// The rule before issue 25 (hole 3), kept as a fault switch.
    fn push_old(&mut self, s: f64, cfg: &SelectorConfig, outlier: bool) -> bool {
        if outlier {
            self.rejected += 1;
            if self.rejected > self.kept {
                *self = Samples::default();
            }
            return false;
        }
        self.keep(s, cfg);
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
    /// Test-only fault switch `selector_resets_per_history` (see
    /// [`Samples::push_by`]).
    pub old_window_rule: bool,
    servers: HashMap<NodeId, ServerView>,
    height_sum: f64,
    height_n: f64,
}

impl Selector {
    /// A selector with no history.
    pub fn new(cfg: SelectorConfig) -> Selector {
        Selector {
            cfg,
            old_window_rule: false,
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
        let (cfg, old) = (self.cfg, self.old_window_rule);
        self.view(server, now).ls.push_by(latency_ns, &cfg, old);
    }

    /// Records an RDMA READ latency.
    pub fn record_rdma(&mut self, server: NodeId, latency_ns: f64, now: Nanos) {
        let (cfg, old) = (self.cfg, self.old_window_rule);
        let v = self.view(server, now);
        v.rtt = Some(v.rtt.map_or(latency_ns, |r| r.min(latency_ns)));
        v.lr.push_by(latency_ns, &cfg, old);
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

    /// Issue 25 hole 3: one outlier right after `history` kept samples must
    /// not discard them (the old rule zeroed its counters there, so the
    /// first rejection counted as "more rejected than kept").
    fn one_outlier_after_a_full_window(old_rule: bool) -> (bool, usize, Option<f64>) {
        let c = cfg();
        let mut w = Samples::default();
        for i in 0..c.history {
            assert!(w.push_by(1000.0 + (i % 3) as f64, &c, old_rule));
        }
        let before = w.mean();
        let kept = w.push_by(1_000_000.0, &c, old_rule);
        assert!(!kept, "the outlier is rejected");
        (before == w.mean(), w.len(), w.mean())
    }

    #[test]
    fn one_outlier_after_a_full_window_keeps_the_window() {
        let (same, len, _) = one_outlier_after_a_full_window(false);
        assert!(same);
        assert_eq!(len, cfg().history);
    }

    #[test]
    fn teeth_the_old_counters_discard_a_full_window_for_one_outlier() {
        let (same, len, mean) = one_outlier_after_a_full_window(true);
        assert!(!same && len == 0 && mean.is_none(), "{len} {mean:?}");
    }

    /// The choice after 100 server-side and 100 RDMA samples that favour
    /// client-side search, and then one server-side outlier.
    fn choice_after_one_outlier(old_rule: bool) -> Method {
        let mut s = Selector::new(cfg());
        s.old_window_rule = old_rule;
        let (n, t) = (NodeId(0), Nanos(1));
        for i in 0..100 {
            s.record_server(n, 10_000.0 + f64::from(i % 3), t);
            s.record_rdma(n, 1_000.0 + f64::from(i % 3), t);
        }
        assert_eq!(s.choose(n, t, 0.5), Method::Client);
        s.record_server(n, 1_000_000.0, t);
        s.choose(n, t, 0.5)
    }

    #[test]
    fn one_outlier_does_not_send_the_next_search_to_the_server() {
        assert_eq!(choice_after_one_outlier(false), Method::Client);
    }

    #[test]
    fn teeth_the_old_counters_send_the_next_search_to_the_server() {
        assert_eq!(choice_after_one_outlier(true), Method::Server);
    }

    #[test]
    fn the_history_goes_only_when_rejections_outnumber_kept_samples_in_the_period() {
        let c = cfg();
        let mut w = Samples::default();
        for i in 0..c.history {
            w.push(1000.0 + (i % 3) as f64, &c);
        }
        // Sparse outliers (one in ten) never outnumber the kept samples of
        // the last `history` offered: the history stays.
        for round in 0..50 {
            for i in 0..9 {
                assert!(w.push(1000.0 + (i % 3) as f64, &c), "round {round}");
            }
            assert!(!w.push(1_000_000.0, &c));
            assert_eq!(w.len(), c.history, "round {round}");
        }
        // A new regime: every sample an outlier. The period holds `history`
        // samples; the history goes at the first rejection that makes the
        // rejected outnumber the kept there, and not before.
        let mut n = 0;
        while w.len() == c.history {
            assert!(!w.push(50_000.0, &c));
            n += 1;
            assert!(n <= c.history, "never discarded");
        }
        assert!(w.is_empty());
        // The period ends with the pattern's last 100 - n samples (one
        // rejection in ten, the last one a rejection): with n = 44 it holds
        // 44 + 6 = 50 rejected, 50 kept; with n = 45, 45 + 6 = 51 > 49.
        assert_eq!(n, 45);
        assert!(w.push(50_000.0, &c));
        assert_eq!(w.mean(), Some(50_000.0));
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

//! [`Latencies`]: one operation kind's latencies as an HDR histogram
//! (`hdrhistogram`, three significant digits: quantiles within 0.1 %), in
//! memory and in node reports. A report stores it in HdrHistogram's own V2
//! interchange format, base64-encoded (what `HistogramLogProcessor` and the
//! other HdrHistogram tools read), so that a node's JSON report stays a few
//! kilobytes however long it ran, and merged reports add histograms
//! instead of concatenating and sorting every latency.

use std::fmt;
use std::time::Duration;

use base64::Engine as _;
use hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Significant decimal digits kept: a quantile is within 0.1 % of the
/// latency it names.
const SIGNIFICANT_DIGITS: u8 = 3;

/// Latencies in nanoseconds (module documentation).
#[derive(Clone, PartialEq)]
pub struct Latencies(Histogram<u64>);

impl Default for Latencies {
    fn default() -> Self {
        Latencies::new()
    }
}

impl fmt::Debug for Latencies {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Latencies")
            .field("count", &self.len())
            .field("max_ns", &self.0.max())
            .finish()
    }
}

impl Latencies {
    /// No latency yet (the histogram grows to whatever it is given).
    pub fn new() -> Latencies {
        let mut h = Histogram::new(SIGNIFICANT_DIGITS)
            .expect("three significant digits is a valid precision");
        h.auto(true);
        Latencies(h)
    }

    /// Latencies of `ns` nanoseconds each.
    pub fn of(ns: impl IntoIterator<Item = u64>) -> Latencies {
        let mut l = Latencies::new();
        for v in ns {
            l.record_ns(v);
        }
        l
    }

    /// Records one latency.
    pub fn record(&mut self, d: Duration) {
        self.record_ns(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    }

    /// Records one latency in nanoseconds.
    pub fn record_ns(&mut self, ns: u64) {
        // The histogram grows to hold it (`saturating_record` would clamp
        // it to the current range instead); only a value too large for any
        // histogram is refused, and then counted at the largest it holds.
        if self.0.record(ns).is_err() {
            self.0.saturating_record(ns);
        }
    }

    /// Adds another set of latencies.
    pub fn merge(&mut self, o: &Latencies) {
        // Both auto-resize with the same precision: adding cannot fail.
        let _ = self.0.add(&o.0);
    }

    /// How many latencies were recorded.
    pub fn len(&self) -> u64 {
        self.0.len()
    }

    /// Whether none was.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The `p` quantile in microseconds (0 for none).
    pub fn quantile_us(&self, p: f64) -> f64 {
        if self.is_empty() {
            return 0.0;
        }
        self.0.value_at_quantile(p) as f64 / 1000.0
    }

    /// The histogram.
    pub fn histogram(&self) -> &Histogram<u64> {
        &self.0
    }
}

impl Serialize for Latencies {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut bytes = Vec::new();
        V2Serializer::new()
            .serialize(&self.0, &mut bytes)
            .map_err(|e| serde::ser::Error::custom(format!("latency histogram: {e:?}")))?;
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(bytes))
    }
}

impl<'de> Deserialize<'de> for Latencies {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Latencies, D::Error> {
        let text = String::deserialize(d)?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text.as_bytes())
            .map_err(|e| serde::de::Error::custom(format!("latency histogram: {e}")))?;
        let mut h: Histogram<u64> = Deserializer::new()
            .deserialize(&mut bytes.as_slice())
            .map_err(|e| serde::de::Error::custom(format!("latency histogram: {e:?}")))?;
        h.auto(true);
        Ok(Latencies(h))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_within_a_thousandth_of_the_nearest_rank() {
        assert_eq!(Latencies::new().quantile_us(0.5), 0.0);
        let l = Latencies::of((1..=1000).map(|i| i * 1000));
        assert_eq!(l.len(), 1000);
        for (p, exact) in [(0.0, 1.0), (0.5, 500.0), (0.99, 990.0), (1.0, 1000.0)] {
            let q = l.quantile_us(p);
            assert!((q - exact).abs() <= exact / 1000.0, "p{p}: {q} vs {exact}");
        }
    }

    #[test]
    fn a_histogram_round_trips_through_json_and_merges() {
        let a = Latencies::of([1_000, 3_000, 250_000_000]);
        let text = serde_json::to_string(&a).unwrap();
        assert!(text.len() < 200, "{text}");
        let back: Latencies = serde_json::from_str(&text).unwrap();
        assert_eq!(back, a);
        let mut m = back;
        m.merge(&Latencies::of([2_000, 4_000]));
        assert_eq!(m.len(), 5);
        assert!((m.quantile_us(0.5) - 3.0).abs() <= 0.003);
        assert!(serde_json::from_str::<Latencies>("\"not a histogram\"").is_err());
        // A latency too large for any histogram is counted, not lost.
        let huge = Latencies::of([u64::MAX, 5]);
        assert_eq!(huge.len(), 2);
        assert!(huge.quantile_us(1.0) > 1e9);
        assert!(serde_json::from_str::<Latencies>("[1000, 2000]").is_err());
    }
}

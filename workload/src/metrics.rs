//! The workload's live metrics, through the `metrics` facade: every
//! finished operation of a measured phase counts under its kind and how it
//! ended, its latency goes into a histogram and its retries into a counter.
//! A process that installs a recorder (`nessie node --metrics ADDR`
//! installs the Prometheus exporter) sees them while the run goes on; in
//! one that installs none (the benchmarks, the tests) the facade does
//! nothing. The names are the operator's documentation: `docs/deploy.md`,
//! "Metrics".

use std::time::Duration;

use nessie_protocol::{Error, Outcome};

/// Operations finished, by `op` (get, put, delete, scan) and `outcome`
/// (`ok`; `failed`: it did not take effect; `unknown`: it may have).
pub const OPERATIONS: &str = "nessie_operations_total";
/// Operation latency in seconds, by `op` (a histogram).
pub const LATENCY: &str = "nessie_operation_seconds";
/// Attempts beyond an operation's first (its retries), by `op`.
pub const RETRIES: &str = "nessie_operation_retries_total";

/// The label of a kind of operation, by the recorder's kind index.
pub const OP_LABELS: [&str; 4] = ["get", "put", "delete", "scan"];

/// The `outcome` label of a finished operation's result.
pub fn outcome_label(result: Result<(), &Error>) -> &'static str {
    match result {
        Ok(()) => "ok",
        Err(e) => match e.outcome() {
            Outcome::Unknown => "unknown",
            Outcome::Committed | Outcome::NotCommitted => "failed",
        },
    }
}

/// Records one finished operation of kind `kind` (an index into
/// [`OP_LABELS`]) that ended with `result` after `latency`, in `attempts`
/// attempts.
pub fn record(kind: usize, result: Result<(), &Error>, latency: Duration, attempts: u64) {
    let op = OP_LABELS.get(kind).copied().unwrap_or("other");
    metrics::counter!(OPERATIONS, "op" => op, "outcome" => outcome_label(result)).increment(1);
    metrics::histogram!(LATENCY, "op" => op).record(latency.as_secs_f64());
    if attempts > 1 {
        metrics::counter!(RETRIES, "op" => op).increment(attempts - 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_operation_whose_effect_is_unknown_is_not_counted_as_failed() {
        assert_eq!(outcome_label(Ok(())), "ok");
        assert_eq!(outcome_label(Err(&Error::Timeout)), "failed");
        assert_eq!(
            outcome_label(Err(&nessie_protocol::Error::OutcomeUnknown(
                nessie_protocol::UnknownOutcome::new(
                    nessie_protocol::UnknownStep::Unfinished,
                    None
                )
            ))),
            "unknown"
        );
    }
}

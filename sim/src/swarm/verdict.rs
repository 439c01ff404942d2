//! A swarm case's verdict ([`Verdict`], [`verdict_of`]): the checkers'
//! findings in a fixed order, then the history's linearizability (range
//! scans as reads of the keys they cover, then, for Cell, the whole history
//! with its scans), then the data-table audit. A failing case names one
//! [`CaseFailure`].

use nessie_protocol::{Request, Response};

use crate::checks::CaseFailure;
use crate::spec::SimReport;

/// Steps the linearizability checker may take per key before it gives up.
/// An inconclusive case is never a pass: it is counted apart, and a swarm
/// run with any ([`SwarmSummary::ok`](super::SwarmSummary::ok)) fails (`nessie swarm` exits non-zero,
/// the CI test asserts none); the cases are sized so that none occurs.
pub const CHECK_STEPS: u64 = 2_000_000;

/// The range-aware checker's budget per group of keys that scans tie
/// together: a search over the whole map's states, far costlier per step
/// than the per-key checker's, which has already checked each scan's
/// entries as reads when this one runs.
pub const RANGE_CHECK_STEPS: u64 = 200_000;

/// What one case showed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The history is linearizable (this many operations checked) and no
    /// operation reported a corrupt state.
    Pass(usize),
    /// A checker found something: the protocol is wrong (the failure says
    /// which checker and where).
    Fail(CaseFailure),
    /// The checker ran out of steps: no verdict (and no pass).
    Inconclusive(String),
}

impl Verdict {
    /// Whether this is a failure.
    pub fn is_fail(&self) -> bool {
        matches!(self, Verdict::Fail(_))
    }
}

/// Each range scan as reads, one per key of the history it covers (the
/// value it returned, or absent), over the scan's interval, each read a
/// client of its own (a scan's reads overlap): what the per-key checker
/// can check of a scan. A scan that returned its limit covers the keys up
/// to its last entry, one that returned fewer its whole range.
fn scan_reads(report: &SimReport) -> Vec<nessie_check::Event> {
    let keys: std::collections::BTreeSet<&[u8]> = report
        .history
        .iter()
        .map(nessie_check::Event::key)
        .collect();
    let base = report.history.iter().map(|e| e.client).max().unwrap_or(0)
        + report.scans.iter().map(|e| e.client).max().unwrap_or(0)
        + 1;
    let mut reads = Vec::new();
    for scan in &report.scans {
        let (Request::Scan { from, to, limit }, Ok(Response::Scan(got))) =
            (&scan.request, &scan.ret)
        else {
            continue;
        };
        let last = (got.len() >= *limit)
            .then(|| got.last().map(|(k, _)| k))
            .flatten();
        for &k in keys.range::<&[u8], _>(from.as_slice()..) {
            let beyond = match (last, to) {
                (Some(l), _) => k > l.as_slice(),
                (None, Some(t)) => k >= t.as_slice(),
                (None, None) => false,
            };
            if beyond {
                break;
            }
            let value = got.iter().find(|(g, _)| g == k).map(|(_, v)| v.clone());
            reads.push(nessie_check::Event {
                client: base + reads.len(),
                request: Request::Get(k.to_vec()),
                ret: Ok(Response::Get(value)),
                invoke: scan.invoke,
                response: scan.response,
            });
        }
    }
    reads
}

/// The range-aware check of a run with range scans whose per-key check
/// passed: the whole history, scans included, through Cell's checker (a
/// scan ties the keys it covers together). Writes reported as not
/// committed are left out by it, as by the per-key checker; a read that
/// failed says nothing. `Ok(true)`: linearizable; `Ok(false)`: the
/// search gave up within its step budget.
fn range_check(report: &SimReport) -> Result<bool, nessie_check::ordered::Violation> {
    let mut events = report.history.clone();
    events.extend(report.scans.iter().cloned());
    match nessie_check::ordered::check(&events, RANGE_CHECK_STEPS) {
        Ok(_) => Ok(true),
        Err(v) if v.reason.starts_with("search gave up") => Ok(false),
        Err(v) => Err(v),
    }
}

/// The verdict on one simulation's report (as `verdict_and_scans` gives it).
pub fn verdict_of(report: &SimReport) -> Verdict {
    verdict_and_scans(report).0
}

/// The verdict on one simulation's report: operations that never ended,
/// failures of the final sweep, margin breaches and corrupt states fail it
/// first; then the history must hold every operation that ended, something
/// must be checked, and the check must say linearizable (range scans
/// included: each as reads of the keys it covers, then, where the
/// range-aware checker decides it within its budget, the whole history
/// with the scans as single operations: the second value, `None` without
/// scans); last, the data-table audit at quiescence ([`crate::audit`])
/// must find no more leaked entries than the protocol admits.
pub fn verdict_and_scans(report: &SimReport) -> (Verdict, Option<bool>) {
    let mut whole = None;
    let failure = if report.stuck > 0 {
        Some(CaseFailure::Stuck {
            operations: report.stuck,
        })
    } else {
        CaseFailure::first_of(&report.recovery_failures, |first, count| {
            CaseFailure::Recovery { first, count }
        })
        .or_else(|| {
            CaseFailure::first_of(&report.sweep_failures, |first, count| CaseFailure::Sweep {
                first,
                count,
            })
        })
        .or_else(|| {
            CaseFailure::first_of(&report.margin_breaches, |first, count| {
                CaseFailure::MarginRule { first, count }
            })
        })
        .or_else(|| {
            CaseFailure::first_of(&report.marked_linked, |first, count| {
                CaseFailure::MarkedLinked { first, count }
            })
        })
        .or_else(|| {
            CaseFailure::first_of(&report.corrupt, |first, count| CaseFailure::Corrupt {
                first,
                count,
            })
        })
        .or_else(|| {
            CaseFailure::first_of(&report.unreachable_meganodes, |first, count| {
                CaseFailure::UnreachableMeganode { first, count }
            })
        })
    };
    let verdict = if let Some(f) = failure {
        Verdict::Fail(f)
    } else if report.history.len() as u64 != report.completed_ops
        || report.scans.len() as u64 != report.completed_scans
    {
        // Every operation that ended must reach the checker: a history that
        // lost some (or recording switched off) could hide anything.
        Verdict::Fail(CaseFailure::TruncatedHistory {
            held: report.history.len(),
            ended: report.completed_ops,
        })
    } else {
        let mut history = report.history.clone();
        history.extend(scan_reads(report));
        let r = nessie_check::check(
            &history,
            &nessie_check::CheckConfig {
                max_steps: CHECK_STEPS,
                // RACE's PUT cannot know whether the key existed when a
                // concurrent insert races it (docs/baselines.md; the test
                // `race_put_answers_are_not_linearizable_and_are_left_unchecked`
                // in sim/tests/swarm.rs finds the case).
                put_existence: report.system.put_answers_existence(),
            },
        );
        match r.verdict {
            // Every case ends with a lone client's sweep that writes and
            // reads back every key, so nothing to check is itself a failure.
            nessie_check::Verdict::Linearizable if r.checked == 0 => {
                Verdict::Fail(CaseFailure::NothingChecked)
            }
            nessie_check::Verdict::Linearizable => match report.dtes.as_ref() {
                Some(a) if a.stale_links > 0 => Verdict::Fail(CaseFailure::StaleLinks {
                    count: a.stale_links,
                    stale: a.stale.clone(),
                }),
                Some(a) if a.unexplained() > 0 => Verdict::Fail(CaseFailure::Leaked {
                    leaked: a.leaked,
                    admitted: a.admitted,
                    counted: a.counted,
                    per_crash: a.per_crash,
                    crashes: a.crashes,
                    leaks: a.leaks.clone(),
                }),
                _ if report.scans.is_empty() => Verdict::Pass(r.checked),
                _ => match range_check(report) {
                    Ok(w) => {
                        whole = Some(w);
                        Verdict::Pass(r.checked)
                    }
                    Err(v) => Verdict::Fail(CaseFailure::ScansNotLinearizable(v)),
                },
            },
            nessie_check::Verdict::NotLinearizable(v) => {
                Verdict::Fail(CaseFailure::NotLinearizable(v))
            }
            nessie_check::Verdict::Malformed(m) => Verdict::Fail(CaseFailure::MalformedHistory(m)),
            nessie_check::Verdict::Inconclusive(i) => Verdict::Inconclusive(i.to_string()),
        }
    };
    (verdict, whole)
}

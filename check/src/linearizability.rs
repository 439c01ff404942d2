//! A linearizability checker for key-value histories: Wing and Gong's
//! search with Lowe's memo (the algorithm of Porcupine and Knossos), made
//! exact and fast on histories full of writes of unknown outcome.
//!
//! - **Per key.** Keys are independent registers, so a history is
//!   linearizable iff each key's sub-history is (locality); each is checked
//!   on its own.
//! - **Unknown outcomes.** A write that failed with an unknown outcome
//!   ([`Failure::Unknown`]) may take effect at any point after its invocation,
//!   or not at all; a failed read, and an operation that failed with nothing
//!   committed ([`Failure::NotCommitted`]), are left out. Such writes are not
//!   searched over one by one: [`prepare`] proves that they only matter as
//!   *repairs* placed right before a known operation that observes them,
//!   that interchangeable ones form classes counted rather than enumerated,
//!   and which ones can be dropped outright.
//! - **Compact configurations** ([`search`]): the linearized set is a prefix
//!   plus a few holes, so memo keys stay small on histories of any length;
//!   GETs that agree with the state are linearized without branching.
//! - **Real time and program order.** An operation must take effect after
//!   every operation that responded before it was invoked (`response <
//!   invoke`; equal stamps are concurrent), and, within one client, after
//!   that client's earlier completed operations even where the stamps tie.
//!   Each [`Event::client`] is a *sequential process* (as in Jepsen): its
//!   operations never overlap. A history in which they do is
//!   [`Verdict::Malformed`] (a recorder bug), never checked as if it were
//!   right. Operations of unknown outcome are placed by real time only.
//! - **Honest verdicts.** A search that runs out of its step budget is
//!   [`Verdict::Inconclusive`], never a violation and never a pass.
//!
//! [`check`] returns a [`CheckReport`] (operations, keys, unknown outcomes,
//! steps, time, verdict); [`check_history`] is the short form the tests use.

mod prepare;
mod search;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use nessie_protocol::{Request, Response};

use crate::history::{Event, Failure, Ret};

/// Why a history is not linearizable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The key whose sub-history failed.
    pub key: Vec<u8>,
    /// The operations around the point where every linearization got stuck
    /// (or the offending operation), in invocation order.
    pub ops: Vec<Event>,
    /// What went wrong.
    pub reason: String,
}

/// A search that ran out of its step budget: neither a pass nor a violation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inconclusive {
    /// The key whose search ran out.
    pub key: Vec<u8>,
    /// Operations of that key.
    pub ops: usize,
    /// The budget that was used up.
    pub steps: u64,
}

/// The verdict on a history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Every key's sub-history has a linearization.
    Linearizable,
    /// Some key's sub-history has none.
    NotLinearizable(Violation),
    /// No violation found, but some key's search ran out of steps.
    Inconclusive(Inconclusive),
    /// The history breaks the recorder's contract (two operations of one
    /// client overlap): it was not checked.
    Malformed(String),
}

/// How a check is run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CheckConfig {
    /// Configurations the search of one key may enter before it gives up
    /// ([`Verdict::Inconclusive`]).
    pub max_steps: u64,
    /// Whether a PUT's answer (whether the key existed) must be right, as
    /// every system's but RACE's must: RACE's insert cannot know it when a
    /// concurrent insert of the key races it (docs/baselines.md), and its
    /// histories are checked with this off: each PUT is then a write whose
    /// value must be seen as a write's, its answer free.
    pub put_existence: bool,
}

impl CheckConfig {
    /// `max_steps` per key, every answer checked.
    pub fn steps(max_steps: u64) -> CheckConfig {
        CheckConfig {
            max_steps,
            put_existence: true,
        }
    }
}

impl Default for CheckConfig {
    /// 50 million configurations per key, every answer checked.
    fn default() -> Self {
        CheckConfig::steps(50_000_000)
    }
}

/// What a check looked at, what it decided and how long it took.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckReport {
    /// Events given.
    pub operations: usize,
    /// Events checked (failed reads and not-committed operations left out).
    pub checked: usize,
    /// Distinct keys among the checked events.
    pub keys: usize,
    /// Writes of unknown outcome.
    pub unknown: usize,
    /// Of those, in the keys searched: writes a read proves took effect
    /// (searched as ordinary writes).
    pub unknown_forced: usize,
    /// Of those, in the keys searched: writes no known operation could
    /// observe (dropped before the search).
    pub unknown_dropped: usize,
    /// Keys searched (all of them unless a violation ended the check).
    pub keys_searched: usize,
    /// Reads that failed (left out).
    pub failed_reads: usize,
    /// Operations that failed with nothing committed (left out).
    pub not_committed: usize,
    /// Configurations the searches entered, over all keys.
    pub steps: u64,
    /// Most configurations entered for one key.
    pub max_key_steps: u64,
    /// Wall-clock time of the check.
    pub elapsed: Duration,
    /// The verdict.
    pub verdict: Verdict,
}

impl CheckReport {
    /// Whether the verdict is [`Verdict::Linearizable`].
    pub fn is_linearizable(&self) -> bool {
        self.verdict == Verdict::Linearizable
    }
}

impl std::fmt::Display for CheckReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let verdict = match &self.verdict {
            Verdict::Linearizable => "linearizable",
            Verdict::NotLinearizable(_) => "NOT linearizable",
            Verdict::Inconclusive(_) => "INCONCLUSIVE (search budget exhausted)",
            Verdict::Malformed(_) => "MALFORMED history (not checked)",
        };
        write!(
            f,
            "{verdict}: {} operations ({} checked) on {} keys, {} unknown outcomes \
             ({} forced by reads, {} dropped), {} failed reads, {} not committed; \
             {} search steps (at most {} on one key) in {:.3} s",
            self.operations,
            self.checked,
            self.keys,
            self.unknown,
            self.unknown_forced,
            self.unknown_dropped,
            self.failed_reads,
            self.not_committed,
            self.steps,
            self.max_key_steps,
            self.elapsed.as_secs_f64()
        )
    }
}

/// Why [`check_history`] did not pass a history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CheckError {
    /// The history is not linearizable.
    NotLinearizable(Violation),
    /// The search ran out of steps: no verdict.
    Inconclusive(Inconclusive),
    /// The history breaks the recorder's contract: no verdict.
    Malformed(String),
}

impl CheckError {
    /// The violation, if that is what this is.
    pub fn violation(&self) -> Option<&Violation> {
        match self {
            CheckError::NotLinearizable(v) => Some(v),
            CheckError::Inconclusive(_) | CheckError::Malformed(_) => None,
        }
    }

    /// Whether the history was shown not linearizable.
    pub fn is_violation(&self) -> bool {
        self.violation().is_some()
    }
}

impl std::fmt::Display for Inconclusive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "inconclusive: the search of key {:?} ({} operations) ran out of its {} steps; \
             this is no verdict",
            String::from_utf8_lossy(&self.key),
            self.ops,
            self.steps
        )
    }
}

impl std::fmt::Display for CheckError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CheckError::NotLinearizable(v) => write!(f, "not linearizable: {v}"),
            CheckError::Inconclusive(i) => write!(f, "{i}"),
            CheckError::Malformed(m) => write!(f, "malformed history (not checked): {m}"),
        }
    }
}

impl std::error::Error for CheckError {}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "key {:?}: {}",
            String::from_utf8_lossy(&self.key),
            self.reason
        )?;
        for e in self.ops.iter().take(60) {
            writeln!(
                f,
                "  [{:>6} .. {:>6}] client {:>2} {:?} -> {:?}",
                e.invoke,
                if e.ret == Err(Failure::Unknown) {
                    "?".to_string()
                } else {
                    e.response.to_string()
                },
                e.client,
                short_op(&e.request),
                short_ret(&e.ret)
            )?;
        }
        if self.ops.len() > 60 {
            writeln!(f, "  ... {} more", self.ops.len() - 60)?;
        }
        Ok(())
    }
}

fn short(v: &[u8]) -> String {
    String::from_utf8_lossy(&v[..v.len().min(24)]).into_owned()
}

fn short_op(op: &Request) -> String {
    match op {
        Request::Get(_) => "GET".into(),
        Request::Put(_, v) => format!("PUT {}", short(v)),
        Request::Delete(_) => "DELETE".into(),
        Request::Scan { limit, .. } => format!("SCAN {limit}"),
    }
}

fn short_ret(r: &Ret) -> String {
    match r {
        Ok(Response::Get(Some(v))) => short(v),
        Ok(Response::Get(None)) => "not found".into(),
        Ok(Response::Put(e) | Response::Delete(e)) => format!("existed={e}"),
        Ok(Response::Scan(es)) => format!("{} entries", es.len()),
        Err(Failure::Unknown) => "unknown".into(),
        Err(Failure::NotCommitted) => "not committed".into(),
        Err(Failure::Full) => "refused: index full".into(),
    }
}

/// Checks every key's sub-history; `max_steps` bounds the search of each
/// key. Returns how many events were checked (failed reads and
/// not-committed operations are left out).
pub fn check_history(events: &[Event], max_steps: u64) -> Result<usize, CheckError> {
    check_history_with(events, &CheckConfig::steps(max_steps))
}

/// [`check_history`] under `cfg` (a system whose PUT cannot say whether
/// its key existed is checked with [`CheckConfig::put_existence`] off).
pub fn check_history_with(events: &[Event], cfg: &CheckConfig) -> Result<usize, CheckError> {
    let report = check(events, cfg);
    match report.verdict {
        Verdict::Linearizable => Ok(report.checked),
        Verdict::NotLinearizable(v) => Err(CheckError::NotLinearizable(v)),
        Verdict::Inconclusive(i) => Err(CheckError::Inconclusive(i)),
        Verdict::Malformed(m) => Err(CheckError::Malformed(m)),
    }
}

/// Checks `events` and reports (see [`CheckReport`]). Keys are searched in
/// order; the first violation ends the check.
pub fn check(events: &[Event], cfg: &CheckConfig) -> CheckReport {
    let started = Instant::now();
    let mut report = CheckReport {
        operations: events.len(),
        checked: 0,
        keys: 0,
        unknown: 0,
        unknown_forced: 0,
        unknown_dropped: 0,
        keys_searched: 0,
        failed_reads: 0,
        not_committed: 0,
        steps: 0,
        max_key_steps: 0,
        elapsed: Duration::ZERO,
        verdict: Verdict::Linearizable,
    };
    let pred = match program_order(events) {
        Ok(p) => p,
        Err(m) => {
            report.verdict = Verdict::Malformed(m);
            report.elapsed = started.elapsed();
            return report;
        }
    };
    let mut per_key: BTreeMap<&[u8], Vec<usize>> = BTreeMap::new();
    for (i, e) in events.iter().enumerate() {
        match (&e.request, &e.ret) {
            (Request::Scan { .. }, _) => {
                report.verdict = Verdict::Malformed(format!(
                    "client {}'s range scan from {:?}: scans tie keys together, so check this \
                     history with the range-aware checker (nessie_check::ordered)",
                    e.client,
                    String::from_utf8_lossy(e.key())
                ));
                report.elapsed = started.elapsed();
                return report;
            }
            (Request::Get(_), Err(Failure::Unknown)) => report.failed_reads += 1,
            (_, Err(Failure::NotCommitted)) => report.not_committed += 1,
            (_, Err(Failure::Full)) if prepare::broken() == prepare::Broken::FullExcused => {
                report.not_committed += 1
            }
            (_, ret) => {
                report.checked += 1;
                report.unknown += usize::from(*ret == Err(Failure::Unknown));
                per_key.entry(e.key()).or_default().push(i);
            }
        }
    }
    report.keys = per_key.len();
    let mut inconclusive = None;
    for (key, mut idx) in per_key {
        idx.sort_by_key(|&i| (events[i].invoke, i));
        let evs: Vec<&Event> = idx.iter().map(|&i| &events[i]).collect();
        // Each event's program predecessor, as an index into `evs`.
        let local: std::collections::HashMap<usize, usize> =
            idx.iter().enumerate().map(|(l, &i)| (i, l)).collect();
        let evs_pred: Vec<Option<usize>> = idx
            .iter()
            .map(|&i| pred[i].and_then(|p| local.get(&p).copied()))
            .collect();
        report.keys_searched += 1;
        let outcome = check_key(&evs, &evs_pred, cfg, &mut report);
        match outcome {
            KeyOutcome::Linearizable => {}
            KeyOutcome::Violation { context, reason } => {
                report.verdict = Verdict::NotLinearizable(Violation {
                    key: key.to_vec(),
                    ops: context,
                    reason,
                });
                break;
            }
            KeyOutcome::Budget => {
                inconclusive.get_or_insert(Inconclusive {
                    key: key.to_vec(),
                    ops: evs.len(),
                    steps: cfg.max_steps,
                });
            }
        }
    }
    if let (Verdict::Linearizable, Some(i)) = (&report.verdict, inconclusive) {
        report.verdict = Verdict::Inconclusive(i);
    }
    report.elapsed = started.elapsed();
    report
}

enum KeyOutcome {
    Linearizable,
    Violation { context: Vec<Event>, reason: String },
    Budget,
}

/// Events of `evs` whose index is in `around`, plus up to 10 on either side
/// of the first of them, in invocation order.
fn context(evs: &[&Event], around: &[usize]) -> Vec<Event> {
    let Some(&lo) = around.iter().min() else {
        return Vec::new();
    };
    let hi = around.iter().copied().max().unwrap_or(lo);
    let from = lo.saturating_sub(10);
    let to = (hi + 11).min(evs.len());
    let mut out: Vec<Event> = evs[from..to].iter().map(|&e| e.clone()).collect();
    if to - from > 60 {
        // Keep the first operation's neighbourhood and the blocked ones.
        out = evs[from..(lo + 11).min(evs.len())]
            .iter()
            .map(|&e| e.clone())
            .collect();
        out.extend(
            around
                .iter()
                .filter(|&&i| i > lo + 10)
                .map(|&i| evs[i].clone()),
        );
    }
    out
}

/// Each event's *program predecessor*: the latest earlier operation of the
/// same client on the same key that completed with a known result (a GET
/// that answered, a PUT or DELETE that answered or was refused). An
/// operation must take effect after its program predecessor even where the
/// recorder's stamps tie. Operations of unknown outcome have none and are
/// none (their effect may land at any time after their invocation).
///
/// Fails if two operations of one client overlap (`b.invoke < a.response`
/// for `a` before `b`): the client is not a sequential process, so its
/// order is not known.
fn program_order(events: &[Event]) -> Result<Vec<Option<usize>>, String> {
    let mut by_client: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (i, e) in events.iter().enumerate() {
        by_client.entry(e.client).or_default().push(i);
    }
    let mut pred = vec![None; events.len()];
    for (client, mut idx) in by_client {
        // Program order: by invocation, then response (a zero-length
        // operation at a tie comes first), then recording order.
        idx.sort_by_key(|&i| (events[i].invoke, events[i].response, i));
        let mut last: BTreeMap<&[u8], usize> = BTreeMap::new();
        for w in idx.windows(2) {
            let (a, b) = (&events[w[0]], &events[w[1]]);
            if b.invoke < a.response {
                return Err(format!(
                    "client {client}'s operations overlap: {} on {:?} over [{}, {}] and {} on \
                     {:?} invoked at {} (each client must be a sequential process; give \
                     concurrent operations, such as a pipeline's, clients of their own)",
                    short_op(&a.request),
                    String::from_utf8_lossy(a.key()),
                    a.invoke,
                    a.response,
                    short_op(&b.request),
                    String::from_utf8_lossy(b.key()),
                    b.invoke
                ));
            }
        }
        for i in idx {
            let e = &events[i];
            let known = !matches!(e.ret, Err(Failure::Unknown | Failure::NotCommitted));
            if known {
                pred[i] = last.insert(e.key(), i);
            }
        }
    }
    Ok(pred)
}

fn check_key(
    evs: &[&Event],
    pred: &[Option<usize>],
    cfg: &CheckConfig,
    report: &mut CheckReport,
) -> KeyOutcome {
    let max_steps = cfg.max_steps;
    let prepared = match prepare::prepare(evs, pred, cfg.put_existence) {
        Ok(p) => p,
        Err(o) => {
            let e = evs[o.event];
            return KeyOutcome::Violation {
                context: context(evs, &[o.event]),
                reason: format!(
                    "client {} {} -> {}: {}",
                    e.client,
                    short_op(&e.request),
                    short_ret(&e.ret),
                    o.reason
                ),
            };
        }
    };
    report.unknown_forced += prepared.forced;
    report.unknown_dropped += prepared.dropped;
    let mut search = search::Search::new(&prepared);
    let result = search.run(max_steps);
    report.steps += search.steps;
    report.max_key_steps = report.max_key_steps.max(search.steps);
    match result {
        Ok(()) => KeyOutcome::Linearizable,
        Err(search::Failure::Budget) => KeyOutcome::Budget,
        Err(search::Failure::None(stuck)) => {
            let blocked: Vec<usize> = stuck
                .blocked
                .iter()
                .map(|&x| prepared.ops[x as usize].event)
                .collect();
            let state = match stuck.state {
                prepare::ABSENT => "absent".to_string(),
                prepare::JUNK => "holding a value no GET returned".to_string(),
                v => {
                    let holder = prepared.ops.iter().find_map(|o| match o.kind {
                        prepare::Kind::Put { value, .. } | prepare::Kind::Forced(value)
                            if value == v =>
                        {
                            Some(evs[o.event])
                        }
                        _ => None,
                    });
                    match holder.map(|e| &e.request) {
                        Some(Request::Put(_, val)) => format!("holding {}", short(val)),
                        _ => format!("holding value #{v}"),
                    }
                }
            };
            let names: Vec<String> = blocked
                .iter()
                .take(8)
                .map(|&i| {
                    let e = evs[i];
                    format!(
                        "client {} {} -> {}",
                        e.client,
                        short_op(&e.request),
                        short_ret(&e.ret)
                    )
                })
                .collect();
            KeyOutcome::Violation {
                context: context(evs, &blocked),
                reason: format!(
                    "no linearization: at best {} of {} operations linearize, the key then {}, \
                     and none of [{}] can take effect next",
                    stuck.linearized,
                    prepared.ops.len(),
                    state,
                    names.join("; ")
                ),
            }
        }
    }
}

#[cfg(test)]
mod tests;

//! The workload loop of one client thread, the only one in the project:
//! [`client_loop`] keeps a client's window of operations in flight, takes
//! each operation from a [`Source`], hands it to an [`Issuer`] and each
//! finished one, with its latency, to a [`Recorder`], until the source runs
//! dry, a stop flag is raised or an operation quota is reached, and then
//! lets the operations in flight finish.
//!
//! The three parts are what differs between the commands that drive
//! clients, so that the loop itself is shared:
//! - the issuer is a blocking client of any system ([`Blocking`]: a
//!   `KvClient` over any fabric, range scans where it has them, one
//!   operation at a time) or a pipeline of
//!   Nessie clients with several operations in flight ([`Pipelined`], over
//!   any endpoint), or `nessie bench`'s clients;
//! - the source is the mixed GET/PUT/DELETE generator of `nessie run` and
//!   `nessie node run` ([`super::mix`]), a preload, or `nessie bench`'s key
//!   distributions with open-loop arrivals ([`Next::arrival`]);
//! - the recorder keeps per-operation reports and histories
//!   ([`super::run`]) or `nessie bench`'s histograms.
//!
//! The loop allocates nothing per operation: the sources reuse their key
//! and value buffers, operations borrow them ([`KvRequest`]), and the notes of the
//! operations in flight live in a slab indexed by the tag the issuer gets.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use nessie_protocol::pipeline::{Finished, Pipeline};
use nessie_protocol::{Endpoint, Error, OpStats};
use nessie_protocol::{KvClient, KvRequest, Response};

/// A finished operation: the tag it was submitted under, its result and the
/// fabric work of all its attempts.
#[derive(Clone, Debug, PartialEq)]
pub struct Done<O> {
    /// The tag given to [`Issuer::submit`].
    pub tag: usize,
    /// What it returned.
    pub result: Result<O, Error>,
    /// The fabric work it cost.
    pub stats: OpStats,
}

/// A client as the loop drives it: operations go in tagged, finish in any
/// order.
pub trait Issuer {
    /// What a successful operation returns.
    type Output;

    /// How many operations the loop keeps submitted (1: a blocking client).
    fn window(&self) -> usize;

    /// Operations submitted whose [`Done`] has not been handed out yet.
    fn outstanding(&self) -> usize;

    /// Starts `op` under `tag` (unique among the outstanding ones). A
    /// blocking issuer runs it to the end here.
    fn submit(&mut self, tag: usize, op: KvRequest<'_>);

    /// Appends finished operations to `done`; may wait a little for one
    /// when some are outstanding, never indefinitely.
    fn progress(&mut self, done: &mut Vec<Done<Self::Output>>);

    /// Keeps its clients alive while it waits for the measured phase:
    /// a client without storage renews its lease when it is due
    /// (`KvClient::renew_lease`), so that a start barrier longer than the
    /// lease term does not cost it its share. Nothing by default.
    fn keep_alive(&mut self) {}

    /// Closes its clients once the run is over: a client without storage
    /// gives its share back (`KvClient::release_share`), so that the next
    /// process takes it at once. Nothing by default.
    fn close(&mut self) {}
}

/// The next operation of a [`Source`].
#[derive(Clone, Copy, Debug)]
pub struct Next<'a> {
    /// The operation.
    pub op: KvRequest<'a>,
    /// Open loop: when it arrives. The loop sleeps until then and measures
    /// its latency from then (from the moment it is issued, if that is
    /// later: queueing behind earlier arrivals counts, the sleep's timer
    /// slack does not). `None`: issued at once (closed loop).
    pub arrival: Option<Instant>,
}

/// Where operations come from.
pub trait Source {
    /// The next operation; `None` when there are no more (the loop lets the
    /// outstanding ones finish and returns).
    fn next(&mut self) -> Option<Next<'_>>;
}

/// What is kept of the operations.
pub trait Recorder<O> {
    /// What the recorder notes when an operation starts.
    type Note;

    /// `op` is about to be submitted.
    fn start(&mut self, op: &KvRequest<'_>) -> Self::Note;

    /// The operation noted `note` finished after `latency`.
    fn finish(&mut self, note: Self::Note, done: Done<O>, latency: Duration);
}

/// When the loop stops submitting.
#[derive(Clone, Copy, Debug)]
pub struct Limits<'a> {
    /// Raised by another thread: stop submitting.
    pub stop: &'a AtomicBool,
    /// Submit at most this many operations.
    pub max_ops: u64,
    /// Pause after each batch of finished operations (zero: none); for a
    /// blocking issuer, a pause between two operations.
    pub think: Duration,
}

impl<'a> Limits<'a> {
    /// No quota and no pause: until `stop` or the source runs dry.
    pub fn until(stop: &'a AtomicBool) -> Limits<'a> {
        Limits {
            stop,
            max_ops: u64::MAX,
            think: Duration::ZERO,
        }
    }
}

/// Drives `issuer` with operations from `source`, recording each finished
/// one in `recorder`, until the source runs dry, `limits.stop` is raised or
/// `limits.max_ops` were submitted; then waits for the outstanding ones.
/// Returns how many operations were submitted.
pub fn client_loop<I, S, R>(
    issuer: &mut I,
    source: &mut S,
    recorder: &mut R,
    limits: &Limits<'_>,
) -> u64
where
    I: Issuer,
    S: Source,
    R: Recorder<I::Output>,
{
    let window = issuer.window().max(1);
    let mut notes: Vec<Option<(R::Note, Instant)>> = (0..window).map(|_| None).collect();
    let mut free: Vec<usize> = (0..window).rev().collect();
    let mut done: Vec<Done<I::Output>> = Vec::with_capacity(window);
    let mut submitted = 0u64;
    let mut ended = false;
    loop {
        ended = ended || limits.stop.load(Ordering::Relaxed) || submitted >= limits.max_ops;
        while !ended && issuer.outstanding() < window && submitted < limits.max_ops {
            let Some(&tag) = free.last() else { break };
            let Some(next) = source.next() else {
                ended = true;
                break;
            };
            let issued = match next.arrival {
                None => Instant::now(),
                Some(at) => {
                    let now = Instant::now();
                    if at > now {
                        std::thread::sleep(at - now);
                    }
                    if limits.stop.load(Ordering::Relaxed) {
                        ended = true;
                        break;
                    }
                    if at > now {
                        Instant::now()
                    } else {
                        at
                    }
                }
            };
            free.pop();
            notes[tag] = Some((recorder.start(&next.op), issued));
            issuer.submit(tag, next.op);
            submitted += 1;
        }
        if ended && issuer.outstanding() == 0 {
            return submitted;
        }
        issuer.progress(&mut done);
        let finished = !done.is_empty();
        for d in done.drain(..) {
            let Some((note, issued)) = notes.get_mut(d.tag).and_then(Option::take) else {
                continue;
            };
            free.push(d.tag);
            recorder.finish(note, d, issued.elapsed());
        }
        if finished && !limits.think.is_zero() {
            std::thread::sleep(limits.think);
        }
    }
}

/// A blocking client of any system (any fabric): one operation at a time,
/// run to its end by [`Issuer::submit`] ([`KvClient::call`]; a scan of a
/// system without scans fails, `Error::Unsupported`).
pub struct Blocking {
    client: Box<dyn KvClient>,
    done: Option<Done<Response>>,
}

impl Blocking {
    /// Drives `client`.
    pub fn new(client: Box<dyn KvClient>) -> Blocking {
        Blocking { client, done: None }
    }
}

impl Issuer for Blocking {
    type Output = Response;

    fn window(&self) -> usize {
        1
    }

    fn outstanding(&self) -> usize {
        usize::from(self.done.is_some())
    }

    fn submit(&mut self, tag: usize, op: KvRequest<'_>) {
        let result = self.client.call(op);
        let stats = self.client.last_stats();
        self.done = Some(Done { tag, result, stats });
    }

    fn progress(&mut self, done: &mut Vec<Done<Response>>) {
        done.extend(self.done.take());
    }

    /// Renews a client without storage's lease when due (others have
    /// none); a renewal that fails leaves the next write to say so
    /// (`Error::LeaseLost`).
    fn keep_alive(&mut self) {
        let _ = self.client.renew_lease();
    }

    /// Gives a client without storage's share back; one whose release
    /// fails keeps it until the lease term passes.
    fn close(&mut self) {
        let _ = self.client.release_share();
    }
}

/// How long one [`Pipelined::progress`] may wait for a completion.
const PIPELINE_WAIT: Duration = Duration::from_millis(1);

/// Nessie with several operations in flight on one endpoint: a
/// [`Pipeline`] of `depth` protocol clients, kept 2 x depth operations
/// submitted, each operation's latency measured from its submission.
pub struct Pipelined<E: Endpoint> {
    p: Pipeline<E>,
    finished: Vec<Finished>,
}

impl<E: Endpoint> Pipelined<E> {
    /// Drives `p`.
    pub fn new(p: Pipeline<E>) -> Pipelined<E> {
        Pipelined {
            p,
            finished: Vec::new(),
        }
    }

    /// The pipeline.
    pub fn pipeline(&self) -> &Pipeline<E> {
        &self.p
    }

    /// The pipeline, to run requests outside the loop.
    pub fn pipeline_mut(&mut self) -> &mut Pipeline<E> {
        &mut self.p
    }
}

impl<E: Endpoint> Issuer for Pipelined<E> {
    type Output = Response;

    fn window(&self) -> usize {
        2 * self.p.depth()
    }

    fn outstanding(&self) -> usize {
        self.p.outstanding()
    }

    fn submit(&mut self, tag: usize, op: KvRequest<'_>) {
        self.p.submit(tag as u64, op.owned());
    }

    fn progress(&mut self, done: &mut Vec<Done<Response>>) {
        self.p.progress(&mut self.finished, PIPELINE_WAIT);
        done.extend(self.finished.drain(..).map(|f| Done {
            tag: f.tag as usize,
            result: f.result,
            stats: f.stats,
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An issuer that finishes its operations in reverse order of
    /// submission, `window` at a time, and says what it saw.
    struct Reversing {
        window: usize,
        pending: Vec<(usize, Vec<u8>)>,
        log: Vec<String>,
    }

    impl Issuer for Reversing {
        type Output = Vec<u8>;
        fn window(&self) -> usize {
            self.window
        }
        fn outstanding(&self) -> usize {
            self.pending.len()
        }
        fn submit(&mut self, tag: usize, op: KvRequest<'_>) {
            self.log.push(format!("submit {tag}"));
            self.pending.push((tag, op.key().to_vec()));
        }
        fn progress(&mut self, done: &mut Vec<Done<Vec<u8>>>) {
            while let Some((tag, key)) = self.pending.pop() {
                done.push(Done {
                    tag,
                    result: Ok(key),
                    stats: OpStats::default(),
                });
            }
        }
    }

    /// Keys 0..n as GETs.
    struct Counting {
        next: u8,
        n: u8,
        key: [u8; 1],
    }

    impl Source for Counting {
        fn next(&mut self) -> Option<Next<'_>> {
            if self.next == self.n {
                return None;
            }
            self.key = [self.next];
            self.next += 1;
            Some(Next {
                op: KvRequest::Get(&self.key),
                arrival: None,
            })
        }
    }

    #[derive(Default)]
    struct Keys(Vec<(u8, u8)>);

    impl Recorder<Vec<u8>> for Keys {
        type Note = u8;
        fn start(&mut self, op: &KvRequest<'_>) -> u8 {
            op.key()[0]
        }
        fn finish(&mut self, note: u8, done: Done<Vec<u8>>, _: Duration) {
            self.0.push((note, done.result.unwrap()[0]));
        }
    }

    #[test]
    fn every_operation_is_recorded_once_with_its_own_note_whatever_the_order() {
        let stop = AtomicBool::new(false);
        for window in [1, 3, 8] {
            let mut issuer = Reversing {
                window,
                pending: Vec::new(),
                log: Vec::new(),
            };
            let mut source = Counting {
                next: 0,
                n: 20,
                key: [0],
            };
            let mut keys = Keys::default();
            let n = client_loop(&mut issuer, &mut source, &mut keys, &Limits::until(&stop));
            assert_eq!(n, 20);
            let mut seen: Vec<u8> = keys
                .0
                .iter()
                .map(|(note, got)| {
                    assert_eq!(
                        note, got,
                        "a finished operation meets the note of its start"
                    );
                    *got
                })
                .collect();
            seen.sort_unstable();
            assert_eq!(seen, (0..20).collect::<Vec<_>>());
            // Tags are reused, never more than the window at once.
            assert!(issuer
                .log
                .iter()
                .all(|l| l["submit ".len()..].parse::<usize>().unwrap() < window));
        }
    }

    #[test]
    fn the_quota_and_the_stop_flag_end_the_loop() {
        let stop = AtomicBool::new(false);
        let mut issuer = Reversing {
            window: 4,
            pending: Vec::new(),
            log: Vec::new(),
        };
        let mut source = Counting {
            next: 0,
            n: 200,
            key: [0],
        };
        let mut keys = Keys::default();
        let limits = Limits {
            max_ops: 7,
            ..Limits::until(&stop)
        };
        assert_eq!(client_loop(&mut issuer, &mut source, &mut keys, &limits), 7);
        assert_eq!(keys.0.len(), 7, "the outstanding ones finish");
        stop.store(true, Ordering::Relaxed);
        assert_eq!(
            client_loop(&mut issuer, &mut source, &mut keys, &Limits::until(&stop)),
            0
        );
    }

    /// Open loop: arrivals in the future are waited for, and one stop raised
    /// while waiting issues nothing more.
    #[test]
    fn open_loop_arrivals_are_waited_for() {
        struct Paced {
            at: Instant,
            gap: Duration,
            left: u32,
        }
        impl Source for Paced {
            fn next(&mut self) -> Option<Next<'_>> {
                self.left = self.left.checked_sub(1)?;
                self.at += self.gap;
                Some(Next {
                    op: KvRequest::Get(b"k"),
                    arrival: Some(self.at),
                })
            }
        }
        let stop = AtomicBool::new(false);
        let t0 = Instant::now();
        let mut issuer = Reversing {
            window: 1,
            pending: Vec::new(),
            log: Vec::new(),
        };
        let mut source = Paced {
            at: t0,
            gap: Duration::from_millis(5),
            left: 4,
        };
        #[derive(Default)]
        struct Count(u32);
        impl Recorder<Vec<u8>> for Count {
            type Note = ();
            fn start(&mut self, _: &KvRequest<'_>) {}
            fn finish(&mut self, _: (), _: Done<Vec<u8>>, _: Duration) {
                self.0 += 1;
            }
        }
        let mut count = Count::default();
        client_loop(&mut issuer, &mut source, &mut count, &Limits::until(&stop));
        assert_eq!(count.0, 4);
        assert!(
            t0.elapsed() >= Duration::from_millis(20),
            "paced by the arrivals"
        );
    }
}

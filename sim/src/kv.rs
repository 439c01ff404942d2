//! The clients of the systems other than Nessie in the engine: each
//! attempt (or Cell operation) is the system's real machine
//! ([`crate::systems::KvMachine`]); its waits take virtual time. A back-off
//! wakes it after the back-off; a wait for its response slot is resolved
//! when the server's response WRITE lands there (plus
//! [`Profile::detect_ns`](crate::Profile::detect_ns), the spinning client's
//! cache miss on the control word), or at its deadline. A baseline's
//! attempt that asks to be retried is tried again after the back-off its
//! [`RetryBudget`](nessie_baselines::RetryBudget) gives, as the
//! threaded `BlockingClient` does.

use nessie_baselines::Attempt;
use nessie_protocol::{CorruptionKind, Error, OpStats, Region};

use crate::engine::{ClientMachine, Engine, Ev};
use crate::systems::{poll_kv, Actor, KvDone, Shared, Stepped, Wait};

impl Engine {
    /// Polls client `c`'s machine (its thread runs from `start`; its
    /// requests go out at `t`) until it waits or finishes.
    pub(crate) fn step_kv(&mut self, c: usize, start: u64, t: u64) {
        let cl = &mut self.clients[c];
        let clock = cl.clock(start);
        let Some(ClientMachine::Kv(m)) = cl.machine.as_mut() else {
            return;
        };
        match poll_kv(m, clock) {
            Stepped::Pending => {}
            Stepped::PostDetached(wrs) => {
                // Not awaited (no client machine detaches; a driver posts
                // them and polls on).
                for wr in wrs {
                    self.post(Actor::Client(c), wr, t);
                }
                self.step_kv(c, start, t);
            }
            Stepped::Post(wrs) => {
                let local = wrs.iter().all(|w| w.op.remote_addr().is_none());
                let (round, wake) = self.kv_round(c, wrs.len(), local, t);
                for wr in wrs {
                    self.post(Actor::Client(c), wr, t);
                }
                self.wake_kv(c, round, wake);
            }
            Stepped::PostChain(chain) => {
                // A chain goes to one remote node.
                let (round, wake) = self.kv_round(c, chain.len(), false, t);
                self.post_chain(Actor::Client(c), chain, t);
                self.wake_kv(c, round, wake);
            }
            Stepped::Wait(w) => self.kv_wait(c, w, t),
            Stepped::Done(r) => {
                let stats = m.stats();
                cl.machine = None;
                self.finish_kv(c, r, stats, t);
            }
        }
    }

    /// Client `c` posts a round of `n` requests at `t` (`local`: all to
    /// its own memory, by its CPU); returns the round's number and when to
    /// look again if its completions never come (its machine's deadline, on
    /// its clock).
    fn kv_round(&mut self, c: usize, n: usize, local: bool, t: u64) -> (u64, Option<u64>) {
        let cl = &mut self.clients[c];
        cl.round += 1;
        cl.outstanding = n;
        cl.local_round = local;
        let Some(ClientMachine::Kv(m)) = cl.machine.as_mut() else {
            return (cl.round, None);
        };
        let wake = m
            .deadline()
            .map(|d| d.0.saturating_sub(cl.clock_offset).max(t) + 1);
        (cl.round, wake)
    }

    /// Wakes client `c` at `wake` to look at round `round` again, if faults
    /// may keep its completions from coming.
    fn wake_kv(&mut self, c: usize, round: u64, wake: Option<u64>) {
        if let (Some(at), true) = (wake, self.spec.chaos.any()) {
            self.events.schedule(at, Ev::Wake(c, round));
        }
    }

    fn kv_wait(&mut self, c: usize, w: Wait, t: u64) {
        let detect = self.p.detect_ns;
        let cl = &mut self.clients[c];
        cl.round += 1;
        cl.outstanding = 0;
        cl.local_round = false;
        let round = cl.round;
        match w {
            Wait::Backoff(d) => {
                cl.due = Some(Shared::Waited);
                // A spinning thread's re-check costs at least a miss.
                let d = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX / 4);
                self.events.schedule(t + d.max(detect), Ev::KvDue(c, round));
            }
            Wait::Response {
                ctrl,
                seq,
                deadline,
            } => {
                let node = cl.state.id.node;
                let word = self.cluster.mem.word(node, Region::Data, ctrl).unwrap_or(0);
                let cl = &mut self.clients[c];
                if word as u32 == seq {
                    cl.due = Some(Shared::Landed(true));
                    self.events.schedule(t + detect, Ev::KvDue(c, round));
                } else {
                    // The response WRITE landing wakes it (Engine::landed);
                    // else its deadline (the client's clock) does.
                    cl.awaiting = Some((ctrl, seq));
                    cl.due = Some(Shared::Landed(false));
                    let at = deadline.0.saturating_sub(cl.clock_offset).max(t) + 1;
                    self.events.schedule(at, Ev::KvDue(c, round));
                }
            }
            Wait::Request(_) | Wait::Lock(_) => {
                let err = Error::corrupt(
                    CorruptionKind::Bug,
                    "a client machine waited for a server's request",
                );
                cl.machine = None;
                self.finish_kv(c, Err(err), OpStats::default(), t);
            }
        }
    }

    /// Client `c`'s wait of round `round` is over.
    pub(crate) fn on_kv_due(&mut self, c: usize, round: u64, now: u64) {
        let cl = &mut self.clients[c];
        if cl.down_since.is_some() || cl.round != round {
            return;
        }
        let (Some(due), Some(ClientMachine::Kv(m))) = (cl.due.take(), cl.machine.as_mut()) else {
            return;
        };
        cl.awaiting = None;
        m.resolve(due);
        self.step(c, now);
    }

    /// A response WRITE (or CPU write) landed in the slot whose control
    /// word is at `ctrl` of `node`, for client `c`: wakes it if it waits
    /// for that sequence number.
    pub(crate) fn response_landed(&mut self, c: usize, ctrl: u64, now: u64) {
        let cl = &self.clients[c];
        let Some((at, seq)) = cl.awaiting else {
            return;
        };
        if at != ctrl {
            return;
        }
        let node = cl.state.id.node;
        if self.cluster.mem.word(node, Region::Data, ctrl).unwrap_or(0) as u32 != seq {
            return;
        }
        let cl = &mut self.clients[c];
        cl.awaiting = None;
        cl.round += 1;
        cl.due = Some(Shared::Landed(true));
        let round = cl.round;
        self.events
            .schedule(now + self.p.detect_ns, Ev::KvDue(c, round));
    }

    /// Client `c`'s machine finished with `r` (it issued `stats`).
    fn finish_kv(&mut self, c: usize, r: Result<KvDone, Error>, stats: OpStats, now: u64) {
        let cl = &mut self.clients[c];
        let clock = cl.clock(now);
        let Some(op) = cl.op.as_mut() else {
            return;
        };
        op.stats += stats;
        match r {
            Ok(KvDone::Attempt(done)) => {
                let (core, mut budget, attempt) = *done;
                cl.kv_core = Some(core);
                match attempt {
                    Attempt::Done(res) => {
                        cl.jitter = Some(budget.into_jitter());
                        self.complete_op(c, res, now);
                    }
                    Attempt::Retry | Attempt::RetryAt(_) => {
                        match budget.next_backoff_by(clock, attempt.due()) {
                            Ok(d) => {
                                op.budget = Some(budget);
                                self.start_attempt(c);
                                let at = now + u64::try_from(d.as_nanos()).unwrap_or(u64::MAX / 4);
                                self.events.schedule(at, Ev::Poll(c));
                            }
                            Err(e) => {
                                cl.jitter = Some(budget.into_jitter());
                                self.complete_op(c, Err(e), now);
                            }
                        }
                    }
                }
            }
            Ok(KvDone::Cell(resp)) => self.complete_op(c, Ok(resp), now),
            Err(e) => self.complete_op(c, Err(e), now),
        }
    }
}

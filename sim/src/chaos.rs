//! The faults a simulated cluster can suffer, and the seeded decisions that
//! inflict them.
//!
//! [`Chaos`] is the environment's misbehaviour, as opposed to the protocol's
//! test-only [`Faults`](nessie_protocol::Faults) switches (broken variants of
//! the protocol itself). Everything here stays within the timing assumptions
//! `docs/protocol.md` states, exactly as stated, never a stricter version:
//!
//! - **A1**: each client's clock runs ahead of virtual time by a fixed offset
//!   drawn from `0..=clock_skew`, so any two clocks differ by at most
//!   `clock_skew` (and the full skew is reached).
//! - **A2**: a CAS or WRITE takes effect within `deadline_margin` of being
//!   posted, or never. Extra delays are drawn up to `max_delay_ns`, which may
//!   exceed the margin; the requester enforces A2 the way the verbs backend
//!   must: a mutation that reaches its responder later than its landing
//!   deadline (posting time + `deadline_margin`) is not executed and its
//!   completion reports an error (outcome unknown to the client).
//!   [`Chaos::late_landing`] drops A2 on purpose, as a negative control.
//! - Everything else is unbounded: reads and completions may be delayed
//!   (hence reordered) without limit, a request may execute and then report
//!   a failure, or execute and report nothing (the client's machine gives up
//!   at its deadline), report a failure first and execute later (within the
//!   landing bound), or execute and have its completion handed in only
//!   after the round waiting for it was given up; clients may pause between
//!   steps for longer than their deadlines, crash at any step and restart,
//!   nodes may become unreachable for a while (their clients crash with
//!   them), one client may lose only its own queue pair to one node, and
//!   multi-word transfers may tear (their words landing one at a time, a
//!   fault stopping one part placed).
//!
//! What becomes of one remote request is a fault of the project's one
//! vocabulary, [`TransportFault`], or none ([`Dice::fate`]); the swarm injects
//! five of the seven (not `Vanish` nor `DuplicateWrite`; docs/simulation.md
//! says why).
//!
//! A crashed client restarts no sooner than `deadline_margin` after its crash
//! (so every request its previous incarnation posted has landed or never
//! will: the restarted allocator's header sweep then sees every write) with a
//! fresh [`ClientState`](nessie_protocol::ClientState), as a restarted
//! process would. A node outage models the node's link or its client
//! processes going away while the memory its NIC serves survives (as when
//! the process holding the registered regions outlives them); a node whose
//! memory is lost loses its keys, which Nessie (no replication) does not
//! hide, so that is not a linearizability question.

use nessie_protocol::TransportFault;
use serde::{Deserialize, Serialize};

/// Rates and bounds of the injected faults (all off by default). Rates are
/// per mille: of remote requests for the request fates, of polls for pauses
/// and crashes, of simulated milliseconds for node outages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Chaos {
    /// Requests delayed on the way out or back by up to `max_delay_ns`.
    pub delay_permille: u32,
    /// The bound of one extra delay (may exceed the deadline margin: A2 is
    /// then enforced by the requester, see the module docs).
    pub max_delay_ns: u64,
    /// Requests that execute and then complete with an error.
    pub fail_after_exec_permille: u32,
    /// Requests that fail before executing (the error does not say which).
    pub fail_before_exec_permille: u32,
    /// Requests that execute and whose completion is never delivered.
    pub lose_completion_permille: u32,
    /// Mutations that complete with an error first and execute later
    /// ([`TransportFault::ErrorThenLand`]): the error reaches the requester
    /// at a time drawn up to the landing deadline (posting time plus the
    /// deadline margin), and the request reaches its responder after it,
    /// by that deadline (A2; in half the cases soon after the error, while
    /// the requester reacts to it), or at any time up to `max_delay_ns`
    /// (at least a margin) after it with [`Chaos::late_landing`]. A READ so
    /// hit fails without executing (its late execution would change
    /// nothing).
    #[serde(default)]
    pub error_then_land_permille: u32,
    /// Requests that execute and whose completion is handed in only after
    /// the round waiting for it was given up
    /// ([`TransportFault::LateCompletion`]): held until the requester posts
    /// a later round (of the same attempt or a later one), then delivered
    /// soon after it, to whatever machine runs then, through the client
    /// core's request-id routing. Only Nessie's clients run that routing;
    /// a baseline's client or server worker so hit loses the completion.
    #[serde(default)]
    pub late_completion_permille: u32,
    /// Requests that never execute and never complete
    /// ([`TransportFault::Vanish`]): the round waiting for one gives it up
    /// at its deadline, not knowing whether it executed.
    #[serde(default)]
    pub vanish_permille: u32,
    /// Remote WRITEs that execute and complete, and whose copy (a
    /// retransmission held in the fabric) executes once more later
    /// ([`TransportFault::DuplicateWrite`]): by the landing deadline (A2:
    /// posting time plus the deadline margin; a copy reaching its responder
    /// after it is refused), or at any time up to `max_delay_ns` (at least a
    /// margin) after the original with [`Chaos::late_landing`]. READs and
    /// CASes so hit execute once (RC responders answer a duplicate atomic
    /// from their replay cache, and a READ repeated changes nothing).
    #[serde(default)]
    pub duplicate_write_permille: u32,
    /// Multi-word READs and WRITEs through a NIC that move their words one
    /// at a time, in ascending address order (the protocol's contract,
    /// `docs/protocol.md` §1), each word at its own instant, so that other
    /// requests and CPU accesses land between them (a torn transfer). A
    /// torn mutation whose words would land past its landing deadline
    /// stops there (A2, enforced by the requester: the rest is flushed and
    /// the completion reports an error); one hit by a failure after
    /// executing ([`Chaos::fail_after_exec_permille`]), by a node outage or
    /// by a link failure stops after some of its words, so a fault meets a
    /// partly placed transfer.
    #[serde(default)]
    pub torn_permille: u32,
    /// Per simulated millisecond: one client's (or server worker's) queue
    /// pair to one node fails as a whole, as when the link between the two
    /// drops or the QP hits a fatal error, while every other client keeps
    /// its own: each request it has outstanding to that node completes with
    /// an error, having executed (it was on the wire already, within A2) or
    /// not (flushed), at even odds; posts to that node are refused at once
    /// until the link is re-dialled `link_down_ns` later.
    #[serde(default)]
    pub link_failure_permille: u32,
    /// How long a failed link stays down.
    #[serde(default)]
    pub link_down_ns: u64,
    /// Polls at which the client is descheduled for up to `max_pause_ns`.
    pub pause_permille: u32,
    /// The bound of one pause.
    pub max_pause_ns: u64,
    /// Polls (and completions) at which the client crashes.
    pub crash_permille: u32,
    /// How long a crashed client stays down (at least the deadline margin).
    pub restart_after_ns: u64,
    /// Per simulated millisecond: a random node becomes unreachable (its
    /// clients crash) for `outage_ns`.
    pub outage_permille: u32,
    /// How long an outage lasts (at least the deadline margin).
    pub outage_ns: u64,
    /// How long a request to an unreachable node takes to fail (the
    /// transport's retries).
    pub unreachable_after_ns: u64,
    /// Skewed clocks: each client's offset is drawn from `0..=clock_skew`.
    pub skew: bool,
    /// Half the pauses of a client in an attempt end within half a deadline
    /// margin of one of that attempt's timing boundaries (the last instant a
    /// mutation may be posted, the deadline, the instant others may reclaim
    /// its entries), instead of at a uniformly drawn time: boundary-value
    /// testing of the protocol's time checks, where a check that is off by a
    /// margin shows.
    #[serde(default)]
    pub boundary_pauses: bool,
    /// Half the delayed requests reach their responder near their landing
    /// deadline (A2: posting time plus `deadline_margin`), anywhere from a
    /// quarter margin before it to a quarter margin after (a mutation after
    /// it is refused), instead of after a uniformly drawn delay: a
    /// retransmission that lands just in time, or just too late.
    #[serde(default)]
    pub boundary_delays: bool,
    /// Stragglers: each client is, with even odds, a slow one, which takes up
    /// to this much longer (drawn per step) to get to each of its steps, as
    /// an overloaded or throttled client process would; its attempts run
    /// into their deadlines' margins while the others act at full speed.
    /// (It reads its clock when the step runs, so the protocol's time checks
    /// still use the time its requests are posted.) 0: none.
    #[serde(default)]
    pub straggler_step_ns: u64,
    /// A2 dropped (a negative control, never part of a correct run): a
    /// mutation that reaches its responder after its landing deadline still
    /// executes, as a packet held by a paused priority past the margin would
    /// on a PFC fabric. Some checker must then fail wherever
    /// `docs/protocol.md` says safety rests on A2.
    #[serde(default)]
    pub late_landing: bool,
    /// Server workers of the server-driven systems (NessieSD, NessieHY,
    /// Pilaf) crash, per mille of their crash points: taking a request from
    /// its slot, the completion of its claim CAS (which may have landed),
    /// and right after posting a response. All three lie outside the node's
    /// table lock: the baselines' tables are not crash-consistent (a worker
    /// dying inside its critical section would leave a half-done cuckoo
    /// move, which nothing in them repairs), and a worker holds nothing
    /// else. A crashed worker is replaced by a fresh one (nothing of its
    /// predecessor's memory: neither the requests it served nor the claim
    /// words it saw) after `server_restart_after_ns`.
    #[serde(default)]
    pub server_crash_permille: u32,
    /// How long a crashed server worker stays down (at least the deadline
    /// margin).
    #[serde(default)]
    pub server_restart_after_ns: u64,
    /// Cell server nodes fail for good (their memory and every thread on
    /// them lost, their region logs kept), per mille of the measured
    /// window's simulated milliseconds (at any instant); at most all
    /// servers but one. A survivor recovers their regions from the logs
    /// once the failure is detected ([`Chaos::recover_after_ns`]).
    #[serde(default)]
    pub server_failure_permille: u32,
    /// Cell server nodes fail for good at the crash points of a meganode
    /// split, per mille of each log record the splitter appends (before
    /// anything more leaves it) and a tenth of that of each step's work it
    /// posts. The splitter's own node fails, or another server.
    #[serde(default)]
    pub split_failure_permille: u32,
    /// How long a server failure goes undetected before a survivor runs
    /// recovery.
    #[serde(default)]
    pub recover_after_ns: u64,
}

impl Chaos {
    /// No faults at all.
    pub const NONE: Chaos = Chaos {
        delay_permille: 0,
        max_delay_ns: 0,
        fail_after_exec_permille: 0,
        fail_before_exec_permille: 0,
        lose_completion_permille: 0,
        error_then_land_permille: 0,
        late_completion_permille: 0,
        vanish_permille: 0,
        duplicate_write_permille: 0,
        torn_permille: 0,
        link_failure_permille: 0,
        link_down_ns: 0,
        pause_permille: 0,
        max_pause_ns: 0,
        crash_permille: 0,
        restart_after_ns: 0,
        outage_permille: 0,
        outage_ns: 0,
        unreachable_after_ns: 0,
        skew: false,
        boundary_pauses: false,
        boundary_delays: false,
        straggler_step_ns: 0,
        late_landing: false,
        server_crash_permille: 0,
        server_restart_after_ns: 0,
        server_failure_permille: 0,
        split_failure_permille: 0,
        recover_after_ns: 0,
    };

    /// Whether any fault is on (the engine then arms deadline wake-ups).
    pub fn any(&self) -> bool {
        *self != Chaos::NONE && *self != Chaos::default()
    }

    /// The fault kinds that are on, by name (for reports and shrinking).
    pub fn kinds(&self) -> Vec<&'static str> {
        let mut v = Vec::new();
        for (name, on) in [
            ("delay", self.delay_permille > 0),
            ("fail-after-exec", self.fail_after_exec_permille > 0),
            ("fail-before-exec", self.fail_before_exec_permille > 0),
            ("lose-completion", self.lose_completion_permille > 0),
            ("error-then-land", self.error_then_land_permille > 0),
            ("late-completion", self.late_completion_permille > 0),
            ("vanish", self.vanish_permille > 0),
            ("duplicate-write", self.duplicate_write_permille > 0),
            ("torn", self.torn_permille > 0),
            ("link-failure", self.link_failure_permille > 0),
            ("pause", self.pause_permille > 0),
            ("boundary-pauses", self.boundary_pauses),
            ("boundary-delays", self.boundary_delays),
            ("stragglers", self.straggler_step_ns > 0),
            ("crash", self.crash_permille > 0),
            ("outage", self.outage_permille > 0),
            ("skew", self.skew),
            ("late-landing", self.late_landing),
            ("server-crash", self.server_crash_permille > 0),
            ("server-failure", self.server_failure_permille > 0),
            ("split-failure", self.split_failure_permille > 0),
        ] {
            if on {
                v.push(name);
            }
        }
        v
    }

    /// This chaos with one fault kind (a name from [`Chaos::kinds`]) off.
    pub fn without(&self, kind: &str) -> Chaos {
        let mut c = *self;
        match kind {
            "delay" => c.delay_permille = 0,
            "fail-after-exec" => c.fail_after_exec_permille = 0,
            "fail-before-exec" => c.fail_before_exec_permille = 0,
            "lose-completion" => c.lose_completion_permille = 0,
            "error-then-land" => c.error_then_land_permille = 0,
            "late-completion" => c.late_completion_permille = 0,
            "vanish" => c.vanish_permille = 0,
            "duplicate-write" => c.duplicate_write_permille = 0,
            "torn" => c.torn_permille = 0,
            "link-failure" => c.link_failure_permille = 0,
            "pause" => c.pause_permille = 0,
            "boundary-pauses" => c.boundary_pauses = false,
            "boundary-delays" => c.boundary_delays = false,
            "stragglers" => c.straggler_step_ns = 0,
            "crash" => c.crash_permille = 0,
            "outage" => c.outage_permille = 0,
            "skew" => c.skew = false,
            "late-landing" => c.late_landing = false,
            "server-crash" => c.server_crash_permille = 0,
            "server-failure" => c.server_failure_permille = 0,
            "split-failure" => c.split_failure_permille = 0,
            _ => {}
        }
        c
    }
}

/// The seeded source of every chaos decision (xorshift64; never zero).
#[derive(Clone, Debug)]
pub struct Dice(u64);

impl Dice {
    /// Dice seeded from `seed` (any value).
    pub fn new(seed: u64) -> Dice {
        Dice((seed ^ 0x2545_f491_4f6c_dd1d).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    /// The next raw value.
    pub fn next_u64(&mut self) -> u64 {
        nessie_protocol::rng::xorshift64(&mut self.0)
    }

    /// A value in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }

    /// True with probability `permille / 1000`.
    pub fn chance(&mut self, permille: u32) -> bool {
        permille > 0 && self.below(1000) < u64::from(permille)
    }

    /// The fault that hits a remote request under `chaos`, if any (`None`:
    /// it executes and completes normally). Decided when it is posted; a
    /// rate of zero draws nothing, so cases without a fault kind keep the
    /// dice stream of every earlier version.
    pub fn fate(&mut self, chaos: &Chaos) -> Option<TransportFault> {
        if self.chance(chaos.fail_after_exec_permille) {
            Some(TransportFault::FailAfterExecuting)
        } else if self.chance(chaos.fail_before_exec_permille) {
            Some(TransportFault::FailBeforeExecuting)
        } else if self.chance(chaos.lose_completion_permille) {
            Some(TransportFault::LoseCompletion)
        } else if self.chance(chaos.error_then_land_permille) {
            Some(TransportFault::ErrorThenLand)
        } else if self.chance(chaos.late_completion_permille) {
            Some(TransportFault::LateCompletion)
        } else {
            None
        }
    }

    /// The vocabulary's last two fates, [`TransportFault::Vanish`] and
    /// [`TransportFault::DuplicateWrite`], for a request [`Dice::fate`]
    /// left alone. The engine rolls them on a dice stream of their own, so
    /// that a case that draws them runs as it did before they were drawn
    /// until the first one strikes (the pinned seeds of the other faults'
    /// catches stay where they were).
    pub fn rare_fate(&mut self, chaos: &Chaos) -> Option<TransportFault> {
        if self.chance(chaos.vanish_permille) {
            Some(TransportFault::Vanish)
        } else if self.chance(chaos.duplicate_write_permille) {
            Some(TransportFault::DuplicateWrite)
        } else {
            None
        }
    }

    /// When an error-then-land request's error completion reaches its
    /// requester and when the request reaches its responder, for a request
    /// posted at `posted` that would reach its responder at `arrives`, with
    /// landing deadline `deadline` (A2: posting time plus the margin):
    /// the error at a time drawn from just after the posting to the
    /// deadline; the request after both the error and `arrives`, drawn up
    /// to the deadline (in half the cases within `soon` of its earliest
    /// instant: while the requester is still reacting to the error), or,
    /// with `late` (A2 dropped), up to `late` past its earliest instant.
    pub fn error_then_land(
        &mut self,
        posted: u64,
        arrives: u64,
        deadline: u64,
        soon: u64,
        late: Option<u64>,
    ) -> (u64, u64) {
        let error = posted + 1 + self.below(deadline.saturating_sub(posted));
        let earliest = error.max(arrives);
        let latest = match late {
            Some(bound) => earliest.saturating_add(bound),
            None => deadline.max(earliest),
        };
        let span = latest - earliest;
        let land = if self.chance(500) {
            earliest + self.below(span.min(soon) + 1)
        } else {
            earliest + self.below(span + 1)
        };
        (error, land)
    }

    /// An extra delay under `chaos` (often zero).
    pub fn delay(&mut self, chaos: &Chaos) -> u64 {
        if self.chance(chaos.delay_permille) {
            self.below(chaos.max_delay_ns + 1)
        } else {
            0
        }
    }

    /// An extra delay on a request's way to its responder under `chaos`
    /// (often zero), for a fabric whose deadline margin is `margin` ns: with
    /// [`Chaos::boundary_delays`], half the delays bring the request to its
    /// responder within a quarter margin of its landing deadline.
    pub fn delay_out(&mut self, chaos: &Chaos, margin: u64) -> u64 {
        if !self.chance(chaos.delay_permille) {
            0
        } else if chaos.boundary_delays && self.chance(500) {
            margin - margin / 4 + self.below(margin / 2 + 1)
        } else {
            self.below(chaos.max_delay_ns + 1)
        }
    }
}

//! The failed Cell servers of a run and the recovery in progress
//! ([`Failures`]): the engine's state of [`crate::server_failure`], whose
//! event handlers draw, detect and recover them.

use crate::chaos::Dice;

/// The failed servers of a run and the recovery in progress.
pub(crate) struct Failures {
    /// Server nodes failed for good.
    pub(crate) failed: Vec<bool>,
    /// When each failed, for the report.
    pub(crate) failed_at: Vec<u64>,
    /// Failed servers the directory marks failed (their failure detected).
    pub(crate) detected: Vec<bool>,
    /// Failed servers whose regions a finished recovery took over.
    pub(crate) recovered: Vec<bool>,
    /// The node whose recovery thread runs a recovery, and the failed
    /// servers the directory marked when it started.
    pub(crate) running: Option<(usize, Vec<usize>)>,
    /// A failure was detected while a recovery ran: run another after it.
    pub(crate) again: bool,
    /// Why recoveries failed.
    pub(crate) problems: Vec<crate::checks::RecoveryFailure>,
    /// The draws of failures, a stream apart from the engine's other dice
    /// (a case with failures off draws nothing; turning them off keeps
    /// every other draw of a case).
    pub(crate) dice: Dice,
}

impl Failures {
    /// No server failed yet, on `nodes` nodes, drawing from `seed`.
    pub(crate) fn new(nodes: usize, seed: u64) -> Failures {
        Failures {
            failed: vec![false; nodes],
            failed_at: vec![0; nodes],
            detected: vec![false; nodes],
            recovered: vec![false; nodes],
            running: None,
            again: false,
            problems: Vec::new(),
            dice: Dice::new(seed ^ 0x0fa1_1ed5_e7e5),
        }
    }

    /// Whether any server failed for good.
    pub(crate) fn any(&self) -> bool {
        self.failed.contains(&true)
    }

    /// Whether a recovery runs, or is due after the one running.
    pub(crate) fn recovering(&self) -> bool {
        self.running.is_some() || self.again
    }

    /// Whether node `n` failed for good.
    pub(crate) fn is_failed(&self, n: usize) -> bool {
        self.failed.get(n).copied().unwrap_or(false)
    }
}

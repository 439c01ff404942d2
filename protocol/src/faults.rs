//! Test-only fault switches: deliberately broken protocol variants.
//!
//! Every checker must be shown to catch a broken protocol. These switches break
//! one rule each; they are off by default and exist only so tests can assert
//! that the checkers notice. Do not turn them on in a deployment.

/// Broken protocol variants (all off by default).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Faults {
    /// PUT skips its reverse pass (verification of the other candidates).
    pub skip_put_verify: bool,
    /// MIGRATE does not roll back its locked source when installing the copy
    /// at the destination fails.
    pub skip_migrate_rollback: bool,
    /// The owner flips its own entry's state with a CPU store instead of a NIC CAS.
    pub cpu_state_flip: bool,
    /// The allocator reuses unlinked entries without waiting for expiration.
    pub reuse_before_expiry: bool,
    /// GET answers not-found without its reverse pass.
    pub skip_get_reverse_pass: bool,
    /// The client ignores its own deadline (an owner that overruns).
    pub ignore_deadline: bool,
    /// Hole 1 of the protocol review, reinstated: MIGRATE posts its install
    /// CAS checking only its deadline (not the margin), and recovery restores
    /// a copy's source and destination in one round without fencing the
    /// destination (a late install then lands after the reclaim), restoring
    /// an empty previous version exactly.
    pub unfenced_migrate_install: bool,
    /// Hole 2, reinstated: a PUT/DELETE scan extends cached entries from the
    /// time its completions are processed, not the time its READs were posted.
    pub cache_time_from_completion: bool,
    /// Hole 3, reinstated: errors at or after the commit CAS are returned as
    /// they come (a fabric timeout as the retryable `Timeout`), so a committed
    /// write can be retried and applied twice.
    pub errors_after_commit_retryable: bool,
    /// Hole 4, reinstated: a MIGRATE that meets a committed copy from its
    /// destination side answers `Conflict` instead of helping, and a
    /// `Conflict` from one MIGRATE source ends the whole PUT.
    pub conflict_ends_put: bool,
    /// The pitfall "rollback target is not the read fallback": recovery
    /// restores a MIGRATE copy's destination to the copy's previous version
    /// instead of emptying it (two entries then name one entry of the key).
    pub rollback_destination_to_previous: bool,
}

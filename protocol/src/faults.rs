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
}
